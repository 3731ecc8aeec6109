"""``DepthPartitioner``: partitions by depth level, the seed's ``partition_by_depth``.

A node's depth is the longest path to it from the graph's inputs: ``Data`` and
``Const`` nodes have depth 0, a computing node one more than the deepest node it
reads. Nodes of one depth never read each other, and every edge goes to a greater
depth, so consecutive ranges of depth levels are partitions that run one after the
other. The levels are split into ranges holding about the same number of nodes
(the fewest nodes in the largest range, exactly), and among such splits the one
whose cuts carry the fewest bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ge.ir import Graph, Node
from ge.partition.base import Partition, PartitionError, cut, resolve, validate_count
from ge.partition.estimate import is_step, value_bytes
from ge.partition.segment import min_max_split

__all__ = ["DepthPartitioner"]


class DepthPartitioner:
    """Partitions a graph into ranges of depth levels (seed section 5.2).

    ``num_partitions`` is exact when the graph has at least that many depth levels;
    a shallower graph gets one partition per level (``len(partitions)`` tells).
    """

    def analyze_depth(self, graph: Any) -> dict[str, int]:
        """Node name -> depth (the longest path from the inputs; 0 for ``Data`` and
        ``Const``), for every node. ``graph``: a ``ge.Graph`` or a compiled
        executable (its optimized graph)."""
        source, _ = resolve(graph)
        depth: dict[str, int] = {}
        for node in source.topological_order():
            if not is_step(node):
                depth[node.name] = 0
                continue
            depth[node.name] = 1 + max((depth[p.name] for p in node.predecessors()), default=0)
        return depth

    def create_partitions(self, graph: Any, depth_map: Mapping[str, int],
                          num_partitions: int = 4) -> list[Partition]:
        """Split ``graph`` into ``num_partitions`` ranges of depth levels (fewer when
        it has fewer levels) with about as many nodes each. ``depth_map`` is
        ``analyze_depth``'s result for this graph."""
        count = validate_count(num_partitions)
        source, compiled_with = resolve(graph)
        steps = [node for node in source.topological_order() if is_step(node)]
        levels = _levels(steps, depth_map)
        depths = sorted(levels)
        sizes = [float(len(levels[d])) for d in depths]
        crossing = _level_cuts(source, steps, depth_map, depths)
        starts = min_max_split(sizes, count, crossing)
        ends = [*starts[1:], len(depths)]
        groups = [[node for d in depths[a:b] for node in levels[d]] for a, b in zip(starts, ends)]
        return cut(source, groups, compiled_with=compiled_with)


def _levels(steps: list[Node], depth_map: Mapping[str, int]) -> dict[int, list[Node]]:
    levels: dict[int, list[Node]] = {}
    for node in steps:
        depth = depth_map.get(node.name)
        if not isinstance(depth, int):
            raise PartitionError(f"depth_map has no depth for node {node.name!r}: pass the "
                                 f"result of analyze_depth for this graph")
        levels.setdefault(depth, []).append(node)
    for node in steps:
        for producer in node.predecessors():
            if is_step(producer) and depth_map[producer.name] >= depth_map[node.name]:
                raise PartitionError(f"depth_map puts {node.name!r} at depth "
                                     f"{depth_map[node.name]}, not below its input "
                                     f"{producer.name!r} ({depth_map[producer.name]})")
    return levels


def _level_cuts(graph: Graph, steps: list[Node], depth_map: Mapping[str, int],
                depths: list[int]) -> list[float]:
    """Bytes crossing the cut after each depth level (but the last)."""
    index = {d: i for i, d in enumerate(depths)}
    change = [0] * (len(depths) + 1)
    outputs = {id(v) for v in graph.outputs}
    for node in steps:
        for value in node.outputs:
            first = index[depth_map[node.name]]
            readers = [index[depth_map[u.node.name]] for u in value.users]
            last = len(depths) if id(value) in outputs else max(readers, default=first)
            if last > first:
                change[first] += value_bytes(value)
                change[last] -= value_bytes(value)
    crossing: list[float] = []
    running = 0
    for level in range(len(depths) - 1):
        running += change[level]
        crossing.append(float(running))
    return crossing
