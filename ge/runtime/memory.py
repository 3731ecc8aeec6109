"""Device memory for the CPU device: a managed heap over NumPy arenas.

A :class:`DeviceHeap` hands out *device pointers*: plain integers, as a driver's
allocator would. Behind them lie NumPy ``uint8`` arenas (segments, 64 MiB by
default, a bigger one for a bigger request). Every heap owns its own window of
addresses (16 TiB wide), so a pointer names exactly one heap and one byte;
segments sit at distinct, non-overlapping bases inside the window, with a gap
between them, so a pointer just past one segment never lands in another.

Blocks are 64-byte aligned (both their addresses and the real host memory behind
them), placed first-fit, split from larger free ranges and coalesced with their
free neighbours when freed. A segment left wholly free is released, except one
default-size segment kept as a cache. Every access is checked: a pointer must lie
inside a live block (interior pointers are accepted) and the access must end
inside that block, so a bad copy raises instead of touching a neighbour.

The heap is thread-safe: one lock guards its bookkeeping. Copies run outside the
lock on views resolved under it, so large copies on different blocks proceed in
parallel.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import math
import operator
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ge.errors import (
    DeviceMemoryError,
    DoubleFreeError,
    InvalidPointerError,
    OutOfBoundsError,
    OutOfMemoryError,
)

__all__ = [
    "ALIGNMENT",
    "DEFAULT_SEGMENT_BYTES",
    "DeviceHeap",
    "as_pointer",
    "as_size",
    "host_bytes",
    "writable_host_bytes",
    "tune_process_heap",
    "HEAP_REUSE_BYTES",
]

ALIGNMENT = 64
"""Every block starts on a multiple of this many bytes (addresses and host memory)."""

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
"""Size of one arena; a request bigger than this gets a segment of its own."""

_GRANULE = 1 << 20  # segment sizes and bases are multiples of 1 MiB
_GUARD = _GRANULE  # unused addresses left after every segment
_WINDOW_BYTES = 1 << 44  # each heap's pointers lie in [k * 2**44, (k + 1) * 2**44)
_FREED_REMEMBERED = 1 << 16  # how many freed pointers a heap remembers, to name double frees

_window_numbers = itertools.count(1)  # window 0 is never used: no pointer is ever 0


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def as_size(nbytes: Any, what: str = "byte count") -> int:
    """Return ``nbytes`` as a non-negative int, or raise ``DeviceMemoryError``."""
    if isinstance(nbytes, (bool, np.bool_)):
        raise DeviceMemoryError(f"{what} must be an integer, got {nbytes!r}")
    try:
        value = operator.index(nbytes)
    except TypeError:
        raise DeviceMemoryError(
            f"{what} must be an integer, got {type(nbytes).__name__}") from None
    if value < 0:
        raise DeviceMemoryError(f"{what} must be >= 0, got {value}")
    return value


def as_pointer(ptr: Any, what: str = "device pointer") -> int:
    """Return ``ptr`` as a positive int, or raise ``InvalidPointerError``."""
    if isinstance(ptr, (bool, np.bool_, np.ndarray)):
        raise InvalidPointerError(
            f"expected a {what} (an int from malloc/allocate), got {type(ptr).__name__}")
    try:
        value = operator.index(ptr)
    except TypeError:
        raise InvalidPointerError(
            f"expected a {what} (an int from malloc/allocate), got {type(ptr).__name__}"
        ) from None
    if value <= 0:
        raise InvalidPointerError(f"{value:#x} is not a valid {what} (null or negative)")
    return value


def host_bytes(source: Any, nbytes: int | None = None, what: str = "host source") -> np.ndarray:
    """The first ``nbytes`` bytes of a host buffer, in C order, as a flat ``uint8`` array.

    ``source`` is a NumPy array (any layout: a non-contiguous one is read in C
    order, through a copy) or a bytes-like object. ``nbytes=None`` means all of it;
    asking for more bytes than it holds raises ``OutOfBoundsError``.
    """
    if isinstance(source, np.ndarray):
        if source.dtype.hasobject:
            raise DeviceMemoryError(f"{what} has dtype object; only plain data can be copied")
        flat = np.ascontiguousarray(source).reshape(-1).view(np.uint8)
    else:
        try:
            flat = np.frombuffer(memoryview(source).cast("B"), dtype=np.uint8)
        except (TypeError, ValueError):
            raise DeviceMemoryError(
                f"{what} must be a NumPy array or a contiguous bytes-like object, "
                f"got {type(source).__name__}") from None
    if nbytes is None:
        return flat
    nbytes = as_size(nbytes)
    if nbytes > flat.size:
        raise OutOfBoundsError(
            f"{what} holds {flat.size} bytes, fewer than the {nbytes} bytes to copy")
    return flat[:nbytes]


def writable_host_bytes(destination: Any, nbytes: int, what: str = "host destination"
                        ) -> np.ndarray:
    """A flat ``uint8`` view of the first ``nbytes`` bytes of a writable host buffer.

    ``destination`` must be a writable, C-contiguous NumPy array or a writable
    bytes-like object (``bytearray``); anything else is refused rather than written
    through a hidden copy the caller would never see.
    """
    nbytes = as_size(nbytes)
    if isinstance(destination, np.ndarray):
        if not destination.flags.writeable:
            raise DeviceMemoryError(f"{what} is a read-only array")
        if not destination.flags.c_contiguous:
            raise DeviceMemoryError(
                f"{what} is not C-contiguous (strides {destination.strides}); copy into "
                f"np.ascontiguousarray(...) or a fresh np.empty(...) instead")
        if destination.dtype.hasobject:
            raise DeviceMemoryError(f"{what} has dtype object; only plain data can be copied")
        flat = destination.reshape(-1).view(np.uint8)
    else:
        try:
            view = memoryview(destination)
        except TypeError:
            raise DeviceMemoryError(
                f"{what} must be a writable NumPy array or bytearray, "
                f"got {type(destination).__name__}") from None
        if view.readonly or not view.c_contiguous:
            raise DeviceMemoryError(f"{what} is read-only or not contiguous")
        flat = np.frombuffer(view.cast("B"), dtype=np.uint8)
    if nbytes > flat.size:
        raise OutOfBoundsError(
            f"{what} holds {flat.size} bytes, fewer than the {nbytes} bytes to copy")
    return flat[:nbytes]


class _Segment:
    """One arena: ``size`` bytes at address ``base``, with its free ranges and live blocks."""

    __slots__ = ("base", "size", "arena", "free", "starts")

    def __init__(self, base: int, size: int) -> None:
        raw = np.zeros(size + ALIGNMENT, dtype=np.uint8)
        shift = (-raw.ctypes.data) % ALIGNMENT
        self.base = base
        self.size = size
        self.arena = raw[shift:shift + size]
        self.free: list[tuple[int, int]] = [(0, size)]  # (offset, size), sorted by offset
        self.starts: list[int] = []  # addresses of live blocks, sorted

    @property
    def end(self) -> int:
        return self.base + self.size

    def take(self, need: int) -> int | None:
        """Carve ``need`` bytes from the first free range that fits; return the address."""
        for index, (offset, size) in enumerate(self.free):
            if size >= need:
                if size == need:
                    del self.free[index]
                else:
                    self.free[index] = (offset + need, size - need)
                address = self.base + offset
                bisect.insort(self.starts, address)
                return address
        return None

    def give_back(self, address: int, size: int) -> None:
        """Return a block's range to the free list, merging it with free neighbours."""
        del self.starts[bisect.bisect_left(self.starts, address)]
        offset = address - self.base
        free = self.free
        index = bisect.bisect_left(free, (offset, 0))
        if index < len(free) and free[index][0] == offset + size:
            size += free[index][1]
            del free[index]
        if index > 0 and free[index - 1][0] + free[index - 1][1] == offset:
            index -= 1
            offset, size = free[index][0], free[index][1] + size
            del free[index]
        free.insert(index, (offset, size))


