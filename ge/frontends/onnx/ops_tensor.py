"""Translators for ONNX tensor-manipulation and indexing ops that need more than a rename.

Most of the family (GatherND, ScatterND, Unique, Trilu, ...) maps directly onto
the registry op of the same name. What is here:

* ``Scatter`` (the deprecated name of ``ScatterElements``), ``EyeLike`` (its
  dtype attribute is an ONNX type code), and ``TopK`` before opset 10 (``k``
  was an attribute);
* ops whose output shape hangs on the *values* of an input (a target shape, the
  repeats of a tile, the bounds of a range, a depth, a k). Exported models often
  compute those inputs from ``Shape`` of tensors whose shapes are static
  (``Shape -> Gather -> Concat -> Reshape``); such an input is evaluated at
  import time and passed as a constant, so inference gives static shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.errors import GEError
from ge.frontends.onnx.context import NodeContext, direct_translation, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.ir import Graph, Value
from ge.ir.tensor import is_static, num_elements
from ge.ops import Trait, get_schema
from ge.ops.registry import const_value, run_kernel

__all__ = ["known_value", "constant_inputs"]

Outputs = Sequence[Optional[Value]]

# Values evaluated at import time are shape-like: small, and computed from few ops.
_EVALUATION_LIMIT = 4096
_EVALUATION_DEPTH = 24
# Ops that read only the shape of their input, never its data.
_SHAPE_READERS = frozenset({"Shape", "Size"})


def known_value(value: Optional[Value], depth: int = _EVALUATION_DEPTH) -> Optional[np.ndarray]:
    """The data of ``value`` when constants and static shapes alone determine it, else None.

    Evaluates small pure single-output ops through their reference kernels,
    reading ``Shape``/``Size`` of any tensor whose shape is static.
    """
    if value is None:
        return None
    constant = const_value(value)
    if constant is not None:
        return constant
    node = value.producer
    schema = get_schema(node.op_type)
    if (depth <= 0 or len(node.outputs) != 1 or not schema.has_trait(Trait.PURE)
            or schema.has_trait(Trait.SOURCE) or not is_static(value.shape)
            or num_elements(value.shape) > _EVALUATION_LIMIT
            or any(isinstance(a, Graph) for a in node.attrs.values())):
        return None
    arguments = _known_arguments(node.op_type, node.inputs, depth)
    if arguments is None:
        return None
    try:
        result = run_kernel(schema, node.name, arguments, node.attrs)[0]
    except GEError:  # left to run time, where errors name the node
        return None
    return result if result.dtype == value.dtype.np_dtype else None


def _known_arguments(op_type: str, inputs: Sequence[Optional[Value]],
                     depth: int) -> Optional[list[Optional[np.ndarray]]]:
    """Kernel arguments for ``inputs``, or None when one of them is not known."""
    if op_type in _SHAPE_READERS:
        source = inputs[0]
        if source is None or not is_static(source.shape):
            return None
        dims = tuple(int(d) for d in source.shape)
        return [np.broadcast_to(np.zeros((), source.dtype.np_dtype), dims)]  # no data needed
    arguments: list[Optional[np.ndarray]] = []
    for item in inputs:
        known = None if item is None else known_value(item, depth - 1)
        if item is not None and known is None:
            return None
        arguments.append(known)
    return arguments


def constant_inputs(ctx: NodeContext, positions: Sequence[int]) -> None:
    """Replace the inputs at ``positions`` by constants where their values are known."""
    inputs = list(ctx.inputs)
    for position in positions:
        item = ctx.input(position)
        if item is None or const_value(item) is not None:
            continue
        known = known_value(item)
        if known is not None:
            inputs[position] = ctx.const(known)
    ctx.inputs = inputs


@translator("Reshape", "Expand", "Tile")
def shaped_by_input_1(ctx: NodeContext) -> Outputs:
    """``Reshape``/``Expand``/``Tile``: a computable shape or repeats input becomes constant."""
    constant_inputs(ctx, [1])
    return direct_translation(ctx)


@translator("ConstantOfShape")
def constant_of_shape(ctx: NodeContext) -> Outputs:
    """``ConstantOfShape``: a computable shape input becomes constant."""
    constant_inputs(ctx, [0])
    return direct_translation(ctx)


@translator("Range")
def range_(ctx: NodeContext) -> Outputs:
    """``Range``: computable bounds become constants, so the length is known."""
    constant_inputs(ctx, [0, 1, 2])
    return direct_translation(ctx)


@translator("OneHot", "CenterCropPad")
def sized_by_input_1(ctx: NodeContext) -> Outputs:
    """``OneHot``/``CenterCropPad``: a computable depth or target shape becomes constant."""
    constant_inputs(ctx, [1])
    return direct_translation(ctx)


@translator("Scatter")
def scatter(ctx: NodeContext) -> Outputs:
    """``Scatter`` (deprecated in opset 11) is ``ScatterElements`` without a reduction."""
    return ctx.op("ScatterElements", ctx.inputs[:3], {"axis": ctx.attr("axis", 0)}).outputs


@translator("EyeLike")
def eye_like(ctx: NodeContext) -> Outputs:
    """``EyeLike``: the ``dtype`` attribute is an ONNX element type code."""
    attrs = {"k": ctx.attr("k", 0)}
    if "dtype" in ctx.attrs:
        attrs["dtype"] = from_onnx_dtype(ctx.attr("dtype"), f"ONNX EyeLike node {ctx.name!r}")
    return ctx.op("EyeLike", ctx.inputs[:1], attrs).outputs


@translator("TopK")
def top_k(ctx: NodeContext) -> Outputs:
    """``TopK``; before opset 10 ``k`` was an attribute; a computable ``k`` becomes constant."""
    if "k" in ctx.attrs:
        k = ctx.const(np.asarray([ctx.attrs.pop("k")], np.int64))
        ctx.inputs = [ctx.input(0), k]
    constant_inputs(ctx, [1])
    return direct_translation(ctx)
