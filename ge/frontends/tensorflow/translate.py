"""What a TensorFlow op translator sees, and the table of translators.

A translator turns one TensorFlow node into registry ops. It receives a ``NodeContext``
(the node's data inputs as GE values, its attributes decoded on demand, helpers to add
ops and constants and to read an input that constants determine) and returns the GE
value of each TensorFlow output: one ``Value``, or a sequence with ``None`` for an
output it does not produce (the importer refuses a model that reads one).

The op families register their translators by importing this module:
``translate_math`` (elementwise arithmetic, activations, reductions), ``translate_nn``
(convolutions, pooling, batch norm, matrix products) and ``translate_array`` (shapes,
slicing, joining, casts, generators). ``translators()`` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np

from ge.errors import GEError, ModelFormatError, UnsupportedOpError
from ge.frontends.tensorflow.protobuf import NodeDef, to_ge_dtype
from ge.ir import DataType, Graph, Node, Tensor, Value, is_static, num_elements
from ge.ops import Trait, create_node, get_schema, run_kernel
from ge.ops.registry import const_value

__all__ = ["NodeContext", "GraphBuilder", "Translator", "translates", "translators",
           "PASSTHROUGH_OPS"]

Result = Union[Value, Sequence[Optional[Value]], None]
Translator = Callable[["NodeContext"], Result]

_TRANSLATORS: dict[str, Translator] = {}

#: ops whose output is their first input (Identity and its kin), handled by the importer
PASSTHROUGH_OPS = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient",
                             "EnsureShape", "CheckNumerics", "PlaceholderWithDefault"})

# the largest constant the parse-time folding computes (elements of any input or output)
_FOLD_LIMIT = 1 << 16
_FOLD_DEPTH = 64


def translates(*op_types: str) -> Callable[[Translator], Translator]:
    """Decorator: register a translator for TensorFlow ``op_types``."""

    def register(function: Translator) -> Translator:
        for op_type in op_types:
            if op_type in _TRANSLATORS:
                raise ValueError(f"TensorFlow op {op_type} has two translators")
            _TRANSLATORS[op_type] = function
        return function

    return register


def translators() -> dict[str, Translator]:
    """Every registered translator by TensorFlow op type (the families imported)."""
    from ge.frontends.tensorflow import (  # noqa: F401 - each module registers translators
        translate_array,
        translate_math,
        translate_nn,
    )

    return _TRANSLATORS


class GraphBuilder:
    """The GE graph under construction: fresh node names that no TensorFlow node has
    (those are kept for the nodes they name), and constants folded at parse time."""

    def __init__(self, graph: Graph, reserved: set[str]) -> None:
        self.graph = graph
        self.reserved = reserved
        self._folded: dict[int, Optional[np.ndarray]] = {}

    def fresh(self, base: str) -> str:
        """A node name that neither a GE node nor a TensorFlow node has."""
        name, count = base, 0
        while name in self.reserved or self.graph.has_node(name):
            count += 1
            name = f"{base}_{count}"
        return name

    def add(self, op_type: str, inputs: Sequence[Optional[Value]],
            attrs: Optional[dict[str, Any]], name: str) -> Node:
        """Add a registry op, its outputs inferred, under a fresh name from ``name``."""
        return create_node(op_type, list(inputs), attrs or {}, self.fresh(name), self.graph)

    def constant(self, array: np.ndarray, name: str) -> Value:
        """Add a ``Const`` node holding ``array``."""
        array = np.asarray(array)
        tensor = Tensor.wrap(array) if not array.flags.writeable else Tensor(array)
        node = create_node("Const", [], {"value": tensor}, self.fresh(name), self.graph)
        self._folded[id(node.outputs[0])] = tensor.numpy()  # read-only, as the graph holds it
        return node.outputs[0]

    def fold(self, value: Value, depth: int = 0) -> Optional[np.ndarray]:
        """The data of ``value`` when constants alone determine it (small tensors only):
        a ``Const``, the ``Shape`` of a value of static shape, or a pure op of such
        values, computed by the registry's reference kernel. None otherwise."""
        key = id(value)
        if key in self._folded:
            return self._folded[key]
        result = self._compute(value, depth)
        self._folded[key] = result
        return result

    def _compute(self, value: Value, depth: int) -> Optional[np.ndarray]:
        producer = value.producer
        if producer.op_type == "Const":
            return const_value(value)
        if producer.op_type in ("Data", "If", "Loop", "Scan") or depth > _FOLD_DEPTH:
            return None
        source = producer.inputs[0] if producer.inputs else None
        if producer.op_type == "Shape" and source is not None and is_static(source.shape):
            shape = [int(d) for d in source.shape]
            start, end = producer.attrs.get("start", 0), producer.attrs.get("end")
            return np.asarray(shape[start:end], dtype=np.int64)
        schema = get_schema(producer.op_type)
        if Trait.PURE not in schema.traits or any(
                not is_static(v.shape) or num_elements(v.shape) > _FOLD_LIMIT
                for v in producer.outputs):
            return None
        arrays: list[Optional[np.ndarray]] = []
        for read in producer.inputs:
            if read is None:
                arrays.append(None)
                continue
            array = self.fold(read, depth + 1)
            if array is None or array.size > _FOLD_LIMIT:
                return None
            arrays.append(array)
        outputs = run_kernel(schema, producer.name, arrays, producer.attrs)
        return outputs[value.index]


