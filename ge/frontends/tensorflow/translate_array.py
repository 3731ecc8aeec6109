"""TensorFlow constants, shapes, slicing, joining, casts and tensor generators.

TensorFlow passes sizes, axes and paddings as (``int32``) tensors; the registry's
``Reshape``, ``Slice``, ``Pad``, ``Tile``, ``Expand`` and the reductions take them as
inputs too, so a computed shape (``Shape`` -> ``StridedSlice`` -> ``Pack`` ->
``Reshape``, Keras's ``Flatten`` on a dynamic batch) stays computed. Where the registry
takes an attribute (``Transpose``'s ``perm``, ``Concat``'s ``axis``) or the translation
depends on the numbers (``StridedSlice``'s begin, end and strides), the input must be
determined by constants: it is folded at parse time.

``StridedSlice`` becomes a ``Slice`` of the axes it really cuts, a ``Squeeze`` of the
``shrink_axis_mask`` axes and an ``Unsqueeze`` for the ``new_axis_mask`` ones, after the
sparse specification (with its ellipsis) is expanded to one entry per axis, as
TensorFlow's own ``ValidateStridedSliceOp`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ge.errors import ModelFormatError
from ge.frontends.tensorflow.translate import NodeContext, translates
from ge.ir import DataType, Tensor, Value, is_static

__all__: list[str] = []

_END = 1 << 62  # "to the end" for Slice (clamped to the axis length)


@translates("Const")
def _const(ctx: NodeContext) -> Value:
    value = ctx.attr("value")
    if not isinstance(value, np.ndarray):
        raise ModelFormatError(f"{ctx.where}: its 'value' attribute holds no tensor")
    return ctx.const(value)


@translates("NoOp")
def _no_op(ctx: NodeContext) -> Sequence[Optional[Value]]:
    return []


@translates("IdentityN")
def _identity_n(ctx: NodeContext) -> Sequence[Optional[Value]]:
    return list(ctx.inputs)


@translates("Cast")
def _cast(ctx: NodeContext) -> Value:
    target = ctx.dtype("DstT")
    x = ctx.input(0)
    return ctx.op("Identity" if x.dtype == target else "Cast", [x],
                  {} if x.dtype == target else {"dtype": target})


@translates("Reshape")
def _reshape(ctx: NodeContext) -> Value:
    shape = ctx.shape_input(1)
    known = ctx.builder.fold(shape)
    # TensorFlow's 0 is a size of zero: the registry's Reshape says so with allowzero
    zero = known is not None and bool(np.any(np.asarray(known) == 0))
    return ctx.op("Reshape", [ctx.input(0), shape], {"allowzero": int(zero)})


@translates("Squeeze")
def _squeeze(ctx: NodeContext) -> Value:
    axes = [int(a) for a in ctx.attr("squeeze_dims", [])]
    if not axes:
        return ctx.op("Squeeze", [ctx.input(0)])
    return ctx.op("Squeeze", [ctx.input(0), ctx.const(np.asarray(axes, np.int64))])


@translates("ExpandDims")
def _expand_dims(ctx: NodeContext) -> Value:
    axis = ctx.ints(1, "axis")
    return ctx.op("Unsqueeze", [ctx.input(0), ctx.const(np.asarray(axis[:1], np.int64))])


@translates("ConcatV2", "Concat")
def _concat(ctx: NodeContext) -> Value:
    if ctx.op_type == "ConcatV2":
        values, axis_index = ctx.inputs[:-1], len(ctx.inputs) - 1
    else:
        values, axis_index = ctx.inputs[1:], 0
    (axis,) = ctx.ints(axis_index, "axis")[:1]
    return ctx.op("Concat", list(values), {"axis": axis})


@translates("Pack")
def _pack(ctx: NodeContext) -> Value:
    axis = int(ctx.attr("axis", 0))
    rank = ctx.rank(0)
    axis = axis + rank + 1 if axis < 0 else axis
    where = ctx.const(np.asarray([axis], np.int64))
    parts = [ctx.op("Unsqueeze", [value, where]) for value in ctx.inputs]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", parts, {"axis": axis})


@translates("Unpack")
def _unpack(ctx: NodeContext) -> Sequence[Optional[Value]]:
    count, axis = int(ctx.attr("num")), int(ctx.attr("axis", 0))
    x = ctx.input(0)
    where = ctx.const(np.asarray([axis], np.int64))
    if count == 1:
        return [ctx.op("Squeeze", [x, where])]
    pieces = ctx.op_node("Split", [x], {"axis": axis, "num_outputs": count}).outputs
    return [ctx.op("Squeeze", [piece, where]) for piece in pieces]


@translates("Split", "SplitV")
def _split(ctx: NodeContext) -> Sequence[Optional[Value]]:
    if ctx.op_type == "Split":
        (axis,), x = ctx.ints(0, "axis")[:1], ctx.input(1)
        count = int(ctx.attr("num_split"))
        return list(ctx.op_node("Split", [x], {"axis": axis, "num_outputs": count}).outputs)
    x, sizes, (axis,) = ctx.input(0), ctx.ints(1, "size_splits"), ctx.ints(2, "axis")[:1]
    if -1 in sizes:
        length = x.shape[axis]
        if not (isinstance(length, int) and length >= 0):
            raise ctx.unsupported("a -1 size along an axis of unknown length")
        sizes[sizes.index(-1)] = length - (sum(sizes) + 1)
    split = ctx.const(np.asarray(sizes, np.int64))
    return list(ctx.op_node("Split", [x, split], {"axis": axis}).outputs)


@translates("Pad", "PadV2", "MirrorPad")
def _pad(ctx: NodeContext) -> Value:
    paddings = np.asarray(ctx.constant(1, "paddings"), dtype=np.int64).reshape(-1, 2)
    pads = ctx.const(np.concatenate([paddings[:, 0], paddings[:, 1]]))
    inputs = [ctx.input(0), pads]
    mode = "constant"
    if ctx.op_type == "PadV2":
        inputs.append(ctx.input(2))
    elif ctx.op_type == "MirrorPad":
        chosen = str(ctx.attr("mode"))
        if chosen != "REFLECT":
            raise ctx.unsupported(f"mode {chosen} (GE pads REFLECT; SYMMETRIC has no "
                                  f"registry op)")
        mode = "reflect"
    return ctx.op("Pad", inputs, {"mode": mode})


@translates("Transpose", "ConjugateTranspose")
def _transpose(ctx: NodeContext) -> Value:
    return ctx.op("Transpose", [ctx.input(0)], {"perm": ctx.ints(1, "perm")})


def _as_out_type(ctx: NodeContext, value: Value) -> Value:
    wanted = ctx.dtype("out_type") if ctx.node.has_attr("out_type") else DataType.DT_INT32
    return value if wanted == value.dtype else ctx.op("Cast", [value], {"dtype": wanted})


@translates("Shape")
def _shape(ctx: NodeContext) -> Value:
    return _as_out_type(ctx, ctx.op("Shape", [ctx.input(0)]))


@translates("Size")
def _size(ctx: NodeContext) -> Value:
    return _as_out_type(ctx, ctx.op("Size", [ctx.input(0)]))


@translates("Rank")
def _rank(ctx: NodeContext) -> Value:
    return ctx.const(np.asarray(ctx.rank(0), np.int32))


@translates("GatherV2", "Gather")
def _gather(ctx: NodeContext) -> Value:
    axis = ctx.ints(2, "axis")[0] if ctx.op_type == "GatherV2" else 0
    if int(ctx.attr("batch_dims", 0)) != 0:
        raise ctx.unsupported("batch_dims other than 0")
    return ctx.op("Gather", [ctx.input(0), ctx.input(1)], {"axis": axis})


@translates("Fill")
def _fill(ctx: NodeContext) -> Value:
    return ctx.op("Expand", [ctx.input(1), ctx.shape_input(0)])


@translates("BroadcastTo")
def _broadcast_to(ctx: NodeContext) -> Value:
    return ctx.op("Expand", [ctx.input(0), ctx.shape_input(1)])


@translates("Tile")
def _tile(ctx: NodeContext) -> Value:
    return ctx.op("Tile", [ctx.input(0), ctx.shape_input(1)])


@translates("Range")
def _range(ctx: NodeContext) -> Value:
    return ctx.op("Range", [ctx.input(0), ctx.input(1), ctx.input(2)])


@translates("ZerosLike", "OnesLike")
def _filled_like(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    number = np.asarray([0 if ctx.op_type == "ZerosLike" else 1], dtype=x.dtype.np_dtype)
    if is_static(x.shape):
        return ctx.const(np.full([int(d) for d in x.shape], number[0]))
    return ctx.op("ConstantOfShape", [ctx.op("Shape", [x])], {"value": Tensor(number)})


@translates("Slice")
def _slice(ctx: NodeContext) -> Value:
    begin, size = ctx.ints(1, "begin"), ctx.ints(2, "size")
    ends = [_END if s == -1 else b + s for b, s in zip(begin, size)]
    return _sliced(ctx, ctx.input(0), list(range(len(begin))), begin, ends, [1] * len(begin))


def _sliced(ctx: NodeContext, x: Value, axes: list[int], starts: list[int], ends: list[int],
            steps: list[int]) -> Value:
    def ints(values: list[int]) -> Value:
        return ctx.const(np.asarray(values, np.int64))

    return ctx.op("Slice", [x, ints(starts), ints(ends), ints(axes), ints(steps)])


# -- StridedSlice -----------------------------------------------------------------------

@dataclass
class _AxisCut:
    """One input axis of a strided slice: what is kept of it, and whether it goes."""

    axis: int
    start: Optional[int]  # None: the whole axis from its first (or last) element
    end: Optional[int]
    step: int
    shrink: bool


def _bit(mask: int, index: int) -> bool:
    return bool(mask >> index & 1)


def _dense_spec(ctx: NodeContext, rank: int, begin: list[int], end: list[int],
                strides: list[int]) -> tuple[list[_AxisCut], list[int]]:
    """The cut of every input axis, and where new axes go in the output."""
    masks = {key: int(ctx.attr(key, 0)) for key in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    entries = len(begin)
    ellipses = [i for i in range(entries) if _bit(masks["ellipsis_mask"], i)]
    real = sum(1 for i in range(entries) if i not in ellipses[:1]
               and not _bit(masks["new_axis_mask"], i))
    cuts: list[_AxisCut] = []
    new_axes: list[int] = []
    output_axis = 0
    for index in range(entries):
        if ellipses and index == ellipses[0]:
            for _ in range(rank - real):
                cuts.append(_AxisCut(len(cuts), None, None, 1, False))
                output_axis += 1
            continue
        if _bit(masks["new_axis_mask"], index):
            new_axes.append(output_axis)
            output_axis += 1
            continue
        step = strides[index]
        if step == 0:
            raise ctx.unsupported("a stride of 0")
        shrink = _bit(masks["shrink_axis_mask"], index)
        start = None if _bit(masks["begin_mask"], index) and not shrink else begin[index]
        stop = None if _bit(masks["end_mask"], index) and not shrink else end[index]
        if shrink:
            step, stop = 1, (begin[index] + 1 if begin[index] != -1 else None)
        cuts.append(_AxisCut(len(cuts), start, stop, step, shrink))
        output_axis += 0 if shrink else 1
    while len(cuts) < rank:  # no ellipsis: the axes not mentioned are kept whole
        cuts.append(_AxisCut(len(cuts), None, None, 1, False))
    if len(cuts) != rank:
        raise ctx.unsupported(f"a slice of {len(cuts)} axes for an input of rank {rank}")
    return cuts, new_axes


@translates("StridedSlice")
def _strided_slice(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    begin, end = ctx.ints(1, "begin"), ctx.ints(2, "end")
    strides = ctx.ints(3, "strides")
    if not len(begin) == len(end) == len(strides):
        raise ctx.unsupported(f"begin {begin}, end {end} and strides {strides} differ in "
                              f"length")
    cuts, new_axes = _dense_spec(ctx, x.rank, begin, end, strides)
    cut = [c for c in cuts if not (c.start is None and c.end is None and c.step == 1)]
    result = x
    if cut:
        starts = [c.start if c.start is not None else (0 if c.step > 0 else _END) for c in cut]
        ends = [c.end if c.end is not None else (_END if c.step > 0 else -_END) for c in cut]
        result = _sliced(ctx, x, [c.axis for c in cut], starts, ends, [c.step for c in cut])
    shrunk = [c.axis for c in cuts if c.shrink]
    if shrunk:
        result = ctx.op("Squeeze", [result, ctx.const(np.asarray(shrunk, np.int64))])
    if new_axes:
        result = ctx.op("Unsqueeze", [result, ctx.const(np.asarray(new_axes, np.int64))])
    return result if result is not x else ctx.op("Identity", [x])
