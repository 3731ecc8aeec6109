"""TopK as a compiled loop: one pass over each row with a heap of the k best so far.

torch's selection and sort cost 40-90 us even on small rows (k=5 of 1,000 logits: 0.04
ms, onnxruntime 0.007; k=100 of 8,400 detector scores: 0.09 ms, onnxruntime 0.02). A
heap keeps the k best seen with the worst of them at its root: each value is compared
with the root, and only a better one enters (log k steps). On unordered data few do;
on data sorted the wrong way every one does, and the pass is still n log k. At the
end the heap is emptied worst first into the output from its far end, so the output
is in order.

The order is the reference's (a stable sort): larger values first (smaller, with
``largest=0``), NaN beyond every number as NumPy sorts it (first when the largest are
asked for, last otherwise), and equal values by position, the lower first. That order
is total (no two positions tie), so the loop's result is the reference's exactly,
whichever values are equal.

The data is viewed as [rows, length], the axis last (moved there, copied, when it is
not). The loops are compiled (and cached on disk) like the engine's other loops
(``kernels``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from typing import Callable, Optional

import numpy as np

from ge.engines.fused import kernels
from ge.ir import DataType, Node
from ge.ops.registry import const_value
from ge.ops.shape_utils import normalize_axis

__all__ = ["OP_TYPES", "MAX_K", "MAX_LENGTH", "refusal", "bind"]

OP_TYPES = frozenset({"TopK"})
#: the element types the loop is compiled for
_TYPES = {DataType.DT_FLOAT: "float32", DataType.DT_INT64: "int64"}
#: the largest k the loop takes (a constant k)
MAX_K = 256
#: the longest axis the loop takes: a pass costs about 0.8 ns a value (a comparison
#: with the root that cannot be vectorized), where torch's selection, after its fixed
#: 40 us, costs less (k=50 of 16 x 30,000 logits: 0.7 ms, torch's 0.6)
MAX_LENGTH = 1 << 14


def worse(a: float, ia: int, b: float, ib: int, largest: bool) -> bool:  # pragma: no cover
    """True when the value ``a`` at position ``ia`` comes after ``b`` at ``ib`` in the
    output's order."""
    if a == b:
        return ia > ib
    if a < b:
        return largest
    if a > b:
        return not largest
    # a NaN: beyond every number, and equal NaNs by position
    a_nan, b_nan = a != a, b != b
    if a_nan and b_nan:
        return ia > ib
    return b_nan if largest else a_nan


def sift_down(heap_values: np.ndarray, heap_indices: np.ndarray, size: int, value: float,
              index: int, largest: bool) -> None:  # pragma: no cover
    """Put ``value`` at the root of the heap of ``size`` and move it down to its place
    (each parent comes after its children in the output's order: the worst on top)."""
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        other = child + 1
        if other < size and worse(heap_values[other], heap_indices[other],
                                  heap_values[child], heap_indices[child], largest):
            child = other
        if not worse(heap_values[child], heap_indices[child], value, index, largest):
            break
        heap_values[position] = heap_values[child]
        heap_indices[position] = heap_indices[child]
        position = child
    heap_values[position] = value
    heap_indices[position] = index


def offer(heap_values: np.ndarray, heap_indices: np.ndarray, size: int, value: float,
          index: int, largest: bool) -> int:  # pragma: no cover
    """Offer the value at ``index`` to the heap holding ``size`` values; the new size."""
    if size == len(heap_values):
        # a value enters only when it beats the root, the worst one kept
        if worse(heap_values[0], heap_indices[0], value, index, largest):
            sift_down(heap_values, heap_indices, size, value, index, largest)
        return size
    position = size  # sift up: a parent that comes before the value moves down
    while position > 0:
        parent = (position - 1) // 2
        if not worse(value, index, heap_values[parent], heap_indices[parent], largest):
            break
        heap_values[position] = heap_values[parent]
        heap_indices[position] = heap_indices[parent]
        position = parent
    heap_values[position] = value
    heap_indices[position] = index
    return size + 1


