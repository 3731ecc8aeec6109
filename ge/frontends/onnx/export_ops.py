"""ONNX forms of the registry ops that are not ONNX ops of the same name and attributes.

The seed's and TensorFlow's window ops (``Conv2D``, ``Conv3D``, ``MaxPool``, ``MaxPool3D``,
``AvgPool``, ``AvgPool3D``, ``MaxPoolWithArgmax``) become ONNX's ``Conv``, ``MaxPool`` and
``AveragePool`` on channels-first data: channels-last inputs are transposed in and the
results transposed back, HWIO filters transposed to OIHW, TensorFlow's SAME padding
written as explicit pads (``SAME_UPPER`` where the sizes are not known). ``FusedBatchNorm``
and ``BatchNormalizationTraining`` become ``BatchNormalization``; ``BiasAdd`` an ``Add``;
``MatMul`` with transpose flags a ``Transpose`` and ``MatMul``. ``DynamicQuantizeLSTM`` is
onnxruntime's contrib op of that name (domain ``com.microsoft``).

Where ONNX's op cannot take GE's dtype, or computes in another precision, the op is
written as its exact decomposition into ONNX ops: a float64 convolution (onnxruntime
has no float64 ``Conv``) as tap-wise slices and one ``MatMul``; quantization of float64
data, or in another precision than ONNX's, as ``Div``, ``Round``, ``Add``, ``Clip`` and
``Cast`` in GE's precision (see ``ge.ops.quantize``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np

from ge.errors import UnsupportedOpError
from ge.frontends.onnx.dtypes import to_onnx_dtype
from ge.frontends.onnx.exporter import (
    ExportContext,
    attribute_value,
    exporter,
    is_needed,
    onnx_accepts,
    onnx_attributes,
    onnx_schema,
    output_names,
)
from ge.ir import DataType, Format, Node, Value
from ge.ir.tensor import Dim
from ge.ops.core import channel_axis
from ge.ops.nn import _pair, resolve_window
from ge.ops.nn_nd import _resolve_3d, _spatial_values
from ge.ops.nn_window import Window, plan_axis
from ge.ops.quantize import INTEGER_RANGES

__all__: list[str] = []  # exporters register themselves; nothing here is called directly

_CHANNELS_LAST = (Format.NHWC, "NDHWC")


# -- layouts ----------------------------------------------------------------------------

def _channels_last(node: Node) -> bool:
    return node.attrs.get("data_format") in _CHANNELS_LAST


def _to_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def _to_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _channels_first_input(ctx: ExportContext, node: Node, value: Optional[Value]) -> str:
    """``value`` in channels-first layout (transposed when the node's data is channels-last)."""
    assert value is not None
    name = ctx.name_of(value)
    if not _channels_last(node):
        return name
    return ctx.op("Transpose", [name], f"{node.name}/channels_first", perm=_to_first(value.rank))


def _channels_first_output(ctx: ExportContext, node: Node, index: int = 0
                           ) -> tuple[str, Callable[[], None]]:
    """The name the ONNX op writes output ``index`` to, and a finisher that transposes it
    back for channels-last data."""
    value = node.outputs[index]
    if not _channels_last(node):
        return value.name, lambda: None
    inner = ctx.temp(f"{value.name}/channels_first")
    return inner, lambda: ctx.node("Transpose", [inner], [value.name], perm=_to_last(value.rank))


def _input_names(ctx: ExportContext, node: Node) -> list[str]:
    names = [ctx.name_of(v) for v in node.inputs]
    while names and not names[-1]:
        names.pop()
    return names


def _int64(ctx: ExportContext, values: Any, base: str) -> str:
    return ctx.const(np.asarray(values, np.int64), base)


# -- window geometry --------------------------------------------------------------------

class _Geometry(NamedTuple):
    window: Window
    kernel: tuple[int, ...]
    sizes: list[Dim]  # the spatial sizes of the input, outermost first


def _static(dims: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) and d >= 0 for d in dims)


