"""The graph's JSON form. Constant data travels as base64 of its raw bytes.

Nothing here evaluates or unpickles anything: a JSON document that is not a
graph raises ``ModelFormatError``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Optional, Union

import numpy as np

from ge.errors import GraphError, ModelFormatError
from ge.ir.dtypes import DataType
from ge.ir.graph import Graph, Node, Value
from ge.ir.tensor import Format, Tensor, TensorDesc

__all__ = ["graph_to_json", "graph_from_json", "graph_to_dict", "graph_from_dict",
           "encode_attr", "decode_attr", "TensorStore"]

FORMAT_NAME = "ge.graph"
FORMAT_VERSION = 1


class TensorStore:
    """Tensor data kept beside a document rather than in it, as raw little-endian bytes.

    Writing, ``put`` places an array at the next 64-byte aligned offset and returns the
    reference the document keeps; ``chunks`` yields the bytes to write. Reading, built
    over a buffer, ``get`` checks a reference against the buffer and returns a read-only
    view of it (no copy).
    """

    ALIGNMENT = 64

    def __init__(self, buffer: Union[bytes, memoryview, None] = None) -> None:
        self._buffer = None if buffer is None else memoryview(buffer)
        self._arrays: list[tuple[int, np.ndarray]] = []
        self._refs: dict[int, tuple[np.ndarray, dict[str, int]]] = {}
        self.size = 0

    def put(self, array: np.ndarray) -> dict[str, int]:
        """Keep ``array``; its offset and byte count (an array kept before is kept once)."""
        if id(array) in self._refs:
            return dict(self._refs[id(array)][1])
        offset = -(-self.size // self.ALIGNMENT) * self.ALIGNMENT
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        self._arrays.append((offset, data))
        self.size = offset + data.nbytes
        reference = {"offset": offset, "nbytes": int(data.nbytes)}
        self._refs[id(array)] = (array, reference)  # holding the array keeps its id unique
        return dict(reference)

    def chunks(self) -> Iterator[bytes]:
        """The stored bytes in order, with the zero padding between them."""
        position = 0
        for offset, data in self._arrays:
            yield bytes(offset - position)
            yield data.tobytes()
            position = offset + data.nbytes

    def get(self, offset: Any, nbytes: Any, dtype: np.dtype, shape: tuple[int, ...]
            ) -> np.ndarray:
        """The array a reference names, a read-only view of the buffer."""
        if self._buffer is None:
            raise ModelFormatError("a tensor refers to data outside the document")
        if not isinstance(offset, int) or not isinstance(nbytes, int) or offset < 0 or \
                nbytes < 0 or offset + nbytes > len(self._buffer):
            raise ModelFormatError(f"tensor data at {offset!r} (+{nbytes!r} bytes) lies "
                                   f"outside the {len(self._buffer)} bytes of tensor data")
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes != expected:
            raise ModelFormatError(f"tensor data has {nbytes} bytes, its shape {list(shape)} "
                                   f"needs {expected}")
        little = dtype.newbyteorder("<")
        array = np.frombuffer(self._buffer, dtype=little, count=int(np.prod(shape, dtype=np.int64)),
                              offset=offset).reshape(shape)
        return array if little.isnative else array.astype(dtype)


def encode_attr(value: Any, store: Optional[TensorStore] = None) -> Any:
    """An attribute value as JSON-ready data (tensor bytes into ``store`` when given)."""
    if isinstance(value, Tensor):
        array = value.numpy()
        if store is not None:
            return {"tensor": {"dtype": value.dtype.name, "shape": list(array.shape),
                               **store.put(array)}}
        return {"tensor": {"dtype": value.dtype.name, "shape": list(array.shape),
                           "data": base64.b64encode(array.tobytes()).decode("ascii")}}
    if isinstance(value, DataType):
        return {"dtype": value.name}
    if isinstance(value, Format):
        return {"format": value.value}
    if isinstance(value, Graph):
        return {"graph": graph_to_dict(value, store)}
    if isinstance(value, (list, tuple)):
        return {"list": [encode_attr(v, store) for v in value]}
    if isinstance(value, float) and not np.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise GraphError(f"attribute value of type {type(value).__name__} cannot be serialized")


def decode_attr(data: Any, store: Optional[TensorStore] = None) -> Any:
    """The inverse of ``encode_attr``."""
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ModelFormatError(f"malformed attribute {data!r}")
    kind, payload = next(iter(data.items()))
    if kind == "tensor" and "offset" in payload:
        dtype = DataType.parse(payload["dtype"]).np_dtype
        shape = tuple(int(d) for d in payload["shape"])
        array = (store or TensorStore()).get(payload["offset"], payload["nbytes"], dtype, shape)
        return Tensor.wrap(_readonly(array))
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
        return graph_from_dict(payload, store)
    if kind == "list":
        return [decode_attr(v, store) for v in payload]
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


def graph_to_dict(graph: Graph, store: Optional[TensorStore] = None) -> dict[str, Any]:
    """The graph as plain data (constant data into ``store`` when given)."""
    nodes = []
    for node in graph.topological_order():
        nodes.append({
            "name": node.name,
            "op_type": node.op_type,
            "inputs": [None if v is None else v.name for v in node.inputs],
            "attrs": {key: encode_attr(val, store) for key, val in node.attrs.items()},
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


def graph_from_dict(data: Any, store: Optional[TensorStore] = None) -> Graph:
    """Rebuild a graph from ``graph_to_dict`` data (constant data from ``store``)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ModelFormatError("not a GE graph document (missing format 'ge.graph')")
    if data.get("version") != FORMAT_VERSION:
        raise ModelFormatError(f"GE graph version {data.get('version')!r} is not supported")
    try:
        graph = Graph(data["name"])
        values: dict[str, Value] = {}
        for entry in data["nodes"]:
            _add_node(graph, entry, values, store)
        graph.set_outputs([_find(values, name, "graph output") for name in data["outputs"]])
        graph.metadata.update(data.get("metadata", {}))
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, (ModelFormatError, GraphError)):
            raise
        raise ModelFormatError(f"malformed GE graph document: {error!r}") from error
    return graph


def _add_node(graph: Graph, entry: dict[str, Any], values: dict[str, Value],
              store: Optional[TensorStore]) -> None:
    inputs = [None if name is None else _find(values, name, f"input of {entry['name']!r}")
              for name in entry["inputs"]]
    descs = [TensorDesc(o["shape"], DataType.parse(o["dtype"]), o.get("format", "ND"))
             for o in entry["outputs"]]
    attrs = {key: decode_attr(val, store) for key, val in entry["attrs"].items()}
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
