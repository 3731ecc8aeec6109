"""Translators for onnxruntime's attention contrib ops.

``Attention`` and ``MultiHeadAttention`` become registry ops: the projections
are ``MatMul`` and ``Add``, the heads are split with ``Reshape`` and ``Transpose``
into ``[batch, heads, sequence, head_size]``, and the core is
``softmax(Q K^T * scale + bias + mask) V``. Masks become additive terms: a raw 0/1
mask, key lengths (``[batch]``) or start and end positions (``[2 * batch]``) add
``mask_filter_value`` (default -10000) where a key is hidden; ``unidirectional``
hides the keys after each query's position.
Past keys and values are concatenated before the new ones and returned as the
present state. ``QAttention`` (``ops_contrib_quant.py``) shares ``self_attention``.

The contrib ``RotaryEmbedding`` is the registry's, with a start offset turned into
position ids; ``GroupQueryAttention`` rotates Q and K (optionally), writes the new
K/V into the cache after each batch row's past tokens and runs the registry's
``Attention`` (which groups query heads over fewer K/V heads) under a boolean mask
built from ``seqlens_k``.
``DecoderMaskedMultiHeadAttention`` writes one step's K/V into the shared caches
and attends to the rows written so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, translator
from ge.ir import DataType, Value
from ge.ir.tensor import Dim, is_static_dim
from ge.ops import has_op

__all__ = ["AttentionCore", "count_attr", "split_heads", "merge_heads", "rotated",
           "self_attention"]

Outputs = Sequence[Optional[Value]]
_MS = "com.microsoft"


def _const_ints(ctx: NodeContext, values: Sequence[int]) -> Value:
    return ctx.const(np.asarray(values, np.int64))



def split_heads(ctx: NodeContext, x: Value, heads: int) -> Value:
    """[B, S, heads * H] as [B, heads, S, H]."""
    shaped = ctx.value("Reshape", [x, _const_ints(ctx, [0, 0, heads, -1])])
    return ctx.value("Transpose", [shaped], {"perm": [0, 2, 1, 3]})


def merge_heads(ctx: NodeContext, x: Value) -> Value:
    """[B, heads, S, H] as [B, S, heads * H]."""
    moved = ctx.value("Transpose", [x], {"perm": [0, 2, 1, 3]})
    return ctx.value("Reshape", [moved, _const_ints(ctx, [0, 0, -1])])


def _positions(ctx: NodeContext, length: Dim, like: Value, axis: int) -> Value:
    """0, 1, ..., length - 1 as int64 (``length`` is ``like``'s dimension ``axis``)."""
    if is_static_dim(length):
        assert isinstance(length, int)
        return ctx.const(np.arange(length, dtype=np.int64))
    if not has_op("Range"):
        raise ctx.unsupported("a key-length mask over a dynamic sequence length needs Range")
    size = ctx.value("Shape", [like], {"start": axis, "end": axis + 1 if axis != -1 else None})
    end = ctx.value("Squeeze", [size, _const_ints(ctx, [0])])
    return ctx.value("Range", [ctx.const(np.asarray(0, np.int64)), end,
                               ctx.const(np.asarray(1, np.int64))])


@dataclass
class AttentionCore:
    """softmax(Q K^T * scale + additive terms) V over [B, N, S, H] tensors."""

    ctx: NodeContext
    filter_value: float
    dtype: DataType

    def constant(self, number: float) -> Value:
        """A scalar of the attention's float type."""
        return self.ctx.const(np.asarray(number, self.dtype.np_dtype))

    def hidden(self, keep: Value) -> Value:
        """A bool ``keep`` mask as an additive term: 0 where kept, filter_value elsewhere."""
        ctx = self.ctx
        zero, hide = self.constant(0.0), self.constant(self.filter_value)
        return ctx.value("Where", [keep, zero, hide])

    def raw_mask(self, mask: Value) -> Value:
        """A 0/1 mask [B, T] (or [B, S, T]) as an additive [B, 1, 1, T] ([B, 1, S, T]) term."""
        ctx = self.ctx
        keep = ctx.value("Greater", [mask, ctx.const(np.asarray(0, mask.dtype.np_dtype))])
        axes = [1, 2] if len(mask.shape) == 2 else [1]
        return ctx.value("Unsqueeze", [self.hidden(keep), _const_ints(ctx, axes)])

    def key_range(self, mask: Value, keys: Value, batch_first: bool = True) -> Value:
        """[B] end positions, or [2B] end then start positions, as an additive term."""
        ctx = self.ctx
        positions = _positions(ctx, keys.shape[2], keys, 2)
        column = ctx.value("Cast", [mask], {"dtype": DataType.DT_INT64})
        batch = keys.shape[0]
        if is_static_dim(mask.shape[0]) and is_static_dim(batch) and mask.shape[0] == 2 * batch:
            assert isinstance(batch, int)
            ends, starts = ctx.op("Split", [column, _const_ints(ctx, [batch, batch])],
                                  {"axis": 0}).outputs
            ends, starts = (ctx.value("Unsqueeze", [v, _const_ints(ctx, [1])])
                            for v in (ends, starts))
            keep = ctx.value("Less", [positions, ends])
            after = ctx.value("Less", [ctx.value("Sub", [starts, _const_ints(ctx, [1])]),
                                       positions])
            keep = ctx.value("Where", [keep, after, keep])
        else:
            ends = ctx.value("Unsqueeze", [column, _const_ints(ctx, [1])])
            keep = ctx.value("Less", [positions, ends])
        return ctx.value("Unsqueeze", [self.hidden(keep), _const_ints(ctx, [1, 2])])

    def causal(self, queries: Value, keys: Value) -> Value:
        """Hide key j from query i when j > i + (T - S): an additive [S, T] term."""
        ctx = self.ctx
        rows = _positions(ctx, queries.shape[2], queries, 2)
        cols = _positions(ctx, keys.shape[2], keys, 2)
        shift = ctx.value("Sub", [ctx.value("Shape", [keys], {"start": 2, "end": 3}),
                                  ctx.value("Shape", [queries], {"start": 2, "end": 3})])
        last = ctx.value("Add", [ctx.value("Unsqueeze", [rows, _const_ints(ctx, [1])]), shift])
        keep = ctx.value("Less", [cols, ctx.value("Add", [last, _const_ints(ctx, [1])])])
        return self.hidden(keep)

    def attend(self, q: Value, k: Value, v: Value, scale: float, terms: Sequence[Value]
               ) -> Value:
        """The attention output [B, N, S, Hv]."""
        ctx = self.ctx
        scores = ctx.value("MatMul", [q, k], {"transpose_b": True})
        scores = ctx.value("Mul", [scores, self.constant(scale)])
        for term in terms:
            scores = ctx.value("Add", [scores, term])
        probabilities = ctx.value("Softmax", [scores], {"axis": -1})
        return ctx.value("MatMul", [probabilities, v])


def _head_size(ctx: NodeContext, width: Dim, heads: int) -> int:
    if not is_static_dim(width):
        raise ctx.unsupported("the hidden size must be static to find the head size")
    assert isinstance(width, int)
    if width % heads:
        raise ctx.unsupported(f"hidden size {width} does not divide into {heads} heads")
    return width // heads


def count_attr(ctx: NodeContext, key: str) -> int:
    """A required positive integer attribute (``num_heads``...), or an error naming the node."""
    value = ctx.attr(key)
    if not isinstance(value, int) or value <= 0:
        raise ctx.unsupported(f"attribute {key!r} must be a positive integer, not {value!r}")
    return value


def _scale(ctx: NodeContext, head_size: int) -> float:
    given = ctx.attr("scale")
    return float(given) if given else 1.0 / float(np.sqrt(head_size))


def _refuse_attributes(ctx: NodeContext, keys: Sequence[str]) -> None:
    for key in keys:
        if ctx.attr(key):
            raise ctx.unsupported(f"attribute {key!r} is not supported")


# -- Attention (com.microsoft) ----------------------------------------------------------

def _split_projection(ctx: NodeContext, projected: Value) -> list[Value]:
    """Q, K and V from the packed projection [B, S, Dq + Dk + Dv]."""
    width = projected.shape[-1]
    sizes = ctx.attr("qkv_hidden_sizes")
    if not sizes:
        if not is_static_dim(width):
            raise ctx.unsupported("the packed weights need a static width")
        assert isinstance(width, int)
        sizes = [width // 3] * 3
    return list(ctx.op("Split", [projected, _const_ints(ctx, sizes)], {"axis": -1}).outputs)


def _with_past(ctx: NodeContext, past: Optional[Value], k: Value, v: Value
               ) -> tuple[Value, Value, Optional[Value]]:
    """K and V after the past [2, B, N, P, H] state, and the present state."""
    if past is None:
        present = None
        if ctx.wants_output(1):
            present = ctx.value("Concat", [ctx.value("Unsqueeze", [t, _const_ints(ctx, [0])])
                                           for t in (k, v)], {"axis": 0})
        return k, v, present
    index = [ctx.const(np.asarray(i, np.int64)) for i in (0, 1)]
    past_k, past_v = (ctx.value("Gather", [past, i], {"axis": 0}) for i in index)
    k = ctx.value("Concat", [past_k, k], {"axis": 2})
    v = ctx.value("Concat", [past_v, v], {"axis": 2})
    present = ctx.value("Concat", [ctx.value("Unsqueeze", [t, _const_ints(ctx, [0])])
                                   for t in (k, v)], {"axis": 0})
    return k, v, present


def _mask_terms(core: AttentionCore, mask: Optional[Value], q: Value, k: Value,
                bias: Optional[Value], causal: bool) -> list[Value]:
    ctx = core.ctx
    terms = []
    if bias is not None:
        terms.append(bias)
    if mask is not None:
        if len(mask.shape) == 1:
            terms.append(core.key_range(mask, k))
        elif len(mask.shape) in (2, 3):
            terms.append(core.raw_mask(mask))
        else:
            raise ctx.unsupported(f"a mask of rank {len(mask.shape)} is not supported")
    if causal:
        terms.append(core.causal(q, k))
    return terms


def self_attention(ctx: NodeContext, projected: Value, mask: Optional[Value],
                   past: Optional[Value], bias: Optional[Value]) -> list[Optional[Value]]:
    """[output, present] of onnxruntime's ``Attention`` from the packed QKV projection
    [B, S, Dq + Dk + Dv]; ``QAttention`` shares it."""
    _refuse_attributes(ctx, ("do_rotary", "past_present_share_buffer"))
    heads = count_attr(ctx, "num_heads")
    q, k, v = (split_heads(ctx, t, heads) for t in _split_projection(ctx, projected))
    k, v, present = _with_past(ctx, past, k, v)
    core = AttentionCore(ctx, float(ctx.attr("mask_filter_value", -10000.0)), projected.dtype)
    terms = _mask_terms(core, mask, q, k, bias, bool(ctx.attr("unidirectional", 0)))
    head_size = _head_size(ctx, q.shape[3], 1)
    output = core.attend(q, k, v, _scale(ctx, head_size), terms)
    return [merge_heads(ctx, output), present]


@translator("Attention", domain=_MS)
def attention(ctx: NodeContext) -> Outputs:
    """``Attention``: self-attention with packed QKV weights, masks and a past state."""
    x, weights = ctx.input(0), ctx.input(1)
    if x is None or weights is None:
        raise ctx.unsupported("input and weights are required")
    projected = ctx.value("MatMul", [x, weights])
    bias = ctx.input(2)
    if bias is not None:
        projected = ctx.value("Add", [projected, bias])
    return self_attention(ctx, projected, ctx.input(3), ctx.input(4), ctx.input(5))


# -- MultiHeadAttention -----------------------------------------------------------------

def _split_packed(ctx: NodeContext, packed: Value, parts: int) -> list[Value]:
    """[B, S, N, parts, H] as ``parts`` tensors [B, N, S, H]."""
    pieces = ctx.op("Split", [packed, _const_ints(ctx, [1] * parts)], {"axis": 3}).outputs
    return [ctx.value("Transpose", [ctx.value("Squeeze", [p, _const_ints(ctx, [3])])],
                      {"perm": [0, 2, 1, 3]}) for p in pieces]


def _mha_bias(ctx: NodeContext, query: Value, bias: Optional[Value]) -> list[Optional[Value]]:
    if bias is None:
        return [None, None, None]
    width = query.shape[-1] if len(query.shape) == 3 else None
    if not isinstance(width, int) or width < 0:
        raise ctx.unsupported("a bias needs a 3-D query of static width")
    total = bias.shape[0]
    if not isinstance(total, int) or total < 0:
        raise ctx.unsupported("the bias needs a static length")
    sizes = [width, width, total - 2 * width]
    return list(ctx.op("Split", [bias, _const_ints(ctx, sizes)], {"axis": 0}).outputs)


def _mha_projections(ctx: NodeContext, heads: int) -> tuple[Value, Value, Value, bool]:
    """Q, K, V as [B, N, *, H], and whether K and V were given per head (no past)."""
    query, key, value = ctx.input(0), ctx.input(1), ctx.input(2)
    assert query is not None
    if len(query.shape) == 5:
        q, k, v = _split_packed(ctx, query, 3)
        return q, k, v, False
    biases = _mha_bias(ctx, query, ctx.input(3))

    def project(x: Value, bias: Optional[Value]) -> Value:
        return split_heads(ctx, x if bias is None else ctx.value("Add", [x, bias]), heads)

    q = project(query, biases[0])
    if key is None:
        raise ctx.unsupported("key is required unless the query is packed")
    if len(key.shape) == 5:
        k, v = _split_packed(ctx, key, 2)
        return q, k, v, False
    if value is None:
        raise ctx.unsupported("value is required with a separate key")
    if len(key.shape) == 4:
        return q, key, value, True
    return q, project(key, biases[1]), project(value, biases[2]), False


@translator("MultiHeadAttention", domain=_MS)
def multi_head_attention(ctx: NodeContext) -> Outputs:
    """``MultiHeadAttention``: separate, packed-QKV, packed-KV or per-head K/V forms."""
    if ctx.input(8) is not None or ctx.input(9) is not None or ctx.wants_output(3):
        raise ctx.unsupported("past_sequence_length, cache_indirection and the qk output "
                              "are not supported")
    heads = count_attr(ctx, "num_heads")
    q, k, v, per_head = _mha_projections(ctx, heads)
    past_k, past_v = ctx.input(6), ctx.input(7)
    if past_k is not None and past_v is not None and not per_head:
        k = ctx.value("Concat", [past_k, k], {"axis": 2})
        v = ctx.value("Concat", [past_v, v], {"axis": 2})
    core = AttentionCore(ctx, float(ctx.attr("mask_filter_value", -10000.0)), q.dtype)
    terms = _mask_terms(core, ctx.input(4), q, k, ctx.input(5),
                        bool(ctx.attr("unidirectional", 0)))
    output = core.attend(q, k, v, _scale(ctx, _head_size(ctx, q.shape[3], 1)), terms)
    return [merge_heads(ctx, output), k, v]


# -- RotaryEmbedding (com.microsoft) ----------------------------------------------------

def _sequence_positions(ctx: NodeContext, offsets: Value, like: Value, axis: int) -> Value:
    """[B or 1, S] positions ``offsets[:, None] + 0..S-1``, S being ``like``'s ``axis``."""
    steps = _positions(ctx, like.shape[axis], like, axis)
    column = ctx.value("Unsqueeze", [ctx.value("Cast", [offsets], {"dtype": DataType.DT_INT64}),
                                     _const_ints(ctx, [1])])
    return ctx.value("Add", [column, ctx.value("Unsqueeze", [steps, _const_ints(ctx, [0])])])


def rotated(ctx: NodeContext, x: Value, positions: Value, cos: Value, sin: Value,
            interleaved: bool, heads: int) -> Value:
    """RoPE of ``x`` ([B, S, heads * H] or [B, N, S, H]) at ``positions`` [B or 1, S]; the
    caches [max_position, R / 2] give the rotated width R (the rest passes unchanged)."""
    width = cos.shape[1]
    if not is_static_dim(width):
        raise ctx.unsupported("the cos/sin caches need a static width")
    assert isinstance(width, int)
    attrs = {"interleaved": int(interleaved), "rotary_embedding_dim": 2 * width}
    if len(x.shape) == 3:
        attrs["num_heads"] = heads
    return ctx.value("RotaryEmbedding", [x, cos, sin, positions], attrs)


@translator("RotaryEmbedding", domain=_MS)
def contrib_rotary_embedding(ctx: NodeContext) -> Outputs:
    """``RotaryEmbedding`` (contrib): input [B, S, hidden] or [B, N, S, H], position ids
    [B, S] or one start offset [1]; caches [max_position, R / 2]. The ``scale``
    attribute is ignored, as onnxruntime's CPU kernel ignores it."""
    x, position_ids, cos, sin = (ctx.input(i) for i in range(4))
    if x is None or position_ids is None or cos is None or sin is None:
        raise ctx.unsupported("input, position_ids, cos_cache and sin_cache are required")
    if ctx.attr("is_packed_batching", 0):
        raise ctx.unsupported("packed batching is not supported")
    heads = int(ctx.attr("num_heads", 0))
    if len(x.shape) == 3 and not heads:
        heads = _head_size(ctx, x.shape[2], 1) // (2 * _head_size(ctx, cos.shape[1], 1))
    if len(position_ids.shape) == 1:
        position_ids = _sequence_positions(ctx, position_ids, x, 1 if len(x.shape) == 3 else 2)
    return [rotated(ctx, x, position_ids, cos, sin, bool(ctx.attr("interleaved", 0)), heads)]


# -- GroupQueryAttention ----------------------------------------------------------------

_GQA_UNSUPPORTED_INPUTS = {11: "head_sink", 12: "k_scale", 13: "v_scale",
                           14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}


def _gqa_refusals(ctx: NodeContext) -> None:
    for index, name in _GQA_UNSUPPORTED_INPUTS.items():
        if ctx.input(index) is not None:
            raise ctx.unsupported(f"input {name!r} is not supported")
    _refuse_attributes(ctx, ("smooth_softmax", "sliding_window_cache", "qk_output",
                             "kv_cache_bit_width"))
    for key in ("k_quant_type", "v_quant_type"):
        if ctx.attr(key, "NONE") not in ("NONE", b"NONE"):
            raise ctx.unsupported(f"a quantized KV cache ({key}) is not supported")
    if ctx.wants_output(3):
        raise ctx.unsupported("the output_qk output is not supported")


def _gqa_inputs(ctx: NodeContext, heads: int, kv_heads: int) -> tuple[Value, Value, Value, int]:
    """Q [B, S, N * H], K and V [B, S, Nkv * H] (split from a packed query), and H."""
    query = ctx.input(0)
    assert query is not None
    key, value = ctx.input(1), ctx.input(2)
    if key is None or value is None:
        head = _head_size(ctx, query.shape[2], heads + 2 * kv_heads)
        sizes = [heads * head, kv_heads * head, kv_heads * head]
        q, k, v = ctx.op("Split", [query, _const_ints(ctx, sizes)], {"axis": -1}).outputs
        return q, k, v, head
    return query, key, value, _head_size(ctx, query.shape[2], heads)


def _gqa_keep(ctx: NodeContext, positions: Value, totals: Value, keys: Value) -> Value:
    """[B, 1, S, T] bool: key j is visible from the query at ``positions[b, s]`` when
    j < totals[b], j <= that position (causal) and within the local window."""
    columns = _positions(ctx, keys.shape[2], keys, 2)
    ends = ctx.value("Unsqueeze", [totals, _const_ints(ctx, [1, 2])])  # [B, 1, 1]
    keep = ctx.value("Less", [columns, ends])
    where = ctx.value("Unsqueeze", [positions, _const_ints(ctx, [2])])  # [B, S, 1]
    if ctx.attr("causal", 1):
        keep = ctx.value("And", [keep, ctx.value("LessOrEqual", [columns, where])])
    window = int(ctx.attr("local_window_size", -1))
    if window > 0:
        start = ctx.value("Sub", [where, ctx.const(np.asarray(window, np.int64))])
        keep = ctx.value("And", [keep, ctx.value("Greater", [columns, start])])
    return ctx.value("Unsqueeze", [keep, _const_ints(ctx, [1])])


def _gqa_cache(ctx: NodeContext, past: Value, new: Value, starts: Value,
               total: Optional[Value]) -> Value:
    """The present cache [B, N, max(P, total_sequence_length), H] of batch row b: the
    past [B, N, P, H] before row ``starts[b]``, the S new rows from there, then zeros."""
    zeros = ctx.value("ConstantOfShape", [ctx.value("Shape", [new])],
                      {"value": np.zeros(1, new.dtype.np_dtype)})
    padded = ctx.value("Concat", [past, zeros], {"axis": 2})  # [B, N, P + S, H]
    rows = ctx.value("Unsqueeze", [_positions(ctx, padded.shape[2], padded, 2),
                                   _const_ints(ctx, [0])])
    shift = ctx.value("Sub", [rows, ctx.value("Unsqueeze", [starts, _const_ints(ctx, [1])])])
    steps = ctx.value("Shape", [new], {"start": 2, "end": 3})
    inside = ctx.value("And", [ctx.value("GreaterOrEqual", [shift, _const_ints(ctx, [0])]),
                               ctx.value("Less", [shift, steps])])  # [B, P + S]
    last = ctx.value("Sub", [steps, _const_ints(ctx, [1])])
    index = ctx.value("Min", [ctx.value("Max", [shift, _const_ints(ctx, [0])]), last])
    index = ctx.value("Expand", [ctx.value("Unsqueeze", [index, _const_ints(ctx, [1, 3])]),
                                 ctx.value("Shape", [padded])])
    written = ctx.value("GatherElements", [new, index], {"axis": 2})
    inside = ctx.value("Unsqueeze", [inside, _const_ints(ctx, [1, 3])])
    before = ctx.value("Unsqueeze", [ctx.value("Less", [shift, _const_ints(ctx, [0])]),
                                     _const_ints(ctx, [1, 3])])
    kept = ctx.value("Where", [before, padded, ctx.const(np.zeros((), new.dtype.np_dtype))])
    full = ctx.value("Where", [inside, written, kept])
    if total is None:
        return full
    end = ctx.value("Max", [ctx.value("Shape", [past], {"start": 2, "end": 3}),
                            ctx.value("Reshape", [ctx.value("Cast", [total],
                                                            {"dtype": DataType.DT_INT64}),
                                                  _const_ints(ctx, [1])])])
    return ctx.value("Slice", [full, _const_ints(ctx, [0]), end, _const_ints(ctx, [2])])


@translator("GroupQueryAttention", domain=_MS)
def group_query_attention(ctx: NodeContext) -> Outputs:
    """``GroupQueryAttention``: query heads share K/V heads; ``seqlens_k[b] + 1`` keys are
    valid in batch row b, whose S new tokens start at ``max(seqlens_k[b] + 1 - S, 0)``:
    there they are written into the BNSH cache, and query s sits at that start + s (or
    at ``position_ids``), which the causal mask, the local window and the optional
    rotary embedding use."""
    _gqa_refusals(ctx)
    heads, kv_heads = count_attr(ctx, "num_heads"), count_attr(ctx, "kv_num_heads")
    q, k, v, head = _gqa_inputs(ctx, heads, kv_heads)
    seqlens = ctx.input(5)
    if seqlens is None:
        raise ctx.unsupported("seqlens_k is required")
    totals = ctx.value("Add", [ctx.value("Cast", [seqlens], {"dtype": DataType.DT_INT64}),
                               _const_ints(ctx, [1])])
    length = ctx.value("Shape", [q], {"start": 1, "end": 2})
    offsets = ctx.value("Max", [ctx.value("Sub", [totals, length]), _const_ints(ctx, [0])])
    position_ids = ctx.input(9)
    positions = (_sequence_positions(ctx, offsets, q, 1) if position_ids is None
                 else ctx.value("Cast", [position_ids], {"dtype": DataType.DT_INT64}))
    if ctx.attr("do_rotary", 0):
        cos, sin = ctx.input(7), ctx.input(8)
        if cos is None or sin is None:
            raise ctx.unsupported("do_rotary needs cos_cache and sin_cache")
        interleaved = bool(ctx.attr("rotary_interleaved", 0))
        q = rotated(ctx, q, positions, cos, sin, interleaved, heads)
        k = rotated(ctx, k, positions, cos, sin, interleaved, kv_heads)
    q = split_heads(ctx, q, heads)
    k, v = split_heads(ctx, k, kv_heads), split_heads(ctx, v, kv_heads)
    past_k, past_v = ctx.input(3), ctx.input(4)
    if (past_k is None) != (past_v is None):
        raise ctx.unsupported("past_key and past_value come together")
    if past_k is not None and past_v is not None:
        total = ctx.input(6)
        k = _gqa_cache(ctx, past_k, k, offsets, total)
        v = _gqa_cache(ctx, past_v, v, offsets, total)
    mask = _gqa_keep(ctx, positions, totals, k)
    bias = ctx.input(10)
    if bias is not None:
        hide = ctx.const(np.asarray(-np.inf, bias.dtype.np_dtype))
        mask = ctx.value("Where", [mask, bias, hide])
    scale = ctx.attr("scale") or 1.0 / float(np.sqrt(head))
    attrs = {"scale": float(scale), "softcap": float(ctx.attr("softcap", 0.0))}
    output = ctx.op("Attention", [q, k, v, mask], attrs).outputs[0]
    return [merge_heads(ctx, output), k, v]


# -- DecoderMaskedMultiHeadAttention ----------------------------------------------------

def _dmmha_projections(ctx: NodeContext) -> tuple[Value, Optional[Value], Optional[Value]]:
    """Q [B, 1, D] and the new K, V [B, 1, D(v)] with the bias added; K and V are None for
    cross attention, whose K/V come per head as inputs 1 and 2."""
    query, key, value, bias = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(10)
    assert query is not None
    if key is None or value is None:
        raise ctx.unsupported("a packed query is not supported (key and value are required)")
    if len(key.shape) == 4:
        if bias is not None:
            raise ctx.unsupported("a bias with cross attention is not supported")
        return query, None, None
    if bias is not None:
        q_bias, k_bias, v_bias = _mha_bias(ctx, query, bias)
        query, key, value = (ctx.value("Add", [t, b]) for t, b in
                             ((query, q_bias), (key, k_bias), (value, v_bias)))
    return query, key, value


def _shared_buffer_write(ctx: NodeContext, buffer: Value, new: Value, past_length: Value
                         ) -> Value:
    """The [B, N, Max, H] cache ``buffer`` with row ``past_length`` replaced by ``new``."""
    rows = _positions(ctx, buffer.shape[2], buffer, 2)
    at = ctx.value("Equal", [rows, past_length])
    return ctx.value("Where", [ctx.value("Unsqueeze", [at, _const_ints(ctx, [1])]), new, buffer])


@translator("DecoderMaskedMultiHeadAttention", domain=_MS)
def decoder_masked_multi_head_attention(ctx: NodeContext) -> Outputs:
    """``DecoderMaskedMultiHeadAttention``: one decoding step. Self attention writes the
    new K/V at row ``past_sequence_length`` of the shared [B, N, Max, H] caches and
    attends to rows 0..past_sequence_length; cross attention reads per-head K/V. Beam
    reordering (``cache_indirection``) is not supported."""
    if ctx.input(9) is not None or ctx.wants_output(3) or ctx.attr("output_qk", 0):
        raise ctx.unsupported("cache_indirection and the qk output are not supported")
    heads = count_attr(ctx, "num_heads")
    query, key, value = _dmmha_projections(ctx)
    q = split_heads(ctx, query, heads)
    present_k: Optional[Value] = None
    present_v: Optional[Value] = None
    if key is None or value is None:
        k, v = ctx.required(1), ctx.required(2)
    else:
        past_k, past_v, length = ctx.input(5), ctx.input(6), ctx.input(7)
        if past_k is None or past_v is None or length is None:
            raise ctx.unsupported("self attention needs past_key, past_value and "
                                  "past_sequence_length (past_present_share_buffer)")
        past = ctx.value("Cast", [length], {"dtype": DataType.DT_INT64})
        present_k = _shared_buffer_write(ctx, past_k, split_heads(ctx, key, heads), past)
        present_v = _shared_buffer_write(ctx, past_v, split_heads(ctx, value, heads), past)
        total = ctx.value("Reshape", [ctx.value("Add", [past, _const_ints(ctx, [1])]),
                                      _const_ints(ctx, [1])])
        zero, axis = _const_ints(ctx, [0]), _const_ints(ctx, [2])
        k = ctx.value("Slice", [present_k, zero, total, axis])
        v = ctx.value("Slice", [present_v, zero, total, axis])
    core = AttentionCore(ctx, float(ctx.attr("mask_filter_value", -10000.0)), q.dtype)
    terms = []
    mask = ctx.input(3)
    if mask is not None:
        length_of_keys = ctx.value("Shape", [k], {"start": 2, "end": 3})
        mask = ctx.value("Slice", [mask, _const_ints(ctx, [0]), length_of_keys,
                                   _const_ints(ctx, [1])])
        terms.append(core.raw_mask(mask))
    if ctx.input(4) is not None:
        terms.append(ctx.required(4))
    output = core.attend(q, k, v, _scale(ctx, _head_size(ctx, q.shape[3], 1)), terms)
    return [merge_heads(ctx, output), present_k, present_v]
