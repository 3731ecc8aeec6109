"""Convolutions and pooling on torch's CPU kernels.

``Conv2D`` and ``FusedConv2D`` run as oneDNN's fused convolution
(``mkldnn::_convolution_pointwise``): the filter is packed once per input shape into
the blocked format the kernel reads (packing at bind time for a shape not yet seen
would pick a format the run-time kernel does not use, and every call would reorder the
filter again); the bias, the residual add and the activation run inside the kernel as
post-ops. NHWC activations are handed over as channels-last NCHW views (no copy), and
oneDNN answers channels-last, which is NHWC again. A 1x1 convolution over few pixels
(``SMALL_POINTWISE_ROWS``: the late stages of MobileNet-style models at small batch)
runs as one matrix product ``[pixels, C_in] @ [C_in, C_out]`` on the NHWC data instead,
bias, residual and activation applied on the product: oneDNN's set-up costs more than
such a product. Asymmetric padding (TensorFlow's
SAME with an odd total) pads the input first.

Pooling (``MaxPool``, ``AvgPool``) runs torch's channels-last kernels on NHWC data
where they are fast, and separable passes of shifted views elsewhere (NCHW data,
stride-1 and non-overlapping maxima): a max or sum along the rows, then along the
columns, ``kh + kw`` elementwise passes in all. Both families
return memory torch allocated (oneDNN has no ``out=`` form): their outputs are planned
outside the arena. ``GlobalAveragePool`` and ONNX's ``ConvTranspose`` (torch's full
transposed convolution, cropped or padded as ONNX's geometry says) write into the arena.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.engines.torch._base import (
    Binding,
    array,
    const_array,
    const_tensor,
    float32_node,
    is_const,
    rank,
    register,
    tensor,
)
from ge.ir import Format, Node
from ge.ops.nn import resolve_window
from ge.ops.nn_window import Window, plan_axis

__all__: list[str] = []

#: FusedConv2D's activations as oneDNN post-ops: (name, scalars) from the node's attributes
_POST_OPS = {
    "": lambda attrs: ("none", []),
    "Relu": lambda attrs: ("relu", []),
    "Relu6": lambda attrs: ("hardtanh", [0.0, 6.0]),
    "Clip": lambda attrs: ("hardtanh", [float(attrs["clip_min"]), float(attrs["clip_max"])]),
    "LeakyRelu": lambda attrs: ("leaky_relu", [float(attrs["alpha"])]),
    "Sigmoid": lambda attrs: ("sigmoid", []),
    "Tanh": lambda attrs: ("tanh", []),
    "HardSwish": lambda attrs: ("hardswish", []),
    "Swish": lambda attrs: ("swish", []),
}


#: a 1x1 convolution over at most this many pixels (batch x height x width), of at most
#: ``SMALL_POINTWISE_MACS`` multiply-adds, runs as a matrix product: there oneDNN's
#: per-call set-up (about 30 us) outweighs its faster kernel
SMALL_POINTWISE_ROWS = 1024
SMALL_POINTWISE_MACS = 1 << 23


def _filter_oihw(node: Node) -> Optional[np.ndarray]:
    weights = const_array(node, 1)
    if weights is None or weights.ndim != 4:
        return None
    layout = node.attrs["data_format"]
    chosen = node.attrs.get("filter_format") or ("OIHW" if layout is Format.NCHW else "HWIO")
    return weights if chosen == "OIHW" else weights.transpose(3, 2, 0, 1)


def _check_conv(node: Node) -> bool:
    if not float32_node(node, (0,)) or rank(node, 0) != 4:
        return False
    if node.attrs["data_format"] not in (Format.NHWC, Format.NCHW):
        return False
    if not is_const(node, 1) or rank(node, 1) != 4 or (
            len(node.inputs) > 2 and node.inputs[2] is not None and not is_const(node, 2)):
        return False
    activation = node.attrs.get("activation", "")
    if activation not in _POST_OPS:
        return False
    if activation == "Clip" and (node.attrs.get("clip_min") is None
                                 or node.attrs.get("clip_max") is None):
        return False
    try:
        resolve_window(node.attrs)
    except ValueError:
        return False
    return True


class _Packed:
    """The filter packed for one input shape, with the padding that shape needs."""

    __slots__ = ("weight", "padding", "pre_pad")

    def __init__(self, weight: Any, padding: list[int], pre_pad: Optional[list[int]]) -> None:
        self.weight = weight
        self.padding = padding
        self.pre_pad = pre_pad  # torch F.pad order: [left, right, top, bottom]


def _paddings(window: Window, height: int, width: int, kh: int, kw: int
              ) -> tuple[list[int], Optional[list[int]]]:
    """(symmetric padding for the kernel, padding to apply first or None)."""
    rows, cols = plan_axis(window, 0, height, kh), plan_axis(window, 1, width, kw)
    if rows.pad_begin == rows.pad_end and cols.pad_begin == cols.pad_end:
        return [rows.pad_begin, cols.pad_begin], None
    return [0, 0], [cols.pad_begin, cols.pad_end, rows.pad_begin, rows.pad_end]


def _bind_conv(node: Node) -> Binding:
    import torch

    oihw = _filter_oihw(node)
    assert oihw is not None
    bias_array = const_array(node, 2)
    bias = None if bias_array is None else const_tensor(bias_array)
    window = resolve_window(node.attrs)
    strides, dilations = list(window.strides), list(window.dilations)
    groups = int(node.attrs["groups"])
    kh, kw = int(oihw.shape[2]), int(oihw.shape[3])
    post_op, scalars = _POST_OPS[node.attrs.get("activation", "")](node.attrs)
    has_residual = len(node.inputs) > 3 and node.inputs[3] is not None
    # with a residual, oneDNN fuses only ReLU after the sum: others run in place after
    fused_after_sum = post_op if post_op in ("none", "relu") else "none"
    after = None if fused_after_sum == post_op else _in_place(post_op, scalars)
    nhwc = node.attrs["data_format"] is Format.NHWC
    packed: dict[tuple[int, ...], _Packed] = {}
    convolution = torch.ops.mkldnn._convolution_pointwise.default
    with_residual = torch.ops.mkldnn._convolution_pointwise.binary
    pad = torch.nn.functional.pad
    # a 1x1 convolution over NHWC data is the product [pixels, C_in] @ [C_in, C_out]
    as_product = (nhwc and kh == kw == 1 and groups == 1 and strides == [1, 1]
                  and (window.padding != "EXPLICIT" or not any(window.pads)))
    activate = None if post_op == "none" else _in_place(post_op, scalars)
    product_weight: list[Any] = []  # [C_in, C_out], made at the first small input only
    macs_per_row = int(oihw.shape[0]) * int(oihw.shape[1])

    def product(x2: Any, residual: Any) -> Any:
        if not product_weight:
            product_weight.append(const_tensor(np.ascontiguousarray(oihw[:, :, 0, 0].T)))
        weight_kn = product_weight[0]
        if residual is not None:
            y = torch.addmm(residual, x2, weight_kn)
            if bias is not None:
                y.add_(bias)
        elif bias is not None:
            y = torch.addmm(bias, x2, weight_kn)
        else:
            y = torch.mm(x2, weight_kn)
        if activate is not None:
            activate(y)
        return y

    def pack(x: Any) -> _Packed:
        shape = tuple(x.shape)
        padding, pre_pad = _paddings(window, shape[2], shape[3], kh, kw)
        if pre_pad is not None:
            shape = (shape[0], shape[1], shape[2] + pre_pad[2] + pre_pad[3],
                     shape[3] + pre_pad[0] + pre_pad[1])
        # the dense OIHW filter is made for the packing only: the constant's own bytes
        # stay the one plain copy
        weight_packed = torch._C._nn.mkldnn_reorder_conv2d_weight(
            const_tensor(oihw).to_mkldnn(), padding, strides, dilations,
            groups, list(shape))  # type: ignore[call-arg]
        entry = _Packed(weight_packed, padding, pre_pad)
        packed[tuple(x.shape)] = entry
        return entry

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        source = inputs[0]
        assert source is not None
        x = tensor(source)
        rows = source.shape[0] * source.shape[1] * source.shape[2]
        if as_product and rows <= SMALL_POINTWISE_ROWS \
                and rows * macs_per_row <= SMALL_POINTWISE_MACS:
            residual = inputs[3] if has_residual else None
            y = product(x.view(rows, source.shape[3]),
                        None if residual is None else tensor(residual).view(rows, -1))
            return [array(y.view(source.shape[0], source.shape[1], source.shape[2], -1))]
        if nhwc:
            x = x.permute(0, 3, 1, 2)
        entry = packed.get(tuple(x.shape)) or pack(x)
        if entry.pre_pad is not None:
            x = pad(x, entry.pre_pad)
            if nhwc:
                x = x.contiguous(memory_format=torch.channels_last)
        if has_residual:
            residual = inputs[3]
            assert residual is not None
            other = tensor(residual)
            if nhwc:
                other = other.permute(0, 3, 1, 2)
            y = with_residual(x, other, entry.weight, bias, entry.padding, strides, dilations,
                              groups, "add", None,
                              None if fused_after_sum == "none" else fused_after_sum, [], None)
            if after is not None:
                after(y)
        else:
            y = convolution(x, entry.weight, bias, entry.padding, strides, dilations, groups,
                            post_op, scalars, None)
        if nhwc:
            y = y.permute(0, 2, 3, 1)
            if not y.is_contiguous():
                y = y.contiguous()
        elif not y.is_contiguous():
            y = y.contiguous()
        return [array(y)]

    return Binding(kernel, None, allocates=True)


def _in_place(post_op: str, scalars: list[float]) -> Any:
    """The activation ``post_op`` applied in place on a torch tensor."""
    import torch

    functional = torch.nn.functional
    if post_op == "relu":
        return torch.relu_
    if post_op == "hardtanh":
        low, high = scalars
        return lambda t: t.clamp_(low, high)
    if post_op == "leaky_relu":
        return lambda t: functional.leaky_relu_(t, scalars[0])
    if post_op == "sigmoid":
        return torch.sigmoid_
    if post_op == "tanh":
        return torch.tanh_
    if post_op == "hardswish":
        return lambda t: functional.hardswish(t, inplace=True)
    if post_op == "swish":
        return lambda t: functional.silu(t, inplace=True)
    raise ValueError(f"no in-place form of {post_op}")


register(("Conv2D", "FusedConv2D"), _check_conv, _bind_conv, allocates=True)


# -- pooling ----------------------------------------------------------------------------

def _ksize(node: Node) -> tuple[int, int]:
    values = list(node.attrs["ksize"])
    if len(values) == 2:
        return int(values[0]), int(values[1])
    if node.attrs["data_format"] is Format.NCHW:
        return int(values[2]), int(values[3])
    return int(values[1]), int(values[2])


def _check_pool(node: Node) -> bool:
    if not float32_node(node) or rank(node, 0) != 4:
        return False
    if node.attrs["data_format"] not in (Format.NHWC, Format.NCHW):
        return False
    try:
        window = resolve_window(node.attrs, node.attrs.get("ceil_mode", False))
        _ksize(node)
    except (ValueError, KeyError):
        return False
    if node.op_type == "AvgPool" and window.dilations != (1, 1):
        return False
    return True


def _taps(x: Any, axis: int, first: int, count: int, stride: int) -> Any:
    """The view of ``x`` along ``axis`` at ``first``, ``first + stride``, ... (``count``)."""
    view = x.narrow(axis, first, (count - 1) * stride + 1)
    if stride == 1:
        return view
    index = [slice(None)] * x.dim()
    index[axis] = slice(None, None, stride)
    return view[tuple(index)]


def _tap_range(tap: int, begin: int, size: int, stride: int, dilation: int, count: int
               ) -> tuple[int, int]:
    """The outputs [low, high) whose window reads tap ``tap`` inside the data: output i
    reads position i * stride + tap * dilation - begin."""
    shift = tap * dilation - begin
    low = max(0, -(shift // stride)) if shift < 0 else 0
    high = min(count, (size - 1 - shift) // stride + 1) if size - 1 - shift >= 0 else 0
    return low, max(low, high)


def _window_reduce(x: Any, axis: int, kernel: int, stride: int, dilation: int, count: int,
                   begin: int, is_max: bool) -> Any:
    """Max or sum along ``axis`` over windows of ``kernel`` taps, padded by ``begin``
    before the data (and as needed after): shifted views of ``x``, each over the
    outputs it reaches, so no padded copy is made. Positions only padding reaches stay
    -inf (max) or 0 (sum)."""
    import torch

    combine = torch.maximum if is_max else torch.add
    size = x.shape[axis]
    ranges = [(tap,) + _tap_range(tap, begin, size, stride, dilation, count)
              for tap in range(kernel)]
    full = [tap for tap, low, high in ranges if low == 0 and high == count]
    partial = [(tap, low, high) for tap, low, high in ranges
               if high > low and not (low == 0 and high == count)]

    def view(tap: int, low: int, high: int) -> Any:
        return _taps(x, axis, low * stride + tap * dilation - begin, high - low, stride)

    if len(full) >= 2:
        result = combine(view(full[0], 0, count), view(full[1], 0, count))
        rest = full[2:]
    elif full:
        result = view(full[0], 0, count).clone()
        rest = []
    else:
        shape = list(x.shape)
        shape[axis] = count
        result = x.new_full(shape, float("-inf") if is_max else 0.0)
        rest = []
    for tap in rest:
        combine(result, view(tap, 0, count), out=result)
    for tap, low, high in partial:
        part = result.narrow(axis, low, high - low)
        combine(part, view(tap, low, high), out=part)
    return result


class _PoolPlan:
    """How one input shape is pooled: padding (for the separable path, the padding
    before the rows and the columns), and for the separable path the output lengths and
    the divisor of an average."""

    __slots__ = ("padding", "pre_pad", "separable", "rows", "cols", "divisor")

    def __init__(self, padding: list[int], pre_pad: Optional[list[int]], separable: bool,
                 rows: int, cols: int, divisor: Any) -> None:
        self.padding, self.pre_pad, self.separable = padding, pre_pad, separable
        self.rows, self.cols, self.divisor = rows, cols, divisor


def _tap_counts(output: int, size: int, kernel: int, stride: int, dilation: int,
                begin: int, end: int, include_pad: bool) -> np.ndarray:
    """Per output position, how many taps of its window an average divides by."""
    position = (np.arange(output)[:, None] * stride + np.arange(kernel)[None, :] * dilation
                - begin)
    low, high = (-begin, size + end) if include_pad else (0, size)
    return ((position >= low) & (position < high)).sum(axis=1)


#: an NHWC max pool of at least this many input elements whose windows do not overlap
#: runs as separable passes; below it torch's one channels-last call costs less
SEPARABLE_POOL_MIN_ELEMENTS = 1 << 18


def _separable_pool(nhwc: bool, is_max: bool, kernel: tuple[int, int], strides: list[int],
                    elements: int) -> bool:
    """Whether a pool runs as separable passes of shifted views (rows, then columns:
    kh + kw elementwise passes, not kh * kw) rather than torch's pooling kernel.

    NCHW always: torch's NCHW pooling kernels are up to 10x slower than its
    channels-last ones (a 5x5 max pool over 128x40x40: 6 ms against 0.5 ms), and laying
    the data out channels-last first costs as much again. NHWC: torch's channels-last
    average is fast; its maximum loses to the passes at stride 1 with windows of 3x3 or
    more (a 5x5 over 128x40x40: 0.26 against 0.49 ms), and on large inputs when windows
    do not overlap."""
    if not nhwc:
        return True
    if not is_max:
        return False
    if strides == [1, 1]:
        return kernel[0] * kernel[1] >= 9
    return strides == list(kernel) and elements >= SEPARABLE_POOL_MIN_ELEMENTS


def _bind_pool(node: Node) -> Binding:
    import torch

    functional = torch.nn.functional
    window = resolve_window(node.attrs, node.attrs.get("ceil_mode", False))
    kh, kw = _ksize(node)
    strides, dilations = list(window.strides), list(window.dilations)
    nhwc = node.attrs["data_format"] is Format.NHWC
    is_max = node.op_type == "MaxPool"
    include_pad = bool(node.attrs.get("count_include_pad", False))
    channels_last = torch.channels_last
    row_axis, col_axis = (1, 2) if nhwc else (2, 3)
    plans: dict[tuple[int, ...], _PoolPlan] = {}

    def plan(shape: tuple[int, ...]) -> _PoolPlan:
        height, width = shape[row_axis], shape[col_axis]
        rows = plan_axis(window, 0, height, kh)
        cols = plan_axis(window, 1, width, kw)
        if _separable_pool(nhwc, is_max, (kh, kw), strides, int(np.prod(shape))):
            divisor = None
            if not is_max:
                counts = np.outer(
                    _tap_counts(rows.output, height, kh, strides[0], dilations[0],
                                rows.pad_begin, rows.pad_end, include_pad),
                    _tap_counts(cols.output, width, kw, strides[1], dilations[1],
                                cols.pad_begin, cols.pad_end, include_pad))
                divisor = torch.from_numpy((1.0 / np.maximum(counts, 1)).astype(np.float32))
                if nhwc:
                    divisor = divisor[:, :, None]
            chosen = _PoolPlan([rows.pad_begin, cols.pad_begin], None, True,
                               rows.output, cols.output, divisor)
        else:
            symmetric = (rows.pad_begin == rows.pad_end and cols.pad_begin == cols.pad_end
                         and not rows.overhang and not cols.overhang
                         and 2 * rows.pad_begin <= kh and 2 * cols.pad_begin <= kw)
            if symmetric:
                chosen = _PoolPlan([rows.pad_begin, cols.pad_begin], None, False, 0, 0, None)
            else:
                chosen = _PoolPlan([0, 0], [cols.pad_begin, cols.pad_end + cols.overhang,
                                            rows.pad_begin, rows.pad_end + rows.overhang],
                                   False, 0, 0, None)
        plans[shape] = chosen
        return chosen

    fill = float("-inf") if is_max else 0.0

    def pooled_in_passes(x: Any, chosen: _PoolPlan) -> Any:
        top, left = chosen.padding
        # rows first: along the outer axis the shifted views are whole contiguous rows,
        # and a stride shrinks the data before the strided pass along the inner one
        x = _window_reduce(x, row_axis, kh, strides[0], dilations[0], chosen.rows, top, is_max)
        y = _window_reduce(x, col_axis, kw, strides[1], dilations[1], chosen.cols, left,
                           is_max)
        if chosen.divisor is not None:
            y.mul_(chosen.divisor)
        return y

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        source = inputs[0]
        assert source is not None
        x = tensor(source)
        chosen = plans.get(tuple(x.shape)) or plan(tuple(x.shape))
        if chosen.separable:
            return [array(pooled_in_passes(x, chosen).contiguous())]
        x = x.permute(0, 3, 1, 2) if nhwc else x.contiguous(memory_format=channels_last)
        if chosen.pre_pad is not None:
            x = functional.pad(x, chosen.pre_pad, value=fill)
            x = x.contiguous(memory_format=channels_last)
        if is_max:
            y = functional.max_pool2d(x, (kh, kw), strides, chosen.padding, dilations)
        else:
            y = functional.avg_pool2d(x, (kh, kw), strides, chosen.padding,
                                      count_include_pad=include_pad)
        y = y.permute(0, 2, 3, 1) if nhwc else y
        return [array(y.contiguous())]

    return Binding(kernel, None, allocates=True)


def _check_avg_pool(node: Node) -> bool:
    """Only padding the kernel itself takes: padding applied first would count in every
    divisor, and a ceil-mode overhang never counts."""
    if not _check_pool(node) or node.attrs.get("ceil_mode", False):
        return False
    window = resolve_window(node.attrs)
    if window.padding == "VALID":
        return True
    if window.padding != "EXPLICIT":
        return False
    top, bottom, left, right = window.pads
    kh, kw = _ksize(node)
    return top == bottom and left == right and 2 * top <= kh and 2 * left <= kw


register(("MaxPool",), _check_pool, _bind_pool, allocates=True)
register(("AvgPool",), _check_avg_pool, _bind_pool, allocates=True)


def _check_global_pool(node: Node) -> bool:
    return (float32_node(node) and rank(node, 0) == 4
            and node.attrs["data_format"] in (Format.NHWC, Format.NCHW))


def _bind_global_pool(node: Node) -> Binding:
    import torch

    axes = (1, 2) if node.attrs["data_format"] is Format.NHWC else (2, 3)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        source = inputs[0]
        assert source is not None
        torch.mean(tensor(source), axes, keepdim=True, out=tensor(outs[0]))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        source = inputs[0]
        assert source is not None
        return [array(torch.mean(tensor(source), axes, keepdim=True))]

    return Binding(kernel, writer)


register(("GlobalAveragePool",), _check_global_pool, _bind_global_pool)


# -- transposed convolution --------------------------------------------------------------

def _check_conv_transpose(node: Node) -> bool:
    if not float32_node(node) or rank(node, 0) != 4 or not is_const(node, 1):
        return False
    if len(node.inputs) > 2 and node.inputs[2] is not None and not is_const(node, 2):
        return False
    kernel = node.attrs.get("kernel_shape")
    weights = node.inputs[1]
    return weights is not None and (kernel is None or list(kernel) == list(weights.shape[2:]))


def _bind_conv_transpose(node: Node) -> Binding:
    """ONNX's ConvTranspose: torch's full transposed convolution, then the cropping (or
    zero padding) ONNX's pads, output padding or output shape ask for, then the bias;
    or, for windows that tile the output (stride = kernel, no cropping), one matrix
    product and a strided copy."""
    import torch

    from ge.ops.nn_transpose import transpose_geometry

    weights = const_array(node, 1)
    assert weights is not None
    weight = const_tensor(weights)
    bias_array = const_array(node, 2)
    bias = None if bias_array is None else const_tensor(bias_array).reshape(1, -1, 1, 1)
    attrs = dict(node.attrs)
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    groups = int(attrs["group"])
    kernel = [int(k) for k in weights.shape[2:]]
    crops: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}
    transposed = torch.nn.functional.conv_transpose2d
    pad = torch.nn.functional.pad

    def geometry(shape: tuple[int, ...]) -> tuple[list[int], list[int]]:
        sizes = list(shape[2:])
        outputs, begins = transpose_geometry(attrs, sizes, kernel)
        full = [s * (n - 1) + d * (k - 1) + 1
                for n, k, s, d in zip(sizes, kernel, strides, dilations)]
        # F.pad order: last axis first; negative entries crop
        widths = [-begins[1], outputs[1] + begins[1] - full[1],
                  -begins[0], outputs[0] + begins[0] - full[0]]
        crops[shape] = (widths, outputs)
        return widths, outputs

    # windows that tile the output without overlap (stride = kernel, the 2x up-sampling
    # of U-Nets and detectors' necks): one product [C_out * kh * kw, C_in] @ [C_in, H * W]
    # gives every output pixel once; a strided copy puts the kh x kw blocks in place,
    # adding the bias on the way
    tiled = strides == kernel and dilations == [1, 1] and groups == 1
    cout, (kh, kw) = int(weights.shape[1]), kernel
    weight_rows = const_tensor(np.ascontiguousarray(
        weights.reshape(weights.shape[0], -1).T)) if tiled else None
    bias_6d = None if bias is None else bias.reshape(1, -1, 1, 1, 1, 1)

    def tiles_into(source: np.ndarray, out: Any) -> None:
        n, _, height, width = source.shape
        x = tensor(source).reshape(n, -1, height * width)
        assert weight_rows is not None
        y = torch.matmul(weight_rows, x)  # [n, C_out * kh * kw, H * W]
        blocks = y.view(n, cout, kh, kw, height, width).permute(0, 1, 4, 2, 5, 3)
        target = out.view(n, cout, height, kh, width, kw)
        if bias_6d is None:
            target.copy_(blocks)
        else:
            torch.add(blocks, bias_6d, out=target)

    def compute(source: np.ndarray) -> Any:
        widths, _ = crops.get(source.shape) or geometry(source.shape)
        y = transposed(tensor(source), weight, None, strides, 0, 0, groups, dilations)
        return pad(y, widths) if any(widths) else y

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        source = inputs[0]
        assert source is not None
        out = tensor(outs[0])
        widths, _ = crops.get(source.shape) or geometry(source.shape)
        if tiled and not any(widths):
            tiles_into(source, out)
            return
        out.copy_(compute(source))
        if bias is not None:
            out += bias

    def kernel_fn(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        source = inputs[0]
        assert source is not None
        _, outputs = crops.get(source.shape) or geometry(source.shape)
        out = np.empty((source.shape[0], cout * groups, *outputs), np.float32)
        writer(inputs, [out])
        return [out]

    return Binding(kernel_fn, writer)


register(("ConvTranspose",), _check_conv_transpose, _bind_conv_transpose)
