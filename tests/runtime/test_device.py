"""Devices and the device registry."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from ge.errors import DeviceMemoryError, GERuntimeError, InvalidPointerError, OutOfBoundsError
from ge.runtime import device as registry
from ge.runtime.device import (
    MAX_CPU_DEVICES,
    CpuDevice,
    Device,
    copy_device_to_device,
    current_device,
    device_count,
    device_of_pointer,
    get_device,
    reset_device,
    set_device,
)


@pytest.fixture(autouse=True)
def back_to_device_zero() -> Iterator[None]:
    yield
    set_device(0)


def test_device_zero_always_exists_and_is_the_default() -> None:
    device = get_device(0)
    assert isinstance(device, CpuDevice)
    assert device is get_device(0) is current_device() is get_device()
    assert (device.name, device.kind, device.device_id) == ("cpu:0", "cpu", 0)
    assert device_count() == MAX_CPU_DEVICES


def test_set_device_changes_the_current_device_for_every_thread() -> None:
    chosen = set_device(3)
    assert current_device() is chosen and chosen.name == "cpu:3"
    seen: list[Device] = []
    worker = threading.Thread(target=lambda: seen.append(current_device()))
    worker.start()
    worker.join()
    assert seen == [chosen]


@pytest.mark.parametrize("bad", [-1, MAX_CPU_DEVICES, 100])
def test_device_ids_out_of_range(bad: int) -> None:
    with pytest.raises(GERuntimeError, match=f"device id {bad} is out of range.*ids 0..7"):
        set_device(bad)
    with pytest.raises(GERuntimeError):
        get_device(bad)
    assert current_device().device_id == 0


@pytest.mark.parametrize("bad", ["0", 1.0, True, None])
def test_device_ids_must_be_integers(bad: object) -> None:
    with pytest.raises(GERuntimeError):
        set_device(bad)  # type: ignore[arg-type]
    with pytest.raises(GERuntimeError, match="unknown device kind"):
        get_device(0, kind="tpu")


def test_copy_in_copy_out_and_views() -> None:
    device = get_device(1)
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    ptr = device.allocate(data.nbytes)
    try:
        device.copy_in(ptr, data)
        np.testing.assert_array_equal(device.array(ptr, np.float32, (3, 4)), data)
        out = np.empty((3, 4), np.float32)
        assert device.copy_out(out, ptr, data.nbytes) is out
        np.testing.assert_array_equal(out, data)
        raw = device.copy_out(None, ptr, 8)
        assert raw.dtype == np.uint8 and raw.tobytes() == data.tobytes()[:8]
        with pytest.raises(DeviceMemoryError, match="not C-contiguous"):
            device.copy_out(np.empty((4, 3), np.float32).T, ptr, data.nbytes)
        with pytest.raises(OutOfBoundsError):
            device.copy_out(np.empty(2, np.float32), ptr, data.nbytes)
        assert device.size_of(ptr) == data.nbytes
        assert device.launch(lambda a, b=0: a + b, 2, b=3) == 5
        device.synchronize()
    finally:
        device.free(ptr)


def test_device_of_pointer_and_cross_device_copies() -> None:
    first, second = get_device(0), get_device(2)
    a = first.allocate(16)
    b = second.allocate(16)
    try:
        assert device_of_pointer(a) is first and device_of_pointer(b) is second
        first.copy_in(a, np.arange(16, dtype=np.uint8))
        copy_device_to_device(b, a, 16)
        assert second.copy_out(None, b, 16).tolist() == list(range(16))
        copy_device_to_device(a + 8, a, 8)  # within one device
        assert first.copy_out(None, a, 16).tolist() == list(range(8)) * 2
    finally:
        first.free(a)
        second.free(b)
    with pytest.raises(InvalidPointerError, match="not a pointer of any device"):
        device_of_pointer(0x1234)
    with pytest.raises(InvalidPointerError):
        device_of_pointer(np.zeros(2))  # type: ignore[arg-type]


def test_reset_device_frees_and_warns() -> None:
    device = get_device(5)
    ptr = device.allocate(100)
    with pytest.warns(RuntimeWarning, match="cpu:5 freed 1 buffer.*100 bytes"):
        assert reset_device(5) == [(ptr, 100)]
    assert device.live() == [] and device.bytes_in_use == 0
    with pytest.raises(InvalidPointerError):
        device.copy_out(None, ptr, 1)
    assert reset_device(5) == []  # nothing live: no warning
    assert reset_device(6) == []  # never used
    assert get_device(5).allocate(1) > 0  # still usable
    reset_device(5, warn=False)


def test_an_accelerator_plugs_in_through_register_device_kind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeAccelerator(CpuDevice):
        kind = "fake"

    monkeypatch.setitem(registry._kinds, "fake", registry._Kind(FakeAccelerator, 2))
    monkeypatch.setattr(registry, "_devices", dict(registry._devices))
    device = get_device(1, kind="fake")
    assert device.name == "fake:1" and device_count("fake") == 2
    ptr = device.allocate(8)
    assert device_of_pointer(ptr) is device
    device.free(ptr)
    with pytest.raises(GERuntimeError, match="2 fake devices"):
        get_device(2, kind="fake")
