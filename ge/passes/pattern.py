"""The pattern language: what a rewrite rule looks for.

A pattern is a tree of pattern nodes rooted at the node that will be replaced.
Each pattern node names op types, may bind a name, may require attributes or a
predicate, and lists what its inputs must be: another pattern node, an
``Input`` (any value), a ``Constant`` (a value a ``Const`` node produces), or
``None`` (anything). Inner nodes must feed nothing outside the match (single
consumer, not a graph output). For ops with the commutative trait the first two
inputs are tried both ways.

    # the seed's chain form: each node consumes the one before it
    Pattern([Node("Conv2D"), Node("FusedBatchNorm"), Node("Relu")])
    # a DAG with constraints
    Pattern(Node("Add", inputs=[Node("MatMul", name="mm"), Constant("bias", rank=1)]))

``Pattern.match(node)`` returns a ``Match`` or a ``Refusal`` saying why not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from ge.ir import Node as IRNode
from ge.ir import Value
from ge.ops.registry import Trait, const_value, get_schema, has_op

__all__ = ["Node", "Input", "Constant", "Pattern", "Match", "Refusal", "PatternItem"]

Predicate = Callable[[IRNode], Union[bool, str, None]]


class Input:
    """Any value; bound under ``name`` if given."""

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Input({self.name!r})"


class Constant:
    """A value produced by a ``Const`` node, optionally of a given rank or satisfying ``where``."""

    def __init__(self, name: Optional[str] = None, *, rank: Optional[int] = None,
                 where: Optional[Callable[[np.ndarray], bool]] = None) -> None:
        self.name, self.rank, self.where = name, rank, where

    def __repr__(self) -> str:
        return f"Constant({self.name!r})"


class Node:
    """A pattern node: an op of one of ``op_type`` (a name, a tuple of names, or None for any)."""

    def __init__(self, op_type: Union[str, Sequence[str], None] = None, *,
                 inputs: Optional[Sequence[PatternItem]] = None, name: Optional[str] = None,
                 attrs: Optional[dict[str, Any]] = None, where: Optional[Predicate] = None,
                 output: int = 0) -> None:
        self.op_types: Optional[tuple[str, ...]] = (
            None if op_type is None else (op_type,) if isinstance(op_type, str) else tuple(op_type))
        self.inputs = None if inputs is None else list(inputs)
        self.name = name
        self.attrs = dict(attrs or {})
        self.where = where
        self.output = output

    @property
    def label(self) -> str:
        """The op types as text, for descriptions."""
        return "|".join(self.op_types) if self.op_types else "*"

    def __repr__(self) -> str:
        return f"Node({self.label!r})"


class _ChainLink:
    """In a chain, the previous node may feed any input of the next."""

    def __init__(self, node: Node) -> None:
        self.node = node


PatternItem = Union[Node, Input, Constant, _ChainLink, None]


@dataclass
class Match:
    """A successful match: the matched nodes (producers first) and the bound names."""

    root: IRNode
    nodes: list[IRNode] = field(default_factory=list)
    bindings: dict[str, Union[IRNode, Value]] = field(default_factory=dict)

    def node(self, name: str) -> IRNode:
        """The node bound to ``name``."""
        found = self.bindings[name]
        assert isinstance(found, IRNode), f"{name!r} is bound to a value"
        return found

    def value(self, name: str) -> Value:
        """The value bound to ``name``."""
        found = self.bindings[name]
        assert isinstance(found, Value), f"{name!r} is bound to a node"
        return found

    def constant(self, name: str) -> np.ndarray:
        """The data of the constant bound to ``name``."""
        data = const_value(self.value(name))
        assert data is not None
        return data

    def external_inputs(self) -> list[tuple[IRNode, int, Value]]:
        """(matched node, input index, value) for every input coming from outside the match."""
        inside = {id(n) for n in self.nodes}
        found = []
        for node in self.nodes:
            for index, value in enumerate(node.inputs):
                if value is not None and id(value.producer) not in inside:
                    found.append((node, index, value))
        return found

    def describe(self) -> str:
        """``Conv2D+FusedBatchNorm+Relu``."""
        return "+".join(n.op_type for n in self.nodes)


@dataclass
class Refusal:
    """Why a pattern did not match (or a rule refused a match).

    ``structural`` refusals (the ops are simply not the pattern's) are not worth
    reporting; the others (another consumer, an attribute, a condition) are.
    """

    reason: str
    structural: bool = False

    def __bool__(self) -> bool:
        return False


_STRUCTURAL = ", not from the pattern's "


class _State:
    def __init__(self) -> None:
        self.nodes: list[IRNode] = []
        self.bindings: dict[str, Union[IRNode, Value]] = {}

    def copy(self) -> _State:
        twin = _State()
        twin.nodes, twin.bindings = list(self.nodes), dict(self.bindings)
        return twin


class Pattern:
    """A tree of pattern nodes (or the seed's chain: a list, each consuming the one before)."""

    def __init__(self, spec: Union[Node, Sequence[Node]]) -> None:
        if isinstance(spec, Node):
            self.root = spec
        else:
            chain = list(spec)
            if not chain:
                raise ValueError("a pattern needs at least one node")
            self.root = _chain_to_tree(chain)

    @property
    def root_types(self) -> Optional[tuple[str, ...]]:
        """The op types a match can start from (None: any)."""
        return self.root.op_types

    def match(self, node: IRNode) -> Union[Match, Refusal]:
        """Match the pattern with ``node`` as its root."""
        state = _State()
        reason = _match_node(self.root, node, state)
        if reason is not None:
            return Refusal(reason, structural=_STRUCTURAL in reason)
        inner = [n for n in state.nodes if n is not node]
        for candidate in inner:
            leak = _leaks(candidate, state.nodes)
            if leak:
                return Refusal(leak)
        ordered = sorted(state.nodes, key=lambda n: _depth(n, state.nodes))
        return Match(node, ordered, state.bindings)

    def __repr__(self) -> str:
        return f"Pattern({self.root!r})"


def _chain_to_tree(chain: list[Node]) -> Node:
    """[a, b, c] -> c with b feeding one of its inputs, a feeding b."""
    previous: Optional[Node] = None
    for node in chain:
        if previous is not None:
            node = Node(node.op_types, name=node.name, attrs=node.attrs, where=node.where,
                        inputs=[_ChainLink(previous)])
        previous = node
    assert previous is not None
    return previous


def _depth(node: IRNode, members: list[IRNode]) -> int:
    inside = {id(m) for m in members}
    depth, frontier = 0, [node]
    while frontier:
        frontier = [v.producer for n in frontier for v in n.inputs
                    if v is not None and id(v.producer) in inside]
        depth += 1 if frontier else 0
    return depth


def _leaks(node: IRNode, members: list[IRNode]) -> Optional[str]:
    inside = {id(m) for m in members}
    for value in node.outputs:
        if value.is_graph_output():
            return f"{node.op_type} node {node.name!r} is a graph output"
        for usage in value.users:
            if id(usage.node) not in inside:
                return (f"{node.op_type} node {node.name!r} has another consumer "
                        f"({usage.node.op_type} node {usage.node.name!r})")
    return None


def _check_node(pattern: Node, node: IRNode) -> Optional[str]:
    if pattern.op_types is not None and node.op_type not in pattern.op_types:
        return f"{node.name!r} is {node.op_type}{_STRUCTURAL}{pattern.label}"
    for key, wanted in pattern.attrs.items():
        actual = node.attrs.get(key)
        ok = wanted(actual) if callable(wanted) else actual == wanted
        if not ok:
            return f"{node.op_type} node {node.name!r} has {key}={actual!r}"
    if pattern.where is not None:
        verdict = pattern.where(node)
        if verdict is False or isinstance(verdict, str):
            return verdict if isinstance(verdict, str) else \
                f"{node.op_type} node {node.name!r} fails the pattern's condition"
    return None


def _match_node(pattern: Node, node: IRNode, state: _State) -> Optional[str]:
    reason = _check_node(pattern, node)
    if reason is not None:
        return reason
    if any(n is node for n in state.nodes):
        return f"{node.name!r} would be matched twice"
    state.nodes.append(node)
    if pattern.name:
        state.bindings[pattern.name] = node
    if pattern.inputs is None:
        return None
    if len(pattern.inputs) == 1 and isinstance(pattern.inputs[0], _ChainLink):
        return _match_chain_link(pattern.inputs[0].node, node, state)
    return _match_inputs(pattern.inputs, node, state)


def _commutative(node: IRNode) -> bool:
    return has_op(node.op_type) and get_schema(node.op_type).has_trait(Trait.COMMUTATIVE)


def _match_inputs(items: list[PatternItem], node: IRNode, state: _State) -> Optional[str]:
    values = list(node.inputs)
    orders = [values]
    if _commutative(node) and len(values) >= 2:
        orders.append([values[1], values[0]] + values[2:])
    reason: Optional[str] = None
    fallback: Optional[_State] = None
    for order in orders:
        trial = state.copy()
        found = _match_all(items, order, node, trial)
        if found is not None:
            reason = _more_informative(reason, found)
            continue
        # Of two operand orders that both match, prefer one whose inner nodes feed nothing
        # outside what is matched so far (the single-consumer check runs on the whole match).
        added = trial.nodes[len(state.nodes):]
        if len(orders) == 1 or not any(_leaks(n, trial.nodes + [node]) for n in added):
            state.nodes, state.bindings = trial.nodes, trial.bindings
            return None
        fallback = fallback or trial
    if fallback is not None:
        state.nodes, state.bindings = fallback.nodes, fallback.bindings
        return None
    return reason


def _more_informative(kept: Optional[str], new: str) -> str:
    """Of two reasons for a refusal, the one that says more than 'wrong op type'."""
    if kept is None or (_STRUCTURAL in kept and _STRUCTURAL not in new):
        return new
    return kept


def _match_all(items: list[PatternItem], values: list[Optional[Value]], node: IRNode,
               state: _State) -> Optional[str]:
    if len(items) > len(values):
        return f"{node.op_type} node {node.name!r} has {len(values)} inputs, not {len(items)}"
    for item, value in zip(items, values):
        reason = _match_item(item, value, node, state)
        if reason is not None:
            return reason
    return None


def _match_item(item: Any, value: Optional[Value], node: IRNode, state: _State) -> Optional[str]:
    if item is None:
        return None
    if value is None:
        return f"{node.op_type} node {node.name!r} lacks an input the pattern needs"
    if isinstance(item, Input):
        if item.name:
            state.bindings[item.name] = value
        return None
    if isinstance(item, Constant):
        data = const_value(value)
        if data is None:
            return f"input {value.name!r} of {node.name!r} is not a constant"
        if item.rank is not None and data.ndim != item.rank:
            return f"constant {value.name!r} has rank {data.ndim}, not {item.rank}"
        if item.where is not None and not item.where(data):
            return f"constant {value.name!r} fails the pattern's condition"
        if item.name:
            state.bindings[item.name] = value
        return None
    assert isinstance(item, Node)
    if value.index != item.output:
        return f"{value.name!r} is output {value.index} of its node, not {item.output}"
    return _match_node(item, value.producer, state)


def _match_chain_link(previous: Node, node: IRNode, state: _State) -> Optional[str]:
    reason = f"no input of {node.op_type} node {node.name!r}{_STRUCTURAL}{previous.label}"
    for value in node.inputs:
        if value is None or value.index != previous.output:
            continue
        trial = state.copy()
        found = _match_node(previous, value.producer, trial)
        if found is None:
            state.nodes, state.bindings = trial.nodes, trial.bindings
            return None
        reason = found if _STRUCTURAL in reason else _more_informative(reason, found)
    return reason
