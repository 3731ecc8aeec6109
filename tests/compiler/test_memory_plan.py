"""The memory plan on the execution path: figures, equality of results, bounds."""

from __future__ import annotations

import numpy as np
import pytest

import ge
import ge.graphpass as gp
from examples import zoo
from ge.compiler.loader import MAX_PLANS
from ge.ops import create_node
from ge.session import ARENAS_KEPT
from tests.concurrency import run_on_threads
from tests.tolerance import assert_close, rel_err


def test_every_zoo_model_plans_within_5_percent_of_its_lower_bound(exported):
    # on the NumPy engines every value lives in the arena: the planner's whole work
    for name in zoo.MODELS:
        model, path = exported(name, False)
        graph = ge.parse_onnx(path)
        executable = ge.compile(graph, engines=["fused", "numpy"])
        assert executable.memory == {}  # dynamic batch: planned at the first run
        session = ge.Session(executable)
        feeds = zoo.example_feeds(name, batch=1)
        got = session.run(feeds)
        memory = executable.memory
        assert memory["signature"] == {k: list(v.shape) for k, v in feeds.items()}
        assert memory["lower_bound_bytes"] <= memory["planned_bytes"] \
            <= 1.05 * memory["lower_bound_bytes"], name
        assert memory["planned_bytes"] < memory["naive_bytes"], name
        if name == "resnet50":
            assert memory["planned_bytes"] <= 0.3 * memory["naive_bytes"]
        want = zoo.torch_outputs(model, feeds, name)
        for index, spec in enumerate(executable.outputs):
            assert rel_err(got[spec.name], want[index]) < 1e-4, name


def test_the_torch_engine_s_own_outputs_are_planned_and_reported_outside_the_arena(exported):
    model, path = exported("resnet18", False)
    executable = ge.compile(ge.parse_onnx(path), engines=["fused", "torch", "numpy"])
    feeds = zoo.example_feeds("resnet18", batch=1)
    got = ge.Session(executable).run(feeds)
    memory = executable.memory
    convolutions = sum(count for op, count in executable.report["engines_by_op"]["torch"].items()
                       if op.endswith("Conv2D"))
    outside = memory["outside_arena"]
    assert convolutions > 0
    assert outside.get("Conv2D", 0) + outside.get("FusedConv2D", 0) == convolutions
    assert memory["lower_bound_bytes"] <= memory["planned_bytes"]
    numpy_only = ge.compile(ge.parse_onnx(path), engines=["fused", "numpy"])
    ge.Session(numpy_only).run(feeds)
    assert memory["planned_bytes"] < numpy_only.memory["planned_bytes"]
    want = zoo.torch_outputs(model, feeds, "resnet18")
    assert rel_err(got[executable.outputs[0].name], want[0]) < 1e-4


def test_the_onednn_engine_s_convolutions_write_into_the_arena(exported):
    model, path = exported("resnet18", False)
    executable = ge.compile(ge.parse_onnx(path))
    feeds = zoo.example_feeds("resnet18", batch=1)
    got = ge.Session(executable).run(feeds)
    convolutions = sum(count for op, count in executable.report["engines_by_op"]["onednn"].items()
                       if op.endswith("Conv2D"))
    assert convolutions == 20  # every convolution of ResNet-18
    memory = executable.memory
    assert not any(op.endswith("Conv2D") for op in memory["outside_arena"])
    on_torch = ge.compile(ge.parse_onnx(path), engines=["fused", "torch", "numpy"])
    ge.Session(on_torch).run(feeds)
    assert memory["lower_bound_bytes"] <= memory["planned_bytes"] \
        <= 1.05 * memory["lower_bound_bytes"]
    want = zoo.torch_outputs(model, feeds, "resnet18")
    assert rel_err(got[executable.outputs[0].name], want[0]) < 1e-4


def test_reuse_and_in_place_change_no_bit_of_the_results(exported):
    for name in ("resnet18", "bert"):
        _, path = exported(name, False)
        graph = ge.parse_onnx(path)
        plain = gp.MemoryPass()
        plain.enable_memory_reuse(False)
        plain.enable_inplace(False)
        separate = ge.compile(plain.run(graph))
        shared = ge.compile(graph)
        feeds = zoo.example_feeds(name, batch=2, seed=3)
        want = ge.Session(separate).run(feeds)
        got = ge.Session(shared).run(feeds)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
        off, on = separate.memory, shared.memory
        assert off["inplace_count"] == 0 and off["strategy"] == "no reuse"
        assert on["planned_bytes"] < off["planned_bytes"]
        if name == "bert":
            assert on["inplace_count"] > 0


def test_the_memory_pass_drives_the_planner_one_switch_at_a_time(exported):
    _, path = exported("bert", False)
    graph = ge.parse_onnx(path)
    feeds = zoo.example_feeds("bert", batch=1)
    figures = {}
    for reuse in (True, False):
        for inplace in (True, False):
            memory_pass = gp.MemoryPass()
            memory_pass.enable_memory_reuse(reuse)
            memory_pass.enable_inplace(inplace)
            executable = ge.compile(memory_pass.run(graph))
            ge.Session(executable).run(feeds)
            figures[reuse, inplace] = executable.memory
    assert figures[True, False]["inplace_count"] == 0 < figures[True, True]["inplace_count"]
    assert figures[False, True]["strategy"] == "no reuse"
    assert figures[False, False]["planned_bytes"] >= figures[False, True]["planned_bytes"]
    assert figures[True, True]["planned_bytes"] <= figures[True, False]["planned_bytes"]


