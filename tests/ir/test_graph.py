"""The IR's invariants: use-def links, topological order, validation, copies, text, JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from ge.errors import GraphError, ModelFormatError, ShapeError
from ge.ir import Graph, Node, TensorDesc, Usage
from ge.ops import create_node


def data(graph: Graph, name: str, shape=(2, 3), dtype=ge.DataType.DT_FLOAT) -> Node:
    return create_node("Data", [], {"shape": list(shape), "dtype": dtype}, name, graph)


def assert_links_consistent(graph: Graph) -> None:
    """Every input edge is listed among its value's users, and every user reads the value."""
    for node in graph.nodes:
        for index, value in enumerate(node.inputs):
            if value is not None:
                assert Usage(node, index) in value.users
                assert value.producer.graph is graph
        for value in node.outputs:
            for usage in value.users:
                assert usage.node.inputs[usage.input_index] is value
                assert usage.node.graph is graph


def small_graph() -> tuple[Graph, dict[str, Node]]:
    graph = Graph("small")
    a = data(graph, "a")
    b = data(graph, "b")
    mul = create_node("Mul", [a, b], {}, "mul", graph)
    add = create_node("Add", [mul, a], {}, "add", graph)
    relu = create_node("Relu", [add], {}, "relu", graph)
    graph.set_outputs([relu])
    return graph, {"a": a, "b": b, "mul": mul, "add": add, "relu": relu}


def test_users_track_every_use():
    graph, n = small_graph()
    assert_links_consistent(graph)
    assert {u.node.name for u in n["a"].outputs[0].users} == {"mul", "add"}
    assert n["mul"].outputs[0].users == (Usage(n["add"], 0),)


def test_replace_input_with_moves_the_use():
    graph, n = small_graph()
    n["add"].replace_input_with(1, n["b"].outputs[0])
    assert_links_consistent(graph)
    assert [u.node.name for u in n["a"].outputs[0].users] == ["mul"]
    assert Usage(n["add"], 1) in n["b"].outputs[0].users


def test_replace_all_uses_with_updates_users_and_outputs():
    graph, n = small_graph()
    neg = create_node("Neg", [n["add"]], {}, "neg", graph)
    n["relu"].outputs[0].replace_all_uses_with(neg.outputs[0])
    assert graph.outputs == [neg.outputs[0]]
    n["add"].outputs[0].replace_all_uses_with(n["mul"].outputs[0])
    assert_links_consistent(graph)
    assert n["add"].outputs[0].users == ()
    assert {u.node.name for u in n["mul"].outputs[0].users} == {"add", "relu", "neg"}


def test_remove_node_refuses_while_used_and_cleans_up_after():
    graph, n = small_graph()
    with pytest.raises(GraphError, match="used by"):
        graph.remove_node(n["mul"])
    with pytest.raises(GraphError, match="graph outputs"):
        graph.remove_node(n["relu"])
    dead = create_node("Exp", [n["mul"]], {}, "dead", graph)
    graph.remove_node(dead)
    assert dead.graph is None
    assert [u.node.name for u in n["mul"].outputs[0].users] == ["add"]
    assert_links_consistent(graph)


def test_mutating_while_walking_is_safe():
    graph, n = small_graph()
    for node in graph.nodes:  # a snapshot: removing and adding as we go is fine
        if node.op_type == "Relu":
            replacement = create_node("Abs", [node.inputs[0]], {}, "abs", graph)
            node.outputs[0].replace_all_uses_with(replacement.outputs[0])
            graph.remove_node(node)
    assert [v.name for v in graph.outputs] == ["abs"]
    assert_links_consistent(graph)
    assert graph.validate()


def test_topological_order_puts_producers_first():
    graph, _ = small_graph()
    order = graph.topological_order()
    position = {node.name: i for i, node in enumerate(order)}
    for node in order:
        for producer in node.predecessors():
            assert position[producer.name] < position[node.name]
    assert [n.name for n in graph.get_ops()] == [n.name for n in order]


def test_validate_names_a_cycle():
    graph, n = small_graph()
    n["mul"].replace_input_with(1, n["relu"].outputs[0])
    with pytest.raises(GraphError, match="cycle"):
        graph.validate()
    assert not graph.is_valid()


def test_validate_requires_outputs():
    graph = Graph("empty")
    data(graph, "a")
    with pytest.raises(GraphError, match="no outputs"):
        graph.validate()


def test_validate_finds_a_dangling_input():
    graph, n = small_graph()
    other = Graph("other")
    stranger = data(other, "x")
    n["add"].replace_input_with(1, stranger.outputs[0])
    with pytest.raises(GraphError, match="dangling"):
        graph.validate()


def test_validate_finds_duplicate_names():
    graph, n = small_graph()
    n["mul"].name = "add"  # bypassing rename_node
    with pytest.raises(GraphError, match="two nodes named 'add'"):
        graph.validate()
    with pytest.raises(GraphError, match="already has a node named"):
        data(graph, "a")
    with pytest.raises(GraphError, match="already has a node named"):
        graph.rename_node(n["relu"], "b")


def test_validate_checks_shapes_and_dtypes_against_the_op():
    graph, n = small_graph()
    n["relu"].outputs[0].shape = (5, 5)
    with pytest.raises(ShapeError, match="relu"):
        graph.validate()
    graph, n = small_graph()
    n["relu"].outputs[0].dtype = ge.DataType.DT_INT32
    with pytest.raises(ShapeError, match="declared int32"):
        graph.validate()
    graph, n = small_graph()
    wide = data(graph, "wide", (4, 4))
    n["add"].replace_input_with(1, wide.outputs[0])
    with pytest.raises(ShapeError, match="broadcast"):
        graph.validate()


