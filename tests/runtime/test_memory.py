"""DeviceHeap: allocation, reuse, coalescing, bounds checks, thread safety."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ge.errors import (
    DeviceMemoryError,
    DoubleFreeError,
    InvalidPointerError,
    OutOfBoundsError,
    OutOfMemoryError,
)
from ge.runtime.memory import ALIGNMENT, DeviceHeap, host_bytes, writable_host_bytes

MIB = 1 << 20


@pytest.fixture
def heap() -> DeviceHeap:
    return DeviceHeap(segment_bytes=MIB, name="test-heap")


def test_pointers_are_aligned_nonzero_and_reused(heap: DeviceHeap) -> None:
    first = heap.allocate(100)
    second = heap.allocate(1)
    assert first > 0 and second > 0
    assert first % ALIGNMENT == 0 and second % ALIGNMENT == 0
    assert heap.view(first, 100).ctypes.data % ALIGNMENT == 0  # the host memory too
    assert second >= first + 100
    assert heap.size_of(first) == 100
    heap.free(first)
    assert heap.allocate(64) == first  # first fit takes the freed range again


def test_free_blocks_coalesce(heap: DeviceHeap) -> None:
    a, b, c = (heap.allocate(ALIGNMENT) for _ in range(3))
    guard = heap.allocate(ALIGNMENT)  # keeps the tail of the segment from joining in
    assert (b - a, c - b) == (ALIGNMENT, ALIGNMENT)
    heap.free(a)
    heap.free(c)
    heap.free(b)  # joins both neighbours into one range of three blocks
    assert heap.allocate(3 * ALIGNMENT) == a
    heap.free(guard)


def test_zero_size_allocations_are_unique_and_valid(heap: DeviceHeap) -> None:
    pointers = [heap.allocate(0) for _ in range(5)]
    assert len(set(pointers)) == 5
    for ptr in pointers:
        assert heap.size_of(ptr) == 0
        assert heap.view(ptr, 0).size == 0
        assert heap.array(ptr, np.float32, (0, 3)).shape == (0, 3)
        with pytest.raises(OutOfBoundsError):
            heap.read(ptr, 1)
    for ptr in pointers:
        heap.free(ptr)
    assert heap.live() == []


def test_big_request_gets_its_own_segment_which_is_released(heap: DeviceHeap) -> None:
    small = heap.allocate(10)
    big = heap.allocate(3 * MIB + 5)
    assert heap.segment_count == 2
    heap.write(big, np.full(3 * MIB + 5, 7, np.uint8))
    assert heap.read(big + 3 * MIB, 5).tolist() == [7] * 5
    # the two segments do not overlap in address space
    assert big >= small + MIB or small >= big + 3 * MIB
    heap.free(big)
    assert heap.segment_count == 1
    heap.free(small)
    assert heap.segment_count == 1  # one default-size segment is kept as a cache
    assert heap.trim() == MIB and heap.segment_count == 0


def test_capacity_limit_raises_out_of_memory() -> None:
    heap = DeviceHeap(segment_bytes=MIB, capacity=2 * MIB, name="small")
    first = heap.allocate(MIB)
    second = heap.allocate(MIB)
    with pytest.raises(OutOfMemoryError, match="small: cannot allocate 1 bytes"):
        heap.allocate(1)
    with pytest.raises(MemoryError):  # also a builtin MemoryError
        heap.allocate(10 * MIB)
    heap.free(first)
    heap.free(second)
    assert heap.allocate(2 * MIB - ALIGNMENT) > 0  # released segments make room again


def test_invalid_pointers(heap: DeviceHeap) -> None:
    ptr = heap.allocate(256)
    with pytest.raises(InvalidPointerError, match="not a pointer of this heap"):
        heap.free(12345)
    with pytest.raises(InvalidPointerError, match="64 bytes into the block"):
        heap.free(ptr + 64)
    with pytest.raises(InvalidPointerError, match="null"):
        heap.free(0)
    with pytest.raises(InvalidPointerError):
        heap.free("0x10")  # type: ignore[arg-type]
    with pytest.raises(InvalidPointerError):
        heap.read(ptr + 4096, 1)  # inside the segment, but in free space
    with pytest.raises(DeviceMemoryError):
        heap.allocate(-1)
    assert heap.size_of(ptr) == 256


def test_double_free_and_use_after_free(heap: DeviceHeap) -> None:
    ptr = heap.allocate(32)
    heap.free(ptr)
    with pytest.raises(DoubleFreeError, match="already freed"):
        heap.free(ptr)
    with pytest.raises(InvalidPointerError, match="use after free"):
        heap.read(ptr, 4)
    with pytest.raises(InvalidPointerError):
        heap.size_of(ptr)
    again = heap.allocate(32)  # the same address, live again: no longer a double free
    assert again == ptr
    heap.free(again)


@pytest.mark.parametrize("operation", ["read", "write", "view", "array", "copy"])
def test_out_of_bounds_never_touches_the_neighbour(heap: DeviceHeap, operation: str) -> None:
    block = heap.allocate(100)
    neighbour = heap.allocate(100)
    heap.write(neighbour, np.full(100, 9, np.uint8))
    interior = block + 40
    with pytest.raises(OutOfBoundsError, match=r"100 bytes at .*60 bytes fit"):
        if operation == "read":
            heap.read(interior, 61)
        elif operation == "write":
            heap.write(interior, np.zeros(200, np.uint8), 61)
        elif operation == "view":
            heap.view(interior, 61)
        elif operation == "array":
            heap.array(interior, np.float32, (4, 4))
        else:
            heap.copy(interior, neighbour, 61)
    assert heap.read(neighbour, 100).tolist() == [9] * 100
    heap.write(interior, np.ones(60, np.uint8))  # exactly up to the end is fine
    assert heap.read(block, 100).tolist() == [0] * 40 + [1] * 60


def test_write_reads_sources_in_c_order(heap: DeviceHeap) -> None:
    ptr = heap.allocate(64)
    matrix = np.arange(16, dtype=np.float32).reshape(4, 4)
    heap.write(ptr, matrix.T)  # a transposed (Fortran-ordered) view
    np.testing.assert_array_equal(heap.array(ptr, np.float32, (4, 4)), matrix.T)
    heap.write(ptr, matrix[:, ::2])  # a strided view
    np.testing.assert_array_equal(heap.array(ptr, np.float32, 8), matrix[:, ::2].ravel())
    heap.write(ptr, b"\x01\x02\x03")
    assert heap.read(ptr, 3).tobytes() == b"\x01\x02\x03"
    with pytest.raises(OutOfBoundsError, match="holds 3 bytes"):
        heap.write(ptr, b"\x01\x02\x03", 4)


def test_array_is_a_view_for_kernels(heap: DeviceHeap) -> None:
    ptr = heap.allocate(24)
    view = heap.array(ptr, np.float64, (3,))
    view[:] = [1.5, 2.5, 3.5]
    assert np.frombuffer(heap.read(ptr, 24), np.float64).tolist() == [1.5, 2.5, 3.5]
    with pytest.raises(DeviceMemoryError):
        heap.array(ptr, object, (1,))


def test_copy_within_the_heap_allows_overlap(heap: DeviceHeap) -> None:
    ptr = heap.allocate(16)
    heap.write(ptr, np.arange(16, dtype=np.uint8))
    heap.copy(ptr + 4, ptr, 8)
    assert heap.read(ptr, 16).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15]


def test_accounting_and_reset(heap: DeviceHeap) -> None:
    a = heap.allocate(10)
    b = heap.allocate(1000)
    assert heap.live() == sorted([(a, 10), (b, 1000)])
    assert heap.bytes_in_use == 1010
    heap.free(b)
    assert heap.bytes_in_use == 10 and heap.peak_bytes == 1010
    heap.reset_peak()
    assert heap.peak_bytes == 10
    assert heap.reset() == [(a, 10)]
    assert heap.live() == [] and heap.bytes_in_use == 0 and heap.reserved_bytes == 0
    with pytest.raises(DoubleFreeError):
        heap.free(a)


def test_host_buffer_helpers() -> None:
    with pytest.raises(DeviceMemoryError, match="not C-contiguous"):
        writable_host_bytes(np.zeros((4, 4), np.float32).T, 4)
    with pytest.raises(DeviceMemoryError, match="read-only"):
        writable_host_bytes(b"abcd", 4)
    with pytest.raises(OutOfBoundsError):
        writable_host_bytes(bytearray(3), 4)
    with pytest.raises(DeviceMemoryError):
        host_bytes([1, 2, 3])
    assert host_bytes(np.float32(1.0)).size == 4  # a 0-d array / scalar


def test_concurrent_threads_keep_their_data_intact() -> None:
    heap = DeviceHeap(segment_bytes=MIB, name="shared")
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        mine: list[tuple[int, np.ndarray]] = []
        try:
            for _ in range(300):
                if mine and rng.random() < 0.45:
                    ptr, data = mine.pop(int(rng.integers(len(mine))))
                    assert heap.read(ptr, data.size).tobytes() == data.tobytes()
                    heap.free(ptr)
                else:
                    data = rng.integers(0, 256, int(rng.integers(0, 5000)), dtype=np.uint8)
                    ptr = heap.allocate(data.size)
                    heap.write(ptr, data)
                    mine.append((ptr, data))
            for ptr, data in mine:
                assert heap.read(ptr, data.size).tobytes() == data.tobytes()
                heap.free(ptr)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert heap.live() == [] and heap.bytes_in_use == 0


class HeapMachine(RuleBasedStateMachine):
    """Random allocate/write/free sequences: blocks never overlap and keep their bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.heap = DeviceHeap(segment_bytes=MIB, capacity=4 * MIB, name="machine")
        self.blocks: dict[int, bytes] = {}
        self.counter = 0

    @rule(size=st.one_of(st.integers(0, 300), st.integers(0, 3 * MIB // 2)))
    def allocate(self, size: int) -> None:
        try:
            ptr = self.heap.allocate(size)
        except OutOfMemoryError:
            assert size > 0  # only a real shortage (capacity or fragmentation) refuses
            return
        assert ptr not in self.blocks and ptr % ALIGNMENT == 0
        self.counter += 1
        data = bytes([self.counter % 251]) * size
        self.heap.write(ptr, data)
        self.blocks[ptr] = data

    @precondition(lambda self: self.blocks)
    @rule(index=st.integers(0, 10**6))
    def free(self, index: int) -> None:
        ptr = sorted(self.blocks)[index % len(self.blocks)]
        assert self.heap.read(ptr, len(self.blocks[ptr])).tobytes() == self.blocks[ptr]
        self.heap.free(ptr)
        del self.blocks[ptr]

    @precondition(lambda self: self.blocks)
    @rule(index=st.integers(0, 10**6))
    def overrun(self, index: int) -> None:
        ptr = sorted(self.blocks)[index % len(self.blocks)]
        with pytest.raises(OutOfBoundsError):
            self.heap.write(ptr, bytes(len(self.blocks[ptr]) + 1))

    @invariant()
    def blocks_are_disjoint_and_intact(self) -> None:
        live = self.heap.live()
        assert [ptr for ptr, _ in live] == sorted(self.blocks)
        for (ptr, size), (next_ptr, _) in zip(live, live[1:]):
            assert ptr + max(size, 1) <= next_ptr
        for ptr, data in self.blocks.items():
            assert self.heap.read(ptr, len(data)).tobytes() == data
        assert self.heap.bytes_in_use == sum(len(data) for data in self.blocks.values())
        assert self.heap.reserved_bytes <= 4 * MIB


TestHeapMachine = HeapMachine.TestCase
TestHeapMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
