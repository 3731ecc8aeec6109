"""The ACL-style facade: ``import acl`` and ``acl.rt``."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import acl
from ge.errors import (
    DeviceMemoryError,
    GERuntimeError,
    InvalidPointerError,
    NotInitializedError,
    OutOfBoundsError,
)
from ge.runtime import acl as runtime_acl
from ge.runtime.device import current_device, device_of_pointer, get_device
from tests.examples.test_seed_examples import load_example


class DoublingSession:
    """Stands in for ``ge.Session``: reads feeds from device memory, returns new buffers."""

    def __init__(self, compiled: object) -> None:
        self.compiled = compiled

    def run(self, feed: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        outputs = {}
        for name, (ptr, nbytes) in feed.items():
            data = device_of_pointer(ptr).array(ptr, np.float32, nbytes // 4)
            out = current_device().allocate(nbytes)
            current_device().copy_in(out, data * 2)
            outputs[f"{name}_doubled"] = (out, nbytes)
        return outputs

    def finalize(self) -> None:
        pass


def run_section_6_1() -> dict[str, object]:
    """The seed's section 6.1 program (examples/), with a stand-in ``ge`` whose session
    doubles its input: the runtime alone is under test here."""
    program = load_example("seed_6_1_sync_execution")
    program.ge = types.SimpleNamespace(compile=lambda graph: graph, Session=DoublingSession)
    return vars(program)


def test_import_acl_is_the_runtime_module() -> None:
    assert acl is runtime_acl
    kinds = (acl.rt.MEMCPY_HOST_TO_HOST, acl.rt.MEMCPY_HOST_TO_DEVICE,
             acl.rt.MEMCPY_DEVICE_TO_HOST, acl.rt.MEMCPY_DEVICE_TO_DEVICE)
    assert kinds == (0, 1, 2, 3)
    assert isinstance(acl.rt.stream_id, int) and isinstance(acl.rt.event_id, int)


def test_section_6_1_program_round_trips_data(capsys: pytest.CaptureFixture[str]) -> None:
    program = run_section_6_1()
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 1, 0)  # F-ordered
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no leak: nothing left to free at finalize
        outputs = program["execute_graph_simple"](object(), data)  # type: ignore[operator]
    np.testing.assert_array_equal(outputs["input_doubled"], (data * 2).astype(np.float32).ravel())
    assert "Outputs: ['input_doubled']" in capsys.readouterr().out
    assert acl.init_count() == 0 and get_device(0).live() == []
    # docs/seed-api.md, D19: the executor can run again in the same process, after finalize.
    again = program["execute_graph_simple"](object(), np.ones(3))  # type: ignore[operator]
    assert again["input_doubled"].tolist() == [2.0, 2.0, 2.0]


def test_two_executors_do_not_free_each_others_buffers() -> None:
    program = run_section_6_1()
    first = program["GraphExecutor"](None)  # type: ignore[operator]
    second = program["GraphExecutor"](None)  # type: ignore[operator]
    first.init()
    second.init()
    kept, _ = acl.rt.malloc(16)
    first.finalize()  # its reset_device and finalize only drop counts
    assert acl.init_count() == 1 and get_device(0).size_of(kept) == 16
    assert second.run({"x": np.ones(4, np.float32)})["x_doubled"].tolist() == [2.0] * 4
    acl.rt.free(kept)
    second.finalize()
    assert acl.init_count() == 0


def test_init_and_finalize_are_reference_counted() -> None:
    assert acl.init() == acl.SUCCESS
    acl.init()
    assert acl.init_count() == 2
    assert acl.finalize() == 0
    assert acl.init_count() == 1
    acl.finalize()
    with pytest.raises(NotInitializedError, match="without a matching acl.init"):
        acl.finalize()
    acl.init()  # allowed again after the count went back to zero
    assert acl.init_count() == 1


def test_finalize_with_live_buffers_frees_them_and_warns() -> None:
    acl.init()
    acl.rt.set_device(4)
    ptr, ret = acl.rt.malloc(100)
    assert ret == 0 and device_of_pointer(ptr).name == "cpu:4"
    stream = acl.rt.create_stream(acl.rt.stream_id)
    with pytest.warns(RuntimeWarning, match=r"freed 1 device buffer.*100 bytes on cpu:4"):
        acl.finalize()
    with pytest.raises(InvalidPointerError):
        acl.rt.free(ptr)
    with pytest.raises(GERuntimeError):
        acl.rt.destroy_stream(stream)  # finalize dropped it
    assert acl.rt.get_device() == (0, 0)


def test_reset_device_is_balanced_with_set_device() -> None:
    acl.rt.set_device(2)
    acl.rt.set_device(2)
    ptr, _ = acl.rt.malloc(8)
    acl.rt.reset_device(2)
    assert get_device(2).size_of(ptr) == 8
    with pytest.warns(RuntimeWarning, match=r"reset_device\(2\) freed 1 buffer"):
        acl.rt.reset_device(2)
    assert get_device(2).live() == []


def test_memory_works_before_init_on_device_zero() -> None:
    ptr, ret = acl.rt.malloc(4)
    assert ret == 0 and device_of_pointer(ptr) is get_device(0)
    assert acl.rt.free(ptr) == 0


@pytest.mark.parametrize("kind", [4, -1, "1", 1.0, True, None])
def test_bad_copy_kinds_raise(kind: object) -> None:
    ptr, _ = acl.rt.malloc(4)
    with pytest.raises(GERuntimeError, match="invalid memcpy kind"):
        acl.rt.memcpy(ptr, np.zeros(1, np.float32), 4, kind)  # type: ignore[arg-type]
    acl.rt.free(ptr)


def test_counts_must_fit_both_sides() -> None:
    ptr, _ = acl.rt.malloc(16)
    neighbour, _ = acl.rt.malloc(16)
    acl.rt.memcpy(neighbour, np.full(4, 7, np.float32), 16, acl.rt.MEMCPY_HOST_TO_DEVICE)
    with pytest.raises(OutOfBoundsError, match="MEMCPY_HOST_TO_DEVICE src holds 8 bytes"):
        acl.rt.memcpy(ptr, np.zeros(2, np.float32), 16, acl.rt.MEMCPY_HOST_TO_DEVICE)
    with pytest.raises(OutOfBoundsError, match="runs past the end"):
        acl.rt.memcpy(ptr, np.zeros(8, np.float32), 32, acl.rt.MEMCPY_HOST_TO_DEVICE)
    with pytest.raises(OutOfBoundsError, match="MEMCPY_DEVICE_TO_HOST dst holds 8 bytes"):
        acl.rt.memcpy(np.zeros(2, np.float32), ptr, 16, acl.rt.MEMCPY_DEVICE_TO_HOST)
    with pytest.raises(OutOfBoundsError, match="runs past the end"):
        acl.rt.memcpy(np.zeros(8, np.float32), ptr, 32, acl.rt.MEMCPY_DEVICE_TO_HOST)
    with pytest.raises(OutOfBoundsError):
        acl.rt.memcpy(ptr, neighbour, 17, acl.rt.MEMCPY_DEVICE_TO_DEVICE)
    back = np.zeros(4, np.float32)
    acl.rt.memcpy(back, neighbour, 16, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert back.tolist() == [7.0] * 4  # the failed copies never reached the neighbour
    acl.rt.free(ptr)
    acl.rt.free(neighbour)


def test_non_contiguous_host_arrays() -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    ptr, _ = acl.rt.malloc(matrix.nbytes)
    acl.rt.memcpy(ptr, matrix.T, matrix.nbytes, acl.rt.MEMCPY_HOST_TO_DEVICE)
    back = np.zeros(12, np.float32)
    acl.rt.memcpy(back, ptr, matrix.nbytes, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert back.tolist() == matrix.T.ravel().tolist()  # read in C order
    acl.rt.memcpy(ptr, matrix[:, ::2], 24, acl.rt.MEMCPY_HOST_TO_DEVICE)
    acl.rt.memcpy(back, ptr, 24, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert back[:6].tolist() == [0, 2, 4, 6, 8, 10]
    with pytest.raises(DeviceMemoryError, match="not C-contiguous"):
        acl.rt.memcpy(np.zeros((4, 3), np.float32).T, ptr, 48, acl.rt.MEMCPY_DEVICE_TO_HOST)
    with pytest.raises(DeviceMemoryError, match="read-only"):
        acl.rt.memcpy(np.broadcast_to(np.zeros(1, np.float32), (12,)), ptr, 48,
                      acl.rt.MEMCPY_DEVICE_TO_HOST)
    acl.rt.free(ptr)


def test_operands_on_the_wrong_side_raise() -> None:
    ptr, _ = acl.rt.malloc(4)
    host = np.zeros(1, np.float32)
    with pytest.raises(InvalidPointerError, match="MEMCPY_HOST_TO_DEVICE dst"):
        acl.rt.memcpy(host, host, 4, acl.rt.MEMCPY_HOST_TO_DEVICE)
    with pytest.raises(InvalidPointerError, match="MEMCPY_DEVICE_TO_HOST src"):
        acl.rt.memcpy(host, host, 4, acl.rt.MEMCPY_DEVICE_TO_HOST)
    with pytest.raises(DeviceMemoryError, match="MEMCPY_DEVICE_TO_HOST dst"):
        acl.rt.memcpy(ptr, ptr, 4, acl.rt.MEMCPY_DEVICE_TO_HOST)
    with pytest.raises(InvalidPointerError, match="not a pointer of any device"):
        acl.rt.free(0x42)
    acl.rt.free(ptr)


def test_device_to_device_and_host_to_host() -> None:
    acl.rt.set_device(1)
    src, _ = acl.rt.malloc(8)
    acl.rt.set_device(0)
    dst, _ = acl.rt.malloc(8)
    acl.rt.memcpy(src, b"abcdefgh", 8, acl.rt.MEMCPY_HOST_TO_DEVICE)
    acl.rt.memcpy(dst, src, 8, acl.rt.MEMCPY_DEVICE_TO_DEVICE)
    out = bytearray(8)
    acl.rt.memcpy(out, dst, 8, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert out == b"abcdefgh"
    target = np.zeros(4, np.int16)
    acl.rt.memcpy(target, np.array([1, 2, 3, 4], np.int16), 6, acl.rt.MEMCPY_HOST_TO_HOST)
    assert target.tolist() == [1, 2, 3, 0]
    acl.rt.memset(dst, 8, 0xAB, 4)
    acl.rt.memcpy(out, dst, 8, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert out == b"\xab" * 4 + b"efgh"
    acl.rt.free(src)
    acl.rt.free(dst)
    acl.rt.reset_device(1)
    acl.rt.reset_device(0)


def test_device_ids_out_of_range() -> None:
    count, ret = acl.rt.get_device_count()
    assert ret == 0 and count >= 1
    with pytest.raises(GERuntimeError, match="out of range"):
        acl.rt.set_device(count)
    with pytest.raises(GERuntimeError, match="out of range"):
        acl.rt.reset_device(-1)
    assert acl.rt.get_device() == (0, 0)


def test_malloc_sizes() -> None:
    ptr, _ = acl.rt.malloc(0)
    acl.rt.free(ptr)
    with pytest.raises(DeviceMemoryError, match="malloc size must be >= 0"):
        acl.rt.malloc(-4)
    with pytest.raises(DeviceMemoryError):
        acl.rt.malloc(2.5)  # type: ignore[arg-type]


def test_streams_and_events_section_6_2_style() -> None:
    acl.init()
    acl.rt.set_device(0)
    streams = [acl.rt.create_stream(acl.rt.stream_id + i) for i in range(4)]
    assert len(set(streams)) == 4
    ptr, _ = acl.rt.malloc(12)
    acl.rt.memcpy_async(ptr, np.array([1, 2, 3], np.float32), 12,
                        acl.rt.MEMCPY_HOST_TO_DEVICE, streams[1])  # a temporary source
    event = acl.rt.create_event(acl.rt.event_id)
    acl.rt.record_event(event, streams[1])
    acl.rt.synchronize_event(event)
    acl.rt.synchronize_stream(streams[1])
    acl.rt.synchronize_device()
    out = np.zeros(3, np.float32)
    acl.rt.memcpy(out, ptr, 12, acl.rt.MEMCPY_DEVICE_TO_HOST)
    assert out.tolist() == [1.0, 2.0, 3.0]
    acl.rt.destroy_event(event)
    with pytest.raises(GERuntimeError, match="not a live event"):
        acl.rt.synchronize_event(event)
    for stream in streams:
        acl.rt.destroy_stream(stream)
    with pytest.raises(GERuntimeError, match="not a live stream"):
        acl.rt.memcpy_async(ptr, out, 12, acl.rt.MEMCPY_HOST_TO_DEVICE, streams[0])
    acl.rt.free(ptr)
    acl.rt.reset_device(0)
    acl.finalize()
