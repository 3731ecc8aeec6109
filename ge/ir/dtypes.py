"""Element types: the seed's ``DataType`` names mapped to NumPy dtypes."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

__all__ = ["DataType", "to_numpy_dtype", "from_numpy_dtype"]


class DataType(enum.Enum):
    """Element type of a tensor, with the seed's names (``DataType.DT_FLOAT``)."""

    DT_FLOAT = "float32"
    DT_FLOAT16 = "float16"
    DT_BF16 = "bfloat16"
    DT_DOUBLE = "float64"
    DT_INT8 = "int8"
    DT_INT16 = "int16"
    DT_INT32 = "int32"
    DT_INT64 = "int64"
    DT_UINT8 = "uint8"
    DT_UINT16 = "uint16"
    DT_UINT32 = "uint32"
    DT_UINT64 = "uint64"
    DT_BOOL = "bool"
    # narrow types, through ml_dtypes (storage: one byte per element)
    DT_FLOAT8_E4M3FN = "float8_e4m3fn"
    DT_FLOAT8_E4M3FNUZ = "float8_e4m3fnuz"
    DT_FLOAT8_E5M2 = "float8_e5m2"
    DT_FLOAT8_E5M2FNUZ = "float8_e5m2fnuz"
    DT_FLOAT8_E8M0 = "float8_e8m0fnu"
    DT_FLOAT4_E2M1 = "float4_e2m1fn"
    DT_INT4 = "int4"
    DT_UINT4 = "uint4"
    DT_INT2 = "int2"
    DT_UINT2 = "uint2"

    @property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype of this element type (bfloat16 through ``ml_dtypes``)."""
        return to_numpy_dtype(self)

    @property
    def itemsize(self) -> int:
        """Bytes per element (as stored in memory)."""
        return int(to_numpy_dtype(self).itemsize)

    @property
    def is_float(self) -> bool:
        """True for floating-point types."""
        return self in _FLOATS

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integer types (not bool)."""
        return self in _INTEGERS

    @property
    def short_name(self) -> str:
        """The short name used in printed graphs: ``float32``, ``int64``, ..."""
        return self.value

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    @classmethod
    def parse(cls, value: Any) -> DataType:
        """Accept a ``DataType``, a NumPy dtype or a name (``"DT_FLOAT"``, ``"float32"``)."""
        if isinstance(value, DataType):
            return value
        if isinstance(value, str):
            if value in cls.__members__:
                return cls[value]
            for member in cls:
                if member.value == value:
                    return member
            raise ValueError(f"unknown data type {value!r}")
        return from_numpy_dtype(value)


# Types NumPy lacks, provided by the ml_dtypes package under the enum value's name.
_ML_DTYPES = frozenset({
    DataType.DT_BF16, DataType.DT_FLOAT8_E4M3FN, DataType.DT_FLOAT8_E4M3FNUZ,
    DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E5M2FNUZ, DataType.DT_FLOAT8_E8M0,
    DataType.DT_FLOAT4_E2M1, DataType.DT_INT4, DataType.DT_UINT4, DataType.DT_INT2,
    DataType.DT_UINT2,
})
_FLOATS = frozenset({DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE,
                     DataType.DT_FLOAT8_E4M3FN, DataType.DT_FLOAT8_E4M3FNUZ,
                     DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E5M2FNUZ,
                     DataType.DT_FLOAT8_E8M0, DataType.DT_FLOAT4_E2M1})
_INTEGERS = frozenset(
    {
        DataType.DT_INT8,
        DataType.DT_INT16,
        DataType.DT_INT32,
        DataType.DT_INT64,
        DataType.DT_UINT8,
        DataType.DT_UINT16,
        DataType.DT_UINT32,
        DataType.DT_UINT64,
        DataType.DT_INT4,
        DataType.DT_UINT4,
        DataType.DT_INT2,
        DataType.DT_UINT2,
    }
)


def _ml_dtype(name: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as error:  # pragma: no cover - ml_dtypes is installed by the test setup
        raise ImportError(f"the {name} type needs the 'ml_dtypes' package: pip install ml_dtypes") \
            from error
    return np.dtype(getattr(ml_dtypes, name))


#: DataType -> its NumPy dtype, filled on first use (a run asks for it per input and output)
_NUMPY_DTYPES: dict[DataType, np.dtype] = {}


def to_numpy_dtype(dtype: DataType) -> np.dtype:
    """Map a ``DataType`` to its NumPy dtype."""
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _ml_dtype(dtype.value) if dtype in _ML_DTYPES else np.dtype(dtype.value)
        _NUMPY_DTYPES[dtype] = found
    return found


def from_numpy_dtype(dtype: Any) -> DataType:
    """Map a NumPy dtype (or anything ``np.dtype`` accepts) to a ``DataType``."""
    np_dtype = np.dtype(dtype)
    for member in DataType:
        if member in _ML_DTYPES:
            if np_dtype.name == member.value:
                return member
        elif np.dtype(member.value) == np_dtype:
            return member
    raise ValueError(f"NumPy dtype {np_dtype} has no GE DataType")
