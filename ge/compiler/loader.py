"""Loading an executable: binding each step to its engine's kernel, and planning memory.

The executable names engines and op types only; here they become callables. A
``Program`` is what a session runs: the runtime's tasks, a template of value slots
with the constants already in place, and, per input signature, a memory plan bound
to the tasks (``Program.plan_for``), cached and bounded.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ge.compiler.executable import Executable, Step
from ge.compiler.signature import concrete_descs
from ge.compiler.slicing import Separable, Slicing, budget, plan_slices, separable
from ge.compiler.streams import data_producers, memory_predecessors, ordering_waits
from ge.engines import BoundKernel, get_engine
from ge.ir import Node, Tensor
from ge.ir.tensor import compute_pending
from ge.memory import MemoryPlan, StepUse, plan_memory, slot_bytes
from ge.ops.registry import Trait, op_has_trait
from ge.runtime.tasks import ANYWHERE, FRESH, Mode, OutSpec, SliceGroup, Task, TaskPlan

__all__ = ["BoundStep", "Program", "BoundPlan", "load", "MAX_PLANS", "step_uses"]

#: input signatures whose plans a program keeps (least recently used dropped first)
MAX_PLANS = 16


@dataclass(frozen=True)
class BoundStep:
    """A step with its kernel: read ``inputs`` slots, write ``outputs``, clear ``release``."""

    kernel: BoundKernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]
    node: Node


@dataclass(frozen=True)
class BoundPlan:
    """One input signature's memory plan and the tasks' modes under it."""

    memory: MemoryPlan
    tasks: TaskPlan
    copied: dict[str, int]  # op type -> steps whose results are copied into their slot
    kept: dict[str, int]  # op type -> steps whose results are kept outside the arena
    #: on several streams, per step the steps of other streams it waits for: data
    #: dependencies and, for arena bytes reused, the earlier users of those bytes
    waits: tuple[tuple[int, ...], ...] = ()
    #: output slots a writer fills in a buffer of their own, made for the run with the
    #: output's declared dtype: handed to the caller as they are, without the checks
    #: for arrays that may share memory with the arena or the feed
    fresh: frozenset[int] = frozenset()
    #: the runs of steps that go slice by slice over the batch (``slicing``), with the
    #: names of their first and last nodes
    slicings: tuple[tuple[Slicing, str, str], ...] = ()

    def report(self, signature: dict[str, tuple[int, ...]]) -> dict[str, Any]:
        """``executable.memory``: the plan's figures and what ran outside it."""
        sliced = [{"first": first, "last": last, "steps": s.last - s.first + 1,
                   "batch": s.batch, "slices": len(s.slices), "width": s.width,
                   "largest_step_bytes": s.moved_bytes,
                   "inner_bytes": sum(slot_bytes(self.memory.descs[slot]) for slot in s.inner)}
                  for s, first, last in self.slicings]
        return {**self.memory.report(), "signature": {k: list(v) for k, v in signature.items()},
                "written_in_slot": sum(1 for m in self.tasks.modes if m is Mode.WRITE),
                "copied_into_slot": dict(self.copied), "outside_arena": dict(self.kept),
                "batch_slices": sliced}


