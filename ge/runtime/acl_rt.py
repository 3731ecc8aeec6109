"""``acl.rt``: devices, device memory, copies, streams and events, ACL style.

This is the namespace the seed's programs call as ``acl.rt.*`` (docs/seed-api.md,
section 2.4), over :mod:`ge.runtime.device`. Its conventions:

- Errors raise ``ge.errors`` exceptions (D24); the ``ret`` values the
  ACL forms return are always ``0`` (``acl.SUCCESS``).
- ``malloc(size)`` returns ``(ptr, ret)``, as the article unpacks it;
  ``create_stream``/``create_event`` return the handle alone, as the article uses
  them; ``get_device``/``get_device_count`` return pyACL's ``(value, ret)`` pair.
- Pointers are integers; host operands of ``memcpy`` are NumPy arrays (or
  bytes-like objects), not addresses. Copy kinds take pyACL's values.
- Using memory before ``acl.init()``/``set_device`` works, on the current device
  (cpu:0 unless chosen otherwise): the friendlier choice for scripts and tests.
- ``set_device``/``reset_device`` are reference-counted per device, as in ACL:
  the device's buffers are freed (with a ``RuntimeWarning`` if any were still
  live) only when the last ``reset_device`` balances the ``set_device`` calls,
  so two executors on one device do not free each other's buffers.
- Streams are :class:`ge.runtime.stream.Stream` objects, each with a thread of
  its own: ``memcpy_async`` and ``record_event`` enqueue their work on the stream
  and return; ``synchronize_stream``/``synchronize_event``/``synchronize_device``
  block until it is done and raise the error of a copy that failed there.
  ``memcpy_async`` checks its arguments in the caller's thread (a bad pointer or
  size raises at once) and copies on the stream's thread; it keeps a reference to
  its host operand, so a temporary source works, but the caller must not change
  the source or read the destination before synchronizing. The default stream,
  ``None`` or ``0``, is the calling thread: work on it is done when issued.
  Handles are unique positive integers; :func:`stream_of` turns one into its
  ``Stream``.
"""

from __future__ import annotations

import itertools
import operator
import threading
import warnings
from typing import Any, Callable

from ge.errors import GEError, GERuntimeError
from ge.runtime import device as _device
from ge.runtime import stream as _stream
from ge.runtime.memory import as_pointer, as_size, host_bytes, writable_host_bytes

__all__ = [
    "EVENT_STATUS_COMPLETE",
    "EVENT_STATUS_NOT_READY",
    "MEMCPY_DEVICE_TO_DEVICE",
    "MEMCPY_DEVICE_TO_HOST",
    "MEMCPY_HOST_TO_DEVICE",
    "MEMCPY_HOST_TO_HOST",
    "create_event",
    "create_stream",
    "destroy_event",
    "destroy_stream",
    "event_id",
    "free",
    "get_device",
    "get_device_count",
    "malloc",
    "memcpy",
    "memcpy_async",
    "memset",
    "query_event",
    "record_event",
    "reset_device",
    "set_device",
    "stream_id",
    "stream_of",
    "stream_wait_event",
    "synchronize_device",
    "synchronize_event",
    "synchronize_stream",
]

MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3

EVENT_STATUS_COMPLETE = 0
EVENT_STATUS_NOT_READY = 1

_KIND_NAMES = {
    MEMCPY_HOST_TO_HOST: "MEMCPY_HOST_TO_HOST",
    MEMCPY_HOST_TO_DEVICE: "MEMCPY_HOST_TO_DEVICE",
    MEMCPY_DEVICE_TO_HOST: "MEMCPY_DEVICE_TO_HOST",
    MEMCPY_DEVICE_TO_DEVICE: "MEMCPY_DEVICE_TO_DEVICE",
}

stream_id = 0
"""Base stream number the article adds to (``create_stream(acl.rt.stream_id + i)``)."""

event_id = 0
"""Base event number the article passes (``create_event(acl.rt.event_id)``)."""

_SUCCESS = 0
_lock = threading.RLock()
_device_refs: dict[int, int] = {}  # device id -> set_device calls not yet reset
_handles = itertools.count(1)
_streams: dict[int, _stream.Stream] = {}  # stream handle -> its stream
_events: dict[int, _stream.Event] = {}  # event handle -> its event


# --------------------------------------------------------------------- devices


def set_device(device_id: int) -> int:
    """Make ``device_id`` the current device and count one more user of it."""
    chosen = _device.set_device(device_id)
    with _lock:
        _device_refs[chosen.device_id] = _device_refs.get(chosen.device_id, 0) + 1
    return _SUCCESS


def reset_device(device_id: int) -> int:
    """Balance one ``set_device``; the last one frees the device's buffers (warning if any)."""
    target = _device.get_device(device_id)
    with _lock:
        users = _device_refs.get(target.device_id, 0)
        if users > 1:
            _device_refs[target.device_id] = users - 1
            return _SUCCESS
        _device_refs.pop(target.device_id, None)
        freed = _device.reset_device(target.device_id, warn=False)
    if freed:
        warnings.warn(f"acl.rt.reset_device({target.device_id}) freed {len(freed)} buffer(s) "
                      f"still allocated ({sum(size for _, size in freed)} bytes)",
                      RuntimeWarning, stacklevel=2)
    return _SUCCESS


