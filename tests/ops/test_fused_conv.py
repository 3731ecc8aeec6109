"""FusedConv2D and ConvBNReLU: each fused kernel against the registry ops it stands for."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.errors import AttrError, ShapeError
from ge.ops import create_node, evaluate, get_schema, node_cost
from ge.ops.fused_conv import decompose
from tests.tolerance import assert_close

RNG = np.random.default_rng(7)


def const(graph: ge.Graph, name: str, array) -> ge.Node:
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array))}, name, graph)


def data(graph: ge.Graph, name: str, shape, dtype="float32") -> ge.Node:
    return create_node("Data", [], {"shape": list(shape), "dtype": dtype}, name, graph)


def decomposed_outputs(graph: ge.Graph, fused: ge.Node, feeds: dict) -> tuple:
    """(fused op's output, its decomposition's output) on ``feeds``."""
    got = evaluate(graph, feeds)[fused.name]
    replacement = decompose(fused, graph)
    fused.outputs[0].replace_all_uses_with(replacement[0])
    graph.remove_node(fused)
    graph.validate()
    assert "FusedConv2D" not in {n.op_type for n in graph.nodes}
    assert "ConvBNReLU" not in {n.op_type for n in graph.nodes}
    return got, next(iter(evaluate(graph, feeds).values()))


def fused_conv_graph(layout: str, groups: int, activation: str, bias: bool, residual: bool,
                     dtype: str = "float32", **extra):
    graph = ge.Graph("fused")
    shape = (2, 4, 7, 7) if layout == "NCHW" else (2, 7, 7, 4)
    x = data(graph, "x", shape, dtype)
    filter_shape = (8, 4 // groups, 3, 3) if layout == "NCHW" else (3, 3, 4 // groups, 8)
    inputs = [x, const(graph, "w", RNG.standard_normal(filter_shape).astype(dtype)),
              const(graph, "b", RNG.standard_normal(8).astype(dtype)) if bias else None]
    feeds = {"x": RNG.standard_normal(shape).astype(dtype)}
    if residual:
        out_shape = (2, 8, 4, 4) if layout == "NCHW" else (2, 4, 4, 8)
        inputs.append(data(graph, "r", out_shape, dtype))
        feeds["r"] = RNG.standard_normal(out_shape).astype(dtype)
    attrs = dict(data_format=layout, groups=groups, strides=[2, 2], pads=[1, 1, 1, 1],
                 activation=activation, **extra)
    fused = create_node("FusedConv2D", inputs, attrs, "fused", graph)
    graph.set_outputs([fused])
    return graph, fused, feeds


@pytest.mark.parametrize("activation,extra", [
    ("", {}), ("Relu", {}), ("Relu6", {}), ("Clip", {"clip_min": -0.5, "clip_max": 1.5}),
    ("Clip", {"clip_max": 0.25}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}),
    ("Tanh", {}), ("HardSwish", {})])
def test_fused_conv_matches_its_decomposition_for_every_activation(activation, extra):
    graph, fused, feeds = fused_conv_graph("NCHW", 1, activation, True, True, **extra)
    got, expected = decomposed_outputs(graph, fused, feeds)
    assert got.shape == (2, 8, 4, 4)
    assert_close(got, expected, accumulate=True)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("bias,residual", [(False, False), (True, False), (False, True)])
def test_fused_conv_layouts_groups_bias_and_residual(layout, groups, bias, residual):
    graph, fused, feeds = fused_conv_graph(layout, groups, "Relu", bias, residual)
    got, expected = decomposed_outputs(graph, fused, feeds)
    assert_close(got, expected, accumulate=True)


def test_fused_conv_in_float16_stays_float16():
    graph, fused, feeds = fused_conv_graph("NHWC", 1, "Relu6", True, True, dtype="float16")
    got, expected = decomposed_outputs(graph, fused, feeds)
    assert got.dtype == np.float16
    assert_close(got, expected, accumulate=True)


def test_fused_kernel_leaves_its_inputs_alone():
    graph, fused, feeds = fused_conv_graph("NHWC", 1, "Relu", True, True)
    before = {k: v.copy() for k, v in feeds.items()}
    evaluate(graph, feeds)
    for key, value in feeds.items():
        np.testing.assert_array_equal(value, before[key])


def test_residual_must_have_the_output_shape():
    graph = ge.Graph("bad")
    x = data(graph, "x", (1, 5, 5, 3))
    w = const(graph, "w", np.ones((1, 1, 3, 4), np.float32))
    wrong = data(graph, "r", (1, 1, 1, 4))
    with pytest.raises(ShapeError, match="no broadcasting"):
        create_node("FusedConv2D", [x, w, None, wrong], {}, "f", graph)


def test_clip_bounds_and_activation_names_are_checked():
    graph = ge.Graph("bad")
    x = data(graph, "x", (1, 5, 5, 3))
    w = const(graph, "w", np.ones((1, 1, 3, 4), np.float32))
    with pytest.raises(ShapeError, match="clip_min"):
        create_node("FusedConv2D", [x, w], {"activation": "Clip", "clip_min": 2.0,
                                             "clip_max": 1.0}, "f", graph)
    with pytest.raises(AttrError, match="activation"):
        create_node("FusedConv2D", [x, w], {"activation": "Softmax"}, "g", graph)


def test_cost_counts_the_epilogue_on_top_of_the_convolution():
    graph, fused, _ = fused_conv_graph("NHWC", 1, "Relu", True, True)
    conv = create_node("Conv2D", list(fused.inputs[:3]),
                       {k: fused.attrs[k] for k in get_schema("Conv2D").attrs}, "plain", graph)
    assert node_cost(fused).flops == node_cost(conv).flops + 2 * 2 * 4 * 4 * 8
    assert node_cost(fused).bytes > node_cost(conv).bytes


# -- ConvBNReLU -------------------------------------------------------------------------

def conv_bn_relu_chain(bias: bool, layout: str = "NHWC"):
    """The seed's section 5.1 chain: Conv2D -> FusedBatchNorm -> Relu."""
    graph = ge.Graph("chain")
    shape = (2, 8, 8, 3) if layout == "NHWC" else (2, 3, 8, 8)
    x = data(graph, "input", shape)
    filter_shape = (3, 3, 3, 5) if layout == "NHWC" else (5, 3, 3, 3)
    inputs = [x, const(graph, "w", RNG.standard_normal(filter_shape).astype(np.float32))]
    if bias:
        inputs.append(const(graph, "b", RNG.standard_normal(5).astype(np.float32)))
    conv = create_node("Conv2D", inputs, {"strides": [1, 1], "padding": "SAME",
                                          "data_format": layout}, "conv", graph)
    stats = [const(graph, "gamma", RNG.uniform(0.5, 1.5, 5).astype(np.float32)),
             const(graph, "beta", RNG.standard_normal(5).astype(np.float32)),
             const(graph, "mean", RNG.standard_normal(5).astype(np.float32)),
             const(graph, "var", RNG.uniform(0.5, 1.5, 5).astype(np.float32))]
    bn = create_node("FusedBatchNorm", [conv, *stats], {"epsilon": 1e-3, "data_format": layout},
                     "bn", graph)
    graph.set_outputs([create_node("Relu", [bn], {}, "relu", graph)])
    return graph, {"input": RNG.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_seed_replacement_builds_conv_bn_relu_with_the_chain_numbers(bias, layout):
    graph, feeds = conv_bn_relu_chain(bias, layout)
    expected = evaluate(graph, feeds)["relu"]
    pattern = ge.passes.Pattern([ge.passes.Node("Conv2D"), ge.passes.Node("FusedBatchNorm"),
                                 ge.passes.Node("Relu")])
    rule = ge.passes.ReplaceWith("conv_bn_relu_fusion", pattern, "ConvBNReLU")
    result = ge.passes.RewritePass([rule]).run(graph)
    assert result.notes == ["fused 1 Conv2D+FusedBatchNorm+Relu into ConvBNReLU"]
    fused = graph.node("relu")
    assert fused.op_type == "ConvBNReLU"
    assert [v.name for v in fused.inputs] == \
        ["input", "w", "gamma", "beta", "mean", "var"] + (["b"] if bias else [])
    assert fused.attrs["epsilon"] == pytest.approx(1e-3)
    assert fused.attrs["padding"] == "SAME" and fused.attrs["data_format"].value == layout
    assert_close(evaluate(graph, feeds)["relu"], expected, accumulate=True)


def test_conv_bn_relu_matches_its_decomposition():
    graph, feeds = conv_bn_relu_chain(True)
    rule = ge.passes.ReplaceWith("fuse", ge.passes.Pattern(
        [ge.passes.Node("Conv2D"), ge.passes.Node("FusedBatchNorm"), ge.passes.Node("Relu")]),
        "ConvBNReLU")
    ge.passes.RewritePass([rule]).run(graph)
    got, expected = decomposed_outputs(graph, graph.node("relu"), feeds)
    assert_close(got, expected, accumulate=True)
    assert (got >= 0).all()


def test_decompose_refuses_other_ops():
    graph, _ = conv_bn_relu_chain(False)
    with pytest.raises(ValueError, match="not a fused convolution"):
        decompose(graph.node("bn"), graph)
