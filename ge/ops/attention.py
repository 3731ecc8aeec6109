"""Attention and transformer building blocks: Attention, RotaryEmbedding,
RMSNormalization and SwiGLU (the recurrent LinearAttention and CausalConvWithState
live in ``ge.ops.sequence_mixers``).

``Attention`` is ONNX's scaled dot-product attention (opsets 23-25) and the op the
optimizer's attention fusion rewrites ``MatMul -> Softmax -> MatMul`` chains into:

    Y = softmax(softcap(Q @ K^T * scale) + bias) @ V

where ``bias`` gathers the float ``attn_mask``, ``-inf`` where a boolean mask, the
causal frontier, the sliding window or ``nonpad_kv_seqlen`` forbids a key. Q is
``[B, Hq, Sq, D]`` (or ``[B, Sq, Hq*D]`` with ``q_num_heads``), K and V are
``[B, Hkv, Skv, D|Dv]``; with fewer K/V heads than query heads (GQA/MQA) query
head ``h`` reads K/V head ``h // (Hq / Hkv)`` without copying K or V. A query row
whose keys are all masked gives zeros, never NaN.

Reference kernels compute float16 and bfloat16 in float32 (float64 stays float64)
and return the declared dtypes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, Shape, is_static_dim, num_elements
from ge.ops.elementwise import FLOATS
from ge.ops.registry import (
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal, normalize_axis

__all__ = ["compute_dtype", "split_dim", "add_dims", "heads_first", "heads_last"]


# -- shared helpers ---------------------------------------------------------------------

def compute_dtype(*dtypes: np.dtype) -> np.dtype:
    """float64 when any of ``dtypes`` is float64, else float32 (half types widen)."""
    return np.dtype(np.float64) if any(np.dtype(d) == np.float64 for d in dtypes) \
        else np.dtype(np.float32)


def split_dim(ctx: InferenceContext, dim: Dim, parts: int, what: str) -> Dim:
    """``dim / parts`` when ``dim`` is known (it must divide evenly), else -1."""
    if not is_static_dim(dim):
        return -1
    assert isinstance(dim, int)
    if parts <= 0 or dim % parts:
        raise ctx.fail(f"{what} {dim} is not a multiple of {parts}")
    return dim // parts


def add_dims(a: Dim, b: Dim) -> Dim:
    """``a + b`` when both are known (or one is 0), else -1."""
    if a == 0 or b == 0:
        return b if a == 0 else a
    if is_static_dim(a) and is_static_dim(b):
        assert isinstance(a, int) and isinstance(b, int)
        return a + b
    return -1


def heads_first(x: np.ndarray, heads: int) -> np.ndarray:
    """``[B, S, H*D]`` as ``[B, H, S, D]``."""
    batch, length, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
    return x.reshape(batch, length, heads, hidden // heads).transpose(0, 2, 1, 3)


def heads_last(x: np.ndarray) -> np.ndarray:
    """``[B, H, S, D]`` as ``[B, S, H*D]``."""
    batch, heads, length, size = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * size)


def _require_floats(ctx: InferenceContext, *indices: int) -> None:
    for index in indices:
        if ctx.has_input(index):
            ctx.require_dtypes(index, FLOATS)


# -- Attention: inference ---------------------------------------------------------------

def _heads(ctx: InferenceContext) -> tuple[Dim, Dim]:
    """(query heads, key/value heads), from the shapes (4-D) or the attributes (3-D)."""
    rank = len(ctx.shape(0))
    if rank == 4:
        return ctx.shape(0)[1], ctx.shape(1)[1]
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if q_heads is None or kv_heads is None:
        raise ctx.fail("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")
    return q_heads, kv_heads


def _qkv_dims(ctx: InferenceContext) -> dict[str, Dim]:
    """Batch, heads, lengths and head sizes of Q, K and V."""
    q, k, v = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if len(q) not in (3, 4) or len(k) != len(q) or len(v) != len(q):
        raise ctx.fail(f"Q, K, V must all be 3-D or all 4-D, got {list(q)}, {list(k)}, "
                       f"{list(v)}")
    q_heads, kv_heads = _heads(ctx)
    if len(q) == 4:
        dims = {"batch": q[0], "q_heads": q_heads, "kv_heads": kv_heads, "q_len": q[2],
                "kv_len": k[2], "head": q[3], "k_head": k[3], "v_head": v[3],
                "v_heads": v[1]}
    else:
        assert isinstance(q_heads, int) and isinstance(kv_heads, int)
        dims = {"batch": q[0], "q_heads": q_heads, "kv_heads": kv_heads, "q_len": q[1],
                "kv_len": k[1], "head": split_dim(ctx, q[2], q_heads, "Q's hidden size"),
                "k_head": split_dim(ctx, k[2], kv_heads, "K's hidden size"),
                "v_head": split_dim(ctx, v[2], kv_heads, "V's hidden size"),
                "v_heads": kv_heads}
    if not dims_equal(dims["head"], dims["k_head"]):
        raise ctx.fail(f"Q's head size {dims['head']} differs from K's {dims['k_head']}")
    if not dims_equal(dims["kv_heads"], dims["v_heads"]):
        raise ctx.fail(f"K has {dims['kv_heads']} heads, V has {dims['v_heads']}")
    if is_static_dim(q_heads) and is_static_dim(kv_heads):
        assert isinstance(q_heads, int) and isinstance(kv_heads, int)
        if kv_heads <= 0 or q_heads % kv_heads:
            raise ctx.fail(f"{q_heads} query heads are not a multiple of {kv_heads} "
                           f"key/value heads")
    return dims


def _past_length(ctx: InferenceContext, dims: dict[str, Dim]) -> Dim:
    if ctx.has_input(4) != ctx.has_input(5):
        raise ctx.fail("past_key and past_value must be given together")
    if not ctx.has_input(4):
        return 0
    for index, size in ((4, dims["head"]), (5, dims["v_head"])):
        ctx.require_rank(index, 4)
        if not dims_equal(ctx.shape(index)[3], size):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} "
                           f"{list(ctx.shape(index))} must end in head size {size}")
    return ctx.shape(4)[2]


def _check_mask(ctx: InferenceContext) -> None:
    if ctx.has_input(3):
        mask = ctx.input(3)
        if not (mask.dtype.is_float or mask.dtype.is_integer or mask.dtype is DataType.DT_BOOL):
            raise ctx.fail_dtype(f"attn_mask must be bool or numeric, got {mask.dtype.short_name}")
        if not 1 <= mask.rank <= 4:
            raise ctx.fail(f"attn_mask must have rank 1 to 4, got {list(mask.shape)}")
    if ctx.has_input(6):
        ctx.require_dtypes(6, (DataType.DT_INT64, DataType.DT_INT32))


def _infer_attention(ctx: InferenceContext) -> Sequence[TensorDesc]:
    _require_floats(ctx, 0, 1, 2, 4, 5)
    _check_mask(ctx)
    dims = _qkv_dims(ctx)
    total = add_dims(_past_length(ctx, dims), dims["kv_len"])
    q_dtype = ctx.dtype(0)
    if len(ctx.shape(0)) == 4:
        y_shape: Shape = (dims["batch"], dims["q_heads"], dims["q_len"], dims["v_head"])
    else:
        hidden = dims["v_head"]
        hidden = hidden * dims["q_heads"] if isinstance(hidden, int) and hidden >= 0 else -1
        y_shape = (dims["batch"], dims["q_len"], hidden)
    return [
        TensorDesc(y_shape, q_dtype),
        TensorDesc((dims["batch"], dims["kv_heads"], total, dims["head"]), ctx.dtype(1)),
        TensorDesc((dims["batch"], dims["kv_heads"], total, dims["v_head"]), ctx.dtype(2)),
        TensorDesc((dims["batch"], dims["q_heads"], dims["q_len"], total), q_dtype),
    ]


def _attention_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    scores = num_elements(outputs[3].shape)
    head = outputs[1].shape[3]
    v_head = outputs[2].shape[3]
    sizes = sum(d if isinstance(d, int) and d > 0 else 1 for d in (head, v_head))
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    written = sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs[:3])
    return Cost(scores * (2 * sizes + 6), read + written)


# -- Attention: kernel ------------------------------------------------------------------

def _pad_keys(mask: np.ndarray, total: int) -> np.ndarray:
    """A mask shorter than the key axis is padded with 'not attended'."""
    missing = total - mask.shape[-1]
    if missing <= 0:
        return mask
    fill = False if mask.dtype == np.bool_ else -np.inf
    width = [(0, 0)] * (mask.ndim - 1) + [(0, missing)]
    return np.pad(mask, width, constant_values=fill)


def _allowed_keys(q_len: int, kv_len: int, offset: np.ndarray, is_causal: bool,
                  left: int, right: int, nonpad: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """Which keys each query may see (causal, window, padding), ``[B|1, 1, Sq, Skv]``."""
    if not is_causal and left < 0 and right < 0 and nonpad is None:
        return None
    rows = np.arange(q_len).reshape(1, 1, q_len, 1)
    cols = np.arange(kv_len).reshape(1, 1, 1, kv_len)
    distance = rows + offset.reshape(-1, 1, 1, 1) - cols  # query position - key position
    allowed = np.ones(distance.shape, dtype=np.bool_)
    if is_causal:
        allowed &= distance >= 0
    if left >= 0:
        allowed &= distance <= left
    if right >= 0:
        allowed &= -distance <= right
    if nonpad is not None:
        allowed &= cols < nonpad.reshape(-1, 1, 1, 1)
    return allowed


def _attention_bias(attn_mask: Optional[np.ndarray], allowed: Optional[np.ndarray],
                    kv_len: int, dtype: np.dtype) -> Optional[np.ndarray]:
    """The additive bias (``-inf`` where a key is forbidden), rank 4, or None."""
    additive: Optional[np.ndarray] = None
    if attn_mask is not None:
        mask = _pad_keys(attn_mask, kv_len)
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else allowed & mask
        else:
            additive = mask.astype(dtype)
    if allowed is None:
        return additive
    base = np.zeros((), dtype) if additive is None else additive
    return np.where(allowed, base, dtype.type(-np.inf))


def _grouped(q_like: np.ndarray, kv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Views for GQA: ``[B, Hkv, G, ...]`` on the query side and ``[B, Hkv, 1, ...]`` on K/V."""
    batch, q_heads = q_like.shape[:2]
    kv_heads = kv.shape[1]
    if kv_heads <= 0 or q_heads % kv_heads:
        raise ValueError(f"{q_heads} query heads are not a multiple of {kv_heads} K/V heads")
    grouped = q_like.reshape(batch, kv_heads, q_heads // kv_heads, *q_like.shape[2:])
    return grouped, kv[:, :, None]


def _softmax_rows(scores: np.ndarray, bias: Optional[np.ndarray]) -> np.ndarray:
    """Softmax over the key axis; rows whose bias is all ``-inf`` become zeros."""
    peak = scores.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    exps = np.exp(scores - peak)
    total = exps.sum(axis=-1, keepdims=True)
    probs = exps / np.where(total == 0, 1, total)
    if bias is not None:
        masked_rows = np.all(np.isneginf(bias), axis=-1, keepdims=True)
        probs = np.where(masked_rows, 0, probs)
    return probs


@register_op(
    "Attention",
    inputs=["Q", "K", "V", Input("attn_mask", optional=True),
            Input("past_key", optional=True), Input("past_value", optional=True),
            Input("nonpad_kv_seqlen", optional=True,
                  doc="[B] valid keys per batch entry (an external KV cache)")],
    outputs=("Y", "present_key", "present_value", "qk_matmul_output"),
    attrs=[
        Attr("is_causal", AttrType.INT, 0, choices=(0, 1),
             doc="1: query i sees key j iff j <= i + offset (bottom-right aligned)"),
        Attr("scale", AttrType.FLOAT, None, doc="default 1 / sqrt(head size)"),
        Attr("q_num_heads", AttrType.INT, None, doc="heads of a 3-D Q"),
        Attr("kv_num_heads", AttrType.INT, None, doc="heads of 3-D K and V"),
        Attr("softcap", AttrType.FLOAT, 0.0, doc="> 0: scores = softcap * tanh(scores / softcap)"),
        Attr("softmax_precision", AttrType.DTYPE, None,
             doc="the softmax runs at least this wide (float32 at least)"),
        Attr("qk_matmul_output_mode", AttrType.INT, 0, choices=(0, 1, 2, 3),
             doc="output 4: raw scores, after softcap, after the bias, or probabilities"),
        Attr("left_window_size", AttrType.INT, -1,
             check=lambda v: None if v >= -1 else "must be -1 or >= 0"),
        Attr("right_window_size", AttrType.INT, -1,
             check=lambda v: None if v >= -1 else "must be -1 or >= 0"),
    ],
    infer=_infer_attention,
    cost=_attention_cost,
)
def attention_kernel(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                     attn_mask: Optional[np.ndarray] = None,
                     past_key: Optional[np.ndarray] = None,
                     past_value: Optional[np.ndarray] = None,
                     nonpad_kv_seqlen: Optional[np.ndarray] = None, *, is_causal: int,
                     scale: Optional[float], q_num_heads: Optional[int],
                     kv_num_heads: Optional[int], softcap: float,
                     softmax_precision: Optional[DataType], qk_matmul_output_mode: int,
                     left_window_size: int, right_window_size: int,
                     ) -> tuple[np.ndarray, ...]:
    """(Y, present_key, present_value, qk_matmul_output) of scaled dot-product attention.

    present_key/value are the past cache with this step's K/V appended; output 4
    holds what ``qk_matmul_output_mode`` selects. Query i sits at position
    ``offset + i``: offset is the past length, or ``nonpad_kv_seqlen - Sq`` per
    batch entry when only ``nonpad_kv_seqlen`` is given.
    """
    flat = q.ndim == 3
    if flat:
        q, k, v = (heads_first(q, q_num_heads or 0), heads_first(k, kv_num_heads or 0),
                   heads_first(v, kv_num_heads or 0))
    present_key = k if past_key is None else np.concatenate([past_key, k], axis=2)
    present_value = v if past_value is None else np.concatenate([past_value, v], axis=2)
    precision = [] if softmax_precision is None else [softmax_precision.np_dtype]
    work = compute_dtype(q.dtype, *precision)
    q_len, kv_len = q.shape[2], present_key.shape[2]
    if past_key is not None:
        offset = np.array([past_key.shape[2]])
    elif nonpad_kv_seqlen is not None:
        offset = nonpad_kv_seqlen.astype(np.int64).reshape(-1) - q_len
    else:
        offset = np.zeros(1, np.int64)
    nonpad = None if nonpad_kv_seqlen is None else nonpad_kv_seqlen.astype(np.int64)
    allowed = _allowed_keys(q_len, kv_len, offset, bool(is_causal), left_window_size,
                            right_window_size, nonpad)
    bias = _attention_bias(attn_mask, allowed, kv_len, work)
    factor = scale if scale is not None else 1.0 / np.sqrt(q.shape[3])
    grouped_q, grouped_k = _grouped(q.astype(work) * work.type(factor), present_key)
    raw = np.matmul(grouped_q, np.swapaxes(grouped_k, -1, -2).astype(work, copy=False))
    raw = raw.reshape(q.shape[0], q.shape[1], q_len, kv_len)
    capped = raw if softcap <= 0 else np.tanh(raw / softcap) * work.type(softcap)
    biased = capped if bias is None else capped + bias
    probs = _softmax_rows(biased, bias)
    grouped_p, grouped_v = _grouped(probs, present_value)
    y = np.matmul(grouped_p, grouped_v.astype(work, copy=False)).reshape(
        q.shape[0], q.shape[1], q_len, v.shape[3])
    y = heads_last(y) if flat else y
    qk = (raw, capped, biased, probs)[qk_matmul_output_mode]
    return (y.astype(q.dtype, copy=False), present_key, present_value,
            qk.astype(q.dtype, copy=False))


# -- RotaryEmbedding --------------------------------------------------------------------

def _infer_rotary(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1, 2)
    ctx.require_dtypes(0, FLOATS)
    x = ctx.input(0)
    if x.rank == 3 and not ctx.attr("num_heads"):
        raise ctx.fail("a 3-D input needs the num_heads attribute")
    if x.rank not in (3, 4):
        raise ctx.fail(f"input must be 3-D or 4-D, got {list(x.shape)}")
    head = x.shape[3] if x.rank == 4 else split_dim(ctx, x.shape[2], ctx.attr("num_heads"),
                                                    "the hidden size")
    rotated = ctx.attr("rotary_embedding_dim") or head
    if ctx.has_input(3):
        ctx.require_dtypes(3, (DataType.DT_INT64, DataType.DT_INT32))
    for index in (1, 2):
        last = ctx.shape(index)[-1] if ctx.shape(index) else -1
        if is_static_dim(rotated) and isinstance(rotated, int) and \
                not dims_equal(last, rotated // 2):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} {list(ctx.shape(index))} "
                           f"must end in rotary_embedding_dim / 2 = {rotated // 2}")
    return [TensorDesc(x.shape, dtype, x.format)]


@register_op(
    "RotaryEmbedding",
    inputs=["X", "cos_cache", "sin_cache", Input("position_ids", optional=True)],
    attrs=[Attr("interleaved", AttrType.INT, 0, choices=(0, 1),
                doc="1: rotate pairs (x0, x1), (x2, x3), ...; 0: the two halves"),
           Attr("rotary_embedding_dim", AttrType.INT, 0, doc="0: the whole head"),
           Attr("num_heads", AttrType.INT, None, doc="heads of a 3-D input")],
    infer=_infer_rotary,
    cost=flops_per_output(3),
)
def rotary_embedding_kernel(x: np.ndarray, cos_cache: np.ndarray, sin_cache: np.ndarray,
                            position_ids: Optional[np.ndarray] = None, *, interleaved: int,
                            rotary_embedding_dim: int, num_heads: Optional[int]) -> np.ndarray:
    """RoPE: rotate the first ``rotary_embedding_dim`` features of each head by the angle
    of its position; X is ``[B, H, S, D]`` or ``[B, S, H*D]``; the caches are
    ``[max_position, R/2]`` indexed by ``position_ids [B, S]``, or ``[B, S, R/2]``."""
    work = compute_dtype(x.dtype)
    heads = x if x.ndim == 4 else heads_first(x, num_heads or 0)
    heads = heads.astype(work)
    rotated = rotary_embedding_dim or heads.shape[3]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos = cos_cache.astype(work)[:, None]  # [B, 1, S, R/2]
    sin = sin_cache.astype(work)[:, None]
    part = heads[..., :rotated]
    if interleaved:
        first, second = part[..., 0::2], part[..., 1::2]
    else:
        first, second = part[..., :rotated // 2], part[..., rotated // 2:]
    real = cos * first - sin * second
    imaginary = sin * first + cos * second
    if interleaved:
        turned = np.stack([real, imaginary], axis=-1).reshape(part.shape)
    else:
        turned = np.concatenate([real, imaginary], axis=-1)
    result = np.concatenate([turned, heads[..., rotated:]], axis=-1)
    result = result if x.ndim == 4 else heads_last(result)
    return result.astype(x.dtype)


# -- RMSNormalization -------------------------------------------------------------------

def _infer_rms_norm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    _require_floats(ctx, 0, 1)
    x = ctx.input(0)
    try:
        axis = normalize_axis(ctx.attr("axis"), x.rank)
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    normalized = x.shape[axis:]
    scale = ctx.shape(1)
    if len(scale) > x.rank or not all(
            d == 1 or dims_equal(d, n) for d, n in zip(reversed(scale), reversed(x.shape))):
        raise ctx.fail(f"scale {list(scale)} does not broadcast to X {list(x.shape)} "
                       f"(normalized over {list(normalized)})")
    return [TensorDesc(x.shape, ctx.dtype(1), x.format)]


@register_op(
    "RMSNormalization",
    inputs=["X", "scale"],
    attrs=[Attr("axis", AttrType.INT, -1, doc="normalize over axes [axis, rank)"),
           Attr("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_rms_norm,
    cost=flops_per_output(4),
    traits=(Trait.PURE, Trait.INPLACE),
)
def rms_normalization_kernel(x: np.ndarray, scale: np.ndarray, *, axis: int,
                             epsilon: float) -> np.ndarray:
    """y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale, in scale's dtype."""
    work = compute_dtype(x.dtype, scale.dtype)
    wide = x.astype(work)
    axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
    mean_square = np.mean(wide * wide, axis=axes, keepdims=True)
    result = wide / np.sqrt(mean_square + work.type(epsilon)) * scale.astype(work)
    return result.astype(scale.dtype)


# -- SwiGLU -----------------------------------------------------------------------------

def _infer_swiglu(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1)
    ctx.require_dtypes(0, FLOATS)
    a, b = ctx.shape(0), ctx.shape(1)
    if len(a) != len(b) or not all(dims_equal(x, y) for x, y in zip(a, b)):
        raise ctx.fail(f"A {list(a)} and B {list(b)} must have the same shape "
                       f"(SwiGLU does not broadcast)")
    shape = tuple(x if is_static_dim(x) else y for x, y in zip(a, b))
    return [TensorDesc(shape, dtype, ctx.input(0).format)]


@register_op("SwiGLU", inputs=["A", "B"], attrs=[Attr("alpha", AttrType.FLOAT, 1.0)],
             infer=_infer_swiglu, cost=flops_per_output(6),
             traits=(Trait.PURE, Trait.ELEMENTWISE))
def swiglu_kernel(a: np.ndarray, b: np.ndarray, *, alpha: float) -> np.ndarray:
    """y = a * sigmoid(alpha * a) * b: the Swish-gated linear unit (A the gate)."""
    work = compute_dtype(a.dtype)
    gate = a.astype(work)
    sigmoid = 0.5 * (1.0 + np.tanh(0.5 * work.type(alpha) * gate))  # overflow-free
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN, as ONNX says
        return (gate * sigmoid * b.astype(work)).astype(a.dtype)
