"""Elementwise ops: arithmetic, comparisons, unary math, activations, Where, BiasAdd.

Binary ops broadcast as NumPy and ONNX do; their inputs share one dtype. The
helpers ``register_unary`` and ``register_binary`` are shared with the other
elementwise families (``math_ops``).
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
    LayoutRole,
    Scalar,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import broadcast_shapes

__all__ = ["FLOATS", "SIGNED_INTEGERS", "UNSIGNED", "INTEGERS", "SIGNED", "NUMERIC", "ALL",
           "ELEMENTWISE_TRAITS", "broadcast_desc", "register_unary", "register_binary", "erf"]

FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
SIGNED_INTEGERS = (DataType.DT_INT8, DataType.DT_INT16, DataType.DT_INT32, DataType.DT_INT64)
UNSIGNED = (DataType.DT_UINT8, DataType.DT_UINT16, DataType.DT_UINT32, DataType.DT_UINT64)
INTEGERS = SIGNED_INTEGERS + UNSIGNED
SIGNED = FLOATS + SIGNED_INTEGERS
NUMERIC = SIGNED + UNSIGNED
ALL = NUMERIC + (DataType.DT_BOOL,)

ELEMENTWISE_TRAITS = (Trait.PURE, Trait.ELEMENTWISE, Trait.INPLACE)
_ELEMENTWISE = ELEMENTWISE_TRAITS


def broadcast_desc(ctx: InferenceContext, indices: Sequence[int], dtype: DataType) -> TensorDesc:
    """The descriptor of the broadcast of inputs ``indices``, with element type ``dtype``."""
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
        return [broadcast_desc(ctx, (0, 1), result or dtype)]

    return infer


def register_binary(op_type: str, function: Callable[..., np.ndarray], doc: str,
                    allowed: Sequence[DataType] = NUMERIC, result: Optional[DataType] = None,
                    commutative: bool = False, attrs: Sequence[Attr] = (),
                    traits: Sequence[Trait] = (),
                    identity_element: Optional[Scalar] = None) -> None:
    """Register a broadcasting binary op ``y = function(x, y, **attrs)`` on one dtype.

    The output has the inputs' dtype, or ``result`` (e.g. bool for comparisons).
    ``traits`` are added to the elementwise ones.
    """
    base = _ELEMENTWISE if result is None else (Trait.PURE, Trait.ELEMENTWISE)
    traits = base + ((Trait.COMMUTATIVE,) if commutative else ()) + tuple(traits)
    out_dtype = None if result is None else result.np_dtype

    def kernel(x: np.ndarray, y: np.ndarray, **values: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            answer = np.asarray(function(x, y, **values))
        return answer.astype(out_dtype or x.dtype, copy=False)

    kernel.__doc__ = doc
    kernel.__name__ = f"{op_type.lower()}_kernel"
    register_op(op_type, inputs=["x", "y"], attrs=attrs, infer=_binary_infer(allowed, result),
                cost=flops_per_output(1), traits=traits,
                identity_element=identity_element)(kernel)


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        if np.any(y == 0):
            raise ZeroDivisionError("integer division by zero")
        quotient = np.floor_divide(x, y)
        # truncate toward zero, as C and ONNX do, rather than floor
        adjust = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return quotient + adjust.astype(x.dtype)
    return np.divide(x, y)


register_binary("Add", np.add, "y = x + y (broadcasting).", commutative=True,
                identity_element=0)
register_binary("Sub", np.subtract, "y = x - y (broadcasting).", identity_element=0)
register_binary("Mul", np.multiply, "y = x * y (broadcasting).", commutative=True,
                identity_element=1)
register_binary("Div", _divide, "y = x / y (broadcasting); integers divide truncating toward zero.",
                identity_element=1)
register_binary("Min", np.minimum, "y = min(x, y) elementwise (NaN propagates).", allowed=ALL,
                commutative=True, traits=(Trait.SELF_IDEMPOTENT,))
register_binary("Max", np.maximum, "y = max(x, y) elementwise (NaN propagates).", allowed=ALL,
                commutative=True, traits=(Trait.SELF_IDEMPOTENT,))
register_binary("Equal", np.equal, "y = (x == y), a bool tensor.", allowed=ALL,
                result=DataType.DT_BOOL, commutative=True)
register_binary("Less", np.less, "y = (x < y), a bool tensor.", allowed=ALL,
                result=DataType.DT_BOOL)
register_binary("Greater", np.greater, "y = (x > y), a bool tensor.", allowed=ALL,
                result=DataType.DT_BOOL)
register_binary("LessOrEqual", np.less_equal, "y = (x <= y), a bool tensor.", allowed=ALL,
                result=DataType.DT_BOOL)
register_binary("GreaterOrEqual", np.greater_equal, "y = (x >= y), a bool tensor.", allowed=ALL,
                result=DataType.DT_BOOL)


def _infer_pow(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    ctx.require_dtypes(1, NUMERIC)
    return [broadcast_desc(ctx, (0, 1), ctx.dtype(0))]


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        # exact integer powers; a negative exponent gives 1 / x ** -y truncated toward zero,
        # which is x ** -y itself when that is 1 or -1, else 0
        exponent = y.astype(np.int64)
        magnitude = np.power(x.astype(np.int64), np.abs(exponent))
        inverse = np.where(np.abs(magnitude) == 1, magnitude, 0)
        return np.where(exponent < 0, inverse, magnitude)
    if x.dtype.kind in "iu":
        return np.trunc(np.power(x.astype(np.float64), y.astype(np.float64)))
    wide = np.result_type(x.dtype, np.float32)
    return np.power(x.astype(wide), y.astype(np.result_type(y.dtype, wide)))


@register_op("Pow", inputs=["x", "y"], infer=_infer_pow, cost=flops_per_output(1),
             traits=_ELEMENTWISE, identity_element=1)
def pow_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """z = x ** y (broadcasting); the exponent may have another dtype; z has x's dtype."""
    with np.errstate(all="ignore"):
        return np.asarray(_power(x, y)).astype(x.dtype)


