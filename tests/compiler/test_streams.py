"""Stream assignment, events, and runs on several streams."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ge
from ge.compiler.streams import ordering_waits
from ge.errors import ExecutionError
from ge.ops import create_node
from tests.concurrency import run_on_threads


def _op(graph, op_type, inputs, name, **attrs):
    return create_node(op_type, list(inputs), attrs, name, graph)


def towers(width=128, depth=3, batch=32, gather=False):
    """Two independent towers of MatMul + Tanh from one input, added at the end; with
    ``gather``, tower b starts by gathering rows of the input by fed indices."""
    graph = ge.Graph("towers")
    rng = np.random.default_rng(0)
    x = _op(graph, "Data", [], "x", shape=[batch, width])
    ends = []
    for tower in "ab":
        value = x
        if gather and tower == "b":
            index = _op(graph, "Data", [], "index", shape=[batch], dtype=ge.DataType.DT_INT64)
            value = _op(graph, "Gather", [x, index], "b_gather", axis=0)
        for i in range(depth):
            weights = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
            w = _op(graph, "Const", [], f"{tower}_w{i}", value=ge.Tensor(weights))
            value = _op(graph, "Tanh", [_op(graph, "MatMul", [value, w], f"{tower}_mm{i}")],
                        f"{tower}_tanh{i}")
        ends.append(value)
    graph.set_outputs([_op(graph, "Add", ends, "y")])
    return graph


def test_waits_keep_only_what_no_event_already_orders():
    # stream 0: 0 -> 1 -> 3; stream 1: 2 (reads 0) -> 4 (reads 1 and 3)
    streams = [0, 0, 1, 0, 1]
    producers = [[], [0], [0], [1], [1, 2, 3]]
    waits = ordering_waits(streams, producers)
    assert waits == [[], [], [0], [], [3]]  # 4 needs 3; 1 comes with it (3 follows 1)


def test_a_wait_already_implied_through_another_stream_is_dropped():
    # three streams: 1 waits for 0; 2 waits for 1 and, through it, knows 0 is done
    streams = [0, 1, 2]
    producers = [[], [0], [0, 1]]
    assert ordering_waits(streams, producers) == [[], [0], [1]]


def test_two_towers_run_on_two_streams_bit_for_bit():
    graph = towers()
    one, two = ge.compile(graph, streams=1), ge.compile(graph, streams=2)
    assert one.stream_count == 1 and two.stream_count == 2
    report = two.report["streams"]
    assert report["streams"] == 2 and report["events"] == 1  # only the join waits
    mine = {two.steps[i].node[0] for i, s in enumerate(two.streams) if s == 1} - {"y"}
    assert len(mine) == 1  # one tower per stream
    feed = {"x": np.random.default_rng(1).standard_normal((32, 128)).astype(np.float32)}
    want = ge.Session(one).run(feed)["y"]
    before = {t.ident for t in threading.enumerate()}
    session = ge.Session(two)
    for _ in range(3):
        np.testing.assert_array_equal(session.run(feed)["y"], want)
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert [t.name.startswith("ge-stream") for t in started] == [True]  # one worker
    session.finalize()
    started[0].join(timeout=10)
    assert not started[0].is_alive()


def test_values_of_two_streams_never_share_bytes():
    executable = ge.compile(towers(), streams=2)
    session = ge.Session(executable)
    feed = {"x": np.ones((32, 128), np.float32)}
    session.run(feed)
    plan = session._program.plan_for({"x": (32, 128)})
    regions: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    for index, step in enumerate(executable.steps):
        for slot in step.outputs:
            if slot in plan.memory.offsets:
                start = plan.memory.offsets[slot]
                shape, dtype = plan.memory.descs[slot]
                end = start + int(np.prod(shape)) * dtype.itemsize
                regions[executable.streams[index]].append((start, end))
    for a_start, a_end in regions[0]:
        for b_start, b_end in regions[1]:
            assert a_end <= b_start or b_end <= a_start
    assert plan.memory.strategy.startswith("per stream")


def test_a_failure_on_one_stream_is_raised_and_stops_the_run():
    graph = towers(gather=True)
    executable = ge.compile(graph, streams=2)
    gather_stream = executable.streams[[s.node for s in executable.steps].index("b_gather")]
    assert executable.stream_count == 2 and gather_stream in (0, 1)
    session = ge.Session(executable)
    x = np.random.default_rng(2).standard_normal((32, 128)).astype(np.float32)
    good = session.run({"x": x, "index": np.arange(32)})["y"]
    with pytest.raises(ExecutionError, match="b_gather"):
        session.run({"x": x, "index": np.full(32, 99)})
    np.testing.assert_array_equal(session.run({"x": x, "index": np.arange(32)})["y"], good)


def test_many_threads_share_a_two_stream_session():
    session = ge.Session(ge.compile(towers(), streams=2))
    single = ge.Session(ge.compile(towers(), streams=1))

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(10):
            feed = {"x": rng.standard_normal((32, 128)).astype(np.float32)}
            np.testing.assert_array_equal(session.run(feed)["y"], single.run(feed)["y"])

    run_on_threads(work, 4)


def test_streams_must_be_a_positive_count():
    with pytest.raises(ge.errors.CompileError, match="streams"):
        ge.compile(towers(), streams=0)


def _random_program(draw_ints, steps_count):
    """Random steps over slots: step i reads 1-2 earlier values (or the input, slot 0)
    and makes slot i + 1."""
    from ge.compiler.executable import Step

    steps = []
    for index in range(steps_count):
        reads = sorted({draw_ints(0, index) for _ in range(draw_ints(1, 2))})
        steps.append(Step(f"s{index}", "Relu" if len(reads) == 1 else "Add", "numpy",
                          tuple(reads), (index + 1,), ()))
    return steps


@pytest.mark.parametrize("seed", range(40))
def test_reused_bytes_are_written_only_after_their_last_users_on_every_stream(seed):
    from ge.compiler.streams import data_producers, memory_predecessors
    from ge.memory import StepUse, plan_memory

    rng = np.random.default_rng(seed)
    steps = _random_program(lambda lo, hi: int(rng.integers(lo, hi + 1)), 14)
    streams = [int(rng.integers(0, 3)) for _ in steps]
    uses = [StepUse(s.inputs, s.outputs, inplace=s.op_type == "Relu") for s in steps]
    descs = {slot: ((int(rng.integers(1, 5)) * 16,), np.dtype(np.float32))
             for slot in range(len(steps) + 1)}
    plan = plan_memory(uses, descs, pinned={0, len(steps)},
                       streams=None if seed % 2 else streams)  # shared or per-stream bytes
    sizes = {slot: int(np.prod(descs[slot][0])) * 4 for slot in plan.offsets}
    memory = memory_predecessors(steps, plan.offsets, sizes, plan.owner, plan.views)
    preds = [sorted(set(d) | set(m)) for d, m in zip(data_producers(steps), memory)]
    waits = ordering_waits(streams, preds)
    # happens-before: stream order and the waits, closed transitively
    before = [set() for _ in steps]
    last_on: dict[int, int] = {}
    for index, stream in enumerate(streams):
        direct = set(waits[index]) | ({last_on[stream]} if stream in last_on else set())
        for j in direct:
            before[index] |= before[j] | {j}
        last_on[stream] = index
    touches: dict[int, list[int]] = {}
    for index, step in enumerate(steps):
        for slot in (*step.inputs, *step.outputs):
            if slot in plan.offsets:
                touches.setdefault(plan.owner(slot), []).append(index)
    for index, producers in enumerate(data_producers(steps)):  # data dependencies hold
        assert all(producer in before[index] for producer in producers)
    owners = sorted(touches)
    for a in owners:
        for b in owners:
            if a == b:
                continue
            a_start, b_start = plan.offsets[a], plan.offsets[b]
            if not (a_start < b_start + sizes[b] and b_start < a_start + sizes[a]):
                continue
            if max(touches[a]) < min(touches[b]):  # b reuses a's bytes: b's writer waits
                writer = min(touches[b])
                assert all(j in before[writer] for j in touches[a]), (a, b)
    for index in plan.inplace:  # an in-place write waits for the input's other readers
        storage = plan.owner(steps[index].outputs[0])
        for j in touches[storage]:
            assert j >= index or j in before[index]
