"""Convolution fusions: batch norm folded into the convolution's weights, and bias,
activation and residual Add fused into one ``FusedConv2D``.

Each rule is a pattern, a check that says why it refuses, and a rewrite; the shared
``RewritePass`` driver applies them to a fixed point. ``BatchNormFoldingPass`` runs
first (it changes weights, so the folded convolution is then free to fuse), then
``ConvFusionPass``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from ge.ir import Format, Graph, Tensor, Value
from ge.ir import Node as IRNode
from ge.ops import fused_conv
from ge.ops.core import channel_axis
from ge.ops.registry import const_value, create_node
from ge.ops.shape_utils import dims_equal
from ge.passes.base import PassResult
from ge.passes.pattern import Input, Match, Node, Pattern
from ge.passes.rewrite import RewritePass, Rule

__all__ = ["BatchNormFoldingPass", "ConvFusionPass", "BatchNormIntoConvFusion",
           "ConvBNReLUFoldingFusion", "ConvBiasFusion", "ConvActivationFusion",
           "ConvResidualFusion", "ConvResidualActivationFusion", "ConvViewActivationFusion",
           "activation_attrs"]

_CONV_ATTRS = fused_conv.CONV_ATTRS
_ACTIVATION_OPS = tuple(sorted({op for op in fused_conv.ACTIVATIONS.values() if op}))
_MAX_REPORTED_REFUSALS = 3
#: the ops that only re-shape their data input (an activation commutes with them)
_VIEW_OPS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten")


# -- helpers ----------------------------------------------------------------------------

def _filter_output_axis(conv: IRNode) -> int:
    """The axis of the filter that runs over output channels (OIHW: 0, HWIO: 3)."""
    chosen = conv.attrs.get("filter_format") or (
        "OIHW" if conv.attrs["data_format"] is Format.NCHW else "HWIO")
    return 0 if chosen == "OIHW" else 3


def _new_const(graph: Graph, data: Union[np.ndarray, Tensor], name: str) -> Value:
    if not isinstance(data, Tensor):
        array = np.ascontiguousarray(data)
        array.setflags(write=False)
        data = Tensor.wrap(array)
    return create_node("Const", [], {"value": data}, graph.unique_name(name),
                       graph).outputs[0]


def _conv_attrs(node: IRNode) -> dict[str, Any]:
    return {name: node.attrs[name] for name in _CONV_ATTRS}


def _input(node: IRNode, index: int) -> Optional[Value]:
    return node.inputs[index] if index < len(node.inputs) else None


def _constant_or_reason(node: IRNode, index: int, what: str) -> Union[np.ndarray, str]:
    data = const_value(_input(node, index))
    if data is None:
        return f"the {what} of {node.op_type} {node.name!r} is not a constant"
    return data


def activation_attrs(node: IRNode) -> Union[dict[str, Any], str]:
    """FusedConv2D's activation attributes that stand for activation ``node``, or why not.

    ``Clip`` needs constant bounds; ``Clip(0, 6)`` becomes ``Relu6``.
    """
    if node.op_type == "LeakyRelu":
        return {"activation": "LeakyRelu", "alpha": node.attrs["alpha"]}
    if node.op_type == "Swish" and float(node.attrs.get("alpha", 1.0)) != 1.0:
        return f"Swish {node.name!r} has alpha {node.attrs['alpha']} (only SiLU, alpha 1, fuses)"
    if node.op_type != "Clip":
        return {"activation": node.op_type}
    bounds: list[Optional[float]] = []
    for index, what in ((1, "min"), (2, "max")):
        value = _input(node, index)
        data = const_value(value)
        if value is not None and data is None:
            return f"the {what} of Clip {node.name!r} is not a constant"
        bounds.append(None if data is None else float(data.reshape(())))
    if bounds == [0.0, 6.0]:
        return {"activation": "Relu6"}
    return {"activation": "Clip", "clip_min": bounds[0], "clip_max": bounds[1]}


def _bare_convolution(node: IRNode) -> Union[bool, str]:
    """A pattern condition: a Conv2D, or a FusedConv2D without activation or residual, read
    by one node only (checked here, while matching, so that a commutative Add whose other
    operand is the single-use convolution is tried the other way round)."""
    output = node.outputs[0]
    if output.num_users != 1 or output.is_graph_output():
        return f"{node.op_type} {node.name!r} has other consumers"
    if node.op_type == "Conv2D":
        return True
    if node.attrs.get("activation"):
        return f"FusedConv2D {node.name!r} already applies {node.attrs['activation']}"
    if _input(node, 3) is not None:
        return f"FusedConv2D {node.name!r} already adds a residual"
    return True


def _fits_without_broadcast(residual: Value, output: Value) -> bool:
    """True when adding ``residual`` to ``output`` cannot broadcast ``output`` up: every
    dimension the same (equal sizes or names), or the output's a known size above 1."""
    if len(residual.shape) != len(output.shape):
        return False
    return all(mine == theirs or (isinstance(theirs, int) and theirs > 1 and dims_equal(
        mine, theirs)) for mine, theirs in zip(residual.shape, output.shape))


