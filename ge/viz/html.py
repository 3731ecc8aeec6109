"""The compile report as one self-contained HTML file.

The page holds, inline and with no link outside it: the graph before optimization
(nodes coloured by op type), the graph after it (coloured by engine, and by stream
when the steps run on several), the compile report (what each pass did, which
engine runs what, the schedule and streams), and the memory plan drawn as a
timeline of buffers with its figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any, Optional, Protocol, Union

from ge.ir import Graph
from ge.memory import MemoryPlan
from ge.viz.drawing import render
from ge.viz.scene import ColorMap, graph_scene
from ge.viz.svg import to_svg
from ge.viz.timeline import StepLike, format_bytes, timeline_buffers, timeline_svg

__all__ = ["ExecutableLike", "engine_groups", "stream_groups", "report_page", "page",
           "STYLE"]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #202020; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
.picture { overflow: auto; max-height: 90vh; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #eee; } td.name { text-align: left; }
"""


class EngineStepLike(StepLike, Protocol):
    """A step that names the engine running it."""

    @property
    def engine(self) -> str: ...


class ExecutableLike(Protocol):
    """What the pictures read of ``ge.compile``'s result (``ge.Executable``)."""

    @property
    def graph(self) -> Graph: ...

    @property
    def steps(self) -> Sequence[EngineStepLike]: ...

    @property
    def streams(self) -> tuple[int, ...]: ...

    @property
    def last_plan(self) -> Any: ...

    def bound_plan(self) -> Any: ...

    def summary(self) -> str: ...

    def report_text(self) -> str: ...

    def plan_text(self) -> str: ...


def _input_groups(graph: Graph) -> dict[str, str]:
    return {node.name: "input" for node in graph.nodes if node.op_type == "Data"}


def engine_groups(executable: ExecutableLike) -> dict[str, str]:
    """Node name -> the engine running it (graph inputs: ``input``)."""
    groups = _input_groups(executable.graph)
    groups.update({step.node: step.engine for step in executable.steps})
    return groups


def stream_groups(executable: ExecutableLike) -> dict[str, str]:
    """Node name -> ``stream k``, the stream its step runs on (graph inputs: ``input``)."""
    groups = _input_groups(executable.graph)
    streams = executable.streams or (0,) * len(executable.steps)
    groups.update({step.node: f"stream {stream}"
                   for step, stream in zip(executable.steps, streams)})
    return groups


def page(title: str, body: Sequence[str]) -> str:
    """A complete HTML document with the report's style."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _picture(heading: str, svg: str) -> list[str]:
    return [f"<h2>{escape(heading)}</h2>", f'<div class="picture">{svg}</div>']


def _plan_of(executable: ExecutableLike, plan: Optional[MemoryPlan]) -> Optional[MemoryPlan]:
    if plan is not None:
        return plan
    last = executable.last_plan
    if last is not None:
        return getattr(last[1], "memory", None)
    return None


def _sliced_runs(executable: ExecutableLike,
                 plan: MemoryPlan) -> list[tuple[int, int, str]]:
    """(first step, last step, description) of the runs the plan slices over the batch:
    known where ``plan`` is the last run's or the static shapes' plan."""
    found = executable.bound_plan()
    bound = found[1] if found is not None and found[1].memory == plan else None
    runs = []
    for sliced, first, last_name in getattr(bound, "slicings", ()):
        runs.append((sliced.first, sliced.last,
                     f"{first} .. {last_name}: {sliced.last - sliced.first + 1} steps run "
                     f"{sliced.width} of {sliced.batch} samples at a time"))
    return runs


def _memory_section(executable: ExecutableLike, plan: Optional[MemoryPlan],
                    colors: ColorMap) -> list[str]:
    body = ["<h2>Memory plan</h2>"]
    if plan is None:
        body.append("<p>No memory plan yet: GE plans memory per input signature at the "
                    "first run (run the executable once, or pass <code>plan=</code>).</p>")
        return body
    buffers = timeline_buffers(executable.steps, plan)
    figures = plan.report()
    body.append(f"<p>{len(buffers)} buffers in an arena of "
                f"{format_bytes(plan.arena_bytes)} ({escape(plan.strategy)}); lower bound "
                f"{format_bytes(plan.lower_bound_bytes)}; each value in its own buffer "
                f"{format_bytes(plan.naive_bytes)}; {plan.inplace_count} written in place, "
                f"{len(plan.views)} views. x: step, y: arena offset; hover for the "
                "values. Graph inputs, constants and outputs, and values an engine "
                "allocates itself, live outside the arena and are not drawn.</p>")
    sliced = _sliced_runs(executable, plan)
    if sliced:
        body.append(f"<p>{len(sliced)} runs of steps go a few samples of the batch at a "
                    "time (shaded): their inner values are planned at one slice's size.</p>")
    body.append(timeline_svg(buffers, len(executable.steps), plan.arena_bytes,
                             plan.lower_bound_bytes, colors, sliced))
    rows = "".join(f'<tr><td class="name">{escape(name)}</td><td>{format_bytes(size)}</td>'
                   f"</tr>" for name, size in sorted(figures.get("strategies", {}).items()))
    body.append(f"<table><tr><th>placement strategy tried</th><th>arena</th></tr>{rows}"
                "</table>")
    return body


def report_page(model_graph: Graph, executable: ExecutableLike,
                plan: Optional[MemoryPlan] = None, color_by: str = "engine",
                method: Optional[str] = None) -> str:
    """The report's HTML text (see the module's docstring)."""
    colors = ColorMap()
    name = model_graph.name
    body = [f"<h1>GE compile report: {escape(name)}</h1>",
            f"<pre>{escape(executable.summary(), quote=False)}</pre>"]
    before = graph_scene(model_graph, title=f"{name}: before optimization "
                                            f"({len(model_graph)} nodes)", colors=colors)
    body += _picture("Graph before optimization", to_svg(render(before, method), False))
    groups = stream_groups(executable) if color_by == "stream" else engine_groups(executable)
    if color_by == "op":
        after = graph_scene(executable.graph, colors=colors,
                            title=f"{name}: after optimization ({len(executable.graph)} nodes)")
    else:
        after = graph_scene(executable.graph, color_by=color_by, groups=groups,
                            title=f"{name}: after optimization ({len(executable.graph)} "
                                  f"nodes), coloured by {color_by}")
    body += _picture("Graph after optimization", to_svg(render(after, method), False))
    streams = set(executable.streams)
    if color_by != "stream" and len(streams) > 1:
        by_stream = graph_scene(executable.graph, color_by="stream",
                                groups=stream_groups(executable),
                                title=f"{name}: steps by stream ({len(streams)} streams)")
        body += _picture("Streams", to_svg(render(by_stream, method), False))
    body += ["<h2>Compile report</h2>",
             f"<pre>{escape(executable.report_text(), quote=False)}</pre>",
             "<h2>Schedule, streams and memory</h2>",
             f"<pre>{escape(executable.plan_text(), quote=False)}</pre>"]
    body += _memory_section(executable, _plan_of(executable, plan), colors)
    return page(f"GE report: {name}", body)


def write_report(model_graph: Graph, executable: ExecutableLike, output: Union[str, Path],
                 plan: Optional[MemoryPlan] = None, color_by: str = "engine",
                 method: Optional[str] = None) -> Path:
    """Write the report to ``output``."""
    path = Path(output)
    path.write_text(report_page(model_graph, executable, plan, color_by, method),
                    encoding="utf-8")
    return path
