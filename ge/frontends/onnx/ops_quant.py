"""Translators for ONNX's quantization ops and onnxruntime's quantized contrib ops.

``QuantizeLinear`` and ``DequantizeLinear`` (ONNX and ``com.microsoft``) map onto
the registry ops of the same names, with ONNX's element-type codes turned into
``DataType``. The integer products (``MatMulInteger``, ``ConvInteger``,
``QLinearMatMul``, ``QLinearConv`` and onnxruntime's ``MatMulIntegerToFloat``,
``DynamicQuantizeMatMul``) subtract the zero points in float64, where every
int8/uint8 product and sum is exact, run the float ``MatMul`` or ``Conv``, and
requantize with ``QuantizeLinear``: ``acc * (scale_a * scale_b / scale_y)``
rounded half to even, plus the output zero point, saturated. onnxruntime's
elementwise ``QLinear*`` ops dequantize, compute in float and quantize;
``QGemm`` is the integer Gemm, and ``MatMulNBits`` (2/4/8-bit block-quantized
weights) dequantizes its constant weights once, at translation.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, find_translator, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.ir import DataType, Value

__all__ = ["widen", "requantize", "dequantized", "quantized", "delegate", "unpack_bits"]

Outputs = Sequence[Optional[Value]]
_MS = "com.microsoft"



def _dtype_attr(ctx: NodeContext, key: str) -> Optional[DataType]:
    code = ctx.attrs.pop(key, 0)
    return from_onnx_dtype(code, f"ONNX {ctx.op_type} node {ctx.name!r}") if code else None


def _linear_attrs(ctx: NodeContext, keys: Sequence[str]) -> dict[str, Any]:
    attrs: dict[str, Any] = {key: ctx.attrs[key] for key in ("axis", "block_size", "saturate")
                             if key in ctx.attrs and key in keys}
    for key in ("output_dtype", "precision"):
        if key in keys:
            attrs[key] = _dtype_attr(ctx, key)
    return attrs


@translator("QuantizeLinear")
@translator("QuantizeLinear", domain=_MS)
def quantize_linear(ctx: NodeContext) -> Outputs:
    """``QuantizeLinear``; ``output_dtype`` and ``precision`` codes become DataTypes."""
    attrs = _linear_attrs(ctx, ("axis", "block_size", "saturate", "output_dtype", "precision"))
    return ctx.op("QuantizeLinear", ctx.inputs[:3], attrs).outputs


@translator("DequantizeLinear")
@translator("DequantizeLinear", domain=_MS)
def dequantize_linear(ctx: NodeContext) -> Outputs:
    """``DequantizeLinear``; an ``output_dtype`` code becomes a DataType."""
    attrs = _linear_attrs(ctx, ("axis", "block_size", "output_dtype"))
    return ctx.op("DequantizeLinear", ctx.inputs[:3], attrs).outputs


# -- helpers shared by the integer products ---------------------------------------------

def _unsqueeze(ctx: NodeContext, value: Value, axes: Sequence[int]) -> Value:
    return ctx.value("Unsqueeze", [value, ctx.const(np.asarray(axes, np.int64))])


def widen(ctx: NodeContext, value: Value, zero_point: Optional[Value],
          axes: Sequence[int] = ()) -> Value:
    """``value - zero_point`` in float64; a 1-D zero point is first unsqueezed at ``axes``."""
    wide = ctx.value("Cast", [value], {"dtype": DataType.DT_DOUBLE})
    if zero_point is None:
        return wide
    zero = ctx.value("Cast", [zero_point], {"dtype": DataType.DT_DOUBLE})
    if axes and len(zero_point.shape) == 1:
        zero = _unsqueeze(ctx, zero, axes)
    return ctx.value("Sub", [wide, zero])


def requantize(ctx: NodeContext, accumulator: Value, multiplier: Value,
               zero_point: Optional[Value], dtype: DataType) -> Value:
    """``QuantizeLinear(accumulator * multiplier, 1, zero_point)`` in float64."""
    factor = ctx.value("Cast", [multiplier], {"dtype": DataType.DT_DOUBLE})
    scaled = ctx.value("Mul", [accumulator, factor])
    one = ctx.const(np.asarray(1.0, np.float64))
    attrs = {} if zero_point is not None else {"output_dtype": dtype}
    return ctx.value("QuantizeLinear", [scaled, one, zero_point], attrs)


def _multiplier(ctx: NodeContext, a_scale: Value, b_scale: Value, y_scale: Value) -> Value:
    """``a_scale * b_scale / y_scale`` in the scales' own type (as ONNX computes it)."""
    dtype = a_scale.dtype
    b_scale = b_scale if b_scale.dtype is dtype else ctx.value("Cast", [b_scale], {"dtype": dtype})
    y_scale = y_scale if y_scale.dtype is dtype else ctx.value("Cast", [y_scale], {"dtype": dtype})
    return ctx.value("Div", [ctx.value("Mul", [a_scale, b_scale]), y_scale])


