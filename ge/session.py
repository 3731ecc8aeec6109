"""``ge.Session``: runs an executable.

    session = ge.Session(ge.compile(graph))
    outputs = session.run({"input": batch})          # host arrays in, host arrays out

As in the seed's section 6.1, a feed may also be a device buffer
``(pointer, nbytes)`` from ``acl.rt.malloc``; the outputs then come back as
device buffers ``(pointer, nbytes)`` that the caller frees with ``acl.rt.free``.
A dimension declared ``-1`` takes its size from the fed array, or, for a device
buffer, from the byte count. A run plans memory for its input signature (cached),
takes an arena from the session's pool and executes the runtime's task list in it;
``run_async`` queues the same on a stream. ``run`` is re-entrant: each call has its
own values and arena, so one session may serve several threads.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional

import numpy as np

from ge.compiler import Executable, IOSpec, compile
from ge.compiler.loader import BoundPlan, Program, load
from ge.compiler.profile import Profile
from ge.compiler.specialize import (
    broken_names,
    fix_input_shapes,
    shape_steps,
    split_dimension_names,
)
from ge.errors import ExecutionError, GEError, GERuntimeError, InputError
from ge.ir import Node, TensorDesc
from ge.ir.tensor import format_shape
from ge.runtime.acl_rt import stream_of
from ge.runtime.memory import tune_process_heap
from ge.runtime.stream import Stream
from ge.runtime.tasks import (
    Arena,
    ArenaPool,
    TaskFailure,
    Timing,
    run_on_streams,
    run_tasks,
    timing_hooks,
)
from ge.runtime.threads import limited, resolve_threads

__all__ = ["Session", "AsyncRun"]


class Session:
    """Runs a compiled graph; the seed's ``ge.Session(compiled_graph)``."""

    def __init__(self, executable: Executable, threads: Optional[int] = None,
                 specialize: bool = True) -> None:
        if not isinstance(executable, Executable):
            raise GERuntimeError(f"ge.Session expects the result of ge.compile(graph), "
                                 f"got {type(executable).__name__}")
        self._executable = executable
        try:
            #: intra-op threads per kernel: this argument, else ge.compile's, else the
            #: GE_NUM_THREADS environment variable, else None (BLAS's and numba's own)
            self.threads = resolve_threads(threads, executable.options.get("threads"))
        except ValueError as error:
            raise GERuntimeError(str(error)) from None
        #: the thread limit runs take: ``threads`` where given, else one thread for a
        #: graph whose every step is tiny (``report["threads"]["serial"]``), else None
        self.run_threads = self.threads if self.threads is not None else (
            1 if executable.report.get("threads", {}).get("serial") else None)
        tune_process_heap()  # kernels' temporaries reused by the C heap run after run
        self._program: Optional[Program] = load(executable)
        # one arena per concurrent run, from the runtime's model heap, pooled
        self._arenas = ArenaPool(keep=ARENAS_KEPT)
        self._own_stream: Optional[Stream] = None  # run_async's default, made on first use
        self._workers: list[Stream] = []  # the executable's streams 1.., made on first use
        #: the ``Profile`` of the latest ``run(feed, profile=True)``
        self.last_profile: Optional[Profile] = None
        # plans for feeds that break the dimension names a model file declared (see
        # ge.compiler.specialize): broken names -> session, the most recent last
        self._specialized: dict[frozenset[str], Session] = {}
        self._lock = threading.Lock()
        # the latest host feed's signature and plan: a feed with the same names, dtypes
        # and shapes skips the checks and the plan lookup (see _Repeat)
        self._repeat: Optional[_Repeat] = None
        #: whether input shapes run again and again may get a plan compiled for them
        #: alone (see ``shape_specializations``): asked for, and the graph has dynamic
        #: inputs; they get one when the graph computes from their shapes at run time
        #: (``specialize.shape_steps``) or when the run is small (``_small_run``)
        self.specialize = specialize and not all(spec.desc.is_static
                                                 for spec in executable.inputs)
        self._computes_shapes = self.specialize and bool(shape_steps(executable.graph))
        # feed signature -> the session compiled for those shapes, or the error that
        # compiling it raised (the signature then runs on the dynamic plan)
        self._by_shapes: dict[tuple[Any, ...], Session | GEError] = {}
        self._constant_bytes: Optional[int] = None  # of the graph's constants, once asked

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
    def run(self, feed: Mapping[str, Any], profile: bool = False) -> dict[str, Any]:
        """Run the graph once; return ``{output name: array}`` in the graph's output order.

        Feeds are host arrays (or anything ``np.asarray`` takes) or device buffers
        ``(pointer, nbytes)``, read in place. Given device buffers, the outputs are
        written straight into new device buffers owned by the caller, returned as
        ``(pointer, nbytes)``. With ``profile``, each step's time is recorded and the
        run's ``Profile`` (top-k table, Chrome trace) is left in ``last_profile``.
        """
        if not profile:
            repeat = self._repeat
            if repeat is not None:
                arrays = repeat.match(feed)
                if arrays is not None:
                    if repeat.pending:
                        repeat.runs += 1
                        if repeat.runs >= SPECIALIZE_AFTER:
                            return self._run_specialized(repeat, arrays)
                    return repeat.run(arrays)
        if self._by_shapes and type(feed) is dict:
            found = self._by_shapes.get(_signature(feed))
            if isinstance(found, Session):
                outputs = found.run(feed, profile)
                if profile:
                    self.last_profile = found.last_profile
                return outputs
        prepared = self._prepare(feed, "Session.run")
        if not profile:
            outputs = prepared.execute()
            if not prepared.on_device and prepared.session is self:
                self._repeat = _Repeat(prepared)
                self._repeat.pending = (
                    self.specialize and len(self._by_shapes) < MAX_SHAPE_PLANS
                    and self._repeat.signature not in self._by_shapes
                    and (self._computes_shapes or self._small_run(prepared.plan)))
            return outputs
        timings: list[Timing] = []
        started = time.perf_counter_ns()
        outputs = prepared.execute(timings)
        ended = time.perf_counter_ns()
        self.last_profile = Profile.from_timings(prepared.program.executable, timings,
                                                 started, ended)
        return outputs

    def run_async(self, feed: Mapping[str, Any], stream: Any = None) -> AsyncRun:
        """Start a run on ``stream`` and return at once (the seed's section 6.2).

        ``stream`` is an ``acl.rt.create_stream`` handle, a ``ge.runtime.Stream``, or
        None (the session's own stream). The feed is checked now, in the caller's
        thread; device buffers are read when the run starts on the stream, after the
        work queued there before it (an ``acl.rt.memcpy_async`` into them, say). The
        handle's ``wait()`` returns what ``run`` would. For device feeds whose output
        sizes the input shapes decide, the handle is at once the dict of output
        buffers ``{name: (pointer, nbytes)}``, valid once an event recorded on the
        stream after this call is reached; otherwise reading it waits for the run.
        A failure is raised by ``wait()`` and by the stream's next synchronize.
        """
        prepared = self._prepare(feed, "Session.run_async")
        target = self._stream_for(stream)
        handle = AsyncRun(prepared.buffers_now())

        def work() -> None:
            try:
                handle._finish(prepared.execute())
            except BaseException as error:
                handle._fail(error)
                raise

        target.submit(work)
        return handle

    def _stream_workers(self) -> list[Stream]:
        """The worker streams for the executable's streams beyond the first (made once)."""
        wanted = self._executable.stream_count - 1
        if wanted <= 0:
            return []
        with self._lock:
            if len(self._workers) < wanted:
                self._workers = [Stream(label=f"session {id(self):#x} stream {k + 1}")
                                 for k in range(wanted)]
            return self._workers

    def _stream_for(self, stream: Any) -> Stream:
        if isinstance(stream, Stream):
            return stream
        found = stream_of(stream)
        if found is not None:
            return found
        with self._lock:
            if self._own_stream is None or self._own_stream.closed:
                self._own_stream = Stream(label=f"session {id(self):#x}")
            return self._own_stream

    def _prepare(self, feed: Mapping[str, Any], what: str) -> _PreparedRun:
        program = self._program
        if program is None:
            raise GERuntimeError("this session was finalized; create a new ge.Session")
        if not isinstance(feed, Mapping):
            raise InputError(f"{what} expects a dict of input name to array, "
                             f"got {type(feed).__name__}")
        on_device = any(_is_device_buffer(v) for v in feed.values())
        try:
            arrays = _FeedChecker(self._executable.inputs).check(feed)
        except _BrokenName:
            specialized = self._specialized_for(feed)
            if specialized is None:
                raise
            return specialized._prepare(feed, what)
        plan = program.plan_for({name: array.shape for name, array in arrays.items()})
        return _PreparedRun(self, program, plan, arrays, on_device)

    def _result(self, spec: IOSpec, array: Optional[np.ndarray], feeds: Any,
                arena: Arena) -> np.ndarray:
        assert array is not None
        if array.dtype != spec.desc.dtype.np_dtype:
            raise ExecutionError(f"output {spec.name!r} came out as {array.dtype}; the graph "
                                 f"declares {spec.desc.dtype.short_name} (a kernel bug)")
        if arena.holds(array) or not array.flags.writeable:
            return np.array(array, copy=True)
        for fed in feeds:
            if np.may_share_memory(array, fed):
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
                                          verify=options.get("verify", False),
                                          streams=options.get("streams"),
                                          threads=options.get("threads")),
                                  threads=self.threads)
            self._specialized[key] = session
            while len(self._specialized) > MAX_SPECIALIZED:
                del self._specialized[next(iter(self._specialized))]
        return session

    def _small_run(self, plan: BoundPlan) -> bool:
        """Whether a run of ``plan`` is small enough that a plan compiled for its shapes
        pays: its arena at most ``SMALL_RUN_BYTES`` and the graph's constants at most
        ``SMALL_RUN_CONSTANTS`` (the new plan packs its own copy of the weights). Such a
        run's time is mostly per-step work, and with the shapes fixed each small op gets
        its engine at compile time, where the dynamic plan asks at every call (a chain of
        1,000 ops over [1, 16]: 1.6 against 1.1 us a step)."""
        if plan.tasks.arena_bytes > SMALL_RUN_BYTES:
            return False
        if self._constant_bytes is None:
            graph = self._executable.graph
            self._constant_bytes = sum(
                int(getattr(node.attrs.get("value"), "nbytes", 0) or 0)
                for node in graph.nodes if node.op_type == "Const")
        return self._constant_bytes <= SMALL_RUN_CONSTANTS

    def _run_specialized(self, repeat: _Repeat, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """Compile the graph for the repeated feed's shapes, run the feed on it and make
        it the fast path for those shapes; on a compile error, warn once and keep the
        dynamic plan for them."""
        repeat.pending = False
        with self._lock:
            found = self._by_shapes.get(repeat.signature)
            if found is None:
                options = self._executable.options
                try:
                    graph = fix_input_shapes(self._executable.graph, repeat.shapes)
                    found = Session(compile(graph, opt_level=options.get("opt_level", 3),
                                            engines=options.get("engines"),
                                            verify=options.get("verify", False),
                                            streams=options.get("streams"),
                                            threads=options.get("threads")),
                                    threads=self.threads, specialize=False)
                except GEError as error:
                    warnings.warn(f"GE: compiling {self._executable.graph.name!r} for the "
                                  f"input shapes {_shapes_text(repeat.shapes)} failed, so "
                                  f"they run on the dynamic plan: {error}", RuntimeWarning,
                                  stacklevel=3)
                    found = error
                self._by_shapes[repeat.signature] = found
        if not isinstance(found, Session):
            return repeat.run(arrays)
        outputs = found.run(arrays)
        if found._repeat is not None and self._repeat is repeat:
            self._repeat = found._repeat  # its runs go straight to the specialized plan
        return outputs

    @property
    def shape_specializations(self) -> dict[str, Any]:
        """The input shapes compiled for on their own (``{input: shape}`` text) and, for
        each, its executable, or the error that compiling it raised."""
        return {_shapes_text(dict((name, shape) for name, _, shape in signature)):
                found.executable if isinstance(found, Session) else found
                for signature, found in self._by_shapes.items()}

    @property
    def specialized(self) -> list[frozenset[str]]:
        """The broken dimension names this session keeps a plan for, oldest first."""
        return list(self._specialized)

    def finalize(self) -> None:
        """Release the session's resources; it cannot run afterwards. Runs started with
        ``run_async`` on the session's own stream finish first."""
        own, self._own_stream = self._own_stream, None
        if own is not None:
            own.close()
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()
        self._program = None
        self._repeat = None
        self._specialized.clear()
        for found in self._by_shapes.values():
            if isinstance(found, Session):
                found.finalize()
        self._by_shapes.clear()
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


class _PreparedRun:
    """A checked feed with its plan: what one run needs, ready to execute anywhere."""

    def __init__(self, session: Session, program: Program, plan: BoundPlan,
                 arrays: dict[str, np.ndarray], on_device: bool) -> None:
        self.session = session
        self.program = program
        self.plan = plan
        self.arrays = arrays
        self.on_device = on_device
        self.device_outputs: Optional[dict[str, tuple[int, np.ndarray]]] = None
        if on_device:
            self.device_outputs = _allocate_outputs(program, plan)

    def buffers_now(self) -> Optional[dict[str, tuple[int, int]]]:
        """The device output buffers, when every one could be allocated before the run."""
        found = self.device_outputs
        if found is None or len(found) != len(self.program.executable.outputs):
            return None
        return {name: (pointer, view.nbytes) for name, (pointer, view) in found.items()}

    def execute(self, timings: Optional[list[Timing]] = None) -> dict[str, Any]:
        program, executable = self.program, self.program.executable
        values = list(program.template)
        for spec in executable.inputs:
            values[spec.slot] = self.arrays[spec.name]
        given = None
        if self.device_outputs is not None:
            given = {}
            for spec in executable.outputs:
                if spec.name in self.device_outputs and spec.slot not in given:
                    given[spec.slot] = self.device_outputs[spec.name][1]
        arena = self.session._arenas.acquire(self.plan.tasks.arena_bytes)
        try:
            threads = self.session.run_threads
            with limited(threads, blas=1 if program.quiet_blas else None):
                _execute(program, self.plan, arena, values, given,
                         self.session._stream_workers, timings, threads)
            fresh, check = self.plan.fresh, self.session._result
            results: dict[str, np.ndarray] = {
                spec.name: values[spec.slot] if spec.slot in fresh else  # type: ignore[misc]
                check(spec, values[spec.slot], self.arrays.values(), arena)
                for spec in executable.outputs}
        except BaseException:
            self._free_outputs()
            raise
        finally:
            values.clear()
            self.session._arenas.release(arena)
        if not self.on_device:
            return results
        return _to_device(results, self.device_outputs or {}, executable.outputs)

    def _free_outputs(self) -> None:
        if self.device_outputs:
            from ge.runtime.device import get_device

            device = get_device()
            for pointer, _ in self.device_outputs.values():
                device.free(pointer)
            self.device_outputs = {}


class _Repeat:
    """A host feed seen before: its names, dtypes and shapes, and the plan it got.

    A feed that is a dict of NumPy arrays with exactly those names, dtypes and shapes
    passes every check ``_FeedChecker`` makes (shapes equal to a checked feed's bind the
    dimension names the same way) and gets the same plan, so it runs at once: the
    fixed cost of a run falls from about 15 to about 8.5 us (a one-op model), most of the
    time of a small model's run.
    """

    __slots__ = ("session", "program", "plan", "signature", "count", "shapes", "pending",
                 "runs")

    def __init__(self, prepared: _PreparedRun) -> None:
        # the plan and the signature only: the fed arrays are the caller's to free
        self.session, self.program, self.plan = prepared.session, prepared.program, prepared.plan
        self.signature = _signature(prepared.arrays)
        self.count = len(self.signature)
        self.shapes = {name: shape for name, _, shape in self.signature}
        #: counting runs toward a plan compiled for these shapes alone (Session.run)
        self.pending = False
        self.runs = 1

    def match(self, feed: Any) -> Optional[dict[str, np.ndarray]]:
        """The feed's arrays when it repeats the signature, else None."""
        if type(feed) is not dict or len(feed) != self.count:
            return None
        arrays = {}
        for name, dtype, shape in self.signature:
            value = feed.get(name)
            if type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype:
                return None
            arrays[name] = value
        return arrays

    def run(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        program = self.program
        program.executable.last_plan = (self.shapes, self.plan)
        return _PreparedRun(self.session, program, self.plan, arrays, False).execute()


def _signature(feed: Mapping[str, Any]) -> tuple[Any, ...]:
    """A host feed's names, dtypes and shapes (an empty tuple entry for anything else)."""
    return tuple((name, getattr(value, "dtype", None), getattr(value, "shape", None))
                 for name, value in feed.items())


def _shapes_text(shapes: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {format_shape(tuple(shape))}" for name, shape in shapes.items())


class AsyncRun(Mapping[str, Any]):
    """The handle ``Session.run_async`` returns: ``wait()`` gives the run's outputs.

    As a mapping it is the run's output dict: the device buffers at once when they
    were allocated before the run (their contents are valid once the run is done),
    otherwise the result of ``wait()``.
    """

    def __init__(self, buffers: Optional[dict[str, tuple[int, int]]]) -> None:
        self._buffers = buffers
        self._done = threading.Event()
        self._result: Optional[dict[str, Any]] = None
        self._error: Optional[BaseException] = None

    def wait(self, timeout: Optional[float] = None) -> dict[str, Any]:
        """Block until the run is done; return its outputs or raise its error."""
        if not self._done.wait(timeout):
            raise GERuntimeError(f"the run did not finish within {timeout} s")
        if self._error is not None:
            if isinstance(self._error, GEError):
                raise self._error
            raise ExecutionError(f"the run failed: {self._error}") from self._error
        assert self._result is not None
        return self._result

    def done(self) -> bool:
        """True once the run has finished (or failed)."""
        return self._done.is_set()

    def _finish(self, result: dict[str, Any]) -> None:
        self._result = result
        self._done.set()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def _view(self) -> Mapping[str, Any]:
        return self._buffers if self._buffers is not None else self.wait()

    def __getitem__(self, name: str) -> Any:
        return self._view()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"<AsyncRun {state}>"


def _allocate_outputs(program: Program, plan: BoundPlan) -> dict[str, tuple[int, np.ndarray]]:
    """Device buffers for the outputs whose shapes the plan knows, with host views."""
    from ge.runtime.device import get_device

    device = get_device()
    found: dict[str, tuple[int, np.ndarray]] = {}
    for spec in program.executable.outputs:
        desc = plan.memory.descs.get(spec.slot)
        if desc is None:
            continue
        shape, dtype = desc
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        pointer = device.allocate(nbytes)
        found[spec.name] = (pointer, device.array(pointer, dtype, shape))
    return found


def _execute(program: Program, plan: BoundPlan, arena: Arena,
             values: list[Optional[np.ndarray]],
             given: Optional[dict[int, np.ndarray]] = None,
             workers: Callable[[], Sequence[Stream]] = list,
             timings: Optional[list[Timing]] = None,
             threads: Optional[int] = None) -> None:
    """Run the plan's tasks; ``workers`` gives the streams beyond the caller's (asked
    only when the plan has waits between streams)."""
    try:
        streams = workers() if plan.waits else ()
        if streams:
            run_on_streams(program.tasks, plan.tasks, arena, values, given, program.members,
                           plan.waits, streams, timings, threads)
        elif timings is not None:
            before, after = timing_hooks(timings)
            run_tasks(program.tasks, plan.tasks, arena, values, given, before=before,
                      after=after)
        else:
            run_tasks(program.tasks, plan.tasks, arena, values, given)
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

#: consecutive runs of one set of input shapes after which a session compiles the graph
#: for those shapes alone, and how many such sets one session keeps
SPECIALIZE_AFTER = 3
MAX_SHAPE_PLANS = 2

#: a run whose arena is at most this many bytes, of a graph whose constants are at most
#: ``SMALL_RUN_CONSTANTS``, is small: repeated, its shapes get a plan of their own
SMALL_RUN_BYTES = 1 << 20
SMALL_RUN_CONSTANTS = 4 << 20

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
    return device.array(pointer, spec.desc.dtype.np_dtype, shape)  # read in place


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


def _to_device(results: dict[str, np.ndarray], allocated: dict[str, tuple[int, np.ndarray]],
               outputs: Sequence[IOSpec]) -> dict[str, tuple[int, int]]:
    """``(pointer, nbytes)`` per output: the buffer allocated before the run (filled by
    it, or here when the result came out elsewhere), or a new one."""
    from ge.runtime.device import get_device

    device = get_device()
    buffers: dict[str, tuple[int, int]] = {}
    for spec in outputs:
        array = results[spec.name]
        if spec.name in allocated:
            pointer, view = allocated[spec.name]
            if array is not view:
                np.copyto(view, array)
            buffers[spec.name] = (pointer, view.nbytes)
            continue
        array = np.ascontiguousarray(array)
        pointer = device.allocate(array.nbytes)
        device.copy_in(pointer, array)
        buffers[spec.name] = (pointer, array.nbytes)
    return buffers
