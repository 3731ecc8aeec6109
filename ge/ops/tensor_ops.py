"""Data movement ops: Reshape, Transpose, Concat, Split, Slice, Gather, Squeeze,
Unsqueeze, Flatten, Expand, Pad.

They follow ONNX's newest opsets: shapes, axes, pads and split sizes are inputs
(int32 or int64). Inference reads them when they are constants; when they are
computed at run time it still gives the output rank, with ``-1`` for the
dimensions it cannot know. Unknown or named input dimensions are carried
through wherever the op leaves them unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import OpArgumentError
from ge.ir import DataType, Format, TensorDesc
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.registry import REQUIRED, Attr, AttrType, InferenceContext, Input, Trait, register_op
from ge.ops.shape_utils import broadcast_shapes, multiply_dims, normalize_axes, normalize_axis

INDEX_TYPES = (DataType.DT_INT32, DataType.DT_INT64)
_VIEW = (Trait.PURE, Trait.VIEW)
# Slice bounds at or beyond this magnitude mean "to the end" (ONNX's INT_MAX / INT_MIN).
_UNBOUNDED = 2**31 - 1


# -- helpers ----------------------------------------------------------------------------

def _index_vector(ctx: InferenceContext, index: int) -> Optional[list[int]]:
    """Check an index input (int32/int64, rank <= 1); its values when constant, else None."""
    if not ctx.has_input(index):
        return None
    ctx.require_dtypes(index, INDEX_TYPES, "index inputs must be")
    if len(ctx.shape(index)) > 1:
        raise ctx.fail(f"input {ctx.schema.input_name(index)!r} must be 1-D, "
                       f"got shape {list(ctx.shape(index))}")
    return ctx.const_ints(index)


def _static(dim: Dim) -> Optional[int]:
    """A dimension as an int when it is known, else None."""
    return dim if isinstance(dim, int) and dim >= 0 else None


def _vector_length(ctx: InferenceContext, index: int) -> Optional[int]:
    """The number of elements of a present rank <= 1 input, when known."""
    shape = ctx.shape(index)
    return _static(shape[0]) if shape else 1


def _known_length(ctx: InferenceContext, index: int, what: str) -> int:
    """The static length of index input ``index``; fail when the output rank hangs on it."""
    length = _vector_length(ctx, index)
    if length is None:
        raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has an unknown length, so the "
                       f"{what} is unknown; give it a static shape or a constant")
    return length


def _axis(ctx: InferenceContext, axis: int, rank: int) -> int:
    try:
        return normalize_axis(axis, rank)
    except ValueError as error:
        raise ctx.fail(str(error)) from None


def _axes(ctx: InferenceContext, axes: Sequence[int], rank: int) -> list[int]:
    try:
        return normalize_axes(axes, rank)
    except ValueError as error:
        raise ctx.fail(str(error)) from None


def _like(ctx: InferenceContext, dims: Sequence[Dim]) -> TensorDesc:
    """A descriptor with input 0's dtype, and its layout when the rank is unchanged."""
    source = ctx.input(0)
    layout = source.format if len(dims) == source.rank else Format.ND
    return TensorDesc(tuple(dims), source.dtype, layout)


def _product(dims: Sequence[Dim]) -> Dim:
    """Product of dimensions: a lone (possibly named) dimension is kept; 0 wins."""
    if len(dims) == 1:
        return dims[0]
    if any(d == 0 for d in dims):
        return 0
    return multiply_dims(dims)


def _merge_dim(a: Dim, b: Dim) -> Optional[Dim]:
    """Two dimensions that must be equal: the better-known one, or None if they differ."""
    if a == b:
        return a
    if is_static_dim(a) and is_static_dim(b):
        return None
    if is_static_dim(a):
        return a
    return b if is_static_dim(b) else -1


# -- Reshape ----------------------------------------------------------------------------

