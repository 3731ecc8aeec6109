"""Devices and the process-wide device registry.

A :class:`Device` is a few overridable methods, as a driver would offer them:
``allocate``/``free`` device memory, ``copy_in`` from the host, ``copy_out`` to
the host, ``copy`` between device pointers, ``launch`` a kernel and
``synchronize``. :class:`CpuDevice` implements them over a :class:`DeviceHeap`;
its memory is host memory, so it also offers ``array``, a zero-copy NumPy view
of a buffer for the kernels to compute in.

Devices are addressed as ``(kind, id)``. The ``"cpu"`` kind always exists with
ids ``0 .. MAX_CPU_DEVICES - 1`` (id 0 works on any host, as the seed's
``device_id=0`` needs). The *default kind* is the one a bare id means (the one
``acl.rt.set_device(id)`` selects); it is ``"cpu"``.

The CPU is the only kind GE has: there is no CUDA or NPU device, and every
kernel runs on the host, on NumPy arrays. :func:`register_device_kind` is where
another kind would plug in (subclass :class:`Device`, implement its memory and
copy methods, register it). Such a kind would get ``acl.rt`` memory and copies;
``ge.Session`` would still compute on the host, and it reads a device-buffer feed
through :meth:`Device.array`, which a device whose memory the host cannot see
does not have.

``launch`` runs a kernel at once on the calling thread and ``synchronize``
returns at once: devices start no threads (the threads that run queued work
belong to :mod:`ge.runtime.stream`). The registry is
process-wide and thread-safe, and the current device set by :func:`set_device`
holds for every thread of the process, not per thread.
"""

from __future__ import annotations

import operator
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ge.errors import GERuntimeError, InvalidPointerError
from ge.runtime.memory import (
    DEFAULT_SEGMENT_BYTES,
    DeviceHeap,
    as_pointer,
    writable_host_bytes,
)

__all__ = [
    "MAX_CPU_DEVICES",
    "CpuDevice",
    "Device",
    "copy_device_to_device",
    "current_device",
    "device_count",
    "device_of_pointer",
    "get_device",
    "live_devices",
    "register_device_kind",
    "reset_device",
    "set_device",
]

MAX_CPU_DEVICES = 8
"""How many CPU devices (ids ``0 .. MAX_CPU_DEVICES - 1``) a process may use."""


