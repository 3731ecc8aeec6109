"""The pipeline scheduler: dependencies from the partitions alone, the stage order, what
each stage hands on, the micro-batch timeline, and the seed's section 5.2 program."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from ge import partition
from tests.partition.cases import skip_feed, skip_graph, zoo_case

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def skip_parts():
    """The skip graph in its seven depth levels:
    0 {a}, 1 {b, c}, 2 {d}, 3 {e}, 4 {f}, 5 {g}, 6 {h}."""
    graph = skip_graph()
    partitioner = partition.DepthPartitioner()
    return partitioner.create_partitions(graph, partitioner.analyze_depth(graph),
                                         num_partitions=7)


def test_dependencies_of_a_diamond_with_a_skip_connection(skip_parts):
    dependencies = partition.PipelineScheduler().analyze_dependencies(skip_parts)
    edges = {(e.producer, e.consumer): e.values for e in dependencies}
    assert edges == {(0, 1): ("a",), (0, 4): ("a",), (1, 2): ("b", "c"), (2, 3): ("d",),
                     (3, 4): ("e",), (4, 5): ("f",), (5, 6): ("g",)}
    assert dependencies.needs(4) == (0, 3) and dependencies.needed_by(0) == (1, 4)
    assert dependencies.feeds[0] == ("x",) and dependencies.feeds[6] == ("x",)
    assert dependencies.feeds[3] == ()  # the constant is copied in, not fed
    assert dependencies.producer["a"] == 0 and len(dependencies) == 7


def test_the_plan_hands_each_value_on_until_its_last_reader(skip_parts):
    scheduler = partition.PipelineScheduler()
    plan = scheduler.create_schedule(skip_parts, scheduler.analyze_dependencies(skip_parts),
                                     num_microbatches=3)
    assert plan.num_stages == 7 and plan.feeds == ("x",)
    assert plan.graph_outputs == ("h", "a")
    assert set(plan.carried[0]) == {"a", "x"}
    assert set(plan.carried[1]) == {"b", "c", "a", "x"}
    assert set(plan.carried[4]) == {"f", "a", "x"}
    assert set(plan.carried[6]) == {"h", "a"}
    assert plan.transfer_bytes[0] == 2 * 24
    assert plan.stage_memory == tuple(p.memory for p in skip_parts)


def test_the_timeline_fills_and_drains(skip_parts):
    plan = partition.PipelineScheduler().create_schedule(skip_parts[:3], num_microbatches=2)
    assert plan.time_steps == (((0, 0),), ((0, 1), (1, 0)), ((1, 1), (2, 0)), ((2, 1),))
    text = plan.describe()
    assert "3 stages, 2 micro-batches, 4 time steps" in text
    assert "t1: s0:m1 s1:m0" in text and "stage 2: partition 2" in text


def test_stages_follow_the_dependencies_not_the_list_order(skip_parts):
    shuffled = [skip_parts[i] for i in (3, 0, 6, 1, 5, 2, 4)]
    plan = partition.PipelineScheduler().create_schedule(shuffled)
    assert [p.index for p in plan.stages] == list(range(7))
    assert partition.run_partitions(shuffled, skip_feed(), opt_level=0).keys() == {"h", "a"}


def test_inconsistent_partitions_are_refused(skip_parts):
    scheduler = partition.PipelineScheduler()
    twice = list(skip_parts)
    twice[2] = dataclasses.replace(skip_parts[2], outputs=("d", "b"))
    with pytest.raises(partition.PartitionError, match="made by partitions"):
        scheduler.analyze_dependencies(twice)
    cyclic = list(skip_parts)
    cyclic[0] = dataclasses.replace(skip_parts[0], inputs=("x", "f"))
    with pytest.raises(partition.PartitionError, match="cycle"):
        scheduler.create_schedule(cyclic)
    with pytest.raises(partition.PartitionError, match="num_microbatches"):
        scheduler.create_schedule(skip_parts, num_microbatches=0)


def _seed_program():
    """examples/seed_5_2_partition.py: the article's section 5.2 class, as it wrote it."""
    spec = importlib.util.spec_from_file_location(
        "seed_5_2_partition", EXAMPLES / "seed_5_2_partition.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_seed_s_section_5_2_program_flow(capsys):
    graph = zoo_case("resnet18").graph  # the graph as parsed, as the article passes it
    partitioner = _seed_program().GraphPartitioner(graph, num_partitions=4)
    partitions = partitioner.partition_by_depth()
    execution_plan = partitioner.create_pipeline(partitions)
    assert len(partitions) == 4 and execution_plan.num_stages == 4
    assert isinstance(execution_plan.num_stages, int)
    assert len(partitioner.partition_by_memory()) == 1  # 1 GiB holds ResNet-18 whole
    printed = capsys.readouterr().out
    assert "Created 4 depth-based partitions" in printed
    assert "Pipeline stages: 4" in printed
    assert "Created 1 memory-based partitions" in printed
