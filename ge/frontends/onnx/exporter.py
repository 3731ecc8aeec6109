"""``export_onnx``: any GE graph, optimized or not, as a valid ONNX model.

``Data`` nodes become graph inputs (dynamic dimensions as ``dim_param`` or
unset), ``Const`` nodes initializers, and every other node ONNX nodes: ops
named as ONNX names them map one to one (``_direct``); the seed's ops and the
other TensorFlow-style ones (``Conv2D``, ``Conv3D``, the pools, ``FusedBatchNorm``,
``BiasAdd``, ``MatMul`` with transposes, ...) are written in ONNX's form by the
exporters of ``export_ops``, with transposes around channels-last data. Fused ops
(``FusedConv2D``, ``ConvBNReLU``, ``MatMulBiasAdd``, ``FusedElementwise``) are written as
the registry ops they stand for, through their ops' own ``decompose``.

The opset written is the newest of: ``DEFAULT_OPSET``, the opset the graph was read
at, and the first opset that has every op the graph uses with the attributes it sets.
An optional ONNX output that nothing reads is written as "" (or left out when trailing).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ge.errors import GraphError, UnsupportedOpError
from ge.frontends.onnx.dtypes import to_onnx_dtype
from ge.ir import DataType, Format, Graph, Node, Tensor, Value
from ge.ops import get_schema

__all__ = ["export_onnx", "exporter", "ExportContext", "DEFAULT_OPSET", "MIN_OPSET",
           "attribute_value", "graph_proto", "is_needed", "onnx_accepts", "onnx_attributes",
           "onnx_schema", "output_names", "plain_graph", "required_opset"]

DEFAULT_OPSET = 21
MIN_OPSET = 18  # the registry's forms (axes, pads and sizes as inputs) are ONNX's since 18

ExportFn = Callable[["ExportContext", Node], None]
_EXPORTERS: dict[str, ExportFn] = {}
_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional


def exporter(*op_types: str) -> Callable[[ExportFn], ExportFn]:
    """Decorator: register how registry ops ``op_types`` are written to ONNX."""

    def register(function: ExportFn) -> ExportFn:
        for op_type in op_types:
            _EXPORTERS[op_type] = function
        return function

    return register


class ExportContext:
    """An ONNX graph under construction. ``used`` holds the value names taken in the whole
    model (a subgraph shares its outer graph's set, so no name shadows another)."""

    def __init__(self, name: str, opset: int, used: Optional[set[str]] = None) -> None:
        self.name = name
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.used: set[str] = set() if used is None else used
        self.count = 0
        self.renames: dict[int, str] = {}  # values known by another name (captured outer values)

    def name_of(self, value: Optional[Value]) -> str:
        """The ONNX name of ``value`` ("" for an absent optional input)."""
        if value is None:
            return ""
        return self.renames.get(id(value), value.name)

    def fresh(self, base: str) -> str:
        """A value name not used yet in this graph."""
        name = base
        while name in self.used:
            self.count += 1
            name = f"{base}__{self.count}"
        self.used.add(name)
        return name

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str],
             name: str = "", **attrs: Any) -> None:
        """Append an ONNX node (attributes whose value is None are left out)."""
        kept = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                           name=name or None, **kept))

    def const(self, array: Any, base: str) -> str:
        """Add an initializer; return its name."""
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def temp(self, base: str) -> str:
        """A name for an intermediate value."""
        return self.fresh(base)

    def op(self, op_type: str, inputs: Sequence[str], base: str, **attrs: Any) -> str:
        """Append a one-output ONNX node writing a fresh value; return that value's name."""
        out = self.temp(base)
        self.node(op_type, inputs, [out], **attrs)
        return out


def is_needed(value: Value) -> bool:
    """True when some node reads ``value`` or it is an output of its graph."""
    return bool(value.users) or value.is_graph_output()


def attribute_value(value: Any) -> Any:
    """A registry attribute value in the form ``helper.make_attribute`` takes."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, DataType):
        return to_onnx_dtype(value)
    if isinstance(value, Format):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Tensor):
        return numpy_helper.from_array(value.numpy())
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    if isinstance(value, list):
        return [attribute_value(v) for v in value]
    return value


def _value_info(value: Value, name: Optional[str] = None) -> onnx.ValueInfoProto:
    dims: list[Any] = [d if isinstance(d, str) else (None if d < 0 else d) for d in value.shape]
    return helper.make_tensor_value_info(name or value.name, to_onnx_dtype(value.dtype), dims)


# -- ONNX's schemas ---------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _history() -> dict[str, list[tuple[int, frozenset[str]]]]:
    """Every default-domain ONNX op: (since_version, attribute names) of each version."""
    versions: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx"):
            versions.setdefault(schema.name, []).append(
                (schema.since_version, frozenset(schema.attributes)))
    return {name: sorted(entries) for name, entries in versions.items()}


def onnx_schema(op_type: str, opset: int) -> Optional[onnx.defs.OpSchema]:
    """ONNX's schema of ``op_type`` at ``opset``, or None where the op does not exist."""
    try:
        return onnx.defs.get_schema(op_type, opset)
    except onnx.defs.SchemaError:
        return None


