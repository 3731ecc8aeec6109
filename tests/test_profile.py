"""Profiled runs: per-node times, the engine of each, a table and a Chrome trace."""

from __future__ import annotations

import json

import numpy as np

import ge
from ge.cli import main
from tests.compiler.test_streams import towers


def test_a_profiled_run_times_every_step_and_changes_no_output():
    executable = ge.compile(towers(), streams=2)
    session = ge.Session(executable)
    feed = {"x": np.random.default_rng(0).standard_normal((32, 128)).astype(np.float32)}
    plain = session.run(feed)
    assert session.last_profile is None
    profiled = session.run(feed, profile=True)
    np.testing.assert_array_equal(profiled["y"], plain["y"])
    profile = session.last_profile
    assert profile is not None and len(profile.steps) == len(executable.steps)
    by_node = {step.node: step for step in profile.steps}
    for index, step in enumerate(executable.steps):
        timed = by_node[step.node]
        assert (timed.op_type, timed.engine, timed.stream) == \
            (step.op_type, step.engine, executable.streams[index])
        assert 0 <= timed.start_ns and timed.start_ns + timed.duration_ns <= profile.total_ns
    assert {step.stream for step in profile.steps} == {0, 1}
    assert len({step.thread for step in profile.steps}) == 2  # two streams, two threads
    op_types = {op for op, _, _ in profile.by_op_type()}
    assert op_types == {step.op_type for step in executable.steps}
    table = profile.table(3)
    assert table.splitlines()[0].startswith("profile of 'towers'")
    assert len(table.splitlines()) == 2 + 3 + 1 + 3


def test_the_chrome_trace_has_one_event_per_step_on_a_track_per_stream(tmp_path):
    session = ge.Session(ge.compile(towers(), streams=2))
    session.run({"x": np.ones((32, 128), np.float32)}, profile=True)
    profile = session.last_profile
    assert profile is not None
    path = tmp_path / "trace.json"
    profile.save(path)
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    tracks = [e for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert len(complete) == len(profile.steps)
    assert {e["tid"] for e in complete} == {0, 1} and len(tracks) == 2
    assert all(e["dur"] >= 0 and "engine" in e["args"] for e in complete)


def test_ge_run_profile_prints_the_table_and_writes_the_trace(tmp_path, capsys):
    from examples.zoo import export_onnx

    model = export_onnx("simple_cnn", tmp_path / "cnn.onnx")
    trace = tmp_path / "cnn.json"
    assert main(["run", str(model), "--profile", "--top", "4", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "profile of " in out and "op type" in out and "FusedConv2D" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "FusedConv2D" for e in events)
