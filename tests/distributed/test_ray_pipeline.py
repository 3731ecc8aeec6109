"""The Ray pipeline backend on a local two-CPU Ray: the single-process outputs bit for
bit (one replica or two), failures raised in the caller with the stage's index, an
actor lost mid-run or one that stops answering raising within bounded time, and no
actor left after close.

Results equal a session run with the threads the stage actors use (``threads=1`` by
default): GE's kernels round alike for one thread count, not across thread counts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import ray

import ge
from ge import distributed, partition
from tests.distributed.cases import (
    assert_a_failing_stage_is_named_and_the_pipeline_goes_on,
    depth_parts,
    gather_feed,
    gather_graph,
)
from tests.partition.cases import assert_same, skip_graph, zoo_case

#: every bounded wait of these tests; a hang fails within it
BOUND = 30.0


def cost_plan(model, stages: int) -> partition.ExecutionPlan:
    parts = partition.CostPartitioner().create_partitions(model, num_partitions=stages)
    return partition.PipelineScheduler().create_schedule(parts)


def varied_feeds(feed: dict[str, np.ndarray], count: int) -> list[dict[str, np.ndarray]]:
    """``feed`` and ``count - 1`` others of its shapes (token ids rolled, not drawn)."""
    rng = np.random.default_rng(11)
    feeds = [feed]
    for shift in range(1, count):
        feeds.append({key: rng.standard_normal(value.shape, dtype=np.float32)
                      if value.dtype == np.float32 else np.roll(value, 5 * shift, axis=-1)
                      for key, value in feed.items()})
    return feeds


def assert_gone(actors) -> None:
    """Every actor dies within ``BOUND`` seconds (``ray.kill`` takes effect in moments):
    a call to it fails, and does not hang."""
    deadline = time.monotonic() + BOUND
    for actor in actors:
        while True:
            try:
                ray.get(actor.ready.remote(), timeout=BOUND)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, f"{actor} still answers"
            time.sleep(0.05)


_LOCAL_RAY = """
import ray
import ge
from ge import distributed, partition
from tests.partition.cases import assert_same, skip_feed, skip_graph

assert not ray.is_initialized()
graph = skip_graph()
partitioner = partition.DepthPartitioner()
parts = partitioner.create_partitions(graph, partitioner.analyze_depth(graph), num_partitions=2)
want = ge.Session(ge.compile(graph, opt_level=0)).run(skip_feed())
with distributed.Pipeline(parts, backend="ray", opt_level=0,
                          backend_options={"num_cpus": 1}) as pipeline:
    resources = ray.cluster_resources()
    assert ray.is_initialized() and resources["CPU"] == 1, resources
    assert not resources.get("NPU"), resources  # GE's CPU acl is not taken for an NPU
    assert_same(pipeline.run(skip_feed()), want)
