"""The seed's fluent op-building API.

    op = graph.add_op(
        ge.OperatorFactory.create_op("Conv2D")
        .set_input("input", x)
        .set_input("filter", weight)
        .set_attr("strides", [1, 1, 1, 1])
        .set_attr("padding", "SAME")
        .set_attr("name", "conv1")
        .build())

``build()`` checks the input and attribute names, fills attribute defaults and
infers the output's shape and dtype at once, so ``op.shape`` is known before
the next op is built. A list, number or ndarray given to ``set_input`` becomes
a ``Const`` node. The ``"name"`` attribute names the node (for a ``Data`` node
it is the feed key); it is not passed to the op.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ge.errors import OpArgumentError
from ge.ir import Node, Tensor, Value, as_value
from ge.ops.registry import OpSchema, create_node, get_schema

__all__ = ["OperatorFactory", "OperatorBuilder", "constant"]


def constant(data: Any, name: Optional[str] = None) -> Node:
    """A detached ``Const`` node holding ``data``.

    Python floats become float32 and Python ints int64; NumPy arrays and
    ``ge.Tensor`` keep their dtype.
    """
    if isinstance(data, Tensor):
        tensor = data
    elif isinstance(data, np.ndarray) or np.isscalar(data) and isinstance(data, np.generic):
        tensor = Tensor(data)
    else:
        array = np.asarray(data)
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu":
            array = array.astype(np.int64)
        tensor = Tensor(array)
    return create_node("Const", [], {"value": tensor}, name)


def _is_handle(item: Any) -> bool:
    return isinstance(item, (Node, Value))


def _as_input(item: Any) -> Value:
    return as_value(item) if _is_handle(item) else as_value(constant(item))


class OperatorBuilder:
    """Collects inputs and attributes of one op; ``build()`` makes the node."""

    def __init__(self, op_type: str) -> None:
        self._schema: OpSchema = get_schema(op_type)
        self._inputs: dict[int, Any] = {}
        self._attrs: dict[str, Any] = {}
        self._name: Optional[str] = None

    @property
    def op_type(self) -> str:
        """The type of the op being built."""
        return self._schema.op_type

    def set_input(self, name: str, value: Any) -> OperatorBuilder:
        """Connect input ``name`` to an operator handle, a value, or constant data.

        A variadic input (``Concat``'s ``x``) takes a list of handles.
        """
        index = self._schema.input_index(name)
        spec = self._schema.inputs[index]
        if spec.variadic and isinstance(value, (list, tuple)) and value \
                and all(_is_handle(v) for v in value):
            self._inputs[index] = [as_value(v) for v in value]
        elif value is None:
            self._inputs.pop(index, None)
        else:
            self._inputs[index] = [_as_input(value)] if spec.variadic else _as_input(value)
        return self

    def set_attr(self, name: str, value: Any) -> OperatorBuilder:
        """Set attribute ``name``; ``"name"`` names the node."""
        if name == "name":
            self._name = None if value is None else str(value)
            return self
        if name not in self._schema.attrs:
            valid = ", ".join(repr(k) for k in self._schema.attrs) or "none"
            raise OpArgumentError(f"{self.op_type}: unknown attribute {name!r}; "
                                  f"valid attributes: {valid} (and 'name')")
        self._attrs[name] = value
        return self

    def build(self) -> Node:
        """Check everything and infer output shapes; return the (not yet added) operator."""
        inputs: list[Optional[Value]] = []
        last = max(self._inputs, default=-1)
        for index in range(last + 1):
            item = self._inputs.get(index)
            if isinstance(item, list):
                inputs.extend(item)
            else:
                inputs.append(item)
        return create_node(self.op_type, inputs, self._attrs, self._name)


class OperatorFactory:
    """The seed's entry point: ``OperatorFactory.create_op("Relu")`` starts a builder."""

    @staticmethod
    def create_op(op_type: str) -> OperatorBuilder:
        """A builder for one op of type ``op_type``."""
        return OperatorBuilder(op_type)
