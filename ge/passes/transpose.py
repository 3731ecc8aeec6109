"""Transposes pushed down through the ops that only move or map elements, until they
meet another transpose and cancel.

The layout pass leaves a channels-last region through a transpose at each end. Where
the data goes on through ops that do not care about axis order (elementwise math, a
``Slice``, a ``Squeeze`` or ``Unsqueeze`` of size-1 axes) into another channels-last
region, the two transposes undo each other around those ops: an audio model's
magnitude spectrum, ``Conv -> to_nchw -> Squeeze -> Slice, Slice -> Mul, Mul, Add ->
Sqrt -> Unsqueeze -> to_nhwc -> Conv``. ``TransposeSinkingPass`` runs those ops on the
untransposed data instead (each axis argument renumbered) and moves the transpose to the
region's exits, where it composes with the transpose it meets (``NoOpEliminationPass``
then cancels the pair)::

    t = Transpose(x, P); y = Sqrt(Squeeze(t, A))  ->  y = Transpose(Sqrt(Squeeze(x, A')), P')

A region is every op reachable from one transpose through such ops whose other inputs
are single elements or transposes by the same permutation. It is rewritten only when
that removes transposes: the transposes feeding it that it takes whole, against those it
adds at exits that feed anything but a transpose. Refuses regions holding a graph output
(its name must stay on its node), ops whose axes are computed at run time, and
elementwise ops whose operands have different ranks.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Optional

import numpy as np

from ge.ir import Graph, Node, Tensor, Value
from ge.ops.registry import Trait, const_value, create_node, op_has_trait
from ge.passes.base import Pass, PassResult
from ge.passes.rewrite import remove_unused

__all__ = ["TransposeSinkingPass", "FlattenedTransposeFoldingPass"]

#: ops a region may hold besides elementwise ones
_AXIS_OPS = ("Squeeze", "Unsqueeze", "Slice")
#: the most ops one region may hold (a bound on the search, not a limit real graphs meet)
_MAX_REGION = 256

Perm = tuple[int, ...]


def _perm_of(node: Node) -> Optional[Perm]:
    """A Transpose's permutation (None: not a transpose of known rank)."""
    if node.op_type != "Transpose" or not node.inputs or node.inputs[0] is None:
        return None
    source = node.inputs[0]
    if not source.shape:
        return None
    perm = node.attrs.get("perm")
    rank = len(source.shape)
    return tuple(reversed(range(rank))) if perm is None else tuple(int(p) % rank for p in perm)


def _scalar(value: Optional[Value]) -> bool:
    return value is not None and len(value.shape) <= 1 and all(d == 1 for d in value.shape)


def _constant_axes(node: Node, index: int, rank: int) -> Optional[list[int]]:
    value = node.inputs[index] if index < len(node.inputs) else None
    data = None if value is None else const_value(value)
    if data is None:
        return None
    return [int(a) % rank for a in np.asarray(data).reshape(-1)]


class _Region:
    """The ops found from one transpose, each value's permutation back to the
    untransposed frame, and what the rewrite would cost."""

    def __init__(self) -> None:
        self.ops: list[Node] = []
        self.member: set[int] = set()
        self.perms: dict[int, Perm] = {}  # id(value) -> P: value = transpose(source, P)
        self.entries: dict[int, Node] = {}  # id(transpose) -> transpose read by the region


