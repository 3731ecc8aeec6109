"""Writers of data movement, reductions and matrix products."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers._base import (
    _WIDE_FLOATS,
    Inputs,
    Outs,
    _array,
    _dtype,
    _out_dtype,
    _writes,
)
from ge.engines.transpose import Transposer
from ge.errors import ExecutionError
from ge.ir import Node
from ge.ops.fused_matmul import gelu_erf
from ge.ops.registry import const_value
from ge.ops.shape_utils import normalize_axes, normalize_axis
from ge.ops.tensor_ops import slice_index

# -- plumbing ---------------------------------------------------------------------------

@_writes("Identity")
def _identity(node: Node) -> Optional[WritingKernel]:
    """x copied into out."""

    def run(inputs: Inputs, outs: Outs) -> None:
        np.copyto(outs[0], _array(inputs, 0))

    return run


@_writes("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshaped(node: Node) -> Optional[WritingKernel]:
    """x's elements in C order copied into out (out has the result's shape)."""

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        np.copyto(out, _array(inputs, 0).reshape(out.shape))

    return run


@_writes("Cast")
def _cast(node: Node) -> Optional[WritingKernel]:
    """x converted into out's dtype; floats to integers truncate toward zero first."""
    truncate = _dtype(node).kind == "f" and _out_dtype(node).kind in "iu"

    def run(inputs: Inputs, outs: Outs) -> None:
        if truncate:
            np.trunc(_array(inputs, 0), out=outs[0], casting="unsafe")
        else:
            np.copyto(outs[0], _array(inputs, 0), casting="unsafe")

    return run


@_writes("Transpose")
def _transpose(node: Node) -> Optional[WritingKernel]:
    """x with its axes permuted, copied into out (a batch of matrix transposes through
    OpenBLAS's ``omatcopy``: ``ge.engines.transpose``)."""
    perm = node.attrs["perm"]
    as_matrices = Transposer(perm) if perm is not None else None

    def run(inputs: Inputs, outs: Outs) -> None:
        source = _array(inputs, 0)
        if as_matrices is None or not as_matrices(source, outs[0]):
            np.copyto(outs[0], np.transpose(source, perm))

    return run


@_writes("Concat")
def _concat(node: Node) -> Optional[WritingKernel]:
    """The inputs joined along ``axis`` into out."""
    axis = node.attrs["axis"]

    def run(inputs: Inputs, outs: Outs) -> None:
        np.concatenate([a for a in inputs if a is not None], axis=axis, out=outs[0])

    return run


@_writes("Slice")
def _slice(node: Node) -> Optional[WritingKernel]:
    """x's slice copied into out; the index is computed once per input shape and bounds
    (the clamping costs about 3 us of Python a call)."""
    indices: dict[tuple[Any, ...], tuple[slice, ...]] = {}

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        key = (x.shape, *(None if v is None else v.tobytes() for v in inputs[1:]))
        index = indices.get(key)
        if index is None:
            axes = inputs[3] if len(inputs) > 3 else None
            steps = inputs[4] if len(inputs) > 4 else None
            index = slice_index(x.shape, _array(inputs, 1), _array(inputs, 2), axes, steps)
            if len(indices) < 16:
                indices[key] = index
        np.copyto(outs[0], x[index])

    return run


