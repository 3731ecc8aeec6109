"""Clean-up passes: dead code, common subexpressions, no-ops, algebraic identities.

No-op removal and algebraic simplification are *forwarding* rewrites: a node is
replaced by a value already in the graph (``Identity(x) -> x``, ``x * 1 -> x``),
or rewired in place (``Transpose(Transpose(x))`` -> one ``Transpose``). Each
rule is a small function of one node, indexed by op type, applied producers
first to a fixed point. Graph output names stay stable: when a removed node
computed a graph output, the value that replaces it takes the output's name; when
that value cannot be renamed (a graph input, or already another output), the
node stays.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, Graph, Node, Tensor, TensorDesc, Value, is_static, num_elements
from ge.ops.linalg import einsum_labels, split_equation
from ge.ops.registry import (
    AttrType,
    Trait,
    const_value,
    create_node,
    get_schema,
    has_op,
    op_has_trait,
)
from ge.passes.base import Pass, PassResult
from ge.passes.folding import dim_symbol, reshape_spec
from ge.passes.rewrite import remove_unused

__all__ = ["DeadCodeEliminationPass", "CommonSubexpressionEliminationPass",
           "NoOpEliminationPass", "AlgebraicSimplificationPass", "same_shape", "forward"]


def _describe(counts: Counter[str]) -> str:
    """``Identity 2, Dropout 1``: most frequent first, ties by name."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{what} {n}" for what, n in ordered)


class DeadCodeEliminationPass(Pass):
    """Remove every node whose outputs no graph output depends on.

    before: ``y = Relu(x); unused = Exp(x)`` with output ``y`` -> after: ``y = Relu(x)``.
    Graph inputs (``Data`` nodes) are kept even when unused: they are the feed interface.
    """

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        live: set[int] = set()
        stack: list[Node] = [value.producer for value in graph.outputs]
        while stack:
            node = stack.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            stack.extend(node.predecessors())
        dead = [n for n in graph.topological_order() if id(n) not in live and n.op_type != "Data"]
        for node in reversed(dead):
            graph.remove_node(node, force=True)
        if dead:
            kinds = Counter(n.op_type for n in dead)
            result.count("removed", len(dead))
            result.note(f"removed {len(dead)} dead nodes ({_describe(kinds)})")
        return result


# -- common subexpressions ---------------------------------------------------------------

def _digest(array: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=16).hexdigest()


def _sample(array: np.ndarray) -> bytes:
    """A few of the array's elements: arrays that differ there need no full comparison."""
    flat = array.reshape(-1)
    return flat[::max(1, flat.size // 64)].tobytes()


def _attr_key(value: Any) -> Hashable:
    """A hashable stand-in for an attribute value; TypeError for a subgraph."""
    if isinstance(value, Graph):
        raise TypeError("subgraph attributes are not compared")
    if isinstance(value, Tensor):
        array = value.numpy()
        return ("tensor", array.dtype.str, array.shape, _digest(array))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, _digest(value))
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(item) for item in value)
    hash(value)
    return value


def _node_key(node: Node) -> Optional[Hashable]:
    """What two nodes must share to compute the same thing; None when the node may not
    merge (not pure, a source, unknown, or holding a subgraph)."""
    if not has_op(node.op_type):
        return None
    schema = get_schema(node.op_type)
    if not schema.has_trait(Trait.PURE) or schema.has_trait(Trait.SOURCE):
        return None
    if any(spec.type is AttrType.GRAPH for spec in schema.attrs.values()):
        return None
    inputs = [None if v is None else id(v) for v in node.inputs]
    if schema.has_trait(Trait.COMMUTATIVE) and len(inputs) >= 2 and None not in inputs[:2]:
        inputs[:2] = sorted(inputs[:2], key=lambda i: i or 0)
    try:
        attrs = tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items()))
    except TypeError:
        return None
    return (node.op_type, tuple(inputs), attrs)


