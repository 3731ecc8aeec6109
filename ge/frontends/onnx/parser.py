"""``parse_onnx``: an ONNX model (file, bytes or ModelProto) into a GE graph.

Initializers and ``Constant`` nodes become ``Const`` nodes; graph inputs become
``Data`` nodes keeping dynamic dimensions (``-1``, or the symbolic name); every
ONNX node goes through its translator (``context.py``). Output shapes come from
GE's own inference, not from the model's declarations, which exporters get
wrong. Subgraphs of ``If``, ``Loop`` and ``Scan`` become GE graphs whose outer
values are passed in explicitly.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper
from onnx.external_data_helper import load_external_data_for_model

from ge.errors import GEError, GraphError, ModelFormatError, ShapeError, UnsupportedOpError
from ge.frontends.onnx import (  # noqa: F401 - each module registers translators
    ops_attention,
    ops_contrib,
    ops_control,
    ops_core,
    ops_math,
    ops_nn,
    ops_quant,
    ops_rnn,
    ops_tensor,
)
from ge.frontends.onnx.branches import (
    MAX_REWRITES,
    RankChangingIf,
    name_every_node,
    sink_continuation,
)
from ge.frontends.onnx.context import NodeContext, Scope, find_translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.frontends.onnx.legacy import prepare_legacy
from ge.frontends.onnx.wire import raw_data_views
from ge.ir import DIMENSION_NAMES_ARE_HINTS, Graph, Tensor, Value, collector_paused
from ge.ir.tensor import Dim
from ge.ops import create_node

__all__ = ["parse_onnx", "load_model", "MIN_OPSET"]

ModelSource = Union[str, os.PathLike, bytes, onnx.ModelProto]

MIN_OPSET = 7


def load_model(model: ModelSource) -> onnx.ModelProto:
    """Read a model, with its external data; ``ModelFormatError`` if it is not ONNX."""
    return _load(model)[0]


def _load(model: ModelSource) -> tuple[onnx.ModelProto, Optional[bytes]]:
    """The model, and its serialized bytes when they were read here (None for a proto)."""
    if isinstance(model, onnx.ModelProto):
        return model, None
    try:
        if isinstance(model, (bytes, bytearray)):
            data = bytes(model)
            proto = onnx.load_from_string(data)
        else:
            path = Path(model)
            if not path.is_file():
                raise ModelFormatError(f"{path}: no such model file")
            data = path.read_bytes()
            proto = onnx.load_from_string(data)
            load_external_data_for_model(proto, str(path.parent))  # as onnx.load does
    except (DecodeError, RuntimeError, ValueError, OSError) as error:
        if isinstance(error, ModelFormatError):
            raise
        raise ModelFormatError(f"not a readable ONNX model ({type(error).__name__}: {error})") \
            from error
    if not proto.HasField("graph"):
        raise ModelFormatError("the ONNX model has no graph (is the file truncated?)")
    return proto, data


def _opsets(proto: onnx.ModelProto) -> dict[str, int]:
    versions = {entry.domain or "": entry.version for entry in proto.opset_import}
    if "ai.onnx" in versions:
        versions[""] = versions.pop("ai.onnx")
    return versions


def _upgrade(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Models older than opset 7 are brought to opset 7 by ONNX's version converter;
    ``legacy.prepare_legacy`` first takes away the nodes it would get wrong."""
    version = _opsets(proto).get("", MIN_OPSET)
    if version >= MIN_OPSET:
        return proto
    try:
        from onnx import version_converter

        return version_converter.convert_version(prepare_legacy(proto), MIN_OPSET)
    except Exception as error:  # noqa: BLE001 - the converter raises many kinds
        raise UnsupportedOpError(f"the model uses opset {version}; GE reads opset {MIN_OPSET} and "
                                 f"newer, and ONNX's version converter failed: {error}") from error


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                nodes.extend(_all_nodes(attribute.g))
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    nodes.extend(_all_nodes(sub))
    return nodes


