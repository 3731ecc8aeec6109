"""Elementwise ops: arithmetic, comparisons, unary math, activations, Where, BiasAdd.

Binary ops broadcast as NumPy and ONNX do; their inputs share one dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, Format, TensorDesc
from ge.ops.core import channel_axis
from ge.ops.registry import (
    Attr,
    AttrType,
    InferenceContext,
    Input,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import broadcast_shapes

FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
SIGNED = FLOATS + (DataType.DT_INT8, DataType.DT_INT16, DataType.DT_INT32, DataType.DT_INT64)
NUMERIC = SIGNED + (DataType.DT_UINT8, DataType.DT_UINT16, DataType.DT_UINT32,
                    DataType.DT_UINT64)
ALL = NUMERIC + (DataType.DT_BOOL,)

_ELEMENTWISE = (Trait.PURE, Trait.ELEMENTWISE, Trait.INPLACE)


def _broadcast_desc(ctx: InferenceContext, indices: Sequence[int], dtype: DataType) -> TensorDesc:
    shapes = [ctx.shape(i) for i in indices]
    shape = broadcast_shapes(*shapes)
    if shape is None:
        listing = ", ".join(f"{ctx.schema.input_name(i)}={list(s)}"
                            for i, s in zip(indices, shapes))
        raise ctx.fail(f"shapes do not broadcast: {listing}")
    formats = {ctx.input(i).format for i in indices if len(ctx.shape(i)) == len(shape)}
    layout = formats.pop() if len(formats) == 1 else Format.ND
    return TensorDesc(shape, dtype, layout)


def _binary_infer(allowed: Sequence[DataType], result: Optional[DataType]
                  ) -> Callable[[InferenceContext], Sequence[TensorDesc]]:
    def infer(ctx: InferenceContext) -> Sequence[TensorDesc]:
        dtype = ctx.require_same_dtype(0, 1)
        ctx.require_dtypes(0, allowed)
        return [_broadcast_desc(ctx, (0, 1), result or dtype)]

    return infer


def _register_binary(op_type: str, function: Callable[[np.ndarray, np.ndarray], np.ndarray],
                     doc: str, allowed: Sequence[DataType] = NUMERIC,
                     result: Optional[DataType] = None, commutative: bool = False) -> None:
    traits = _ELEMENTWISE + ((Trait.COMMUTATIVE,) if commutative else ())
    if result is not None:
        traits = (Trait.PURE, Trait.ELEMENTWISE) + ((Trait.COMMUTATIVE,) if commutative else ())

    def kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return function(x, y)

    kernel.__doc__ = doc
    kernel.__name__ = f"{op_type.lower()}_kernel"
    register_op(op_type, inputs=["x", "y"], infer=_binary_infer(allowed, result),
                cost=flops_per_output(1), traits=traits)(kernel)


def _same_dtype(function: Callable[[np.ndarray, np.ndarray], Any]
                ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def apply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.asarray(function(x, y)).astype(x.dtype, copy=False)

    return apply


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        if np.any(y == 0):
            raise ZeroDivisionError("integer division by zero")
        quotient = np.floor_divide(x, y)
        # truncate toward zero, as C and ONNX do, rather than floor
        adjust = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (quotient + adjust).astype(x.dtype, copy=False)
    return np.divide(x, y).astype(x.dtype, copy=False)


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        return np.power(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)
    return np.power(x, y.astype(x.dtype, copy=False)).astype(x.dtype, copy=False)


_register_binary("Add", _same_dtype(np.add), "y = x + y (broadcasting).", commutative=True)
_register_binary("Sub", _same_dtype(np.subtract), "y = x - y (broadcasting).")
_register_binary("Mul", _same_dtype(np.multiply), "y = x * y (broadcasting).", commutative=True)
_register_binary("Div", _divide,
                 "y = x / y (broadcasting); integers divide truncating toward zero.")
_register_binary("Min", _same_dtype(np.minimum), "y = min(x, y) elementwise (NaN propagates).",
                 commutative=True)
_register_binary("Max", _same_dtype(np.maximum), "y = max(x, y) elementwise (NaN propagates).",
                 commutative=True)
_register_binary("Equal", np.equal, "y = (x == y), a bool tensor.", allowed=ALL,
                 result=DataType.DT_BOOL, commutative=True)
_register_binary("Less", np.less, "y = (x < y), a bool tensor.", result=DataType.DT_BOOL)
_register_binary("Greater", np.greater, "y = (x > y), a bool tensor.", result=DataType.DT_BOOL)


def _infer_pow(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    ctx.require_dtypes(1, NUMERIC)
    return [_broadcast_desc(ctx, (0, 1), ctx.dtype(0))]


@register_op("Pow", inputs=["x", "y"], infer=_infer_pow, cost=flops_per_output(1),
             traits=_ELEMENTWISE)
def pow_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """z = x ** y (broadcasting); the result has x's dtype."""
    return _power(x, y)


