"""Translators for ONNX neural-network ops that need more than a direct mapping.

``LayerNormalization`` asked for its ``Mean`` and ``InvStdDev`` outputs adds them as
reductions beside the registry op; ``GroupNormalization`` before opset 21 took one
scale and bias per group, which become per-channel vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.frontends.onnx.context import NodeContext, direct_translation, translator
from ge.frontends.onnx.dtypes import from_onnx_dtype
from ge.ir import Value

Outputs = Sequence[Optional[Value]]


@translator("LayerNormalization")
def layer_normalization(ctx: NodeContext) -> Outputs:
    """``LayerNormalization``; the ``Mean`` and ``InvStdDev`` outputs, when used, are
    computed in the ``stash_type`` precision by ReduceMean, Sub, Mul, Add, Sqrt, Reciprocal."""
    x = ctx.input(0)
    assert x is not None
    attrs = {"axis": ctx.attr("axis", -1), "epsilon": ctx.attr("epsilon", 1e-5)}
    y = ctx.value("LayerNormalization", ctx.inputs[:3], attrs)
    if not (ctx.wants_output(1) or ctx.wants_output(2)):
        return [y]
    stash = from_onnx_dtype(ctx.attr("stash_type", 1), f"ONNX node {ctx.name!r} stash_type")
    wide = x if x.dtype is stash else ctx.value("Cast", [x], {"dtype": stash})
    rank = len(x.shape)
    first = attrs["axis"] + rank if attrs["axis"] < 0 else attrs["axis"]
    axes = ctx.const(np.arange(first, rank, dtype=np.int64))
    mean = ctx.value("ReduceMean", [wide, axes], {"keepdims": 1})
    centred = ctx.value("Sub", [wide, mean])
    variance = ctx.value("ReduceMean", [ctx.value("Mul", [centred, centred]), axes],
                         {"keepdims": 1})
    epsilon = ctx.const(np.asarray(attrs["epsilon"], stash.np_dtype))
    deviation = ctx.value("Sqrt", [ctx.value("Add", [variance, epsilon])])
    return [y, mean, ctx.value("Reciprocal", [deviation])]


@translator("GroupNormalization")
def group_normalization(ctx: NodeContext) -> Outputs:
    """``GroupNormalization``; before opset 21 ``scale`` and ``bias`` hold one value per
    group, repeated here over the group's channels."""
    if ctx.opset >= 21:
        return direct_translation(ctx)
    x = ctx.input(0)
    assert x is not None
    channels, groups = x.shape[1], int(ctx.attr("num_groups"))
    if not isinstance(channels, int) or channels < 0:
        raise ctx.unsupported("GroupNormalization before opset 21 needs a static channel "
                              "count to spread its per-group scale and bias")
    index = ctx.const(np.repeat(np.arange(groups, dtype=np.int64), channels // groups))
    inputs = [x] + [ctx.value("Gather", [value, index], {"axis": 0})
                    for value in ctx.inputs[1:3]]
    attrs = {"num_groups": groups, "epsilon": ctx.attr("epsilon", 1e-5)}
    return ctx.op("GroupNormalization", inputs, attrs).outputs

