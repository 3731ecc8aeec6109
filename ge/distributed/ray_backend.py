"""The ``ray`` pipeline backend: each stage a session on a Ray actor of its own.

Every stage is compiled here, in the caller's process (as the threads backend does,
so a stage that does not compile is named at once), and shipped to its actor as
GE's offline model file (``ge.save`` bytes, put into Ray's object store once and
shared by the replicas); the actor loads it (``ge.load``: checked, nothing unpickled)
into a ``Session`` limited to a few threads. No GE object crosses a process boundary
pickled: only model-file bytes, value names, and the micro-batches' arrays.

A micro-batch is dealt to a replica (round-robin over ``replicas`` copies of the
stage chain) and all its stage calls are submitted at once, each given the previous
stage's ``ObjectRef``: Ray runs stage ``k`` when stage ``k - 1``'s values are in its
object store and hands them actor to actor, never through the caller. Actor calls run
in the order they were submitted, so while stage ``k`` works on micro-batch ``m``,
stage ``k - 1`` works on ``m + 1``. At most ``replicas * (stages + queue_size)``
micro-batches are in flight; the caller waits on their last stages' results.

Failures never hang a run:

- a stage that raises ends that micro-batch only (later stages pass Ray's error on);
  once every micro-batch of the call is in, ``PipelineError`` names the first failing
  one and its stage, with the GE error as its cause, and the pipeline goes on working;
- an actor that dies (killed, crashed, its host lost) fails its pending calls at
  once: ``PipelineError`` names the stage and the micro-batch, and the pipeline is
  closed (its other actors killed);
- no micro-batch finishing for ``timeout`` seconds raises ``PipelineError`` naming
  the stage the oldest micro-batch waits on, and closes the pipeline.

Ray itself is the user's to start (``ray.init(address="auto")`` on a cluster); when
it is not running, the backend starts a local instance (``num_cpus`` CPUs, no
dashboard) and shuts it down with the last pipeline that needed it.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, Optional, Union

import numpy as np
import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from ge import errors as ge_errors
from ge.compiler.model_file import load as load_model
from ge.compiler.model_file import save as save_model
from ge.distributed.base import (
    DEFAULT_QUEUE_SIZE,
    DEFAULT_TIMEOUT,
    Backend,
    BackendError,
    FailedStage,
    PipelineError,
    StageSpec,
    failure_message,
    outcome,
)
from ge.errors import GEError
from ge.partition import compile_options_for
from ge.session import Session

__all__ = ["RayBackend", "StageWorker", "StageFailure", "DEFAULT_ACTOR_THREADS"]

#: threads one stage's kernels use when neither the compile options nor the actor's
#: ``num_cpus`` say
DEFAULT_ACTOR_THREADS = 1
#: the longest single wait, so that a run notices ``close`` from another thread
_WAIT_SLICE = 1.0

ActorOptions = Union[Mapping[str, Any], Callable[[int, int], Mapping[str, Any]], None]


class StageFailure(Exception):
    """Raised on a stage actor when its stage fails on a micro-batch: the stage's index,
    and the error's class name and text (plain data, so it crosses processes as is)."""

    def __init__(self, stage: int, kind: str, text: str) -> None:
        super().__init__(stage, kind, text)
        self.stage = stage
        self.kind = kind
        self.text = text

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"

    def error(self) -> BaseException:
        """The stage's error as GE's own class when it is one (else this failure)."""
        found = getattr(ge_errors, self.kind, None)
        if isinstance(found, type) and issubclass(found, GEError):
            try:
                return found(self.text)
            except TypeError:  # pragma: no cover - every GE error takes a message
                pass
        return self


