"""Pictures of graphs: SVG, PNG and a self-contained HTML compile report.

    ge.viz.draw(graph, "model.png")                          # nodes coloured by op type
    ge.viz.draw(executable, "model.svg", color_by="engine")  # or "stream"
    ge.viz.draw(graph, "parts.png", color_by="partition", groups={"conv1": "0", ...})
    ge.viz.report_html(graph, ge.compile(graph), "report.html")

The format follows the file's extension (``.svg``, ``.png``, ``.html``). Graphs are
laid out in layers as Graphviz's ``dot`` draws them: by ``dot`` itself when it is
installed, else by the layout written here (``GE_VIZ_LAYOUT=python|dot`` forces
one). The PNG writer and its font are GE's own: no plotting library is needed.
Fused nodes list what they contain; constants are not drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from ge.errors import GEError, ModelFormatError
from ge.ir import Graph
from ge.memory import MemoryPlan
from ge.viz.drawing import Drawing, render, side_by_side
from ge.viz.html import ExecutableLike, engine_groups, page, stream_groups, write_report
from ge.viz.png import write_png
from ge.viz.scene import COLOR_BY, ColorMap, Scene, graph_scene
from ge.viz.svg import to_svg, write_svg

__all__ = ["draw", "draw_side_by_side", "report_html", "scene_of", "partition_groups",
           "engine_groups", "stream_groups", "render", "Drawing", "Scene",
           "ColorMap", "FORMATS", "COLOR_BY"]

#: the picture formats, by file extension
FORMATS = (".svg", ".png", ".html")

#: what a picture of a graph or an executable is drawn from
Subject = Union[Graph, ExecutableLike]

_UNGROUPED_LABELS = {"partition": "no partition", "engine": "not a step",
                     "stream": "not a step"}


def _split(subject: Any) -> tuple[Graph, Optional[ExecutableLike]]:
    if isinstance(subject, Graph):
        return subject, None
    if isinstance(getattr(subject, "graph", None), Graph) and hasattr(subject, "steps"):
        return subject.graph, subject
    raise GEError(f"ge.viz draws a ge.Graph or an executable (ge.compile's result), "
                  f"not {type(subject).__name__}")


def scene_of(subject: Subject, color_by: str = "op",
             groups: Optional[Mapping[str, Any]] = None, title: Optional[str] = None,
             colors: Optional[ColorMap] = None) -> Scene:
    """The scene of a graph or an executable's graph, coloured by ``color_by``: ``op``,
    ``engine`` or ``stream`` (from the executable when ``groups`` is not given), or
    ``partition`` (``groups``: node name -> partition)."""
    graph, executable = _split(subject)
    if color_by not in COLOR_BY:
        raise GEError(f"color_by {color_by!r}: expected one of {', '.join(COLOR_BY)}")
    if groups is None and color_by in ("engine", "stream"):
        if executable is None:
            raise GEError(f"colouring by {color_by} needs the executable (ge.compile's "
                          f"result), or groups mapping node names to {color_by}s")
        groups = engine_groups(executable) if color_by == "engine" else \
            stream_groups(executable)
    labels = None if groups is None else {name: str(group) for name, group in groups.items()}
    heading = graph.name if title is None else title
    return graph_scene(graph, color_by=color_by, groups=labels, title=heading, colors=colors,
                       ungrouped=_UNGROUPED_LABELS.get(color_by, "none"))


def _write(drawing: Drawing, output: Union[str, Path]) -> Path:
    path = Path(output)
    suffix = path.suffix.lower()
    if suffix == ".svg":
        return write_svg(drawing, path)
    if suffix == ".png":
        return write_png(drawing, path)
    if suffix == ".html":
        body = [f'<div class="picture">{to_svg(drawing, standalone=False)}</div>']
        path.write_text(page(drawing.title or "GE graph", body), encoding="utf-8")
        return path
    raise ModelFormatError(f"{output}: GE draws pictures as .svg, .png or .html, "
                           f"not {suffix or 'a file without an extension'!r}")


def _check_format(output: Union[str, Path]) -> None:
    if Path(output).suffix.lower() not in FORMATS:
        _write(Drawing(0, 0), output)  # raises the error naming the formats


def draw(graph: Subject, output: Union[str, Path], color_by: str = "op",
         groups: Optional[Mapping[str, Any]] = None, title: Optional[str] = None,
         method: Optional[str] = None) -> Path:
    """Draw ``graph`` (a ``ge.Graph``, or an executable to colour by engine or stream)
    to ``output``; the format follows the extension (``.svg``, ``.png``, ``.html``,
    else ``ModelFormatError``). ``groups`` maps node names to the group each is coloured
    by (its partition, say); nodes it leaves out are grey. ``method``: ``python`` or
    ``dot`` layout (default: ``dot`` when installed, see ``GE_VIZ_LAYOUT``)."""
    _check_format(output)
    return _write(render(scene_of(graph, color_by, groups, title), method), output)


def draw_side_by_side(panels: Sequence[tuple[Subject, str]], output: Union[str, Path],
                      color_by: str = "op", method: Optional[str] = None) -> Path:
    """Draw several graphs (``(graph or executable, title)`` pairs) in one picture, left
    to right, with the same colour for a group in each (the graph before and after
    optimization)."""
    _check_format(output)
    colors = ColorMap()
    drawings = [render(scene_of(subject, color_by, None, title, colors), method)
                for subject, title in panels]
    return _write(side_by_side(drawings), output)


def report_html(model_graph: Graph, executable: ExecutableLike, output: Union[str, Path],
                plan: Optional[MemoryPlan] = None, color_by: str = "engine",
                method: Optional[str] = None) -> Path:
    """Write the compile report of ``executable`` (compiled from ``model_graph``) as one
    self-contained HTML file: the graph before and after optimization, the compile
    report, and the memory plan as a timeline of buffers. The plan is ``plan``, else
    the one of the executable's latest run; without either the page says how to get
    one (``ge viz`` plans it for you)."""
    if not isinstance(model_graph, Graph):
        raise GEError(f"report_html needs the model's ge.Graph, not "
                      f"{type(model_graph).__name__}")
    _split(executable)
    return write_report(model_graph, executable, output, plan, color_by, method)


def partition_groups(partitions: Iterable[Any]) -> dict[str, str]:
    """Node name -> ``partition k`` for partitions with ``.index`` and ``.node_names``
    (a node listed by two partitions goes to the first)."""
    groups: dict[str, str] = {}
    for number, part in enumerate(partitions):
        names = getattr(part, "node_names", None)
        if names is None:
            raise GEError(f"partition {number} ({type(part).__name__}) has no node_names: "
                          f"a partition lists the names of the graph's nodes it holds")
        index = getattr(part, "index", number)
        for name in names:
            groups.setdefault(str(name), f"partition {index}")
    return groups
