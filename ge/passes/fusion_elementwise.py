"""Elementwise-region fusion: connected elementwise ops become one ``FusedElementwise``.

A region is not a fixed pattern (any tree or DAG of elementwise ops, of any
size), so this pass partitions the graph itself rather than going through the
rule driver: it walks the graph from its outputs back, starts a region at each
elementwise node not yet taken, and grows it through producers whose every
consumer is already in the region, the way fuse-ops passes in ML compilers
(TVM's FuseOps, XLA's instruction fusion) grow fusion groups.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Optional

from ge.errors import GEError
from ge.ir import DataType, Graph, Node, Value
from ge.ir.tensor import Shape
from ge.ops.fused_elementwise import (
    FUSED_ELEMENTWISE,
    Operand,
    Step,
    compute_dtype,
    format_steps,
    literal_input,
    literal_operand,
    parse_steps,
    step_for_node,
    step_refusal,
)
from ge.ops.registry import Trait, create_node, get_schema, has_op
from ge.passes.base import Pass, PassResult
from ge.passes.rewrite import remove_unused

__all__ = ["ElementwiseFusionPass", "MAX_FUSED_INPUTS"]

#: at most this many distinct tensor inputs per fused op (generated kernels take few operands)
MAX_FUSED_INPUTS = 16

#: a producer whose output broadcasts this many times or more into the region's output
#: stays out: inside, the fused loop would compute it again for every output element (a
#: squeeze-excite gate, sigmoid([1, 1, 1, C]) * x, took 0.67 ms fused over [1, 112, 112,
#: 32] against 0.05 ms for the sigmoid of 32 values and a broadcast multiply)
BROADCAST_RECOMPUTE = 4


@dataclass
class _Region:
    """A region being grown: its nodes (root first), their float dtype, its tensor inputs
    (value id -> count of reads from inside), and the producers it refused, with why."""

    root: Node
    dtype: DataType
    members: list[Node] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)  # producer id -> why it stayed out
    external: Counter[int] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.inside = {id(self.root)}
        self.members.append(self.root)
        self.external.update(self._outside_reads(self.root))

    def _outside_reads(self, node: Node) -> list[int]:
        return [id(v) for v in _tensor_inputs(node) if id(v.producer) not in self.inside]

    def inputs_with(self, node: Node) -> int:
        """How many tensor inputs the region would have with ``node`` inside."""
        count = len(self.external) - sum(1 for v in node.outputs if id(v) in self.external)
        return count + len({key for key in self._outside_reads(node)
                            if key not in self.external})

    def add(self, node: Node) -> None:
        self.members.append(node)
        self.inside.add(id(node))
        self.refused.pop(id(node), None)
        for value in node.outputs:
            self.external.pop(id(value), None)
        self.external.update(self._outside_reads(node))


class ElementwiseFusionPass(Pass):
    """Fuse connected elementwise ops into one ``FusedElementwise`` op.

    Before -> after::

        x -> Mul(., 0.5) -> Add(., b) -> Tanh -> y
        x, b -> FusedElementwise(steps=["Mul in0 0.5:float32", "Add s0 in1", "Tanh s1"]) -> y

    A region is a maximal connected set of at least ``min_ops`` elementwise nodes
    (the op's ``ELEMENTWISE`` trait, and a type in FusedElementwise's language) on
    one float dtype (bool values, e.g. a comparison feeding ``Where``, may flow
    inside). Every node but the region's root feeds only nodes of the region, so
    an intermediate may have several consumers if all are inside. One-element
    constants become literals; other values become the op's inputs. Existing
    ``FusedElementwise`` nodes are merged into a region like any other node.

    A producer stays out of its consumer's region, with the reason counted, when:
    its op is not in the language (``Cast``, ``Mod``, a ``BiasAdd`` on a channel
    axis that is not the last, ``Clip`` with bounds that are not constant), its
    tensors have another dtype than the region's (mixed dtypes) or an integer
    dtype, its output broadcasts ``BROADCAST_RECOMPUTE`` times or more into the
    region's, it has a consumer outside the region, it is a graph output, the region
    would have more than ``max_inputs`` tensor inputs, or the fused op's inferred
    output does not fit the root's (shapes that do not broadcast the same way).
    """

    def __init__(self, min_ops: int = 2, max_inputs: int = MAX_FUSED_INPUTS) -> None:
        self.min_ops = min_ops
        self.max_inputs = max_inputs
        self.refusals: Counter[str] = Counter()

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        self.refusals = Counter()
        order = graph.topological_order()
        position = {id(n): i for i, n in enumerate(order)}
        fused: Counter[str] = Counter()
        taken: set[int] = set()
        for node in reversed(order):
            if node.graph is not graph or id(node) in taken or not _elementwise(node):
                continue
            region = self._grow(node)
            if region is None:
                continue
            taken.update(region.inside)
            self.refusals.update(region.refused.values())
            members = sorted(region.members, key=lambda n: position[id(n)])
            if len(members) < 2 or _op_count(members) < self.min_ops:
                continue
            reason = self._fuse(graph, region.root, members, result)
            if reason is not None:
                self.refusals[reason] += 1
                continue
            fused["+".join(n.op_type for n in members)] += 1
        if fused:
            total = sum(fused.values())
            result.note(f"fused {total} elementwise regions into {FUSED_ELEMENTWISE} "
                        f"(most common: {fused.most_common(1)[0][0]})")
            result.count("regions", total)
        if self.refusals:
            reasons = "; ".join(f"{reason} ({n}x)" for reason, n in self.refusals.most_common(3))
            result.notes.append(f"left unfused: {reasons}")
        return result

    # -- partitioning ---------------------------------------------------------------------
    def _grow(self, root: Node) -> Optional[_Region]:
        """The region grown from ``root`` through its producers. A worklist holds the
        producers to consider; one refused because a consumer was outside is considered
        again when that consumer joins (each join re-offers the joiner's producers)."""
        if step_refusal(root) is not None:
            return None
        dtype = _region_dtype(root)
        if dtype is None:
            return None
        region = _Region(root, dtype)
        work = deque([root])
        while work:
            member = work.popleft()
            for value in member.inputs:
                if value is None or id(value.producer) in region.inside:
                    continue
                reason = self._refusal(value.producer, region)
                if reason is None:
                    region.add(value.producer)
                    work.append(value.producer)
                elif reason:
                    region.refused[id(value.producer)] = reason
        return region

    def _refusal(self, producer: Node, region: _Region) -> Optional[str]:
        """Why ``producer`` cannot join ``region`` ("" when it is simply not elementwise)."""
        if not _elementwise(producer):
            return ""
        reason = step_refusal(producer)
        if reason is not None:
            return reason
        factor = _broadcast_factor(producer, region.root)
        if factor >= BROADCAST_RECOMPUTE:
            return (f"a {producer.op_type} output broadcasts {factor}x into the region (it "
                    f"would be computed again for each)")
        dtype = _region_dtype(producer)
        if dtype is not None and dtype is not region.dtype:  # None: bool tensors only
            return f"mixed dtypes ({dtype.short_name} feeds a {region.dtype.short_name} region)"
        for value in producer.outputs:
            if value.is_graph_output():
                return f"a {producer.op_type} output is a graph output"
            outside = [u.node.op_type for u in value.users if id(u.node) not in region.inside]
            if outside:
                return f"a {producer.op_type} output also feeds {outside[0]} outside the region"
        if region.inputs_with(producer) > self.max_inputs:
            return f"the region would have more than {self.max_inputs} inputs"
        return None

    # -- rewriting -----------------------------------------------------------------------
    def _fuse(self, graph: Graph, root: Node, members: list[Node],
              result: PassResult) -> Optional[str]:
        """Replace ``members`` (producers first, ``root`` last) by one fused op."""
        builder = _StepBuilder(members)
        for member in members:
            builder.add(member)
        old = root.outputs[0]
        try:
            node = create_node(FUSED_ELEMENTWISE, builder.inputs,
                               {"steps": format_steps(builder.steps)},
                               graph.unique_name("fused_elementwise"), graph)
        except GEError as error:  # the region stays as it is; the report shows why
            result.fail(root.name, error)
            return f"the fused op cannot be built ({error})"
        new = node.outputs[0]
        if new.dtype is not old.dtype or not _shapes_fit(new.shape, old.shape):
            graph.remove_node(node)
            return (f"the fused op gives {new.dtype.short_name}{list(new.shape)}, the region "
                    f"{old.dtype.short_name}{list(old.shape)}")
        new.desc = old.desc
        root_name = root.name
        old.replace_all_uses_with(new)
        remove_unused(graph, members)
        graph.rename_node(node, root_name)
        if old.has_explicit_name:
            new.name = old.name
        return None


class _StepBuilder:
    """Turns a region's nodes (producers first) into steps and the fused op's inputs."""

    def __init__(self, members: list[Node]) -> None:
        self.inside = {id(m) for m in members}
        self.inputs: list[Value] = []
        self.steps: list[Step] = []
        self._input_of: dict[int, int] = {}
        self._result_of: dict[int, int] = {}  # node id -> step index of its output

    def _input(self, value: Value) -> Operand:
        if id(value) not in self._input_of:
            self._input_of[id(value)] = len(self.inputs)
            self.inputs.append(value)
        return Operand("input", self._input_of[id(value)])

    def _operand(self, node: Node, index: int) -> Operand:
        value = node.inputs[index]
        if value is None:
            return Operand("absent")
        if id(value.producer) in self.inside:
            return Operand("step", self._result_of[id(value.producer)])
        if node.op_type == FUSED_ELEMENTWISE:  # its steps decide shapes: keep its inputs
            return self._input(value)
        data = literal_input(node, index)
        return literal_operand(data) if data is not None else self._input(value)

    def add(self, node: Node) -> None:
        if node.op_type == FUSED_ELEMENTWISE:
            self._inline(node)
            return
        operands = [self._operand(node, i) for i in range(len(node.inputs))]
        self._result_of[id(node)] = len(self.steps)
        self.steps.append(step_for_node(node, operands))

    def _inline(self, node: Node) -> None:
        """An existing fused op's steps, renumbered into this region's."""
        offset = len(self.steps)
        mapped = [self._operand(node, i) for i in range(len(node.inputs))]
        for step in parse_steps(node.attrs["steps"]):
            operands = tuple(mapped[o.index] if o.kind == "input" else
                             Operand("step", o.index + offset) if o.kind == "step" else o
                             for o in step.operands)
            self.steps.append(Step(step.op_type, operands, step.attrs))
        self._result_of[id(node)] = len(self.steps) - 1


def _elementwise(node: Node) -> bool:
    return has_op(node.op_type) and get_schema(node.op_type).has_trait(Trait.ELEMENTWISE) \
        and not get_schema(node.op_type).has_trait(Trait.VIEW)


def _region_dtype(node: Node) -> Optional[DataType]:
    if node.op_type == FUSED_ELEMENTWISE:
        floats = {v.dtype for v in [*node.inputs, *node.outputs]
                  if v is not None and v.dtype.is_float}
        return floats.pop() if len(floats) == 1 else None
    return compute_dtype(node)


def _broadcast_factor(producer: Node, root: Node) -> int:
    """How many times the root's output is larger than the producer's, both shapes known
    (1 where either is not)."""
    sizes = []
    for node in (producer, root):
        shape = node.outputs[0].shape if node.outputs else ()
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            return 1
        size = 1
        for d in shape:
            size *= int(d)
        sizes.append(size)
    return sizes[1] // sizes[0] if sizes[0] else 1


def _op_count(members: list[Node]) -> int:
    return sum(len(m.attrs["steps"]) if m.op_type == FUSED_ELEMENTWISE else 1 for m in members)


def _tensor_inputs(node: Node) -> list[Value]:
    """The values ``node`` reads as tensors (one-element constants become literals)."""
    return [value for index, value in enumerate(node.inputs) if value is not None and
            (node.op_type == FUSED_ELEMENTWISE or literal_input(node, index) is None)]


def _shapes_fit(inferred: Shape, declared: Shape) -> bool:
    if len(inferred) != len(declared):
        return False
    return all(a == b or not isinstance(a, int) or not isinstance(b, int) or -1 in (a, b)
               for a, b in zip(inferred, declared))
