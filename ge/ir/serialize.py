"""The graph's JSON form. Constant data travels as base64 of its raw bytes.

Nothing here evaluates or unpickles anything: a JSON document that is not a
graph raises ``ModelFormatError``.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Union

import numpy as np

from ge.errors import GraphError, ModelFormatError
from ge.ir.dtypes import DataType
from ge.ir.graph import Graph, Node, Value
from ge.ir.tensor import Format, Tensor, TensorDesc

__all__ = ["graph_to_json", "graph_from_json", "graph_to_dict", "graph_from_dict",
           "encode_attr", "decode_attr"]

FORMAT_NAME = "ge.graph"
FORMAT_VERSION = 1


def encode_attr(value: Any) -> Any:
    """An attribute value as JSON-ready data."""
    if isinstance(value, Tensor):
        array = value.numpy()
        return {"tensor": {"dtype": value.dtype.name, "shape": list(array.shape),
                           "data": base64.b64encode(array.tobytes()).decode("ascii")}}
    if isinstance(value, DataType):
        return {"dtype": value.name}
    if isinstance(value, Format):
        return {"format": value.value}
    if isinstance(value, Graph):
        return {"graph": graph_to_dict(value)}
    if isinstance(value, (list, tuple)):
        return {"list": [encode_attr(v) for v in value]}
    if isinstance(value, float) and not np.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise GraphError(f"attribute value of type {type(value).__name__} cannot be serialized")


def decode_attr(data: Any) -> Any:
    """The inverse of ``encode_attr``."""
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ModelFormatError(f"malformed attribute {data!r}")
    kind, payload = next(iter(data.items()))
    if kind == "tensor":
        dtype = DataType.parse(payload["dtype"]).np_dtype
        raw = base64.b64decode(payload["data"], validate=True)
        shape = tuple(int(d) for d in payload["shape"])
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(raw) != expected:
            raise ModelFormatError(
                f"tensor data has {len(raw)} bytes, its shape {list(shape)} needs {expected}")
        return Tensor.wrap(_readonly(np.frombuffer(raw, dtype=dtype).reshape(shape)))
    if kind == "dtype":
        return DataType.parse(payload)
    if kind == "format":
        return Format.parse(payload)
    if kind == "graph":
        return graph_from_dict(payload)
    if kind == "list":
        return [decode_attr(v) for v in payload]
    if kind == "float":
        return float(payload)
    raise ModelFormatError(f"unknown attribute kind {kind!r}")


def _readonly(array: np.ndarray) -> np.ndarray:
    if not array.flags.c_contiguous:
        array = array.copy()
    array.setflags(write=False)
    return array


def _desc_to_dict(value: Value) -> dict[str, Any]:
    entry: dict[str, Any] = {"shape": list(value.shape), "dtype": value.dtype.name}
    if value.format is not Format.ND:
        entry["format"] = value.format.value
    if value.has_explicit_name:
        entry["name"] = value.name
    return entry


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The graph as plain data."""
    nodes = []
    for node in graph.topological_order():
        nodes.append({
            "name": node.name,
            "op_type": node.op_type,
            "inputs": [None if v is None else v.name for v in node.inputs],
            "attrs": {key: encode_attr(val) for key, val in node.attrs.items()},
            "outputs": [_desc_to_dict(v) for v in node.outputs],
        })
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "name": graph.name,
            "nodes": nodes, "outputs": [v.name for v in graph.outputs],
            "metadata": {k: v for k, v in graph.metadata.items() if _is_plain(v)}}


def _is_plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def graph_from_dict(data: Any) -> Graph:
    """Rebuild a graph from ``graph_to_dict`` data."""
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ModelFormatError("not a GE graph document (missing format 'ge.graph')")
    if data.get("version") != FORMAT_VERSION:
        raise ModelFormatError(f"GE graph version {data.get('version')!r} is not supported")
    try:
        graph = Graph(data["name"])
        values: dict[str, Value] = {}
        for entry in data["nodes"]:
            _add_node(graph, entry, values)
        graph.set_outputs([_find(values, name, "graph output") for name in data["outputs"]])
        graph.metadata.update(data.get("metadata", {}))
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, (ModelFormatError, GraphError)):
            raise
        raise ModelFormatError(f"malformed GE graph document: {error!r}") from error
    return graph


def _add_node(graph: Graph, entry: dict[str, Any], values: dict[str, Value]) -> None:
    inputs = [None if name is None else _find(values, name, f"input of {entry['name']!r}")
              for name in entry["inputs"]]
    descs = [TensorDesc(o["shape"], DataType.parse(o["dtype"]), o.get("format", "ND"))
             for o in entry["outputs"]]
    attrs = {key: decode_attr(val) for key, val in entry["attrs"].items()}
    node = graph.add_op(Node(entry["op_type"], inputs, attrs, descs, entry["name"]))
    for value, out in zip(node.outputs, entry["outputs"]):
        if "name" in out:
            value.name = out["name"]
        values[value.name] = value


def _find(values: dict[str, Value], name: str, what: str) -> Value:
    try:
        return values[name]
    except KeyError:
        raise ModelFormatError(f"{what} names unknown value {name!r}") from None


def graph_to_json(graph: Graph, indent: Union[int, None] = None) -> str:
    """The graph as JSON text."""
    return json.dumps(graph_to_dict(graph), indent=indent)


def graph_from_json(text: Union[str, bytes]) -> Graph:
    """Rebuild a graph from JSON text."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelFormatError(f"graph JSON does not parse: {error}") from error
    return graph_from_dict(data)
