"""Stream assignment: independent branches on different streams, the fewest events.

Steps are list-scheduled over at most ``max_streams`` logical streams with the
registry's cost estimates: each step goes to the stream where it could start
earliest (its inputs ready, the stream free), preferring the stream of one of its
producers on a tie, so a chain stays on one stream. A step that reads a value made
on another stream waits for an event recorded after that producer, unless the
stream already waits (directly or through other events) for that producer or a
later step of its stream: vector clocks over the streams find those, so only the
waits that order something new are kept.

``auto`` keeps one stream unless the estimate says the streams save at least
``MIN_SAVING`` of the run and the graph has enough work per event to pay for the
threads (``MIN_FLOPS_PER_WAIT``); the report says which and why. The estimate counts
a step of high arithmetic intensity (a matrix product or convolution, which BLAS
already spreads over every core) as taking all cores for its time divided by the core
count, so streams gain only where single-threaded work (elementwise ops, pools,
copies) can overlap.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ge.compiler.executable import Step

__all__ = ["StreamPlan", "assign_streams", "ordering_waits", "memory_predecessors",
           "data_producers", "MIN_SAVING", "MIN_FLOPS_PER_WAIT"]

#: the estimated share of the run the streams must save for ``auto`` to use them
MIN_SAVING = 0.2
#: estimated floating-point operations per cross-stream wait that ``auto`` asks for
MIN_FLOPS_PER_WAIT = 5e6

_FLOPS_PER_SECOND = 2e10  # one core, roughly: only the ratios between steps matter
_BYTES_PER_SECOND = 5e9
_STEP_SECONDS = 5e-6
#: flops per byte from which a step counts as multi-threaded (BLAS) work
_PARALLEL_INTENSITY = 8.0


@dataclass(frozen=True)
class StreamPlan:
    """Which stream runs each step, and which steps each step waits for beyond its
    stream's own order (each wait is one event: recorded after the producer)."""

    streams: tuple[int, ...]
    waits: tuple[tuple[int, ...], ...]
    count: int
    report: dict[str, Any]

    @property
    def events(self) -> int:
        """How many cross-stream waits (events) the plan has."""
        return sum(len(w) for w in self.waits)

    @classmethod
    def single(cls, steps: int, requested: Optional[int], why: str) -> StreamPlan:
        """Every step on one stream, for ``why``."""
        report = {"requested": "auto" if requested is None else requested, "streams": 1,
                  "events": 0, "why_one": why}
        return cls((0,) * steps, ((),) * steps, 1, report)

    def members(self) -> list[list[int]]:
        """Per stream, its steps in order."""
        lists: list[list[int]] = [[] for _ in range(self.count)]
        for index, stream in enumerate(self.streams):
            lists[stream].append(index)
        return lists


def _seconds(cost: Optional[tuple[float, float]]) -> float:
    if cost is None:
        return _STEP_SECONDS
    flops, data = cost
    return _STEP_SECONDS + flops / _FLOPS_PER_SECOND + data / _BYTES_PER_SECOND


def assign_streams(steps: Sequence[Step], costs: Sequence[Optional[tuple[float, float]]],
                   requested: Optional[int]) -> StreamPlan:
    """Assign ``steps`` (in schedule order) to streams.

    ``requested``: a stream count, or None for ``auto`` (up to the CPU count, at most
    4, kept only when the estimate pays; see the module docstring).
    """
    cores = os.cpu_count() or 1
    most = requested if requested is not None else min(cores, 4)
    most = max(1, int(most))
    producers = _producers(steps)
    seconds = [_seconds(c) for c in costs]
    streams = _list_schedule(producers, seconds, most)
    waits = ordering_waits(streams, producers)
    used = len(set(streams))
    threaded = _blas_threads(cores) > 1
    wide = [threaded and c is not None and c[0] >= _PARALLEL_INTENSITY * max(c[1], 1.0)
            for c in costs]
    durations = [t / (cores if w else 1) for t, w in zip(seconds, wide)]
    serial = sum(durations)
    parallel = _estimate(streams, producers, durations, wide)
    flops = sum(c[0] for c in costs if c is not None)
    events = sum(len(w) for w in waits)
    report: dict[str, Any] = {"requested": "auto" if requested is None else requested,
                              "estimated_serial_ms": serial * 1e3,
                              "estimated_parallel_ms": parallel * 1e3}
    keep = used > 1
    if requested is None and keep:
        saving = 1 - parallel / serial if serial else 0.0
        if saving < MIN_SAVING:
            keep, report["why_one"] = False, f"estimated saving {saving:.0%} < {MIN_SAVING:.0%}"
        elif flops < MIN_FLOPS_PER_WAIT * max(events, 1):
            keep = False
            report["why_one"] = (f"{flops / max(events, 1):.3g} estimated flops per event < "
                                 f"{MIN_FLOPS_PER_WAIT:.3g}")
    if not keep:
        streams = [0] * len(steps)
        waits = [[] for _ in steps]
        used = 1 if steps else 0
    report.update({"streams": used, "events": sum(len(w) for w in waits)})
    return StreamPlan(tuple(streams), tuple(tuple(w) for w in waits), max(used, 1), report)