def _reshape_dims(source: Sequence[Dim], spec: list[int], allowzero: int) -> list[Dim]:
    """The dimensions ``spec`` gives ``source``; ValueError when they cannot fit.

    Dimensions copied by a 0 cancel out; the -1 is what the remaining input
    dimensions leave over, so an unknown input dimension passes through when
    the rest of the sizes match (``[N, 4, 8]`` by ``[-1, 32]`` gives ``[N, 32]``).
    """
    if spec.count(-1) > 1:
        raise ValueError(f"shape {spec} has more than one -1")
    if any(v < -1 for v in spec):
        raise ValueError(f"shape {spec} has a negative size other than -1")
    if allowzero and 0 in spec and -1 in spec:
        raise ValueError(f"shape {spec} has both 0 and -1 with allowzero=1")
    copied = {i for i, v in enumerate(spec) if v == 0 and not allowzero}
    if any(i >= len(source) for i in copied):
        raise ValueError(f"shape {spec} copies (0) a dimension the input {list(source)} lacks; "
                         f"it has rank {len(source)}")
    dims: list[Dim] = [source[i] if i in copied else v for i, v in enumerate(spec)]
    rest_in = [d for i, d in enumerate(source) if i not in copied]
    unknown_in = [d for d in rest_in if not is_static_dim(d)]
    size_in = math.prod(int(d) for d in rest_in if is_static_dim(d))
    size_out = math.prod(v for i, v in enumerate(spec) if i not in copied and v != -1)
    mismatch = f"cannot reshape {list(source)} to {spec}: {size_in} elements do not fit"
    if -1 not in spec:
        if not unknown_in and size_in != size_out:
            raise ValueError(f"{mismatch} {size_out}")
    elif unknown_in:
        same = len(unknown_in) == 1 and size_in == size_out and size_out > 0
        dims[spec.index(-1)] = unknown_in[0] if same else -1
    elif size_out == 0 or size_in % size_out:
        raise ValueError(f"{mismatch} a multiple of {size_out}, so the -1 cannot be inferred")
    else:
        dims[spec.index(-1)] = size_in // size_out
    return dims


def _infer_reshape(ctx: InferenceContext) -> Sequence[TensorDesc]:
    source = ctx.input(0)
    spec = _index_vector(ctx, 1)
    if spec is None:
        return [TensorDesc((-1,) * _known_length(ctx, 1, "output rank"), source.dtype)]
    try:
        dims = _reshape_dims(source.shape, spec, ctx.attr("allowzero"))
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    return [TensorDesc(tuple(dims), source.dtype)]


@register_op("Reshape", inputs=["tensor", "shape"],
             attrs=[Attr("allowzero", AttrType.INT, 0, choices=(0, 1),
                         doc="1: a 0 in shape is a zero size, not a copy of the input's")],
             infer=_infer_reshape, traits=_VIEW)
def reshape_kernel(tensor: np.ndarray, shape: np.ndarray, *, allowzero: int) -> np.ndarray:
    """y = tensor with dimensions ``shape``: -1 is inferred, 0 copies the input dimension."""
    spec = [int(v) for v in shape.reshape(-1)]
    return tensor.reshape([int(d) for d in _reshape_dims(tensor.shape, spec, allowzero)])


# -- Transpose, Concat, Split -----------------------------------------------------------

def _perm(ctx: InferenceContext, rank: int) -> list[int]:
    perm = ctx.attr("perm")
    if perm is None:
        return list(range(rank - 1, -1, -1))
    if len(perm) != rank:
        raise ctx.fail(f"perm {perm} has {len(perm)} entries; the input has rank {rank}")
    return _axes(ctx, perm, rank)


def _infer_transpose(ctx: InferenceContext) -> Sequence[TensorDesc]:
    source = ctx.input(0)
    return [TensorDesc(tuple(source.shape[p] for p in _perm(ctx, source.rank)), source.dtype)]


@register_op("Transpose", inputs=["x"],
             attrs=[Attr("perm", AttrType.INTS, None, doc="default: the axes reversed")],
             infer=_infer_transpose, moved_inputs=(0,))
def transpose_kernel(x: np.ndarray, *, perm: Optional[list[int]]) -> np.ndarray:
    """y = x with its axes permuted: y.shape[i] = x.shape[perm[i]]."""
    return np.transpose(x, perm)


def _infer_concat(ctx: InferenceContext) -> Sequence[TensorDesc]:
    count = ctx.num_inputs
    ctx.require_same_dtype(*range(count))
    first = ctx.shape(0)
    if not first:
        raise ctx.fail("cannot concatenate scalars")
    axis = _axis(ctx, ctx.attr("axis"), len(first))
    dims = list(first)
    for index in range(1, count):
        shape = ctx.shape(index)
        if len(shape) != len(first):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has shape {list(shape)}; "
                           f"the first input has rank {len(first)}")
        for position, dim in enumerate(shape):
            if position == axis:
                continue
            merged = _merge_dim(dims[position], dim)
            if merged is None:
                raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has shape "
                               f"{list(shape)}; dimension {position} must be {dims[position]}")
            dims[position] = merged
    dims[axis] = _sum_dims([ctx.shape(i)[axis] for i in range(count)])
    return [_like(ctx, dims)]


