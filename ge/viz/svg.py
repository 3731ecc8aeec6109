"""A drawing as SVG text: a standalone file, or an element to put inside an HTML page.

Every node is one ``<rect class="node" data-node="NAME">`` with a ``<title>`` (the
tooltip a browser shows) and its text after it; edges are paths with an arrowhead
marker. Nothing refers outside the file.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Union
from xml.sax.saxutils import escape, quoteattr

from ge.viz.drawing import BACKGROUND, Drawing, Item, Line, Rect, Text

__all__ = ["to_svg", "write_svg", "FONT_FAMILY"]

FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, monospace"
FONT_SIZE = 12.0
SMALL_FONT_SIZE = 10.5
#: distance from a text line's top to its baseline
BASELINE = 11.5

_ids = itertools.count()


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _path(line: Line) -> str:
    points = line.points
    head = f"M{_number(points[0][0])},{_number(points[0][1])}"
    if line.spline and len(points) >= 4:
        pieces = [" C" + " ".join(f"{_number(x)},{_number(y)}" for x, y in points[i:i + 3])
                  for i in range(1, len(points) - 2, 3)]
        return head + "".join(pieces)
    return head + "".join(f" L{_number(x)},{_number(y)}" for x, y in points[1:])


def _rect(item: Rect) -> list[str]:
    attributes = (f'x="{_number(item.x)}" y="{_number(item.y)}" width="{_number(item.width)}" '
                  f'height="{_number(item.height)}" fill="{item.fill}"')
    if item.stroke:
        attributes += f' stroke="{item.stroke}" stroke-width="{_number(item.stroke_width)}"'
    if item.rounded:
        attributes += ' rx="8" ry="8"'
    if item.role:
        attributes += f' class="{item.role}"'
    if item.key:
        attributes += f" data-{'node' if item.role == 'node' else 'key'}={quoteattr(item.key)}"
    title = f"<title>{escape(item.tooltip)}</title>" if item.tooltip else ""
    lines = [f"<rect {attributes}>{title}</rect>" if title else f"<rect {attributes}/>"]
    if item.double and item.width > 8 and item.height > 8:
        lines.append(f'<rect x="{_number(item.x + 3)}" y="{_number(item.y + 3)}" '
                     f'width="{_number(item.width - 6)}" height="{_number(item.height - 6)}" '
                     f'fill="none" stroke="{item.stroke or "#000"}" stroke-width="0.8"/>')
    return lines


def _text(item: Text) -> str:
    size = SMALL_FONT_SIZE if item.small else FONT_SIZE
    weight = ' font-weight="bold"' if item.bold else ""
    if item.small:  # a halo keeps an edge's label readable where lines pass under it
        weight += ' stroke="#ffffff" stroke-width="3" paint-order="stroke"'
    anchor = "" if item.anchor == "start" else f' text-anchor="{item.anchor}"'
    return (f'<text x="{_number(item.x)}" y="{_number(item.y + BASELINE)}" '
            f'font-size="{_number(size)}" fill="{item.color}"{weight}{anchor}>'
            f"{escape(item.text)}</text>")


def _item(item: Item, marker: str) -> list[str]:
    if isinstance(item, Rect):
        return _rect(item)
    if isinstance(item, Text):
        return [_text(item)]
    if len(item.points) < 2:
        return []
    extra = f' marker-end="url(#{marker})"' if item.arrow else ""
    if item.dashed:
        extra += ' stroke-dasharray="6,4"'
    return [f'<path class="edge" d="{_path(item)}" fill="none" stroke="{item.color}" '
            f'stroke-width="{_number(item.width)}"{extra}/>']


def to_svg(drawing: Drawing, standalone: bool = True) -> str:
    """The drawing as an ``<svg>`` element (with the XML declaration when
    ``standalone``)."""
    marker = f"ge-arrow-{next(_ids)}"  # unique per picture: one page may hold several
    width, height = _number(drawing.width), _number(drawing.height)
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}">']
    if drawing.title:
        lines.append(f"<title>{escape(drawing.title)}</title>")
    lines += ["<defs>",
              f'<marker id="{marker}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
              'markerHeight="7" orient="auto-start-reverse">'
              '<path d="M0,0 L10,5 L0,10 z" fill="#555555"/></marker>',
              "</defs>",
              f'<rect class="background" x="0" y="0" width="{width}" height="{height}" '
              f'fill="{BACKGROUND}"/>']
    for item in drawing.items:
        lines += _item(item, marker)
    lines.append("</svg>")
    text = "\n".join(lines) + "\n"
    if standalone:
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + text
    return text


def write_svg(drawing: Drawing, output: Union[str, Path]) -> Path:
    """Write the drawing to ``output`` as an SVG file."""
    path = Path(output)
    path.write_text(to_svg(drawing), encoding="utf-8")
    return path
