"""``ge.Session``: runs an executable.

    session = ge.Session(ge.compile(graph))
    outputs = session.run({"input": batch})          # host arrays in, host arrays out

As in the seed's section 6.1, a feed may also be a device buffer
``(pointer, nbytes)`` from ``acl.rt.malloc``; the outputs then come back as
device buffers ``(pointer, nbytes)`` that the caller frees with ``acl.rt.free``.
A dimension declared ``-1`` takes its size from the fed array, or, for a device
buffer, from the byte count. ``run`` is re-entrant: each call has its own
values, so one session may serve several threads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from ge.compiler import Executable, IOSpec, compile
from ge.compiler.loader import BoundPlan, Program, load
from ge.compiler.specialize import broken_names, split_dimension_names
from ge.errors import ExecutionError, GEError, GERuntimeError, InputError
from ge.ir import Node, TensorDesc
from ge.ir.tensor import format_shape
from ge.runtime.tasks import Arena, ArenaPool, TaskFailure, run_tasks

__all__ = ["Session"]


class Session:
    """Runs a compiled graph; the seed's ``ge.Session(compiled_graph)``."""

    def __init__(self, executable: Executable) -> None:
        if not isinstance(executable, Executable):
            raise GERuntimeError(f"ge.Session expects the result of ge.compile(graph), "
                                 f"got {type(executable).__name__}")
        self._executable = executable
        self._program: Optional[Program] = load(executable)
        # one arena per concurrent run, from the runtime's model heap, pooled
        self._arenas = ArenaPool(keep=ARENAS_KEPT)
        # plans for feeds that break the dimension names a model file declared (see
        # ge.compiler.specialize): broken names -> session, the most recent last
        self._specialized: dict[frozenset[str], Session] = {}
        self._lock = threading.Lock()

    # -- description ------------------------------------------------------------------
    @property
    def executable(self) -> Executable:
        """The executable this session runs."""
        return self._executable

    def get_inputs(self) -> list[tuple[str, TensorDesc]]:
        """The feed keys and their descriptors, in graph order."""
        return [(spec.name, spec.desc) for spec in self._executable.inputs]

    def get_outputs(self) -> list[tuple[str, TensorDesc]]:
        """The output names and their descriptors (``-1`` where known only at run time)."""
        return [(spec.name, spec.desc) for spec in self._executable.outputs]

    # -- running ----------------------------------------------------------------------
    def run(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """Run the graph once; return ``{output name: array}`` in the graph's output order.

        Feeds are host arrays (or anything ``np.asarray`` takes) or device buffers
        ``(pointer, nbytes)``. Given device buffers, the outputs are new device
        buffers owned by the caller.
        """
        program = self._program
        if program is None:
            raise GERuntimeError("this session was finalized; create a new ge.Session")
        if not isinstance(feed, Mapping):
            raise InputError(f"Session.run expects a dict of input name to array, "
                             f"got {type(feed).__name__}")
        on_device = any(_is_device_buffer(v) for v in feed.values())
        try:
            arrays = _FeedChecker(self._executable.inputs).check(feed)
        except _BrokenName:
            specialized = self._specialized_for(feed)
            if specialized is None:
                raise
            return specialized.run(feed)
        plan = program.plan_for({name: array.shape for name, array in arrays.items()})
        values = list(program.template)
        for spec in self._executable.inputs:
            values[spec.slot] = arrays[spec.name]
        arena = self._arenas.acquire(plan.tasks.arena_bytes)
        try:
            _execute(program, plan, arena, values)
            results = {spec.name: self._result(spec, values[spec.slot], arrays.values(), arena)
                       for spec in self._executable.outputs}
        finally:
            values.clear()
            self._arenas.release(arena)
        return _to_device(results) if on_device else results

    def _result(self, spec: IOSpec, array: Optional[np.ndarray], feeds: Any,
                arena: Arena) -> np.ndarray:
        assert array is not None
        if array.dtype != spec.desc.dtype.np_dtype:
            raise ExecutionError(f"output {spec.name!r} came out as {array.dtype}; the graph "
                                 f"declares {spec.desc.dtype.short_name} (a kernel bug)")
        aliased = arena.holds(array) or any(np.may_share_memory(array, fed) for fed in feeds)
        if aliased or not array.flags.writeable:
            return np.array(array, copy=True)
        return array

    def _specialized_for(self, feed: Mapping[str, Any]) -> Optional[Session]:
        """The session for a feed that gives one dimension name different sizes, or None
        where the names are a promise (a graph built with GE's API)."""
        if self._executable.source is None:
            return None
        shapes = {name: np.shape(value) for name, value in feed.items()
                  if not _is_device_buffer(value)}
        declared = [(spec.name, spec.desc.shape) for spec in self._executable.inputs]
        key = broken_names(declared, shapes)
        if not key:
            return None
        with self._lock:
            session = self._specialized.pop(key, None)
            if session is None:
                source = self._executable.source
                assert source is not None
                graph = split_dimension_names(source, key)
                options = self._executable.options
                session = Session(compile(graph, opt_level=options.get("opt_level", 3),
                                          engines=options.get("engines"),
                                          verify=options.get("verify", False)))
            self._specialized[key] = session
            while len(self._specialized) > MAX_SPECIALIZED:
                del self._specialized[next(iter(self._specialized))]
        return session

    @property
    def specialized(self) -> list[frozenset[str]]:
        """The broken dimension names this session keeps a plan for, oldest first."""
        return list(self._specialized)

    def finalize(self) -> None:
        """Release the session's resources; it cannot run afterwards."""
        self._program = None
        self._specialized.clear()
        self._arenas.clear()

    @property
    def cached_plans(self) -> int:
        """How many input signatures have a memory plan cached (at most ``MAX_PLANS``)."""
        return 0 if self._program is None else self._program.cached_plans

    @property
    def idle_arena_bytes(self) -> int:
        """Bytes of the arenas this session keeps between runs."""
        return self._arenas.idle_bytes()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.finalize()


def _execute(program: Program, plan: BoundPlan, arena: Arena,
             values: list[Optional[np.ndarray]]) -> None:
    try:
        run_tasks(program.tasks, plan.tasks, arena, values)
    except TaskFailure as failure:
        if isinstance(failure.error, GEError):
            raise failure.error from None
        node = program.steps[failure.index].node
        raise ExecutionError(_failure_message(node, failure.arguments, failure.error)) \
            from failure.error


def _failure_message(node: Node, args: Sequence[Optional[np.ndarray]], error: Exception) -> str:
    shapes = ", ".join("absent" if a is None else f"{a.dtype}{list(a.shape)}" for a in args)
    return (f"{node.op_type} node {node.name!r} failed on inputs ({shapes}): "
            f"{type(error).__name__}: {error}")


def _is_device_buffer(value: Any) -> bool:
    return (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value))


