"""Recurrent sequence mixers of linear-attention and state-space models:
LinearAttention (linear, gated, delta and gated-delta rules, as in Gated DeltaNet)
and CausalConvWithState (the depthwise causal convolution of Mamba and Gated
DeltaNet blocks, with its carry state for incremental decoding).

Both keep an explicit state: ``past_state`` in, ``present_state`` out, so a decoder
runs one step (T = 1) or a whole prompt (T > 1) through the same op. Kernels run in
float32 (float64 stays float64); the recurrence loops over time steps only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ge.ir import TensorDesc
from ge.ir.tensor import Dim, is_static_dim, num_elements
from ge.ops.attention import compute_dtype, heads_first, heads_last, split_dim
from ge.ops.elementwise import FLOATS
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    register_op,
)
from ge.ops.shape_utils import dims_equal

UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")
ACTIVATIONS = ("none", "silu", "swish")


# -- LinearAttention --------------------------------------------------------------------

def _check_rule_inputs(ctx: InferenceContext) -> None:
    rule = ctx.attr("update_rule")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    for index, name, needed in ((4, "decay", gated), (5, "beta", delta)):
        if ctx.has_input(index) != needed:
            verb = "needs" if needed else "takes no"
            raise ctx.fail(f"update_rule {rule!r} {verb} the {name} input")
        if needed:
            ctx.require_rank(index, 3)


def _infer_linear_attention(ctx: InferenceContext) -> Sequence[TensorDesc]:
    for index in range(6):
        if ctx.has_input(index):
            ctx.require_dtypes(index, FLOATS)
    for index in range(3):
        ctx.require_rank(index, 3)
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise ctx.fail(f"q_num_heads {q_heads} must be a positive multiple of kv_num_heads "
                       f"{kv_heads}")
    _check_rule_inputs(ctx)
    query, value = ctx.shape(0), ctx.shape(2)
    key_size = split_dim(ctx, query[2], q_heads, "query's hidden size")
    value_size = split_dim(ctx, value[2], kv_heads, "value's hidden size")
    state_shape = (query[0], kv_heads, key_size, value_size)
    state_dtype = ctx.dtype(0)
    if ctx.has_input(3):
        ctx.require_rank(3, 4)
        past = ctx.shape(3)
        if not all(dims_equal(a, b) for a, b in zip(past, state_shape)):
            raise ctx.fail(f"past_state {list(past)} must be [batch, kv_num_heads, d_k, d_v] "
                           f"= {list(state_shape)}")
        state_dtype = ctx.dtype(3)
    hidden: Dim = value_size * q_heads if isinstance(value_size, int) and value_size >= 0 \
        else -1
    return [TensorDesc((query[0], query[1], hidden), ctx.dtype(0)),
            TensorDesc(state_shape, state_dtype)]


def _linear_attention_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    steps = ctx.shape(0)[1]
    per_step = num_elements(outputs[1].shape) * 6
    flops = per_step * (steps if isinstance(steps, int) and steps > 0 else 1)
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, read + sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs))


def _per_head(x: np.ndarray, heads: int, size: int, work: np.dtype) -> np.ndarray:
    """A ``[B, T, heads*size]`` or ``[B, T, heads]`` input as ``[B, heads, T, size|1]``."""
    batch, steps, last = x.shape
    if last == heads * size:
        return heads_first(x, heads).astype(work)
    if last == heads or last == 1:
        return x.reshape(batch, steps, last, 1).transpose(0, 2, 1, 3).astype(work)
    raise ValueError(f"last dimension {last} must be {heads * size}, {heads} or 1")


@register_op(
    "LinearAttention",
    inputs=["query", "key", "value", Input("past_state", optional=True),
            Input("decay", optional=True, doc="log-space gate g_t (gated rules)"),
            Input("beta", optional=True, doc="update rate (delta rules)")],
    outputs=("output", "present_state"),
    attrs=[Attr("q_num_heads", AttrType.INT, REQUIRED),
           Attr("kv_num_heads", AttrType.INT, REQUIRED),
           Attr("update_rule", AttrType.STRING, "gated_delta", choices=UPDATE_RULES),
           Attr("scale", AttrType.FLOAT, 0.0, doc="0: 1 / sqrt(d_k)"),
           Attr("chunk_size", AttrType.INT, 64, doc="a tuning hint; no effect on results")],
    infer=_infer_linear_attention,
    cost=_linear_attention_cost,
)
def linear_attention_kernel(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                            past_state: Optional[np.ndarray] = None,
                            decay: Optional[np.ndarray] = None,
                            beta: Optional[np.ndarray] = None, *, q_num_heads: int,
                            kv_num_heads: int, update_rule: str, scale: float,
                            chunk_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(output, present_state): per step t, with state S [B, Hkv, d_k, d_v],

    S = exp(g_t) * S (gated rules); v_t = beta_t * (v_t - S^T k_t) (delta rules);
    S = S + k_t v_t^T; o_t = scale * q_t^T S. Query head h reads state h // (Hq/Hkv).
    """
    work = compute_dtype(query.dtype)
    key_size = query.shape[2] // q_num_heads
    value_size = value.shape[2] // kv_num_heads
    q = heads_first(query, q_num_heads).astype(work)
    batch, _, steps, _ = q.shape
    q = q.reshape(batch, kv_num_heads, q_num_heads // kv_num_heads, steps, key_size)
    k = heads_first(key, kv_num_heads).astype(work)
    v = heads_first(value, kv_num_heads).astype(work)
    gate = None if decay is None else np.exp(_per_head(decay, kv_num_heads, key_size, work))
    rate = None if beta is None else _per_head(beta, kv_num_heads, 1, work)
    state = np.zeros((batch, kv_num_heads, key_size, value_size), work) \
        if past_state is None else past_state.astype(work)
    factor = work.type(scale if scale else 1.0 / np.sqrt(key_size))
    outputs = np.empty((batch, kv_num_heads, q.shape[2], steps, value_size), work)
    for t in range(steps):
        if gate is not None:
            state = state * gate[:, :, t, :, None]
        update = v[:, :, t]
        if rate is not None:
            recalled = np.einsum("bhkv,bhk->bhv", state, k[:, :, t])
            update = rate[:, :, t] * (update - recalled)
        state = state + k[:, :, t, :, None] * update[:, :, None, :]
        outputs[:, :, :, t] = factor * np.einsum("bhgk,bhkv->bhgv", q[:, :, :, t], state)
    output = heads_last(outputs.reshape(batch, q_num_heads, steps, value_size))
    state_dtype = query.dtype if past_state is None else past_state.dtype
    return output.astype(query.dtype), state.astype(state_dtype)


# -- CausalConvWithState ----------------------------------------------------------------

def _infer_causal_conv(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1, 2, 3)
    ctx.require_dtypes(0, FLOATS)
    ctx.require_rank(0, 3)
    ctx.require_rank(1, 3)
    batch, channels, _ = ctx.shape(0)
    weight = ctx.shape(1)
    if not dims_equal(weight[0], channels) or not dims_equal(weight[1], 1):
        raise ctx.fail(f"weight {list(weight)} must be [channels, 1, k] with channels = "
                       f"{channels}")
    carried = weight[2] - 1 if is_static_dim(weight[2]) and isinstance(weight[2], int) else -1
    if ctx.has_input(2):
        ctx.require_rank(2, 1)
        if not dims_equal(ctx.shape(2)[0], channels):
            raise ctx.fail(f"bias {list(ctx.shape(2))} must have {channels} elements")
    state = (batch, channels, carried)
    if ctx.has_input(3):
        ctx.require_rank(3, 3)
        if not all(dims_equal(a, b) for a, b in zip(ctx.shape(3), state)):
            raise ctx.fail(f"past_state {list(ctx.shape(3))} must be [batch, channels, k - 1] "
                           f"= {list(state)}")
    return [TensorDesc(ctx.shape(0), dtype), TensorDesc(state, dtype)]


def _causal_conv_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    taps = ctx.shape(1)[2]
    flops = num_elements(outputs[0].shape) * 2 * (taps if isinstance(taps, int) and taps > 0
                                                   else 1)
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, read + sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs))