def top_k_loop(x: np.ndarray, k: int, largest: bool, values: np.ndarray,
               indices: np.ndarray) -> None:  # pragma: no cover
    """``values``, ``indices`` [rows, k] = the k best of each row of ``x`` [rows, n],
    best first."""
    rows, length = x.shape
    heap_values = np.empty(k, x.dtype)
    heap_indices = np.empty(k, np.int64)
    for r in range(rows):
        row = x[r]
        for i in range(k):
            offer(heap_values, heap_indices, i, row[i], i, largest)
        # the heap is full: a number not beyond the root's number (the worst kept)
        # cannot enter, the usual case; the two loops keep that test to one comparison
        root = heap_values[0]
        if largest:
            for i in range(k, length):
                value = row[i]
                if not value <= root:
                    offer(heap_values, heap_indices, k, value, i, largest)
                    root = heap_values[0]
        else:
            for i in range(k, length):
                value = row[i]
                if not value >= root:
                    offer(heap_values, heap_indices, k, value, i, largest)
                    root = heap_values[0]
        # empty the heap worst first into the output's far end
        for place in range(k - 1, -1, -1):
            values[r, place] = heap_values[0]
            indices[r, place] = heap_indices[0]
            sift_down(heap_values, heap_indices, place, heap_values[place],
                      heap_indices[place], largest)


_COMPILED: dict[str, Callable[..., None]] = {}
_LOCK = threading.Lock()


def _source(numpy_type: str) -> str:
    helpers = [inspect.getsource(f).rstrip() for f in (worse, sift_down, offer)]
    signature = (f"void({numpy_type}[:, ::1], int64, boolean, {numpy_type}[:, ::1], "
                 f"int64[:, ::1])")
    lines = ["import numba", "import numpy as np", ""]
    for helper in helpers:
        lines += ["", "@numba.njit(inline='always')", helper, ""]
    lines += ["", inspect.getsource(top_k_loop).rstrip(), "", "",
              "serial_loop = top_k_loop", f"SIGNATURE = {signature!r}", ""]
    return "\n".join(lines)


def compiled_loop(numpy_type: str) -> Callable[..., None]:
    """The loop for one element type (once per process; from the kernel cache when
    compiled before)."""
    with _LOCK:
        if numpy_type not in _COMPILED:
            _COMPILED[numpy_type] = kernels.compile_loop(_source(numpy_type),
                                                         parallel=False).function
        return _COMPILED[numpy_type]


def refusal(node: Node) -> Optional[str]:
    """Why the loop does not take ``node`` (None: it does)."""
    x = node.inputs[0]
    if x is None or x.dtype not in _TYPES or len(x.shape) < 1:
        return "TopK runs compiled for float32 and int64 data only"
    k_value = node.inputs[1] if len(node.inputs) > 1 else None
    given = None if k_value is None else const_value(k_value)
    if given is None or given.size != 1:
        return "k is not one constant"
    if not 0 < int(given.reshape(-1)[0]) <= MAX_K:
        return f"k is 0 or over {MAX_K}"
    length = x.shape[normalize_axis(int(node.attrs["axis"]), len(x.shape))]
    if not isinstance(length, int) or not 0 <= length <= MAX_LENGTH:
        return f"the axis is not known to be at most {MAX_LENGTH} long"
    return None


Kernel = Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]
Writer = Callable[[Sequence[Optional[np.ndarray]], Sequence[np.ndarray]], None]


def bind(node: Node) -> tuple[Kernel, Writer]:
    """TopK's kernel and writer (values and int64 positions along the axis)."""
    x_value = node.inputs[0]
    assert x_value is not None and node.inputs[1] is not None
    loop = compiled_loop(_TYPES[x_value.dtype])
    given = const_value(node.inputs[1])
    assert given is not None
    k = int(given.reshape(-1)[0])
    rank = len(x_value.shape)
    axis = normalize_axis(int(node.attrs["axis"]), rank)
    largest = bool(node.attrs["largest"])

    def write(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        assert x is not None
        length = x.shape[axis]
        if k > length:
            raise ValueError(f"k={k} is out of range for axis {axis} of size {length}")
        rows = x.size // length if length else 0
        if rows == 0:
            return
        values, indices = outs
        if axis == rank - 1:
            source = np.ascontiguousarray(x).reshape(rows, length)
            if values.flags.c_contiguous and indices.flags.c_contiguous:
                loop(source, k, largest, values.reshape(rows, k), indices.reshape(rows, k))
                return
        else:
            source = np.ascontiguousarray(np.moveaxis(x, axis, -1)).reshape(rows, length)
        found_values = np.empty((rows, k), x.dtype)
        found_indices = np.empty((rows, k), np.int64)
        loop(source, k, largest, found_values, found_indices)
        moved = (*np.moveaxis(x, axis, -1).shape[:-1], k)
        np.copyto(values, np.moveaxis(found_values.reshape(moved), -1, axis))
        np.copyto(indices, np.moveaxis(found_indices.reshape(moved), -1, axis))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        shape = list(x.shape)
        shape[axis] = k
        outs = [np.empty(shape, x.dtype), np.empty(shape, np.int64)]
        write(inputs, outs)
        return outs

    return kernel, write