def _fused(graph: Graph, conv: IRNode, residual: Optional[Value], extra: dict[str, Any]
           ) -> list[Value]:
    """A FusedConv2D doing what ``conv`` does (Conv2D or bare FusedConv2D), plus ``extra``."""
    inputs = [conv.inputs[0], conv.inputs[1], _input(conv, 2),
              residual if residual is not None else _input(conv, 3)]
    while inputs and inputs[-1] is None:
        inputs.pop()
    attrs = {**_conv_attrs(conv), **extra}
    node = create_node("FusedConv2D", inputs, attrs, graph.unique_name("fused_conv2d"), graph)
    return list(node.outputs)


class _ConvRule(Rule):
    """A rule that counts the kinds of matches it rewrote and the reasons it refused."""

    #: the report line: ``{count}`` rewrites of ``{kinds}`` (e.g. "33 Conv2D+Relu")
    summary = "rewrote {kinds}"
    #: whether the pass lists this rule's refusals in the report
    reports_refusals = False

    def __init__(self) -> None:
        self.name = type(self).__name__
        self.kinds: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()

    def why_not(self, match: Match) -> Optional[str]:
        """Why this match must not be rewritten (None: go ahead)."""
        return None

    def check(self, match: Match) -> Optional[str]:
        reason = self.why_not(match)
        if reason is not None:
            self.refusals[reason] += 1
        return reason

    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        self.kinds[self.kind(match)] += 1
        return self.build(match, graph)

    def kind(self, match: Match) -> str:
        """How the report names this kind of match (``Conv2D+Relu``)."""
        return match.describe()

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        """Add the replacement; return the values that replace the root's outputs."""
        raise NotImplementedError

    def describe(self, applied: int, example: str) -> str:
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.kinds.most_common())
        return self.summary.format(count=applied, kinds=kinds or f"{applied} {example}")


class _ConvRewritePass(RewritePass):
    """The rewrite driver, adding the refusals of rules that report them to the notes
    (each distinct reason once: the driver retries a refused match every round)."""

    def run(self, graph: Graph) -> PassResult:
        result = super().run(graph)
        for rule in self.rules:
            if not isinstance(rule, _ConvRule) or not rule.reports_refusals:
                continue
            reasons = list(rule.refusals)
            if reasons:
                shown = "; ".join(reasons[:_MAX_REPORTED_REFUSALS])
                more = len(reasons) - _MAX_REPORTED_REFUSALS
                tail = f" (and {more} more)" if more > 0 else ""
                result.notes.append(f"{rule.name} refused: {shown}{tail}")
        return result


# -- batch norm folding -----------------------------------------------------------------

