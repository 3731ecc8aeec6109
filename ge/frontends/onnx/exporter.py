"""``export_onnx``: any GE graph, optimized or not, as a valid ONNX model.

``Data`` nodes become graph inputs (dynamic dimensions as ``dim_param`` or
unset), ``Const`` nodes initializers, and every other node ONNX nodes: ops
named as ONNX names them map one to one; the seed's ops (``Conv2D``,
``MaxPool``, ``AvgPool``, ``FusedBatchNorm``, ``BiasAdd``, ``MatMul`` with
transposes, ``Cast``) are written in ONNX's form, with transposes around NHWC
data. Fused ops are written as their decomposition.
"""

from __future__ import annotations

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

__all__ = ["export_onnx", "exporter", "DEFAULT_OPSET"]

DEFAULT_OPSET = 21

ExportFn = Callable[["ExportContext", Node], None]
_EXPORTERS: dict[str, ExportFn] = {}


def exporter(*op_types: str) -> Callable[[ExportFn], ExportFn]:
    """Decorator: register how registry ops ``op_types`` are written to ONNX."""

    def register(function: ExportFn) -> ExportFn:
        for op_type in op_types:
            _EXPORTERS[op_type] = function
        return function

    return register


class ExportContext:
    """An ONNX graph under construction."""

    def __init__(self, name: str, opset: int) -> None:
        self.name = name
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.used: set[str] = set()
        self.count = 0
        self.domains: set[str] = set()
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
             name: str = "", domain: str = "", **attrs: Any) -> None:
        """Append an ONNX node (attributes whose value is None are left out)."""
        kept = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                           name=name or None, domain=domain or None, **kept))
        if domain:
            self.domains.add(domain)

    def const(self, array: np.ndarray, base: str) -> str:
        """Add an initializer; return its name."""
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def temp(self, base: str) -> str:
        """A name for an intermediate value."""
        return self.fresh(base)


def _attribute(value: Any) -> Any:
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
        return [_attribute(v) for v in value]
    return value


def _value_info(value: Value, name: Optional[str] = None) -> onnx.ValueInfoProto:
    dims: list[Any] = [d if isinstance(d, str) else (None if d < 0 else d) for d in value.shape]
    return helper.make_tensor_value_info(name or value.name, to_onnx_dtype(value.dtype), dims)


def _onnx_attribute_names(op_type: str, opset: int) -> Optional[set[str]]:
    try:
        return set(onnx.defs.get_schema(op_type, opset).attributes)
    except onnx.defs.SchemaError:
        return None


def _direct(ctx: ExportContext, node: Node) -> None:
    """A registry op that is an ONNX op of the same name, inputs and attributes.

    Attributes the ONNX op does not have at the target opset are left out when they
    hold the registry's default, and refused otherwise.
    """
    known = _onnx_attribute_names(node.op_type, ctx.opset)
    if known is None:
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: ONNX opset {ctx.opset} "
                                 f"has no {node.op_type}")
    defaults = get_schema(node.op_type).attrs
    attrs = {}
    for key, value in node.attrs.items():
        if value is None:
            continue
        if key in known:
            attrs[key] = _attribute(value)
        elif key not in defaults or value != defaults[key].default:
            raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: attribute {key}="
                                     f"{value!r} has no ONNX form at opset {ctx.opset}")
    inputs = [ctx.name_of(v) for v in node.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    ctx.node(node.op_type, inputs, [v.name for v in node.outputs], node.name, **attrs)


def _export_node(ctx: ExportContext, node: Node) -> None:
    function = _EXPORTERS.get(node.op_type)
    if function is not None:
        function(ctx, node)
    elif onnx.defs.has(node.op_type):
        _direct(ctx, node)
    else:
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r} has no ONNX form yet")


def _graph_proto(graph: Graph, name: str, opset: int,
                 captured: Sequence[str] = ()) -> onnx.GraphProto:
    """An ONNX graph; the last ``len(captured)`` Data nodes become references to those
    outer names (GE passes outer values to a subgraph explicitly, ONNX by name)."""
    ctx = ExportContext(name, opset)
    ctx.used.update(v.name for n in graph.nodes for v in n.outputs)
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
    return helper.make_graph(ctx.nodes, name, ctx.inputs, outputs, ctx.initializers)