class StageWorker:
    """One pipeline stage on a Ray actor: the stage's model file loaded into a
    session. ``advance`` runs one micro-batch: it reads the stage's ``inputs`` from the
    values received and returns the ``carried`` values (made here or passed on)."""

    def __init__(self, index: int, model: bytes, inputs: Sequence[str],
                 carried: Sequence[str], threads: Optional[int]) -> None:
        self.index = index
        self.inputs = tuple(inputs)
        self.carried = tuple(carried)
        self.served = 0
        self.session = Session(_load(model), threads=threads)

    def ready(self) -> int:
        """The actor's process id, once its session is ready."""
        return os.getpid()

    def count(self) -> int:
        """How many micro-batches this stage has run."""
        return self.served

    def advance(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """What this stage hands on for one micro-batch (``StageFailure`` if it fails)."""
        try:
            made = self.session.run({name: values[name] for name in self.inputs})
        except Exception as error:  # noqa: BLE001 - sent to the caller as plain data
            raise StageFailure(self.index, type(error).__name__, str(error)) from None
        self.served += 1
        return {name: made[name] if name in made else values[name] for name in self.carried}


#: the Ray actor class running ``StageWorker`` (never restarted: a lost stage fails the run)
_StageActor: Any = ray.remote(max_restarts=0, max_task_retries=0)(StageWorker)


class RayBackend(Backend):
    """Runs each stage on a Ray actor of its own, ``replicas`` copies of the chain
    (see the module docstring).

    ``num_cpus``: the CPUs of the local Ray started when none is running (default: the
    machine's). ``actor_options``: ``.options()`` for every stage actor (``num_cpus``,
    ``resources``, ``scheduling_strategy``, ...), or a function of ``(replica, stage)``
    returning them, to place stages on hosts. Each actor's kernels use the ``threads``
    compile option, else the actor's ``num_cpus``, else ``DEFAULT_ACTOR_THREADS``.
    """

    name = "ray"

    def __init__(self, stages: Sequence[StageSpec], *, queue_size: int = DEFAULT_QUEUE_SIZE,
                 timeout: float = DEFAULT_TIMEOUT, replicas: int = 1,
                 num_cpus: Optional[int] = None, actor_options: ActorOptions = None) -> None:
        super().__init__(stages, queue_size=queue_size, timeout=timeout, replicas=replicas)
        if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)
                                     or num_cpus < 1):
            raise BackendError(f"num_cpus must be a positive integer, got {num_cpus!r}")
        if actor_options is not None and not (isinstance(actor_options, Mapping)
                                              or callable(actor_options)):
            raise BackendError("actor_options must be a dict of actor options or a function "
                               "of (replica, stage) returning one")
        models = _compiled(self.stages)  # before Ray starts: a bad stage costs nothing
        self._started_ray = _attach(num_cpus)
        self._lock = threading.Lock()  # one call streams at a time
        self._broken: Optional[str] = None
        self._closed = False
        self._dealt = 0  # micro-batches dealt to replicas so far (round-robin)
        self._chains: list[list[Any]] = []
        self._where: dict[str, tuple[int, int]] = {}  # actor id -> (replica, stage)
        try:
            self._start_actors(models, actor_options)
        except BaseException:
            self._kill_actors()
            self._release_ray()
            raise

    @property
    def closed(self) -> bool:
        """True once ``close`` has run."""
        return self._closed

    @property
    def actors(self) -> list[list[Any]]:
        """The stage actors' handles, per replica in stage order."""
        return [list(chain) for chain in self._chains]

    # -- the actors -------------------------------------------------------------------
    def _start_actors(self, models: list[bytes], actor_options: ActorOptions) -> None:
        """One actor per stage and replica; waits (``timeout``) until all are ready."""
        shared = [ray.put(model) for model in models]  # once, whatever the replicas
        pending: dict[Any, tuple[int, int]] = {}
        for replica in range(self.replicas):
            chain = []
            for spec, model in zip(self.stages, shared):
                options = dict(actor_options(replica, spec.index) if callable(actor_options)
                               else actor_options or {})
                actor = _StageActor.options(**options).remote(
                    spec.index, model, spec.partition.inputs, spec.carried,
                    _threads(spec, options))
                self._where[actor._actor_id.hex()] = (replica, spec.index)
                pending[actor.ready.remote()] = (replica, spec.index)
                chain.append(actor)
            self._chains.append(chain)
        self._await_ready(pending)

    def _await_ready(self, pending: dict[Any, tuple[int, int]]) -> None:
        """Wait for the actors' ``ready`` calls; ``PipelineError`` names the first stage
        whose actor failed to start, or did not start in ``timeout`` seconds."""
        deadline = time.monotonic() + self.timeout
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1,
                                timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                replica, stage = min(pending.values(), key=lambda where: where[::-1])
                raise PipelineError(
                    f"pipeline stage {stage} (replica {replica}) did not start in "
                    f"{self.timeout:g} s: the Ray cluster may lack the resources its "
                    f"actor asks for ({ray.available_resources()} available)", stage=stage)
            replica, stage = pending.pop(ready[0])
            try:
                ray.get(ready[0], timeout=self.timeout)
            except RayError as error:
                raise PipelineError(failure_message(stage, None, _unwrap(error))
                                    + f" (replica {replica}, starting)", stage=stage) from None

    def _kill_actors(self) -> None:
        for chain in self._chains:
            for actor in chain:
                try:
                    ray.kill(actor, no_restart=True)
                except (RayError, ValueError):
                    pass  # dead already
        self._chains = []

    def _release_ray(self) -> None:
        if self._started_ray:
            self._started_ray = False
            _detach()

    # -- the caller -------------------------------------------------------------------
    def run_many(self, feeds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Stream ``feeds`` through the stages (see ``Backend.run_many``)."""
        with self._lock:
            if self._closed:
                raise PipelineError("this pipeline was closed; create a new one")
            if self._broken is not None:
                raise PipelineError(self._broken)
            results = self._stream(feeds)
        return [outcome(ticket, results[ticket]) for ticket in range(len(feeds))]

    def _stream(self, feeds: Sequence[Mapping[str, Any]]) -> dict[int, Any]:
        """Per micro-batch, its last stage's values or its ``FailedStage``."""
        limit = self.replicas * (len(self.stages) + self.queue_size)
        in_flight: dict[int, list[Any]] = {}  # ticket -> its stage calls' refs
        results: dict[int, Any] = {}
        submitted = 0
        deadline = time.monotonic() + self.timeout
        while len(results) < len(feeds):
            while submitted < len(feeds) and len(in_flight) < limit:
                in_flight[submitted] = self._submit(feeds[submitted])
                submitted += 1
            last = {chain[-1]: ticket for ticket, chain in in_flight.items()}
            ready, waiting = ray.wait(list(last), num_returns=1,
                                      timeout=max(0.0, min(_WAIT_SLICE,
                                                           deadline - time.monotonic())))
            if ready and waiting:
                more, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
                ready += more
            for ref in sorted(ready, key=last.__getitem__):
                ticket = last[ref]
                results[ticket] = self._fetch(ticket, ref)
                del in_flight[ticket]
                deadline = time.monotonic() + self.timeout
            if self._closed:
                raise PipelineError("the pipeline was closed during the run")
            if not ready and time.monotonic() > deadline:
                self._give_up(in_flight)
        return results

    def _submit(self, feed: Mapping[str, Any]) -> list[Any]:
        """Submit every stage of one micro-batch, each reading the previous one's ref."""
        chain = self._chains[self._dealt % self.replicas]
        self._dealt += 1
        refs: list[Any] = []
        values: Any = dict(feed)
        for actor in chain:
            values = actor.advance.remote(values)
            refs.append(values)
        return refs

    def _fetch(self, ticket: int, ref: Any) -> Any:
        """The last stage's values for ``ticket`` (arrays copied out of the object
        store), its ``FailedStage``, or ``PipelineError`` when an actor is lost."""
        try:
            values = ray.get(ref, timeout=self.timeout)
        except RayError as error:
            # a later stage given a failed value fails with the error that made it
            cause = getattr(error, "cause", None) if isinstance(error, RayTaskError) else error
            if isinstance(cause, StageFailure):
                return FailedStage(cause.stage, cause.error())
            if isinstance(cause, RayActorError):
                replica, stage = self._where.get(cause.actor_id or "", (-1, -1))
                self._break(failure_message(stage, ticket, cause)
                            + f" (replica {replica}: its actor is gone)", stage, ticket)
            self._break(_lost(ticket, cause if isinstance(cause, BaseException) else error),
                        -1, ticket)
        return {name: _owned(value) for name, value in values.items()}

    def _give_up(self, in_flight: dict[int, list[Any]]) -> None:
        """No micro-batch finished in ``timeout`` seconds: blame the first stage the
        oldest micro-batch still waits on, and close the pipeline."""
        ticket = min(in_flight)
        chain = in_flight[ticket]
        ready, _ = ray.wait(chain, num_returns=len(chain), timeout=0, fetch_local=False)
        stage = next(index for index, ref in enumerate(chain) if ref not in ready)
        blamed = self.stages[stage].index
        self._break(f"pipeline stage {blamed} has not finished micro-batch {ticket}, and no "
                    f"micro-batch has finished, in {self.timeout:g} s", blamed, ticket)

    def _break(self, message: str, stage: int, ticket: int) -> NoReturn:
        """Kill the actors and raise ``PipelineError``; later runs raise it again."""
        self._broken = message + "; the pipeline is closed"
        self._kill_actors()
        raise PipelineError(self._broken, stage=stage, microbatch=ticket)

    def close(self) -> None:
        """Kill the stage actors and, when this pipeline started Ray and is the last
        to use it, shut Ray down (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._kill_actors()
        self._release_ray()


def _compiled(stages: Sequence[StageSpec]) -> list[bytes]:
    """Each stage compiled and written as an offline model file; a stage that does not
    compile raises ``PipelineError`` with its index."""
    models = []
    with tempfile.TemporaryDirectory(prefix="ge-ray-stages-") as folder:
        for stage in stages:
            path = os.path.join(folder, f"stage{stage.index}.gemodel")
            try:
                save_model(stage.compile(), path)
            except GEError as error:
                raise PipelineError(failure_message(stage.index, None, error),
                                    stage=stage.index) from error
            with open(path, "rb") as file:
                models.append(file.read())
    return models


def _load(model: bytes) -> Any:
    """The executable in ``model`` (offline model file bytes), read by ``ge.load``."""
    with tempfile.TemporaryDirectory(prefix="ge-ray-stage-") as folder:
        path = os.path.join(folder, "stage.gemodel")
        with open(path, "wb") as file:
            file.write(model)
        return load_model(path)


def _threads(stage: StageSpec, actor_options: Mapping[str, Any]) -> int:
    """The threads of one stage actor's kernels (see ``RayBackend``)."""
    chosen = compile_options_for(stage.partition, **stage.compile_options).get("threads")
    if chosen is None:
        cpus = actor_options.get("num_cpus")
        chosen = int(cpus) if isinstance(cpus, (int, float)) and cpus >= 1 else None
    return int(chosen or DEFAULT_ACTOR_THREADS)


def _owned(value: Any) -> Any:
    """``value`` as an array of the caller's own (not a read-only view of the store)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


def _lost(ticket: int, error: BaseException) -> str:
    """``the pipeline failed on micro-batch 3: ObjectLostError: ...``."""
    return f"the pipeline failed on micro-batch {ticket}: {type(error).__name__}: {error}"


def _unwrap(error: RayError) -> BaseException:
    """The user-level error inside a Ray error, when there is one."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, StageFailure):
        return cause.error()
    return cause if isinstance(cause, BaseException) else error


# -- the local Ray instance ------------------------------------------------------------
_local_lock = threading.Lock()
_local_users = 0  # open pipelines on the Ray instance this module started


def _attach(num_cpus: Optional[int]) -> bool:
    """Make sure Ray is running; True when this pipeline uses the local instance this
    module started (and must ``_detach`` when it closes)."""
    global _local_users
    with _local_lock:
        if ray.is_initialized():
            if _local_users == 0:
                return False  # the user's Ray
            _local_users += 1
            return True
        if os.environ.get("RAY_ADDRESS"):
            ray.init()  # the cluster the environment names
        else:
            # GE's own ``acl`` module (the seed's CPU runtime) answers Ray's probe for
            # Ascend NPUs with eight CPU devices: the local instance declares none
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                     resources={"NPU": 0})
        _local_users = 1
        return True


def _detach() -> None:
    """One pipeline less on the local Ray instance; the last shuts it down."""
    global _local_users
    with _local_lock:
        _local_users -= 1
        if _local_users == 0 and ray.is_initialized():
            ray.shutdown()