@dataclass
class Program:
    """An executable bound to kernels, ready to run."""

    executable: Executable
    steps: tuple[BoundStep, ...]
    tasks: tuple[Task, ...]
    template: tuple[Optional[np.ndarray], ...]
    uses: tuple[StepUse, ...]
    pinned: frozenset[int]
    #: per stream, its steps in order (one list when everything runs on one stream)
    members: tuple[tuple[int, ...], ...] = ()
    #: slots whose kernels return memory of their engine's own: planned off the arena
    outside: frozenset[int] = frozenset()
    #: some step's engine runs its own thread pool and another's kernels may call BLAS:
    #: runs keep BLAS to one thread, so that its spinning threads leave the pool's cores
    quiet_blas: bool = False
    #: per step, how its node splits by batch (``slicing.separable``; None: it does not)
    separable: tuple[Optional[Separable], ...] = ()
    _plans: OrderedDict[tuple[tuple[int, ...], ...], BoundPlan] = field(
        default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plan_for(self, shapes: dict[str, tuple[int, ...]]) -> BoundPlan:
        """The plan for feeds of these shapes (made on first sight, then cached)."""
        key = tuple(shapes[spec.name] for spec in self.executable.inputs)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
        if plan is None:
            plan = self.make_plan(shapes, self.executable.steps)
            with self._lock:
                self._plans[key] = plan
                while len(self._plans) > MAX_PLANS:
                    self._plans.popitem(last=False)
        self.executable.last_plan = (shapes, plan)
        return plan

    @property
    def cached_plans(self) -> int:
        """How many input signatures have a plan in the cache."""
        return len(self._plans)

    def make_plan(self, shapes: dict[str, tuple[int, ...]],
                  steps: Sequence[Step], slicing: bool = True) -> BoundPlan:
        """A new plan for feeds of these shapes (``steps``: the executable's, for names;
        ``slicing`` off: no step runs slice by slice)."""
        options = self.executable.memory_options
        descs = concrete_descs(self.executable, shapes)
        slicings = self._slicings(descs, steps) if slicing else []
        held: dict[int, tuple[int, int]] = {}
        for sliced in slicings:
            for index in range(sliced.first, sliced.last + 1):
                for slot in (*self.uses[index].inputs, *self.uses[index].outputs):
                    if slot >= 0 and slot not in sliced.inner:
                        first, last = held.get(slot, (sliced.first, sliced.last))
                        held[slot] = (min(first, sliced.first), max(last, sliced.last))
            for slot in sliced.inner:
                shape, dtype = descs[slot]
                descs[slot] = ((sliced.width, *shape[1:]), dtype)
        memory = plan_memory(self.uses, descs, set(self.pinned) | set(self.outside),
                             reuse=options.get("memory_reuse", True),
                             inplace=options.get("inplace", True),
                             streams=self.executable.streams or None, held=held)
        outputs = {spec.slot for spec in self.executable.outputs}
        modes: list[Mode] = []
        outs: list[tuple[OutSpec, ...]] = []
        copied: Counter[str] = Counter()
        kept: Counter[str] = Counter()
        fresh: set[int] = set()
        declared = {spec.slot: spec.desc.dtype.np_dtype for spec in self.executable.outputs}
        for index, (task, step) in enumerate(zip(self.tasks, steps)):
            specs = tuple(_out_spec(slot, memory, outputs) for slot in task.outputs)
            if index in memory.views:
                mode = Mode.VIEW
            elif task.writer is not None and all(s.offset != ANYWHERE for s in specs):
                mode = Mode.WRITE
            elif any(s.offset >= 0 for s in specs):
                mode = Mode.COPY
                copied[step.op_type] += 1
            else:
                mode = Mode.KEEP
                if any(s.offset == ANYWHERE for s in specs):
                    kept[step.op_type] += 1
            modes.append(mode)
            outs.append(specs)
            if mode is Mode.WRITE:
                fresh.update(slot for slot, spec in zip(task.outputs, specs)
                             if spec.offset == FRESH and declared.get(slot) == spec.dtype)
        waits: tuple[tuple[int, ...], ...] = ()
        if self.executable.stream_count > 1:
            sizes = {slot: slot_bytes(memory.descs[slot]) for slot in memory.offsets}
            memory_preds = memory_predecessors(steps, memory.offsets, sizes, memory.owner,
                                               memory.views)
            preds = [sorted(set(d) | set(m))
                     for d, m in zip(data_producers(steps), memory_preds)]
            waits = tuple(tuple(w) for w in ordering_waits(self.executable.streams, preds))
        if any(modes[i] is not Mode.WRITE or any(spec.offset < 0 for spec in outs[i])
               for sliced in slicings for i in range(sliced.first, sliced.last + 1)):
            # not what the slicing expected of its steps: the plan without it
            return self.make_plan(shapes, steps, slicing=False)
        groups = tuple(SliceGroup(s.first, s.last, s.slices, s.inputs, s.outputs)
                       for s in slicings)
        named = tuple((s, steps[s.first].node, steps[s.last].node) for s in slicings)
        return BoundPlan(memory, TaskPlan(tuple(modes), tuple(outs), memory.arena_bytes,
                                          groups),
                         dict(copied), dict(kept), waits, frozenset(fresh), named)

    def _slicings(self, descs: dict[int, Any], steps: Sequence[Step]) -> list[Slicing]:
        """The runs of steps this signature runs slice by slice (``slicing``)."""
        if not self.separable or self.executable.stream_count > 1 or \
                not self.executable.memory_options.get("batch_slicing", True):
            return []
        limit = budget()
        if limit <= 0:
            return []
        kept = frozenset(self.pinned | self.outside)
        eligible = [task.writer is not None and not use.view
                    and all(slot not in kept for slot in use.outputs)
                    for task, use in zip(self.tasks, self.uses)]
        return plan_slices([(use.inputs, use.outputs) for use in self.uses], self.separable,
                           descs, eligible, frozenset(self.executable.constants), kept, limit)


def _out_spec(slot: int, memory: MemoryPlan, outputs: set[int]) -> OutSpec:
    desc = memory.descs.get(slot)
    if desc is None:
        return OutSpec(ANYWHERE, (), np.dtype(np.float32))
    offset = memory.offsets.get(slot)
    if offset is None:
        offset = FRESH if slot in outputs else ANYWHERE
    return OutSpec(offset, desc[0], desc[1])


def step_uses(executable: Executable) -> tuple[StepUse, ...]:
    """What each step reads and writes, and whether its op is a view or may run in place
    (over input 0 by its op's trait, or over the input its engine names)."""
    nodes = {node.name: node for node in executable.graph.nodes}
    uses = []
    for step in executable.steps:
        over = None if op_has_trait(step.op_type, Trait.INPLACE) else \
            get_engine(step.engine).inplace_input(nodes[step.node])
        uses.append(StepUse(step.inputs, step.outputs,
                            view=op_has_trait(step.op_type, Trait.VIEW),
                            inplace=over is not None or op_has_trait(step.op_type,
                                                                      Trait.INPLACE),
                            inplace_input=over or 0, exclusive=over is not None))
    return tuple(uses)


def pinned_slots(executable: Executable) -> frozenset[int]:
    """Slots that never live in the arena: graph inputs, constants and graph outputs."""
    return frozenset({spec.slot for spec in executable.inputs}
                     | {spec.slot for spec in executable.outputs} | set(executable.constants))


def allocated_slots(executable: Executable) -> frozenset[int]:
    """The outputs of steps whose engines return memory of their own (off the arena)."""
    nodes = {node.name: node for node in executable.graph.nodes}
    return frozenset(slot for step in executable.steps
                     if get_engine(step.engine).allocates(nodes[step.node])
                     for slot in step.outputs)


def static_plan(executable: Executable) -> tuple[dict[str, tuple[int, ...]], BoundPlan]:
    """The plan for the graph's own (all known) input shapes, made without binding
    kernels: every step counts as writing into its slot, but for the outputs its engine
    allocates."""
    shapes = {spec.name: tuple(int(d) for d in spec.desc.shape) for spec in executable.inputs}
    uses = step_uses(executable)
    writers = tuple(Task(_no_kernel, _no_writer, u.inputs, u.outputs, ()) for u in uses)
    program = Program(executable, (), writers, (), uses, pinned_slots(executable),
                      outside=allocated_slots(executable), separable=separable_steps(executable))
    return shapes, program.make_plan(shapes, executable.steps)


def _no_kernel(args: Any) -> list[np.ndarray]:
    raise AssertionError("a static plan's tasks are never run")


def _no_writer(args: Any, outs: Any) -> None:
    raise AssertionError("a static plan's tasks are never run")


def load(executable: Executable) -> Program:
    """Bind every step of ``executable`` to a kernel of its assigned engine."""
    nodes = {node.name: node for node in executable.graph.nodes}
    # constants the optimizer left pending (a folded, transposed filter) are computed
    # here, together, rather than one by one as the engines bind their kernels
    computed = compute_pending(node.attrs["value"] for node in nodes.values()
                               if node.op_type == "Const"
                               and isinstance(node.attrs.get("value"), Tensor))
    if computed:
        # The constants read their sources for the last time above. A parsed model's
        # file buffer is now held only by the parsed graph, and a discarded graph
        # (``ge.compile(ge.parse_onnx(path))``) is a cycle of nodes and values that only
        # the cycle collector frees: collect its young generations now (the graph was
        # just made; a full collection would also walk every older object), not after
        # the first runs have grown the heap beside it.
        gc.collect(1)
    steps = []
    tasks = []
    outside: set[int] = set()
    pooled = unpooled = False
    for step in executable.steps:
        engine = get_engine(step.engine)
        node = nodes[step.node]
        bound = engine.bind_node(node)
        steps.append(BoundStep(bound.kernel, step.inputs, step.outputs, step.release, node))
        tasks.append(Task(bound.kernel, bound.writer, step.inputs, step.outputs,
                          step.release))
        if bound.allocates:
            outside.update(step.outputs)
        if engine.owns_thread_pool:
            pooled = True
        else:
            unpooled = True
    # BLAS is called only from the engines without a pool of their own; where every step
    # runs on one, holding BLAS to one thread would cost a run two calls for nothing
    quiet_blas = pooled and unpooled
    template: list[Optional[np.ndarray]] = [None] * executable.num_slots
    for slot, name in executable.constants.items():
        template[slot] = nodes[name].attrs["value"].numpy()
    members: list[list[int]] = [[] for _ in range(executable.stream_count)]
    for index in range(len(executable.steps)):
        members[executable.streams[index] if executable.streams else 0].append(index)
    return Program(executable, tuple(steps), tuple(tasks), tuple(template),
                   step_uses(executable), pinned_slots(executable),
                   members=tuple(tuple(m) for m in members), outside=frozenset(outside),
                   quiet_blas=quiet_blas, separable=separable_steps(executable))


def separable_steps(executable: Executable) -> tuple[Optional[Separable], ...]:
    """Per step, how its node splits by batch (``slicing.separable``)."""
    nodes = {node.name: node for node in executable.graph.nodes}
    constants = frozenset(name for name in executable.constants.values())
    values = frozenset(value.name for name in constants for value in nodes[name].outputs)
    return tuple(separable(nodes[step.node], values) for step in executable.steps)
