"""The runtime: devices, device memory and copies, streams, events (all on the CPU).

It knows nothing of graphs (it imports NumPy only). :mod:`ge.runtime.memory`
holds the CPU device's heap, :mod:`ge.runtime.device` the devices and the
process-wide registry, and :mod:`ge.runtime.acl` the seed's ACL-style facade
(``import acl``), with ``acl.rt`` in :mod:`ge.runtime.acl_rt`. The only device
kind is the CPU, and streams and events are synchronous: work is done when it
is issued.
"""

from ge.runtime.device import (
    MAX_CPU_DEVICES,
    CpuDevice,
    Device,
    copy_device_to_device,
    current_device,
    device_count,
    device_of_pointer,
    get_device,
    live_devices,
    register_device_kind,
    reset_device,
    set_device,
)
from ge.runtime.memory import ALIGNMENT, DEFAULT_SEGMENT_BYTES, DeviceHeap

__all__ = [
    "ALIGNMENT",
    "DEFAULT_SEGMENT_BYTES",
    "MAX_CPU_DEVICES",
    "CpuDevice",
    "Device",
    "DeviceHeap",
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
