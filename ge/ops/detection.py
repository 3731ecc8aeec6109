"""Detection ops: RoiAlign (Mask R-CNN's region feature pooling) and NonMaxSuppression,
with ONNX's semantics (RoiAlign-22, NonMaxSuppression-11).

RoiAlign samples each region's bins at a regular grid of points by bilinear
interpolation (no rounding of coordinates) and averages or maxes them, gathering
the samples of a memory-bounded chunk of regions (all channels and bins) at a time.
NonMaxSuppression keeps boxes greedily in score order, each kept box removing the
remaining ones it overlaps in one vectorized step (O(kept x boxes), no N x N matrix).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ops.elementwise import FLOATS
from ge.ops.registry import Attr, AttrType, Cost, InferenceContext, Input, register_op
from ge.ops.shape_utils import dims_equal

_ELEMENTS_PER_CHUNK = 1 << 22  # sampled values held at once by RoiAlign


# -- RoiAlign ---------------------------------------------------------------------------

def _infer_roi_align(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1)
    ctx.require_dtypes(0, FLOATS)
    ctx.require_dtypes(2, (DataType.DT_INT64, DataType.DT_INT32))
    ctx.require_rank(0, 4)
    ctx.require_rank(1, 2)
    ctx.require_rank(2, 1)
    rois, indices = ctx.shape(1), ctx.shape(2)
    if not dims_equal(rois[1], 4) or not dims_equal(rois[0], indices[0]):
        raise ctx.fail(f"rois {list(rois)} must be [num_rois, 4] and batch_indices "
                       f"{list(indices)} [num_rois]")
    height, width = ctx.attr("output_height"), ctx.attr("output_width")
    if height < 1 or width < 1:
        raise ctx.fail(f"output_height and output_width must be >= 1, got {height}, {width}")
    return [TensorDesc((rois[0], ctx.shape(0)[1], height, width), dtype)]


def _roi_align_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    from ge.ir.tensor import num_elements

    ratio = max(ctx.attr("sampling_ratio"), 2)
    flops = num_elements(outputs[0].shape) * ratio * ratio * 8
    return Cost(flops, num_elements(outputs[0].shape) * outputs[0].dtype.itemsize)


def _axis_samples(start: np.ndarray, bin_size: np.ndarray, bins: int, grid: int, limit: int
                  ) -> tuple[np.ndarray, ...]:
    """Per region, the sample points of one axis: (low, high, low weight, high weight,
    valid), each ``[regions, bins * grid]`` (bin-major)."""
    steps = (np.arange(bins)[:, None] + (np.arange(grid)[None, :] + 0.5) / grid).reshape(-1)
    point = start[:, None] + steps[None, :] * bin_size[:, None]
    valid = (point >= -1.0) & (point <= limit)
    point = np.maximum(point, 0.0)
    low = np.floor(point).astype(np.intp)
    edge = low >= limit - 1
    low = np.where(edge, limit - 1, low)
    high = np.where(edge, limit - 1, low + 1)
    point = np.where(edge, low, point)
    fraction = point - low
    return low, high, (1.0 - fraction) * valid, fraction * valid


def _pool_chunk(data: np.ndarray, batch: np.ndarray, ys: tuple, xs: tuple,
                grid: tuple[int, int], bins: tuple[int, int], mode: str) -> np.ndarray:
    """RoiAlign of regions sharing one sampling grid, ``[R, C, PH, PW]``: gather each
    sample's four corners, weight them, then average (or max) over each bin's samples."""
    (y_low, y_high, wy_low, wy_high), (x_low, x_high, wx_low, wx_high) = ys, xs
    rows = batch[:, None, None]
    pooled: np.ndarray | None = None
    for y_index, y_weight in ((y_low, wy_low), (y_high, wy_high)):
        for x_index, x_weight in ((x_low, wx_low), (x_high, wx_high)):
            values = data[rows, :, y_index[:, :, None], x_index[:, None, :]]  # [R, Y, X, C]
            weight = (y_weight[:, :, None] * x_weight[:, None, :]).astype(data.dtype)
            term = values * weight[..., None]
            if pooled is None:
                pooled = term
            elif mode == "avg":
                pooled += term
            else:
                np.maximum(pooled, term, out=pooled)
    assert pooled is not None
    shape = (len(batch), bins[0], grid[0], bins[1], grid[1], data.shape[1])
    reduce = np.mean if mode == "avg" else np.max
    return reduce(pooled.reshape(shape), axis=(2, 4)).transpose(0, 3, 1, 2)


def _regions(rois: np.ndarray, spatial_scale: float, half_pixel: bool, bins: tuple[int, int],
             sampling_ratio: int) -> tuple[np.ndarray, ...]:
    """Start, bin size and sampling grid per region, along y then x."""
    boxes = rois.astype(np.float64) * spatial_scale - (0.5 if half_pixel else 0.0)
    start_x, start_y, end_x, end_y = boxes.T
    width, height = end_x - start_x, end_y - start_y
    if not half_pixel:  # malformed regions become 1 x 1
        width, height = np.maximum(width, 1.0), np.maximum(height, 1.0)
    bin_h, bin_w = height / bins[0], width / bins[1]
    if sampling_ratio > 0:
        grid_h = np.full(len(rois), sampling_ratio)
        grid_w = grid_h
    else:
        grid_h, grid_w = np.ceil(height / bins[0]).astype(int), np.ceil(width / bins[1]).astype(int)
    return start_y, start_x, bin_h, bin_w, grid_h, grid_w


@register_op(
    "RoiAlign",
    inputs=["X", "rois", "batch_indices"],
    attrs=[
        Attr("coordinate_transformation_mode", AttrType.STRING, "half_pixel",
             choices=("half_pixel", "output_half_pixel"),
             doc="half_pixel shifts region corners by -0.5 (pixel centres)"),
        Attr("mode", AttrType.STRING, "avg", choices=("avg", "max")),
        Attr("output_height", AttrType.INT, 1),
        Attr("output_width", AttrType.INT, 1),
        Attr("sampling_ratio", AttrType.INT, 0, doc="samples per bin side; 0: ceil(bin size)"),
        Attr("spatial_scale", AttrType.FLOAT, 1.0, doc="region coordinates -> X's pixels"),
    ],
    infer=_infer_roi_align,
    cost=_roi_align_cost,
)
def roi_align_kernel(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *,
                     coordinate_transformation_mode: str, mode: str, output_height: int,
                     output_width: int, sampling_ratio: int, spatial_scale: float) -> np.ndarray:
    """Y[r, c] = the ``output_height x output_width`` bins of region ``rois[r]`` (x1, y1,
    x2, y2) of image ``batch_indices[r]``, each bin the average (or max) of its
    bilinearly interpolated sample points. (In max mode a sample is the largest of its
    four weighted corner values, as ONNX Runtime computes it.)"""
    bins = (output_height, output_width)
    data = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    height, width = x.shape[2], x.shape[3]
    start_y, start_x, bin_h, bin_w, grid_h, grid_w = _regions(
        rois, spatial_scale, coordinate_transformation_mode == "half_pixel", bins, sampling_ratio)
    result = np.zeros((len(rois), x.shape[1], *bins), data.dtype)
    batch = batch_indices.astype(np.intp).reshape(-1)
    for gh, gw in sorted(set(zip(grid_h.tolist(), grid_w.tolist()))):
        members = np.nonzero((grid_h == gh) & (grid_w == gw))[0]
        if gh * gw == 0:
            continue  # no sample points: the bins stay 0
        per_region = bins[0] * gh * bins[1] * gw * x.shape[1]  # samples held at once
        step = max(1, _ELEMENTS_PER_CHUNK // per_region)
        for first in range(0, len(members), step):
            chunk = members[first:first + step]
            ys = _axis_samples(start_y[chunk], bin_h[chunk], bins[0], gh, height)
            xs = _axis_samples(start_x[chunk], bin_w[chunk], bins[1], gw, width)
            result[chunk] = _pool_chunk(data, batch[chunk], ys, xs, (gh, gw), bins, mode)
    return result.astype(x.dtype)


# -- NonMaxSuppression ------------------------------------------------------------------

def _infer_nms(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    ctx.require_dtypes(1, FLOATS)
    ctx.require_rank(0, 3)
    ctx.require_rank(1, 3)
    boxes, scores = ctx.shape(0), ctx.shape(1)
    if not dims_equal(boxes[2], 4) or not dims_equal(boxes[0], scores[0]) \
            or not dims_equal(boxes[1], scores[2]):
        raise ctx.fail(f"boxes {list(boxes)} must be [batch, boxes, 4] and scores "
                       f"{list(scores)} [batch, classes, boxes]")
    if ctx.has_input(2):
        ctx.require_dtypes(2, (DataType.DT_INT64, DataType.DT_INT32))
    return [TensorDesc((-1, 3), DataType.DT_INT64)]


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y_min, x_min, y_max, x_max) of boxes given as corners (either order) or centres."""
    if center_point_box:
        x, y, w, h = boxes.T
        return y - h / 2, x - w / 2, y + h / 2, x + w / 2
    y1, x1, y2, x2 = boxes.T
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _overlaps(corners: tuple[np.ndarray, ...], index: int, others: np.ndarray) -> np.ndarray:
    """IoU of box ``index`` with boxes ``others``; NaN where it is undefined (no
    intersection, or an empty box), which never suppresses."""
    y_min, x_min, y_max, x_max = corners
    inter_h = np.minimum(y_max[index], y_max[others]) - np.maximum(y_min[index], y_min[others])
    inter_w = np.minimum(x_max[index], x_max[others]) - np.maximum(x_min[index], x_min[others])
    area = (y_max - y_min) * (x_max - x_min)
    intersection = inter_h * inter_w
    union = area[index] + area[others] - intersection
    good = (inter_h > 0) & (inter_w > 0) & (area[index] > 0) & (area[others] > 0) & (union > 0)
    return np.where(good, intersection / np.where(good, union, 1.0), np.nan)