def export_onnx(graph: Graph, path: Union[str, os.PathLike, None] = None, *,
                opset: Optional[int] = None, check: bool = True) -> onnx.ModelProto:
    """Write ``graph`` as an ONNX model; return the ``ModelProto`` (saved to ``path`` if given).

    The model passes ``onnx.checker.check_model(full_check=True)`` when ``check``.
    """
    if not isinstance(graph, Graph):
        raise GraphError(f"export_onnx expects a ge.Graph, got {type(graph).__name__}")
    graph.validate()
    version = opset or max(DEFAULT_OPSET, int(graph.metadata.get("onnx_opset", 0)))
    body = _graph_proto(graph, graph.name, version)
    imports = [helper.make_opsetid("", version)]
    model = helper.make_model(body, opset_imports=imports, producer_name="ge",
                              producer_version="0.1.0")
    model.ir_version = min(model.ir_version, 10)
    if check:
        onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, str(path))
    return model


# -- the seed's ops in ONNX's form ------------------------------------------------------

_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]


def _nchw_input(ctx: ExportContext, node: Node, value: Value) -> str:
    if node.attrs.get("data_format") is Format.NHWC:
        name = ctx.temp(f"{node.name}/to_nchw")
        ctx.node("Transpose", [ctx.name_of(value)], [name], perm=_TO_NCHW)
        return name
    return ctx.name_of(value)


def _nchw_output(ctx: ExportContext, node: Node) -> tuple[str, Callable[[], None]]:
    """The name the ONNX op writes, and a finisher that transposes back for NHWC."""
    final = node.outputs[0].name
    if node.attrs.get("data_format") is not Format.NHWC:
        return final, lambda: None
    inner = ctx.temp(f"{node.name}/nchw")
    return inner, lambda: ctx.node("Transpose", [inner], [final], perm=_TO_NHWC)


def _onnx_pads(window: Any) -> Optional[list[int]]:
    top, bottom, left, right = window.pads
    return [top, left, bottom, right]


def _window_attrs(node: Node) -> dict[str, Any]:
    from ge.ops.nn import resolve_window

    window = resolve_window(node.attrs, bool(node.attrs.get("ceil_mode", False)))
    attrs: dict[str, Any] = {"strides": list(window.strides)}
    if window.padding == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif window.padding == "VALID":
        attrs["auto_pad"] = "VALID"
    else:
        attrs["pads"] = _onnx_pads(window)
    if any(d != 1 for d in window.dilations):
        attrs["dilations"] = list(window.dilations)
    return attrs


@exporter("Conv2D")
def _conv2d(ctx: ExportContext, node: Node) -> None:
    x, weight, bias = (list(node.inputs) + [None])[:3]
    assert x is not None and weight is not None
    filter_format = node.attrs.get("filter_format") or \
        ("OIHW" if node.attrs.get("data_format") is Format.NCHW else "HWIO")
    weight_name = ctx.name_of(weight)
    if filter_format == "HWIO":
        weight_name = ctx.temp(f"{node.name}/oihw")
        ctx.node("Transpose", [ctx.name_of(weight)], [weight_name], perm=[3, 2, 0, 1])
    inputs = [_nchw_input(ctx, node, x), weight_name] + ([ctx.name_of(bias)] if bias else [])
    out, finish = _nchw_output(ctx, node)
    ctx.node("Conv", inputs, [out], node.name, group=node.attrs.get("groups", 1),
             **_window_attrs(node))
    finish()


def _pool(ctx: ExportContext, node: Node, onnx_type: str, **extra: Any) -> None:
    from ge.ops.nn import _pair

    x = node.inputs[0]
    assert x is not None
    kernel = list(_pair(node.attrs["ksize"], node.attrs["data_format"], "ksize"))
    attrs = _window_attrs(node)
    out, finish = _nchw_output(ctx, node)
    ctx.node(onnx_type, [_nchw_input(ctx, node, x)], [out], node.name, kernel_shape=kernel,
             ceil_mode=int(bool(node.attrs.get("ceil_mode", False))), **attrs, **extra)
    finish()


@exporter("MaxPool")
def _max_pool(ctx: ExportContext, node: Node) -> None:
    _pool(ctx, node, "MaxPool")


@exporter("AvgPool")
def _avg_pool(ctx: ExportContext, node: Node) -> None:
    _pool(ctx, node, "AveragePool",
          count_include_pad=int(bool(node.attrs.get("count_include_pad", False))))


@exporter("GlobalAveragePool")
def _global_average_pool(ctx: ExportContext, node: Node) -> None:
    x = node.inputs[0]
    assert x is not None
    out, finish = _nchw_output(ctx, node)
    ctx.node("GlobalAveragePool", [_nchw_input(ctx, node, x)], [out], node.name)
    finish()


