"""Graphs whose input dimension names are hints, the plans for feeds that break them,
and graphs specialized to one set of input shapes.

A model file may name an input dimension (ONNX's ``dim_param``) on several inputs:
``input_ids [batch, seq]`` and ``attention_mask [batch, seq]``. GE compiles such a
graph taking the names at their word (equal names, equal sizes), which lets the
optimizer prove what fusions need. onnxruntime does not enforce those names, and
some exporters write one generic name on unrelated inputs, so a feed may break them.
For such a feed a session asks ``split_dimension_names`` for the graph with each
broken name made one name per place it appears (``batch@attention_mask:0``), shapes
inferred anew, and compiles that once; it keeps a few such plans.

A session that runs a graph with dynamic inputs on the same shapes again and again
(a streaming model fed fixed-size chunks), where the compiled graph still computes
from those shapes at run time (``shape_steps``: a ``Shape`` read by arithmetic, an
``If`` on a length), compiles the graph once more with the shapes fixed
(``fix_input_shapes``): shape arithmetic then folds to constants, an ``If`` on a shape
picks its branch at compile time, and engines that need static shapes take the nodes
they could not before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ge.ir import DIMENSION_NAMES_ARE_HINTS, Graph
from ge.ops.registry import Trait, get_schema, has_op, infer_outputs, normalize_attrs

__all__ = ["shared_dimension_names", "broken_names", "split_dimension_names",
           "fix_input_shapes", "shape_steps"]


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
    _infer_again(copy)
    return copy


def fix_input_shapes(graph: Graph, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """A copy of ``graph`` whose inputs (by ``Data`` node name) have the given static
    shapes, every shape inferred again; the constants' data is shared, not copied.
    Raises ``ShapeError`` kin where a shape does not fit the graph."""
    copy = graph.clone()
    for value in copy.inputs:
        data = value.producer
        fed = shapes.get(data.name)
        if fed is not None:
            data.attrs["shape"] = [int(size) for size in fed]
    _infer_again(copy)
    return copy


def shape_steps(graph: Graph) -> list[str]:
    """The nodes of ``graph`` that compute only from its inputs' shapes and constants
    (``Shape``, ``Size`` and what reads only them), and the ``If`` nodes choosing a branch
    by such a value: run after run they redo what, with the input shapes fixed, folds
    away at compile time."""
    derived: set[int] = set()
    found: list[str] = []
    for node in graph.topological_order():
        present = [v for v in node.inputs if v is not None]
        if node.op_type in ("Shape", "Size"):
            derived.update(id(v) for v in node.outputs)
            found.append(node.name)
        elif node.op_type == "Const":
            derived.update(id(v) for v in node.outputs)
        elif node.op_type == "If":
            if present and id(present[0]) in derived:
                found.append(node.name)
        elif present and has_op(node.op_type) and all(id(v) in derived for v in present) \
                and get_schema(node.op_type).has_trait(Trait.PURE):
            derived.update(id(v) for v in node.outputs)
            found.append(node.name)
    return found


def _infer_again(copy: Graph) -> None:
    for node in copy.topological_order():
        schema = get_schema(node.op_type)
        attrs = normalize_attrs(schema, node.attrs, node.name)
        for value, desc in zip(node.outputs, infer_outputs(schema, node.name, node.inputs,
                                                            attrs)):
            value.desc = desc
    copy.validate()
