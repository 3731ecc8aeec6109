"""Translators for the quantized contrib ops onnxruntime's quantization tool emits.

``quantize_static`` (QOperator format) turns pooling, softmax and ``Where`` into
``QLinearAveragePool``, ``QLinearSoftmax`` and ``QLinearWhere``: each becomes
dequantize, the float op, quantize. ``quantize_dynamic`` turns ``LSTM`` into
``DynamicQuantizeLSTM`` (the registry op of that name: onnxruntime's integer products
over activations quantized as it runs), ``Attention`` into ``QAttention`` (the exact
integer projection, scaled to float, then the float attention of
``ops_contrib_attention.py``), and both formats turn ``EmbedLayerNormalization`` into
``QEmbedLayerNormalization`` (the float op over dequantized tables).
``GatherBlockQuantized`` (from the weight-only quantizer) dequantizes its constant table
once, at translation, as ``MatMulBnb4`` (from the FP4/NF4 quantizer) does its weight. The
elementwise ``QLinear*`` ops, ``QGemm`` and the integer products are in ``ops_quant.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, find_translator, translator
from ge.frontends.onnx.ops_contrib_attention import count_attr, self_attention
from ge.frontends.onnx.ops_quant import dequantized, quantized, unpack_bits, widen
from ge.ir import Value

__all__ = ["block_dequantized"]

Outputs = Sequence[Optional[Value]]
_MS = "com.microsoft"



def _as_onnx(ctx: NodeContext, op_type: str, inputs: Sequence[Optional[Value]],
             attrs: dict[str, Any], opset: Optional[int] = None) -> Outputs:
    """Translate as the ONNX op ``op_type`` (a contrib op when prefixed ``ms:``)."""
    domain = _MS if op_type.startswith("ms:") else ""
    name = op_type.removeprefix("ms:")
    function = find_translator(domain, name)
    if function is None:
        raise ctx.unsupported(f"GE cannot translate the {name} this op is built on")
    other = copy.copy(ctx)
    other.inputs, other.attrs = list(inputs), dict(attrs)
    if opset is not None:
        other.opset = opset
    return function(other)


# -- dequantize, float op, quantize -----------------------------------------------------

@translator("QLinearAveragePool", domain=_MS)
def qlinear_average_pool(ctx: NodeContext) -> Outputs:
    """``QLinearAveragePool``: quantize(AveragePool(dequantize(X))); NHWC data when
    ``channels_last``."""
    x = ctx.required(0)
    real = dequantized(ctx, x, ctx.required(1), ctx.input(2))
    channels_last = bool(ctx.attr("channels_last", 0))
    rank = len(x.shape)
    if channels_last:
        real = ctx.value("Transpose", [real], {"perm": [0, rank - 1] + list(range(1, rank - 1))})
    attrs = {key: value for key, value in ctx.attrs.items() if key != "channels_last"}
    pooled = _as_onnx(ctx, "AveragePool", [real], attrs)[0]
    assert pooled is not None
    if channels_last:
        pooled = ctx.value("Transpose", [pooled], {"perm": [0] + list(range(2, rank)) + [1]})
    return [quantized(ctx, pooled, ctx.required(3), ctx.input(4), x)]


@translator("QLinearSoftmax", domain=_MS)
def qlinear_softmax(ctx: NodeContext) -> Outputs:
    """``QLinearSoftmax``: quantize(Softmax(dequantize(X))), with the axis (default -1)
    meaning what it does in the Softmax opset named by ``opset`` (before 13: the rows of
    the input flattened to 2-D there)."""
    x = ctx.required(0)
    real = dequantized(ctx, x, ctx.required(1), ctx.input(2))
    opset = ctx.attr("opset")
    if not isinstance(opset, int):
        raise ctx.unsupported("attribute 'opset' (the Softmax opset it follows) is required")
    probabilities = _as_onnx(ctx, "Softmax", [real], {"axis": ctx.attr("axis", -1)}, opset)[0]
    assert probabilities is not None
    return [quantized(ctx, probabilities, ctx.required(3), ctx.input(4), x)]


@translator("QLinearWhere", domain=_MS)
def qlinear_where(ctx: NodeContext) -> Outputs:
    """``QLinearWhere``: quantize(Where(condition, dequantize(X), dequantize(Y)))."""
    x = ctx.required(1)
    chosen = ctx.value("Where", [
        ctx.required(0),
        dequantized(ctx, x, ctx.required(2), ctx.input(3)),
        dequantized(ctx, ctx.required(4), ctx.required(5), ctx.input(6))])
    return [quantized(ctx, chosen, ctx.required(7), ctx.input(8), x)]


# -- DynamicQuantizeLSTM ----------------------------------------------------------------

_LSTM_ATTRIBUTES = ("activation_alpha", "activation_beta", "activations", "clip", "direction",
                    "hidden_size", "input_forget")


@translator("DynamicQuantizeLSTM", domain=_MS)
def dynamic_quantize_lstm(ctx: NodeContext) -> Outputs:
    """``DynamicQuantizeLSTM``: the registry op of that name (``ge/ops/quantized_rnn.py``),
    onnxruntime's integer products over X and each step's hidden state quantized to uint8.
    Its hidden-state row groups follow an onnxruntime with a thread per batch row. Where the
    node leaves ``Y`` out, onnxruntime quantizes an ended row's last hidden state (or, for
    a row of length 0, its unwritten output buffer) with the rows that go on, where GE
    quantizes zeros: rows of different lengths that share a scale (2 to 4 rows with
    ``hidden > 256``) may then differ."""
    if ctx.attr("layout", 0):
        raise ctx.unsupported("layout=1 is not supported (nor by onnxruntime)")
    for index in (0, 1, 2, 8, 9, 10, 11):
        ctx.required(index)
    attrs = {key: value for key, value in ctx.attrs.items() if key in _LSTM_ATTRIBUTES}
    inputs = [ctx.input(index) for index in range(12)]
    return ctx.op("DynamicQuantizeLSTM", inputs, attrs).outputs


# -- QAttention -------------------------------------------------------------------------

@translator("QAttention", domain=_MS)
def qattention(ctx: NodeContext) -> Outputs:
    """``QAttention``: ``(input - input_zp) @ (weight - weight_zp)`` exactly, times
    ``input_scale * weight_scale`` (per tensor or per column), plus the bias, is the
    packed QKV projection of onnxruntime's float ``Attention``."""
    x, weights = ctx.required(0), ctx.required(1)
    product = ctx.value("MatMul", [widen(ctx, x, ctx.input(6)), widen(ctx, weights, ctx.input(7))])
    input_scale, weight_scale = ctx.required(3), ctx.required(4)
    dtype = input_scale.dtype
    scale = ctx.value("Mul", [input_scale, weight_scale])
    projected = ctx.value("Mul", [ctx.value("Cast", [product], {"dtype": dtype}), scale])
    projected = ctx.value("Add", [projected, ctx.required(2)])
    return self_attention(ctx, projected, ctx.input(5), ctx.input(8), None)


