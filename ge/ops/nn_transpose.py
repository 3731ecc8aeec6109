"""Ops that scatter windows back onto an image, with ONNX's names and semantics:
ConvTranspose (any number of spatial axes), Col2Im and MaxUnpool (DeformConv lives in
``nn_deform``).

Data is channels-first, ``[N, C, *spatial]``, as in ONNX. ConvTranspose and Col2Im
share ``scatter_windows``, the adjoint of ``window_view``: one BLAS contraction makes
every window's contribution, then each kernel tap is added into the output with one
strided slice (a loop over the taps, never over pixels).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, is_static_dim, num_elements
from ge.ops.elementwise import FLOATS
from ge.ops.nn_nd import from_channels_last, onnx_window_attrs, to_channels_last
from ge.ops.nn_window import compute_dtype, effective_kernel
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal

__all__ = ["scatter_windows", "transpose_geometry"]

_INDEX_TYPES = (DataType.DT_INT32, DataType.DT_INT64)


def scatter_windows(cols: np.ndarray, strides: Sequence[int], dilations: Sequence[int],
                    sizes: Sequence[int], offsets: Sequence[int]) -> np.ndarray:
    """``[N, *sizes, C]``: each ``cols[n, *i, *k, c]`` (``[N, *windows, *kernel, C]``) added
    at position ``offsets + i * strides + k * dilations``."""
    rank = len(sizes)
    counts, kernel = cols.shape[1:1 + rank], cols.shape[1 + rank:1 + 2 * rank]
    out = np.zeros((cols.shape[0], *sizes, cols.shape[-1]), cols.dtype)
    for tap in itertools.product(*(range(k) for k in kernel)):
        target = tuple(slice(o + t * d, o + t * d + (c - 1) * s + 1, s) for o, t, d, c, s in
                       zip(offsets, tap, dilations, counts, strides))
        out[(slice(None),) + target] += cols[(slice(None),) * (1 + rank) + tap]
    return out


def _static_ints(dims: Sequence[Dim]) -> Optional[list[int]]:
    """The dimensions as ints when all are known, else None."""
    known = [d for d in dims if isinstance(d, int) and d >= 0]
    return known if len(known) == len(dims) else None


def _check_vector(values: Optional[Sequence[int]], length: int, name: str) -> None:
    if values is not None and len(values) != length:
        raise ValueError(f"{name} {list(values)} needs {length} values")


# -- ConvTranspose ----------------------------------------------------------------------

def transpose_geometry(attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int]
                       ) -> tuple[list[int], list[int]]:
    """``(output sizes, begin padding)`` of a transposed convolution (ONNX's rules)."""
    rank = len(kernel)
    strides = attrs.get("strides") or [1] * rank
    dilations = attrs.get("dilations") or [1] * rank
    extra = attrs.get("output_padding") or [0] * rank
    for name, values in (("strides", strides), ("dilations", dilations),
                         ("output_padding", extra)):
        _check_vector(values, rank, name)
    full = [s * (n - 1) + e + effective_kernel(k, d)
            for n, k, s, d, e in zip(sizes, kernel, strides, dilations, extra)]
    auto_pad = attrs.get("auto_pad") or "NOTSET"
    wanted = attrs.get("output_shape")
    if wanted is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [n * s for n, s in zip(sizes, strides)]
    if wanted is not None:
        outputs = list(wanted)[-rank:]
        totals = [f - o for f, o in zip(full, outputs)]
        upper = auto_pad == "SAME_UPPER"
        begins = [t // 2 if upper else t - t // 2 for t in totals]
        return outputs, begins
    pads = attrs.get("pads") or [0] * (2 * rank)
    _check_vector(pads, 2 * rank, "pads")
    outputs = [f - pads[a] - pads[rank + a] for a, f in enumerate(full)]
    if any(o < 1 for o in outputs):
        raise ValueError(f"the padding {list(pads)} leaves an empty output {outputs}")
    return outputs, list(pads[:rank])


def _infer_conv_transpose(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    dtype = ctx.require_same_dtype(0, 1, 2)
    x, weights = ctx.shape(0), ctx.shape(1)
    if len(x) < 3 or len(weights) != len(x):
        raise ctx.fail(f"X {list(x)} must be [N, C, *spatial] and W {list(weights)} "
                       f"[C, M/group, *kernel] of the same rank")
    group = ctx.attr("group")
    if not dims_equal(x[1], weights[0]):
        raise ctx.fail(f"X has {x[1]} channels; W {list(weights)} expects {weights[0]}")
    channels: Dim = weights[1] * group if is_static_dim(weights[1]) else -1
    if ctx.has_input(2) and not dims_equal(ctx.shape(2)[0], channels):
        raise ctx.fail(f"B has {ctx.shape(2)[0]} elements; the output has {channels} channels")
    kernel = _static_ints(ctx.attr("kernel_shape") or list(weights[2:]))
    sizes = _static_ints(list(x[2:]))
    outputs: list[Dim]
    if kernel is not None and sizes is not None:
        try:
            outputs = list(transpose_geometry(ctx.attrs, sizes, kernel)[0])
        except ValueError as error:
            raise ctx.fail(str(error)) from None
    elif ctx.attr("output_shape") is not None:
        outputs = list(ctx.attr("output_shape"))[-(len(x) - 2):]
    else:
        outputs = [-1] * (len(x) - 2)
    return [TensorDesc((x[0], channels, *outputs), dtype)]


def _conv_transpose_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    """Each input element multiplies M/group x prod(kernel) weights."""
    weights = ctx.shape(1)
    per_input = num_elements(weights) // max(int(weights[0]), 1) if is_static_dim(weights[0]) \
        else 0
    flops = 2 * num_elements(ctx.shape(0)) * per_input
    data = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, data + num_elements(outputs[0].shape) * outputs[0].dtype.itemsize)


def _transpose_columns(data: np.ndarray, weights: np.ndarray, group: int) -> np.ndarray:
    """``[N, *spatial, *kernel, M]``: each input pixel times the filter, group by group."""
    per_group = data.shape[-1] // group
    parts = []
    for g in range(group):
        block = weights[g * per_group:(g + 1) * per_group].astype(data.dtype, copy=False)
        product = np.tensordot(data[..., g * per_group:(g + 1) * per_group], block,
                               axes=([-1], [0]))  # [N, *spatial, M/group, *kernel]
        parts.append(np.moveaxis(product, data.ndim - 1, -1))
    return parts[0] if group == 1 else np.concatenate(parts, axis=-1)


@register_op(
    "ConvTranspose",
    inputs=["X", "W", Input("B", optional=True, doc="1-D, M")],
    attrs=[*onnx_window_attrs(), Attr("group", AttrType.INT, 1),
           Attr("kernel_shape", AttrType.INTS, None),
           Attr("output_padding", AttrType.INTS, None),
           Attr("output_shape", AttrType.INTS, None)],
    infer=_infer_conv_transpose, cost=_conv_transpose_cost)
def conv_transpose_kernel(x: np.ndarray, weights: np.ndarray, bias: Optional[np.ndarray] = None,
                          **attrs: Any) -> np.ndarray:
    """The transposed convolution (the gradient of Conv for its input): each input pixel
    scatters its product with the filter over a dilated window at ``stride`` spacing; the
    result is cropped by ``pads`` (or to ``output_shape``) and ``B`` added."""
    rank = x.ndim - 2
    kernel = list(weights.shape[2:])
    outputs, begins = transpose_geometry(attrs, list(x.shape[2:]), kernel)
    strides = attrs.get("strides") or [1] * rank
    dilations = attrs.get("dilations") or [1] * rank
    cols = _transpose_columns(to_channels_last(x, True), weights, attrs["group"])
    shifts = [max(0, -b) for b in begins]
    natural = [(n - 1) * s + effective_kernel(k, d) for n, k, s, d in
               zip(x.shape[2:], kernel, strides, dilations)]
    sizes = [sh + max(f, b + o) for sh, f, b, o in zip(shifts, natural, begins, outputs)]
    image = scatter_windows(cols, strides, dilations, sizes, shifts)
    crop = tuple(slice(sh + b, sh + b + o) for sh, b, o in zip(shifts, begins, outputs))
    result = image[(slice(None),) + crop]
    if bias is not None:
        result = result + bias.astype(result.dtype, copy=False)
    return from_channels_last(result, True, x.dtype)


# -- Col2Im -----------------------------------------------------------------------------

def _infer_col2im(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    ctx.require_rank(0, 3)
    for index in (1, 2):
        ctx.require_dtypes(index, _INDEX_TYPES, "shapes must be")
        ctx.require_rank(index, 1)
    rank = ctx.shape(1)[0]
    if not (isinstance(rank, int) and rank >= 0):
        raise ctx.fail("image_shape needs a static length (the number of spatial axes)")
    image, block = ctx.const_ints(1), ctx.const_ints(2)
    columns = ctx.shape(0)[1]
    channels: Dim = -1
    if block is not None and isinstance(columns, int) and columns >= 0:
        size = int(np.prod(block))
        if columns % size:
            raise ctx.fail(f"input has {columns} rows, not a multiple of the block size {size}")
        channels = columns // size
    spatial: list[Dim] = list(image) if image is not None else [-1] * rank
    return [TensorDesc((ctx.shape(0)[0], channels, *spatial), ctx.dtype(0))]


@register_op(
    "Col2Im", inputs=["input", "image_shape", "block_shape"],
    attrs=[Attr("dilations", AttrType.INTS, None), Attr("pads", AttrType.INTS, None),
           Attr("strides", AttrType.INTS, None)],
    infer=_infer_col2im, cost=flops_per_output(1))
def col2im_kernel(x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray, *,
                  dilations: Optional[list[int]], pads: Optional[list[int]],
                  strides: Optional[list[int]]) -> np.ndarray:
    """Rearrange column blocks ``[N, C * prod(block), L]`` into an image ``[N, C, *image]``,
    summing where blocks overlap (the inverse of im2col)."""
    image, block = [int(v) for v in image_shape], [int(v) for v in block_shape]
    rank = len(image)
    strides, dilations = strides or [1] * rank, dilations or [1] * rank
    pads = pads or [0] * (2 * rank)
    padded = [i + pads[a] + pads[rank + a] for a, i in enumerate(image)]
    counts = [(p - effective_kernel(b, d)) // s + 1
              for p, b, d, s in zip(padded, block, dilations, strides)]
    if int(np.prod(counts)) != x.shape[2]:
        raise ValueError(f"Col2Im: {x.shape[2]} blocks given, the geometry makes {counts}")
    wide = x.astype(compute_dtype(x.dtype), copy=False)
    cols = wide.reshape(x.shape[0], -1, *block, *counts)
    order = [0, *range(2 + rank, 2 + 2 * rank), *range(2, 2 + rank), 1]
    result = scatter_windows(cols.transpose(order), strides, dilations, padded, [0] * rank)
    crop = tuple(slice(pads[a], pads[a] + i) for a, i in enumerate(image))
    return from_channels_last(result[(slice(None),) + crop], True, x.dtype)


# -- MaxUnpool --------------------------------------------------------------------------

def _unpooled_sizes(sizes: Sequence[int], attrs: dict[str, Any]) -> list[int]:
    kernel = attrs["kernel_shape"]
    rank = len(kernel)
    strides = attrs.get("strides") or [1] * rank
    pads = attrs.get("pads") or [0] * (2 * rank)
    return [(n - 1) * s - pads[a] - pads[rank + a] + k
            for a, (n, k, s) in enumerate(zip(sizes, kernel, strides))]


def _infer_max_unpool(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    ctx.require_dtypes(1, (DataType.DT_INT64,), "indices must be")
    x = ctx.shape(0)
    if len(x) != len(ctx.attr("kernel_shape")) + 2:
        raise ctx.fail(f"kernel_shape {ctx.attr('kernel_shape')} does not fit X {list(x)}")
    if ctx.has_input(2):
        shape = ctx.const_ints(2)
        return [TensorDesc(tuple(shape) if shape is not None else (-1,) * len(x),
                           ctx.dtype(0))]
    sizes = _static_ints(list(x[2:]))
    if sizes is not None:
        return [TensorDesc((x[0], x[1], *_unpooled_sizes(sizes, ctx.attrs)), ctx.dtype(0))]
    return [TensorDesc((x[0], x[1], *([-1] * (len(x) - 2))), ctx.dtype(0))]


@register_op(
    "MaxUnpool", inputs=["X", "I", Input("output_shape", optional=True)],
    attrs=[Attr("kernel_shape", AttrType.INTS, REQUIRED), Attr("pads", AttrType.INTS, None),
           Attr("strides", AttrType.INTS, None)],
    infer=_infer_max_unpool, cost=flops_per_output(1))
def max_unpool_kernel(x: np.ndarray, indices: np.ndarray,
                      output_shape: Optional[np.ndarray] = None, **attrs: Any) -> np.ndarray:
    """The partial inverse of MaxPool: each value of X goes to its flat index ``I`` in the
    unpooled tensor ``[N, C, (in - 1) * stride - pads + kernel ...]``, zeros elsewhere;
    with ``output_shape`` that tensor is placed at the start of a zero tensor that size."""
    inferred = (*x.shape[:2], *_unpooled_sizes(list(x.shape[2:]), attrs))
    flat = np.zeros(int(np.prod(inferred)), x.dtype)
    flat[indices.reshape(-1)] = x.reshape(-1)
    unpooled = flat.reshape(inferred)
    if output_shape is None:
        return unpooled
    result = np.zeros([int(v) for v in output_shape], x.dtype)
    result[tuple(slice(0, n) for n in inferred)] = unpooled
    return result
