"""Numerical verification of passes: the graph before and after must compute the same.

Both graphs run through the reference interpreter on the same random inputs.
When the outputs differ beyond tolerance, the values both graphs still share by
name are compared in the order the new graph computes them, and the first that
differs names the node where the pass went wrong.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ge.errors import GEError
from ge.ir import Graph, Value
from ge.ops.interpreter import evaluate

__all__ = ["random_feeds", "Verifier", "DEFAULT_RTOL", "DEFAULT_ATOL"]

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5


def random_feeds(graph: Graph, seed: int = 0, unknown: int = 2) -> dict[str, np.ndarray]:
    """Random inputs for every graph input. An unknown dimension takes ``unknown``; named
    ones agree across inputs and each name takes its own size (``unknown``, ``unknown + 1``,
    ...); integers are small and non-negative so they index safely."""
    rng = np.random.default_rng(seed)
    named: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    for value in graph.inputs:
        shape = []
        for dim in value.shape:
            if isinstance(dim, str):  # distinct names get distinct sizes, so mix-ups show
                dim = named.setdefault(dim, unknown + len(named))
            shape.append(dim if dim >= 0 else unknown)
        feeds[value.producer.name] = _random_array(rng, value, shape)
    return feeds


def _random_array(rng: np.random.Generator, value: Value, shape: list[int]) -> np.ndarray:
    dtype = value.dtype.np_dtype
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 2, shape).astype(dtype)


def _differs(before: np.ndarray, after: np.ndarray, rtol: float, atol: float) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    if before.dtype.kind not in "fc":
        return not np.array_equal(before, after)
    scale = float(np.max(np.abs(before), initial=0.0)) if before.size else 0.0
    wide_before, wide_after = before.astype(np.float64), after.astype(np.float64)
    return not np.allclose(wide_after, wide_before, rtol=rtol, atol=atol * max(scale, 1.0),
                           equal_nan=True)


class Verifier:
    """Compares a graph before and after a pass on fixed random inputs."""

    def __init__(self, graph: Graph, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
                 seed: int = 0) -> None:
        self.rtol, self.atol = rtol, atol
        self.feeds = random_feeds(graph, seed)

    def outputs(self, graph: Graph) -> list[np.ndarray]:
        """The graph's outputs on the verifier's inputs."""
        feeds = {v.producer.name: self.feeds[v.producer.name] for v in graph.inputs}
        return list(evaluate(graph, feeds).values())

    def first_difference(self, before: Graph, after: Graph,
                         expected: list[np.ndarray]) -> Optional[tuple[str, str]]:
        """None when ``after`` gives ``expected``; else (node name, what differs)."""
        try:
            got = self.outputs(after)
        except GEError as error:
            return "", f"the new graph fails to run: {error}"
        if len(got) == len(expected) and not any(
                _differs(want, have, self.rtol, self.atol) for want, have in zip(expected, got)):
            return None
        return self._locate(before, after)

    def _locate(self, before: Graph, after: Graph) -> tuple[str, str]:
        old = evaluate(before, self.feeds, keep_all=True)
        new = evaluate(after, {v.producer.name: self.feeds[v.producer.name]
                               for v in after.inputs}, keep_all=True)
        for node in after.topological_order():
            for value in node.outputs:
                if value.name in old and _differs(old[value.name], new[value.name],
                                                  self.rtol, self.atol):
                    return node.name, (f"first differing value {value.name!r}, computed by "
                                       f"{node.op_type} node {node.name!r}")
        return "", "the outputs differ, but no value both graphs share by name does"
