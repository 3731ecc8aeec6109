"""Convolution fusions: batch norm folding, and bias/activation/residual into FusedConv2D.

Each test builds the graph before, runs the pass, checks the graph after against the
expected one (op types in order, attributes, inputs), and checks the numbers agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.ops import create_node, evaluate
from ge.passes.fusion_conv import BatchNormFoldingPass, ConvFusionPass
from ge.passes.verify import random_feeds
from tests.tolerance import assert_close

RNG = np.random.default_rng(3)


def data(graph, name, shape):
    return create_node("Data", [], {"shape": list(shape)}, name, graph)


def const(graph, name, array):
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array, np.float32))}, name,
                       graph)


def op(graph, op_type, inputs, name, **attrs):
    return create_node(op_type, list(inputs), attrs, name, graph)


def conv(graph, x, name, cout=6, layout="NCHW", groups=1, bias=False, **attrs):
    cin = x.shape[1] if layout == "NCHW" else x.shape[-1]
    shape = (cout, cin // groups, 3, 3) if layout == "NCHW" else (3, 3, cin // groups, cout)
    inputs = [x, const(graph, f"{name}_w", RNG.standard_normal(shape) * 0.3)]
    if bias:
        inputs.append(const(graph, f"{name}_b", RNG.standard_normal(cout)))
    return op(graph, "Conv2D", inputs, name, data_format=layout, groups=groups,
              pads=[1, 1, 1, 1], **attrs)


def batch_norm(graph, x, name, channels=6, layout="NCHW"):
    stats = [const(graph, f"{name}_{s}", v) for s, v in (
        ("gamma", RNG.uniform(0.5, 1.5, channels)), ("beta", RNG.standard_normal(channels)),
        ("mean", RNG.standard_normal(channels)), ("var", RNG.uniform(0.5, 1.5, channels)))]
    return op(graph, "FusedBatchNorm", [x, *stats], name, epsilon=1e-3, data_format=layout)


def apply(pass_, graph):
    """Run ``pass_`` on a copy of ``graph``; check the numbers agree; return (copy, result)."""
    feeds = random_feeds(graph, seed=1)
    expected = evaluate(graph, feeds)
    after = graph.clone()
    result = pass_.run(after)
    after.validate()
    got = evaluate(after, feeds)
    assert list(got) == list(expected), "the graph outputs keep their names"
    for name in expected:
        assert_close(got[name], expected[name], accumulate=True, what=name)
    return after, result


def compute_ops(graph):
    return [n.op_type for n in graph.topological_order() if n.op_type not in ("Data", "Const")]


# -- BatchNormFoldingPass ---------------------------------------------------------------

@pytest.mark.parametrize("layout,groups,bias", [
    ("NCHW", 1, False), ("NCHW", 1, True), ("NHWC", 1, True), ("NCHW", 2, False),
    ("NHWC", 6, False)])
def test_batch_norm_folds_into_the_convolution(layout, groups, bias):
    graph = ge.Graph("before")
    x = data(graph, "x", (2, 6, 5, 5) if layout == "NCHW" else (2, 5, 5, 6))
    c = conv(graph, x, "conv", layout=layout, groups=groups, bias=bias)
    graph.set_outputs([op(graph, "Relu", [batch_norm(graph, c, "bn", layout=layout)], "relu")])
    assert compute_ops(graph) == ["Conv2D", "FusedBatchNorm", "Relu"]

    after, result = apply(BatchNormFoldingPass(), graph)

    assert compute_ops(after) == ["Conv2D", "Relu"]
    folded = after.node("bn")  # the folded convolution takes the batch norm's name
    assert folded.op_type == "Conv2D" and folded.attrs["groups"] == groups
    assert [v.producer.name for v in folded.inputs] == ["x", "conv/folded_filter",
                                                        "conv/folded_bias"]
    assert len(after) == 5  # x, filter, bias, conv, relu: the old constants are gone
    assert result.notes == ["folded 1 FusedBatchNorm into the preceding Conv2D's filter and "
                            "bias"]


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_a_transposed_convolution(group, bias):
    """A DBNet head: ConvTranspose 2x2 stride 2 -> BatchNormalization -> Relu."""
    graph = ge.Graph("head")
    x = data(graph, "x", (1, 4, 5, 5))
    inputs = [x, const(graph, "w", RNG.standard_normal((4, 6 // group, 2, 2)))]
    if bias:
        inputs.append(const(graph, "b", RNG.standard_normal(6)))
    up = op(graph, "ConvTranspose", inputs, "up", strides=[2, 2], group=group)
    graph.set_outputs([op(graph, "Relu", [batch_norm(graph, up, "bn")], "relu")])

    after, result = apply(BatchNormFoldingPass(), graph)

    assert compute_ops(after) == ["ConvTranspose", "Relu"]
    assert after.node("bn").attrs["group"] == group
    assert result.notes == ["folded 1 FusedBatchNorm into the preceding ConvTranspose's "
                            "filter and bias"]


def test_batch_norm_after_bias_add_folds_too():
    graph = ge.Graph("tf_style")
    x = data(graph, "x", (1, 4, 4, 3))
    c = conv(graph, x, "conv", layout="NHWC")
    biased = op(graph, "BiasAdd", [c, const(graph, "b", RNG.standard_normal(6))], "bias_add")
    graph.set_outputs([op(graph, "Relu", [batch_norm(graph, biased, "bn", layout="NHWC")],
                          "relu")])
    after, result = apply(BatchNormFoldingPass(), graph)
    assert compute_ops(after) == ["Conv2D", "Relu"]
    assert "folded 1 Conv2D+BiasAdd into the convolution's bias" in result.notes


def test_weights_that_are_not_constant_are_refused_with_the_reason():
    graph = ge.Graph("trainable")
    x, w = data(graph, "x", (1, 3, 5, 5)), data(graph, "w", (6, 3, 3, 3))
    c = op(graph, "Conv2D", [x, w], "conv", data_format="NCHW", pads=[1, 1, 1, 1])
    graph.set_outputs([batch_norm(graph, c, "bn")])
    after, result = apply(BatchNormFoldingPass(), graph)
    assert compute_ops(after) == ["Conv2D", "FusedBatchNorm"]
    assert result.notes == ["BatchNormIntoConvFusion refused: the filter of Conv2D 'conv' is "
                            "not a constant"]
    assert not result.changed


def test_batch_norm_alone_or_on_another_axis_stays():
    graph = ge.Graph("no_conv")
    x = data(graph, "x", (2, 6, 5, 5))
    alone = batch_norm(graph, op(graph, "Relu", [x], "relu"), "alone")
    c = conv(graph, alone, "conv", cout=5)
    other_axis = batch_norm(graph, c, "other_axis", channels=5, layout="NHWC")
    graph.set_outputs([other_axis])
    after, result = apply(BatchNormFoldingPass(), graph)
    assert compute_ops(after) == ["Relu", "FusedBatchNorm", "Conv2D", "FusedBatchNorm"]
    assert "normalizes NHWC data; Conv2D 'conv' gives NCHW" in result.notes[0]


def test_seed_conv_bn_relu_folds_into_fused_conv():
    graph = ge.Graph("seed")
    x = data(graph, "x", (1, 5, 5, 3))
    c = conv(graph, x, "conv", layout="NHWC", bias=True)
    graph.set_outputs([op(graph, "Relu", [batch_norm(graph, c, "bn", layout="NHWC")], "relu")])
    pattern = ge.passes.Pattern([ge.passes.Node("Conv2D"), ge.passes.Node("FusedBatchNorm"),
                                 ge.passes.Node("Relu")])
    ge.passes.RewritePass([ge.passes.ReplaceWith("seed", pattern, "ConvBNReLU")]).run(graph)
    assert compute_ops(graph) == ["ConvBNReLU"]
    after, result = apply(BatchNormFoldingPass(), graph)
    fused = after.node("relu")
    assert compute_ops(after) == ["FusedConv2D"] and fused.attrs["activation"] == "Relu"
    assert result.notes == ["folded the batch norm of 1 ConvBNReLU into FusedConv2D with Relu"]


# -- ConvFusionPass ---------------------------------------------------------------------

def single_conv_then(activation: str, **attrs):
    graph = ge.Graph("conv_act")
    c = conv(graph, data(graph, "x", (2, 3, 6, 6)), "conv", bias=True)
    if activation == "Clip":
        bounds = [const(graph, name, np.float32(v)) for name, v in zip(("lo", "hi"),
                                                                       attrs.pop("bounds"))]
        out = op(graph, "Clip", [c, *bounds], "act")
    else:
        out = op(graph, activation, [c], "act", **attrs)
    graph.set_outputs([out])
    return graph


@pytest.mark.parametrize("activation,attrs,expected", [
    ("Relu", {}, {"activation": "Relu"}),
    ("Clip", {"bounds": (0, 6)}, {"activation": "Relu6"}),
    ("Clip", {"bounds": (-1, 2)}, {"activation": "Clip", "clip_min": -1.0, "clip_max": 2.0}),
    ("LeakyRelu", {"alpha": 0.3}, {"activation": "LeakyRelu", "alpha": pytest.approx(0.3)}),
    ("Sigmoid", {}, {"activation": "Sigmoid"}),
    ("HardSwish", {}, {"activation": "HardSwish"})])
def test_activation_fuses_into_the_convolution(activation, attrs, expected):
    graph = single_conv_then(activation, **attrs)
    after, result = apply(ConvFusionPass(), graph)
    fused = after.node("act")
    assert compute_ops(after) == ["FusedConv2D"]
    assert {key: fused.attrs[key] for key in expected} == expected
    assert [v.name for v in fused.inputs] == ["x", "conv_w", "conv_b"]
    assert result.notes[0].startswith(f"fused 1 Conv2D+{activation} ")


def residual_block(other_shape=None, activation=True, swap=False):
    graph = ge.Graph("residual")
    x = data(graph, "x", (2, 6, 5, 5))
    c = conv(graph, op(graph, "Relu", [x], "pre"), "conv")
    other = x if other_shape is None else data(graph, "other", other_shape)
    added = op(graph, "Add", [other, c] if swap else [c, other], "add")
    graph.set_outputs([op(graph, "Relu", [added], "relu") if activation else added])
    return graph


@pytest.mark.parametrize("swap", [False, True])
def test_residual_add_and_relu_fuse_into_one_op(swap):
    after, result = apply(ConvFusionPass(), residual_block(swap=swap))
    assert compute_ops(after) == ["Relu", "FusedConv2D"]
    fused = after.node("relu")
    assert fused.attrs["activation"] == "Relu"
    assert [v and v.name for v in fused.inputs] == ["pre", "conv_w", None, "x"]
    assert result.notes == ["fused 1 Conv2D+Add+Relu into FusedConv2D with a residual input"]


def test_residual_add_without_activation():
    after, result = apply(ConvFusionPass(), residual_block(activation=False))
    assert compute_ops(after) == ["Relu", "FusedConv2D"]
    assert after.node("add").attrs["activation"] == ""
    assert result.notes == ["fused 1 Conv2D+Add into FusedConv2D with a residual input"]


def test_broadcast_residual_is_refused_with_the_reason():
    after, result = apply(ConvFusionPass(), residual_block(other_shape=(2, 6, 1, 1)))
    assert compute_ops(after) == ["Relu", "Conv2D", "Add", "Relu"]
    assert result.notes == [
        "ConvResidualActivationFusion refused: Add 'add' broadcasts 'other' [2, 6, 1, 1] to "
        "the convolution's output [2, 6, 5, 5]"]


def test_add_of_two_convolutions_fuses_the_one_used_once():
    graph = ge.Graph("two_convs")
    x = data(graph, "x", (1, 3, 5, 5))
    shared, single = conv(graph, x, "shared"), conv(graph, x, "single")
    added = op(graph, "Add", [shared, single], "add")
    graph.set_outputs([op(graph, "Relu", [added], "relu"), op(graph, "Exp", [shared], "exp")])
    after, _ = apply(ConvFusionPass(), graph)
    fused = after.node("relu")
    assert fused.op_type == "FusedConv2D" and fused.inputs[1].name == "single_w"
    assert fused.inputs[3].name == "shared"


@pytest.mark.parametrize("view,activation", [("Squeeze", "Relu"), ("Flatten", "Sigmoid"),
                                             ("Reshape", "LeakyRelu")])
def test_an_activation_after_a_view_of_the_convolution_fuses_before_the_view(view, activation):
    graph = ge.Graph("conv1d_end")
    c = conv(graph, data(graph, "x", (1, 4, 1, 7)), "conv", cout=5)
    if view == "Squeeze":
        shaped = op(graph, "Squeeze", [c, create_node(
            "Const", [], {"value": ge.Tensor(np.array([2], np.int64))}, "axes", graph)], "view")
    elif view == "Flatten":
        shaped = op(graph, "Flatten", [c], "view", axis=1)
    else:
        shaped = op(graph, "Reshape", [c, create_node(
            "Const", [], {"value": ge.Tensor(np.array([5, 7], np.int64))}, "shape", graph)],
            "view")
    attrs = {"alpha": 0.2} if activation == "LeakyRelu" else {}
    graph.set_outputs([op(graph, activation, [shaped], "act", **attrs)])
    after, result = apply(ConvFusionPass(), graph)
    assert compute_ops(after) == ["FusedConv2D", view]
    fused = after.node("act").inputs[0].producer
    assert fused.attrs["activation"] == activation
    assert result.notes == [f"fused 1 Conv2D+{view}+{activation} into FusedConv2D before the view"]


def test_a_view_read_elsewhere_keeps_the_activation_apart():
    graph = ge.Graph("peek_view")
    c = conv(graph, data(graph, "x", (1, 4, 1, 7)), "conv")
    shaped = op(graph, "Flatten", [c], "view", axis=1)
    graph.set_outputs([op(graph, "Relu", [shaped], "act"), shaped])
    after, result = apply(ConvFusionPass(), graph)
    assert compute_ops(after) == ["Conv2D", "Flatten", "Relu"] and not result.changed


def test_convolution_with_another_consumer_is_not_fused():
    graph = ge.Graph("peek")
    c = conv(graph, data(graph, "x", (1, 3, 5, 5)), "conv")
    graph.set_outputs([op(graph, "Relu", [c], "relu"), c])
    after, result = apply(ConvFusionPass(), graph)
    assert compute_ops(after) == ["Conv2D", "Relu"] and not result.changed


def test_per_channel_constant_add_becomes_the_bias_then_fuses():
    graph = ge.Graph("onnx_bias")
    c = conv(graph, data(graph, "x", (1, 3, 5, 5)), "conv", bias=True)
    shifted = op(graph, "Add", [const(graph, "shift", RNG.standard_normal((6, 1, 1))), c], "add")
    graph.set_outputs([op(graph, "Relu", [shifted], "relu")])
    after, result = apply(ConvFusionPass(), graph)
    assert compute_ops(after) == ["FusedConv2D"]
    assert result.notes == ["folded 1 Conv2D+Add into the convolution's bias",
                            "fused 1 Conv2D+Relu into FusedConv2D"]


def test_the_whole_level_on_a_resnet_block_reports_in_words():
    graph = ge.Graph("block")
    x = data(graph, "x", (1, 6, 5, 5))
    a = op(graph, "Relu", [batch_norm(graph, conv(graph, x, "a"), "bn_a")], "relu_a")
    b = batch_norm(graph, conv(graph, a, "b"), "bn_b")
    graph.set_outputs([op(graph, "Relu", [op(graph, "Add", [b, x], "add")], "out")])
    executable = ge.compile(graph, opt_level=2, verify=True)
    assert compute_ops(executable.graph) == ["FusedConv2D", "FusedConv2D"]
    text = executable.report_text()
    assert "folded 2 FusedBatchNorm into the preceding Conv2D's filter and bias" in text
    assert "fused 1 Conv2D+Add+Relu into FusedConv2D with a residual input" in text
    assert "fused 1 Conv2D+Relu into FusedConv2D" in text
    feeds = random_feeds(graph, seed=2)
    reference = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    optimized = ge.Session(executable).run(feeds)
    assert_close(optimized["out"], reference["out"], accumulate=True)
