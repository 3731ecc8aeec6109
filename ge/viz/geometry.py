"""What a layout is: boxes placed on a plane and the routes of the edges between them.

Both layout engines (``layout.py``, written here, and Graphviz's ``dot`` through
``dot.py``) return a :class:`Layout`, so the SVG and PNG writers never know which
one ran. Coordinates are drawing units (an SVG pixel), x to the right, y down.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Point", "Box", "Route", "Layout", "MARGIN"]

Point = tuple[float, float]

#: empty space around the drawing, in drawing units
MARGIN = 16.0


@dataclass(frozen=True)
class Box:
    """A node placed: its centre ``(x, y)``, its size and the layer it sits in (0 on top)."""

    id: str
    x: float
    y: float
    width: float
    height: float
    layer: int

    @property
    def left(self) -> float:
        """The x of the box's left side."""
        return self.x - self.width / 2

    @property
    def right(self) -> float:
        """The x of the box's right side."""
        return self.x + self.width / 2

    @property
    def top(self) -> float:
        """The y of the box's top side."""
        return self.y - self.height / 2

    @property
    def bottom(self) -> float:
        """The y of the box's bottom side."""
        return self.y + self.height / 2


@dataclass(frozen=True)
class Route:
    """The line an edge is drawn along, from its source's box to its target's.

    ``points`` is a polyline, or, when ``spline`` is true, the control points of
    cubic Bezier pieces (1 + 3k points, as Graphviz gives them). Empty for a
    self-loop, which is not drawn."""

    source: str
    target: str
    points: tuple[Point, ...]
    spline: bool = False


@dataclass
class Layout:
    """Every node's box and every edge's route (one per edge given, in that order)."""

    boxes: dict[str, Box]
    routes: list[Route]
    width: float
    height: float
    method: str  # "python" or "dot"
    #: nodes added where an edge crosses a layer (``python`` only)
    dummy_count: int = 0
    #: edge crossings between adjacent layers in the order chosen (``python`` only)
    crossings: int = 0
    #: the real nodes of each layer, left to right
    layers: list[list[str]] = field(default_factory=list)
