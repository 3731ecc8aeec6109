"""Sources and plumbing: Data, Const, Identity, Cast, BitCast, Shape, Size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import InputError
from ge.ir import DataType, Format, Tensor, TensorDesc
from ge.ops.registry import REQUIRED, Attr, AttrType, Cost, InferenceContext, Trait, register_op
from ge.ops.shape_utils import normalize_axis


def _infer_data(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [TensorDesc(ctx.attr("shape"), ctx.attr("dtype"), ctx.attr("format"))]


@register_op(
    "Data",
    outputs=("y",),
    attrs=[
        Attr("shape", AttrType.SHAPE, REQUIRED, doc="dimensions; -1 or a name if unknown"),
        Attr("dtype", AttrType.DTYPE, DataType.DT_FLOAT),
        Attr("format", AttrType.FORMAT, Format.ND),
        Attr("index", AttrType.INT, None, doc="position among the graph inputs (informative)"),
    ],
    infer=_infer_data,
    traits=(Trait.SOURCE,),
)
def data_kernel(**attrs: Any) -> np.ndarray:
    """A graph input; its node name is the feed key. Its value comes from the feed."""
    raise InputError("a Data node has no kernel: its value must be fed")


def _infer_const(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [ctx.attr("value").desc]


def _const_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    return Cost(0, 0)


@register_op(
    "Const",
    attrs=[Attr("value", AttrType.TENSOR, REQUIRED, doc="the constant, a ge.Tensor")],
    infer=_infer_const,
    cost=_const_cost,
    traits=(Trait.SOURCE, Trait.PURE),
)
def const_kernel(*, value: Tensor) -> np.ndarray:
    """A constant tensor (weights, shapes): y = value."""
    return value.numpy()


def _same_as_input(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [ctx.input(0)]


@register_op("Identity", inputs=["x"], infer=_same_as_input,
             traits=(Trait.PURE, Trait.VIEW, Trait.ELEMENTWISE))
def identity_kernel(x: np.ndarray) -> np.ndarray:
    """y = x."""
    return x


def _infer_cast(ctx: InferenceContext) -> Sequence[TensorDesc]:
    desc = ctx.input(0)
    return [TensorDesc(desc.shape, ctx.attr("dtype"), desc.format)]


# float8 types whose out-of-range values saturate to +-max (``saturate=True``)
_SATURATING_FLOAT8 = frozenset({DataType.DT_FLOAT8_E4M3FN, DataType.DT_FLOAT8_E4M3FNUZ,
                                DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E5M2FNUZ})
_FLOAT32_MANTISSA = 0x7FFFFF
_FLOAT32_HALF_ULP = 0x400000  # the mantissa's top bit: a fraction of exactly one half
_E8M0_NAN = 0xFF


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Power-of-two scales (E8M0): the float32 exponent, rounded by ``round_mode``."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.int32)
    mantissa = bits & _FLOAT32_MANTISSA
    special = exponent == _E8M0_NAN  # inf and NaN
    if round_mode == "up":
        round_up = mantissa > 0
    elif round_mode == "nearest":
        round_up = (mantissa > _FLOAT32_HALF_ULP) | ((mantissa == _FLOAT32_HALF_ULP)
                                                     & (exponent > 0))
    else:
        round_up = np.zeros(bits.shape, np.bool_)
    exponent = exponent + (round_up & ~special)
    if saturate:
        exponent = np.where(special, exponent, np.minimum(exponent, _E8M0_NAN - 1))
    code = np.where(special, _E8M0_NAN, exponent).astype(np.uint8)
    return code.view(DataType.DT_FLOAT8_E8M0.np_dtype)


def _saturate(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Clamp finite and infinite values to the range of a float8 type (NaN stays NaN)."""
    import ml_dtypes

    if not DataType.parse(x.dtype).is_float:
        x = x.astype(np.float64)
    info = ml_dtypes.finfo(target)
    return np.clip(x, x.dtype.type(float(info.min)), x.dtype.type(float(info.max)))


@register_op("Cast", inputs=["x"],
             attrs=[Attr("dtype", AttrType.DTYPE, REQUIRED),
                    Attr("saturate", AttrType.BOOL, True,
                         doc="float8 targets: out-of-range values become +-max, not inf/NaN"),
                    Attr("round_mode", AttrType.STRING, None, choices=("up", "down", "nearest"),
                         doc="rounding to FLOAT8E8M0, 'up' when unset (the other types "
                             "round to nearest even)")],
             infer=_infer_cast, traits=(Trait.PURE, Trait.ELEMENTWISE), moved_inputs=(0,))
