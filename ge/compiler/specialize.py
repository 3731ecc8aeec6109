"""Graphs whose input dimension names are hints, and the plans for feeds that break them.

A model file may name an input dimension (ONNX's ``dim_param``) on several inputs:
``input_ids [batch, seq]`` and ``attention_mask [batch, seq]``. GE compiles such a
graph taking the names at their word (equal names, equal sizes), which lets the
optimizer prove what fusions need. onnxruntime does not enforce those names, and
some exporters write one generic name on unrelated inputs, so a feed may break them.
For such a feed a session asks ``split_dimension_names`` for the graph with each
broken name made one name per place it appears (``batch@attention_mask:0``), shapes
inferred anew, and compiles that once; it keeps a few such plans.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ge.ir import DIMENSION_NAMES_ARE_HINTS, Graph
from ge.ops.registry import get_schema, infer_outputs, normalize_attrs

__all__ = ["shared_dimension_names", "broken_names", "split_dimension_names"]


def shared_dimension_names(graph: Graph) -> set[str]:
    """Dimension names that appear more than once among the inputs of a graph whose names
    are hints (empty for a graph built with GE's API, where a name is a promise)."""
    if not graph.metadata.get(DIMENSION_NAMES_ARE_HINTS):
        return set()
    counts = Counter(dim for value in graph.inputs for dim in value.shape
                     if isinstance(dim, str))
    return {name for name, count in counts.items() if count > 1}


def broken_names(inputs: Iterable[tuple[str, Sequence[object]]],
                 shapes: Mapping[str, Sequence[int]]) -> frozenset[str]:
    """The dimension names that take more than one size in ``shapes`` (feed name -> shape),
    given the declared ``inputs`` (name, shape)."""
    sizes: dict[str, set[int]] = {}
    for name, declared in inputs:
        fed = shapes.get(name)
        if fed is None or len(fed) != len(declared):
            continue
        for dim, size in zip(declared, fed):
            if isinstance(dim, str):
                sizes.setdefault(dim, set()).add(int(size))
    return frozenset(name for name, seen in sizes.items() if len(seen) > 1)


def split_dimension_names(graph: Graph, names: Iterable[str]) -> Graph:
    """A copy of ``graph`` where each of ``names`` becomes one name per input and axis it
    appears on, with every shape inferred again from the inputs."""
    split = set(names)
    copy = graph.clone()
    for value in copy.inputs:
        data = value.producer
        shape = [f"{dim}@{data.name}:{axis}" if dim in split else dim
                 for axis, dim in enumerate(data.attrs["shape"])]
        data.attrs["shape"] = shape
    for node in copy.topological_order():
        schema = get_schema(node.op_type)
        attrs = normalize_attrs(schema, node.attrs, node.name)
        for value, desc in zip(node.outputs, infer_outputs(schema, node.name, node.inputs,
                                                            attrs)):
            value.desc = desc
    copy.validate()
    return copy