@_writes("Pad")
def _pad(node: Node) -> Optional[WritingKernel]:
    """x (cropped where a pad is negative) copied into out's interior, then each padded
    axis's borders filled in place, axis by axis as ``np.pad`` does (so corners take
    the later axes' rule): the constant, the edge cell, the mirrored cells (reflect) or
    the far end (wrap). ``np.pad`` costs 20-40 us of bookkeeping on any array; this is a
    few slice copies, planned once per input shape and pads. A reflect or wrap wider
    than its axis goes to ``np.pad``."""
    mode = node.attrs["mode"]
    plans: dict[tuple[Any, ...], Optional[_PadPlan]] = {}

    def run(inputs: Inputs, outs: Outs) -> None:
        x, out = _array(inputs, 0), outs[0]
        pads, axes = _array(inputs, 1), inputs[3] if len(inputs) > 3 else None
        key = (x.shape, pads.tobytes(), None if axes is None else axes.tobytes())
        plan = plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            if len(plans) >= _PAD_PLANS_KEPT:
                plans.clear()
            plan = plans[key] = _pad_plan(x.shape, pads, axes, mode)
        if plan is None:
            crop, widths = _pad_widths(x.shape, pads, axes)
            np.copyto(out, np.pad(x[crop], widths, mode=mode))
            return
        out[plan.interior] = x[plan.crop]
        if mode == "constant":
            given = inputs[2] if len(inputs) > 2 else None
            fill = out.dtype.type(0) if given is None or given.size == 0 \
                else given.reshape(-1)[0]
            for target in plan.fills:
                out[target] = fill
        for target, source in plan.copies:
            out[target] = out[source]

    return run


class _PadPlan:
    """The slices one Pad writes: x's crop into out's interior, then the borders (the
    constant's slices, or copies within out, in order)."""

    __slots__ = ("crop", "interior", "fills", "copies")

    def __init__(self, crop: tuple[slice, ...], interior: tuple[slice, ...]) -> None:
        self.crop, self.interior = crop, interior
        self.fills: list[tuple[slice, ...]] = []
        self.copies: list[tuple[tuple[slice, ...], tuple[slice, ...]]] = []


_UNPLANNED: Any = object()
_PAD_PLANS_KEPT = 16


def _pad_widths(shape: tuple[int, ...], pads: np.ndarray, axes: Optional[np.ndarray]
                ) -> tuple[tuple[slice, ...], list[tuple[int, int]]]:
    """The crop of x (negative pads) and the (before, after) widths of each axis."""
    ndim = len(shape)
    chosen = list(range(ndim)) if axes is None else \
        normalize_axes([int(v) for v in axes.reshape(-1)], ndim)
    amounts = [int(v) for v in pads.reshape(-1)]
    widths = [(0, 0)] * ndim
    crop: list[slice] = [slice(None)] * ndim
    for position, axis in enumerate(chosen):
        begin, end = amounts[position], amounts[position + len(chosen)]
        crop[axis] = slice(max(-begin, 0), shape[axis] - max(-end, 0))
        widths[axis] = (max(begin, 0), max(end, 0))
    return tuple(crop), widths


def _pad_plan(shape: tuple[int, ...], pads: np.ndarray, axes: Optional[np.ndarray],
              mode: str) -> Optional[_PadPlan]:
    """The slices of one Pad, or None where ``np.pad`` must do it (a reflect or wrap
    wider than its axis)."""
    crop, widths = _pad_widths(shape, pads, axes)
    cropped = [len(range(*part.indices(size))) for part, size in zip(crop, shape)]
    limit = 1 if mode == "reflect" else 0
    if mode in ("reflect", "wrap") and any(
            max(b, e) > cropped[axis] - limit for axis, (b, e) in enumerate(widths)):
        return None
    plan = _PadPlan(crop, tuple(slice(b, b + n) for (b, _), n in zip(widths, cropped)))
    for axis, (begin, end) in enumerate(widths):
        if not (begin or end):
            continue
        size = cropped[axis]

        def at(part: slice, axis: int = axis) -> tuple[slice, ...]:
            return (slice(None),) * axis + (part,)

        last = begin + size  # one past the interior
        if mode == "constant":
            plan.fills += [at(slice(0, begin)), at(slice(last, last + end))]
        elif mode == "edge":
            plan.copies += [(at(slice(0, begin)), at(slice(begin, begin + 1))),
                            (at(slice(last, last + end)), at(slice(last - 1, last)))]
        elif mode == "reflect":
            stop = last - 2 - end
            plan.copies += [(at(slice(0, begin)), at(slice(2 * begin, begin, -1))),
                            (at(slice(last, last + end)),
                             at(slice(last - 2, stop if stop >= 0 else None, -1)))]
        else:  # wrap
            plan.copies += [(at(slice(0, begin)), at(slice(last - begin, last))),
                            (at(slice(last, last + end)), at(slice(begin, begin + end)))]
    return plan


