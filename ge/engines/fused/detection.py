"""NonMaxSuppression and RoiAlign as compiled loops.

NonMaxSuppression: the greedy suppression of one class in one call.

The reference kernel (``ge.ops.detection``) keeps a box, then recomputes the overlap of
every remaining box with it in NumPy: about 30 us of array calls per kept box, 3 ms for
100 kept out of 1,000. Here one compiled call per batch entry does it all: the boxes'
corners and areas, then for each class a heap of its candidates (those above the score
threshold; the higher score first, the lower index on ties, as the reference's stable
sort), taken off best first only as far as the walk goes: a candidate is kept unless a
box kept before it overlaps it by more than the IoU threshold, and the walk stops once
the limit is met (1,000 boxes of one class: 0.03 ms, onnxruntime 0.018). The arithmetic
is the reference's, in float64, so the selection is the same box for box: an IoU that
is undefined (no intersection, an empty box, NaN) never suppresses.

RoiAlign: the reference gathers every sample's four corners for all channels at once
with NumPy's fancy indexing (48 ms for 100 regions of a 256-channel 50x50 map, 7x
onnxruntime). The loop walks each region's channels plane by plane, with the sample
positions and weights computed once per region, the reference's way (float64
positions, float32 weights and sums).

The loops are compiled (and cached on disk) like the engine's other loops (``kernels``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.fused import kernels
from ge.ir import DataType, Node

__all__ = ["OP_TYPES", "refusal", "bind", "bind_nms", "bind_roi_align"]

OP_TYPES = frozenset({"NonMaxSuppression", "RoiAlign"})


def nms_loop(boxes: np.ndarray, scores: np.ndarray, center: bool, use_floor: bool,
             floor: float, threshold: float, limit: int, kept_class: np.ndarray,
             kept_box: np.ndarray) -> int:  # pragma: no cover - runs compiled
    """Greedy suppression of each class of one batch: ``boxes`` [n, 4] and ``scores``
    [classes, n] in float64. The selected (class, box) pairs go to ``kept_class`` and
    ``kept_box`` (room for ``limit`` per class), class by class, best first; returns
    how many.

    A class's candidates (those above the floor, when there is one) are heaped, the best
    on top (the higher score, the lower index on ties, NaN below every number): each is
    taken off in the reference's sorted order, only as many as the walk needs. A
    candidate is kept unless a box kept before it overlaps it by more than
    ``threshold``; the walk stops once ``limit`` are kept."""
    n = boxes.shape[0]
    y_min = np.empty(n)
    x_min = np.empty(n)
    y_max = np.empty(n)
    x_max = np.empty(n)
    area = np.empty(n)
    for b in range(n):
        if center:
            half_h, half_w = boxes[b, 3] / 2, boxes[b, 2] / 2
            y_min[b], x_min[b] = boxes[b, 1] - half_h, boxes[b, 0] - half_w
            y_max[b], x_max[b] = boxes[b, 1] + half_h, boxes[b, 0] + half_w
        else:
            y_min[b], y_max[b] = lower(boxes[b, 0], boxes[b, 2]), upper(boxes[b, 0], boxes[b, 2])
            x_min[b], x_max[b] = lower(boxes[b, 1], boxes[b, 3]), upper(boxes[b, 1], boxes[b, 3])
        area[b] = (y_max[b] - y_min[b]) * (x_max[b] - x_min[b])
    heap = np.empty(n, np.int64)
    kept = np.empty(max(limit, 1), np.int64)
    total = 0
    for cls in range(scores.shape[0]):
        score = scores[cls]
        size = 0
        for b in range(n):
            if not use_floor or score[b] > floor:
                heap[size] = b
                size += 1
        # heapify: each parent above its children (better: higher, lower index on ties)
        for start in range(size // 2 - 1, -1, -1):
            settle(heap, score, size, start, heap[start])
        count = 0
        while size > 0 and count < limit:
            j = heap[0]
            size -= 1
            settle(heap, score, size, 0, heap[size])  # the last leaf to the root
            suppressed = False
            for k in range(count):
                i = kept[k]
                high = y_max[i] if y_max[i] < y_max[j] else y_max[j]
                low = y_min[i] if y_min[i] > y_min[j] else y_min[j]
                right = x_max[i] if x_max[i] < x_max[j] else x_max[j]
                left = x_min[i] if x_min[i] > x_min[j] else x_min[j]
                inter_h = high - low
                inter_w = right - left
                if inter_h > 0.0 and inter_w > 0.0 and area[i] > 0.0 and area[j] > 0.0:
                    intersection = inter_h * inter_w
                    union = area[i] + area[j] - intersection
                    if union > 0.0 and intersection / union > threshold:
                        suppressed = True
                        break
            if not suppressed:
                kept[count] = j
                kept_class[total] = cls
                kept_box[total] = j
                count += 1
                total += 1
    return total


def lower(a: float, b: float) -> float:  # pragma: no cover - runs compiled
    """``np.minimum``'s: NaN when either is."""
    if a != a or b != b:
        return a + b
    return a if a < b else b


