"""Writers of convolutions and pools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers._base import (
    _FLOATS,
    _WIDE_FLOATS,
    Inputs,
    Outs,
    Unary,
    _array,
    _dtype,
    _writes,
)
from ge.engines.numpy.writers.elementwise import _channel_column, _hard_swish, _leaky_relu, _sigmoid
from ge.ir import Format, Node
from ge.ops.nn import resolve_window
from ge.ops.nn_window import Window, plan_axis, window_counts, window_view

# -- convolutions -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Conv:
    """A convolution's bound attributes."""

    nchw: bool
    oihw: bool
    window: Window
    groups: int


def _conv_spec(attrs: dict[str, Any]) -> Optional[_Conv]:
    layout = attrs["data_format"]
    if layout not in (Format.NCHW, Format.NHWC):
        return None
    filter_format = attrs.get("filter_format") or ("OIHW" if layout is Format.NCHW else "HWIO")
    try:
        window = resolve_window(attrs)
    except ValueError:
        return None
    return _Conv(layout is Format.NCHW, filter_format == "OIHW", window, attrs["groups"])


def _convolve(x: np.ndarray, weights: np.ndarray, out: np.ndarray, spec: _Conv) -> None:
    """The cross-correlation of x with the filter (no bias) written into out."""
    if spec.nchw:
        oihw = weights if spec.oihw else weights.transpose(3, 2, 0, 1)
        windows = _nchw_windows(x, spec.window, oihw.shape[2:])
        if spec.groups > 1 and oihw.shape[1] == 1:
            _depthwise_nchw(windows, oihw, out, spec.groups)
        else:
            _grouped_nchw(windows, oihw, out, spec.groups)
        return
    hwio = weights.transpose(2, 3, 1, 0) if spec.oihw else weights
    windows = window_view(x, spec.window, hwio.shape[:2], 0.0)
    if spec.groups > 1 and hwio.shape[2] == 1:
        _depthwise_nhwc(windows, hwio, out, spec.groups)
    else:
        _grouped_nhwc(windows, hwio, out, spec.groups)


def _nchw_windows(x: np.ndarray, window: Window, kernel: Sequence[int], fill: float = 0.0
                  ) -> np.ndarray:
    """A read-only ``[N, C, kh, kw, Ho, Wo]`` view of the windows over NCHW ``x`` (padded
    with ``fill``), the im2col order of an OIHW filter."""
    plans = [plan_axis(window, axis, x.shape[2 + axis], kernel[axis]) for axis in (0, 1)]
    widths = [(0, 0), (0, 0)] + [(p.pad_begin, p.pad_end + p.overhang) for p in plans]
    if any(any(pair) for pair in widths):
        x = np.pad(x, widths, constant_values=fill)
    steps = x.strides
    shape = (x.shape[0], x.shape[1], kernel[0], kernel[1], plans[0].output, plans[1].output)
    strides = (steps[0], steps[1], steps[2] * window.dilations[0],
               steps[3] * window.dilations[1], steps[2] * window.strides[0],
               steps[3] * window.strides[1])
    return as_strided(x, shape, strides, writeable=False)


def _grouped_nchw(windows: np.ndarray, oihw: np.ndarray, out: np.ndarray, groups: int) -> None:
    """Per sample and group, [Cout/groups, taps] @ [taps, pixels] written into that block
    of out (one sample's im2col matrix at a time stays in cache); the taps in the
    reference's (kh, kw, C) order."""
    n, channels, kh, kw, out_h, out_w = windows.shape
    cout = oihw.shape[0]
    per_group, per_out = channels // groups, cout // groups
    taps = per_group * kh * kw
    ordered = windows.transpose(0, 2, 3, 1, 4, 5)  # [N, kh, kw, C, Ho, Wo]
    matrices = [oihw[g * per_out:(g + 1) * per_out].transpose(0, 2, 3, 1).reshape(per_out, taps)
                for g in range(groups)]
    for sample in range(n):
        for group, matrix in enumerate(matrices):
            columns = ordered[sample, :, :, group * per_group:(group + 1) * per_group]
            block = out[sample, group * per_out:(group + 1) * per_out]
            np.matmul(matrix, columns.reshape(taps, out_h * out_w),
                      out=block.reshape(per_out, out_h * out_w))


