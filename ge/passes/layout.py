"""The layout pass: convolution chains in the layout the kernels prefer.

GE's reference convolution and pooling kernels work channels-last: given NCHW data they
transpose it to NHWC on the way in and back on the way out, at every layer. Timed one by
one on ResNet-50's 53 convolutions (the reference kernel the NumPy engine runs), the same
convolutions in NHWC with HWIO filters took 0.56x (wall clock, 68 against 121 ms) to 0.72x
(CPU time with one BLAS thread, 106 against 147 ms) the time of NCHW with OIHW filters at
batch 1, and 0.78x at batch 8; MobileNetV2's took 0.60x. So the pass targets NHWC by
default; ``LayoutPass(target=Format.NCHW)`` turns channels-last chains channels-first
instead, for an engine that prefers it.

Before -> after, for a region (a connected set of layout ops in the other layout with the
elementwise ops between them, holding at least one convolution)::

    x(NCHW) -> Conv2D(NCHW, OIHW) -> Relu -> MaxPool(NCHW) -> Flatten
    x(NCHW) -> Transpose(0,2,3,1) -> Conv2D(NHWC, HWIO) -> Relu -> MaxPool(NHWC)
            -> Transpose(0,3,1,2) -> Flatten

Layout ops (those the registry marks ``Trait.LAYOUT_SENSITIVE``, each with a ``LayoutRole``:
Conv2D, FusedConv2D, ConvBNReLU, MaxPool, AvgPool, GlobalAveragePool, GlobalMaxPool,
FusedBatchNorm, BiasAdd; on 4-D data) change ``data_format`` and reorder their 4-value
window attributes; constant filters are transposed once, at compile time
(OIHW -> HWIO); elementwise ops pass the layout through (their constants are transposed,
scalars kept), and so do ``Concat``, ``Split``, ``Slice`` and ``Resize`` on 4-D data,
with their axis (or constant axes, per-axis scales, sizes and region) renumbered: a
detector's neck (upsample, concat, split) stays channels-last instead of leaving the
region and coming back through two transposes. Transposes go only at the region's
ends, one per value that enters or leaves it, each recorded in the report with the
reason; a Transpose already in the graph that a region end would undo is cancelled
instead.

Refuses (leaves in place): regions without a convolution, ops with 4-value window
attributes that are not 1 on the batch and channel axes, elementwise ops with an
input of another rank that is neither a constant nor a scalar, and a ``Slice`` or
``Resize`` whose axes, scales or sizes are computed at run time.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ge.ir import Format, Graph, Node, Tensor, Value
from ge.ir.tensor import transposed_copy
from ge.ops.registry import LayoutRole, Trait, const_value, create_node, get_schema, has_op
from ge.ops.shape_utils import broadcast_shapes
from ge.passes.base import Pass, PassResult
from ge.passes.rewrite import remove_unused

__all__ = ["LayoutPass", "LayoutChange", "layout_role"]

_MAX_LISTED = 8


@dataclass(frozen=True)
class LayoutChange:
    """From one 4-D layout to the other: the permutations of data and of filters."""

    source: Format
    target: Format

    @property
    def to_target(self) -> tuple[int, ...]:
        """The Transpose perm that turns source-layout data into target-layout data."""
        return (0, 2, 3, 1) if self.target is Format.NHWC else (0, 3, 1, 2)

    @property
    def to_source(self) -> tuple[int, ...]:
        """The Transpose perm back."""
        return (0, 3, 1, 2) if self.target is Format.NHWC else (0, 2, 3, 1)

    @property
    def filter_formats(self) -> tuple[str, str]:
        """(source filter format, target filter format)."""
        return ("OIHW", "HWIO") if self.target is Format.NHWC else ("HWIO", "OIHW")

    @property
    def filter_perm(self) -> tuple[int, ...]:
        """The perm that turns a source-format filter into a target-format one."""
        return (2, 3, 1, 0) if self.target is Format.NHWC else (3, 2, 0, 1)


def layout_role(op_type: str) -> Optional[LayoutRole]:
    """How ``op_type`` reads 4-D data, when the registry marks it layout-sensitive; None
    for every other op (and an unknown one)."""
    if not has_op(op_type):
        return None
    schema = get_schema(op_type)
    return schema.layout if schema.has_trait(Trait.LAYOUT_SENSITIVE) else None


# -- which nodes can change layout ------------------------------------------------------

def _scalar_like(value: Value) -> bool:
    return all(dim == 1 for dim in value.shape)


def _window_fits(node: Node, names: Iterable[str], change: LayoutChange) -> bool:
    """False when a 4-value window attribute is not 1 on the batch and channel axes."""
    channel = 1 if change.source is Format.NCHW else 3
    for name in names:
        values = node.attrs.get(name)
        if values is not None and len(values) == 4 and (values[0] != 1 or values[channel] != 1):
            return False
    return True


def _is_layout_op(node: Node, change: LayoutChange) -> bool:
    spec = layout_role(node.op_type)
    if spec is None or node.attrs.get("data_format") is not change.source:
        return False
    if any(value.rank != 4 for value in node.outputs):
        return False
    for index in spec.activations:
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is not None and value.rank != 4:
            return False
    return _window_fits(node, spec.window_attrs, change)


def _broadcasts_to_output(node: Node) -> bool:
    merged = broadcast_shapes(*(v.shape for v in node.inputs if v is not None))
    if merged is None:
        return False
    return all(not (isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 0 and a != b)
               for a, b in zip(merged, node.outputs[0].shape))


def _is_elementwise_member(node: Node) -> bool:
    """An elementwise op on 4-D data whose every input is 4-D, a constant or a scalar."""
    if not has_op(node.op_type):
        return False
    schema = get_schema(node.op_type)
    if not schema.has_trait(Trait.ELEMENTWISE) or "data_format" in schema.attrs:
        return False
    if len(node.outputs) != 1 or node.outputs[0].rank != 4:
        return False
    for value in node.inputs:
        if value is None or value.rank == 4 or _scalar_like(value):
            continue
        if const_value(value) is None or value.rank > 4:
            return False
    return _broadcasts_to_output(node)


#: ops that carry the layout through an axis argument (a region member: its axis, its
#: constant axes or per-axis scales, are renumbered) -> the input slots holding data
_AXIS_OPS: dict[str, Optional[tuple[int, ...]]] = {
    "Concat": None, "Split": (0,), "Slice": (0,), "Resize": (0,)}


def _constant_ints(node: Node, index: int) -> Optional[list[int]]:
    value = node.inputs[index] if index < len(node.inputs) else None
    data = None if value is None else const_value(value)
    return None if data is None else [int(v) for v in data.reshape(-1)]


def _is_axis_member(node: Node) -> bool:
    """A 4-D ``Concat``, ``Split``, ``Slice`` or ``Resize`` whose axes (or per-axis
    scales, sizes and region) are attributes or constants, so they can be renumbered."""
    if node.op_type not in _AXIS_OPS or not has_op(node.op_type):
        return False
    if any(value.rank != 4 for value in node.outputs):
        return False
    slots = _AXIS_OPS[node.op_type]
    data = [node.inputs[i] for i in (range(len(node.inputs)) if slots is None else slots)]
    if any(value is None or value.rank != 4 for value in data):
        return False
    if node.op_type == "Slice":
        axes = _constant_ints(node, 3)
        return axes is not None and all(-4 <= a < 4 for a in axes)
    if node.op_type == "Resize":
        if node.attrs.get("axes") is not None:
            return False
        for index in (1, 2, 3):
            value = node.inputs[index] if index < len(node.inputs) else None
            if value is not None and const_value(value) is None:
                return False
        values = [const_value(v) for v in node.inputs[1:4] if v is not None]
        return all(v is not None and v.size in (0, 4, 8) for v in values)
    return True


def _layout_slots(node: Node) -> Sequence[int]:
    """The input slots of a region member that read data in the member's layout."""
    spec = layout_role(node.op_type)
    if spec is not None:
        return spec.activations
    slots = _AXIS_OPS.get(node.op_type)
    return slots if slots is not None else range(len(node.inputs))


