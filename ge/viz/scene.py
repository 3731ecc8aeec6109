"""What a picture of a graph shows: one labelled, coloured box per node and the edges.

A :class:`Scene` is the picture before any coordinates: each node's lines of text
(op type, what a fused op contains, name, and shapes where the edges do not say
them), its fill colour from a grouping (op type, engine, stream, partition) and its
kind; each edge's label (the value's shape); and the legend. ``drawing.py`` places
it with a layout. Constants are left out by default (they would double the boxes
of a CNN): a weight is part of the op that reads it.
"""

from __future__ import annotations

import colorsys
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from ge.errors import GEError
from ge.ir import Graph, Node, Value

__all__ = ["SceneNode", "SceneEdge", "Scene", "ColorMap", "graph_scene", "fused_contents",
           "shape_text", "node_size", "COLOR_BY", "UNGROUPED", "UNGROUPED_COLOR",
           "CHAR_WIDTH", "LINE_HEIGHT"]

#: the groupings a picture can colour its nodes by
COLOR_BY = ("op", "engine", "stream", "partition")
#: the group of nodes that are in none (a partition that does not hold them)
UNGROUPED = "none"
UNGROUPED_COLOR = "#d4d4d4"

#: text metrics of a label line in drawing units (12-unit monospace text)
CHAR_WIDTH = 7.4
LINE_HEIGHT = 15.0
BOX_PADDING_X = 10.0
BOX_PADDING_Y = 6.0
MIN_BOX_WIDTH = 64.0
#: longest name shown in a box before it is shortened in the middle
MAX_NAME = 30
#: a fused op's contents wrap at this many characters
MAX_CONTENTS_LINE = 34


@dataclass(frozen=True)
class SceneNode:
    """A node's box: its text lines (the first is the op type, drawn bold), colour, kind
    (``op``, ``input``, ``output`` or ``fused``), group and a tooltip."""

    id: str
    lines: tuple[str, ...]
    fill: str
    kind: str
    group: str
    tooltip: str = ""


@dataclass(frozen=True)
class SceneEdge:
    """An edge from one box to another, labelled with the value's shape."""

    source: str
    target: str
    label: str = ""


@dataclass
class Scene:
    """Everything a picture shows, before it is laid out."""

    nodes: list[SceneNode]
    edges: list[SceneEdge]
    legend: list[tuple[str, str, int]]  # (group, colour, how many nodes)
    title: str = ""
    legend_title: str = ""
    hidden: int = 0  # constants left out
    sizes: dict[str, tuple[float, float]] = field(default_factory=dict)


class ColorMap:
    """A colour per group label, the same for a label every time it is asked: hues a
    golden angle apart, light enough for black text. Share one between pictures to
    give a group the same colour in each."""

    def __init__(self, fixed: Optional[Mapping[str, str]] = None) -> None:
        self._colors: dict[str, str] = {UNGROUPED: UNGROUPED_COLOR, **(fixed or {})}
        self._next = 0

    def __call__(self, label: str) -> str:
        color = self._colors.get(label)
        if color is None:
            color = _pastel(self._next)
            self._next += 1
            self._colors[label] = color
        return color

    def fix(self, label: str, color: str) -> None:
        """Give ``label`` this colour."""
        self._colors[label] = color

    def assign(self, labels: Iterable[str]) -> None:
        """Give colours to ``labels`` in this order (those not coloured yet)."""
        for label in labels:
            self(label)


