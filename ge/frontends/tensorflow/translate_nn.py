"""TensorFlow convolutions, pooling, batch norm, softmax and matrix products.

Data keeps TensorFlow's layout (``data_format``, NHWC by default); the registry's
``Conv2D``, ``MaxPool``, ``AvgPool``, ``BiasAdd`` and ``FusedBatchNorm`` take it as their
own ``data_format`` and the layout pass decides what runs NCHW. Filters stay HWIO.
``SAME`` padding keeps TensorFlow's meaning (``out = ceil(in / stride)``, the odd cell of
padding at the bottom and right), ``EXPLICIT`` padding becomes ``pads``.
``DepthwiseConv2dNative``'s ``[kh, kw, C, multiplier]`` filter is the
``[kh, kw, 1, C * multiplier]`` filter of a ``Conv2D`` with ``groups = C``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.frontends.tensorflow.translate import NodeContext, data_format, translates
from ge.ir import Value

__all__: list[str] = []


def _window(ctx: NodeContext, layout: str) -> dict[str, Any]:
    """``strides``, ``padding`` (and ``pads``), ``data_format`` of a conv or pool node."""
    padding = str(ctx.attr("padding"))
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise ctx.unsupported(f"padding {padding!r}")
    attrs: dict[str, Any] = {"strides": [int(s) for s in ctx.attr("strides", [1, 1, 1, 1])],
                             "padding": padding, "data_format": layout}
    if padding == "EXPLICIT":
        explicit = [int(p) for p in ctx.attr("explicit_paddings", [])]
        if len(explicit) != 8:
            raise ctx.unsupported(f"explicit_paddings {explicit} (expected 8 values)")
        height, width = (1, 2) if layout == "NHWC" else (2, 3)
        attrs["pads"] = [explicit[2 * height], explicit[2 * height + 1],
                         explicit[2 * width], explicit[2 * width + 1]]
    return attrs


def _convolution(ctx: NodeContext, weights: Value, groups: int) -> Value:
    layout = data_format(ctx)
    attrs = _window(ctx, layout)
    attrs.update({"dilations": [int(d) for d in ctx.attr("dilations", [1, 1, 1, 1])],
                  "groups": groups, "filter_format": "HWIO"})
    return ctx.op("Conv2D", [ctx.input(0), weights], attrs)


@translates("Conv2D")
def _conv2d(ctx: NodeContext) -> Value:
    x, weights = ctx.input(0), ctx.input(1)
    if x.rank != 4 or weights.rank != 4:
        raise ctx.unsupported(f"input {list(x.shape)} and filter {list(weights.shape)} must "
                              f"both be 4-D")
    per_group = weights.shape[2]
    channels = x.shape[3 if data_format(ctx) == "NHWC" else 1]
    groups = 1
    if isinstance(channels, int) and channels > 0 and isinstance(per_group, int) \
            and per_group > 0 and channels != per_group:
        groups = channels // per_group  # TensorFlow's grouped convolution
    return _convolution(ctx, weights, groups)


@translates("DepthwiseConv2dNative")
def _depthwise_conv2d(ctx: NodeContext) -> Value:
    weights = ctx.input(1)
    kh, kw, channels, multiplier = weights.shape
    if not all(isinstance(d, int) and d > 0 for d in (kh, kw, channels, multiplier)):
        raise ctx.unsupported(f"a filter of unknown shape {list(weights.shape)}")
    shape = [int(kh), int(kw), 1, int(channels) * int(multiplier)]
    folded = ctx.builder.fold(weights)
    if folded is not None:
        grouped = ctx.const(np.ascontiguousarray(folded).reshape(shape))
    else:
        grouped = ctx.op("Reshape", [weights, ctx.const(np.asarray(shape, np.int64))])
    return _convolution(ctx, grouped, int(channels))


@translates("BiasAdd", "BiasAddV1")
def _bias_add(ctx: NodeContext) -> Value:
    """The bias along the channel axis: the last (NHWC), or axis 1 (NCHW)."""
    return ctx.op("BiasAdd", [ctx.input(0), ctx.input(1)], {"data_format": data_format(ctx)})


@translates("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _fused_batch_norm(ctx: NodeContext) -> Sequence[Optional[Value]]:
    if ctx.attr("is_training", True):
        raise ctx.unsupported("is_training is true: GE runs the inference form (freeze the "
                              "model with training=False)")
    layout = data_format(ctx)
    y = ctx.op("FusedBatchNorm", [ctx.input(i) for i in range(5)],
               {"epsilon": float(ctx.attr("epsilon", 1e-4)), "data_format": layout})
    return [y] + [None] * 5  # the batch statistics exist only in training


def _pool(op_type: str) -> Callable[[NodeContext], Value]:
    def translate(ctx: NodeContext) -> Value:
        layout = data_format(ctx)
        attrs = _window(ctx, layout)
        attrs["ksize"] = [int(k) for k in ctx.attr("ksize")]
        return ctx.op(op_type, [ctx.input(0)], attrs)

    return translate


translates("MaxPool")(_pool("MaxPool"))
translates("AvgPool")(_pool("AvgPool"))


@translates("Softmax", "LogSoftmax")
def _softmax(ctx: NodeContext) -> Value:
    return ctx.op(ctx.op_type, [ctx.input(0)], {"axis": -1})


@translates("MatMul")
def _matmul(ctx: NodeContext) -> Value:
    return ctx.op("MatMul", [ctx.input(0), ctx.input(1)],
                  {"transpose_a": bool(ctx.attr("transpose_a", False)),
                   "transpose_b": bool(ctx.attr("transpose_b", False))})


@translates("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(ctx: NodeContext) -> Value:
    """``adj_x`` / ``adj_y`` (the adjoint: the transpose, for real numbers)."""
    product = ctx.op("MatMul", [ctx.input(0), ctx.input(1)],
                     {"transpose_a": bool(ctx.attr("adj_x", False)),
                      "transpose_b": bool(ctx.attr("adj_y", False))})
    if ctx.node.has_attr("Tout") and ctx.dtype("Tout") != product.dtype:
        return ctx.op("Cast", [product], {"dtype": ctx.dtype("Tout")})
    return product
