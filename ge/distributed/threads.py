"""The ``threads`` pipeline backend: each stage a session on a worker thread of its own.

Stage ``i``'s thread takes micro-batches from its inbox, runs its compiled partition
(the kernels release the GIL, so stages overlap) and puts what it hands on into
stage ``i + 1``'s inbox; the inboxes are bounded (``queue_size``), so a fast stage
waits for a slow one instead of piling up micro-batches. The last stage's outbox is
the caller's result queue.

A stage whose run raises hands a failure record on instead of values: the later
stages pass it through, so every micro-batch of a call still comes out, the caller
raises ``PipelineError`` with the failing stage's index, and the pipeline stays
usable. A stage that stops answering is found by the caller's timeout (no
micro-batch finished for ``timeout`` seconds): it raises ``PipelineError`` naming the
stage busy longest and the pipeline is closed. Every wait is a short poll that also
watches the stop flag, so ``close`` ends every thread.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

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
from ge.session import Session

__all__ = ["ThreadsBackend", "POLL_SECONDS", "THREAD_PREFIX"]

#: how often a blocked wait looks at the stop flag
POLL_SECONDS = 0.05
#: the start of every stage thread's name
THREAD_PREFIX = "ge-pipeline"

_STOP = object()
_numbers = itertools.count()


class ThreadsBackend(Backend):
    """Runs each stage on a thread of its own (see the module docstring)."""

    name = "threads"

    def __init__(self, stages: Sequence[StageSpec], *, queue_size: int = DEFAULT_QUEUE_SIZE,
                 timeout: float = DEFAULT_TIMEOUT, replicas: int = 1,
                 **backend_options: Any) -> None:
        if backend_options:
            raise BackendError(f"the threads backend takes no backend_options "
                               f"({', '.join(sorted(backend_options))})")
        super().__init__(stages, queue_size=queue_size, timeout=timeout, replicas=replicas)
        if replicas != 1:
            raise BackendError("the threads backend runs one replica of the pipeline; "
                               "data-parallel replicas run on backend='ray'")
        self._sessions = _sessions(self.stages)
        self._queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=queue_size)
                                                for _ in self.stages]
        self._queues.append(queue.Queue())  # the results: never blocks the last stage
        self._busy: list[Optional[tuple[int, float]]] = [None] * len(self.stages)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one call streams at a time
        self._broken: Optional[str] = None
        self._closed = False
        number = next(_numbers)
        self._threads = [threading.Thread(target=self._work, args=(index,), daemon=True,
                                          name=f"{THREAD_PREFIX}-{number}-stage-{index}")
                         for index in range(len(self.stages))]
        for thread in self._threads:
            thread.start()

    @property
    def closed(self) -> bool:
        """True once ``close`` has run."""
        return self._closed

    @property
    def threads(self) -> list[threading.Thread]:
        """The stage threads (alive until ``close``)."""
        return list(self._threads)

    # -- the stage threads ------------------------------------------------------------
    def _work(self, index: int) -> None:
        inbox, outbox = self._queues[index], self._queues[index + 1]
        stage, session = self.stages[index], self._sessions[index]
        while not self._stop.is_set():
            try:
                item = inbox.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if item is _STOP:
                return
            ticket, payload = item
            if not isinstance(payload, FailedStage):
                self._busy[index] = (ticket, time.monotonic())
                try:
                    payload = stage.advance(payload, session.run)
                except Exception as error:  # noqa: BLE001 - handed to the caller, with the stage
                    payload = FailedStage(index, error)
                finally:
                    self._busy[index] = None
            if not self._put(outbox, (ticket, payload)):
                return

    def _put(self, target: queue.Queue[Any], item: Any, deadline: Optional[float] = None) -> bool:
        """Put ``item``, polling the stop flag; False when stopped or past ``deadline``."""
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                return False
            try:
                target.put(item, timeout=POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    # -- the caller -------------------------------------------------------------------
    def run_many(self, feeds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Stream ``feeds`` through the stages (see ``Backend.run_many``)."""
        with self._lock:
            if self._closed:
                raise PipelineError("this pipeline was closed; create a new one")
            if self._broken is not None:
                raise PipelineError(self._broken)
            results: dict[int, Any] = {}
            deadline = time.monotonic() + self.timeout
            for ticket, feed in enumerate(feeds):
                while not self._put(self._queues[0], (ticket, dict(feed)),
                                    deadline=time.monotonic() + POLL_SECONDS):
                    deadline = self._collect(results, deadline, block=False)
            while len(results) < len(feeds):
                deadline = self._collect(results, deadline, block=True)
        return [outcome(ticket, results[ticket]) for ticket in range(len(feeds))]

    def _collect(self, results: dict[int, Any], deadline: float, block: bool) -> float:
        """Take the results ready (waiting a poll for one when ``block``); the new
        deadline when one came, else raise once ``deadline`` has passed."""
        try:
            while True:
                ticket, payload = self._queues[-1].get(timeout=POLL_SECONDS if block else 0)
                results[ticket] = payload
                deadline = time.monotonic() + self.timeout
                block = False
        except queue.Empty:
            pass
        if self._stop.is_set():
            raise PipelineError(self._broken or "the pipeline was closed during the run")
        if time.monotonic() > deadline:
            self._give_up()
        return deadline

    def _give_up(self) -> None:
        busy = [(since, index, ticket) for index, entry in enumerate(self._busy)
                if entry is not None for ticket, since in [entry]]
        if busy:
            since, stage, ticket = min(busy)
            message = (f"pipeline stage {stage} has run micro-batch {ticket} for "
                       f"{time.monotonic() - since:.1f} s with no result in "
                       f"{self.timeout:g} s; the pipeline is closed")
        else:
            stage, ticket = -1, -1
            message = f"no pipeline stage finished a micro-batch in {self.timeout:g} s"
        self._broken = message
        self._stop.set()
        raise PipelineError(message, stage=stage, microbatch=ticket)

    def close(self) -> None:
        """Stop every stage thread (a run in progress ends at its stage's current
        step) and release the sessions. Raises ``PipelineError`` when a thread is
        still inside a kernel after ``timeout`` seconds."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for inbox in self._queues[:-1]:
            try:
                inbox.put_nowait(_STOP)
            except queue.Full:
                pass  # the stop flag ends that thread at its next poll
        deadline = time.monotonic() + self.timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [thread.name for thread in self._threads if thread.is_alive()]
        for session in self._sessions:
            session.finalize()
        if stuck:
            raise PipelineError(f"pipeline threads still running after close: {stuck}")


def _sessions(stages: Sequence[StageSpec]) -> list[Session]:
    """A session per stage, compiled in the caller's thread; a stage that does not
    compile raises ``PipelineError`` with its index."""
    sessions: list[Session] = []
    for stage in stages:
        try:
            sessions.append(Session(stage.compile()))
        except GEError as error:
            for made in sessions:
                made.finalize()
            raise PipelineError(failure_message(stage.index, None, error),
                                stage=stage.index) from error
    return sessions
