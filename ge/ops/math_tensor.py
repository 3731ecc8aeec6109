"""Math ops that are not elementwise: CumSum, CumProd, Einsum, Det, and BitCast.

Each follows the ONNX operator of the same name (registered from ``math_ops``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, num_elements
from ge.ops.elementwise import FLOATS, NUMERIC
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    Trait,
    flops_per_output,
    register_op,
)
from ge.ops.shape_utils import broadcast_dim, normalize_axis

__all__ = ["einsum_output_shape", "bit_width"]

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
    if exclusive:
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


# -- Einsum -----------------------------------------------------------------------------

_ELLIPSIS = "..."


def _split_equation(equation: str, count: int) -> tuple[list[str], str]:
    """The operand terms and the output term (made explicit) of an einsum equation."""
    text = equation.replace(" ", "")
    left, arrow, right = text.partition("->")
    terms = left.split(",")
    if len(terms) != count:
        raise ValueError(f"equation {equation!r} has {len(terms)} operand term(s) "
                         f"for {count} input(s)")
    for term in terms + [right]:
        letters = term.replace(_ELLIPSIS, "", 1)
        if not all(c.isascii() and c.isalpha() for c in letters):
            raise ValueError(f"equation {equation!r}: term {term!r} holds other than letters "
                             f"and one ellipsis")
    if not arrow:
        labels = [c for term in terms for c in term.replace(_ELLIPSIS, "")]
        once = sorted(c for c in set(labels) if labels.count(c) == 1)
        right = (_ELLIPSIS if any(_ELLIPSIS in t for t in terms) else "") + "".join(once)
    return terms, right


def _labels(term: str, rank: int) -> list[str]:
    """One label per dimension; ellipsis dimensions are '#k', k counted from its end."""
    if _ELLIPSIS not in term:
        if len(term) != rank:
            raise ValueError(f"term {term!r} names {len(term)} dimensions of a rank-{rank} input")
        return list(term)
    head, tail = term.split(_ELLIPSIS)
    hidden = rank - len(head) - len(tail)
    if hidden < 0:
        raise ValueError(f"term {term!r} names more dimensions than its rank-{rank} input has")
    return list(head) + [f"#{k}" for k in reversed(range(hidden))] + list(tail)


def einsum_output_shape(equation: str, shapes: Sequence[Sequence[Dim]]) -> tuple[Dim, ...]:
    """The output shape of ``Einsum(equation)`` on inputs of ``shapes``; ValueError if invalid."""
    terms, output = _split_equation(equation, len(shapes))
    sizes: dict[str, Dim] = {}
    hidden = 0
    for term, shape in zip(terms, shapes):
        labels = _labels(term, len(shape))
        hidden = max(hidden, sum(label.startswith("#") for label in labels))
        for label, dim in zip(labels, shape):
            merged = broadcast_dim(sizes.get(label, 1), dim)
            if merged is None:
                raise ValueError(f"dimension {label!r} is {sizes[label]} in one input and {dim} "
                                 f"in another")
            sizes[label] = merged
    if output.count(_ELLIPSIS) > 1 or any(output.count(c) > 1 for c in output.replace(".", "")):
        raise ValueError(f"output term {output!r} repeats a label")
    rank = len(output.replace(_ELLIPSIS, "")) + (hidden if _ELLIPSIS in output else 0)
    labels = _labels(output, rank)
    missing = [label for label in labels if label not in sizes]
    if missing:
        raise ValueError(f"output labels {missing} appear in no input term")
    return tuple(sizes[label] for label in labels)


def _infer_einsum(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    dtype = ctx.require_same_dtype(*range(ctx.num_inputs))
    try:
        shape = einsum_output_shape(ctx.attr("equation"), [ctx.shape(i)
                                                           for i in range(ctx.num_inputs)])
    except ValueError as error:
        raise ctx.fail(str(error)) from None
    return [TensorDesc(shape, dtype)]


def _einsum_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    work = max([num_elements(d.shape) for d in ctx.inputs if d is not None]
               + [num_elements(outputs[0].shape)])
    return Cost(2 * work, read + num_elements(outputs[0].shape) * outputs[0].dtype.itemsize)


@register_op("Einsum", inputs=[Input("inputs", variadic=True)],
             attrs=[Attr("equation", AttrType.STRING, REQUIRED)], infer=_infer_einsum,
             cost=_einsum_cost)
def einsum_kernel(*inputs: np.ndarray, equation: str) -> np.ndarray:
    """Einstein summation, ``y = einsum(equation, *inputs)``, as ONNX defines it (implicit
    output: the labels used once, sorted, after the ellipsis dimensions)."""
    terms, output = _split_equation(equation, len(inputs))
    dtype = inputs[0].dtype
    wide = [a.astype(np.float32) if a.dtype.kind not in "fiub" else a for a in inputs]
    result = np.einsum(f"{','.join(terms)}->{output}", *wide, optimize=len(inputs) > 2)
    return np.asarray(result).astype(dtype, copy=False)


# -- Det --------------------------------------------------------------------------------

def _infer_det(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    shape = ctx.shape(0)
    if len(shape) < 2:
        raise ctx.fail(f"input 'x' must have rank >= 2 (square matrices), got {list(shape)}")
    rows, columns = shape[-2], shape[-1]
    if isinstance(rows, int) and isinstance(columns, int) and -1 not in (rows, columns) \
            and rows != columns:
        raise ctx.fail(f"the matrices of 'x' {list(shape)} are not square")
    return [TensorDesc(tuple(shape[:-2]), ctx.dtype(0))]


def _det_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    size = ctx.shape(0)[-1]
    order = size if isinstance(size, int) and size > 0 else 1
    count = num_elements(outputs[0].shape)
    return Cost(count * order ** 3, count * order * order * ctx.dtype(0).itemsize)


@register_op("Det", inputs=["x"], infer=_infer_det, cost=_det_cost)
def det_kernel(x: np.ndarray) -> np.ndarray:
    """y = the determinant of each square matrix of x ([..., M, M] -> [...])."""
    return np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)


# -- BitCast ----------------------------------------------------------------------------

_NARROW_BITS = {DataType.DT_INT4: 4, DataType.DT_UINT4: 4, DataType.DT_FLOAT4_E2M1: 4,
                DataType.DT_INT2: 2, DataType.DT_UINT2: 2}


def bit_width(dtype: DataType) -> int:
    """Bits per element of ``dtype`` (4 and 2 for the packed narrow types)."""
    return _NARROW_BITS.get(dtype, dtype.itemsize * 8)


def _infer_bitcast(ctx: InferenceContext) -> Sequence[TensorDesc]:
    source, target = ctx.dtype(0), ctx.attr("to")
    if bit_width(source) != bit_width(target):
        raise ctx.fail_dtype(f"cannot reinterpret {source.short_name} ({bit_width(source)} bits) "
                             f"as {target.short_name} ({bit_width(target)} bits): the widths "
                             f"must be equal")
    desc = ctx.input(0)
    return [TensorDesc(desc.shape, target, desc.format)]


@register_op("BitCast", inputs=["x"], attrs=[Attr("to", AttrType.DTYPE, REQUIRED)],
             infer=_infer_bitcast, traits=(Trait.PURE, Trait.ELEMENTWISE))
def bitcast_kernel(x: np.ndarray, *, to: DataType) -> np.ndarray:
    """y = the bits of x read as type ``to`` (of the same width)."""
    return (x if x.flags.c_contiguous else x.copy()).view(to.np_dtype)