def _sum_dims(dims: Sequence[Dim]) -> Dim:
    """Sum of dimensions; unknown if any is unknown (a lone dimension is kept)."""
    if len(dims) == 1:
        return dims[0]
    sizes = [_static(d) for d in dims]
    return sum(n for n in sizes if n is not None) if None not in sizes else -1


@register_op("Concat", inputs=[Input("x", variadic=True)],
             attrs=[Attr("axis", AttrType.INT, REQUIRED)],
             infer=_infer_concat, moved_inputs=(0,))
def concat_kernel(*x: np.ndarray, axis: int) -> np.ndarray:
    """y = the inputs joined along ``axis``."""
    return np.concatenate(x, axis=axis)


def chunk_sizes(dim: int, parts: int) -> list[int]:
    """ONNX's rule for ``num_outputs``: ceil-sized chunks, the last one smaller."""
    chunk = -(-dim // parts)
    last = dim - chunk * (parts - 1)
    if last < 0:
        raise ValueError(f"a dimension of {dim} cannot be split into {parts} chunks of "
                         f"{chunk} with a smaller last chunk")
    return [chunk] * (parts - 1) + [last]


def _split_plan(ctx: InferenceContext) -> tuple[int, Optional[list[int]]]:
    """The number of outputs and, when known, their sizes along the axis."""
    parts = ctx.attr("num_outputs")
    if ctx.has_input(1) == (parts is not None):
        raise OpArgumentError(f"Split node {ctx.node_name!r}: give exactly one of the 'split' "
                              f"input and the 'num_outputs' attribute")
    if parts is not None:
        shape = ctx.shape(0)
        dim = _static(shape[_axis(ctx, ctx.attr("axis"), len(shape))])
        if dim is None:
            return parts, None
        try:
            return parts, chunk_sizes(dim, parts)
        except ValueError as error:
            raise ctx.fail(str(error)) from None
    sizes = _index_vector(ctx, 1)
    if sizes is None:
        return _known_length(ctx, 1, "number of outputs"), None
    if not sizes or any(v < 0 for v in sizes):
        raise ctx.fail(f"split sizes {sizes} must be one or more values >= 0")
    return len(sizes), sizes


def _split_count(ctx: InferenceContext) -> int:
    return _split_plan(ctx)[0]


def _infer_split(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    if not shape:
        raise ctx.fail("cannot split a scalar")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    count, sizes = _split_plan(ctx)
    dim = shape[axis]
    if sizes is not None and is_static_dim(dim) and sum(sizes) != dim:
        raise ctx.fail(f"split sizes {sizes} add up to {sum(sizes)}; dimension {axis} of "
                       f"{list(shape)} is {dim}")
    outputs = []
    for index in range(count):
        dims = list(shape)
        dims[axis] = sizes[index] if sizes is not None else dim if count == 1 else -1
        outputs.append(_like(ctx, dims))
    return outputs


@register_op("Split", inputs=["x", Input("split", optional=True, doc="sizes of the outputs")],
             attrs=[Attr("axis", AttrType.INT, 0),
                    Attr("num_outputs", AttrType.INT, None,
                         check=lambda v: None if v >= 1 else "must be at least 1",
                         doc="equal chunks, the last one smaller when uneven")],
             infer=_infer_split, variadic_outputs=True, num_outputs=_split_count)
def split_kernel(x: np.ndarray, split: Optional[np.ndarray] = None, *, axis: int,
                 num_outputs: Optional[int]) -> tuple[np.ndarray, ...]:
    """(y0, y1, ...) = x cut along ``axis`` into pieces of the ``split`` sizes."""
    dim = x.shape[axis]
    if split is not None:
        sizes = [int(v) for v in split.reshape(-1)]
    else:
        sizes = chunk_sizes(dim, num_outputs or 1)
    if sum(sizes) != dim or any(v < 0 for v in sizes):
        raise ValueError(f"split sizes {sizes} do not add up to dimension {axis} of {x.shape}")
    # views by basic slicing: np.split's own bookkeeping costs ~10 us, more than the copy
    # of a transformer's fused QKV row it cuts
    lead = (slice(None),) * (axis % x.ndim)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(x[lead + (slice(start, start + size),)])
        start += size
    return tuple(pieces)


# -- Slice ------------------------------------------------------------------------------

def _slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """ONNX-clamped start and end for one axis, and the number of elements taken."""
    if step == 0:
        raise ValueError("slice steps must not be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, end, max(0, -(-(end - start) // step))
    if dim == 0:
        return -1, -1, 0
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, end, max(0, -(-(start - end) // -step))


def _slice_dim(dim: Dim, start: int, end: int, step: int) -> Dim:
    size = _static(dim)
    if size is not None:
        return _slice_bounds(size, start, end, step)[2]
    whole_forward = step == 1 and (start == 0 or start <= -_UNBOUNDED) and end >= _UNBOUNDED
    whole_backward = step == -1 and (start == -1 or start >= _UNBOUNDED) and end <= -_UNBOUNDED
    return dim if whole_forward or whole_backward else -1


def _slice_length(ctx: InferenceContext) -> Optional[int]:
    """The common length of starts/ends/axes/steps, where known; fail if they differ."""
    lengths = {n for n in (_vector_length(ctx, i) for i in range(1, 5) if ctx.has_input(i))
               if n is not None}
    if len(lengths) > 1:
        raise ctx.fail(f"starts, ends, axes and steps must have one length, got {sorted(lengths)}")
    return lengths.pop() if lengths else None


def _infer_slice(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    starts, ends, axes, steps = (_index_vector(ctx, i) for i in range(1, 5))
    length = _slice_length(ctx)
    if axes is None and (ctx.has_input(3) or length is None):
        return [_like(ctx, [-1] * len(shape))]  # which axes are sliced is unknown
    axes = _axes(ctx, axes if axes is not None else list(range(length or 0)), len(shape))
    if steps is not None and 0 in steps:
        raise ctx.fail(f"steps {steps} must not contain 0")
    for position, axis in enumerate(axes):
        if starts is None or ends is None or (steps is None and ctx.has_input(4)):
            shape[axis] = -1
        else:
            step = steps[position] if steps is not None else 1
            shape[axis] = _slice_dim(shape[axis], starts[position], ends[position], step)
    return [_like(ctx, shape)]


@register_op("Slice", inputs=["x", "starts", "ends", Input("axes", optional=True),
                              Input("steps", optional=True)], infer=_infer_slice,
             moved_inputs=(0,))
def slice_kernel(x: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 axes: Optional[np.ndarray] = None,
                 steps: Optional[np.ndarray] = None) -> np.ndarray:
    """y = x[starts:ends:steps] on ``axes`` (default the first ones), clamped as ONNX does."""
    return x[slice_index(x.shape, starts, ends, axes, steps)]


def slice_index(shape: Sequence[int], starts: np.ndarray, ends: np.ndarray,
                axes: Optional[np.ndarray] = None,
                steps: Optional[np.ndarray] = None) -> tuple[slice, ...]:
    """The NumPy index of ``Slice`` over an array of ``shape``."""
    begin = [int(v) for v in starts.reshape(-1)]
    finish = [int(v) for v in ends.reshape(-1)]
    chosen = list(range(len(begin))) if axes is None else [int(v) for v in axes.reshape(-1)]
    strides = [1] * len(begin) if steps is None else [int(v) for v in steps.reshape(-1)]
    if not len(begin) == len(finish) == len(chosen) == len(strides):
        raise ValueError("starts, ends, axes and steps must have one length")
    index = [slice(None)] * len(shape)
    for axis, start, end, step in zip(normalize_axes(chosen, len(shape)), begin, finish,
                                      strides):
        start, end, _ = _slice_bounds(shape[axis], start, end, step)
        index[axis] = slice(start, None if end < 0 else end, step)
    return tuple(index)


# -- Gather -----------------------------------------------------------------------------

def _infer_gather(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    if not shape:
        raise ctx.fail("cannot gather from a scalar")
    ctx.require_dtypes(1, INDEX_TYPES, "indices must be")
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    indices = ctx.const(1)
    dim = _static(shape[axis])
    if indices is not None and indices.size and dim is not None:
        bad = indices[(indices < -dim) | (indices >= dim)]
        if bad.size:
            raise ctx.fail(f"index {int(bad[0])} is out of range for dimension {axis} "
                           f"of {list(shape)} (size {dim})")
    dims = list(shape[:axis]) + list(ctx.shape(1)) + list(shape[axis + 1:])
    return [TensorDesc(tuple(dims), ctx.dtype(0))]


@register_op("Gather", inputs=["x", "indices"], attrs=[Attr("axis", AttrType.INT, 0)],
             infer=_infer_gather, moved_inputs=(0,))
def gather_kernel(x: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    """y = x's entries along ``axis`` at ``indices`` (negative indices count from the end)."""
    axis = normalize_axis(axis, x.ndim)
    dim = x.shape[axis]
    bad = indices[(indices < -dim) | (indices >= dim)]
    if bad.size:
        raise IndexError(f"Gather: index {int(bad.reshape(-1)[0])} is out of range for axis "
                         f"{axis} of size {dim}")
    return np.take(x, np.where(indices < 0, indices + dim, indices), axis=axis)


# -- Squeeze, Unsqueeze, Flatten ---------------------------------------------------------

def _infer_squeeze(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    axes = _index_vector(ctx, 1)
    if axes is None and ctx.has_input(1):
        removed = _known_length(ctx, 1, "output rank")
        return [TensorDesc((-1,) * max(len(shape) - removed, 0), ctx.dtype(0))]
    if axes is None:
        # Unknown dimensions are taken to be > 1: ONNX cannot tell either.
        return [TensorDesc(tuple(d for d in shape if d != 1), ctx.dtype(0))]
    axes = _axes(ctx, axes, len(shape))
    for axis in axes:
        if is_static_dim(shape[axis]) and shape[axis] != 1:
            raise ctx.fail(f"cannot squeeze dimension {axis} of {list(shape)}: it is not 1")
    return [TensorDesc(tuple(d for i, d in enumerate(shape) if i not in axes), ctx.dtype(0))]


@register_op("Squeeze", inputs=["x", Input("axes", optional=True)], infer=_infer_squeeze,
             traits=_VIEW)
def squeeze_kernel(x: np.ndarray, axes: Optional[np.ndarray] = None) -> np.ndarray:
    """y = x without its size-1 dimensions (only those on ``axes`` when given)."""
    if axes is None:
        return np.squeeze(x)
    chosen = normalize_axes([int(v) for v in axes.reshape(-1)], x.ndim)
    if any(x.shape[a] != 1 for a in chosen):
        raise ValueError(f"cannot squeeze axes {chosen} of shape {x.shape}: not all are 1")
    return np.squeeze(x, axis=tuple(chosen))


def _infer_unsqueeze(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    axes = _index_vector(ctx, 1)
    if axes is None:
        added = _known_length(ctx, 1, "output rank")
        return [TensorDesc((-1,) * (len(shape) + added), ctx.dtype(0))]
    rank = len(shape) + len(axes)
    inserted = _axes(ctx, axes, rank)
    rest = iter(shape)
    dims = tuple(1 if i in inserted else next(rest) for i in range(rank))
    return [TensorDesc(dims, ctx.dtype(0))]


@register_op("Unsqueeze", inputs=["x", "axes"], infer=_infer_unsqueeze, traits=_VIEW)
def unsqueeze_kernel(x: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """y = x with size-1 dimensions inserted at ``axes`` (positions in the output)."""
    chosen = [int(v) for v in axes.reshape(-1)]
    return np.expand_dims(x, tuple(normalize_axes(chosen, x.ndim + len(chosen))))


def _flatten_axis(axis: int, rank: int) -> int:
    if not -rank <= axis <= rank:
        raise ValueError(f"axis {axis} is out of range [{-rank}, {rank}]")
    return axis + rank if axis < 0 else axis


def _infer_flatten(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = ctx.shape(0)
    try:
        axis = _flatten_axis(ctx.attr("axis"), len(shape))
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    return [TensorDesc((_product(shape[:axis]), _product(shape[axis:])), ctx.dtype(0))]


@register_op("Flatten", inputs=["x"], attrs=[Attr("axis", AttrType.INT, 1)],
             infer=_infer_flatten, traits=_VIEW)
def flatten_kernel(x: np.ndarray, *, axis: int) -> np.ndarray:
    """y = x as a matrix: the dimensions before ``axis`` become rows, the rest columns."""
    axis = _flatten_axis(axis, x.ndim)
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


# -- Expand, Pad ------------------------------------------------------------------------

def _infer_expand(ctx: InferenceContext) -> Sequence[TensorDesc]:
    target = _index_vector(ctx, 1)
    if target is None:
        target = [-1] * _known_length(ctx, 1, "output rank")
    elif any(v < 0 for v in target):
        raise ctx.fail(f"shape {target} has a negative size")
    dims = broadcast_shapes(ctx.shape(0), target)
    if dims is None:
        raise ctx.fail(f"input shape {list(ctx.shape(0))} does not broadcast with {target}")
    return [_like(ctx, dims)]


@register_op("Expand", inputs=["x", "shape"], infer=_infer_expand, moved_inputs=(0,))
def expand_kernel(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """y = x broadcast with ``shape`` (both ways: a 1 in ``shape`` keeps x's dimension)."""
    target = np.broadcast_shapes(x.shape, tuple(int(v) for v in shape.reshape(-1)))
    return np.ascontiguousarray(np.broadcast_to(x, target))


def _pad_dim(dim: Dim, begin: int, end: int, mode: str) -> Dim:
    """The padded size of one dimension; ValueError when ``mode`` cannot pad it."""
    size = _static(dim)
    if size is None:
        return dim if begin == end == 0 else -1
    kept = size + min(begin, 0) + min(end, 0)  # negative pads crop first
    if kept < 0:
        raise ValueError(f"pads ({begin}, {end}) crop more than the dimension's {dim}")
    grow = max(begin, 0), max(end, 0)
    if mode == "reflect" and 0 < max(grow) >= kept:
        raise ValueError(f"reflect padding of ({begin}, {end}) needs a dimension larger than "
                         f"{max(grow)}; it is {kept}")
    if mode in ("edge", "wrap") and kept == 0 and max(grow) > 0:
        raise ValueError(f"{mode} padding of an empty dimension")
    return size + begin + end


def _infer_pad(ctx: InferenceContext) -> Sequence[TensorDesc]:
    shape = list(ctx.shape(0))
    pads = _index_vector(ctx, 1)
    if ctx.has_input(2):
        if ctx.dtype(2) is not ctx.dtype(0):
            raise ctx.fail_dtype(f"constant_value has dtype {ctx.dtype(2).short_name}; "
                                 f"x has {ctx.dtype(0).short_name}")
        if len(ctx.shape(2)) > 1 or _vector_length(ctx, 2) not in (1, None):
            raise ctx.fail("constant_value must be a scalar")
    axes = _index_vector(ctx, 3)
    if axes is None and ctx.has_input(3):
        return [_like(ctx, [-1] * len(shape))]
    axes = _axes(ctx, axes if axes is not None else list(range(len(shape))), len(shape))
    count = len(pads) if pads is not None else _vector_length(ctx, 1)
    if count is not None and count != 2 * len(axes):
        raise ctx.fail(f"pads has {count} values; {len(axes)} axes need {2 * len(axes)}")
    for position, axis in enumerate(axes):
        if pads is None:
            shape[axis] = -1
            continue
        try:
            shape[axis] = _pad_dim(shape[axis], pads[position], pads[position + len(axes)],
                                   ctx.attr("mode"))
        except ValueError as error:
            raise ctx.fail(f"axis {axis}: {error}") from None
    return [_like(ctx, shape)]


@register_op("Pad", inputs=["x", "pads", Input("constant_value", optional=True),
                            Input("axes", optional=True)],
             attrs=[Attr("mode", AttrType.STRING, "constant",
                         choices=("constant", "reflect", "edge", "wrap"))],
             infer=_infer_pad)
def pad_kernel(x: np.ndarray, pads: np.ndarray, constant_value: Optional[np.ndarray] = None,
               axes: Optional[np.ndarray] = None, *, mode: str) -> np.ndarray:
    """y = x padded by ``pads`` ([begin..., end...] per axis); negative pads crop."""
    chosen = list(range(x.ndim)) if axes is None else [int(v) for v in axes.reshape(-1)]
    chosen = normalize_axes(chosen, x.ndim)
    amounts = [int(v) for v in pads.reshape(-1)]
    if len(amounts) != 2 * len(chosen):
        raise ValueError(f"pads has {len(amounts)} values; {len(chosen)} axes need "
                         f"{2 * len(chosen)}")
    crop = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for position, axis in enumerate(chosen):
        begin, end = amounts[position], amounts[position + len(chosen)]
        _pad_dim(x.shape[axis], begin, end, mode)
        crop[axis] = slice(max(-begin, 0), x.shape[axis] - max(-end, 0))
        widths[axis] = (max(begin, 0), max(end, 0))
    x = x[tuple(crop)]
    if mode != "constant":
        numpy_mode: Any = mode
        return np.pad(x, widths, mode=numpy_mode)
    fill = x.dtype.type(0) if constant_value is None else constant_value.reshape(-1)[0]
    return np.pad(x, widths, mode="constant", constant_values=fill)
