"""Image resampling ops: Resize, GridSample and AffineGrid, with ONNX's names and
semantics (Resize-19, GridSample-22, AffineGrid-20). The detection ops (RoiAlign,
NonMaxSuppression) live in ``detection``.

Resampling is separable: Resize treats one axis at a time, gathering a few taps per
output position and summing them with their weights (nearest, linear, cubic; with
antialiasing the filter is widened by ``1 / scale`` when downscaling). Kernels work
in float32 (float64 for float64 and integer data) and round back to the input dtype.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, Shape, is_static_dim
from ge.ops.elementwise import FLOATS
from ge.ops.registry import (
    Attr,
    AttrType,
    InferenceContext,
    Input,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal, normalize_axes

__all__ = ["linear_filter", "cubic_filter", "resize_plan", "source_positions", "nearest_index",
           "AXIS_MAPPINGS"]

AXIS_MAPPINGS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                 "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _work_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype in (np.float32, np.float16) or \
        dtype.name == "bfloat16" else np.dtype(np.float64)


def _to_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Values in ``dtype``; integers are rounded (half to even) and saturated."""
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    if dtype == np.bool_:
        return values != 0
    return values.astype(dtype)


# -- filters ----------------------------------------------------------------------------

def linear_filter(distance: np.ndarray) -> np.ndarray:
    """The triangle (tent) filter: ``max(0, 1 - |t|)``."""
    return np.clip(1.0 - np.abs(distance), 0.0, 1.0)


def cubic_filter(distance: np.ndarray, a: float = -0.75) -> np.ndarray:
    """Keys' cubic convolution filter with coefficient ``a`` (zero beyond |t| = 2)."""
    t = np.abs(distance)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


# -- Resize: output sizes ---------------------------------------------------------------

def _nonempty(array: Optional[np.ndarray]) -> Optional[np.ndarray]:
    return None if array is None or array.size == 0 else array


def resize_plan(shape: Sequence[int], scales: Optional[np.ndarray], sizes: Optional[np.ndarray],
                axes: Optional[Sequence[int]], policy: str
                ) -> tuple[list[int], list[float], list[int]]:
    """(output shape, per-axis scale, resized axes) of a Resize of an input of ``shape``."""
    rank = len(shape)
    chosen = normalize_axes(axes, rank) if axes is not None else list(range(rank))
    given = _nonempty(sizes) if sizes is not None else None
    values = given if given is not None else _nonempty(scales)
    if values is None:
        raise ValueError("Resize needs one of scales and sizes")
    values = values.reshape(-1)
    if len(values) != len(chosen):
        raise ValueError(f"{'sizes' if given is not None else 'scales'} has {len(values)} "
                         f"values; expected {len(chosen)} (one per resized axis)")
    out, factors = list(shape), [1.0] * rank
    if given is None:
        for axis, scale in zip(chosen, values):
            if scale <= 0:
                raise ValueError(f"scales must be positive, got {values.tolist()}")
            factors[axis] = float(scale)
            out[axis] = int(math.floor(float(scale) * shape[axis]))
        return out, factors, chosen
    ratios = [int(size) / shape[axis] if shape[axis] else 1.0 for axis, size in
              zip(chosen, values)]
    if policy != "stretch":
        common = min(ratios) if policy == "not_larger" else max(ratios)
        ratios = [common] * len(chosen)
        values = np.array([int(common * shape[axis] + 0.5) for axis in chosen])
    for axis, ratio, size in zip(chosen, ratios, values):
        factors[axis], out[axis] = ratio, int(size)
    return out, factors, chosen