# -- unary ------------------------------------------------------------------------------

def _unary_infer(allowed: Sequence[DataType]) -> Callable[[InferenceContext], Sequence[TensorDesc]]:
    def infer(ctx: InferenceContext) -> Sequence[TensorDesc]:
        ctx.require_dtypes(0, allowed)
        return [ctx.input(0)]

    return infer


def _register_unary(op_type: str, function: Callable[..., np.ndarray], doc: str,
                    allowed: Sequence[DataType] = FLOATS, flops: int = 1,
                    attrs: Sequence[Attr] = ()) -> None:
    def kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
        return np.asarray(function(x, **attrs)).astype(x.dtype, copy=False)

    kernel.__doc__ = doc
    kernel.__name__ = f"{op_type.lower()}_kernel"
    register_op(op_type, inputs=["x"], attrs=attrs, infer=_unary_infer(allowed),
                cost=flops_per_output(flops), traits=_ELEMENTWISE)(kernel)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # split by sign so that exp never overflows
    result = np.empty_like(x)
    positive = x >= 0
    result[positive] = 1 / (1 + np.exp(-x[positive]))
    exp_x = np.exp(x[~positive])
    result[~positive] = exp_x / (1 + exp_x)
    return result


_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# Maclaurin coefficients of erf(x) / x in powers of x**2: 2/sqrt(pi) * (-1)^n / (n! (2n + 1))
_ERF_SERIES = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(14))


def _erf(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float64:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    wide = x.astype(np.float64)
    # |x| < 1: the Maclaurin series (relative error < 1e-12, exact near 0);
    # elsewhere Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7 where erf >= 0.84).
    square = wide * wide
    series = np.zeros_like(wide)
    for coefficient in reversed(_ERF_SERIES):
        series = series * square + coefficient
    t = 1.0 / (1.0 + _ERF_P * np.abs(wide))
    poly = t * (_ERF_A[0] + t * (_ERF_A[1] + t * (_ERF_A[2] + t * (_ERF_A[3] + t * _ERF_A[4]))))
    tail = np.sign(wide) * (1.0 - poly * np.exp(-square))
    return np.where(np.abs(wide) < 1.0, wide * series, tail)


_register_unary("Relu", lambda x: np.maximum(x, x.dtype.type(0)), "y = max(x, 0).",
                allowed=SIGNED)
_register_unary("Sigmoid", _sigmoid, "y = 1 / (1 + exp(-x)).", flops=4)
_register_unary("Sqrt", np.sqrt, "y = sqrt(x) (NaN for x < 0).")
_register_unary("Exp", np.exp, "y = e ** x.")
_register_unary("Log", np.log, "y = ln(x) (-inf at 0, NaN below).")
_register_unary("Tanh", np.tanh, "y = tanh(x).")
_register_unary("Erf", _erf, "y = erf(x), the Gauss error function.", flops=12)
_register_unary("Neg", np.negative, "y = -x.", allowed=SIGNED)
_register_unary("Abs", np.abs, "y = |x|.", allowed=NUMERIC)
_register_unary("Reciprocal", np.reciprocal, "y = 1 / x.")
_register_unary("Floor", np.floor, "y = floor(x).")
_register_unary("Ceil", np.ceil, "y = ceil(x).")
_register_unary(
    "LeakyRelu", lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)),
    "y = x if x >= 0 else alpha * x.", attrs=[Attr("alpha", AttrType.FLOAT, 0.01)], flops=2)
