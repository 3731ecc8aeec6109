"""Concrete shapes for one input signature, so the memory plan can size every value.

The executable's shapes may be symbolic (``-1``). Given the shapes of one feed, this
walks the steps in order and runs each op's shape inference on concrete input shapes.
Small values that follow from shapes and constants alone (``Shape``, ``Size`` and the
arithmetic that turns them into ``Reshape`` targets) are computed on the way through
the reference kernels, so inference sees them as constants. A value whose shape still
depends on the data (``NonZero``, or anything read from a feed's values) stays
unknown: the plan leaves it out of the arena and the run allocates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from ge.compiler.executable import Executable
from ge.errors import GEError
from ge.ir import Tensor, TensorDesc
from ge.ir.tensor import num_elements
from ge.memory import SlotDesc
from ge.ops.registry import InferenceContext, OpSchema, Trait, get_schema, run_kernel

__all__ = ["concrete_descs", "SMALL_VALUE_ELEMENTS"]

#: values up to this many elements that follow from shapes and constants are computed
SMALL_VALUE_ELEMENTS = 4096

#: ops whose output value follows from their input's shape alone
_SHAPE_READERS = frozenset({"Shape", "Size"})


def concrete_descs(executable: Executable,
                   input_shapes: dict[str, tuple[int, ...]]) -> dict[int, SlotDesc]:
    """slot -> (shape, dtype) for every value whose size the feed's shapes determine."""
    nodes = {node.name: node for node in executable.graph.nodes}
    descs: dict[int, TensorDesc] = {}
    known: dict[int, Union[np.ndarray, Tensor]] = {}
    for spec in executable.inputs:
        descs[spec.slot] = TensorDesc(input_shapes[spec.name], spec.desc.dtype)
    for slot, name in executable.constants.items():
        tensor = nodes[name].attrs["value"]
        descs[slot] = TensorDesc(tensor.shape, tensor.dtype)
        known[slot] = tensor
    for step in executable.steps:
        node = nodes[step.node]
        schema = get_schema(node.op_type)
        inputs = [descs.get(slot) if slot >= 0 else None for slot in step.inputs]
        consts = [known.get(slot) if slot >= 0 else None for slot in step.inputs]
        outputs = _infer(schema, node.name, inputs, node.attrs, consts)
        if outputs is None:
            continue
        for slot, desc in zip(step.outputs, outputs):
            if desc.is_static:
                descs[slot] = desc
        value = _small_value(schema.op_type, schema.has_trait(Trait.PURE), node.name,
                             node.attrs, inputs, consts, outputs)
        if value is not None:
            for slot, array in zip(step.outputs, value):
                known[slot] = array
    return {slot: (tuple(int(d) for d in desc.shape), desc.dtype.np_dtype)
            for slot, desc in descs.items() if desc.is_static}


def _infer(schema: OpSchema, name: str, inputs: Sequence[Optional[TensorDesc]],
           attrs: dict[str, Any], consts: Sequence[Union[np.ndarray, Tensor, None]]
           ) -> Optional[list[TensorDesc]]:
    try:
        return list(schema.infer(InferenceContext(schema, name, inputs, attrs, consts)))
    except (GEError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):
        return None  # the run will raise the kernel's own error, naming the node


def _small_value(op_type: str, pure: bool, name: str, attrs: dict[str, Any],
                 inputs: Sequence[Optional[TensorDesc]],
                 consts: Sequence[Union[np.ndarray, Tensor, None]],
                 outputs: Sequence[TensorDesc]) -> Optional[list[np.ndarray]]:
    """The outputs' values when they follow from shapes and constants and are small."""
    if not pure or not all(d.is_static for d in outputs) or any(
            num_elements(d.shape) > SMALL_VALUE_ELEMENTS for d in outputs):
        return None
    if op_type in _SHAPE_READERS:
        desc = inputs[0]
        if desc is None or not desc.is_static:
            return None
        arrays: list[Optional[np.ndarray]] = [
            np.broadcast_to(np.zeros((), desc.dtype.np_dtype), [int(d) for d in desc.shape])]
    else:
        arrays = []
        for desc, const in zip(inputs, consts):
            if desc is not None and const is None:
                return None
            if const is not None and int(np.prod(const.shape, dtype=np.int64)) \
                    > SMALL_VALUE_ELEMENTS:
                return None
            arrays.append(None if const is None else
                          (const.numpy() if isinstance(const, Tensor) else const))
    try:
        return run_kernel(get_schema(op_type), name, arrays, attrs)
    except GEError:
        return None
