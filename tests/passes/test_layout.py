"""The layout pass: NCHW convolution chains turned NHWC with transposes only at their ends.

Each test shows the graph before, the graph expected after, and checks the numbers agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from ge.ir import Format
from ge.ops import Attr, AttrType, LayoutRole, create_node, evaluate, register_op, registry
from ge.passes.layout import LayoutPass
from ge.passes.verify import random_feeds
from tests.tolerance import assert_close

RNG = np.random.default_rng(5)


def data(graph, name, shape):
    return create_node("Data", [], {"shape": list(shape)}, name, graph)


def const(graph, name, array):
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array, np.float32))}, name,
                       graph)


def op(graph, op_type, inputs, name, **attrs):
    return create_node(op_type, list(inputs), attrs, name, graph)


def conv(graph, x, name, cout=4, kernel=3, stride=1, groups=1, fused=False, **attrs):
    cin = x.shape[1]
    w = const(graph, f"{name}_w", RNG.standard_normal((cout, cin // groups, kernel, kernel)))
    pad = kernel // 2
    return op(graph, "FusedConv2D" if fused else "Conv2D", [x, w, *attrs.pop("extra", [])],
              name, data_format="NCHW", filter_format="OIHW", strides=[1, 1, stride, stride],
              pads=[pad] * 4, groups=groups, **attrs)


def apply(graph, pass_=None):
    """Run the layout pass on a copy; check the numbers agree; return (copy, result)."""
    feeds = random_feeds(graph, seed=4)
    expected = evaluate(graph, feeds)
    after = graph.clone()
    result = (pass_ or LayoutPass()).run(after)
    after.validate()
    got = evaluate(after, feeds)
    assert list(got) == list(expected)
    for name in expected:
        assert_close(got[name], expected[name], accumulate=True, what=name)
    return after, result


def summary(graph):
    """Each compute node as ``op_type[layout]`` (Transpose with its perm), in order."""
    lines = []
    for node in graph.topological_order():
        if node.op_type in ("Data", "Const"):
            continue
        if node.op_type == "Transpose":
            lines.append(f"Transpose{node.attrs['perm']}")
        elif "data_format" in node.attrs:
            lines.append(f"{node.op_type}[{node.attrs['data_format'].value}]")
        else:
            lines.append(node.op_type)
    return lines


def cnn():
    """x -> Conv -> Relu -> MaxPool -> FusedConv(residual) -> GlobalAveragePool -> Flatten."""
    graph = ge.Graph("cnn")
    x = data(graph, "x", ("batch", 3, 8, 8))
    a = op(graph, "Relu", [conv(graph, x, "a")], "relu")
    pooled = op(graph, "MaxPool", [a], "pool", ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2],
                data_format="NCHW")
    b = conv(graph, pooled, "b", fused=True, activation="Relu", extra=[None, pooled])
    gap = op(graph, "GlobalAveragePool", [b], "gap", data_format="NCHW")
    graph.set_outputs([op(graph, "Flatten", [gap], "flat")])
    return graph


def test_a_convolution_chain_gets_transposes_only_at_its_ends():
    graph = cnn()
    assert summary(graph) == ["Conv2D[NCHW]", "Relu", "MaxPool[NCHW]", "FusedConv2D[NCHW]",
                              "GlobalAveragePool[NCHW]", "Flatten"]
    after, result = apply(graph)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "Relu", "MaxPool[NHWC]",
                              "FusedConv2D[NHWC]", "GlobalAveragePool[NHWC]",
                              "Transpose[0, 3, 1, 2]", "Flatten"]
    assert len(after) == len(graph) + 2
    conv_a = after.node("a")
    assert conv_a.attrs["filter_format"] == "HWIO" and conv_a.inputs[1].shape == (3, 3, 3, 4)
    assert after.node("pool").attrs["ksize"] == [1, 2, 2, 1]
    assert after.node("gap").outputs[0].shape == ("batch", 1, 1, 4)
    assert result.counts["transposes inserted"] == 2
    assert result.notes[1] == (
        "inserted 2 Transpose at region ends: before Conv2D 'a' (graph input 'x' is NCHW); "
        "after GlobalAveragePool 'gap' (read in NCHW by Flatten 'flat')")
    assert result.notes[0].startswith("converted 5 ops to NHWC in 1 region(s)")


def test_every_layout_op_converts():
    graph = ge.Graph("zoo_of_ops")
    x = data(graph, "x", (2, 3, 6, 6))
    stats = [const(graph, f"s{i}", RNG.uniform(0.5, 1.5, 4)) for i in range(4)]
    w = const(graph, "w", RNG.standard_normal((4, 3, 3, 3)))
    fused = op(graph, "ConvBNReLU", [x, w, *stats], "cbr", data_format="NCHW",
               pads=[1, 1, 1, 1], strides=[1, 1, 1, 1])
    biased = op(graph, "BiasAdd", [fused, stats[1]], "bias", data_format="NCHW")
    normed = op(graph, "FusedBatchNorm", [biased, *stats], "bn", data_format="NCHW")
    pooled = op(graph, "AvgPool", [normed], "avg", ksize=[1, 1, 3, 3], strides=[1, 1, 2, 2],
                pads=[1, 1, 1, 1], data_format="NCHW")
    graph.set_outputs([op(graph, "GlobalMaxPool", [pooled], "gmp", data_format="NCHW")])
    after, result = apply(graph)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "ConvBNReLU[NHWC]", "BiasAdd[NHWC]",
                              "FusedBatchNorm[NHWC]", "AvgPool[NHWC]", "GlobalMaxPool[NHWC]",
                              "Transpose[0, 3, 1, 2]"]
    assert after.node("cbr").attrs["strides"] == [1, 1, 1, 1]
    assert after.node("avg").attrs["strides"] == [1, 2, 2, 1]
    assert result.counts["transposes inserted"] == 2


def test_a_layout_sensitive_op_between_chains_splits_them():
    graph = ge.Graph("two_chains")
    x = data(graph, "x", (1, 3, 6, 6))
    first = conv(graph, x, "first")
    squashed = op(graph, "Softmax", [first], "softmax", axis=1)
    graph.set_outputs([conv(graph, squashed, "second")])
    after, result = apply(graph)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "Transpose[0, 3, 1, 2]",
                              "Softmax", "Transpose[0, 2, 3, 1]", "Conv2D[NHWC]",
                              "Transpose[0, 3, 1, 2]"]
    assert result.counts["transposes inserted"] == 4
    assert "(read in NCHW by the graph output)" in result.notes[1]


def test_a_graph_output_keeps_its_name():
    graph = ge.Graph("out")
    graph.set_outputs([conv(graph, data(graph, "x", (1, 3, 6, 6)), "conv")])
    after, _ = apply(graph)
    assert [v.name for v in after.outputs] == ["conv"]
    assert after.outputs[0].producer.op_type == "Transpose"


def test_regions_without_a_convolution_stay():
    graph = ge.Graph("pool_only")
    x = data(graph, "x", (1, 3, 6, 6))
    graph.set_outputs([op(graph, "MaxPool", [x], "pool", ksize=[2, 2], data_format="NCHW")])
    after, result = apply(graph)
    assert summary(after) == ["MaxPool[NCHW]"] and not result.changed
    assert result.notes == ["left 1 NCHW region(s) without a convolution as they are"]


def test_filters_that_are_not_constant_stay_oihw():
    graph = ge.Graph("weights_fed")
    x, w = data(graph, "x", (1, 3, 6, 6)), data(graph, "w", (4, 3, 3, 3))
    graph.set_outputs([op(graph, "Conv2D", [x, w], "conv", data_format="NCHW")])
    after, _ = apply(graph)
    assert after.node("conv").attrs["filter_format"] == "OIHW"
    assert after.node("conv").attrs["data_format"] is Format.NHWC


def test_elementwise_constants_are_transposed_and_scalars_kept():
    graph = ge.Graph("affine")
    c = conv(graph, data(graph, "x", (1, 3, 5, 5)), "conv")
    scaled = op(graph, "Mul", [c, const(graph, "scale", RNG.standard_normal((4, 1, 1)))], "mul")
    shifted = op(graph, "Add", [scaled, const(graph, "one", 1.0)], "add")
    graph.set_outputs([conv(graph, shifted, "conv2")])
    after, _ = apply(graph)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "Mul", "Add",
                              "Conv2D[NHWC]", "Transpose[0, 3, 1, 2]"]
    assert after.node("mul").inputs[1].shape == (1, 1, 1, 4)
    assert after.node("add").inputs[1].producer.name == "one"


def test_an_existing_transpose_into_the_chain_is_cancelled():
    graph = ge.Graph("from_tf")
    x = data(graph, "x", (1, 6, 6, 3))
    nchw = op(graph, "Transpose", [x], "to_nchw", perm=[0, 3, 1, 2])
    graph.set_outputs([op(graph, "Relu", [conv(graph, nchw, "conv")], "relu")])
    after, result = apply(graph)
    assert summary(after) == ["Conv2D[NHWC]", "Relu", "Transpose[0, 3, 1, 2]"]
    assert after.node("conv").inputs[0].name == "x"
    assert result.notes[-1] == ("cancelled 1 existing Transpose: Transpose 'to_nchw' before "
                                "Conv2D 'conv'")


def test_the_target_can_be_nchw():
    from examples.seed_4_2_cnn import build_cnn_model

    graph = build_cnn_model()
    after, result = apply(graph, LayoutPass(target=Format.NCHW))
    layouts = {n.attrs["data_format"] for n in after.nodes if n.op_type == "Conv2D"}
    assert layouts == {Format.NCHW} and result.counts["transposes inserted"] >= 2
    unchanged, nothing = apply(graph)  # already NHWC: nothing to do
    assert not nothing.changed and len(unchanged) == len(graph)


def test_level_3_on_the_zoo_cnn_verifies(exported):
    _, path = exported("simple_cnn", False)
    graph = ge.parse_onnx(str(path))
    executable = ge.compile(graph, opt_level=3, verify=True)
    ops = [n.op_type for n in executable.graph.nodes]
    # the input's to_nhwc only: the to_nchw before the flatten is folded into the weight
    assert ops.count("Transpose") == 1 and "FusedBatchNorm" not in ops
    feeds = random_feeds(graph, seed=0)
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    got = ge.Session(executable).run(feeds)
    for name in want:
        assert_close(got[name], want[name], accumulate=True)


# -- property: random convolution chains ------------------------------------------------

@st.composite
def conv_chains(draw):
    """A random NCHW chain of convolutions, activations, pools and residual adds."""
    graph = ge.Graph("random")
    channels = draw(st.sampled_from([2, 4]))
    x = data(graph, "x", (draw(st.integers(1, 2)), channels, 6, 6))
    value = x
    for index in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["conv", "depthwise", "relu", "pool", "residual", "bn"]))
        name = f"n{index}"
        if kind in ("conv", "depthwise", "residual"):
            groups = channels if kind == "depthwise" else 1
            step = conv(graph, value, name, cout=channels, groups=groups,
                        kernel=draw(st.sampled_from([1, 3])))
            value = op(graph, "Add", [step, value], f"{name}_add") if kind == "residual" \
                else step
        elif kind == "relu":
            value = op(graph, "Relu", [value], name)
        elif kind == "pool":
            value = op(graph, "AvgPool", [value], name, ksize=[3, 3], pads=[1, 1, 1, 1],
                       data_format="NCHW")
        else:
            stats = [const(graph, f"{name}_{i}", RNG.uniform(0.5, 1.5, channels))
                     for i in range(4)]
            value = op(graph, "FusedBatchNorm", [value, *stats], name, data_format="NCHW")
    graph.set_outputs([op(graph, "Sigmoid", [value], "out")])
    return graph


@settings(max_examples=25, deadline=None)
@given(conv_chains())
def test_level_3_gives_level_0_outputs_and_grows_only_by_end_transposes(graph):
    reference = ge.compile(graph, opt_level=0)
    optimized = ge.compile(graph, opt_level=3)
    feeds = random_feeds(graph, seed=9)
    want, got = ge.Session(reference).run(feeds), ge.Session(optimized).run(feeds)
    assert_close(got["out"], want["out"], accumulate=True)
    inserted = sum(p["counts"].get("transposes inserted", 0)
                   for p in optimized.report["passes"])
    assert len(optimized.graph) <= len(reference.graph) + inserted
    assert inserted in (0, 2)  # one chain: in and out, or nothing to convert


@pytest.fixture()
def channel_scale_op():
    """A throwaway op ``TestChannelScale`` (y = x * (channel index + 1)) that declares how it
    reads its layout, and nothing else: the pass must learn it from the registry."""

    def channel_scale_kernel(x: np.ndarray, *, data_format: Format) -> np.ndarray:
        """y = x scaled by (its channel index + 1), channels on data_format's channel axis."""
        axis = 1 if data_format is Format.NCHW else 3
        shape = [1, 1, 1, 1]
        shape[axis] = x.shape[axis]
        return x * np.arange(1, x.shape[axis] + 1, dtype=x.dtype).reshape(shape)

    register_op("TestChannelScale", inputs=["x"],
                attrs=[Attr("data_format", AttrType.FORMAT, Format.NCHW)],
                infer=lambda ctx: [ctx.input(0)], layout=LayoutRole())(channel_scale_kernel)
    yield "TestChannelScale"
    registry._REGISTRY.pop("TestChannelScale")


