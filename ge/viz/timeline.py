"""The memory plan as a picture: each arena buffer a rectangle, offset against time.

x is the step of the schedule (a buffer spans the steps from the one that writes it
to its last reader, its views and in-place successors included), y the byte offset
in the arena; a dashed line marks the lower bound (the most bytes live at one step).
A buffer that other values share (a view, an output written in place) is drawn once,
as the planner placed it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from ge.memory import MemoryPlan
from ge.viz.drawing import INK, Drawing, Item, Line, Rect, Text
from ge.viz.scene import CHAR_WIDTH, LINE_HEIGHT, ColorMap
from ge.viz.svg import to_svg

__all__ = ["StepLike", "TimelineBuffer", "timeline_buffers", "timeline_drawing", "timeline_svg",
           "format_bytes"]

PLOT_HEIGHT = 360.0
AXIS_LEFT = 78.0
AXIS_BOTTOM = 44.0
TOP = 20.0
RIGHT = 150.0
MIN_PLOT_WIDTH = 480.0
MAX_PLOT_WIDTH = 1400.0
#: op types listed in the legend
LEGEND_ROWS = 20


class StepLike(Protocol):
    """What the timeline reads of an executable's step (``ge.compiler.Step``)."""

    @property
    def node(self) -> str: ...

    @property
    def op_type(self) -> str: ...

    @property
    def inputs(self) -> tuple[int, ...]: ...

    @property
    def outputs(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class TimelineBuffer:
    """One arena buffer: where it lies (``offset``, ``size`` bytes) and when it is live
    (steps ``first`` to ``last``), the value that owns it and those sharing it."""

    slot: int
    value: str
    op_type: str
    shape: tuple[int, ...]
    dtype: str
    offset: int
    size: int
    first: int
    last: int
    sharing: tuple[str, ...] = ()


def _value_names(steps: Sequence[StepLike]) -> dict[int, tuple[str, str, int]]:
    names = {}
    for index, step in enumerate(steps):
        for number, slot in enumerate(step.outputs):
            name = step.node if number == 0 else f"{step.node}:{number}"
            names[slot] = (name, step.op_type, index)
    return names


def timeline_buffers(steps: Sequence[StepLike], plan: MemoryPlan) -> list[TimelineBuffer]:
    """The buffers of ``plan`` (one per slot owning arena storage), with the steps of
    ``steps`` (the schedule the plan was made for) they are live over."""
    produced = _value_names(steps)
    last_read: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.inputs:
            if slot >= 0:
                last_read[slot] = index
    members: dict[int, list[int]] = {}
    for slot in plan.offsets:
        members.setdefault(plan.owner(slot), []).append(slot)
    buffers = []
    for owner, shared in sorted(members.items()):
        if owner not in produced or owner not in plan.offsets:
            continue
        name, op_type, first = produced[owner]
        last = max(last_read.get(s, produced[s][2] if s in produced else first) for s in shared)
        shape, dtype = plan.descs[owner]
        size = int(dtype.itemsize)
        for dim in shape:
            size *= int(dim)
        sharing = tuple(produced[s][0] for s in sorted(shared) if s != owner and s in produced)
        buffers.append(TimelineBuffer(owner, name, op_type, tuple(int(d) for d in shape),
                                      str(dtype), plan.offsets[owner], size, first,
                                      max(first, last), sharing))
    return buffers


def format_bytes(count: float) -> str:
    """``1.5 MiB``-style text."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} B"


def _nice(raw: float, integer: bool) -> float:
    """The least of 1, 2, 5 times a power of ten that is at least ``raw``."""
    if raw <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    return max(step, 1.0) if integer else step


def _ticks(top: float, count: int, integer: bool = False, unit: float = 1.0) -> list[float]:
    """Round tick values from 0 to ``top``, about ``count`` of them, in steps that are round
    in ``unit`` (1024 for KiB, ...)."""
    if top <= 0:
        return [0.0]
    step = _nice(top / unit / count, integer) * unit
    return [index * step for index in range(int(top / step * (1 + 1e-9)) + 1)]


def _byte_unit(top: float) -> float:
    return next((size for size in (1 << 30, 1 << 20, 1 << 10) if top >= size), 1)


def _axes(steps: int, arena: float, x_of: float, y_of: float, plot_width: float
          ) -> list[Item]:
    bottom = TOP + PLOT_HEIGHT
    items: list[Item] = [Line(((AXIS_LEFT, bottom), (AXIS_LEFT + plot_width, bottom)), INK, 1.0,
                              arrow=False),
                         Line(((AXIS_LEFT, TOP), (AXIS_LEFT, bottom)), INK, 1.0, arrow=False)]
    for tick in _ticks(steps - 1, 10, integer=True):
        x = AXIS_LEFT + tick * x_of
        items.append(Line(((x, bottom), (x, bottom + 4)), INK, 1.0, arrow=False))
        items.append(Text(x, bottom + 5, str(int(tick)), small=True))
    for tick in _ticks(arena, 5, unit=_byte_unit(arena)):
        y = bottom - tick * y_of
        items.append(Line(((AXIS_LEFT - 4, y), (AXIS_LEFT, y)), INK, 1.0, arrow=False))
        label = format_bytes(tick)
        items.append(Text(AXIS_LEFT - 8 - len(label) * CHAR_WIDTH, y - LINE_HEIGHT / 2, label,
                          small=True, anchor="start"))
    items.append(Text(AXIS_LEFT + plot_width / 2, bottom + 22, "step of the schedule"))
    items.append(Text(4, 0, "arena offset", small=True, anchor="start"))
    return items


#: the fill behind the steps of a run that goes slice by slice over the batch
SLICED_FILL = "#e3eefa"


def timeline_drawing(buffers: Sequence[TimelineBuffer], steps: int, arena_bytes: int,
                     lower_bound_bytes: Optional[int] = None,
                     colors: Optional[ColorMap] = None,
                     sliced: Sequence[tuple[int, int, str]] = ()) -> Drawing:
    """The timeline as a drawing: one rectangle (role ``buffer``) per buffer, coloured by
    the op that writes it, with a tooltip naming the value, its shape, size and steps.
    ``sliced``: (first step, last step, description) of each run of steps that goes
    slice by slice over the batch, drawn as a band behind its buffers (role ``sliced``)."""
    colors = colors or ColorMap()
    steps = max(steps, 1)
    arena = float(max(arena_bytes, max((b.offset + b.size for b in buffers), default=0), 1))
    plot_width = min(MAX_PLOT_WIDTH, max(MIN_PLOT_WIDTH, steps * 10.0))
    x_of = plot_width / steps
    y_of = PLOT_HEIGHT / arena
    items: list[Item] = []
    for first, last, what in sliced:
        items.append(Rect(AXIS_LEFT + first * x_of, TOP, (last - first + 1) * x_of,
                          PLOT_HEIGHT, SLICED_FILL, None, role="sliced", key=f"{first}-{last}",
                          tooltip=what))
        items.append(Text(AXIS_LEFT + first * x_of + 2, TOP + 2, "sliced", "#2c5d8f",
                          small=True, anchor="start"))
    for buffer in buffers:
        shared = f"; shared with {', '.join(buffer.sharing)}" if buffer.sharing else ""
        tip = (f"{buffer.value} ({buffer.op_type}) {buffer.dtype}{list(buffer.shape)}: "
               f"{format_bytes(buffer.size)} at offset {buffer.offset}, steps {buffer.first}"
               f"-{buffer.last}{shared}")
        height = max(0.8, buffer.size * y_of)
        items.append(Rect(AXIS_LEFT + buffer.first * x_of,
                          TOP + PLOT_HEIGHT - buffer.offset * y_of - height,
                          max(1.0, (buffer.last - buffer.first + 1) * x_of), height,
                          colors(buffer.op_type), "#333333", 0.4, role="buffer",
                          key=str(buffer.slot), tooltip=tip))
    if lower_bound_bytes:
        y = TOP + PLOT_HEIGHT - lower_bound_bytes * y_of
        items.append(Line(((AXIS_LEFT, y), (AXIS_LEFT + plot_width, y)), "#c0392b", 1.2,
                          arrow=False, dashed=True))
        items.append(Text(AXIS_LEFT + plot_width + 4, y - LINE_HEIGHT / 2,
                          f"lower bound {format_bytes(lower_bound_bytes)}", "#c0392b",
                          small=True, anchor="start"))
    items += _axes(steps, arena, x_of, y_of, plot_width)
    legend_top = TOP + 2 * LINE_HEIGHT
    for row, op_type in enumerate(dict.fromkeys(b.op_type for b in buffers)):
        if row == LEGEND_ROWS:
            items.append(Text(AXIS_LEFT + plot_width + 12, legend_top + row * 16, "...",
                              small=True, anchor="start"))
            break
        y = legend_top + row * 16
        items.append(Rect(AXIS_LEFT + plot_width + 12, y + 2, 10, 10, colors(op_type), INK,
                          role="legend", key=op_type))
        items.append(Text(AXIS_LEFT + plot_width + 26, y, op_type, small=True, anchor="start"))
    width = AXIS_LEFT + plot_width + RIGHT
    return Drawing(width, TOP + PLOT_HEIGHT + AXIS_BOTTOM, items, "memory plan")


def timeline_svg(buffers: Sequence[TimelineBuffer], steps: int, arena_bytes: int,
                 lower_bound_bytes: Optional[int] = None,
                 colors: Optional[ColorMap] = None,
                 sliced: Sequence[tuple[int, int, str]] = ()) -> str:
    """The timeline as an ``<svg>`` element, one ``<rect class="buffer">`` per buffer
    (and one ``<rect class="sliced">`` per run of steps sliced over the batch)."""
    return to_svg(timeline_drawing(buffers, steps, arena_bytes, lower_bound_bytes, colors,
                                   sliced), standalone=False)
