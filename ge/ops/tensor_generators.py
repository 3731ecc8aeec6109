"""Tensor generators: ConstantOfShape, Range, EyeLike and OneHot.

They follow ONNX's newest opsets. Sizes that arrive as inputs (a shape, the bounds of
a range, a one-hot depth) are read at compile time when they are constants; otherwise
inference keeps the rank and gives ``-1`` for the dimensions it cannot know.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, Tensor, TensorDesc
from ge.ir.tensor import is_static_dim
from ge.ops.registry import Attr, AttrType, InferenceContext, register_op
from ge.ops.shape_utils import normalize_axis
from ge.ops.tensor_ops import (
    _index_vector,
    _known_length,
)

__all__ = ["scalar_input", "const_scalar"]

_HALF = (DataType.DT_FLOAT16, DataType.DT_BF16)


def scalar_input(ctx: InferenceContext, index: int) -> None:
    """Fail unless input ``index`` holds one element (a scalar or a 1-element vector)."""
    shape = ctx.shape(index)
    if len(shape) > 1 or (shape and is_static_dim(shape[0]) and shape[0] != 1):
        raise ctx.fail(f"input {ctx.schema.input_name(index)!r} must be a scalar, "
                       f"got shape {list(shape)}")


def const_scalar(ctx: InferenceContext, index: int) -> Optional[float]:
    """A constant one-element input as a Python number, else None."""
    value = ctx.const(index)
    return None if value is None else value.reshape(-1)[0].item()


# -- ConstantOfShape, Range -------------------------------------------------------------

def _infer_constant_of_shape(ctx: InferenceContext) -> Sequence[TensorDesc]:
    value: Optional[Tensor] = ctx.attr("value")
    if value is not None and value.numpy().size != 1:
        raise ctx.fail(f"value must hold exactly one element, got shape {list(value.shape)}")
    dtype = DataType.DT_FLOAT if value is None else value.dtype
    dims = _index_vector(ctx, 0)
    if dims is None:
        return [TensorDesc((-1,) * _known_length(ctx, 0, "output rank"), dtype)]
    if any(d < 0 for d in dims):
        raise ctx.fail(f"shape {dims} has a negative size")
    return [TensorDesc(tuple(dims), dtype)]


@register_op("ConstantOfShape", inputs=["shape"],
             attrs=[Attr("value", AttrType.TENSOR, None,
                         doc="one element giving the fill value and dtype; default float 0")],
             infer=_infer_constant_of_shape)
def constant_of_shape_kernel(shape: np.ndarray, *, value: Optional[Tensor]) -> np.ndarray:
    """y = a tensor of dimensions ``shape`` filled with ``value``."""
    fill = np.zeros(1, np.float32) if value is None else value.numpy().reshape(-1)
    return np.full([int(d) for d in shape.reshape(-1)], fill[0], dtype=fill.dtype)


def _range_count(start: float, limit: float, delta: float) -> int:
    """ONNX's element count of a range: max(ceil((limit - start) / delta), 0)."""
    if delta == 0:
        raise ValueError("delta must not be 0")
    if all(isinstance(v, int) for v in (start, limit, delta)):
        return max(-(-(int(limit) - int(start)) // int(delta)), 0)
    return max(math.ceil((limit - start) / delta), 0)


def _infer_range(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1, 2)
    if dtype is DataType.DT_BOOL or not (dtype.is_float or dtype.is_integer):
        raise ctx.fail_dtype(f"Range takes numbers, got {dtype.short_name}")
    for index in range(3):
        scalar_input(ctx, index)
    bounds = [const_scalar(ctx, i) for i in range(3)]
    if None in bounds:
        return [TensorDesc((-1,), dtype)]
    start, limit, delta = bounds
    assert start is not None and limit is not None and delta is not None
    try:
        return [TensorDesc((_range_count(start, limit, delta),), dtype)]
    except ValueError as error:
        raise ctx.fail(str(error)) from None


@register_op("Range", inputs=["start", "limit", "delta"],
             attrs=[Attr("stash_type", AttrType.INT, 1, choices=(1, 11),
                         doc="half-precision ranges compute in float32 (1) or float64 (11)")],
             infer=_infer_range)
def range_kernel(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
                 stash_type: int) -> np.ndarray:
    """y[i] = start + i * delta for i in [0, max(ceil((limit - start) / delta), 0))."""
    first, last, step = (v.reshape(-1)[0].item() for v in (start, limit, delta))
    count = _range_count(first, last, step)
    if start.dtype.kind in "iu":
        values = first + np.arange(count, dtype=np.int64) * step
        return values.astype(start.dtype)
    half = start.dtype in (np.dtype(np.float16), DataType.DT_BF16.np_dtype)
    compute = np.float32 if half and stash_type == 1 else np.float64
    values = compute(first) + np.arange(count, dtype=compute) * compute(step)
    return values.astype(start.dtype)


# -- EyeLike ---------------------------------------------------------------------------

def _infer_eye_like(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_rank(0, 2)
    dtype = ctx.attr("dtype") or ctx.dtype(0)
    return [TensorDesc(ctx.shape(0), dtype)]


@register_op("EyeLike", inputs=["input"],
             attrs=[Attr("dtype", AttrType.DTYPE, None, doc="default: the input's dtype"),
                    Attr("k", AttrType.INT, 0, doc="diagonal: > 0 above the main one")],
             infer=_infer_eye_like)
def eye_like_kernel(input: np.ndarray, *, dtype: Optional[DataType],  # noqa: A002
                    k: int) -> np.ndarray:
    """y = a matrix shaped like ``input`` with ones on diagonal ``k`` and zeros elsewhere."""
    target = input.dtype if dtype is None else dtype.np_dtype
    rows, cols = input.shape
    return np.eye(rows, cols, k, dtype=np.float32).astype(target)


# -- OneHot -----------------------------------------------------------------------------

def _infer_one_hot(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    scalar_input(ctx, 1)
    values = ctx.shape(2)
    if len(values) != 1 or (is_static_dim(values[0]) and values[0] != 2):
        raise ctx.fail(f"values must be [off_value, on_value], got shape {list(ctx.shape(2))}")
    for index in (0, 1):
        if ctx.dtype(index) is DataType.DT_BOOL:
            raise ctx.fail_dtype(f"input {ctx.schema.input_name(index)!r} must be numeric")
    try:
        axis = normalize_axis(ctx.attr("axis"), len(shape) + 1)
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    depth = const_scalar(ctx, 1)
    if depth is not None and depth < 1:
        raise ctx.fail(f"depth must be at least 1, got {depth}")
    dims = list(shape)
    dims.insert(axis, -1 if depth is None else int(depth))
    return [TensorDesc(tuple(dims), ctx.dtype(2))]


@register_op("OneHot", inputs=["indices", "depth", "values"],
             attrs=[Attr("axis", AttrType.INT, -1, doc="where the new depth axis goes")],
             infer=_infer_one_hot)
def one_hot_kernel(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
                   axis: int) -> np.ndarray:
    """y = ``values[1]`` where the new axis equals the index, ``values[0]`` elsewhere.

    Negative indices count from ``depth``; indices outside [-depth, depth) give a
    row of ``values[0]``.
    """
    size = int(depth.reshape(-1)[0])
    positions = indices.astype(np.int64)
    positions = np.where(positions < 0, positions + size, positions)
    axis = normalize_axis(axis, indices.ndim + 1)
    hot = np.expand_dims(positions, axis) == np.arange(size).reshape(
        [size if i == axis else 1 for i in range(indices.ndim + 1)])
    off, on = values.reshape(-1)[:2]
    return np.where(hot, on, off).astype(values.dtype)
