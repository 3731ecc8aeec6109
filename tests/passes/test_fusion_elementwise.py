"""ElementwiseFusionPass: each test shows the graph before and the graph expected after, and
checks that the numbers agree with the unfused graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from ge.ir import Graph, Node, Tensor
from ge.ops import create_node, evaluate
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE, expand_fused_elementwise
from ge.passes.fusion_elementwise import MAX_FUSED_INPUTS, ElementwiseFusionPass
from tests.tolerance import assert_close


class Builder:
    """Graphs in few words: ``b.op("Add", x, y)``, ``b.const(0.5)``, ``b.data("x", [2, 3])``."""

    def __init__(self, name: str = "g") -> None:
        self.graph = Graph(name)

    def data(self, name: str, shape: list[Any], dtype: str = "float32") -> Node:
        return create_node("Data", [], {"shape": shape, "dtype": dtype}, name, self.graph)

    def const(self, value: Any, dtype: str = "float32", name: str | None = None) -> Node:
        array = np.asarray(value, dtype=dtype)
        return create_node("Const", [], {"value": Tensor(array)}, name, self.graph)

    def op(self, op_type: str, *inputs: Any, name: str | None = None, **attrs: Any) -> Node:
        return create_node(op_type, list(inputs), attrs, name, self.graph)

    def outputs(self, *nodes: Node) -> Graph:
        self.graph.set_outputs(list(nodes))
        return self.graph


def feeds_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        shape = [d if isinstance(d, int) and d >= 0 else 3 for d in value.shape]
        data = rng.uniform(-2, 2, size=shape)
        feeds[value.producer.name] = data.astype(value.dtype.np_dtype)
    return feeds


def fuse(graph: Graph) -> tuple[ElementwiseFusionPass, Any]:
    """Run the pass on ``graph``; check it stays valid and computes the same outputs."""
    before = graph.clone()
    feeds = feeds_for(graph)
    fusion = ElementwiseFusionPass()
    result = fusion.run(graph)
    graph.validate()
    expected, got = evaluate(before, feeds), evaluate(graph, feeds)
    assert list(expected) == list(got)
    for name in expected:
        assert_close(got[name], expected[name], what=name)
    return fusion, result


def ops(graph: Graph) -> list[str]:
    """The graph's op types, sorted (sibling order is not part of a graph's meaning)."""
    return sorted(node.op_type for node in graph.nodes)


def steps_of(graph: Graph, name: str) -> list[str]:
    node = graph.node(name)
    assert node.op_type == FUSED_ELEMENTWISE
    return list(node.attrs["steps"])


def test_a_chain_becomes_one_fused_op():
    b = Builder()
    x, bias = b.data("x", [2, 3]), b.data("b", [3])
    y = b.op("Tanh", b.op("Add", b.op("Mul", x, b.const([0.5])), bias), name="y")
    graph = b.outputs(y)
    # before: x -> Mul(., 0.5) -> Add(., b) -> Tanh -> y
    _, result = fuse(graph)
    # after: x, b -> FusedElementwise -> y (same name, same output)
    assert ops(graph) == ['Data', 'Data', 'FusedElementwise']
    assert steps_of(graph, "y") == ["Mul in0 0.5:float32", "Add s0 in1", "Tanh s1"]
    assert [v.producer.name for v in graph.node("y").inputs] == ["x", "b"]
    assert graph.outputs[0].name == "y"
    assert result.changed and result.counts["regions"] == 1
    assert "fused 1 elementwise regions into FusedElementwise (most common: Mul+Add+Tanh)" \
        in result.notes


def test_an_intermediate_read_twice_inside_the_region_is_fused_once():
    b = Builder()
    x, bias = b.data("x", [4, 8]), b.data("bias", [8])
    t = b.op("Add", x, bias)
    y = b.op("Mul", t, b.op("Sigmoid", t), name="swish")
    graph = b.outputs(y)
    # before: t = x + bias; swish = t * Sigmoid(t)
    fuse(graph)
    # after: one op; t is step 0, read by steps 1 and 2
    assert ops(graph) == ['Data', 'Data', 'FusedElementwise']
    assert steps_of(graph, "swish") == ["Add in0 in1", "Sigmoid s0", "Mul s0 s1"]


def test_an_intermediate_with_a_consumer_outside_stays_out():
    b = Builder()
    x = b.data("x", [2, 5])
    t = b.op("Add", x, x, name="t")
    y = b.op("Mul", b.op("Relu", t), b.const(2.0), name="y")
    s = b.op("Softmax", t, name="s")
    graph = b.outputs(y, s)
    # before: t = x + x feeds Relu (-> Mul -> y) and Softmax
    fusion, result = fuse(graph)
    # after: t stays; Relu and Mul fuse; t is the fused op's input
    assert ops(graph) == ['Add', 'Data', 'FusedElementwise', 'Softmax']
    assert steps_of(graph, "y") == ["Relu in0", "Mul s0 2.0:float32"]
    assert fusion.refusals["a Add output also feeds Softmax outside the region"] == 1
    assert any("left unfused" in note for note in result.notes)


def test_a_graph_output_in_the_middle_stays_out():
    b = Builder()
    x = b.data("x", [3])
    e = b.op("Exp", x, name="e")
    y = b.op("Neg", b.op("Log", e), name="y")
    graph = b.outputs(y, e)
    # before: e = Exp(x) is an output and feeds Log -> Neg -> y
    fusion, _ = fuse(graph)
    # after: e stays; Log and Neg fuse
    assert ops(graph) == ['Data', 'Exp', 'FusedElementwise']
    assert fusion.refusals["a Exp output is a graph output"] == 1


def test_mixed_dtypes_and_unfusible_ops_split_regions():
    b = Builder()
    x = b.data("x", [4], dtype="float16")
    half = b.op("Relu", b.op("Neg", x))
    wide = b.op("Cast", half, dtype="float32")
    y = b.op("Tanh", b.op("Mul", wide, wide), name="y")
    graph = b.outputs(y)
    # before: x(f16) -> Neg -> Relu -> Cast(f32) -> Mul -> Tanh
    fusion, _ = fuse(graph)
    # after: a float16 region and a float32 region, with the Cast between them
    assert ops(graph) == ['Cast', 'Data', 'FusedElementwise', 'FusedElementwise']
    assert fusion.refusals["Cast is not in FusedElementwise's language"] == 1


def test_an_op_mixing_two_float_dtypes_is_refused():
    b = Builder()
    x, e = b.data("x", [4], dtype="float16"), b.data("e", [4], dtype="float32")
    p = b.op("Pow", b.op("Abs", x), e)
    y = b.op("Neg", b.op("Neg", p), name="y")
    graph = b.outputs(y)
    fusion, _ = fuse(graph)
    assert ops(graph) == ['Abs', 'Data', 'Data', 'FusedElementwise', 'Pow']
    assert fusion.refusals["Pow mixes dtypes float16, float32"] == 1


def test_integer_and_single_ops_are_left_alone():
    b = Builder()
    i = b.data("i", [4], dtype="int32")
    x = b.data("x", [4])
    graph = b.outputs(b.op("Abs", b.op("Add", i, i)), b.op("Exp", x))
    before = ops(graph)
    _, result = fuse(graph)
    assert ops(graph) == before
    assert not result.changed


def test_bias_add_on_the_last_axis_is_an_add_and_on_channels_first_is_refused():
    b = Builder()
    x, bias = b.data("x", [2, 3, 4, 4]), b.data("bias", [4])
    last = b.op("Relu", b.op("BiasAdd", x, bias, data_format="NHWC"), name="last")
    channels = b.data("c", [3])
    first = b.op("Relu", b.op("BiasAdd", x, channels, data_format="NCHW"), name="first")
    graph = b.outputs(last, first)
    fusion, _ = fuse(graph)
    assert steps_of(graph, "last") == ["Add in0 in1", "Relu s0"]
    assert graph.node("first").op_type == "Relu"
    assert fusion.refusals["BiasAdd adds along a channel axis that is not the last"] == 1


def test_clip_bounds_must_be_constants():
    b = Builder()
    x, high = b.data("x", [5]), b.data("high", [])
    constant = b.op("Clip", b.op("Neg", x), b.const(-1.0), b.const(1.0), name="constant")
    tensor = b.op("Clip", b.op("Exp", x), None, high, name="tensor")
    graph = b.outputs(constant, tensor)
    fuse(graph)
    assert steps_of(graph, "constant") == ["Neg in0", "Clip s0 -1.0:float32 1.0:float32"]
    assert graph.node("tensor").op_type == "Clip"


def test_a_constant_that_adds_dimensions_stays_an_input():
    b = Builder()
    x = b.data("x", [3])
    y = b.op("Relu", b.op("Mul", x, b.const([[2.0]], name="c")), name="y")
    graph = b.outputs(y)
    fuse(graph)
    assert steps_of(graph, "y") == ["Mul in0 in1", "Relu s0"]
    assert list(graph.node("y").outputs[0].shape) == [1, 3]


def test_symbolic_dimensions_survive():
    b = Builder()
    x, s = b.data("x", ["N", 8]), b.data("s", [8])
    y = b.op("Sigmoid", b.op("Sub", x, s), name="y")
    graph = b.outputs(y)
    fuse(graph)
    assert list(graph.outputs[0].shape) == ["N", 8]


def test_fusing_again_changes_nothing_and_new_ops_merge_into_a_fused_op():
    b = Builder()
    x = b.data("x", [6])
    graph = b.outputs(b.op("Exp", b.op("Neg", x), name="y"))
    fuse(graph)
    _, again = fuse(graph)
    assert not again.changed
    # a new op after the fused one joins it
    z = create_node("Abs", [graph.node("y")], {}, "z", graph)
    graph.set_outputs([z])
    fuse(graph)
    assert ops(graph) == ['Data', 'FusedElementwise']
    assert steps_of(graph, "z") == ["Neg in0", "Exp s0", "Abs s1"]


def test_regions_keep_to_the_input_limit():
    b = Builder()
    value = b.data("x0", [4])
    for index in range(1, MAX_FUSED_INPUTS + 8):
        value = b.op("Add", value, b.data(f"x{index}", [4]))
    graph = b.outputs(b.op("Relu", value, name="y"))
    fusion, _ = fuse(graph)
    fused = [n for n in graph.nodes if n.op_type == FUSED_ELEMENTWISE]
    assert len(fused) == 2
    assert all(len(n.inputs) <= MAX_FUSED_INPUTS for n in fused)
    assert any("more than" in reason for reason in fusion.refusals)


def test_expanding_gives_back_ordinary_ops():
    b = Builder()
    x = b.data("x", [2, 3])
    y = b.op("LeakyRelu", b.op("Add", b.op("Mul", x, b.const(3.0)), x), alpha=0.2, name="y")
    graph = b.outputs(y)
    original = graph.clone()
    fuse(graph)
    assert expand_fused_elementwise(graph) == 1
    graph.validate()
    assert ops(graph) == ['Add', 'Const', 'Data', 'LeakyRelu', 'Mul']
    assert graph.outputs[0].name == "y"
    feeds = feeds_for(graph)
    assert_close(evaluate(graph, feeds)["y"], evaluate(original, feeds)["y"])


def test_compile_fuses_at_level_2_and_up_and_keeps_the_outputs():
    import ge.engines.fused  # noqa: F401 - registers the engine

    b = Builder()
    x, w = b.data("x", [-1, 16]), b.data("w", [16, 16])
    h = b.op("MatMul", x, w)
    gelu = b.op("Mul", b.op("Mul", h, b.const(0.5)), b.op("Add", b.op(
        "Erf", b.op("Div", h, b.const(np.sqrt(2.0)))), b.const(1.0)))
    y = b.op("Add", b.op("Tanh", gelu), x, name="y")
    graph = b.outputs(y)
    feeds = feeds_for(graph)
    expected = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)["y"]
    for level in (1, 3):
        executable = ge.compile(graph, opt_level=level, engines=["fused"], verify=True)
        fused = [n for n in executable.graph.nodes if n.op_type == FUSED_ELEMENTWISE]
        assert bool(fused) == (level >= 2)
        assert_close(ge.Session(executable).run(feeds)["y"], expected)
    assert "FusedElementwise" in executable.report_text()
    assert executable.report["engines"].get("fused") == len(fused)


_UNARY = ["Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Exp", "Softsign"]
_BINARY = ["Add", "Sub", "Mul", "Max", "Min"]
_BREAKERS = ["Softmax", "Cast"]  # not fusible: they cut regions


@st.composite
def elementwise_graphs(draw):
    """Random DAGs of elementwise ops over a few inputs, with some unfusible ops mixed in
    and some intermediates also taken as graph outputs."""
    b = Builder("random")
    values = [b.data("x", [3, 4]), b.data("y", [4]), b.data("z", [3, 1])]
    outputs = []
    for _ in range(draw(st.integers(2, 14))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "const", "breaker"]))
        source = draw(st.sampled_from(values))
        if kind == "unary":
            node = b.op(draw(st.sampled_from(_UNARY)), source)
        elif kind == "binary":
            node = b.op(draw(st.sampled_from(_BINARY)), source, draw(st.sampled_from(values)))
        elif kind == "const":
            node = b.op("Mul", source, b.const(draw(st.floats(-2, 2, width=32))))
        elif draw(st.sampled_from(_BREAKERS)) == "Cast":
            node = b.op("Cast", source, dtype="float32")
        else:
            node = b.op("Softmax", source)
        values.append(node)
        if draw(st.booleans()) and draw(st.booleans()):
            outputs.append(node)
    return b.outputs(*dict.fromkeys(outputs + [values[-1]]))


@settings(max_examples=60, deadline=None)
@given(elementwise_graphs())
def test_random_graphs_keep_their_outputs_and_never_grow(graph):
    size = len(graph)
    fuse(graph)
    assert len(graph) <= size
    for node in graph.nodes:
        if node.op_type == FUSED_ELEMENTWISE:
            assert len(node.attrs["steps"]) >= 2
    _, again = fuse(graph)
    assert not again.changed


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_decomposition_exports_to_onnx_and_runs_in_onnxruntime(dtype):
    import onnxruntime
    b = Builder()
    x = b.data("x", [2, 6], dtype=dtype)
    t = b.op("Sigmoid", b.op("Sub", x, b.const(0.25, dtype)))
    y = b.op("Where", b.op("Greater", x, b.const(0.0, dtype)), t, b.op("Neg", x), name="y")
    graph = b.outputs(y)
    fuse(graph)
    assert graph.node("y").op_type == FUSED_ELEMENTWISE
    feeds = feeds_for(graph)
    expected = evaluate(graph, feeds)["y"]
    expand_fused_elementwise(graph)
    model = ge.export_onnx(graph)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    assert_close(session.run(None, feeds)[0], expected)


def test_a_producer_broadcast_into_the_region_stays_out():
    """A squeeze-excite gate: sigmoid of [1, 1, 1, C] scales [1, H, W, C]. Fused, the
    loop would compute the sigmoid again for each of the H * W pixels; it stays a step of
    its own, and the multiply and what follows it are the region."""
    b = Builder()
    x, s = b.data("x", [1, 8, 8, 16]), b.data("s", [1, 1, 1, 16])
    gate = b.op("Sigmoid", s, name="gate")
    y = b.op("Relu", b.op("Mul", x, gate), name="y")
    graph = b.outputs(y)
    fusion, result = fuse(graph)
    assert ops(graph) == sorted(["Data", "Data", "Sigmoid", FUSED_ELEMENTWISE])
    assert graph.node("gate").op_type == "Sigmoid"
    assert len(steps_of(graph, "y")) == 2  # the multiply and the relu
    assert any("broadcasts 64x" in reason for reason in fusion.refusals)
    assert any("broadcasts 64x" in note for note in result.notes)


def test_a_producer_broadcast_fewer_times_than_the_limit_joins():
    b = Builder()
    x, s = b.data("x", [2, 16]), b.data("s", [1, 16])
    y = b.op("Relu", b.op("Mul", x, b.op("Sigmoid", s)), name="y")
    graph = b.outputs(y)
    fuse(graph)
    assert ops(graph) == sorted(["Data", "Data", FUSED_ELEMENTWISE])