def _pastel(index: int) -> str:
    hue = (index * 0.381966 + 0.07) % 1.0  # the golden angle, as a fraction of a turn
    lightness = (0.80, 0.72, 0.86)[index // 9 % 3]
    red, green, blue = colorsys.hls_to_rgb(hue, lightness, 0.62)
    return "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in (red, green, blue)))


def natural_key(label: str) -> list[object]:
    """Sort key putting ``partition 2`` before ``partition 10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label)]


def shape_text(value: Value) -> str:
    """An edge label: ``1x64x56x56`` (``?`` for an unknown size), with the dtype unless
    it is float32."""
    dims = "x".join("?" if d == -1 else str(d) for d in value.shape) or "scalar"
    dtype = value.dtype.short_name
    return dims if dtype == "float32" else f"{dtype} {dims}"


def fused_contents(node: Node) -> list[str]:
    """The ops a fused node stands for, in the order it applies them; empty for an op
    that is not a fusion. Read from the node's op type, present inputs and attributes
    (FusedConv2D's activation, MatMulBiasAdd's, FusedElementwise's steps)."""
    inputs = node.inputs
    if node.op_type == "FusedConv2D":
        parts = ["Conv2D"]
        if len(inputs) > 2 and inputs[2] is not None:
            parts.append("BiasAdd")
        if len(inputs) > 3 and inputs[3] is not None:
            parts.append("Add")
        if node.attrs.get("activation"):
            parts.append(str(node.attrs["activation"]))
        return parts
    if node.op_type == "ConvBNReLU":
        return ["Conv2D", "FusedBatchNorm", "Relu"]
    if node.op_type == "MatMulBiasAdd":
        activation = str(node.attrs.get("activation") or "none")
        names = {"relu": "Relu", "gelu": "Gelu", "gelu_tanh": "Gelu(tanh)"}
        return ["MatMul", "BiasAdd"] + ([names.get(activation, activation)]
                                        if activation != "none" else [])
    if node.op_type == "FusedElementwise":
        return [str(step).split()[0] for step in node.attrs.get("steps", ()) if str(step)]
    return []


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = limit - 2
    return text[:(keep + 1) // 2] + ".." + text[len(text) - keep // 2:]


def _wrap(parts: Sequence[str], limit: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for part in parts:
        piece = part if not current else "+" + part
        if current and len(current) + len(piece) > limit:
            lines.append(current + "+")
            current = part
        else:
            current += piece
    if current:
        lines.append(current)
    return [_shorten(line, limit + 1) for line in lines]


def _node_lines(node: Node, output_values: Sequence[Value]) -> tuple[tuple[str, ...], str]:
    lines = [node.op_type]
    contents = fused_contents(node)
    kind = "op"
    if contents:
        kind = "fused"
        lines += _wrap(contents, MAX_CONTENTS_LINE)
    if node.name != node.op_type:
        lines.append(_shorten(node.name, MAX_NAME))
    if node.op_type == "Data":
        kind = "input"
        lines.append(shape_text(node.outputs[0]))
    elif output_values:
        kind = "output" if kind == "op" else kind
        lines += [f"out {shape_text(v)}" for v in output_values[:2]]
    return tuple(lines), kind


def node_size(lines: Sequence[str]) -> tuple[float, float]:
    """The box a node with these text lines needs, in drawing units."""
    longest = max((len(line) for line in lines), default=0)
    return (max(MIN_BOX_WIDTH, longest * CHAR_WIDTH + 2 * BOX_PADDING_X),
            len(lines) * LINE_HEIGHT + 2 * BOX_PADDING_Y)


def _tooltip(node: Node) -> str:
    shapes = ", ".join(shape_text(v) for v in node.outputs)
    contents = fused_contents(node)
    fused = f" = {' + '.join(contents)}" if contents else ""
    return f"{node.name} ({node.op_type}{fused}) -> {shapes}"


def graph_scene(graph: Graph, *, color_by: str = "op",
                groups: Optional[Mapping[str, str]] = None, title: str = "",
                constants: bool = False, colors: Optional[ColorMap] = None,
                ungrouped: str = UNGROUPED) -> Scene:
    """The scene of ``graph``: nodes coloured by op type, or by ``groups`` (node name ->
    group label: its engine, stream or partition; nodes it does not name are grey, in
    the group ``ungrouped``). ``constants`` draws the Const nodes too."""
    if color_by not in COLOR_BY:
        raise GEError(f"color_by {color_by!r}: expected one of {', '.join(COLOR_BY)}")
    if color_by != "op" and groups is None:
        raise GEError(f"colouring by {color_by} needs the groups (node name -> "
                      f"{color_by}); for engines and streams pass the executable")
    colors = colors or ColorMap()
    colors.fix(ungrouped, UNGROUPED_COLOR)
    nodes = [n for n in graph.nodes if constants or n.op_type != "Const"]
    shown = {id(n) for n in nodes}
    outputs: dict[int, list[Value]] = {}
    for value in graph.outputs:
        outputs.setdefault(id(value.producer), []).append(value)

    def group_of(node: Node) -> str:
        if groups is not None:
            return str(groups.get(node.name, ungrouped))
        return node.op_type

    counts = Counter(group_of(n) for n in nodes)
    labels = sorted(counts, key=lambda g: (g == ungrouped, natural_key(g)))
    colors.assign(labels)
    scene_nodes = []
    sizes = {}
    for node in nodes:
        lines, kind = _node_lines(node, outputs.get(id(node), []))
        group = group_of(node)
        scene_nodes.append(SceneNode(node.name, lines, colors(group), kind, group,
                                     _tooltip(node)))
        sizes[node.name] = node_size(lines)
    edges = []
    for node in nodes:
        for read in node.inputs:
            if read is not None and id(read.producer) in shown:
                edges.append(SceneEdge(read.producer.name, node.name, shape_text(read)))
    legend = [(label, colors(label), counts[label]) for label in labels]
    legend_title = {"op": "op type", "engine": "engine", "stream": "stream",
                    "partition": "partition"}[color_by]
    return Scene(scene_nodes, edges, legend, title, legend_title,
                 len(graph) - len(nodes), sizes)
