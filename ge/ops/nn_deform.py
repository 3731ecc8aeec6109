"""DeformConv (ONNX 19): a 2-D convolution whose kernel taps are moved, per output pixel,
by learned offsets and read with bilinear interpolation (zero outside the image).

The kernel gathers every shifted tap at once (four corners per tap, all pixels together)
into ``[N, C, kh, kw, oh, ow]`` columns, then contracts them with the filter through
BLAS, one group at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import TensorDesc
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.elementwise import FLOATS
from ge.ops.nn_window import compute_dtype, conv_output_size
from ge.ops.registry import (
    Attr,
    AttrType,
    InferenceContext,
    Input,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import dims_equal


def _geometry(attrs: dict[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """``(strides, dilations, pads)`` of the 2-D window, defaults filled."""
    return (list(attrs.get("strides") or [1, 1]), list(attrs.get("dilations") or [1, 1]),
            list(attrs.get("pads") or [0, 0, 0, 0]))


def _infer_deform_conv(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    dtype = ctx.require_same_dtype(0, 1, 2, 3, 4)
    for index in (0, 1, 2):
        ctx.require_rank(index, 4)
    x, weights = ctx.shape(0), ctx.shape(1)
    if is_static_dim(x[1]) and is_static_dim(weights[1]) \
            and weights[1] * ctx.attr("group") != x[1]:
        raise ctx.fail(f"X has {x[1]} channels; W {list(weights)} expects {weights[1]} per "
                       f"group x {ctx.attr('group')} groups")
    if ctx.has_input(3) and not dims_equal(ctx.shape(3)[0], weights[0]):
        raise ctx.fail(f"B has {ctx.shape(3)[0]} elements; W has {weights[0]} output channels")
    strides, dilations, pads = _geometry(ctx.attrs)
    outputs: list[Dim] = []
    for axis in range(2):
        size, kernel = x[2 + axis], weights[2 + axis]
        if isinstance(size, int) and size >= 0 and isinstance(kernel, int) and kernel >= 0:
            try:
                outputs.append(conv_output_size(size, kernel, strides[axis], dilations[axis],
                                                (pads[axis], pads[2 + axis])))
            except ValueError as error:
                raise ctx.fail(str(error)) from None
        else:
            outputs.append(ctx.shape(2)[2 + axis])
    return [TensorDesc((x[0], weights[0], *outputs), dtype)]


def _bilinear(image: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``image`` [N, C, H, W] sampled at real positions ``rows``/``cols`` [N, *points]
    (zero outside): [N, C, *points]."""
    n, channels, height, width = image.shape
    flat = image.reshape(n, channels, height * width)
    top, left = np.floor(rows), np.floor(cols)
    result = np.zeros((n, channels, *rows.shape[1:]), image.dtype)
    for row, row_weight in ((top, 1 - (rows - top)), (top + 1, rows - top)):
        for col, col_weight in ((left, 1 - (cols - left)), (left + 1, cols - left)):
            inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
            index = np.where(inside, row * width + col, 0).astype(np.intp)
            values = np.take_along_axis(flat, index.reshape(n, 1, -1), axis=2)
            weight = np.where(inside, row_weight * col_weight, 0).reshape(n, 1, -1)
            result += (values * weight).reshape(result.shape)
    return result


def _deformed_columns(x: np.ndarray, offset: np.ndarray, mask: Optional[np.ndarray],
                      kernel: tuple[int, int], attrs: dict[str, Any]) -> np.ndarray:
    """``[N, C, kh, kw, oh, ow]``: every input channel read at every shifted tap."""
    strides, dilations, pads = _geometry(attrs)
    n, channels = x.shape[:2]
    out_h, out_w = offset.shape[2:]
    groups = attrs["offset_group"]
    shifts = offset.reshape(n, groups, kernel[0], kernel[1], 2, out_h, out_w)
    base_rows = (np.arange(kernel[0])[:, None, None, None] * dilations[0]
                 + np.arange(out_h)[None, None, :, None] * strides[0] - pads[0])
    base_cols = (np.arange(kernel[1])[None, :, None, None] * dilations[1]
                 + np.arange(out_w)[None, None, None, :] * strides[1] - pads[1])
    per_group = channels // groups
    parts = []
    for g in range(groups):
        rows = base_rows + shifts[:, g, :, :, 0]
        cols = base_cols + shifts[:, g, :, :, 1]
        sampled = _bilinear(x[:, g * per_group:(g + 1) * per_group], rows, cols)
        if mask is not None:
            sampled = sampled * mask.reshape(n, groups, *kernel, out_h, out_w)[:, g, None]
        parts.append(sampled)
    return np.concatenate(parts, axis=1) if groups > 1 else parts[0]


@register_op(
    "DeformConv",
    inputs=["X", "W", "offset", Input("B", optional=True), Input("mask", optional=True)],
    attrs=[Attr("dilations", AttrType.INTS, None), Attr("group", AttrType.INT, 1),
           Attr("kernel_shape", AttrType.INTS, None), Attr("offset_group", AttrType.INT, 1),
           Attr("pads", AttrType.INTS, None), Attr("strides", AttrType.INTS, None)],
    infer=_infer_deform_conv, cost=flops_per_output(16))
def deform_conv_kernel(x: np.ndarray, weights: np.ndarray, offset: np.ndarray,
                       bias: Optional[np.ndarray] = None, mask: Optional[np.ndarray] = None,
                       **attrs: Any) -> np.ndarray:
    """y[n, o, i, j] = sum over c, taps of W[o, c, tap] * mask * X[n, c] read bilinearly at
    (i * stride - pad + tap * dilation + offset[n, tap, i, j]), plus B."""
    dtype = compute_dtype(x.dtype)
    kernel = (weights.shape[2], weights.shape[3])
    columns = _deformed_columns(x.astype(dtype), offset.astype(dtype),
                                None if mask is None else mask.astype(dtype), kernel, attrs)
    group = attrs["group"]
    per_in, per_out = weights.shape[1], weights.shape[0] // group
    parts = [np.tensordot(weights[g * per_out:(g + 1) * per_out].astype(dtype),
                          columns[:, g * per_in:(g + 1) * per_in], axes=([1, 2, 3], [1, 2, 3]))
             for g in range(group)]  # each [M/group, N, oh, ow]
    result = np.concatenate(parts, axis=0).transpose(1, 0, 2, 3)
    if bias is not None:
        result = result + bias.astype(dtype).reshape(1, -1, 1, 1)
    return np.ascontiguousarray(result).astype(x.dtype, copy=False)
