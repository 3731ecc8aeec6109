"""Step 5 of the layered drawing: an x for every vertex, chains and long edges straight.

Brandes and Koepf's method ("Fast and Simple Horizontal Coordinate Assignment",
2001): each vertex is aligned with a median neighbour in the layer before, unless
that alignment would cross one already made or cross a long edge's inner segment
(between two dummies, which are kept straight first). Aligned vertices form
blocks that share one x: a chain of single nodes is one block, a straight line.
Blocks are then packed as far as their layers' gaps allow. This is done four times
(aligning upward or downward, packing to the left or to the right) and each vertex
takes the mean of its two middle candidates, which balances the drawing. A last
pass (pool-adjacent-violators, an isotonic regression per layer) moves vertices
the least distance that restores every gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ge.viz.layers import LayeredGraph

__all__ = ["assign_x", "NODE_GAP", "DUMMY_GAP"]

#: horizontal space between two boxes of one layer, and beside a dummy node
NODE_GAP = 24.0
DUMMY_GAP = 10.0


@dataclass
class _View:
    """The layered graph seen from one of the four directions: ``layers`` in the order
    aligned (top first), each left to right in packing order; ``before`` the
    neighbours in the layer aligned against."""

    layers: list[list[int]]
    before: list[list[int]]
    after: list[list[int]]
    position: list[int]


def _view(graph: LayeredGraph, upward: bool, leftward: bool) -> _View:
    layers = [list(reversed(layer)) if leftward else list(layer) for layer in graph.layers]
    if upward:
        layers.reverse()
    position = [0] * len(graph.layer_of)
    for layer in layers:
        for index, vertex in enumerate(layer):
            position[vertex] = index
    before, after = (graph.down, graph.up) if upward else (graph.up, graph.down)
    return _View(layers, before, after, position)


def _conflicts(graph: LayeredGraph, view: _View) -> set[tuple[int, int]]:
    """Type 1 conflicts: segments ``(upper, lower)`` crossing an inner segment (both ends
    dummies), which are never aligned."""
    marked: set[tuple[int, int]] = set()
    for upper_layer, lower_layer in zip(view.layers, view.layers[1:]):
        start, scanned = 0, 0
        for index, vertex in enumerate(lower_layer):
            inner = next((u for u in view.before[vertex]
                          if graph.is_dummy(vertex) and graph.is_dummy(u)), None)
            if index != len(lower_layer) - 1 and inner is None:
                continue
            end = view.position[inner] if inner is not None else len(upper_layer) - 1
            while scanned <= index:
                below = lower_layer[scanned]
                for upper in view.before[below]:
                    if not start <= view.position[upper] <= end:
                        marked.add((upper, below))
                scanned += 1
            start = end
    return marked


def _align(view: _View, marked: set[tuple[int, int]], count: int) -> list[int]:
    """Each vertex's block root: vertices aligned with a median neighbour before them."""
    root = list(range(count))
    aligned = [False] * count  # has a vertex below it joined its block
    for layer in view.layers:
        last = -1
        for vertex in layer:
            neighbours = sorted(view.before[vertex], key=lambda v: view.position[v])
            if not neighbours:
                continue
            low, high = (len(neighbours) - 1) // 2, len(neighbours) // 2
            for median in sorted({low, high}):
                upper = neighbours[median]
                if (not aligned[upper] and (upper, vertex) not in marked
                        and view.position[upper] > last):
                    aligned[upper] = True
                    root[vertex] = root[upper]
                    last = view.position[upper]
                    break
    return root


def _separation(graph: LayeredGraph, left: int, right: int, widths: list[float]) -> float:
    space = DUMMY_GAP if graph.is_dummy(left) or graph.is_dummy(right) else NODE_GAP
    return (widths[left] + widths[right]) / 2 + space


def _pack(graph: LayeredGraph, view: _View, root: list[int], widths: list[float]
          ) -> list[float]:
    """Blocks packed to the left: each as far left as its left neighbours in every layer
    allow (longest paths in the graph of those constraints, which has no cycle because
    alignments never cross)."""
    count = len(root)
    constraints: dict[int, list[tuple[int, float]]] = {}
    pending = [0] * count
    for layer in view.layers:
        for left, right in zip(layer, layer[1:]):
            constraints.setdefault(root[left], []).append(
                (root[right], _separation(graph, left, right, widths)))
            pending[root[right]] += 1
    x = [0.0] * count
    ready = [v for v in range(count) if root[v] == v and pending[v] == 0]
    while ready:
        block = ready.pop()
        for other, gap in constraints.get(block, ()):
            x[other] = max(x[other], x[block] + gap)
            pending[other] -= 1
            if pending[other] == 0:
                ready.append(other)
    return [x[root[v]] for v in range(count)]


def _isotonic(targets: list[float]) -> list[float]:
    """The non-decreasing sequence nearest ``targets`` (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for target in targets:
        blocks.append([target, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total, size = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += size
    result: list[float] = []
    for total, size in blocks:
        result.extend([total / size] * int(size))
    return result


def _keep_gaps(graph: LayeredGraph, x: list[float], widths: list[float]) -> None:
    """Move the vertices of each layer the least (in squares) that restores its gaps:
    with c_i the sum of the gaps left of vertex i, x_i - c_i must not decrease."""
    for layer in graph.layers:
        offsets, total = [], 0.0
        for index, vertex in enumerate(layer):
            if index:
                total += _separation(graph, layer[index - 1], vertex, widths)
            offsets.append(total)
        solved = _isotonic([x[v] - c for v, c in zip(layer, offsets)])
        for vertex, value, offset in zip(layer, solved, offsets):
            x[vertex] = value + offset


def assign_x(graph: LayeredGraph, widths: list[float]) -> list[float]:
    """An x centre for every vertex (see the module's docstring); ``widths`` per vertex."""
    count = len(graph.layer_of)
    candidates: list[list[float]] = []
    for upward in (False, True):
        for leftward in (False, True):
            view = _view(graph, upward, leftward)
            root = _align(view, _conflicts(graph, view), count)
            x = _pack(graph, view, root, widths)
            candidates.append([-value for value in x] if leftward else x)
    spans = [(min((x[v] - widths[v] / 2 for v in range(count)), default=0.0),
              max((x[v] + widths[v] / 2 for v in range(count)), default=0.0))
             for x in candidates]
    narrowest = min(range(4), key=lambda k: spans[k][1] - spans[k][0])
    for k, x in enumerate(candidates):  # packed-left ones share a left side, and so on
        leftward = k % 2 == 1
        shift = (spans[narrowest][1] - spans[k][1]) if leftward else \
            (spans[narrowest][0] - spans[k][0])
        candidates[k] = [value + shift for value in x]
    result = []
    for v in range(count):
        values = sorted(x[v] for x in candidates)
        result.append((values[1] + values[2]) / 2)
    _keep_gaps(graph, result, widths)
    return result
