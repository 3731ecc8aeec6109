"""Tensors and tensor descriptors.

A ``Tensor`` holds constant data (a Const's value, a weight). A ``TensorDesc``
describes a value without data: its shape, element type and layout. A shape's
dimensions are ints; a dimension unknown until run time is ``-1`` or a name
(``"batch"``), and named dimensions that share a name must agree at run time.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from ge.ir.dtypes import DataType, from_numpy_dtype

__all__ = ["Dim", "Shape", "Format", "Tensor", "TensorDesc", "normalize_shape", "is_static",
           "format_shape", "num_elements", "transposed_copy"]

Dim = Union[int, str]
Shape = tuple[Dim, ...]


class Format(enum.Enum):
    """Memory layout of a 4-D activation; ``ND`` means no particular layout."""

    ND = "ND"
    NCHW = "NCHW"
    NHWC = "NHWC"

    @classmethod
    def parse(cls, value: Any) -> Format:
        """Accept a ``Format`` or its name."""
        if isinstance(value, Format):
            return value
        try:
            return cls(str(value).upper())
        except ValueError:
            raise ValueError(f"unknown format {value!r}; expected one of ND, NCHW, NHWC") from None


def normalize_dim(dim: Any) -> Dim:
    """Turn one dimension into an int >= -1 or a non-empty name."""
    if isinstance(dim, str):
        if not dim:
            raise ValueError("a named dimension needs a non-empty name")
        return dim
    if dim is None:
        return -1
    if isinstance(dim, (bool, np.bool_)):
        raise ValueError(f"dimension {dim!r} is a bool, not an int")
    try:
        value = int(dim)
    except (TypeError, ValueError):
        raise ValueError(f"dimension {dim!r} is neither an int nor a name") from None
    if value != dim:
        raise ValueError(f"dimension {dim!r} is not a whole number")
    if value < -1:
        raise ValueError(f"dimension {value} is negative; use -1 for an unknown size")
    return value


def normalize_shape(shape: Iterable[Any]) -> Shape:
    """Turn a sequence of dimensions into a ``Shape`` tuple."""
    if isinstance(shape, (str, bytes)):
        raise ValueError(f"shape {shape!r} is a string, not a sequence of dimensions")
    return tuple(normalize_dim(d) for d in shape)


def is_static_dim(dim: Dim) -> bool:
    """True for a known, concrete dimension."""
    return isinstance(dim, int) and dim >= 0


def is_static(shape: Sequence[Dim]) -> bool:
    """True when every dimension is known."""
    return all(is_static_dim(d) for d in shape)


def num_elements(shape: Sequence[Dim], unknown_as: int = 1) -> int:
    """Number of elements; unknown dimensions count as ``unknown_as``."""
    total = 1
    for dim in shape:
        total *= dim if isinstance(dim, int) and dim >= 0 else unknown_as
    return total


def format_shape(shape: Sequence[Dim]) -> str:
    """``[N,3,224,224]``-style text; unknown dims print as ``?``."""
    return "[" + ",".join("?" if d == -1 else str(d) for d in shape) + "]"


@dataclass(frozen=True)
class TensorDesc:
    """Shape, element type and layout of a value."""

    shape: Shape
    dtype: DataType = DataType.DT_FLOAT
    format: Format = Format.ND

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", normalize_shape(self.shape))
        object.__setattr__(self, "dtype", DataType.parse(self.dtype))
        object.__setattr__(self, "format", Format.parse(self.format))

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is known."""
        return is_static(self.shape)

    def __str__(self) -> str:
        text = f"{self.dtype.short_name}{format_shape(self.shape)}"
        return text if self.format is Format.ND else f"{text}@{self.format.value}"


