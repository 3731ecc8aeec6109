"""A memory-aware order of a schedule's steps.

Any topological order computes the same values; they differ in how many values are
alive at once. ``memory_aware_order`` builds an order greedily: of the steps whose
inputs are ready, it runs the one that grows the live bytes least (its outputs'
bytes minus the bytes of the inputs it is the last reader of), the earliest in the
given order on a tie. The compiler keeps it only when its peak is lower than the
given order's (``live_peak``).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ge.memory.liveness import StepUse

__all__ = ["memory_aware_order", "READY_WINDOW"]

#: how many ready steps (the earliest in the given order) are weighed at each choice
READY_WINDOW = 64


def memory_aware_order(steps: Sequence[StepUse], sizes: dict[int, int],
                       pinned: set[int]) -> list[int]:
    """Step indices in an order that keeps few bytes alive (see the module docstring)."""
    producer: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.outputs:
            producer[slot] = index
    waiting = [0] * len(steps)
    readers: dict[int, list[int]] = {}
    remaining_reads: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in set(step.inputs):
            if slot < 0:
                continue
            remaining_reads[slot] = remaining_reads.get(slot, 0) + 1
            if slot in producer:
                waiting[index] += 1
                readers.setdefault(slot, []).append(index)
    ready = [index for index in range(len(steps)) if waiting[index] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        window = [heapq.heappop(ready) for _ in range(min(READY_WINDOW, len(ready)))]
        best = min(window, key=lambda i: (_growth(steps[i], sizes, pinned, remaining_reads), i))
        for index in window:
            if index != best:
                heapq.heappush(ready, index)
        order.append(best)
        step = steps[best]
        for slot in set(step.inputs):
            if slot >= 0:
                remaining_reads[slot] -= 1
        for slot in step.outputs:
            for reader in readers.get(slot, ()):
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    heapq.heappush(ready, reader)
    if len(order) != len(steps):
        raise ValueError("the steps' slots form a cycle")
    return order


def _growth(step: StepUse, sizes: dict[int, int], pinned: set[int],
            remaining_reads: dict[int, int]) -> int:
    grown = sum(sizes.get(slot, 0) for slot in step.outputs if slot not in pinned)
    freed = sum(sizes.get(slot, 0) for slot in set(step.inputs)
                if slot >= 0 and slot not in pinned and remaining_reads.get(slot) == 1)
    return grown - freed
