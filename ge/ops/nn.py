"""Neural-network ops: Conv2D, MaxPool, MaxPoolWithArgmax, AvgPool, GlobalAveragePool,
GlobalMaxPool, FusedBatchNorm, LayerNormalization, Softmax, LogSoftmax and Hardmax.

Layouts follow the seed (section 4.2): activations are NHWC unless ``data_format`` says
NCHW, and a convolution filter is HWIO ``[kh, kw, Cin/groups, Cout]`` for NHWC data or
OIHW ``[Cout, Cin/groups, kh, kw]`` for NCHW data unless ``filter_format`` overrides it.
Window attributes (``strides``, ``dilations``, ``ksize``) take four values in
``data_format`` order (``[1, s_h, s_w, 1]`` for NHWC, the batch and channel entries 1)
or two values ``[s_h, s_w]``.

Padding is ``"SAME"`` (TensorFlow: ``out = ceil(in / stride)``, the odd cell of padding
at the bottom/right), ``"VALID"`` (no padding) or ``"EXPLICIT"`` with ``pads`` =
``[top, bottom, left, right]`` (or ``[pad_h, pad_w]``, the same on both sides). When
``padding`` is not set it is ``"EXPLICIT"`` if ``pads`` is given and ``"VALID"`` otherwise.

Reference kernels compute float16 and bfloat16 in float32 and return the input's dtype.
Convolutions go through BLAS on an im2col view (``as_strided``), never a loop over pixels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import AttrError
from ge.ir import DataType, Format, TensorDesc
from ge.ir.tensor import Dim, Shape, is_static_dim, num_elements
from ge.ops.core import channel_axis
from ge.ops.elementwise import FLOATS
from ge.ops.nn_window import (
    AxisPlan,
    Window,
    conv_output_size,
    correlate,
    effective_kernel,
    plan_axis,
    same_padding,
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
    LayoutRole,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import broadcast_shapes, dims_equal, normalize_axis

#: a 2-D convolution's layout: activations in input 0, the filter in input 1
CONVOLUTION_LAYOUT = LayoutRole((0,), 1, ("strides", "dilations"), convolution=True)
#: a pool's layout: its window attributes hold 4 values in data_format order
POOL_LAYOUT = LayoutRole((0,), None, ("ksize", "strides", "dilations"))
#: an op reading channels on the data_format's channel axis, nothing else
CHANNEL_LAYOUT = LayoutRole()

__all__ = ["CONVOLUTION_LAYOUT", "POOL_LAYOUT", "CHANNEL_LAYOUT", "effective_kernel",
           "same_padding", "conv_output_size", "AxisPlan", "plan_axis", "Window", "resolve_window"]

PADDINGS = ("SAME", "VALID", "EXPLICIT")
_LAYOUTS = (Format.NHWC, Format.NCHW)


# -- window attributes ------------------------------------------------------------------

def _pair(values: Optional[Sequence[int]], layout: Format, name: str) -> tuple[int, int]:
    if values is None:
        return 1, 1
    if len(values) == 2:
        return values[0], values[1]
    spatial = (2, 3) if layout is Format.NCHW else (1, 2)
    others = [values[i] for i in range(4) if i not in spatial]
    if others != [1, 1]:
        raise ValueError(f"{name} {list(values)} must be 1 on the batch and channel axes of "
                         f"{layout.value} data")
    return values[spatial[0]], values[spatial[1]]


def resolve_window(attrs: dict[str, Any], ceil_mode: bool = False) -> Window:
    """A ``Window`` from an op's attributes; ``ValueError`` when they do not fit together."""
    layout = attrs["data_format"]
    pads = attrs.get("pads")
    padding = attrs["padding"] or ("EXPLICIT" if pads is not None else "VALID")
    if padding == "EXPLICIT" and pads is None:
        raise ValueError("padding EXPLICIT needs the 'pads' attribute")
    if padding != "EXPLICIT" and pads is not None and any(pads):
        raise ValueError(f"pads {list(pads)} are only used with EXPLICIT padding, not {padding}")
    full = (0, 0, 0, 0) if pads is None else tuple(pads) if len(pads) == 4 \
        else (pads[0], pads[0], pads[1], pads[1])
    return Window(_pair(attrs.get("strides"), layout, "strides"),
                  _pair(attrs.get("dilations"), layout, "dilations"), padding, full, ceil_mode)


