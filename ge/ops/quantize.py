"""Linear quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

``QuantizeLinear`` computes ``y = saturate(round(x / scale) + zero_point)``
(rounding half to even) into an integer type (8, 16, 4 or 2 bits), or
``y = cast(x / scale + zero_point)`` into a float8 or float4 type (``saturate``
clamps out-of-range values to the type's largest finite value instead of NaN or
infinity). ``DequantizeLinear`` computes ``y = (x - zero_point) * scale``.

The scale and zero point set the granularity: a scalar (or one element) is
per-tensor; a 1-D tensor is per-axis, one value per index of ``axis``; a tensor
of the input's rank is blocked, one value per ``block_size`` consecutive indices
of ``axis``. The quantized type is the zero point's, else ``output_dtype``,
else uint8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import is_static_dim
from ge.ops.registry import (
    Attr,
    AttrType,
    InferenceContext,
    Input,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import normalize_axis

__all__ = ["INTEGER_RANGES", "FLOAT_TARGETS", "expand_parameter", "quantize", "dequantize"]

_FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)

# Quantized integer types and their saturation ranges.
INTEGER_RANGES: dict[DataType, tuple[int, int]] = {
    DataType.DT_UINT8: (0, 255),
    DataType.DT_INT8: (-128, 127),
    DataType.DT_UINT16: (0, 65535),
    DataType.DT_INT16: (-32768, 32767),
    DataType.DT_UINT4: (0, 15),
    DataType.DT_INT4: (-8, 7),
    DataType.DT_UINT2: (0, 3),
    DataType.DT_INT2: (-2, 1),
}
FLOAT_TARGETS = (DataType.DT_FLOAT8_E4M3FN, DataType.DT_FLOAT8_E4M3FNUZ,
                 DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E5M2FNUZ, DataType.DT_FLOAT4_E2M1)
_DEQUANTIZABLE = tuple(INTEGER_RANGES) + FLOAT_TARGETS + (DataType.DT_INT32,)


def expand_parameter(value: np.ndarray, shape: Sequence[int], axis: int,
                     block_size: int) -> np.ndarray:
    """A scale or zero point made broadcastable to an input of ``shape``.

    One element: a scalar. ``block_size`` > 0: each value repeated over its block
    of ``axis`` (the last block may be short). Otherwise a 1-D tensor along ``axis``.
    """
    if value.size == 1 and block_size <= 0:
        return value.reshape(())
    axis = normalize_axis(axis, len(shape))
    if block_size > 0:
        repeated = np.repeat(value, block_size, axis=axis)
        return np.take(repeated, np.arange(shape[axis]), axis=axis)
    dims = [1] * len(shape)
    dims[axis] = value.size
    return value.reshape(dims)


def _division_dtype(x: np.dtype, scale: np.dtype, precision: Optional[DataType]) -> np.dtype:
    if precision is not None:
        return precision.np_dtype
    wide = [d if d.kind == "f" and d.itemsize >= 4 else np.dtype(np.float32) for d in (x, scale)]
    return np.result_type(*wide)


def quantize(x: np.ndarray, scale: np.ndarray, zero_point: Optional[np.ndarray],
             target: DataType, axis: int = 1, block_size: int = 0, saturate: bool = True,
             precision: Optional[DataType] = None) -> np.ndarray:
    """``x / scale + zero_point`` as ``target`` (rounded half to even and saturated for
    integer targets)."""
    compute = _division_dtype(x.dtype, scale.dtype, precision)
    scaled = x.astype(compute, copy=False) / expand_parameter(
        scale.astype(compute, copy=False), x.shape, axis, block_size)
    if zero_point is not None:
        zero = expand_parameter(zero_point.astype(compute), x.shape, axis, block_size)
    if target in INTEGER_RANGES:
        low, high = INTEGER_RANGES[target]
        rounded = np.rint(scaled)
        if zero_point is not None:
            rounded = rounded + zero
        return np.clip(rounded, low, high).astype(target.np_dtype)
    if zero_point is not None:
        scaled = scaled + zero
    if saturate or target is DataType.DT_FLOAT4_E2M1:
        import ml_dtypes

        largest = float(ml_dtypes.finfo(target.np_dtype).max)
        scaled = np.clip(scaled, -largest, largest)
    return np.asarray(scaled.astype(np.float32, copy=False).astype(target.np_dtype))


def dequantize(x: np.ndarray, scale: np.ndarray, zero_point: Optional[np.ndarray],
               output: np.dtype, axis: int = 1, block_size: int = 0) -> np.ndarray:
    """``(x - zero_point) * scale`` as ``output``."""
    wide = np.dtype(np.float64) if np.dtype(np.float64) in (scale.dtype, output) \
        or x.dtype == np.int32 else np.dtype(np.float32)
    values = x.astype(wide)
    if zero_point is not None and DataType.parse(x.dtype).is_integer:
        values = values - expand_parameter(zero_point.astype(wide), x.shape, axis, block_size)
    result = values * expand_parameter(scale.astype(wide), x.shape, axis, block_size)
    return np.asarray(result.astype(output))


# -- shape inference --------------------------------------------------------------------

def _check_parameter(ctx: InferenceContext, index: int) -> None:
    """The scale or zero point at ``index`` fits the input's granularity."""
    x, parameter = ctx.shape(0), ctx.shape(index)
    name = ctx.schema.input_name(index)
    block = ctx.attr("block_size")
    if block > 0:
        if len(parameter) != len(x):
            raise ctx.fail(f"blocked quantization needs {name!r} of x's rank {len(x)}, "
                           f"got {list(parameter)}")
        return
    if len(parameter) > 1:
        raise ctx.fail(f"{name!r} {list(parameter)} must be a scalar or 1-D "
                       f"(set block_size for blocked quantization)")
    if len(parameter) == 1 and parameter[0] != 1:
        try:
            axis = normalize_axis(ctx.attr("axis"), len(x))
        except ValueError as error:
            raise ctx.fail(str(error)) from None
        length = parameter[0]
        if is_static_dim(length) and is_static_dim(x[axis]) and length != x[axis]:
            raise ctx.fail(f"{name!r} has {length} values; axis {axis} of x {list(x)} "
                           f"has {x[axis]}")