def _output_perm(node: Node, perms: dict[int, Perm]) -> Optional[Perm]:
    """The permutation of ``node``'s output when its data inputs carry ``perms``, or None
    when the node cannot run on the untransposed data."""
    if node.op_type == "Transpose" or len(node.outputs) != 1:
        return None
    out = node.outputs[0]
    if out.is_graph_output():
        return None
    if node.op_type in _AXIS_OPS:
        data = node.inputs[0]
        perm = perms.get(id(data)) if data is not None else None
        if perm is None or any(id(v) in perms for v in node.inputs[1:] if v is not None):
            return None
        rank = len(perm)
        if node.op_type == "Slice":
            if _slice_axes(node, rank) is None:
                return None
            return perm
        if node.op_type == "Squeeze":
            axes = _constant_axes(node, 1, rank)
            if axes is None or data is None or any(data.shape[a] != 1 for a in axes):
                return None
            kept = [perm[i] for i in range(rank) if i not in axes]
            order = sorted(kept)
            return tuple(order.index(p) for p in kept)
        axes = _constant_axes(node, 1, rank + len(_inputs_axes(node)))
        if axes is None:
            return None
        width = rank + len(axes)
        result: list[int] = []
        remaining, added = iter(perm), rank
        for position in range(width):
            if position in axes:
                result.append(added)
                added += 1
            else:
                result.append(next(remaining))
        return tuple(result)
    if not op_has_trait(node.op_type, Trait.ELEMENTWISE):
        return None
    operands = [v for v in node.inputs if v is not None and not _scalar(v)]
    found = {perms.get(id(v)) for v in operands}
    if len(found) != 1 or None in found:
        return None
    common = found.pop()
    assert common is not None
    if len(out.shape) != len(common) or any(len(v.shape) != len(common) for v in operands):
        return None
    return common


def _slice_axes(node: Node, rank: int) -> Optional[list[int]]:
    """A Slice's axes: its constant ``axes`` input, else the first as many axes as it
    has starts (None when computed at run time or of unknown count)."""
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        return _constant_axes(node, 3, rank)
    starts = node.inputs[1]
    if starts is None or len(starts.shape) != 1 or not isinstance(starts.shape[0], int) \
            or starts.shape[0] < 0:
        return None
    return list(range(starts.shape[0]))


def _inputs_axes(node: Node) -> list[int]:
    """An Unsqueeze's axes as given (their count decides the output's rank)."""
    value = node.inputs[1] if len(node.inputs) > 1 else None
    data = None if value is None else const_value(value)
    return [] if data is None else [int(a) for a in np.asarray(data).reshape(-1)]


def _grow(start: Node) -> Optional[_Region]:
    """The region reachable from transpose ``start``, or None when it is empty."""
    region = _Region()
    perm = _perm_of(start)
    if perm is None:
        return None
    region.perms[id(start.outputs[0])] = perm
    region.entries[id(start)] = start
    queue = deque([start.outputs[0]])
    while queue:
        value = queue.popleft()
        for use in value.users:
            node = use.node
            if id(node) in region.member or len(region.ops) >= _MAX_REGION:
                continue
            for operand in node.inputs:  # other transposes by the same perm may feed it
                if operand is None or id(operand) in region.perms:
                    continue
                other = operand.producer
                other_perm = _perm_of(other) if other is not None else None
                if other_perm is not None and other_perm == perm:
                    region.perms[id(operand)] = other_perm
                    region.entries[id(other)] = other
            out_perm = _output_perm(node, region.perms)
            if out_perm is None:
                continue
            region.ops.append(node)
            region.member.add(id(node))
            region.perms[id(node.outputs[0])] = out_perm
            queue.append(node.outputs[0])
    return region if region.ops else None


def _exits(region: _Region) -> list[tuple[Value, list[Node]]]:
    """Each region value read outside the region, with those readers."""
    found = []
    for node in region.ops:
        value = node.outputs[0]
        outside = [use.node for use in value.users if id(use.node) not in region.member]
        if outside:
            found.append((value, outside))
    return found


def _worth_it(region: _Region) -> bool:
    """True when the rewrite removes more transposes than it adds."""
    removed = sum(1 for entry in region.entries.values()
                  if all(id(use.node) in region.member for use in entry.outputs[0].users)
                  and not entry.outputs[0].is_graph_output())
    added = sum(1 for _, readers in _exits(region)
                if any(reader.op_type != "Transpose" for reader in readers))
    return added < removed


