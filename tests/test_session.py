"""ge.compile and ge.Session: results, feed checks, dynamic shapes, errors, threads."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.errors import ExecutionError, GERuntimeError, InputError, UnsupportedOpError
from ge.ir import TensorDesc
from ge.ops import create_node
from tests.concurrency import run_on_threads


def two_input_graph(shape_a=(-1, 4), shape_b=(-1, 4)) -> ge.Graph:
    graph = ge.Graph("g")
    a = create_node("Data", [], {"shape": list(shape_a)}, "a", graph)
    b = create_node("Data", [], {"shape": list(shape_b)}, "b", graph)
    mul = create_node("Mul", [a, b], {}, "mul", graph)
    exp = create_node("Exp", [mul], {}, "exp", graph)
    out = create_node("Add", [exp, a], {}, "out", graph)
    graph.set_outputs([out, mul])
    return graph


def test_results_are_ordered_and_correct():
    session = ge.Session(ge.compile(two_input_graph()))
    a, b = np.random.rand(3, 4).astype(np.float32), np.random.rand(3, 4).astype(np.float32)
    result = session.run({"a": a, "b": b})
    assert list(result) == ["out", "mul"]
    np.testing.assert_allclose(result["out"], np.exp(a * b) + a, rtol=1e-6)
    np.testing.assert_allclose(result["mul"], a * b, rtol=1e-6)


def test_compile_leaves_the_users_graph_alone():
    graph = two_input_graph()
    before = graph.to_json()
    executable = ge.compile(graph)
    assert graph.to_json() == before
    assert executable.graph is not graph


def test_dynamic_dimension_accepts_any_size():
    session = ge.Session(ge.compile(two_input_graph()))
    for rows in (1, 5, 17):
        a = np.ones((rows, 4), np.float32)
        assert session.run({"a": a, "b": a})["out"].shape == (rows, 4)


def test_named_dimensions_must_agree_across_inputs():
    session = ge.Session(ge.compile(two_input_graph(("n", 4), ("n", 4))))
    with pytest.raises(InputError, match="'n'"):
        session.run({"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)})


@pytest.mark.parametrize("feed, message", [
    ({"a": np.ones((2, 4), np.float32)}, "missing input 'b'"),
    ({"a": np.ones((2, 4), np.float32), "b": np.ones((2, 4), np.float32), "c": 1},
     "unknown input 'c'"),
    ({"a": np.ones((2, 4), np.float64), "b": np.ones((2, 4), np.float32)},
     "input 'a' has dtype float64; expected float32"),
    ({"a": np.ones((2, 5), np.float32), "b": np.ones((2, 5), np.float32)},
     "input 'a' has shape \\[2, 5\\]; expected \\[\\?,4\\]"),
    ({"a": np.ones((2, 4, 1), np.float32), "b": np.ones((2, 4), np.float32)}, "rank 2"),
    ({"a": [["x"] * 4], "b": np.ones((1, 4), np.float32)}, "cannot be read as float32"),
])
def test_bad_feeds_name_the_input(feed, message):
    session = ge.Session(ge.compile(two_input_graph()))
    with pytest.raises(InputError, match=message):
        session.run(feed)


@pytest.mark.parametrize("feed, message", [
    ({"a": np.ones((2, 4), np.float32)}, "missing input 'b'"),
    ({"a": np.ones((2, 4), np.float64), "b": np.ones((2, 4), np.float32)},
     "input 'a' has dtype float64"),
    ({"a": np.ones((2, 5), np.float32), "b": np.ones((2, 5), np.float32)},
     "input 'a' has shape \\[2, 5\\]"),
    ({"a": np.ones((2, 4), np.float32), "c": np.ones((2, 4), np.float32)},
     "unknown input 'c'"),
])
def test_a_repeated_feed_skips_no_check(feed, message):
    # a feed like the one before it takes a shortcut past the checks; one that differs
    # in a name, a dtype or a shape must still meet them all
    session = ge.Session(ge.compile(two_input_graph(("n", 4), ("n", 4))))
    good = {"a": np.ones((2, 4), np.float32), "b": np.ones((2, 4), np.float32)}
    for _ in range(2):
        session.run(good)
    with pytest.raises(InputError, match=message):
        session.run(feed)
    with pytest.raises(InputError, match="'n'"):
        session.run({"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)})


def test_repeated_runs_give_fresh_results_and_keep_no_feed():
    import gc
    import weakref

    session = ge.Session(ge.compile(two_input_graph()))
    results, kept = [], []
    for seed in range(4):
        a = np.random.default_rng(seed).random((3, 4), np.float32)
        b = np.random.default_rng(seed + 10).random((3, 4), np.float32)
        results.append((session.run({"a": a, "b": b}), a * b, np.exp(a * b) + a))
        kept.append(weakref.ref(a))
        del a, b
    gc.collect()
    assert all(ref() is None for ref in kept)  # the session holds no feed
    for result, product, out in results:  # no run wrote over an earlier run's outputs
        np.testing.assert_allclose(result["mul"], product, rtol=1e-6)
        np.testing.assert_allclose(result["out"], out, rtol=1e-6)


def test_a_feed_must_be_a_mapping():
    with pytest.raises(InputError, match="dict"):
        ge.Session(ge.compile(two_input_graph())).run([np.ones((1, 4))])


def test_lists_are_accepted_as_feeds():
    out = ge.Session(ge.compile(two_input_graph())).run({"a": [[0, 0, 0, 0]], "b": [[1, 2, 3, 4]]})
    np.testing.assert_array_equal(out["out"], np.ones((1, 4), np.float32))


def test_a_failing_kernel_becomes_an_execution_error_naming_the_node():
    graph = ge.Graph("g")
    x = create_node("Data", [], {"shape": [-1], "dtype": ge.DataType.DT_INT64}, "x", graph)
    zero = create_node("Const", [], {"value": ge.Tensor(np.zeros(1, np.int64))}, "zero", graph)
    div = create_node("Div", [x, zero], {}, "divide", graph)
    graph.set_outputs([div])
    with pytest.raises(ExecutionError, match="Div node 'divide'.*division by zero"):
        ge.Session(ge.compile(graph)).run({"x": np.ones(3, np.int64)})


def test_unsupported_ops_are_listed_all_at_once():
    graph = two_input_graph()
    graph.add_node("Frobnicate", [graph.node("out")], {}, [TensorDesc((-1, 4))], "f1")
    graph.add_node("Twiddle", [graph.node("out")], {}, [TensorDesc((-1, 4))], "f2")
    with pytest.raises(UnsupportedOpError, match="Frobnicate, Twiddle"):
        ge.compile(graph)


def test_outputs_never_alias_feeds_or_constants():
    graph = ge.Graph("g")
    x = create_node("Data", [], {"shape": [3]}, "x", graph)
    c = create_node("Const", [], {"value": ge.Tensor(np.ones(3, np.float32))}, "c", graph)
    graph.set_outputs([create_node("Identity", [x], {}, "same", graph), c])
    session = ge.Session(ge.compile(graph))
    feed = np.zeros(3, np.float32)
    result = session.run({"x": feed})
    result["same"][0] = 7
    result["c"][0] = 7
    assert feed[0] == 0
    assert session.run({"x": feed})["c"][0] == 1


def test_release_plan_frees_each_intermediate_after_its_last_reader():
    executable = ge.compile(two_input_graph())
    kept = {spec.slot for spec in executable.outputs + executable.inputs}
    released: dict[int, int] = {}
    for position, step in enumerate(executable.steps):
        for slot in step.release:
            assert slot not in released, "released twice"
            released[slot] = position
    for position, step in enumerate(executable.steps):
        for slot in step.inputs:
            if slot in released:
                assert released[slot] >= position
    produced = {slot for step in executable.steps for slot in step.outputs}
    assert produced - kept == set(released) - kept
    assert not kept & set(released)


def test_one_session_serves_many_threads():
    session = ge.Session(ge.compile(two_input_graph()))

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(30):
            a = rng.random((seed + 1, 4), dtype=np.float32)
            b = rng.random((seed + 1, 4), dtype=np.float32)
            np.testing.assert_allclose(session.run({"a": a, "b": b})["mul"], a * b)

    run_on_threads(work, 4)


def test_finalized_session_refuses_to_run():
    session = ge.Session(ge.compile(two_input_graph()))
    session.finalize()
    with pytest.raises(GERuntimeError, match="finalized"):
        session.run({"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)})


def test_session_describes_its_inputs_and_outputs():
    session = ge.Session(ge.compile(two_input_graph()))
    assert [name for name, _ in session.get_inputs()] == ["a", "b"]
    assert session.get_outputs()[0] == ("out", TensorDesc((-1, 4)))
    with pytest.raises(GERuntimeError, match="ge.compile"):
        ge.Session(two_input_graph())


# -- plans compiled for input shapes that repeat -------------------------------------------

def _shape_switch_model() -> bytes:
    """x [1, n] -> 2 * relu(x) when n == 4, else -x: an If on the input's length, as an
    exporter writes a squeeze of a dimension it could not see."""
    from onnx import TensorProto, helper, numpy_helper

    def constant(name: str, array: np.ndarray) -> object:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))

    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), constant("two", np.array(2, np.float32)),
         helper.make_node("Mul", ["r", "two"], ["doubled"])], "then", [],
        [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, [1, "n"])])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["negated"])], "else", [],
        [helper.make_tensor_value_info("negated", TensorProto.FLOAT, [1, "n"])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             constant("one", np.array(1, np.int64)),
             helper.make_node("Gather", ["shape", "one"], ["length"]),
             constant("four", np.array(4, np.int64)),
             helper.make_node("Equal", ["length", "four"], ["is_four"]),
             helper.make_node("If", ["is_four"], ["y"], then_branch=then_branch,
                              else_branch=else_branch)]
    graph = helper.make_graph(nodes, "switch",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _switch(x: np.ndarray) -> np.ndarray:
    return 2 * np.maximum(x, 0) if x.shape[1] == 4 else -x


def test_shapes_run_again_and_again_get_a_plan_of_their_own():
    executable = ge.compile(ge.parse_onnx(_shape_switch_model()))
    assert "If" in {step.op_type for step in executable.steps}
    session = ge.Session(executable)
    rng = np.random.default_rng(0)
    for run in range(6):
        x = rng.standard_normal((1, 4)).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], _switch(x))
        assert len(session.shape_specializations) == (run >= 2)
    (shapes, specialized), = session.shape_specializations.items()
    assert shapes == "x [1,4]"
    assert "If" not in {step.op_type for step in specialized.steps}  # the branch inlined
    for length in (5, 4, 5):  # another shape runs the dynamic plan; then 4 finds its own
        x = rng.standard_normal((1, length)).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], _switch(x))
    x = rng.standard_normal((1, 4)).astype(np.float32)
    session.run({"x": x}, profile=True)
    assert session.last_profile is not None
    assert "If" not in {step.op_type for step in session.last_profile.steps}
    assert len(session.shape_specializations) == 1


def test_a_session_told_not_to_or_with_nothing_to_fold_keeps_one_plan():
    executable = ge.compile(ge.parse_onnx(_shape_switch_model()))
    session = ge.Session(executable, specialize=False)
    x = np.ones((1, 4), np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(session.run({"x": x})["y"], _switch(x))
    assert session.shape_specializations == {}
    static = ge.Session(ge.compile(two_input_graph((3, 4), (3, 4))))
    assert not static.specialize
    assert ge.Session(executable).specialize


@pytest.mark.parametrize("limit", ["none", "arena", "constants"])
def test_a_small_run_repeated_gets_a_plan_of_its_own(limit, monkeypatch):
    """Nothing is computed from the shapes, but the run is small: its shapes repeated
    get a static plan (each small op's engine settled when compiling). A run whose arena
    or whose graph's constants are over the limits keeps the dynamic plan."""
    import ge.session as session_module

    if limit == "arena":
        monkeypatch.setattr(session_module, "SMALL_RUN_BYTES", 8)
    elif limit == "constants":
        monkeypatch.setattr(session_module, "SMALL_RUN_CONSTANTS", 8)
    graph = two_input_graph()
    create_node("Const", [], {"value": ge.Tensor(np.ones(4, np.float32))}, "c", graph)
    add = graph.outputs[1].producer  # the Mul, now plus a constant
    graph.set_outputs([graph.outputs[0], create_node("Add", [add, graph.node("c")], {},
                                                      "plus", graph)])
    session = ge.Session(ge.compile(graph))
    assert session.specialize
    a, b = np.random.rand(3, 4).astype(np.float32), np.random.rand(3, 4).astype(np.float32)
    for _ in range(4):
        result = session.run({"a": a, "b": b})
        np.testing.assert_allclose(result["out"], np.exp(a * b) + a, rtol=1e-6)
        np.testing.assert_allclose(result["plus"], a * b + 1, rtol=1e-6)
    plans = session.shape_specializations
    if limit != "none":
        assert plans == {}
        return
    (shapes, executable), = plans.items()
    assert shapes == "a [3,4], b [3,4]"
    assert all(spec.desc.is_static for spec in executable.inputs)


def test_a_specialization_that_fails_to_compile_warns_and_keeps_the_dynamic_plan(monkeypatch):
    import ge.session as session_module
    from ge.errors import CompileError

    def failing(*args, **kwargs):
        raise CompileError("no compiler today")

    session = ge.Session(ge.compile(ge.parse_onnx(_shape_switch_model())))
    monkeypatch.setattr(session_module, "compile", failing)
    x = np.full((1, 4), -1.5, np.float32)
    with pytest.warns(RuntimeWarning, match="no compiler today"):
        for _ in range(6):
            np.testing.assert_array_equal(session.run({"x": x})["y"], _switch(x))
    (error,) = session.shape_specializations.values()
    assert isinstance(error, CompileError)