def _depthwise_nchw(windows: np.ndarray, oihw: np.ndarray, out: np.ndarray,
                    groups: int) -> None:
    """One multiply-add per tap, as the reference: out starts at zero and each tap's
    products (in one reused scratch array) are added to it."""
    n, _, kh, kw, out_h, out_w = windows.shape
    per_out = oihw.shape[0] // groups
    taps = oihw.reshape(groups, per_out, kh, kw, 1, 1)
    target = out.reshape(n, groups, per_out, out_h, out_w)
    target[...] = 0
    product = np.empty(target.shape, out.dtype)
    for row in range(kh):
        for column in range(kw):
            np.multiply(windows[:, :, None, row, column], taps[:, :, row, column], out=product)
            np.add(target, product, out=target)


#: the largest im2col matrix an NHWC convolution builds at once (whole samples; at least
#: one): a batch is convolved a few samples at a time, so the patches stay a transient
#: of this size rather than of the batch's
PATCH_BYTES = 8 << 20


def _grouped_nhwc(windows: np.ndarray, hwio: np.ndarray, out: np.ndarray, groups: int) -> None:
    """One product of the im2col matrix and the filter per group, [pixels, taps] @
    [taps, Cout/groups], written straight into out's columns of that group, for as many
    samples at a time as fit in ``PATCH_BYTES`` of patches."""
    n, out_h, out_w = windows.shape[:3]
    kh, kw, per_group, cout = hwio.shape
    per_out = cout // groups
    split = hwio.reshape(kh, kw, per_group, groups, per_out)
    taps = kh * kw * per_group
    per_sample = out_h * out_w * taps * out.dtype.itemsize
    chunk = max(1, PATCH_BYTES // max(per_sample, 1))
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        rows = (stop - start) * out_h * out_w
        part = windows[start:stop]
        matrix_out = out[start:stop].reshape(rows, cout)
        for group in range(groups):
            channels = slice(group * per_group, (group + 1) * per_group)
            columns = part if groups == 1 else part[..., channels]
            np.matmul(columns.reshape(rows, taps),
                      split[:, :, :, group, :].reshape(taps, per_out),
                      out=matrix_out[:, group * per_out:(group + 1) * per_out])


#: output bytes of one block of rows a depthwise convolution finishes before the next:
#: its taps' passes then stay in cache instead of streaming the whole output each time
DEPTHWISE_BLOCK_BYTES = 128 << 10


def _depthwise_nhwc(windows: np.ndarray, hwio: np.ndarray, out: np.ndarray,
                    groups: int) -> None:
    """One multiply-add per tap, as the reference: each output element starts at zero
    and the taps' products are added to it in (row, column) order. Done a block of output
    rows at a time (``DEPTHWISE_BLOCK_BYTES``), so the taps' passes run in cache."""
    n, out_h, out_w = windows.shape[:3]
    kh, kw, _, cout = hwio.shape
    per_out = cout // groups
    taps = hwio.reshape(kh, kw, groups, per_out)
    target = out.reshape(n, out_h, out_w, groups, per_out)
    row_bytes = out_w * cout * out.dtype.itemsize
    rows = max(1, min(out_h, DEPTHWISE_BLOCK_BYTES // max(row_bytes, 1)))
    product = np.empty((rows, out_w, groups, per_out), out.dtype)
    for sample in range(n):
        for start in range(0, out_h, rows):
            stop = min(out_h, start + rows)
            block = target[sample, start:stop]
            scratch = product[:stop - start]
            block[...] = 0
            for row in range(kh):
                for column in range(kw):
                    np.multiply(windows[sample, start:stop, :, row, column, :, None],
                                taps[row, column], out=scratch)
                    np.add(block, scratch, out=block)


def _add_channels(out: np.ndarray, values: np.ndarray, nchw: bool) -> None:
    """out += a per-channel 1-D array."""
    layout = Format.NCHW if nchw else Format.NHWC
    np.add(out, _channel_column(values.astype(out.dtype, copy=False), layout, out.ndim),
           out=out)


def _convolve_and_add_bias(inputs: Inputs, out: np.ndarray, spec: _Conv,
                           bias_index: int) -> None:
    """The product of inputs 0 and 1 into out, then the bias (input ``bias_index``, when
    present) added in place."""
    _convolve(_array(inputs, 0), _array(inputs, 1), out, spec)
    bias = inputs[bias_index] if len(inputs) > bias_index else None
    if bias is not None:
        _add_channels(out, bias, spec.nchw)


def _conv_factory_checks(node: Node) -> Optional[_Conv]:
    """The node's convolution attributes when its dtypes are covered (float32 and float64,
    which the reference computes in)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    return _conv_spec(node.attrs)


@_writes("Conv2D")
def _conv2d(node: Node) -> Optional[WritingKernel]:
    """Conv2D: the product into out, then the bias added in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None

    def run(inputs: Inputs, outs: Outs) -> None:
        _convolve_and_add_bias(inputs, outs[0], spec, 2)

    return run


def _conv_activation(attrs: dict[str, Any]) -> Optional[Callable[[np.ndarray], None]]:
    """FusedConv2D's activation as an in-place pass, None when there is none or this
    module has no pass for it."""
    activation = attrs["activation"]
    low, high = {"Relu": (0.0, None), "Relu6": (0.0, 6.0),
                 "Clip": (attrs["clip_min"], attrs["clip_max"])}.get(activation, (None, None))
    if activation in ("Relu", "Relu6", "Clip"):
        return lambda y: _clip_in_place(y, low, high)
    unary: Optional[Unary] = {"LeakyRelu": _leaky_relu(attrs["alpha"]), "Sigmoid": _sigmoid,
                              "Tanh": lambda x, out: np.tanh(x, out=out),
                              "HardSwish": _hard_swish}.get(activation)
    if activation == "Swish":  # SiLU: y * sigmoid(y), the sigmoid in a temporary
        def swish(y: np.ndarray) -> None:
            gate = np.empty_like(y)
            _sigmoid(y, gate)
            np.multiply(y, gate, out=y)

        return swish
    if unary is None:
        return None
    apply = unary
    return lambda y: apply(y, y)


def _clip_in_place(y: np.ndarray, low: Optional[float], high: Optional[float]) -> None:
    if low is not None:
        np.maximum(y, y.dtype.type(low), out=y)
    if high is not None:
        np.minimum(y, y.dtype.type(high), out=y)


@_writes("FusedConv2D")
def _fused_conv2d(node: Node) -> Optional[WritingKernel]:
    """activation(Conv2D + bias + residual): the product into out, the rest in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None
    activation = _conv_activation(node.attrs)
    if activation is None and node.attrs["activation"]:
        return None  # an activation without an in-place pass here: the reference kernel

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _convolve_and_add_bias(inputs, out, spec, 2)
        residual = inputs[3] if len(inputs) > 3 else None
        if residual is not None:
            np.add(out, residual, out=out)
        if activation is not None:
            activation(out)

    return run


def _batch_norm_into(x: np.ndarray, parameters: Sequence[np.ndarray], epsilon: float,
                     layout: Format, out: np.ndarray) -> None:
    """(x - mean) * (scale / sqrt(variance + epsilon)) + offset, per channel, into out."""
    scale, offset, mean, variance = (
        _channel_column(p.astype(x.dtype, copy=False), layout, x.ndim) for p in parameters)
    factor = scale / np.sqrt(variance + x.dtype.type(epsilon))
    np.subtract(x, mean, out=out)
    np.multiply(out, factor, out=out)
    np.add(out, offset, out=out)


@_writes("ConvBNReLU")
def _conv_bn_relu(node: Node) -> Optional[WritingKernel]:
    """Relu(FusedBatchNorm(Conv2D + bias)): the product into out, the rest in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None
    epsilon = node.attrs["epsilon"]
    layout = Format.NCHW if spec.nchw else Format.NHWC

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _convolve_and_add_bias(inputs, out, spec, 6)
        parameters = [_array(inputs, i) for i in range(2, 6)]
        _batch_norm_into(out, parameters, epsilon, layout, out)
        np.maximum(out, out.dtype.type(0), out=out)

    return run


@_writes("FusedBatchNorm")
def _fused_batch_norm(node: Node) -> Optional[WritingKernel]:
    """The inference batch norm into out (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    epsilon, layout = node.attrs["epsilon"], node.attrs["data_format"]

    def run(inputs: Inputs, outs: Outs) -> None:
        parameters = [_array(inputs, i) for i in range(1, 5)]
        _batch_norm_into(_array(inputs, 0), parameters, epsilon, layout, outs[0])

    return run


# -- pools ------------------------------------------------------------------------------

def _pair(values: Sequence[int], nchw: bool) -> tuple[int, int]:
    """The two spatial entries of a 2- or 4-value window attribute."""
    if len(values) == 2:
        return values[0], values[1]
    return (values[2], values[3]) if nchw else (values[1], values[2])


@dataclass(frozen=True)
class _Pool:
    nchw: bool
    kernel: tuple[int, int]
    window: Window


def _pool_spec(node: Node, dtypes: frozenset[np.dtype]) -> Optional[_Pool]:
    attrs = node.attrs
    if _dtype(node) not in dtypes or attrs["data_format"] not in (Format.NCHW, Format.NHWC):
        return None
    nchw = attrs["data_format"] is Format.NCHW
    try:
        window = resolve_window(attrs, attrs["ceil_mode"])
    except ValueError:
        return None
    return _Pool(nchw, _pair(attrs["ksize"], nchw), window)


def _reduce_taps(ufunc: Callable[..., Any], windows: np.ndarray, out: np.ndarray) -> None:
    """out = ufunc over the taps of ``[N, C, kh, kw, Ho, Wo]`` windows, one pass per tap
    (NCHW windows reduce slowly along their middle axes)."""
    kh, kw = windows.shape[2:4]
    np.copyto(out, windows[:, :, 0, 0])
    for tap in range(1, kh * kw):
        ufunc(out, windows[:, :, tap // kw, tap % kw], out=out)


@_writes("MaxPool")
def _max_pool(node: Node) -> Optional[WritingKernel]:
    """The maximum over each window (floats; -inf padding), into out."""
    spec = _pool_spec(node, _FLOATS)
    if spec is None:
        return None

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        if spec.nchw:
            _reduce_taps(np.maximum, _nchw_windows(x, spec.window, spec.kernel, -np.inf),
                         outs[0])
        else:
            np.max(window_view(x, spec.window, spec.kernel, -np.inf), axis=(3, 4), out=outs[0])

    return run


@_writes("AvgPool")
def _avg_pool(node: Node) -> Optional[WritingKernel]:
    """Each window's sum divided by its count (float32/64), as the reference: NHWC
    straight into out; NCHW in an NHWC scratch array then transposed into out (a
    summation order of its own would change the last bit)."""
    spec = _pool_spec(node, _WIDE_FLOATS)
    if spec is None:
        return None
    include_pad = node.attrs["count_include_pad"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        data = x.transpose(0, 2, 3, 1) if spec.nchw else x
        windows = window_view(data, spec.window, spec.kernel, 0.0)
        target = np.sum(windows, axis=(3, 4)) if spec.nchw else outs[0]
        if not spec.nchw:
            np.sum(windows, axis=(3, 4), out=target)
        counts = window_counts(spec.window, spec.kernel, data.shape[1:3], include_pad,
                               x.dtype)
        np.divide(target, counts, out=target)
        if spec.nchw:
            np.copyto(outs[0], target.transpose(0, 3, 1, 2))

    return run


def _spatial_axes(layout: Format, rank: int) -> tuple[int, ...]:
    return tuple(range(2, rank)) if layout is Format.NCHW else tuple(range(1, rank - 1))


@_writes("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node) -> Optional[WritingKernel]:
    """The mean (float32/64) or maximum over the spatial axes, reduced into out."""
    average = node.op_type == "GlobalAveragePool"
    if _dtype(node) not in (_WIDE_FLOATS if average else _FLOATS):
        return None
    layout = node.attrs["data_format"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        axes = _spatial_axes(layout, x.ndim)
        if average:
            np.mean(x, axis=axes, keepdims=True, out=outs[0])
        else:
            np.max(x, axis=axes, keepdims=True, out=outs[0])

    return run


