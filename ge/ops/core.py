"""Sources and plumbing: Data, Const, Identity, Cast, Shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ge.errors import InputError
from ge.ir import DataType, Format, Tensor, TensorDesc
from ge.ops.registry import REQUIRED, Attr, AttrType, Cost, InferenceContext, Trait, register_op
from ge.ops.shape_utils import normalize_axis


def _infer_data(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [TensorDesc(ctx.attr("shape"), ctx.attr("dtype"), ctx.attr("format"))]


@register_op(
    "Data",
    outputs=("y",),
    attrs=[
        Attr("shape", AttrType.SHAPE, REQUIRED, doc="dimensions; -1 or a name if unknown"),
        Attr("dtype", AttrType.DTYPE, DataType.DT_FLOAT),
        Attr("format", AttrType.FORMAT, Format.ND),
        Attr("index", AttrType.INT, None, doc="position among the graph inputs (informative)"),
    ],
    infer=_infer_data,
    traits=(Trait.SOURCE,),
)
def data_kernel(**attrs: Any) -> np.ndarray:
    """A graph input; its node name is the feed key. Its value comes from the feed."""
    raise InputError("a Data node has no kernel: its value must be fed")


def _infer_const(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [ctx.attr("value").desc]


def _const_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    return Cost(0, 0)


@register_op(
    "Const",
    attrs=[Attr("value", AttrType.TENSOR, REQUIRED, doc="the constant, a ge.Tensor")],
    infer=_infer_const,
    cost=_const_cost,
    traits=(Trait.SOURCE, Trait.PURE),
)
def const_kernel(*, value: Tensor) -> np.ndarray:
    """A constant tensor (weights, shapes): y = value."""
    return value.numpy()


def _same_as_input(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [ctx.input(0)]


@register_op("Identity", inputs=["x"], infer=_same_as_input,
             traits=(Trait.PURE, Trait.VIEW, Trait.ELEMENTWISE))
def identity_kernel(x: np.ndarray) -> np.ndarray:
    """y = x."""
    return x


def _infer_cast(ctx: InferenceContext) -> Sequence[TensorDesc]:
    desc = ctx.input(0)
    return [TensorDesc(desc.shape, ctx.attr("dtype"), desc.format)]


@register_op("Cast", inputs=["x"], attrs=[Attr("dtype", AttrType.DTYPE, REQUIRED)],
             infer=_infer_cast, traits=(Trait.PURE, Trait.ELEMENTWISE))
def cast_kernel(x: np.ndarray, *, dtype: DataType) -> np.ndarray:
    """y = x converted to ``dtype`` (floats to integers truncate toward zero)."""
    target = dtype.np_dtype
    if x.dtype.kind == "f" and target.kind in "iu":
        x = np.trunc(x)
    return x.astype(target, copy=False)


def _shape_range(rank: int, start: int, end: Any) -> tuple[int, int]:
    first = min(max(start + rank if start < 0 else start, 0), rank)
    if end is None:
        return first, rank
    last = min(max(end + rank if end < 0 else end, 0), rank)
    return first, max(first, last)


def _infer_shape(ctx: InferenceContext) -> Sequence[TensorDesc]:
    first, last = _shape_range(len(ctx.shape(0)), ctx.attr("start"), ctx.attr("end"))
    return [TensorDesc((last - first,), DataType.DT_INT64)]


@register_op("Shape", inputs=["x"],
             attrs=[Attr("start", AttrType.INT, 0), Attr("end", AttrType.INT, None)],
             infer=_infer_shape)
def shape_kernel(x: np.ndarray, *, start: int, end: Any) -> np.ndarray:
    """y = the dimensions of x (from ``start`` to ``end``) as int64."""
    first, last = _shape_range(x.ndim, start, end)
    return np.array(x.shape[first:last], dtype=np.int64)


def channel_axis(data_format: Format, rank: int) -> int:
    """The channel axis of a tensor in ``data_format`` (NCHW: 1; NHWC and ND: last)."""
    return normalize_axis(1 if data_format is Format.NCHW else -1, rank)
