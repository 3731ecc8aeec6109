"""If, Loop and Scan: ONNX models built with onnx.helper, run by GE and by onnxruntime.

ONNX's node suite has only a handful of control-flow cases; these add outer-scope
captures, nested subgraphs, carried values whose shape changes, scan axes and
directions, inference with dynamic dimensions, and the errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ge.backend
from ge.errors import ExecutionError, ShapeError
from ge.frontends.onnx import parse_onnx
from ge.ir import DataType, Graph
from ge.ops import control_flow, create_node

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _info(name: str, elem: int, shape: Any) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto],
           initializers: tuple[onnx.TensorProto, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "control_flow", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _compare(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run GE and onnxruntime; assert equal outputs; return GE's."""
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    got = ge.backend.prepare(model).run(feeds)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected):
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    return got


def _ops(graph: Graph) -> set[str]:
    return {node.op_type for node in graph.nodes}


# -- If ---------------------------------------------------------------------------------

def _if_model() -> onnx.ModelProto:
    """then: x * w (reads outer x, w); else: x - 1 (reads outer x only)."""
    then_graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["then_y"])], "then", [],
        [_info("then_y", FLOAT, None)])
    else_graph = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["else_y"])], "else", [],
        [_info("else_y", FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                              else_branch=else_graph)]
    inits = (helper.make_tensor("w", FLOAT, [3], [2.0, 3.0, 4.0]),
             helper.make_tensor("one", FLOAT, [], [1.0]))
    return _model(nodes, [_info("cond", BOOL, []), _info("x", FLOAT, ["n", 3])],
                  [_info("y", FLOAT, ["n", 3])], inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_outer_captures(cond: bool) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _compare(_if_model(), {"cond": np.array(cond), "x": x})


def test_if_with_known_condition_is_inlined() -> None:
    model = _if_model()
    model.graph.input.pop(0)
    model.graph.initializer.append(helper.make_tensor("cond", BOOL, [], [False]))
    graph = parse_onnx(model)
    assert "If" not in _ops(graph) and "Sub" in _ops(graph)
    _compare(model, {"x": np.ones((4, 3), np.float32)})


def test_if_branches_of_different_sizes_merge_to_unknown() -> None:
    then_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0])], "then", [],
        [_info("a", FLOAT, [2])])
    else_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["b"], value_floats=[3.0, 4.0, 5.0])], "else", [],
        [_info("b", FLOAT, [3])])
    model = _model([helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                                     else_branch=else_graph)],
                   [_info("cond", BOOL, [])], [_info("y", FLOAT, [None])])
    assert parse_onnx(model).outputs[0].shape == (-1,)
    for cond in (True, False):
        _compare(model, {"cond": np.array(cond)})


def test_if_whose_output_differs_in_rank_and_is_the_graphs_output_is_refused() -> None:
    then_graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"])], "then", [], [_info("a", FLOAT, None)])
    else_graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["b"], keepdims=0)], "else", [],
        [_info("b", FLOAT, None)])
    model = _model([helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                                     else_branch=else_graph)],
                   [_info("cond", BOOL, []), _info("x", FLOAT, [2, 3])],
                   [_info("y", FLOAT, [2, 3])])
    with pytest.raises(ShapeError, match="If node .*outputs to agree in rank"):
        parse_onnx(model)


# -- Loop -------------------------------------------------------------------------------

def _loop_body(nodes: list[onnx.NodeProto], carried: list[str],
               outputs: list[str]) -> onnx.GraphProto:
    """A body whose inputs are untyped, as exporters often leave them."""
    inputs = [_info("i", INT64, []), _info("cond_in", BOOL, [])]
    inputs += [onnx.ValueInfoProto(name=name) for name in carried]
    return helper.make_graph(nodes, "body", inputs,
                             [onnx.ValueInfoProto(name=name) for name in outputs])


def test_loop_with_trip_count_condition_capture_and_scan_output() -> None:
    body = _loop_body([
        helper.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
        helper.make_node("Mul", ["i_float", "scale"], ["step"]),   # scale: an outer value
        helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
        helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["cond_out"]),  # limit: an outer value
    ], ["acc_in"], ["cond_out", "acc_out", "step"])
    nodes = [helper.make_node("Loop", ["M", "cond", "acc"], ["acc_final", "steps"], body=body)]
    model = _model(nodes, [_info("M", INT64, []), _info("cond", BOOL, []),
                           _info("acc", FLOAT, [2]), _info("scale", FLOAT, [2]),
                           _info("limit", FLOAT, [])],
                   [_info("acc_final", FLOAT, [2]), _info("steps", FLOAT, [None, 2])])
    feeds = {"cond": np.array(True), "acc": np.zeros(2, np.float32),
             "scale": np.array([1.0, 0.5], np.float32), "limit": np.array(20.0, np.float32)}
    for trip_count in (0, 3, 100):
        _compare(model, {"M": np.array(trip_count, np.int64), **feeds})


