"""Translators for ONNX control flow: If, Loop and Scan.

Each becomes GE's op of the same name holding its subgraphs as GE graphs; the
outer values a subgraph reads become extra (captured) inputs of the op.

ONNX subgraph inputs often carry no type or shape; before a subgraph is parsed
its formal inputs are given the descriptors of the values the op passes in
(the iteration number, the condition, carried values, scan elements). A
carried value whose shape changes from one iteration to the next gets ``-1``
in the dimensions that change: the body is parsed again with the relaxed
descriptors until they are stable. Small outer constants a subgraph reads
are copied into it rather than captured, so that shape inference inside the
subgraph sees their values.

An ``If`` whose condition is known when the model is read (a constant, or
computed from constants and static shapes) is replaced by the branch it
takes; the other branch is never parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import onnx
from onnx import numpy_helper

from ge.errors import GEError
from ge.frontends.onnx.branches import RankChangingIf
from ge.frontends.onnx.context import NodeContext, Scope, translator
from ge.frontends.onnx.dtypes import to_onnx_dtype
from ge.ir import DataType, Graph, Node, Tensor, TensorDesc, Value
from ge.ops import create_node, get_schema
from ge.ops.control_flow import merge_descs, scan_element_shape
from ge.ops.registry import Trait, const_value, run_kernel

__all__ = ["prepared_subgraph", "fold_constant"]

Outputs = Sequence[Optional[Value]]

# Parsing a Loop or Scan body again with relaxed carried shapes stops after this many tries.
_MAX_REPARSES = 4
# Constant evaluation of an If condition gives up beyond this many nodes or elements.
_FOLD_NODE_BUDGET = 256
_FOLD_ELEMENT_BUDGET = 1 << 20
# Outer constants up to this many elements are copied into the subgraphs that read them.
_COPIED_CONSTANT_ELEMENTS = 4096
# Ops whose result depends on the shape of their input only, never on its data.
_SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})


# -- subgraph protos --------------------------------------------------------------------

def _type_proto(desc: TensorDesc) -> onnx.TypeProto:
    dims: list[Any] = [None if d == -1 else d for d in desc.shape]
    return onnx.helper.make_tensor_type_proto(to_onnx_dtype(desc.dtype), dims)


def _defined_names(proto: onnx.GraphProto) -> set[str]:
    names = {i.name for i in proto.input} | {t.name for t in proto.initializer}
    for node in proto.node:
        names.update(node.output)
    return names


def _free_names(proto: onnx.GraphProto) -> set[str]:
    """Names ``proto`` (or a graph nested in it) reads but does not define."""
    used: set[str] = set()
    defined: set[str] = set()

    def walk(graph: onnx.GraphProto) -> None:
        defined.update(i.name for i in graph.input)
        defined.update(t.name for t in graph.initializer)
        used.update(o.name for o in graph.output)
        for node in graph.node:
            used.update(name for name in node.input if name)
            defined.update(node.output)
            for attribute in node.attribute:
                for sub in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH
                            else attribute.graphs):
                    walk(sub)

    walk(proto)
    return used - defined


def _outer_constants(scope: Optional[Scope], names: set[str]) -> dict[str, np.ndarray]:
    """The small constants among the outer values called ``names``."""
    found: dict[str, np.ndarray] = {}
    for name in sorted(names):
        level = scope
        while level is not None and name not in level.values:
            level = level.parent
        array = None if level is None else const_value(level.values[name])
        if array is not None and array.size <= _COPIED_CONSTANT_ELEMENTS:
            found[name] = array
    return found


def prepared_subgraph(proto: onnx.GraphProto, formal: Sequence[TensorDesc],
                      fresh_name: Callable[[str], str],
                      constants: Optional[dict[str, np.ndarray]] = None) -> onnx.GraphProto:
    """A copy of ``proto`` ready for GE's parser.

    Its formal inputs take the descriptors ``formal`` (ONNX bodies often leave
    them untyped); the outer ``constants`` it reads become its own initializers
    (so shape inference inside it sees their values); and every output that
    names an outer-scope value directly is produced by an ``Identity`` inside
    the subgraph, whose output is named by ``fresh_name``.
    """
    copy = onnx.GraphProto()
    copy.CopyFrom(proto)
    for info, desc in zip(copy.input, formal):
        info.type.CopyFrom(_type_proto(desc))
    for name, array in (constants or {}).items():
        try:
            copy.initializer.append(numpy_helper.from_array(array, name))
        except (TypeError, ValueError):  # an element type ONNX cannot write: keep the capture
            continue
    defined = _defined_names(copy)
    for index, info in enumerate(copy.output):
        if info.name in defined:
            continue
        inner = fresh_name(f"{info.name}_{index}")
        copy.node.append(onnx.helper.make_node("Identity", [info.name], [inner]))
        info.name = inner
    return copy


def _parse(ctx: NodeContext, key: str, formal: Sequence[TensorDesc]) -> tuple[Graph, list[Value]]:
    """Parse graph attribute ``key`` with formal inputs ``formal``."""
    proto = ctx.attrs.get(key)
    if not isinstance(proto, onnx.GraphProto):
        raise ctx.unsupported(f"graph attribute {key!r} is missing")
    if len(proto.input) != len(formal):
        raise ctx.unsupported(f"{key} declares {len(proto.input)} inputs; the node passes "
                              f"{len(formal)}")
    constants = _outer_constants(ctx.scope, _free_names(proto))
    ctx.attrs[key] = prepared_subgraph(proto, formal, ctx.scope.fresh_value_name, constants)
    try:
        return ctx.subgraph(key)
    finally:
        ctx.attrs[key] = proto


def _parse_carrying(ctx: NodeContext, key: str, formal: list[TensorDesc], first_in: int,
                    first_out: int, count: int) -> tuple[Graph, list[Value]]:
    """Parse a body whose ``count`` carried values enter at ``first_in``, leave at ``first_out``.

    The carried descriptors are relaxed (changing dimensions become -1) until
    the body gives back what it takes.
    """
    for _ in range(_MAX_REPARSES):
        graph, captured = _parse(ctx, key, formal)
        outputs = graph.outputs
        stable = True
        for index in range(count):
            entering = formal[first_in + index]
            if first_out + index >= len(outputs):
                return graph, captured  # the op's inference reports the missing outputs
            leaving = outputs[first_out + index].desc
            merged = merge_descs(entering, leaving)
            if merged is None or entering.dtype is not leaving.dtype:
                return graph, captured  # the op's inference reports the mismatch
            if merged.shape != entering.shape:
                formal[first_in + index] = merged
                stable = False
        if stable:
            return graph, captured
    return graph, captured


# -- constant conditions ----------------------------------------------------------------

class _Folder:
    """Evaluates a value from constants and static shapes, if it can, within a budget."""

    def __init__(self) -> None:
        self.known: dict[int, Optional[np.ndarray]] = {}
        self.budget = _FOLD_NODE_BUDGET

    def value(self, value: Value) -> Optional[np.ndarray]:
        key = id(value)
        if key not in self.known:
            self.known[key] = self._compute(value)
        return self.known[key]

    def _compute(self, value: Value) -> Optional[np.ndarray]:
        constant = const_value(value)
        if constant is not None:
            return constant
        self.budget -= 1
        node = value.producer
        if self.budget < 0 or not self._foldable(node):
            return None
        args = [None if v is None else self._argument(node, v) for v in node.inputs]
        if any(a is None and v is not None for a, v in zip(args, node.inputs)):
            return None
        try:
            results = run_kernel(get_schema(node.op_type), node.name, args, node.attrs)
        except GEError:  # not folded here; the run names the node when it fails there
            return None
        array = results[value.index]
        return array if array.size <= _FOLD_ELEMENT_BUDGET else None

    def _argument(self, node: Node, value: Value) -> Optional[np.ndarray]:
        dims = [d for d in value.shape if isinstance(d, int) and d >= 0]
        if node.op_type in _SHAPE_ONLY_OPS and len(dims) == len(value.shape):
            return np.broadcast_to(np.zeros((), value.dtype.np_dtype), tuple(dims))
        return self.value(value)

    @staticmethod
    def _foldable(node: Node) -> bool:
        schema = get_schema(node.op_type)
        if schema.has_trait(Trait.SOURCE) or not schema.has_trait(Trait.PURE):
            return False
        return not any(isinstance(v, Graph) for v in node.attrs.values())


def fold_constant(value: Value) -> Optional[np.ndarray]:
    """The data of ``value`` if constants and static shapes determine it, else None."""
    return _Folder().value(value)


# -- If ---------------------------------------------------------------------------------

def _inline(ctx: NodeContext, graph: Graph, captured: list[Value]) -> list[Value]:
    """Copy the nodes of a branch into the node's graph; return its outputs there.

    A copied value keeps its ONNX name unless the graph already has a value of
    that name (a constant the branch had copied from outside); it is then renamed.
    """
    target = ctx.scope.graph
    taken = {value.name for node in target.nodes for value in node.outputs}
    mapping = {id(inner): outer for inner, outer in zip(graph.inputs, captured)}
    for node in graph.topological_order():
        if node.op_type == "Data":
            continue
        inputs = [None if v is None else mapping[id(v)] for v in node.inputs]
        copy = Node(node.op_type, inputs, node.attrs, [v.desc for v in node.outputs],
                    ctx.scope.fresh_name(node.name))
        target.add_op(copy)
        for old, new in zip(node.outputs, copy.outputs):
            if old.has_explicit_name and old.name not in taken:
                new.name = old.name
                taken.add(old.name)
            mapping[id(old)] = new
    return [mapping[id(v)] for v in graph.outputs]


def _align_captures(graph: Graph, own: list[Value], union: list[Value]) -> None:
    """Give a branch one ``Data`` node per value of ``union``, in that order."""
    old_inputs = dict(zip(map(id, own), graph.inputs))
    for outer in union:
        fresh = create_node("Data", [], {"shape": list(outer.shape), "dtype": outer.dtype},
                            graph.unique_name(f"{outer.name}__captured"), graph).outputs[0]
        previous = old_inputs.get(id(outer))
        if previous is None:
            continue
        previous.replace_all_uses_with(fresh)
        name = previous.producer.name
        graph.remove_node(previous.producer)
        graph.rename_node(fresh.producer, name)
        fresh.name = previous.name


def _one_element(value: Value) -> bool:
    return all(d == 1 for d in value.shape)


def _promote_scalar_outputs(then_graph: Graph, else_graph: Graph) -> None:
    """Where one branch gives a one-element output of lower rank, reshape it to the other's.

    ONNX lets branches differ in rank; GE's values have one rank. A scalar in
    one branch and a ``[1]`` in the other is common (exporters mix them) and is
    resolved by giving both the higher rank; any other rank difference is left
    to the op's inference, which refuses it.
    """
    then_outputs, else_outputs = then_graph.outputs, else_graph.outputs
    for index, (then_value, else_value) in enumerate(zip(then_outputs, else_outputs)):
        if then_value.rank == else_value.rank or not (_one_element(then_value)
                                                      and _one_element(else_value)):
            continue
        low_graph, low, high = ((then_graph, then_value, else_value)
                                if then_value.rank < else_value.rank
                                else (else_graph, else_value, then_value))
        shape = create_node("Const", [], {"value": Tensor(np.ones(high.rank, np.int64))},
                            low_graph.unique_name("promoted_shape"), low_graph).outputs[0]
        promoted = create_node("Reshape", [low, shape], {},
                               low_graph.unique_name("promoted_output"), low_graph).outputs[0]
        outputs = low_graph.outputs
        outputs[index] = promoted
        low_graph.set_outputs(outputs)


@translator("If")
def if_(ctx: NodeContext) -> Outputs:
    """``If`` becomes GE's ``If``, or the taken branch when the condition is known."""
    cond = ctx.input(0)
    if cond is None:
        raise ctx.unsupported("the condition input is missing")
    known = fold_constant(cond)
    if known is not None and known.size == 1:
        key = "then_branch" if bool(known.reshape(-1)[0]) else "else_branch"
        graph, captured = _parse(ctx, key, [])
        return _inline(ctx, graph, captured)
    then_parsed, then_error = _parse_or_defer(ctx, "then_branch")
    else_parsed, else_error = _parse_or_defer(ctx, "else_branch")
    if then_parsed is None and else_parsed is None:
        raise ctx.unsupported(f"neither branch imports: {then_error}; {else_error}")
    # a branch that did not import holds a copy of the other, never run (see if_kernel)
    then_graph, then_captured = then_parsed or _placeholder(else_parsed)
    else_graph, else_captured = else_parsed or _placeholder(then_parsed)
    union = list(then_captured)
    union += [v for v in else_captured if not any(v is seen for seen in union)]
    _align_captures(then_graph, then_captured, union)
    _align_captures(else_graph, else_captured, union)
    _promote_scalar_outputs(then_graph, else_graph)
    for index, (then_value, else_value) in enumerate(zip(then_graph.outputs,
                                                         else_graph.outputs)):
        if then_value.rank != else_value.rank:
            raise RankChangingIf(
                f"ONNX If node {ctx.name!r}: output {index} has rank {then_value.rank} in "
                f"then_branch and {else_value.rank} in else_branch; a GE value has one rank, "
                f"so the rest of the graph is moved into the branches (see branches.py), "
                f"which needs the graph's outputs to agree in rank", ctx.proto.name)
    if cond.dtype is not DataType.DT_BOOL:
        cond = ctx.value("Cast", [cond], {"dtype": DataType.DT_BOOL})
    attrs: dict[str, Any] = {"then_branch": then_graph, "else_branch": else_graph}
    attrs.update({k: v for k, v in (("then_error", then_error), ("else_error", else_error))
                  if v})
    node = ctx.op("If", [cond, *union], attrs)
    return node.outputs


