"""The graph IR's ``Graph``: nodes in one order, indexes by name, outputs, checks, copies.

``Value`` and ``Node`` live in ``ge.ir.node`` (re-exported here). Walking
``graph.nodes`` returns a snapshot, so a graph can be changed while it is walked.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Optional, Union

from ge.errors import GraphError
from ge.ir.node import Node, Usage, Value, ValueLike, as_value, describe
from ge.ir.tensor import TensorDesc

__all__ = ["Usage", "Value", "Node", "Graph", "ValueLike", "as_value", "set_node_checker",
           "collector_paused", "describe", "DIMENSION_NAMES_ARE_HINTS",
           "MEMORY_OPTIONS_KEY"]

#: ``graph.metadata`` key: when true, the names of the inputs' dimensions are what a model
#: file declared, not a promise (ONNX's dim_param): feeds may break them, and a session
#: then runs a plan compiled with those dimensions apart
DIMENSION_NAMES_ARE_HINTS = "dimension_names_are_hints"

#: ``graph.metadata`` key: the memory planner's switches ``{"memory_reuse": bool,
#: "inplace": bool}``, as ``gp.MemoryPass`` records them; ``ge.compile`` reads them
MEMORY_OPTIONS_KEY = "memory"


# A hook the op registry installs: it checks one node against its op's definition
# (input count, attributes, shapes, dtypes) and raises a GraphError if it does not fit.
_node_checker: Optional[Callable[[Node], None]] = None


def set_node_checker(checker: Optional[Callable[[Node], None]]) -> None:
    """Install the function ``Graph.validate`` uses to check each node against its op."""
    global _node_checker
    _node_checker = checker


class Graph:
    """A dataflow graph of nodes, with inputs (its ``Data`` nodes) and ordered outputs.

    The nodes are kept in one order, a doubly linked list: new nodes go at the end, or
    just before the node named by ``inserting_before`` (so a rewrite can place its
    replacement where the replaced node stood). Indexes from node name to node and
    from value name to value are kept current by every change, so look-ups cost the
    same in a graph of ten nodes or of a hundred thousand.
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = str(name)
        self._head: Optional[Node] = None
        self._tail: Optional[Node] = None
        self._size = 0
        # True while the node order is known to be topological: set by a check, cleared
        # by anything that could break it (a node linked in, an input rewired).
        self._ordered = False
        self._insert_point: Optional[Node] = None
        self._outputs: list[Value] = []
        self._output_ids: Counter[int] = Counter()
        self._counter = itertools.count()
        self._by_name: dict[str, Node] = {}
        self._values: dict[str, list[Value]] = {}
        self._recorders: list[tuple[list[Node], bool]] = []  # (record, count rewired too)
        self.metadata: dict[str, Any] = {}

    # -- building ---------------------------------------------------------------------
    def add_op(self, op: Node) -> Node:
        """Add a built operator (and any not-yet-added node it reads); return its handle."""
        if not isinstance(op, Node):
            raise GraphError(
                f"graph {self.name!r}: add_op expects a built operator "
                f"(OperatorFactory.create_op(...).build()), got {type(op).__name__}")
        if op.graph is self:
            return op
        if op.graph is not None:
            raise GraphError(
                f"node {op.name!r} already belongs to graph {op.graph.name!r}; clone it instead")
        for value in op._inputs:
            if value is None:
                continue
            producer = value.producer
            if producer.graph is None:
                self.add_op(producer)
            elif producer.graph is not self:
                raise GraphError(
                    f"node {op.name or op.op_type!r} reads {value.name!r} from graph "
                    f"{producer.graph.name!r}, not from {self.name!r}")
        self._attach(op)
        return op

    def add_node(self, op_type: str, inputs: Sequence[Optional[ValueLike]],
                 attrs: Optional[dict[str, Any]], outputs: Sequence[TensorDesc],
                 name: Optional[str] = None) -> Node:
        """Create a node from parts and add it; the caller supplies the output descriptors."""
        values = [None if item is None else as_value(item) for item in inputs]
        return self.add_op(Node(op_type, values, attrs or {}, outputs, name))

    def _attach(self, node: Node) -> None:
        if not node.name:
            node.name = self.unique_name(node.op_type.lower())
        elif node.name in self._by_name:
            raise GraphError(f"graph {self.name!r} already has a node named {node.name!r}")
        self._by_name[node.name] = node
        node.graph = self
        self._link(node)
        for record, _ in self._recorders:
            record.append(node)
        for index, value in enumerate(node._inputs):
            if value is not None:
                value._users[id(node), index] = Usage(node, index)
        for value in node.outputs:
            self._index_value(value)

    def _link(self, node: Node) -> None:
        """Put ``node`` at the end of the order, or before the insertion point."""
        self._ordered = False
        point = self._insert_point
        if point is not None and point.graph is self:
            node._prev, node._next = point._prev, point
            if point._prev is None:
                self._head = node
            else:
                point._prev._next = node
            point._prev = node
        else:
            node._prev, node._next = self._tail, None
            if self._tail is None:
                self._head = node
            else:
                self._tail._next = node
            self._tail = node
        self._size += 1

    def _unlink(self, node: Node) -> None:
        if node._prev is None:
            self._head = node._next
        else:
            node._prev._next = node._next
        if node._next is None:
            self._tail = node._prev
        else:
            node._next._prev = node._prev
        node._prev = node._next = None
        self._size -= 1

    @contextlib.contextmanager
    def inserting_before(self, node: Optional[Node]) -> Iterator[None]:
        """Within this block, nodes added to the graph go just before ``node`` in the order
        (at the end when ``node`` is None or has left the graph)."""
        saved, self._insert_point = self._insert_point, node
        try:
            yield
        finally:
            self._insert_point = saved

    def unique_name(self, base: str) -> str:
        """A node name starting with ``base`` that no node of this graph has."""
        if base not in self._by_name:
            return base
        while True:
            candidate = f"{base}_{next(self._counter)}"
            if candidate not in self._by_name:
                return candidate

    def remove_node(self, node: Node, *, force: bool = False) -> None:
        """Remove a node. Its outputs must be unused unless ``force`` (then users dangle)."""
        if node.graph is not self:
            raise GraphError(f"node {node.name!r} is not in graph {self.name!r}")
        for value in node.outputs:
            if not force and (value._users or value.is_graph_output()):
                users = ", ".join(repr(u.node.name) for u in value.users) or "the graph outputs"
                raise GraphError(f"cannot remove {node.name!r}: {value.name!r} is used by {users}")
        for index, read in enumerate(node._inputs):
            if read is not None:
                read._users.pop((id(node), index), None)
        for value in node.outputs:
            self._unindex_value(value)
        if self._insert_point is node:
            self._insert_point = node._next
        self._unlink(node)
        if self._by_name.get(node.name) is node:
            del self._by_name[node.name]
        node.graph = None

    def rename_node(self, node: Node, name: str) -> None:
        """Give a node a new name that no other node has."""
        if name == node.name:
            return
        if name in self._by_name:
            raise GraphError(f"graph {self.name!r} already has a node named {name!r}")
        derived = [v for v in node.outputs if not v.has_explicit_name]
        for value in derived:
            self._unindex_value(value)
        del self._by_name[node.name]
        self._by_name[name] = node
        node.name = name
        for value in derived:
            self._index_value(value)

    def _index_value(self, value: Value) -> None:
        self._values.setdefault(value.name, []).append(value)

    def _unindex_value(self, value: Value) -> None:
        holders = self._values.get(value.name)
        if holders is None:
            return
        for position, held in enumerate(holders):
            if held is value:
                del holders[position]
                break
        if not holders:
            del self._values[value.name]

    def set_outputs(self, outputs: Iterable[ValueLike]) -> Graph:
        """Set the graph's outputs, in order (the seed's ``set_outputs([op, ...])``)."""
        values = [as_value(item) for item in outputs]
        for value in values:
            if value.producer.graph is None:
                self.add_op(value.producer)
            elif value.producer.graph is not self:
                raise GraphError(f"output {value.name!r} belongs to another graph")
        self._set_output_values(values)
        return self

    def _set_output_values(self, values: list[Value]) -> None:
        self._outputs = values
        self._output_ids = Counter(id(v) for v in values)

    def replace_output(self, old: Value, new: Value) -> None:
        """Make every graph output that is ``old`` be ``new``."""
        if id(old) not in self._output_ids:
            return
        self._set_output_values([new if v is old else v for v in self._outputs])

    # -- reading ----------------------------------------------------------------------
    def _walk(self) -> Iterator[Node]:
        node = self._head
        while node is not None:
            following = node._next
            yield node
            node = following

    @property
    def nodes(self) -> list[Node]:
        """The nodes in the graph's order (a snapshot: safe to mutate while walking)."""
        return list(self._walk())

    @contextlib.contextmanager
    def recording(self, *, rewired: bool = False) -> Iterator[list[Node]]:
        """Within this block, the yielded list collects every node added to the graph
        and, with ``rewired``, every node one of whose inputs changed (a node may be
        listed more than once, and may have been removed again by the block's end)."""
        entry: tuple[list[Node], bool] = ([], rewired)
        self._recorders.append(entry)
        try:
            yield entry[0]
        finally:
            self._recorders = [held for held in self._recorders if held is not entry]

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __contains__(self, node: object) -> bool:
        return isinstance(node, Node) and node.graph is self

    @property
    def outputs(self) -> list[Value]:
        """The graph's output values, in order."""
        return list(self._outputs)

    @property
    def inputs(self) -> list[Value]:
        """The values of the graph's ``Data`` nodes, in the graph's order."""
        return [node.outputs[0] for node in self._walk() if node.op_type == "Data"]

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        found = self._by_name.get(name)
        if found is None:
            raise GraphError(f"graph {self.name!r} has no node named {name!r}")
        return found

    def has_node(self, name: str) -> bool:
        """True when a node of this graph is called ``name``."""
        return name in self._by_name

    def find_value(self, name: str) -> Value:
        """The value called ``name``."""
        holders = self._values.get(name)
        if not holders:
            raise GraphError(f"graph {self.name!r} has no value named {name!r}")
        return holders[0]

    def has_value(self, name: str) -> bool:
        """True when a value of this graph is called ``name``."""
        return name in self._values

    def get_ops(self) -> list[Node]:
        """The nodes in topological order (the seed's ``graph.get_ops()``)."""
        return self.topological_order()

    def topological_order(self) -> list[Node]:
        """Nodes ordered so each comes after its producers.

        The graph's own order is returned when it is one already (a walk over the
        nodes checks that); otherwise the nodes are sorted, ties keeping the graph's
        order, and the graph keeps the sorted order for next time.
        """
        nodes = self.nodes
        if self._ordered or _is_topological(nodes, self):
            self._ordered = True
            return nodes
        order = _sorted_topologically(nodes, self.name)
        for before, after in zip(order, order[1:]):
            before._next, after._prev = after, before
        order[0]._prev = order[-1]._next = None
        self._head, self._tail = order[0], order[-1]
        self._ordered = True
        return order

    # -- checking ---------------------------------------------------------------------
    def validate(self, nodes: Optional[Iterable[Node]] = None) -> bool:
        """Check the graph; return True, or raise ``GraphError`` naming what is wrong.

        Checked: at least one output; no cycle; and for every node (or, given
        ``nodes``, for those of them still in the graph: the pass manager checks what
        a pass added or rewired this way) unique node and value names, inputs produced
        by nodes of this graph, consistent use-def links, and the node against its
        op's definition (inputs, attributes, shapes, dtypes).
        """
        if not self._outputs:
            raise GraphError(f"graph {self.name!r} has no outputs; call set_outputs([...])")
        for value in self._outputs:
            if value.producer.graph is not self:
                raise GraphError(f"graph output {value.name!r} is produced outside the graph")
        order = self.topological_order()
        if nodes is not None:
            chosen = {id(n): n for n in nodes if n.graph is self}
            order = [n for n in order if id(n) in chosen]
        self._check_names(order)
        self._check_links(order)
        if _node_checker is not None:
            for node in order:
                _node_checker(node)
        return True

    def is_valid(self) -> bool:
        """``validate()`` as a truth value: False instead of raising."""
        try:
            return self.validate()
        except GraphError:
            return False

    def _check_names(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            if self._by_name.get(node.name) is not node:
                raise GraphError(f"graph {self.name!r} has two nodes named {node.name!r}")
            for value in node.outputs:
                if len(self._values.get(value.name, ())) != 1:
                    raise GraphError(f"graph {self.name!r} has two values named {value.name!r}")

    def _check_links(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            for index, value in enumerate(node._inputs):
                if value is None:
                    continue
                if value.producer.graph is not self:
                    raise GraphError(
                        f"node {node.name!r} input {index} reads {value.name!r}, whose producer "
                        f"is not in graph {self.name!r} (a dangling input)")
                if (id(node), index) not in value._users:
                    raise GraphError(f"use-def link broken at node {node.name!r} input {index}")
            for value in node.outputs:
                for usage in value._users.values():
                    reader = usage.node
                    if reader.graph is not self or reader._inputs[usage.input_index] is not value:
                        raise GraphError(f"value {value.name!r} lists a stale user {usage}")

    # -- copying ----------------------------------------------------------------------
    def clone(self, name: Optional[str] = None) -> Graph:
        """A deep copy: new nodes and values, shared read-only constant data."""
        copy = Graph(self.name if name is None else name)
        copy.metadata = dict(self.metadata)
        mapping: dict[int, Value] = {}
        for node in self.topological_order():
            inputs = [None if v is None else mapping[id(v)] for v in node._inputs]
            descs = [v.desc for v in node.outputs]
            new = Node(node.op_type, inputs, copy_attrs(node.attrs), descs, node.name)
            for old_value, new_value in zip(node.outputs, new.outputs):
                new_value._name = old_value._name
                mapping[id(old_value)] = new_value
            copy._attach(new)
        copy._set_output_values([mapping[id(v)] for v in self._outputs])
        return copy

    def extract(self, inputs: Sequence[Union[str, ValueLike]],
                outputs: Sequence[Union[str, ValueLike]], name: Optional[str] = None) -> Graph:
        """The subgraph computing ``outputs`` from ``inputs`` (which become ``Data`` nodes)."""
        in_values = [self._lookup(item) for item in inputs]
        out_values = [self._lookup(item) for item in outputs]
        sub = Graph(name or f"{self.name}_sub")
        mapping: dict[int, Value] = {}
        for value in in_values:
            data = Node("Data", [], {"shape": list(value.shape), "dtype": value.dtype},
                        [value.desc], _safe_name(value.name))
            sub._attach(data)
            mapping[id(value)] = data.outputs[0]
        needed = self._cone(out_values, {id(v) for v in in_values})
        for node in self.topological_order():
            if id(node) not in needed:
                continue
            new_inputs = [None if v is None else mapping[id(v)] for v in node._inputs]
            new = Node(node.op_type, new_inputs, copy_attrs(node.attrs),
                       [v.desc for v in node.outputs], node.name)
            for old_value, new_value in zip(node.outputs, new.outputs):
                new_value._name = old_value._name
                mapping.setdefault(id(old_value), new_value)
            sub._attach(new)
        sub._set_output_values([mapping[id(v)] for v in out_values])
        return sub

    def _cone(self, outputs: Sequence[Value], stop: set[int]) -> set[int]:
        needed: set[int] = set()
        stack = [v for v in outputs if id(v) not in stop]
        while stack:
            node = stack.pop().producer
            if id(node) in needed:
                continue
            needed.add(id(node))
            stack.extend(v for v in node._inputs if v is not None and id(v) not in stop)
        return needed

    def _lookup(self, item: Union[str, ValueLike]) -> Value:
        value = self.find_value(item) if isinstance(item, str) else as_value(item)
        if value.producer.graph is not self:
            raise GraphError(f"value {value.name!r} is not in graph {self.name!r}")
        return value

    # -- text -------------------------------------------------------------------------
    def __str__(self) -> str:
        from ge.ir.printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {self._size} nodes)"

    def to_json(self) -> str:
        """The graph as JSON text (constant data included, base64-encoded)."""
        from ge.ir.serialize import graph_to_json

        return graph_to_json(self)

    @staticmethod
    def from_json(text: Union[str, bytes]) -> Graph:
        """Rebuild a graph from ``to_json`` output."""
        from ge.ir.serialize import graph_from_json

        return graph_from_json(text)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector within the block (restored after).

    A large graph is millions of long-lived objects linked in cycles (a value and
    its producer); while one is built, each automatic collection would walk them
    all again, so parsing and compiling time would grow faster than the graph.
    Parsing and ``ge.compile`` run inside this block; cycles left behind are
    collected once the collector runs again.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _is_topological(nodes: list[Node], graph: Graph) -> bool:
    seen: set[int] = set()
    for node in nodes:
        for value in node._inputs:
            if value is not None and value.producer.graph is graph \
                    and id(value.producer) not in seen:
                return False
        seen.add(id(node))
    return True


def _sorted_topologically(nodes: list[Node], name: str) -> list[Node]:
    """Kahn's algorithm; among ready nodes the earliest in ``nodes`` goes first."""
    position = {id(node): i for i, node in enumerate(nodes)}
    pending = {id(node): 0 for node in nodes}
    for node in nodes:
        for producer in node.predecessors():
            if id(producer) in position:
                pending[id(node)] += 1
    ready = [position[id(n)] for n in nodes if pending[id(n)] == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        order.append(node)
        for successor in node.successors():
            key = id(successor)
            if key in pending:
                pending[key] -= 1
                if pending[key] == 0:
                    heapq.heappush(ready, position[key])
    if len(order) != len(nodes):
        stuck = sorted(n.name for n in nodes if pending[id(n)] > 0)
        raise GraphError(f"graph {name!r} has a cycle through nodes {stuck}")
    return order


def copy_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes for a copy of a node: lists copied, subgraphs cloned, tensors shared."""
    copied: dict[str, Any] = {}
    for key, value in attrs.items():
        if isinstance(value, Graph):
            copied[key] = value.clone()
        elif isinstance(value, list):
            copied[key] = list(value)
        else:
            copied[key] = value
    return copied


def _safe_name(name: str) -> str:
    return name.replace(":", "_")
