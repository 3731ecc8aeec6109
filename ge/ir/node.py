"""Values (edges) and nodes (op instances) of the graph IR, with their use-def links.

A ``Value`` knows the node that produces it and every ``(node, input index)`` that
uses it. A node's inputs change only through ``Node.replace_input_with`` and
``Value.replace_all_uses_with``, which keep both sides right (and tell the node's
graph, which keeps indexes by name and records changes for its passes).

A node is also the seed's *operator handle*: ``node.shape``, ``node.dtype`` and
``node.name`` describe its first output, and a node given as an input means its
first output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from ge.errors import GraphError
from ge.ir.dtypes import DataType
from ge.ir.tensor import Format, Shape, TensorDesc, format_shape

if TYPE_CHECKING:
    from ge.ir.graph import Graph

__all__ = ["Usage", "Value", "Node", "ValueLike", "as_value", "describe"]


class Usage(NamedTuple):
    """One use of a value: ``node.inputs[input_index]`` is the value."""

    node: Node
    input_index: int


class Value:
    """A tensor flowing along an edge: produced by one node, used by any number."""

    __slots__ = ("_name", "shape", "dtype", "format", "_producer", "_index", "_users")

    def __init__(self, producer: Node, index: int, desc: TensorDesc,
                 name: Optional[str] = None) -> None:
        self._name = name
        self.shape: Shape = desc.shape
        self.dtype: DataType = desc.dtype
        self.format: Format = desc.format
        self._producer = producer
        self._index = index
        self._users: dict[tuple[int, int], Usage] = {}  # (id(node), input index) -> use

    @property
    def name(self) -> str:
        """The value's name: its producer's name for output 0, ``node:i`` otherwise."""
        if self._name is not None:
            return self._name
        base = self._producer.name or f"<unnamed {self._producer.op_type}>"
        return base if self._index == 0 else f"{base}:{self._index}"

    @name.setter
    def name(self, name: Optional[str]) -> None:
        graph = self._producer.graph
        if graph is None:
            self._name = name
            return
        graph._unindex_value(self)
        self._name = name
        graph._index_value(self)

    @property
    def has_explicit_name(self) -> bool:
        """True when the name was set rather than derived from the producer."""
        return self._name is not None

    @property
    def producer(self) -> Node:
        """The node that computes this value."""
        return self._producer

    @property
    def index(self) -> int:
        """Which output of its producer this value is."""
        return self._index

    @property
    def users(self) -> tuple[Usage, ...]:
        """Every ``(node, input index)`` that reads this value."""
        return tuple(self._users.values())

    @property
    def num_users(self) -> int:
        """How many ``(node, input index)`` read this value (without listing them)."""
        return len(self._users)

    @property
    def desc(self) -> TensorDesc:
        """The value's shape, dtype and format as one descriptor."""
        return TensorDesc(self.shape, self.dtype, self.format)

    @desc.setter
    def desc(self, desc: TensorDesc) -> None:
        self.shape, self.dtype, self.format = desc.shape, desc.dtype, desc.format

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def is_graph_output(self) -> bool:
        """True when the value is one of its graph's outputs."""
        graph = self._producer.graph
        return graph is not None and id(self) in graph._output_ids

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every user of this value, and the graph's outputs, read ``other`` instead."""
        if other is self:
            return
        for usage in list(self._users.values()):
            usage.node.replace_input_with(usage.input_index, other)
        graph = self._producer.graph
        if graph is not None:
            graph.replace_output(self, other)

    def __repr__(self) -> str:
        return f"Value({self.name}: {self.desc})"


ValueLike = Union[Value, "Node"]


def as_value(item: Any) -> Value:
    """A value from a handle: a ``Value`` itself, or a node's first output."""
    if isinstance(item, Value):
        return item
    if isinstance(item, Node):
        if not item.outputs:
            raise GraphError(f"node {item.name!r} ({item.op_type}) has no output to use")
        return item.outputs[0]
    raise GraphError(f"expected a node or a value, got {type(item).__name__}")


class Node:
    """One instance of an op: a type, attributes, input values and output values."""

    __slots__ = ("name", "op_type", "attrs", "_inputs", "outputs", "graph", "_prev", "_next",
                 "__weakref__")

    def __init__(self, op_type: str, inputs: Sequence[Optional[Value]], attrs: dict[str, Any],
                 outputs: Sequence[TensorDesc], name: Optional[str] = None) -> None:
        self.name: str = name or ""  # empty until a graph names it
        self.op_type = op_type
        self.attrs: dict[str, Any] = dict(attrs)
        self._inputs: list[Optional[Value]] = list(inputs)
        self.outputs: tuple[Value, ...] = tuple(
            Value(self, i, desc) for i, desc in enumerate(outputs))
        self.graph: Optional[Graph] = None
        # neighbours in the graph's node order (a doubly linked list)
        self._prev: Optional[Node] = None
        self._next: Optional[Node] = None

    # -- the operator-handle view (output 0) -----------------------------------------
    @property
    def shape(self) -> Shape:
        """Shape of the first output (the seed's ``op.shape``)."""
        return as_value(self).shape

    @property
    def dtype(self) -> DataType:
        """Element type of the first output."""
        return as_value(self).dtype

    def output(self, index: int = 0) -> Value:
        """The ``index``-th output value."""
        try:
            return self.outputs[index]
        except IndexError:
            raise GraphError(
                f"node {self.name!r} ({self.op_type}) has {len(self.outputs)} outputs; "
                f"output {index} does not exist") from None

    # -- inputs -----------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Optional[Value], ...]:
        """The input values in order; ``None`` marks an absent optional input."""
        return tuple(self._inputs)

    def replace_input_with(self, index: int, value: Optional[Value]) -> None:
        """Make input ``index`` read ``value``, keeping both values' user lists right."""
        if not 0 <= index < len(self._inputs):
            raise GraphError(f"node {self.name!r} has no input {index}")
        old = self._inputs[index]
        if old is value:
            return
        if self.graph is not None and old is not None:
            del old._users[id(self), index]
        self._inputs[index] = value
        if self.graph is not None:
            self.graph._ordered = False
            if value is not None:
                value._users[id(self), index] = Usage(self, index)
            for record, rewired in self.graph._recorders:
                if rewired:
                    record.append(self)

    def predecessors(self) -> list[Node]:
        """Distinct producers of this node's inputs."""
        seen: dict[int, Node] = {}
        for value in self._inputs:
            if value is not None:
                seen.setdefault(id(value.producer), value.producer)
        return list(seen.values())

    def successors(self) -> list[Node]:
        """Distinct nodes that read any of this node's outputs."""
        seen: dict[int, Node] = {}
        for value in self.outputs:
            for usage in value._users.values():
                seen.setdefault(id(usage.node), usage.node)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op_type})"


def describe(value: Value) -> str:
    """``name: float32[N,3]`` text for messages."""
    return f"{value.name}: {value.dtype.short_name}{format_shape(value.shape)}"