def _axes_input(graph: Graph, node: Node, index: int, data: list[int],
                made: dict[tuple[int, ...], Value]) -> Value:
    """A constant int64 vector ``data`` for input ``index`` of ``node``'s replacement: the
    node's own constant when it already holds those values, else one made in this
    rewrite for them, else a new one."""
    old = node.inputs[index] if index < len(node.inputs) else None
    given = None if old is None else const_value(old)
    if old is not None and given is not None and \
            [int(v) for v in np.asarray(given).reshape(-1)] == data:
        return old
    key = tuple(data)
    if key not in made:
        array = np.array(data, np.int64)
        array.setflags(write=False)
        made[key] = create_node("Const", [], {"value": Tensor.wrap(array)},
                                graph.unique_name(f"{node.name}/axes"), graph).outputs[0]
    return made[key]


def _rewrite(graph: Graph, region: _Region) -> None:
    """Run the region's ops on the untransposed data; a transpose at each exit."""
    source: dict[int, Value] = {}  # id(region value) -> its untransposed counterpart
    made: dict[tuple[int, ...], Value] = {}
    for entry in region.entries.values():
        untransposed = entry.inputs[0]
        assert untransposed is not None
        source[id(entry.outputs[0])] = untransposed
    for node in region.ops:  # in discovery order: every op after its region inputs
        data = node.inputs[0]
        assert data is not None
        perm_in = region.perms.get(id(data))
        inputs = [source.get(id(v), v) if v is not None else None for v in node.inputs]
        if node.op_type == "Squeeze":
            assert perm_in is not None
            axes = _constant_axes(node, 1, len(perm_in)) or []
            inputs[1] = _axes_input(graph, node, 1, sorted(perm_in[a] for a in axes), made)
        elif node.op_type == "Unsqueeze":
            assert perm_in is not None
            count = len(_inputs_axes(node))
            rank = len(perm_in)
            inputs[1] = _axes_input(graph, node, 1, list(range(rank, rank + count)), made)
        elif node.op_type == "Slice":
            assert perm_in is not None
            sliced = _slice_axes(node, len(perm_in))
            assert sliced is not None
            while len(inputs) < 4:
                inputs.append(None)
            inputs[3] = _axes_input(graph, node, 3, [perm_in[a] for a in sliced], made)
        moved = create_node(node.op_type, inputs, dict(node.attrs),
                            graph.unique_name(node.name), graph)
        source[id(node.outputs[0])] = moved.outputs[0]
    for value, readers in _exits(region):
        perm = region.perms[id(value)]
        back = create_node("Transpose", [source[id(value)]], {"perm": list(perm)},
                           graph.unique_name(f"{value.producer.name}/transpose"), graph)
        back.outputs[0].format = value.format
        for reader in readers:
            for index, operand in enumerate(reader.inputs):
                if operand is value:
                    reader.replace_input_with(index, back.outputs[0])


class TransposeSinkingPass(Pass):
    """Transposes moved down through elementwise ops, ``Slice``, ``Squeeze`` and
    ``Unsqueeze`` to where they meet another transpose (see the module docstring);
    only where that leaves fewer transposes."""

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        done: set[int] = set()
        changed = True
        while changed:
            changed = False
            for node in list(graph.nodes):
                if node.op_type != "Transpose" or id(node) in done or node.graph is None:
                    continue
                done.add(id(node))
                region = _grow(node)
                if region is None or not _worth_it(region):
                    continue
                replaced = list(region.ops)
                _rewrite(graph, region)
                remove_unused(graph, replaced + list(region.entries.values()))
                result.count("regions the transposes left", 1)
                result.count("ops now on untransposed data", len(replaced))
                changed = True
                break
        if result.changed:
            result.note(f"moved transposes past {result.counts['ops now on untransposed data']}"
                        f" ops in {result.counts['regions the transposes left']} regions, to "
                        f"where they meet another transpose")
        return result


# -- a transpose before a flatten into a product -----------------------------------------

#: products whose first operand (untransposed) meets a constant weight matrix
_PRODUCTS = ("Gemm", "MatMul", "MatMulBiasAdd")


def _single_reader(value: Value) -> Optional[Node]:
    """The one node that reads ``value`` (and reads it once), unless it is an output."""
    users = value.users
    if len(users) != 1 or value.is_graph_output():
        return None
    return users[0].node