def _merge(graph: Graph, duplicate: Node, keep: Node) -> bool:
    """Make users of ``duplicate`` read ``keep`` and remove it; False (nothing changed) when
    both compute graph outputs (two output names cannot share one value)."""
    pairs = list(zip(duplicate.outputs, keep.outputs))
    if any(d.is_graph_output() and k.is_graph_output() for d, k in pairs):
        return False
    renames = [(k, d.name) for d, k in pairs if d.is_graph_output()]
    for old, new in pairs:
        old.replace_all_uses_with(new)
    graph.remove_node(duplicate)
    for value, name in renames:
        value.name = name
    return True


class CommonSubexpressionEliminationPass(Pass):
    """Merge nodes that compute the same thing.

    before: ``a = Mul(x, y); b = Mul(y, x); z = Add(a, b)`` -> after: ``a = Mul(x, y);
    z = Add(a, a)``. Two nodes merge when they have the same op type, the same inputs
    (either order for commutative ops) and equal attributes; two ``Const`` nodes merge
    when their data are equal (dtype, shape and bytes). Producers are merged first, so
    whole duplicated chains (the same ``Shape -> Gather`` read twice) collapse.

    Refuses nodes that are not pure (``Dropout`` draws random numbers), sources
    (``Data``), nodes holding subgraphs (``If``/``Loop``/``Scan``: not compared), and a
    pair that both compute graph outputs (the outputs keep their own names).
    """

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        merged: Counter[str] = Counter()
        merged["Const"] = self._merge_constants(graph)
        seen: dict[Hashable, Node] = {}
        for node in graph.topological_order():
            key = _node_key(node)
            if key is None:
                continue
            if key in seen and _merge(graph, node, seen[key]):
                merged[node.op_type] += 1
            else:
                seen.setdefault(key, node)
        merged = +merged
        if merged:
            result.count("merged", sum(merged.values()))
            result.note(f"merged {sum(merged.values())} duplicate nodes ({_describe(merged)})")
        return result

    @staticmethod
    def _merge_constants(graph: Graph) -> int:
        groups: dict[tuple[str, tuple[int, ...], bytes], list[Node]] = defaultdict(list)
        for node in graph.topological_order():
            if node.op_type == "Const":
                array = node.attrs["value"].numpy()
                groups[(array.dtype.str, array.shape, _sample(array))].append(node)
        count = 0
        for members in groups.values():
            if len(members) < 2:
                continue
            kept: dict[str, Node] = {}
            for node in members:
                digest = _digest(node.attrs["value"].numpy())
                keep = kept.setdefault(digest, node)
                if keep is not node and np.array_equal(keep.attrs["value"].numpy(),
                                                       node.attrs["value"].numpy()) \
                        and _merge(graph, node, keep):
                    count += 1
        return count


# -- forwarding rewrites -----------------------------------------------------------------

def same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """True when two shapes are equal for every feed: same rank, each dimension the same
    known size or the same name."""
    return len(a) == len(b) and all(
        x == y and (isinstance(x, str) or x >= 0) for x, y in zip(a, b))


def forward(graph: Graph, node: Node, value: Value) -> bool:
    """Replace ``node`` (its output 0) by ``value`` and remove it; False, changing nothing,
    when that would rename a graph input or another graph output, or when another output
    of ``node`` is in use."""
    old = node.outputs[0]
    if value is old or any(v.num_users or v.is_graph_output() for v in node.outputs[1:]):
        return False
    rename = old.is_graph_output()
    if rename and (value.is_graph_output() or value.producer.op_type == "Data"):
        return False
    name = old.name
    old.replace_all_uses_with(value)
    graph.remove_node(node)
    if rename:
        value.name = name
    return True


@dataclass
class Outcome:
    """What a rule did: ``label`` for the report, the value replacing the node (None when
    the rule rewired the node in place), and whether that replaced a node by new ones
    (reported apart from plain removals)."""

    label: str
    value: Optional[Value] = None
    rewritten: bool = False


Rule = Callable[[Node], Optional[Outcome]]


