"""Translators for ONNX math ops that need more than a direct mapping.

Most math and elementwise ops (Sin, Mod, BitShift, Elu, Gelu, CumSum, Einsum, ...)
have a registry op of the same name, inputs and attributes and map directly. The
ones here take an ONNX element type code as an attribute (BitCast, the windows,
MelWeightMatrix), or changed between opsets (DFT's axis became an input in opset 20).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, direct_translation, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.ir import Value

Outputs = Sequence[Optional[Value]]


def _element_type(ctx: NodeContext, key: str, default: Optional[int] = None) -> object:
    code = ctx.attrs.get(key, default)
    if code is None:
        raise ctx.unsupported(f"attribute {key!r} (an element type) is required")
    return from_onnx_dtype(int(code), f"ONNX {ctx.op_type} node {ctx.name!r} attribute {key!r}")


@translator("BitCast")
def bit_cast(ctx: NodeContext) -> Outputs:
    """``BitCast(to=T)``, with the ONNX type code ``T`` as a dtype."""
    return ctx.op("BitCast", ctx.inputs[:1], {"to": _element_type(ctx, "to")}).outputs


@translator("HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix")
def typed_generator(ctx: NodeContext) -> Outputs:
    """Windows and mel filters: ``output_datatype`` (an ONNX type code) becomes a dtype."""
    ctx.attrs["output_datatype"] = _element_type(ctx, "output_datatype", 1)
    return direct_translation(ctx)


@translator("DFT")
def dft(ctx: NodeContext) -> Outputs:
    """``DFT``; before opset 20 the axis was an attribute (default 1), now an input."""
    if ctx.opset < 20:
        axis = ctx.attrs.pop("axis", 1)
        inputs = list(ctx.inputs) + [None] * max(0, 3 - len(ctx.inputs))
        inputs[2] = ctx.const(np.asarray(axis, np.int64))
        ctx.inputs = inputs
    return direct_translation(ctx)