def check_supported(graph: onnx.GraphProto) -> None:
    """Raise one ``UnsupportedOpError`` listing every op type GE cannot translate."""
    missing: Counter[str] = Counter()
    for node in _all_nodes(graph):
        if find_translator(node.domain, node.op_type) is None:
            domain = node.domain if node.domain not in ("", "ai.onnx") else "ai.onnx"
            missing[f"{domain}::{node.op_type}"] += 1
    if missing:
        listing = ", ".join(f"{name} (x{count})" for name, count in sorted(missing.items()))
        raise UnsupportedOpError(f"the model uses {len(missing)} op type(s) GE does not support: "
                                 f"{listing}")


def parse_onnx(model: ModelSource, *, name: Optional[str] = None) -> Graph:
    """Translate an ONNX model into a GE graph.

    ``model`` is a path, the serialized bytes, or an ``onnx.ModelProto``.
    Raises ``ModelFormatError`` for a malformed model and ``UnsupportedOpError``
    listing every op type GE cannot translate.
    """
    loaded, data = _load(model)
    proto = _upgrade(loaded)
    check_supported(proto.graph)
    views = raw_data_views(data) if data is not None and proto is loaded else {}
    for rewrites in range(MAX_REWRITES + 2):
        try:
            graph = _build(proto, name, views)
            break
        except RankChangingIf as error:
            if rewrites == 0:  # a private copy, every node named, to rewrite
                proto = _copy_model(proto)
                name_every_node(proto)
                if not error.node:
                    continue
            if rewrites > MAX_REWRITES or not sink_continuation(proto, error.node):
                raise ShapeError(str(error)) from None
    graph.metadata["onnx_opset"] = _opsets(proto).get("", 0)
    # a dim_param says which sizes an exporter expected equal; onnxruntime does not enforce
    # it, so a run whose feeds disagree gets a plan of its own (see ge.compiler.specialize)
    graph.metadata[DIMENSION_NAMES_ARE_HINTS] = True
    graph.metadata["onnx_producer"] = proto.producer_name
    return graph


def _build(proto: onnx.ModelProto, name: Optional[str],
           views: dict[str, memoryview]) -> Graph:
    graph = Graph(name or proto.graph.name or "onnx_model")
    scope = Scope(graph, reserved=_value_names(proto.graph))
    builder = _GraphBuilder(_opsets(proto))
    builder.raw_views = views  # the weights, read in place
    with collector_paused():
        builder.build(scope, proto.graph, "graph")
    return graph