class _ForwardingPass(Pass):
    """Applies forwarding rules (indexed by op type; key None: every node) to a fixed point."""

    rules: dict[Optional[str], list[Rule]] = {}
    #: the report line, formatted with ``count`` and ``kinds``
    summary = "removed {count} nodes ({kinds})"
    #: the loop guard: at most this many visits per node of the starting graph
    max_rounds = 8
    #: nodes the last run visited
    visits = 0

    def run(self, graph: Graph) -> PassResult:
        """Visit every node once, producers first; after a rule fires, visit again only
        the nodes it added or rewired and the producers it read (a work list)."""
        result = PassResult()
        applied: Counter[str] = Counter()
        rewritten: Counter[str] = Counter()
        order = graph.topological_order()
        work, queued = deque(order), {id(node) for node in order}
        budget = self.max_rounds * (len(order) + 1)
        self.visits = 0
        while work and self.visits < budget:
            node = work.popleft()
            queued.discard(id(node))
            if node.graph is not graph:
                continue
            self.visits += 1
            producers = node.predecessors()
            with graph.recording(rewired=True) as changed:
                outcome = self._apply(graph, node)
            if outcome is None:
                continue
            (rewritten if outcome.rewritten else applied)[outcome.label] += 1
            remove_unused(graph, producers)
            for neighbour in [*changed, node, *producers]:
                if neighbour.graph is graph and id(neighbour) not in queued:
                    queued.add(id(neighbour))
                    work.append(neighbour)
        if work:
            result.notes.append(f"stopped after {self.max_rounds} visits per node "
                                f"(rules keep firing)")
        if applied:
            result.count(self.name, sum(applied.values()))
            result.note(self.summary.format(count=sum(applied.values()),
                                            kinds=_describe(applied)))
        if rewritten:
            result.count("rewritten", sum(rewritten.values()))
            result.note(f"rewrote {sum(rewritten.values())} into cheaper forms "
                        f"({_describe(rewritten)})")
        return result

    def rules_for(self, op_type: str) -> list[Rule]:
        """The rules to try on a node of ``op_type``: its own, then those for every node."""
        return self.rules.get(op_type, []) + self.rules.get(None, [])

    def _apply(self, graph: Graph, node: Node) -> Optional[Outcome]:
        for rule in self.rules_for(node.op_type):
            outcome = rule(node)
            if outcome is None:
                continue
            if outcome.value is None or forward(graph, node, outcome.value):
                return outcome
        return None


def _input(node: Node, index: int = 0) -> Value:
    value = node.inputs[index]
    assert value is not None
    return value


def _same_as_input(node: Node, value: Value) -> bool:
    out = node.outputs[0]
    return out.dtype is value.dtype and same_shape(out.shape, value.shape)


def _broadcasts_into(small: Sequence[Any], big: Sequence[Any]) -> bool:
    """True when broadcasting a ``small``-shaped value with a ``big``-shaped one gives
    ``big`` for every feed (each aligned dimension is 1 or the same known size or name)."""
    if len(small) > len(big):
        return False
    aligned = zip(small, list(big)[len(big) - len(small):])
    return all(s == 1 or (s == b and (isinstance(s, str) or s >= 0)) for s, b in aligned)


def _constant(value: Optional[Value]) -> Optional[np.ndarray]:
    """The data of a constant; for ``ConstantOfShape`` (of any shape) its fill value."""
    data = const_value(value)
    if data is None and value is not None and value.producer.op_type == "ConstantOfShape":
        fill = value.producer.attrs.get("value")
        data = fill.numpy() if isinstance(fill, Tensor) else np.zeros(1, np.float32)
    return data


def _const_all(value: Optional[Value], wanted: Any) -> bool:
    data = _constant(value)
    return data is not None and data.size > 0 and bool(np.all(data == wanted))


def _is_view(node: Node) -> bool:
    return op_has_trait(node.op_type, Trait.VIEW)


# -- no-op rules ---------------------------------------------------------------------------

def _identity(node: Node) -> Optional[Outcome]:
    return Outcome("Identity", _input(node))


def _dropout(node: Node) -> Optional[Outcome]:
    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is not None and not _const_all(training, False):
        return None
    return Outcome("Dropout", _input(node))


def _view_round_trip(node: Node) -> Optional[Outcome]:
    """A view (or chain of views) that gives back the shape of its source is the source."""
    source = _input(node)
    while True:
        if _same_as_input(node, source):
            direct = source is node.inputs[0]
            return Outcome(f"{node.op_type} to the same shape" if direct else "view round trip",
                           source)
        producer = source.producer
        if not _is_view(producer) or producer.inputs[0] is None:
            return None
        source = producer.inputs[0]