class Tensor:
    """Constant tensor data, as the seed writes it: ``ge.Tensor(ndarray)``.

    The data is copied into a C-contiguous, read-only array, so that a graph
    holding the tensor cannot be changed by the caller's later writes and can be
    shared safely between clones and sessions.

    A tensor made by :meth:`scaled` or :meth:`transposed` is a recipe until its data is
    first read: its shape and dtype are known at once, and a transposition of a scaled
    tensor is computed in one pass over memory instead of two. The optimizer folds a
    batch norm into a filter (a scaling) that the layout pass then transposes; on
    ResNet-50 that is 94 MB written once rather than twice.
    """

    __slots__ = ("_array", "_recipe")

    def __init__(self, data: Any, dtype: Any = None) -> None:
        if isinstance(data, Tensor):
            data = data.numpy()
        array = np.asarray(data, dtype=None if dtype is None else _np_dtype(dtype))
        if array.dtype == np.dtype(object):
            raise TypeError("ge.Tensor needs numeric data, not Python objects")
        array = aligned_copy(array)
        from_numpy_dtype(array.dtype)  # refuses dtypes GE has no name for
        array.setflags(write=False)
        self._array: np.ndarray | None = array
        self._recipe: _Recipe | None = None

    @classmethod
    def wrap(cls, array: np.ndarray) -> Tensor:
        """A tensor over ``array`` without copying when it is already read-only C data
        (a view into a model file's bytes, say; ``compact`` later gives the ones a
        compiled graph keeps their own aligned bytes)."""
        if array.flags.c_contiguous and not array.flags.writeable:
            tensor = cls.__new__(cls)
            tensor._array = array
            tensor._recipe = None
            return tensor
        return cls(array)

    @classmethod
    def scaled(cls, base: np.ndarray, factor: np.ndarray, axis: int) -> Tensor:
        """``base`` times the vector ``factor`` along ``axis``, in ``base``'s dtype.

        The products are taken in float32 at least (float16 data is scaled in float32 and
        rounded back once), and computed when the data is first read.
        """
        if base.ndim == 0 or factor.shape != (base.shape[axis],):
            raise ValueError(f"a factor of shape {factor.shape} cannot scale axis {axis} "
                             f"of an array of shape {base.shape}")
        compute = np.result_type(base.dtype, np.float32)
        recipe = _Recipe(base, tuple(range(base.ndim)), factor.astype(compute), axis % base.ndim)
        return cls._pending(recipe)

    def transposed(self, perm: Sequence[int]) -> Tensor:
        """The data with its axes permuted by ``perm``, as a new tensor.

        Composes with a pending scaling, so that both are done in one pass.
        """
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(self.shape))):
            raise ValueError(f"{list(perm)} is not a permutation of {len(self.shape)} axes")
        recipe = self._recipe
        if recipe is not None and self._array is None:
            return self._pending(_Recipe(recipe.base, tuple(recipe.perm[p] for p in perm),
                                         recipe.factor, recipe.axis))
        return self._pending(_Recipe(self.numpy(), perm, None, 0))

    @classmethod
    def _pending(cls, recipe: _Recipe) -> Tensor:
        tensor = cls.__new__(cls)
        tensor._array = None
        tensor._recipe = recipe
        return tensor

    @property
    def is_pending(self) -> bool:
        """True while the data is a recipe not yet computed."""
        return self._array is None

    def numpy(self) -> np.ndarray:
        """The data as a read-only NumPy array."""
        array = self._array
        if array is None:
            recipe = self._recipe
            if recipe is None:  # another thread has just computed it
                array = self._array
                assert array is not None
                return array
            array = recipe.compute()
            array.setflags(write=False)
            # Two threads racing here compute equal arrays; either one may be kept.
            self._array = array
            self._recipe = None
        return array

    @property
    def data(self) -> np.ndarray:
        """The data as a read-only NumPy array."""
        return self.numpy()

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the data."""
        array, recipe = self._array, self._recipe
        if array is None and recipe is not None:
            return recipe.shape
        return tuple(self.numpy().shape)

    @property
    def dtype(self) -> DataType:
        """The element type of the data."""
        array, recipe = self._array, self._recipe
        if array is None and recipe is not None:
            return from_numpy_dtype(recipe.base.dtype)
        return from_numpy_dtype(self.numpy().dtype)

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.np_dtype.itemsize

    @property
    def desc(self) -> TensorDesc:
        """The descriptor of the data."""
        return TensorDesc(self.shape, self.dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        mine, theirs = self.numpy(), other.numpy()
        return (mine.dtype == theirs.dtype and mine.shape == theirs.shape
                and bool(np.array_equal(mine, theirs, equal_nan=_is_float(mine))))

    def __hash__(self) -> int:
        array = self.numpy()
        return hash((array.dtype.str, array.shape, array.tobytes()[:64]))

    def __repr__(self) -> str:
        if self._array is not None and self._array.size <= 8:
            return f"Tensor({self._array.tolist()!r}, {self.dtype.short_name})"
        return f"Tensor({self.desc})"


def compute_pending(tensors: Iterable[Tensor], threads: int | None = None) -> int:
    """Compute the data of every pending tensor among ``tensors``; return how many.

    Large batches are spread over up to ``threads`` worker threads (default: the CPU
    count, at most 4), largest first: the strided reads of a transposition are bound by
    memory latency, not bandwidth, and NumPy releases the GIL while it copies.
    """
    pending = sorted({id(t): t for t in tensors if t.is_pending}.values(),
                     key=lambda t: -t.nbytes)
    workers = min(threads or min(os.cpu_count() or 1, 4), len(pending))
    if workers <= 1 or sum(t.nbytes for t in pending) < _PARALLEL_BYTES:
        for tensor in pending:
            tensor.numpy()
        return len(pending)
    with ThreadPoolExecutor(workers, thread_name_prefix="ge-constants") as pool:
        list(pool.map(Tensor.numpy, pending))
    return len(pending)


_PARALLEL_BYTES = 4 << 20


#: the byte boundary constant data starts on: a cache line, and the widest vector load
ALIGNMENT = 64


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-ordered copy of ``array`` whose data starts on an ``ALIGNMENT``-byte boundary
    (NumPy's own allocations are only 16-byte aligned)."""
    source = np.asarray(array)
    nbytes = source.nbytes
    buffer = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = (-buffer.ctypes.data) % ALIGNMENT
    copy = buffer[start:start + nbytes].view(source.dtype).reshape(source.shape)
    np.copyto(copy, source, casting="no")
    return copy