def _activation_inputs(node: Node) -> list[tuple[int, Value]]:
    """(slot, value) of each input of a region member that carries layout-bearing data."""
    found = []
    for index in _layout_slots(node):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is not None and not _scalar_like(value):
            found.append((index, value))
    return found


def _find_regions(graph: Graph, change: LayoutChange) -> list[list[Node]]:
    """Connected sets of layout ops (and elementwise ops between them), topologically."""
    order = graph.topological_order()
    position = {id(node): index for index, node in enumerate(order)}
    member = {id(n): (_is_layout_op(n, change) or _is_elementwise_member(n)
                      or _is_axis_member(n)) for n in order}
    seen: set[int] = set()
    regions: list[list[Node]] = []
    for seed in order:
        if id(seed) in seen or not _is_layout_op(seed, change):
            continue
        region, queue = [], deque([seed])
        seen.add(id(seed))
        while queue:
            node = queue.popleft()
            region.append(node)
            neighbours = [value.producer for _, value in _activation_inputs(node)]
            neighbours += node.successors()
            for other in neighbours:
                if member.get(id(other)) and id(other) not in seen:
                    seen.add(id(other))
                    queue.append(other)
        regions.append(sorted(region, key=lambda n: position[id(n)]))
    return regions


def _has_convolution(region: Sequence[Node]) -> bool:
    return any((spec := layout_role(n.op_type)) is not None and spec.convolution
               for n in region)


