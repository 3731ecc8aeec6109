"""Translators for ONNX ops that map onto the seed's ops or need more than a rename.

Convolutions, pools and batch normalization become the seed's ``Conv2D``,
``MaxPool``, ``AvgPool`` and ``FusedBatchNorm`` in NCHW (filters OIHW, as ONNX
holds them); 1-D windows run as 2-D ones with a unit height, 3-D ones as ``Conv3D``,
``MaxPool3D`` and ``AvgPool3D`` in NCDHW; a MaxPool whose Indices are used becomes
``MaxPoolWithArgmax``; training-mode BatchNormalization and Dropout become
``BatchNormalizationTraining`` and the random ``Dropout``; opsets 7 and 8's
``BatchNormalization(spatial=0)`` (statistics per activation) becomes elementwise
arithmetic. Attributes that older
opsets carried and newer ones take as inputs (axes, pads, split sizes, clip bounds)
become constant inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, direct_translation, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.frontends.onnx.ops_tensor import constant_inputs
from ge.ir import Format, Tensor, Value
from ge.ops.nn_window import onnx_pads

Outputs = Sequence[Optional[Value]]


@translator("Constant")
def constant(ctx: NodeContext) -> Outputs:
    """``Constant`` becomes a ``Const`` holding whichever value attribute is set."""
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in ctx.attrs:
            data = ctx.attrs[key]
            if key.startswith("value_float"):
                data = np.asarray(data, np.float32)
            elif key.startswith("value_int"):
                data = np.asarray(data, np.int64)
            node = ctx.op("Const", [], {"value": Tensor(np.asarray(data))})
            return node.outputs
    raise ctx.unsupported(f"value attribute {sorted(ctx.attrs)} is not supported "
                          f"(strings and sparse tensors are not)")


@translator("Cast")
def cast(ctx: NodeContext) -> Outputs:
    """``Cast(to=T)`` becomes ``Cast(dtype=T)``."""
    dtype = from_onnx_dtype(ctx.attr("to"), f"ONNX Cast node {ctx.name!r}")
    return ctx.op("Cast", ctx.inputs[:1], _cast_attrs(ctx, dtype)).outputs


@translator("CastLike")
def cast_like(ctx: NodeContext) -> Outputs:
    """``CastLike(x, target)`` becomes ``Cast`` to the target's dtype."""
    target = ctx.input(1)
    assert target is not None
    return ctx.op("Cast", ctx.inputs[:1], _cast_attrs(ctx, target.dtype)).outputs


def _cast_attrs(ctx: NodeContext, dtype: Any) -> dict[str, Any]:
    """``Cast``'s attributes: the target, and ONNX's ``saturate`` and ``round_mode``."""
    attrs = {"dtype": dtype, "saturate": bool(ctx.attr("saturate", 1))}
    if "round_mode" in ctx.attrs:
        attrs["round_mode"] = ctx.attr("round_mode")
    return attrs


# -- windows: Conv, MaxPool, AveragePool ------------------------------------------------

def _spatial_rank(ctx: NodeContext) -> int:
    x = ctx.input(0)
    assert x is not None
    return len(x.shape) - 2


