"""Translators for onnxruntime's ``com.microsoft`` contrib ops (fusions its tools emit).

Each becomes registry ops: the fused convolution, Gemm and MatMul forms are the
float op followed by their activation; the GELU family, the skip and simplified
layer normalizations and the contrib ``BiasAdd`` are short elementwise and
reduction chains; ``EmbedLayerNormalization`` is gathers, a sum and ONNX's
LayerNormalization. ``Attention`` and ``MultiHeadAttention`` are in
``ops_contrib_attention.py`` (with ``RotaryEmbedding``, ``GroupQueryAttention`` and
``DecoderMaskedMultiHeadAttention``);
the quantized contrib ops are in ``ops_quant.py`` and ``ops_contrib_quant.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.frontends.onnx import (  # noqa: F401 - each registers translators
    ops_contrib_attention,
    ops_contrib_quant,
)
from ge.frontends.onnx.context import NodeContext, translator
from ge.frontends.onnx.ops_quant import delegate
from ge.ir import DataType, Value
from ge.ops import get_schema, has_op

__all__ = ["apply_activation", "gelu", "scalar"]

Outputs = Sequence[Optional[Value]]
_MS = "com.microsoft"



def scalar(ctx: NodeContext, number: float, like: Value) -> Value:
    """A scalar constant of ``like``'s dtype."""
    return ctx.const(np.asarray(number, like.dtype.np_dtype))


# -- activations ------------------------------------------------------------------------

def apply_activation(ctx: NodeContext, x: Value, name: str, params: Sequence[float]) -> Value:
    """``x`` through the activation onnxruntime's fused ops name, with its parameters."""
    if name in ("Relu", "Tanh", "Sigmoid"):
        return ctx.value(name, [x])
    if name == "LeakyRelu":
        return ctx.value("LeakyRelu", [x], {"alpha": params[0] if params else 0.01})
    if name == "HardSigmoid":
        alpha, beta = (list(params) + [0.2, 0.5][len(params):])[:2]
        return ctx.value("HardSigmoid", [x], {"alpha": alpha, "beta": beta})
    if name == "Clip":
        low, high = (list(params) + [-np.inf, np.inf][len(params):])[:2]
        return ctx.value("Clip", [x, scalar(ctx, low, x), scalar(ctx, high, x)])
    if name in ("", "Identity"):
        return x
    raise ctx.unsupported(f"activation {name!r} is not supported")


@translator("FusedConv", domain=_MS)
def fused_conv(ctx: NodeContext) -> Outputs:
    """``FusedConv``: activation(Conv(X, W, B) + Z)."""
    attrs = {k: v for k, v in ctx.attrs.items() if k not in ("activation", "activation_params")}
    result = delegate(ctx, "Conv", ctx.inputs[:3], attrs)[0]
    assert result is not None
    if ctx.input(3) is not None:
        result = ctx.value("Add", [result, ctx.required(3)])
    return [apply_activation(ctx, result, ctx.attr("activation", ""),
                             ctx.attr("activation_params", []))]


@translator("FusedGemm", domain=_MS)
def fused_gemm(ctx: NodeContext) -> Outputs:
    """``FusedGemm``: activation(Gemm(A, B, C))."""
    attrs: dict[str, Any] = {k: ctx.attrs[k] for k in ("alpha", "beta", "transA", "transB")
                             if k in ctx.attrs}
    result = ctx.value("Gemm", ctx.inputs[:3], attrs)
    name = ctx.attr("activation", "")
    params = [ctx.attrs[k] for k in ("activation_alpha", "activation_beta") if k in ctx.attrs]
    return [apply_activation(ctx, result, name, params)]