def _geometry(node: Node, kernel: Sequence[int]) -> _Geometry:
    x = node.inputs[0]
    assert x is not None
    sizes = list(x.shape[1:-1] if _channels_last(node) else x.shape[2:])
    ceil = bool(node.attrs.get("ceil_mode", False))
    window = resolve_window(node.attrs, ceil) if x.rank == 4 else _resolve_3d(node.attrs, ceil)
    return _Geometry(window, tuple(kernel), sizes)


def _pool_kernel(node: Node) -> tuple[int, ...]:
    x = node.inputs[0]
    assert x is not None
    if x.rank == 4:
        layout = Format.NHWC if _channels_last(node) else Format.NCHW
        return _pair(node.attrs["ksize"], layout, "ksize")
    return _spatial_values(node.attrs["ksize"], not _channels_last(node), 3, "ksize")


def _window_attributes(geometry: _Geometry) -> dict[str, Any]:
    """ONNX's strides, dilations and pads; TensorFlow's SAME as explicit pads when the sizes
    are known (``SAME_UPPER`` otherwise: the odd cell goes at the end in both)."""
    window, kernel, sizes = geometry
    attrs: dict[str, Any] = {"strides": list(window.strides)}
    if any(d != 1 for d in window.dilations):
        attrs["dilations"] = list(window.dilations)
    if window.padding != "SAME":
        attrs["pads"] = list(window.pads[0::2]) + list(window.pads[1::2])
    elif _static(sizes):
        plans = [plan_axis(window, axis, int(size), k)
                 for axis, (size, k) in enumerate(zip(sizes, kernel))]
        attrs["pads"] = [p.pad_begin for p in plans] + [p.pad_end for p in plans]
    else:
        attrs["auto_pad"] = "SAME_UPPER"
    return attrs


# -- convolutions -----------------------------------------------------------------------

def _filter_channels_first(node: Node) -> bool:
    chosen = node.attrs.get("filter_format")
    return chosen.startswith("OI") if chosen else not _channels_last(node)


@exporter("Conv2D", "Conv3D")
def _conv(ctx: ExportContext, node: Node) -> None:
    """``Conv`` on channels-first data with an OIHW / OIDHW filter."""
    x, weight, bias = (list(node.inputs) + [None])[:3]
    assert x is not None and weight is not None
    rank = weight.rank
    weight_name = ctx.name_of(weight)
    if _filter_channels_first(node):
        kernel = weight.shape[2:]
    else:
        kernel = weight.shape[:-2]
        weight_name = ctx.op("Transpose", [weight_name], f"{node.name}/filter",
                             perm=[rank - 1, rank - 2, *range(rank - 2)])
    geometry = _geometry(node, [int(k) for k in kernel])
    source = _channels_first_input(ctx, node, x)
    out, finish = _channels_first_output(ctx, node)
    bias_name = ctx.name_of(bias)
    onnx_runs = x.dtype is not DataType.DT_DOUBLE or not _conv_by_taps_fits(node, geometry)
    if not (onnx_accepts("Conv", ctx.opset, 0, x.dtype) and onnx_runs):
        _conv_by_taps(ctx, node, (source, weight_name, bias_name), geometry, out)
    else:
        ctx.node("Conv", [source, weight_name] + ([bias_name] if bias_name else []), [out],
                 node.name, group=node.attrs.get("groups", 1), **_window_attributes(geometry))
    finish()


def _conv_by_taps_fits(node: Node, geometry: _Geometry) -> bool:
    """True when a convolution's sizes are known, as ``_conv_by_taps`` needs."""
    x, y = node.inputs[0], node.outputs[0]
    assert x is not None
    axis = x.rank - 1 if _channels_last(node) else 1
    return _static(geometry.sizes) and _static([x.shape[axis], y.shape[axis]])


