"""ONNX element types and GE's ``DataType``."""

from __future__ import annotations

import onnx

from ge.errors import UnsupportedOpError
from ge.ir import DataType

__all__ = ["from_onnx_dtype", "to_onnx_dtype"]

_FROM_ONNX: dict[int, DataType] = {
    onnx.TensorProto.FLOAT: DataType.DT_FLOAT,
    onnx.TensorProto.FLOAT16: DataType.DT_FLOAT16,
    onnx.TensorProto.BFLOAT16: DataType.DT_BF16,
    onnx.TensorProto.DOUBLE: DataType.DT_DOUBLE,
    onnx.TensorProto.INT8: DataType.DT_INT8,
    onnx.TensorProto.INT16: DataType.DT_INT16,
    onnx.TensorProto.INT32: DataType.DT_INT32,
    onnx.TensorProto.INT64: DataType.DT_INT64,
    onnx.TensorProto.UINT8: DataType.DT_UINT8,
    onnx.TensorProto.UINT16: DataType.DT_UINT16,
    onnx.TensorProto.UINT32: DataType.DT_UINT32,
    onnx.TensorProto.UINT64: DataType.DT_UINT64,
    onnx.TensorProto.BOOL: DataType.DT_BOOL,
    onnx.TensorProto.FLOAT8E4M3FN: DataType.DT_FLOAT8_E4M3FN,
    onnx.TensorProto.FLOAT8E4M3FNUZ: DataType.DT_FLOAT8_E4M3FNUZ,
    onnx.TensorProto.FLOAT8E5M2: DataType.DT_FLOAT8_E5M2,
    onnx.TensorProto.FLOAT8E5M2FNUZ: DataType.DT_FLOAT8_E5M2FNUZ,
    onnx.TensorProto.FLOAT8E8M0: DataType.DT_FLOAT8_E8M0,
    onnx.TensorProto.FLOAT4E2M1: DataType.DT_FLOAT4_E2M1,
    onnx.TensorProto.INT4: DataType.DT_INT4,
    onnx.TensorProto.UINT4: DataType.DT_UINT4,
    onnx.TensorProto.INT2: DataType.DT_INT2,
    onnx.TensorProto.UINT2: DataType.DT_UINT2,
}
_TO_ONNX = {value: key for key, value in _FROM_ONNX.items()}


def from_onnx_dtype(code: int, where: str = "") -> DataType:
    """The ``DataType`` of an ONNX element type code."""
    try:
        return _FROM_ONNX[code]
    except KeyError:
        name = onnx.TensorProto.DataType.Name(code) if code in onnx.TensorProto.DataType.values() \
            else str(code)
        raise UnsupportedOpError(f"{where + ': ' if where else ''}ONNX element type {name} "
                                 f"is not supported by GE") from None


def to_onnx_dtype(dtype: DataType) -> int:
    """The ONNX element type code of a ``DataType``."""
    return _TO_ONNX[dtype]