# -- the conversion ---------------------------------------------------------------------

def _describe(node: Node) -> str:
    return f"{node.op_type} {node.name!r}"


class _Converter:
    """Turns regions to the target layout, sharing end transposes and new constants."""

    def __init__(self, graph: Graph, change: LayoutChange) -> None:
        self.graph, self.change = graph, change
        self.inside: set[int] = set()
        self.entries: dict[int, Value] = {}
        self.constants: dict[tuple[int, str], Value] = {}
        self.replaced: list[Node] = []
        self.converted: Counter[str] = Counter()
        self.transposes: list[str] = []
        self.cancelled: list[str] = []

    def convert(self, region: Sequence[Node]) -> None:
        """Change every node of ``region`` (in topological order), then close its exits."""
        self.inside.update(id(node) for node in region)
        for node in region:
            self._convert_node(node)
        for node in region:
            for value in node.outputs:
                self._close_exit(value)

    def _convert_node(self, node: Node) -> None:
        change = self.change
        for index, value in _activation_inputs(node):
            if id(value.producer) not in self.inside:
                node.replace_input_with(index, self._entry(value, node))
        spec = layout_role(node.op_type)
        if spec is not None:
            self._convert_layout_attrs(node, spec)
        elif node.op_type in _AXIS_OPS:
            self._convert_axes(node)
        for value in node.outputs:
            value.shape = tuple(value.shape[axis] for axis in change.to_target)
            value.format = change.target
        self.converted[node.op_type] += 1

    def _convert_layout_attrs(self, node: Node, spec: LayoutRole) -> None:
        change = self.change
        node.attrs["data_format"] = change.target
        for name in spec.window_attrs:
            values = node.attrs.get(name)
            if values is not None and len(values) == 4:
                node.attrs[name] = [values[axis] for axis in change.to_target]
        if spec.filter is None:
            return
        source_format, target_format = change.filter_formats
        current = node.attrs.get("filter_format") or source_format
        weights = node.inputs[spec.filter]
        assert weights is not None
        if current == source_format and isinstance(weights.producer.attrs.get("value"), Tensor) \
                and weights.producer.op_type == "Const":
            node.replace_input_with(spec.filter, self._constant(weights, "filter"))
            current = target_format
        node.attrs["filter_format"] = current

    def _convert_axes(self, node: Node) -> None:
        """Renumber an axis member's axis (``Concat``, ``Split``), constant axes
        (``Slice``) or per-axis scales, sizes and region (``Resize``)."""
        target = list(self.change.to_target)
        if node.op_type in ("Concat", "Split"):
            node.attrs["axis"] = target.index(int(node.attrs["axis"]) % 4)
        elif node.op_type == "Slice":
            axes = _constant_ints(node, 3)
            assert axes is not None
            node.replace_input_with(3, self._array([target.index(a % 4) for a in axes],
                                                   node, "axes", np.int64))
        else:
            for index in (1, 2, 3):
                value = node.inputs[index] if index < len(node.inputs) else None
                data = None if value is None else const_value(value)
                if data is None or data.size == 0:
                    continue
                halves = data.reshape(-1, 4)[:, target].reshape(-1)
                node.replace_input_with(index, self._array(halves, node, "axes", data.dtype))

    def _array(self, values: Any, node: Node, what: str, dtype: Any) -> Value:
        array = np.array(values, dtype=dtype)
        array.setflags(write=False)
        name = self.graph.unique_name(f"{node.name}/{what}_{self.change.target.value.lower()}")
        return create_node("Const", [], {"value": Tensor.wrap(array)}, name,
                           self.graph).outputs[0]

    def _constant(self, value: Value, kind: str) -> Value:
        """``value`` (a constant) transposed once: a filter, or data broadcast to 4-D."""
        key = (id(value), kind)
        if key not in self.constants:
            tensor = value.producer.attrs["value"]
            assert isinstance(tensor, Tensor)
            if kind == "filter":
                # Transposed when first read: a pending batch-norm scaling is done in the
                # same pass.
                moved = tensor.transposed(self.change.filter_perm)
            else:
                data = tensor.numpy()
                array = transposed_copy(data.reshape((1,) * (4 - data.ndim) + data.shape),
                                        self.change.to_target)
                array.setflags(write=False)
                moved = Tensor.wrap(array)
            name = self.graph.unique_name(f"{value.producer.name}/{self.change.target.value}")
            self.constants[key] = create_node("Const", [], {"value": moved}, name,
                                              self.graph).outputs[0]
            self.replaced.append(value.producer)
        return self.constants[key]

    def _entry(self, value: Value, reader: Node) -> Value:
        """``value`` (source layout, from outside the region) in the target layout."""
        if const_value(value) is not None:
            return self._constant(value, "data")
        if id(value) in self.entries:
            return self.entries[id(value)]
        producer, perm = value.producer, list(self.change.to_target)
        source = value
        if producer.op_type == "Transpose" and producer.attrs.get("perm") is not None and \
                producer.inputs[0] is not None and id(producer.inputs[0].producer) not in \
                self.inside:
            inner = producer.attrs["perm"]
            perm, source = [inner[axis] for axis in perm], producer.inputs[0]
        if source is not value:
            self.replaced.append(producer)
        if perm == [0, 1, 2, 3]:
            self.cancelled.append(f"{_describe(producer)} before {_describe(reader)}")
            result = source
        else:
            result = self._transpose(source, perm, self.change.target)
            why = (f"graph input {value.name!r}" if producer.op_type == "Data"
                   else f"{_describe(producer)}'s output")
            self.transposes.append(f"before {_describe(reader)} ({why} is "
                                   f"{self.change.source.value})")
        self.entries[id(value)] = result
        return result

    def _transpose(self, value: Value, perm: Sequence[int], layout: Format) -> Value:
        name = self.graph.unique_name(f"{value.producer.name}/to_{layout.value.lower()}")
        return create_node("Transpose", [value], {"perm": list(perm)}, name,
                           self.graph).outputs[0]

    def _close_exit(self, value: Value) -> None:
        """Give readers outside the region (and the graph outputs) the source layout."""
        outside = [u for u in value.users if id(u.node) not in self.inside
                   or u.input_index not in _layout_slots(u.node)]
        is_output = value.is_graph_output()
        if not outside and not is_output:
            return
        back = self._transpose(value, self.change.to_source, self.change.source)
        for usage in outside:
            usage.node.replace_input_with(usage.input_index, back)
        readers = ", ".join(_describe(u.node) for u in outside[:2])
        if is_output:
            self._keep_output_name(value, back)
            readers = "the graph output" + (f", {readers}" if readers else "")
        self.transposes.append(f"after {_describe(value.producer)} (read in "
                               f"{self.change.source.value} by {readers})")

    def _keep_output_name(self, value: Value, back: Value) -> None:
        """The graph output keeps its name: the transpose's output takes it."""
        name = value.name
        self.graph.replace_output(value, back)
        value.name = self.graph.unique_name(f"{name}/{self.change.target.value.lower()}")
        back.name = name