def _quantized_type(ctx: InferenceContext) -> DataType:
    requested = ctx.attr("output_dtype")
    if ctx.has_input(2):
        zero_type = ctx.dtype(2)
        if requested is not None and requested is not zero_type:
            raise ctx.fail_dtype(f"output_dtype {requested.short_name} differs from the zero "
                                 f"point's dtype {zero_type.short_name}")
        return zero_type
    return requested or DataType.DT_UINT8


def _infer_quantize(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, _FLOATS + (DataType.DT_INT32,))
    ctx.require_dtypes(1, _FLOATS)
    target = _quantized_type(ctx)
    if target not in INTEGER_RANGES and target not in FLOAT_TARGETS:
        raise ctx.fail_dtype(f"cannot quantize to {target.short_name}")
    for index in (1, 2):
        if ctx.has_input(index):
            _check_parameter(ctx, index)
    return [TensorDesc(ctx.shape(0), target)]


def _dtype_attrs() -> list[Attr]:
    return [Attr("axis", AttrType.INT, 1, doc="the axis of per-axis and blocked parameters"),
            Attr("block_size", AttrType.INT, 0,
                 check=lambda b: None if b >= 0 else "must be >= 0",
                 doc="> 0: blocked quantization along axis")]


@register_op(
    "QuantizeLinear",
    inputs=["x", "y_scale", Input("y_zero_point", optional=True)],
    attrs=_dtype_attrs() + [
        Attr("output_dtype", AttrType.DTYPE, None,
             doc="the quantized type when there is no zero point (default uint8)"),
        Attr("saturate", AttrType.INT, 1, choices=(0, 1),
             doc="float8 targets: clamp to the largest finite value"),
        Attr("precision", AttrType.DTYPE, None,
             doc="the type x / y_scale is computed in (default: the wider of the two)"),
    ],
    infer=_infer_quantize,
    cost=flops_per_output(4),
    traits=(Trait.PURE,),
)
def quantize_linear_kernel(x: np.ndarray, y_scale: np.ndarray,
                           y_zero_point: Optional[np.ndarray] = None, *, axis: int,
                           block_size: int, output_dtype: Optional[DataType], saturate: int,
                           precision: Optional[DataType]) -> np.ndarray:
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, axis or block."""
    target = DataType.parse(y_zero_point.dtype) if y_zero_point is not None \
        else output_dtype or DataType.DT_UINT8
    return quantize(x, y_scale, y_zero_point, target, axis, block_size, bool(saturate),
                    precision)


def _infer_dequantize(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, _DEQUANTIZABLE)
    ctx.require_dtypes(1, _FLOATS)
    if ctx.has_input(2) and ctx.dtype(2) is not ctx.dtype(0):
        raise ctx.fail_dtype(f"the zero point's dtype {ctx.dtype(2).short_name} differs from "
                             f"x's {ctx.dtype(0).short_name}")
    for index in (1, 2):
        if ctx.has_input(index):
            _check_parameter(ctx, index)
    return [TensorDesc(ctx.shape(0), ctx.attr("output_dtype") or ctx.dtype(1))]


@register_op(
    "DequantizeLinear",
    inputs=["x", "x_scale", Input("x_zero_point", optional=True)],
    attrs=_dtype_attrs() + [Attr("output_dtype", AttrType.DTYPE, None,
                                 doc="the result type (default: the scale's)")],
    infer=_infer_dequantize,
    cost=flops_per_output(2),
    traits=(Trait.PURE,),
)
def dequantize_linear_kernel(x: np.ndarray, x_scale: np.ndarray,
                             x_zero_point: Optional[np.ndarray] = None, *, axis: int,
                             block_size: int, output_dtype: Optional[DataType]) -> np.ndarray:
    """y = (x - x_zero_point) * x_scale, per tensor, axis or block."""
    output = output_dtype.np_dtype if output_dtype is not None else x_scale.dtype
    return dequantize(x, x_scale, x_zero_point, output, axis, block_size)


# -- DynamicQuantizeLinear --------------------------------------------------------------

def _infer_dynamic(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, (DataType.DT_FLOAT,))
    return [TensorDesc(ctx.shape(0), DataType.DT_UINT8), TensorDesc((), DataType.DT_FLOAT),
            TensorDesc((), DataType.DT_UINT8)]


@register_op("DynamicQuantizeLinear", inputs=["x"], outputs=("y", "y_scale", "y_zero_point"),
             infer=_infer_dynamic, cost=flops_per_output(6))
def dynamic_quantize_linear_kernel(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 quantization of x over the range [min(x, 0), max(x, 0)]:
    scale = (high - low) / 255 (1/255 when the range is empty), zero point =
    round(-low / scale), y = saturate(round(x / scale) + zero point)."""
    high = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    low = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    scale = np.float32((high - low) if high != low else 1.0) / np.float32(255)
    zero = np.rint(np.clip(np.float32(0) - low / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zero, np.uint8)
