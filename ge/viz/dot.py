"""Layout by Graphviz's ``dot`` program, when it is installed.

The graph is written in the DOT language with every node a fixed-size empty box of
the size the drawing needs, ``dot -Tplain`` places it, and its plain output (inches,
y up) becomes a :class:`Layout` in drawing units (points, y down). Edges have no
arrowheads in the request, so each spline ends on its target's border, where the
drawing puts its own arrowhead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Optional

from ge.errors import GEError
from ge.viz.geometry import MARGIN, Box, Layout, Point, Route

__all__ = ["dot_executable", "dot_source", "parse_plain", "dot_layout", "DOT_TIMEOUT_SECONDS"]

POINTS_PER_INCH = 72.0
DOT_TIMEOUT_SECONDS = 120.0


def dot_executable() -> Optional[str]:
    """The path of Graphviz's ``dot``, or None when it is not on ``PATH``."""
    return shutil.which("dot")


def dot_source(ids: Sequence[str], sizes: Mapping[str, tuple[float, float]],
               edges: Sequence[tuple[str, str]]) -> str:
    """The DOT text asking for the layout: nodes ``n0``, ``n1``, ... of the given sizes."""
    index = {node: i for i, node in enumerate(ids)}
    lines = ["digraph G {",
             "  graph [rankdir=TB, nodesep=0.33, ranksep=0.6, splines=spline];",
             '  node [shape=box, fixedsize=true, label=""];',
             "  edge [arrowhead=none];"]
    for node in ids:
        width, height = sizes[node]
        lines.append(f"  n{index[node]} [width={width / POINTS_PER_INCH:.4f}, "
                     f"height={height / POINTS_PER_INCH:.4f}];")
    for source, target in edges:
        lines.append(f"  n{index[source]} -> n{index[target]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _read_plain(text: str, ids: Sequence[str]
                ) -> tuple[float, dict[str, Point], dict[tuple[str, str], list[tuple[Point, ...]]]]:
    """From ``dot -Tplain`` output: the graph's height, each node's centre and each
    edge's splines, in points with y up."""
    height = 0.0
    centres: dict[str, Point] = {}
    splines: dict[tuple[str, str], list[tuple[Point, ...]]] = {}
    for line in text.splitlines():
        fields = shlex.split(line)
        try:
            if fields and fields[0] == "graph":
                height = float(fields[3]) * POINTS_PER_INCH
            elif fields and fields[0] == "node":
                centres[ids[int(fields[1][1:])]] = (float(fields[2]) * POINTS_PER_INCH,
                                                    float(fields[3]) * POINTS_PER_INCH)
            elif fields and fields[0] == "edge":
                pair = (ids[int(fields[1][1:])], ids[int(fields[2][1:])])
                count = int(fields[3])
                numbers = [float(v) * POINTS_PER_INCH for v in fields[4:4 + 2 * count]]
                splines.setdefault(pair, []).append(tuple(zip(numbers[::2], numbers[1::2])))
        except (IndexError, ValueError):
            raise GEError(f"dot gave a line GE cannot read: {line!r}") from None
    missing = [node for node in ids if node not in centres]
    if missing:
        raise GEError(f"dot placed no box for {len(missing)} node(s)")
    return height, centres, splines


def parse_plain(text: str, ids: Sequence[str], sizes: Mapping[str, tuple[float, float]],
                edges: Sequence[tuple[str, str]]) -> Layout:
    """A layout from ``dot -Tplain`` output for the graph :func:`dot_source` wrote."""
    height, centres, splines = _read_plain(text, ids)

    def flip(point: Point) -> Point:
        return (point[0] + MARGIN, height - point[1] + MARGIN)

    layer_ys = sorted({round(height - y, 1) for _, y in centres.values()})
    layer_index = {y: i for i, y in enumerate(layer_ys)}
    boxes = {}
    for node in ids:
        x, y = flip(centres[node])
        boxes[node] = Box(node, x, y, sizes[node][0], sizes[node][1],
                          layer_index[round(height - centres[node][1], 1)])
    routes = []
    used: dict[tuple[str, str], int] = {}
    for source, target in edges:
        found = splines.get((source, target), [])
        if not found or source == target:
            routes.append(Route(source, target, ()))
            continue
        turn = used.get((source, target), 0) % len(found)
        used[(source, target)] = turn + 1
        routes.append(Route(source, target, tuple(flip(p) for p in found[turn]), spline=True))
    layers: list[list[str]] = [[] for _ in layer_ys]
    for node in sorted(ids, key=lambda n: boxes[n].x):
        layers[boxes[node].layer].append(node)
    right = max((b.right for b in boxes.values()), default=0.0)
    bottom = max((b.bottom for b in boxes.values()), default=0.0)
    return Layout(boxes, routes, right + MARGIN, max(bottom, height) + MARGIN, "dot",
                  layers=layers)


def dot_layout(ids: Sequence[str], sizes: Mapping[str, tuple[float, float]],
               edges: Sequence[tuple[str, str]]) -> Layout:
    """The layout ``dot`` makes of the graph; ``GEError`` when it is missing or fails."""
    program = dot_executable()
    if program is None:
        raise GEError("the dot layout was asked for (GE_VIZ_LAYOUT=dot) but Graphviz's dot "
                      "is not on PATH; install Graphviz or use GE_VIZ_LAYOUT=python")
    try:
        completed = subprocess.run([program, "-Tplain"], input=dot_source(ids, sizes, edges),
                                   capture_output=True, text=True,
                                   timeout=DOT_TIMEOUT_SECONDS, env=dict(os.environ))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GEError(f"dot failed to run: {error}") from None
    if completed.returncode != 0:
        raise GEError(f"dot exited with status {completed.returncode}: "
                      f"{completed.stderr.strip()[:500]}")
    return parse_plain(completed.stdout, ids, sizes, edges)
