"""``MemoryPartitioner``: partitions that each fit in a memory limit.

A partition's memory is what ``ge.partition.estimate.plan_segment`` plans for it:
its weights, its boundary inputs, its outputs and its activation arena as the real
planner (``ge.memory``) places it. The nodes are taken in a topological order (the
graph's own or the memory-aware one, whichever gives fewer partitions) and cut
greedily: each partition is grown to the longest run of the order whose planned
memory stays within the limit (found by a doubling and bisecting search, every
candidate planned), then the next starts. A node that does not fit alone raises
``MemoryLimitError`` naming it, its bytes and the limit.

The plan is for one stream: the partitions ask to be compiled with ``streams=1``
(``Partition.options``), since values of different streams never share arena
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from ge.ir import Graph, Node, Value
from ge.partition.base import MemoryLimitError, Partition, PartitionError, cut, resolve
from ge.partition.estimate import (
    NodeMemory,
    SegmentMemory,
    memory_options_of,
    plan_segment,
    value_bytes,
)
from ge.partition.segment import candidate_orders

__all__ = ["MemoryPartitioner", "DEFAULT_MEMORY_LIMIT"]

#: the seed's default limit (1 GiB)
DEFAULT_MEMORY_LIMIT = 1 << 30

#: the compile options a memory partition's plan assumes
MEMORY_PARTITION_OPTIONS = {"streams": 1}


class MemoryPartitioner:
    """Partitions a graph so that each partition's planned memory is within a limit
    (seed section 5.2). As few partitions as the greedy cut gives; no maximum."""

    def analyze_memory(self, graph: Any) -> dict[str, NodeMemory]:
        """Node name -> its weights bytes (the ``Const`` values it reads) and
        activation bytes (the values it writes), from the shapes the registry's
        inference gave the graph's values (unknown dimensions count as 1)."""
        source, _ = resolve(graph)
        usage: dict[str, NodeMemory] = {}
        for node in source.nodes:
            written = sum(value_bytes(v) for v in node.outputs)
            if node.op_type == "Const":
                usage[node.name] = NodeMemory(written, 0)
                continue
            weights = sum(value_bytes(v) for v in _distinct(node.inputs)
                          if v.producer.op_type == "Const")
            usage[node.name] = NodeMemory(weights, written)
        return usage

    def create_partitions(self, graph: Any, memory_usage: Mapping[str, NodeMemory],
                          memory_limit: int = DEFAULT_MEMORY_LIMIT) -> list[Partition]:
        """Partitions each planned within ``memory_limit`` bytes (see the module
        docstring). ``memory_usage`` is ``analyze_memory``'s result for this graph."""
        if isinstance(memory_limit, bool) or not isinstance(memory_limit, int) \
                or memory_limit <= 0:
            raise PartitionError(f"memory_limit must be a positive number of bytes, "
                                 f"got {memory_limit!r}")
        source, compiled_with = resolve(graph)
        missing = [n.name for n in source.nodes if n.name not in memory_usage]
        if missing:
            raise PartitionError(f"memory_usage has no entry for nodes {missing[:5]}: pass "
                                 f"the result of analyze_memory for this graph")
        splits = [_greedy(source, order, memory_limit) for order in candidate_orders(source)]
        groups = min(splits, key=len)
        return cut(source, groups, compiled_with=compiled_with,
                   options=MEMORY_PARTITION_OPTIONS)


def _distinct(values: Any) -> list[Value]:
    seen: dict[int, Value] = {}
    for value in values:
        if value is not None:
            seen.setdefault(id(value), value)
    return list(seen.values())


def _greedy(graph: Graph, order: list[Node], limit: int) -> list[list[Node]]:
    position = {id(node): i for i, node in enumerate(order)}
    outputs = {id(v) for v in graph.outputs}
    options = memory_options_of(graph.metadata)

    def planned(start: int, end: int) -> SegmentMemory:
        def needed_outside(value: Value) -> bool:
            return id(value) in outputs or any(position.get(id(u.node), -1) >= end
                                               for u in value.users)
        return plan_segment(order[start:end], needed_outside, options)

    def fits(start: int, end: int) -> bool:
        return planned(start, end).total_bytes <= limit

    groups = []
    start = 0
    while start < len(order):
        if not fits(start, start + 1):
            _too_big(order[start], planned(start, start + 1), limit)
        low, high = start + 1, len(order) + 1  # fits(start, low); high: not known to fit
        if fits(start, len(order)):
            low = len(order)
        else:
            high = len(order)
            step = 1
            while low + step < high and fits(start, low + step):  # double
                low, step = low + step, step * 2
            high = min(high, low + step)
            while high - low > 1:  # bisect
                middle = (low + high) // 2
                low, high = (middle, high) if fits(start, middle) else (low, middle)
        groups.append(order[start:low])
        start = low
    return groups


def _too_big(node: Node, memory: SegmentMemory, limit: int) -> NoReturn:
    raise MemoryLimitError(
        f"node {node.name!r} ({node.op_type}) alone needs {memory.total_bytes} bytes "
        f"(weights {memory.weights_bytes}, inputs {memory.input_bytes}, outputs "
        f"{memory.output_bytes}, arena {memory.arena_bytes}); the memory limit is {limit} "
        f"bytes", node=node.name, nbytes=memory.total_bytes, limit=limit)
