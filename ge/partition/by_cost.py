"""``CostPartitioner``: pipeline stages of balanced estimated time.

The stages are contiguous segments of a topological order of the computing nodes.
Each node's time is the roofline estimate of ``ge.partition.estimate`` (the op's
FLOPs and bytes from the registry). For each candidate order (the graph's own and
the memory-aware one, ``segment.candidate_orders``) the exact min-max split is
found (``segment.min_max_split``: the cheapest possible most expensive stage, and
among such splits the one whose cuts carry the fewest bytes); the order giving the
cheapest bottleneck wins, then the one with fewer boundary bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ge.ir import Graph, Node
from ge.partition.base import Partition, cut, resolve, validate_count
from ge.partition.estimate import node_time
from ge.partition.report import PartitionReport, summarize
from ge.partition.segment import candidate_orders, cut_bytes, min_max_split, segment_totals

__all__ = ["CostPartitioner"]


@dataclass(frozen=True)
class _Split:
    order: list[Node]
    starts: list[int]
    bottleneck: float
    boundary_bytes: int


class CostPartitioner:
    """Splits a graph into pipeline stages of balanced estimated cost.

    ``num_partitions`` is exact when the graph has at least that many computing
    nodes (else one stage per node). After ``create_partitions``, ``report`` holds
    the split's ``PartitionReport`` (stage costs, balance = max / mean).
    """

    def __init__(self) -> None:
        self.report: Optional[PartitionReport] = None

    def analyze_cost(self, graph: Any) -> dict[str, float]:
        """Node name -> estimated seconds (0 for ``Data`` and ``Const``)."""
        source, _ = resolve(graph)
        return {node.name: node_time(node) for node in source.nodes}

    def create_partitions(self, graph: Any, num_partitions: int = 4) -> list[Partition]:
        """The stages (see the class docstring). ``graph``: a ``ge.Graph`` or a
        compiled executable (its optimized graph is split)."""
        count = validate_count(num_partitions)
        source, compiled_with = resolve(graph)
        best = min((_split(source, order, count) for order in candidate_orders(source)),
                   key=lambda s: (s.bottleneck, s.boundary_bytes))
        ends = [*best.starts[1:], len(best.order)]
        groups = [best.order[a:b] for a, b in zip(best.starts, ends)]
        partitions = cut(source, groups, compiled_with=compiled_with)
        self.report = summarize(partitions)
        return partitions


def _split(graph: Graph, order: list[Node], count: int) -> _Split:
    costs = [node_time(node) for node in order]
    crossing = cut_bytes(graph, order)
    starts = min_max_split(costs, count, [float(c) for c in crossing])
    bottleneck = max(segment_totals(costs, starts))
    boundary = sum(crossing[start - 1] for start in starts[1:])
    return _Split(order, starts, bottleneck, boundary)
