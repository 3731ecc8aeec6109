"""Streams and events (ge.runtime.stream) and the acl.rt calls built on them.

Blocking tasks wait on ``threading.Event`` gates with a timeout, and every wait in
the tests has one, so a broken stream fails a test instead of hanging the suite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import acl
from ge.errors import GERuntimeError, InputError, InvalidPointerError, OutOfBoundsError
from ge.runtime import stream as streams
from ge.runtime.stream import Event, Stream

WAIT = 5.0  # seconds: only reached when something is broken


@pytest.fixture
def new_stream() -> Iterator[Callable[[], Stream]]:
    """Make streams that are closed when the test ends."""
    made: list[Stream] = []

    def make() -> Stream:
        made.append(Stream())
        return made[-1]

    yield make
    for each in made:
        each.close()


def gate_task(gate: threading.Event) -> Callable[[], None]:
    """A task that blocks its stream until ``gate`` is set (or WAIT passes)."""
    return lambda: None if gate.wait(WAIT) else pytest.fail("gate never opened")


def stream_threads() -> set[str]:
    return {thread.name for thread in threading.enumerate() if thread.name.startswith("ge-stream-")}


# ------------------------------------------------------------------ one stream


def test_work_runs_in_order_on_the_stream_thread(new_stream: Callable[[], Stream]) -> None:
    stream = new_stream()
    assert stream.name not in stream_threads()  # the thread starts with the first task
    log: list[tuple[int, str]] = []
    for i in range(50):
        stream.submit(lambda i: log.append((i, threading.current_thread().name)), i)
    stream.synchronize(WAIT)
    assert log == [(i, stream.name) for i in range(50)]
    assert stream.query()
    thread = next(t for t in threading.enumerate() if t.name == stream.name)
    assert thread.daemon


def test_submit_returns_before_the_work_runs(new_stream: Callable[[], Stream]) -> None:
    stream, gate, log = new_stream(), threading.Event(), []
    stream.submit(gate_task(gate))
    stream.submit(log.append, "done")
    assert log == [] and not stream.query()
    gate.set()
    stream.synchronize(WAIT)
    assert log == ["done"]


def test_keyword_arguments_reach_the_task(new_stream: Callable[[], Stream]) -> None:
    stream, seen = new_stream(), {}
    stream.submit(lambda fn, stream: seen.update(fn=fn, stream=stream), fn=1, stream=2)
    stream.synchronize(WAIT)
    assert seen == {"fn": 1, "stream": 2}


def test_two_streams_run_at_the_same_time(new_stream: Callable[[], Stream]) -> None:
    # Each task waits for the other to start: on one thread this could never finish.
    first, second = new_stream(), new_stream()
    started = [threading.Event(), threading.Event()]
    met: list[bool] = []

    def meet(mine: int) -> None:
        started[mine].set()
        met.append(started[1 - mine].wait(WAIT))

    first.submit(meet, 0)
    second.submit(meet, 1)
    first.synchronize(WAIT)
    second.synchronize(WAIT)
    assert met == [True, True]


# ---------------------------------------------------------------------- events


def test_event_orders_work_across_streams(new_stream: Callable[[], Stream]) -> None:
    producer, consumer = new_stream(), new_stream()
    gate, log = threading.Event(), []
    producer.submit(gate_task(gate))
    producer.submit(log.append, "produced")
    event = Event()
    event.record(producer)
    consumer.wait_event(event)
    consumer.submit(log.append, "consumed")
    assert not event.query() and not consumer.query()  # the consumer waits for the gate too
    gate.set()
    consumer.synchronize(WAIT)
    assert log == ["produced", "consumed"]
    assert event.query()


def test_a_wait_or_synchronize_refers_to_the_record_latest_at_the_call(
        new_stream: Callable[[], Stream]) -> None:
    first, second, waiter = new_stream(), new_stream(), new_stream()
    gate_one, gate_two, log = threading.Event(), threading.Event(), []
    first.submit(gate_task(gate_one))
    second.submit(gate_task(gate_two))
    event = Event()
    event.record(first)
    waiter.wait_event(event)  # waits for the record on ``first``
    waiter.submit(log.append, "after first")
    event.record(second)  # re-record: later waits and synchronizes mean this one
    gate_one.set()
    waiter.synchronize(WAIT)  # done although the newer record is still pending
    assert log == ["after first"]
    assert not event.query()
    with pytest.raises(GERuntimeError, match="timed out"):
        event.synchronize(timeout=0.01)
    gate_two.set()
    event.synchronize(WAIT)
    assert event.query()


def test_an_event_never_recorded_counts_as_reached(new_stream: Callable[[], Stream]) -> None:
    event, stream, log = Event(), new_stream(), []
    assert event.query()
    event.synchronize(timeout=0)
    stream.wait_event(event)
    stream.submit(log.append, 1)
    stream.synchronize(WAIT)
    assert log == [1]


def test_none_is_the_calling_thread(new_stream: Callable[[], Stream]) -> None:
    log: list[str] = []
    streams.submit(None, log.append, threading.current_thread().name)
    assert log == [threading.current_thread().name]  # done before submit returned
    streams.synchronize(None)
    event = Event()
    event.record(None)
    assert event.query()
    with pytest.raises(ZeroDivisionError):
        streams.submit(None, lambda: 1 / 0)  # raised in the caller
    other, gate = new_stream(), threading.Event()
    other.submit(gate_task(gate))
    other.submit(log.append, "other")
    event.record(other)
    threading.Timer(0.01, gate.set).start()
    streams.wait_event(None, event, timeout=WAIT)  # blocks the caller until reached
    assert log[-1] == "other"


# ---------------------------------------------------------------------- errors


def test_a_failed_task_is_raised_by_synchronize_and_skips_later_work(
        new_stream: Callable[[], Stream]) -> None:
    stream, log = new_stream(), []
    stream.submit(lambda: 1 / 0)
    stream.submit(log.append, "skipped")
    with pytest.raises(GERuntimeError, match="ZeroDivisionError") as caught:
        stream.synchronize(WAIT)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert log == []
    stream.submit(log.append, "runs again")  # the error was reported: the stream works
    stream.synchronize(WAIT)
    assert log == ["runs again"]


def test_a_ge_error_is_raised_as_is(new_stream: Callable[[], Stream]) -> None:
    stream = new_stream()
    error = InputError("bad feed")

    def fail() -> None:
        raise error

    stream.submit(fail)
    with pytest.raises(InputError) as caught:
        stream.synchronize(WAIT)
    assert caught.value is error


def test_an_event_after_a_failure_raises_it_and_the_stream_still_reports_it(
        new_stream: Callable[[], Stream]) -> None:
    stream, event = new_stream(), Event()
    stream.submit(lambda: [][0])
    event.record(stream)
    with pytest.raises(GERuntimeError, match="IndexError") as caught:
        event.synchronize(WAIT)
    assert isinstance(caught.value.__cause__, IndexError)
    with pytest.raises(GERuntimeError, match="IndexError"):
        stream.synchronize(WAIT)
    stream.synchronize(WAIT)  # reported once


def test_synchronize_from_the_stream_itself_raises_instead_of_hanging(
        new_stream: Callable[[], Stream]) -> None:
    stream, event, caught = new_stream(), Event(), []
    gate = threading.Event()

    def inside() -> None:
        for wait in (stream.synchronize, event.synchronize):
            try:
                wait()
            except GERuntimeError as error:
                caught.append(str(error))

    stream.submit(gate_task(gate))
    event.record(stream)
    stream.submit(inside)
    gate.set()
    stream.synchronize(WAIT)
    assert len(caught) == 1 and "wait for itself" in caught[0]  # the event was reached


# ----------------------------------------------------------------------- close


def test_close_finishes_queued_work_then_refuses_more(new_stream: Callable[[], Stream]) -> None:
    stream, log = new_stream(), []
    for i in range(5):
        stream.submit(log.append, i)
    stream.close()
    assert log == [0, 1, 2, 3, 4] and stream.closed
    assert stream.name not in stream_threads()
    with pytest.raises(GERuntimeError, match="closed"):
        stream.submit(log.append, 5)
    with pytest.raises(GERuntimeError, match="closed"):
        Event().record(stream)
    stream.close()  # again: nothing to do
    stream.synchronize(WAIT)
    Stream().close()  # never started: no thread to join


# ------------------------------------------------------------------ acl.rt facade


def test_memcpy_async_copies_on_the_stream() -> None:
    acl.init()
    handle = acl.rt.create_stream(acl.rt.stream_id)
    stream = acl.rt.stream_of(handle)
    assert isinstance(stream, Stream) and stream.label == acl.rt.stream_id
    ptr, _ = acl.rt.malloc(16)
    acl.rt.memset(ptr, 16, 0, 16)
    gate = threading.Event()
    stream.submit(gate_task(gate))
    acl.rt.memcpy_async(ptr, np.arange(4, dtype=np.float32), 16,
                        acl.rt.MEMCPY_HOST_TO_DEVICE, handle)  # a temporary source
    back = np.full(4, -1, np.float32)
    acl.rt.memcpy_async(back, ptr, 16, acl.rt.MEMCPY_DEVICE_TO_HOST, handle)
    unchanged = np.zeros(4, np.float32)
    acl.rt.memcpy(unchanged, ptr, 16, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert unchanged.tolist() == [0.0] * 4 and back.tolist() == [-1.0] * 4
    gate.set()
    acl.rt.synchronize_stream(handle)
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0]
    acl.rt.free(ptr)
    acl.rt.destroy_stream(handle)
    assert stream.closed
    acl.finalize()


def test_memcpy_async_checks_arguments_in_the_caller() -> None:
    handle = acl.rt.create_stream()
    ptr, _ = acl.rt.malloc(8)
    with pytest.raises(InvalidPointerError):
        acl.rt.memcpy_async(0x42, np.zeros(2, np.float32), 8, acl.rt.MEMCPY_HOST_TO_DEVICE,
                            handle)
    with pytest.raises(OutOfBoundsError, match="runs past the end"):
        acl.rt.memcpy_async(np.zeros(4, np.float32), ptr, 16, acl.rt.MEMCPY_DEVICE_TO_HOST,
                            handle)
    with pytest.raises(GERuntimeError, match="not a live stream"):
        acl.rt.memcpy_async(ptr, b"12345678", 8, acl.rt.MEMCPY_HOST_TO_DEVICE, handle + 1000)
    acl.rt.synchronize_stream(handle)  # nothing failed on the stream
    acl.rt.free(ptr)
    acl.rt.destroy_stream(handle)


def test_a_copy_failing_on_the_stream_is_raised_by_synchronize_stream() -> None:
    handle = acl.rt.create_stream()
    stream = acl.rt.stream_of(handle)
    assert stream is not None
    ptr, _ = acl.rt.malloc(8)
    gate = threading.Event()
    stream.submit(gate_task(gate))
    acl.rt.memcpy_async(ptr, b"12345678", 8, acl.rt.MEMCPY_HOST_TO_DEVICE, handle)
    acl.rt.free(ptr)  # before the copy ran
    gate.set()
    with pytest.raises(InvalidPointerError):
        acl.rt.synchronize_stream(handle)
    acl.rt.synchronize_stream(handle)
    acl.rt.destroy_stream(handle)


def test_default_stream_is_the_calling_thread() -> None:
    assert acl.rt.stream_of(None) is None and acl.rt.stream_of(0) is None
    with pytest.raises(GERuntimeError, match="not a live stream"):
        acl.rt.stream_of(12345)
    with pytest.raises(GERuntimeError, match="integer"):
        acl.rt.stream_of("1")
    ptr, _ = acl.rt.malloc(4)
    acl.rt.memcpy_async(ptr, b"abcd", 4, acl.rt.MEMCPY_HOST_TO_DEVICE, 0)
    out = bytearray(4)
    acl.rt.memcpy_async(out, ptr, 4, acl.rt.MEMCPY_DEVICE_TO_HOST, None)
    assert out == b"abcd"  # done before it returned
    event = acl.rt.create_event()
    acl.rt.record_event(event, None)
    assert acl.rt.query_event(event) == (acl.rt.EVENT_STATUS_COMPLETE, 0)
    acl.rt.synchronize_stream(0)
    acl.rt.free(ptr)
    acl.rt.destroy_event(event)


def test_stream_wait_event_and_query_event() -> None:
    producer, consumer = acl.rt.create_stream(), acl.rt.create_stream()
    event = acl.rt.create_event()
    gate, log = threading.Event(), []
    producing = acl.rt.stream_of(producer)
    consuming = acl.rt.stream_of(consumer)
    assert producing is not None and consuming is not None
    producing.submit(gate_task(gate))
    producing.submit(log.append, "produced")
    acl.rt.record_event(event, producer)
    acl.rt.stream_wait_event(consumer, event)
    consuming.submit(log.append, "consumed")
    assert acl.rt.query_event(event) == (acl.rt.EVENT_STATUS_NOT_READY, 0)
    gate.set()
    acl.rt.synchronize_event(event)
    acl.rt.synchronize_device()  # every stream
    assert log == ["produced", "consumed"]
    assert acl.rt.query_event(event) == (acl.rt.EVENT_STATUS_COMPLETE, 0)
    acl.rt.destroy_event(event)
    with pytest.raises(GERuntimeError, match="not a live event"):
        acl.rt.query_event(event)
    acl.rt.destroy_stream(producer)
    acl.rt.destroy_stream(consumer)


def test_synchronize_device_raises_a_stream_error_after_waiting_for_all() -> None:
    failing, other = acl.rt.create_stream(), acl.rt.create_stream()
    failing_stream, other_stream = acl.rt.stream_of(failing), acl.rt.stream_of(other)
    assert failing_stream is not None and other_stream is not None
    log: list[int] = []
    failing_stream.submit(lambda: 1 / 0)
    other_stream.submit(log.append, 1)
    with pytest.raises(GERuntimeError, match="ZeroDivisionError"):
        acl.rt.synchronize_device()
    assert log == [1]
    acl.rt.destroy_stream(failing)
    acl.rt.destroy_stream(other)


def test_destroy_stream_reports_an_unreported_error_and_still_destroys() -> None:
    handle = acl.rt.create_stream()
    stream = acl.rt.stream_of(handle)
    assert stream is not None
    stream.submit(lambda: 1 / 0)
    with pytest.raises(GERuntimeError, match="ZeroDivisionError"):
        acl.rt.destroy_stream(handle)
    assert stream.closed
    with pytest.raises(GERuntimeError, match="not a live stream"):
        acl.rt.destroy_stream(handle)


def test_finalize_closes_every_stream_thread() -> None:
    acl.init()
    handles = [acl.rt.create_stream(acl.rt.stream_id + i) for i in range(3)]
    objects = [acl.rt.stream_of(handle) for handle in handles]
    log: list[int] = []
    for i, each in enumerate(objects):
        assert each is not None
        each.submit(log.append, i)
    names = {each.name for each in objects if each is not None}
    assert names <= stream_threads()
    acl.finalize()
    assert not names & stream_threads()
    assert sorted(log) == [0, 1, 2]  # queued work was done first
    with pytest.raises(GERuntimeError, match="not a live stream"):
        acl.rt.stream_of(handles[0])