def _window_or_fail(ctx: InferenceContext, ceil_mode: bool = False) -> Window:
    try:
        return resolve_window(ctx.attrs, ceil_mode)
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None


def _output_dim(ctx: InferenceContext, window: Window, axis: int, size: Dim, kernel: Dim) -> Dim:
    """The inferred output length of one spatial axis; unknown stays unknown."""
    known = isinstance(size, int) and size >= 0
    if window.padding == "SAME":
        if isinstance(size, int) and known:
            return -(-size // window.strides[axis])
        return size if window.strides[axis] == 1 else -1
    if not (isinstance(size, int) and known and isinstance(kernel, int) and kernel >= 0):
        return -1
    try:
        return plan_axis(window, axis, size, kernel).output
    except ValueError as error:
        raise ctx.fail(f"{'height' if axis == 0 else 'width'}: {error}") from None


def _check_count(what: str) -> Callable[[Sequence[int]], Optional[str]]:
    def check(values: Sequence[int]) -> Optional[str]:
        if len(values) not in (2, 4):
            return f"expects 2 or 4 values, got {len(values)}"
        if any(v < 1 for v in values):
            return f"{what} must be >= 1"
        return None

    return check


def _check_pads(values: Sequence[int]) -> Optional[str]:
    if len(values) not in (2, 4):
        return f"expects [top, bottom, left, right] or [pad_h, pad_w], got {len(values)} values"
    return "pads must be >= 0" if any(v < 0 for v in values) else None


def _window_attrs() -> list[Attr]:
    return [
        Attr("strides", AttrType.INTS, None, check=_check_count("strides"),
             doc="4 values in data_format order or [s_h, s_w]; default 1"),
        Attr("padding", AttrType.STRING, None, choices=PADDINGS,
             doc="SAME, VALID or EXPLICIT; unset: EXPLICIT if pads is given, else VALID"),
        Attr("pads", AttrType.INTS, None, check=_check_pads,
             doc="[top, bottom, left, right] or [pad_h, pad_w]"),
        Attr("data_format", AttrType.FORMAT, Format.NHWC, choices=_LAYOUTS),
    ]


# -- layouts ----------------------------------------------------------------------------

def _spatial(shape: Shape, layout: Format) -> tuple[Dim, Dim, Dim, Dim]:
    """``(N, C, H, W)`` of a 4-D shape in ``layout``."""
    if layout is Format.NCHW:
        return shape[0], shape[1], shape[2], shape[3]
    return shape[0], shape[3], shape[1], shape[2]


def _layout_shape(n: Dim, c: Dim, h: Dim, w: Dim, layout: Format) -> tuple[Dim, ...]:
    return (n, c, h, w) if layout is Format.NCHW else (n, h, w, c)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _to_nhwc(x: np.ndarray, layout: Format) -> np.ndarray:
    wide = x.astype(_compute_dtype(x.dtype), copy=False)
    return wide.transpose(0, 2, 3, 1) if layout is Format.NCHW else wide


def _from_nhwc(y: np.ndarray, layout: Format, dtype: np.dtype) -> np.ndarray:
    if layout is Format.NCHW:
        y = y.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(y).astype(dtype, copy=False)


def _windows(x: np.ndarray, window: Window, kernel: tuple[int, int], fill: float
             ) -> np.ndarray:
    """A read-only ``[N, Ho, Wo, kh, kw, C]`` view of the windows over NHWC ``x``."""
    return window_view(x, window, kernel, fill)


# -- Conv2D -----------------------------------------------------------------------------

def _filter_format(attrs: dict[str, Any]) -> str:
    chosen = attrs.get("filter_format")
    return chosen or ("OIHW" if attrs["data_format"] is Format.NCHW else "HWIO")


def _hwio_dims(shape: Shape, filter_format: str) -> tuple[Dim, Dim, Dim, Dim]:
    """``(kh, kw, Cin/groups, Cout)`` of a filter shape."""
    if filter_format == "OIHW":
        return shape[2], shape[3], shape[1], shape[0]
    return shape[0], shape[1], shape[2], shape[3]


def _check_conv_channels(ctx: InferenceContext, channels: Dim, per_group: Dim, cout: Dim
                         ) -> Dim:
    groups = ctx.attr("groups")
    if is_static_dim(channels) and is_static_dim(per_group) and per_group * groups != channels:
        raise ctx.fail(f"input has {channels} channels; the filter {list(ctx.shape(1))} expects "
                       f"{per_group} per group x {groups} groups = {per_group * groups}")
    if is_static_dim(cout) and cout % groups:
        raise ctx.fail(f"the filter's {cout} output channels do not divide into {groups} groups")
    if ctx.has_input(2):
        ctx.require_rank(2, 1)
        length = ctx.shape(2)[0]
        if not dims_equal(length, cout):
            raise ctx.fail(f"bias has {length} elements; the filter has {cout} output channels")
        if not is_static_dim(cout):
            cout = length
    return cout


def _infer_conv2d(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    dtype = ctx.require_same_dtype(0, 1, 2)
    ctx.require_rank(0, 4)
    ctx.require_rank(1, 4)
    layout = ctx.attr("data_format")
    window = _window_or_fail(ctx)
    n, channels, height, width = _spatial(ctx.shape(0), layout)
    kh, kw, per_group, cout = _hwio_dims(ctx.shape(1), _filter_format(ctx.attrs))
    cout = _check_conv_channels(ctx, channels, per_group, cout)
    out_h = _output_dim(ctx, window, 0, height, kh)
    out_w = _output_dim(ctx, window, 1, width, kw)
    return [TensorDesc(_layout_shape(n, cout, out_h, out_w, layout), dtype, layout)]


def _conv_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    kh, kw, per_group, _ = _hwio_dims(ctx.shape(1), _filter_format(ctx.attrs))
    out_elements = num_elements(outputs[0].shape)
    taps = num_elements((kh, kw, per_group))
    flops = 2 * out_elements * taps + (out_elements if ctx.has_input(2) else 0)
    data = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, data + out_elements * outputs[0].dtype.itemsize)


@register_op(
    "Conv2D",
    inputs=["input", "filter", Input("bias", optional=True, doc="1-D, Cout")],
    attrs=_window_attrs() + [
        Attr("dilations", AttrType.INTS, None, check=_check_count("dilations"),
             doc="4 values in data_format order or [d_h, d_w]; default 1"),
        Attr("groups", AttrType.INT, 1, check=lambda g: None if g >= 1 else "must be >= 1",
             doc="channel groups; groups == Cin is a depthwise convolution"),
        Attr("filter_format", AttrType.STRING, None, choices=("HWIO", "OIHW"),
             doc="default HWIO for NHWC data, OIHW for NCHW data"),
    ],
    infer=_infer_conv2d,
    cost=_conv_cost,
    layout=CONVOLUTION_LAYOUT,
)
def conv2d_kernel(x: np.ndarray, weights: np.ndarray, bias: Optional[np.ndarray] = None,
                  **attrs: Any) -> np.ndarray:
    """2-D cross-correlation of ``input`` with ``filter`` (plus ``bias``), as TensorFlow's
    Conv2D and PyTorch's conv2d: strides, dilations, SAME/VALID/explicit padding, groups."""
    layout = attrs["data_format"]
    hwio = weights.transpose(2, 3, 1, 0) if _filter_format(attrs) == "OIHW" else weights
    result = correlate(_to_nhwc(x, layout), hwio, resolve_window(attrs), attrs["groups"], bias)
    return _from_nhwc(result, layout, x.dtype)


# -- pooling ----------------------------------------------------------------------------

_MAX_POOL_TYPES = FLOATS + (DataType.DT_INT8, DataType.DT_UINT8)


def _infer_pool(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS if ctx.schema.op_type == "AvgPool" else _MAX_POOL_TYPES)
    ctx.require_rank(0, 4)
    layout = ctx.attr("data_format")
    try:
        kernel = _pair(ctx.attr("ksize"), layout, "ksize")
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None
    window = _window_or_fail(ctx, ctx.attr("ceil_mode"))
    n, channels, height, width = _spatial(ctx.shape(0), layout)
    out_h = _output_dim(ctx, window, 0, height, kernel[0])
    out_w = _output_dim(ctx, window, 1, width, kernel[1])
    return [TensorDesc(_layout_shape(n, channels, out_h, out_w, layout), ctx.dtype(0), layout)]


def _pool_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    ksize = ctx.attr("ksize")
    taps = int(np.prod(ksize))
    return flops_per_output(taps + (1 if ctx.schema.op_type == "AvgPool" else 0))(ctx, outputs)


def _pool_attrs(extra: Sequence[Attr] = ()) -> list[Attr]:
    return [Attr("ksize", AttrType.INTS, REQUIRED, check=_check_count("ksize"),
                 doc="4 values in data_format order or [k_h, k_w]")] + _window_attrs() + [
        Attr("dilations", AttrType.INTS, None, check=_check_count("dilations"),
             doc="4 values in data_format order or [d_h, d_w]; default 1"),
        Attr("ceil_mode", AttrType.BOOL, False,
             doc="round the output size up (ONNX); ignored for SAME padding"),
        *extra]


def _pool_windows(x: np.ndarray, attrs: dict[str, Any], fill: float
                  ) -> tuple[np.ndarray, Window, tuple[int, int]]:
    nhwc = _to_nhwc(x, attrs["data_format"])
    kernel = _pair(attrs["ksize"], attrs["data_format"], "ksize")
    window = resolve_window(attrs, attrs["ceil_mode"])
    return _windows(nhwc, window, kernel, fill), window, kernel


@register_op("MaxPool", inputs=["input"], attrs=_pool_attrs(), infer=_infer_pool,
             cost=_pool_cost, layout=POOL_LAYOUT)
def max_pool_kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """The maximum over each window; padding cells are -inf and never win."""
    windows, _, _ = _pool_windows(x, attrs, -np.inf)
    return _from_nhwc(windows.max(axis=(3, 4)), attrs["data_format"], x.dtype)


def _infer_pool_with_argmax(ctx: InferenceContext) -> Sequence[TensorDesc]:
    (output,) = _infer_pool(ctx)
    return [output, TensorDesc(output.shape, DataType.DT_INT64, output.format)]


def _flat_argmax(windows: np.ndarray, window: Window, x_shape: tuple[int, ...],
                 attrs: dict[str, Any]) -> np.ndarray:
    """The flat input index (in the data's own layout) of each window's maximum."""
    n, out_h, out_w, kh, kw, channels = windows.shape
    taps = np.argmax(windows.reshape(n, out_h, out_w, kh * kw, channels), axis=3)
    rows_plan = plan_axis(window, 0, x_shape[0], kh)
    cols_plan = plan_axis(window, 1, x_shape[1], kw)
    rows = (np.arange(out_h)[:, None, None] * window.strides[0] - rows_plan.pad_begin
            + (taps // kw) * window.dilations[0])
    cols = (np.arange(out_w)[None, :, None] * window.strides[1] - cols_plan.pad_begin
            + (taps % kw) * window.dilations[1])
    height, width = x_shape
    batch = np.arange(n)[:, None, None, None] if attrs["include_batch_in_index"] else 0
    channel = np.arange(channels)
    pixel = rows + cols * height if attrs["storage_order"] else rows * width + cols
    if attrs["data_format"] is Format.NCHW:
        flat = (batch * channels + channel) * (height * width) + pixel
    else:
        flat = (batch * (height * width) + pixel) * channels + channel
    return flat.astype(np.int64)


@register_op("MaxPoolWithArgmax", inputs=["input"], outputs=("output", "argmax"),
             attrs=_pool_attrs([Attr("include_batch_in_index", AttrType.BOOL, False,
                                     doc="count whole samples in the flat index (ONNX)"),
                                Attr("storage_order", AttrType.INT, 0, choices=(0, 1),
                                     doc="1: pixels count column-major (ONNX)")]),
             infer=_infer_pool_with_argmax, cost=_pool_cost)
def max_pool_with_argmax_kernel(x: np.ndarray, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    """MaxPool that also gives where each maximum came from: its index in the input
    flattened in data_format order (the first maximum of a window on ties; padding never
    wins), with the batch counted only if ``include_batch_in_index``."""
    windows, window, _ = _pool_windows(x, attrs, -np.inf)
    layout = attrs["data_format"]
    size = (x.shape[2], x.shape[3]) if layout is Format.NCHW else (x.shape[1], x.shape[2])
    flat = _flat_argmax(windows, window, size, attrs)
    return (_from_nhwc(windows.max(axis=(3, 4)), layout, x.dtype),
            _from_nhwc(flat, layout, np.dtype(np.int64)))


@register_op("AvgPool", inputs=["input"],
             attrs=_pool_attrs([Attr("count_include_pad", AttrType.BOOL, False,
                                     doc="count padding cells in the divisor")]),
             infer=_infer_pool, cost=_pool_cost, layout=POOL_LAYOUT)
def avg_pool_kernel(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """The mean over each window; padding cells are zero and count in the divisor only
    with ``count_include_pad`` (a ceil-mode overhang never counts)."""
    windows, window, kernel = _pool_windows(x, attrs, 0.0)
    layout = attrs["data_format"]
    size = (x.shape[2], x.shape[3]) if layout is Format.NCHW else (x.shape[1], x.shape[2])
    counts = window_counts(window, kernel, size, attrs["count_include_pad"], windows.dtype)
    return _from_nhwc(windows.sum(axis=(3, 4)) / counts, layout, x.dtype)


# -- GlobalAveragePool ------------------------------------------------------------------

def _spatial_axes(layout: Format, rank: int) -> tuple[int, ...]:
    return tuple(range(2, rank)) if layout is Format.NCHW else tuple(range(1, rank - 1))


def _infer_global_pool(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    shape = ctx.shape(0)
    if len(shape) < 3:
        raise ctx.fail(f"input 'x' must have rank >= 3 (batch, channels, spatial), "
                       f"got shape {list(shape)}")
    layout = ctx.attr("data_format")
    axes = _spatial_axes(layout, len(shape))
    out = tuple(1 if axis in axes else dim for axis, dim in enumerate(shape))
    return [TensorDesc(out, ctx.dtype(0), layout if len(shape) == 4 else Format.ND)]


def _global_pool_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    inputs = num_elements(ctx.shape(0))
    itemsize = ctx.dtype(0).itemsize
    return Cost(inputs, (inputs + num_elements(outputs[0].shape)) * itemsize)


@register_op("GlobalAveragePool", inputs=["x"],
             attrs=[Attr("data_format", AttrType.FORMAT, Format.NCHW, choices=_LAYOUTS,
                         doc="NCHW (ONNX, the default) or NHWC")],
             infer=_infer_global_pool, cost=_global_pool_cost, layout=CHANNEL_LAYOUT)
def global_average_pool_kernel(x: np.ndarray, *, data_format: Format) -> np.ndarray:
    """The mean over every spatial axis, kept as size-1 dimensions ([N,C,1,1] for NCHW)."""
    axes = _spatial_axes(data_format, x.ndim)
    mean = x.astype(_compute_dtype(x.dtype), copy=False).mean(axis=axes, keepdims=True)
    return mean.astype(x.dtype, copy=False)


@register_op("GlobalMaxPool", inputs=["x"],
             attrs=[Attr("data_format", AttrType.FORMAT, Format.NCHW, choices=_LAYOUTS,
                         doc="NCHW (ONNX, the default) or NHWC")],
             infer=_infer_global_pool, cost=_global_pool_cost, layout=CHANNEL_LAYOUT)
def global_max_pool_kernel(x: np.ndarray, *, data_format: Format) -> np.ndarray:
    """The maximum over every spatial axis, kept as size-1 dimensions ([N,C,1,1] for NCHW)."""
    return np.max(x, axis=_spatial_axes(data_format, x.ndim), keepdims=True)


# -- FusedBatchNorm ---------------------------------------------------------------------

def _refuse_training(value: bool) -> Optional[str]:
    if value:
        return ("training mode is not supported: GE's FusedBatchNorm is the inference form, "
                "normalizing with the given mean and variance")
    return None


def _infer_batch_norm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    x = ctx.input(0)
    if x.rank < 2:
        raise ctx.fail(f"input 'x' must have rank >= 2, got shape {list(x.shape)}")
    layout = ctx.attr("data_format")
    channels = x.shape[channel_axis(layout, x.rank)]
    for index in range(1, 5):
        ctx.require_dtypes(index, FLOATS)
        ctx.require_rank(index, 1)
        length = ctx.shape(index)[0]
        if not dims_equal(length, channels):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has {length} elements; "
                           f"x {list(x.shape)} has {channels} channels ({layout.value})")
    return [TensorDesc(x.shape, x.dtype, layout if x.rank == 4 else x.format)]


@register_op(
    "FusedBatchNorm",
    inputs=["x", "scale", "offset", "mean", "variance"],
    attrs=[
        Attr("epsilon", AttrType.FLOAT, 1e-4, doc="added to the variance (TensorFlow's default)"),
        Attr("data_format", AttrType.FORMAT, Format.NHWC, choices=_LAYOUTS,
             doc="channel axis: last for NHWC, 1 for NCHW; rank-2 input is [N, C]"),
        Attr("is_training", AttrType.BOOL, False, check=_refuse_training,
             doc="must be False: only the inference form exists"),
    ],
    infer=_infer_batch_norm,
    layout=CHANNEL_LAYOUT,
    cost=flops_per_output(2),
    traits=(Trait.PURE, Trait.INPLACE),
)
def fused_batch_norm_kernel(x: np.ndarray, scale: np.ndarray, offset: np.ndarray,
                            mean: np.ndarray, variance: np.ndarray, *, epsilon: float,
                            data_format: Format, is_training: bool) -> np.ndarray:
    """y = (x - mean) / sqrt(variance + epsilon) * scale + offset, along the channel axis."""
    compute = _compute_dtype(x.dtype)
    shape = [1] * x.ndim
    shape[channel_axis(data_format, x.ndim)] = -1

    def column(values: np.ndarray) -> np.ndarray:
        return values.astype(compute, copy=False).reshape(shape)

    factor = column(scale) / np.sqrt(column(variance) + compute.type(epsilon))
    result = (x.astype(compute, copy=False) - column(mean)) * factor + column(offset)
    return result.astype(x.dtype, copy=False)


# -- LayerNormalization -----------------------------------------------------------------

def _axis_or_fail(ctx: InferenceContext, rank: int) -> int:
    try:
        return normalize_axis(ctx.attr("axis"), rank)
    except ValueError as error:
        raise AttrError(f"{ctx.schema.op_type} node {ctx.node_name!r}: {error}") from None


def _infer_layer_norm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    dtype = ctx.require_same_dtype(0, 1, 2)
    x = ctx.input(0)
    normalized = x.shape[_axis_or_fail(ctx, x.rank):]
    for index in (1, 2):
        if not ctx.has_input(index):
            continue
        shape = ctx.shape(index)
        merged = broadcast_shapes(normalized, shape)
        if len(shape) > len(normalized) or merged is None \
                or not all(dims_equal(a, b) for a, b in zip(merged, normalized)):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} {list(shape)} does not "
                           f"broadcast to the normalized shape {list(normalized)}")
    return [TensorDesc(x.shape, dtype, x.format)]


@register_op(
    "LayerNormalization",
    inputs=["x", "scale", Input("bias", optional=True)],
    attrs=[Attr("axis", AttrType.INT, -1, doc="normalize over axes [axis, rank)"),
           Attr("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_layer_norm,
    cost=flops_per_output(8),
)
def layer_normalization_kernel(x: np.ndarray, scale: np.ndarray,
                               bias: Optional[np.ndarray] = None, *, axis: int,
                               epsilon: float) -> np.ndarray:
    """ONNX LayerNormalization: y = (x - mean) / sqrt(var + epsilon) * scale + bias, the
    mean and (biased) variance taken over axes [axis, rank)."""
    compute = _compute_dtype(x.dtype)
    wide = x.astype(compute, copy=False)
    axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
    centred = wide - wide.mean(axis=axes, keepdims=True)
    variance = np.mean(centred * centred, axis=axes, keepdims=True)
    result = centred / np.sqrt(variance + compute.type(epsilon)) * scale.astype(compute)
    if bias is not None:
        result = result + bias.astype(compute)
    return result.astype(x.dtype, copy=False)


# -- Softmax and LogSoftmax -------------------------------------------------------------

def _infer_softmax(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    _axis_or_fail(ctx, ctx.input(0).rank)
    return [ctx.input(0)]


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    wide = x.astype(_compute_dtype(x.dtype), copy=False)
    if wide.size == 0:
        return wide
    return wide - wide.max(axis=axis, keepdims=True)


_SOFTMAX_ATTRS = [Attr("axis", AttrType.INT, -1, doc="the axis normalized over")]


@register_op("Softmax", inputs=["logits"], attrs=_SOFTMAX_ATTRS, infer=_infer_softmax,
             cost=flops_per_output(5), traits=(Trait.PURE, Trait.NON_NEGATIVE))
def softmax_kernel(x: np.ndarray, *, axis: int) -> np.ndarray:
    """y = exp(x - max) / sum(exp(x - max)) along ``axis`` (numerically stable)."""
    exps = np.exp(_shifted(x, axis))
    return (exps / exps.sum(axis=axis, keepdims=True)).astype(x.dtype, copy=False)


@register_op("LogSoftmax", inputs=["logits"], attrs=_SOFTMAX_ATTRS, infer=_infer_softmax,
             cost=flops_per_output(5))
def log_softmax_kernel(x: np.ndarray, *, axis: int) -> np.ndarray:
    """y = (x - max) - log(sum(exp(x - max))) along ``axis`` (numerically stable)."""
    shifted = _shifted(x, axis)
    total = np.exp(shifted).sum(axis=axis, keepdims=True)
    return (shifted - np.log(total)).astype(x.dtype, copy=False)


# -- Hardmax ----------------------------------------------------------------------------

@register_op("Hardmax", inputs=["input"], attrs=_SOFTMAX_ATTRS,
             infer=_infer_softmax, cost=flops_per_output(2),
             traits=(Trait.PURE, Trait.IDEMPOTENT, Trait.NON_NEGATIVE))
def hardmax_kernel(x: np.ndarray, *, axis: int) -> np.ndarray:
    """1 where x is the largest along ``axis`` (the first one on ties), 0 elsewhere."""
    result = np.zeros_like(x)
    if x.size:
        winners = np.expand_dims(np.argmax(x, axis=axis), axis)
        np.put_along_axis(result, winners, 1, axis=axis)
    return result
