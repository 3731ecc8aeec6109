"""The straight-line runner a plan gets once it has run a few times: the same results,
the same slots freed, the same errors as the task loop it replaces."""

from __future__ import annotations

import numpy as np
import pytest

import ge
import ge.runtime.tasks as tasks_module
from ge.errors import ExecutionError
from ge.ops import create_node
from ge.runtime.tasks import Mode


def _const(graph: ge.Graph, name: str, value: np.ndarray) -> ge.Node:
    return create_node("Const", [], {"value": ge.Tensor(value)}, name, graph)


def _every_mode_graph() -> ge.Graph:
    """A view (Reshape of an intermediate), writers, a kernel whose result the plan
    copies into the arena (Trilu), one whose size only the data decides (NonZero), and
    outputs in buffers of their own and outside the arena."""
    graph = ge.Graph("modes")
    x = create_node("Data", [], {"shape": [4, 6]}, "x", graph)
    exp = create_node("Exp", [x], {}, "exp", graph)
    flat = create_node("Reshape", [exp, _const(graph, "shape", np.array([6, 4], np.int64))],
                       {}, "flat", graph)
    lower = create_node("Trilu", [flat], {"upper": 0}, "lower", graph)
    scaled = create_node("Mul", [lower, _const(graph, "half", np.float32(0.5))], {}, "scaled",
                         graph)
    big = create_node("Greater", [scaled, _const(graph, "one", np.float32(1.0))], {}, "big",
                      graph)
    where = create_node("NonZero", [big], {}, "where", graph)
    total = create_node("Add", [scaled, flat], {}, "total", graph)
    graph.set_outputs([total, where, scaled])
    return graph


def _reference(x: np.ndarray) -> dict[str, np.ndarray]:
    flat = np.exp(x).reshape(6, 4)
    scaled = np.tril(flat) * np.float32(0.5)
    return {"total": scaled + flat, "where": np.array(np.nonzero(scaled > 1)),
            "scaled": scaled}


def test_a_plan_run_again_and_again_gets_a_runner_giving_the_loops_results():
    session = ge.Session(ge.compile(_every_mode_graph(), opt_level=0))
    rng = np.random.default_rng(0)
    feeds = [rng.random((4, 6), np.float32) * 2 for _ in range(6)]
    results = [session.run({"x": feed}) for feed in feeds]
    plan = session._repeat.plan.tasks
    assert plan.straight[1] is not None, "no straight-line runner after six runs"
    assert {Mode.WRITE, Mode.COPY, Mode.KEEP, Mode.VIEW} <= set(plan.modes)
    for feed, result in zip(feeds, results):  # every run's outputs are its own
        for name, expected in _reference(feed).items():
            np.testing.assert_allclose(result[name], expected, rtol=1e-6, err_msg=name)
    assert len({id(result["total"]) for result in results}) == len(results)


def test_the_runner_frees_the_slots_the_loop_frees(monkeypatch):
    session = ge.Session(ge.compile(_every_mode_graph(), opt_level=0))
    feed = {"x": np.ones((4, 6), np.float32)}
    for _ in range(4):
        session.run(feed)
    program, plan = session._repeat.program, session._repeat.plan
    assert plan.tasks.straight[1] is not None
    kept: dict[str, list[object]] = {}
    from ge.session import _execute

    def recording(program_, plan_, arena, values, *args, **kwargs):
        _execute(program_, plan_, arena, values, *args, **kwargs)
        kept["straight" if plan_.tasks.straight[1] is not None else "loop"] = [
            value is not None for value in values]

    monkeypatch.setattr("ge.session._execute", recording)
    session.run(feed)
    plan.tasks.straight[:] = [0, None, None]  # back to the loop for its first runs
    session.run(feed)
    assert kept["straight"] == kept["loop"]
    outputs = {spec.slot for spec in program.executable.outputs}
    inputs = {spec.slot for spec in program.executable.inputs}
    live = {slot for slot, held in enumerate(kept["straight"]) if held}
    constants = {slot for slot, value in enumerate(program.template) if value is not None}
    assert live <= outputs | inputs | constants


def test_a_kernel_failing_in_the_runner_names_its_node_and_inputs():
    graph = ge.Graph("g")
    x = create_node("Data", [], {"shape": [3], "dtype": ge.DataType.DT_INT64}, "x", graph)
    y = create_node("Data", [], {"shape": [3], "dtype": ge.DataType.DT_INT64}, "y", graph)
    graph.set_outputs([create_node("Div", [x, y], {}, "divide", graph)])
    session = ge.Session(ge.compile(graph))
    ones = np.ones(3, np.int64)
    for _ in range(4):
        np.testing.assert_array_equal(session.run({"x": ones * 6, "y": ones * 2})["divide"],
                                      ones * 3)
    assert session._repeat.plan.tasks.straight[1] is not None
    with pytest.raises(ExecutionError,
                       match=r"Div node 'divide' failed on inputs \(int64\[3\], int64\[3\]\)"):
        session.run({"x": ones, "y": np.zeros(3, np.int64)})
    np.testing.assert_array_equal(session.run({"x": ones * 6, "y": ones * 3})["divide"],
                                  ones * 2)


def test_a_task_list_too_long_keeps_the_loop(monkeypatch):
    monkeypatch.setattr(tasks_module, "STRAIGHT_MAX_TASKS", 2)
    session = ge.Session(ge.compile(_every_mode_graph(), opt_level=0))
    feed = np.full((4, 6), 0.5, np.float32)
    for _ in range(5):
        result = session.run({"x": feed})
    assert session._repeat.plan.tasks.straight[1] is None
    np.testing.assert_allclose(result["total"], _reference(feed)["total"], rtol=1e-6)


def test_a_plan_with_nothing_left_to_run_still_runs_again_and_again():
    """Folding can leave no step at all (every output a constant): the runner of an
    empty task list is valid code too."""
    graph = ge.Graph("folded")
    x = create_node("Data", [], {"shape": [2, 3]}, "x", graph)
    shape = create_node("Shape", [x], {}, "shape", graph)
    graph.set_outputs([create_node("Add", [shape, _const(graph, "one", np.ones(2, np.int64))],
                                   {}, "plus", graph)])
    session = ge.Session(ge.compile(graph))
    assert not session._program.tasks
    for _ in range(5):
        np.testing.assert_array_equal(session.run({"x": np.zeros((2, 3), np.float32)})["plus"],
                                      [3, 4])
    assert session._repeat.plan.tasks.straight[1] is not None
