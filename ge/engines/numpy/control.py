"""``If`` with compiled branches: each branch a GE executable, compiled at its first run.

The registry's kernel runs a branch through the reference interpreter, node by node;
an exporter that cannot fold a condition (a ``squeeze`` of a dimension it did not see)
leaves an ``If`` holding the rest of the model, which then ran at the reference's
speed. Here each branch is compiled (level 3, the default engines) and run by a
session of its own, so its convolutions, LSTMs and products run on the engines the
rest of the model runs on. A branch that did not
import (``then_error``/``else_error``) raises its error when a run takes it.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import ExecutionError, GEError
from ge.ir import Graph, Node, Tensor, Value
from ge.ops import create_node
from ge.ops.control_flow import run_subgraph

__all__ = ["bind_if"]


class _Branch:
    """One branch, compiled into a session at the first run that takes it. The captured
    values that are constants of the enclosing graph (an LSTM's weights, say) become
    constants of the branch, so that its engines see them as such (packed, fused)."""

    def __init__(self, node: Node, key: str) -> None:
        self.error: str = node.attrs.get(key.replace("branch", "error"), "")
        self.session: Any = None
        self.original: Graph = node.attrs[key]
        self.interpreted = False  # the branch did not compile: the reference runs it
        graph = self.original.clone()
        data = [value.producer for value in graph.inputs]
        self.fed: list[int] = []  # the captured values fed at each run, by position
        for position, (inner, outer) in enumerate(zip(data, node.inputs[1:])):
            tensor = _constant(outer)
            if tensor is None:
                self.fed.append(position)
                continue
            constant = create_node("Const", [], {"value": tensor},
                                   graph.unique_name(f"{inner.name}_constant"), graph)
            inner.outputs[0].replace_all_uses_with(constant.outputs[0])
            graph.remove_node(inner)
        self.feeds = [data[position].name for position in self.fed]
        self.outputs = [(value.name, value.dtype.np_dtype) for value in graph.outputs]
        self.graph = graph
        self._lock = threading.Lock()

    def _session(self) -> Any:
        with self._lock:
            if self.session is None and not self.interpreted:
                from ge.compiler import compile as compile_graph
                from ge.session import Session

                try:
                    self.session = Session(compile_graph(self.graph))
                except GEError as error:
                    warnings.warn(f"If branch {self.original.name!r} runs on the reference "
                                  f"interpreter; it did not compile: {error}",
                                  RuntimeWarning, stacklevel=2)
                    self.interpreted = True
        return self.session

    def run(self, captured: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        session = self._session()
        if session is None:
            return [np.asarray(array).astype(dtype, copy=False) for array, (_, dtype)
                    in zip(run_subgraph(self.original, captured), self.outputs)]
        feed = {name: captured[position] for name, position in zip(self.feeds, self.fed)}
        results = session.run(feed)
        return [np.asarray(results[name]).astype(dtype, copy=False)
                for name, dtype in self.outputs]


def _constant(value: Optional[Value]) -> Optional[Tensor]:
    if value is None or value.producer.op_type != "Const":
        return None
    tensor = value.producer.attrs.get("value")
    return tensor if isinstance(tensor, Tensor) else None


def bind_if(node: Node) -> Any:
    """The kernel of ``If`` node ``node``: cond picks the branch; the captured values are
    its feeds."""
    branches = {True: _Branch(node, "then_branch"), False: _Branch(node, "else_branch")}

    def run(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        cond = np.asarray(inputs[0]).reshape(-1)
        if cond.size != 1:
            raise ExecutionError(f"If's cond must hold exactly one element, got "
                                 f"{cond.size}")
        taken = bool(cond[0])
        branch = branches[taken]
        if branch.error:
            raise ExecutionError(f"the run took {'then' if taken else 'else'}_branch, "
                                 f"which cannot run: {branch.error}")
        return branch.run(inputs[1:])

    return run