def _batch_transposed(ctx: NodeContext, x: Value, transpose: bool) -> Value:
    """``x`` [b, d1, ..., M, K] with its first axis moved just before the last (and the
    matrix transposed too when ``transpose``), as onnxruntime's transBatch does."""
    rank = len(x.shape)
    if rank < 3:
        raise ctx.unsupported("transBatch needs operands of rank >= 3")
    perm = list(range(1, rank - 1)) + ([rank - 1, 0] if transpose else [0, rank - 1])
    return ctx.value("Transpose", [x], {"perm": perm})


@translator("FusedMatMul", domain=_MS)
def fused_matmul(ctx: NodeContext) -> Outputs:
    """``FusedMatMul``: alpha * A' @ B' with optional (batch) transposes of A and B."""
    a, b = ctx.required(0), ctx.required(1)
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if ctx.attr("transBatchA", 0):
        a, trans_a = _batch_transposed(ctx, a, trans_a), False
    if ctx.attr("transBatchB", 0):
        b, trans_b = _batch_transposed(ctx, b, trans_b), False
    trans_a = trans_a and len(a.shape) >= 2
    trans_b = trans_b and len(b.shape) >= 2
    result = ctx.value("MatMul", [a, b], {"transpose_a": trans_a, "transpose_b": trans_b})
    alpha = float(ctx.attr("alpha", 1.0))
    return [result if alpha == 1.0 else ctx.value("Mul", [result, scalar(ctx, alpha, result)])]


# -- the GELU family --------------------------------------------------------------------

def _registry_gelu() -> bool:
    """True when the registry has ONNX's Gelu (with its ``approximate`` attribute)."""
    return has_op("Gelu") and "approximate" in get_schema("Gelu").attrs


def gelu(ctx: NodeContext, x: Value) -> Value:
    """x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))."""
    if _registry_gelu():
        return ctx.value("Gelu", [x], {"approximate": "none"})
    scaled = ctx.value("Mul", [x, scalar(ctx, 1 / math.sqrt(2), x)])
    one_plus = ctx.value("Add", [ctx.value("Erf", [scaled]), scalar(ctx, 1.0, x)])
    return ctx.value("Mul", [ctx.value("Mul", [x, scalar(ctx, 0.5, x)]), one_plus])


def _tanh_gelu(ctx: NodeContext, x: Value) -> Value:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    if _registry_gelu():
        return ctx.value("Gelu", [x], {"approximate": "tanh"})
    cube = ctx.value("Mul", [ctx.value("Mul", [x, x]), x])
    inner = ctx.value("Add", [x, ctx.value("Mul", [cube, scalar(ctx, 0.044715, x)])])
    tanh = ctx.value("Tanh", [ctx.value("Mul", [inner, scalar(ctx, math.sqrt(2 / math.pi), x)])])
    one_plus = ctx.value("Add", [tanh, scalar(ctx, 1.0, x)])
    return ctx.value("Mul", [ctx.value("Mul", [x, scalar(ctx, 0.5, x)]), one_plus])


@translator("Gelu", domain=_MS)
def contrib_gelu(ctx: NodeContext) -> Outputs:
    """``Gelu`` (contrib): the exact, erf-based GELU."""
    return [gelu(ctx, ctx.required(0))]


@translator("BiasGelu", domain=_MS)
def bias_gelu(ctx: NodeContext) -> Outputs:
    """``BiasGelu``: GELU(A + B)."""
    return [gelu(ctx, ctx.value("Add", [ctx.required(0), ctx.required(1)]))]


@translator("FastGelu", domain=_MS)
def fast_gelu(ctx: NodeContext) -> Outputs:
    """``FastGelu``: the tanh approximation of GELU(X + bias)."""
    x = ctx.required(0)
    if ctx.input(1) is not None:
        x = ctx.value("Add", [x, ctx.required(1)])
    return [_tanh_gelu(ctx, x)]


