"""Translators for onnxruntime's ``Attention`` and ``MultiHeadAttention`` contrib ops.

Both become registry ops: the projections are ``MatMul`` and ``Add``, the heads
are split with ``Reshape`` and ``Transpose`` into ``[batch, heads, sequence,
head_size]``, and the core is ``softmax(Q K^T * scale + bias + mask) V``. Masks
become additive terms: a raw 0/1 mask, key lengths (``[batch]``) or start and
end positions (``[2 * batch]``) add ``mask_filter_value`` (default -10000) where
a key is hidden; ``unidirectional`` hides the keys after each query's position.
Past keys and values are concatenated before the new ones and returned as the
present state.
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

__all__ = ["AttentionCore", "split_heads", "merge_heads"]

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


def _scale(ctx: NodeContext, head_size: int) -> float:
    given = ctx.attr("scale")
    return float(given) if given else 1.0 / float(np.sqrt(head_size))


def _refuse_attributes(ctx: NodeContext, keys: Sequence[str]) -> None:
    for key in keys:
        if ctx.attr(key):
            raise ctx.unsupported(f"attribute {key!r} is not supported")


# -- Attention (com.microsoft) ----------------------------------------------------------

def _packed_projections(ctx: NodeContext, x: Value, weights: Value, bias: Optional[Value]
                        ) -> list[Value]:
    """Q, K and V from the packed [D_in, Dq + Dk + Dv] weights (and bias)."""
    width = weights.shape[1]
    sizes = ctx.attr("qkv_hidden_sizes")
    if not sizes:
        if not is_static_dim(width):
            raise ctx.unsupported("the packed weights need a static width")
        assert isinstance(width, int)
        sizes = [width // 3] * 3
    projected = ctx.value("MatMul", [x, weights])
    if bias is not None:
        projected = ctx.value("Add", [projected, bias])
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


@translator("Attention", domain=_MS)
def attention(ctx: NodeContext) -> Outputs:
    """``Attention``: self-attention with packed QKV weights, masks and a past state."""
    _refuse_attributes(ctx, ("do_rotary", "past_present_share_buffer"))
    x, weights = ctx.input(0), ctx.input(1)
    if x is None or weights is None:
        raise ctx.unsupported("input and weights are required")
    heads = int(ctx.attr("num_heads"))
    q, k, v = (split_heads(ctx, t, heads)
               for t in _packed_projections(ctx, x, weights, ctx.input(2)))
    k, v, present = _with_past(ctx, ctx.input(4), k, v)
    core = AttentionCore(ctx, float(ctx.attr("mask_filter_value", -10000.0)), x.dtype)
    terms = _mask_terms(core, ctx.input(3), q, k, ctx.input(5),
                        bool(ctx.attr("unidirectional", 0)))
    head_size = _head_size(ctx, q.shape[3], 1)
    output = core.attend(q, k, v, _scale(ctx, head_size), terms)
    return [merge_heads(ctx, output), present]


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
    heads = int(ctx.attr("num_heads"))
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
