"""Loading an executable: binding each step to its engine's kernel.

The executable names engines and op types only; here they become callables.
A ``Program`` is what a session runs: bound steps, and a template of value
slots with the constants already in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ge.compiler.executable import Executable
from ge.engines import BoundKernel, get_engine
from ge.ir import Node, Tensor
from ge.ir.tensor import compute_pending

__all__ = ["BoundStep", "Program", "load"]


@dataclass(frozen=True)
class BoundStep:
    """A step with its kernel: read ``inputs`` slots, write ``outputs``, clear ``release``."""

    kernel: BoundKernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]
    node: Node


@dataclass(frozen=True)
class Program:
    """An executable bound to kernels, ready to run."""

    steps: tuple[BoundStep, ...]
    template: tuple[Optional[np.ndarray], ...]


def load(executable: Executable) -> Program:
    """Bind every step of ``executable`` to a kernel of its assigned engine."""
    nodes = {node.name: node for node in executable.graph.nodes}
    # constants the optimizer left pending (a folded, transposed filter) are computed
    # here, together, rather than one by one as the engines bind their kernels
    compute_pending(node.attrs["value"] for node in nodes.values()
                    if node.op_type == "Const" and isinstance(node.attrs.get("value"), Tensor))
    steps = tuple(
        BoundStep(get_engine(step.engine).bind(nodes[step.node]), step.inputs, step.outputs,
                  step.release, nodes[step.node])
        for step in executable.steps)
    template: list[Optional[np.ndarray]] = [None] * executable.num_slots
    for slot, name in executable.constants.items():
        template[slot] = nodes[name].attrs["value"].numpy()
    return Program(steps, tuple(template))
