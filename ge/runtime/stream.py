"""CPU streams and events: in-order work queues, each served by one thread.

A :class:`Stream` runs the callables submitted to it one after another, in
submission order, on its own daemon thread (named ``ge-stream-N``, started on
the first submission). Work on two streams runs on two threads, so it may
overlap: NumPy releases the GIL in BLAS calls and most ufuncs and copies.

An :class:`Event` orders work across streams: ``event.record(stream)`` puts a
marker on ``stream``, and the event's record is *reached* when the stream's
thread gets to it. ``stream.wait_event(event)`` makes later work on ``stream``
wait for the event's most recent record at the time of the call (a later
re-record does not change what an earlier wait waits for), as in CUDA/ACL.

Errors: the first exception a task raises is kept by its stream; the tasks
submitted after it are skipped (not run) until :meth:`Stream.synchronize`
reports the error, after which the stream runs work again. ``synchronize``
re-raises a ``ge.errors.GEError`` as is and wraps any other exception in a
``GERuntimeError`` chained to it. An event record reached while its stream
holds an error makes that event's ``synchronize`` raise the same way (without
clearing the stream's error).

``None`` in place of a stream means the calling thread, synchronously: the
module functions :func:`submit`, :func:`synchronize` and :func:`wait_event`, and
:meth:`Event.record`, accept it.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any, Callable

from ge.errors import GEError, GERuntimeError

__all__ = ["Event", "Stream", "submit", "synchronize", "wait_event"]

_stream_numbers = itertools.count()


class _Task:
    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs


class _Mark:
    """One record of an event: set when its stream reaches it, with the stream's error then."""

    __slots__ = ("stream", "reached", "error")

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self.reached = threading.Event()
        self.error: BaseException | None = None


class _Wait:
    __slots__ = ("mark",)

    def __init__(self, mark: _Mark) -> None:
        self.mark = mark


_STOP = object()


def _reported(error: BaseException, where: str) -> GEError:
    """The exception to raise for ``error``: itself if a GEError, else a wrapping GERuntimeError."""
    if isinstance(error, GEError):
        return error
    wrapped = GERuntimeError(f"a task on {where} failed: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


class Stream:
    """An in-order work queue served by one daemon thread.

    ``label`` is free text shown in ``repr`` (``acl.rt.create_stream`` passes the
    number it was given); ``name`` is the worker thread's name, ``ge-stream-N``.
    """

    def __init__(self, label: Any = None) -> None:
        self.label = label
        self.name = f"ge-stream-{next(_stream_numbers)}"
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()
        self._submitted = 0  # items enqueued (the stop marker not counted)
        self._finished = 0  # items the worker is done with (run, skipped or waited)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        label = "" if self.label is None else f" label={self.label!r}"
        return f"<Stream {self.name}{label} {state}>"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the stream then refuses new work)."""
        return self._closed

    # Issuing work ------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Enqueue ``fn(*args, **kwargs)`` and return at once; its result is discarded."""
        self._enqueue(_Task(fn, args, kwargs))

    def wait_event(self, event: Event) -> None:
        """Make work submitted after this call wait for ``event``'s latest record.

        An event not recorded, or whose latest record is already reached, adds no wait.
        """
        mark = event._latest()
        if mark is not None and not mark.reached.is_set():
            self._enqueue(_Wait(mark))

    def _enqueue(self, item: object) -> None:
        with self._cond:
            if self._closed:
                raise GERuntimeError(f"{self.name} is closed; it accepts no more work")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._queue.append(item)
            self._submitted += 1
            self._cond.notify_all()

    # Waiting -----------------------------------------------------------------

    def query(self) -> bool:
        """Whether everything submitted so far has been done (run or skipped)."""
        with self._cond:
            return self._finished >= self._submitted

    def synchronize(self, timeout: float | None = None) -> None:
        """Block until everything submitted before this call is done; report a task's error.

        Raises ``GERuntimeError`` if ``timeout`` seconds pass first, or if called
        from this stream's own thread (it would wait for itself).
        """
        with self._cond:
            self._check_not_worker("synchronize")
            target = self._submitted
            if not self._cond.wait_for(lambda: self._finished >= target, timeout):
                raise GERuntimeError(f"{self.name}: synchronize timed out after {timeout} s")
            error, self._error = self._error, None
        if error is not None:
            raise _reported(error, self.name)

    def close(self) -> None:
        """Finish the queued work, then stop and join the thread; calling it again is harmless.

        An error no ``synchronize`` has reported is dropped. From a task on this
        stream, it stops the stream without joining its own thread.
        """
        with self._cond:
            if not self._closed:
                self._closed = True
                if self._thread is not None:
                    self._queue.append(_STOP)
                    self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _check_not_worker(self, operation: str) -> None:
        if self._thread is not None and self._thread is threading.current_thread():
            raise GERuntimeError(f"{operation} called from a task on {self.name} "
                                 f"would wait for itself")

    # The worker --------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue))
                item = self._queue.popleft()
            if item is _STOP:
                return
            try:
                self._do(item)
            finally:
                with self._cond:
                    self._finished += 1
                    self._cond.notify_all()

    def _do(self, item: object) -> None:
        if isinstance(item, _Task):
            if self._error is not None:
                return  # skipped until synchronize reports the error
            try:
                item.fn(*item.args, **item.kwargs)
            except BaseException as error:  # kept for synchronize: the thread must not die
                with self._cond:
                    if self._error is None:
                        self._error = error
        elif isinstance(item, _Mark):
            with self._cond:
                item.error = self._error
            item.reached.set()
        elif isinstance(item, _Wait):
            item.mark.reached.wait()


