"""3-D convolution and pooling in the seed's TensorFlow style (Conv3D, MaxPool3D,
AvgPool3D), ONNX's LpPool over any number of spatial axes, and MaxPoolWithArgmax.

The 3-D ops take ``data_format`` ``"NDHWC"`` (the default, as TensorFlow) or
``"NCDHW"``; a Conv3D filter is ``[kd, kh, kw, Cin/groups, Cout]`` (DHWIO) for NDHWC data
and ``[Cout, Cin/groups, kd, kh, kw]`` (OIDHW) for NCDHW data unless ``filter_format``
says otherwise. ``strides``, ``dilations`` and ``ksize`` take 5 values in data_format
order (batch and channel entries 1) or 3; ``pads`` takes ``[front, back, top, bottom,
left, right]`` or 3 values (the same on both sides). Padding is SAME, VALID or EXPLICIT
as for the 2-D ops (``ge.ops.nn``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import AttrError
from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, Shape, is_static_dim, num_elements
from ge.ops.elementwise import FLOATS
from ge.ops.nn_window import (
    Window,
    compute_dtype,
    correlate,
    onnx_pads,
    plan_axis,
    window_counts,
    window_view,
)
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal

__all__ = ["onnx_window", "to_channels_last", "from_channels_last", "window_output_dims"]

_LAYOUTS_3D = ("NDHWC", "NCDHW")
_PADDINGS = ("SAME", "VALID", "EXPLICIT")
_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


# -- layouts and window attributes ------------------------------------------------------

def to_channels_last(x: np.ndarray, channels_first: bool) -> np.ndarray:
    """``x`` in its compute precision as ``[N, *spatial, C]``."""
    wide = x.astype(compute_dtype(x.dtype), copy=False)
    return np.moveaxis(wide, 1, -1) if channels_first else wide


def from_channels_last(y: np.ndarray, channels_first: bool, dtype: np.dtype) -> np.ndarray:
    """``[N, *spatial, C]`` back to the data's layout and dtype."""
    if channels_first:
        y = np.moveaxis(y, -1, 1)
    return np.ascontiguousarray(y).astype(dtype, copy=False)


def _spatial_values(values: Optional[Sequence[int]], channels_first: bool, rank: int,
                    name: str) -> tuple[int, ...]:
    """Per-spatial-axis values from ``rank`` values or ``rank + 2`` in data_format order."""
    if values is None:
        return (1,) * rank
    if len(values) == rank:
        return tuple(values)
    if len(values) != rank + 2:
        raise ValueError(f"{name} {list(values)} needs {rank} or {rank + 2} values")
    spatial = list(range(2, rank + 2)) if channels_first else list(range(1, rank + 1))
    if [values[i] for i in range(rank + 2) if i not in spatial] != [1, 1]:
        raise ValueError(f"{name} {list(values)} must be 1 on the batch and channel axes")
    return tuple(values[i] for i in spatial)


def _resolve_3d(attrs: dict[str, Any], ceil_mode: bool = False) -> Window:
    channels_first = attrs["data_format"] == "NCDHW"
    pads = attrs.get("pads")
    padding = attrs["padding"] or ("EXPLICIT" if pads is not None else "VALID")
    if padding == "EXPLICIT" and pads is None:
        raise ValueError("padding EXPLICIT needs the 'pads' attribute")
    if pads is None:
        full: tuple[int, ...] = (0,) * 6
    elif len(pads) == 6:
        full = tuple(pads)
    elif len(pads) == 3:
        full = tuple(p for p in pads for _ in range(2))
    else:
        raise ValueError(f"pads {list(pads)} needs 6 values (begin and end per axis) or 3")
    return Window(_spatial_values(attrs.get("strides"), channels_first, 3, "strides"),
                  _spatial_values(attrs.get("dilations"), channels_first, 3, "dilations"),
                  padding, full, ceil_mode)


