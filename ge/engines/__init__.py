"""Kernel libraries. ``numpy`` supports every registry op; others (``fused``, ``onednn``,
``torch``) support what they can."""

from ge.engines import fused as _fused_engine  # noqa: F401 - registers the engine
from ge.engines import numpy as _numpy_engine  # noqa: F401 - registers the engine
from ge.engines import onednn as _onednn_engine  # noqa: F401 - registers the engine
from ge.engines import torch as _torch_engine  # noqa: F401 - registers the engine
from ge.engines.base import (
    BoundKernel,
    BoundNode,
    Engine,
    WritingKernel,
    available_engines,
    get_engine,
    register_engine,
)

__all__ = ["BoundKernel", "BoundNode", "Engine", "WritingKernel", "available_engines", "get_engine",
           "register_engine"]