def delegate(ctx: NodeContext, op_type: str, inputs: Sequence[Optional[Value]],
             attrs: dict[str, Any]) -> Outputs:
    """Translate as the ONNX op ``op_type`` with these inputs and attributes."""
    function = find_translator("", op_type)
    if function is None:
        raise ctx.unsupported(f"GE cannot translate the {op_type} this op is built on")
    other = copy.copy(ctx)
    other.inputs = list(inputs)
    other.attrs = dict(attrs)
    return function(other)


def dequantized(ctx: NodeContext, x: Value, scale: Value, zero_point: Optional[Value]) -> Value:
    """``DequantizeLinear(x, scale, zero_point)`` (per tensor)."""
    return ctx.value("DequantizeLinear", [x, scale, zero_point])


def quantized(ctx: NodeContext, x: Value, scale: Value, zero_point: Optional[Value],
              like: Value) -> Value:
    """``QuantizeLinear(x, scale, zero_point)``, into ``like``'s type without a zero point."""
    attrs = {} if zero_point is not None else {"output_dtype": like.dtype}
    return ctx.value("QuantizeLinear", [x, scale, zero_point], attrs)


# -- integer matrix products ------------------------------------------------------------

def _integer_product(ctx: NodeContext, a: Value, a_zero: Optional[Value], b: Value,
                     b_zero: Optional[Value]) -> Value:
    """``(a - a_zero) @ (b - b_zero)`` exactly, in float64; a 1-D ``a_zero`` is per row."""
    left = widen(ctx, a, a_zero, [-1] if len(a.shape) >= 2 else [])
    right = widen(ctx, b, b_zero)
    return ctx.value("MatMul", [left, right])


@translator("MatMulInteger")
def matmul_integer(ctx: NodeContext) -> Outputs:
    """``MatMulInteger``: the exact int32 product of zero-point-shifted 8-bit matrices."""
    product = _integer_product(ctx, ctx.required(0), ctx.input(2), ctx.required(1),
                               ctx.input(3))
    return [ctx.value("Cast", [product], {"dtype": DataType.DT_INT32})]


def _row_scale(ctx: NodeContext, scale: Value, a: Value) -> Value:
    """A 1-D per-row scale of ``a`` as a column."""
    if len(scale.shape) == 1 and len(a.shape) >= 2 and scale.shape[0] != 1:
        return _unsqueeze(ctx, scale, [-1])
    return scale


@translator("QLinearMatMul")
@translator("QLinearMatMul", domain=_MS)
def qlinear_matmul(ctx: NodeContext) -> Outputs:
    """``QLinearMatMul``: the integer product requantized to the output's scale."""
    a, b = ctx.required(0), ctx.required(3)
    product = _integer_product(ctx, a, ctx.input(2), b, ctx.input(5))
    multiplier = _multiplier(ctx, _row_scale(ctx, ctx.required(1), a), ctx.required(4),
                             ctx.required(6))
    return [requantize(ctx, product, multiplier, ctx.input(7), a.dtype)]


# -- integer convolutions ---------------------------------------------------------------

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _integer_conv(ctx: NodeContext, x: Value, x_zero: Optional[Value], w: Value,
                  w_zero: Optional[Value], bias: Optional[Value]) -> Value:
    """The exact convolution of zero-point-shifted integers, in float64."""
    rank = len(w.shape)
    left = widen(ctx, x, x_zero)
    right = widen(ctx, w, w_zero, list(range(1, rank)))
    wide_bias = None if bias is None else ctx.value("Cast", [bias], {"dtype": DataType.DT_DOUBLE})
    attrs = {key: ctx.attrs[key] for key in _CONV_ATTRS if key in ctx.attrs}
    result = delegate(ctx, "Conv", [left, right, wide_bias], attrs)[0]
    assert result is not None
    return result


@translator("ConvInteger")
def conv_integer(ctx: NodeContext) -> Outputs:
    """``ConvInteger``: the exact int32 convolution of zero-point-shifted 8-bit tensors."""
    result = _integer_conv(ctx, ctx.required(0), ctx.input(2), ctx.required(1),
                           ctx.input(3), None)
    return [ctx.value("Cast", [result], {"dtype": DataType.DT_INT32})]


