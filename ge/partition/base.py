"""The ``Partition`` record, and how a partition is cut out of its graph.

Every partitioner decides which computing nodes go together and in what order the
groups run; ``cut`` turns those groups into ``Partition`` records, each with a
graph of its own:

- a partition's graph reads its **boundary values** (values made by an earlier
  partition, and the graph inputs it reads) through ``Data`` nodes named as the
  values are named in the original graph, so a feed keyed by those names runs it;
- it computes its nodes, under their original names, and its outputs are the values
  a later partition or the original graph's outputs read, under their original
  names (a graph output made mid-graph is an output of the partition that makes it);
- a ``Const`` node is copied into every partition that reads it (the tensor data is
  shared, not copied) and listed in ``node_names`` of the first of them; a graph
  input's ``Data`` node is listed in ``node_names`` of the first partition reading
  it. So every node of the original graph is in exactly one ``node_names``.

A partitioner given a compiled executable (``ge.compile(graph)``) partitions the
graph the compiler optimized, and records the options it was compiled with in each
partition graph's metadata (``OPTIMIZED_KEY``): ``partition.run_partitions`` then
compiles each partition without optimizing it again, so the partitions compute
exactly, bit for bit, what the unpartitioned executable computes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ge.errors import GraphError, MemoryLimitError, PartitionError
from ge.ir import Graph, Node, Value
from ge.ir.graph import copy_attrs
from ge.partition.estimate import (
    SegmentMemory,
    is_step,
    memory_options_of,
    node_time,
    plan_segment,
)

__all__ = ["Partition", "PartitionError", "MemoryLimitError", "OPTIMIZED_KEY", "resolve",
           "cut", "validate_count"]

#: ``graph.metadata`` key on a graph the compiler already optimized (and on the graphs
#: of its partitions): the compile options it was optimized with, ``{"opt_level",
#: "engines", "threads"}``
OPTIMIZED_KEY = "partition.optimized"



@dataclass(frozen=True, eq=False)
class Partition:
    """One part of a partitioned graph, runnable on its own.

    ``graph`` is a valid ``ge.Graph``: its ``Data`` inputs are ``inputs`` and its
    outputs are ``outputs``, both value names of the original graph. ``node_names``
    are the original graph's nodes it holds. ``cost`` is the estimated seconds of one
    run (``ge.partition.estimate``) and ``memory`` the planned bytes (weights, arena,
    boundary inputs and outputs; ``memory_detail`` has the parts). ``graph_outputs``
    are the original graph's outputs, in order (the same in every partition of one
    partitioning), and ``options`` the compile options the partitioning assumed (a
    memory partition's plan assumes one stream).
    """

    index: int
    graph: Graph
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    node_names: tuple[str, ...]
    cost: Optional[float] = None
    memory: Optional[int] = None
    memory_detail: Optional[SegmentMemory] = None
    engine: Optional[str] = None
    graph_outputs: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def compiled_with(self) -> Optional[dict[str, Any]]:
        """The compile options the original graph was optimized with, when it was
        (the partition is then compiled without optimizing again); else None."""
        found = self.graph.metadata.get(OPTIMIZED_KEY)
        return dict(found) if isinstance(found, dict) else None

    def __repr__(self) -> str:
        cost = "" if self.cost is None else f", cost {self.cost * 1e3:.3f} ms"
        memory = "" if self.memory is None else f", memory {self.memory / (1 << 20):.2f} MiB"
        engine = "" if self.engine is None else f", engine {self.engine}"
        return (f"Partition({self.index}: {len(self.node_names)} nodes, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs{cost}{memory}{engine})")


def resolve(model: Any) -> tuple[Graph, Optional[dict[str, Any]]]:
    """The graph to partition, and the compile options it was optimized with (or None).

    ``model`` is a ``ge.Graph`` (an optimized one carries ``OPTIMIZED_KEY`` in its
    metadata, as ``partition.optimize`` leaves it), or a compiled executable, whose
    optimized graph is partitioned."""
    if isinstance(model, Graph):
        found = model.metadata.get(OPTIMIZED_KEY)
        return model, dict(found) if isinstance(found, dict) else None
    graph = getattr(model, "graph", None)
    if isinstance(graph, Graph) and hasattr(model, "steps"):
        options = getattr(model, "options", {}) or {}
        return graph, {"opt_level": options.get("opt_level"), "engines": options.get("engines"),
                       "threads": options.get("threads")}
    raise PartitionError(f"expected a ge.Graph or a compiled executable (ge.compile(graph)), "
                         f"got {type(model).__name__}")


def validate_count(count: Any, what: str = "num_partitions") -> int:
    """``count`` as a positive integer, or a ``PartitionError``."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PartitionError(f"{what} must be a positive integer, got {count!r}")
    return count


def cut(graph: Graph, groups: Sequence[Sequence[Node]], *,
        compiled_with: Optional[dict[str, Any]] = None,
        engines: Optional[Sequence[Optional[str]]] = None,
        options: Optional[Mapping[str, Any]] = None) -> list[Partition]:
    """Partitions of ``graph``, one per group of computing nodes, in the groups' order.

    Every computing node must be in exactly one group, each group in an order its
    nodes can run in, and no group may read a value a later group makes.
    """
    position = {id(node): i for i, node in enumerate(graph.topological_order())}
    part_of = _assign(graph, groups)
    readers = _readers(graph, part_of)
    outputs_of_graph = {id(v) for v in graph.outputs}
    owned = _owners(graph, readers)
    partitions = []
    source_outputs = tuple(v.name for v in graph.outputs)
    memory_options = memory_options_of(graph.metadata)
    for index, group in enumerate(groups):
        ordered = sorted(group, key=lambda n: position[id(n)]) if _needs_sort(group, part_of) \
            else list(group)

        def needed_outside(value: Value, index: int = index) -> bool:
            return id(value) in outputs_of_graph or any(p != index for p in
                                                        readers.get(id(value), ()))

        inputs, consts = _boundary(ordered)
        made = [v for node in ordered for v in node.outputs if needed_outside(v)]
        for node in owned.get(index, ()):  # a constant the graph outputs as it is
            if node.op_type == "Const" and id(node.outputs[0]) in outputs_of_graph:
                if node not in consts:
                    consts.append(node)
                made.append(node.outputs[0])
        sub = _build(graph, index, inputs, consts, ordered, made, compiled_with)
        detail = plan_segment(ordered, needed_outside, memory_options)
        names = [n.name for n in owned.get(index, ())] + [n.name for n in ordered]
        partitions.append(Partition(
            index, sub, tuple(v.name for v in inputs), tuple(v.name for v in made),
            tuple(names), cost=sum(node_time(n) for n in ordered),
            memory=detail.total_bytes, memory_detail=detail,
            engine=None if engines is None else engines[index],
            graph_outputs=source_outputs, options=dict(options or {})))
    return partitions


def _assign(graph: Graph, groups: Sequence[Sequence[Node]]) -> dict[int, int]:
    part_of: dict[int, int] = {}
    for index, group in enumerate(groups):
        if not group:
            raise PartitionError(f"partition {index} of graph {graph.name!r} is empty")
        for node in group:
            if node.graph is not graph or not is_step(node):
                raise PartitionError(f"node {node.name!r} is not a computing node of graph "
                                     f"{graph.name!r}")
            if id(node) in part_of:
                raise PartitionError(f"node {node.name!r} is in partitions {part_of[id(node)]} "
                                     f"and {index}")
            part_of[id(node)] = index
    missing = [n.name for n in graph.nodes if is_step(n) and id(n) not in part_of]
    if missing:
        raise PartitionError(f"nodes in no partition: {missing[:8]}"
                             + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    for node in graph.nodes:
        if id(node) not in part_of:
            continue
        for producer in node.predecessors():
            if part_of.get(id(producer), -1) > part_of[id(node)]:
                raise PartitionError(
                    f"node {node.name!r} (partition {part_of[id(node)]}) reads "
                    f"{producer.name!r} of the later partition {part_of[id(producer)]}")
    return part_of


def _needs_sort(group: Sequence[Node], part_of: dict[int, int]) -> bool:
    """True when some node of ``group`` comes before a producer of its own group."""
    seen: set[int] = set()
    for node in group:
        for producer in node.predecessors():
            if id(producer) not in seen and part_of.get(id(producer)) == part_of[id(node)]:
                return True
        seen.add(id(node))
    return False


def _readers(graph: Graph, part_of: dict[int, int]) -> dict[int, set[int]]:
    """id(value) -> the partitions whose nodes read it."""
    readers: dict[int, set[int]] = {}
    for node in graph.nodes:
        if id(node) in part_of:
            for value in node.inputs:
                if value is not None:
                    readers.setdefault(id(value), set()).add(part_of[id(node)])
    return readers


def _owners(graph: Graph, readers: dict[int, set[int]]) -> dict[int, list[Node]]:
    """partition -> the ``Data`` and ``Const`` nodes it lists: each in the first
    partition reading it (partition 0 when none does)."""
    owned: dict[int, list[Node]] = {}
    for node in graph.nodes:
        if not is_step(node):
            first = min(readers.get(id(node.outputs[0]), {0}))
            owned.setdefault(first, []).append(node)
    return owned


def _boundary(ordered: Sequence[Node]) -> tuple[list[Value], list[Node]]:
    """The values ``ordered`` reads from outside (in first-read order) and the
    ``Const`` nodes it reads."""
    inside = {id(node) for node in ordered}
    inputs: dict[int, Value] = {}
    consts: dict[int, Node] = {}
    for node in ordered:
        for value in node.inputs:
            if value is None or id(value.producer) in inside:
                continue
            if value.producer.op_type == "Const":
                consts.setdefault(id(value.producer), value.producer)
            else:
                inputs.setdefault(id(value), value)
    return list(inputs.values()), list(consts.values())


def _build(graph: Graph, index: int, inputs: Sequence[Value], consts: Sequence[Node],
           ordered: Sequence[Node], outputs: Sequence[Value],
           compiled_with: Optional[dict[str, Any]]) -> Graph:
    sub = Graph(f"{graph.name}_part{index}")
    sub.metadata = dict(graph.metadata)
    if compiled_with is not None:
        sub.metadata[OPTIMIZED_KEY] = dict(compiled_with)
    taken = {node.name for node in ordered} | {node.name for node in consts}
    mapping: dict[int, Value] = {}
    for value in inputs:
        if value.name in taken:
            raise PartitionError(f"partition {index} of graph {graph.name!r} reads the value "
                                 f"{value.name!r}, a name one of its own nodes has")
        if value.producer.op_type == "Data":
            attrs = copy_attrs(value.producer.attrs)
        else:
            attrs = {"shape": list(value.shape), "dtype": value.dtype, "format": value.format}
        data = sub.add_op(Node("Data", [], attrs, [value.desc], value.name))
        mapping[id(value)] = data.outputs[0]
    for node in [*consts, *ordered]:
        new = Node(node.op_type, [None if v is None else mapping[id(v)] for v in node.inputs],
                   copy_attrs(node.attrs), [v.desc for v in node.outputs], node.name)
        for old_value, new_value in zip(node.outputs, new.outputs):
            if old_value.has_explicit_name:
                new_value.name = old_value.name
            mapping[id(old_value)] = new_value
        sub.add_op(new)
    try:
        sub.set_outputs([mapping[id(v)] for v in outputs])
    except KeyError:  # pragma: no cover - the outputs are made inside by construction
        raise GraphError(f"partition {index}: an output is not made inside it") from None
    return sub
