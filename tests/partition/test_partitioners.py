"""The partitioners on the model zoo and on small graphs: valid partitions that hold every
node once, runs equal to the unpartitioned session bit for bit, memory limits that hold
when checked against the compiled partitions, and the cost balance."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import ge
from ge import partition
from ge.partition.base import cut
from ge.partition.estimate import value_bytes
from tests.partition.cases import ZOO, ZooCase, assert_same, skip_feed, skip_graph, zoo_case

KINDS = ("depth", "memory", "cost", "engine")


def memory_limit(case: ZooCase) -> int:
    """A third of the whole model's planned memory, raised to the largest single node's
    needs where one needs more (the partitioner reports it)."""
    whole = partition.CostPartitioner().create_partitions(case.executable, num_partitions=1)
    limit = int(whole[0].memory) // 3
    partitioner = partition.MemoryPartitioner()
    usage = partitioner.analyze_memory(case.executable)
    while True:
        try:
            partitioner.create_partitions(case.executable, usage, memory_limit=limit)
            return limit
        except partition.MemoryLimitError as error:
            assert error.nbytes > limit
            limit = error.nbytes


def make(kind: str, case: ZooCase) -> tuple[list[partition.Partition], dict[str, Any]]:
    model = case.executable
    if kind == "depth":
        partitioner = partition.DepthPartitioner()
        return partitioner.create_partitions(model, partitioner.analyze_depth(model),
                                             num_partitions=4), {}
    if kind == "memory":
        partitioner_m = partition.MemoryPartitioner()
        limit = memory_limit(case)
        return partitioner_m.create_partitions(model, partitioner_m.analyze_memory(model),
                                               memory_limit=limit), {"limit": limit}
    if kind == "cost":
        return partition.CostPartitioner().create_partitions(model, num_partitions=4), {}
    return partition.EnginePartitioner().create_partitions(model), {}


def check_structure(graph: ge.Graph, parts: list[partition.Partition]) -> None:
    """Valid graphs; every node in exactly one partition; names from the original."""
    listed = Counter(name for part in parts for name in part.node_names)
    assert set(listed) == {node.name for node in graph.nodes}
    assert max(listed.values()) == 1
    for index, part in enumerate(parts):
        assert part.index == index
        assert part.graph.validate()
        assert [v.name for v in part.graph.inputs] == list(part.inputs)
        assert [v.name for v in part.graph.outputs] == list(part.outputs)
        assert all(graph.has_value(name) for name in (*part.inputs, *part.outputs))
        steps = {n.name for n in part.graph.nodes if n.op_type not in ("Data", "Const")}
        assert steps <= set(part.node_names)
        assert part.graph_outputs == tuple(v.name for v in graph.outputs)


def compiled_memory(executable: ge.Executable) -> int:
    """A compiled partition's memory as its own plan states it: the arena, plus its
    constants, inputs and outputs."""
    nodes = {node.name: node for node in executable.graph.nodes}
    weights = sum(nodes[name].attrs["value"].nbytes for name in executable.constants.values())
    edges = sum(int(np.prod(spec.desc.shape)) * spec.desc.dtype.itemsize
                for spec in [*executable.inputs, *executable.outputs])
    return executable.memory["planned_bytes"] + weights + edges


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ZOO)
def test_every_partitioner_runs_every_zoo_model_bit_for_bit(name, kind):
    case = zoo_case(name)
    parts, extra = make(kind, case)
    assert len(parts) >= 1
    check_structure(case.executable.graph, parts)
    with partition.PartitionRunner(parts) as runner:
        assert_same(runner.run(case.feed), case.expected)
        if kind == "memory":
            for part, session in zip(parts, runner.sessions):
                assert part.memory is not None and part.memory <= extra["limit"]
                assert compiled_memory(session.executable) <= part.memory <= extra["limit"], \
                    (name, part.index)


def test_a_memory_limit_below_one_node_s_needs_raises_naming_the_node():
    case = zoo_case("resnet18")
    partitioner = partition.MemoryPartitioner()
    usage = partitioner.analyze_memory(case.executable)
    with pytest.raises(partition.MemoryLimitError) as caught:
        partitioner.create_partitions(case.executable, usage, memory_limit=1 << 20)
    error = caught.value
    assert isinstance(error, ge.errors.GEError)
    assert error.node and error.nbytes > error.limit == 1 << 20
    assert repr(error.node) in str(error) and str(1 << 20) in str(error)
    assert str(error.nbytes) in str(error)


def test_analyze_memory_counts_weights_and_activations():
    graph = skip_graph()
    usage = partition.MemoryPartitioner().analyze_memory(graph)
    assert usage["w"] == partition.NodeMemory(24, 0)
    assert usage["e"] == partition.NodeMemory(24, 24)  # reads w, writes 2x3 float32
    assert usage["a"] == partition.NodeMemory(0, 24) and usage["a"].total_bytes == 24


def test_cost_partitioner_balances_resnet50_in_four_stages():
    case = zoo_case("resnet50")
    partitioner = partition.CostPartitioner()
    parts = partitioner.create_partitions(case.executable, num_partitions=4)
    report = partitioner.report
    assert report is not None and len(parts) == 4
    print(f"\nResNet-50, 4 stages:\n{report}")
    assert report.stage_costs == tuple(p.cost for p in parts)
    assert report.balance == pytest.approx(max(report.stage_costs) / np.mean(report.stage_costs))
    assert report.balance <= 1.15


def test_cost_balance_of_every_zoo_model(capsys):
    lines = []
    for name in ZOO:
        report = partition.summarize(partition.CostPartitioner().create_partitions(
            zoo_case(name).executable, num_partitions=4))
        lines.append(f"{name:>12}: balance {report.balance:.3f} over "
                     f"{len(report.stage_costs)} stages")
        assert report.balance >= 1.0
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_the_cost_split_is_the_exact_min_max():
    from itertools import combinations

    from ge.partition.segment import min_max_split, segment_totals

    costs = [5.0, 1.0, 1.0, 7.0, 2.0, 2.0, 3.0, 6.0, 1.0]
    for count in (2, 3, 4):
        best = min(max(segment_totals(costs, [0, *cuts]))
                   for cuts in combinations(range(1, len(costs)), count - 1))
        starts = min_max_split(costs, count)
        assert len(starts) == count
        assert max(segment_totals(costs, starts)) == pytest.approx(best)


def test_depth_analysis_is_the_longest_path_from_the_inputs():
    depth = partition.DepthPartitioner().analyze_depth(skip_graph())
    assert depth == {"x": 0, "w": 0, "a": 1, "b": 2, "c": 2, "d": 3, "e": 4, "f": 5, "g": 6,
                     "h": 7}


def test_num_partitions_is_exact_up_to_the_graph_s_depth():
    graph = skip_graph()
    partitioner = partition.DepthPartitioner()
    depth = partitioner.analyze_depth(graph)
    assert len(partitioner.create_partitions(graph, depth, num_partitions=3)) == 3
    assert len(partitioner.create_partitions(graph, depth, num_partitions=50)) == 7
    assert len(partition.CostPartitioner().create_partitions(graph, num_partitions=50)) == 8
    for bad in (0, -1, 2.5, True):
        with pytest.raises(partition.PartitionError):
            partitioner.create_partitions(graph, depth, num_partitions=bad)
    with pytest.raises(partition.PartitionError, match="no depth for node"):
        partitioner.create_partitions(graph, {"a": 1}, num_partitions=2)


def test_skip_connections_outputs_and_shared_constants_cross_partitions():
    graph = skip_graph()
    partitioner = partition.DepthPartitioner()
    parts = partitioner.create_partitions(graph, partitioner.analyze_depth(graph),
                                          num_partitions=7)
    check_structure(graph, parts)
    first = parts[0]
    assert first.node_names == ("x", "a") and first.inputs == ("x",)
    assert first.outputs == ("a",)  # a graph output, read by partitions 1 and 4
    assert parts[4].inputs == ("e", "a")
    assert parts[6].inputs == ("g", "x")  # the graph input, three partitions on
    holding_w = [p.index for p in parts if p.graph.has_node("w")]
    assert holding_w == [3, 5]  # copied into both readers, listed by the first
    assert "w" in parts[3].node_names and "w" not in parts[5].node_names
    assert parts[3].graph.node("w").attrs["value"] is graph.node("w").attrs["value"]
    want = ge.Session(ge.compile(graph, opt_level=0)).run(skip_feed())
    assert_same(partition.run_partitions(parts, skip_feed(), opt_level=0), want)


def test_partitions_of_an_optimized_graph_equal_the_default_session():
    graph = skip_graph()
    optimized = partition.optimize(graph)
    assert optimized is not graph and partition.OPTIMIZED_KEY in optimized.metadata
    assert partition.OPTIMIZED_KEY not in graph.metadata
    parts = partition.CostPartitioner().create_partitions(optimized, num_partitions=2)
    assert all(p.compiled_with is not None for p in parts)
    assert partition.compile_options_for(parts[0])["opt_level"] == 0
    want = ge.Session(ge.compile(graph)).run(skip_feed())
    assert_same(partition.run_partitions(parts, skip_feed()), want)


def test_engine_partitions_follow_the_compiler_s_assignment():
    case = zoo_case("bert")
    parts = partition.EnginePartitioner().create_partitions(case.executable)
    engines = {step.node: step.engine for step in case.executable.steps}
    for part in parts:
        held = {engines[n] for n in part.node_names if n in engines}
        assert held == {part.engine}
    # maximal: two partitions of one engine joined by an edge would make a cycle, so
    # some path between them leaves the engine
    assert len({p.engine for p in parts}) >= 2 and len(parts) < len(case.executable.steps)


def test_engine_partitioner_takes_an_assignment_for_a_plain_graph():
    graph = skip_graph()
    assignment = {"a": "numpy", "b": "numpy", "c": "numpy", "d": "numpy", "e": "fused",
                  "f": "fused", "g": "numpy", "h": "numpy"}
    parts = partition.EnginePartitioner().create_partitions(graph, assignment)
    assert [p.engine for p in parts] == ["numpy", "fused", "numpy"]
    assert [sorted(p.node_names) for p in parts] == [["a", "b", "c", "d", "x"],
                                                     ["e", "f", "w"], ["g", "h"]]
    with pytest.raises(partition.PartitionError, match="engine assignment"):
        partition.EnginePartitioner().create_partitions(graph)


def test_groups_out_of_order_are_refused():
    graph = skip_graph()
    steps = [n for n in graph.topological_order() if n.op_type not in ("Data", "Const")]
    with pytest.raises(partition.PartitionError, match="later partition"):
        cut(graph, [steps[4:], steps[:4]])
    with pytest.raises(partition.PartitionError, match="no partition"):
        cut(graph, [steps[:4]])


def test_the_report_lists_every_stage():
    graph = skip_graph()
    parts = partition.CostPartitioner().create_partitions(graph, num_partitions=2)
    text = str(partition.summarize(parts))
    assert "balance" in text and len(text.splitlines()) == 4
    assert parts[0].memory_detail is not None
    assert parts[0].memory_detail.input_bytes == value_bytes(graph.find_value("x"))
