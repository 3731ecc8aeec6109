"""What a node or a run of nodes costs: an estimated time, and planned memory.

**Time.** The registry gives each node a cost in FLOPs and bytes moved
(``ge.ops.registry.node_cost``). A node's estimated time is a roofline:

    time = max(flops / FLOP_RATE, bytes / BYTE_RATE) + STEP_OVERHEAD

a node is bound either by its arithmetic or by its memory traffic, whichever is
slower, plus the fixed cost of dispatching one step. The rates are those of a few
host cores (100 GFLOP/s of float32 arithmetic, 20 GB/s of memory traffic); only
their ratio matters when stages are balanced against each other. ``Data`` and
``Const`` nodes cost nothing (they are not steps).

**Memory.** A run of nodes (a partition) holds, while it runs: its weights (the
``Const`` values it reads, each once), its boundary inputs (values made before it,
graph inputs included), its outputs (values later partitions or the graph's outputs
read), and an arena for the values that live and die inside it. The arena is planned
by the real planner (``ge.memory.plan_memory``) over the steps in their order, with
the same views, in-place writes and pinned slots the compiler gives it; since the
compiler may run the steps in a memory-aware order instead, the larger of the two
orders' arenas is taken, so the figure bounds what a compiled partition plans on one
stream. Unknown dimensions count as 1 in byte counts; values whose shape is not
static are left out of the arena (they are allocated when computed), as the
compiler leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ge.errors import GEError
from ge.ir import MEMORY_OPTIONS_KEY, Node, Value
from ge.ir.tensor import is_static, num_elements
from ge.memory import StepUse, memory_aware_order, plan_memory
from ge.ops.registry import Trait, node_cost, op_has_trait

__all__ = ["FLOP_RATE", "BYTE_RATE", "STEP_OVERHEAD", "NodeMemory", "SegmentMemory",
           "is_step", "node_time", "value_bytes", "plan_segment", "memory_options_of"]

#: float32 operations per second the time estimate assumes
FLOP_RATE = 1.0e11
#: bytes of memory traffic per second the time estimate assumes
BYTE_RATE = 2.0e10
#: seconds added per step (dispatch, kernel launch)
STEP_OVERHEAD = 2.0e-6

#: ops that are not steps of a run: graph inputs and constants
NOT_STEPS = frozenset({"Data", "Const"})


def is_step(node: Node) -> bool:
    """True for a node that computes (not a ``Data`` or ``Const`` node)."""
    return node.op_type not in NOT_STEPS


def value_bytes(value: Value) -> int:
    """The bytes of ``value`` (unknown dimensions counted as 1)."""
    return num_elements(value.shape) * value.dtype.itemsize


def node_time(node: Node) -> float:
    """The estimated seconds ``node`` takes (see the module docstring); 0 for
    ``Data`` and ``Const``. A node whose op gives no cost estimate counts the bytes
    of its inputs and outputs."""
    if not is_step(node):
        return 0.0
    try:
        flops, moved = node_cost(node)
    except GEError:
        flops = 0
        moved = sum(value_bytes(v) for v in (*node.inputs, *node.outputs) if v is not None)
    return max(flops / FLOP_RATE, moved / BYTE_RATE) + STEP_OVERHEAD


@dataclass(frozen=True)
class NodeMemory:
    """One node's memory: the weights it reads and the activations it writes (bytes).

    For a ``Const`` node the weights are its own value; for a ``Data`` node the
    activation is the fed value."""

    weights_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        """Weights and activations together."""
        return self.weights_bytes + self.activation_bytes


@dataclass(frozen=True)
class SegmentMemory:
    """A partition's planned memory, in bytes, part by part."""

    weights_bytes: int  # the Const values it reads, each once
    arena_bytes: int  # the planned arena for the values that live and die inside it
    input_bytes: int  # its boundary inputs (graph inputs included)
    output_bytes: int  # the values it hands on (and the graph outputs it makes)

    @property
    def total_bytes(self) -> int:
        """Everything the partition holds while it runs."""
        return self.weights_bytes + self.arena_bytes + self.input_bytes + self.output_bytes


def plan_segment(nodes: Sequence[Node], needed_outside: Callable[[Value], bool],
                 memory_options: Any = None) -> SegmentMemory:
    """The planned memory of the steps ``nodes`` (in run order) run as one partition.

    ``needed_outside(value)`` says whether a value they make is read after them (by
    another partition, or as a graph output). ``memory_options`` is what
    ``gp.MemoryPass`` records on a graph (``graph.metadata[MEMORY_OPTIONS_KEY]``).
    """
    steps = [node for node in nodes if is_step(node)]
    inside = {id(node) for node in steps}
    slots: dict[int, int] = {}
    descs: dict[int, tuple[tuple[int, ...], np.dtype]] = {}

    def slot_of(value: Value) -> int:
        slot = slots.setdefault(id(value), len(slots))
        if slot not in descs and is_static(value.shape):
            descs[slot] = (tuple(int(d) for d in value.shape), value.dtype.np_dtype)
        return slot

    weights: dict[int, int] = {}
    boundary: dict[int, int] = {}
    produced: dict[int, int] = {}
    pinned: set[int] = set()
    uses = []
    for node in steps:
        for value in node.inputs:
            if value is None or id(value.producer) in inside:
                continue
            pinned.add(slot_of(value))
            table = weights if value.producer.op_type == "Const" else boundary
            table[id(value)] = value_bytes(value)
        for value in node.outputs:
            if needed_outside(value):
                pinned.add(slot_of(value))
                produced[id(value)] = value_bytes(value)
        uses.append(StepUse(tuple(-1 if v is None else slot_of(v) for v in node.inputs),
                            tuple(slot_of(v) for v in node.outputs),
                            view=op_has_trait(node.op_type, Trait.VIEW),
                            inplace=op_has_trait(node.op_type, Trait.INPLACE)))
    arena = _arena(uses, descs, pinned, memory_options)
    return SegmentMemory(sum(weights.values()), arena, sum(boundary.values()),
                         sum(produced.values()))


def _arena(uses: list[StepUse], descs: dict[int, tuple[tuple[int, ...], np.dtype]],
           pinned: set[int], memory_options: Any) -> int:
    """The larger arena of the given order and the memory-aware order (the compiler
    runs one of the two)."""
    if not uses:
        return 0
    options = memory_options if isinstance(memory_options, dict) else {}
    reuse = bool(options.get("memory_reuse", True))
    inplace = bool(options.get("inplace", True))
    sizes = {slot: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
             for slot, (shape, dtype) in descs.items()}
    orders: list[Iterable[int]] = [range(len(uses))]
    reordered = memory_aware_order(uses, sizes, pinned)
    if reordered != list(range(len(uses))):
        orders.append(reordered)
    return max(plan_memory([uses[i] for i in order], descs, pinned, reuse=reuse,
                           inplace=inplace).arena_bytes for order in orders)


def memory_options_of(metadata: dict[str, Any]) -> Any:
    """The memory planner's switches recorded on a graph (None: both on)."""
    return metadata.get(MEMORY_OPTIONS_KEY)