def _op(graph, op_type, inputs, name, **attrs):
    return create_node(op_type, list(inputs), attrs, name, graph)


def _dynamic_graph():
    graph = ge.Graph("dynamic")
    x = _op(graph, "Data", [], "x", shape=[-1, 64])
    weights = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    w = _op(graph, "Const", [], "w", value=ge.Tensor(weights))
    h = _op(graph, "MatMul", [x, w], "h")
    r = _op(graph, "Relu", [h], "r")
    graph.set_outputs([_op(graph, "MatMul", [r, w], "y")])
    return graph, weights


def test_plans_and_arenas_stay_bounded_as_shapes_vary():
    graph, weights = _dynamic_graph()
    session = ge.Session(ge.compile(graph))
    largest = 0
    for rows in list(range(1, 41)) + [300, 2, 7]:
        x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
        (got,) = session.run({"x": x}).values()
        exact = np.maximum(x.astype(np.float64) @ weights, 0) @ weights
        # measured against the output's scale: single elements cancel to near zero
        assert rel_err(got, exact) < 1e-5, rows
        largest = max(largest, session.executable.memory["planned_bytes"])
        assert session.cached_plans <= MAX_PLANS
        assert session.idle_arena_bytes <= ARENAS_KEPT * largest
    assert session.cached_plans == MAX_PLANS
    session.finalize()
    assert session.idle_arena_bytes == 0


def test_a_value_whose_size_only_the_data_decides_runs_outside_the_arena():
    graph = ge.Graph("nonzero")
    x = _op(graph, "Data", [], "x", shape=[16])
    found = _op(graph, "NonZero", [_op(graph, "Relu", [x], "relu")], "found")
    cast = _op(graph, "Cast", [found], "cast", dtype=ge.DataType.DT_FLOAT)
    graph.set_outputs([_op(graph, "Add", [cast, cast], "doubled")])
    executable = ge.compile(graph, opt_level=0)
    session = ge.Session(executable)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
        (got,) = session.run({"x": x}).values()
        np.testing.assert_array_equal(got, 2 * np.nonzero(np.maximum(x, 0))[0][None]
                                      .astype(np.float32))
    memory = executable.memory
    assert memory["dynamic_values"] >= 2 and memory["outside_arena"].get("NonZero") == 1


@pytest.mark.parametrize("batch", [1, 3])
def test_a_dynamic_batch_is_planned_per_batch_size(exported, batch):
    _, path = exported("simple_cnn", False)
    graph = ge.parse_onnx(path)
    session = ge.Session(ge.compile(graph))
    feeds = zoo.example_feeds("simple_cnn", batch=batch)
    reference = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    got = session.run(feeds)
    for key in got:
        assert_close(got[key], reference[key], accumulate=True)
    assert session.executable.memory["signature"]["input"][0] == batch


def test_the_compiler_keeps_the_memory_aware_order_when_it_lowers_the_peak():
    # two branches from x, each a large value reduced to a small one; built so that the
    # graph order makes both large values before reducing either
    graph = ge.Graph("branches")
    x = _op(graph, "Data", [], "x", shape=[8, 256])
    big_a = _op(graph, "Tile", [x, _op(graph, "Const", [], "ra",
                                          value=ge.Tensor(np.array([4, 1], np.int64)))], "big_a")
    big_b = _op(graph, "Tile", [x, _op(graph, "Const", [], "rb",
                                          value=ge.Tensor(np.array([4, 1], np.int64)))], "big_b")
    axis = _op(graph, "Const", [], "axis", value=ge.Tensor(np.array([0], np.int64)))
    small_a = _op(graph, "ReduceSum", [big_a, axis], "small_a", keepdims=True)
    small_b = _op(graph, "ReduceMax", [big_b, axis], "small_b", keepdims=True)
    graph.set_outputs([_op(graph, "Add", [small_a, small_b], "y")])
    executable = ge.compile(graph, opt_level=0)
    schedule = executable.report["schedule"]
    assert schedule["order"] == "memory-aware"
    assert schedule["memory_aware_peak_bytes"] < schedule["graph_order_peak_bytes"]
    order = [step.node for step in executable.steps]
    assert order.index("small_a") < order.index("big_b")
    feed = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
    (got,) = ge.Session(executable).run({"x": feed}).values()
    tiled = np.tile(feed, (4, 1))
    assert_close(got, tiled.sum(0, keepdims=True) + tiled.max(0, keepdims=True),
                 accumulate=True)


def test_eight_threads_share_one_session_each_run_in_its_own_arena(exported):
    _, path = exported("simple_cnn", False)
    graph = ge.parse_onnx(path)
    session = ge.Session(ge.compile(graph))
    reference = ge.Session(ge.compile(graph, opt_level=0))
    feeds = [zoo.example_feeds("simple_cnn", batch=1 + i % 3, seed=i) for i in range(8)]
    wants = [reference.run(feed) for feed in feeds]

    def work(index: int) -> None:
        for _ in range(20):
            got = session.run(feeds[index])
            for key, want in wants[index].items():
                assert_close(got[key], want, accumulate=True)

    run_on_threads(work, 8)
    assert session.idle_arena_bytes <= ARENAS_KEPT * max(
        session._program.plan_for({"input": (b, 3, 32, 32)}).tasks.arena_bytes
        for b in (1, 2, 3))