def onnx_accepts(op_type: str, opset: int, index: int, dtype: DataType) -> bool:
    """True when input ``index`` of ONNX's ``op_type`` at ``opset`` takes ``dtype``."""
    schema = onnx_schema(op_type, opset)
    if schema is None or index >= len(schema.inputs):
        return False
    wanted = f"tensor({onnx.TensorProto.DataType.Name(to_onnx_dtype(dtype)).lower()})"
    type_str = schema.inputs[index].type_str
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            return wanted in constraint.allowed_type_strs
    return type_str == wanted


def _is_default(node: Node, key: str, value: Any) -> bool:
    attr = get_schema(node.op_type).attrs.get(key)
    if attr is None:
        return False
    default = attr.default
    if isinstance(value, (np.ndarray, Tensor, Graph)) or isinstance(default, np.ndarray):
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


def _set_attributes(node: Node, skip: Sequence[str] = ()) -> dict[str, Any]:
    """The node's attributes that are set (not None), less those in ``skip``."""
    return {k: v for k, v in node.attrs.items() if v is not None and k not in skip}


def onnx_attributes(ctx: ExportContext, node: Node, onnx_type: str,
                    skip: Sequence[str] = ()) -> dict[str, Any]:
    """``node``'s attributes for ONNX's ``onnx_type`` at the target opset: those the ONNX op
    does not know are left out when they hold the registry's default, refused otherwise."""
    schema = onnx_schema(onnx_type, ctx.opset)
    if schema is None:
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: ONNX opset {ctx.opset} "
                                 f"has no {onnx_type}")
    attrs = {}
    for key, value in _set_attributes(node, skip).items():
        if key in schema.attributes:
            attrs[key] = attribute_value(value)
        elif not _is_default(node, key, value):
            raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: attribute {key}="
                                     f"{value!r} has no ONNX form at opset {ctx.opset}")
    return attrs


def _first_opset(node: Node) -> int:
    """The first opset with ``node``'s op and every non-default attribute it sets (0 for
    ops that are not ONNX's)."""
    versions = _history().get(node.op_type)
    if not versions:
        return 0
    latest = versions[-1][1]
    needed = {key for key, value in _set_attributes(node).items()
              if key in latest and not _is_default(node, key, value)}
    return next((version for version, names in versions if needed <= names), versions[-1][0])


def required_opset(graph: Graph) -> int:
    """The first opset that can write every node of ``graph`` and of its subgraphs."""
    needed = 0
    for node in graph.nodes:
        needed = max(needed, _first_opset(node))
        for value in node.attrs.values():
            if isinstance(value, Graph):
                needed = max(needed, required_opset(value))
    return needed


# -- fused ops: written as what they stand for ------------------------------------------

Decompose = Callable[[Node, Graph], list[Value]]


def _decomposition(op_type: str) -> Optional[Decompose]:
    """How a fused op is written as plain registry ops (from its own op module)."""
    if op_type in ("FusedConv2D", "ConvBNReLU"):
        from ge.ops.fused_conv import decompose

        return decompose
    if op_type == "MatMulBiasAdd":
        from ge.ops.fused_matmul import decompose_matmul_bias_add

        return lambda node, graph: [decompose_matmul_bias_add(node, graph)]
    if op_type == "FusedElementwise":
        from ge.ops.fused_elementwise import decompose as decompose_steps

        return lambda node, graph: [decompose_steps(node, graph)]
    return None


def _has_fused(graph: Graph) -> bool:
    return any(_decomposition(node.op_type) is not None
               or any(isinstance(v, Graph) and _has_fused(v) for v in node.attrs.values())
               for node in graph.nodes)


def _expand_fused(graph: Graph) -> None:
    """Replace every fused node of ``graph`` (and of its subgraphs) by its decomposition;
    the values keep their names."""
    for node in graph.topological_order():
        for value in node.attrs.values():
            if isinstance(value, Graph):
                _expand_fused(value)
        decompose = _decomposition(node.op_type)
        if decompose is None:
            continue
        for old, new in zip(node.outputs, decompose(node, graph)):
            new.desc = old.desc
            old.replace_all_uses_with(new)
            new.name = old.name
        graph.remove_node(node)


def plain_graph(graph: Graph) -> Graph:
    """``graph``, or a copy of it with its fused ops decomposed when it has any."""
    if not _has_fused(graph):
        return graph
    copy = graph.clone()
    _expand_fused(copy)
    return copy


# -- writing nodes and graphs -----------------------------------------------------------