def _copy_model(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy


def _value_names(graph: onnx.GraphProto) -> set[str]:
    names = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    for node in _all_nodes(graph):
        names.update(n for n in node.output if n)
    return names


# dim_param texts that name no dimension: exporters write them for "unknown".
_PLACEHOLDER_DIM_PARAMS = frozenset({"?", "-1", "None", "none", "unk", "unknown", "dynamic"})


def _dims(shape_proto: onnx.TensorShapeProto) -> list[Dim]:
    dims: list[Dim] = []
    for dim in shape_proto.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param.strip() and \
                dim.dim_param.strip() not in _PLACEHOLDER_DIM_PARAMS:
            dims.append(dim.dim_param)
        else:
            dims.append(-1)
    return dims


def _in_place(tensor: onnx.TensorProto, raw: Optional[memoryview],
              where: str) -> Optional[np.ndarray]:
    """The tensor's data read straight from the serialized model's bytes (no copy), or None
    when it is not plain little-endian raw data of the size its dims say."""
    dtype = _PLAIN_RAW.get(tensor.data_type)
    if raw is None or dtype is None or not tensor.HasField("raw_data"):
        return None
    from_onnx_dtype(tensor.data_type, where)
    if len(raw) != dtype.itemsize * int(np.prod(tensor.dims, dtype=np.int64)):
        return None
    array = np.frombuffer(raw, dtype=dtype).reshape(tuple(tensor.dims))
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def tensor_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    """The data of a TensorProto as a NumPy array of a GE dtype."""
    dtype = from_onnx_dtype(tensor.data_type, where)
    fast = _PLAIN_RAW.get(tensor.data_type)
    if fast is not None and tensor.HasField("raw_data") and not tensor.external_data:
        # the common case, read without numpy_helper's copies: little-endian plain numbers
        raw = tensor.raw_data
        if len(raw) == dtype.itemsize * int(np.prod(tensor.dims, dtype=np.int64)):
            array = np.frombuffer(raw, dtype=fast).reshape(tuple(tensor.dims))
            return array if fast.isnative else array.astype(fast.newbyteorder("="))
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as error:  # noqa: BLE001 - malformed tensors raise many kinds
        raise ModelFormatError(f"{where}: tensor {tensor.name!r} cannot be read: {error}") \
            from error
    return np.asarray(array)


# element types whose raw_data is the NumPy dtype's little-endian bytes
_PLAIN_RAW: dict[int, np.dtype] = {int(code): np.dtype(name).newbyteorder("<") for code, name in (
    (onnx.TensorProto.FLOAT, "float32"), (onnx.TensorProto.DOUBLE, "float64"),
    (onnx.TensorProto.FLOAT16, "float16"), (onnx.TensorProto.INT8, "int8"),
    (onnx.TensorProto.UINT8, "uint8"), (onnx.TensorProto.INT16, "int16"),
    (onnx.TensorProto.UINT16, "uint16"), (onnx.TensorProto.INT32, "int32"),
    (onnx.TensorProto.UINT32, "uint32"), (onnx.TensorProto.INT64, "int64"),
    (onnx.TensorProto.UINT64, "uint64"))}


def _declared_dims(graph: onnx.GraphProto) -> dict[str, list[Dim]]:
    """Dimensions the model declares for its values (value_info and outputs)."""
    declared = {}
    for info in list(graph.value_info) + list(graph.output):
        tensor_type = info.type.tensor_type
        if info.type.WhichOneof("value") == "tensor_type" and tensor_type.HasField("shape"):
            declared[info.name] = _dims(tensor_type.shape)
    return declared


def _adopt_declared_names(value: Value, declared: Optional[list[Dim]],
                          reserved: Collection[str] = ()) -> None:
    """Where GE's inference left a dimension unknown and the model names it, keep the name.

    Known sizes are never taken from declarations: exporters get those wrong, and GE
    trusts its own inference. A symbolic name only says which dimensions are equal. On
    the output of an op holding subgraphs (``If``, ``Loop``, ``Scan``) a name of an
    input's dimension (``reserved``) is not taken: inference left the dimension unknown
    because the branches or iterations disagree, and the declaration is no proof.
    """
    if declared is None or len(declared) != len(value.shape):
        return
    if not any(isinstance(attr, Graph) for attr in value.producer.attrs.values()):
        reserved = ()
    value.shape = tuple(name if d == -1 and isinstance(name, str) and name not in reserved
                        else d for d, name in zip(value.shape, declared))


class _GraphBuilder:
    """Walks ONNX graphs, translating each node into the scope's GE graph."""

    def __init__(self, opsets: dict[str, int]) -> None:
        self.opsets = opsets
        self._declared: dict[str, list[Dim]] = {}
        self._input_names: set[str] = set()  # the symbols the model's inputs declare
        #: main-graph initializer name -> its raw bytes inside the serialized model
        self.raw_views: dict[str, memoryview] = {}

    def build(self, scope: Scope, proto: onnx.GraphProto, where: str) -> Graph:
        outer, self._declared = self._declared, _declared_dims(proto)
        try:
            self._add_initializers(scope, proto, where)
            self._add_inputs(scope, proto, where)
            for node in proto.node:
                self._translate(scope, node)
            self._set_outputs(scope, proto, where)
        finally:
            self._declared = outer
        return scope.graph

    def build_subgraph(self, scope: Scope, proto: onnx.GraphProto, where: str) -> Graph:
        return self.build(scope, proto, where)

    def _add_initializers(self, scope: Scope, proto: onnx.GraphProto, where: str) -> None:
        views = self.raw_views if scope.parent is None else {}
        for tensor in proto.initializer:
            label = f"{where} initializer {tensor.name!r}"
            array = _in_place(tensor, views.get(tensor.name), label)
            if array is None:
                array = np.require(tensor_array(tensor, label), requirements="C")
            array.setflags(write=False)  # the array is new or read-only: the tensor takes it
            node = create_node("Const", [], {"value": Tensor.wrap(array)}, tensor.name,
                               scope.graph)
            node.outputs[0].name = tensor.name
            scope.define(tensor.name, node.outputs[0])

    def _add_inputs(self, scope: Scope, proto: onnx.GraphProto, where: str) -> None:
        for info in proto.input:
            if info.name in scope.values:  # an initializer listed as an input (IR < 4)
                continue
            kind = info.type.WhichOneof("value")
            if kind != "tensor_type":
                raise UnsupportedOpError(f"{where} input {info.name!r} is a {kind or 'untyped'} "
                                         f"value; GE takes tensors only")
            tensor_type = info.type.tensor_type
            dtype = from_onnx_dtype(tensor_type.elem_type, f"{where} input {info.name!r}")
            if not tensor_type.HasField("shape"):
                raise UnsupportedOpError(f"{where} input {info.name!r} has no shape (unknown "
                                         f"rank); GE needs at least the rank of every input")
            dims = _dims(tensor_type.shape)
            if scope.parent is None:
                self._input_names.update(d for d in dims if isinstance(d, str))
            node = create_node("Data", [], {"shape": dims, "dtype": dtype}, info.name,
                               scope.graph)
            node.outputs[0].name = info.name
            scope.define(info.name, node.outputs[0])

    def _attributes(self, node: onnx.NodeProto, where: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for attribute in node.attribute:
            if attribute.ref_attr_name:
                raise UnsupportedOpError(f"{where}: attribute references are only valid in "
                                         f"functions")
            value = onnx.helper.get_attribute_value(attribute)
            if isinstance(value, onnx.TensorProto):
                value = tensor_array(value, f"{where} attribute {attribute.name!r}")
            elif isinstance(value, bytes):
                value = value.decode("utf-8", errors="replace")
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode("utf-8", errors="replace") for v in value]
            attrs[attribute.name] = value
        return attrs

    def _translate(self, scope: Scope, node: onnx.NodeProto) -> None:
        label = node.name or (node.output[0] if node.output else node.op_type)
        where = f"ONNX {node.op_type} node {label!r}"
        inputs = [scope.lookup(name, where) if name else None for name in node.input]
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        opset = self.opsets.get(domain, 1)
        translate = find_translator(domain, node.op_type)
        assert translate is not None  # check_supported ran first
        ctx = NodeContext(scope, node, opset, inputs, self._attributes(node, where), label,
                          self.build_subgraph)
        try:
            with scope.graph.recording() as added:
                outputs = list(translate(ctx))
        except (UnsupportedOpError, ModelFormatError, RankChangingIf):
            raise
        except GEError as error:
            raise type(error)(f"{where}: {error}") from error
        for index, name in enumerate(node.output):
            if not name:
                continue
            value = outputs[index] if index < len(outputs) else None
            if value is None:
                raise ctx.unsupported(f"output {index} ({name!r}) is not produced by GE's "
                                      f"translation")
            value = self._named(scope, value, name)
            _adopt_declared_names(value, self._declared.get(name), self._input_names)
            scope.define(name, value)
        for node_added in added:  # values GE added inside the translation
            if node_added.graph is scope.graph:
                for value in node_added.outputs:
                    if not value.has_explicit_name:
                        value.name = scope.fresh_value_name(value.name)

    def _named(self, scope: Scope, value: Value, name: str) -> Value:
        """``value`` under ONNX name ``name``, through an Identity if it already has a name."""
        if value.has_explicit_name or value.producer.op_type == "Data":
            value = scope.add("Identity", [value], {}, name).outputs[0]
        value.name = name
        return value

    def _set_outputs(self, scope: Scope, proto: onnx.GraphProto, where: str) -> None:
        outputs: list[Value] = []
        for info in proto.output:
            if info.name not in scope.values:
                raise ModelFormatError(f"{where} output {info.name!r} is never produced "
                                       f"(is the model truncated?)")
            value = scope.values[info.name]
            if any(value is seen for seen in outputs) or value.producer.graph is not scope.graph:
                value = scope.add("Identity", [value], {}, info.name).outputs[0]
            outputs.append(value)
        if not outputs:
            raise GraphError(f"{where} has no outputs")
        scope.graph.set_outputs(outputs)