@exporter("FusedBatchNorm")
def _fused_batch_norm(ctx: ExportContext, node: Node) -> None:
    x = node.inputs[0]
    assert x is not None
    layout = node.attrs.get("data_format")
    if layout is Format.NCHW or x.rank <= 2:
        ctx.node("BatchNormalization", [ctx.name_of(v) for v in node.inputs],
                 [node.outputs[0].name], node.name, epsilon=node.attrs["epsilon"])
        return
    # channels last: move C to axis 1 and back
    perm = [0, x.rank - 1] + list(range(1, x.rank - 1))
    back = [0] + list(range(2, x.rank)) + [1]
    moved = ctx.temp(f"{node.name}/channels_first")
    normed = ctx.temp(f"{node.name}/normed")
    ctx.node("Transpose", [ctx.name_of(x)], [moved], perm=perm)
    ctx.node("BatchNormalization", [moved] + [ctx.name_of(v) for v in node.inputs[1:]], [normed],
             node.name, epsilon=node.attrs["epsilon"])
    ctx.node("Transpose", [normed], [node.outputs[0].name], perm=back)


@exporter("BiasAdd")
def _bias_add(ctx: ExportContext, node: Node) -> None:
    value, bias = node.inputs
    assert value is not None and bias is not None
    bias_name = ctx.name_of(bias)
    if node.attrs.get("data_format") is Format.NCHW and value.rank > 2:
        shape = ctx.const(np.array([-1] + [1] * (value.rank - 2), np.int64), f"{node.name}/shape")
        bias_name = ctx.temp(f"{node.name}/bias")
        ctx.node("Reshape", [ctx.name_of(bias), shape], [bias_name])
    ctx.node("Add", [ctx.name_of(value), bias_name], [node.outputs[0].name], node.name)


@exporter("MatMul")
def _matmul(ctx: ExportContext, node: Node) -> None:
    names = []
    for value, flag in zip(node.inputs, ("transpose_a", "transpose_b")):
        assert value is not None
        if node.attrs.get(flag) and value.rank >= 2:
            perm = list(range(value.rank - 2)) + [value.rank - 1, value.rank - 2]
            moved = ctx.temp(f"{node.name}/{flag}")
            ctx.node("Transpose", [ctx.name_of(value)], [moved], perm=perm)
            names.append(moved)
        else:
            names.append(ctx.name_of(value))
    ctx.node("MatMul", names, [node.outputs[0].name], node.name)


@exporter("Cast")
def _cast(ctx: ExportContext, node: Node) -> None:
    attrs = {k: _attribute(v) for k, v in node.attrs.items() if k != "dtype" and v is not None}
    ctx.node("Cast", [ctx.name_of(node.inputs[0])], [node.outputs[0].name], node.name,
             to=to_onnx_dtype(node.attrs["dtype"]), **attrs)


@exporter("Identity")
def _identity(ctx: ExportContext, node: Node) -> None:
    ctx.node("Identity", [ctx.name_of(node.inputs[0])], [node.outputs[0].name], node.name)


# -- control flow: outer values go back to being referenced by name ---------------------

def _plain_attrs(node: Node, skip: Sequence[str]) -> dict[str, Any]:
    return {k: _attribute(v) for k, v in node.attrs.items()
            if v is not None and k not in skip and k != "num_captured"}


@exporter("If")
def _if(ctx: ExportContext, node: Node) -> None:
    captured = [ctx.name_of(v) for v in node.inputs[1:]]
    branches = {key: _graph_proto(node.attrs[key], f"{node.name}_{key}", ctx.opset, captured)
                for key in ("then_branch", "else_branch")}
    ctx.node("If", [ctx.name_of(node.inputs[0])], [v.name for v in node.outputs], node.name,
             **branches)


@exporter("Loop")
def _loop(ctx: ExportContext, node: Node) -> None:
    count = node.attrs.get("num_captured", 0)
    values = list(node.inputs[2:])
    carried, captured = values[:len(values) - count], values[len(values) - count:]
    body = _graph_proto(node.attrs["body"], f"{node.name}_body", ctx.opset,
                        [ctx.name_of(v) for v in captured])
    inputs = [ctx.name_of(node.inputs[0]), ctx.name_of(node.inputs[1])]
    ctx.node("Loop", inputs + [ctx.name_of(v) for v in carried],
             [v.name for v in node.outputs], node.name, body=body)


@exporter("Scan")
def _scan(ctx: ExportContext, node: Node) -> None:
    count = node.attrs.get("num_captured", 0)
    values = list(node.inputs)
    own, captured = values[:len(values) - count], values[len(values) - count:]
    body = _graph_proto(node.attrs["body"], f"{node.name}_body", ctx.opset,
                        [ctx.name_of(v) for v in captured])
    ctx.node("Scan", [ctx.name_of(v) for v in own], [v.name for v in node.outputs], node.name,
             body=body, **_plain_attrs(node, ("body",)))
