"""The runtime: devices, device memory and copies, streams, events (all on the CPU).

It knows nothing of graphs (it imports NumPy only). :mod:`ge.runtime.memory`
holds the CPU device's heap, :mod:`ge.runtime.device` the devices and the
process-wide registry, and :mod:`ge.runtime.acl` the seed's ACL-style facade
(``import acl``), with ``acl.rt`` in :mod:`ge.runtime.acl_rt`. The only device
kind is the CPU. :mod:`ge.runtime.stream` holds streams (in-order work queues,
each served by a thread of its own) and the events that order work across them.
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
from ge.runtime.stream import Event, Stream

__all__ = [
    "ALIGNMENT",
    "DEFAULT_SEGMENT_BYTES",
    "MAX_CPU_DEVICES",
    "CpuDevice",
    "Device",
    "DeviceHeap",
    "Event",
    "Stream",
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