#: plans kept per session for feeds that break the model's dimension names
MAX_SPECIALIZED = 4

#: idle arenas a session keeps for its next runs (more are made while more runs overlap)
ARENAS_KEPT = 2


class _BrokenName(InputError):
    """A feed gives one dimension name two sizes."""


class _FeedChecker:
    """Turns a feed into arrays, checking names, dtypes and shapes against the inputs.

    A concrete dimension must match. A named dimension takes its size from the first
    input that has it, and every other place it appears must agree: in a GE graph a
    name means "equal", and passes rely on it. Where the names are only a model file's
    hints (ONNX's ``dim_param``, which onnxruntime does not enforce), the session runs
    a feed that breaks them on a plan compiled with those dimensions apart.
    """

    def __init__(self, inputs: list[IOSpec]) -> None:
        self.inputs = inputs
        self.bound: dict[str, int] = {}

    def check(self, feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        expected = {spec.name for spec in self.inputs}
        unknown = [name for name in feed if name not in expected]
        if unknown:
            raise InputError(f"unknown input {unknown[0]!r}; the graph's inputs are: "
                             f"{', '.join(self._listing())}")
        arrays: dict[str, np.ndarray] = {}
        for spec in self.inputs:
            if spec.name not in feed:
                raise InputError(f"missing input {spec.name!r} ({spec.desc}); the graph's inputs "
                                 f"are: {', '.join(self._listing())}")
            value = feed[spec.name]
            array = _read_device(spec, value) if _is_device_buffer(value) else \
                self._host_array(spec, value)
            self._check_shape(spec, array)
            arrays[spec.name] = array
        return arrays

    def _listing(self) -> list[str]:
        return [f"{spec.name} ({spec.desc})" for spec in self.inputs]

    def _host_array(self, spec: IOSpec, value: Any) -> np.ndarray:
        dtype = spec.desc.dtype.np_dtype
        if isinstance(value, np.ndarray):
            if value.dtype != dtype:
                raise InputError(f"input {spec.name!r} has dtype {value.dtype}; expected "
                                 f"{spec.desc.dtype.short_name} (convert it with .astype)")
            return value
        try:
            return np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as error:
            raise InputError(f"input {spec.name!r} cannot be read as "
                             f"{spec.desc.dtype.short_name}: {error}") from None

    def _check_shape(self, spec: IOSpec, array: np.ndarray) -> None:
        declared = spec.desc.shape
        if array.ndim != len(declared):
            raise InputError(f"input {spec.name!r} has shape {list(array.shape)}; expected "
                             f"rank {len(declared)} {format_shape(declared)}")
        for axis, (got, want) in enumerate(zip(array.shape, declared)):
            if isinstance(want, str):
                bound = self.bound.setdefault(want, got)
                if bound != got:
                    raise _BrokenName(f"input {spec.name!r} dimension {axis} ({want!r}) is {got}, "
                                     f"but another input bound {want!r} to {bound}")
            elif want >= 0 and got != want:
                raise InputError(f"input {spec.name!r} has shape {list(array.shape)}; expected "
                                 f"{format_shape(declared)} (dimension {axis} must be {want})")


def _read_device(spec: IOSpec, buffer: tuple[int, int]) -> np.ndarray:
    from ge.runtime.device import device_of_pointer

    pointer, nbytes = int(buffer[0]), int(buffer[1])
    shape = _shape_from_bytes(spec, nbytes)
    device = device_of_pointer(pointer)
    return device.array(pointer, spec.desc.dtype.np_dtype, shape).copy()


def _shape_from_bytes(spec: IOSpec, nbytes: int) -> tuple[int, ...]:
    item = spec.desc.dtype.itemsize
    known = 1
    unknown = [axis for axis, dim in enumerate(spec.desc.shape)
               if not (isinstance(dim, int) and dim >= 0)]
    for dim in spec.desc.shape:
        if isinstance(dim, int) and dim >= 0:
            known *= dim
    if len(unknown) > 1:
        raise InputError(f"input {spec.name!r} {spec.desc} has {len(unknown)} unknown dimensions; "
                         f"a device buffer's byte count can fix only one (feed a host array)")
    row = known * item
    if not unknown:
        if nbytes != row:
            raise InputError(f"input {spec.name!r} {spec.desc} needs {row} bytes; the device "
                             f"buffer holds {nbytes}")
        return tuple(int(d) for d in spec.desc.shape)
    if row == 0 or nbytes % row:
        raise InputError(f"input {spec.name!r}: {nbytes} bytes is not a whole number of "
                         f"{row}-byte items of {spec.desc}")
    shape = [d for d in spec.desc.shape]
    shape[unknown[0]] = nbytes // row
    return tuple(int(d) for d in shape)


def _to_device(results: dict[str, np.ndarray]) -> dict[str, tuple[int, int]]:
    from ge.runtime.device import get_device

    device = get_device()
    buffers: dict[str, tuple[int, int]] = {}
    for name, array in results.items():
        array = np.ascontiguousarray(array)
        pointer = device.allocate(array.nbytes)
        device.copy_in(pointer, array)
        buffers[name] = (pointer, array.nbytes)
    return buffers
