"""What an engine is: a kernel library that answers three questions about a node.

Does it support the node? At what cost? And give me a kernel for it: a callable
taking the input arrays (``None`` for an absent optional input) and returning
the output arrays. Engines register themselves by name; the compiler assigns
each node to the first engine in the user's preference list that supports it.

An engine may also give a *writing* kernel (``bind_writer``): one that writes the
outputs into arrays it is handed, the views of the memory plan's arena, so that a
steady-state run allocates no per-op buffers. Its contract:

- each ``outs[i]`` is a C-contiguous array of exactly output ``i``'s shape and dtype;
- ``outs[0]`` may be input 0's very buffer (same shape and dtype) when the op has the
  ``INPLACE`` trait, or input ``k``'s when the engine's ``inplace_input(node)`` answers
  ``k`` (a convolution's residual, added where it lies), and the planner chose to run
  it in place; no out overlaps any input in any other way;
- the values written equal what ``bind``'s kernel returns, within the op's tolerance.

A node without a writer runs through ``bind`` and its result is copied into its slot;
the memory report counts those copies per op type. An engine whose kernels return
memory of their own (a library with no way to write into given arrays) says so with
``allocates``: the memory plan then leaves those outputs off the arena, and the report
counts them as kept outside it.

An engine that runs its kernels on a thread pool of its own sets ``owns_thread_pool``:
runs that use it keep BLAS to one thread (two pools spinning on the same cores slow
each other several-fold).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ops.registry import Cost, node_cost

__all__ = ["Engine", "BoundKernel", "WritingKernel", "BoundNode", "register_engine",
           "get_engine", "available_engines"]

BoundKernel = Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]
#: ``writer(inputs, outs)``: computes the node on ``inputs`` into the arrays ``outs``
WritingKernel = Callable[[Sequence[Optional[np.ndarray]], Sequence[np.ndarray]], None]


@dataclass(frozen=True)
class BoundNode:
    """A node's kernels on one engine: the kernel, its writer (or None), and whether the
    kernel returns memory of its own rather than writing into the arena."""

    kernel: BoundKernel
    writer: Optional[WritingKernel] = None
    allocates: bool = False


class Engine(abc.ABC):
    """A kernel library."""

    name: str = "engine"
    #: its kernels run on a thread pool of the engine's own (see the module docstring)
    owns_thread_pool: bool = False

    def unavailable_reason(self) -> Optional[str]:
        """Why this engine can take no node here (a missing library), or None."""
        return None

    @abc.abstractmethod
    def supports(self, node: Node) -> bool:
        """True when this engine has a kernel for ``node`` (its type, dtypes, attributes)."""

    def inplace_input(self, node: Node) -> Optional[int]:
        """The input (beyond input 0 of an op with the ``INPLACE`` trait) whose buffer
        this engine's writer for ``node`` may be handed as output 0, reading it through
        the output; None (the default) for none."""
        return None

    def estimate(self, node: Node) -> Cost:
        """The estimated cost of ``node`` on this engine (the registry's estimate by default)."""
        return node_cost(node)

    @abc.abstractmethod
    def bind(self, node: Node) -> BoundKernel:
        """A kernel for ``node``, with its attributes already bound."""

    def bind_writer(self, node: Node) -> Optional[WritingKernel]:
        """A kernel for ``node`` that writes into given output arrays, or None when this
        engine has none for it (see the module's docstring for the contract)."""
        del node
        return None

    def allocates(self, node: Node) -> bool:
        """True when ``node``'s kernel returns memory of its own (decided without binding)."""
        del node
        return False

    def bind_node(self, node: Node) -> BoundNode:
        """``bind``, ``bind_writer`` and ``allocates`` together (an engine whose kernels
        share work, such as packed weights, binds the node once here)."""
        return BoundNode(self.bind(node), self.bind_writer(node), self.allocates(node))


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
