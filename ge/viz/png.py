"""A drawing as a PNG image, with nothing but the standard library.

The drawing is rasterized onto an RGB canvas (a ``bytearray``): filled rectangles
and outlines, lines (Bresenham's, with a square pen) and filled triangles for the
arrowheads, text in the 5x8 bitmap font of ``font.py`` scaled by whole pixels. The
canvas is encoded as PNG by hand: the signature, an ``IHDR`` chunk (8-bit RGB), one
``IDAT`` chunk of zlib-compressed rows (filter type 0) and ``IEND``, each chunk with
its CRC-32.

Small graphs are drawn at twice the drawing's size; large ones are scaled down to
at most ``MAX_SIDE`` pixels a side and ``MAX_PIXELS`` in all. Text that no longer
fits where the drawing put it is shortened, and left out when under two letters
fit.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Union

from ge.viz import font
from ge.viz.drawing import BACKGROUND, Drawing, Line, Rect, Text, bezier_points
from ge.viz.geometry import Point
from ge.viz.scene import CHAR_WIDTH, LINE_HEIGHT

__all__ = ["Canvas", "png_bytes", "write_png", "choose_scale", "MAX_SIDE", "MAX_PIXELS",
           "MAX_SCALE", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_SIDE = 8000
MAX_PIXELS = 24_000_000
MAX_SCALE = 2.0
ARROW_LENGTH = 8.0
ARROW_HALF_WIDTH = 3.5

Color = bytes


def rgb(color: str) -> Color:
    """``#rrggbb`` (or ``#rgb``) as three bytes."""
    text = color.lstrip("#")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    return bytes.fromhex(text[:6])


class Canvas:
    """An RGB image in memory with the few drawing operations the pictures need."""

    def __init__(self, width: int, height: int, background: Color = b"\xff\xff\xff") -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(background * (width * height))

    def fill_rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill pixels ``x0 <= x < x1``, ``y0 <= y < y1`` (clipped to the canvas)."""
        x0, x1 = max(0, x0), min(self.width, x1)
        y0, y1 = max(0, y0), min(self.height, y1)
        if x0 >= x1 or y0 >= y1:
            return
        span = color * (x1 - x0)
        stride = self.width * 3
        for y in range(y0, y1):
            start = y * stride + x0 * 3
            self.pixels[start:start + len(span)] = span

    def outline(self, x0: int, y0: int, x1: int, y1: int, color: Color, thickness: int) -> None:
        """The border of a rectangle, ``thickness`` pixels wide, inside its bounds."""
        self.fill_rect(x0, y0, x1, y0 + thickness, color)
        self.fill_rect(x0, y1 - thickness, x1, y1, color)
        self.fill_rect(x0, y0, x0 + thickness, y1, color)
        self.fill_rect(x1 - thickness, y0, x1, y1, color)

    def line(self, start: Point, end: Point, color: Color, thickness: int,
             dash: int = 0) -> None:
        """A straight line with a square pen; every other ``dash`` pixels left out when
        ``dash`` is set."""
        x0, y0, x1, y1 = (int(round(v)) for v in (*start, *end))
        half = thickness // 2
        if x0 == x1 or y0 == y1:
            if not dash:
                self.fill_rect(min(x0, x1) - half, min(y0, y1) - half,
                               max(x0, x1) - half + thickness, max(y0, y1) - half + thickness,
                               color)
                return
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error = dx + dy
        count = 0
        while True:
            if not dash or (count // dash) % 2 == 0:
                self.fill_rect(x0 - half, y0 - half, x0 - half + thickness,
                               y0 - half + thickness, color)
            count += 1
            if x0 == x1 and y0 == y1:
                return
            doubled = 2 * error
            if doubled >= dy:
                error += dy
                x0 += sx
            if doubled <= dx:
                error += dx
                y0 += sy

    def triangle(self, corners: Sequence[Point], color: Color) -> None:
        """A filled triangle (scanlines between its edges)."""
        top = max(0, int(math.floor(min(p[1] for p in corners))))
        bottom = min(self.height - 1, int(math.ceil(max(p[1] for p in corners))))
        edges = list(zip(corners, list(corners[1:]) + [corners[0]]))
        for y in range(top, bottom + 1):
            centre = y + 0.5
            crossings = []
            for (ax, ay), (bx, by) in edges:
                if (ay <= centre < by) or (by <= centre < ay):
                    crossings.append(ax + (centre - ay) * (bx - ax) / (by - ay))
            if len(crossings) >= 2:
                self.fill_rect(int(round(min(crossings))), y, int(round(max(crossings))) + 1,
                               y + 1, color)

    def text(self, x: int, y: int, text: str, color: Color, scale: int, bold: bool) -> None:
        """``text`` in the bitmap font, its top-left corner at ``(x, y)``."""
        for index, char in enumerate(text):
            left = x + index * font.CELL_WIDTH * scale
            for row, column, length in font.glyph_runs(char):
                px, py = left + column * scale, y + row * scale
                self.fill_rect(px, py, px + length * scale + (1 if bold else 0), py + scale,
                               color)

    def encode(self) -> bytes:
        """The canvas as a PNG file's bytes."""
        stride = self.width * 3
        raw = b"".join(b"\x00" + bytes(self.pixels[y * stride:(y + 1) * stride])
                       for y in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6))
                + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def choose_scale(width: float, height: float) -> float:
    """Pixels per drawing unit: ``MAX_SCALE`` for small drawings, less for large ones."""
    width, height = max(width, 1.0), max(height, 1.0)
    return min(MAX_SCALE, MAX_SIDE / width, MAX_SIDE / height,
               math.sqrt(MAX_PIXELS / (width * height)))