class NodeContext:
    """One TensorFlow node as its translator sees it."""

    def __init__(self, builder: GraphBuilder, node: NodeDef, inputs: list[Value]) -> None:
        self.builder = builder
        self.node = node
        self.inputs = inputs

    @property
    def name(self) -> str:
        """The TensorFlow node's name."""
        return self.node.name

    @property
    def op_type(self) -> str:
        """The TensorFlow op type."""
        return self.node.op

    def input(self, index: int) -> Value:
        """Data input ``index``; ``ModelFormatError`` when the node has fewer."""
        if index >= len(self.inputs):
            raise ModelFormatError(f"TensorFlow {self.op_type} node {self.name!r} has "
                                   f"{len(self.inputs)} data input(s); it needs at least "
                                   f"{index + 1}")
        return self.inputs[index]

    def attr(self, key: str, *default: Any) -> Any:
        """Attribute ``key`` (see ``NodeDef.attr``), or ``default`` when not set."""
        return self.node.attr(key, *default)

    def dtype(self, key: str = "T") -> DataType:
        """The GE dtype of type attribute ``key``."""
        return to_ge_dtype(int(self.attr(key)), self.where)

    @property
    def where(self) -> str:
        """``TensorFlow Op node 'name'``, for messages."""
        return f"TensorFlow {self.op_type} node {self.name!r}"

    def constant(self, index: int, what: str) -> np.ndarray:
        """The data of input ``index``, which must be determined by constants (``what``
        names it in the ``UnsupportedOpError`` when it is computed from inputs)."""
        array = self.builder.fold(self.input(index))
        if array is None:
            raise self.unsupported(f"its {what} (input {index}) is computed at run time; GE "
                                   f"translates it only when constants determine it")
        return array

    def ints(self, index: int, what: str) -> list[int]:
        """Input ``index`` as a list of Python ints (a constant)."""
        return [int(v) for v in np.asarray(self.constant(index, what)).reshape(-1)]

    def shape_input(self, index: int) -> Value:
        """Input ``index`` (sizes, axes, paddings): a new ``int64`` constant when constants
        determine it, so that inference sees its data; the value itself otherwise."""
        value = self.input(index)
        array = self.builder.fold(value)
        if array is None or value.producer.op_type == "Const":
            return value
        return self.const(np.asarray(array, dtype=np.int64))

    def op_node(self, op_type: str, inputs: Sequence[Optional[Value]],
                attrs: Optional[dict[str, Any]] = None) -> Node:
        """Add a registry op (named ``node/OpType``; the importer gives the node's own
        name to the op producing its first output)."""
        try:
            return self.builder.add(op_type, inputs, attrs, f"{self.name}/{op_type}")
        except (UnsupportedOpError, ModelFormatError):
            raise
        except GEError as error:
            raise type(error)(f"{self.where}: {error}") from error

    def op(self, op_type: str, inputs: Sequence[Optional[Value]],
           attrs: Optional[dict[str, Any]] = None) -> Value:
        """Add a registry op and return its first output."""
        return self.op_node(op_type, inputs, attrs).outputs[0]

    def const(self, array: Any, dtype: Optional[DataType] = None) -> Value:
        """Add a constant (of ``dtype`` when given)."""
        data = np.asarray(array, dtype=None if dtype is None else dtype.np_dtype)
        return self.builder.constant(data, f"{self.name}/const")

    def scalar(self, number: float, like: Value) -> Value:
        """A scalar constant of ``like``'s dtype."""
        return self.const(np.asarray(number, dtype=like.dtype.np_dtype))

    def rank(self, index: int = 0) -> int:
        """The rank of input ``index``."""
        return self.input(index).rank

    def unsupported(self, message: str) -> UnsupportedOpError:
        """An ``UnsupportedOpError`` naming this node, to raise."""
        return UnsupportedOpError(f"{self.where}: {message}")


def data_format(ctx: NodeContext) -> str:
    """The node's ``data_format`` (``NHWC`` or ``NCHW``); others are refused."""
    layout = str(ctx.attr("data_format", "NHWC"))
    if layout not in ("NHWC", "NCHW"):
        raise ctx.unsupported(f"data_format {layout} (GE takes NHWC and NCHW)")
    return layout
