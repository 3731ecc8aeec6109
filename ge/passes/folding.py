"""Folding passes: compute at compile time what does not depend on the feeds.

``ConstantFoldingPass`` evaluates nodes whose inputs are all constants through
the op registry's reference kernel. ``ShapeFoldingPass`` does the same for the
shape arithmetic exporters emit (``Shape -> Gather -> Unsqueeze -> Concat ->
Reshape``), also when only some dimensions are static: it tracks each element
of a small integer vector as a known size, a named dimension, or "dimension i
of value v", so ``x.view(batch, seq, heads, dim)`` with a dynamic ``batch``
becomes ``Reshape(x, [0, seq, heads, dim])``.

A kernel or inference function that raises while a node is folded leaves the node
as it is and is recorded in the pass's result (``PassResult.failures``: the node and
the error), so the compile report shows it instead of a silent "not folded".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from ge.errors import GEError
from ge.ir import Graph, Node, Tensor, TensorDesc, Value, is_static, num_elements
from ge.ir.graph import copy_attrs
from ge.ops.registry import (
    AttrType,
    Trait,
    const_value,
    get_schema,
    has_op,
    infer_outputs,
    normalize_attrs,
    run_kernel,
)
from ge.passes.base import Pass, PassResult
from ge.passes.rewrite import remove_unused

__all__ = ["ConstantFoldingPass", "ShapeFoldingPass", "refine_shapes", "refine_node",
           "is_foldable", "install_constants", "inline_known_branch", "dim_symbol",
           "reshape_spec"]


# -- shared helpers ----------------------------------------------------------------------

def is_foldable(node: Node) -> bool:
    """True when ``node`` may be computed at compile time from constant inputs: its op is
    registered, pure, not a source (``Data``/``Const``), and holds no subgraph."""
    if not has_op(node.op_type):
        return False
    schema = get_schema(node.op_type)
    if not schema.has_trait(Trait.PURE) or schema.has_trait(Trait.SOURCE):
        return False
    return not any(spec.type is AttrType.GRAPH for spec in schema.attrs.values())


def _fits(array: np.ndarray, value: Value) -> bool:
    """The array can stand for ``value``: same dtype, same rank, agreeing static dims."""
    if array.dtype != value.dtype.np_dtype or array.ndim != len(value.shape):
        return False
    return all(not isinstance(d, int) or d < 0 or d == n for d, n in zip(value.shape, array.shape))


def install_constants(graph: Graph, node: Node, arrays: dict[int, np.ndarray]) -> list[Node]:
    """Replace outputs of ``node`` (by index) with ``Const`` nodes holding ``arrays``.

    When every used output is replaced, ``node`` is removed and the constants take its
    value names (graph output names stay stable) and, for one output, its node name.
    An output that is a graph output is only replaced when the node goes. Returns the
    new ``Const`` nodes."""
    used = [i for i, v in enumerate(node.outputs) if v.num_users or v.is_graph_output()]
    removable = all(i in arrays for i in used)
    created: list[tuple[Node, str]] = []
    for index in used:
        old = node.outputs[index]
        if index not in arrays or (old.is_graph_output() and not removable):
            continue
        data = np.asarray(arrays[index])
        desc = TensorDesc(data.shape, old.dtype, old.format)
        const = graph.add_node("Const", [], {"value": Tensor(data)}, [desc],
                               graph.unique_name(f"{node.name}/folded"))
        created.append((const, old.name))
        old.replace_all_uses_with(const.outputs[0])
    if removable:
        graph.remove_node(node)
        for const, name in created:
            const.outputs[0].name = name
        if len(created) == 1 and len(node.outputs) == 1:
            graph.rename_node(created[0][0], node.name)
    return [const for const, _ in created]


def _refined(declared: Sequence[Any], inferred: Sequence[Any]) -> Optional[tuple[Any, ...]]:
    """The better-known of two shapes of one value, or None when they do not agree."""
    if len(declared) != len(inferred):
        return None
    merged: list[Any] = []
    for old, new in zip(declared, inferred):
        if isinstance(old, int) and old >= 0:
            if isinstance(new, int) and new >= 0 and new != old:
                return None
            merged.append(old)
        elif isinstance(new, int) and new >= 0:
            merged.append(new)
        else:
            merged.append(old if isinstance(old, str) or not isinstance(new, str) else new)
    return tuple(merged)


def refine_node(node: Node, result: Optional[PassResult] = None) -> int:
    """Re-run shape inference on ``node`` and keep what it learns (a dimension becomes known
    or named); return how many output values got a better-known shape. When inference
    now fails, nothing changes and the failure is recorded in ``result`` (if given)."""
    if not has_op(node.op_type) or get_schema(node.op_type).has_trait(Trait.SOURCE):
        return 0
    schema = get_schema(node.op_type)
    try:
        attrs = normalize_attrs(schema, node.attrs, node.name)
        descs = infer_outputs(schema, node.name, node.inputs, attrs)
    except GEError as error:
        if result is not None:
            result.fail(node.name, error)
        return 0
    changed = 0
    for value, desc in zip(node.outputs, descs):
        if desc.dtype is not value.dtype:
            continue
        shape = _refined(value.shape, desc.shape)
        if shape is not None and shape != tuple(value.shape):
            value.shape = shape
            changed += 1
    return changed


def refine_shapes(graph: Graph, result: Optional[PassResult] = None) -> int:
    """Re-run shape inference over the whole graph, producers first, keeping what it learns
    (constants now known, dimensions now static or named); return how many values changed.
    Nodes whose inference fails are recorded in ``result`` (if given)."""
    return sum(refine_node(node, result) for node in graph.topological_order())


def _describe(counts: Counter[str]) -> str:
    """``Gather 3, Shape 1``: most frequent first, ties by name."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{what} {n}" for what, n in ordered)