def _resized_dims(ctx: InferenceContext, shape: Shape, chosen: list[int],
                  scales: Optional[np.ndarray], sizes: Optional[np.ndarray]) -> list[Dim]:
    """Output dims from constant ``sizes`` or ``scales`` (one of them given)."""
    values = (sizes if sizes is not None else scales).reshape(-1)  # type: ignore[union-attr]
    if len(values) != len(chosen):
        raise ctx.fail(f"{'sizes' if sizes is not None else 'scales'} has {len(values)} values; "
                       f"expected {len(chosen)} (one per resized axis)")
    dims = list(shape)
    policy = ctx.attr("keep_aspect_ratio_policy")
    if sizes is not None and policy != "stretch":
        if not all(is_static_dim(shape[a]) for a in chosen):
            return [-1 if a in chosen else d for a, d in enumerate(shape)]
        static = [d if isinstance(d, int) and d >= 0 else 1 for d in shape]
        out, _, _ = resize_plan(static, None, sizes, chosen, policy)
        return [out[a] if a in chosen else d for a, d in enumerate(shape)]
    for axis, value in zip(chosen, values.tolist()):
        dim = shape[axis]
        if sizes is not None:
            dims[axis] = int(value)
        elif isinstance(dim, int) and dim >= 0:
            dims[axis] = int(math.floor(float(value) * dim))
        elif value != 1:
            dims[axis] = -1
    return dims


def _infer_resize(ctx: InferenceContext) -> Sequence[TensorDesc]:
    x = ctx.input(0)
    if ctx.has_input(2):
        ctx.require_dtypes(2, FLOATS)
    if ctx.has_input(3):
        ctx.require_dtypes(3, (DataType.DT_INT64,))
    axes = ctx.attr("axes")
    try:
        chosen = normalize_axes(axes, x.rank) if axes is not None else list(range(x.rank))
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    scales = _nonempty(ctx.const(2)) if ctx.has_input(2) else None
    sizes = _nonempty(ctx.const(3)) if ctx.has_input(3) else None
    no_sizes = not ctx.has_input(3) or (ctx.const(3) is not None and sizes is None)
    if sizes is not None or (scales is not None and no_sizes):
        dims = _resized_dims(ctx, x.shape, chosen, scales, sizes)
    else:
        dims = [-1 if a in chosen else d for a, d in enumerate(x.shape)]
    return [TensorDesc(tuple(dims), x.dtype, x.format)]


# -- Resize: one axis -------------------------------------------------------------------

def source_positions(mapping: str, out_size: int, in_size: int, scale: float,
                      roi: tuple[float, float]) -> np.ndarray:
    """Where each output index of one axis samples the input (fractional index, in
    float64: ONNX's coordinate transformation ``mapping``)."""
    y = np.arange(out_size, dtype=np.float64)
    length = scale * in_size  # the fractional output length
    if mapping == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mapping == "half_pixel_symmetric":
        offset = in_size / 2 * (1 - out_size / length)
        return offset + (y + 0.5) / scale - 0.5
    if mapping == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_size > 1 else np.zeros(out_size)
    if mapping == "align_corners":
        return y * (in_size - 1) / (length - 1) if length != 1 else np.zeros(out_size)
    if mapping == "asymmetric":
        return y / scale
    if mapping == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    start, end = roi
    if length == 1:
        return np.full(out_size, (end - start) * (in_size - 1) / 2 + start * (in_size - 1))
    return y * (end - start) * (in_size - 1) / (length - 1) + start * (in_size - 1)


def nearest_index(position: np.ndarray, rounding: str) -> np.ndarray:
    """The input index a nearest resize reads at each ``position`` (``nearest_mode``
    ``rounding``), unclipped."""
    if rounding == "round_prefer_floor":
        return np.ceil(position - 0.5)
    if rounding == "round_prefer_ceil":
        return np.floor(position + 0.5)
    return np.floor(position) if rounding == "floor" else np.ceil(position)


