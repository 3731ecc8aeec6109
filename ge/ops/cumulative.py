"""Cumulative ops: CumSum and CumProd (ONNX's scans, inclusive or exclusive, either way)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ops.elementwise import NUMERIC
from ge.ops.registry import (
    Attr,
    AttrType,
    InferenceContext,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import normalize_axis

_AXIS_TYPES = (DataType.DT_INT32, DataType.DT_INT64)


# -- cumulative sum and product ---------------------------------------------------------

def _infer_cumulative(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    ctx.require_dtypes(1, _AXIS_TYPES, "an axis must be")
    if len(ctx.shape(1)) > 1 or any(d != 1 for d in ctx.shape(1)):
        raise ctx.fail(f"input 'axis' must be a scalar, got shape {list(ctx.shape(1))}")
    axis = ctx.const_ints(1)
    if axis is not None:
        rank = len(ctx.shape(0))
        if not -rank <= axis[0] < rank:
            raise ctx.fail(f"axis {axis[0]} is out of range for x of rank {rank}")
    return [ctx.input(0)]


def _cumulate(x: np.ndarray, axis: np.ndarray, exclusive: bool, reverse: bool,
              accumulate: Callable[..., np.ndarray], identity: int) -> np.ndarray:
    """Inclusive or exclusive scan of ``accumulate`` along ``axis``, either direction."""
    position = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    wide = np.float32 if x.dtype.itemsize < 4 and not np.issubdtype(x.dtype, np.integer) \
        else x.dtype
    data = np.flip(x, position) if reverse else x
    result = accumulate(data, axis=position, dtype=wide)
    if exclusive and result.shape[position]:  # an empty axis has nothing to shift
        first = np.full_like(np.take(result, [0], axis=position), identity)
        rest = np.take(result, np.arange(result.shape[position] - 1), axis=position)
        result = np.concatenate([first, rest], axis=position)
    if reverse:
        result = np.flip(result, position)
    return np.ascontiguousarray(result).astype(x.dtype, copy=False)


_SCAN_ATTRS = [Attr("exclusive", AttrType.BOOL, False), Attr("reverse", AttrType.BOOL, False)]


@register_op("CumSum", inputs=["x", "axis"], attrs=_SCAN_ATTRS, infer=_infer_cumulative,
             cost=flops_per_output(1))
def cumsum_kernel(x: np.ndarray, axis: np.ndarray, *, exclusive: bool = False,
                  reverse: bool = False) -> np.ndarray:
    """y[i] = sum of x[j] for j <= i along ``axis`` (j < i if exclusive; j >= i if reverse)."""
    return _cumulate(x, axis, exclusive, reverse, np.cumsum, 0)


@register_op("CumProd", inputs=["x", "axis"], attrs=_SCAN_ATTRS, infer=_infer_cumulative,
             cost=flops_per_output(1))
def cumprod_kernel(x: np.ndarray, axis: np.ndarray, *, exclusive: bool = False,
                   reverse: bool = False) -> np.ndarray:
    """y[i] = product of x[j] for j <= i along ``axis`` (exclusive and reverse as CumSum)."""
    return _cumulate(x, axis, exclusive, reverse, np.cumprod, 1)
