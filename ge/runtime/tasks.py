"""The model-sink path: a whole task list run in one call, out of one planned arena.

The runtime knows tasks, not graphs. A :class:`Task` is a kernel (and, when its
engine has one, a writer that computes into given arrays), the value slots it reads
and writes, and the slots it frees. A :class:`TaskPlan` binds the list to one input
signature: for each task how it runs (``Mode``) and, for each output, where it lives:
at an offset in the arena, in a fresh buffer the run hands to the caller (a graph
output), or wherever the kernel put it (a value whose size only the data decides).

:func:`run_tasks` executes the list: no dictionaries, feed checks or planning per
task, only the loop below; a plan that keeps being run gets the same loop unrolled
into one generated function (``_straight_runner``), its indices fixed in the text.
Arenas come from the device heap (:class:`ArenaPool`), one per concurrent run, pooled
and bounded.
"""

from __future__ import annotations

import enum
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ge.errors import GEError
from ge.runtime.memory import DeviceHeap
from ge.runtime.threads import inherited

__all__ = ["Mode", "Task", "OutSpec", "TaskPlan", "SliceGroup", "TaskFailure", "Arena",
           "ArenaPool",
           "run_tasks", "run_on_streams", "timing_hooks", "Timing", "FRESH", "ANYWHERE"]

Kernel = Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]
Writer = Callable[[Sequence[Optional[np.ndarray]], Sequence[np.ndarray]], None]

#: an output offset meaning "a new buffer each run" (handed to the caller)
FRESH = -1
#: an output offset meaning "wherever the kernel puts it" (size known only once computed)
ANYWHERE = -2


class Mode(enum.IntEnum):
    """How a task runs under one plan."""

    KEEP = 0  # call the kernel, keep what it returns (copying it out of the arena)
    WRITE = 1  # call the writer on the planned output arrays
    COPY = 2  # call the kernel, copy into the planned arrays what belongs in the arena
    VIEW = 3  # output 0 is input 0 re-shaped: no kernel runs


@dataclass(frozen=True)
class Task:
    """A kernel with the slots it reads, writes and frees afterwards."""

    kernel: Kernel
    writer: Optional[Writer]
    inputs: tuple[int, ...]  # -1: absent optional input
    outputs: tuple[int, ...]
    release: tuple[int, ...]


@dataclass(frozen=True)
class OutSpec:
    """Where one output lives: ``offset`` in the arena, ``FRESH`` or ``ANYWHERE``."""

    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype


#: how a task of a slice group is handed one input or output in a slice: cut along axis
#: 0 (``value[start:stop]``), whole, or a buffer of one slice's size (``buffer[:n]``)
SLICED, WHOLE, INNER = 0, 1, 2


@dataclass(frozen=True)
class SliceGroup:
    """Tasks ``first``..``last`` run slice by slice over axis 0: for each ``(start,
    stop)`` of ``slices``, every task in order, each input and output handed as
    ``inputs[k][j]`` / ``outputs[k][j]`` say (``SLICED``, ``WHOLE``, ``INNER``). Every
    task of a group is in ``Mode.WRITE`` with its outputs in the arena; an inner value's
    buffer holds one slice."""

    first: int
    last: int
    slices: tuple[tuple[int, int], ...]
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]

    def run(self, tasks: Sequence[Task], values: list[Optional[np.ndarray]],
            complete: Sequence[Optional[list[np.ndarray]]],
            before: Optional[Callable[[int], None]] = None,
            after: Optional[Callable[[int], None]] = None, releasing: bool = True) -> None:
        members = range(self.first, self.last + 1)
        for index in members:
            for slot, out in zip(tasks[index].outputs, complete[index] or ()):
                values[slot] = out
        for start, stop in self.slices:
            count = stop - start
            for offset, index in enumerate(members):
                task = tasks[index]
                how = self.inputs[offset]
                args = [None if slot < 0 else
                        values[slot][start:stop] if h == SLICED else  # type: ignore[index]
                        values[slot][:count] if h == INNER else  # type: ignore[index]
                        values[slot] for slot, h in zip(task.inputs, how)]
                outs = complete[index]
                assert outs is not None and task.writer is not None
                cut = [out[start:stop] if h == SLICED else out[:count]
                       for out, h in zip(outs, self.outputs[offset])]
                if before is not None:
                    before(index)
                try:
                    task.writer(args, cut)
                except Exception as error:  # noqa: BLE001 - the caller names the node
                    raise TaskFailure(index, args, error) from error
                if after is not None:
                    after(index)
        if releasing:
            for index in members:
                for slot in tasks[index].release:
                    values[slot] = None


