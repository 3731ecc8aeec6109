"""Reductions over axes (ONNX 18): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare.

The axes arrive as an optional integer input, not an attribute. When they are
absent or empty the op reduces every axis, unless ``noop_with_empty_axes`` is
set, in which case it returns its input unchanged. With ``keepdims`` each
reduced axis stays as a dimension of size 1; without it the axis is removed.
Half-precision sums, means and products accumulate in float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, Shape, num_elements
from ge.ops.registry import Attr, AttrType, Cost, InferenceContext, Input, register_op
from ge.ops.shape_utils import normalize_axes

FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
NUMERIC = FLOATS + (DataType.DT_INT8, DataType.DT_INT16, DataType.DT_INT32, DataType.DT_INT64,
                    DataType.DT_UINT8, DataType.DT_UINT16, DataType.DT_UINT32,
                    DataType.DT_UINT64)
AXES_DTYPES = (DataType.DT_INT64, DataType.DT_INT32)
ORDERED = NUMERIC + (DataType.DT_BOOL,)  # ReduceMax and ReduceMin also take bool

_HALF_KINDS = ("float16", "bfloat16")


# -- shape inference --------------------------------------------------------------------

def _constant_axes(ctx: InferenceContext) -> Optional[list[int]]:
    """The normalized axes when known at compile time, else None. ``[]`` means empty."""
    if not ctx.has_input(1):
        return []
    ctx.require_dtypes(1, AXES_DTYPES, "axes must be")
    if len(ctx.shape(1)) > 1:
        raise ctx.fail(f"axes must be a 1-D tensor, got shape {list(ctx.shape(1))}")
    if tuple(ctx.shape(1)) == (0,):
        return []
    values = ctx.const_ints(1)
    if values is None:
        return None
    try:
        return normalize_axes(values, len(ctx.shape(0)))
    except ValueError as error:
        raise ctx.fail(f"{error} (x has shape {list(ctx.shape(0))})") from None


def reduced_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    """``shape`` with ``axes`` set to 1 (``keepdims``) or removed."""
    chosen = set(axes)
    result: list[Dim] = []
    for index, dim in enumerate(shape):
        if index not in chosen:
            result.append(dim)
        elif keepdims:
            result.append(1)
    return tuple(result)


def _infer_reduce(allowed: Sequence[DataType]) -> Callable[[InferenceContext], list[TensorDesc]]:
    def infer(ctx: InferenceContext) -> list[TensorDesc]:
        ctx.require_dtypes(0, allowed)
        desc = ctx.input(0)
        keepdims = bool(ctx.attr("keepdims"))
        axes = _constant_axes(ctx)
        if axes is None:
            return [TensorDesc(_unknown_axes_shape(ctx, keepdims), desc.dtype)]
        if not axes:
            if ctx.attr("noop_with_empty_axes"):
                return [TensorDesc(desc.shape, desc.dtype, desc.format)]
            axes = list(range(desc.rank))
        return [TensorDesc(reduced_shape(desc.shape, axes, keepdims), desc.dtype)]

    return infer


def _unknown_axes_shape(ctx: InferenceContext, keepdims: bool) -> Shape:
    """The output shape when the axes are a run-time input: every dimension may be reduced.

    With ``keepdims`` the rank stays and a size of 1 stays 1; without it the rank drops by
    the (static, non-zero) length of the axes input, which must then be known.
    """
    shape = ctx.shape(0)
    if keepdims:
        return tuple(1 if dim == 1 else -1 for dim in shape)
    count = ctx.shape(1)[0] if len(ctx.shape(1)) == 1 else 1
    if not isinstance(count, int) or count < 1:
        raise ctx.fail("with keepdims=0 the axes input must be a constant or have a static, "
                       "non-zero length: without it the output rank is unknown")
    if count > len(shape):
        raise ctx.fail(f"{count} axes given for x of shape {list(shape)}")
    return tuple([-1] * (len(shape) - count))


def _reduce_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    read = num_elements(ctx.shape(0)) * ctx.dtype(0).itemsize
    written = sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs)
    return Cost(num_elements(ctx.shape(0)), read + written)


# -- kernels ----------------------------------------------------------------------------

def _kernel_axes(x: np.ndarray, axes: Optional[np.ndarray],
                 noop_with_empty_axes: int) -> Optional[tuple[int, ...]]:
    """The axes to reduce as a tuple; None means "return x unchanged"."""
    listed = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not listed:
        return None if noop_with_empty_axes else tuple(range(x.ndim))
    return tuple(normalize_axes(listed, x.ndim))


def _widened(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.name in _HALF_KINDS else x


def _sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return np.sum(_widened(x), axis=axes, keepdims=keepdims, dtype=_widened(x).dtype)


def _mean(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    accumulator = np.dtype(np.float64) if x.dtype.kind in "iu" else _widened(x).dtype
    total = np.sum(x, axis=axes, keepdims=keepdims, dtype=accumulator)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / accumulator.type(count)  # an empty reduction gives NaN
    return np.asarray(np.trunc(mean) if x.dtype.kind in "iu" else mean)


def _prod(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return np.prod(_widened(x), axis=axes, keepdims=keepdims, dtype=_widened(x).dtype)


def _lowest(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


def _max(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    # an empty reduction gives the lowest value, as ONNX specifies
    return np.max(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype))


def _min(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keepdims, initial=_highest(x.dtype))


def _float(x: np.ndarray) -> np.ndarray:
    """x in the precision a non-linear reduction computes in (float64 for integers)."""
    return x.astype(np.float64) if x.dtype.kind in "iub" else _widened(x)


def _l1(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    wide = _widened(x)
    return np.sum(np.abs(wide), axis=axes, keepdims=keepdims, dtype=wide.dtype)


def _sum_square(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    wide = _widened(x)
    return np.sum(wide * wide, axis=axes, keepdims=keepdims, dtype=wide.dtype)


def _l2(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    wide = _float(x)
    return np.sqrt(np.sum(wide * wide, axis=axes, keepdims=keepdims))


def _log_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # an empty or zero sum gives -inf
        return np.log(np.sum(_float(x), axis=axes, keepdims=keepdims))


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    wide = _float(x)
    shift = np.max(wide, axis=axes, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(shift), shift, 0.0)  # all -inf, +inf or empty: no shift
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        total = np.sum(np.exp(wide - shift), axis=axes, keepdims=True)
        result = np.log(total) + shift
    return result if keepdims else np.squeeze(result, axis=axes)


Reducer = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _register_reduce(op_type: str, reducer: Reducer, doc: str,
                     allowed: Sequence[DataType] = NUMERIC) -> None:
    def kernel(x: np.ndarray, axes: Optional[np.ndarray] = None, *, keepdims: int = 1,
               noop_with_empty_axes: int = 0) -> np.ndarray:
        chosen = _kernel_axes(x, axes, noop_with_empty_axes)
        if chosen is None:
            return x
        return np.asarray(reducer(x, chosen, bool(keepdims))).astype(x.dtype, copy=False)

    kernel.__doc__ = doc
    kernel.__name__ = f"{op_type.lower()}_kernel"
    register_op(
        op_type,
        inputs=["x", Input("axes", optional=True, doc="int64 axes; absent or empty: all")],
        attrs=[
            Attr("keepdims", AttrType.INT, 1, choices=(0, 1),
                 doc="1: keep each reduced axis as size 1; 0: remove it"),
            Attr("noop_with_empty_axes", AttrType.INT, 0, choices=(0, 1),
                 doc="1: empty axes return x unchanged; 0: empty axes reduce everything"),
        ],
        infer=_infer_reduce(allowed),
        cost=_reduce_cost,
    )(kernel)


_register_reduce("ReduceSum", _sum, "y = the sum of x over axes.")
_register_reduce("ReduceMean", _mean,
                 "y = the mean of x over axes (float16 accumulates in float32; integer "
                 "means truncate toward zero).")
_register_reduce("ReduceMax", _max,
                 "y = the maximum of x over axes (NaN propagates; an empty reduction gives "
                 "the lowest value; for bool, any).", ORDERED)
_register_reduce("ReduceMin", _min,
                 "y = the minimum of x over axes (NaN propagates; an empty reduction gives "
                 "the highest value; for bool, all).", ORDERED)
_register_reduce("ReduceProd", _prod, "y = the product of x over axes.")
_register_reduce("ReduceL1", _l1, "y = the sum of |x| over axes (0 for an empty reduction).")
_register_reduce("ReduceL2", _l2,
                 "y = sqrt(the sum of x * x over axes); integers compute in float64 and "
                 "truncate.")
_register_reduce("ReduceSumSquare", _sum_square, "y = the sum of x * x over axes.")
_register_reduce("ReduceLogSum", _log_sum,
                 "y = log(the sum of x over axes); an empty reduction gives -inf.")
_register_reduce("ReduceLogSumExp", _log_sum_exp,
                 "y = log(the sum of exp(x) over axes), computed shifted by the maximum so "
                 "that it does not overflow; an empty reduction gives -inf.")