@_writes("Gather")
def _gather(node: Node) -> Optional[WritingKernel]:
    """``take(x, indices, axis, out=out)``; negative indices count from the end. Constant
    indices are checked against the axis's size range once; a constant scalar index is
    a plain index copy (``out[...] = x[:, :, i]``)."""
    data, constant = node.inputs[0], const_value(node.inputs[1])
    if data is not None and constant is not None and constant.size:
        return _gather_constant(normalize_axis(node.attrs["axis"], data.rank), constant)

    def run(inputs: Inputs, outs: Outs) -> None:
        x, indices = _array(inputs, 0), _array(inputs, 1)
        axis = normalize_axis(node.attrs["axis"], x.ndim)
        if indices.size == 0:
            return
        dim = x.shape[axis]
        low, high = int(indices.min()), int(indices.max())
        if low < -dim or high >= dim:
            bad = low if low < -dim else high
            raise IndexError(f"Gather: index {bad} is out of range for axis {axis} of size "
                             f"{dim}")
        np.take(x, indices, axis=axis, out=outs[0], mode="wrap")  # in range: wrap = Python

    return run


def _gather_constant(axis: int, indices: np.ndarray) -> WritingKernel:
    low, high = int(indices.min()), int(indices.max())
    index = (slice(None),) * axis + (int(indices),) if indices.ndim == 0 else None

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        dim = x.shape[axis]
        if low < -dim or high >= dim:
            bad = low if low < -dim else high
            raise IndexError(f"Gather: index {bad} is out of range for axis {axis} of size "
                             f"{dim}")
        if index is not None:
            np.copyto(outs[0], x[index])
        else:
            np.take(x, indices, axis=axis, out=outs[0], mode="wrap")

    return run


# -- reductions -------------------------------------------------------------------------

def _reduce_axes(x: np.ndarray, axes: Optional[np.ndarray], noop: int
                 ) -> Optional[tuple[int, ...]]:
    """The axes to reduce; None means "copy x unchanged"."""
    listed = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not listed:
        return None if noop else tuple(range(x.ndim))
    return tuple(normalize_axes(listed, x.ndim))


def _extreme(dtype: np.dtype, highest: bool) -> Any:
    if dtype.kind == "b":
        return highest
    if dtype.kind in "iu":
        return np.iinfo(dtype).max if highest else np.iinfo(dtype).min
    return np.inf if highest else -np.inf


@_writes("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")
def _reduce(node: Node) -> Optional[WritingKernel]:
    """The reduction over the axes input, into out (sum and mean in x's dtype; integer
    means and 16-bit float sums and means are not covered)."""
    op_type, dtype = node.op_type, _dtype(node)
    if (op_type == "ReduceMean" and dtype.kind != "f") \
            or (op_type in ("ReduceSum", "ReduceMean") and dtype == np.float16):
        return None
    keepdims, noop = bool(node.attrs["keepdims"]), node.attrs["noop_with_empty_axes"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x, out = _array(inputs, 0), outs[0]
        axes = _reduce_axes(x, inputs[1] if len(inputs) > 1 else None, noop)
        if axes is None:
            np.copyto(out, x)
        elif op_type == "ReduceMax":
            np.max(x, axis=axes, keepdims=keepdims, initial=_extreme(x.dtype, False), out=out)
        elif op_type == "ReduceMin":
            np.min(x, axis=axes, keepdims=keepdims, initial=_extreme(x.dtype, True), out=out)
        else:
            np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype, out=out)
            if op_type == "ReduceMean":
                count = math.prod(x.shape[a] for a in axes)
                np.divide(out, x.dtype.type(count), out=out)

    return run


