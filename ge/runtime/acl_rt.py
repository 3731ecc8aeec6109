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
- Streams and events are synchronous (D23): work is done when it is issued, on
  the calling thread, so ``synchronize_*`` return at once and ``memcpy_async``
  may be given a temporary host array. Nothing runs in the background, and work
  on two streams does not overlap. Handles are unique positive integers.
"""

from __future__ import annotations

import itertools
import operator
import threading
import warnings
from typing import Any

from ge.errors import GERuntimeError
from ge.runtime import device as _device
from ge.runtime.memory import as_pointer, as_size, host_bytes, writable_host_bytes

__all__ = [
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
    "record_event",
    "reset_device",
    "set_device",
    "stream_id",
    "synchronize_device",
    "synchronize_event",
    "synchronize_stream",
]

MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3

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
_streams: dict[int, int | None] = {}  # stream handle -> the number it was created with
_events: dict[int, bool] = {}  # event handle -> recorded at least once


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
    """Wait for all work on the current device."""
    _device.current_device().synchronize()
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
    """Copy ``count`` bytes from ``src`` to ``dst``; ``kind`` says which side is which.

    ``MEMCPY_HOST_TO_DEVICE``: ``dst`` a device pointer, ``src`` a NumPy array or
    bytes (read in C order). ``MEMCPY_DEVICE_TO_HOST``: ``dst`` a writable,
    C-contiguous NumPy array (or bytearray), written in place; ``src`` a pointer.
    ``MEMCPY_DEVICE_TO_DEVICE``: two pointers. ``MEMCPY_HOST_TO_HOST``: two host
    buffers. ``count`` must fit both sides, else ``OutOfBoundsError``.
    """
    name = _kind_name(kind)
    count = as_size(count, f"{name} count")
    if kind == MEMCPY_HOST_TO_DEVICE:
        target = as_pointer(dst, f"device pointer as {name} dst")
        data = host_bytes(src, count, f"{name} src")
        _device.device_of_pointer(target).copy_in(target, data)
    elif kind == MEMCPY_DEVICE_TO_HOST:
        origin = as_pointer(src, f"device pointer as {name} src")
        out = writable_host_bytes(dst, count, f"{name} dst")
        _device.device_of_pointer(origin).copy_out(out, origin, count)
    elif kind == MEMCPY_DEVICE_TO_DEVICE:
        target = as_pointer(dst, f"device pointer as {name} dst")
        origin = as_pointer(src, f"device pointer as {name} src")
        _device.copy_device_to_device(target, origin, count)
    else:
        data = host_bytes(src, count, f"{name} src")
        writable_host_bytes(dst, count, f"{name} dst")[...] = data
    return _SUCCESS


def memcpy_async(dst: Any, src: Any, count: int, kind: int, stream: Any) -> int:
    """``memcpy`` issued on ``stream``; done before it returns, so ``src`` may be temporary."""
    _check_stream(stream)
    return memcpy(dst, src, count, kind)


def _kind_name(kind: Any) -> str:
    if isinstance(kind, bool) or not isinstance(kind, int) or kind not in _KIND_NAMES:
        choices = ", ".join(f"{name}={value}" for value, name in _KIND_NAMES.items())
        raise GERuntimeError(f"invalid memcpy kind {kind!r}; expected one of {choices}")
    return _KIND_NAMES[kind]


# ------------------------------------------------------------- streams, events


def create_stream(number: int | None = None) -> int:
    """Create a stream and return its handle; ``number`` is a label the article passes."""
    with _lock:
        handle = next(_handles)
        _streams[handle] = number
        return handle


def destroy_stream(stream: int) -> int:
    """Destroy a stream created by ``create_stream``."""
    handle = _handle(stream, "stream")
    with _lock:
        if handle not in _streams:
            raise GERuntimeError(f"destroy_stream: {stream!r} is not a live stream")
        del _streams[handle]
    return _SUCCESS


def synchronize_stream(stream: Any) -> int:
    """Wait until the work issued on ``stream`` is done (it already is)."""
    _check_stream(stream)
    return _SUCCESS


def create_event(number: int | None = None) -> int:
    """Create an event and return its handle; ``number`` is a label the article passes."""
    del number
    with _lock:
        handle = next(_handles)
        _events[handle] = False
        return handle


def record_event(event: int, stream: Any) -> int:
    """Mark ``event`` as reached once the work issued on ``stream`` so far is done."""
    _check_stream(stream)
    with _lock:
        _check_event(event, "record_event")
        _events[event] = True
    return _SUCCESS


def synchronize_event(event: int) -> int:
    """Block until ``event`` is reached (work is synchronous, so it already is)."""
    with _lock:
        _check_event(event, "synchronize_event")
    return _SUCCESS


def destroy_event(event: int) -> int:
    """Destroy an event created by ``create_event``."""
    with _lock:
        _check_event(event, "destroy_event")
        del _events[event]
    return _SUCCESS


def _handle(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise GERuntimeError(f"a {what} handle is an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise GERuntimeError(
            f"a {what} handle is an integer, got {type(value).__name__}") from None


def _check_stream(stream: Any) -> None:
    """Accept a live stream handle, or ``None``/``0`` for the default stream."""
    if stream is None:
        return
    handle = _handle(stream, "stream")
    with _lock:
        if handle != 0 and handle not in _streams:
            raise GERuntimeError(f"{stream!r} is not a live stream (create_stream first)")


def _check_event(event: Any, operation: str) -> None:
    if _handle(event, "event") not in _events:
        raise GERuntimeError(f"{operation}: {event!r} is not a live event")


# --------------------------------------------------------------- acl.finalize


def _release_everything() -> list[tuple[str, int, int]]:
    """Free every device's buffers, drop streams and events and device counts.

    Returns ``(device name, buffers freed, bytes freed)`` for each device that
    still had buffers. Called by ``acl.finalize`` when its count reaches zero.
    """
    leaks = []
    with _lock:
        for target in _device.live_devices():
            freed = target.reset()
            if freed:
                leaks.append((target.name, len(freed), sum(size for _, size in freed)))
        _device_refs.clear()
        _streams.clear()
        _events.clear()
        _device.set_device(0)
    return leaks