@dataclass(frozen=True)
class TaskPlan:
    """A task list bound to one input signature."""

    modes: tuple[Mode, ...]
    outs: tuple[tuple[OutSpec, ...], ...]
    arena_bytes: int
    #: runs of tasks that go slice by slice over the batch (``SliceGroup``)
    groups: tuple[SliceGroup, ...] = ()
    #: each group by its first task (made from ``groups``)
    group_starts: dict[int, SliceGroup] = field(init=False, repr=False, compare=False)
    #: the plan's straight-line runner (``_straight_runner``) and the task list it was
    #: made for, once the plan has run ``STRAIGHT_AFTER`` times on one thread
    straight: list[Any] = field(default_factory=lambda: [0, None, None], compare=False,
                                repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "group_starts", {g.first: g for g in self.groups})


class TaskFailure(Exception):
    """A task raised: which one, on which arguments (the caller names the node)."""

    def __init__(self, index: int, args: Sequence[Optional[np.ndarray]],
                 error: Exception) -> None:
        super().__init__(f"task {index} failed: {error}")
        self.index = index
        self.arguments = list(args)
        self.error = error


class Arena:
    """One block of device memory and the typed views a plan makes in it."""

    def __init__(self, device: Any, nbytes: int) -> None:
        self.device = device
        self.nbytes = nbytes
        self.ptr = device.allocate(max(nbytes, 1))
        self.bytes = device.view(self.ptr, max(nbytes, 1))
        self._views_for: Optional[TaskPlan] = None
        self._views: list[list[Optional[np.ndarray]]] = []
        self._complete_for: Optional[TaskPlan] = None
        self._complete: list[Optional[list[np.ndarray]]] = []

    def views(self, plan: TaskPlan) -> list[list[Optional[np.ndarray]]]:
        """Per task, per output: its array in this arena, or None (fresh or anywhere)."""
        if self._views_for is not plan:
            self._views = [[self._view(spec) for spec in specs] for specs in plan.outs]
            self._views_for = plan
        return self._views

    def complete_views(self, plan: TaskPlan) -> list[Optional[list[np.ndarray]]]:
        """Per task: its output arrays when every one lies in this arena, else None."""
        views = self.views(plan)
        if self._complete_for is not plan:
            self._complete = [None if any(a is None for a in v) else
                              [a for a in v if a is not None] for v in views]
            self._complete_for = plan
        return self._complete

    def _view(self, spec: OutSpec) -> Optional[np.ndarray]:
        if spec.offset < 0:
            return None
        size = int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize
        return self.bytes[spec.offset:spec.offset + size].view(spec.dtype).reshape(spec.shape)

    def holds(self, array: np.ndarray) -> bool:
        """True when ``array`` may lie in this arena's memory."""
        return bool(np.may_share_memory(array, self.bytes))

    def free(self) -> None:
        """Give the memory back to the device (views made before stay readable)."""
        try:
            self.device.free(self.ptr)
        except GEError:
            pass  # the device was reset under us: its heap already let go of the block


#: the heap model arenas come from: apart from the blocks ``acl.rt.malloc`` hands out, so
#: that resetting a device (which frees what the user left allocated) never frees the
#: arenas of sessions still alive
MODEL_HEAP = DeviceHeap(name="model arenas")