def _explicit_pads(ctx: NodeContext, kernel: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int]) -> tuple[str, list[int]]:
    """ONNX padding as (GE padding mode, GE pads: begin and end of each axis in turn)."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    rank = len(kernel)
    if auto_pad == "VALID":
        return "VALID", [0] * (2 * rank)
    if auto_pad == "SAME_UPPER":
        return "SAME", [0] * (2 * rank)
    if auto_pad == "SAME_LOWER":
        x = ctx.input(0)
        assert x is not None
        sizes = x.shape[2:]
        if not all(isinstance(s, int) and s >= 0 for s in sizes):
            raise ctx.unsupported("auto_pad SAME_LOWER needs static spatial sizes")
        pads = onnx_pads("SAME_LOWER", [int(s) for s in sizes], kernel, strides, dilations, [])
    else:
        pads = list(ctx.attr("pads", [0] * (2 * rank)))
    return "EXPLICIT", [p for axis in range(rank) for p in (pads[axis], pads[rank + axis])]


def _to_2d(ctx: NodeContext, value: Value) -> Value:
    """[N, C, W] as [N, C, 1, W]."""
    return ctx.value("Unsqueeze", [value, ctx.const(np.array([2], np.int64))])


def _from_2d(ctx: NodeContext, value: Value) -> Value:
    return ctx.value("Squeeze", [value, ctx.const(np.array([2], np.int64))])


def _window(ctx: NodeContext, kernel: list[int]) -> dict[str, Any]:
    """GE window attributes of an ONNX node; a 1-D window becomes 2-D with a unit height."""
    rank = len(kernel)
    strides = list(ctx.attr("strides", [1] * rank))
    dilations = list(ctx.attr("dilations", [1] * rank))
    padding, pads = _explicit_pads(ctx, kernel, strides, dilations)
    if rank == 1:
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        pads = [0, 0] + pads
    return {"strides": strides, "dilations": dilations, "padding": padding,
            "pads": pads if padding == "EXPLICIT" else None, "ksize": kernel}


def _layout(rank: int) -> Any:
    return "NCDHW" if rank == 3 else Format.NCHW


@translator("Conv")
def conv(ctx: NodeContext) -> Outputs:
    """``Conv`` becomes ``Conv2D`` (1-D and 2-D) or ``Conv3D`` in channels-first layout with
    an OIHW / OIDHW filter."""
    rank = _spatial_rank(ctx)
    if rank not in (1, 2, 3):
        raise ctx.unsupported(f"{rank}-D convolution is not supported (1-D to 3-D are)")
    weight = ctx.input(1)
    assert weight is not None
    kernel = list(ctx.attr("kernel_shape", weight.shape[2:]))
    window = _window(ctx, kernel)
    x, w = ctx.input(0), weight
    assert x is not None
    if rank == 1:
        x, w = _to_2d(ctx, x), _to_2d(ctx, w)
    attrs = {"strides": window["strides"], "dilations": window["dilations"],
             "padding": window["padding"], "pads": window["pads"],
             "groups": ctx.attr("group", 1), "data_format": _layout(rank),
             "filter_format": "OIDHW" if rank == 3 else "OIHW"}
    out = ctx.value("Conv3D" if rank == 3 else "Conv2D", [x, w, ctx.input(2)], attrs)
    return [_from_2d(ctx, out) if rank == 1 else out]


def _pool(ctx: NodeContext, op_type: str) -> Outputs:
    rank = _spatial_rank(ctx)
    if rank not in (1, 2, 3):
        raise ctx.unsupported(f"{rank}-D pooling is not supported (1-D to 3-D are)")
    with_indices = ctx.wants_output(1)
    if with_indices and rank != 2:
        raise ctx.unsupported("the Indices output is supported for 2-D pooling only")
    window = _window(ctx, list(ctx.attr("kernel_shape")))
    attrs: dict[str, Any] = {**window, "data_format": _layout(rank),
                             "ceil_mode": bool(ctx.attr("ceil_mode", 0))}
    if op_type == "AvgPool":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    if with_indices:
        op_type, attrs["include_batch_in_index"] = "MaxPoolWithArgmax", True
        attrs["storage_order"] = ctx.attr("storage_order", 0)
    elif rank == 3:
        op_type += "3D"
    x = ctx.input(0)
    assert x is not None
    if rank == 1:
        x = _to_2d(ctx, x)
    outputs = ctx.op(op_type, [x], attrs).outputs
    return [_from_2d(ctx, v) for v in outputs] if rank == 1 else outputs


@translator("MaxPool")
def max_pool(ctx: NodeContext) -> Outputs:
    """``MaxPool`` becomes the seed's ``MaxPool`` (1-D and 2-D), ``MaxPool3D``, or
    ``MaxPoolWithArgmax`` when its Indices output is used."""
    return _pool(ctx, "MaxPool")


@translator("AveragePool")
def average_pool(ctx: NodeContext) -> Outputs:
    """``AveragePool`` becomes ``AvgPool`` (1-D and 2-D) or ``AvgPool3D``."""
    return _pool(ctx, "AvgPool")


@translator("BatchNormalization")
def batch_normalization(ctx: NodeContext) -> Outputs:
    """Inference ``BatchNormalization`` becomes ``FusedBatchNorm`` in NCHW; training mode
    (``training_mode=1``, or before opset 14 any statistics output asked for) becomes
    ``BatchNormalizationTraining``."""
    if ctx.attr("training_mode", 0) or any(ctx.wants_output(i) for i in range(1, 5)):
        attrs = {"epsilon": ctx.attr("epsilon", 1e-5), "momentum": ctx.attr("momentum", 0.9)}
        return ctx.op("BatchNormalizationTraining", ctx.inputs[:5], attrs).outputs
    x = ctx.input(0)
    assert x is not None
    scale = ctx.input(1)
    if ctx.opset < 9 and ctx.attr("spatial", 1) == 0 and scale is not None and scale.rank > 1:
        return [_per_activation_batch_norm(ctx, x)]
    layout = Format.NCHW if len(x.shape) > 2 else Format.ND
    return ctx.op("FusedBatchNorm", ctx.inputs[:5],
                  {"epsilon": ctx.attr("epsilon", 1e-5), "data_format": layout}).outputs


def _per_activation_batch_norm(ctx: NodeContext, x: Value) -> Value:
    """Opsets 7 and 8 with ``spatial=0``: scale, B, mean and var hold one value per
    activation (shape ``[C, D1, ...]``), broadcast over the batch axis."""
    scale, bias, mean, variance = (ctx.input(i) for i in range(1, 5))
    epsilon = ctx.const(np.asarray(ctx.attr("epsilon", 1e-5), x.dtype.np_dtype))
    deviation = ctx.value("Sqrt", [ctx.value("Add", [variance, epsilon])])
    factor = ctx.value("Div", [scale, deviation])
    shifted = ctx.value("Sub", [bias, ctx.value("Mul", [mean, factor])])
    return ctx.value("Add", [ctx.value("Mul", [x, factor]), shifted])


@translator("Dropout")
def dropout(ctx: NodeContext) -> Outputs:
    """Inference ``Dropout`` (no training_mode, or a constant false) is the identity; its
    mask, when asked for, is all true. Otherwise it is the registry's random ``Dropout``."""
    x = ctx.input(0)
    assert x is not None
    training = ctx.constant_input(2)
    if ctx.input(2) is not None and (training is None or bool(training.reshape(-1)[0])):
        inputs = [x, ctx.input(1), ctx.input(2)]
        return ctx.op("Dropout", inputs, {"seed": ctx.attr("seed")}).outputs
    outputs: list[Optional[Value]] = [ctx.value("Identity", [x])]
    if ctx.wants_output(1):
        shape = ctx.value("Shape", [x])
        outputs.append(ctx.value("Expand", [ctx.const(np.ones((1,), np.bool_)), shape]))
    return outputs