# -- QEmbedLayerNormalization -----------------------------------------------------------

@translator("QEmbedLayerNormalization", domain=_MS)
def qembed_layer_normalization(ctx: NodeContext) -> Outputs:
    """``QEmbedLayerNormalization``: ``EmbedLayerNormalization`` over the dequantized word,
    position and segment tables, gamma and beta (scales at inputs 8-12, zero points at
    13-17)."""
    tables: list[Optional[Value]] = []
    for index in range(2, 7):
        table = ctx.input(index)
        if table is None:
            tables.append(None)
            continue
        tables.append(dequantized(ctx, table, ctx.required(index + 6), ctx.input(index + 11)))
    if tables[0] is None or tables[1] is None or tables[3] is None:
        raise ctx.unsupported("the word and position tables and gamma are required")
    inputs = [ctx.required(0), ctx.input(1), *tables, ctx.input(7)]
    outputs = list(_as_onnx(ctx, "ms:EmbedLayerNormalization", inputs,
                            {"epsilon": ctx.attr("epsilon", 1e-12)}))
    return outputs[:2]



# -- GatherBlockQuantized: a block-quantized constant table -----------------------------

def _blocks_expanded(values: np.ndarray, axis: int, block: int, size: int) -> np.ndarray:
    """Per-block ``values`` repeated ``block`` times along ``axis`` and cut to ``size``."""
    return np.take(np.repeat(values, block, axis=axis), np.arange(size), axis=axis)


