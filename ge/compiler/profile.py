"""What one profiled run spent, node by node: a top-k table and a Chrome trace.

``Session.run(feed, profile=True)`` records, for every step, when its kernel started and
ended (``time.perf_counter_ns``, from the end of any cross-stream wait to the end of the
kernel), on which thread, with its node, op type, engine and stream. ``Profile.table(k)``
ranks the nodes and the op types by time; ``Profile.chrome_trace()`` is the Trace Event
format that ``chrome://tracing`` and Perfetto (ui.perfetto.dev) open, one track per
stream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from ge.compiler.executable import Executable

__all__ = ["StepTime", "Profile"]


@dataclass(frozen=True)
class StepTime:
    """One step of a profiled run."""

    node: str
    op_type: str
    engine: str
    stream: int
    start_ns: int  # from the start of the run
    duration_ns: int
    thread: int


class Profile:
    """The step times of one run, in the order the steps started."""

    def __init__(self, steps: Sequence[StepTime], total_ns: int, graph: str) -> None:
        self.steps = sorted(steps, key=lambda s: s.start_ns)
        self.total_ns = total_ns
        self.graph = graph

    @classmethod
    def from_timings(cls, executable: Executable,
                     timings: Sequence[tuple[int, int, int, int]], started_ns: int,
                     ended_ns: int) -> Profile:
        """A profile from the runtime's ``(task, start, end, thread)`` records."""
        steps = []
        for index, start, end, thread in timings:
            step = executable.steps[index]
            stream = executable.streams[index] if executable.streams else 0
            steps.append(StepTime(step.node, step.op_type, step.engine, stream,
                                  start - started_ns, end - start, thread))
        return cls(steps, ended_ns - started_ns, executable.graph.name)

    @property
    def kernel_ns(self) -> int:
        """The sum of the steps' times (more than the run's time when streams overlap)."""
        return sum(step.duration_ns for step in self.steps)

    def by_node(self) -> list[tuple[StepTime, int, int]]:
        """(the node's first record, total ns, records) by total time, the largest first:
        a step run slice by slice over the batch has one record per slice."""
        totals: dict[str, list[Any]] = {}
        for step in self.steps:
            entry = totals.setdefault(step.node, [step, 0, 0])
            entry[1] += step.duration_ns
            entry[2] += 1
        return sorted(((s, ns, n) for s, ns, n in totals.values()), key=lambda e: -e[1])

    def by_op_type(self) -> list[tuple[str, int, int]]:
        """(op type, total ns, steps) by total time, the largest first."""
        totals: dict[str, list[int]] = {}
        for step, ns, _records in self.by_node():
            entry = totals.setdefault(step.op_type, [0, 0])
            entry[0] += ns
            entry[1] += 1
        return sorted(((op, ns, n) for op, (ns, n) in totals.items()), key=lambda e: -e[1])

    def table(self, k: int = 15) -> str:
        """The ``k`` slowest nodes and op types, with their share of the run."""
        total = max(self.total_ns, 1)
        nodes = self.by_node()
        lines = [f"profile of {self.graph!r}: {self.total_ns / 1e6:.3f} ms, {len(nodes)} "
                 f"steps, kernels {self.kernel_ns / 1e6:.3f} ms (the rest is the runtime's "
                 f"own work: {max(self.total_ns - self.kernel_ns, 0) / 1e3:.1f} us)",
                 f"{'node':40} {'op type':22} {'engine':8} {'stream':>6} {'ms':>9} {'%':>6}"]
        for step, ns, records in nodes[:k]:
            sliced = f" ({records} slices)" if records > 1 else ""
            lines.append(f"{step.node[:40]:40} {step.op_type[:22]:22} {step.engine:8} "
                         f"{step.stream:6d} {ns / 1e6:9.3f} {100 * ns / total:6.1f}{sliced}")
        lines.append(f"{'op type':40} {'steps':>6} {'ms':>9} {'%':>6}")
        for op_type, ns, count in self.by_op_type()[:k]:
            lines.append(f"{op_type[:40]:40} {count:6d} {ns / 1e6:9.3f} {100 * ns / total:6.1f}")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The run in the Trace Event format: one complete event per step (microseconds),
        one track per stream."""
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": os.getpid(),
             "args": {"name": f"GE: {self.graph}"}}]
        for stream in sorted({step.stream for step in self.steps}):
            events.append({"name": "thread_name", "ph": "M", "pid": os.getpid(),
                           "tid": stream, "args": {"name": f"stream {stream}"}})
        for step in self.steps:
            events.append({"name": step.node, "cat": step.op_type, "ph": "X",
                           "ts": step.start_ns / 1e3, "dur": step.duration_ns / 1e3,
                           "pid": os.getpid(), "tid": step.stream,
                           "args": {"op_type": step.op_type, "engine": step.engine,
                                    "thread": step.thread}})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def save(self, path: Union[str, os.PathLike[str]]) -> None:
        """Write the Chrome trace to ``path`` (JSON)."""
        with open(path, "w") as file:
            json.dump(self.chrome_trace(), file)

    def __repr__(self) -> str:
        return f"<Profile {self.graph!r}: {len(self.steps)} steps, {self.total_ns / 1e6:.3f} ms>"