def window_output_dims(ctx: InferenceContext, window: Window, sizes: Sequence[Dim],
                       kernel: Sequence[Dim]) -> list[Dim]:
    """The output length of each spatial axis; an unknown size or kernel stays unknown."""
    dims: list[Dim] = []
    for axis, (size, k) in enumerate(zip(sizes, kernel)):
        stride = window.strides[axis]
        if not (is_static_dim(size) and isinstance(size, int)):
            dims.append(size if window.padding == "SAME" and stride == 1 else -1)
        elif not (is_static_dim(k) and isinstance(k, int)):
            dims.append(-1)
        else:
            try:
                dims.append(plan_axis(window, axis, size, k).output)
            except ValueError as error:
                raise ctx.fail(f"spatial axis {axis}: {error}") from None
    return dims


def _window_attrs_3d() -> list[Attr]:
    return [
        Attr("strides", AttrType.INTS, None, doc="5 values in data_format order or 3"),
        Attr("dilations", AttrType.INTS, None, doc="5 values in data_format order or 3"),
        Attr("padding", AttrType.STRING, None, choices=_PADDINGS),
        Attr("pads", AttrType.INTS, None, doc="[front, back, top, bottom, left, right] or 3"),
        Attr("data_format", AttrType.STRING, "NDHWC", choices=_LAYOUTS_3D),
    ]


def _split_layout(shape: Shape, channels_first: bool) -> tuple[Dim, Dim, list[Dim]]:
    """``(N, C, spatial)`` of a shape in either layout."""
    if channels_first:
        return shape[0], shape[1], list(shape[2:])
    return shape[0], shape[-1], list(shape[1:-1])


def _join_layout(n: Dim, c: Dim, spatial: Sequence[Dim], channels_first: bool
                 ) -> tuple[Dim, ...]:
    return (n, c, *spatial) if channels_first else (n, *spatial, c)


def _window_or_fail(ctx: InferenceContext, ceil_mode: bool = False) -> Window:
    try:
        return _resolve_3d(ctx.attrs, ceil_mode)
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None


# -- Conv3D -----------------------------------------------------------------------------

def _filter_3d(attrs: dict[str, Any]) -> str:
    chosen = attrs.get("filter_format")
    return chosen or ("OIDHW" if attrs["data_format"] == "NCDHW" else "DHWIO")


def _kernel_io(shape: Shape, filter_format: str) -> tuple[list[Dim], Dim, Dim]:
    """``(kernel, Cin/groups, Cout)`` of a 3-D filter shape."""
    if filter_format == "OIDHW":
        return list(shape[2:]), shape[1], shape[0]
    return list(shape[:3]), shape[3], shape[4]