assert not ray.is_initialized()
print("local ray started and stopped")
"""


def test_a_pipeline_starts_a_local_ray_when_none_runs_and_stops_it():
    # in a process of its own: Ray runs at most once per process, and this module's
    # other tests share one
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", _LOCAL_RAY], cwd=root, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "local ray started and stopped" in done.stdout


@pytest.fixture(scope="module")
def cluster():
    """A local Ray of two CPUs for the module, started quickly and shut down after."""
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 << 20,
             resources={"NPU": 0},  # GE's CPU ``acl`` is no Ascend device
             log_to_driver=False, _system_config={"enable_worker_prestart": False})
    yield
    ray.shutdown()


@pytest.mark.parametrize("name", ["resnet18", "bert"])
def test_the_pipeline_equals_the_single_process_session(cluster, name):
    case = zoo_case(name)
    session = ge.Session(case.executable, threads=1)
    feeds = varied_feeds(case.feed, 4)
    wanted = [session.run(feed) for feed in feeds]
    with distributed.Pipeline(cost_plan(case.executable, 2), backend="ray") as pipeline:
        actors = [actor for chain in pipeline.backend.actors for actor in chain]
        assert pipeline.num_stages == 2 and len(actors) == 2
        assert_same(pipeline.run(feeds[0]), wanted[0])
        for got, want in zip(pipeline.run_many(feeds), wanted):
            assert_same(got, want)
            assert all(array.flags.writeable for array in got.values())
    assert pipeline.closed and not pipeline.backend.actors
    assert_gone(actors)
    with pytest.raises(distributed.PipelineError, match="closed"):
        pipeline.run(feeds[0])
    assert ray.is_initialized()  # the test's own Ray: left running


def test_replicas_deal_micro_batches_round_robin_and_keep_their_order(cluster):
    case = zoo_case("simple_cnn")
    feeds = varied_feeds(case.feed, 5)
    session = ge.Session(case.executable, threads=1)
    with distributed.Pipeline(cost_plan(case.executable, 2), backend="ray",
                              replicas=2) as pipeline:
        chains = pipeline.backend.actors
        assert len(chains) == 2 and all(len(chain) == 2 for chain in chains)
        for got, feed in zip(pipeline.run_many(feeds), feeds):
            assert_same(got, session.run(feed))
        served = [ray.get([actor.count.remote() for actor in chain], timeout=BOUND)
                  for chain in chains]
        assert served == [[3, 3], [2, 2]]
    assert_gone(actor for chain in chains for actor in chain)


@pytest.fixture
def gather_pipeline(cluster):
    # actors may take a while to start on a loaded machine; runs then wait 2 s at most
    pipeline = distributed.Pipeline(depth_parts(gather_graph(), 2), backend="ray",
                                    timeout=BOUND, opt_level=0)
    pipeline.backend.timeout = 2.0
    yield pipeline
    pipeline.close()


def test_a_failing_stage_raises_in_the_caller_with_its_index(gather_pipeline):
    assert_a_failing_stage_is_named_and_the_pipeline_goes_on(gather_pipeline)
    with pytest.raises(distributed.PipelineError) as caught:  # wrong shape: stage 0 says so
        gather_pipeline.run({"x": np.zeros(5, np.float32), "indices": np.zeros(2, np.int64)})
    assert caught.value.stage == 0 and caught.value.microbatch == 0


def test_a_stage_that_stops_answering_times_out_naming_it(gather_pipeline):
    stopped = gather_pipeline.backend.actors[0][1]
    pid = ray.get(stopped.ready.remote(), timeout=BOUND)
    os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing
    try:
        started = time.monotonic()
        with pytest.raises(distributed.PipelineError) as caught:
            gather_pipeline.run_many([gather_feed(1)] * 3)
        assert time.monotonic() - started < BOUND
        assert caught.value.stage == 1 and caught.value.microbatch == 0
        assert "stage 1" in str(caught.value) and "2 s" in str(caught.value)
        with pytest.raises(distributed.PipelineError, match="closed"):
            gather_pipeline.run(gather_feed(1))
    finally:
        os.kill(pid, signal.SIGCONT)


def test_an_actor_killed_mid_run_fails_the_run_at_once(cluster):
    case = zoo_case("simple_cnn")
    pipeline = distributed.Pipeline(cost_plan(case.executable, 2), backend="ray",
                                    timeout=BOUND)
    first, second = pipeline.backend.actors[0]
    pid = ray.get(second.ready.remote(), timeout=BOUND)
    os.kill(pid, signal.SIGSTOP)  # micro-batches pile up before stage 1: the run is on
    killer = threading.Timer(0.5, os.kill, args=(pid, signal.SIGKILL))
    killer.start()
    started = time.monotonic()
    with pytest.raises(distributed.PipelineError) as caught:
        pipeline.run_many(varied_feeds(case.feed, 6))
    elapsed = time.monotonic() - started
    killer.join()
    assert 0.4 < elapsed < BOUND / 2  # the loss, not the timeout, ended the run
    error = caught.value
    assert error.stage == 1 and 0 <= error.microbatch < 6
    assert "stage 1" in str(error) and "actor is gone" in str(error)
    assert_gone([first])  # the rest of the pipeline went with it
    with pytest.raises(distributed.PipelineError, match="closed"):
        pipeline.run(case.feed)
    pipeline.close()


def test_ray_kill_on_a_stage_actor_between_runs(gather_pipeline):
    killed = gather_pipeline.backend.actors[0][0]
    ray.kill(killed)
    assert_gone([killed])
    started = time.monotonic()
    with pytest.raises(distributed.PipelineError) as caught:
        gather_pipeline.run(gather_feed(1))
    assert time.monotonic() - started < BOUND
    assert caught.value.stage == 0 and "actor is gone" in str(caught.value)


def test_actors_that_cannot_be_placed_fail_the_start_within_the_timeout(cluster):
    started = time.monotonic()
    with pytest.raises(distributed.PipelineError, match="did not start in 1 s") as caught:
        distributed.Pipeline(depth_parts(skip_graph(), 2), backend="ray", timeout=1.0,
                             opt_level=0,
                             backend_options={"actor_options": {"resources": {"tpu": 1}}})
    assert time.monotonic() - started < BOUND and caught.value.stage == 0


def test_bad_backend_options_are_refused_before_any_actor_starts():
    parts = depth_parts(skip_graph(), 2)
    with pytest.raises(distributed.BackendError, match="num_cpus"):
        distributed.Pipeline(parts, backend="ray", backend_options={"num_cpus": 0})
    with pytest.raises(distributed.BackendError, match="actor_options"):
        distributed.Pipeline(parts, backend="ray", backend_options={"actor_options": 3})