def _parse_or_defer(ctx: NodeContext, key: str
                    ) -> tuple[Optional[tuple[Graph, list[Value]]], str]:
    """Branch ``key`` parsed, and ""; or, where it does not import (a shape or type it
    cannot have, an op GE lacks), None and why: the error then waits for a run that
    takes the branch, as in onnxruntime, which checks a branch only when it runs. A
    model exported from a ``squeeze`` of a dimension the exporter could not see holds
    such a branch (it would feed a rank-4 tensor to an LSTM, say)."""
    try:
        return _parse(ctx, key, []), ""
    except RankChangingIf:
        raise  # the parser rewrites the model and comes back
    except GEError as error:
        return None, f"ONNX If node {ctx.name!r}, {key}: {type(error).__name__}: {error}"


def _placeholder(parsed: Optional[tuple[Graph, list[Value]]]) -> tuple[Graph, list[Value]]:
    assert parsed is not None
    graph, captured = parsed
    return graph.clone(), list(captured)


# -- Loop -------------------------------------------------------------------------------

@translator("Loop")
def loop(ctx: NodeContext) -> Outputs:
    """``Loop(M, cond, *carried)`` becomes GE's ``Loop`` with the captured values appended."""
    carried = list(ctx.inputs[2:])
    if any(v is None for v in carried):
        raise ctx.unsupported("a loop-carried input is missing")
    formal = [TensorDesc((), DataType.DT_INT64), TensorDesc((), DataType.DT_BOOL)]
    formal += [v.desc for v in carried if v is not None]
    graph, captured = _parse_carrying(ctx, "body", formal, 2, 1, len(carried))
    node = ctx.op("Loop", [ctx.input(0), ctx.input(1), *carried, *captured],
                  {"body": graph, "num_captured": len(captured)})
    return node.outputs


