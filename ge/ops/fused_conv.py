"""Fused convolutions: the seed's ``ConvBNReLU`` and the compiler's ``FusedConv2D``.

``ConvBNReLU`` (seed section 5.1) is ``Relu(FusedBatchNorm(Conv2D(input, filter, bias),
scale, offset, mean, variance))``: Conv2D's attributes plus ``epsilon``, with the
optional ``bias`` as its last input (``ReplaceWith`` maps the matched nodes' inputs to it
by name).

``FusedConv2D`` is what the compiler's convolution fusions produce:
``activation(Conv2D(input, filter, bias) + residual)`` with Conv2D's attributes, an
optional ``residual`` of the convolution's output shape (a ResNet skip connection) and
one of the activations in ``ACTIVATIONS``: ``""`` (none), ``Relu``, ``Relu6``, ``Clip``
(``clip_min``/``clip_max``, an absent bound does not clip), ``LeakyRelu`` (``alpha``),
``Sigmoid``, ``Tanh``, ``HardSwish`` or ``Swish`` (SiLU: x * sigmoid(x)).

Both reference kernels run Conv2D's reference kernel, then add the bias and residual and
apply the activation in place on the convolution's fresh output, so the fused op reads
its inputs and writes its output once. ``decompose(node, graph)`` writes either op as the
registry ops it stands for (for exporters, and for tests that check the fused kernel).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import Graph, Node, Tensor, TensorDesc, Value
from ge.ir.tensor import num_elements
from ge.ops.core import channel_axis
from ge.ops.nn import CONVOLUTION_LAYOUT  # Conv2D and FusedBatchNorm are registered first
from ge.ops.registry import (
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    LayoutRole,
    OpSchema,
    create_node,
    get_schema,
    register_op,
)
from ge.ops.shape_utils import dims_equal

__all__ = ["ACTIVATIONS", "CONV_ATTRS", "decompose", "activation_flops"]

#: the activations FusedConv2D can apply, and the registry op each one stands for
ACTIVATIONS: dict[str, str] = {"": "", "Relu": "Relu", "Relu6": "Clip", "Clip": "Clip",
                               "LeakyRelu": "LeakyRelu", "Sigmoid": "Sigmoid", "Tanh": "Tanh",
                               "HardSwish": "HardSwish", "Swish": "Swish"}

#: the attribute names FusedConv2D and ConvBNReLU share with Conv2D
CONV_ATTRS: tuple[str, ...] = tuple(get_schema("Conv2D").attrs)

_ACTIVATION_FLOPS = {"": 0, "Relu": 1, "Relu6": 2, "Clip": 2, "LeakyRelu": 2, "Sigmoid": 4,
                     "Tanh": 4, "HardSwish": 4, "Swish": 5}


def activation_flops(activation: str) -> int:
    """Floating-point operations per output element of ``activation``."""
    return _ACTIVATION_FLOPS[activation]


@functools.lru_cache(maxsize=None)
def _conv_as(op_type: str) -> OpSchema:
    """Conv2D's schema under another name, so its inference errors name the fused op."""
    return dataclasses.replace(get_schema("Conv2D"), op_type=op_type)


def _conv_context(ctx: InferenceContext, bias_index: Optional[int]) -> InferenceContext:
    picks = [0, 1] + ([bias_index] if bias_index is not None and ctx.has_input(bias_index)
                      else [])
    attrs = {name: ctx.attrs[name] for name in CONV_ATTRS}
    return InferenceContext(_conv_as(ctx.schema.op_type), ctx.node_name,
                            [ctx.inputs[i] for i in picks], attrs, [ctx.consts[i] for i in picks])


def _conv_bias_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc], bias_index: int,
                    per_element: int) -> Cost:
    conv = get_schema("Conv2D")
    flops, data = conv.cost(_conv_context(ctx, bias_index), outputs)
    extra_inputs = [d for i, d in enumerate(ctx.inputs) if i > 1 and i != bias_index and d]
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in extra_inputs)
    return Cost(flops + per_element * num_elements(outputs[0].shape), data + read)


def _fresh(result: np.ndarray, *inputs: Optional[np.ndarray]) -> np.ndarray:
    """``result``, copied if it may not be overwritten (read-only or sharing an input)."""
    shared = any(a is not None and np.may_share_memory(result, a) for a in inputs)
    return result.copy() if shared or not result.flags.writeable else result


def _channel_column(values: np.ndarray, data_format: Any, rank: int, dtype: np.dtype
                    ) -> np.ndarray:
    shape = [1] * rank
    shape[channel_axis(data_format, rank)] = -1
    return values.astype(dtype, copy=False).reshape(shape)


# -- activations, in place --------------------------------------------------------------

def _clip_in_place(y: np.ndarray, low: Optional[float], high: Optional[float]) -> np.ndarray:
    if low is not None:
        np.maximum(y, y.dtype.type(low), out=y)
    if high is not None:
        np.minimum(y, y.dtype.type(high), out=y)
    return y


