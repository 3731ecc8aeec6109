"""``EnginePartitioner``: maximal connected runs of nodes on the same engine.

The compiler gives every computing node an engine (``ge.compile``: the first engine
of the preference list that supports it); this partitioner reads that assignment
from a compiled executable (or takes it as a mapping) and groups the nodes the way
an engine-partitioning compiler hands subgraphs to its engines (ONNX Runtime's
``GetCapability``, TVM's BYOC partitioning).

Each node gets a *transition count*: the most engine changes on any path from the
inputs to it (a node on the engine of an input keeps that input's count, on another
engine it counts one more). Nodes with the same engine and count, connected by
edges among themselves, form one partition. Every edge then goes to a partition of
a greater count, or stays inside one, so the partitions ordered by count run one
after the other; and no partition can grow without making the partitions' graph
cyclic along some path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ge.ir import Graph, Node
from ge.partition.base import Partition, PartitionError, cut, resolve
from ge.partition.estimate import is_step

__all__ = ["EnginePartitioner"]


class EnginePartitioner:
    """Partitions a compiled graph by engine assignment (see the module docstring)."""

    def analyze_engines(self, model: Any,
                        assignment: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """Computing node name -> engine name: from ``model``'s steps when it is a
        compiled executable, else ``assignment`` (which must cover every node)."""
        source, _ = resolve(model)
        if assignment is None:
            steps = getattr(model, "steps", None)
            if steps is None:
                raise PartitionError("EnginePartitioner needs the engine assignment: pass a "
                                     "compiled executable (ge.compile(graph)), or assignment=")
            assignment = {step.node: step.engine for step in steps}
        found = {}
        for node in source.nodes:
            if is_step(node):
                engine = assignment.get(node.name)
                if engine is None:
                    raise PartitionError(f"no engine assigned to node {node.name!r}")
                found[node.name] = str(engine)
        return found

    def create_partitions(self, model: Any,
                          assignment: Optional[Mapping[str, str]] = None) -> list[Partition]:
        """The engine partitions of ``model`` (a compiled executable, or a graph with
        its ``assignment``), in an order they can run in."""
        source, compiled_with = resolve(model)
        engines = self.analyze_engines(model, assignment)
        groups = _groups(source, engines)
        return cut(source, groups, compiled_with=compiled_with,
                   engines=[engines[group[0].name] for group in groups])


def _groups(graph: Graph, engines: dict[str, str]) -> list[list[Node]]:
    order = [node for node in graph.topological_order() if is_step(node)]
    count: dict[int, int] = {}
    for node in order:
        count[id(node)] = max((count[id(p)] + (engines[p.name] != engines[node.name])
                               for p in node.predecessors() if id(p) in count), default=0)
    parent = {id(node): id(node) for node in order}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for node in order:
        for producer in node.predecessors():
            if id(producer) in count and engines[producer.name] == engines[node.name] \
                    and count[id(producer)] == count[id(node)]:
                parent[root(id(producer))] = root(id(node))
    members: dict[int, list[Node]] = {}
    for node in order:
        members.setdefault(root(id(node)), []).append(node)
    position = {id(node): i for i, node in enumerate(order)}
    return sorted(members.values(), key=lambda g: (count[id(g[0])], position[id(g[0])]))