# -- Scan -------------------------------------------------------------------------------

_SCAN_ATTRIBUTES = ("scan_input_axes", "scan_input_directions", "scan_output_axes",
                    "scan_output_directions")


@translator("Scan")
def scan(ctx: NodeContext) -> Outputs:
    """``Scan`` (opset 9 on) becomes GE's ``Scan``; opset 8's batched form is unrolled."""
    if ctx.opset < 9:
        return _scan_batched(ctx)
    scan_inputs = int(ctx.attr("num_scan_inputs"))
    values = list(ctx.inputs)
    states = len(values) - scan_inputs
    if states < 0 or any(v is None for v in values):
        raise ctx.unsupported(f"{len(values)} inputs cannot hold {scan_inputs} scan inputs")
    axes = ctx.attr("scan_input_axes") or [0] * scan_inputs
    formal = [v.desc for v in values[:states] if v is not None]
    for value, axis in zip(values[states:], axes):
        assert value is not None
        formal.append(TensorDesc(scan_element_shape(value.shape, axis), value.dtype))
    graph, captured = _parse_carrying(ctx, "body", formal, 0, 0, states)
    attrs: dict[str, Any] = {key: ctx.attr(key) for key in _SCAN_ATTRIBUTES
                             if ctx.attr(key) is not None}
    attrs.update(body=graph, num_scan_inputs=scan_inputs, num_captured=len(captured))
    return ctx.op("Scan", [*values, *captured], attrs).outputs


