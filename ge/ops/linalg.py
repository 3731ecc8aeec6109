"""Linear algebra beyond MatMul: Einsum and Det, as ONNX defines them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ge.ir import TensorDesc
from ge.ir.tensor import Dim, num_elements
from ge.ops.elementwise import FLOATS, NUMERIC
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    register_op,
)
from ge.ops.shape_utils import broadcast_dim

__all__ = ["einsum_output_shape", "einsum_labels", "split_equation"]


# -- Einsum -----------------------------------------------------------------------------

_ELLIPSIS = "..."


def split_equation(equation: str, count: int) -> tuple[list[str], str]:
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


def einsum_labels(term: str, rank: int) -> list[str]:
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
    terms, output = split_equation(equation, len(shapes))
    sizes: dict[str, Dim] = {}
    hidden = 0
    for term, shape in zip(terms, shapes):
        labels = einsum_labels(term, len(shape))
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
    labels = einsum_labels(output, rank)
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
    terms, output = split_equation(equation, len(inputs))
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
