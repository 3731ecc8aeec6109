"""Tensor rearrangements: Tile, Trilu, DepthToSpace, SpaceToDepth,
CenterCropPad and ReverseSequence, following ONNX's newest opsets.

Sizes that arrive as inputs (the repeats of a tile, a crop's shape) are read at compile
time when they are constants; otherwise inference keeps the rank and gives ``-1`` for the
dimensions it cannot know.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import TensorDesc
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.registry import REQUIRED, Attr, AttrType, InferenceContext, Input, register_op
from ge.ops.shape_utils import multiply_dims, normalize_axis
from ge.ops.tensor_generators import scalar_input
from ge.ops.tensor_ops import (
    INDEX_TYPES,
    _axes,
    _index_vector,
    _vector_length,
)


def _positive(value: int) -> Optional[str]:
    return None if value >= 1 else "must be at least 1"


# -- Tile, Trilu ---------------------------------------------------------------------

def _infer_tile(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    repeats = _index_vector(ctx, 1)
    length = len(repeats) if repeats is not None else _vector_length(ctx, 1)
    if length is not None and length != len(shape):
        raise ctx.fail(f"repeats has {length} values; the input has rank {len(shape)}")
    if repeats is None:  # an empty dimension stays empty whatever the repeats
        return [TensorDesc(tuple(0 if d == 0 else -1 for d in shape), ctx.dtype(0))]
    if any(r < 0 for r in repeats):
        raise ctx.fail(f"repeats {repeats} must not be negative")
    dims: list[Dim] = [d if r == 1 else 0 if r == 0 else multiply_dims([d, r])
                       for d, r in zip(shape, repeats)]
    return [TensorDesc(tuple(dims), ctx.dtype(0))]


@register_op("Tile", inputs=["input", "repeats"], infer=_infer_tile, moved_inputs=(0,))
def tile_kernel(input: np.ndarray, repeats: np.ndarray) -> np.ndarray:  # noqa: A002
    """y = ``input`` repeated ``repeats[i]`` times along each axis i."""
    counts = [int(r) for r in repeats.reshape(-1)]
    if len(counts) != input.ndim or any(c < 0 for c in counts):
        raise ValueError(f"repeats {counts} do not fit an input of rank {input.ndim}")
    return np.tile(input, counts)


def _infer_trilu(ctx: InferenceContext) -> Sequence[TensorDesc]:
    if len(ctx.shape(0)) < 2:
        raise ctx.fail(f"input must have rank >= 2, got shape {list(ctx.shape(0))}")
    if ctx.has_input(1):
        ctx.require_dtypes(1, INDEX_TYPES, "k must be")
        scalar_input(ctx, 1)
    return [ctx.input(0)]


@register_op("Trilu", inputs=["input", Input("k", optional=True)],
             attrs=[Attr("upper", AttrType.INT, 1, choices=(0, 1),
                         doc="1: keep the upper triangle; 0: the lower")],
             infer=_infer_trilu)
def trilu_kernel(input: np.ndarray, k: Optional[np.ndarray] = None, *,  # noqa: A002
                 upper: int) -> np.ndarray:
    """y = the upper (or lower) triangle of each matrix in the last two axes, from diagonal k."""
    offset = 0 if k is None else int(k.reshape(-1)[0])
    rows, cols = input.shape[-2:]
    distance = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = distance >= offset if upper else distance <= offset
    return np.where(keep, input, np.zeros((), input.dtype))


# -- DepthToSpace, SpaceToDepth ---------------------------------------------------------

def _block_attrs() -> list[Attr]:
    return [Attr("blocksize", AttrType.INT, REQUIRED, check=_positive),
            Attr("mode", AttrType.STRING, "DCR", choices=("DCR", "CRD"),
                 doc="DCR: depth-column-row block order; CRD: column-row-depth")]


def _infer_depth_to_space(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_rank(0, 4)
    batch, channels, height, width = ctx.shape(0)
    block = ctx.attr("blocksize")
    if is_static_dim(channels) and int(channels) % (block * block):
        raise ctx.fail(f"channels ({channels}) must be a multiple of blocksize^2 "
                       f"({block * block})")
    depth = int(channels) // (block * block) if is_static_dim(channels) else -1
    dims = (batch, depth, multiply_dims([height, block]), multiply_dims([width, block]))
    return [TensorDesc(dims, ctx.dtype(0))]


@register_op("DepthToSpace", inputs=["input"], attrs=_block_attrs(),
             infer=_infer_depth_to_space)
def depth_to_space_kernel(input: np.ndarray, *, blocksize: int,  # noqa: A002
                          mode: str) -> np.ndarray:
    """y = [N, C/b², H·b, W·b]: each b×b block of channels becomes a b×b patch of pixels."""
    batch, channels, height, width = input.shape
    block, depth = blocksize, channels // (blocksize * blocksize)
    if mode == "DCR":
        split = input.reshape(batch, block, block, depth, height, width)
        moved = split.transpose(0, 3, 4, 1, 5, 2)
    else:
        split = input.reshape(batch, depth, block, block, height, width)
        moved = split.transpose(0, 1, 4, 2, 5, 3)
    return moved.reshape(batch, depth, height * block, width * block)


def _infer_space_to_depth(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_rank(0, 4)
    batch, channels, height, width = ctx.shape(0)
    block = ctx.attr("blocksize")
    dims: list[Dim] = [batch, multiply_dims([channels, block * block])]
    for name, dim in (("height", height), ("width", width)):
        if is_static_dim(dim) and int(dim) % block:
            raise ctx.fail(f"{name} ({dim}) must be a multiple of blocksize ({block})")
        dims.append(int(dim) // block if is_static_dim(dim) else -1)
    return [TensorDesc(tuple(dims), ctx.dtype(0))]


@register_op("SpaceToDepth", inputs=["input"], attrs=_block_attrs(),
             infer=_infer_space_to_depth)
def space_to_depth_kernel(input: np.ndarray, *, blocksize: int,  # noqa: A002
                          mode: str) -> np.ndarray:
    """y = [N, C·b², H/b, W/b]: each b×b patch of pixels becomes b² channels."""
    batch, channels, height, width = input.shape
    block = blocksize
    split = input.reshape(batch, channels, height // block, block, width // block, block)
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return split.transpose(order).reshape(batch, channels * block * block,
                                          height // block, width // block)


# -- CenterCropPad, ReverseSequence -----------------------------------------------------

def _crop_axes(ctx: InferenceContext, rank: int) -> list[int]:
    axes = ctx.attr("axes")
    return _axes(ctx, axes, rank) if axes is not None else list(range(rank))


def _infer_center_crop_pad(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    axes = _crop_axes(ctx, len(shape))
    sizes = _index_vector(ctx, 1)
    length = len(sizes) if sizes is not None else _vector_length(ctx, 1)
    if length is not None and length != len(axes):
        raise ctx.fail(f"shape has {length} values for {len(axes)} axes")
    for position, axis in enumerate(axes):
        if sizes is not None and sizes[position] < 0:
            raise ctx.fail(f"shape {sizes} has a negative size")
        shape[axis] = -1 if sizes is None else sizes[position]
    return [TensorDesc(tuple(shape), ctx.dtype(0))]


@register_op("CenterCropPad", inputs=["input_data", "shape"],
             attrs=[Attr("axes", AttrType.INTS, None, doc="default: every axis")],
             infer=_infer_center_crop_pad)
def center_crop_pad_kernel(input_data: np.ndarray, shape: np.ndarray, *,
                           axes: Optional[list[int]]) -> np.ndarray:
    """y = ``input_data`` centre-cropped or zero-padded to ``shape`` on ``axes``.

    An odd difference leaves the extra element on the right (end) side.
    """
    chosen = list(range(input_data.ndim)) if axes is None else \
        [normalize_axis(a, input_data.ndim) for a in axes]
    sizes = [int(v) for v in shape.reshape(-1)]
    dims = list(input_data.shape)
    source = [slice(None)] * input_data.ndim
    target = [slice(None)] * input_data.ndim
    for axis, size in zip(chosen, sizes):
        have = dims[axis]
        offset = abs(have - size) // 2
        if size < have:
            source[axis] = slice(offset, offset + size)
        elif size > have:
            target[axis] = slice(offset, offset + have)
        dims[axis] = size
    result = np.zeros(dims, input_data.dtype)
    result[tuple(target)] = input_data[tuple(source)]
    return result


def _infer_reverse_sequence(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    if len(shape) < 2:
        raise ctx.fail(f"input must have rank >= 2, got shape {list(shape)}")
    if ctx.attr("batch_axis") == ctx.attr("time_axis"):
        raise ctx.fail("batch_axis and time_axis must differ")
    ctx.require_dtypes(1, INDEX_TYPES, "sequence_lens must be")
    ctx.require_rank(1, 1)
    batch, lengths = shape[ctx.attr("batch_axis")], ctx.shape(1)[0]
    if is_static_dim(batch) and is_static_dim(lengths) and batch != lengths:
        raise ctx.fail(f"sequence_lens has {lengths} values; the batch axis of "
                       f"{list(shape)} has {batch}")
    return [ctx.input(0)]


@register_op("ReverseSequence", inputs=["input", "sequence_lens"],
             attrs=[Attr("batch_axis", AttrType.INT, 1, choices=(0, 1)),
                    Attr("time_axis", AttrType.INT, 0, choices=(0, 1))],
             infer=_infer_reverse_sequence)
def reverse_sequence_kernel(input: np.ndarray, sequence_lens: np.ndarray, *,  # noqa: A002
                            batch_axis: int, time_axis: int) -> np.ndarray:
    """y = ``input`` with the first ``sequence_lens[b]`` time steps of each batch b reversed."""
    steps = input.shape[time_axis]
    lengths = np.clip(sequence_lens.astype(np.int64), 0, steps)
    time = np.arange(steps)[None, :]  # [1, T]
    source = np.where(time < lengths[:, None], lengths[:, None] - 1 - time, time)  # [B, T]
    if time_axis < batch_axis:
        source = source.T
    index = source.reshape(source.shape + (1,) * (input.ndim - 2))
    return np.take_along_axis(input, index, axis=time_axis)