def _listing(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_MAX_LISTED])
    return shown + (f"; and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


class LayoutPass(Pass):
    """Convolution chains in the layout the kernels prefer (NHWC unless told otherwise).

    Before -> after: a connected region of NCHW layout ops (convolutions, pools, batch
    norms, bias adds) and the elementwise ops between them -> the same ops in NHWC, with
    constant filters transposed OIHW -> HWIO at compile time and one Transpose per value
    entering or leaving the region (recorded in the report with its reason); the node
    count grows only by those. Refuses regions without a convolution (their transposes
    would cost more than they save) and ops it cannot move (see the module docstring).
    """

    def __init__(self, target: Format = Format.NHWC) -> None:
        if target not in (Format.NHWC, Format.NCHW):
            raise ValueError(f"a layout target is NHWC or NCHW, not {target}")
        source = Format.NCHW if target is Format.NHWC else Format.NHWC
        self.change = LayoutChange(source, target)

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        regions = _find_regions(graph, self.change)
        chosen = [region for region in regions if _has_convolution(region)]
        converter = _Converter(graph, self.change)
        for region in chosen:
            converter.convert(region)
        remove_unused(graph, converter.replaced)
        self._report(result, converter, len(chosen), len(regions) - len(chosen))
        return result

    def _report(self, result: PassResult, converter: _Converter, regions: int, left: int
                ) -> None:
        change = self.change
        if converter.converted:
            ops = ", ".join(f"{count} {op}" for op, count in converter.converted.most_common())
            result.note(f"converted {sum(converter.converted.values())} ops to "
                        f"{change.target.value} in {regions} region(s): {ops}")
            result.count("ops converted", sum(converter.converted.values()))
        if converter.constants:
            result.count("constants transposed", len(converter.constants))
        if converter.transposes:
            result.note(f"inserted {len(converter.transposes)} Transpose at region ends: "
                        f"{_listing(converter.transposes)}")
            result.count("transposes inserted", len(converter.transposes))
        if converter.cancelled:
            result.note(f"cancelled {len(converter.cancelled)} existing Transpose: "
                        f"{_listing(converter.cancelled)}")
        if left:
            result.notes.append(f"left {left} {change.source.value} region(s) without a "
                                f"convolution as they are")