def test_loop_carried_value_that_grows_gets_an_unknown_dimension() -> None:
    body = _loop_body([
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
        helper.make_node("Unsqueeze", ["i_float", "zero"], ["item"]),
        helper.make_node("Concat", ["seq_in", "item"], ["seq_out"], axis=0),
    ], ["seq_in"], ["cond_out", "seq_out"])
    nodes = [helper.make_node("Loop", ["M", "", "seq"], ["seq_final"], body=body)]
    model = _model(nodes, [_info("M", INT64, []), _info("seq", FLOAT, [1])],
                   [_info("seq_final", FLOAT, [None])],
                   (helper.make_tensor("zero", INT64, [1], [0]),))
    assert parse_onnx(model).outputs[0].shape == (-1,)
    out, = _compare(model, {"M": np.array(4, np.int64), "seq": np.array([9.0], np.float32)})
    np.testing.assert_array_equal(out, [9, 0, 1, 2, 3])


def test_nested_if_in_loop_reads_the_main_graph() -> None:
    """The If inside the body reads ``bias`` from two scopes up."""
    then_graph = helper.make_graph([helper.make_node("Add", ["x_in", "bias"], ["t"])], "then",
                                   [], [_info("t", FLOAT, None)])
    else_graph = helper.make_graph([helper.make_node("Sub", ["x_in", "bias"], ["e"])], "else",
                                   [], [_info("e", FLOAT, None)])
    body = _loop_body([
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Mod", ["i", "two"], ["parity"]),
        helper.make_node("Equal", ["parity", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["x_out"], then_branch=then_graph,
                         else_branch=else_graph),
        helper.make_node("Mul", ["x_out", "x_out"], ["square"]),
    ], ["x_in"], ["cond_out", "x_out", "square"])
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["x_final", "squares"], body=body)]
    inits = (helper.make_tensor("two", INT64, [], [2]), helper.make_tensor("zero", INT64, [], [0]))
    model = _model(nodes, [_info("M", INT64, []), _info("x", FLOAT, [3]),
                           _info("bias", FLOAT, [3])],
                   [_info("x_final", FLOAT, [3]), _info("squares", FLOAT, [None, 3])], inits)
    _compare(model, {"M": np.array(5, np.int64), "x": np.array([1, 2, 3], np.float32),
                     "bias": np.array([0.5, -1.0, 2.0], np.float32)})


def test_outer_constants_are_copied_into_bodies_and_known_conditions_fold() -> None:
    """The body reshapes with an outer shape constant (so its shapes stay static), and its
    If, whose condition compares outer constants, is replaced by the taken branch."""
    then_graph = helper.make_graph([helper.make_node("Add", ["flat", "offset"], ["t"])],
                                   "then", [], [_info("t", FLOAT, None)])
    else_graph = helper.make_graph([helper.make_node("Identity", ["offset"], ["e"])], "else",
                                   [], [_info("e", FLOAT, None)])
    body = _loop_body([
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Reshape", ["x_in", "flat_shape"], ["flat"]),
        helper.make_node("Greater", ["big", "small"], ["known"]),
        helper.make_node("If", ["known"], ["shifted"], then_branch=then_graph,
                         else_branch=else_graph),
        helper.make_node("Reshape", ["shifted", "square_shape"], ["x_out"]),
    ], ["x_in"], ["cond_out", "x_out"])
    inits = (helper.make_tensor("flat_shape", INT64, [1], [4]),
             helper.make_tensor("square_shape", INT64, [2], [2, 2]),
             helper.make_tensor("offset", FLOAT, [4], [1, 2, 3, 4]),
             helper.make_tensor("big", FLOAT, [], [2.0]),
             helper.make_tensor("small", FLOAT, [], [1.0]))
    model = _model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
                   [_info("M", INT64, []), _info("x", FLOAT, [2, 2])],
                   [_info("y", FLOAT, [2, 2])], inits)
    graph = parse_onnx(model)
    loop, = [node for node in graph.nodes if node.op_type == "Loop"]
    assert len(loop.inputs) == 3 and loop.attrs["num_captured"] == 0
    assert "If" not in _ops(loop.attrs["body"])
    assert loop.outputs[0].shape == (2, 2)
    _compare(model, {"M": np.array(3, np.int64), "x": np.ones((2, 2), np.float32)})


