"""A decoded ``GraphDef`` into a ``ge.Graph``: inputs, outputs, the walk, the names.

The importer picks the graph's outputs (given, or every node no other node reads), walks
back from them to the inputs (given, or the ``Placeholder`` nodes found on the way),
checks that every op on the way has a translator (one ``UnsupportedOpError`` lists every
op type that has none, with its nodes), and translates the nodes in dependency order.

Names: an input is a ``Data`` node with the ``Placeholder``'s name (the key to feed it
by); the GE node computing a TensorFlow node's first output has that node's name; an
output is a value named as TensorFlow names the tensor without its ``:0`` (``"probs"``,
or ``"split:1"`` for a second output).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from ge.errors import GEError, GraphError, ModelFormatError, UnsupportedOpError
from ge.frontends.tensorflow.protobuf import GraphDef, NodeDef, to_ge_dtype
from ge.frontends.tensorflow.translate import (
    PASSTHROUGH_OPS,
    GraphBuilder,
    NodeContext,
    translators,
)
from ge.ir import Graph, Value
from ge.ops import create_node

__all__ = ["import_graph", "tensor_name", "split_tensor_name"]

TensorRef = tuple[str, int]

# nodes that compute nothing a caller wants as an output
_NOT_OUTPUTS = frozenset({"NoOp", "Placeholder", "Const", "Assert", "PrintV2", "Print"})
_PLACEHOLDERS = frozenset({"Placeholder", "PlaceholderWithDefault"})
_LISTED_NODES = 4  # node names listed per op type in the UnsupportedOpError


def split_tensor_name(name: str) -> TensorRef:
    """``"node:1"`` -> ``("node", 1)``; ``"node"`` -> ``("node", 0)``."""
    node, colon, index = name.rpartition(":")
    if colon and index.isdigit():
        return node, int(index)
    return name, 0


def tensor_name(ref: TensorRef) -> str:
    """The name GE gives the value of TensorFlow tensor ``ref``: the node's name for its
    first output, ``node:i`` for the others."""
    return ref[0] if ref[1] == 0 else f"{ref[0]}:{ref[1]}"


class _Model:
    """The nodes by name, with each node's data inputs resolved to tensor references."""

    def __init__(self, graph_def: GraphDef) -> None:
        self.nodes: dict[str, NodeDef] = {}
        for node in graph_def.nodes:
            if node.name in self.nodes:
                raise ModelFormatError(f"the GraphDef has two nodes named {node.name!r}")
            self.nodes[node.name] = node
        self.reads: dict[str, list[TensorRef]] = {}
        for node in graph_def.nodes:
            refs = []
            for text in node.inputs:
                if text.startswith("^"):
                    continue  # a control dependency: ordering only, no data
                ref = split_tensor_name(text)
                if ref[0] not in self.nodes:
                    raise ModelFormatError(f"TensorFlow {node.op} node {node.name!r} reads "
                                           f"{text!r}, but the graph has no node "
                                           f"{ref[0]!r}")
                refs.append(ref)
            self.reads[node.name] = refs

    def node(self, name: str, what: str) -> NodeDef:
        found = self.nodes.get(name)
        if found is None:
            raise GraphError(f"{what} {name!r} is not a node of the graph")
        return found


def _default_outputs(model: _Model) -> list[TensorRef]:
    """Output 0 of every node no other node reads, except ``NoOp`` and kin, and except
    leftovers that depend on no placeholder (constants nobody uses)."""
    readers: dict[str, list[str]] = {}
    for node in model.nodes.values():  # a control dependency counts as a reader here
        for text in node.inputs:
            source = split_tensor_name(text.lstrip("^"))[0]
            if source in model.nodes:
                readers.setdefault(source, []).append(node.name)
    fed = [n for n, node in model.nodes.items() if node.op in _PLACEHOLDERS]
    reached = set(fed)
    while fed:  # every node a placeholder reaches
        for reader in readers.get(fed.pop(), ()):
            if reader not in reached:
                reached.add(reader)
                fed.append(reader)
    return [(name, 0) for name, node in model.nodes.items()
            if name not in readers and name in reached and node.op not in _NOT_OUTPUTS]


