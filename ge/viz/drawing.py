"""A laid-out scene as drawing primitives: rectangles, lines and text.

The SVG and PNG writers both draw a :class:`Drawing`, so the two pictures of a
graph are the same picture. A drawing has the title on top, the graph below it and
the legend at its right; :func:`side_by_side` puts several drawings in one (the
graph before and after optimization).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Optional, Union

from ge.viz.geometry import Layout, Point
from ge.viz.layout import layout as make_layout
from ge.viz.scene import CHAR_WIDTH, LINE_HEIGHT, Scene

__all__ = ["Rect", "Line", "Text", "Drawing", "Item", "render", "side_by_side",
           "bezier_points", "BACKGROUND", "INK"]

BACKGROUND = "#ffffff"
INK = "#202020"
EDGE_COLOR = "#555555"
LABEL_COLOR = "#4a4a8a"
TITLE_HEIGHT = 30.0
LEGEND_ROW = 18.0
LEGEND_SWATCH = 12.0
LEGEND_GAP = 30.0
#: a text's ``max_width`` when it must never be shortened (the PNG grows to hold it)
UNLIMITED = float("inf")
#: most legend rows listed; the rest are summed in one line
LEGEND_ROWS = 40


@dataclass(frozen=True)
class Rect:
    """A rectangle: ``role`` says what it is (``node``, ``legend``, ``background``,
    ``buffer``) and ``key`` which one (a node's name)."""

    x: float
    y: float
    width: float
    height: float
    fill: str
    stroke: Optional[str] = None
    stroke_width: float = 1.0
    rounded: bool = False
    role: str = ""
    key: str = ""
    tooltip: str = ""
    double: bool = False  # a second outline inside (fused nodes)


@dataclass(frozen=True)
class Line:
    """A polyline (or cubic Bezier pieces when ``spline``), with an arrowhead at its end
    when ``arrow``."""

    points: tuple[Point, ...]
    color: str = EDGE_COLOR
    width: float = 1.2
    arrow: bool = True
    spline: bool = False
    dashed: bool = False


@dataclass(frozen=True)
class Text:
    """One line of text: ``x`` is its left end (``anchor`` ``start``) or centre
    (``middle``), ``y`` the top of its line."""

    x: float
    y: float
    text: str
    color: str = INK
    bold: bool = False
    small: bool = False
    anchor: str = "middle"
    #: the most width the text may take (a box's inside); None: its own width
    max_width: Optional[float] = None


Item = Union[Rect, Line, Text]


@dataclass
class Drawing:
    """Primitives on a ``width`` x ``height`` canvas, drawn in order."""

    width: float
    height: float
    items: list[Item] = field(default_factory=list)
    title: str = ""

    def shifted(self, dx: float, dy: float) -> list[Item]:
        """The items moved by ``(dx, dy)``."""
        moved: list[Item] = []
        for item in self.items:
            if isinstance(item, Line):
                moved.append(replace(item, points=tuple((x + dx, y + dy)
                                                        for x, y in item.points)))
            else:
                moved.append(replace(item, x=item.x + dx, y=item.y + dy))
        return moved


def bezier_points(points: Sequence[Point], segments: int = 8) -> list[Point]:
    """The polyline through cubic Bezier pieces (control points 1 + 3k)."""
    result = [points[0]]
    for start in range(0, len(points) - 3, 3):
        p0, p1, p2, p3 = points[start:start + 4]
        for step in range(1, segments + 1):
            t = step / segments
            a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t ** 3
            result.append((a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0],
                           a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1]))
    return result


def _label_anchor(points: Sequence[Point]) -> Point:
    """Where an edge's label goes: just below its source, right of where it leaves."""
    return (points[0][0] + 5, points[0][1] + 1)