@translator("QuickGelu", domain=_MS)
def quick_gelu(ctx: NodeContext) -> Outputs:
    """``QuickGelu``: x * sigmoid(alpha * x), alpha = 1.702 by default."""
    x = ctx.required(0)
    scaled = ctx.value("Mul", [x, scalar(ctx, float(ctx.attr("alpha", 1.702)), x)])
    return [ctx.value("Mul", [x, ctx.value("Sigmoid", [scaled])])]


@translator("BiasAdd", domain=_MS)
def contrib_bias_add(ctx: NodeContext) -> Outputs:
    """``BiasAdd`` (contrib): X + bias + skip."""
    total = ctx.value("Add", [ctx.required(0), ctx.required(1)])
    return [ctx.value("Add", [total, ctx.required(2)])]


# -- layer normalizations ---------------------------------------------------------------

def _axes_from(ctx: NodeContext, x: Value, axis: int) -> Value:
    rank = len(x.shape)
    first = axis + rank if axis < 0 else axis
    return ctx.const(np.arange(first, rank, dtype=np.int64))


def _statistics(ctx: NodeContext, x: Value, axis: int, epsilon: float, centred: bool
                ) -> tuple[Value, Value]:
    """(mean, 1 / sqrt(variance + epsilon)) over axes [axis, rank), kept as size-1 dims;
    the 'variance' is the mean square when not ``centred`` (RMS normalization)."""
    axes = _axes_from(ctx, x, axis)
    mean = ctx.value("ReduceMean", [x, axes], {"keepdims": 1})
    deviation = ctx.value("Sub", [x, mean]) if centred else x
    variance = ctx.value("ReduceMean", [ctx.value("Mul", [deviation, deviation]), axes],
                         {"keepdims": 1})
    root = ctx.value("Sqrt", [ctx.value("Add", [variance, scalar(ctx, epsilon, x)])])
    return mean, ctx.value("Reciprocal", [root])


def _as_float(ctx: NodeContext, value: Value, dtype: DataType) -> Value:
    return value if value.dtype is dtype else ctx.value("Cast", [value], {"dtype": dtype})


def _rms_norm(ctx: NodeContext, x: Value, scale: Value, axis: int, epsilon: float
              ) -> tuple[Value, Value]:
    """(x / sqrt(mean(x^2) + epsilon) * scale, the inverse RMS), computed in float32."""
    dtype = x.dtype
    wide = _as_float(ctx, x, DataType.DT_FLOAT)
    _, inverse = _statistics(ctx, wide, axis, epsilon, centred=False)
    normalized = _as_float(ctx, ctx.value("Mul", [wide, inverse]), dtype)
    return ctx.value("Mul", [normalized, _as_float(ctx, scale, dtype)]), inverse


def _layer_norm(ctx: NodeContext, x: Value, scale: Value, bias: Optional[Value], axis: int,
                epsilon: float) -> list[Optional[Value]]:
    """[y, mean, inverse std] of a layer normalization; the statistics only when asked."""
    y = ctx.value("LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": epsilon})
    outputs: list[Optional[Value]] = [y, None, None]
    if ctx.wants_output(1) or ctx.wants_output(2):
        wide = _as_float(ctx, x, DataType.DT_FLOAT)
        outputs[1:] = _statistics(ctx, wide, axis, epsilon, centred=True)
    return outputs


@translator("LayerNormalization", domain=_MS)
def contrib_layer_normalization(ctx: NodeContext) -> Outputs:
    """``LayerNormalization`` (contrib form): ONNX's, with its mean and inverse std."""
    return _layer_norm(ctx, ctx.required(0), ctx.required(1), ctx.input(2),
                       int(ctx.attr("axis", -1)), float(ctx.attr("epsilon", 1e-5)))


@translator("SimplifiedLayerNormalization")
@translator("SimplifiedLayerNormalization", domain=_MS)
def simplified_layer_normalization(ctx: NodeContext) -> Outputs:
    """``SimplifiedLayerNormalization`` (RMS norm): x / sqrt(mean(x^2) + eps) * scale."""
    y, inverse = _rms_norm(ctx, ctx.required(0), ctx.required(1),
                           int(ctx.attr("axis", -1)), float(ctx.attr("epsilon", 1e-5)))
    return [y, inverse]