def _scan_batched(ctx: NodeContext) -> Outputs:
    """Opset 8: inputs and states carry a batch axis; one Scan per batch entry."""
    if ctx.input(0) is not None:
        raise ctx.unsupported("sequence_lens (opset 8) is not supported; omit it or use "
                              "opset 9 or newer")
    values = [v for v in ctx.inputs[1:] if v is not None]
    scan_inputs = int(ctx.attr("num_scan_inputs"))
    states = len(values) - scan_inputs
    batch = values[0].shape[0] if values and values[0].rank > 0 else -1
    if states < 0 or not isinstance(batch, int) or batch < 1:
        raise ctx.unsupported("opset 8 Scan needs a static batch dimension")
    formal = [TensorDesc(v.shape[1:], v.dtype) for v in values[:states]]
    formal += [TensorDesc(v.shape[2:], v.dtype) for v in values[states:]]
    graph, captured = _parse_carrying(ctx, "body", formal, 0, 0, states)
    directions = ctx.attr("directions")
    per_batch: list[list[Value]] = []
    for entry in range(batch):
        index = ctx.const(np.array(entry, np.int64))
        sliced = [ctx.value("Gather", [v, index], {"axis": 0}) for v in values]
        attrs: dict[str, Any] = {"body": graph if entry == 0 else graph.clone(),
                                 "num_scan_inputs": scan_inputs, "num_captured": len(captured)}
        if directions:
            attrs["scan_input_directions"] = list(directions)
        per_batch.append(list(ctx.op("Scan", [*sliced, *captured], attrs).outputs))
    axis = ctx.const(np.array([0], np.int64))
    outputs = []
    for position in range(len(per_batch[0])):
        parts = [ctx.value("Unsqueeze", [outs[position], axis]) for outs in per_batch]
        outputs.append(parts[0] if batch == 1 else ctx.value("Concat", parts, {"axis": 0}))
    return outputs