def _view_chain(node: Node) -> Optional[Outcome]:
    """view(view(x)) -> Reshape(x, constant) when the inner view feeds only this one."""
    inner = _input(node).producer
    if not _is_view(inner) or inner.op_type == "Identity" or inner.inputs[0] is None:
        return None
    if len(inner.outputs[0].users) != 1 or inner.outputs[0].is_graph_output():
        return None
    source, out = inner.inputs[0], node.outputs[0]
    spec = reshape_spec(source, [dim_symbol(out, i) for i in range(len(out.shape))])
    if spec is None or node.graph is None:
        return None
    return Outcome("view chain into one Reshape", _reshape(node.graph, node, source, spec),
                   rewritten=True)


def _sole_reader(value: Value) -> bool:
    return len(value.users) == 1 and not value.is_graph_output()


def _scalar_operand(value: Optional[Value]) -> bool:
    """A value that broadcasts the same way against any rank: one element, rank <= 1."""
    return value is not None and len(value.shape) <= 1 and \
        all(dim == 1 for dim in value.shape)


def _pointwise_data_input(node: Node) -> Optional[int]:
    """The one input of an elementwise op that is not a one-element operand (its data),
    or None when the op is not such an op."""
    if len(node.outputs) != 1 or not op_has_trait(node.op_type, Trait.ELEMENTWISE):
        return None
    data = [i for i, v in enumerate(node.inputs) if v is not None and not _scalar_operand(v)]
    if len(data) != 1:
        return None
    value = node.inputs[data[0]]
    assert value is not None
    out = node.outputs[0]
    # the output has the data's shape: single-element operands of rank <= 1 never widen
    # a rank >= 1 input (sizes may be unknown: the check is on ranks)
    same = len(value.shape) == len(out.shape) >= 1 and value.dtype is out.dtype
    return data[0] if same else None


def _axes_of(node: Node, rank: int) -> Optional[list[int]]:
    value = node.inputs[1] if len(node.inputs) > 1 else None
    data = None if value is None else const_value(value)
    if data is None:
        return None
    return sorted(int(a) % rank for a in data.reshape(-1))


def _undone(inner: Node, outer: Node) -> bool:
    """``outer`` undoes ``inner`` whatever the sizes: ``Unsqueeze(Squeeze(x, A), A)``, A
    constant (both read against x's rank); a Conv1d's views of a dynamic length."""
    if (inner.op_type, outer.op_type) != ("Squeeze", "Unsqueeze"):
        return False
    source = _input(inner)
    rank = len(source.shape)
    if len(outer.outputs[0].shape) != rank or outer.outputs[0].dtype is not source.dtype:
        return False
    axes = _axes_of(inner, rank)
    return axes is not None and axes == _axes_of(outer, rank)


def _pointwise_inside_views(node: Node) -> Optional[Outcome]:
    """view(f(...g(view'(x)))) -> f(...g(x)) when the views round-trip x's shape and f..g
    are elementwise on one data input (their other operands single elements): a Conv1d
    layer's ``Squeeze -> Relu -> Unsqueeze`` becomes ``Relu`` on the 4-D data, so the
    convolutions around it fuse it and stay one channels-last region."""
    chain: list[tuple[Node, int]] = []
    value = _input(node)
    while True:
        producer = value.producer
        if not _sole_reader(value):
            return None
        if _is_view(producer) and producer.op_type != "Identity" and chain:
            break
        index = _pointwise_data_input(producer)
        if index is None or len(chain) >= 8:
            return None
        chain.append((producer, index))
        value = _input(producer, index)
    source = _input(producer)
    graph = node.graph
    if graph is None or not (_same_as_input(node, source) or _undone(producer, node)):
        return None
    current = source
    for op, index in reversed(chain):
        inputs = list(op.inputs)
        inputs[index] = current
        current = create_node(op.op_type, inputs, dict(op.attrs),
                              graph.unique_name(op.name), graph).outputs[0]
    return Outcome("elementwise ops moved inside a view round trip", current, rewritten=True)


