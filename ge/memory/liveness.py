"""Lifetimes of a schedule's values, with views and in-place writes folded in.

The input is the schedule as slot numbers (which slots each step reads and writes),
the concrete shape and dtype of every slot whose size is known, and the slots that
live outside the arena (graph inputs, constants, graph outputs). The result is a
:class:`MemoryPlan`: an arena offset for every stored slot, which steps are views
and which run in place, and the figures the memory report prints.

- A **view** step (an op with the ``VIEW`` trait: Reshape, Flatten, Squeeze, ...)
  stores nothing: its output is input 0's buffer re-shaped, and that buffer lives
  until the view's last reader too.
- An **in-place** step (an op with the ``INPLACE`` trait, or a kernel that reads one
  input through its output: a convolution adding its residual where it lies) writes
  output 0 over that input (input 0 for the trait) when the input's buffer dies at that
  step, both have the same shape and dtype, no other input of the step reads that
  buffer (but for the same value read twice by an elementwise op), and neither is a
  graph input, constant or output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ge.memory.planner import Buffer, Placement, aligned, lower_bound, place

__all__ = ["StepUse", "SlotDesc", "MemoryPlan", "plan_memory", "live_peak", "slot_bytes"]

#: a slot's concrete shape and NumPy dtype
SlotDesc = tuple[tuple[int, ...], np.dtype]


@dataclass(frozen=True)
class StepUse:
    """What one step of the schedule reads and writes, and what its op allows."""

    inputs: tuple[int, ...]  # -1: absent optional input
    outputs: tuple[int, ...]
    view: bool = False  # output 0 is input 0's data re-shaped
    inplace: bool = False  # output 0 may overwrite input ``inplace_input``
    inplace_input: int = 0
    #: the overwritten buffer may not be read through another input as well (an
    #: elementwise op may write over x in Add(x, x); a convolution may not write over
    #: a residual that is also the image it slides its window over)
    exclusive: bool = False


def slot_bytes(desc: SlotDesc) -> int:
    """The bytes of a value of this (shape, dtype)."""
    shape, dtype = desc
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


@dataclass
class MemoryPlan:
    """Where each value of one input signature lives during a run."""

    offsets: dict[int, int]  # slot -> byte offset in the arena (views and in-place included)
    descs: dict[int, SlotDesc]  # every slot of known size
    views: frozenset[int]  # steps whose output is a re-shaped input 0
    inplace: frozenset[int]  # steps that write output 0 over input 0
    dynamic: frozenset[int]  # produced slots whose size is known only once computed
    arena_bytes: int
    naive_bytes: int
    lower_bound_bytes: int
    strategy: str
    tried: dict[str, int] = field(default_factory=dict)
    #: slot -> the slot whose storage it shares (views and in-place outputs); a slot not
    #: listed owns its storage
    shares: dict[int, int] = field(default_factory=dict)

    def owner(self, slot: int) -> int:
        """The slot that owns ``slot``'s storage."""
        return self.shares.get(slot, slot)

    @property
    def inplace_count(self) -> int:
        """How many steps write their output over their input."""
        return len(self.inplace)

    def report(self) -> dict[str, Any]:
        """The figures ``executable.memory`` shows."""
        return {
            "naive_bytes": self.naive_bytes,
            "planned_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "inplace_count": self.inplace_count,
            "view_count": len(self.views),
            "dynamic_values": len(self.dynamic),
            "strategy": self.strategy,
            "strategies": dict(self.tried),
        }


