"""Indexing ops: GatherElements, GatherND, ScatterElements, ScatterND, TensorScatter,
TopK, ArgMax, ArgMin, NonZero, Compress, Unique.

They follow ONNX's newest opsets. Indices may be negative (counted from the end
of their axis); an index out of range is an error at run time and, when the
indices are constant, at compile time. Ops whose output size depends on the
data (NonZero, Compress, Unique, TopK with a run-time ``k``) give ``-1`` for
that dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.registry import Attr, AttrType, InferenceContext, Input, register_op
from ge.ops.shape_utils import normalize_axis
from ge.ops.tensor_ops import INDEX_TYPES, _axis, _merge_dim, _static

_REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS: dict[str, np.ufunc] = {"add": np.add, "mul": np.multiply, "max": np.maximum,
                                "min": np.minimum}


def _check_indices(indices: np.ndarray, size: int, what: str) -> np.ndarray:
    """``indices`` with negative values counted from ``size``; IndexError when out of range."""
    bad = indices[(indices < -size) | (indices >= size)]
    if bad.size:
        raise IndexError(f"{what}: index {int(bad.reshape(-1)[0])} is out of range for a "
                         f"dimension of size {size}")
    return np.where(indices < 0, indices + size, indices).astype(np.int64, copy=False)


def _check_const_indices(ctx: InferenceContext, index: int, size: Dim, what: str) -> None:
    """At compile time, fail when constant indices are out of range for ``size``."""
    values = ctx.const(index)
    if values is None or not values.size or not is_static_dim(size):
        return
    limit = int(size)
    bad = values[(values < -limit) | (values >= limit)]
    if bad.size:
        raise ctx.fail(f"index {int(bad.reshape(-1)[0])} is out of range for {what} "
                       f"(size {limit})")


def _same_shape(ctx: InferenceContext, first: int, second: int) -> None:
    """Fail unless inputs ``first`` and ``second`` can have the same shape."""
    a, b = ctx.shape(first), ctx.shape(second)
    if len(a) != len(b) or any(_merge_dim(x, y) is None for x, y in zip(a, b)):
        raise ctx.fail(f"{ctx.schema.input_name(first)} {list(a)} and "
                       f"{ctx.schema.input_name(second)} {list(b)} must have the same shape")


# -- GatherElements, GatherND -----------------------------------------------------------

def _infer_gather_elements(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    ctx.require_dtypes(1, INDEX_TYPES, "indices must be")
    if len(ctx.shape(1)) != len(shape) or not shape:
        raise ctx.fail(f"indices {list(ctx.shape(1))} must have the rank of data {list(shape)}"
                       f" (at least 1)")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    _check_const_indices(ctx, 1, shape[axis], f"axis {axis} of data {list(shape)}")
    return [TensorDesc(ctx.shape(1), ctx.dtype(0))]


@register_op("GatherElements", inputs=["data", "indices"],
             attrs=[Attr("axis", AttrType.INT, 0)], infer=_infer_gather_elements)
def gather_elements_kernel(data: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    """y[i, j, ...] = data[..., indices[i, j, ...], ...] with the index on ``axis``."""
    axis = normalize_axis(axis, data.ndim)
    positions = _check_indices(indices, data.shape[axis], "GatherElements")
    return np.take_along_axis(data, positions, axis=axis)


def _infer_gather_nd(ctx: InferenceContext) -> Sequence[TensorDesc]:
    data, indices = ctx.shape(0), ctx.shape(1)
    ctx.require_dtypes(1, INDEX_TYPES, "indices must be")
    batch = ctx.attr("batch_dims")
    if not indices or len(indices) <= batch or len(data) <= batch:
        raise ctx.fail(f"indices {list(indices)} and data {list(data)} need a rank above "
                       f"batch_dims={batch}")
    depth = _static(indices[-1])
    if depth is None:
        raise ctx.fail(f"the last dimension of indices {list(indices)} must be known: it "
                       f"gives the output rank")
    if depth > len(data) - batch:
        raise ctx.fail(f"indices {list(indices)} index {depth} axes; data {list(data)} has "
                       f"{len(data) - batch} after batch_dims={batch}")
    for axis in range(batch):
        if _merge_dim(data[axis], indices[axis]) is None:
            raise ctx.fail(f"batch dimension {axis} differs: data {list(data)}, "
                           f"indices {list(indices)}")
    dims = list(indices[:-1]) + list(data[batch + depth:])
    return [TensorDesc(tuple(dims), ctx.dtype(0))]


@register_op("GatherND", inputs=["data", "indices"],
             attrs=[Attr("batch_dims", AttrType.INT, 0,
                         check=lambda v: None if v >= 0 else "must not be negative")],
             infer=_infer_gather_nd)
def gather_nd_kernel(data: np.ndarray, indices: np.ndarray, *, batch_dims: int) -> np.ndarray:
    """y[b..., q...] = data[b..., indices[b..., q..., :]] (the first axes are batch axes)."""
    batch_shape = data.shape[:batch_dims]
    depth = indices.shape[-1]
    batches = int(np.prod(batch_shape, dtype=np.int64))
    flat_data = data.reshape((batches,) + data.shape[batch_dims:])
    queries = int(np.prod(indices.shape[batch_dims:-1], dtype=np.int64))
    flat_indices = indices.reshape(batches, queries, depth)
    columns = [_check_indices(flat_indices[..., i], flat_data.shape[1 + i], "GatherND")
               for i in range(depth)]
    rows = np.broadcast_to(np.arange(batches)[:, None], (batches, queries))
    picked = flat_data[(rows,) + tuple(columns)]
    return picked.reshape(indices.shape[:-1] + data.shape[batch_dims + depth:])


# -- ScatterElements, ScatterND, TensorScatter ------------------------------------------

def _scatter(target: np.ndarray, where: tuple[Any, ...], updates: np.ndarray,
             reduction: str) -> np.ndarray:
    """Write (or combine by ``reduction``) ``updates`` into a copy of ``target`` at ``where``."""
    result = target.copy()
    if reduction == "none":
        result[where] = updates
    else:
        _UFUNCS[reduction].at(result, where, updates)
    return result


def _infer_scatter_elements(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_same_dtype(0, 2)
    ctx.require_dtypes(1, INDEX_TYPES, "indices must be")
    _same_shape(ctx, 1, 2)
    shape = ctx.shape(0)
    if len(ctx.shape(1)) != len(shape) or not shape:
        raise ctx.fail(f"indices {list(ctx.shape(1))} must have the rank of data {list(shape)}"
                       f" (at least 1)")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    _check_const_indices(ctx, 1, shape[axis], f"axis {axis} of data {list(shape)}")
    return [ctx.input(0)]


@register_op("ScatterElements", inputs=["data", "indices", "updates"],
             attrs=[Attr("axis", AttrType.INT, 0),
                    Attr("reduction", AttrType.STRING, "none", choices=_REDUCTIONS)],
             infer=_infer_scatter_elements)
def scatter_elements_kernel(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                            axis: int, reduction: str) -> np.ndarray:
    """y = data with y[..., indices[i, j, ...], ...] = updates[i, j, ...] on ``axis``.

    With a reduction, repeated indices combine (add, mul, max, min); without
    one, the last of repeated indices wins.
    """
    axis = normalize_axis(axis, data.ndim)
    positions = _check_indices(indices, data.shape[axis], "ScatterElements")
    grids: list[Any] = list(np.indices(indices.shape, sparse=True))
    grids[axis] = positions
    return _scatter(data, tuple(grids), updates, reduction)


def _infer_scatter_nd(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_same_dtype(0, 2)
    ctx.require_dtypes(1, INDEX_TYPES, "indices must be")
    data, indices, updates = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    depth = _static(indices[-1]) if indices else None
    if not indices or (depth is not None and depth > len(data)):
        raise ctx.fail(f"indices {list(indices)} must have rank >= 1 and a last dimension "
                       f"<= the rank of data {list(data)}")
    if depth is not None:
        expected = list(indices[:-1]) + list(data[depth:])
        if len(updates) != len(expected) or any(
                _merge_dim(a, b) is None for a, b in zip(updates, expected)):
            raise ctx.fail(f"updates {list(updates)} must have shape {expected}")
    return [ctx.input(0)]


@register_op("ScatterND", inputs=["data", "indices", "updates"],
             attrs=[Attr("reduction", AttrType.STRING, "none", choices=_REDUCTIONS)],
             infer=_infer_scatter_nd)
def scatter_nd_kernel(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                      reduction: str) -> np.ndarray:
    """y = data with y[indices[i..., :]] = updates[i...] (or combined by ``reduction``)."""
    depth = indices.shape[-1]
    where = tuple(_check_indices(indices[..., i], data.shape[i], "ScatterND")
                  for i in range(depth))
    return _scatter(data, where, updates, reduction)


def _infer_tensor_scatter(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_same_dtype(0, 1)
    cache, update = ctx.shape(0), ctx.shape(1)
    axis = _axis(ctx, ctx.attr("axis"), len(cache))
    if axis == 0:
        raise ctx.fail("axis must not be the batch axis 0")
    if len(update) != len(cache):
        raise ctx.fail(f"update {list(update)} must have the rank of past_cache {list(cache)}")
    for position, (a, b) in enumerate(zip(cache, update)):
        if position == axis:
            if is_static_dim(a) and is_static_dim(b) and int(b) > int(a):
                raise ctx.fail(f"update {list(update)} is longer than past_cache {list(cache)} "
                               f"on axis {axis}")
        elif _merge_dim(a, b) is None:
            raise ctx.fail(f"update {list(update)} and past_cache {list(cache)} differ on "
                           f"axis {position}")
    if ctx.has_input(2):
        ctx.require_dtypes(2, INDEX_TYPES, "write_indices must be")
        ctx.require_rank(2, 1)
    return [ctx.input(0)]


@register_op("TensorScatter", inputs=["past_cache", "update", Input("write_indices",
                                                                     optional=True)],
             attrs=[Attr("axis", AttrType.INT, -2, doc="the sequence axis"),
                    Attr("mode", AttrType.STRING, "linear", choices=("linear", "circular"))],
             infer=_infer_tensor_scatter)
def tensor_scatter_kernel(past_cache: np.ndarray, update: np.ndarray,
                          write_indices: Optional[np.ndarray] = None, *, axis: int,
                          mode: str) -> np.ndarray:
    """y = past_cache with ``update`` written along ``axis`` from ``write_indices[b]``.

    A KV-cache update: batch b's sequence starts at ``write_indices[b]`` (0 when
    absent); in circular mode positions wrap around the cache's length.
    """
    axis = normalize_axis(axis, past_cache.ndim)
    capacity, length = past_cache.shape[axis], update.shape[axis]
    batch = past_cache.shape[0]
    starts = np.zeros(batch, np.int64) if write_indices is None else \
        write_indices.astype(np.int64).reshape(batch)
    positions = starts[:, None] + np.arange(length)[None, :]  # [batch, length]
    if mode == "circular":
        positions %= capacity
    elif positions.size and (positions.min() < 0 or positions.max() >= capacity):
        raise IndexError(f"TensorScatter: writes reach position {int(positions.max())} of a "
                         f"cache of length {capacity}")
    shape = [batch] + [1] * (past_cache.ndim - 1)
    shape[axis] = length
    result = past_cache.copy()
    np.put_along_axis(result, np.broadcast_to(positions.reshape(shape), update.shape),
                      update, axis=axis)
    return result


# -- TopK, ArgMax, ArgMin ---------------------------------------------------------------

def _infer_top_k(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    if not shape:
        raise ctx.fail("cannot take the top k of a scalar")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    ctx.require_dtypes(1, INDEX_TYPES, "k must be")
    if len(ctx.shape(1)) > 1:
        raise ctx.fail(f"k must be a 1-element vector, got shape {list(ctx.shape(1))}")
    k = ctx.const_ints(1)
    if k is None:
        shape[axis] = -1
    else:
        if len(k) != 1 or k[0] < 0:
            raise ctx.fail(f"k must be one value >= 0, got {k}")
        if is_static_dim(shape[axis]) and k[0] > int(shape[axis]):
            raise ctx.fail(f"k={k[0]} exceeds dimension {axis} of {shape}")
        shape[axis] = k[0]
    return [TensorDesc(tuple(shape), ctx.dtype(0)), TensorDesc(tuple(shape), DataType.DT_INT64)]


def _ordered(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Positions along ``axis`` that sort x (descending if ``largest``); ties keep index order."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")
    size = x.shape[axis]
    backwards = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return size - 1 - np.flip(backwards, axis)


@register_op("TopK", inputs=["x", "k"], outputs=("values", "indices"),
             attrs=[Attr("axis", AttrType.INT, -1),
                    Attr("largest", AttrType.INT, 1, choices=(0, 1)),
                    Attr("sorted", AttrType.INT, 1, choices=(0, 1),
                         doc="GE always returns them sorted")],
             infer=_infer_top_k)
def top_k_kernel(x: np.ndarray, k: np.ndarray, *, axis: int, largest: int,
                 sorted: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002
    """(values, indices) = the k largest (or smallest) entries along ``axis``, in order.

    Equal values keep their order of position (the lower index first).
    """
    axis = normalize_axis(axis, x.ndim)
    count = int(k.reshape(-1)[0])
    if not 0 <= count <= x.shape[axis]:
        raise ValueError(f"k={count} is out of range for axis {axis} of size {x.shape[axis]}")
    order = np.take(_ordered(x, axis, bool(largest)), np.arange(count), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.int64)


def _infer_arg(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    if not shape:
        raise ctx.fail("cannot reduce a scalar")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    if is_static_dim(shape[axis]) and shape[axis] == 0:
        raise ctx.fail(f"cannot reduce the empty axis {axis} of {shape}")
    if ctx.attr("keepdims"):
        shape[axis] = 1
    else:
        del shape[axis]
    return [TensorDesc(tuple(shape), DataType.DT_INT64)]


def _arg_attrs() -> list[Attr]:
    return [Attr("axis", AttrType.INT, 0),
            Attr("keepdims", AttrType.INT, 1, choices=(0, 1)),
            Attr("select_last_index", AttrType.INT, 0, choices=(0, 1),
                 doc="1: on ties, the last position instead of the first")]


def _arg_reduce(find: Callable[..., np.ndarray], data: np.ndarray, axis: int, keepdims: int,
                select_last_index: int) -> np.ndarray:
    axis = normalize_axis(axis, data.ndim)
    if select_last_index:
        found = data.shape[axis] - 1 - find(np.flip(data, axis), axis=axis)
    else:
        found = find(data, axis=axis)
    found = found.astype(np.int64)
    return np.expand_dims(found, axis) if keepdims else found


@register_op("ArgMax", inputs=["data"], attrs=_arg_attrs(), infer=_infer_arg)
def arg_max_kernel(data: np.ndarray, *, axis: int, keepdims: int,
                   select_last_index: int) -> np.ndarray:
    """y = the int64 position of the largest entry along ``axis`` (the first, or last, on ties)."""
    return _arg_reduce(np.argmax, data, axis, keepdims, select_last_index)


@register_op("ArgMin", inputs=["data"], attrs=_arg_attrs(), infer=_infer_arg)
def arg_min_kernel(data: np.ndarray, *, axis: int, keepdims: int,
                   select_last_index: int) -> np.ndarray:
    """y = the int64 position of the smallest entry along ``axis`` (first, or last, on ties)."""
    return _arg_reduce(np.argmin, data, axis, keepdims, select_last_index)


# -- NonZero, Compress, Unique ----------------------------------------------------------

def _infer_non_zero(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [TensorDesc((len(ctx.shape(0)), -1), DataType.DT_INT64)]


@register_op("NonZero", inputs=["x"], infer=_infer_non_zero)
def non_zero_kernel(x: np.ndarray) -> np.ndarray:
    """y = [rank, n] int64: the coordinates of the n non-zero entries, in row-major order."""
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), np.int64)
    return np.stack(np.nonzero(x)).astype(np.int64).reshape(x.ndim, -1)


def _infer_compress(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(1, (DataType.DT_BOOL,), "condition must be")
    ctx.require_rank(1, 1)
    axis = ctx.attr("axis")
    if axis is None:
        return [TensorDesc((-1,), ctx.dtype(0))]
    shape = list(ctx.shape(0))
    axis = _axis(ctx, axis, len(shape))
    if is_static_dim(ctx.shape(1)[0]) and is_static_dim(shape[axis]) and \
            int(ctx.shape(1)[0]) > int(shape[axis]):
        raise ctx.fail(f"condition has {ctx.shape(1)[0]} entries; axis {axis} of {shape} "
                       f"has {shape[axis]}")
    shape[axis] = -1
    return [TensorDesc(tuple(shape), ctx.dtype(0))]


@register_op("Compress", inputs=["input", "condition"],
             attrs=[Attr("axis", AttrType.INT, None, doc="default: the input flattened")],
             infer=_infer_compress)
def compress_kernel(input: np.ndarray, condition: np.ndarray, *,  # noqa: A002
                    axis: Optional[int]) -> np.ndarray:
    """y = the slices of ``input`` along ``axis`` where ``condition`` is true."""
    return np.compress(condition.reshape(-1), input, axis=axis)


def _infer_unique(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    axis = ctx.attr("axis")
    if axis is None:
        length: Dim = shape[0] if len(shape) == 1 else -1
        if all(is_static_dim(d) for d in shape):
            length = int(np.prod([int(d) for d in shape], dtype=np.int64))
        unique: tuple[Dim, ...] = (-1,)
    else:
        axis = _axis(ctx, axis, len(shape))
        length = shape[axis]
        shape[axis] = -1
        unique = tuple(shape)
    index = TensorDesc((-1,), DataType.DT_INT64)
    return [TensorDesc(unique, ctx.dtype(0)), index, TensorDesc((length,), DataType.DT_INT64),
            index]


@register_op("Unique", inputs=["x"], outputs=("y", "indices", "inverse_indices", "counts"),
             attrs=[Attr("axis", AttrType.INT, None, doc="default: unique scalars of x flattened"),
                    Attr("sorted", AttrType.INT, 1, choices=(0, 1),
                         doc="0: in order of first occurrence")],
             infer=_infer_unique)
def unique_kernel(x: np.ndarray, *, axis: Optional[int],
                  sorted: int) -> tuple[np.ndarray, ...]:  # noqa: A002
    """(y, indices, inverse_indices, counts): the unique values (or slices along ``axis``).

    ``indices`` are first occurrences in x, ``inverse_indices`` map each entry
    (or slice) of x to its place in y, ``counts`` how often each occurs.
    """
    source = x.reshape(-1) if axis is None else x
    found, first, inverse, counts = np.unique(source, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        found = np.take(found, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (found.astype(x.dtype, copy=False), first.astype(np.int64),
            inverse.astype(np.int64), counts.astype(np.int64))
