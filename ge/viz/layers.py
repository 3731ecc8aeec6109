"""Steps 1-4 of the layered drawing: cycles, layers, dummy nodes, order within layers.

1. **Cycles** are broken by reversing the back edges of a depth-first search (a
   DAG has none; the edge is still drawn from its source to its target).
2. **Layers** (:func:`assign_layers`): longest path from the sources, then every
   node with at least as many outgoing as incoming edges is moved down as far as its
   successors allow (so an input, and the chain it starts, sits just above its first
   consumer), and every node with more incoming edges back up. No move lengthens the
   total edge length, which is what ``dot``'s network simplex minimises.
3. **Dummy nodes** split every edge longer than one layer, one per layer crossed
   (:func:`layered_graph`), so that every edge joins adjacent layers.
4. **Order within layers** (:func:`reduce_crossings`): depth-first order first, then
   sweeps down and up that sort each layer by the weighted median of its neighbours'
   positions, each followed by swaps of adjacent nodes that remove crossings. The
   best order seen is kept; crossings are counted as inversions with a Fenwick tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ge.errors import GEError

__all__ = ["LayeredGraph", "assign_layers", "layered_graph", "count_crossings",
           "reduce_crossings", "MAX_SWEEPS"]

#: most sweeps of the crossing reduction, and how many without progress end it
MAX_SWEEPS = 24
PATIENCE = 4


@dataclass
class LayeredGraph:
    """A graph whose edges all join adjacent layers (long ones split by dummy nodes).

    Vertices ``0 .. real_count - 1`` are the given nodes, the rest are dummies.
    ``layers[r]`` lists layer r's vertices in their drawing order; ``chains[e]`` is the
    path of unique edge e from its upper end to its lower end."""

    layer_of: list[int]
    layers: list[list[int]]
    up: list[list[int]]
    down: list[list[int]]
    real_count: int
    edges: list[tuple[int, int]]  # unique edges, as given (self-loops dropped)
    chains: list[list[int]]
    reversed: list[bool]  # per unique edge: drawn against a cycle

    @property
    def dummy_count(self) -> int:
        """How many dummy vertices split the long edges."""
        return len(self.layer_of) - self.real_count

    def is_dummy(self, vertex: int) -> bool:
        """True for a vertex added on a long edge."""
        return vertex >= self.real_count

    def positions(self) -> list[int]:
        """Each vertex's index within its layer."""
        position = [0] * len(self.layer_of)
        for layer in self.layers:
            for index, vertex in enumerate(layer):
                position[vertex] = index
        return position


def _acyclic(count: int, edges: Sequence[tuple[int, int]]) -> list[bool]:
    """Per edge, whether to reverse it so that none closes a cycle (depth-first search
    from every node in order; an edge to a node on the stack is a back edge)."""
    successors: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for index, (source, target) in enumerate(edges):
        successors[source].append((target, index))
    state = [0] * count  # 0 unseen, 1 on the stack, 2 done
    flip = [False] * len(edges)
    for root in range(count):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, next_edge = stack[-1]
            if next_edge == len(successors[node]):
                state[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, next_edge + 1)
            target, index = successors[node][next_edge]
            if state[target] == 1:
                flip[index] = True
            elif state[target] == 0:
                state[target] = 1
                stack.append((target, 0))
    return flip


def _topological(count: int, successors: list[list[int]], predecessors: list[list[int]]
                 ) -> list[int]:
    pending = [len(p) for p in predecessors]
    ready = [v for v in range(count) if pending[v] == 0]
    order: list[int] = []
    while ready:
        vertex = ready.pop()
        order.append(vertex)
        for target in successors[vertex]:
            pending[target] -= 1
            if pending[target] == 0:
                ready.append(target)
    return order