def get_device() -> tuple[int, int]:
    """``(device_id, ret)`` of the current device."""
    return _device.current_device().device_id, _SUCCESS


def get_device_count() -> tuple[int, int]:
    """``(count, ret)``: how many device ids ``set_device`` accepts."""
    return _device.device_count(), _SUCCESS


def synchronize_device() -> int:
    """Wait for the work of every live stream and of the current device.

    Every stream is waited for, even after one reports an error; the first error is raised.
    """
    with _lock:
        streams = list(_streams.values())
    first: GEError | None = None
    for each in streams:
        try:
            each.synchronize()
        except GEError as error:
            if first is None:
                first = error
    _device.current_device().synchronize()
    if first is not None:
        raise first
    return _SUCCESS


# ---------------------------------------------------------------------- memory


def malloc(size: int, policy: int = 0) -> tuple[int, int]:
    """Allocate ``size`` bytes on the current device: ``(ptr, ret)``. ``policy`` is ignored."""
    as_size(policy, "malloc policy")
    return _device.current_device().allocate(as_size(size, "malloc size")), _SUCCESS


def free(ptr: int) -> int:
    """Free a pointer from ``malloc`` or from a session's outputs, on whichever device."""
    _device.device_of_pointer(ptr).free(ptr)
    return _SUCCESS


def memset(ptr: int, max_size: int, value: int, count: int) -> int:
    """Set ``count`` bytes at ``ptr`` to ``value`` (``count`` must not exceed ``max_size``)."""
    count = as_size(count, "memset count")
    if count > as_size(max_size, "memset max_size"):
        raise GERuntimeError(f"memset count {count} exceeds max_size {max_size}")
    byte = operator.index(value) & 0xFF
    target = _device.device_of_pointer(ptr)
    target.copy_in(ptr, bytes([byte]) * count)
    return _SUCCESS


def memcpy(dst: Any, src: Any, count: int, kind: int) -> int:
    """Copy ``count`` bytes from ``src`` to ``dst`` on the calling thread; ``kind`` says which
    side is which.

    ``MEMCPY_HOST_TO_DEVICE``: ``dst`` a device pointer, ``src`` a NumPy array or
    bytes (read in C order). ``MEMCPY_DEVICE_TO_HOST``: ``dst`` a writable,
    C-contiguous NumPy array (or bytearray), written in place; ``src`` a pointer.
    ``MEMCPY_DEVICE_TO_DEVICE``: two pointers. ``MEMCPY_HOST_TO_HOST``: two host
    buffers. ``count`` must fit both sides, else ``OutOfBoundsError``.
    """
    _copy_plan(dst, src, count, kind)()
    return _SUCCESS


def memcpy_async(dst: Any, src: Any, count: int, kind: int, stream: Any) -> int:
    """``memcpy`` enqueued on ``stream``; the arguments are checked before it returns.

    The copy runs on the stream's thread (at once on the default stream, ``None``
    or ``0``); a failure there (say, the buffer was freed meanwhile) is raised by
    the next ``synchronize_stream``. ``src`` may be a temporary: it is kept alive.
    """
    target = stream_of(stream)
    _stream.submit(target, _copy_plan(dst, src, count, kind))
    return _SUCCESS


def _copy_plan(dst: Any, src: Any, count: int, kind: int) -> Callable[[], None]:
    """Check a copy's operands and sizes now; return the function that does the copy.

    Device ranges are checked now on CPU devices (other kinds check when copying),
    and again when the copy runs.
    """
    name = _kind_name(kind)
    count = as_size(count, f"{name} count")
    if kind == MEMCPY_HOST_TO_DEVICE:
        target = as_pointer(dst, f"device pointer as {name} dst")
        data = host_bytes(src, count, f"{name} src")
        _check_range(target, count)
        return lambda: _device.device_of_pointer(target).copy_in(target, data)
    if kind == MEMCPY_DEVICE_TO_HOST:
        origin = as_pointer(src, f"device pointer as {name} src")
        out = writable_host_bytes(dst, count, f"{name} dst")
        _check_range(origin, count)
        return lambda: _copy_out(out, origin, count)
    if kind == MEMCPY_DEVICE_TO_DEVICE:
        target = as_pointer(dst, f"device pointer as {name} dst")
        origin = as_pointer(src, f"device pointer as {name} src")
        _check_range(target, count)
        _check_range(origin, count)
        return lambda: _device.copy_device_to_device(target, origin, count)
    data = host_bytes(src, count, f"{name} src")
    out = writable_host_bytes(dst, count, f"{name} dst")
    return lambda: out.__setitem__(Ellipsis, data)


def _check_range(ptr: int, count: int) -> None:
    """Raise unless ``count`` bytes at ``ptr`` lie in one live buffer (CPU devices)."""
    owner = _device.device_of_pointer(ptr)
    if isinstance(owner, _device.CpuDevice):
        owner.view(ptr, count)


