"""Tensors and tensor descriptors.

A ``Tensor`` holds constant data (a Const's value, a weight). A ``TensorDesc``
describes a value without data: its shape, element type and layout. A shape's
dimensions are ints; a dimension unknown until run time is ``-1`` or a name
(``"batch"``), and named dimensions that share a name must agree at run time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
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
    """

    __slots__ = ("_array",)

    def __init__(self, data: Any, dtype: Any = None) -> None:
        if isinstance(data, Tensor):
            data = data.numpy()
        array = np.array(data, dtype=None if dtype is None else _np_dtype(dtype), order="C",
                         copy=True)
        if array.dtype == np.dtype(object):
            raise TypeError("ge.Tensor needs numeric data, not Python objects")
        from_numpy_dtype(array.dtype)  # refuses dtypes GE has no name for
        array.setflags(write=False)
        self._array = array

    @classmethod
    def wrap(cls, array: np.ndarray) -> Tensor:
        """A tensor over ``array`` without copying when it is already read-only C data."""
        if array.flags.c_contiguous and not array.flags.writeable:
            tensor = cls.__new__(cls)
            tensor._array = array
            return tensor
        return cls(array)

    def numpy(self) -> np.ndarray:
        """The data as a read-only NumPy array."""
        return self._array

    @property
    def data(self) -> np.ndarray:
        """The data as a read-only NumPy array."""
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the data."""
        return tuple(self._array.shape)

    @property
    def dtype(self) -> DataType:
        """The element type of the data."""
        return from_numpy_dtype(self._array.dtype)

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes."""
        return int(self._array.nbytes)

    @property
    def desc(self) -> TensorDesc:
        """The descriptor of the data."""
        return TensorDesc(self.shape, self.dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return (self._array.dtype == other._array.dtype
                and self._array.shape == other._array.shape
                and bool(np.array_equal(self._array, other._array,
                                        equal_nan=_is_float(self._array))))

    def __hash__(self) -> int:
        return hash((self._array.dtype.str, self._array.shape, self._array.tobytes()[:64]))

    def __repr__(self) -> str:
        if self._array.size <= 8:
            return f"Tensor({self._array.tolist()!r}, {self.dtype.short_name})"
        return f"Tensor({self.desc})"


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
