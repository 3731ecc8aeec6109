"""What an ONNX op translator sees, and the table of translators.

A translator turns one ONNX node into registry ops. It receives a
``NodeContext`` (the node's inputs as GE values, its attributes as Python
values, its opset version, and helpers to add ops and constants) and returns
one GE value per ONNX output (``None`` for an optional output it does not
produce). An ONNX op whose name, inputs and attributes match a registry op
needs no translator: it maps directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import onnx

from ge.errors import UnsupportedOpError
from ge.ir import Graph, Node, Tensor, Value
from ge.ops import create_node, get_schema, has_op
from ge.ops.registry import const_value

__all__ = ["NodeContext", "Scope", "Translator", "translator", "find_translator",
           "direct_translation", "IGNORED_ATTRIBUTES"]

Translator = Callable[["NodeContext"], Sequence[Optional[Value]]]

_TRANSLATORS: dict[tuple[str, str], Translator] = {}

# ONNX attributes that carry no meaning for inference and are dropped by direct mapping.
IGNORED_ATTRIBUTES: dict[str, frozenset[str]] = {
    "LayerNormalization": frozenset({"stash_type"}),
}

# Registry ops that exist under an ONNX name but must not be fed ONNX nodes directly.
_NOT_DIRECT = frozenset({"Data", "Const", "Cast", "MaxPool", "Softmax", "LogSoftmax"})


def translator(*op_types: str, domain: str = "") -> Callable[[Translator], Translator]:
    """Decorator: register a translator for ONNX ``op_types`` of ``domain``."""

    def register(function: Translator) -> Translator:
        for op_type in op_types:
            key = (domain, op_type)
            if key in _TRANSLATORS:
                raise ValueError(f"ONNX op {domain or 'ai.onnx'}::{op_type} has two translators")
            _TRANSLATORS[key] = function
        return function

    return register


def _normalize_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def find_translator(domain: str, op_type: str) -> Optional[Translator]:
    """The translator for an ONNX op, a direct mapping, or None when GE cannot take it."""
    domain = _normalize_domain(domain)
    found = _TRANSLATORS.get((domain, op_type))
    if found is not None:
        return found
    if domain == "" and has_op(op_type) and op_type not in _NOT_DIRECT:
        return direct_translation
    return None


class Scope:
    """One GE graph under construction: the main graph or a subgraph of If/Loop/Scan.

    It maps ONNX value names to GE values. A name not defined here is looked up
    in the enclosing scope and *captured*: it becomes a ``Data`` node of this
    graph, and the op holding the subgraph passes the outer value in explicitly.
    """

    def __init__(self, graph: Graph, parent: Optional[Scope] = None,
                 reserved: Optional[set[str]] = None) -> None:
        self.graph = graph
        self.parent = parent
        self.values: dict[str, Value] = {}
        self.captures: list[tuple[Value, Value]] = []  # (outer value, inner Data value)
        # value names in use: the model's own, and those given to values GE adds
        self.reserved: set[str] = reserved if reserved is not None else set()
        self._suffixes: dict[str, int] = {}  # base name -> the last suffix tried

    def define(self, name: str, value: Value) -> None:
        """Bind ONNX value ``name`` to ``value``."""
        self.values[name] = value

    def lookup(self, name: str, reader: str) -> Value:
        """The value called ``name``, capturing it from an enclosing scope if needed."""
        if name in self.values:
            return self.values[name]
        if self.parent is not None:
            outer = self.parent.lookup(name, reader)
            inner = create_node("Data", [], {"shape": list(outer.shape), "dtype": outer.dtype},
                                self.fresh_name(name), self.graph).outputs[0]
            inner.name = name
            self.captures.append((outer, inner))
            self.values[name] = inner
            return inner
        from ge.errors import ModelFormatError

        raise ModelFormatError(f"{reader} reads {name!r}, which no node, input or initializer "
                               f"defines before it")

    def fresh_name(self, base: str) -> str:
        """A node name no node of this graph has."""
        return self.graph.unique_name(base or "node")

    def fresh_value_name(self, base: str) -> str:
        """A value name that neither the model nor GE uses yet; it is then taken."""
        name, count = base, self._suffixes.get(base, 0)
        while name in self.reserved:
            count += 1
            name = f"{base}_{count}"
        self._suffixes[base] = count
        self.reserved.add(name)
        return name

    def add(self, op_type: str, inputs: Sequence[Optional[Value]],
            attrs: Optional[dict[str, Any]], name: str) -> Node:
        """Add a registry op with inferred output shapes."""
        return create_node(op_type, list(inputs), attrs or {}, self.fresh_name(name), self.graph)

    def constant(self, array: Any, name: str) -> Value:
        """Add a ``Const`` node holding ``array``."""
        tensor = array if isinstance(array, Tensor) else Tensor(np.asarray(array))
        return self.add("Const", [], {"value": tensor}, name).outputs[0]


SubgraphParser = Callable[["Scope", onnx.GraphProto, str], Graph]


class NodeContext:
    """One ONNX node as its translator sees it."""

    def __init__(self, scope: Scope, proto: onnx.NodeProto, opset: int,
                 inputs: list[Optional[Value]], attrs: dict[str, Any], name: str,
                 subgraph_parser: SubgraphParser) -> None:
        self.scope = scope
        self.proto = proto
        self.opset = opset
        self.inputs = inputs
        self.attrs = attrs
        self.name = name
        self._parse_subgraph = subgraph_parser
        self._count = 0

    @property
    def op_type(self) -> str:
        """The ONNX op type."""
        return self.proto.op_type

    @property
    def num_outputs(self) -> int:
        """How many outputs the ONNX node declares (optional ones included)."""
        return len(self.proto.output)

    def wants_output(self, index: int) -> bool:
        """True when the model uses ONNX output ``index``."""
        return index < len(self.proto.output) and bool(self.proto.output[index])

    def input(self, index: int) -> Optional[Value]:
        """Input ``index``, or None when absent."""
        return self.inputs[index] if index < len(self.inputs) else None

    def required(self, index: int) -> Value:
        """Input ``index``, which the op needs: ``UnsupportedOpError`` naming the node if the
        model leaves it out."""
        value = self.input(index)
        if value is None:
            raise self.unsupported(f"input {index} is required")
        return value

    def constant_input(self, index: int) -> Optional[np.ndarray]:
        """The data of input ``index`` when a constant produces it."""
        return const_value(self.input(index))

    def attr(self, key: str, default: Any = None) -> Any:
        """An attribute value, or ``default`` when the node does not set it."""
        return self.attrs.get(key, default)

    def op(self, op_type: str, inputs: Sequence[Optional[Value]],
           attrs: Optional[dict[str, Any]] = None) -> Node:
        """Add a registry op; the first op of a node takes the node's name."""
        name = self.name if self._count == 0 else f"{self.name}/{op_type}"
        self._count += 1
        return self.scope.add(op_type, inputs, attrs, name)

    def value(self, op_type: str, inputs: Sequence[Optional[Value]],
              attrs: Optional[dict[str, Any]] = None) -> Value:
        """Add a registry op and return its first output."""
        return self.op(op_type, inputs, attrs).outputs[0]

    def const(self, array: Any) -> Value:
        """Add a constant."""
        return self.scope.constant(array, f"{self.name}/const")

    def subgraph(self, key: str) -> tuple[Graph, list[Value]]:
        """Parse graph attribute ``key``; return it and the outer values it captures."""
        proto = self.attrs.get(key)
        if not isinstance(proto, onnx.GraphProto):
            raise self.unsupported(f"graph attribute {key!r} is missing")
        inner = Scope(Graph(proto.name or f"{self.name}_{key}"), self.scope,
                      self.scope.reserved)
        graph = self._parse_subgraph(inner, proto, f"{self.name}.{key}")
        return graph, [outer for outer, _ in inner.captures]

    def unsupported(self, message: str) -> UnsupportedOpError:
        """An ``UnsupportedOpError`` naming this node, to raise."""
        return UnsupportedOpError(f"ONNX {self.op_type} node {self.name!r}: {message}")


def direct_translation(ctx: NodeContext) -> Sequence[Optional[Value]]:
    """An ONNX op that is a registry op of the same name, inputs and attributes."""
    schema = get_schema(ctx.op_type)
    ignored = IGNORED_ATTRIBUTES.get(ctx.op_type, frozenset())
    attrs = {}
    for key, value in ctx.attrs.items():
        if key in schema.attrs:
            attrs[key] = value
        elif key not in ignored:
            raise ctx.unsupported(f"attribute {key!r} is not supported "
                                  f"(GE's {ctx.op_type} takes {sorted(schema.attrs) or 'none'})")
    inputs = list(ctx.inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    return ctx.op(ctx.op_type, inputs, attrs).outputs