class ArenaPool:
    """Arenas for concurrent runs: taken for a run and given back; at most ``keep``
    idle ones are kept. Idle arenas are freed when the pool is cleared or collected."""

    def __init__(self, device: Any = MODEL_HEAP, keep: int = 2) -> None:
        self.device = device
        self.keep = keep
        self._idle: list[Arena] = []
        self._lock = threading.Lock()
        self.created = 0
        weakref.finalize(self, _free_all, self._idle)

    def acquire(self, nbytes: int) -> Arena:
        """An arena of at least ``nbytes``: an idle one when one is big enough."""
        idle = self._idle
        if len(idle) == 1:  # the usual case, one run at a time: no lock, no search
            try:
                arena = idle.pop()  # atomic: a concurrent taker gets IndexError
            except IndexError:
                pass
            else:
                if arena.nbytes >= nbytes:
                    return arena
                with self._lock:
                    idle.append(arena)
        with self._lock:
            fitting = [a for a in self._idle if a.nbytes >= nbytes]
            if fitting:
                arena = min(fitting, key=lambda a: a.nbytes)
                self._idle.remove(arena)
                return arena
            smaller = max(self._idle, key=lambda a: a.nbytes) if self._idle else None
            if smaller is not None:
                self._idle.remove(smaller)
        if smaller is not None:
            smaller.free()
        arena = Arena(self.device, nbytes)
        with self._lock:
            self.created += 1
        return arena

    def release(self, arena: Arena) -> None:
        """Take ``arena`` back after a run."""
        idle = self._idle
        if not idle and self.keep:
            idle.append(arena)  # atomic; at worst ``keep`` is passed by one, briefly
            return
        with self._lock:
            if len(idle) < self.keep:
                idle.append(arena)
                return
        arena.free()

    def idle_bytes(self) -> int:
        """Bytes held by idle arenas."""
        with self._lock:
            return sum(a.nbytes for a in self._idle)

    def clear(self) -> None:
        """Free every idle arena."""
        with self._lock:
            idle, self._idle = self._idle, []
        for arena in idle:
            arena.free()


def _free_all(arenas: list[Arena]) -> None:
    while arenas:
        arenas.pop().free()


def run_tasks(tasks: Sequence[Task], plan: TaskPlan, arena: Arena,
              values: list[Optional[np.ndarray]],
              given: Optional[dict[int, np.ndarray]] = None,
              indices: Optional[Sequence[int]] = None,
              before: Optional[Callable[[int], None]] = None,
              after: Optional[Callable[[int], None]] = None,
              releasing: bool = True) -> None:
    """Run the tasks in order, reading and writing ``values`` (slot -> array).

    ``given``: arrays that outputs planned ``FRESH`` are written into (device buffers
    the caller allocated). ``indices``: run only these tasks, in this order (one
    stream's share); ``before(i)``/``after(i)`` are called around task ``i`` (waits
    for and signals of other streams). ``releasing`` off keeps every value to the end
    (on several streams a value's last reader in the schedule may not be the last to
    run).
    """
    with np.errstate(all="ignore"):  # IEEE results without warnings, as the kernels give
        _run(tasks, plan, arena, values, given, indices, before, after, releasing)


def _run(tasks: Sequence[Task], plan: TaskPlan, arena: Arena,
         values: list[Optional[np.ndarray]], given: Optional[dict[int, np.ndarray]],
         indices: Optional[Sequence[int]], before: Optional[Callable[[int], None]],
         after: Optional[Callable[[int], None]], releasing: bool) -> None:
    views = arena.views(plan)
    complete = arena.complete_views(plan)
    if indices is None and before is None and after is None and releasing:
        runner = _straight_runner(tasks, plan)
        if runner is not None:
            runner(values, views, complete, given, arena)
            return
    modes = plan.modes
    starts = plan.group_starts
    skip_to = -1
    for index in range(len(tasks)) if indices is None else indices:
        if index <= skip_to:
            continue
        task = tasks[index]
        group = starts.get(index)
        if group is not None:
            group.run(tasks, values, complete, before, after, releasing)
            skip_to = group.last
            continue
        if before is not None:
            before(index)
        args = [values[slot] if slot >= 0 else None for slot in task.inputs]
        mode = modes[index]
        try:
            if mode is Mode.VIEW:
                source = args[0]
                assert source is not None
                values[task.outputs[0]] = source.reshape(plan.outs[index][0].shape)
            elif mode is Mode.WRITE:
                outs = complete[index] or _write_targets(views[index], plan.outs[index],
                                                         task.outputs, given)
                assert task.writer is not None
                task.writer(args, outs)
                for slot, out in zip(task.outputs, outs):
                    values[slot] = out
            else:
                produced = _placed(task.kernel(args), views[index], plan.outs[index],
                                   task.outputs, arena, given)
                for slot, array in zip(task.outputs, produced):
                    values[slot] = array
        except Exception as error:  # noqa: BLE001 - the caller names the node
            raise TaskFailure(index, args, error) from error
        if releasing:
            for slot in task.release:
                values[slot] = None
        if after is not None:
            after(index)