def output_names(ctx: ExportContext, node: Node, onnx_type: str) -> list[str]:
    """The ONNX output names of ``node``: an optional output of ``onnx_type`` that nothing
    reads is written as "" (and left out when trailing)."""
    schema = onnx_schema(onnx_type, ctx.opset)
    formal = list(schema.outputs) if schema is not None else []
    names = []
    for index, value in enumerate(node.outputs):
        optional = index < len(formal) and formal[index].option == _OPTIONAL
        names.append("" if optional and not is_needed(value) else value.name)
    while len(names) > 1 and not names[-1]:
        names.pop()
    return names


def _direct(ctx: ExportContext, node: Node) -> None:
    """A registry op that is an ONNX op of the same name, inputs and attributes."""
    attrs = onnx_attributes(ctx, node, node.op_type)
    inputs = [ctx.name_of(v) for v in node.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    ctx.node(node.op_type, inputs, output_names(ctx, node, node.op_type), node.name, **attrs)


def _export_node(ctx: ExportContext, node: Node) -> None:
    function = _EXPORTERS.get(node.op_type)
    if function is not None:
        function(ctx, node)
    elif onnx.defs.has(node.op_type):
        _direct(ctx, node)
    else:
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r} has no ONNX form yet")


def _value_names(graph: Graph) -> set[str]:
    """The names of every value of ``graph`` and of its subgraphs."""
    names = {v.name for n in graph.nodes for v in n.outputs}
    for node in graph.nodes:
        for value in node.attrs.values():
            if isinstance(value, Graph):
                names |= _value_names(value)
    return names


def graph_proto(graph: Graph, name: str, outer: ExportContext,
                captured: Sequence[str] = ()) -> onnx.GraphProto:
    """A subgraph of the graph ``outer`` writes; the last ``len(captured)`` Data nodes become
    references to those outer names (GE passes outer values explicitly, ONNX by name)."""
    return _graph_proto(graph, ExportContext(name, outer.opset, outer.used), captured)


def _graph_proto(graph: Graph, ctx: ExportContext,
                 captured: Sequence[str] = ()) -> onnx.GraphProto:
    data = [n for n in graph.nodes if n.op_type == "Data"]
    formal = data[:len(data) - len(captured)] if captured else data
    for node, outer in zip(data[len(formal):], captured):
        ctx.renames[id(node.outputs[0])] = outer
    for node in formal:
        ctx.inputs.append(_value_info(node.outputs[0]))
    for node in graph.topological_order():
        if node.op_type == "Const":
            tensor = node.attrs["value"].numpy()
            ctx.initializers.append(numpy_helper.from_array(tensor, node.outputs[0].name))
        elif node.op_type != "Data":
            _export_node(ctx, node)
    outputs = []
    for value in graph.outputs:
        if id(value) in ctx.renames or value.producer.op_type == "Data" and captured:
            renamed = ctx.fresh(f"{value.name}_out")
            ctx.node("Identity", [ctx.name_of(value)], [renamed])
            outputs.append(_value_info(value, renamed))
        else:
            outputs.append(_value_info(value))
    return helper.make_graph(ctx.nodes, ctx.name, ctx.inputs, outputs, ctx.initializers)


def _other_domains(body: onnx.GraphProto) -> set[str]:
    """The op domains besides ONNX's that the nodes of ``body`` and its subgraphs use (an
    onnxruntime contrib op's ``com.microsoft``, version 1)."""
    domains = set()
    for node in body.node:
        if node.domain not in ("", "ai.onnx"):
            domains.add(node.domain)
        for attribute in node.attribute:
            for inner in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                domains |= _other_domains(inner)
    return domains


def export_onnx(graph: Graph, path: Union[str, os.PathLike, None] = None, *,
                opset: Optional[int] = None, check: bool = True) -> onnx.ModelProto:
    """Write ``graph`` as an ONNX model; return the ``ModelProto`` (saved to ``path`` if given).

    ``opset`` (at least ``MIN_OPSET``) defaults to the first one that can write the
    graph, and no older than ``DEFAULT_OPSET`` or the opset the graph was read at. The
    model passes ``onnx.checker.check_model(full_check=True)`` when ``check``.
    """
    if not isinstance(graph, Graph):
        raise GraphError(f"export_onnx expects a ge.Graph, got {type(graph).__name__}")
    graph.validate()
    graph = plain_graph(graph)
    if opset is not None and opset < MIN_OPSET:
        raise UnsupportedOpError(f"export_onnx writes opset {MIN_OPSET} or newer, not {opset}")
    version = opset or max(DEFAULT_OPSET, int(graph.metadata.get("onnx_opset", 0)),
                           required_opset(graph))
    body = _graph_proto(graph, ExportContext(graph.name, version, _value_names(graph)))
    imports = [helper.make_opsetid("", version)]
    imports += [helper.make_opsetid(domain, 1) for domain in sorted(_other_domains(body))]
    model = helper.make_model(body, opset_imports=imports, producer_name="ge",
                              producer_version="0.1.0")
    model.ir_version = max(10, helper.find_min_ir_version_for(imports, ignore_unknown=True))
    if check:
        onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, str(path))
    return model