def _taps(position: np.ndarray, scale: float, in_size: int, mode: str, cubic_a: float,
          antialias: bool, exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), both ``[out, taps]``, of linear or cubic interpolation."""
    support = 1.0 if mode == "linear" else 2.0
    stretch = min(scale, 1.0) if antialias else 1.0
    start = int(math.floor(-support / stretch)) + 1
    offsets = np.arange(start, 2 - start)
    base = np.floor(position)
    indices = base[:, None] + offsets[None, :]
    distance = (indices - position[:, None]) * stretch
    weights = linear_filter(distance) if mode == "linear" else cubic_filter(distance, cubic_a)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    if exclude_outside:
        weights = np.where((indices < 0) | (indices >= in_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(indices, 0, in_size - 1).astype(np.intp), weights


def _resize_axis(data: np.ndarray, axis: int, out_size: int, scale: float,
                 roi: tuple[float, float], attrs: dict) -> np.ndarray:
    in_size = data.shape[axis]
    mapping = attrs["coordinate_transformation_mode"]
    position = source_positions(mapping, out_size, in_size, scale, roi)
    if attrs["mode"] == "nearest":
        index = np.clip(nearest_index(position, attrs["nearest_mode"]), 0, in_size - 1)
        result = np.take(data, index.astype(np.intp), axis=axis)
    else:
        indices, weights = _taps(position, scale, in_size, attrs["mode"], attrs["cubic_coeff_a"],
                                 bool(attrs["antialias"]), bool(attrs["exclude_outside"]))
        gathered = np.take(data, indices, axis=axis)  # [..., out, taps, ...]
        shape = (1,) * axis + weights.shape + (1,) * (data.ndim - axis - 1)
        result = (gathered * weights.reshape(shape).astype(data.dtype)).sum(axis=axis + 1)
    if mapping == "tf_crop_and_resize":
        outside = (position < 0) | (position > in_size - 1)
        shape = (1,) * axis + (out_size,) + (1,) * (data.ndim - axis - 1)
        result = np.where(outside.reshape(shape), data.dtype.type(attrs["extrapolation_value"]),
                          result)
    return result


@register_op(
    "Resize",
    inputs=["X", Input("roi", optional=True, doc="[starts..., ends...] for tf_crop_and_resize"),
            Input("scales", optional=True), Input("sizes", optional=True)],
    attrs=[
        Attr("mode", AttrType.STRING, "nearest", choices=("nearest", "linear", "cubic")),
        Attr("coordinate_transformation_mode", AttrType.STRING, "half_pixel",
             choices=AXIS_MAPPINGS),
        Attr("nearest_mode", AttrType.STRING, "round_prefer_floor", choices=NEAREST_MODES),
        Attr("cubic_coeff_a", AttrType.FLOAT, -0.75),
        Attr("exclude_outside", AttrType.INT, 0, choices=(0, 1)),
        Attr("extrapolation_value", AttrType.FLOAT, 0.0),
        Attr("antialias", AttrType.INT, 0, choices=(0, 1)),
        Attr("axes", AttrType.INTS, None, doc="the axes scales/sizes/roi refer to"),
        Attr("keep_aspect_ratio_policy", AttrType.STRING, "stretch",
             choices=("stretch", "not_larger", "not_smaller")),
    ],
    infer=_infer_resize,
    cost=flops_per_output(8),
)
def resize_kernel(x: np.ndarray, roi: Optional[np.ndarray] = None,
                  scales: Optional[np.ndarray] = None, sizes: Optional[np.ndarray] = None,
                  **attrs: object) -> np.ndarray:
    """Resample ``x`` to the size ``sizes`` gives, or ``floor(size * scales)``, one axis
    at a time: nearest (with ``nearest_mode`` rounding), linear or cubic interpolation
    at the source positions ``coordinate_transformation_mode`` maps each output to."""
    if attrs["mode"] == "nearest" and attrs["antialias"]:
        raise ValueError("antialias applies to linear and cubic modes only")
    axes = attrs["axes"]
    out, factors, chosen = resize_plan(x.shape, scales, sizes, axes,  # type: ignore[arg-type]
                                       str(attrs["keep_aspect_ratio_policy"]))
    bounds = _nonempty(roi)
    result = x if attrs["mode"] == "nearest" else x.astype(_work_dtype(x.dtype))
    for position, axis in enumerate(chosen):
        span = (0.0, 1.0)
        if bounds is not None:
            flat = bounds.reshape(-1).astype(np.float64)
            span = (float(flat[position]), float(flat[len(chosen) + position]))
        if out[axis] == x.shape[axis] and factors[axis] == 1.0 and span == (0.0, 1.0):
            continue
        result = _resize_axis(result, axis, out[axis], factors[axis], span, attrs)
    return _to_dtype(result, x.dtype)


# -- GridSample -------------------------------------------------------------------------

def _infer_grid_sample(ctx: InferenceContext) -> Sequence[TensorDesc]:
    x, grid = ctx.input(0), ctx.input(1)
    ctx.require_dtypes(1, FLOATS)
    if x.rank < 3 or grid.rank != x.rank:
        raise ctx.fail(f"X {list(x.shape)} must be [N, C, d1, ...] and grid {list(grid.shape)} "
                       f"[N, D1_out, ..., r] of the same rank")
    if not dims_equal(grid.shape[-1], x.rank - 2) or not dims_equal(grid.shape[0], x.shape[0]):
        raise ctx.fail(f"grid {list(grid.shape)} must be [N, ..., {x.rank - 2}] for X "
                       f"{list(x.shape)}")
    return [TensorDesc((x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype, x.format)]


def _reflect(position: np.ndarray, low: float, high: float) -> np.ndarray:
    """Fold coordinates into [low, high] by reflecting at the borders, repeatedly."""
    span = high - low
    if span <= 0:
        return np.full_like(position, low)
    below, above = position < low, position > high
    distance = np.where(below, low - position, position - high)
    folds = np.floor(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_low = np.where(even, low + rest, high - rest)
    from_high = np.where(even, high - rest, low + rest)
    return np.where(below, from_low, np.where(above, from_high, position))


def _pixel_indices(index: np.ndarray, size: int, padding: str, align: bool
                   ) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Integer indices of one axis after ``padding``, and where they are valid (zeros)."""
    if padding == "zeros":
        valid = (index >= 0) & (index < size)
        return np.clip(index, 0, size - 1).astype(np.intp), valid
    if padding == "reflection":
        low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        index = np.trunc(_reflect(index, low, high))
    return np.clip(index, 0, size - 1).astype(np.intp), None