def _copy_out(out: Any, origin: int, count: int) -> None:
    _device.device_of_pointer(origin).copy_out(out, origin, count)


def _kind_name(kind: Any) -> str:
    if isinstance(kind, bool) or not isinstance(kind, int) or kind not in _KIND_NAMES:
        choices = ", ".join(f"{name}={value}" for value, name in _KIND_NAMES.items())
        raise GERuntimeError(f"invalid memcpy kind {kind!r}; expected one of {choices}")
    return _KIND_NAMES[kind]


# ------------------------------------------------------------- streams, events


def create_stream(number: int | None = None) -> int:
    """Create a stream and return its handle; ``number`` is a label the article passes.

    The stream's thread starts with its first piece of work.
    """
    with _lock:
        handle = next(_handles)
        _streams[handle] = _stream.Stream(number)
        return handle


def destroy_stream(stream: int) -> int:
    """Finish a stream's work, stop its thread and drop it; raise the error of a failed copy."""
    handle = _handle(stream, "stream")
    with _lock:
        target = _streams.pop(handle, None)
    if target is None:
        raise GERuntimeError(f"destroy_stream: {stream!r} is not a live stream")
    try:
        target.synchronize()
    finally:
        target.close()
    return _SUCCESS


def synchronize_stream(stream: Any) -> int:
    """Block until the work issued on ``stream`` is done; raise the error of a failed copy."""
    _stream.synchronize(stream_of(stream))
    return _SUCCESS


def stream_of(stream: Any) -> _stream.Stream | None:
    """The :class:`~ge.runtime.stream.Stream` of a live handle; ``None`` for ``None``/``0``.

    ``None`` is the default stream, the calling thread. Anything else raises
    ``GERuntimeError``.
    """
    if stream is None:
        return None
    handle = _handle(stream, "stream")
    if handle == 0:
        return None
    with _lock:
        found = _streams.get(handle)
    if found is None:
        raise GERuntimeError(f"{stream!r} is not a live stream (create_stream first)")
    return found


def create_event(number: int | None = None) -> int:
    """Create an event and return its handle; ``number`` is a label the article passes."""
    with _lock:
        handle = next(_handles)
        _events[handle] = _stream.Event(number)
        return handle


def record_event(event: int, stream: Any) -> int:
    """Enqueue a record of ``event`` on ``stream``: it is reached when the work before it is."""
    _event_of(event, "record_event").record(stream_of(stream))
    return _SUCCESS


def synchronize_event(event: int) -> int:
    """Block until the latest record of ``event`` is reached (at once if never recorded)."""
    _event_of(event, "synchronize_event").synchronize()
    return _SUCCESS


def query_event(event: int) -> tuple[int, int]:
    """``(status, ret)``: ``EVENT_STATUS_COMPLETE`` if the latest record is reached, else
    ``EVENT_STATUS_NOT_READY``."""
    reached = _event_of(event, "query_event").query()
    return (EVENT_STATUS_COMPLETE if reached else EVENT_STATUS_NOT_READY), _SUCCESS


def stream_wait_event(stream: Any, event: int) -> int:
    """Make work issued on ``stream`` from now on wait for ``event``'s latest record.

    On the default stream (``None``/``0``) it blocks the caller until the record is reached.
    """
    _stream.wait_event(stream_of(stream), _event_of(event, "stream_wait_event"))
    return _SUCCESS


def destroy_event(event: int) -> int:
    """Destroy an event created by ``create_event`` (records still queued stay harmless)."""
    handle = _handle(event, "event")
    with _lock:
        if _events.pop(handle, None) is None:
            raise GERuntimeError(f"destroy_event: {event!r} is not a live event")
    return _SUCCESS


def _handle(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise GERuntimeError(f"a {what} handle is an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise GERuntimeError(
            f"a {what} handle is an integer, got {type(value).__name__}") from None


def _event_of(event: Any, operation: str) -> _stream.Event:
    handle = _handle(event, "event")
    with _lock:
        found = _events.get(handle)
    if found is None:
        raise GERuntimeError(f"{operation}: {event!r} is not a live event")
    return found


# --------------------------------------------------------------- acl.finalize


def _release_everything() -> list[tuple[str, int, int]]:
    """Close every stream (its queued work is done first, errors are dropped), then free
    every device's buffers and drop events and device counts.

    Returns ``(device name, buffers freed, bytes freed)`` for each device that
    still had buffers. Called by ``acl.finalize`` when its count reaches zero.
    """
    with _lock:
        streams = list(_streams.values())
        _streams.clear()
    for each in streams:  # outside the lock: their queued work may call acl.rt
        each.close()
    leaks = []
    with _lock:
        for target in _device.live_devices():
            freed = target.reset()
            if freed:
                leaks.append((target.name, len(freed), sum(size for _, size in freed)))
        _device_refs.clear()
        _events.clear()
        _device.set_device(0)
    return leaks