@register_op(
    "CausalConvWithState",
    inputs=["input", "weight", Input("bias", optional=True),
            Input("past_state", optional=True, doc="[B, C, k - 1]; zeros when absent")],
    outputs=("output", "present_state"),
    attrs=[Attr("activation", AttrType.STRING, "none", choices=ACTIVATIONS,
                doc="silu (= swish): y = y * sigmoid(y) after the bias")],
    infer=_infer_causal_conv,
    cost=_causal_conv_cost,
)
def causal_conv_with_state_kernel(x: np.ndarray, weight: np.ndarray,
                                  bias: Optional[np.ndarray] = None,
                                  past_state: Optional[np.ndarray] = None, *,
                                  activation: str) -> tuple[np.ndarray, np.ndarray]:
    """(output, present_state): a depthwise 1-D convolution over
    ``concat(past_state, input)`` (length axis), each output seeing only its own and
    earlier positions; present_state holds the last ``k - 1`` positions of that concat."""
    batch, channels, _ = x.shape
    taps = weight.shape[2]
    if past_state is None:
        past_state = np.zeros((batch, channels, taps - 1), x.dtype)
    padded = np.concatenate([past_state, x], axis=2)
    work = compute_dtype(x.dtype)
    windows = sliding_window_view(padded.astype(work), taps, axis=2)  # [B, C, L, k]
    result = np.einsum("bclk,ck->bcl", windows, weight[:, 0, :].astype(work))
    if bias is not None:
        result = result + bias.astype(work)[:, None]
    if activation in ("silu", "swish"):
        result = result * (0.5 * (1.0 + np.tanh(0.5 * result)))
    present = padded[:, :, padded.shape[2] - (taps - 1):]
    return result.astype(x.dtype), np.ascontiguousarray(present)