# -- softmax family: opsets before 13 flatten to 2-D at `axis` -------------------------

def _softmax(ctx: NodeContext, op_type: str) -> Outputs:
    x = ctx.input(0)
    assert x is not None
    if ctx.opset >= 13:
        return ctx.op(op_type, [x], {"axis": ctx.attr("axis", -1)}).outputs
    axis = ctx.attr("axis", 1)
    if axis in (-1, len(x.shape) - 1):
        return ctx.op(op_type, [x], {"axis": -1}).outputs
    shape = ctx.value("Shape", [x])
    flat = ctx.value("Flatten", [x], {"axis": axis})
    result = ctx.value(op_type, [flat], {"axis": -1})
    return [ctx.value("Reshape", [result, shape])]


@translator("Softmax")
def softmax(ctx: NodeContext) -> Outputs:
    """``Softmax``; before opset 13 over the input flattened to 2-D at ``axis``."""
    return _softmax(ctx, "Softmax")


@translator("LogSoftmax")
def log_softmax(ctx: NodeContext) -> Outputs:
    """``LogSoftmax``; before opset 13 over the input flattened to 2-D at ``axis``."""
    return _softmax(ctx, "LogSoftmax")


@translator("Hardmax")
def hardmax(ctx: NodeContext) -> Outputs:
    """``Hardmax``; before opset 13 over the input flattened to 2-D at ``axis``."""
    return _softmax(ctx, "Hardmax")


# -- attributes that became inputs ------------------------------------------------------

def _attribute_as_input(ctx: NodeContext, attribute: str, position: int,
                        dtype: Any = np.int64) -> None:
    """Move an old opset's attribute into the input slot newer opsets use."""
    if attribute not in ctx.attrs:
        return
    value = ctx.const(np.asarray(ctx.attrs.pop(attribute), dtype))
    inputs = list(ctx.inputs) + [None] * max(0, position + 1 - len(ctx.inputs))
    inputs[position] = value
    ctx.inputs = inputs


