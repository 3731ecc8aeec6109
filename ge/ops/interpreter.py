"""The reference interpreter: the oracle every compiled graph is checked against.

It walks the graph in topological order, calls each op's reference kernel, and
drops every value after its last use. It knows nothing of engines or devices,
so passes (constant folding, verification) can evaluate graphs through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ge.errors import InputError
from ge.ir import Graph
from ge.ops.registry import get_schema, run_kernel

__all__ = ["evaluate"]


def evaluate(graph: Graph, feeds: Mapping[str, Any], *,
             keep_all: bool = False) -> dict[str, np.ndarray]:
    """Outputs of ``graph`` for ``feeds`` ({Data node name: array}), by reference kernels.

    With ``keep_all``, every value of the graph is returned by name (for finding
    where two graphs start to differ), not only the outputs.
    """
    order = graph.topological_order()
    remaining: dict[int, int] = {}
    for node in order:
        for value in node.inputs:
            if value is not None:
                remaining[id(value)] = remaining.get(id(value), 0) + 1
    keep = {id(v) for v in graph.outputs}
    values: dict[int, np.ndarray] = {}
    for node in order:
        if node.op_type == "Data":
            if node.name not in feeds:
                raise InputError(f"missing input {node.name!r}")
            results = [np.asarray(feeds[node.name], dtype=node.outputs[0].dtype.np_dtype)]
        else:
            args = [None if v is None else values[id(v)] for v in node.inputs]
            results = run_kernel(get_schema(node.op_type), node.name, args, node.attrs)
        for value, array in zip(node.outputs, results):
            values[id(value)] = np.asarray(array)
        for value in node.inputs:
            if value is None:
                continue
            remaining[id(value)] -= 1
            if remaining[id(value)] == 0 and id(value) not in keep and not keep_all:
                del values[id(value)]
    if keep_all:
        return {value.name: values[id(value)] for node in order for value in node.outputs}
    return {value.name: values[id(value)] for value in graph.outputs}