def _graph_items(scene: Scene, placed: Layout, dy: float) -> list[Item]:
    items: list[Item] = []
    anchors: dict[tuple[str, str], Point] = {}
    for edge, route in zip(scene.edges, placed.routes):
        if len(route.points) < 2:
            continue
        points = tuple((x, y + dy) for x, y in route.points)
        items.append(Line(points, spline=route.spline))
        if edge.label:  # once per value, right of its rightmost edge
            key = (edge.source, edge.label)
            x, y = _label_anchor(points)
            anchors[key] = max(anchors.get(key, (x, y)), (x, y))
    for (_, label), (x, y) in anchors.items():
        items.append(Text(x, y, label, LABEL_COLOR, small=True, anchor="start",
                          max_width=len(label) * CHAR_WIDTH * 1.6))
    for node in scene.nodes:
        box = placed.boxes[node.id]
        heavy = node.kind in ("input", "output")
        items.append(Rect(box.left, box.top + dy, box.width, box.height, node.fill, INK,
                          2.0 if heavy else 1.0, rounded=node.kind == "input", role="node",
                          key=node.id, tooltip=node.tooltip, double=node.kind == "fused"))
        top = box.top + dy + (box.height - len(node.lines) * LINE_HEIGHT) / 2
        for index, line in enumerate(node.lines):
            items.append(Text(box.x, top + index * LINE_HEIGHT, line, bold=index == 0,
                              max_width=box.width - 4))
    return items


def _legend_items(scene: Scene, left: float, top: float) -> tuple[list[Item], float, float]:
    """The legend's items, width and height."""
    rows = scene.legend[:LEGEND_ROWS]
    texts = [f"{label} ({count})" for label, _, count in rows]
    rest = scene.legend[LEGEND_ROWS:]
    if rest:
        texts.append(f"... {len(rest)} more ({sum(c for _, _, c in rest)} nodes)")
    heading = scene.legend_title or "legend"
    notes = [f"{scene.hidden} constants not drawn"] if scene.hidden else []
    width = max([len(heading)] + [len(t) + 3 for t in texts] + [len(n) for n in notes],
                default=0) * CHAR_WIDTH + 16
    items: list[Item] = [Text(left, top, heading, bold=True, anchor="start",
                              max_width=UNLIMITED)]
    y = top + LEGEND_ROW + 2
    for (label, color, _), text in zip(rows, texts):
        items.append(Rect(left, y + 1, LEGEND_SWATCH, LEGEND_SWATCH, color, INK, role="legend",
                          key=label))
        items.append(Text(left + LEGEND_SWATCH + 6, y, text, anchor="start",
                          max_width=UNLIMITED))
        y += LEGEND_ROW
    for text in texts[len(rows):] + notes:
        items.append(Text(left, y, text, small=True, anchor="start", max_width=UNLIMITED))
        y += LEGEND_ROW
    return items, width, y - top


def render(scene: Scene, method: Optional[str] = None) -> Drawing:
    """Lay the scene out (``method``: ``python``, ``dot`` or the default choice) and draw
    it: title, graph, legend."""
    ids = [node.id for node in scene.nodes]
    placed = make_layout(ids, scene.sizes, [(e.source, e.target) for e in scene.edges],
                         method)
    dy = TITLE_HEIGHT if scene.title else 0.0
    items: list[Item] = []
    if scene.title:
        items.append(Text(16, 8, scene.title, bold=True, anchor="start", max_width=UNLIMITED))
    items += _graph_items(scene, placed, dy)
    legend, legend_width, legend_height = _legend_items(scene, placed.width + LEGEND_GAP / 2,
                                                        dy + 16)
    items += legend
    width = max(placed.width + LEGEND_GAP + legend_width,
                len(scene.title) * CHAR_WIDTH + 32 if scene.title else 0.0)
    height = max(placed.height + dy, legend_height + dy + 32)
    return Drawing(width, height, items, scene.title)


def side_by_side(drawings: Sequence[Drawing], gap: float = 40.0) -> Drawing:
    """One drawing holding ``drawings`` left to right, with a rule between them."""
    items: list[Item] = []
    left = 0.0
    height = max((d.height for d in drawings), default=0.0)
    for index, drawing in enumerate(drawings):
        if index:
            items.append(Line(((left - gap / 2, 8.0), (left - gap / 2, height - 8.0)),
                              color="#bbbbbb", arrow=False, dashed=True))
        items += drawing.shifted(left, 0.0)
        left += drawing.width + gap
    return Drawing(max(left - gap, 0.0), height, items,
                   " | ".join(d.title for d in drawings if d.title))