#: runs of one plan (its whole task list, one thread) after which it gets a straight-line
#: runner; the first runs take the loop, so a plan used once costs no code generation
STRAIGHT_AFTER = 2
#: task lists longer than this keep the loop (the generated function's compile time
#: grows with its length; per task the loop costs about 0.5 us more)
STRAIGHT_MAX_TASKS = 20_000


def _straight_runner(tasks: Sequence[Task], plan: TaskPlan
                     ) -> Optional[Callable[..., None]]:
    """The plan's tasks as one generated Python function, or None until the plan has
    run ``STRAIGHT_AFTER`` times.

    The loop of ``_run`` pays, per task, for building the argument list in a
    comprehension, looking up the task, its mode and its views, and zipping the outputs
    into their slots: about 0.6 us, as much as a small kernel. The generated function
    does the same work with every index, mode and shape fixed in its text: a line per
    task like ``o = C[5]; W5([V[27], V[13]], o); V[28] = o[0]; V[27] = None``.
    """
    state = plan.straight
    if state[1] is not None and state[2] is tasks:
        return state[1]
    if len(tasks) > STRAIGHT_MAX_TASKS:
        return None
    state[0] += 1
    if state[0] <= STRAIGHT_AFTER:
        return None
    runner = _generate(tasks, plan)
    state[1], state[2] = runner, tasks
    return runner


def _generate(tasks: Sequence[Task], plan: TaskPlan) -> Callable[..., None]:
    names: dict[str, Any] = {"_write_targets": _write_targets, "_placed": _placed,
                             "_failure": _failure, "TASKS": tasks,
                             "TaskFailure": TaskFailure}
    lines = ["def run(V, views, C, given, arena):", "    i = -1", "    try:"]
    starts = plan.group_starts
    inside = {index for group in plan.groups for index in range(group.first + 1, group.last + 1)}
    for index, (task, mode, specs) in enumerate(zip(tasks, plan.modes, plan.outs)):
        if index in inside:
            continue
        if index in starts:
            names[f"G{index}"] = starts[index]
            lines.append(f"        i = {index}")
            lines.append(f"        G{index}.run(TASKS, V, C)")
            continue
        args = ", ".join(f"V[{slot}]" if slot >= 0 else "None" for slot in task.inputs)
        step = [f"i = {index}"]
        if mode is Mode.VIEW:
            names[f"S{index}"] = specs[0].shape
            step.append(f"V[{task.outputs[0]}] = V[{task.inputs[0]}].reshape(S{index})")
        else:
            names[f"P{index}"], names[f"Q{index}"] = specs, task.outputs
            if mode is Mode.WRITE:
                names[f"W{index}"] = task.writer
                if all(spec.offset >= 0 for spec in specs):
                    step.append(f"o = C[{index}]")
                else:
                    step.append(f"o = _write_targets(views[{index}], P{index}, Q{index}, given)")
                step.append(f"W{index}([{args}], o)")
            else:
                names[f"K{index}"] = task.kernel
                step.append(f"o = _placed(K{index}([{args}]), views[{index}], P{index}, "
                            f"Q{index}, arena, given)")
            step.extend(f"V[{slot}] = o[{k}]" for k, slot in enumerate(task.outputs))
        if task.release:
            step.append(" = ".join(f"V[{slot}]" for slot in task.release) + " = None")
        lines.extend("        " + line for line in step)
    if not tasks:
        lines.append("        pass")
    lines += ["    except TaskFailure:", "        raise",
              "    except Exception as error:  # noqa: BLE001 - the caller names the node",
              "        raise _failure(TASKS, i, V, error) from error"]
    code = compile("\n".join(lines) + "\n", f"<ge plan of {len(tasks)} tasks>", "exec")
    exec(code, names)  # noqa: S102 - text made above from slot numbers only
    runner: Callable[..., None] = names["run"]
    return runner


def _failure(tasks: Sequence[Task], index: int, values: list[Optional[np.ndarray]],
             error: Exception) -> TaskFailure:
    """The ``TaskFailure`` of task ``index`` (its inputs are still in their slots: a
    task's slots are cleared only after it ran)."""
    args = [values[slot] if slot >= 0 else None for slot in tasks[index].inputs]
    return TaskFailure(index, args, error)