def test_validate_refuses_an_unknown_op():
    graph, n = small_graph()
    graph.add_node("NoSuchOp", [n["relu"]], {}, [TensorDesc((2, 3))], "mystery")
    with pytest.raises(ge.errors.UnsupportedOpError, match="NoSuchOp"):
        graph.validate()


def test_clone_is_deep_and_equal():
    graph, n = small_graph()
    copy = graph.clone()
    assert copy.to_json() == graph.to_json()
    assert all(node.graph is copy for node in copy.nodes)
    copy.node("relu").outputs[0].replace_all_uses_with(copy.node("add").outputs[0])
    assert graph.outputs[0].name == "relu"  # the original is untouched
    assert_links_consistent(graph)
    assert_links_consistent(copy)


def test_extract_makes_a_runnable_subgraph():
    graph, n = small_graph()
    sub = graph.extract(inputs=["mul"], outputs=["relu"])
    assert [v.name for v in sub.inputs] == ["mul", "a"]  # a, still read by add, stays an input
    assert sorted(node.op_type for node in sub.nodes) == ["Add", "Data", "Data", "Relu"]
    assert sub.validate()
    a = np.random.rand(2, 3).astype(np.float32) - 0.5
    m = np.random.rand(2, 3).astype(np.float32) - 0.5
    out = ge.Session(ge.compile(sub)).run({"a": a, "mul": m})
    np.testing.assert_array_equal(out["relu"], np.maximum(m + a, 0))


def test_text_form_lists_every_node():
    graph, _ = small_graph()
    text = str(graph)
    assert text.startswith("graph small(%a: float32[2,3], %b: float32[2,3])")
    for line in ("%mul: float32[2,3] = Mul(%a, %b)", "%relu: float32[2,3] = Relu(%add)",
                 "return %relu"):
        assert line in text


def test_json_round_trip_keeps_everything():
    graph = Graph("rt")
    x = data(graph, "x", ("batch", 4))
    weights = ge.Tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    w = create_node("Const", [], {"value": weights}, "w", graph)
    y = create_node("MatMul", [x, w], {}, "y", graph) if ge.ops.has_op("MatMul") else \
        create_node("Mul", [x, x], {}, "y", graph)
    cast = create_node("Cast", [y], {"dtype": ge.DataType.DT_FLOAT16}, "cast", graph)
    graph.set_outputs([cast, y])
    text = graph.to_json()
    back = Graph.from_json(text)
    assert back.to_json() == text
    assert back.node("w").attrs["value"] == weights
    assert back.node("cast").attrs["dtype"] is ge.DataType.DT_FLOAT16
    assert back.inputs[0].shape == ("batch", 4)
    assert back.validate()


@pytest.mark.parametrize("text", ["", "{", '{"format": "other"}', "[1, 2]",
                                  '{"format": "ge.graph", "version": 1, "name": "g"}'])
def test_malformed_json_is_a_model_format_error(text):
    with pytest.raises(ModelFormatError):
        Graph.from_json(text)


def test_json_with_a_dangling_reference_is_refused():
    graph, _ = small_graph()
    doc = json.loads(graph.to_json())
    doc["nodes"][-1]["inputs"] = ["nowhere"]
    with pytest.raises(ModelFormatError, match="nowhere"):
        Graph.from_json(json.dumps(doc))


def test_json_with_truncated_tensor_bytes_is_refused():
    graph = Graph("t")
    c = create_node("Const", [], {"value": ge.Tensor(np.ones(4, np.float32))}, "c", graph)
    graph.set_outputs([c])
    doc = json.loads(graph.to_json())
    doc["nodes"][0]["attrs"]["value"]["tensor"]["data"] = "AAAA"
    with pytest.raises(ModelFormatError, match="bytes"):
        Graph.from_json(json.dumps(doc))


# -- random graphs: every mutation keeps use-def consistent -----------------------------

UNARY = ["Relu", "Neg", "Exp", "Abs", "Tanh"]
BINARY = ["Add", "Mul", "Sub", "Max"]


@st.composite
def random_graphs(draw):
    graph = Graph("random")
    values = [data(graph, f"in{i}").outputs[0] for i in range(draw(st.integers(1, 3)))]
    for index in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            inputs = [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(BINARY))
            inputs = [draw(st.sampled_from(values)), draw(st.sampled_from(values))]
        values.append(create_node(op, inputs, {}, f"n{index}", graph).outputs[0])
    graph.set_outputs([values[-1]])
    return graph


@settings(max_examples=40, deadline=None)
@given(random_graphs(), st.data())
def test_mutations_keep_use_def_consistent(graph, choices):
    for _ in range(choices.draw(st.integers(1, 6))):
        nodes = [n for n in graph.nodes if n.op_type != "Data"]
        if not nodes:
            break
        node = choices.draw(st.sampled_from(nodes))
        order = graph.topological_order()
        earlier = [n.outputs[0] for n in order[:order.index(node)]]
        action = choices.draw(st.sampled_from(["rewire", "bypass", "clone"]))
        if action == "rewire" and earlier:
            node.replace_input_with(0, choices.draw(st.sampled_from(earlier)))
        elif action == "bypass" and node.inputs[0].shape == node.outputs[0].shape:
            node.outputs[0].replace_all_uses_with(node.inputs[0])
            graph.remove_node(node)
        elif action == "clone":
            graph = graph.clone()
        assert_links_consistent(graph)
        assert graph.validate()
    assert Graph.from_json(graph.to_json()).to_json() == graph.to_json()