def block_dequantized(ctx: NodeContext, data: np.ndarray, scales: np.ndarray,
                      zero_points: Optional[np.ndarray]) -> np.ndarray:
    """The float table of a ``GatherBlockQuantized``: (data - zero point) * scale, block by
    block along ``quantize_axis``; uint8 data of 2 or 4 bits is packed along its last axis."""
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size", 128))
    packed = data.dtype == np.uint8 and bits < 8
    if data.dtype == np.uint8 and bits not in (2, 4, 8):
        raise ctx.unsupported(f"bits={bits} is not supported for uint8 data (2, 4 and 8 are)")
    if packed:
        data = unpack_bits(data, bits, data.shape[-1] * (8 // bits))
    axis = int(ctx.attr("quantize_axis", 1)) % data.ndim
    size = data.shape[axis]
    block = block or size
    if zero_points is None:
        zero = np.float32(1 << (bits - 1)) if data.dtype == np.uint8 else np.float32(0)
    else:
        if packed:
            zero_points = unpack_bits(zero_points, bits, scales.shape[-1])
        zero = _blocks_expanded(zero_points.astype(np.float32), axis, block, size)
    scale = _blocks_expanded(scales.astype(np.float32), axis, block, size)
    return ((data.astype(np.float32) - zero) * scale).astype(scales.dtype)


@translator("GatherBlockQuantized", domain=_MS)
def gather_block_quantized(ctx: NodeContext) -> Outputs:
    """``GatherBlockQuantized``: ``Gather`` from a block-quantized table, which (with its
    scales and zero points) must be constant and is dequantized once, here. onnxruntime
    gives zeros for an out-of-range index; GE's ``Gather`` refuses one."""
    arrays = [ctx.constant_input(i) for i in (0, 2, 3)]
    if arrays[0] is None or arrays[1] is None or (ctx.input(3) is not None and arrays[2] is None):
        raise ctx.unsupported("the quantized table, scales and zero points must be constants")
    assert arrays[0] is not None and arrays[1] is not None
    table = ctx.const(block_dequantized(ctx, arrays[0], arrays[1], arrays[2]))
    return [ctx.value("Gather", [table, ctx.required(1)],
                      {"axis": int(ctx.attr("gather_axis", 0))})]


# -- MatMulBnb4: FP4 / NF4 weights (bitsandbytes' formats) ------------------------------

# The 16 values a 4-bit code stands for, before its block's absmax scales them.
_FP4_VALUES = np.array([0.0, 0.0052083333, 0.6666667, 1.0, 0.33333334, 0.5, 0.16666667, 0.25,
                        -0.0, -0.0052083333, -0.6666667, -1.0, -0.33333334, -0.5, -0.16666667,
                        -0.25], np.float32)
_NF4_VALUES = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                        -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                        0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                        0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                        0.7229568362236023, 1.0], np.float32)


def bnb4_weights(ctx: NodeContext, packed: np.ndarray, absmax: np.ndarray) -> np.ndarray:
    """The float [N, K] weight of a ``MatMulBnb4``: codes two to a byte (the first in the
    high nibble), each block of ``block_size`` codes scaled by its absmax."""
    n, k, block = (count_attr(ctx, key) for key in ("N", "K", "block_size"))
    quant_type = ctx.attr("quant_type")
    if quant_type not in (0, 1):
        raise ctx.unsupported(f"quant_type {quant_type!r} is not FP4 (0) or NF4 (1)")
    if packed.size * 2 < n * k or absmax.size * block < n * k:
        raise ctx.unsupported(f"B ({packed.size} bytes) or absmax ({absmax.size} blocks) is "
                              f"too small for an [{n}, {k}] weight")
    codes = np.stack([packed >> 4, packed & 15], axis=-1).reshape(-1)[:n * k]
    values = (_FP4_VALUES, _NF4_VALUES)[quant_type][codes]
    scales = np.repeat(absmax.astype(np.float32), block)[:n * k]
    return (values * scales).reshape(n, k).astype(absmax.dtype)


@translator("MatMulBnb4", domain=_MS)
def matmul_bnb4(ctx: NodeContext) -> Outputs:
    """``MatMulBnb4``: A @ dequantized(B)^T, B [N, K] and its absmax being constants
    (weights), dequantized once, here. ``transB=0`` (the training-time form, which
    onnxruntime's CPU kernel does not compute correctly) is refused."""
    if not ctx.attr("transB", 1):
        raise ctx.unsupported("transB=0 is not supported")
    packed, absmax = ctx.constant_input(1), ctx.constant_input(2)
    if packed is None or absmax is None:
        raise ctx.unsupported("the quantized weight and its absmax must be constants")
    weights = np.ascontiguousarray(bnb4_weights(ctx, packed, absmax).T)
    return [ctx.value("MatMul", [ctx.required(0), ctx.const(weights)])]