@translator("QLinearConv")
@translator("QLinearConv", domain=_MS)
def qlinear_conv(ctx: NodeContext) -> Outputs:
    """``QLinearConv``: the integer convolution (plus int32 bias) requantized; the weight
    scale and zero point may be per output channel."""
    x, w = ctx.required(0), ctx.required(3)
    result = _integer_conv(ctx, x, ctx.input(2), w, ctx.input(5), ctx.input(8))
    multiplier = _multiplier(ctx, ctx.required(1), ctx.required(4), ctx.required(6))
    if len(multiplier.shape) == 1:
        multiplier = _unsqueeze(ctx, multiplier, [0] + list(range(2, len(x.shape))))
    return [requantize(ctx, result, multiplier, ctx.input(7), x.dtype)]


# -- onnxruntime's quantized contrib ops ------------------------------------------------

def _scaled_float(ctx: NodeContext, product: Value, a_scale: Value, b_scale: Value,
                  bias: Optional[Value]) -> Value:
    """``product * a_scale * b_scale (+ bias)`` in the scales' float type."""
    dtype = a_scale.dtype
    scale = ctx.value("Mul", [a_scale, b_scale if b_scale.dtype is dtype
                              else ctx.value("Cast", [b_scale], {"dtype": dtype})])
    narrow = ctx.value("Cast", [product], {"dtype": dtype})
    result = ctx.value("Mul", [narrow, scale])
    return result if bias is None else ctx.value("Add", [result, bias])


@translator("MatMulIntegerToFloat", domain=_MS)
def matmul_integer_to_float(ctx: NodeContext) -> Outputs:
    """``(A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias`` as float."""
    a = ctx.required(0)
    product = _integer_product(ctx, a, ctx.input(4), ctx.required(1), ctx.input(5))
    a_scale = _row_scale(ctx, ctx.required(2), a)
    return [_scaled_float(ctx, product, a_scale, ctx.required(3), ctx.input(6))]


@translator("DynamicQuantizeMatMul", domain=_MS)
def dynamic_quantize_matmul(ctx: NodeContext) -> Outputs:
    """A float ``A`` quantized to uint8 at run time, times the quantized ``B``, as float."""
    node = ctx.op("DynamicQuantizeLinear", [ctx.required(0)])
    a, a_scale, a_zero = node.outputs
    product = _integer_product(ctx, a, a_zero, ctx.required(1), ctx.input(3))
    return [_scaled_float(ctx, product, a_scale, ctx.required(2), ctx.input(4))]


def _binary(ctx: NodeContext, op_type: str) -> Outputs:
    a = dequantized(ctx, ctx.required(0), ctx.required(1), ctx.input(2))
    b = dequantized(ctx, ctx.required(3), ctx.required(4), ctx.input(5))
    result = ctx.value(op_type, [a, b])
    return [quantized(ctx, result, ctx.required(6), ctx.input(7), ctx.required(0))]


@translator("QLinearAdd", domain=_MS)
def qlinear_add(ctx: NodeContext) -> Outputs:
    """``QLinearAdd``: quantize(dequantize(A) + dequantize(B))."""
    return _binary(ctx, "Add")


@translator("QLinearMul", domain=_MS)
def qlinear_mul(ctx: NodeContext) -> Outputs:
    """``QLinearMul``: quantize(dequantize(A) * dequantize(B))."""
    return _binary(ctx, "Mul")


def _unary(ctx: NodeContext, op_type: str, attrs: Optional[dict[str, Any]] = None) -> Outputs:
    x = ctx.required(0)
    result = ctx.value(op_type, [dequantized(ctx, x, ctx.required(1), ctx.input(2))], attrs)
    return [quantized(ctx, result, ctx.required(3), ctx.input(4), x)]


@translator("QLinearSigmoid", domain=_MS)
def qlinear_sigmoid(ctx: NodeContext) -> Outputs:
    """``QLinearSigmoid``: quantize(sigmoid(dequantize(X)))."""
    return _unary(ctx, "Sigmoid")


@translator("QLinearLeakyRelu", domain=_MS)
def qlinear_leaky_relu(ctx: NodeContext) -> Outputs:
    """``QLinearLeakyRelu``: quantize(leaky_relu(dequantize(X), alpha))."""
    return _unary(ctx, "LeakyRelu", {"alpha": ctx.attr("alpha", 0.01)})


@translator("QLinearGlobalAveragePool", domain=_MS)
def qlinear_global_average_pool(ctx: NodeContext) -> Outputs:
    """``QLinearGlobalAveragePool`` (NCHW, or NHWC with ``channels_last``)."""
    x = ctx.required(0)
    real = dequantized(ctx, x, ctx.required(1), ctx.input(2))
    rank = len(x.shape)
    axes = list(range(1, rank - 1)) if ctx.attr("channels_last", 0) else list(range(2, rank))
    mean = ctx.value("ReduceMean", [real, ctx.const(np.asarray(axes, np.int64))],
                     {"keepdims": 1})
    return [quantized(ctx, mean, ctx.required(3), ctx.input(4), x)]