def _sample_weights(position: np.ndarray, mode: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """(floor, [weight of tap k]) of linear or cubic interpolation along one axis."""
    base = np.floor(position)
    fraction = position - base
    if mode == "linear":
        return base, [1.0 - fraction, fraction]
    return base, [cubic_filter(fraction - k) for k in (-1, 0, 1, 2)]


def _grid_positions(grid: np.ndarray, sizes: Sequence[int], align: bool, mode: str,
                    padding: str) -> list[np.ndarray]:
    """Input coordinates per spatial axis (first axis first), ``[N, points]`` each."""
    flat = grid.reshape(grid.shape[0], -1, grid.shape[-1]).astype(np.float64)
    positions = []
    for axis, size in enumerate(sizes):
        normalized = flat[:, :, len(sizes) - 1 - axis]  # the grid lists x (last axis) first
        position = (normalized + 1) / 2 * (size - 1) if align else \
            ((normalized + 1) * size - 1) / 2
        if mode == "nearest":
            position = np.rint(position)
        low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border":  # only points beyond the border move (then onto a pixel)
            outside = (position < low) | (position > high)
            position = np.where(outside, np.clip(position, 0, size - 1), position)
        elif padding == "reflection":
            position = _reflect(position, low, high)
        positions.append(position)
    return positions


@register_op(
    "GridSample",
    inputs=["X", "grid"],
    attrs=[Attr("align_corners", AttrType.INT, 0, choices=(0, 1)),
           Attr("mode", AttrType.STRING, "linear", choices=("linear", "nearest", "cubic")),
           Attr("padding_mode", AttrType.STRING, "zeros",
                choices=("zeros", "border", "reflection"))],
    infer=_infer_grid_sample,
    cost=flops_per_output(16),
)
def grid_sample_kernel(x: np.ndarray, grid: np.ndarray, *, align_corners: int, mode: str,
                       padding_mode: str) -> np.ndarray:
    """Y[n, c, p] = X[n, c] interpolated at the point ``grid[n, p]``, whose coordinates
    (x first) run from -1 to 1 across the input (corner pixel centres with
    ``align_corners``, else corner pixel edges)."""
    batch, channels, *sizes = x.shape
    align = bool(align_corners)
    positions = _grid_positions(grid, sizes, align, mode, padding_mode)
    data = x.reshape(batch, channels, -1).astype(_work_dtype(x.dtype))
    result = np.zeros((batch, channels, positions[0].shape[1]), data.dtype)
    if mode == "nearest":
        taps = [[(p, np.ones_like(p))] for p in positions]
    else:
        taps = []
        for p in positions:
            base, weights = _sample_weights(p, mode)
            first = 0 if mode == "linear" else -1
            taps.append([(base + first + k, w) for k, w in enumerate(weights)])
    for combination in itertools.product(*taps):
        flat_index = np.zeros(positions[0].shape, np.intp)
        weight = np.ones(positions[0].shape)
        for axis, (index, tap_weight) in enumerate(combination):
            clamped, valid = _pixel_indices(index, sizes[axis], padding_mode, align)
            flat_index = flat_index * sizes[axis] + clamped
            weight = weight * (tap_weight if valid is None else tap_weight * valid)
        values = np.take_along_axis(data, flat_index[:, None, :], axis=2)
        result += values * weight[:, None, :].astype(data.dtype)
    out_shape = (batch, channels, *grid.shape[1:-1])
    return _to_dtype(result, x.dtype).reshape(out_shape)


# -- AffineGrid -------------------------------------------------------------------------

def _infer_affine_grid(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    ctx.require_dtypes(1, (DataType.DT_INT64,))
    theta = ctx.input(0)
    if theta.rank != 3 or not is_static_dim(theta.shape[1]) or theta.shape[1] not in (2, 3):
        raise ctx.fail(f"theta must be [N, 2, 3] or [N, 3, 4], got {list(theta.shape)}")
    spatial = int(theta.shape[1])
    size = ctx.const_ints(1)
    if size is not None and len(size) != spatial + 2:
        raise ctx.fail(f"size {size} must have {spatial + 2} values for theta "
                       f"{list(theta.shape)}")
    dims: Shape = tuple(size[2:]) if size is not None else (-1,) * spatial
    return [TensorDesc((theta.shape[0], *dims, spatial), theta.dtype)]


@register_op("AffineGrid", inputs=["theta", "size"],
             attrs=[Attr("align_corners", AttrType.INT, 0, choices=(0, 1))],
             infer=_infer_affine_grid, cost=flops_per_output(6))
def affine_grid_kernel(theta: np.ndarray, size: np.ndarray, *, align_corners: int) -> np.ndarray:
    """grid[n, ..., :] = theta[n] @ (x, y[, z], 1) over a regular grid of ``size[2:]``
    points spanning [-1, 1] (x along the last axis), as GridSample reads it."""
    sizes = [int(s) for s in size.reshape(-1)[2:]]
    lines = []
    for count in sizes:
        if align_corners:
            lines.append(np.linspace(-1.0, 1.0, count))
        else:
            lines.append((2.0 * np.arange(count) + 1.0) / count - 1.0)
    mesh = np.meshgrid(*lines, indexing="ij")  # first spatial axis first
    points = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)], axis=1)
    grid = np.einsum("pk,nrk->npr", points, theta.astype(np.float64))
    return grid.reshape(theta.shape[0], *sizes, len(sizes)).astype(theta.dtype)
