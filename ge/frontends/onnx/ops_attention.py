"""Translators for attention, transformer blocks, resampling and detection ops.

Most of the family maps directly (the registry mirrors ONNX's newest schemas:
RotaryEmbedding, SwiGLU, LinearAttention, CausalConvWithState, AffineGrid,
NonMaxSuppression). Translators cover what older opsets did differently
(Resize-10, Upsample, GridSample-16's mode names, RoiAlign-10's coordinates),
attributes that hold ONNX type codes (``softmax_precision``), and FlexAttention,
whose ``score_mod`` / ``prob_mod`` subgraphs are inlined around the score and
probability tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import onnx

from ge.frontends.onnx.context import NodeContext, direct_translation, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype, to_onnx_dtype
from ge.frontends.onnx.ops_tensor import constant_inputs
from ge.ir import DataType, Value

Outputs = Sequence[Optional[Value]]


def _softmax_precision(ctx: NodeContext) -> None:
    code = ctx.attrs.get("softmax_precision")
    if code is not None:
        ctx.attrs["softmax_precision"] = from_onnx_dtype(
            code, f"ONNX {ctx.op_type} node {ctx.name!r} softmax_precision")


@translator("Attention")
def attention(ctx: NodeContext) -> Outputs:
    """``Attention`` (opsets 23-25); ``softmax_precision`` becomes a GE dtype."""
    _softmax_precision(ctx)
    return direct_translation(ctx)


@translator("RMSNormalization")
def rms_normalization(ctx: NodeContext) -> Outputs:
    """``RMSNormalization``; ``stash_type`` is dropped (GE computes in float32 or wider)."""
    ctx.attrs.pop("stash_type", None)
    return direct_translation(ctx)


# -- resampling -------------------------------------------------------------------------

def _legacy_resize(ctx: NodeContext, scales: Optional[Value]) -> Outputs:
    """Resize-10 and Upsample: asymmetric coordinates, nearest rounds down."""
    mode = str(ctx.attr("mode", "nearest")).lower()
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
    if mode not in ("nearest", "linear"):
        raise ctx.unsupported(f"mode {mode!r} is not supported (nearest and linear are)")
    attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    return ctx.op("Resize", [ctx.input(0), None, scales], attrs).outputs


@translator("Resize")
def resize(ctx: NodeContext) -> Outputs:
    """``Resize``; opset 10 took (X, scales) and behaved as Upsample; computable scales
    and sizes become constant."""
    if ctx.opset < 11:
        constant_inputs(ctx, [1])
        return _legacy_resize(ctx, ctx.input(1))
    constant_inputs(ctx, [1, 2, 3])
    return direct_translation(ctx)


@translator("Upsample")
def upsample(ctx: NodeContext) -> Outputs:
    """Deprecated ``Upsample`` becomes ``Resize`` (scales an attribute before opset 9)."""
    scales: Optional[Value]
    if "scales" in ctx.attrs:
        scales = ctx.const(np.asarray(ctx.attrs.pop("scales"), np.float32))
    elif "height_scale" in ctx.attrs:  # opset 1
        x = ctx.input(0)
        assert x is not None
        ratios = [1.0] * (x.rank - 2) + [ctx.attr("height_scale"), ctx.attr("width_scale")]
        scales = ctx.const(np.asarray(ratios, np.float32))
    else:
        constant_inputs(ctx, [1])
        scales = ctx.input(1)
    return _legacy_resize(ctx, scales)


@translator("GridSample")
def grid_sample(ctx: NodeContext) -> Outputs:
    """``GridSample``; opset 16 named the modes bilinear and bicubic."""
    mode = ctx.attrs.get("mode")
    if mode is not None:
        ctx.attrs["mode"] = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return direct_translation(ctx)


@translator("RoiAlign")
def roi_align(ctx: NodeContext) -> Outputs:
    """``RoiAlign``; before opset 16 region corners were not shifted by half a pixel."""
    if ctx.opset < 16:
        ctx.attrs.setdefault("coordinate_transformation_mode", "output_half_pixel")
    return direct_translation(ctx)


# -- FlexAttention ----------------------------------------------------------------------

def _typed_input(proto: onnx.GraphProto, value: Value) -> onnx.GraphProto:
    """``proto`` with its first input typed as ``value`` when the model leaves it open."""
    if not proto.input:
        return proto
    tensor_type = proto.input[0].type.tensor_type
    if tensor_type.HasField("shape") and tensor_type.elem_type:
        return proto
    typed = onnx.GraphProto()
    typed.CopyFrom(proto)
    tensor_type = typed.input[0].type.tensor_type
    if not tensor_type.elem_type:
        tensor_type.elem_type = to_onnx_dtype(value.dtype)
    if not tensor_type.HasField("shape"):
        for dim in value.shape:
            entry = tensor_type.shape.dim.add()
            if isinstance(dim, str):
                entry.dim_param = dim
            elif dim >= 0:
                entry.dim_value = dim
    return typed


def _inline(ctx: NodeContext, key: str, value: Value) -> Value:
    """Add the nodes of graph attribute ``key`` to the graph, fed ``value``; its output."""
    if isinstance(ctx.attrs.get(key), onnx.GraphProto):
        ctx.attrs[key] = _typed_input(ctx.attrs[key], value)
    graph, captured = ctx.subgraph(key)
    inputs = graph.inputs
    if len(inputs) != 1 + len(captured):
        raise ctx.unsupported(f"{key} must take exactly one input")
    mapping: dict[int, Value] = {id(inputs[0]): value}
    mapping.update({id(inner): outer for inner, outer in zip(inputs[1:], captured)})
    for node in graph.topological_order():
        if node.op_type == "Data":
            continue
        inputs_here = [None if v is None else mapping[id(v)] for v in node.inputs]
        added = ctx.op(node.op_type, inputs_here, dict(node.attrs))
        mapping.update({id(old): new for old, new in zip(node.outputs, added.outputs)})
    if len(graph.outputs) != 1:
        raise ctx.unsupported(f"{key} must produce exactly one output")
    return mapping[id(graph.outputs[0])]


def _shared_heads(ctx: NodeContext, kv: Value, q_heads: Any) -> Value:
    """K or V with each head repeated for its group of query heads (GQA)."""
    kv_heads, size = kv.shape[1], kv.shape[3]
    if kv_heads == q_heads:
        return kv
    if not all(isinstance(d, int) and d > 0 for d in (kv_heads, q_heads, size)):
        raise ctx.unsupported("grouped-query FlexAttention with modifiers needs static head "
                              "counts and head sizes")
    expanded = ctx.value("Unsqueeze", [kv, ctx.const(np.array([2], np.int64))])
    repeats = np.array([1, 1, q_heads // kv_heads, 1, 1], np.int64)
    expanded = ctx.value("Expand", [expanded, ctx.const(repeats)])
    return ctx.value("Reshape", [expanded, ctx.const(np.array([0, q_heads, -1, size],
                                                              np.int64))])


def _flex_work_dtype(ctx: NodeContext, dtype: DataType) -> DataType:
    code = ctx.attrs.get("softmax_precision")
    if code is not None:
        return from_onnx_dtype(code, f"ONNX FlexAttention node {ctx.name!r}")
    return DataType.DT_DOUBLE if dtype is DataType.DT_DOUBLE else DataType.DT_FLOAT


@translator("FlexAttention", domain="ai.onnx.preview")
def flex_attention(ctx: NodeContext) -> Outputs:
    """``FlexAttention``: registry ``Attention`` without modifiers; with ``score_mod`` /
    ``prob_mod``, MatMul -> score_mod -> Softmax -> prob_mod -> MatMul, the modifiers
    inlined."""
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    assert q is not None and k is not None and v is not None
    if any(t.rank != 4 for t in (q, k, v)):
        raise ctx.unsupported("FlexAttention needs rank-4 Q, K and V")
    if "score_mod" not in ctx.attrs and "prob_mod" not in ctx.attrs:
        _softmax_precision(ctx)
        attrs: dict[str, Any] = {key: ctx.attrs[key] for key in ("scale", "softmax_precision")
                                 if key in ctx.attrs}
        return ctx.op("Attention", [q, k, v], attrs).outputs[:1]
    scale = ctx.attr("scale")
    head = q.shape[3]
    if scale is None:
        if not isinstance(head, int) or head <= 0:
            raise ctx.unsupported("the default scale needs a static head size")
        scale = 1.0 / np.sqrt(head)
    root = ctx.const(np.asarray(np.sqrt(np.float32(scale)), q.dtype.np_dtype))
    k = _shared_heads(ctx, k, q.shape[1])
    v = _shared_heads(ctx, v, q.shape[1])
    scores = ctx.value("MatMul", [ctx.value("Mul", [q, root]), ctx.value("Mul", [k, root])],
                       {"transpose_b": True})
    work = _flex_work_dtype(ctx, q.dtype)
    scores = ctx.value("Cast", [scores], {"dtype": work})
    if "score_mod" in ctx.attrs:
        scores = _inline(ctx, "score_mod", scores)
    probs = ctx.value("Softmax", [scores], {"axis": -1})
    if "prob_mod" in ctx.attrs:
        probs = _inline(ctx, "prob_mod", probs)
    out = ctx.value("MatMul", [probs, ctx.value("Cast", [v], {"dtype": work})])
    return [ctx.value("Cast", [out], {"dtype": v.dtype})]