def _conv_by_taps(ctx: ExportContext, node: Node, names: tuple[str, str, str],
                  geometry: _Geometry, out: str) -> None:
    """A convolution as ONNX ops every runtime has for every float type: one strided
    ``Slice`` per filter tap of the padded input, stacked to ``[N, C, taps, *out]`` and
    contracted with the filter by one (grouped) ``MatMul``. Needs known sizes."""
    if not _conv_by_taps_fits(node, geometry):
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: this convolution is "
                                 f"written tap by tap, which needs known sizes")
    source, weight, bias = names
    window, kernel, sizes = geometry
    spatial = len(kernel)
    cout = int(node.outputs[0].shape[-1 if _channels_last(node) else 1])
    plans = [plan_axis(window, a, int(s), k) for a, (s, k) in enumerate(zip(sizes, kernel))]
    pads = [0, 0] + [p.pad_begin for p in plans] + [0, 0] + [p.pad_end for p in plans]
    if any(pads):
        source = ctx.op("Pad", [source, _int64(ctx, pads, f"{node.name}/pads")],
                        f"{node.name}/padded")
    axes = _int64(ctx, list(range(2, 2 + spatial)), f"{node.name}/axes")
    steps = _int64(ctx, list(window.strides), f"{node.name}/steps")
    at_taps = _int64(ctx, [2], f"{node.name}/tap_axis")
    taps = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offsets, window.dilations)]
        ends = [s + (p.output - 1) * st + 1 for s, p, st in zip(starts, plans, window.strides)]
        piece = ctx.op("Slice", [source, _int64(ctx, starts, f"{node.name}/starts"),
                                 _int64(ctx, ends, f"{node.name}/ends"), axes, steps],
                       f"{node.name}/tap")
        taps.append(ctx.op("Unsqueeze", [piece, at_taps], f"{node.name}/tap"))
    stacked = ctx.op("Concat", taps, f"{node.name}/taps", axis=2)
    groups = int(node.attrs.get("groups", 1))
    count = int(np.prod([p.output for p in plans]))
    patches = ctx.op("Reshape", [stacked, _int64(ctx, [0, groups, -1, count], "shape")],
                     f"{node.name}/patches")
    filters = ctx.op("Reshape", [weight, _int64(ctx, [groups, cout // groups, -1], "shape")],
                     f"{node.name}/filters")
    product = ctx.op("MatMul", [filters, patches], f"{node.name}/product")
    shape = _int64(ctx, [0, cout] + [p.output for p in plans], f"{node.name}/shape")
    if not bias:
        ctx.node("Reshape", [product, shape], [out], node.name)
        return
    result = ctx.op("Reshape", [product, shape], f"{node.name}/unbiased")
    vector = ctx.op("Reshape", [bias, _int64(ctx, [-1] + [1] * spatial, "shape")],
                    f"{node.name}/bias")
    ctx.node("Add", [result, vector], [out], node.name)


# -- pools ------------------------------------------------------------------------------

def _pool_attributes(node: Node) -> dict[str, Any]:
    geometry = _geometry(node, _pool_kernel(node))
    attrs = _window_attributes(geometry)
    attrs["kernel_shape"] = list(geometry.kernel)
    attrs["ceil_mode"] = int(geometry.window.ceil_mode and geometry.window.padding != "SAME")
    return attrs


@exporter("MaxPool", "MaxPool3D", "AvgPool", "AvgPool3D")
def _pool(ctx: ExportContext, node: Node) -> None:
    """``MaxPool`` / ``AveragePool`` on channels-first data."""
    attrs = _pool_attributes(node)
    onnx_type = "MaxPool"
    if node.op_type.startswith("Avg"):
        onnx_type = "AveragePool"
        attrs["count_include_pad"] = int(bool(node.attrs.get("count_include_pad", False)))
    out, finish = _channels_first_output(ctx, node)
    ctx.node(onnx_type, [_channels_first_input(ctx, node, node.inputs[0])], [out], node.name,
             **attrs)
    finish()


@exporter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: ExportContext, node: Node) -> None:
    """The global pools on channels-first data."""
    out, finish = _channels_first_output(ctx, node)
    ctx.node(node.op_type, [_channels_first_input(ctx, node, node.inputs[0])], [out], node.name)
    finish()


@exporter("MaxPoolWithArgmax")
def _max_pool_with_argmax(ctx: ExportContext, node: Node) -> None:
    """ONNX ``MaxPool`` with its ``Indices``. ONNX counts the batch and flattens NCHW
    (column-major pixels with ``storage_order``); other index forms are computed from
    ONNX's row-major NCHW index by integer arithmetic."""
    argmax = node.outputs[1]
    direct = not _channels_last(node) and bool(node.attrs["include_batch_in_index"])
    out, finish = _channels_first_output(ctx, node)
    outputs = [out]
    if is_needed(argmax):
        outputs.append(argmax.name if direct else ctx.temp(f"{argmax.name}/onnx"))
    order = int(node.attrs["storage_order"]) if direct else 0
    source = _channels_first_input(ctx, node, node.inputs[0])
    ctx.node("MaxPool", [source], outputs, node.name, storage_order=order,
             **_pool_attributes(node))
    finish()
    if len(outputs) == 2 and not direct:
        _convert_argmax(ctx, node, source, outputs[1])


def _dimensions(ctx: ExportContext, node: Node, source: str, dims: Sequence[Dim]
                ) -> list[str]:
    """Channels, height and width of channels-first ``source`` as int64 scalars."""
    names, shape = [], ""
    for axis in (1, 2, 3):
        if _static([dims[axis]]):
            names.append(_int64(ctx, dims[axis], f"{node.name}/dim{axis}"))
            continue
        shape = shape or ctx.op("Shape", [source], f"{node.name}/shape")
        names.append(ctx.op("Gather", [shape, _int64(ctx, axis, f"{node.name}/axis")],
                            f"{node.name}/dim{axis}", axis=0))
    return names


def _convert_argmax(ctx: ExportContext, node: Node, source: str, onnx_index: str) -> None:
    """GE's argmax from ONNX's index ``(n * C + c) * H * W + h * W + w``."""
    x = node.inputs[0]
    assert x is not None
    dims = [x.shape[i] for i in (_to_first(4) if _channels_last(node) else range(4))]
    channels, height, width = _dimensions(ctx, node, source, dims)

    def binary(op_type: str, a: str, b: str) -> str:
        return ctx.op(op_type, [a, b], f"{node.name}/{op_type.lower()}")

    plane = binary("Mul", height, width)
    pixel = binary("Mod", onnx_index, plane)  # h * W + w
    if node.attrs["storage_order"]:  # column-major pixels: w * H + h
        rows, cols = binary("Div", pixel, width), binary("Mod", pixel, width)
        pixel = binary("Add", rows, binary("Mul", cols, height))
    sample = binary("Mul", channels, plane)
    channel = binary("Div", binary("Mod", onnx_index, sample), plane)
    if not _channels_last(node):  # c * HW + pixel
        ctx.node("Add", [binary("Mul", channel, plane), pixel], [node.outputs[1].name])
        return
    flat = pixel  # ((n * HW) + pixel) * C + c
    if node.attrs["include_batch_in_index"]:
        flat = binary("Add", binary("Mul", binary("Div", onnx_index, sample), plane), pixel)
    flat = binary("Add", binary("Mul", flat, channels), channel)
    ctx.node("Transpose", [flat], [node.outputs[1].name], perm=_to_last(4))


# -- normalization, bias, matmul --------------------------------------------------------

@exporter("FusedBatchNorm")
def _fused_batch_norm(ctx: ExportContext, node: Node) -> None:
    """Inference ``BatchNormalization``, the channels moved to axis 1 and back when last."""
    x = node.inputs[0]
    assert x is not None
    epsilon = node.attrs["epsilon"]
    rest = [ctx.name_of(v) for v in node.inputs[1:]]
    if channel_axis(node.attrs["data_format"], x.rank) == 1:
        ctx.node("BatchNormalization", [ctx.name_of(x)] + rest, [node.outputs[0].name],
                 node.name, epsilon=epsilon)
        return
    moved = ctx.op("Transpose", [ctx.name_of(x)], f"{node.name}/channels_first",
                   perm=_to_first(x.rank))
    normed = ctx.op("BatchNormalization", [moved] + rest, f"{node.name}/normed",
                    epsilon=epsilon)
    ctx.node("Transpose", [normed], [node.outputs[0].name], perm=_to_last(x.rank))


@exporter("BatchNormalizationTraining")
def _batch_normalization_training(ctx: ExportContext, node: Node) -> None:
    """``BatchNormalization(training_mode=1)`` (Y and the running statistics); the batch's
    own mean and variance, when read, by ``ReduceMean`` in GE's precision."""
    names = [v.name if is_needed(v) or i == 0 else "" for i, v in enumerate(node.outputs[:3])]
    while not names[-1]:
        names.pop()
    ctx.node("BatchNormalization", [ctx.name_of(v) for v in node.inputs], names, node.name,
             epsilon=node.attrs["epsilon"], momentum=node.attrs["momentum"], training_mode=1)
    if is_needed(node.outputs[3]) or is_needed(node.outputs[4]):
        _batch_statistics(ctx, node)


def _batch_statistics(ctx: ExportContext, node: Node) -> None:
    x = node.inputs[0]
    assert x is not None
    wide = x.dtype if x.dtype in (DataType.DT_FLOAT, DataType.DT_DOUBLE) else DataType.DT_FLOAT
    source = _cast(ctx, ctx.name_of(x), x.dtype, wide)
    axes = _int64(ctx, [0, *range(2, x.rank)], f"{node.name}/axes")
    mean = ctx.op("ReduceMean", [source, axes], f"{node.name}/mean")
    centred = ctx.op("Sub", [source, mean], f"{node.name}/centred")
    square = ctx.op("Mul", [centred, centred], f"{node.name}/square")
    variance = ctx.op("ReduceMean", [square, axes], f"{node.name}/variance", keepdims=0)
    flat = ctx.op("Reshape", [mean, _int64(ctx, [-1], "shape")], f"{node.name}/batch_mean")
    for value, name in zip(node.outputs[3:], (flat, variance)):
        ctx.node("Cast", [name], [value.name], to=to_onnx_dtype(x.dtype))


@exporter("BiasAdd")
def _bias_add(ctx: ExportContext, node: Node) -> None:
    """``Add``; a channels-first bias is reshaped to ``[C, 1, ...]`` to broadcast."""
    value, bias = node.inputs
    assert value is not None and bias is not None
    bias_name = ctx.name_of(bias)
    axis = channel_axis(node.attrs["data_format"], value.rank)
    if axis != value.rank - 1:
        shape = _int64(ctx, [-1] + [1] * (value.rank - 1 - axis), f"{node.name}/shape")
        bias_name = ctx.op("Reshape", [bias_name, shape], f"{node.name}/bias")
    ctx.node("Add", [ctx.name_of(value), bias_name], [node.outputs[0].name], node.name)


@exporter("MatMul")
def _matmul(ctx: ExportContext, node: Node) -> None:
    """``MatMul``, a transposed operand transposed first."""
    names = []
    for value, flag in zip(node.inputs, ("transpose_a", "transpose_b")):
        assert value is not None
        name = ctx.name_of(value)
        if node.attrs.get(flag) and value.rank >= 2:
            perm = list(range(value.rank - 2)) + [value.rank - 1, value.rank - 2]
            name = ctx.op("Transpose", [name], f"{node.name}/{flag}", perm=perm)
        names.append(name)
    ctx.node("MatMul", names, [node.outputs[0].name], node.name)


# -- attention --------------------------------------------------------------------------

def _sizes(ctx: ExportContext, value: Value, axes: Sequence[int], base: str) -> str:
    """The sizes of ``value`` along ``axes`` as a 1-D int64 tensor."""
    dims = [value.shape[axis] for axis in axes]
    if _static(dims):
        return _int64(ctx, dims, base)
    shape = ctx.op("Shape", [ctx.name_of(value)], f"{base}/shape")
    return ctx.op("Gather", [shape, _int64(ctx, list(axes), f"{base}/axes")], base, axis=0)


@exporter("Attention")
def _attention(ctx: ExportContext, node: Node) -> None:
    """ONNX ``Attention``; a mask that broadcasts over the query positions is expanded to
    them, as onnxruntime requires (ONNX asks only that it broadcast)."""
    inputs = _input_names(ctx, node)
    query, mask = node.inputs[0], node.inputs[3] if len(node.inputs) > 3 else None
    assert query is not None
    positions = 2 if query.rank == 4 else 1  # [B, heads, S, D] or [B, S, heads * D]
    if mask is not None and mask.rank >= 2 and mask.shape[-2] == 1 \
            and query.shape[positions] != 1:
        ones = _int64(ctx, [1] * (mask.rank - 2), f"{node.name}/ones")
        length = _sizes(ctx, query, [positions], f"{node.name}/query_length")
        shape = ctx.op("Concat", [ones, length, _int64(ctx, [1], f"{node.name}/one")],
                       f"{node.name}/mask_shape", axis=0)
        inputs[3] = ctx.op("Expand", [inputs[3], shape], f"{node.name}/mask")
    ctx.node("Attention", inputs, output_names(ctx, node, "Attention"), node.name,
             **onnx_attributes(ctx, node, "Attention"))


# -- quantization in GE's precision -----------------------------------------------------

def _cast(ctx: ExportContext, name: str, have: DataType, want: DataType, **attrs: Any) -> str:
    if have is want:
        return name
    return ctx.op("Cast", [name], f"{name}/{want.short_name}", to=to_onnx_dtype(want), **attrs)


def _types_fit(ctx: ExportContext, node: Node, onnx_type: str) -> bool:
    """True when ONNX's ``onnx_type`` takes the node's input dtypes at the target opset."""
    schema = onnx_schema(onnx_type, ctx.opset)
    if schema is None:
        return False
    shared: dict[str, DataType] = {}
    for index, value in enumerate(node.inputs):
        if value is None:
            continue
        if not onnx_accepts(onnx_type, ctx.opset, index, value.dtype):
            return False
        type_str = schema.inputs[min(index, len(schema.inputs) - 1)].type_str
        if shared.setdefault(type_str, value.dtype) is not value.dtype:
            return False
    return True


def _parameter(ctx: ExportContext, node: Node, index: int, dtype: DataType) -> str:
    """A scale or zero point as ``dtype``, shaped to broadcast against input 0: per tensor,
    per axis, or repeated over its blocks (blocked quantization needs known sizes)."""
    x, value = node.inputs[0], node.inputs[index]
    assert x is not None and value is not None
    name = _cast(ctx, ctx.name_of(value), value.dtype, dtype)
    axis = int(node.attrs["axis"]) % max(x.rank, 1)
    block = int(node.attrs["block_size"])
    if block <= 0:
        if value.rank == 0:
            return name
        shape = [] if value.shape[0] == 1 else [-1] + [1] * (x.rank - 1 - axis)
        return ctx.op("Reshape", [name, _int64(ctx, shape, "shape")], f"{name}/shaped")
    if not _static(value.shape) or not _static([x.shape[axis]]):
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: blocked parameters are "
                                 f"written for known sizes only")
    dims = [int(d) for d in value.shape]
    grown = ctx.op("Unsqueeze", [name, _int64(ctx, [axis + 1], "axes")], f"{name}/blocks")
    repeat = [1] * (len(dims) + 1)
    repeat[axis + 1] = block
    grown = ctx.op("Expand", [grown, _int64(ctx, repeat, "shape")], f"{name}/blocks")
    merged = dims[:axis] + [dims[axis] * block] + dims[axis + 1:]
    grown = ctx.op("Reshape", [grown, _int64(ctx, merged, "shape")], f"{name}/blocks")
    return ctx.op("Slice", [grown, _int64(ctx, [0], "starts"), _int64(ctx, [x.shape[axis]],
                                                                         "ends"),
                            _int64(ctx, [axis], "axes")], f"{name}/blocks")


def _wider(*dtypes: DataType) -> DataType:
    return DataType.DT_DOUBLE if DataType.DT_DOUBLE in dtypes else DataType.DT_FLOAT


@exporter("QuantizeLinear")
def _quantize_linear(ctx: ExportContext, node: Node) -> None:
    """ONNX ``QuantizeLinear`` where it takes the dtypes and divides in GE's precision (a
    float32 scale, or ``precision`` set); otherwise its exact decomposition."""
    x, scale, zero = (list(node.inputs) + [None])[:3]
    assert x is not None and scale is not None
    compute = node.attrs.get("precision") or _wider(x.dtype, scale.dtype)
    if _types_fit(ctx, node, "QuantizeLinear") and (node.attrs.get("precision") is not None
                                                    or scale.dtype is compute):
        ctx.node("QuantizeLinear", _input_names(ctx, node), [node.outputs[0].name], node.name,
                 **onnx_attributes(ctx, node, "QuantizeLinear"))
        return
    target = node.outputs[0].dtype
    values = _cast(ctx, ctx.name_of(x), x.dtype, compute)
    values = ctx.op("Div", [values, _parameter(ctx, node, 1, compute)], f"{node.name}/scaled")
    if target in INTEGER_RANGES:
        values = ctx.op("Round", [values], f"{node.name}/rounded")
    if zero is not None:
        values = ctx.op("Add", [values, _parameter(ctx, node, 2, compute)], f"{node.name}/zero")
    bound = _bounds(target, bool(node.attrs["saturate"]))
    if bound is not None:
        low, high = (ctx.const(np.asarray(b, compute.np_dtype), f"{node.name}/bound")
                     for b in bound)
        values = ctx.op("Clip", [values, low, high], f"{node.name}/clipped")
    if target not in INTEGER_RANGES:
        values = _cast(ctx, values, compute, DataType.DT_FLOAT)
    saturate = int(node.attrs["saturate"]) if "FLOAT8" in target.name else None
    ctx.node("Cast", [values], [node.outputs[0].name], node.name, to=to_onnx_dtype(target),
             saturate=saturate)


def _bounds(target: DataType, saturate: bool) -> Optional[tuple[float, float]]:
    """The clamp GE applies before the final cast, if any."""
    if target in INTEGER_RANGES:
        return INTEGER_RANGES[target]
    if not (saturate or target is DataType.DT_FLOAT4_E2M1):
        return None
    import ml_dtypes

    largest = float(ml_dtypes.finfo(target.np_dtype).max)
    return -largest, largest


@exporter("DequantizeLinear")
def _dequantize_linear(ctx: ExportContext, node: Node) -> None:
    """ONNX ``DequantizeLinear`` where it computes as GE does (8/16/4/2-bit or float8 data,
    float32 scale and result); otherwise ``(x - zero_point) * scale`` in GE's precision."""
    x, scale, zero = (list(node.inputs) + [None])[:3]
    assert x is not None and scale is not None
    output = node.outputs[0].dtype
    plain = scale.dtype is DataType.DT_FLOAT and output is DataType.DT_FLOAT
    if plain and x.dtype is not DataType.DT_INT32 and _types_fit(ctx, node, "DequantizeLinear"):
        ctx.node("DequantizeLinear", _input_names(ctx, node), [node.outputs[0].name], node.name,
                 **onnx_attributes(ctx, node, "DequantizeLinear"))
        return
    wide = _wider(scale.dtype, output)
    if x.dtype is DataType.DT_INT32:
        wide = DataType.DT_DOUBLE
    values = _cast(ctx, ctx.name_of(x), x.dtype, wide)
    if zero is not None and x.dtype.is_integer:
        values = ctx.op("Sub", [values, _parameter(ctx, node, 2, wide)], f"{node.name}/centred")
    values = ctx.op("Mul", [values, _parameter(ctx, node, 1, wide)], f"{node.name}/scaled")
    if output is wide:
        ctx.node("Identity", [values], [node.outputs[0].name], node.name)
    else:
        ctx.node("Cast", [values], [node.outputs[0].name], node.name, to=to_onnx_dtype(output))



# -- onnxruntime contrib ops ------------------------------------------------------------

@exporter("DynamicQuantizeLSTM")
def _dynamic_quantize_lstm(ctx: ExportContext, node: Node) -> None:
    """onnxruntime's ``com.microsoft`` ``DynamicQuantizeLSTM``, every output named (without
    ``Y`` onnxruntime would quantize ended rows' states, not zeros). ``parallelism`` has no
    form there: onnxruntime follows its own thread count, which should be at least the
    batch for its numbers to be GE's."""
    if node.attrs.get("parallelism"):
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: parallelism="
                                 f"{node.attrs['parallelism']} has no ONNX form")
    attrs = {key: attribute_value(value) for key, value in node.attrs.items()
             if value is not None and key != "parallelism"}
    recurrence = node.inputs[2]
    assert recurrence is not None
    attrs.setdefault("hidden_size", recurrence.shape[1])  # onnxruntime requires it
    ctx.node(node.op_type, [ctx.name_of(v) for v in node.inputs],
             [value.name for value in node.outputs], node.name, domain="com.microsoft", **attrs)
