"""The pattern language: chains, DAGs, constraints, commutative operands, and refusal reasons."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.ops import create_node
from ge.passes import Constant, Input, Match, Node, Pattern, Refusal


def data(graph: ge.Graph, name: str, shape=(2, 4)):
    return create_node("Data", [], {"shape": list(shape)}, name, graph)


def const(graph: ge.Graph, name: str, array) -> ge.Node:
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array, np.float32))}, name,
                       graph)


def op(graph: ge.Graph, op_type: str, inputs, name: str, **attrs) -> ge.Node:
    return create_node(op_type, list(inputs), attrs, name, graph)


@pytest.fixture()
def conv_bn_relu() -> ge.Graph:
    """input -> Conv2D -> FusedBatchNorm -> Relu (NHWC, HWIO filter)."""
    graph = ge.Graph("block")
    x = data(graph, "input", (1, 6, 6, 3))
    w = const(graph, "w", np.ones((3, 3, 3, 4)))
    conv = op(graph, "Conv2D", [x, w], "conv", strides=[1, 1, 1, 1], padding="SAME")
    stats = [const(graph, n, np.ones(4)) for n in ("gamma", "beta", "mean", "var")]
    bn = op(graph, "FusedBatchNorm", [conv, *stats], "bn", epsilon=1e-3)
    graph.set_outputs([op(graph, "Relu", [bn], "relu")])
    return graph


def test_chain_matches_producers_first_and_binds_names(conv_bn_relu):
    pattern = Pattern([Node("Conv2D", name="conv"), Node("FusedBatchNorm"), Node("Relu")])
    found = pattern.match(conv_bn_relu.node("relu"))
    assert isinstance(found, Match)
    assert [n.name for n in found.nodes] == ["conv", "bn", "relu"]
    assert found.describe() == "Conv2D+FusedBatchNorm+Relu"
    assert found.node("conv") is conv_bn_relu.node("conv")
    outside = {(node.name, index, value.name) for node, index, value in found.external_inputs()}
    assert outside == {("conv", 0, "input"), ("conv", 1, "w"), ("bn", 1, "gamma"),
                       ("bn", 2, "beta"), ("bn", 3, "mean"), ("bn", 4, "var")}
    assert pattern.root_types == ("Relu",)


def test_chain_refuses_other_ops_structurally(conv_bn_relu):
    refusal = Pattern([Node("MatMul"), Node("Relu")]).match(conv_bn_relu.node("relu"))
    assert isinstance(refusal, Refusal) and not refusal
    assert refusal.structural  # not worth a line in the report
    assert "FusedBatchNorm" in refusal.reason


def test_inner_node_with_another_consumer_is_refused_with_reason(conv_bn_relu):
    extra = op(conv_bn_relu, "Exp", [conv_bn_relu.node("bn")], "peek")
    conv_bn_relu.set_outputs([conv_bn_relu.node("relu"), extra])
    refusal = Pattern([Node("Conv2D"), Node("FusedBatchNorm"), Node("Relu")]).match(
        conv_bn_relu.node("relu"))
    assert isinstance(refusal, Refusal) and not refusal.structural
    assert refusal.reason == ("FusedBatchNorm node 'bn' has another consumer "
                              "(Exp node 'peek')")


def test_inner_node_that_is_a_graph_output_is_refused(conv_bn_relu):
    conv_bn_relu.set_outputs([conv_bn_relu.node("relu"), conv_bn_relu.node("conv")])
    refusal = Pattern([Node("Conv2D"), Node("FusedBatchNorm"), Node("Relu")]).match(
        conv_bn_relu.node("relu"))
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "Conv2D node 'conv' is a graph output"


def dense(bias_rank: int = 1, combine: str = "Add") -> ge.Graph:
    """y = MatMul(x, w) + b (or another binary op)."""
    graph = ge.Graph("dense")
    x = data(graph, "x", (2, 4))
    w = const(graph, "w", np.ones((4, 3)))
    mm = op(graph, "MatMul", [x, w], "mm")
    bias = const(graph, "b", np.ones((3,) if bias_rank == 1 else (1, 3)))
    graph.set_outputs([op(graph, combine, [mm, bias], "add")])
    return graph


DAG = Pattern(Node("Add", inputs=[Node("MatMul", name="mm", inputs=[Input("a"), Input("b")]),
                                  Constant("bias", rank=1)]))


def test_dag_pattern_binds_nodes_values_and_constants():
    graph = dense()
    found = DAG.match(graph.node("add"))
    assert isinstance(found, Match)
    assert found.node("mm").name == "mm"
    assert found.value("a").name == "x" and found.value("b").name == "w"
    np.testing.assert_array_equal(found.constant("bias"), np.ones(3, np.float32))


def test_constant_operand_constraints_give_reasons():
    graph = ge.Graph("not_const")
    x, y = data(graph, "x", (2, 4)), data(graph, "y", (3,))
    mm = op(graph, "MatMul", [x, const(graph, "w", np.ones((4, 3)))], "mm")
    graph.set_outputs([op(graph, "Sub", [mm, y], "sub")])
    ordered = Pattern(Node("Sub", inputs=[Node("MatMul"), Constant("bias", rank=1)]))
    refusal = ordered.match(graph.node("sub"))
    assert isinstance(refusal, Refusal) and not refusal.structural
    assert refusal.reason == "input 'y' of 'sub' is not a constant"
    rank = Pattern(Node("Sub", inputs=[Input(), Constant("bias", rank=2)]))
    refusal = rank.match(dense(combine="Sub").node("add"))
    assert isinstance(refusal, Refusal) and "has rank 1, not 2" in refusal.reason
    positive = Pattern(Node("Sub", inputs=[Input(),
                                           Constant(where=lambda a: bool((a > 5).all()))]))
    refusal = positive.match(dense(combine="Sub").node("add"))
    assert isinstance(refusal, Refusal) and "fails the pattern's condition" in refusal.reason


# When a commutative op's other input order, or a chain's other inputs, fail only
# structurally, the informative reason of the first attempt is the one reported.
def test_commutative_refusal_keeps_the_informative_reason():
    refusal = DAG.match(dense(bias_rank=2).node("add"))
    assert isinstance(refusal, Refusal) and refusal.reason == "constant 'b' has rank 2, not 1"


def test_chain_refusal_keeps_the_informative_reason(conv_bn_relu):
    wanted = Pattern([Node("Conv2D", attrs={"padding": "VALID"}), Node("FusedBatchNorm")])
    refusal = wanted.match(conv_bn_relu.node("bn"))
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "Conv2D node 'conv' has padding='SAME'"


def test_commutative_operands_match_either_way():
    graph = ge.Graph("swapped")
    x = data(graph, "x", (2, 4))
    mm = op(graph, "MatMul", [x, const(graph, "w", np.ones((4, 3)))], "mm")
    graph.set_outputs([op(graph, "Add", [const(graph, "b", np.ones(3)), mm], "add")])
    found = DAG.match(graph.node("add"))  # bias first: Add is commutative
    assert isinstance(found, Match) and found.value("bias").name == "b"
    sub = Pattern(Node("Sub", inputs=[Node("MatMul"), Constant()]))
    graph2 = ge.Graph("sub")
    x = data(graph2, "x", (2, 4))
    mm = op(graph2, "MatMul", [x, const(graph2, "w", np.ones((4, 3)))], "mm")
    graph2.set_outputs([op(graph2, "Sub", [const(graph2, "b", np.ones(3)), mm], "sub")])
    assert isinstance(sub.match(graph2.node("sub")), Refusal)  # Sub is not commutative


def test_attribute_constraints_and_predicates(conv_bn_relu):
    wanted = Pattern(Node("FusedBatchNorm", inputs=[Node("Conv2D", attrs={"padding": "VALID"})]))
    refusal = wanted.match(conv_bn_relu.node("bn"))
    assert isinstance(refusal, Refusal)
    assert refusal.reason == "Conv2D node 'conv' has padding='SAME'"
    assert isinstance(Pattern([Node("Conv2D", attrs={"padding": "SAME"}),
                               Node("FusedBatchNorm")]).match(conv_bn_relu.node("bn")), Match)
    callable_attr = Pattern([Node("FusedBatchNorm", attrs={"epsilon": lambda e: e < 1e-2})])
    assert isinstance(callable_attr.match(conv_bn_relu.node("bn")), Match)
    said = Pattern([Node("Relu", where=lambda n: "relu is not allowed here")])
    refusal = said.match(conv_bn_relu.node("relu"))
    assert isinstance(refusal, Refusal) and refusal.reason == "relu is not allowed here"
    plain_false = Pattern([Node("Relu", where=lambda n: False)])
    refusal = plain_false.match(conv_bn_relu.node("relu"))
    assert isinstance(refusal, Refusal) and "fails the pattern's condition" in refusal.reason


def test_alternatives_and_wildcards():
    graph = dense()
    assert isinstance(Pattern(Node(("Add", "Sub"))).match(graph.node("add")), Match)
    any_then_add = Pattern(Node("Add", inputs=[Node(None, name="producer"), None]))
    found = any_then_add.match(graph.node("add"))
    assert isinstance(found, Match) and found.node("producer").op_type == "MatMul"


def test_a_node_is_not_matched_twice():
    graph = ge.Graph("square")
    x = data(graph, "x")
    e = op(graph, "Exp", [x], "e")
    graph.set_outputs([op(graph, "Mul", [e, e], "sq")])
    pattern = Pattern(Node("Mul", inputs=[Node("Exp"), Node("Exp")]))
    refusal = pattern.match(graph.node("sq"))
    assert isinstance(refusal, Refusal) and "matched twice" in refusal.reason
    shared = Pattern(Node("Mul", inputs=[Input("a"), Input("b")]))
    found = shared.match(graph.node("sq"))
    assert isinstance(found, Match) and found.value("a") is found.value("b")


def test_an_empty_chain_is_an_error():
    with pytest.raises(ValueError, match="at least one node"):
        Pattern([])