# -- matrix products --------------------------------------------------------------------

def _matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``a @ b`` into out; a batch of ``a`` against a matrix ``b`` as one large product."""
    if a.ndim > 2 and b.ndim == 2:
        np.matmul(a.reshape(-1, a.shape[-1]), b, out=out.reshape(-1, out.shape[-1]))
    else:
        np.matmul(a, b, out=out)


def _operands(inputs: Inputs, transpose_a: bool, transpose_b: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    a, b = _array(inputs, 0), _array(inputs, 1)
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return a, b


@_writes("MatMul")
def _matmul(node: Node) -> Optional[WritingKernel]:
    """``a' @ b'`` into out (16-bit floats, which the reference widens, are not covered)."""
    if _dtype(node) == np.float16:
        return None
    transpose_a, transpose_b = node.attrs["transpose_a"], node.attrs["transpose_b"]

    def run(inputs: Inputs, outs: Outs) -> None:
        _matmul_into(*_operands(inputs, transpose_a, transpose_b), outs[0])

    return run


@_writes("Gemm")
def _gemm(node: Node) -> Optional[WritingKernel]:
    """``alpha * a' @ b' + beta * c`` into out, float32 and float64."""
    dtype = _dtype(node)
    if dtype not in _WIDE_FLOATS:
        return None
    alpha, beta = dtype.type(node.attrs["alpha"]), dtype.type(node.attrs["beta"])
    scale, scale_c = node.attrs["alpha"] != 1.0, node.attrs["beta"] != 1.0
    transpose_a, transpose_b = bool(node.attrs["transA"]), bool(node.attrs["transB"])

    def run(inputs: Inputs, outs: Outs) -> None:
        a, b, out = _array(inputs, 0), _array(inputs, 1), outs[0]
        np.matmul(a.T if transpose_a else a, b.T if transpose_b else b, out=out)
        if scale:
            np.multiply(out, alpha, out=out)
        c = inputs[2] if len(inputs) > 2 else None
        if c is not None:
            np.add(out, c * beta if scale_c else c, out=out)

    return run


def _gelu_tanh_into(y: np.ndarray) -> None:
    """fused_matmul's gelu_tanh on y, in place, through one scratch array."""
    inner = np.multiply(y, y)
    inner *= 0.044715
    inner += 1
    inner *= y
    inner *= math.sqrt(2.0 / math.pi)
    np.tanh(inner, out=inner)
    inner += 1
    np.multiply(inner, y, out=y)
    y *= 0.5


@_writes("MatMulBiasAdd")
def _matmul_bias_add(node: Node) -> Optional[WritingKernel]:
    """``activation(a' @ b' + bias + residual)`` with the product written into out and
    the rest applied in place (16-bit floats are not covered)."""
    if _dtype(node) == np.float16:
        return None
    attrs = node.attrs
    activation = attrs["activation"]
    has_residual = len(node.inputs) > 3 and node.inputs[3] is not None

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _matmul_into(*_operands(inputs, attrs["transpose_a"], attrs["transpose_b"]), out)
        np.add(out, _array(inputs, 2), out=out)
        if has_residual:
            residual = _array(inputs, 3)
            if residual.shape != out.shape:
                raise ExecutionError(f"MatMulBiasAdd node {node.name!r}: the residual has "
                                     f"shape {list(residual.shape)}, the product "
                                     f"{list(out.shape)}")
            np.add(out, residual, out=out)
        if activation == "relu":
            np.maximum(out, out.dtype.type(0), out=out)
        elif activation == "gelu":
            np.copyto(out, gelu_erf(out))
        elif activation == "gelu_tanh":
            _gelu_tanh_into(out)

    return run