def _write_targets(views: list[Optional[np.ndarray]], specs: Sequence[OutSpec],
                   slots: Sequence[int], given: Optional[dict[int, np.ndarray]]
                   ) -> list[np.ndarray]:
    outs = []
    for view, spec, slot in zip(views, specs, slots):
        if view is None:
            view = given.get(slot) if given is not None else None
            if view is None:
                view = np.empty(spec.shape, spec.dtype)
        outs.append(view)
    return outs


def _placed(produced: list[np.ndarray], views: list[Optional[np.ndarray]],
            specs: Sequence[OutSpec], slots: Sequence[int], arena: Arena,
            given: Optional[dict[int, np.ndarray]]) -> list[np.ndarray]:
    """The kernel's results where the plan keeps them: copied into their arena views
    (or into the caller's buffers), or, for a result kept where the kernel put it,
    copied out of the arena when it is a view of an input there (that input's bytes go
    to other values once it dies)."""
    placed = []
    for array, view, spec, slot in zip(produced, views, specs, slots):
        if view is None and given is not None:
            view = given.get(slot)
        if view is None:
            placed.append(array.copy() if arena.holds(array) else array)
            continue
        if array.shape != spec.shape or array.dtype != spec.dtype:
            raise ValueError(f"the kernel gave {array.dtype}{list(array.shape)} where the "
                             f"memory plan holds {spec.dtype}{list(spec.shape)}")
        np.copyto(view, array)
        placed.append(view)
    return placed


class _Aborted(Exception):
    """Another stream of the same run failed: stop here."""


#: one task's timing: (task index, start ns, end ns, thread id), ``time.perf_counter_ns``
Timing = tuple[int, int, int, int]


def timing_hooks(timings: list[Timing]) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """``before``/``after`` hooks that append each task's timing to ``timings``."""
    starts: dict[int, int] = {}

    def before(index: int) -> None:
        starts[index] = time.perf_counter_ns()

    def after(index: int) -> None:
        timings.append((index, starts.pop(index), time.perf_counter_ns(),
                        threading.get_ident()))

    return before, after


def run_on_streams(tasks: Sequence[Task], plan: TaskPlan, arena: Arena,
                   values: list[Optional[np.ndarray]], given: Optional[dict[int, np.ndarray]],
                   members: Sequence[Sequence[int]], waits: Sequence[Sequence[int]],
                   workers: Sequence[Any], timings: Optional[list[Timing]] = None,
                   thread_limit: Optional[int] = None) -> None:
    """Run the tasks split over streams: ``members[0]`` on the calling thread, each
    other ``members[k]`` on ``workers[k - 1]`` (runtime streams); task ``i`` first waits
    for the tasks ``waits[i]`` (events recorded after them on their streams). A failure
    on any stream stops the others and is raised here. ``timings`` collects each task's
    time from the end of its waits to the end of its kernel; ``thread_limit`` is the
    run's intra-op limit, held on every stream's thread."""
    done = {j: threading.Event() for wait in waits for j in wait}
    failures: list[BaseException] = []
    timed_before, timed_after = timing_hooks(timings) if timings is not None else (None, None)

    def before(index: int) -> None:
        for j in waits[index]:
            done[j].wait()
        if failures:
            raise _Aborted
        if timed_before is not None:
            timed_before(index)

    def after(index: int) -> None:
        if timed_after is not None:
            timed_after(index)
        event = done.get(index)
        if event is not None:
            event.set()

    def run_share(indices: Sequence[int], finished: threading.Event) -> None:
        try:
            with inherited(thread_limit):
                run_tasks(tasks, plan, arena, values, given, indices, before, after,
                          releasing=False)
        except _Aborted:
            pass
        except BaseException as error:  # noqa: BLE001 - raised by the calling thread
            failures.append(error)
            for event in done.values():
                event.set()
        finally:
            finished.set()

    finished = [threading.Event() for _ in members]
    for k in range(1, len(members)):
        workers[k - 1].submit(run_share, members[k], finished[k])
    run_share(members[0], finished[0])
    for event in finished[1:]:
        event.wait()
    if failures:
        raise failures[0]
