"""``PipelineScheduler``: which partition needs which, and a pipeline plan to run them.

``analyze_dependencies`` works from the partitions alone (seed section 5.2 gives it
no graph): a value is made by the partition listing it among its ``outputs`` and
needed by every partition listing it among its ``inputs``; a value no partition
makes is fed by the caller (a graph input).

``create_schedule`` orders the partitions into stages (a topological order of the
dependencies, by index on ties), works out what each stage hands to the next (every
value a later stage or the graph's outputs still need: a stage passes on what it
received and does not read, so values reach partitions several stages later), and
lays the micro-batches out in time as a forward pipeline does (GPipe's fill and
drain): at time step ``t`` stage ``s`` runs micro-batch ``t - s``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ge.ir.tensor import num_elements
from ge.partition.base import Partition, PartitionError, validate_count

__all__ = ["Dependency", "Dependencies", "ExecutionPlan", "PipelineScheduler", "Routing",
           "route"]

#: micro-batches a schedule lays out when not told
DEFAULT_MICROBATCHES = 4


@dataclass(frozen=True)
class Dependency:
    """Partition ``consumer`` reads ``values`` that partition ``producer`` makes."""

    producer: int
    consumer: int
    values: tuple[str, ...]


@dataclass(frozen=True)
class Dependencies:
    """The dependencies between partitions (by ``Partition.index``): ``edges``, the
    partition making each value (``producer``), and the values each partition reads
    from the caller's feed (``feeds``)."""

    edges: tuple[Dependency, ...]
    producer: Mapping[str, int]
    feeds: Mapping[int, tuple[str, ...]]

    def needs(self, index: int) -> tuple[int, ...]:
        """The partitions whose outputs partition ``index`` reads."""
        return tuple(sorted({e.producer for e in self.edges if e.consumer == index}))

    def needed_by(self, index: int) -> tuple[int, ...]:
        """The partitions that read outputs of partition ``index``."""
        return tuple(sorted({e.consumer for e in self.edges if e.producer == index}))

    def __iter__(self) -> Iterator[Dependency]:
        return iter(self.edges)

    def __len__(self) -> int:
        return len(self.edges)


@dataclass(frozen=True)
class Routing:
    """How values flow through partitions run one after the other: the stage order,
    the values the caller feeds, and per stage the values it hands on (after the
    last stage: the graph's outputs)."""

    order: tuple[int, ...]  # positions in the partition list, in run order
    feeds: tuple[str, ...]
    carried: tuple[tuple[str, ...], ...]
    graph_outputs: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class ExecutionPlan:
    """A pipeline of partitions: ``stages`` in run order, what each hands on
    (``carried``), the micro-batch timeline (``time_steps``: per time step the
    ``(stage, micro-batch)`` pairs running then), and per stage its planned memory
    and the bytes it hands to the next stage for one micro-batch."""

    stages: tuple[Partition, ...]
    dependencies: Dependencies
    num_microbatches: int
    time_steps: tuple[tuple[tuple[int, int], ...], ...]
    routing: Routing
    stage_memory: tuple[int, ...]
    transfer_bytes: tuple[int, ...]

    @property
    def num_stages(self) -> int:
        """How many stages the pipeline has."""
        return len(self.stages)

    @property
    def feeds(self) -> tuple[str, ...]:
        """The values the caller feeds (graph inputs)."""
        return self.routing.feeds

    @property
    def carried(self) -> tuple[tuple[str, ...], ...]:
        """Per stage, the values it hands on."""
        return self.routing.carried

    @property
    def graph_outputs(self) -> tuple[str, ...]:
        """The outputs a run returns, in the original graph's order."""
        return self.routing.graph_outputs

    def describe(self) -> str:
        """The plan as text: the stages, then the timeline."""
        lines = [f"pipeline: {self.num_stages} stages, {self.num_microbatches} micro-batches, "
                 f"{len(self.time_steps)} time steps; feeds: {', '.join(self.feeds) or 'none'}"]
        for stage, part in enumerate(self.stages):
            cost = "?" if part.cost is None else f"{part.cost * 1e3:.3f} ms"
            needs = ", ".join(str(i) for i in self.dependencies.needs(part.index)) or "feeds"
            lines.append(
                f"  stage {stage}: partition {part.index}, {len(part.node_names)} nodes, "
                f"estimated {cost}, memory {self.stage_memory[stage] / (1 << 20):.2f} MiB; "
                f"needs {needs}; hands on {len(self.carried[stage])} values "
                f"({self.transfer_bytes[stage] / (1 << 20):.2f} MiB)")
        lines.append("  time steps (stage:micro-batch):")
        for time, running in enumerate(self.time_steps):
            lines.append(f"    t{time}: " + " ".join(f"s{s}:m{m}" for s, m in running))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"ExecutionPlan({self.num_stages} stages, {self.num_microbatches} "
                f"micro-batches)")