def _apply_activation(y: np.ndarray, activation: str, attrs: dict[str, Any]) -> np.ndarray:
    """``activation`` applied to ``y`` (in place where it is a clip or a leaky slope)."""
    if activation == "":
        return y
    if activation == "Relu":
        return _clip_in_place(y, 0.0, None)
    if activation == "Relu6":
        return _clip_in_place(y, 0.0, 6.0)
    if activation == "Clip":
        return _clip_in_place(y, attrs["clip_min"], attrs["clip_max"])
    if activation == "LeakyRelu":
        np.multiply(y, y.dtype.type(attrs["alpha"]), out=y, where=y < 0)
        return y
    if activation == "Swish":  # SiLU: the fused form has alpha 1
        swish: np.ndarray = get_schema("Swish").kernel(y, alpha=1.0)
        return swish
    result: np.ndarray = get_schema(activation).kernel(y)
    return result


# -- FusedConv2D ------------------------------------------------------------------------

def _check_clip(ctx: InferenceContext) -> None:
    low, high = ctx.attr("clip_min"), ctx.attr("clip_max")
    if ctx.attr("activation") == "Clip" and low is not None and high is not None and low > high:
        raise ctx.fail(f"clip_min {low} is above clip_max {high}")


def _infer_fused_conv(ctx: InferenceContext) -> Sequence[TensorDesc]:
    (output,) = get_schema("Conv2D").infer(_conv_context(ctx, 2))
    _check_clip(ctx)
    if ctx.has_input(3):
        residual = ctx.input(3)
        if residual.dtype is not output.dtype:
            raise ctx.fail_dtype(f"residual has dtype {residual.dtype.short_name}; the "
                                 f"convolution gives {output.dtype.short_name}")
        if len(residual.shape) != len(output.shape) or not all(
                dims_equal(a, b) for a, b in zip(residual.shape, output.shape)):
            raise ctx.fail(f"residual has shape {list(residual.shape)}; it must be the "
                           f"convolution's output shape {list(output.shape)} (no broadcasting)")
    return [output]


def _fused_conv_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    per_element = activation_flops(ctx.attr("activation")) + (1 if ctx.has_input(3) else 0)
    return _conv_bias_cost(ctx, outputs, 2, per_element)


def _conv_attrs() -> list[Attr]:
    return list(get_schema("Conv2D").attrs.values())


@register_op(
    "FusedConv2D",
    inputs=["input", "filter", Input("bias", optional=True, doc="1-D, Cout"),
            Input("residual", optional=True, doc="added before the activation; the output's "
                                                 "shape")],
    attrs=_conv_attrs() + [
        Attr("activation", AttrType.STRING, "", choices=tuple(ACTIVATIONS),
             doc="applied last; '' for none"),
        Attr("alpha", AttrType.FLOAT, 0.01, doc="LeakyRelu's slope below zero"),
        Attr("clip_min", AttrType.FLOAT, None, doc="Clip's lower bound; unset: none"),
        Attr("clip_max", AttrType.FLOAT, None, doc="Clip's upper bound; unset: none"),
    ],
    infer=_infer_fused_conv,
    cost=_fused_conv_cost,
    layout=LayoutRole((0, 3), 1, ("strides", "dilations"), convolution=True),
)
def fused_conv2d_kernel(x: np.ndarray, weights: np.ndarray, bias: Optional[np.ndarray] = None,
                        residual: Optional[np.ndarray] = None, **attrs: Any) -> np.ndarray:
    """y = activation(Conv2D(input, filter) + bias + residual): Conv2D's attributes, then
    the bias, the residual and the activation applied in place on the convolution's output."""
    conv_attrs = {name: attrs[name] for name in CONV_ATTRS}
    y = _fresh(get_schema("Conv2D").kernel(x, weights, None, **conv_attrs), x, residual)
    if bias is not None:
        np.add(y, _channel_column(bias, attrs["data_format"], y.ndim, y.dtype), out=y)
    if residual is not None:
        np.add(y, residual, out=y)
    return _apply_activation(y, attrs["activation"], attrs)


# -- ConvBNReLU -------------------------------------------------------------------------

_BN_INPUTS = ("scale", "offset", "mean", "variance")


def _infer_conv_bn_relu(ctx: InferenceContext) -> Sequence[TensorDesc]:
    (output,) = get_schema("Conv2D").infer(_conv_context(ctx, 6))
    layout = ctx.attr("data_format")
    channels = output.shape[channel_axis(layout, 4)]
    for index in range(2, 6):
        ctx.require_rank(index, 1)
        if ctx.dtype(index) is not output.dtype:
            raise ctx.fail_dtype(f"input {ctx.schema.input_name(index)!r} has dtype "
                                 f"{ctx.dtype(index).short_name}, not {output.dtype.short_name}")
        length = ctx.shape(index)[0]
        if not dims_equal(length, channels):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} has {length} elements; "
                           f"the convolution gives {channels} channels")
    return [output]


