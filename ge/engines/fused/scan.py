"""CumSum, ArgMax and ArgMin as compiled loops: one pass along the axis, rows of the
inner axes at a time, for any axis but the last.

ArgMax and ArgMin: NumPy's search along an axis with others inside it is slow (1.5 ms
for 21 classes over 160 x 160 pixels, a segmentation head; onnxruntime 0.25); the loop
keeps a running best per inner position, with NumPy's rules (the first of equal values,
or the last with ``select_last_index``; NaN wins, its first occurrence, or its last).

CumSum: along an axis with others inside it, torch's cumulative sum runs at about 3 ns
an element here (0.09 ms for 128 x 256 along the first; onnxruntime 0.01), and NumPy's
is no faster; along the last axis each row is a sequential chain, which torch's kernel
runs well, and that one is declined. The loop adds each step's row of ``inner``
contiguous values to the running row, in the axis's order or reversed, writing the sum
before (exclusive) or after (inclusive) each step. The order of the additions is the
reference's (``np.cumsum``: one running sum per position), so float32 results are the
same to the bit.

The data is viewed as [outer, length, inner], the axis in the middle. The loops are
compiled (and cached on disk) like the engine's other loops (``kernels``).
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Sequence
from typing import Callable, Optional

import numpy as np

from ge.engines.fused import kernels
from ge.ir import DataType, Node
from ge.ops.registry import const_value
from ge.ops.shape_utils import normalize_axis

__all__ = ["OP_TYPES", "refusal", "bind", "bind_cumsum", "bind_arg"]

OP_TYPES = frozenset({"CumSum", "ArgMax", "ArgMin"})
#: the element types the loop is compiled for
_TYPES = {DataType.DT_FLOAT: "float32", DataType.DT_INT64: "int64"}


def cumsum_loop(x: np.ndarray, out: np.ndarray, exclusive: bool,
                reverse: bool) -> None:  # pragma: no cover - runs compiled
    """``out`` = the running sums of ``x`` ([outer, length, inner]) along axis 1."""
    outer, length, inner = x.shape
    running = np.zeros(inner, x.dtype)
    for o in range(outer):
        for i in range(inner):
            running[i] = 0
        for step in range(length):
            t = length - 1 - step if reverse else step
            if exclusive:
                for i in range(inner):
                    out[o, t, i] = running[i]
                    running[i] += x[o, t, i]
            else:
                for i in range(inner):
                    running[i] += x[o, t, i]
                    out[o, t, i] = running[i]


def arg_loop(x: np.ndarray, out: np.ndarray, smallest: bool,
             last: bool) -> None:  # pragma: no cover - runs compiled
    """``out`` [outer, inner] = the position along axis 1 of ``x``'s largest (or smallest)
    value, the first of equal ones (or the last); NaN counts as beyond every number, the
    first NaN (or the last) wins, as NumPy's argmax and argmin have it.

    A first pass ignores NaN: its comparisons become selects, and the loop over the
    inner positions vectorizes (about 6x faster than the exact pass). It also notes
    whether it met a NaN; only then does the exact pass run, over its result."""
    outer, length, inner = x.shape
    best = np.empty(inner, x.dtype)
    met_nan = False
    for o in range(outer):
        for i in range(inner):
            best[i] = x[o, 0, i]
            out[o, i] = 0
            met_nan |= best[i] != best[i]
        for t in range(1, length):
            # four loops, so that each inner one is a plain compare-and-select
            if smallest and last:
                for i in range(inner):
                    value = x[o, t, i]
                    take = value <= best[i]
                    best[i] = value if take else best[i]
                    out[o, i] = t if take else out[o, i]
                    met_nan |= value != value
            elif smallest:
                for i in range(inner):
                    value = x[o, t, i]
                    take = value < best[i]
                    best[i] = value if take else best[i]
                    out[o, i] = t if take else out[o, i]
                    met_nan |= value != value
            elif last:
                for i in range(inner):
                    value = x[o, t, i]
                    take = value >= best[i]
                    best[i] = value if take else best[i]
                    out[o, i] = t if take else out[o, i]
                    met_nan |= value != value
            else:
                for i in range(inner):
                    value = x[o, t, i]
                    take = value > best[i]
                    best[i] = value if take else best[i]
                    out[o, i] = t if take else out[o, i]
                    met_nan |= value != value
    if not met_nan:
        return
    found_nan = np.zeros(inner, np.bool_)
    for o in range(outer):
        for i in range(inner):
            best[i] = x[o, 0, i]
            out[o, i] = 0
            found_nan[i] = np.isnan(best[i])
        for t in range(1, length):
            for i in range(inner):
                value = x[o, t, i]
                if np.isnan(value):
                    if not found_nan[i] or last:
                        found_nan[i] = True
                        out[o, i] = t
                elif not found_nan[i]:
                    better = value < best[i] if smallest else value > best[i]
                    if better or (last and value == best[i]):
                        best[i] = value
                        out[o, i] = t


_COMPILED: dict[str, Callable[..., None]] = {}
_LOCK = threading.Lock()


def _source(loop: Callable[..., None], signature: str) -> str:
    return "\n".join(["import numpy as np", "", "", inspect.getsource(loop).rstrip(),
                      "", "", f"serial_loop = {loop.__name__}", f"SIGNATURE = {signature!r}",
                      ""])


def compiled_loop(op_type: str, numpy_type: str) -> Callable[..., None]:
    """``op_type``'s loop for one element type (once per process; from the kernel cache
    when compiled before)."""
    loop: Callable[..., None] = cumsum_loop if op_type == "CumSum" else arg_loop
    out = f"{numpy_type}[:, :, ::1]" if op_type == "CumSum" else "int64[:, ::1]"
    signature = f"void({numpy_type}[:, :, ::1], {out}, boolean, boolean)"
    with _LOCK:
        key = f"{loop.__name__}:{numpy_type}"
        if key not in _COMPILED:
            _COMPILED[key] = kernels.compile_loop(_source(loop, signature),
                                                  parallel=False).function
        return _COMPILED[key]


def refusal(node: Node) -> Optional[str]:
    """Why the loop does not take ``node`` (None: it does)."""
    if node.op_type != "CumSum":
        return _arg_refusal(node)
    x = node.inputs[0]
    if x is None or x.dtype not in _TYPES:
        return "CumSum runs compiled for float32 and int64 data only"
    axis = node.inputs[1] if len(node.inputs) > 1 else None
    given = None if axis is None else const_value(axis)
    if given is None or given.size != 1:
        return "the axis is not one constant"
    rank = len(x.shape)
    if rank < 1:
        return "a scalar has no axis to sum along"
    if normalize_axis(int(given.reshape(-1)[0]), rank) == rank - 1:
        # along the last axis each row is one sequential chain: torch's kernel, which
        # vectorizes across rows, or NumPy's are as fast or faster
        return "the sum runs along the last axis"
    return None


def _arg_refusal(node: Node) -> Optional[str]:
    x = node.inputs[0]
    if x is None or x.dtype is not DataType.DT_FLOAT:
        return f"{node.op_type} runs compiled for float32 data only"
    rank = len(x.shape)
    if rank < 2 or normalize_axis(int(node.attrs["axis"]), rank) == rank - 1:
        # along the last axis NumPy's own loop is fast
        return "the search runs along the last axis"
    return None


Kernel = Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]
Writer = Callable[[Sequence[Optional[np.ndarray]], Sequence[np.ndarray]], None]


def bind(node: Node) -> tuple[Kernel, Writer]:
    """The node's kernel and its writer."""
    return bind_cumsum(node) if node.op_type == "CumSum" else bind_arg(node)


