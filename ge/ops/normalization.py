"""Normalization ops, with ONNX's names and semantics (channels on axis 1):
InstanceNormalization, GroupNormalization, LpNormalization, LRN,
MeanVarianceNormalization and BatchNormalizationTraining (batch statistics).

Statistics of float16 and bfloat16 inputs are computed in float32 (float64 stays
float64) and the result is cast back to the input's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ge.errors import AttrError
from ge.ir import TensorDesc
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.elementwise import FLOATS
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    InferenceContext,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal, normalize_axes, normalize_axis

__all__ = ["compute_dtype", "channel_vector"]


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The precision statistics are computed in: float64 stays, everything else float32."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(compute_dtype(x.dtype), copy=False)


def channel_vector(values: np.ndarray, rank: int, dtype: np.dtype) -> np.ndarray:
    """A per-channel vector shaped ``[C, 1, ..., 1]`` to broadcast against ``[N, C, ...]``."""
    return values.astype(dtype, copy=False).reshape((-1,) + (1,) * (rank - 2))


def _positive(name: str) -> Attr:
    return Attr(name, AttrType.INT, REQUIRED, check=lambda v: None if v >= 1 else "must be >= 1")


def _axis_or_fail(ctx: InferenceContext, rank: int) -> int:
    try:
        return normalize_axis(ctx.attr("axis"), rank)
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None


def _check_channel_inputs(ctx: InferenceContext, indices: Sequence[int], channels: Dim) -> None:
    """Inputs ``indices`` must be 1-D with ``channels`` elements and x's dtype."""
    for index in indices:
        ctx.require_dtypes(index, FLOATS)
        ctx.require_rank(index, 1)
        length = ctx.shape(index)[0]
        if not dims_equal(length, channels):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has {length} elements; "
                           f"x {list(ctx.shape(0))} has {channels} channels (axis 1)")


def _infer_channel_norm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    x = ctx.input(0)
    if x.rank < 3:
        raise ctx.fail(f"input {ctx.schema.input_name(0)!r} must have rank >= 3 "
                       f"([N, C, spatial...]), got shape {list(x.shape)}")
    _check_channel_inputs(ctx, (1, 2), x.shape[1])
    return [x]


def _normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over ``axes``, in x's precision."""
    centred = x - x.mean(axis=axes, keepdims=True)
    variance = np.mean(centred * centred, axis=axes, keepdims=True)
    return centred / np.sqrt(variance + x.dtype.type(epsilon))


# -- InstanceNormalization and GroupNormalization ---------------------------------------

@register_op("InstanceNormalization", inputs=["input", "scale", "B"],
             attrs=[Attr("epsilon", AttrType.FLOAT, 1e-5)],
             infer=_infer_channel_norm, cost=flops_per_output(8))