# -- unary ------------------------------------------------------------------------------

def _unary_infer(allowed: Sequence[DataType], result: Optional[DataType]
                 ) -> Callable[[InferenceContext], Sequence[TensorDesc]]:
    def infer(ctx: InferenceContext) -> Sequence[TensorDesc]:
        ctx.require_dtypes(0, allowed)
        desc = ctx.input(0)
        return [desc if result is None else TensorDesc(desc.shape, result, desc.format)]

    return infer


def register_unary(op_type: str, function: Callable[..., np.ndarray], doc: str,
                   allowed: Sequence[DataType] = FLOATS, flops: int = 1,
                   attrs: Sequence[Attr] = (), result: Optional[DataType] = None,
                   traits: Sequence[Trait] = ()) -> None:
    """Register an elementwise op ``y = function(x, **attrs)``.

    The output has x's dtype, or ``result`` (e.g. bool for IsNaN). Floating-point
    exceptions (overflow, invalid) give inf and NaN silently, as ONNX specifies.
    ``traits`` are added to the elementwise ones.
    """
    out_dtype = None if result is None else result.np_dtype
    base = _ELEMENTWISE if result is None else (Trait.PURE, Trait.ELEMENTWISE)
    traits = base + tuple(traits)

    def kernel(x: np.ndarray, **values: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            answer = np.asarray(function(x, **values))
        return answer.astype(out_dtype or x.dtype, copy=False)

    kernel.__doc__ = doc
    kernel.__name__ = f"{op_type.lower()}_kernel"
    register_op(op_type, inputs=["x"], attrs=attrs, infer=_unary_infer(allowed, result),
                cost=flops_per_output(flops), traits=traits)(kernel)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # split by sign so that exp never overflows
    result = np.empty_like(x)
    positive = x >= 0
    result[positive] = 1 / (1 + np.exp(-x[positive]))
    exp_x = np.exp(x[~positive])
    result[~positive] = exp_x / (1 + exp_x)
    return result


# Maclaurin coefficients of erf(x) / x in powers of x**2: 2/sqrt(pi) * (-1)^n / (n! (2n + 1))
_ERF_SERIES = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(40))
_ERF_SERIES_LIMIT = 2.0  # below: the series; above: erfc's continued fraction
_ERFC_FRACTION_DEPTH = 48


