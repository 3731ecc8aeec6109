"""Placing buffers in one arena: offsets for tensors whose lifetimes are known.

Pure arithmetic over ``Buffer`` records (a size and the first and last step that
touch it); nothing here sees a graph or a device. Two strategies run and the
smaller arena is kept, as GE and XLA do, because neither wins everywhere:

- **greedy by size** places the largest buffers first, each at the lowest offset
  where it fits beside the already placed buffers whose lifetimes overlap its own.
  Large tensors dominate a CNN's footprint, and placing them first leaves the small
  ones to fill the gaps; this is the strategy that usually reaches the lower bound.
- **best fit in step order** walks the schedule as an allocator would: a buffer is
  given the smallest free hole that holds it when its first step starts, and its range
  is freed after its last step. It wins where many buffers of equal size live in a
  staircase pattern (long chains, transformer blocks), where sorting by size has no
  information to use.

The lower bound is the largest total of buffers live at one step: no placement of
these lifetimes can use less.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALIGNMENT", "Buffer", "Placement", "aligned", "lower_bound", "place",
           "greedy_by_size", "best_fit_in_order", "GREEDY_BY_SIZE_MAX_BUFFERS"]

ALIGNMENT = 64
"""Every offset and every buffer size is a multiple of this many bytes."""

#: greedy by size compares each buffer with every placed buffer its lifetime overlaps;
#: above this many buffers only best fit runs (it is n log n)
GREEDY_BY_SIZE_MAX_BUFFERS = 20_000


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the alignment (zero-size buffers take one granule)."""
    return max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)


@dataclass(frozen=True)
class Buffer:
    """A tensor to place: ``size`` bytes (aligned), live from step ``first`` to ``last``."""

    key: int
    size: int
    first: int
    last: int

    def overlaps(self, other: Buffer) -> bool:
        """True when the two lifetimes share a step."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Placement:
    """Offsets for every buffer, the arena they need and the strategy that chose them."""

    offsets: dict[int, int]
    arena_bytes: int
    strategy: str
    tried: dict[str, int]  # strategy -> arena bytes it needed


def lower_bound(buffers: Sequence[Buffer]) -> int:
    """The largest total size of the buffers live at any one step."""
    events: list[tuple[int, int]] = []
    for buffer in buffers:
        events.append((buffer.first, buffer.size))
        events.append((buffer.last + 1, -buffer.size))
    events.sort(key=lambda e: (e[0], e[1]))  # frees before allocations at the same step
    live = peak = 0
    for _, change in events:
        live += change
        peak = max(peak, live)
    return peak


def greedy_by_size(buffers: Sequence[Buffer]) -> dict[int, int]:
    """Largest first, each at the lowest offset clear of the overlapping placed buffers."""
    horizon = max((b.last for b in buffers), default=-1) + 1
    alive_at: list[list[Buffer]] = [[] for _ in range(horizon)]
    offsets: dict[int, int] = {}
    for buffer in sorted(buffers, key=lambda b: (-b.size, b.first, b.key)):
        seen: set[int] = set()
        neighbours: list[tuple[int, int]] = []
        for step in range(buffer.first, buffer.last + 1):
            for other in alive_at[step]:
                if other.key not in seen:
                    seen.add(other.key)
                    neighbours.append((offsets[other.key], offsets[other.key] + other.size))
        neighbours.sort()
        offset = 0
        for start, end in neighbours:
            if start - offset >= buffer.size:
                break
            offset = max(offset, end)
        offsets[buffer.key] = offset
        for step in range(buffer.first, buffer.last + 1):
            alive_at[step].append(buffer)
    return offsets


def best_fit_in_order(buffers: Sequence[Buffer]) -> dict[int, int]:
    """Allocate at each buffer's first step from the smallest fitting hole; free after its
    last step (adjacent holes merge); grow the arena's top when no hole fits."""
    starting: dict[int, list[Buffer]] = {}
    ending: dict[int, list[Buffer]] = {}
    for buffer in buffers:
        starting.setdefault(buffer.first, []).append(buffer)
        ending.setdefault(buffer.last, []).append(buffer)
    holes: list[tuple[int, int]] = []  # (offset, size), sorted by offset
    top = 0
    offsets: dict[int, int] = {}
    for step in sorted(set(starting) | set(ending)):
        for buffer in sorted(starting.get(step, ()), key=lambda b: (-b.size, b.key)):
            best = None
            for index, (_start, size) in enumerate(holes):
                if size >= buffer.size and (best is None or size < holes[best][1]):
                    best = index
            if best is None:
                if holes and holes[-1][0] + holes[-1][1] == top:  # extend the last hole
                    start, size = holes.pop()
                    offsets[buffer.key] = start
                    top = start + buffer.size
                else:
                    offsets[buffer.key] = top
                    top += buffer.size
            else:
                start, size = holes[best]
                offsets[buffer.key] = start
                if size == buffer.size:
                    del holes[best]
                else:
                    holes[best] = (start + buffer.size, size - buffer.size)
        for buffer in ending.get(step, ()):
            _release(holes, offsets[buffer.key], buffer.size)
    return offsets


def _release(holes: list[tuple[int, int]], offset: int, size: int) -> None:
    index = bisect.bisect_left(holes, (offset, 0))
    if index > 0 and holes[index - 1][0] + holes[index - 1][1] == offset:
        index -= 1
        offset, size = holes[index][0], holes[index][1] + size
        del holes[index]
    if index < len(holes) and offset + size == holes[index][0]:
        size += holes[index][1]
        del holes[index]
    holes.insert(index, (offset, size))


def _arena(buffers: Sequence[Buffer], offsets: dict[int, int]) -> int:
    return max((offsets[b.key] + b.size for b in buffers), default=0)


def place(buffers: Sequence[Buffer], reuse: bool = True) -> Placement:
    """Offsets for ``buffers``: the smaller of the two strategies' arenas, or, with
    ``reuse`` off, every buffer after the previous one (no two share a byte)."""
    if not reuse:
        offsets, top = {}, 0
        for buffer in buffers:
            offsets[buffer.key] = top
            top += buffer.size
        return Placement(offsets, top, "no reuse", {"no reuse": top})
    candidates = {"best fit in step order": best_fit_in_order(buffers)}
    if len(buffers) <= GREEDY_BY_SIZE_MAX_BUFFERS:
        candidates["greedy by size"] = greedy_by_size(buffers)
    tried = {name: _arena(buffers, offsets) for name, offsets in candidates.items()}
    chosen = min(tried, key=lambda name: (tried[name], name))
    return Placement(candidates[chosen], tried[chosen], chosen, tried)