@translator("QLinearConcat", domain=_MS)
def qlinear_concat(ctx: NodeContext) -> Outputs:
    """``QLinearConcat(Y_scale, Y_zp, (X, X_scale, X_zp)...)``: each input requantized."""
    y_scale, y_zero = ctx.required(0), ctx.input(1)
    triples = [ctx.inputs[i:i + 3] for i in range(2, len(ctx.inputs), 3)]
    parts = []
    for x, scale, zero in triples:
        if x is None or scale is None:
            raise ctx.unsupported("every concatenated input needs its tensor and scale")
        parts.append(dequantized(ctx, x, scale, zero))
    joined = ctx.value("Concat", parts, {"axis": ctx.attr("axis")})
    first = triples[0][0]
    assert first is not None
    return [quantized(ctx, joined, y_scale, y_zero, first)]


@translator("QGemm", domain=_MS)
def qgemm(ctx: NodeContext) -> Outputs:
    """``QGemm``: alpha * (A - a_zp)' @ (B - b_zp)' + C (int32, at scale a_scale * b_scale),
    as float, or requantized when ``y_scale`` is given."""
    a, b = ctx.required(0), ctx.required(3)
    left, right = widen(ctx, a, ctx.input(2)), widen(ctx, b, ctx.input(5), [0])
    attrs = {"transA": ctx.attr("transA", 0), "transB": ctx.attr("transB", 0),
             "alpha": ctx.attr("alpha", 1.0)}
    bias = ctx.input(6)
    wide_bias = None if bias is None else ctx.value("Cast", [bias], {"dtype": DataType.DT_DOUBLE})
    product = ctx.value("Gemm", [left, right, wide_bias], attrs)
    a_scale, b_scale = ctx.required(1), ctx.required(4)
    if ctx.input(7) is None:
        return [_scaled_float(ctx, product, a_scale, b_scale, None)]
    multiplier = _multiplier(ctx, a_scale, b_scale, ctx.required(7))
    return [requantize(ctx, product, multiplier, ctx.input(8), a.dtype)]


# -- MatMulNBits: block-quantized weights of 2, 4 or 8 bits -----------------------------

def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The ``bits``-wide unsigned fields of each byte row (lowest bits first), ``count``
    per row."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    fields = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return fields.reshape(packed.shape[:-1] + (-1,))[..., :count]


def nbits_weights(ctx: NodeContext, packed: np.ndarray, scales: np.ndarray,
                  zero_points: Optional[np.ndarray]) -> np.ndarray:
    """The float [K, N] weight of a ``MatMulNBits`` from its constant inputs."""
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size"))
    k, n = int(ctx.attr("K")), int(ctx.attr("N"))
    if bits not in (2, 4, 8):
        raise ctx.unsupported(f"bits={bits} is not supported (2, 4 and 8 are)")
    blocks = -(-k // block)
    codes = unpack_bits(packed.reshape(n, blocks, -1), bits, block).astype(np.float32)
    if zero_points is None:
        zero = np.float32(1 << (bits - 1))
    elif zero_points.dtype == np.uint8:
        zero = unpack_bits(zero_points.reshape(n, -1), bits, blocks).astype(np.float32)[..., None]
    else:
        zero = zero_points.astype(np.float32).reshape(n, blocks, 1)
    values = (codes - zero) * scales.astype(np.float32).reshape(n, blocks, 1)
    return np.ascontiguousarray(values.reshape(n, -1)[:, :k].T).astype(scales.dtype)


@translator("MatMulNBits", domain=_MS)
def matmul_nbits(ctx: NodeContext) -> Outputs:
    """``MatMulNBits``: A @ dequantized(B) (+ bias); B, its scales and zero points must be
    constants (they are weights), and are dequantized once, here."""
    if ctx.input(4) is not None:
        raise ctx.unsupported("g_idx (act-order) is not supported")
    arrays = [ctx.constant_input(i) for i in (1, 2, 3)]
    if arrays[0] is None or arrays[1] is None or (ctx.input(3) is not None and arrays[2] is None):
        raise ctx.unsupported("the quantized weights, scales and zero points must be constants")
    assert arrays[0] is not None and arrays[1] is not None
    weights = ctx.const(nbits_weights(ctx, arrays[0], arrays[1], arrays[2]))
    result = ctx.value("MatMul", [ctx.required(0), weights])
    bias = ctx.input(5)
    return [result if bias is None else ctx.value("Add", [result, bias])]
