"""Memory planning: lifetimes over a schedule, arena offsets, in-place and views, and a
memory-aware order. Pure planning: nothing here touches a device."""

from ge.memory.liveness import (
    MemoryPlan,
    SlotDesc,
    StepUse,
    live_peak,
    plan_memory,
    slot_bytes,
)
from ge.memory.planner import ALIGNMENT, Buffer, Placement, lower_bound, place
from ge.memory.schedule import memory_aware_order

__all__ = ["ALIGNMENT", "Buffer", "MemoryPlan", "Placement", "SlotDesc", "StepUse",
           "live_peak", "lower_bound", "memory_aware_order", "place", "plan_memory",
           "slot_bytes"]