@dataclass
class _Block:
    ptr: int
    size: int  # the bytes asked for: accesses must end by ptr + size
    capacity: int  # the bytes reserved: a multiple of ALIGNMENT, at least ALIGNMENT
    segment: _Segment


class DeviceHeap:
    """A thread-safe heap of device memory over NumPy arenas, addressed by integer pointers.

    ``segment_bytes`` is the size of one arena; ``capacity`` (bytes, optional)
    bounds the total of all arenas, beyond which ``allocate`` raises
    ``OutOfMemoryError``. ``name`` appears in error messages.
    """

    def __init__(self, segment_bytes: int = DEFAULT_SEGMENT_BYTES, capacity: int | None = None,
                 name: str = "heap") -> None:
        self.segment_bytes = _round_up(max(as_size(segment_bytes, "segment_bytes"), 1), _GRANULE)
        self.capacity = None if capacity is None else as_size(capacity, "capacity")
        self.name = name
        self.window_start = next(_window_numbers) * _WINDOW_BYTES
        self.window_end = self.window_start + _WINDOW_BYTES
        self._lock = threading.RLock()
        self._segments: list[_Segment] = []  # sorted by base
        self._bases: list[int] = []
        self._next_base = self.window_start + _GRANULE
        self._blocks: dict[int, _Block] = {}
        self._freed: OrderedDict[int, int] = OrderedDict()  # freed pointer -> its size
        self._in_use = 0
        self._peak = 0
        self._reserved = 0

    def __repr__(self) -> str:
        return (f"DeviceHeap({self.name!r}, {len(self._blocks)} blocks, "
                f"{self._in_use} bytes in use, {self._reserved} reserved)")

    # ----------------------------------------------------------------- allocation

    def allocate(self, nbytes: int) -> int:
        """Reserve ``nbytes`` bytes (0 allowed) and return a unique, 64-byte aligned pointer."""
        nbytes = as_size(nbytes, "allocation size")
        need = max(ALIGNMENT, _round_up(nbytes, ALIGNMENT))
        with self._lock:
            address = None
            for segment in self._segments:
                address = segment.take(need)
                if address is not None:
                    break
            if address is None:
                segment = self._grow(need, nbytes)
                address = segment.take(need)
                assert address is not None
            self._blocks[address] = _Block(address, nbytes, need, segment)
            self._freed.pop(address, None)
            self._in_use += nbytes
            self._peak = max(self._peak, self._in_use)
            return address

    def free(self, ptr: int) -> None:
        """Release the block that ``allocate`` returned as ``ptr``."""
        ptr = as_pointer(ptr)
        with self._lock:
            block = self._blocks.pop(ptr, None)
            if block is None:
                raise self._bad_free(ptr)
            self._in_use -= block.size
            self._remember_freed(ptr, block.size)
            segment = block.segment
            segment.give_back(ptr, block.capacity)
            if not segment.starts:
                self._maybe_release(segment)

    def size_of(self, ptr: int) -> int:
        """The size in bytes asked for when the block starting at ``ptr`` was allocated."""
        ptr = as_pointer(ptr)
        with self._lock:
            block = self._blocks.get(ptr)
            if block is None:
                raise self._not_live(ptr, "size_of() needs the pointer allocate() returned")
            return block.size

    def contains(self, ptr: int) -> bool:
        """Whether ``ptr`` lies in this heap's address window (live or not)."""
        return self.window_start <= ptr < self.window_end

    def is_live(self, ptr: int) -> bool:
        """Whether ``ptr`` points into (or is the start of) a live block of this heap."""
        with self._lock:
            return self._locate(ptr) is not None

    def live(self) -> list[tuple[int, int]]:
        """The live blocks as ``(ptr, size)`` pairs, in address order."""
        with self._lock:
            return sorted((block.ptr, block.size) for block in self._blocks.values())

    @property
    def bytes_in_use(self) -> int:
        """Total bytes of the live blocks (as asked for, before alignment)."""
        return self._in_use

    @property
    def peak_bytes(self) -> int:
        """The highest ``bytes_in_use`` seen since creation or :meth:`reset_peak`."""
        return self._peak

    @property
    def reserved_bytes(self) -> int:
        """Total bytes of the arenas currently held."""
        return self._reserved

    @property
    def segment_count(self) -> int:
        """How many arenas are currently held."""
        return len(self._segments)

    def reset_peak(self) -> None:
        """Restart peak tracking from the current usage."""
        with self._lock:
            self._peak = self._in_use

    def trim(self) -> int:
        """Release every wholly free arena; return the bytes released."""
        with self._lock:
            empty = [segment for segment in self._segments if not segment.starts]
            for segment in empty:
                self._release(segment)
            return sum(segment.size for segment in empty)

    def reset(self) -> list[tuple[int, int]]:
        """Free every block and release every arena; return the blocks that were live."""
        with self._lock:
            was_live = self.live()
            for ptr, size in was_live:
                self._remember_freed(ptr, size)
            self._blocks.clear()
            self._segments.clear()
            self._bases.clear()
            self._in_use = 0
            self._reserved = 0
            return was_live

    # --------------------------------------------------------------------- access

    def view(self, ptr: int, nbytes: int) -> np.ndarray:
        """A ``uint8`` view of ``nbytes`` bytes at ``ptr``: writes to it reach device memory."""
        ptr = as_pointer(ptr)
        nbytes = as_size(nbytes)
        with self._lock:
            block = self._locate(ptr)
            if block is None:
                raise self._not_live(ptr, f"cannot access {nbytes} bytes there")
            offset = ptr - block.ptr
            if offset + nbytes > block.size:
                raise OutOfBoundsError(
                    f"{self.name}: accessing {nbytes} bytes at {ptr:#x} runs past the end of "
                    f"its block ({block.size} bytes at {block.ptr:#x}; the pointer is "
                    f"{offset} bytes in, so at most {max(block.size - offset, 0)} bytes fit)")
            start = ptr - block.segment.base
            return block.segment.arena[start:start + nbytes]

    def array(self, ptr: int, dtype: Any, shape: int | tuple[int, ...] | list[int]) -> np.ndarray:
        """A NumPy view of device memory at ``ptr`` with the given dtype and shape."""
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise DeviceMemoryError("device memory cannot hold dtype object")
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dims = tuple(as_size(dim, "dimension") for dim in dims)
        nbytes = math.prod(dims) * dtype.itemsize
        return self.view(ptr, nbytes).view(dtype).reshape(dims)

    def write(self, ptr: int, source: Any, nbytes: int | None = None) -> None:
        """Copy ``nbytes`` bytes (default: all) of a host array or bytes object to ``ptr``."""
        data = host_bytes(source, nbytes)
        self.view(ptr, data.size)[...] = data

    def read(self, ptr: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``ptr``, as a ``uint8`` array (bytes-like)."""
        return self.view(ptr, nbytes).copy()

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` bytes between two pointers of this heap (overlap is allowed)."""
        source = self.view(src, nbytes)
        np.copyto(self.view(dst, nbytes), source)

    # ------------------------------------------------------------------- internals

    def _locate(self, ptr: int) -> _Block | None:
        """The live block whose reserved range holds ``ptr``, or None."""
        index = bisect.bisect_right(self._bases, ptr) - 1
        if index < 0 or ptr >= self._segments[index].end:
            return None
        starts = self._segments[index].starts
        position = bisect.bisect_right(starts, ptr) - 1
        if position < 0:
            return None
        block = self._blocks[starts[position]]
        return block if ptr < block.ptr + block.capacity else None

    def _grow(self, need: int, nbytes: int) -> _Segment:
        """Add an arena able to hold ``need`` bytes, within the capacity."""
        size = max(self.segment_bytes, _round_up(need, _GRANULE))
        if self.capacity is not None and self._reserved + size > self.capacity:
            self.trim()
            room = self.capacity - self._reserved
            if need > room:
                raise OutOfMemoryError(
                    f"{self.name}: cannot allocate {nbytes} bytes: {self._in_use} of its "
                    f"{self.capacity}-byte capacity are in use ({self._reserved} reserved)")
            size = max(need, min(size, room // ALIGNMENT * ALIGNMENT))
        base = self._place(size)
        try:
            segment = _Segment(base, size)
        except MemoryError:
            raise OutOfMemoryError(
                f"{self.name}: the host could not provide a {size}-byte arena for an "
                f"allocation of {nbytes} bytes") from None
        index = bisect.bisect_left(self._bases, base)
        self._bases.insert(index, base)
        self._segments.insert(index, segment)
        self._reserved += size
        self._next_base = _round_up(base + size + _GUARD, _GRANULE)
        return segment

    def _place(self, size: int) -> int:
        """An address for a new arena: fresh addresses first, then a gap between arenas."""
        if self._next_base + size <= self.window_end:
            return self._next_base
        cursor = self.window_start + _GRANULE
        for segment in self._segments:
            if segment.base - cursor >= size + _GUARD:
                return cursor
            cursor = _round_up(segment.end + _GUARD, _GRANULE)
        if cursor + size <= self.window_end:
            return cursor
        raise OutOfMemoryError(f"{self.name}: no room left in its address window for "
                               f"a {size}-byte arena")

    def _maybe_release(self, segment: _Segment) -> None:
        """Release a wholly free arena unless it is the one default-size arena kept cached."""
        oversized = segment.size > self.segment_bytes
        another_empty = any(other is not segment and not other.starts
                            for other in self._segments)
        if oversized or another_empty:
            self._release(segment)

    def _release(self, segment: _Segment) -> None:
        index = self._segments.index(segment)
        del self._segments[index]
        del self._bases[index]
        self._reserved -= segment.size

    def _remember_freed(self, ptr: int, size: int) -> None:
        self._freed[ptr] = size
        self._freed.move_to_end(ptr)
        while len(self._freed) > _FREED_REMEMBERED:
            self._freed.popitem(last=False)

    def _bad_free(self, ptr: int) -> InvalidPointerError:
        if ptr in self._freed:
            return DoubleFreeError(
                f"{self.name}: double free of {ptr:#x}: that {self._freed[ptr]}-byte block "
                f"was already freed")
        block = self._locate(ptr)
        if block is not None:
            return InvalidPointerError(
                f"{self.name}: {ptr:#x} points {ptr - block.ptr} bytes into the block at "
                f"{block.ptr:#x}; free() takes the pointer allocate() returned")
        return self._not_live(ptr, "free() takes a pointer allocate() returned")

    def _not_live(self, ptr: int, hint: str) -> InvalidPointerError:
        if ptr in self._freed:
            return InvalidPointerError(
                f"{self.name}: {ptr:#x} was freed (use after free); {hint}")
        if not self.contains(ptr):
            return InvalidPointerError(
                f"{self.name}: {ptr:#x} is not a pointer of this heap; {hint}")
        return InvalidPointerError(
            f"{self.name}: {ptr:#x} does not point into a live allocation; {hint}")


_HEAP_TUNED = False
_HEAP_LOCK = threading.Lock()

#: glibc's M_MMAP_THRESHOLD, M_TRIM_THRESHOLD and M_MMAP_MAX (mallopt parameters)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
#: requests below this come from the process heap (glibc's largest mapping threshold)
HEAP_REUSE_BYTES = 32 << 20
#: freed memory at the heap's top is kept up to this, not handed back to the system: a
#: batch-8 ResNet-50 run frees several 25 MB activations together, and a lower threshold
#: gave them back at every run only to fault them in again (17,000 page faults per run)
HEAP_KEEP_BYTES = 256 << 20


def tune_process_heap() -> bool:
    """Let the C heap keep and reuse blocks up to ``HEAP_REUSE_BYTES``; once per process.

    Kernels allocate temporaries of a few MB each run (NumPy's arrays come from
    ``malloc``). By default glibc maps every block over 128 KiB afresh and unmaps it when
    freed, so each run faults in its temporaries page by page (about 1,900 page faults
    per run of the BERT-style encoder, 15 % of its time). Raising the mapping and trim
    thresholds keeps those blocks in the heap for the next run (up to ``HEAP_KEEP_BYTES``
    of them free at once). Blocks over 32 MiB, which glibc maps afresh whatever the
    threshold, come from the heap too (no request is served by a mapping of its own):
    a batch-8 MobileNetV2 run faulted in its 38 MB activations at every run, 9,400 page
    faults and a third of the run. It is a setting of the
    whole process (glibc only; elsewhere nothing is done), made when the first session
    is created unless ``GE_TUNE_HEAP=0``. Returns whether it was applied now.
    """
    global _HEAP_TUNED
    with _HEAP_LOCK:
        if _HEAP_TUNED or os.environ.get("GE_TUNE_HEAP", "1") == "0":
            return False
        _HEAP_TUNED = True
        try:
            libc = ctypes.CDLL("libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_REUSE_BYTES)
                    and mallopt(_M_TRIM_THRESHOLD, HEAP_KEEP_BYTES)
                    and mallopt(_M_MMAP_MAX, 0))
