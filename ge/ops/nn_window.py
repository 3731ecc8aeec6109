"""Sliding windows over any number of spatial axes: the shape arithmetic and the NumPy
views that convolutions and pools of every rank share.

Data here is channels-last, ``[N, *spatial, C]``. A ``Window`` holds the strides,
dilations and padding of each spatial axis; ``plan_axis`` turns it into the output
length and padding of one axis; ``window_view`` gives a read-only
``[N, *out, *kernel, C]`` view (``as_strided``, no copy beyond the padding), which
``grouped_product`` contracts with a filter through BLAS and pools reduce.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["effective_kernel", "same_padding", "conv_output_size", "AxisPlan", "Window",
           "plan_axis", "window_view", "window_counts", "grouped_product", "correlate",
           "onnx_pads", "compute_dtype"]


def effective_kernel(kernel: int, dilation: int = 1) -> int:
    """The extent of a dilated window: ``(kernel - 1) * dilation + 1``."""
    return (kernel - 1) * dilation + 1


def same_padding(size: int, kernel: int, stride: int = 1, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow's SAME padding of one axis as ``(begin, end)``; the odd cell goes at the end.

    The output has ``ceil(size / stride)`` cells, and the total padding is
    ``max((out - 1) * stride + effective_kernel - size, 0)``.
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + effective_kernel(kernel, dilation) - size, 0)
    return total // 2, total - total // 2


def conv_output_size(size: int, kernel: int, stride: int = 1, dilation: int = 1,
                     pads: tuple[int, int] = (0, 0), ceil_mode: bool = False) -> int:
    """Output length of a window sliding over ``size`` cells padded by ``pads``.

    ``floor((size + pads - effective_kernel) / stride) + 1``; with ``ceil_mode`` the
    division rounds up, but (as ONNX and PyTorch do) a last window that would start
    in the end padding is dropped. ``ValueError`` when the window exceeds the padded input.
    """
    span = size + pads[0] + pads[1] - effective_kernel(kernel, dilation)
    if span < 0:
        raise ValueError(f"a window of extent {effective_kernel(kernel, dilation)} does not fit "
                         f"{size} cells padded by {list(pads)}")
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pads[0]:
        out -= 1
    return out


def onnx_pads(auto_pad: str, sizes: Sequence[int], kernel: Sequence[int],
              strides: Sequence[int], dilations: Sequence[int],
              pads: Sequence[int]) -> list[int]:
    """ONNX padding as explicit ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``.

    ``SAME_UPPER`` / ``SAME_LOWER`` give ``ceil(size / stride)`` outputs, the odd cell of
    padding at the end / the beginning; ``VALID`` pads nothing; ``NOTSET`` uses ``pads``.
    """
    rank = len(kernel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = [same_padding(s, k, st, d) for s, k, st, d in zip(sizes, kernel, strides,
                                                                   dilations)]
        if auto_pad == "SAME_LOWER":
            pairs = [(end, begin) for begin, end in pairs]
        return [p[0] for p in pairs] + [p[1] for p in pairs]
    if auto_pad == "VALID" or not pads:
        return [0] * (2 * rank)
    return list(pads)


class AxisPlan(NamedTuple):
    """How one spatial axis is windowed: output length and the padding to apply."""

    output: int
    pad_begin: int
    pad_end: int
    overhang: int = 0  # cells past pad_end that a ceil-mode last window reaches


@dataclass(frozen=True)
class Window:
    """Resolved window attributes, one entry per spatial axis (outermost first)."""

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    padding: str  # SAME, VALID or EXPLICIT
    pads: tuple[int, ...]  # begin and end of each axis in turn: [top, bottom, left, right]
    ceil_mode: bool = False


def plan_axis(window: Window, axis: int, size: int, kernel: int) -> AxisPlan:
    """The output length and padding of spatial ``axis`` (0 is the outermost)."""
    stride, dilation = window.strides[axis], window.dilations[axis]
    if window.padding == "SAME":
        begin, end = same_padding(size, kernel, stride, dilation)
        return AxisPlan(-(-size // stride), begin, end)
    begin, end = window.pads[2 * axis], window.pads[2 * axis + 1]
    out = conv_output_size(size, kernel, stride, dilation, (begin, end), window.ceil_mode)
    overhang = max((out - 1) * stride + effective_kernel(kernel, dilation) - size - begin - end, 0)
    return AxisPlan(out, begin, end, overhang)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The precision window kernels compute in: float64 stays, everything else float32."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def window_view(x: np.ndarray, window: Window, kernel: Sequence[int], fill: float
                ) -> np.ndarray:
    """A read-only ``[N, *out, *kernel, C]`` view of the windows over channels-last ``x``."""
    spatial = x.ndim - 2
    plans = [plan_axis(window, axis, x.shape[1 + axis], kernel[axis]) for axis in range(spatial)]
    widths = [(0, 0)] + [(p.pad_begin, p.pad_end + p.overhang) for p in plans] + [(0, 0)]
    if any(any(pair) for pair in widths):
        x = np.pad(x, widths, constant_values=fill)
    steps = x.strides
    shape = (x.shape[0], *(p.output for p in plans), *kernel, x.shape[-1])
    strides = (steps[0], *(steps[1 + a] * window.strides[a] for a in range(spatial)),
               *(steps[1 + a] * window.dilations[a] for a in range(spatial)), steps[-1])
    return as_strided(x, shape, strides, writeable=False)


def window_counts(window: Window, kernel: Sequence[int], sizes: Sequence[int],
                  include_pad: bool, dtype: np.dtype) -> np.ndarray:
    """``[1, *out, 1]``: how many cells each window counts — the input cells, and the
    declared padding too if ``include_pad`` (a ceil-mode overhang never counts)."""
    plans = [plan_axis(window, axis, size, k) for axis, (size, k) in
             enumerate(zip(sizes, kernel))]
    mask = np.zeros((1, *(s + p.pad_begin + p.pad_end + p.overhang
                          for s, p in zip(sizes, plans)), 1), dtype)
    if include_pad:
        region = tuple(slice(0, s + p.pad_begin + p.pad_end) for s, p in zip(sizes, plans))
    else:
        region = tuple(slice(p.pad_begin, p.pad_begin + s) for s, p in zip(sizes, plans))
    mask[(slice(None),) + region] = 1
    unpadded = Window(window.strides, window.dilations, "VALID", (0,) * (2 * len(sizes)))
    view = window_view(mask, unpadded, kernel, 0.0)
    counts = view.sum(axis=tuple(range(1 + len(sizes), 1 + 2 * len(sizes))))
    return np.maximum(counts, 1)


def grouped_product(windows: np.ndarray, weights: np.ndarray, groups: int) -> np.ndarray:
    """``[N, *out, Cout]`` from ``[N, *out, *kernel, C]`` windows and a ``[*kernel, C/groups,
    Cout]`` filter: one BLAS contraction (per group), or tap by tap when depthwise."""
    spatial = weights.ndim - 2
    window_axes = list(range(1 + spatial, windows.ndim))
    filter_axes = list(range(spatial + 1))
    if groups == 1:
        return np.tensordot(windows, weights, axes=(window_axes, filter_axes))
    kernel = weights.shape[:spatial]
    channels = windows.shape[-1]
    per_group, per_out = channels // groups, weights.shape[-1] // groups
    outer = windows.shape[:1 + spatial]
    if per_group == 1:  # depthwise: one multiply-add per tap, over all pixels at once
        taps = weights.reshape(*kernel, groups, per_out)
        result = np.zeros((*outer, groups, per_out), windows.dtype)
        for tap in itertools.product(*(range(k) for k in kernel)):
            result += windows[(Ellipsis,) + tap + (slice(None),)][..., None] * taps[tap]
        return result.reshape(*outer, groups * per_out)
    split = weights.reshape(*kernel, per_group, groups, per_out)
    parts = [np.tensordot(windows[..., g * per_group:(g + 1) * per_group], split[..., g, :],
                          axes=(window_axes, filter_axes)) for g in range(groups)]
    return np.concatenate(parts, axis=-1)


def correlate(data: np.ndarray, filters: np.ndarray, window: Window, groups: int,
              bias: Optional[np.ndarray]) -> np.ndarray:
    """Cross-correlation of channels-last ``data`` with a ``[*kernel, C/groups, Cout]``
    filter (plus ``bias``), for any number of spatial axes: the convolutions' one kernel."""
    weights = filters.astype(data.dtype, copy=False)
    windows = window_view(data, window, weights.shape[:-2], 0.0)
    result = grouped_product(windows, weights, groups)
    if bias is not None:
        result = result + bias.astype(result.dtype, copy=False)
    return result