def _skip_sum(ctx: NodeContext) -> Value:
    """input + skip (+ bias): the residual sum the skip normalizations start from."""
    total = ctx.value("Add", [ctx.required(0), ctx.required(1)])
    bias_index = 4 if ctx.op_type == "SkipLayerNormalization" else 3
    bias = ctx.input(bias_index)
    return total if bias is None else ctx.value("Add", [total, bias])


@translator("SkipLayerNormalization", domain=_MS)
def skip_layer_normalization(ctx: NodeContext) -> Outputs:
    """``SkipLayerNormalization``: LayerNorm(input + skip + bias) over the last axis;
    outputs y, mean, inverse std and the sum itself."""
    total = _skip_sum(ctx)
    outputs = _layer_norm(ctx, total, ctx.required(2), ctx.input(3), -1,
                          float(ctx.attr("epsilon", 1e-12)))
    return outputs + [total]


@translator("SkipSimplifiedLayerNormalization", domain=_MS)
def skip_simplified_layer_normalization(ctx: NodeContext) -> Outputs:
    """``SkipSimplifiedLayerNormalization``: RMSNorm(input + skip + bias); outputs y,
    (no mean), inverse RMS and the sum."""
    total = _skip_sum(ctx)
    y, inverse = _rms_norm(ctx, total, ctx.required(2), -1, float(ctx.attr("epsilon", 1e-12)))
    if ctx.wants_output(1):
        raise ctx.unsupported("output 1 (mean) is not defined for the simplified form")
    return [y, None, inverse, total]




# -- EmbedLayerNormalization ------------------------------------------------------------

def _embedding_sum(ctx: NodeContext, ids: Value) -> Value:
    """word[input_ids] + position[position_ids or 0..S-1] (+ segment[segment_ids])."""
    words = ctx.value("Gather", [ctx.required(2), ids], {"axis": 0})
    table = ctx.required(3)
    position_ids = ctx.input(8)
    if position_ids is not None:
        positions = ctx.value("Gather", [table, position_ids], {"axis": 0})
    else:
        length = ctx.value("Shape", [ids], {"start": 1, "end": 2})
        positions = ctx.value("Slice", [table, ctx.const(np.asarray([0], np.int64)), length,
                                        ctx.const(np.asarray([0], np.int64))])
    total = ctx.value("Add", [words, positions])
    if ctx.input(1) is not None and ctx.input(4) is not None:
        segments = ctx.value("Gather", [ctx.required(4), ctx.required(1)], {"axis": 0})
        total = ctx.value("Add", [total, segments])
    return total


@translator("EmbedLayerNormalization", domain=_MS)
def embed_layer_normalization(ctx: NodeContext) -> Outputs:
    """``EmbedLayerNormalization``: LayerNorm of the word, position and segment
    embeddings' sum; the mask index is the number of ones in each mask row."""
    ids = ctx.required(0)
    total = _embedding_sum(ctx, ids)
    y = ctx.value("LayerNormalization", [total, ctx.required(5), ctx.input(6)],
                  {"axis": -1, "epsilon": float(ctx.attr("epsilon", 1e-12))})
    mask_index: Optional[Value] = None
    if ctx.wants_output(1):
        mask = ctx.input(7)
        if mask is None:
            zeros = ctx.value("Mul", [ids, ctx.const(np.asarray(0, ids.dtype.np_dtype))])
            mask = zeros
        counts = ctx.value("ReduceSum", [_as_float(ctx, mask, DataType.DT_INT64),
                                         ctx.const(np.asarray([1], np.int64))], {"keepdims": 0})
        mask_index = ctx.value("Cast", [counts], {"dtype": DataType.DT_INT32})
    return [y, mask_index, total]