def _flattens_features(node: Node, source: Value) -> bool:
    """Whether ``node`` turns ``source`` [N, ...] into [N, K] whatever the axis order
    after N: Flatten at axis 1, or Reshape to two constant dims (N or 0 or -1, then K or
    -1)."""
    out = node.outputs[0]
    if len(out.shape) != 2 or not source.shape or out.shape[0] != source.shape[0]:
        return False
    if node.op_type == "Flatten":
        return int(node.attrs.get("axis", 1)) == 1
    if node.op_type != "Reshape" or len(node.inputs) < 2 or node.attrs.get("allowzero"):
        return False
    shape = None if node.inputs[1] is None else const_value(node.inputs[1])
    if shape is None or np.asarray(shape).size != 2:
        return False
    first, second = (int(v) for v in np.asarray(shape).reshape(-1))
    return first in (0, -1, out.shape[0]) and second in (-1, out.shape[1]) and second != 0


def _weight_axis(product: Node) -> Optional[int]:
    """The axis of the product's constant weight that meets the flattened features (0:
    rows, 1: columns), or None where the product does not read them plainly."""
    weight = product.inputs[1] if len(product.inputs) > 1 else None
    if weight is None or const_value(weight) is None or len(weight.shape) != 2:
        return None
    if product.op_type == "Gemm":
        if int(product.attrs.get("transA", 0)):
            return None
        return 1 if int(product.attrs.get("transB", 0)) else 0
    if product.attrs.get("transpose_a"):
        return None
    return 1 if product.attrs.get("transpose_b") else 0


def _fold(graph: Graph, transpose: Node) -> bool:
    """Fold ``transpose`` into the weight of the product its flatten feeds (see
    ``FlattenedTransposeFoldingPass``); whether it did."""
    perm = _perm_of(transpose)
    source = transpose.inputs[0]
    if perm is None or source is None or len(perm) < 3 or perm[0] != 0:
        return False
    features = [d for d in source.shape[1:] if isinstance(d, int) and d >= 0]
    if len(features) != len(source.shape) - 1:
        return False
    flatten = _single_reader(transpose.outputs[0])
    if flatten is None or flatten.inputs[0] is not transpose.outputs[0] \
            or not _flattens_features(flatten, transpose.outputs[0]):
        return False
    product = _single_reader(flatten.outputs[0])
    if product is None or product.op_type not in _PRODUCTS \
            or product.inputs[0] is not flatten.outputs[0]:
        return False
    axis = _weight_axis(product)
    if axis is None:
        return False
    weight_value = product.inputs[1]
    assert weight_value is not None  # _weight_axis found a constant there
    weight = np.asarray(const_value(weight_value))
    size = math.prod(features)
    if weight.shape[axis] != size:
        return False
    # feature f of the transposed order is feature order[f] of the source's own order
    order = np.arange(size).reshape(features).transpose([p - 1 for p in perm[1:]]).reshape(-1)
    permuted = np.empty_like(weight)
    if axis == 0:
        permuted[order] = weight
    else:
        permuted[:, order] = weight
    name = graph.unique_name(f"{weight_value.name}/features_untransposed")
    folded = create_node("Const", [], {"value": Tensor(permuted)}, name, graph).outputs[0]
    flatten.replace_input_with(0, source)
    product.replace_input_with(1, folded)
    remove_unused(graph, [transpose])
    return True


class FlattenedTransposeFoldingPass(Pass):
    """Transpose -> Flatten (or Reshape to [N, K]) -> a product with a constant weight,
    where the transpose keeps axis 0 in place: the flatten reads the untransposed data
    and the weight's K rows (columns for Gemm's ``transB``) are permuted once to match,
    so the transpose is gone. The layout pass's ``to_nchw`` before a CNN classifier's
    flatten and fully connected layer is the case it is for. Taken when the sizes after
    axis 0 are static, each node is its predecessor's only reader, and the product reads
    the flattened data as its first operand, untransposed."""

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        for node in list(graph.nodes):
            if node.op_type == "Transpose" and node.graph is graph and _fold(graph, node):
                result.count("transposes folded into weights", 1)
        if result.changed:
            result.note(f"folded {result.counts['transposes folded into weights']} transposes "
                        f"before a flatten into the next product's constant weight")
        return result