def _reshape(graph: Graph, node: Node, source: Value, spec: list[int]) -> Value:
    """A new ``Reshape(source, spec)`` to stand for ``node``'s output (keeping its format)."""
    target = np.array(spec, np.int64)
    const = graph.add_node("Const", [], {"value": Tensor(target)},
                           [TensorDesc(target.shape, DataType.DT_INT64)],
                           graph.unique_name(f"{node.name}/shape"))
    view = create_node("Reshape", [source, const], {}, graph.unique_name(f"{node.name}/view"),
                       graph)
    view.outputs[0].format = node.outputs[0].format
    return view.outputs[0]


def _same_shape_op(label: str) -> Rule:
    def rule(node: Node) -> Optional[Outcome]:
        source = _input(node)
        return Outcome(label, source) if _same_as_input(node, source) else None
    return rule


def _expand_keeping(node: Node) -> Optional[Outcome]:
    """Expand to a constant target of the input's rank whose every size is 1 or the
    input's own known size: each axis keeps the input's size, whatever it is at run
    time (a dynamic batch too)."""
    source = _input(node)
    target = _constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if target is None or target.ndim != 1 or len(target) != len(source.shape) \
            or node.outputs[0].dtype is not source.dtype:
        return None
    keeps = all(int(t) == 1 or (isinstance(d, int) and d >= 0 and int(t) == d)
                for t, d in zip(target, source.shape))
    return Outcome("Expand that keeps every size", source) if keeps else None


def _tile_by_ones(node: Node) -> Optional[Outcome]:
    return Outcome("Tile by ones", _input(node)) if _const_all(node.inputs[1], 1) else None


def _slice_whole(node: Node) -> Optional[Outcome]:
    steps = node.inputs[4] if len(node.inputs) > 4 else None
    if steps is not None and not _const_all(steps, 1):
        return None
    source = _input(node)
    return Outcome("Slice of the whole tensor", source) if _same_as_input(node, source) else None


def _concat_one(node: Node) -> Optional[Outcome]:
    return Outcome("Concat of one input", _input(node)) if len(node.inputs) == 1 else None


def _pad_zeros(node: Node) -> Optional[Outcome]:
    return Outcome("Pad of zeros", _input(node)) if _const_all(node.inputs[1], 0) else None


def _cast(node: Node) -> Optional[Outcome]:
    source = _input(node)
    if node.outputs[0].dtype is source.dtype:
        return Outcome("Cast to the same type", source)
    inner = source.producer
    if inner.op_type != "Cast" or inner.inputs[0] is None:
        return None
    origin = inner.inputs[0]
    if _holds_exactly(source.dtype.np_dtype, origin.dtype.np_dtype) and \
            origin.dtype is node.outputs[0].dtype:
        return Outcome("Cast round trip", origin)
    return None


def _holds_exactly(wide: np.dtype, narrow: np.dtype) -> bool:
    """True when every ``narrow`` value survives a trip through ``wide`` unchanged (NumPy's
    "safe" casting, except integers into floats too short for them: int64 -> float64)."""
    if narrow == np.bool_:
        return True
    try:
        if not np.can_cast(narrow, wide, casting="safe"):
            return False
    except TypeError:
        return False
    if narrow.kind in "iu" and wide.kind == "f":
        return np.finfo(wide).nmant + 1 >= np.iinfo(narrow).bits - (narrow.kind == "i")
    return True


def _perm(node: Node, rank: int) -> list[int]:
    perm = node.attrs.get("perm")
    return list(range(rank - 1, -1, -1)) if perm is None else [p % rank for p in perm]


def _transpose(node: Node) -> Optional[Outcome]:
    """An identity perm is a no-op; two transposes compose into one, or into nothing."""
    source = _input(node)
    rank = len(source.shape)
    outer = _perm(node, rank)
    inner = source.producer
    if outer == list(range(rank)):
        return Outcome("Transpose by the identity", source)
    if inner.op_type != "Transpose" or inner.inputs[0] is None:
        return _unit_transpose(node, source, outer)
    first = _perm(inner, rank)
    composed = [first[p] for p in outer]
    if composed == list(range(rank)):
        return Outcome("Transpose pair", inner.inputs[0])
    node.replace_input_with(0, inner.inputs[0])
    node.attrs["perm"] = composed
    return Outcome("Transpose chain into one", rewritten=True)


