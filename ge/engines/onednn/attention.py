"""Scaled dot-product ``Attention`` as three oneDNN primitives per shape.

``scores = Q @ K^T * scale (+ bias)`` is a batched matmul whose scale is an eltwise
post-op and whose additive bias (the mask, the causal triangle) is a binary post-op read
where it lies, broadcast over batch and heads; a softmax primitive then runs in place on
the scores, and ``P @ V`` is written straight into the node's output. Q, K and V are
read through their strides: the heads of a 3-D ``[B, S, H*D]`` input and K's transpose
are views, never copies. Grouped-query attention (fewer K/V heads) broadcasts K and V
over each group. The scores live in a per-thread scratch buffer of the node.

Taken: float32, rank 3 (with ``q_num_heads``/``kv_num_heads``) or 4, an optional float or
boolean mask, ``is_causal`` without a mask, ``scale``. Declined (the next engine runs
them): a KV cache (``past_key``/``past_value``), ``nonpad_kv_seqlen``, ``softcap``,
windows, a float64 softmax, a mask shorter than the keys, and a read ``qk_matmul_output``.
A run whose bias forbids every key of some query (the reference gives zeros there,
a softmax NaN) runs on the next engine.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _Fallback, _float32, _rank
from ge.errors import UnsupportedOpError
from ge.ir import DataType, Node

__all__ = ["check_attention", "bind_attention"]


def _present(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def _read(node: Node, index: int) -> bool:
    """Whether output ``index`` exists and some node or the graph reads it."""
    if index >= len(node.outputs):
        return False
    value = node.outputs[index]
    return value.num_users > 0 or value.is_graph_output()


def check_attention(node: Node) -> bool:
    """True for the attention the module's docstring lists as taken."""
    attrs = node.attrs
    if not _float32(node, (0, 1, 2)) or any(_present(node, i) for i in (4, 5, 6)):
        return False
    rank = _rank(node, 0)
    if rank not in (3, 4) or _rank(node, 1) != rank or _rank(node, 2) != rank:
        return False
    if rank == 3 and (attrs.get("q_num_heads") is None or attrs.get("kv_num_heads") is None):
        return False
    if float(attrs.get("softcap") or 0.0) > 0 or _read(node, 3):
        return False
    if int(attrs.get("left_window_size", -1)) >= 0 or \
            int(attrs.get("right_window_size", -1)) >= 0:
        return False
    if attrs.get("softmax_precision") is DataType.DT_DOUBLE:
        return False
    if _present(node, 3):
        mask = node.inputs[3]
        assert mask is not None
        if attrs.get("is_causal") or mask.dtype not in (DataType.DT_FLOAT, DataType.DT_BOOL) \
                or not 1 <= len(mask.shape) <= 4:
            return False
    return True