_register_unary(
    "HardSigmoid",
    lambda x, alpha, beta: np.clip(x * x.dtype.type(alpha) + x.dtype.type(beta), 0, 1),
    "y = max(0, min(1, alpha * x + beta)).",
    attrs=[Attr("alpha", AttrType.FLOAT, 0.2), Attr("beta", AttrType.FLOAT, 0.5)], flops=3)


def _infer_clip(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    for index in (1, 2):
        if ctx.has_input(index):
            if ctx.dtype(index) is not ctx.dtype(0):
                raise ctx.fail_dtype(f"input {ctx.schema.input_name(index)!r} must have x's dtype "
                                     f"{ctx.dtype(0).short_name}")
            if len(ctx.shape(index)) > 1 or any(d != 1 for d in ctx.shape(index)):
                raise ctx.fail(f"input {ctx.schema.input_name(index)!r} must be a scalar")
    return [ctx.input(0)]


@register_op("Clip", inputs=["x", Input("min", optional=True), Input("max", optional=True)],
             infer=_infer_clip, cost=flops_per_output(2), traits=_ELEMENTWISE)
def clip_kernel(x: np.ndarray, low: Optional[np.ndarray] = None,
                high: Optional[np.ndarray] = None) -> np.ndarray:
    """y = min(max(x, min), max); an absent bound does not clip."""
    result = x
    if low is not None:
        result = np.maximum(result, low.reshape(()))
    if high is not None:
        result = np.minimum(result, high.reshape(()))
    return np.asarray(result).astype(x.dtype, copy=False)


def _infer_where(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, (DataType.DT_BOOL,), "a condition must be")
    dtype = ctx.require_same_dtype(1, 2)
    return [_broadcast_desc(ctx, (0, 1, 2), dtype)]


@register_op("Where", inputs=["condition", "x", "y"], infer=_infer_where,
             cost=flops_per_output(1), traits=(Trait.PURE, Trait.ELEMENTWISE))
def where_kernel(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """z = x where condition else y (broadcasting all three)."""
    return np.where(condition, x, y)


def _infer_bias_add(ctx: InferenceContext) -> Sequence[TensorDesc]:
    value = ctx.input(0)
    ctx.require_same_dtype(0, 1)
    ctx.require_rank(1, 1)
    if value.rank < 1:
        raise ctx.fail("input 'value' must have rank >= 1")
    layout = ctx.attr("data_format")
    axis = channel_axis(layout, value.rank)
    channels, bias = value.shape[axis], ctx.shape(1)[0]
    if isinstance(channels, int) and isinstance(bias, int) and -1 not in (channels, bias) \
            and channels != bias:
        raise ctx.fail(f"bias has {bias} elements; the {layout.value} channel dimension of "
                       f"'value' {list(value.shape)} is {channels}")
    return [value]


@register_op("BiasAdd", inputs=["value", "bias"],
             attrs=[Attr("data_format", AttrType.FORMAT, Format.NHWC,
                         doc="NHWC or ND: bias on the last axis; NCHW: on axis 1")],
             infer=_infer_bias_add, cost=flops_per_output(1), traits=_ELEMENTWISE)
def bias_add_kernel(value: np.ndarray, bias: np.ndarray, *, data_format: Format) -> np.ndarray:
    """y = value + bias, the 1-D bias added along the channel axis."""
    axis = channel_axis(data_format, value.ndim)
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    return value + bias.reshape(shape)