class _Rasterizer:
    def __init__(self, drawing: Drawing, scale: float) -> None:
        self.scale = scale
        # whole pixels per font pixel: the glyph cell must fit a text cell of the drawing
        self.glyph = max(1, int(min(CHAR_WIDTH * scale / font.CELL_WIDTH,
                                    LINE_HEIGHT * scale / font.CELL_HEIGHT)))
        # text left-aligned at the right (the legend) may need more room than the drawing
        # gave it when the font cannot shrink as far as the drawing does
        width = max([drawing.width * scale] + [
            self.px(item.x) + font.text_width(self.fitted(item), self.glyph) + 4
            for item in drawing.items if isinstance(item, Text) and item.anchor == "start"])
        self.canvas = Canvas(min(MAX_SIDE, max(1, int(math.ceil(width)))),
                             min(MAX_SIDE, max(1, int(math.ceil(drawing.height * scale)))),
                             rgb(BACKGROUND))

    def px(self, value: float) -> int:
        return int(round(value * self.scale))

    def rect(self, item: Rect) -> None:
        x0, y0 = self.px(item.x), self.px(item.y)
        x1, y1 = self.px(item.x + item.width), self.px(item.y + item.height)
        self.canvas.fill_rect(x0, y0, x1, y1, rgb(item.fill))
        if item.stroke:
            thickness = max(1, int(round(item.stroke_width * self.scale)))
            self.canvas.outline(x0, y0, x1, y1, rgb(item.stroke), thickness)
            inset = max(2, self.px(3))
            if item.double and x1 - x0 > 3 * inset and y1 - y0 > 3 * inset:
                self.canvas.outline(x0 + inset, y0 + inset, x1 - inset, y1 - inset,
                                    rgb(item.stroke), 1)

    def line(self, item: Line) -> None:
        path = bezier_points(item.points) if item.spline else list(item.points)
        path = [(x * self.scale, y * self.scale) for x, y in path]
        path = [p for i, p in enumerate(path) if i == 0 or p != path[i - 1]]
        if len(path) < 2:
            return
        color = rgb(item.color)
        thickness = max(1, int(round(item.width * self.scale * 0.8)))
        if item.arrow:
            path = self._arrowhead(path, color)
        dash = max(2, self.px(5)) if item.dashed else 0
        for start, end in zip(path, path[1:]):
            self.canvas.line(start, end, color, thickness, dash)

    def _arrowhead(self, path: list[Point], color: Color) -> list[Point]:
        """Draw the arrowhead at the path's end; return the path ending at its base."""
        (bx, by), (tx, ty) = path[-2], path[-1]
        length = math.hypot(tx - bx, ty - by)
        size = ARROW_LENGTH * self.scale
        ux, uy = (tx - bx) / length, (ty - by) / length
        base = (tx - ux * min(size, length), ty - uy * min(size, length))
        half = ARROW_HALF_WIDTH * self.scale
        self.canvas.triangle([(tx, ty), (base[0] - uy * half, base[1] + ux * half),
                              (base[0] + uy * half, base[1] - ux * half)], color)
        return path[:-1] + [base]

    def fitted(self, item: Text) -> str:
        """The text shortened (ending in ``~``) to fit its room at this scale; empty when
        under two letters would."""
        if item.max_width == math.inf:
            return item.text
        room = (len(item.text) * CHAR_WIDTH if item.max_width is None
                else max(item.max_width, len(item.text) * CHAR_WIDTH)) * self.scale
        fits = int(room // (font.CELL_WIDTH * self.glyph))
        text = item.text if fits >= len(item.text) else item.text[:max(0, fits - 1)] + "~"
        return "" if len(text) < 2 and len(item.text) >= 2 else text

    def text(self, item: Text) -> None:
        text = self.fitted(item)
        if not text:
            return
        width = font.text_width(text, self.glyph)
        x = self.px(item.x) - (width // 2 if item.anchor == "middle" else 0)
        y = self.px(item.y) + (self.px(LINE_HEIGHT) - font.GLYPH_HEIGHT * self.glyph) // 2
        self.canvas.text(x, y, text, rgb(item.color), self.glyph, item.bold)


def png_bytes(drawing: Drawing, scale: float = 0.0) -> bytes:
    """The drawing as PNG bytes, at ``scale`` pixels per unit (0: :func:`choose_scale`)."""
    raster = _Rasterizer(drawing, scale or choose_scale(drawing.width, drawing.height))
    for item in drawing.items:
        if isinstance(item, Rect):
            raster.rect(item)
        elif isinstance(item, Line):
            raster.line(item)
        else:
            raster.text(item)
    return raster.canvas.encode()


def write_png(drawing: Drawing, output: Union[str, Path], scale: float = 0.0) -> Path:
    """Write the drawing to ``output`` as a PNG file."""
    path = Path(output)
    path.write_bytes(png_bytes(drawing, scale))
    return path