def plan_memory(steps: Sequence[StepUse], descs: dict[int, SlotDesc], pinned: set[int],
                reuse: bool = True, inplace: bool = True,
                streams: Optional[Sequence[int]] = None,
                held: Optional[dict[int, tuple[int, int]]] = None) -> MemoryPlan:
    """Plan the arena for ``steps`` (in schedule order).

    ``descs`` gives the concrete shape and dtype of every slot whose size is known;
    ``pinned`` are the slots kept outside the arena (graph inputs, constants and
    outputs). ``reuse`` off gives every stored value its own bytes; ``inplace`` off
    never writes an output over an input. ``streams`` (the stream of each step): values
    made on different streams never share bytes, since steps of two streams may run at
    once; each stream's values are placed in a region of their own. ``held``: slot ->
    (first, last) steps over which the value must live whatever its readers say (the
    values that cross the border of a run of steps executed slice by slice).
    """
    last_use: dict[int, int] = {}
    produced_at: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.inputs:
            if slot >= 0:
                last_use[slot] = index
        for slot in step.outputs:
            produced_at[slot] = index
    held = held or {}
    for slot, (_first, last) in held.items():
        last_use[slot] = max(last_use.get(slot, last), last)
    root: dict[int, int] = {}
    members: dict[int, list[int]] = {}

    def group(slot: int) -> int:
        return root.get(slot, slot)

    def group_last(head: int) -> int:
        return max(last_use.get(m, produced_at.get(m, -1)) for m in members.get(head, [head]))

    def join(slot: int, head: int) -> None:
        root[slot] = head
        members.setdefault(head, [head]).append(slot)

    views: set[int] = set()
    in_place: set[int] = set()
    for index, step in enumerate(steps):
        over = step.inplace_input if step.inplace else 0
        if not step.outputs or len(step.inputs) <= over or step.inputs[over] < 0:
            continue
        source, target = step.inputs[over], step.outputs[0]
        if target in pinned or target not in descs:
            continue
        if step.view and source in descs and slot_bytes(descs[source]) == slot_bytes(descs[target]):
            join(target, group(source))
            views.add(index)
        elif (step.inplace and inplace and source in descs and descs[source] == descs[target]
              and group(source) not in pinned and source not in pinned
              and group_last(group(source)) == index
              and all(s < 0 or (s == source and not step.exclusive)
                      or group(s) != group(source)
                      for k, s in enumerate(step.inputs) if k != over)):
            join(target, group(source))
            in_place.add(index)

    dynamic = frozenset(slot for slot in produced_at if slot not in descs and slot not in pinned)
    buffers: list[Buffer] = []
    naive = 0
    for slot, index in produced_at.items():
        if slot in pinned or slot not in descs:
            continue
        if slot not in root:  # a group's head: it owns the storage
            first = min([index] + [held[m][0] for m in members.get(slot, [slot]) if m in held])
            buffers.append(Buffer(slot, aligned(slot_bytes(descs[slot])), first,
                                  max(index, group_last(slot))))
        if not (slot in root and steps[produced_at[slot]].view):
            naive += slot_bytes(descs[slot])
    if streams is None or len(set(streams)) <= 1:
        placement = place(buffers, reuse=reuse)
    else:
        placement = _place_per_stream(buffers, streams, reuse)
    offsets = dict(placement.offsets)
    for slot, head in root.items():
        if head in offsets:
            offsets[slot] = offsets[head]
    return MemoryPlan(offsets, dict(descs), frozenset(views), frozenset(in_place), dynamic,
                      placement.arena_bytes, naive, lower_bound(buffers), placement.strategy,
                      placement.tried, dict(root))


def _place_per_stream(buffers: Sequence[Buffer], streams: Sequence[int],
                      reuse: bool) -> Placement:
    """Each stream's buffers placed on their own, the regions one after another."""
    offsets: dict[int, int] = {}
    tried: dict[str, int] = {}
    base = 0
    chosen = []
    for stream in sorted(set(streams)):
        mine = [b for b in buffers if streams[b.first] == stream]
        placement = place(mine, reuse=reuse)
        for key, offset in placement.offsets.items():
            offsets[key] = base + offset
        for name, size in placement.tried.items():
            tried[name] = tried.get(name, 0) + size
        base += placement.arena_bytes
        chosen.append(placement.strategy)
    strategy = "per stream: " + ", ".join(sorted(set(chosen)))
    return Placement(offsets, base, strategy, tried)


def live_peak(steps: Sequence[StepUse], sizes: dict[int, int], pinned: set[int],
              order: Optional[Sequence[int]] = None) -> int:
    """The largest total of stored values live at one step when ``steps`` run in
    ``order`` (default: as given); views and in-place writes are not counted."""
    order = list(range(len(steps))) if order is None else list(order)
    position = {step: i for i, step in enumerate(order)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step in order:
        at = position[step]
        for slot in steps[step].outputs:
            first[slot] = at
            last.setdefault(slot, at)
        for slot in steps[step].inputs:
            if slot >= 0:
                last[slot] = max(last.get(slot, at), at)
    buffers = [Buffer(slot, aligned(sizes.get(slot, 0)), first[slot], last[slot])
               for slot in first if slot not in pinned]
    return lower_bound(buffers)
