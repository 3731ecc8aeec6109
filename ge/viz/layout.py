"""A layered drawing of a directed graph, as Graphviz's ``dot`` makes it (Sugiyama's method).

Steps 1-4 (cycles, layers, dummy nodes on long edges, order within layers) are in
``layers.py``, step 5 (x coordinates, chains straight) in ``coordinates.py``; here:

6. **y**: layers stacked, each as tall as its tallest box.
7. **Routes**: from a port on the source's bottom, through every dummy, to a port on
   the target's top, leaving and entering the boxes vertically.

``layout()`` runs Graphviz's ``dot`` instead when it is on ``PATH`` (or when
``GE_VIZ_LAYOUT=dot``); ``GE_VIZ_LAYOUT=python`` forces the layout written here.
Both give the same :class:`Layout`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Optional

from ge.errors import GEError
from ge.viz import dot
from ge.viz.coordinates import assign_x
from ge.viz.geometry import MARGIN, Box, Layout, Point, Route
from ge.viz.layers import LayeredGraph, layered_graph, reduce_crossings

__all__ = ["python_layout", "layout", "choose_method", "RANK_GAP"]

#: vertical space between two layers (room for an edge's label)
RANK_GAP = 44.0
#: edges leave and enter boxes vertically for this long
STUB = 10.0
#: the width a dummy node (a long edge passing through a layer) takes in its layer
DUMMY_WIDTH = 4.0


def python_layout(ids: Sequence[str], sizes: Mapping[str, tuple[float, float]],
                  edges: Sequence[tuple[str, str]]) -> Layout:
    """The layout written here: boxes of ``sizes`` (width, height) for ``ids``, and one
    route per edge in ``edges`` (pairs of ids)."""
    index = {node: i for i, node in enumerate(ids)}
    numbered = [(index[s], index[t]) for s, t in edges]
    graph = layered_graph(len(ids), numbered)
    crossings = reduce_crossings(graph)
    widths = [sizes[node][0] for node in ids] + [DUMMY_WIDTH] * graph.dummy_count
    heights = [sizes[node][1] for node in ids] + [0.0] * graph.dummy_count
    x = assign_x(graph, widths)
    tops, layer_heights = [], []
    top = MARGIN
    for layer in graph.layers:
        height = max((heights[v] for v in layer), default=0.0)
        tops.append(top)
        layer_heights.append(height)
        top += height + RANK_GAP
    left = min((x[v] - widths[v] / 2 for v in range(len(x))), default=0.0)
    shift = MARGIN - left
    y = [tops[graph.layer_of[v]] + layer_heights[graph.layer_of[v]] / 2 for v in range(len(x))]
    x = [value + shift for value in x]
    boxes = {node: Box(node, x[i], y[i], widths[i], heights[i], graph.layer_of[i])
             for i, node in enumerate(ids)}
    chain_routes = _routes(graph, x, y, widths, heights, tops, layer_heights)
    by_pair = {edge: route for edge, route in zip(graph.edges, chain_routes)}
    routes = [Route(s, t, by_pair.get((index[s], index[t]), ())) for s, t in edges]
    width = max((x[v] + widths[v] / 2 for v in range(len(x))), default=0.0) + MARGIN
    height = top - RANK_GAP + MARGIN if graph.layers else 2 * MARGIN
    layers = [[ids[v] for v in layer if not graph.is_dummy(v)] for layer in graph.layers]
    return Layout(boxes, routes, width, height, "python", graph.dummy_count, crossings, layers)


def _ports(vertices: list[int], centre: float, width: float, x: list[float]) -> dict[int, float]:
    """Where edges leave (or enter) a box side: spread over the side in the order of the
    vertices at their other ends."""
    ordered = sorted(set(vertices), key=lambda v: x[v])
    spacing = min(14.0, width / (len(ordered) + 1))
    middle = (len(ordered) - 1) / 2
    return {v: centre + (i - middle) * spacing for i, v in enumerate(ordered)}


def _routes(graph: LayeredGraph, x: list[float], y: list[float], widths: list[float],
            heights: list[float], tops: list[float], layer_heights: list[float]
            ) -> list[tuple[Point, ...]]:
    exits = {v: _ports(graph.down[v], x[v], widths[v], x) for v in range(graph.real_count)}
    entries = {v: _ports(graph.up[v], x[v], widths[v], x) for v in range(graph.real_count)}
    routes = []
    for chain, flipped in zip(graph.chains, graph.reversed):
        start, end = chain[0], chain[-1]
        leave, arrive = exits[start][chain[1]], entries[end][chain[-2]]
        bottom, top = y[start] + heights[start] / 2, y[end] - heights[end] / 2
        points: list[Point] = [(leave, bottom), (leave, bottom + STUB)]
        for vertex in chain[1:-1]:
            layer = graph.layer_of[vertex]
            points.append((x[vertex], tops[layer]))
            if layer_heights[layer] > 0:
                points.append((x[vertex], tops[layer] + layer_heights[layer]))
        points += [(arrive, top - STUB), (arrive, top)]
        routes.append(tuple(reversed(points)) if flipped else tuple(points))
    return routes


def choose_method(method: Optional[str] = None) -> str:
    """``python`` or ``dot``: as asked, else ``GE_VIZ_LAYOUT``, else ``dot`` when Graphviz
    is installed."""
    chosen = method or os.environ.get("GE_VIZ_LAYOUT", "").strip().lower() or None
    if chosen is None:
        return "dot" if dot.dot_executable() else "python"
    if chosen not in ("python", "dot"):
        raise GEError(f"layout method {chosen!r}: expected 'python' or 'dot' "
                      f"(GE_VIZ_LAYOUT)")
    return chosen


def layout(ids: Sequence[str], sizes: Mapping[str, tuple[float, float]],
           edges: Sequence[tuple[str, str]], method: Optional[str] = None) -> Layout:
    """Place boxes of ``sizes`` for nodes ``ids`` in layers, edges pointing down, with
    Graphviz's ``dot`` or the layout written here (see :func:`choose_method`)."""
    if choose_method(method) == "dot":
        return dot.dot_layout(ids, sizes, edges)
    return python_layout(ids, sizes, edges)