def cast_kernel(x: np.ndarray, *, dtype: DataType, saturate: bool = True,
                round_mode: Optional[str] = None) -> np.ndarray:
    """y = x converted to ``dtype``, as ONNX ``Cast`` does.

    Floats to integers truncate toward zero; integers out of range wrap. Float
    targets round to nearest even; the float8 types saturate to their largest
    finite value when ``saturate`` (the default), else overflow to inf or NaN.
    FLOAT8E8M0 keeps the exponent, rounded by ``round_mode``.
    """
    target = dtype.np_dtype
    with np.errstate(all="ignore"):
        if dtype is DataType.DT_FLOAT8_E8M0 and x.dtype != target:
            return _to_e8m0(x, saturate, round_mode or "up")
        if saturate and dtype in _SATURATING_FLOAT8 and x.dtype != target:
            x = _saturate(x, target)
        elif x.dtype.kind == "f" and target.kind in "iu":
            x = np.trunc(x)
        return x.astype(target, copy=False)


def _shape_range(rank: int, start: int, end: Any) -> tuple[int, int]:
    first = min(max(start + rank if start < 0 else start, 0), rank)
    if end is None:
        return first, rank
    last = min(max(end + rank if end < 0 else end, 0), rank)
    return first, max(first, last)


def _infer_shape(ctx: InferenceContext) -> Sequence[TensorDesc]:
    first, last = _shape_range(len(ctx.shape(0)), ctx.attr("start"), ctx.attr("end"))
    return [TensorDesc((last - first,), DataType.DT_INT64)]


@register_op("Shape", inputs=["x"],
             attrs=[Attr("start", AttrType.INT, 0), Attr("end", AttrType.INT, None)],
             infer=_infer_shape)
def shape_kernel(x: np.ndarray, *, start: int, end: Any) -> np.ndarray:
    """y = the dimensions of x (from ``start`` to ``end``) as int64."""
    first, last = _shape_range(x.ndim, start, end)
    return np.array(x.shape[first:last], dtype=np.int64)


def channel_axis(data_format: Format, rank: int) -> int:
    """The channel axis of a tensor in ``data_format`` (NCHW: 1; NHWC and ND: last)."""
    return normalize_axis(1 if data_format is Format.NCHW else -1, rank)


# -- BitCast ----------------------------------------------------------------------------

_NARROW_BITS = {DataType.DT_INT4: 4, DataType.DT_UINT4: 4, DataType.DT_FLOAT4_E2M1: 4,
                DataType.DT_INT2: 2, DataType.DT_UINT2: 2}


def bit_width(dtype: DataType) -> int:
    """Bits per element of ``dtype`` (4 and 2 for the packed narrow types)."""
    return _NARROW_BITS.get(dtype, dtype.itemsize * 8)


def _infer_bitcast(ctx: InferenceContext) -> Sequence[TensorDesc]:
    source, target = ctx.dtype(0), ctx.attr("to")
    if bit_width(source) != bit_width(target):
        raise ctx.fail_dtype(f"cannot reinterpret {source.short_name} ({bit_width(source)} bits) "
                             f"as {target.short_name} ({bit_width(target)} bits): the widths "
                             f"must be equal")
    desc = ctx.input(0)
    return [TensorDesc(desc.shape, target, desc.format)]


@register_op("BitCast", inputs=["x"], attrs=[Attr("to", AttrType.DTYPE, REQUIRED)],
             infer=_infer_bitcast, traits=(Trait.PURE, Trait.ELEMENTWISE))
def bitcast_kernel(x: np.ndarray, *, to: DataType) -> np.ndarray:
    """y = the bits of x read as type ``to`` (of the same width)."""
    return (x if x.flags.c_contiguous else x.copy()).view(to.np_dtype)


# -- Size ------------------------------------------------------------------------------

def _infer_size(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.input(0)
    return [TensorDesc((), DataType.DT_INT64)]


@register_op("Size", inputs=["data"], infer=_infer_size)
def size_kernel(data: np.ndarray) -> np.ndarray:
    """y = the number of elements of ``data``, an int64 scalar."""
    return np.array(data.size, np.int64)