def erf(x: np.ndarray) -> np.ndarray:
    """The Gauss error function, computed in float64 (relative error < 1e-15).

    For |x| < 2 the Maclaurin series (exact near 0); above, 1 - erfc(|x|) with
    erfc from its continued fraction ``e^-x^2 / sqrt(pi) / (x + (1/2) / (x + 1 / (x + ...)))``.
    """
    wide = np.asarray(x, np.float64)
    result = np.empty_like(wide)
    small = np.abs(wide) < _ERF_SERIES_LIMIT
    near = wide[small]
    square = near * near
    series = np.zeros_like(near)
    for coefficient in reversed(_ERF_SERIES):
        series = series * square + coefficient
    result[small] = near * series
    far = wide[~small]
    magnitude = np.abs(far)
    fraction = magnitude.copy()
    for depth in range(_ERFC_FRACTION_DEPTH, 0, -1):
        fraction = magnitude + (depth / 2) / fraction
    complement = np.exp(-magnitude * magnitude) / math.sqrt(math.pi) / fraction
    result[~small] = np.sign(far) * (1.0 - complement)
    return result


#: Relu and Abs: idempotent, never negative, and x itself where x >= 0
_RECTIFIER = (Trait.IDEMPOTENT, Trait.NON_NEGATIVE, Trait.FIXES_NON_NEGATIVE)

register_unary("Relu", lambda x: np.maximum(x, x.dtype.type(0)), "y = max(x, 0).",
               allowed=SIGNED, traits=_RECTIFIER)
register_unary("Sigmoid", _sigmoid, "y = 1 / (1 + exp(-x)).", flops=4,
               traits=(Trait.NON_NEGATIVE,))
register_unary("Sqrt", np.sqrt, "y = sqrt(x) (NaN for x < 0).", traits=(Trait.NON_NEGATIVE,))
register_unary("Exp", np.exp, "y = e ** x.", traits=(Trait.NON_NEGATIVE,))
register_unary("Log", np.log, "y = ln(x) (-inf at 0, NaN below).")
register_unary("Tanh", np.tanh, "y = tanh(x).")
register_unary("Erf", erf, "y = erf(x), the Gauss error function.", flops=40)
register_unary("Neg", np.negative, "y = -x.", allowed=SIGNED, traits=(Trait.INVOLUTION,))
register_unary("Abs", np.abs, "y = |x|.", allowed=NUMERIC, traits=_RECTIFIER)
register_unary("Reciprocal", np.reciprocal, "y = 1 / x.")
register_unary("Floor", np.floor, "y = floor(x).", traits=(Trait.IDEMPOTENT,))
register_unary("Ceil", np.ceil, "y = ceil(x).", traits=(Trait.IDEMPOTENT,))
register_unary(
    "LeakyRelu", lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)),
    "y = x if x >= 0 else alpha * x.", attrs=[Attr("alpha", AttrType.FLOAT, 0.01)], flops=2)
register_unary(
    "HardSigmoid",
    lambda x, alpha, beta: np.clip(x * x.dtype.type(alpha) + x.dtype.type(beta), 0, 1),
    "y = max(0, min(1, alpha * x + beta)).",
    attrs=[Attr("alpha", AttrType.FLOAT, 0.2), Attr("beta", AttrType.FLOAT, 0.5)], flops=3,
    traits=(Trait.NON_NEGATIVE,))


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
    return [broadcast_desc(ctx, (0, 1, 2), dtype)]


@register_op("Where", inputs=["condition", "x", "y"], infer=_infer_where,
             cost=flops_per_output(1), traits=(Trait.PURE, Trait.ELEMENTWISE),
             moved_inputs=(1, 2))
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
             infer=_infer_bias_add, cost=flops_per_output(1), traits=_ELEMENTWISE,
             layout=LayoutRole())
def bias_add_kernel(value: np.ndarray, bias: np.ndarray, *, data_format: Format) -> np.ndarray:
    """y = value + bias, the 1-D bias added along the channel axis."""
    axis = channel_axis(data_format, value.ndim)
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    return value + bias.reshape(shape)