def inline_known_branch(graph: Graph, node: Node) -> bool:
    """Replace an ``If`` whose condition is a one-element constant by a copy of the branch
    it takes, reading the ``If``'s captured inputs; False, changing nothing, when the
    condition is not known or that branch did not import (its error waits for a run)."""
    cond = const_value(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    if cond is None or cond.size != 1:
        return False
    taken = "then" if bool(cond.reshape(-1)[0]) else "else"
    branch = node.attrs.get(f"{taken}_branch")
    if not isinstance(branch, Graph) or node.attrs.get(f"{taken}_error"):
        return False
    captured = node.inputs[1:]
    if len(branch.inputs) != len(captured) or len(branch.outputs) != len(node.outputs):
        return False
    mapping: dict[int, Value] = {}
    for inner, outer in zip(branch.inputs, captured):
        if outer is None:
            return False
        mapping[id(inner)] = outer
    with graph.inserting_before(node):
        for inner_node in branch.topological_order():
            if inner_node.op_type == "Data":
                continue
            inputs = [None if v is None else mapping[id(v)] for v in inner_node.inputs]
            copy = graph.add_node(inner_node.op_type, inputs, copy_attrs(inner_node.attrs),
                                  [v.desc for v in inner_node.outputs],
                                  graph.unique_name(_inlined_name(node, taken, inner_node)))
            for old, new in zip(inner_node.outputs, copy.outputs):
                mapping[id(old)] = new
    for old, inner in zip(node.outputs, branch.outputs):
        new = mapping[id(inner)]
        if old.is_graph_output() and (new.is_graph_output() or new.producer.op_type in
                                      ("Data", "Const") or new.producer.graph is not graph
                                      or any(new is v for v in captured)):
            # the output keeps its own name: a copy, since ``new`` has a name of its own
            with graph.inserting_before(node):
                new = graph.add_node("Identity", [new], {}, [new.desc],
                                     graph.unique_name(f"{node.name}/{taken}/output")).outputs[0]
        name, rename = old.name, old.is_graph_output()
        old.replace_all_uses_with(new)
        if rename:
            new.name = name
    graph.remove_node(node)
    return True


def _inlined_name(node: Node, taken: str, inner: Node) -> str:
    separator = "" if inner.name.startswith("/") else "/"
    return f"{node.name}/{taken}{separator}{inner.name}"


# -- constant folding --------------------------------------------------------------------

class ConstantFoldingPass(Pass):
    """Evaluate every foldable node whose inputs are all constants, once, at compile time.

    before: ``c = Const([1, 2]); d = Mul(c, Const(3)); y = Add(x, d)`` -> after:
    ``d = Const([3, 6]); y = Add(x, d)``. Evaluation goes through the op's reference
    kernel (the oracle), producers first, so whole constant subgraphs fold in one run.

    Refuses a node that is not pure (``Dropout``), is a source, holds a subgraph
    (``If``, ``Loop``, ``Scan``); whose output would exceed ``max_elements`` elements or
    the run's ``total_elements`` budget; whose output would be over ``growth_bytes`` and
    more than twice the bytes of its inputs (``Expand``/``Tile``/``ConstantOfShape`` of
    small constants, ``DequantizeLinear`` of int8 weights: cheaper to compute than to
    store); or whose kernel fails (recorded in the result's ``failures``: node and
    error) or returns another dtype or shape than inferred.
    """

    def __init__(self, max_elements: int = 1 << 20, total_elements: int = 1 << 24,
                 growth_bytes: int = 1 << 18) -> None:
        self.max_elements = max_elements
        self.total_elements = total_elements
        self.growth_bytes = growth_bytes

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        folded: Counter[str] = Counter()
        refused: Counter[str] = Counter()
        budget = self.total_elements
        touched: list[Node] = []
        for node in graph.topological_order():
            if node.op_type == "If" and node.graph is graph:
                before = node.predecessors()
                if inline_known_branch(graph, node):
                    touched.extend(before)
                    folded["If (branch inlined)"] += 1
                continue
            if node.graph is not graph or not is_foldable(node):
                continue
            if any(v is not None and v.producer.op_type != "Const" for v in node.inputs):
                continue  # checked first: reading a constant may compute a pending one
            inputs = [None if v is None else const_value(v) for v in node.inputs]
            if any(v is not None and a is None for v, a in zip(node.inputs, inputs)):
                continue
            try:
                outcome = self._evaluate(node, inputs, budget)
            except GEError as error:  # run_kernel gives every kernel failure as a GE error
                result.fail(node.name, error, self.name)
                refused["(kernel failed)"] += 1
                continue
            if isinstance(outcome, str):
                refused[outcome] += 1
                continue
            budget -= sum(a.size for a in outcome.values())
            touched.extend(node.predecessors())
            install_constants(graph, node, outcome)
            folded[node.op_type] += 1
        removed = remove_unused(graph, touched)
        if folded:
            result.count("folded", sum(folded.values()))
            result.note(f"folded {sum(folded.values())} nodes into constants "
                        f"({_describe(folded)})")
        if removed:
            result.count("removed", removed)
        if refused:
            result.notes.append("left unfolded: " + ", ".join(
                f"{n} {why}" for why, n in refused.most_common()))
        return result

    def _evaluate(self, node: Node, inputs: list[Optional[np.ndarray]],
                  budget: int) -> Union[dict[int, np.ndarray], str]:
        """The node's output arrays by index, or why it is not folded; a GE error when the
        kernel fails."""
        reason = self._check_size(node, inputs, budget)
        if reason:
            return reason
        arrays = run_kernel(get_schema(node.op_type), node.name, inputs, node.attrs)
        if len(arrays) != len(node.outputs):
            return "(kernel output count differs)"
        if any(not _fits(a, v) for a, v in zip(arrays, node.outputs)):
            return "(kernel result differs from the inferred type)"
        total = sum(a.size for a in arrays)
        if max(a.size for a in arrays) > self.max_elements or total > budget:
            return "(over the size cap)"
        return dict(enumerate(arrays))

    def _check_size(self, node: Node, inputs: list[Optional[np.ndarray]],
                    budget: int) -> Optional[str]:
        shapes = [v.shape for v in node.outputs]
        present = [a for a in inputs if a is not None]
        if not all(is_static(s) for s in shapes):  # judged on the result, once computed
            small = sum(a.size for a in present) <= self.max_elements
            return None if small else "(over the size cap)"
        in_bytes = sum(a.nbytes for a in present)
        sizes = [num_elements(s) for s in shapes]
        if max(sizes, default=0) > self.max_elements or sum(sizes) > budget:
            return "(over the size cap)"
        out_bytes = sum(n * v.dtype.itemsize for n, v in zip(sizes, node.outputs))
        if out_bytes > self.growth_bytes and out_bytes > 2 * in_bytes:
            return "(would grow the stored constants)"
        return None


# -- shape folding -----------------------------------------------------------------------

#: an element of a small integer vector: a known int, a named dimension, or (value, axis)
Symbol = Union[int, str, tuple[Value, int]]

#: the largest integer vector whose elements are tracked one by one
_TRACKED = 64

@dataclass(frozen=True)
class _Facts:
    """What is known of a small integer tensor, element by element."""

    shape: tuple[int, ...]
    items: tuple[Symbol, ...]

    @property
    def known(self) -> bool:
        return all(isinstance(item, int) for item in self.items)

    def array(self, dtype: np.dtype) -> np.ndarray:
        assert self.known
        return np.array(self.items, dtype=dtype).reshape(self.shape)


def dim_symbol(value: Value, axis: int) -> Symbol:
    """Dimension ``axis`` of ``value`` as a symbol: its size, its name, or (value, axis)."""
    dim = value.shape[axis]
    if isinstance(dim, str) or dim >= 0:
        return dim
    return (value, axis)


def _tracked(value: Value) -> bool:
    integral = value.dtype.is_integer or value.dtype.np_dtype == np.bool_
    return integral and is_static(value.shape) and num_elements(value.shape) <= _TRACKED


class _ShapeAnalysis:
    """Facts about the small integer values of one graph, computed producers first."""

    def __init__(self) -> None:
        self.facts: dict[Value, _Facts] = {}
        #: (node name, error) of each kernel that raised on known or position inputs
        self.failures: list[tuple[str, GEError]] = []

    def of(self, value: Optional[Value]) -> Optional[_Facts]:
        if value is None:
            return None
        if value not in self.facts:
            data = const_value(value)
            if data is not None and data.dtype.kind in "iub" and data.size <= _TRACKED:
                self.facts[value] = _Facts(data.shape, tuple(int(v) for v in data.reshape(-1)))
        return self.facts.get(value)

    def visit(self, node: Node) -> None:
        """Work out the facts of the node's outputs."""
        if node.op_type == "Shape":
            self._shape(node)
        elif node.op_type == "Size":
            dims = node.inputs[0].shape if node.inputs[0] is not None else (-1,)
            if is_static(dims):
                self.facts[node.outputs[0]] = _Facts((), (num_elements(dims),))
        elif all(_tracked(v) for v in node.outputs) and is_foldable(node):
            self._evaluate(node)

    def shape_of(self, node: Node) -> Optional[tuple[Any, ...]]:
        """The output shape that the facts of a shape-giving input imply (named where they
        name dimensions): ``ConstantOfShape``, ``Expand``, ``Reshape``, and ``Range(0, n, 1)``
        (n elements)."""
        if node.op_type == "Range":
            start, limit, delta = (self.of(v) for v in node.inputs[:3])
            if start is None or limit is None or delta is None:
                return None
            counted = start.items == (0,) and delta.items == (1,)
            return (limit.items[0],) if counted and isinstance(limit.items[0], str) else None
        if node.op_type not in ("ConstantOfShape", "Expand", "Reshape"):
            return None
        source = node.inputs[0]
        target = self.of(source if node.op_type == "ConstantOfShape" else node.inputs[1])
        if source is None or target is None or len(target.shape) != 1:
            return None
        dims = [d if isinstance(d, (int, str)) else -1 for d in target.items]
        if node.op_type == "Expand":
            return _broadcast_dims(list(source.shape), dims)
        if node.op_type == "Reshape" and not node.attrs.get("allowzero"):
            rank = len(source.shape)
            dims = [source.shape[i] if d == 0 and i < rank else d for i, d in enumerate(dims)]
        return tuple(dims)

    def _shape(self, node: Node) -> None:
        source = node.inputs[0]
        assert source is not None
        rank = len(source.shape)
        start, end = node.attrs.get("start") or 0, node.attrs.get("end")
        first = min(max(start + rank if start < 0 else start, 0), rank)
        last = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
        items = tuple(dim_symbol(source, axis) for axis in range(first, max(first, last)))
        self.facts[node.outputs[0]] = _Facts((len(items),), items)

    def _evaluate(self, node: Node) -> None:
        facts = [self.of(v) for v in node.inputs]
        if any(v is not None and f is None for v, f in zip(node.inputs, facts)):
            return
        if all(f is None or f.known for f in facts):
            arrays = [None if f is None or v is None else f.array(v.dtype.np_dtype)
                      for v, f in zip(node.inputs, facts)]
            outputs = self._run(node, arrays)
            for value, array in zip(node.outputs, outputs):
                if _fits(array, value):
                    self.facts[value] = _Facts(array.shape, tuple(int(v) for v in
                                                                  array.reshape(-1)))
            return
        if node.op_type == "Equal":
            self._equal(node, facts)
        elif node.outputs[0].dtype.is_integer:
            self._move(node, facts)

    def _equal(self, node: Node, facts: list[Optional[_Facts]]) -> None:
        """Equal on symbols: the same symbol is equal; a size never equals a negative number
        (exporters test a shape against -1 before ``Expand``)."""
        left, right = facts[0], facts[1]
        assert left is not None and right is not None
        try:
            shape = np.broadcast_shapes(left.shape, right.shape)
        except ValueError:
            return
        pairs = zip(*(np.broadcast_to(np.arange(len(f.items)).reshape(f.shape), shape).reshape(-1)
                      for f in (left, right)))
        items: list[Symbol] = []
        for i, j in pairs:
            a, b = left.items[int(i)], right.items[int(j)]
            if a == b or (isinstance(a, int) and isinstance(b, int)):
                items.append(int(a == b))
            elif any(isinstance(v, int) and v < 0 for v in (a, b)):
                items.append(0)
            else:
                return
        self.facts[node.outputs[0]] = _Facts(tuple(shape), tuple(items))

    def _run(self, node: Node, arrays: list[Optional[np.ndarray]]) -> list[np.ndarray]:
        """The node's kernel on ``arrays``; no outputs (and a recorded failure) if it fails."""
        try:
            return run_kernel(get_schema(node.op_type), node.name, arrays, node.attrs)
        except GEError as error:  # run_kernel gives every kernel failure as a GE error
            self.failures.append((node.name, error))
            return []

    def _move(self, node: Node, facts: list[Optional[_Facts]]) -> None:
        """Run an op that moves elements (``Trait.MOVES_ELEMENTS``) on element positions to
        learn where each element goes."""
        data = get_schema(node.op_type).moved_slots(len(node.inputs))
        if not data or len(node.outputs) != 1:
            return
        pool: list[Symbol] = []
        arrays: list[Optional[np.ndarray]] = []
        for index, (value, fact) in enumerate(zip(node.inputs, facts)):
            if value is None or fact is None:
                arrays.append(None)
            elif index in data:
                positions = np.arange(len(pool), len(pool) + len(fact.items), dtype=np.int64)
                arrays.append(positions.reshape(fact.shape))
                pool.extend(fact.items)
            elif fact.known:
                arrays.append(fact.array(value.dtype.np_dtype))
            else:
                return
        outputs = self._run(node, arrays)
        if not outputs:
            return
        produced = outputs[0]
        if produced.dtype.kind not in "iu" or produced.ndim != len(node.outputs[0].shape):
            return
        items = tuple(pool[int(p)] for p in produced.reshape(-1))
        info = np.iinfo(node.outputs[0].dtype.np_dtype)
        if all(not isinstance(i, int) or info.min <= i <= info.max for i in items):
            self.facts[node.outputs[0]] = _Facts(produced.shape, items)


def _broadcast_dims(source: list[Any], target: list[Any]) -> tuple[Any, ...]:
    """Expand's output dimensions for symbolic sizes (-1 where they cannot be told)."""
    rank = max(len(source), len(target))
    source = [1] * (rank - len(source)) + source
    target = [1] * (rank - len(target)) + target
    dims: list[Any] = []
    for have, want in zip(source, target):
        if want == 1 or have == want:
            dims.append(have)
        elif have == 1 or (isinstance(want, int) and want >= 0):
            dims.append(want)
        else:
            dims.append(have if isinstance(have, int) and have >= 0 else -1)
    return tuple(dims)


def reshape_spec(source: Value, items: Sequence[Symbol], allowzero: int = 0,
                 ) -> Optional[list[int]]:
    """A constant Reshape target giving ``source`` the dimensions ``items``, or None: a
    dimension ``source`` has at the same position becomes 0 (copy; not with ``allowzero``),
    one remaining unknown becomes -1 when all the others are positive sizes."""
    spec: list[Optional[int]] = []
    for position, item in enumerate(items):
        if isinstance(item, int):
            spec.append(item)
        elif not allowzero and position < len(source.shape) and \
                dim_symbol(source, position) == item:
            spec.append(0)
        else:
            spec.append(None)
    unknown = [i for i, v in enumerate(spec) if v is None]
    if len(unknown) == 1 and all(v is None or v > 0 for v in spec):
        spec[unknown[0]] = -1  # the element count fixes it (no copied or zero dims)
    return None if any(v is None for v in spec) else [int(v) for v in spec if v is not None]


def _expand_spec(source: Value, target: _Facts) -> Optional[list[int]]:
    """A constant Expand target: a dimension equal to the input's aligned one becomes 1."""
    offset = len(target.items) - len(source.shape)
    spec: list[int] = []
    for position, item in enumerate(target.items):
        axis = position - offset
        if isinstance(item, int):
            spec.append(item)
        elif axis >= 0 and dim_symbol(source, axis) == item:
            spec.append(1)
        else:
            return None
    return spec


def _adopt(values: Sequence[Value], shape: Optional[tuple[Any, ...]]) -> int:
    """Give the first value ``shape`` where it is better known and agrees; 1 if it did."""
    if shape is None or not values:
        return 0
    merged = _refined(values[0].shape, shape)
    if merged is None or merged == tuple(values[0].shape):
        return 0
    values[0].shape = merged
    return 1


class ShapeFoldingPass(Pass):
    """Fold shape computations, also where only some dimensions are static.

    before: ``s = Shape(x: [N,128,256]); b = Gather(s, 0); t = Gather(s, 1);
    r = Reshape(x, Concat(Unsqueeze(b), Unsqueeze(t), [4], [64]))`` -> after:
    ``r = Reshape(x, Const([0, 128, 4, 64]))`` (``t`` is static: 128; ``b`` is x's own
    dimension 0, which Reshape copies with 0). Likewise ``Shape``/``Size`` of a static
    value become constants; an ``Expand`` target dimension equal to the input's becomes
    1; a Reshape target with one unknown element left and positive others gets -1.
    Shapes are re-inferred on the way (producers first), so dimensions made known
    upstream help downstream. Elements are tracked through ``Gather``, ``Slice``,
    ``Concat``, ``Unsqueeze``/``Squeeze`` and other data movements by running the
    reference kernel on element positions.

    Refuses (leaves) a target with a dynamic element it cannot prove equal to an input
    dimension (another value's unknown, unnamed dimension), a 0 copy when the Reshape
    has ``allowzero=1``, and -1 next to copied or zero dimensions (the count could be 0).
    """

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        analysis = _ShapeAnalysis()
        folded: Counter[str] = Counter()
        targets: Counter[str] = Counter()
        refined = 0
        touched: list[Node] = []
        for node in graph.topological_order():
            if node.graph is not graph:
                continue
            if node.op_type in ("Reshape", "Expand") and self._resolve_target(
                    graph, node, analysis, touched):
                targets[node.op_type] += 1
            refined += refine_node(node, result) + _adopt(node.outputs, analysis.shape_of(node))
            analysis.visit(node)
            if node.op_type == "Const" or not is_foldable(node):
                continue
            known = {i: f.array(v.dtype.np_dtype) for i, v in enumerate(node.outputs)
                     if (f := analysis.facts.get(v)) is not None and f.known}
            if known and len(known) == len(node.outputs):
                touched.extend(node.predecessors())
                install_constants(graph, node, known)
                folded[node.op_type] += 1
        removed = remove_unused(graph, touched)
        for name, error in analysis.failures:
            result.fail(name, error)
        result.name_failures(self.name)
        self._report(result, folded, targets, refined, removed)
        return result

    @staticmethod
    def _resolve_target(graph: Graph, node: Node, analysis: _ShapeAnalysis,
                        touched: list[Node]) -> bool:
        target = node.inputs[1]
        if target is None or target.producer.op_type == "Const":
            return False
        facts = analysis.of(target)
        if facts is None or len(facts.shape) != 1:
            return False
        source = node.inputs[0]
        assert source is not None
        if node.op_type == "Reshape":
            spec = reshape_spec(source, facts.items, node.attrs.get("allowzero") or 0)
        else:
            spec = _expand_spec(source, facts)
        if spec is None:
            return False
        data = np.array(spec, dtype=target.dtype.np_dtype)
        const = graph.add_node("Const", [], {"value": Tensor(data)},
                               [TensorDesc(data.shape, target.dtype)],
                               graph.unique_name(f"{node.name}/shape"))
        touched.append(target.producer)
        node.replace_input_with(1, const.outputs[0])
        return True

    @staticmethod
    def _report(result: PassResult, folded: Counter[str], targets: Counter[str],
                refined: int, removed: int) -> None:
        if folded:
            result.count("folded", sum(folded.values()))
            result.note(f"folded {sum(folded.values())} shape computations into constants "
                        f"({_describe(folded)})")
        if targets:
            result.count("targets", sum(targets.values()))
            result.note(f"made {sum(targets.values())} dynamic shape targets constant "
                        f"({_describe(targets)})")
        if refined:
            result.count("refined", refined)
            result.note(f"refined the shapes of {refined} values")
        if removed:
            result.count("removed", removed)
            result.note(f"removed {removed} nodes left unused")