# -- ops whose ONNX form differs only a little ------------------------------------------

@exporter("Cast")
def _cast(ctx: ExportContext, node: Node) -> None:
    attrs = onnx_attributes(ctx, node, "Cast", skip=("dtype",))
    ctx.node("Cast", [ctx.name_of(node.inputs[0])], [node.outputs[0].name], node.name,
             to=to_onnx_dtype(node.attrs["dtype"]), **attrs)


@exporter("Identity")
def _identity(ctx: ExportContext, node: Node) -> None:
    ctx.node("Identity", [ctx.name_of(node.inputs[0])], [node.outputs[0].name], node.name)


@exporter("Range")
def _range(ctx: ExportContext, node: Node) -> None:
    """``Range``. ONNX takes only scalars, so one-element bounds are reshaped to scalars;
    a dtype ONNX's Range does not take at the opset runs in the one GE computes it in
    (float32 or float64 for half floats, by ``stash_type``; int64 for narrow integers)."""
    dtype = node.outputs[0].dtype
    inner = dtype
    if not onnx_accepts("Range", ctx.opset, 0, dtype):
        inner = DataType.DT_INT64 if dtype.is_integer else \
            DataType.DT_DOUBLE if node.attrs.get("stash_type") == 11 else DataType.DT_FLOAT
    inputs = []
    for value in node.inputs:
        assert value is not None
        name = ctx.name_of(value)
        if value.rank != 0:
            scalar = ctx.const(np.zeros((0,), np.int64), f"{node.name}/scalar")
            name = ctx.op("Reshape", [name, scalar], f"{name}/scalar")
        if inner is not dtype:
            name = ctx.op("Cast", [name], f"{name}/wide", to=to_onnx_dtype(inner))
        inputs.append(name)
    attrs = onnx_attributes(ctx, node, "Range")
    if inner is dtype:
        ctx.node("Range", inputs, [node.outputs[0].name], node.name, **attrs)
        return
    values = ctx.op("Range", inputs, f"{node.name}/wide", **attrs)
    ctx.node("Cast", [values], [node.outputs[0].name], node.name, to=to_onnx_dtype(dtype))


# -- control flow: outer values go back to being referenced by name ---------------------

def _plain_attrs(node: Node, skip: Sequence[str]) -> dict[str, Any]:
    return {k: attribute_value(v) for k, v in node.attrs.items()
            if v is not None and k not in skip and k != "num_captured"}


@exporter("If")
def _if(ctx: ExportContext, node: Node) -> None:
    broken = [key for key in ("then_error", "else_error") if node.attrs.get(key)]
    if broken:
        raise UnsupportedOpError(f"If node {node.name!r}: its {broken[0][:4]}_branch did not "
                                 f"import ({node.attrs[broken[0]]}); GE holds a placeholder "
                                 f"for it, which has no ONNX form")
    captured = [ctx.name_of(v) for v in node.inputs[1:]]
    branches = {key: graph_proto(node.attrs[key], f"{node.name}_{key}", ctx, captured)
                for key in ("then_branch", "else_branch")}
    ctx.node("If", [ctx.name_of(node.inputs[0])], [v.name for v in node.outputs], node.name,
             **branches)


@exporter("Loop")
def _loop(ctx: ExportContext, node: Node) -> None:
    count = node.attrs.get("num_captured", 0)
    values = list(node.inputs[2:])
    carried, captured = values[:len(values) - count], values[len(values) - count:]
    body = graph_proto(node.attrs["body"], f"{node.name}_body", ctx,
                       [ctx.name_of(v) for v in captured])
    inputs = [ctx.name_of(node.inputs[0]), ctx.name_of(node.inputs[1])]
    ctx.node("Loop", inputs + [ctx.name_of(v) for v in carried],
             [v.name for v in node.outputs], node.name, body=body)


@exporter("Scan")
def _scan(ctx: ExportContext, node: Node) -> None:
    count = node.attrs.get("num_captured", 0)
    values = list(node.inputs)
    own, captured = values[:len(values) - count], values[len(values) - count:]
    body = graph_proto(node.attrs["body"], f"{node.name}_body", ctx,
                       [ctx.name_of(v) for v in captured])
    ctx.node("Scan", [ctx.name_of(v) for v in own], [v.name for v in node.outputs], node.name,
             body=body, **_plain_attrs(node, ("body",)))


import ge.frontends.onnx.export_ops as _export_ops  # noqa: E402,F401 - registers the rest