def upper(a: float, b: float) -> float:  # pragma: no cover - runs compiled
    """``np.maximum``'s: NaN when either is."""
    if a != a or b != b:
        return a + b
    return a if a > b else b


def settle(heap: np.ndarray, score: np.ndarray, size: int, position: int,
           item: int) -> None:  # pragma: no cover - runs compiled
    """Put candidate ``item`` at ``position`` of the heap of ``size`` and move it down
    below every child that comes before it."""
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        other = child + 1
        if other < size and better(score, heap[other], heap[child]):
            child = other
        if not better(score, heap[child], item):
            break
        heap[position] = heap[child]
        position = child
    heap[position] = item


def better(score: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - runs compiled
    """Whether candidate ``a`` comes before ``b``: the higher score, NaN below every
    number, the lower index on ties (the reference's stable sort of the negated
    scores)."""
    sa, sb = score[a], score[b]
    if sa > sb:
        return True
    if sa < sb:
        return False
    if sa == sb:
        return a < b
    a_nan, b_nan = sa != sa, sb != sb
    if a_nan and b_nan:
        return a < b
    return b_nan


def roi_align_loop(data: np.ndarray, batch: np.ndarray, start_y: np.ndarray,
                   start_x: np.ndarray, bin_h: np.ndarray, bin_w: np.ndarray,
                   grid_h: np.ndarray, grid_w: np.ndarray, out: np.ndarray,
                   use_max: bool) -> None:  # pragma: no cover - runs compiled
    """RoiAlign of every region into ``out`` [R, C, PH, PW] (zeros where a region has no
    sample), the reference's arithmetic: sample positions and weights in float64, each
    corner's weight rounded to float32, a sample the sum (or, in max mode, the largest)
    of its four weighted corners, a bin the mean (or max) of its samples."""
    regions, channels, bins_h, bins_w = out.shape
    height, width = data.shape[2], data.shape[3]
    for r in range(regions):
        gh, gw = grid_h[r], grid_w[r]
        if gh * gw == 0:
            for c in range(channels):
                for ph in range(bins_h):
                    for pw in range(bins_w):
                        out[r, c, ph, pw] = 0.0
            continue
        ny, nx = bins_h * gh, bins_w * gw
        y_low = np.empty(ny, np.int64)
        y_high = np.empty(ny, np.int64)
        wy_low = np.empty(ny, np.float64)
        wy_high = np.empty(ny, np.float64)
        x_low = np.empty(nx, np.int64)
        x_high = np.empty(nx, np.int64)
        wx_low = np.empty(nx, np.float64)
        wx_high = np.empty(nx, np.float64)
        for axis in range(2):
            count = ny if axis == 0 else nx
            grid = gh if axis == 0 else gw
            start = start_y[r] if axis == 0 else start_x[r]
            size = bin_h[r] if axis == 0 else bin_w[r]
            limit = height if axis == 0 else width
            for k in range(count):
                step = (k // grid) + ((k % grid) + 0.5) / grid
                point = start + step * size
                valid = 1.0 if (point >= -1.0 and point <= limit) else 0.0
                if point < 0.0:
                    point = 0.0
                low = int(np.floor(point))
                if low >= limit - 1:
                    low = limit - 1
                    high = limit - 1
                    point = float(low)
                else:
                    high = low + 1
                fraction = point - low
                if axis == 0:
                    y_low[k], y_high[k] = low, high
                    wy_low[k], wy_high[k] = (1.0 - fraction) * valid, fraction * valid
                else:
                    x_low[k], x_high[k] = low, high
                    wx_low[k], wx_high[k] = (1.0 - fraction) * valid, fraction * valid
        samples = np.float32(gh * gw)
        image = batch[r]
        for c in range(channels):
            plane = data[image, c]
            for ph in range(bins_h):
                for pw in range(bins_w):
                    total = np.float32(0.0)
                    best = np.float32(0.0)
                    first = True
                    for iy in range(gh):
                        ky = ph * gh + iy
                        for ix in range(gw):
                            kx = pw * gw + ix
                            t1 = plane[y_low[ky], x_low[kx]] * np.float32(wy_low[ky] * wx_low[kx])
                            t2 = plane[y_low[ky], x_high[kx]] * np.float32(
                                wy_low[ky] * wx_high[kx])
                            t3 = plane[y_high[ky], x_low[kx]] * np.float32(
                                wy_high[ky] * wx_low[kx])
                            t4 = plane[y_high[ky], x_high[kx]] * np.float32(
                                wy_high[ky] * wx_high[kx])
                            if use_max:
                                value = np.maximum(np.maximum(np.maximum(t1, t2), t3), t4)
                                best = value if first else np.maximum(best, value)
                                first = False
                            else:
                                total += ((t1 + t2) + t3) + t4
                    out[r, c, ph, pw] = best if use_max else total / samples


_SIGNATURE = ("int64(float64[:, ::1], float64[:, ::1], boolean, boolean, float64, float64, "
              "int64, int64[::1], int64[::1])")
_ROI_SIGNATURE = ("void(float32[:, :, :, ::1], int64[::1], float64[::1], float64[::1], "
                  "float64[::1], float64[::1], int64[::1], int64[::1], float32[:, :, :, ::1], "
                  "boolean)")
_COMPILED: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()


def _source(loop: Callable[..., Any], signature: str) -> str:
    lines = ["import numba", "import numpy as np", ""]
    if loop is nms_loop:
        for helper in (lower, upper, better, settle):
            lines += ["", "@numba.njit(inline='always')", inspect.getsource(helper).rstrip(), ""]
    return "\n".join(lines + ["", inspect.getsource(loop).rstrip(), "", "",
                              f"serial_loop = {loop.__name__}", f"SIGNATURE = {signature!r}", ""])


def compiled_loop(op_type: str = "NonMaxSuppression") -> Callable[..., Any]:
    """``op_type``'s compiled loop (once per process; from the kernel cache when compiled
    before)."""
    loop, signature = (nms_loop, _SIGNATURE) if op_type == "NonMaxSuppression" \
        else (roi_align_loop, _ROI_SIGNATURE)
    with _LOCK:
        if op_type not in _COMPILED:
            _COMPILED[op_type] = kernels.compile_loop(_source(loop, signature),
                                                      parallel=False).function
        return _COMPILED[op_type]


def refusal(node: Node) -> Optional[str]:
    """Why the loop does not take ``node`` (None: it does)."""
    if node.op_type == "RoiAlign":
        for index in (0, 1):
            value = node.inputs[index] if index < len(node.inputs) else None
            if value is None or value.dtype is not DataType.DT_FLOAT:
                return "RoiAlign runs compiled for float32 data and regions only"
        return None
    for index in (0, 1):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is None or value.dtype not in (DataType.DT_FLOAT, DataType.DT_DOUBLE):
            return "boxes and scores must be float32 or float64"
    return None


def _scalar(value: Optional[np.ndarray]) -> Optional[float]:
    return None if value is None or value.size == 0 else float(value.reshape(-1)[0])


def bind_nms(node: Node) -> Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]:
    """The node's kernel: [K, 3] selected (batch, class, box) indices, as the reference."""
    loop = compiled_loop()
    center = bool(node.attrs.get("center_point_box", 0))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        boxes, scores = inputs[0], inputs[1]
        assert boxes is not None and scores is not None
        given = list(inputs) + [None] * (5 - len(inputs))
        limit = int(max(_scalar(given[2]) or 0, 0))
        threshold = _scalar(given[3]) or 0.0
        floor = _scalar(given[4])
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
                or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise ValueError(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} "
                             f"do not fit: [batch, boxes, 4] and [batch, classes, boxes]")
        batches, classes, count = boxes.shape[0], scores.shape[1], boxes.shape[1]
        limit = min(limit, count)
        if not limit or not batches or not classes:
            return [np.zeros((0, 3), np.int64)]
        selected = np.empty((batches * classes * limit, 3), np.int64)
        found = 0
        kept_class = np.empty(classes * limit, np.int64)
        kept_box = np.empty(classes * limit, np.int64)
        for batch in range(batches):
            total = loop(np.ascontiguousarray(boxes[batch], np.float64),
                         np.ascontiguousarray(scores[batch], np.float64), center,
                         floor is not None, float(floor or 0.0), float(threshold), limit,
                         kept_class, kept_box)
            rows = selected[found:found + total]
            rows[:, 0], rows[:, 1], rows[:, 2] = batch, kept_class[:total], kept_box[:total]
            found += total
        return [selected[:found].copy()]

    return kernel


