"""What an engine is: a kernel library that answers three questions about a node.

Does it support the node? At what cost? And give me a kernel for it: a callable
taking the input arrays (``None`` for an absent optional input) and returning
the output arrays. Engines register themselves by name; the compiler assigns
each node to the first engine in the user's preference list that supports it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ops.registry import Cost, node_cost

__all__ = ["Engine", "BoundKernel", "register_engine", "get_engine", "available_engines"]

BoundKernel = Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]


class Engine(abc.ABC):
    """A kernel library."""

    name: str = "engine"

    @abc.abstractmethod
    def supports(self, node: Node) -> bool:
        """True when this engine has a kernel for ``node`` (its type, dtypes, attributes)."""

    def estimate(self, node: Node) -> Cost:
        """The estimated cost of ``node`` on this engine (the registry's estimate by default)."""
        return node_cost(node)

    @abc.abstractmethod
    def bind(self, node: Node) -> BoundKernel:
        """A kernel for ``node``, with its attributes already bound."""


_ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    """Make ``engine`` available under its name."""
    _ENGINES[engine.name] = engine
    return engine


def get_engine(name: str) -> Engine:
    """The engine called ``name``."""
    try:
        return _ENGINES[name]
    except KeyError:
        known = ", ".join(sorted(_ENGINES)) or "none"
        raise UnsupportedOpError(f"no engine named {name!r}; available engines: {known}") from None


def available_engines() -> list[str]:
    """The names of all registered engines."""
    return sorted(_ENGINES)