def test_an_op_the_registry_calls_layout_sensitive_joins_the_region(channel_scale_op):
    graph = ge.Graph("declared")
    x = data(graph, "x", (1, 3, 6, 6))
    scaled = op(graph, channel_scale_op, [conv(graph, x, "c")], "scale", data_format="NCHW")
    graph.set_outputs([op(graph, "Relu", [scaled], "out")])

    after, _ = apply(graph)

    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "TestChannelScale[NHWC]",
                              "Relu", "Transpose[0, 3, 1, 2]"]


def test_a_folded_batch_norm_and_the_filter_transposition_are_one_pass_over_the_filter():
    graph = ge.Graph("conv_bn")
    x = data(graph, "x", (1, 4, 6, 6))
    weights = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
    filt = const(graph, "w", weights)
    conv_out = op(graph, "Conv2D", [x, filt], "conv", strides=[1, 1], pads=[1, 1, 1, 1],
                  data_format="NCHW")
    stats = [const(graph, f"s{i}", RNG.uniform(0.5, 1.5, 8).astype(np.float32))
             for i in range(4)]
    graph.set_outputs([op(graph, "Relu", [op(graph, "FusedBatchNorm", [conv_out, *stats],
                                                   "bn", data_format="NCHW")], "out")])
    executable = ge.compile(graph, opt_level=3)
    (convs,) = [n for n in executable.graph.nodes if n.op_type.endswith("Conv2D")]
    assert convs.attrs["filter_format"] == "HWIO"
    tensor = convs.inputs[1].producer.attrs["value"]
    assert tensor.is_pending  # compiled without writing the filter even once
    feeds = random_feeds(graph, seed=2)
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    got = ge.Session(executable).run(feeds)
    assert not tensor.is_pending
    assert_close(got["out"], want["out"], accumulate=True)