def _fold_factors(stats: list[np.ndarray], epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) with BN(y) = y * scale + shift, in float64."""
    scale, offset, mean, variance = (s.astype(np.float64) for s in stats)
    factor = scale / np.sqrt(variance + epsilon)
    return factor, offset - mean * factor


def _folded_weights(conv: IRNode, filter_data: np.ndarray, bias: Optional[np.ndarray],
                    stats: list[np.ndarray], epsilon: float) -> tuple[Tensor, np.ndarray]:
    """The filter scaled along its output channels (computed when first read, so that a
    later layout change transposes and scales in one pass) and the new bias."""
    factor, shift = _fold_factors(stats, epsilon)
    new_filter = Tensor.scaled(filter_data, factor, _filter_output_axis(conv))
    old_bias = np.zeros_like(factor) if bias is None else bias.astype(np.float64)
    return new_filter, (old_bias * factor + shift).astype(filter_data.dtype)


def _stats_or_reason(node: IRNode, first: int) -> Union[list[np.ndarray], str]:
    stats: list[np.ndarray] = []
    for offset, what in enumerate(("scale", "offset", "mean", "variance")):
        data = _constant_or_reason(node, first + offset, what)
        if isinstance(data, str):
            return data
        stats.append(data)
    return stats


def _weights_or_reason(conv: IRNode, bias_index: int
                       ) -> Union[tuple[np.ndarray, Optional[np.ndarray]], str]:
    filter_data = _constant_or_reason(conv, 1, "filter")
    if isinstance(filter_data, str):
        return filter_data
    if _input(conv, bias_index) is None:
        return filter_data, None
    bias = _constant_or_reason(conv, bias_index, "bias")
    return bias if isinstance(bias, str) else (filter_data, bias)


class BatchNormIntoConvFusion(_ConvRule):
    """FusedBatchNorm(Conv2D(x, W, b)) -> Conv2D(x, W * s, (b - mean) * s + offset), with
    s = scale / sqrt(variance + epsilon) along W's output channels (any data and filter
    format, any groups). Refuses when W, b or the statistics are not constants, or when
    the batch norm's channel axis is not the convolution's."""

    summary = "folded {count} FusedBatchNorm into the preceding Conv2D's filter and bias"
    reports_refusals = True
    pattern = Pattern(Node("FusedBatchNorm", name="bn", inputs=[
        Node("Conv2D", name="conv", inputs=[Input("x")])]))

    def _parts(self, match: Match) -> Union[tuple[Any, ...], str]:
        conv, bn = match.node("conv"), match.node("bn")
        if bn.attrs["data_format"] is not conv.attrs["data_format"]:
            return (f"FusedBatchNorm {bn.name!r} normalizes {bn.attrs['data_format'].value} "
                    f"data; Conv2D {conv.name!r} gives {conv.attrs['data_format'].value}")
        weights = _weights_or_reason(conv, 2)
        stats = _stats_or_reason(bn, 1)
        for found in (weights, stats):
            if isinstance(found, str):
                return found
        return weights, stats

    def why_not(self, match: Match) -> Optional[str]:
        parts = self._parts(match)
        return parts if isinstance(parts, str) else None

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        conv, bn = match.node("conv"), match.node("bn")
        parts = self._parts(match)
        assert not isinstance(parts, str)
        (filter_data, bias), stats = parts
        new_filter, new_bias = _folded_weights(conv, filter_data, bias, stats,
                                               bn.attrs["epsilon"])
        inputs = [conv.inputs[0], _new_const(graph, new_filter, f"{conv.name}/folded_filter"),
                  _new_const(graph, new_bias, f"{conv.name}/folded_bias")]
        return create_node("Conv2D", inputs, _conv_attrs(conv), graph.unique_name("conv2d"),
                           graph).outputs


class BatchNormIntoConvTransposeFusion(_ConvRule):
    """FusedBatchNorm(ConvTranspose(x, W, B)) -> ConvTranspose(x, W * s, (B - mean) * s +
    offset): a detector head's upsampling followed by a batch norm. ONNX's filter is
    ``[C, M / group, k...]``, so output channel ``g * M / group + m`` is the filter's
    ``[g * C / group: (g + 1) * C / group, m]``. Refuses when W, B or the statistics are
    not constants, or when the batch norm's data is not channels-first."""

    summary = "folded {count} FusedBatchNorm into the preceding ConvTranspose's filter and bias"
    reports_refusals = True
    pattern = Pattern(Node("FusedBatchNorm", name="bn", inputs=[
        Node("ConvTranspose", name="deconv", inputs=[Input("x")])]))

    def _parts(self, match: Match) -> Union[tuple[Any, ...], str]:
        deconv, bn = match.node("deconv"), match.node("bn")
        if bn.attrs["data_format"] is not Format.NCHW:
            return (f"FusedBatchNorm {bn.name!r} normalizes "
                    f"{bn.attrs['data_format'].value} data; ConvTranspose {deconv.name!r} "
                    f"gives NCHW")
        weights = _weights_or_reason(deconv, 2)
        stats = _stats_or_reason(bn, 1)
        for found in (weights, stats):
            if isinstance(found, str):
                return found
        return weights, stats

    def why_not(self, match: Match) -> Optional[str]:
        parts = self._parts(match)
        return parts if isinstance(parts, str) else None

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        deconv, bn = match.node("deconv"), match.node("bn")
        parts = self._parts(match)
        assert not isinstance(parts, str)
        (filter_data, bias), stats = parts
        factor, shift = _fold_factors(stats, bn.attrs["epsilon"])
        group = int(deconv.attrs["group"])
        channels, per_group = filter_data.shape[0], filter_data.shape[1]
        grouped = filter_data.astype(np.float64).reshape(
            group, channels // group, per_group, *filter_data.shape[2:])
        scale = factor.reshape(group, 1, per_group, *([1] * (filter_data.ndim - 2)))
        new_filter = (grouped * scale).reshape(filter_data.shape).astype(filter_data.dtype)
        old_bias = np.zeros_like(factor) if bias is None else bias.astype(np.float64)
        new_bias = (old_bias * factor + shift).astype(filter_data.dtype)
        inputs = [deconv.inputs[0],
                  _new_const(graph, new_filter, f"{deconv.name}/folded_filter"),
                  _new_const(graph, new_bias, f"{deconv.name}/folded_bias")]
        return create_node("ConvTranspose", inputs, dict(deconv.attrs),
                           graph.unique_name("conv_transpose"), graph).outputs


class ConvBNReLUFoldingFusion(_ConvRule):
    """ConvBNReLU(x, W, scale, offset, mean, variance, b) -> FusedConv2D(x, W * s, b',
    activation=Relu): the seed's fused op with its batch norm folded into the weights.
    Refuses when the weights or statistics are not constants."""

    summary = "folded the batch norm of {count} ConvBNReLU into FusedConv2D with Relu"
    reports_refusals = True
    pattern = Pattern(Node("ConvBNReLU", name="conv"))

    def why_not(self, match: Match) -> Optional[str]:
        conv = match.node("conv")
        for found in (_weights_or_reason(conv, 6), _stats_or_reason(conv, 2)):
            if isinstance(found, str):
                return found
        return None

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        conv = match.node("conv")
        weights, stats = _weights_or_reason(conv, 6), _stats_or_reason(conv, 2)
        assert not isinstance(weights, str) and not isinstance(stats, str)
        new_filter, new_bias = _folded_weights(conv, weights[0], weights[1], stats,
                                               conv.attrs["epsilon"])
        inputs = [conv.inputs[0], _new_const(graph, new_filter, f"{conv.name}/folded_filter"),
                  _new_const(graph, new_bias, f"{conv.name}/folded_bias")]
        attrs = {**_conv_attrs(conv), "activation": "Relu"}
        return create_node("FusedConv2D", inputs, attrs, graph.unique_name("fused_conv2d"),
                           graph).outputs


# -- bias -------------------------------------------------------------------------------

def _channel_vector(conv: IRNode, adder: IRNode, data: np.ndarray) -> Union[np.ndarray, str]:
    """The per-output-channel vector that ``adder`` (BiasAdd or Add) adds, or why it is not one."""
    layout = conv.attrs["data_format"]
    if adder.op_type == "BiasAdd":
        if adder.attrs["data_format"] is not layout and len(conv.outputs[0].shape) == 4:
            return f"BiasAdd {adder.name!r} adds along another axis than the channels"
        return data
    axis = channel_axis(layout, 4)
    if data.ndim > 4:
        return f"Add {adder.name!r} broadcasts the convolution to rank {data.ndim}"
    full = data.reshape((1,) * (4 - data.ndim) + data.shape)
    if any(full.shape[index] != 1 for index in range(4) if index != axis):
        return (f"Add {adder.name!r} adds a constant of shape {list(data.shape)}, not one "
                f"value per channel")
    channels = conv.outputs[0].shape[axis]
    return np.broadcast_to(full.reshape(-1), (channels,)) if isinstance(channels, int) \
        else full.reshape(-1)


class ConvBiasFusion(_ConvRule):
    """BiasAdd(Conv2D(x, W, b), c) or Add(Conv2D(x, W, b), c) -> Conv2D(x, W, b + c) for a
    constant c holding one value per output channel. Refuses when c is not constant, not a
    per-channel vector in the convolution's layout, or b is not constant."""

    summary = "folded {kinds} into the convolution's bias"
    pattern = Pattern(Node(("BiasAdd", "Add"), name="add", inputs=[
        Node("Conv2D", name="conv"), Input("bias")]))

    def _bias(self, match: Match) -> Union[np.ndarray, str]:
        conv, adder = match.node("conv"), match.node("add")
        data = const_value(match.value("bias"))
        if data is None:
            return f"{adder.op_type} {adder.name!r} adds a value that is not a constant"
        vector = _channel_vector(conv, adder, data)
        if isinstance(vector, str):
            return vector
        if _input(conv, 2) is None:
            return vector.astype(data.dtype)
        old = _constant_or_reason(conv, 2, "bias")
        return old if isinstance(old, str) else (old + vector).astype(old.dtype)

    def why_not(self, match: Match) -> Optional[str]:
        found = self._bias(match)
        return found if isinstance(found, str) else None

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        conv, bias = match.node("conv"), self._bias(match)
        assert not isinstance(bias, str)
        inputs = [conv.inputs[0], conv.inputs[1], _new_const(graph, bias, f"{conv.name}/bias")]
        return create_node("Conv2D", inputs, _conv_attrs(conv), graph.unique_name("conv2d"),
                           graph).outputs


# -- activation and residual ------------------------------------------------------------

def _conv_pattern() -> Node:
    return Node(("Conv2D", "FusedConv2D"), name="conv", where=_bare_convolution)


def _kind_with_activation(match: Match) -> str:
    """``Conv2D+Clip (Relu6)`` where the fused activation is not the op's name."""
    found = activation_attrs(match.node("act"))
    name = found if isinstance(found, str) else found["activation"]
    return match.describe() + ("" if name == match.node("act").op_type else f" ({name})")


def _residual_reason(match: Match) -> Optional[str]:
    conv, adder, other = match.node("conv"), match.node("add"), match.value("residual")
    if other.producer is conv:
        return f"Add {adder.name!r} adds the convolution {conv.name!r} to itself"
    if not _fits_without_broadcast(other, conv.outputs[0]) or \
            other.dtype is not conv.outputs[0].dtype:
        return (f"Add {adder.name!r} broadcasts {other.name!r} {list(other.shape)} to the "
                f"convolution's output {list(conv.outputs[0].shape)}")
    return None


class ConvActivationFusion(_ConvRule):
    """act(Conv2D(x, W, b)) -> FusedConv2D(x, W, b, activation=act) for Relu, Clip (Relu6
    when it clips to [0, 6]), LeakyRelu, Sigmoid, Tanh, HardSwish and Swish with alpha 1
    (SiLU); a FusedConv2D without an activation takes one too. Refuses Clip with bounds
    that are not constants, and Swish with another alpha."""

    summary = "fused {kinds} into FusedConv2D"
    pattern = Pattern(Node(_ACTIVATION_OPS, name="act", inputs=[_conv_pattern()]))

    def kind(self, match: Match) -> str:
        return _kind_with_activation(match)

    def why_not(self, match: Match) -> Optional[str]:
        found = activation_attrs(match.node("act"))
        return found if isinstance(found, str) else None

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        extra = activation_attrs(match.node("act"))
        assert not isinstance(extra, str)
        return _fused(graph, match.node("conv"), None, extra)


class ConvResidualActivationFusion(_ConvRule):
    """act(Add(Conv2D(x, W, b), r)) -> FusedConv2D(x, W, b, residual=r, activation=act),
    the ResNet block's end. Refuses when r does not have the convolution's output shape
    (a broadcast) or the activation cannot be fused."""

    summary = "fused {kinds} into FusedConv2D with a residual input"
    reports_refusals = True
    pattern = Pattern(Node(_ACTIVATION_OPS, name="act", inputs=[
        Node("Add", name="add", inputs=[_conv_pattern(), Input("residual")])]))

    def kind(self, match: Match) -> str:
        return _kind_with_activation(match)

    def why_not(self, match: Match) -> Optional[str]:
        found = activation_attrs(match.node("act"))
        return found if isinstance(found, str) else _residual_reason(match)

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        extra = activation_attrs(match.node("act"))
        assert not isinstance(extra, str)
        return _fused(graph, match.node("conv"), match.value("residual"), extra)


class ConvViewActivationFusion(ConvActivationFusion):
    """act(view(Conv2D(x, W, b))) -> view(FusedConv2D(x, W, b, activation=act)) where the
    view (Reshape, Squeeze, Unsqueeze or Flatten) reads only the convolution: a Conv1d's
    squeeze back to 3-D, or a flatten, between the convolution and its activation. The
    activation is elementwise, so it gives the same elements before the view as after.
    Refuses what ``ConvActivationFusion`` refuses (its ``kind`` and ``why_not``)."""

    summary = "fused {kinds} into FusedConv2D before the view"
    pattern = Pattern(Node(_ACTIVATION_OPS, name="act", inputs=[
        Node(_VIEW_OPS, name="view", inputs=[_conv_pattern()])]))

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        extra = activation_attrs(match.node("act"))
        assert not isinstance(extra, str)
        view = match.node("view")
        fused = _fused(graph, match.node("conv"), None, extra)[0]
        again = create_node(view.op_type, [fused, *view.inputs[1:]], dict(view.attrs),
                            graph.unique_name(view.name), graph)
        again.outputs[0].format = view.outputs[0].format
        return [again.outputs[0]]


def _not_before_activation(adder: IRNode) -> Union[bool, str]:
    """A pattern condition: the Add's only consumer is not an activation that
    ``ConvResidualActivationFusion`` will take together with it."""
    value = adder.outputs[0]
    users = value.users
    if len(users) == 1 and not value.is_graph_output():
        user = users[0].node
        if user.op_type in _ACTIVATION_OPS and not isinstance(activation_attrs(user), str):
            return f"Add {adder.name!r} is left to fuse with {user.op_type} {user.name!r}"
    return True


class ConvResidualFusion(_ConvRule):
    """Add(Conv2D(x, W, b), r) -> FusedConv2D(x, W, b, residual=r) when no activation
    follows. Refuses when r does not have the convolution's output shape and dtype (a
    broadcast: the fused op adds the residual elementwise, without broadcasting)."""

    summary = "fused {kinds} into FusedConv2D with a residual input"
    reports_refusals = True
    pattern = Pattern(Node("Add", name="add", where=_not_before_activation,
                           inputs=[_conv_pattern(), Input("residual")]))

    def why_not(self, match: Match) -> Optional[str]:
        return _residual_reason(match)

    def build(self, match: Match, graph: Graph) -> Sequence[Value]:
        return _fused(graph, match.node("conv"), match.value("residual"), {})


# -- the passes -------------------------------------------------------------------------

class BatchNormFoldingPass(_ConvRewritePass):
    """Batch norm folded into convolution weights.

    FusedBatchNorm(Conv2D(x, W, b)) -> Conv2D(x, W', b') with new constant W' and b'
    (any data_format, filter_format and groups); FusedBatchNorm(ConvTranspose(x, W, B))
    likewise; ConvBNReLU -> FusedConv2D(W', b', Relu);
    a constant per-channel BiasAdd/Add after a convolution is first folded into its bias,
    so Conv2D -> BiasAdd -> FusedBatchNorm folds too. Refuses (and says so in the report)
    when the filter, bias or statistics are not constants, or when the batch norm's channel
    axis is not the convolution's; a FusedBatchNorm that follows no convolution stays.
    """

    def __init__(self) -> None:
        super().__init__([ConvBiasFusion(), BatchNormIntoConvFusion(),
                          BatchNormIntoConvTransposeFusion(), ConvBNReLUFoldingFusion()],
                         name="BatchNormFoldingPass")


class ConvFusionPass(_ConvRewritePass):
    """Bias, activation and residual Add fused into the convolution.

    Conv2D -> BiasAdd/Add(per-channel constant) => Conv2D with bias;
    Conv2D -> act => FusedConv2D(activation=act) (Relu, Clip as Relu6 or clip, LeakyRelu,
    Sigmoid, Tanh, HardSwish); Conv2D -> Add(r) [-> act] => FusedConv2D(residual=r
    [, activation=act]). Refuses a residual that is broadcast (not the convolution's output
    shape), an activation with non-constant parameters, and any match whose inner node has
    another consumer or is a graph output.
    """

    def __init__(self) -> None:
        super().__init__([ConvBiasFusion(), ConvResidualActivationFusion(),
                          ConvActivationFusion(), ConvViewActivationFusion(),
                          ConvResidualFusion()], name="ConvFusionPass")