def _unit_transpose(node: Node, source: Value, perm: list[int]) -> Optional[Outcome]:
    """A transpose that moves only size-1 dimensions keeps the memory order: a Reshape
    (a view, no copy), which can then merge with the views around it."""
    moved = [axis for axis in perm if source.shape[axis] != 1]
    out = node.outputs[0]
    spec = reshape_spec(source, [dim_symbol(out, i) for i in range(len(out.shape))])
    if moved != sorted(moved) or spec is None or node.graph is None:
        return None
    view = _reshape(node.graph, node, source, spec)
    return Outcome("Transpose of unit dimensions as a Reshape", view, rewritten=True)


class NoOpEliminationPass(_ForwardingPass):
    """Remove nodes that give back their input.

    before -> after: ``Identity(x)`` -> ``x``; ``Dropout(x)`` in inference form (no
    ``training_mode``, or a constant false; its mask unused) -> ``x``; a view
    (``Reshape``/``Squeeze``/``Unsqueeze``/``Flatten``), ``Expand`` or ``Slice`` (unit
    steps) whose output shape is its input's, or an ``Expand`` to a target of 1s and the
    input's own sizes (a dynamic size kept) -> ``x``; a chain of views back to its
    source's shape (``Unsqueeze(Squeeze(x))``) -> ``x``, and elementwise ops between such
    views moved inside (``Unsqueeze(Relu(Squeeze(x, A)), A)`` -> ``Relu(x)``, a Conv1d
    layer's, whatever the sizes); ``view(view(x))`` -> one ``Reshape(x, constant)``; a
    ``Transpose`` that moves only size-1 dimensions (the memory order stays) ->
    ``Reshape`` (a view, merging with the views around it);
    ``Cast`` to x's own type, and a widening round trip (``Cast(Cast(x: f32, f64), f32)``)
    -> ``x``; ``Transpose`` by the identity, and a pair
    that cancels -> ``x``; two transposes -> one with the composed perm; ``Concat`` of one
    input, ``Pad`` by zeros, ``Tile`` by ones -> ``x``.

    Refuses when shapes are only possibly equal (an unknown, unnamed dimension), when
    the Dropout may train or its mask is used, a narrowing cast round trip
    (``f32 -> f16 -> f32`` rounds), view chains whose inner view has other consumers or
    whose final shape cannot be written as a constant target, and, to keep graph output
    names, removing a node whose output is a graph output when its input is a graph input
    or another graph output.
    """

    summary = "removed {count} no-ops ({kinds})"
    rules: dict[Optional[str], list[Rule]] = {
        "Identity": [_identity],
        "Dropout": [_dropout],
        "Reshape": [_view_round_trip, _view_chain, _pointwise_inside_views],
        "Squeeze": [_view_round_trip, _view_chain, _pointwise_inside_views],
        "Unsqueeze": [_view_round_trip, _view_chain, _pointwise_inside_views],
        "Flatten": [_view_round_trip, _view_chain],
        "Expand": [_same_shape_op("Expand to the same shape"), _expand_keeping],
        "Slice": [_slice_whole],
        "Cast": [_cast],
        "Transpose": [_transpose],
        "Concat": [_concat_one],
        "Pad": [_pad_zeros],
        "Tile": [_tile_by_ones],
    }


# -- algebraic rules ---------------------------------------------------------------------

# The algebraic rules ask the registry which ops have each property (``Trait``); the
# ops declare them where they are registered, and tests/ops/test_traits.py checks each
# declaration against the op's reference kernel.

def _identity_element(node: Node) -> Optional[Outcome]:
    """x op e -> x for the op's identity element e (e op x too when the op commutes)."""
    schema = get_schema(node.op_type)
    element = schema.identity_element
    left, right = node.inputs[0], node.inputs[1]
    candidates = [(left, right, f"{node.op_type}(x, {element!r})")]
    if schema.has_trait(Trait.COMMUTATIVE):
        candidates.append((right, left, f"{node.op_type}({element!r}, x)"))
    for kept, other, label in candidates:
        if kept is not None and other is not None and _const_all(other, element) and \
                node.outputs[0].dtype is kept.dtype and _broadcasts_into(other.shape, kept.shape):
            return Outcome(label, kept)
    return None


