"""The threads pipeline backend: the single-process outputs bit for bit, failures raised
in the caller with the stage's index, bounded waits, and no thread left after close."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ge
from ge import distributed, partition
from ge.distributed.threads import THREAD_PREFIX
from tests.distributed.cases import (
    assert_a_failing_stage_is_named_and_the_pipeline_goes_on,
    depth_parts,
    gather_feed,
    gather_graph,
)
from tests.partition.cases import assert_same, skip_feed, skip_graph, zoo_case


def pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def cost_plan(model, stages: int, microbatches: int = 4) -> partition.ExecutionPlan:
    parts = partition.CostPartitioner().create_partitions(model, num_partitions=stages)
    return partition.PipelineScheduler().create_schedule(parts, num_microbatches=microbatches)


@pytest.mark.parametrize("name, stages", [("resnet18", 4), ("bert", 3)])
def test_the_pipeline_equals_the_single_process_session(name, stages):
    case = zoo_case(name)
    feeds = [case.feed] + [{k: v.copy() for k, v in case.feed.items()} for _ in range(2)]
    rng = np.random.default_rng(5)
    for shift, feed in enumerate(feeds[1:], start=1):
        for key, value in feed.items():
            if value.dtype == np.float32:
                feed[key] = rng.standard_normal(value.shape, dtype=np.float32)
            else:  # token ids and masks: the same values, elsewhere in the sequence
                feed[key] = np.roll(value, 7 * shift, axis=-1)
    session = ge.Session(case.executable)
    wanted = [session.run(feed) for feed in feeds]
    with distributed.Pipeline(cost_plan(case.executable, stages), backend="threads") as pipeline:
        assert pipeline.num_stages == stages and len(pipeline_threads()) >= stages
        assert_same(pipeline.run(case.feed), case.expected)
        for got, want in zip(pipeline.run_many(feeds), wanted):
            assert_same(got, want)
    assert not pipeline_threads()


def test_values_skip_stages_and_outputs_come_from_any_stage():
    graph = skip_graph()
    parts = depth_parts(graph, 7)
    want = ge.Session(ge.compile(graph, opt_level=0)).run(skip_feed())
    with distributed.Pipeline(parts, opt_level=0) as pipeline:  # a list: scheduled here
        for got in pipeline.run_many([skip_feed()] * 5):
            assert_same(got, want)


@pytest.fixture
def gather_pipeline():
    pipeline = distributed.Pipeline(depth_parts(gather_graph(), 2), timeout=5.0, opt_level=0)
    yield pipeline
    pipeline.close()


def test_a_failing_stage_raises_in_the_caller_with_its_index(gather_pipeline):
    assert_a_failing_stage_is_named_and_the_pipeline_goes_on(gather_pipeline)


def test_a_bad_feed_is_refused_before_it_enters(gather_pipeline):
    with pytest.raises(ge.errors.InputError, match="indices"):
        gather_pipeline.run({"x": np.zeros(4, np.float32)})
    with pytest.raises(distributed.PipelineError) as caught:  # wrong shape: stage 0 says so
        gather_pipeline.run({"x": np.zeros(5, np.float32), "indices": np.zeros(2, np.int64)})
    assert caught.value.stage == 0


def test_a_stage_that_stops_answering_times_out_naming_it():
    graph = gather_graph()
    parts = depth_parts(graph, 2)
    pipeline = distributed.Pipeline(parts, timeout=0.5, opt_level=0)
    release = threading.Event()
    session = pipeline.backend._sessions[1]  # noqa: SLF001 - the test stalls one stage
    real_run = session.run

    def stalled(feed, profile=False):
        release.wait(30)
        return real_run(feed)

    session.run = stalled
    started = time.monotonic()
    with pytest.raises(distributed.PipelineError) as caught:
        pipeline.run(gather_feed(1))
    assert time.monotonic() - started < 10
    assert caught.value.stage == 1 and "stage 1" in str(caught.value)
    with pytest.raises(distributed.PipelineError, match="closed"):
        pipeline.run(gather_feed(1))
    release.set()
    pipeline.close()
    assert not pipeline_threads()


def test_close_leaves_no_threads_running():
    graph = skip_graph()
    parts = partition.CostPartitioner().create_partitions(graph, num_partitions=3)
    before = set(threading.enumerate())
    pipeline = distributed.Pipeline(parts, opt_level=0)
    assert len(pipeline_threads()) == 3
    pipeline.run(skip_feed())
    pipeline.close()
    pipeline.close()  # idempotent
    assert pipeline.closed and not pipeline_threads()
    assert set(threading.enumerate()) <= before
    with pytest.raises(distributed.PipelineError, match="closed"):
        pipeline.run(skip_feed())


def test_backends_are_named_and_threads_runs_one_replica():
    parts = partition.CostPartitioner().create_partitions(skip_graph(), num_partitions=2)
    assert distributed.known_backends() == ["ray", "threads"]
    with pytest.raises(distributed.BackendError, match="known backends: ray, threads") as caught:
        distributed.Pipeline(parts, backend="mpi")
    assert isinstance(caught.value, ge.errors.GEError)
    with pytest.raises(distributed.BackendError, match="replicas"):
        distributed.Pipeline(parts, replicas=2)
    with pytest.raises(distributed.BackendError, match="backend_options"):
        distributed.Pipeline(parts, backend_options={"num_cpus": 2})
    with pytest.raises(distributed.BackendError, match="ExecutionPlan"):
        distributed.Pipeline("plan")
    assert not pipeline_threads()