def _infer_conv3d(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    dtype = ctx.require_same_dtype(0, 1, 2)
    ctx.require_rank(0, 5)
    ctx.require_rank(1, 5)
    channels_first = ctx.attr("data_format") == "NCDHW"
    window = _window_or_fail(ctx)
    n, channels, sizes = _split_layout(ctx.shape(0), channels_first)
    kernel, per_group, cout = _kernel_io(ctx.shape(1), _filter_3d(ctx.attrs))
    groups = ctx.attr("groups")
    if is_static_dim(channels) and is_static_dim(per_group) and per_group * groups != channels:
        raise ctx.fail(f"input has {channels} channels; the filter {list(ctx.shape(1))} "
                       f"expects {per_group} per group x {groups} groups")
    if ctx.has_input(2):
        ctx.require_rank(2, 1)
        if not dims_equal(ctx.shape(2)[0], cout):
            raise ctx.fail(f"bias has {ctx.shape(2)[0]} elements; the filter has {cout} "
                           f"output channels")
    out = window_output_dims(ctx, window, sizes, kernel)
    return [TensorDesc(_join_layout(n, cout, out, channels_first), dtype)]


def _conv3d_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    kernel, per_group, _ = _kernel_io(ctx.shape(1), _filter_3d(ctx.attrs))
    out = num_elements(outputs[0].shape)
    return Cost(2 * out * num_elements((*kernel, per_group)),
                out * outputs[0].dtype.itemsize)


@register_op(
    "Conv3D",
    inputs=["input", "filter", Input("bias", optional=True, doc="1-D, Cout")],
    attrs=_window_attrs_3d() + [
        Attr("groups", AttrType.INT, 1, check=lambda g: None if g >= 1 else "must be >= 1"),
        Attr("filter_format", AttrType.STRING, None, choices=("DHWIO", "OIDHW"),
             doc="default DHWIO for NDHWC data, OIDHW for NCDHW data"),
    ],
    infer=_infer_conv3d, cost=_conv3d_cost)
def conv3d_kernel(x: np.ndarray, weights: np.ndarray, bias: Optional[np.ndarray] = None,
                  **attrs: Any) -> np.ndarray:
    """3-D cross-correlation of ``input`` with ``filter`` (plus ``bias``), as TensorFlow's
    Conv3D and PyTorch's conv3d: strides, dilations, SAME/VALID/explicit padding, groups."""
    channels_first = attrs["data_format"] == "NCDHW"
    dhwio = weights.transpose(2, 3, 4, 1, 0) if _filter_3d(attrs) == "OIDHW" else weights
    result = correlate(to_channels_last(x, channels_first), dhwio, _resolve_3d(attrs),
                       attrs["groups"], bias)
    return from_channels_last(result, channels_first, x.dtype)


# -- MaxPool3D and AvgPool3D ------------------------------------------------------------

_MAX_POOL_TYPES = FLOATS + (DataType.DT_INT8, DataType.DT_UINT8)


def _infer_pool3d(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, _MAX_POOL_TYPES if ctx.schema.op_type == "MaxPool3D" else FLOATS)
    ctx.require_rank(0, 5)
    channels_first = ctx.attr("data_format") == "NCDHW"
    try:
        kernel = _spatial_values(ctx.attr("ksize"), channels_first, 3, "ksize")
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None
    window = _window_or_fail(ctx, ctx.attr("ceil_mode"))
    n, channels, sizes = _split_layout(ctx.shape(0), channels_first)
    out = window_output_dims(ctx, window, sizes, kernel)
    return [TensorDesc(_join_layout(n, channels, out, channels_first), ctx.dtype(0))]


def _pool3d_attrs(extra: Sequence[Attr] = ()) -> list[Attr]:
    return [Attr("ksize", AttrType.INTS, REQUIRED, doc="5 values in data_format order or 3"),
            *_window_attrs_3d(), Attr("ceil_mode", AttrType.BOOL, False), *extra]


def _pool3d_windows(x: np.ndarray, attrs: dict[str, Any], fill: float
                    ) -> tuple[np.ndarray, Window, tuple[int, ...], bool]:
    channels_first = attrs["data_format"] == "NCDHW"
    kernel = _spatial_values(attrs["ksize"], channels_first, 3, "ksize")
    window = _resolve_3d(attrs, attrs["ceil_mode"])
    data = to_channels_last(x, channels_first)
    return window_view(data, window, kernel, fill), window, kernel, channels_first


_POOL_AXES = (4, 5, 6)  # the kernel axes of a [N, Do, Ho, Wo, kd, kh, kw, C] window view


@register_op("MaxPool3D", inputs=["input"], attrs=_pool3d_attrs(), infer=_infer_pool3d,
             cost=flops_per_output(8))
def max_pool3d_kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """The maximum over each 3-D window; padding cells are -inf and never win."""
    windows, _, _, channels_first = _pool3d_windows(x, attrs, -np.inf)
    return from_channels_last(windows.max(axis=_POOL_AXES), channels_first, x.dtype)


@register_op("AvgPool3D", inputs=["input"],
             attrs=_pool3d_attrs([Attr("count_include_pad", AttrType.BOOL, False)]),
             infer=_infer_pool3d, cost=flops_per_output(9))
def avg_pool3d_kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """The mean over each 3-D window; padding counts in the divisor only with
    ``count_include_pad`` (a ceil-mode overhang never counts)."""
    windows, window, kernel, channels_first = _pool3d_windows(x, attrs, 0.0)
    sizes = x.shape[2:] if channels_first else x.shape[1:-1]
    counts = window_counts(window, kernel, sizes, attrs["count_include_pad"], windows.dtype)
    return from_channels_last(windows.sum(axis=_POOL_AXES) / counts, channels_first, x.dtype)


# -- ONNX-style windows: LpPool ---------------------------------------------------------

def onnx_window(attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int],
                ceil_mode: bool = False) -> Window:
    """A ``Window`` from ONNX attributes (auto_pad, pads, strides, dilations)."""
    rank = len(kernel)
    strides = tuple(attrs.get("strides") or (1,) * rank)
    dilations = tuple(attrs.get("dilations") or (1,) * rank)
    pads = onnx_pads(attrs.get("auto_pad") or "NOTSET", sizes, kernel, strides, dilations,
                     attrs.get("pads") or ())
    paired = tuple(p for axis in range(rank) for p in (pads[axis], pads[rank + axis]))
    return Window(strides, dilations, "EXPLICIT", paired, ceil_mode)