@register_op(
    "ConvBNReLU",
    inputs=["input", "filter", *_BN_INPUTS, Input("bias", optional=True, doc="1-D, Cout")],
    attrs=_conv_attrs() + [
        Attr("epsilon", AttrType.FLOAT, 1e-4, doc="added to the variance (FusedBatchNorm's)")],
    infer=_infer_conv_bn_relu,
    cost=lambda ctx, outputs: _conv_bias_cost(ctx, outputs, 6, 3),
    layout=CONVOLUTION_LAYOUT,
)
def conv_bn_relu_kernel(x: np.ndarray, weights: np.ndarray, scale: np.ndarray,
                        offset: np.ndarray, mean: np.ndarray, variance: np.ndarray,
                        bias: Optional[np.ndarray] = None, **attrs: Any) -> np.ndarray:
    """y = Relu(FusedBatchNorm(Conv2D(input, filter, bias), scale, offset, mean, variance)),
    the seed's fused Conv2D+FusedBatchNorm+Relu (inference batch norm, ``epsilon``)."""
    conv_attrs = {name: attrs[name] for name in CONV_ATTRS}
    y = get_schema("Conv2D").kernel(x, weights, bias, **conv_attrs)
    normed = get_schema("FusedBatchNorm").kernel(
        y, scale, offset, mean, variance, epsilon=attrs["epsilon"],
        data_format=attrs["data_format"], is_training=False)
    return _clip_in_place(_fresh(normed, x, y), 0.0, None)


# -- decompositions ---------------------------------------------------------------------

def _scalar(graph: Graph, like: Value, number: float, name: str) -> Value:
    array = np.asarray(number, like.dtype.np_dtype)
    return create_node("Const", [], {"value": Tensor(array)}, graph.unique_name(name),
                       graph).outputs[0]


def _activation_nodes(graph: Graph, x: Value, node: Node) -> Value:
    activation, base = node.attrs.get("activation", ""), node.name
    if activation == "":
        return x
    if activation in ("Relu6", "Clip"):
        low, high = (0.0, 6.0) if activation == "Relu6" else (node.attrs.get("clip_min"),
                                                             node.attrs.get("clip_max"))
        bounds: list[Optional[Value]] = [
            None if low is None else _scalar(graph, x, low, f"{base}/clip_min"),
            None if high is None else _scalar(graph, x, high, f"{base}/clip_max")]
        while bounds and bounds[-1] is None:
            bounds.pop()
        return create_node("Clip", [x, *bounds], {}, graph.unique_name(f"{base}/clip"),
                           graph).outputs[0]
    attrs = {"alpha": node.attrs["alpha"]} if activation == "LeakyRelu" else {}
    return create_node(activation, [x], attrs,
                       graph.unique_name(f"{base}/{activation.lower()}"), graph).outputs[0]


def _conv_node(graph: Graph, node: Node, bias: Optional[Value]) -> Value:
    conv_attrs = {name: node.attrs[name] for name in CONV_ATTRS}
    inputs = [node.inputs[0], node.inputs[1]] + ([bias] if bias is not None else [])
    return create_node("Conv2D", inputs, conv_attrs, graph.unique_name(f"{node.name}/conv"),
                       graph).outputs[0]


def _decompose_fused_conv(node: Node, graph: Graph) -> list[Value]:
    inputs = list(node.inputs) + [None] * (4 - len(node.inputs))
    value = _conv_node(graph, node, inputs[2])
    if inputs[3] is not None:
        value = create_node("Add", [value, inputs[3]], {},
                            graph.unique_name(f"{node.name}/residual"), graph).outputs[0]
    return [_activation_nodes(graph, value, node)]


def _decompose_conv_bn_relu(node: Node, graph: Graph) -> list[Value]:
    bias = node.inputs[6] if len(node.inputs) > 6 else None
    conv = _conv_node(graph, node, bias)
    attrs = {"epsilon": node.attrs["epsilon"], "data_format": node.attrs["data_format"]}
    normed = create_node("FusedBatchNorm", [conv, *node.inputs[2:6]], attrs,
                         graph.unique_name(f"{node.name}/bn"), graph)
    return [create_node("Relu", [normed], {}, graph.unique_name(f"{node.name}/relu"),
                        graph).outputs[0]]


_DECOMPOSITIONS: dict[str, Callable[[Node, Graph], list[Value]]] = {
    "FusedConv2D": _decompose_fused_conv,
    "ConvBNReLU": _decompose_conv_bn_relu,
}


def decompose(node: Node, graph: Graph) -> list[Value]:
    """Add to ``graph`` the plain registry ops that compute what the fused ``node`` does
    (reading ``node``'s inputs) and return the values that stand for its outputs.

    ``FusedConv2D``: Conv2D(input, filter, bias) -> Add(residual) -> the activation
    (Relu6 and Clip as ``Clip`` with constant bounds). ``ConvBNReLU``: Conv2D(input,
    filter, bias) -> FusedBatchNorm(scale, offset, mean, variance, epsilon) -> Relu.
    The caller replaces the node's outputs with the returned values and removes it.
    """
    try:
        build = _DECOMPOSITIONS[node.op_type]
    except KeyError:
        raise ValueError(f"{node.op_type} node {node.name!r} is not a fused convolution") \
            from None
    return build(node, graph)