@translator("Squeeze", "Unsqueeze")
def squeeze(ctx: NodeContext) -> Outputs:
    """``Squeeze``/``Unsqueeze``; before opset 13 the axes were an attribute; computable
    axes become constant."""
    _attribute_as_input(ctx, "axes", 1)
    constant_inputs(ctx, [1])
    return direct_translation(ctx)


@translator("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def reduce(ctx: NodeContext) -> Outputs:
    """Reductions; before opset 18 (13 for ReduceSum) the axes were an attribute;
    computable axes become constant."""
    _attribute_as_input(ctx, "axes", 1)
    constant_inputs(ctx, [1])
    return direct_translation(ctx)


@translator("Split")
def split(ctx: NodeContext) -> Outputs:
    """``Split``; before opset 13 the sizes were an attribute; without sizes, equal parts;
    computable sizes become constant."""
    _attribute_as_input(ctx, "split", 1)
    constant_inputs(ctx, [1])
    if ctx.input(1) is None and "num_outputs" not in ctx.attrs:
        ctx.attrs["num_outputs"] = ctx.num_outputs
    return direct_translation(ctx)


@translator("Clip")
def clip(ctx: NodeContext) -> Outputs:
    """``Clip``; before opset 11 the bounds were attributes."""
    x = ctx.input(0)
    assert x is not None
    dtype = x.dtype.np_dtype
    if "min" in ctx.attrs or "max" in ctx.attrs:
        low = ctx.const(np.asarray(ctx.attrs.pop("min", np.finfo(dtype).min), dtype))
        high = ctx.const(np.asarray(ctx.attrs.pop("max", np.finfo(dtype).max), dtype))
        ctx.inputs = [x, low, high]
    return direct_translation(ctx)


@translator("Pad")
def pad(ctx: NodeContext) -> Outputs:
    """``Pad``; before opset 11 the pads and value were attributes; computable pads,
    value and axes become constant (an exporter computes reflect padding's pads from
    shapes), so the output's shape is known."""
    x = ctx.input(0)
    assert x is not None
    if "pads" in ctx.attrs:
        pads = ctx.const(np.asarray(ctx.attrs.pop("pads"), np.int64))
        value = ctx.const(np.asarray(ctx.attrs.pop("value", 0.0), x.dtype.np_dtype))
        ctx.inputs = [x, pads, value]
    constant_inputs(ctx, [1, 2, 3])
    return direct_translation(ctx)


@translator("Slice")
def slice_(ctx: NodeContext) -> Outputs:
    """``Slice``; before opset 10 starts, ends and axes were attributes; computable starts,
    ends, axes and steps become constant."""
    if "starts" in ctx.attrs:
        x = ctx.input(0)
        values = [ctx.const(np.asarray(ctx.attrs.pop(k), np.int64)) for k in ("starts", "ends")]
        axes = ctx.attrs.pop("axes", None)
        ctx.inputs = [x, *values] + ([ctx.const(np.asarray(axes, np.int64))] if axes else [])
    constant_inputs(ctx, [1, 2, 3, 4])
    return direct_translation(ctx)


# -- variadic elementwise ops become chains of binary ones ------------------------------

def _chain(ctx: NodeContext, op_type: str) -> Value:
    values = [v for v in ctx.inputs if v is not None]
    result = values[0]
    for other in values[1:]:
        result = ctx.value(op_type, [result, other])
    if len(values) == 1:
        result = ctx.value("Identity", [result])
    return result


@translator("Max")
def maximum(ctx: NodeContext) -> Outputs:
    """Variadic ``Max`` as a chain of binary ``Max``."""
    return [_chain(ctx, "Max")]


@translator("Min")
def minimum(ctx: NodeContext) -> Outputs:
    """Variadic ``Min`` as a chain of binary ``Min``."""
    return [_chain(ctx, "Min")]


@translator("Sum")
def total(ctx: NodeContext) -> Outputs:
    """Variadic ``Sum`` as a chain of ``Add``."""
    return [_chain(ctx, "Add")]


@translator("Mean")
def mean(ctx: NodeContext) -> Outputs:
    """Variadic ``Mean``: the sum divided by the count."""
    values = [v for v in ctx.inputs if v is not None]
    summed = _chain(ctx, "Add")
    count = ctx.const(np.asarray(len(values), values[0].dtype.np_dtype))
    return [ctx.value("Div", [summed, count])]