def _times_zero(node: Node) -> Optional[Outcome]:
    """x * 0 -> zeros, for integers only (for floats NaN * 0 and inf * 0 are NaN)."""
    out, graph = node.outputs[0], node.graph
    if graph is None or not (out.dtype.is_integer or out.dtype.np_dtype == np.bool_):
        return None
    if not any(_const_all(v, 0) for v in node.inputs) or not is_static(out.shape) or \
            num_elements(out.shape) > 1 << 16:
        return None
    zeros = np.zeros([int(d) for d in out.shape], out.dtype.np_dtype)
    const = graph.add_node("Const", [], {"value": Tensor(zeros)}, [out.desc],
                           graph.unique_name(f"{node.name}/zeros"))
    return Outcome("x*0 (integers)", const.outputs[0])


def _involution(node: Node) -> Optional[Outcome]:
    """f(f(x)) -> x for an involution f."""
    inner = _input(node).producer
    if inner.op_type == node.op_type and inner.inputs[0] is not None:
        return Outcome(f"{node.op_type}({node.op_type}(x))", inner.inputs[0])
    return None


def _idempotent(node: Node) -> Optional[Outcome]:
    """f(f(x)) -> f(x) for an idempotent f."""
    source = _input(node)
    if source.producer.op_type == node.op_type:
        return Outcome(f"{node.op_type}({node.op_type}(x))", source)
    return None


def _of_non_negative(node: Node) -> Optional[Outcome]:
    """f(g(x)) -> g(x) when f leaves non-negative values alone and g gives only those."""
    source = _input(node)
    inner = source.producer.op_type
    if op_has_trait(inner, Trait.NON_NEGATIVE) and source is source.producer.outputs[0] and \
            source.dtype is node.outputs[0].dtype:
        return Outcome(f"{node.op_type}({inner}(x))", source)
    return None


def _self_idempotent(node: Node) -> Optional[Outcome]:
    left = node.inputs[0]
    if left is not None and left is node.inputs[1] and node.outputs[0].dtype is left.dtype:
        return Outcome(f"{node.op_type}(x, x)", left)
    return None


def _where_constant(node: Node) -> Optional[Outcome]:
    condition = node.inputs[0]
    for wanted, branch in ((True, node.inputs[1]), (False, node.inputs[2])):
        others = [v for v in node.inputs if v is not branch]
        if branch is not None and _const_all(condition, wanted) and \
                all(v is not None and _broadcasts_into(v.shape, branch.shape) for v in others):
            return Outcome("Where with a constant condition", branch)
    return None


def _einsum_terms(node: Node) -> Optional[tuple[list[str], list[str], list[str]]]:
    """The labels of each dimension of an Einsum's two operands and of its output (an
    ellipsis' dimensions labelled by their place from its end), or None."""
    left, right = node.inputs[0], node.inputs[1]
    if left is None or right is None:
        return None
    try:
        (a, b), out = split_equation(str(node.attrs["equation"]), 2)
        return (einsum_labels(a, len(left.shape)), einsum_labels(b, len(right.shape)),
                einsum_labels(out, len(node.outputs[0].shape)))
    except ValueError:
        return None