def bind_roi_align(node: Node) -> Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]:
    """RoiAlign's kernel: [R, C, output_height, output_width], as the reference."""
    from ge.ops.detection import _regions

    loop = compiled_loop("RoiAlign")
    attrs = node.attrs
    bins = (int(attrs["output_height"]), int(attrs["output_width"]))
    half_pixel = attrs["coordinate_transformation_mode"] == "half_pixel"
    use_max = attrs["mode"] == "max"
    scale, ratio = float(attrs["spatial_scale"]), int(attrs["sampling_ratio"])

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x, rois, batch = inputs[0], inputs[1], inputs[2]
        assert x is not None and rois is not None and batch is not None
        start_y, start_x, bin_h, bin_w, grid_h, grid_w = _regions(rois, scale, half_pixel,
                                                                  bins, ratio)
        out = np.empty((len(rois), x.shape[1], *bins), np.float32)
        images = batch.astype(np.int64).reshape(-1)
        if len(images) and (images.min() < -x.shape[0] or images.max() >= x.shape[0]):
            raise IndexError(f"RoiAlign: a batch index is out of range for {x.shape[0]} "
                             f"image(s)")
        images = np.where(images < 0, images + x.shape[0], images)  # as NumPy indexes
        loop(np.ascontiguousarray(x), np.ascontiguousarray(images),
             *(np.ascontiguousarray(a, np.float64) for a in (start_y, start_x, bin_h, bin_w)),
             *(np.ascontiguousarray(a, np.int64) for a in (grid_h, grid_w)), out, use_max)
        return [out]

    return kernel


def bind(node: Node) -> Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]:
    """The node's kernel."""
    return bind_roi_align(node) if node.op_type == "RoiAlign" else bind_nms(node)