def instance_normalization_kernel(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                                  epsilon: float) -> np.ndarray:
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, the statistics per sample and channel
    over the spatial axes."""
    wide = _wide(x)
    normalized = _normalize(wide, tuple(range(2, x.ndim)), epsilon)
    result = normalized * channel_vector(scale, x.ndim, wide.dtype) \
        + channel_vector(bias, x.ndim, wide.dtype)
    return result.astype(x.dtype, copy=False)


def _infer_group_norm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    x = ctx.input(0)
    if x.rank < 2:
        raise ctx.fail(f"input 'X' must have rank >= 2 ([N, C, ...]), got {list(x.shape)}")
    groups, channels = ctx.attr("num_groups"), x.shape[1]
    if is_static_dim(channels) and channels % groups:
        raise ctx.fail(f"{channels} channels do not divide into num_groups={groups}")
    _check_channel_inputs(ctx, (1, 2), channels)
    return [x]


@register_op("GroupNormalization", inputs=["X", "scale", "bias"],
             attrs=[Attr("epsilon", AttrType.FLOAT, 1e-5), _positive("num_groups"),
                    Attr("stash_type", AttrType.INT, 1, choices=(1,),
                         doc="statistics in float32 (float64 input: float64)")],
             infer=_infer_group_norm, cost=flops_per_output(8))
def group_normalization_kernel(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                               epsilon: float, num_groups: int, stash_type: int) -> np.ndarray:
    """ONNX 21 GroupNormalization: normalize each sample over each group of C / num_groups
    channels (and the spatial axes), then y = normalized * scale + bias per channel."""
    wide = _wide(x)
    grouped = wide.reshape((x.shape[0], num_groups, -1))
    normalized = _normalize(grouped, (2,), epsilon).reshape(x.shape)
    result = normalized * channel_vector(scale, x.ndim, wide.dtype) \
        + channel_vector(bias, x.ndim, wide.dtype)
    return result.astype(x.dtype, copy=False)


# -- LpNormalization, LRN, MeanVarianceNormalization -----------------------------------

def _infer_same_float(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    if "axis" in ctx.attrs:
        _axis_or_fail(ctx, ctx.input(0).rank)
    return [ctx.input(0)]


@register_op("LpNormalization", inputs=["input"],
             attrs=[Attr("axis", AttrType.INT, -1),
                    Attr("p", AttrType.INT, 2, choices=(1, 2), doc="1: L1 norm, 2: L2 norm")],
             infer=_infer_same_float, cost=flops_per_output(4))
def lp_normalization_kernel(x: np.ndarray, *, axis: int, p: int) -> np.ndarray:
    """y = x / ||x||_p along ``axis``; a zero norm gives 0."""
    wide = _wide(x)
    if p == 1:
        norm = np.abs(wide).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((wide * wide).sum(axis=axis, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.where(norm == 0, 0, wide / norm)
    return result.astype(x.dtype, copy=False)


def _infer_lrn(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    if ctx.input(0).rank < 3:
        raise ctx.fail(f"input 'X' must have rank >= 3 ([N, C, spatial...]), "
                       f"got {list(ctx.shape(0))}")
    return [ctx.input(0)]


@register_op("LRN", inputs=["X"],
             attrs=[Attr("alpha", AttrType.FLOAT, 1e-4), Attr("beta", AttrType.FLOAT, 0.75),
                    Attr("bias", AttrType.FLOAT, 1.0), _positive("size")],
             infer=_infer_lrn, cost=flops_per_output(6))
def lrn_kernel(x: np.ndarray, *, alpha: float, beta: float, bias: float,
               size: int) -> np.ndarray:
    """Local response normalization across channels: y = x / (bias + alpha / size *
    square_sum) ** beta, square_sum over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    wide = _wide(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [(0, 0)] * x.ndim
    widths[1] = (before + 1, after)  # one extra leading zero for the running sum
    running = np.cumsum(np.pad(wide * wide, widths), axis=1)
    channels = x.shape[1]
    square_sum = np.take(running, np.arange(size, size + channels), axis=1) \
        - np.take(running, np.arange(channels), axis=1)
    result = wide / (bias + alpha / size * square_sum) ** beta
    return result.astype(x.dtype, copy=False)


def _infer_mvn(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    try:
        normalize_axes(ctx.attr("axes"), ctx.input(0).rank)
    except ValueError as error:
        raise ctx.fail(f"{error} (x has shape {list(ctx.shape(0))})") from None
    return [ctx.input(0)]


@register_op("MeanVarianceNormalization", inputs=["X"],
             attrs=[Attr("axes", AttrType.INTS, [0, 2, 3])],
             infer=_infer_mvn, cost=flops_per_output(6))
def mean_variance_normalization_kernel(x: np.ndarray, *, axes: list[int]) -> np.ndarray:
    """y = (x - mean) / (sqrt(var) + 1e-9), the statistics over ``axes`` (ONNX's function)."""
    wide = _wide(x)
    chosen = tuple(normalize_axes(axes, x.ndim))
    centred = wide - wide.mean(axis=chosen, keepdims=True)
    deviation = np.sqrt(np.mean(centred * centred, axis=chosen, keepdims=True))
    return (centred / (deviation + wide.dtype.type(1e-9))).astype(x.dtype, copy=False)


# -- BatchNormalizationTraining ---------------------------------------------------------

def _infer_batch_norm_training(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    x = ctx.input(0)
    if x.rank < 2:
        raise ctx.fail(f"input 'X' must have rank >= 2 ([N, C, ...]), got {list(x.shape)}")
    _check_channel_inputs(ctx, (1, 2, 3, 4), x.shape[1])
    vector = TensorDesc((x.shape[1],), x.dtype)
    return [x, vector, vector, vector, vector]


@register_op(
    "BatchNormalizationTraining",
    inputs=["X", "scale", "B", "input_mean", "input_var"],
    outputs=("Y", "running_mean", "running_var", "batch_mean", "batch_var"),
    attrs=[Attr("epsilon", AttrType.FLOAT, 1e-5),
           Attr("momentum", AttrType.FLOAT, 0.9, doc="weight of the old running statistics")],
    infer=_infer_batch_norm_training, cost=flops_per_output(4))
def batch_normalization_training_kernel(
        x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
        variance: np.ndarray, *, epsilon: float, momentum: float,
) -> tuple[np.ndarray, ...]:
    """ONNX BatchNormalization with training_mode=1: normalize with the batch's own mean and
    (biased) variance over every axis but 1; the running statistics move toward them:
    running = input * momentum + batch * (1 - momentum)."""
    wide = _wide(x)
    axes = (0,) + tuple(range(2, x.ndim))
    batch_mean = wide.mean(axis=axes)
    centred = wide - channel_vector(batch_mean, x.ndim, wide.dtype)
    batch_var = np.mean(centred * centred, axis=axes)
    factor = _wide(scale) / np.sqrt(batch_var + wide.dtype.type(epsilon))
    y = centred * channel_vector(factor, x.ndim, wide.dtype) \
        + channel_vector(bias, x.ndim, wide.dtype)
    running_mean = _wide(mean) * momentum + batch_mean * (1 - momentum)
    running_var = _wide(variance) * momentum + batch_var * (1 - momentum)
    return tuple(a.astype(x.dtype, copy=False)
                 for a in (y, running_mean, running_var, batch_mean, batch_var))