def _i64(graph, name, values):
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(values, np.int64))}, name,
                       graph)


def test_concat_split_slice_and_resize_carry_the_layout_with_their_axes_renumbered():
    """An FPN/YOLO neck: upsample, concat on channels, split, slice channels. Before,
    each was a region end (a transpose out and back in); now they join the region.

        x -> Conv a -> Resize x2 -> Concat(axis 1, with Conv b) -> Split(axis 1)
          -> Slice(channels 1:3) -> Conv c
    """
    graph = ge.Graph("neck")
    x = data(graph, "x", (1, 3, 8, 8))
    small = conv(graph, x, "a", stride=2)
    scales = create_node("Const", [], {"value": ge.Tensor(np.array([1, 1, 2, 2], np.float32))},
                         "scales", graph)
    up = op(graph, "Resize", [small, None, scales], "up", mode="nearest")
    joined = op(graph, "Concat", [up, conv(graph, x, "b")], "join", axis=1)
    first, _ = op(graph, "Split", [joined], "split", axis=1, num_outputs=2).outputs
    part = op(graph, "Slice", [first, _i64(graph, "s", [1]), _i64(graph, "e", [3]),
                               _i64(graph, "ax", [1])], "narrow")
    graph.set_outputs([conv(graph, part, "c")])
    after, result = apply(graph)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "Resize", "Conv2D[NHWC]",
                              "Concat", "Split", "Slice", "Conv2D[NHWC]",
                              "Transpose[0, 3, 1, 2]"]
    assert after.node("join").attrs["axis"] == 3 and after.node("split").attrs["axis"] == 3
    assert list(after.node("up").inputs[2].producer.attrs["value"].numpy()) == [1, 2, 2, 1]
    assert list(after.node("narrow").inputs[3].producer.attrs["value"].numpy()) == [3]
    assert result.counts["transposes inserted"] == 2


def test_a_resize_or_slice_whose_axes_are_computed_stays_a_region_end():
    graph = ge.Graph("computed")
    x = data(graph, "x", (1, 3, 8, 8))
    axes = data(graph, "axes", (1,))
    axes.outputs[0].desc = ge.TensorDesc((1,), ge.DataType.DT_INT64)
    part = op(graph, "Slice", [conv(graph, x, "a"), _i64(graph, "s", [0]), _i64(graph, "e", [2]),
                               axes], "narrow")
    graph.set_outputs([part])
    after = graph.clone()
    LayoutPass().run(after)
    assert summary(after) == ["Transpose[0, 2, 3, 1]", "Conv2D[NHWC]", "Transpose[0, 3, 1, 2]",
                              "Slice"]