class Device:
    """One device: memory it owns, copies to and from the host, kernel launches.

    Subclasses set ``kind`` and override the methods that raise here. Pointers are
    integers; ``nbytes`` counts bytes. Errors are ``ge.errors`` runtime errors.
    """

    kind = "device"

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id

    @property
    def name(self) -> str:
        """``"<kind>:<id>"``, e.g. ``"cpu:0"``."""
        return f"{self.kind}:{self.device_id}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # Memory ------------------------------------------------------------------

    def allocate(self, nbytes: int) -> int:
        """Reserve ``nbytes`` bytes of device memory; return its pointer."""
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        """Release a pointer returned by :meth:`allocate`."""
        raise NotImplementedError

    def size_of(self, ptr: int) -> int:
        """The byte size of the allocation starting at ``ptr``."""
        raise NotImplementedError

    def owns(self, ptr: int) -> bool:
        """Whether ``ptr`` is an address of this device (live or not)."""
        raise NotImplementedError

    def live(self) -> list[tuple[int, int]]:
        """The live allocations as ``(ptr, nbytes)`` pairs."""
        raise NotImplementedError

    def reset(self) -> list[tuple[int, int]]:
        """Free every allocation and release cached memory; return what was live."""
        raise NotImplementedError

    @property
    def bytes_in_use(self) -> int:
        """Bytes currently allocated."""
        return sum(size for _, size in self.live())

    @property
    def peak_bytes(self) -> int:
        """The most bytes allocated at once."""
        return self.bytes_in_use

    # Copies ------------------------------------------------------------------

    def copy_in(self, ptr: int, host: Any, nbytes: int | None = None) -> None:
        """Copy ``nbytes`` bytes (default: all) of a host array or bytes object to ``ptr``."""
        raise NotImplementedError

    def copy_out(self, host: np.ndarray | None, ptr: int, nbytes: int) -> np.ndarray:
        """Copy ``nbytes`` bytes at ``ptr`` into ``host`` (or a new uint8 array); return it."""
        raise NotImplementedError

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` bytes between two pointers of this device (through the host here)."""
        self.copy_in(dst, self.copy_out(None, src, nbytes))

    def array(self, ptr: int, dtype: Any, shape: Any) -> np.ndarray:
        """A NumPy view of device memory; only devices whose memory the host can see have one."""
        raise GERuntimeError(f"{self.name}: device memory is not visible to the host; "
                             f"use copy_out")

    # Execution ---------------------------------------------------------------

    def launch(self, kernel: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``kernel(*args, **kwargs)`` on this device; the CPU runs it at once."""
        return kernel(*args, **kwargs)

    def synchronize(self) -> None:
        """Wait until all work launched on this device has finished."""


class CpuDevice(Device):
    """The host CPU as a device: memory from a :class:`DeviceHeap`, kernels run inline."""

    kind = "cpu"

    def __init__(self, device_id: int = 0, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 capacity: int | None = None) -> None:
        super().__init__(device_id)
        self.heap = DeviceHeap(segment_bytes, capacity, name=self.name)

    def allocate(self, nbytes: int) -> int:
        return self.heap.allocate(nbytes)

    def free(self, ptr: int) -> None:
        self.heap.free(ptr)

    def size_of(self, ptr: int) -> int:
        return self.heap.size_of(ptr)

    def owns(self, ptr: int) -> bool:
        return self.heap.contains(ptr)

    def live(self) -> list[tuple[int, int]]:
        return self.heap.live()

    def reset(self) -> list[tuple[int, int]]:
        return self.heap.reset()

    @property
    def bytes_in_use(self) -> int:
        return self.heap.bytes_in_use

    @property
    def peak_bytes(self) -> int:
        return self.heap.peak_bytes

    def copy_in(self, ptr: int, host: Any, nbytes: int | None = None) -> None:
        self.heap.write(ptr, host, nbytes)

    def copy_out(self, host: np.ndarray | None, ptr: int, nbytes: int) -> np.ndarray:
        source = self.heap.view(ptr, nbytes)
        if host is None:
            return source.copy()
        writable_host_bytes(host, nbytes)[...] = source
        return host

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.heap.copy(dst, src, nbytes)

    def view(self, ptr: int, nbytes: int) -> np.ndarray:
        """A ``uint8`` view of ``nbytes`` bytes at ``ptr``."""
        return self.heap.view(ptr, nbytes)

    def array(self, ptr: int, dtype: Any, shape: Any) -> np.ndarray:
        return self.heap.array(ptr, dtype, shape)


# ------------------------------------------------------------------ the registry


@dataclass(frozen=True)
class _Kind:
    factory: Callable[[int], Device]
    count: int


_lock = threading.RLock()
_kinds: dict[str, _Kind] = {"cpu": _Kind(CpuDevice, MAX_CPU_DEVICES)}
_default_kind = "cpu"
_devices: dict[tuple[str, int], Device] = {}
_current: tuple[str, int] = ("cpu", 0)


def register_device_kind(kind: str, factory: Callable[[int], Device], count: int,
                         make_default: bool = False) -> None:
    """Make ``count`` devices of ``kind`` available, built on first use by ``factory(id)``.

    With ``make_default``, a bare device id (and ``acl.rt.set_device``) means this kind.
    """
    global _default_kind
    with _lock:
        _kinds[kind] = _Kind(factory, int(count))
        if make_default:
            _default_kind = kind


def device_count(kind: str | None = None) -> int:
    """How many devices of ``kind`` (default: the default kind) this process may use."""
    with _lock:
        return _kind(kind or _default_kind)[1].count


def _kind(kind: str) -> tuple[str, _Kind]:
    if kind not in _kinds:
        raise GERuntimeError(f"unknown device kind {kind!r}; known kinds: {sorted(_kinds)}")
    return kind, _kinds[kind]


def _key(device_id: Any, kind: str | None) -> tuple[str, int]:
    name, spec = _kind(kind or _default_kind)
    if isinstance(device_id, (bool, np.bool_)):
        raise GERuntimeError(f"device id must be an integer, got {device_id!r}")
    try:
        number = operator.index(device_id)
    except TypeError:
        raise GERuntimeError(
            f"device id must be an integer, got {type(device_id).__name__}") from None
    if not 0 <= number < spec.count:
        raise GERuntimeError(
            f"device id {number} is out of range: this process has {spec.count} {name} "
            f"devices (ids 0..{spec.count - 1})")
    return name, number


def _resolve(device_id: Any, kind: str | None) -> tuple[str, int]:
    """The registry key for an id and kind; a missing id means the current device."""
    if device_id is None:
        if kind is None or kind == _current[0]:
            return _current
        device_id = 0
    return _key(device_id, kind)


def get_device(device_id: int | None = None, kind: str | None = None) -> Device:
    """The device with this id (default: the current device), created on first use."""
    with _lock:
        return _instance(_resolve(device_id, kind))


def _instance(key: tuple[str, int]) -> Device:
    device = _devices.get(key)
    if device is None:
        device = _kinds[key[0]].factory(key[1])
        _devices[key] = device
    return device


def set_device(device_id: int, kind: str | None = None) -> Device:
    """Make a device the current one (for every thread) and return it."""
    global _current
    with _lock:
        device = _instance(_key(device_id, kind))
        _current = (device.kind, device.device_id)
        return device


def current_device() -> Device:
    """The current device: cpu:0 until :func:`set_device` chooses another."""
    return get_device()


def reset_device(device_id: int | None = None, kind: str | None = None,
                 warn: bool = True) -> list[tuple[int, int]]:
    """Free every buffer of a device and release its memory; return what was live.

    Live buffers are a leak in the caller: with ``warn`` a ``RuntimeWarning`` says
    how many were freed. The device stays usable (it allocates afresh); pointers
    to the freed buffers become invalid.
    """
    with _lock:
        device = _devices.get(_resolve(device_id, kind))
        if device is None:
            return []
        freed = device.reset()
    if freed and warn:
        warnings.warn(f"reset of device {device.name} freed {len(freed)} buffer(s) still "
                      f"allocated ({sum(size for _, size in freed)} bytes)",
                      RuntimeWarning, stacklevel=2)
    return freed


def live_devices() -> list[Device]:
    """The devices created so far in this process."""
    with _lock:
        return list(_devices.values())


def device_of_pointer(ptr: int) -> Device:
    """The device whose memory ``ptr`` addresses; ``InvalidPointerError`` if none."""
    address = as_pointer(ptr)
    for device in live_devices():
        if device.owns(address):
            return device
    raise InvalidPointerError(f"{address:#x} is not a pointer of any device "
                              f"(was it returned by malloc/allocate?)")


def copy_device_to_device(dst: int, src: int, nbytes: int) -> None:
    """Copy ``nbytes`` bytes between device pointers, on one device or across two."""
    dst_device = device_of_pointer(dst)
    src_device = device_of_pointer(src)
    if dst_device is src_device:
        dst_device.copy(dst, src, nbytes)
    elif isinstance(dst_device, CpuDevice) and isinstance(src_device, CpuDevice):
        np.copyto(dst_device.view(dst, nbytes), src_device.view(src, nbytes))
    else:
        dst_device.copy_in(dst, src_device.copy_out(None, src, nbytes))
