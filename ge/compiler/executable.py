"""The compiled form of a graph: plain data that a session binds to kernels.

An ``Executable`` holds the graph it was compiled from, the ordered steps (one
per computing node, each naming its engine and the value slots it reads,
writes and releases), the stream of each step and the events between streams, the
constant slots, the graph's inputs and outputs, and the memory planner's switches.
Kernels are not part of it: a session looks them up by op type and engine
name when it loads the executable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ge.ir import Graph, TensorDesc

__all__ = ["Step", "IOSpec", "Executable"]


@dataclass(frozen=True)
class Step:
    """One node to run: which engine, which slots in, which out, which to free after."""

    node: str
    op_type: str
    engine: str
    inputs: tuple[int, ...]  # -1 marks an absent optional input
    outputs: tuple[int, ...]
    release: tuple[int, ...]  # slots whose last reader is this step


@dataclass(frozen=True)
class IOSpec:
    """A graph input or output: its name, descriptor and value slot."""

    name: str
    desc: TensorDesc
    slot: int


@dataclass
class Executable:
    """A compiled graph (``ge.compile``'s result), ready for ``ge.Session``."""

    graph: Graph
    steps: list[Step]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    constants: dict[int, str]  # slot -> name of the Const node holding its value
    num_slots: int
    report: dict[str, Any] = field(default_factory=dict)
    #: what ``ge.compile`` was given: the level and engines, and, for a graph whose input
    #: dimension names are hints shared by several inputs, the graph before optimization
    #: (a session compiles it again with those dimensions apart when a feed breaks them)
    options: dict[str, Any] = field(default_factory=dict)
    source: Optional[Graph] = None
    #: the stream each step runs on (empty: all on one) and, per step, the steps of other
    #: streams it waits for (one event each)
    streams: tuple[int, ...] = ()
    stream_waits: tuple[tuple[int, ...], ...] = ()
    #: the memory planner's switches (``gp.MemoryPass``): ``memory_reuse``, ``inplace``
    #: and, where switched off, ``batch_slicing``
    memory_options: dict[str, bool] = field(default_factory=dict)
    #: the input shapes and bound plan of the latest run (set by the sessions running it)
    last_plan: Any = field(default=None, repr=False, compare=False)

    @property
    def memory(self) -> dict[str, Any]:
        """The memory plan's figures for the input signature last run, or, before any
        run, for the graph's own input shapes when they are all known: ``naive_bytes``
        (every intermediate in its own buffer), ``planned_bytes`` (the arena),
        ``lower_bound_bytes`` (the most bytes live at one step), ``inplace_count``, and
        what ran outside the plan. Empty before the first run of a dynamic graph."""
        found = self.bound_plan()
        if found is None:
            return {}
        shapes, bound = found
        return dict(bound.report(shapes))

    def bound_plan(self) -> Optional[tuple[dict[str, tuple[int, ...]], Any]]:
        """The input shapes and bound plan (memory plan, batch slicings) of the latest
        run, or, before any run, of the graph's own input shapes when they are all
        known; ``None`` before the first run of a dynamic graph."""
        if self.last_plan is not None:
            return self.last_plan
        if not all(spec.desc.is_static for spec in self.inputs):
            return None
        from ge.compiler.loader import static_plan

        return static_plan(self)

    @property
    def input_names(self) -> list[str]:
        """The feed keys, in graph order."""
        return [spec.name for spec in self.inputs]

    @property
    def output_names(self) -> list[str]:
        """The keys of ``Session.run``'s result, in graph order."""
        return [spec.name for spec in self.outputs]

    @property
    def stream_count(self) -> int:
        """How many streams the steps run on."""
        return max(self.streams, default=0) + 1

    def engine_histogram(self) -> dict[str, int]:
        """How many steps each engine runs."""
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.engine] = counts.get(step.engine, 0) + 1
        return counts

    def engine_ops(self) -> dict[str, dict[str, int]]:
        """Per engine, how many steps of each op type it runs."""
        table: dict[str, dict[str, int]] = {}
        for step in self.steps:
            mine = table.setdefault(step.engine, {})
            mine[step.op_type] = mine.get(step.op_type, 0) + 1
        return table

    def engines_text(self) -> str:
        """Which engine runs which op types, and the engines asked for that could not run."""
        lines = []
        for engine, ops in sorted(self.engine_ops().items(), key=lambda kv: -sum(kv[1].values())):
            listed = ", ".join(f"{op} {n}" for op, n in sorted(ops.items(), key=lambda kv: -kv[1]))
            count = sum(ops.values())
            lines.append(f"engine {engine}: {count} step{'' if count == 1 else 's'} ({listed})")
        for engine, reason in sorted((self.report.get("engines_unavailable") or {}).items()):
            lines.append(f"engine {engine}: unavailable, {reason}")
        return "\n".join(lines)

    def report_text(self) -> str:
        """The compile report: per pass its time, nodes before and after, and what it did;
        then which engine runs what."""
        from ge.passes.manager import format_report

        head = (f"compiled {self.report.get('graph')!r} at opt_level "
                f"{self.report.get('opt_level')}: {self.report.get('nodes_before')} -> "
                f"{self.report.get('nodes')} nodes in "
                f"{self.report.get('compile_seconds', 0.0) * 1e3:.1f} ms")
        return head + "\n" + format_report(self.report.get("passes", [])) + "\n" \
            + self.engines_text()

    def plan_text(self) -> str:
        """How the steps will run: the order chosen, the streams with their events, and
        the memory plan (for the input signature last run, or the graph's own shapes)."""
        lines = []
        schedule = self.report.get("schedule") or {}
        if "graph_order_peak_bytes" in schedule:
            lines.append(f"schedule: {schedule['order']} (estimated peak of live values: "
                         f"graph order {_mib(schedule['graph_order_peak_bytes'])}, "
                         f"memory-aware {_mib(schedule['memory_aware_peak_bytes'])})")
        elif schedule:
            lines.append(f"schedule: {schedule['order']}")
        streams = self.report.get("streams") or {}
        why = f"; one stream: {streams['why_one']}" if streams.get("why_one") else ""
        lines.append(f"streams: {self.stream_count} (asked: {streams.get('requested', 'auto')}"
                     f", events: {sum(len(w) for w in self.stream_waits)}{why})")
        threads = self.report.get("threads") or {}
        largest = threads.get("largest_step_flops")
        if largest is not None:
            rule = ("one thread unless told (every step is tiny)" if threads.get("serial")
                    else "every core unless told")
            moved = threads.get("largest_step_bytes") or 0.0
            lines.append(f"threads: {rule}; largest step {largest / 1e6:.2f} MFLOP, "
                         f"{moved / 1e6:.2f} MB moved")
        if self.stream_count > 1:
            for stream in range(self.stream_count):
                mine = [s.node for s, k in zip(self.steps, self.streams) if k == stream]
                shown = ", ".join(mine[:6]) + (f", ... ({len(mine)} steps)" if len(mine) > 6
                                               else "")
                lines.append(f"  stream {stream}: {shown}")
            for index, waits in enumerate(self.stream_waits):
                for other in waits:
                    lines.append(f"  event: {self.steps[index].node!r} (stream "
                                 f"{self.streams[index]}) waits for {self.steps[other].node!r}"
                                 f" (stream {self.streams[other]})")
        memory = self.memory
        if not memory:
            lines.append("memory: planned at the first run of each input signature")
            return "\n".join(lines)
        signature = ", ".join(f"{k}{v}" for k, v in memory["signature"].items())
        lines.append(
            f"memory for {signature}: arena {_mib(memory['planned_bytes'])} "
            f"({memory['strategy']}), lower bound {_mib(memory['lower_bound_bytes'])}, "
            f"each value its own buffer {_mib(memory['naive_bytes'])}; "
            f"{memory['inplace_count']} in place, {memory['view_count']} views, "
            f"{memory['written_in_slot']} steps write into their slot")
        for run in memory.get("batch_slices", ()):
            lines.append(
                f"  batch sliced: {run['steps']} steps {run['first']!r} .. {run['last']!r} "
                f"run {run['width']} of {run['batch']} samples at a time ({run['slices']} "
                f"slices; largest step moves {_mib(run['largest_step_bytes'])} at the whole "
                f"batch; inner values {_mib(run['inner_bytes'])} at one slice's size)")
        for what, key in (("copied into their slot", "copied_into_slot"),
                          ("kept outside the arena (size known only once computed)",
                           "outside_arena")):
            if memory[key]:
                listed = ", ".join(f"{op} x{n}" for op, n in sorted(memory[key].items()))
                lines.append(f"  {what}: {listed}")
        return "\n".join(lines)

    def summary(self) -> str:
        """A few lines saying what was compiled and how it will run."""
        lines = [f"executable for graph {self.graph.name!r}: {len(self.steps)} steps, "
                 f"{len(self.constants)} constants, {self.num_slots} value slots"]
        for spec in self.inputs:
            lines.append(f"  input  {spec.name}: {spec.desc}")
        for spec in self.outputs:
            lines.append(f"  output {spec.name}: {spec.desc}")
        engines = ", ".join(f"{k}: {v}" for k, v in sorted(self.engine_histogram().items()))
        lines.append(f"  engines: {engines or 'none'}")
        return "\n".join(lines)


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.2f} MiB"
