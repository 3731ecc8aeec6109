"""The graph's readable text form (what ``print(graph)`` shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ge.errors import GraphError
from ge.ir.dtypes import DataType
from ge.ir.tensor import Format, Tensor

if TYPE_CHECKING:
    from ge.ir.graph import Graph, Node, Value

__all__ = ["format_graph", "format_node", "format_attr"]


def format_attr(value: Any) -> str:
    """Short text for one attribute value."""
    from ge.ir.graph import Graph

    if isinstance(value, Tensor):
        if value.numpy().size <= 8:
            return f"{value.numpy().tolist()}"
        return f"<{value.desc}>"
    if isinstance(value, DataType):
        return value.name
    if isinstance(value, Format):
        return value.value
    if isinstance(value, Graph):
        return f"<graph {value.name}: {len(value)} nodes>"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        return f"<ndarray {value.dtype}{list(value.shape)}>"
    return repr(value) if isinstance(value, str) else str(value)


def _value_text(value: Value | None) -> str:
    return "_" if value is None else f"%{value.name}"


def format_node(node: Node) -> str:
    """One line: ``%out: float32[?,10] = Softmax(%x) {axis=-1}``."""
    outputs = ", ".join(f"%{v.name}: {v.desc}" for v in node.outputs)
    inputs = ", ".join(_value_text(v) for v in node.inputs)
    attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(node.attrs.items())
                      if v is not None)
    text = f"{outputs} = {node.op_type}({inputs})"
    if node.name != (node.outputs[0].name if node.outputs else None):
        text += f"  # node {node.name}"
    return f"{text} {{{attrs}}}" if attrs else text


def format_graph(graph: Graph) -> str:
    """The whole graph: a header with inputs, one line per node, and the outputs."""
    inputs = ", ".join(f"%{v.name}: {v.desc}" for v in graph.inputs)
    lines = [f"graph {graph.name}({inputs}) {{"]
    try:
        order = graph.topological_order()
    except GraphError:  # a graph with a cycle still prints, in the graph's order
        order = graph.nodes
    for node in order:
        if node.op_type == "Data":
            continue
        lines.append(f"  {format_node(node)}")
    outputs = ", ".join(f"%{v.name}" for v in graph.outputs)
    lines.append(f"  return {outputs}")
    lines.append("}")
    return "\n".join(lines)
