"""Loss ops, with ONNX's names and semantics: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss.

Scores are ``[N, C]`` or ``[N, C, d1, ..., dk]`` (classes on axis 1) and the targets
``[N]`` or ``[N, d1, ..., dk]`` class indices. Each element's loss is the negated score
of its target class, times ``weight[target]`` when a weight is given; an element whose
target equals ``ignore_index`` has weight 0. ``reduction`` is ``none`` (the per-element
losses), ``sum``, or ``mean`` (the sum divided by the sum of the weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Shape
from ge.ops.elementwise import FLOATS
from ge.ops.registry import Attr, AttrType, InferenceContext, Input, flops_per_output, register_op
from ge.ops.shape_utils import dims_equal

_TARGETS = (DataType.DT_INT32, DataType.DT_INT64)
_REDUCTIONS = ("none", "sum", "mean")


def _loss_attrs() -> list[Attr]:
    return [Attr("reduction", AttrType.STRING, "mean", choices=_REDUCTIONS),
            Attr("ignore_index", AttrType.INT, None,
                 doc="a target value whose elements do not count (weight 0)")]


def _loss_shape(ctx: InferenceContext) -> Shape:
    """Check scores, targets and weights; the shape of the unreduced loss."""
    ctx.require_dtypes(0, FLOATS)
    ctx.require_dtypes(1, _TARGETS, "targets must be")
    scores, targets = ctx.shape(0), ctx.shape(1)
    if len(scores) < 2:
        raise ctx.fail(f"scores must be [N, C, ...], got shape {list(scores)}")
    expected = (scores[0],) + tuple(scores[2:])
    if len(targets) != len(expected) or not all(map(dims_equal, targets, expected)):
        raise ctx.fail(f"targets {list(targets)} must have the scores' shape {list(scores)} "
                       f"without the class axis 1: {list(expected)}")
    if ctx.has_input(2):
        ctx.require_same_dtype(0, 2)
        ctx.require_rank(2, 1)
        if not dims_equal(ctx.shape(2)[0], scores[1]):
            raise ctx.fail(f"weight has {ctx.shape(2)[0]} elements; the scores have "
                           f"{scores[1]} classes")
    return tuple(t if isinstance(t, int) and t >= 0 else e for t, e in zip(targets, expected))


def _loss_desc(ctx: InferenceContext) -> TensorDesc:
    shape = _loss_shape(ctx)
    return TensorDesc(shape if ctx.attr("reduction") == "none" else (), ctx.dtype(0))


def negative_log_likelihood(scores: np.ndarray, target: np.ndarray,
                            weight: Optional[np.ndarray], reduction: str,
                            ignore_index: Optional[int]) -> np.ndarray:
    """The loss of ``scores`` (log-probabilities, [N, C, ...]) against ``target``."""
    classes = scores.shape[1]
    ignored = np.zeros(target.shape, np.bool_) if ignore_index is None \
        else target == ignore_index
    safe = np.clip(np.where(ignored, 0, target), 0, max(classes - 1, 0)).astype(np.intp)
    picked = np.take_along_axis(scores, np.expand_dims(safe, 1), axis=1)[:, 0]
    weights = np.ones(target.shape, scores.dtype) if weight is None \
        else weight.astype(scores.dtype, copy=False)[safe]
    weights = np.where(ignored, scores.dtype.type(0), weights)
    losses = -picked * weights
    if reduction == "none":
        return losses
    total = losses.sum(dtype=scores.dtype)
    if reduction == "sum":
        return np.asarray(total)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(total / weights.sum(dtype=scores.dtype))


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)


@register_op("NegativeLogLikelihoodLoss",
             inputs=["input", "target", Input("weight", optional=True, doc="[C]")],
             outputs=("loss",), attrs=_loss_attrs(),
             infer=lambda ctx: [_loss_desc(ctx)], cost=flops_per_output(3))
def negative_log_likelihood_loss_kernel(x: np.ndarray, target: np.ndarray,
                                        weight: Optional[np.ndarray] = None, *, reduction: str,
                                        ignore_index: Optional[int]) -> np.ndarray:
    """loss = -input[n, target[n, d...], d...] * weight[target], reduced by ``reduction``
    (``mean`` divides by the sum of the weights of the elements not ignored)."""
    loss = negative_log_likelihood(_wide(x), target, weight, reduction, ignore_index)
    return loss.astype(x.dtype, copy=False)


def _infer_softmax_cross_entropy(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [_loss_desc(ctx), ctx.input(0)]


@register_op("SoftmaxCrossEntropyLoss",
             inputs=["scores", "labels", Input("weights", optional=True, doc="[C]")],
             outputs=("output", "log_prob"), attrs=_loss_attrs(),
             infer=_infer_softmax_cross_entropy, cost=flops_per_output(6))
def softmax_cross_entropy_loss_kernel(scores: np.ndarray, labels: np.ndarray,
                                      weights: Optional[np.ndarray] = None, *, reduction: str,
                                      ignore_index: Optional[int],
                                      ) -> tuple[np.ndarray, np.ndarray]:
    """The negative log-likelihood of log_softmax(scores) over axis 1; the second output is
    that log_softmax."""
    wide = _wide(scores)
    shifted = wide - wide.max(axis=1, keepdims=True) if wide.size else wide
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = negative_log_likelihood(log_prob, labels, weights, reduction, ignore_index)
    return loss.astype(scores.dtype, copy=False), log_prob.astype(scores.dtype, copy=False)