def _root(array: np.ndarray) -> Any:
    """The object that owns ``array``'s memory (a bytes buffer for parsed weights)."""
    owner: Any = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    return owner


def _owner_size(owner: Any) -> int:
    if isinstance(owner, np.ndarray):
        return int(owner.nbytes)
    try:
        return len(memoryview(owner).cast("B"))
    except TypeError:
        return 0


def compact(tensors: Iterable[Tensor], keep_share: float = 0.5) -> int:
    """Give tensors their own copy of data they view in a larger buffer when, together,
    they use less than ``keep_share`` of it, or when it does not start on an
    ``ALIGNMENT``-byte boundary; return the bytes copied.

    A parsed model's weights are views of the file's bytes. Once the optimizer has
    replaced most of them (folded, transposed), the few left would keep the whole file
    in memory; copying them lets it go. A view that starts off a cache line (most of
    an ONNX file's weights do, many not even on a multiple of their item size) makes
    every kernel that reads it each run slower (BERT's products on the NumPy engine by
    about 10 %): the compiled graph's weights get aligned bytes of their own. Pending
    tensors are not counted: computing them drops their reference to the buffer.
    """
    by_owner: dict[int, tuple[Any, list[Tensor]]] = {}
    misaligned: dict[int, Tensor] = {}
    for tensor in tensors:
        array = tensor._array
        if array is None or array.base is None:
            continue
        if array.ctypes.data % ALIGNMENT:
            misaligned[id(tensor)] = tensor
            continue
        owner = _root(array)
        by_owner.setdefault(id(owner), (owner, []))[1].append(tensor)
    to_copy = list(misaligned.values())
    for owner, listed in by_owner.values():
        users = list({id(t): t for t in listed}.values())
        if sum(t.nbytes for t in users) < keep_share * _owner_size(owner):
            to_copy.extend(users)
    copied = 0
    for tensor in to_copy:
        array = tensor._array
        assert array is not None
        own = aligned_copy(array)
        own.setflags(write=False)
        tensor._array = own  # equal values: invisible to every holder of the tensor
        copied += own.nbytes
    return copied


class _Recipe:
    """``base.transpose(perm)``, times ``factor`` along ``base``'s ``axis`` when given."""

    __slots__ = ("base", "perm", "factor", "axis")

    def __init__(self, base: np.ndarray, perm: tuple[int, ...], factor: np.ndarray | None,
                 axis: int) -> None:
        self.base, self.perm, self.factor, self.axis = base, perm, factor, axis

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(self.base.shape[p]) for p in self.perm)

    def compute(self) -> np.ndarray:
        if self.factor is None:
            return transposed_copy(self.base, self.perm)
        source = self.base.transpose(self.perm)
        shape = [1] * source.ndim
        shape[self.perm.index(self.axis)] = -1
        factor = self.factor.reshape(shape)
        inner_scaled = self.perm[-1] == self.axis
        out = np.empty(source.shape, dtype=self.base.dtype)
        # Blocks along the output's innermost axis keep each block's strided reads in
        # cache, as in transposed_copy; the product is rounded to the output dtype once.
        step = _BLOCK if source.ndim > 1 and source.size >= (1 << 16) else max(source.shape[-1], 1)
        for start in range(0, max(source.shape[-1], 1), step):
            block = (Ellipsis, slice(start, start + step))
            np.multiply(source[block], factor[block] if inner_scaled else factor,
                        out=out[block], dtype=self.factor.dtype, casting="unsafe")
        return out


def transposed_copy(array: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """``array.transpose(perm)`` as a new C-contiguous array, copied in blocks.

    The axis that becomes the innermost is copied 64 entries at a time, so that each
    block's reads stay in cache; NumPy's one-shot strided copy of a large filter
    (OIHW -> HWIO) is two to three times slower.
    """
    perm = [int(p) for p in perm]
    inner = perm[-1]
    if array.ndim < 2 or array.shape[inner] <= _BLOCK or array.size < (1 << 16):
        return np.ascontiguousarray(array.transpose(perm))
    out = np.empty([array.shape[p] for p in perm], dtype=array.dtype)
    for start in range(0, array.shape[inner], _BLOCK):
        taken = [slice(None)] * array.ndim
        taken[inner] = slice(start, start + _BLOCK)
        placed = [slice(None)] * array.ndim
        placed[-1] = slice(start, start + _BLOCK)
        out[tuple(placed)] = array[tuple(taken)].transpose(perm)
    return out


_BLOCK = 64


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f"


def _np_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, DataType):
        return dtype.np_dtype
    return np.dtype(dtype)
