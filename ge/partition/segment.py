"""Splitting a sequence of steps into contiguous segments, and orders to split.

``min_max_split`` cuts a sequence of item costs into a given number of non-empty
contiguous segments so that the most expensive segment is as cheap as possible
(the bottleneck of a pipeline), exactly: a binary search on the bottleneck, each
probe checked greedily (the fewest segments whose totals stay under the probe),
then the bottleneck found is the largest segment of the greedy split at the
search's upper end. Among the splits with that bottleneck it then picks, by dynamic
programming with a sliding-window minimum (O(items x segments)), the one whose cuts
carry the fewest bytes.

Where the cuts fall depends on the order of the steps: two orders that compute the
same values keep different tensors alive across a cut. ``candidate_orders`` gives
the graph's own topological order and the memory-aware one (``ge.memory``: the
order that keeps the fewest bytes alive, so the fewest bytes cross a cut), and
``cut_bytes`` the bytes that cross each cut of an order: every value made before
it and read after it, graph inputs read after it, and graph outputs made before it
(they are carried to the end).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ge.ir import Graph, Node
from ge.memory import StepUse, memory_aware_order
from ge.partition.estimate import is_step, value_bytes

__all__ = ["min_max_split", "candidate_orders", "cut_bytes", "segment_totals"]

#: binary-search rounds on the bottleneck (each halves the interval)
SEARCH_ROUNDS = 64


def segment_totals(costs: Sequence[float], starts: Sequence[int]) -> list[float]:
    """The total cost of each segment, given the segments' start indices."""
    ends = [*starts[1:], len(costs)]
    return [float(sum(costs[a:b])) for a, b in zip(starts, ends)]


def _greedy_count(costs: Sequence[float], limit: float) -> tuple[int, list[int]]:
    """The fewest segments whose totals stay within ``limit``, and their starts."""
    starts = [0]
    total = 0.0
    for index, cost in enumerate(costs):
        if total + cost > limit and index > starts[-1]:
            starts.append(index)
            total = 0.0
        total += cost
    return len(starts), starts


def _bottleneck(costs: Sequence[float], count: int) -> float:
    low, high = max(costs), float(sum(costs))
    if count == 1:
        return high
    for _ in range(SEARCH_ROUNDS):
        if high - low <= 1e-12 * max(high, 1e-30):
            break
        middle = (low + high) / 2
        if _greedy_count(costs, middle)[0] <= count:
            high = middle
        else:
            low = middle
    _, starts = _greedy_count(costs, high)
    return max(segment_totals(costs, starts))


def min_max_split(costs: Sequence[float], count: int,
                  cuts: Sequence[float] = ()) -> list[int]:
    """Start indices of ``min(count, len(costs))`` non-empty contiguous segments of
    ``costs`` whose largest total is the least possible; among those, the split whose
    cuts weigh least (``cuts[i]``: the weight of a cut between items ``i`` and
    ``i + 1``; none given: all equal)."""
    items = len(costs)
    if items == 0:
        return []
    count = min(count, items)
    if count == 1:
        return [0]
    limit = _bottleneck(costs, count)
    limit += 1e-9 * max(limit, 1e-30)  # the float sums of the DP below may round up
    weights = list(cuts) if cuts else [1.0] * (items - 1)
    prefix = [0.0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    infinity = float("inf")
    # best[j]: least cut weight splitting items[:j] into `segments` pieces; choice: start
    best = [0.0] + [infinity] * items
    choices: list[list[int]] = []
    for _ in range(count):
        best, chosen = _next_layer(best, prefix, weights, limit)
        choices.append(chosen)
    if best[items] == infinity:  # pragma: no cover - the bottleneck is always reachable
        raise AssertionError("no split within the bottleneck")
    starts = []
    end = items
    for layer in reversed(choices):
        start = layer[end]
        starts.append(start)
        end = start
    return starts[::-1]


def _next_layer(previous: list[float], prefix: list[float], weights: list[float],
                limit: float) -> tuple[list[float], list[int]]:
    """One more segment: for each end j, the best start i (previous[i] plus the
    weight of the cut at i) among the starts whose segment i..j stays within limit."""
    items = len(prefix) - 1
    infinity = float("inf")
    best = [infinity] * (items + 1)
    chosen = [-1] * (items + 1)
    window: deque[int] = deque()  # candidate starts, their scores increasing
    low = 0
    for end in range(1, items + 1):
        start = end - 1  # the newest candidate start: the segment [end-1, end)
        if previous[start] < infinity:
            score = previous[start] + (weights[start - 1] if start > 0 else 0.0)
            while window and _score(window[-1], previous, weights) >= score:
                window.pop()
            window.append(start)
        while prefix[end] - prefix[low] > limit:
            low += 1
        while window and window[0] < low:
            window.popleft()
        if window:
            best[end] = _score(window[0], previous, weights)
            chosen[end] = window[0]
    return best, chosen


def _score(start: int, previous: list[float], weights: list[float]) -> float:
    return previous[start] + (weights[start - 1] if start > 0 else 0.0)


def candidate_orders(graph: Graph) -> list[list[Node]]:
    """The computing nodes in the graph's topological order, and in the memory-aware
    order when it differs."""
    steps = [node for node in graph.topological_order() if is_step(node)]
    slots: dict[int, int] = {}

    def slot_of(value: object) -> int:
        return slots.setdefault(id(value), len(slots))

    uses = [StepUse(tuple(-1 if v is None else slot_of(v) for v in node.inputs),
                    tuple(slot_of(v) for v in node.outputs)) for node in steps]
    sizes: dict[int, int] = {}
    pinned: set[int] = set()
    for node in steps:
        for value in node.inputs:
            if value is not None and not is_step(value.producer):
                pinned.add(slot_of(value))
        for value in node.outputs:
            sizes[slot_of(value)] = value_bytes(value)
    pinned.update(slot_of(v) for v in graph.outputs)
    order = memory_aware_order(uses, sizes, pinned)
    orders = [steps]
    if order != list(range(len(steps))):
        orders.append([steps[i] for i in order])
    return orders


def cut_bytes(graph: Graph, order: Sequence[Node]) -> list[int]:
    """Bytes crossing each cut of ``order`` (``result[i]``: between ``order[i]`` and
    ``order[i + 1]``): see the module docstring."""
    items = len(order)
    position = {id(node): i for i, node in enumerate(order)}
    change = [0] * (items + 1)
    outputs = {id(v) for v in graph.outputs}
    seen: set[int] = set()
    for node in order:
        for value in [*node.inputs, *node.outputs]:
            if value is None or id(value) in seen or value.producer.op_type == "Const":
                continue
            seen.add(id(value))
            first = position.get(id(value.producer), -1)
            last = max((position.get(id(u.node), -1) for u in value.users), default=first)
            if id(value) in outputs:
                last = items
            if last > first:  # crosses the cuts first .. last-1
                size = value_bytes(value)
                change[max(first, 0)] += size
                change[min(last, items)] -= size
    crossing = []
    running = 0
    for index in range(items - 1):
        running += change[index]
        crossing.append(running)
    return crossing