class PipelineScheduler:
    """Dependencies between partitions and a pipeline plan over them (seed 5.2)."""

    def analyze_dependencies(self, partitions: Sequence[Partition]) -> Dependencies:
        """Which partition reads which other partitions' outputs (see the module
        docstring). Raises ``PartitionError`` when two partitions make one value."""
        producer: dict[str, int] = {}
        for part in partitions:
            for name in part.outputs:
                if name in producer and producer[name] != part.index:
                    raise PartitionError(f"value {name!r} is made by partitions "
                                         f"{producer[name]} and {part.index}")
                producer[name] = part.index
        edges: dict[tuple[int, int], list[str]] = {}
        feeds: dict[int, tuple[str, ...]] = {}
        for part in partitions:
            fed = []
            for name in part.inputs:
                if name in producer:
                    edges.setdefault((producer[name], part.index), []).append(name)
                else:
                    fed.append(name)
            feeds[part.index] = tuple(fed)
        listed = tuple(Dependency(i, j, tuple(v)) for (i, j), v in sorted(edges.items()))
        return Dependencies(listed, producer, feeds)

    def create_schedule(self, partitions: Sequence[Partition],
                        dependencies: Dependencies | None = None,
                        num_microbatches: int = DEFAULT_MICROBATCHES) -> ExecutionPlan:
        """The pipeline plan (see the module docstring). ``dependencies`` defaults to
        ``analyze_dependencies(partitions)``."""
        count = validate_count(num_microbatches, "num_microbatches")
        if not partitions:
            raise PartitionError("create_schedule needs at least one partition")
        if dependencies is None:
            dependencies = self.analyze_dependencies(partitions)
        routing = route(partitions, dependencies)
        stages = tuple(partitions[i] for i in routing.order)
        timeline = tuple(tuple((s, t - s) for s in range(len(stages)) if 0 <= t - s < count)
                         for t in range(len(stages) + count - 1))
        sizes = _value_bytes(stages)
        transfer = tuple(sum(sizes.get(name, 0) for name in names) for names in routing.carried)
        return ExecutionPlan(stages, dependencies, count, timeline, routing,
                             tuple(p.memory or 0 for p in stages), transfer)


def route(partitions: Sequence[Partition], dependencies: Dependencies | None = None) -> Routing:
    """The ``Routing`` of ``partitions`` run one after the other."""
    if dependencies is None:
        dependencies = PipelineScheduler().analyze_dependencies(partitions)
    order = _stage_order(partitions, dependencies)
    feeds: dict[str, None] = {}
    for position in order:
        for name in dependencies.feeds.get(partitions[position].index, ()):
            feeds.setdefault(name)
    graph_outputs = partitions[0].graph_outputs
    made = {name for part in partitions for name in part.outputs}
    for name in graph_outputs:  # a graph output that is a graph input, handed through
        if name not in made:
            feeds.setdefault(name)
    carried = []
    for at in range(len(order)):
        later = [partitions[p] for p in order[at + 1:]]
        made_later = {name for part in later for name in part.outputs}
        wanted: dict[str, None] = {}
        for part in later:
            for name in part.inputs:
                if name not in made_later:
                    wanted.setdefault(name)
        for name in graph_outputs:
            if name not in made_later:
                wanted.setdefault(name)
        carried.append(tuple(wanted))
    return Routing(tuple(order), tuple(feeds), tuple(carried), tuple(graph_outputs))


def _stage_order(partitions: Sequence[Partition], dependencies: Dependencies) -> list[int]:
    """Positions of ``partitions`` in a topological order of the dependencies."""
    position = {part.index: i for i, part in enumerate(partitions)}
    if len(position) != len(partitions):
        raise PartitionError("two partitions have the same index")
    waiting = {i: 0 for i in range(len(partitions))}
    for edge in dependencies.edges:
        if edge.producer not in position or edge.consumer not in position:
            raise PartitionError(f"a dependency names partition {edge.producer} or "
                                 f"{edge.consumer}, which is not among the partitions given")
        waiting[position[edge.consumer]] += 1
    order: list[int] = []
    ready = sorted(i for i, n in waiting.items() if n == 0)
    while ready:
        current = ready.pop(0)
        order.append(current)
        for edge in dependencies.edges:
            if edge.producer == partitions[current].index:
                consumer = position[edge.consumer]
                waiting[consumer] -= 1
                if waiting[consumer] == 0:
                    ready.append(consumer)
                    ready.sort()
    if len(order) != len(partitions):
        stuck = sorted(partitions[i].index for i, n in waiting.items() if n > 0)
        raise PartitionError(f"the partitions' dependencies form a cycle through {stuck}")
    return order


def _value_bytes(stages: Sequence[Partition]) -> dict[str, int]:
    """Value name -> bytes, from the partitions' graphs' inputs and outputs."""
    sizes: dict[str, int] = {}
    for part in stages:
        for value in [*part.graph.inputs, *part.graph.outputs]:
            sizes[value.name] = num_elements(value.shape) * value.dtype.itemsize
    return sizes