class Event:
    """A point in a stream's work that other streams and threads can wait for.

    ``label`` is free text shown in ``repr``. An event never recorded counts as reached.
    """

    def __init__(self, label: Any = None) -> None:
        self.label = label
        self._lock = threading.Lock()
        self._mark: _Mark | None = None

    def __repr__(self) -> str:
        label = "" if self.label is None else f" label={self.label!r}"
        return f"<Event{label} {'reached' if self.query() else 'pending'}>"

    def _latest(self) -> _Mark | None:
        with self._lock:
            return self._mark

    def record(self, stream: Stream | None) -> None:
        """Put a new record of this event on ``stream`` (``None``: reached at once).

        Waits and synchronizes issued from now on refer to this record.
        """
        mark = _Mark(stream)
        if stream is None:
            mark.reached.set()
        else:
            stream._enqueue(mark)
        with self._lock:
            self._mark = mark

    def query(self) -> bool:
        """Whether the latest record has been reached."""
        mark = self._latest()
        return mark is None or mark.reached.is_set()

    def synchronize(self, timeout: float | None = None) -> None:
        """Block until the latest record (at the time of the call) is reached.

        Raises like the recording stream's ``synchronize`` if that stream held an
        error when it reached the record; raises ``GERuntimeError`` after
        ``timeout`` seconds, or when called from the recording stream's own
        thread before the record is reached.
        """
        mark = self._latest()
        if mark is None:
            return
        if not mark.reached.is_set():
            if mark.stream is not None:
                mark.stream._check_not_worker("Event.synchronize")
            if not mark.reached.wait(timeout):
                raise GERuntimeError(f"{self!r}: synchronize timed out after {timeout} s")
        if mark.error is not None:
            where = mark.stream.name if mark.stream is not None else "the calling thread"
            raise _reported(mark.error, where)


# ---------------------------------------------------- streams or the calling thread


def submit(stream: Stream | None, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Enqueue ``fn(*args, **kwargs)`` on ``stream``; with ``None``, run it now (errors raise)."""
    if stream is None:
        fn(*args, **kwargs)
    else:
        stream.submit(fn, *args, **kwargs)


def synchronize(stream: Stream | None, timeout: float | None = None) -> None:
    """:meth:`Stream.synchronize`; ``None`` has nothing pending, so it returns at once."""
    if stream is not None:
        stream.synchronize(timeout)


def wait_event(stream: Stream | None, event: Event, timeout: float | None = None) -> None:
    """:meth:`Stream.wait_event`; with ``None``, block the caller until the event is reached.

    ``timeout`` applies to the blocking (``None``) form only.
    """
    if stream is None:
        event.synchronize(timeout)
    else:
        stream.wait_event(event)
