"""Torch's set-up for the engine: its thread pool registered with the runtime."""

from __future__ import annotations

import torch

from ge.runtime.threads import register_pool

__all__ = ["install"]


def install() -> None:
    """Register torch's intra-op pool, so that a run's thread limit applies to it."""
    register_pool("torch", torch.get_num_threads, torch.set_num_threads)