def _cone(model: _Model, outputs: Sequence[TensorRef], stops: set[str]) -> list[str]:
    """The names of the nodes the outputs need (the walk stops at ``stops``)."""
    seen = {name for name, _ in outputs}
    pending = list(seen)
    while pending:
        name = pending.pop()
        if name in stops:
            continue
        for source, _ in model.reads[name]:
            if source not in seen:
                seen.add(source)
                pending.append(source)
    return [name for name in model.nodes if name in seen]


def _order(model: _Model, outputs: Sequence[TensorRef], stops: set[str]) -> list[str]:
    """The nodes the outputs need, each after those it reads (the walk stops at
    ``stops``, the inputs)."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the walk's stack, 2: done
    for start, _ in outputs:
        if state.get(start) == 2:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            name, position = stack[-1]
            reads = [] if name in stops else model.reads[name]
            if position < len(reads):
                stack[-1] = (name, position + 1)
                source = reads[position][0]
                if state.get(source) == 1:
                    raise UnsupportedOpError(f"the graph has a cycle through node {source!r} "
                                             f"(TensorFlow 1 control flow): GE translates "
                                             f"acyclic graphs only")
                if source not in state:
                    state[source] = 1
                    stack.append((source, 0))
                continue
            stack.pop()
            state[name] = 2
            order.append(name)
    return order


def _check_supported(model: _Model, order: Sequence[str], stops: set[str]) -> None:
    known = translators()
    missing: dict[str, list[str]] = {}
    for name in order:
        op = model.nodes[name].op
        if name not in stops and op not in known and op not in PASSTHROUGH_OPS \
                and op != "Placeholder":
            missing.setdefault(op, []).append(name)
    if not missing:
        return
    parts = []
    for op, names in sorted(missing.items()):
        shown = ", ".join(repr(n) for n in names[:_LISTED_NODES])
        more = f" and {len(names) - _LISTED_NODES} more" if len(names) > _LISTED_NODES else ""
        parts.append(f"{op} (node{'s' if len(names) > 1 else ''} {shown}{more})")
    raise UnsupportedOpError(f"the graph uses {len(missing)} TensorFlow op type(s) GE does "
                             f"not translate: {'; '.join(parts)}")


def _input_value(builder: GraphBuilder, node: NodeDef, ref: TensorRef,
                 shapes: Mapping[str, Sequence[int]]) -> Value:
    """The ``Data`` node for input ``ref``, its shape given, declared or recorded."""
    where = f"input {tensor_name(ref)!r} ({node.op})"
    key = "dtype" if node.has_attr("dtype") else "T"
    if not node.has_attr(key):
        raise GraphError(f"{where}: its dtype is not recorded in the graph")
    dtype = to_ge_dtype(int(node.attr(key)), where)
    shape = shapes.get(tensor_name(ref))
    if shape is None:
        declared = node.attr("shape", None) if node.op in _PLACEHOLDERS else None
        recorded = node.attr("_output_shapes", None)
        if declared is None and isinstance(recorded, list) and ref[1] < len(recorded):
            declared = recorded[ref[1]]
        if declared is None:
            raise GraphError(f"{where} has an unknown rank: give its shape (input_shapes="
                             f"{{{tensor_name(ref)!r}: (...)}})")
        shape = declared
    name = builder.fresh(tensor_name(ref)) if ref[1] else node.name
    data = create_node("Data", [], {"shape": [int(d) for d in shape], "dtype": dtype}, name,
                       builder.graph)
    return data.outputs[0]


def _translate(builder: GraphBuilder, model: _Model, name: str,
               values: dict[TensorRef, Value]) -> None:
    node = model.nodes[name]
    inputs = []
    for ref in model.reads[name]:
        value = values.get(ref)
        if value is None:
            source = model.nodes[ref[0]]
            raise UnsupportedOpError(f"TensorFlow {node.op} node {name!r} reads output "
                                     f"{ref[1]} of {source.op} node {ref[0]!r}, which GE "
                                     f"does not translate")
        inputs.append(value)
    if node.op in PASSTHROUGH_OPS:
        if not inputs:
            raise ModelFormatError(f"TensorFlow {node.op} node {name!r} has no data input")
        values[(name, 0)] = inputs[0]
        return
    with builder.graph.recording() as added:
        try:
            result = translators()[node.op](NodeContext(builder, node, inputs))
        except GEError:
            raise
        except (TypeError, ValueError, IndexError, KeyError) as error:
            # attributes of the wrong kind or size: the file's fault, not GE's
            raise ModelFormatError(f"TensorFlow {node.op} node {name!r} cannot be "
                                   f"translated: {type(error).__name__}: {error}") from error
    produced = [result] if isinstance(result, Value) else list(result or [])
    for index, value in enumerate(produced):
        if value is not None:
            values[(name, index)] = value
    first = produced[0] if produced else None
    if first is not None and any(n is first.producer for n in added) \
            and not builder.graph.has_node(name):
        builder.graph.rename_node(first.producer, name)


def _named_outputs(builder: GraphBuilder, refs: Sequence[TensorRef],
                   values: dict[TensorRef, Value], model: _Model) -> list[Value]:
    """The output values, each named by ``tensor_name`` (through an ``Identity`` when the
    value already has another name, or is another output too)."""
    outputs: list[Value] = []
    for ref in refs:
        value = values.get(ref)
        if value is None:
            raise GraphError(f"output {tensor_name(ref)!r}: {model.nodes[ref[0]].op} node "
                             f"{ref[0]!r} has no output {ref[1]} that GE translates")
        wanted = tensor_name(ref)
        if value.name != wanted or any(value is seen for seen in outputs):
            node_name = wanted if ref[1] == 0 and not builder.graph.has_node(wanted) \
                else builder.fresh(f"{ref[0]}/output_{ref[1]}")
            value = create_node("Identity", [value], {}, node_name, builder.graph).outputs[0]
            if value.name != wanted and not builder.graph.has_value(wanted):
                value.name = wanted
        outputs.append(value)
    return outputs


def import_graph(graph_def: GraphDef, inputs: Optional[Sequence[str]],
                 outputs: Optional[Sequence[str]],
                 input_shapes: Mapping[str, Sequence[int]], name: str) -> Graph:
    """Translate ``graph_def`` into a ``Graph`` (see ``parse_tensorflow``)."""
    model = _Model(graph_def)
    if outputs is None:
        output_refs = _default_outputs(model)
    else:
        output_refs = [split_tensor_name(text) for text in outputs]
        for ref in output_refs:
            model.node(ref[0], "output")
    if not output_refs:
        raise GraphError("the graph has no outputs: no node that reads a placeholder is "
                         "left unread (name the outputs)")
    shapes = {tensor_name(split_tensor_name(key)): shape for key, shape in input_shapes.items()}
    if inputs is None:
        input_refs = []
        stops: set[str] = set()
    else:
        input_refs = [split_tensor_name(text) for text in inputs]
        for ref in input_refs:
            model.node(ref[0], "input")
        stops = {ref[0] for ref in input_refs}
    needed = _cone(model, output_refs, stops)
    if inputs is None:
        input_refs = [(n, 0) for n in needed if model.nodes[n].op == "Placeholder"]
        stops = {ref[0] for ref in input_refs}
    unknown = sorted(set(shapes) - {tensor_name(ref) for ref in input_refs})
    if unknown:
        raise GraphError(f"input_shapes names {unknown}, which are not inputs of the graph "
                         f"(inputs: {[tensor_name(r) for r in input_refs]})")
    _check_supported(model, needed, stops)
    order = _order(model, output_refs, stops)
    graph = Graph(name)
    builder = GraphBuilder(graph, set(model.nodes))
    values: dict[TensorRef, Value] = {}
    for ref in input_refs:
        values[ref] = _input_value(builder, model.nodes[ref[0]], ref, shapes)
    for node_name in order:
        if node_name in stops:
            continue
        if model.nodes[node_name].op == "Placeholder":
            raise GraphError(f"the outputs need placeholder {node_name!r}, which is not among "
                             f"the inputs {[tensor_name(r) for r in input_refs]}")
        _translate(builder, model, node_name, values)
    graph.set_outputs(_named_outputs(builder, output_refs, values, model))
    return graph