def assign_layers(count: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """A layer per node of a DAG (every edge goes down at least one layer): longest path
    from the sources, then nodes moved to shorten the total edge length."""
    successors: list[list[int]] = [[] for _ in range(count)]
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for source, target in edges:
        successors[source].append(target)
        predecessors[target].append(source)
    order = _topological(count, successors, predecessors)
    if len(order) != count:
        raise GEError("assign_layers needs a graph without cycles")
    layer = [0] * count
    for vertex in order:
        for source in predecessors[vertex]:
            layer[vertex] = max(layer[vertex], layer[source] + 1)
    for _ in range(8):  # the sum of edge lengths falls at every move: this ends
        moved = False
        for vertex in reversed(order):
            ins, outs = len(predecessors[vertex]), len(successors[vertex])
            if outs >= ins and outs:  # lower is shorter (or as long: a chain moves down whole)
                lowest = min(layer[t] for t in successors[vertex]) - 1
                if lowest > layer[vertex]:
                    layer[vertex], moved = lowest, True
        for vertex in order:
            ins, outs = len(predecessors[vertex]), len(successors[vertex])
            if ins > outs:  # higher is shorter
                highest = max(layer[s] for s in predecessors[vertex]) + 1
                if highest < layer[vertex]:
                    layer[vertex], moved = highest, True
        if not moved:
            break
    low = min(layer, default=0)
    return [value - low for value in layer]


def layered_graph(count: int, edges: Sequence[tuple[int, int]]) -> LayeredGraph:
    """Nodes ``0 .. count - 1`` and ``edges`` in layers, long edges split by dummies, each
    layer in depth-first order."""
    unique: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for edge in edges:
        if edge[0] != edge[1] and edge not in seen:
            seen.add(edge)
            unique.append(edge)
    flip = _acyclic(count, unique)
    directed = [(t, s) if f else (s, t) for (s, t), f in zip(unique, flip)]
    layer_of = assign_layers(count, directed)
    up: list[list[int]] = [[] for _ in range(count)]
    down: list[list[int]] = [[] for _ in range(count)]
    chains = []
    for source, target in directed:
        chain = [source]
        for layer in range(layer_of[source] + 1, layer_of[target]):
            layer_of.append(layer)
            up.append([])
            down.append([])
            chain.append(len(layer_of) - 1)
        chain.append(target)
        for upper, lower in zip(chain, chain[1:]):
            down[upper].append(lower)
            up[lower].append(upper)
        chains.append(chain)
    graph = LayeredGraph(layer_of, [], up, down, count, unique, chains, flip)
    graph.layers = _depth_first_order(graph)
    return graph


def _depth_first_order(graph: LayeredGraph) -> list[list[int]]:
    """Layers filled in the order a depth-first search from the top layer's nodes (then
    from any node not reached) first meets each vertex."""
    layers: list[list[int]] = [[] for _ in range(max(graph.layer_of, default=-1) + 1)]
    seen = [False] * len(graph.layer_of)
    roots = sorted(range(len(graph.layer_of)), key=lambda v: (graph.layer_of[v], v))
    for root in roots:
        if seen[root]:
            continue
        seen[root] = True
        stack = [root]
        while stack:
            vertex = stack.pop()
            layers[graph.layer_of[vertex]].append(vertex)
            for target in reversed(graph.down[vertex]):
                if not seen[target]:
                    seen[target] = True
                    stack.append(target)
    return layers


# -- crossings ---------------------------------------------------------------------------

def _crossings_between(upper: list[int], down: list[list[int]], position: list[int],
                       lower_size: int) -> int:
    """Crossings of the edges from layer ``upper`` to the next: inversions of the lower
    ends when the edges are sorted by their upper ends (a Fenwick tree counts them)."""
    ends = []
    for vertex in upper:
        ends.extend(sorted(position[t] for t in down[vertex]))
    tree = [0] * (lower_size + 1)
    crossings = 0
    for seen, end in enumerate(ends):
        index, below = end + 1, 0
        while index > 0:  # how many earlier ends are at or left of this one
            below += tree[index]
            index -= index & -index
        crossings += seen - below
        index = end + 1
        while index <= lower_size:
            tree[index] += 1
            index += index & -index
    return crossings


def count_crossings(graph: LayeredGraph) -> int:
    """Edge crossings of the layered graph in its current order."""
    position = graph.positions()
    return sum(_crossings_between(graph.layers[r], graph.down, position,
                                  len(graph.layers[r + 1]))
               for r in range(len(graph.layers) - 1))


def _median(values: list[int]) -> float:
    """The weighted median of sorted positions (Gansner et al.): -1 when there are none."""
    count = len(values)
    if count == 0:
        return -1.0
    middle = count // 2
    if count % 2:
        return float(values[middle])
    if count == 2:
        return (values[0] + values[1]) / 2
    left, right = values[middle - 1] - values[0], values[-1] - values[middle]
    if left + right == 0:
        return (values[middle - 1] + values[middle]) / 2
    return (values[middle - 1] * right + values[middle] * left) / (left + right)


def _sort_layer(layer: list[int], neighbours: list[list[int]], position: list[int],
                flip_ties: bool) -> list[int]:
    """The layer sorted by its vertices' medians; those without neighbours keep their
    places."""
    keyed = []
    fixed = []
    for index, vertex in enumerate(layer):
        median = _median(sorted(position[n] for n in neighbours[vertex]))
        if median < 0:
            fixed.append(index)
        else:
            keyed.append((median, -index if flip_ties else index, vertex))
    keyed.sort()
    result: list[int] = []
    movable = iter(keyed)
    fixed_set = set(fixed)
    for index, vertex in enumerate(layer):
        result.append(vertex if index in fixed_set else next(movable)[2])
    return result


def _pair_crossings(first: int, second: int, neighbours: list[list[int]],
                    position: list[int]) -> int:
    """Crossings between the edges of ``first`` and ``second`` when first is left."""
    return sum(1 for a in neighbours[first] for b in neighbours[second]
               if position[a] > position[b])


def _transpose(graph: LayeredGraph, position: list[int]) -> None:
    """Swap adjacent vertices of a layer while that removes crossings."""
    for _ in range(4):
        improved = False
        for layer in graph.layers:
            for index in range(len(layer) - 1):
                first, second = layer[index], layer[index + 1]
                now = (_pair_crossings(first, second, graph.up, position)
                       + _pair_crossings(first, second, graph.down, position))
                if now == 0:
                    continue
                swapped = (_pair_crossings(second, first, graph.up, position)
                           + _pair_crossings(second, first, graph.down, position))
                if swapped < now:
                    layer[index], layer[index + 1] = second, first
                    position[first], position[second] = index + 1, index
                    improved = True
        if not improved:
            return


def reduce_crossings(graph: LayeredGraph, max_sweeps: int = MAX_SWEEPS) -> int:
    """Reorder the layers in place to have fewer crossings; return how many remain."""
    best = count_crossings(graph)
    best_layers = [list(layer) for layer in graph.layers]
    stale = 0
    for sweep in range(max_sweeps):
        if best == 0:
            break
        position = graph.positions()
        downward = sweep % 2 == 0
        indexes = range(1, len(graph.layers)) if downward else \
            range(len(graph.layers) - 2, -1, -1)
        for r in indexes:
            layer = _sort_layer(graph.layers[r], graph.up if downward else graph.down,
                                position, flip_ties=sweep % 4 >= 2)
            graph.layers[r] = layer
            for index, vertex in enumerate(layer):
                position[vertex] = index
        _transpose(graph, position)
        crossings = count_crossings(graph)
        if crossings < best:
            best, best_layers, stale = crossings, [list(layer) for layer in graph.layers], 0
        else:
            stale += 1
            if stale >= PATIENCE:
                break
    graph.layers = best_layers
    return best