def _einsum_product(node: Node) -> Optional[Outcome]:
    """An Einsum that is a matrix product -> ``MatMul`` (over the right operand's last
    two dimensions swapped where the equation contracts its last): ``bij,jk->bik``,
    ``bhqk,bhkd->bhqd``, ``bhqd,bhkd->bhqk``, ``bid,nd->bin``. The product engines
    take a MatMul (a weight packed once, the fusions after it); an Einsum is a generic
    contraction."""
    graph, out = node.graph, node.outputs[0]
    if graph is None or len(node.inputs) != 2 or not out.dtype.is_float:
        return None
    found = _einsum_terms(node)
    if found is None:
        return None
    a, b, labels = found
    if not a or len(b) < 2 or len(set(a)) != len(a) or len(set(b)) != len(b) or \
            len(set(labels)) != len(labels):
        return None
    contracted = a[-1]
    if contracted in labels:
        return None
    if len(b) == 2:
        batch_ok = True
    else:  # batched: the same batch labels, in the same places, before the matrices
        batch_ok = len(a) == len(b) and a[:-2] == b[:-2]
    last_two = b[-2:]
    if not batch_ok or contracted not in last_two:
        return None
    column = last_two[1] if last_two[0] == contracted else last_two[0]
    if column in a or labels != a[:-1] + [column]:
        return None
    right = node.inputs[1]
    assert right is not None
    if last_two[1] == contracted:  # [.., n, k]: the product reads its transpose
        perm = list(range(len(b)))
        perm[-2], perm[-1] = perm[-1], perm[-2]
        right = create_node("Transpose", [right], {"perm": perm},
                            graph.unique_name(f"{node.name}/transposed"), graph).outputs[0]
    product = create_node("MatMul", [node.inputs[0], right], {},
                          graph.unique_name(f"{node.name}/matmul"), graph)
    if not same_shape(product.outputs[0].shape, out.shape):
        graph.remove_node(product)
        return None
    product.outputs[0].format = out.format
    return Outcome("Einsum as MatMul", product.outputs[0], rewritten=True)


#: each rule, and the trait of the ops it applies to
_TRAIT_RULES: tuple[tuple[Trait, Rule], ...] = (
    (Trait.IDENTITY_ELEMENT, _identity_element),
    (Trait.INVOLUTION, _involution),
    (Trait.IDEMPOTENT, _idempotent),
    (Trait.FIXES_NON_NEGATIVE, _of_non_negative),
    (Trait.SELF_IDEMPOTENT, _self_idempotent),
)


class AlgebraicSimplificationPass(_ForwardingPass):
    """Apply algebraic identities that remove a node.

    before -> after: ``f(x, e)`` -> ``x`` for an op's identity element e (``x*1``,
    ``x+0``, ``x-0``, ``x/1``, ``x**1``, ``x and true``, ``x or false``, ...), and
    ``f(e, x)`` -> ``x`` when f commutes; ``f(f(x))`` -> ``x`` for an involution (``Neg``,
    ``Not``, ``BitwiseNot``); ``f(f(x))`` -> ``f(x)`` for an idempotent f (``Relu``,
    ``Abs``, ``Floor``, ``Ceil``, ``Round``, ``Sign``); ``f(g(x))`` -> ``g(x)`` when f
    leaves non-negative values alone (``Relu``, ``Abs``) and g never gives negative ones
    (``Exp``, ``Sigmoid``, ``Softmax``, ...); ``f(x, x)`` -> ``x`` (``Max``, ``Min``,
    ``And``, ``Or``); ``Where(constant true, a, b)`` -> ``a``; integer ``x*0`` -> a zeros
    constant. Which ops have which property is asked of the registry (``Trait``), where
    each op declares it. And one rewrite into a cheaper form: an ``Einsum`` that is a
    (batched) matrix product -> ``MatMul``, over a ``Transpose`` of the right operand's
    last two dimensions where the equation contracts its last (``bhqd,bhkd->bhqk``).

    Broadcast-aware: ``x * ones`` is ``x`` only when the result has x's shape (and
    dtype), so ``x[3] * ones[2,3]`` stays. ``x + 0`` turns ``-0.0`` into ``+0.0``; that
    sign is ignored. Refuses float ``x*0`` (NaN and inf times 0 are NaN, not 0) and
    anything that would rename a graph input or another graph output.
    """

    summary = "simplified {count} expressions ({kinds})"
    rules: dict[Optional[str], list[Rule]] = {"Mul": [_times_zero], "Where": [_where_constant],
                                              "Einsum": [_einsum_product]}

    def rules_for(self, op_type: str) -> list[Rule]:
        """The rules of the op's traits (asked of the registry), then those by op type."""
        traits = get_schema(op_type).traits if has_op(op_type) else frozenset()
        return [rule for trait, rule in _TRAIT_RULES if trait in traits] + \
            super().rules_for(op_type)