def test_runaway_loop_raises_execution_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 50)
    body = _loop_body([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                       helper.make_node("Identity", ["x_in"], ["x_out"])],
                      ["x_in"], ["cond_out", "x_out"])
    model = _model([helper.make_node("Loop", ["", "cond", "x"], ["y"], body=body)],
                   [_info("cond", BOOL, []), _info("x", FLOAT, [2])], [_info("y", FLOAT, [2])])
    rep = ge.backend.prepare(model)
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(rep.run({"cond": np.array(False), "x": x})[0], x)
    with pytest.raises(ExecutionError, match="Loop ran 50 iterations"):
        rep.run({"cond": np.array(True), "x": x})


def test_loop_inference_with_unknown_dimensions() -> None:
    graph = Graph("outer")
    start = create_node("Data", [], {"shape": ["n", 4], "dtype": DataType.DT_FLOAT}, "s", graph)
    body = Graph("body")
    create_node("Data", [], {"shape": [], "dtype": DataType.DT_INT64}, "i", body)
    cond_in = create_node("Data", [], {"shape": [], "dtype": DataType.DT_BOOL}, "c", body)
    carried = create_node("Data", [], {"shape": ["n", 4], "dtype": DataType.DT_FLOAT}, "v", body)
    doubled = create_node("Add", [carried, carried], {}, "double", body)
    body.set_outputs([cond_in, doubled, doubled])
    loop = create_node("Loop", [None, None, start], {"body": body}, "loop", graph)
    assert [v.shape for v in loop.outputs] == [("n", 4), (-1, "n", 4)]
    with pytest.raises(ShapeError, match="Loop node 'bad'.*num_captured"):
        create_node("Loop", [None, None, start], {"body": body, "num_captured": 2}, "bad", graph)


# -- Scan -------------------------------------------------------------------------------

def _scan_model(**attrs: Any) -> onnx.ModelProto:
    """A running sum over axis 1 of x, plus the element times an outer weight."""
    body = helper.make_graph([
        helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]),
        helper.make_node("Mul", ["x_t", "w"], ["scaled"]),
    ], "body", [onnx.ValueInfoProto(name="sum_in"), onnx.ValueInfoProto(name="x_t")],
        [onnx.ValueInfoProto(name="sum_out"), onnx.ValueInfoProto(name="scaled"),
         onnx.ValueInfoProto(name="sum_out_copy")])
    body.node.append(helper.make_node("Identity", ["sum_out"], ["sum_out_copy"]))
    nodes = [helper.make_node("Scan", ["init", "x"], ["final", "scaled_all", "sums"], body=body,
                              num_scan_inputs=1, **attrs)]
    return _model(nodes, [_info("init", FLOAT, [2]), _info("x", FLOAT, [2, "T"]),
                          _info("w", FLOAT, [])],
                  [_info("final", FLOAT, [2]), _info("scaled_all", FLOAT, [None, None]),
                   _info("sums", FLOAT, [None, None])])


@pytest.mark.parametrize("attrs", [
    {"scan_input_axes": [1]},
    {"scan_input_axes": [-1], "scan_input_directions": [1]},
    {"scan_input_axes": [1], "scan_output_axes": [1, -1], "scan_output_directions": [1, 0]},
])
def test_scan_axes_directions_and_capture(attrs: dict[str, Any]) -> None:
    feeds = {"init": np.array([1.0, -1.0], np.float32),
             "x": np.arange(10, dtype=np.float32).reshape(2, 5),
             "w": np.array(0.5, np.float32)}
    _compare(_scan_model(**attrs), feeds)


def test_scan_inference_keeps_named_sequence_length() -> None:
    graph = parse_onnx(_scan_model(scan_input_axes=[1], scan_output_axes=[1, 0]))
    final, scaled, sums = graph.outputs
    assert final.shape == (2,)
    assert scaled.shape == (2, "T")
    assert sums.shape == ("T", 2)


def test_scan_zero_length_gives_empty_outputs() -> None:
    model = _scan_model(scan_input_axes=[1])
    final, scaled, sums = ge.backend.prepare(model).run(
        {"init": np.ones(2, np.float32), "x": np.zeros((2, 0), np.float32),
         "w": np.array(1.0, np.float32)})
    np.testing.assert_array_equal(final, [1, 1])
    assert scaled.shape == (0, 2) and sums.shape == (0, 2)
