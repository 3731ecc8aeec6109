"""Models older than opset 7, with their old meaning kept.

GE reads opset 7 and newer and lets ONNX's version converter lift older models.
The converter misses what opset 7 changed for some ops, and refuses others (no
adapter, or an adapter that needs every dimension to be a number). Before it
runs, ``prepare_legacy`` moves those nodes into a GE-private domain the converter
leaves alone, and the translators here give them their old meaning, with the
ranks GE knows while it parses:

* ``PRelu`` before opset 7 applied a 1-D slope per channel (axis 1); opset 7
  broadcasts from the last axis. The slope gets trailing unit axes.
* Binary ops with ``broadcast=1`` aligned B with A from ``axis`` (from the last
  axis without one); B gets the trailing unit axes that make opset 7's
  broadcasting mean the same. ``consumed_inputs`` is dropped.
* ``Gemm`` drops ``broadcast`` (opset 7 always broadcasts C one way).
* ``Cast`` names its target type (``to="FLOAT"``) up to opset 5.
* ``Pad``-1 calls its pads ``paddings``.

Initializers the graph does not list as inputs (IR version 3 wants them listed)
stop the converter; they are listed. What the translators of opsets 7 and 8 must
know (``BatchNormalization``'s ``spatial``, ``Upsample``'s scales) they handle.

The experimental ops of opsets before 10 that onnxruntime still runs, and that old
model-zoo models use (``ImageScaler``, ``Crop``, ``Affine``, ``ScaledTanh``,
``ParametricSoftplus``, ``DynamicSlice``), are translated here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import onnx
from onnx import helper

from ge.frontends.onnx.context import NodeContext, find_translator, translator
from ge.ir import Value

__all__ = ["prepare_legacy", "LEGACY_DOMAIN"]

# The domain of the nodes kept away from the converter, with their pre-opset-7 meaning.
LEGACY_DOMAIN = "ge.legacy"
# Ops that took ``broadcast`` and ``axis`` attributes before opset 7.
_BROADCASTING_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal",
                     "Greater", "Less")
_HIDDEN_OPS = frozenset(_BROADCASTING_OPS + ("PRelu", "Gemm", "Cast", "Pad"))
# What the translators delegate to: the same op of the default domain at this opset.
_TARGET_OPSET = 7

Outputs = Sequence[Optional[Value]]


def prepare_legacy(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of a model older than opset 7 that the version converter can lift."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    listed = {info.name for info in graph.input}
    for tensor in graph.initializer:
        if tensor.name not in listed:
            graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                             list(tensor.dims)))
    hidden = False
    for node in graph.node:
        if node.domain in ("", "ai.onnx") and node.op_type in _HIDDEN_OPS:
            node.domain = LEGACY_DOMAIN
            hidden = True
    if hidden:
        copy.opset_import.append(helper.make_opsetid(LEGACY_DOMAIN, 1))
    return copy


def _delegate(ctx: NodeContext, inputs: list[Optional[Value]], drop: Sequence[str]) -> Outputs:
    """Translate the node as the default domain's op of opset 7, with ``inputs`` and
    without the attributes ``drop``."""
    ctx.inputs = inputs
    ctx.attrs = {key: value for key, value in ctx.attrs.items() if key not in drop}
    ctx.opset = _TARGET_OPSET
    translate = find_translator("", ctx.op_type)
    if translate is None:
        raise ctx.unsupported("GE has no translation for this op")
    return translate(ctx)


def _trailing_unit_axes(ctx: NodeContext, value: Value, count: int) -> Value:
    """``value`` with ``count`` axes of size 1 appended."""
    if count <= 0:
        return value
    axes = np.arange(value.rank, value.rank + count, dtype=np.int64)
    return ctx.value("Unsqueeze", [value, ctx.const(axes)])


@translator(*_BROADCASTING_OPS, domain=LEGACY_DOMAIN)
def broadcasting(ctx: NodeContext) -> Outputs:
    """``broadcast=1, axis=k``: B's dimensions line up with A's from axis k."""
    a, b = ctx.input(0), ctx.input(1)
    if a is None or b is None:
        raise ctx.unsupported("a binary op needs two inputs")
    if ctx.attr("broadcast", 0) and ctx.attr("axis") is not None:
        axis = int(ctx.attr("axis"))
        axis = axis + a.rank if axis < 0 else axis
        if not 0 <= axis <= a.rank - b.rank:
            raise ctx.unsupported(f"axis {ctx.attr('axis')} cannot align B {list(b.shape)} "
                                  f"with A {list(a.shape)}")
        b = _trailing_unit_axes(ctx, b, a.rank - axis - b.rank)
    return _delegate(ctx, [a, b], ("broadcast", "axis", "consumed_inputs"))


@translator("PRelu", domain=LEGACY_DOMAIN)
def prelu(ctx: NodeContext) -> Outputs:
    """A 1-D slope of several values applies per channel (axis 1)."""
    x, slope = ctx.input(0), ctx.input(1)
    if x is None or slope is None:
        raise ctx.unsupported("PRelu needs X and slope")
    if slope.rank == 1 and x.rank > 2 and slope.shape[0] != 1:
        slope = _trailing_unit_axes(ctx, slope, x.rank - 2)
    return _delegate(ctx, [x, slope], ("consumed_inputs",))


@translator("Gemm", domain=LEGACY_DOMAIN)
def gemm(ctx: NodeContext) -> Outputs:
    """``broadcast`` goes; C broadcasts one way in opset 7 either way."""
    return _delegate(ctx, list(ctx.inputs), ("broadcast",))


@translator("Cast", domain=LEGACY_DOMAIN)
def cast(ctx: NodeContext) -> Outputs:
    """``to`` as a type name (``"FLOAT"``) up to opset 5."""
    target = ctx.attr("to")
    if isinstance(target, str):
        try:
            ctx.attrs["to"] = onnx.TensorProto.DataType.Value(target.upper())
        except ValueError:
            raise ctx.unsupported(f"'to' names no ONNX type: {target!r}") from None
    return _delegate(ctx, list(ctx.inputs), ())


@translator("Pad", domain=LEGACY_DOMAIN)
def pad(ctx: NodeContext) -> Outputs:
    """Pad-1's ``paddings`` is Pad-2's ``pads``."""
    if "paddings" in ctx.attrs:
        ctx.attrs["pads"] = ctx.attrs.pop("paddings")
    return _delegate(ctx, list(ctx.inputs), ())


# -- experimental ops of opsets before 10 that onnxruntime still runs ------------------------

def _scalar(ctx: NodeContext, key: str, default: float, like: Value) -> Value:
    return ctx.const(np.asarray(ctx.attr(key, default), like.dtype.np_dtype))


def _input(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if x is None:
        raise ctx.unsupported("the input is missing")
    return x


@translator("ImageScaler")
def image_scaler(ctx: NodeContext) -> Outputs:
    """``scale * x + bias[c]`` over an NCHW image, one bias per channel."""
    x = _input(ctx)
    scaled = ctx.value("Mul", [x, _scalar(ctx, "scale", 1.0, x)])
    bias = ctx.attr("bias")
    if not bias:
        return [scaled]
    per_channel = np.asarray(bias, x.dtype.np_dtype).reshape((-1,) + (1,) * max(x.rank - 2, 0))
    return [ctx.value("Add", [scaled, ctx.const(per_channel)])]


@translator("Affine")
def affine(ctx: NodeContext) -> Outputs:
    """``alpha * x + beta``."""
    x = _input(ctx)
    scaled = ctx.value("Mul", [x, _scalar(ctx, "alpha", 1.0, x)])
    return [ctx.value("Add", [scaled, _scalar(ctx, "beta", 0.0, x)])]


@translator("ScaledTanh")
def scaled_tanh(ctx: NodeContext) -> Outputs:
    """``alpha * tanh(beta * x)``."""
    x = _input(ctx)
    inner = ctx.value("Tanh", [ctx.value("Mul", [x, _scalar(ctx, "beta", 1.0, x)])])
    return [ctx.value("Mul", [inner, _scalar(ctx, "alpha", 1.0, x)])]


@translator("ParametricSoftplus")
def parametric_softplus(ctx: NodeContext) -> Outputs:
    """``alpha * ln(1 + exp(beta * x))``."""
    x = _input(ctx)
    inner = ctx.value("Softplus", [ctx.value("Mul", [x, _scalar(ctx, "beta", 1.0, x)])])
    return [ctx.value("Mul", [inner, _scalar(ctx, "alpha", 1.0, x)])]


@translator("Crop")
def crop(ctx: NodeContext) -> Outputs:
    """An NCHW image without ``border = [left, top, right, bottom]``; with ``scale = [height,
    width]``, the window of that size whose corner is (top, left)."""
    x = _input(ctx)
    border = [int(b) for b in ctx.attr("border", [])]
    if len(border) != 4 or x.rank != 4:
        raise ctx.unsupported(f"Crop needs a 4-D NCHW input and four borders, got "
                              f"{list(x.shape)} and {border}")
    left, top, right, bottom = border
    scale = ctx.attr("scale")
    if scale:
        ends = [top + int(scale[0]), left + int(scale[1])]
    else:
        last = np.iinfo(np.int64).max
        ends = [-bottom if bottom else last, -right if right else last]
    starts, axes = np.asarray([top, left], np.int64), np.asarray([2, 3], np.int64)
    return [ctx.value("Slice", [x, ctx.const(starts), ctx.const(np.asarray(ends, np.int64)),
                                ctx.const(axes)])]


@translator("DynamicSlice")
def dynamic_slice(ctx: NodeContext) -> Outputs:
    """Opset 9's experimental ``DynamicSlice(data, starts, ends, axes)`` is Slice-10 without
    steps."""
    return [ctx.value("Slice", [_input(ctx), *ctx.inputs[1:4]])]