def _blas_threads(cores: int) -> int:
    """The threads BLAS uses, as its environment variables set them (else every core)."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return max(1, int(value))
    return cores


def data_producers(steps: Sequence[Step]) -> list[list[int]]:
    """For each step, the steps that made the values it reads."""
    return _producers(steps)


def memory_predecessors(steps: Sequence[Step], offsets: dict[int, int],
                        sizes: dict[int, int], owner: Callable[[int], int],
                        views: frozenset[int] = frozenset()) -> list[list[int]]:
    """For each step, the earlier steps (in schedule order) that touched arena bytes it
    writes: on one stream the order keeps them apart; across streams each is a wait.

    Storage is owned by one slot and shared by its views and in-place outputs
    (``owner``; ``views``: the steps that only re-shape). A value placed where earlier,
    dead storage lay is written only after every step that made or read that storage;
    an output written in place waits for the other readers of the storage it overwrites.
    Only the storage last placed on each byte is waited for: the storage it replaced was
    waited for when it was placed.
    """
    touched_by: dict[int, list[int]] = {}  # owning slot -> steps that made or read it
    for index, step in enumerate(steps):
        for slot in (*step.inputs, *step.outputs):
            if slot in offsets:
                touched_by.setdefault(owner(slot), []).append(index)
    segments: list[tuple[int, int, int]] = []  # disjoint (start, end, owner), sorted
    preds: list[list[int]] = []
    for index, step in enumerate(steps):
        mine: set[int] = set()
        for slot in step.outputs:
            if slot not in offsets:
                continue
            storage = owner(slot)
            if storage != slot:  # a view (writes nothing) or an in-place output
                if index not in views:
                    mine.update(j for j in touched_by[storage] if j < index)
                continue
            start, end = offsets[slot], offsets[slot] + sizes[slot]
            for other in _occupy(segments, start, end, storage):
                mine.update(j for j in touched_by[other] if j < index)
        mine.discard(index)
        preds.append(sorted(mine))
    return preds


def _occupy(segments: list[tuple[int, int, int]], start: int, end: int,
            storage: int) -> set[int]:
    """Place ``storage`` on [start, end); return the owners whose bytes it covers."""
    position = bisect.bisect_right(segments, (start, float("inf"), 0)) - 1
    position = max(position, 0)
    covered: set[int] = set()
    kept: list[tuple[int, int, int]] = []
    last = position
    while last < len(segments) and segments[last][0] < end:
        seg_start, seg_end, seg_owner = segments[last]
        if seg_end > start:
            covered.add(seg_owner)
            if seg_start < start:
                kept.append((seg_start, start, seg_owner))
            if seg_end > end:
                kept.append((end, seg_end, seg_owner))
        else:
            kept.append((seg_start, seg_end, seg_owner))
        last += 1
    kept.append((start, end, storage))
    segments[position:last] = sorted(kept)
    return covered


def _producers(steps: Sequence[Step]) -> list[list[int]]:
    made_by: dict[int, int] = {}
    producers: list[list[int]] = []
    for index, step in enumerate(steps):
        found = sorted({made_by[s] for s in step.inputs if s in made_by})
        producers.append(found)
        for slot in step.outputs:
            made_by[slot] = index
    return producers


def _list_schedule(producers: list[list[int]], durations: list[float],
                   most: int) -> list[int]:
    """Each step on the stream where it can start first (a producer's stream on a tie),
    streams numbered in order of first use."""
    stream_free = [0.0] * most
    streams: list[int] = []
    finish: list[float] = []
    for index, preds in enumerate(producers):
        ready = max((finish[p] for p in preds), default=0.0)
        own = {streams[p] for p in preds}
        starts = [max(ready, free) for free in stream_free]
        chosen = min(range(most), key=lambda s: (starts[s], s not in own, s))
        streams.append(chosen)
        finish.append(starts[chosen] + durations[index])
        stream_free[chosen] = finish[-1]
    used = sorted(set(streams), key=streams.index)
    number = {old: new for new, old in enumerate(used)}
    return [number[s] for s in streams]


def _estimate(streams: list[int], producers: list[list[int]], durations: list[float],
              wide: list[bool]) -> float:
    """The run's estimated time on these streams; a wide step holds every core."""
    stream_free = [0.0] * (max(streams, default=0) + 1)
    finish: list[float] = []
    for index, preds in enumerate(producers):
        begin = max([stream_free[streams[index]]] + [finish[p] for p in preds])
        if wide[index]:
            begin = max([begin] + stream_free)
        finish.append(begin + durations[index])
        if wide[index]:
            stream_free = [finish[-1]] * len(stream_free)
        stream_free[streams[index]] = finish[-1]
    return max(finish, default=0.0)


def ordering_waits(streams: Sequence[int], producers: Sequence[Sequence[int]]
                   ) -> list[list[int]]:
    """For each step, the steps of other streams it must wait for that nothing already
    orders before it (vector clocks: per stream, the last step known complete)."""
    count = max(streams, default=-1) + 1
    clock_after: list[list[int]] = []  # per step: what is known complete once it is
    stream_clock = [[-1] * count for _ in range(count)]
    waits: list[list[int]] = []
    for index, preds in enumerate(producers):
        stream = streams[index]
        clock = stream_clock[stream]
        mine: list[int] = []
        for p in sorted(preds, key=lambda p: -p):
            if streams[p] != stream and clock[streams[p]] < p:
                mine.append(p)
                clock = [max(a, b) for a, b in zip(clock, clock_after[p])]
        clock = list(clock)
        clock[stream] = index
        stream_clock[stream] = clock
        clock_after.append(clock)
        waits.append(sorted(mine))
    return waits