def bind_arg(node: Node) -> tuple[Kernel, Writer]:
    """ArgMax's or ArgMin's kernel and writer (int64 positions, keepdims as asked)."""
    x_value = node.inputs[0]
    assert x_value is not None
    loop = compiled_loop(node.op_type, "float32")
    rank = len(x_value.shape)
    axis = normalize_axis(int(node.attrs["axis"]), rank)
    keepdims = bool(node.attrs["keepdims"])
    smallest, last = node.op_type == "ArgMin", bool(node.attrs["select_last_index"])

    def shape_of(x: np.ndarray) -> tuple[int, ...]:
        kept = list(x.shape)
        if keepdims:
            kept[axis] = 1
        else:
            del kept[axis]
        return tuple(kept)

    def write(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        assert x is not None
        if x.shape[axis] == 0:
            raise ValueError(f"{node.op_type} of an empty axis {axis} has no position")
        outer = math.prod(x.shape[:axis])
        inner = math.prod(x.shape[axis + 1:])
        source = np.ascontiguousarray(x).reshape(outer, x.shape[axis], inner)
        out = outs[0]
        if out.flags.c_contiguous:
            loop(source, out.reshape(outer, inner), smallest, last)
        else:
            found = np.empty((outer, inner), np.int64)
            loop(source, found, smallest, last)
            np.copyto(out, found.reshape(out.shape))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        out = np.empty(shape_of(x), np.int64)
        write(inputs, [out])
        return [out]

    return kernel, write


def bind_cumsum(node: Node) -> tuple[Kernel, Writer]:
    """CumSum's kernel and writer."""
    x_value = node.inputs[0]
    assert x_value is not None and node.inputs[1] is not None
    loop = compiled_loop("CumSum", _TYPES[x_value.dtype])
    axis_value = const_value(node.inputs[1])
    assert axis_value is not None
    axis = normalize_axis(int(axis_value.reshape(-1)[0]), len(x_value.shape))
    exclusive, reverse = bool(node.attrs["exclusive"]), bool(node.attrs["reverse"])

    def as_three(array: np.ndarray) -> np.ndarray:
        shape = array.shape
        outer = math.prod(shape[:axis])
        inner = math.prod(shape[axis + 1:])
        return array.reshape(outer, shape[axis], inner)

    def write(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        assert x is not None
        out = outs[0]
        if out.size == 0:
            return
        source = as_three(np.ascontiguousarray(x))
        if out.flags.c_contiguous:
            loop(source, as_three(out), exclusive, reverse)
        else:
            target = np.empty_like(source)
            loop(source, target, exclusive, reverse)
            np.copyto(out, target.reshape(out.shape))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        out = np.empty(x.shape, x.dtype)
        write(inputs, [out])
        return [out]

    return kernel, write