def _select(corners: tuple[np.ndarray, ...], scores: np.ndarray, limit: int,
            iou_threshold: float, score_threshold: float | None) -> list[int]:
    """Greedy NMS of one class: highest score first (lower index on ties); each kept
    box removes the remaining boxes it overlaps by more than ``iou_threshold``."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    if score_threshold is not None:
        order = order[scores[order] > score_threshold]
    kept: list[int] = []
    while order.size and len(kept) < limit:
        best, order = int(order[0]), order[1:]
        kept.append(best)
        overlap = _overlaps(corners, best, order)
        order = order[~(overlap > iou_threshold)]
    return kept


@register_op(
    "NonMaxSuppression",
    inputs=["boxes", "scores", Input("max_output_boxes_per_class", optional=True),
            Input("iou_threshold", optional=True), Input("score_threshold", optional=True)],
    outputs=("selected_indices",),
    attrs=[Attr("center_point_box", AttrType.INT, 0, choices=(0, 1),
                doc="0: boxes are [y1, x1, y2, x2]; 1: [x_center, y_center, width, height]")],
    infer=_infer_nms,
)
def non_max_suppression_kernel(boxes: np.ndarray, scores: np.ndarray,
                               max_output_boxes_per_class: np.ndarray | None = None,
                               iou_threshold: np.ndarray | None = None,
                               score_threshold: np.ndarray | None = None, *,
                               center_point_box: int) -> np.ndarray:
    """selected_indices [K, 3] of (batch, class, box): per batch entry and class, boxes
    in decreasing score order, dropping any whose IoU with a kept box exceeds
    ``iou_threshold`` or whose score is not above ``score_threshold``; at most
    ``max_output_boxes_per_class`` (default 0) per class."""
    def scalar(value: np.ndarray | None) -> float | None:
        return None if value is None or value.size == 0 else float(value.reshape(-1)[0])

    limit = int(max(scalar(max_output_boxes_per_class) or 0, 0))
    threshold = scalar(iou_threshold) or 0.0
    floor = scalar(score_threshold)
    selected: list[tuple[int, int, int]] = []
    for batch in range(boxes.shape[0] if limit else 0):
        corners = _corners(boxes[batch].astype(np.float64), center_point_box)
        for cls in range(scores.shape[1]):
            kept = _select(corners, scores[batch, cls].astype(np.float64), limit, threshold,
                           floor)
            selected.extend((batch, cls, box) for box in kept)
    return np.array(selected, dtype=np.int64).reshape(-1, 3)
