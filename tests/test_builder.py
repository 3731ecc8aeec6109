"""The seed's build API: OperatorFactory, add_op, set_outputs, validate, handles."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.errors import AttrError, GraphError, OpArgumentError, ShapeError, UnsupportedOpError

F = ge.OperatorFactory


def data(graph, name, shape, dtype=ge.DataType.DT_FLOAT):
    return graph.add_op(F.create_op("Data").set_attr("name", name).set_attr("shape", shape)
                        .set_attr("dtype", dtype).build())


def test_handles_have_shape_dtype_and_name_right_after_add_op():
    graph = ge.Graph("g")
    x = data(graph, "x", [-1, 8])
    relu = graph.add_op(F.create_op("Relu").set_input("x", x).set_attr("name", "r").build())
    assert relu.name == "r" and relu.shape == (-1, 8) and relu.dtype is ge.DataType.DT_FLOAT
    assert relu.shape[-1] == 8 and len(relu.shape) == 2


def test_call_order_does_not_matter():
    first = ge.Graph("a")
    x = data(first, "x", [2, 2])
    one = first.add_op(F.create_op("LeakyRelu").set_attr("name", "l").set_input("x", x)
                       .set_attr("alpha", 0.5).build())
    second = ge.Graph("a")
    y = data(second, "x", [2, 2])
    two = second.add_op(F.create_op("LeakyRelu").set_attr("alpha", 0.5).set_input("x", y)
                        .set_attr("name", "l").build())
    assert one.attrs == two.attrs and one.name == two.name


def test_unnamed_ops_get_unique_names():
    graph = ge.Graph("g")
    consts = [graph.add_op(F.create_op("Const").set_attr("value", ge.Tensor(np.ones(2))).build())
              for _ in range(3)]
    assert len({c.name for c in consts}) == 3


def test_lists_and_arrays_become_constants():
    graph = ge.Graph("g")
    x = data(graph, "x", [2, 3])
    add = graph.add_op(F.create_op("Add").set_input("x", x)
                       .set_input("y", np.ones(3, np.float32)).set_attr("name", "add").build())
    const = add.inputs[1].producer
    assert const.op_type == "Const" and const.graph is graph
    clip = graph.add_op(F.create_op("Clip").set_input("x", add).set_input("min", 0.0).build())
    assert clip.inputs[1].dtype is ge.DataType.DT_FLOAT  # Python floats become float32
    graph.set_outputs([clip])
    assert graph.validate() is True


def test_unknown_op_type():
    with pytest.raises(UnsupportedOpError, match="NoSuchOp"):
        F.create_op("NoSuchOp")


def test_unknown_input_name_lists_the_valid_ones():
    with pytest.raises(OpArgumentError, match="valid inputs: 'x', 'y'"):
        F.create_op("Add").set_input("a", [1.0])


def test_unknown_attribute_lists_the_valid_ones():
    with pytest.raises(OpArgumentError, match="valid attributes: 'alpha'"):
        F.create_op("LeakyRelu").set_attr("slope", 0.1)


def test_wrong_attribute_type_names_the_op():
    graph = ge.Graph("g")
    x = data(graph, "x", [2])
    with pytest.raises(AttrError, match="LeakyRelu node 'leaky'.*'alpha' expects float"):
        F.create_op("LeakyRelu").set_input("x", x).set_attr("alpha", "big") \
            .set_attr("name", "leaky").build()


def test_missing_input_and_attribute():
    with pytest.raises(OpArgumentError, match="input 'y' is required"):
        graph = ge.Graph("g")
        F.create_op("Add").set_input("x", data(graph, "x", [2])).build()
    with pytest.raises(OpArgumentError, match="'value'.*required"):
        F.create_op("Const").build()


def test_wrong_input_shape_raises_at_build_naming_the_op():
    graph = ge.Graph("g")
    x = data(graph, "x", [2, 3])
    y = data(graph, "y", [4, 3])
    with pytest.raises(ShapeError, match="Add node 'bad'"):
        F.create_op("Add").set_input("x", x).set_input("y", y).set_attr("name", "bad").build()


def test_add_op_refuses_a_node_of_another_graph():
    one, two = ge.Graph("one"), ge.Graph("two")
    x = data(one, "x", [2])
    relu = F.create_op("Relu").set_input("x", x).build()
    with pytest.raises(GraphError, match="graph 'one'"):
        two.add_op(relu)
    with pytest.raises(GraphError, match="expects a built operator"):
        two.add_op("Relu")


def test_validate_returns_true_for_the_seed_usage():
    graph = ge.Graph("g")
    x = data(graph, "x", [2])
    graph.set_outputs([graph.add_op(F.create_op("Relu").set_input("x", x).build())])
    assert graph.validate()
    assert len(graph.get_ops()) == 2