def _heads_first(x: np.ndarray, heads: int) -> np.ndarray:
    """``[B, S, H*D]`` as a ``[B, H, S, D]`` view (no copy)."""
    batch, length, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise UnsupportedOpError(f"hidden size {hidden} is not a multiple of {heads} heads")
    return x.reshape(batch, length, heads, hidden // heads, copy=False).transpose(0, 2, 1, 3)


def _additive(mask: Optional[np.ndarray], causal: bool, q_len: int, kv_len: int
              ) -> Optional[np.ndarray]:
    """The bias added to the scores, rank 4 (size-1 axes broadcast), or None."""
    if mask is None:
        if not causal:
            return None
        rows = np.arange(q_len).reshape(q_len, 1)
        allowed = rows >= np.arange(kv_len).reshape(1, kv_len)
        return np.where(allowed, np.float32(0), np.float32(-np.inf)).reshape(
            1, 1, q_len, kv_len)
    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    if mask.dtype == np.bool_:
        return np.where(mask, np.float32(0), np.float32(-np.inf))
    return np.ascontiguousarray(mask, dtype=np.float32)


class _Plan:
    """The three primitives for one set of shapes and strides."""

    __slots__ = ("scores", "softmax", "values", "masked")

    def __init__(self, scores: _lib.Primitive, softmax: _lib.Primitive,
                 values: _lib.Primitive, masked: bool) -> None:
        self.scores, self.softmax, self.values, self.masked = scores, softmax, values, masked


def bind_attention(node: Node) -> BoundNode:
    attrs = node.attrs
    flat = _rank(node, 0) == 3
    q_heads, kv_heads = int(attrs.get("q_num_heads") or 0), int(attrs.get("kv_num_heads") or 0)
    given_scale = attrs.get("scale")
    causal = bool(attrs.get("is_causal", 0))
    has_mask = _present(node, 3)
    keys_read, values_read = _read(node, 1), _read(node, 2)
    plans = _lib.ShapeCache()
    triangles = _lib.ShapeCache()  # the causal bias by (queries, keys)
    scratch = threading.local()
    fallback = _Fallback(node)
    what = f"the attention {node.name!r}"

    def make(q: np.ndarray, k_t: np.ndarray, v: np.ndarray, scores: np.ndarray,
             y: np.ndarray, bias: Optional[np.ndarray], scale: float) -> Optional[_Plan]:
        q_desc, k_desc, v_desc = _lib.Desc.of(q), _lib.Desc.of(k_t), _lib.Desc.of(v)
        s_desc, y_desc = _lib.Desc.of(scores), _lib.Desc.of(y)
        post = _lib.PostOps().eltwise("linear", scale, 0.0)
        operands = [(_lib.ARG_SRC, q_desc.handle), (_lib.ARG_WEIGHTS, k_desc.handle),
                    (_lib.ARG_DST, s_desc.handle)]
        if bias is not None:
            b = bias.reshape((1,) * (scores.ndim - bias.ndim) + bias.shape)
            b_desc = _lib.Desc.of(b)
            index = post.binary_add(b_desc)
            operands.append((_lib.post_op_arg(index, _lib.ARG_SRC_1), b_desc.handle))
        pds = []
        try:
            pds.append(_lib.matmul(q_desc, k_desc, None, s_desc, post)[0])
            pds.append(_lib.softmax(s_desc, s_desc, scores.ndim - 1))
            pds.append(_lib.matmul(s_desc, v_desc, None, y_desc, None)[0])
            return _Plan(_lib.Primitive(pds[0], operands, what),
                         _lib.Primitive(pds[1], _lib.source_dest(s_desc.handle,
                                                                 s_desc.handle), what),
                         _lib.Primitive(pds[2], [(_lib.ARG_SRC, s_desc.handle),
                                                 (_lib.ARG_WEIGHTS, v_desc.handle),
                                                 (_lib.ARG_DST, y_desc.handle)], what),
                         bias is not None)
        except UnsupportedOpError:
            return None
        finally:
            for pd in pds:
                _lib.destroy(pd)

    def scores_buffer(shape: tuple[int, ...]) -> np.ndarray:
        buffers = getattr(scratch, "buffers", None)
        if buffers is None:
            buffers = scratch.buffers = {}
        try:
            return buffers[shape]
        except KeyError:
            buffers.clear()  # one shape at a time per thread
            buffer = buffers[shape] = np.empty(shape, np.float32)
            return buffer

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        q, k, v = inputs[0], inputs[1], inputs[2]
        assert q is not None and k is not None and v is not None
        out = outs[0]
        try:
            if flat:
                q, k, v = (_heads_first(q, q_heads), _heads_first(k, kv_heads),
                           _heads_first(v, kv_heads))
                out = _heads_first(out, q_heads)
        except (UnsupportedOpError, ValueError):  # a shape the reference reports on
            fallback(inputs, outs)
            return
        batch, heads, q_len, size = q.shape
        kv_len = k.shape[2]
        if keys_read:
            np.copyto(outs[1], k)
        if values_read:
            np.copyto(outs[2], v)
        mask = inputs[3] if has_mask else None
        if mask is not None and mask.shape[-1] != kv_len or k.shape[1] == 0 or \
                heads % k.shape[1] or 0 in q.shape or kv_len == 0:
            fallback(inputs, outs)
            return
        if mask is None:  # no bias, or the causal triangle (which hides no whole row)
            bias = triangles.get_or_make((q_len, kv_len),
                                         lambda: _additive(None, causal, q_len, kv_len))
        else:
            bias = _additive(mask, causal, q_len, kv_len)
            assert bias is not None
            if np.isneginf(bias).all(axis=-1).any():
                fallback(inputs, outs)
                return
        groups = heads // k.shape[1]
        if groups > 1:  # grouped-query: [B, Hkv, G, S, D] against [B, Hkv, 1, S, D]
            kv_heads_now = k.shape[1]
            try:
                q = q.reshape(batch, kv_heads_now, groups, q_len, size, copy=False)
            except ValueError:
                q = np.ascontiguousarray(q).reshape(batch, kv_heads_now, groups, q_len, size)
            try:
                out_view = out.reshape(batch, kv_heads_now, groups, q_len, v.shape[3],
                                       copy=False)
            except ValueError:
                fallback(inputs, outs)
                return
            k, v = k[:, :, None], v[:, :, None]
            if bias is not None:
                split = (kv_heads_now, groups) if bias.shape[1] > 1 else (1, 1)
                bias = bias.reshape(bias.shape[0], *split, *bias.shape[2:])
        else:
            out_view = out
        k_t = np.swapaxes(k, -1, -2)
        scores = scores_buffer((*q.shape[:-1], kv_len))
        scale = float(given_scale) if given_scale is not None else 1.0 / math.sqrt(size)
        key = (q.shape, q.strides, k_t.shape, k_t.strides, v.shape, v.strides,
               out_view.strides, None if bias is None else (bias.shape, bias.strides))
        plan = plans.get_or_make(key, lambda: make(q, k_t, v, scores, out_view, bias, scale))
        if plan is None:
            fallback(inputs, outs)
            return
        if plan.masked:
            assert bias is not None
            plan.scores.run_arrays((q, k_t, scores, bias))
        else:
            plan.scores.run_arrays((q, k_t, scores))
        plan.softmax.run_arrays((scores, scores))
        plan.values.run_arrays((scores, v, out_view))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        q, k, v = inputs[0], inputs[1], inputs[2]
        assert q is not None and k is not None and v is not None
        if flat:
            hq, hkv = q_heads, kv_heads
            batch, q_len, kv_len = q.shape[0], q.shape[1], k.shape[1]
            head, v_head = k.shape[2] // hkv, v.shape[2] // hkv
            y_shape: tuple[int, ...] = (batch, q_len, hq * v_head)
        else:
            batch, hq, q_len, _ = q.shape
            hkv, kv_len, head, v_head = k.shape[1], k.shape[2], k.shape[3], v.shape[3]
            y_shape = (batch, hq, q_len, v_head)
        outs = [np.empty(y_shape, np.float32), np.empty((batch, hkv, kv_len, head), np.float32),
                np.empty((batch, hkv, kv_len, v_head), np.float32),
                np.zeros((batch, hq, q_len, kv_len), np.float32)]  # read by no one
        writer(inputs, outs[:len(node.outputs)])
        return outs[:len(node.outputs)]

    return BoundNode(kernel, writer)