def onnx_window_attrs() -> list[Attr]:
    """ONNX's window attributes (auto_pad, pads, strides, dilations)."""
    return [Attr("auto_pad", AttrType.STRING, "NOTSET", choices=_AUTO_PADS),
            Attr("pads", AttrType.INTS, None, doc="[x1_begin, x2_begin, ..., x1_end, ...]"),
            Attr("strides", AttrType.INTS, None), Attr("dilations", AttrType.INTS, None)]


def infer_onnx_window(ctx: InferenceContext, kernel: Sequence[Dim], ceil_mode: bool = False
                      ) -> list[Dim]:
    """Output spatial dims of an ONNX-style window op over input 0 ([N, C, *spatial])."""
    sizes = list(ctx.shape(0)[2:])
    rank = len(sizes)
    for name in ("strides", "dilations"):
        if ctx.attr(name) is not None and len(ctx.attr(name)) != rank:
            raise ctx.fail(f"{name} {ctx.attr(name)} needs {rank} values")
    if ctx.attr("pads") is not None and len(ctx.attr("pads")) != 2 * rank:
        raise ctx.fail(f"pads {ctx.attr('pads')} needs {2 * rank} values")
    if ctx.attr("auto_pad") in ("SAME_UPPER", "SAME_LOWER"):
        strides = ctx.attr("strides") or [1] * rank
        return [-(-s // st) if is_static_dim(s) and isinstance(s, int) else -1
                for s, st in zip(sizes, strides)]
    static = [s if isinstance(s, int) and s >= 0 else 1 for s in sizes]
    window = onnx_window(ctx.attrs, static, [k if isinstance(k, int) else 1 for k in kernel],
                         ceil_mode)
    return window_output_dims(ctx, window, sizes, kernel)


def _infer_lp_pool(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    shape = ctx.shape(0)
    kernel = ctx.attr("kernel_shape")
    if len(shape) != len(kernel) + 2:
        raise ctx.fail(f"kernel_shape {kernel} does not fit input shape {list(shape)}")
    out = infer_onnx_window(ctx, kernel, bool(ctx.attr("ceil_mode")))
    return [TensorDesc((shape[0], shape[1], *out), ctx.dtype(0))]


@register_op("LpPool", inputs=["X"],
             attrs=[Attr("kernel_shape", AttrType.INTS, REQUIRED), *onnx_window_attrs(),
                    Attr("ceil_mode", AttrType.INT, 0, choices=(0, 1)),
                    Attr("p", AttrType.INT, 2, check=lambda p: None if p >= 1 else "p >= 1")],
             infer=_infer_lp_pool, cost=flops_per_output(8))
def lp_pool_kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """ONNX LpPool over [N, C, *spatial]: y = (sum |x|^p over each window) ^ (1/p), padding
    cells zero."""
    kernel = attrs["kernel_shape"]
    window = onnx_window(attrs, x.shape[2:], kernel, bool(attrs["ceil_mode"]))
    windows = window_view(to_channels_last(x, True), window, kernel, 0.0)
    axes = tuple(range(1 + len(kernel), 1 + 2 * len(kernel)))
    p = attrs["p"]
    total = np.sum(np.abs(windows) ** p, axis=axes)
    return from_channels_last(total ** (1.0 / p), True, x.dtype)


