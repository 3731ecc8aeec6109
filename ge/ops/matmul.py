"""Matrix products: MatMul (NumPy / ONNX semantics, TensorFlow's transposes) and Gemm.

``MatMul`` follows ``numpy.matmul``: a 1-D operand is promoted to a matrix
(a row for ``a``, a column for ``b``) and the added dimension is removed from
the result; leading (batch) dimensions broadcast. ``Gemm`` is ONNX's
``alpha * A' @ B' + beta * C`` on matrices. Half-precision products accumulate
in float32 through BLAS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, Shape, format_shape, is_static_dim, num_elements
from ge.ops.registry import Attr, AttrType, Cost, InferenceContext, Input, register_op
from ge.ops.shape_utils import broadcast_shapes, dims_equal

FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
INTEGERS = (DataType.DT_INT8, DataType.DT_INT16, DataType.DT_INT32, DataType.DT_INT64,
            DataType.DT_UINT8, DataType.DT_UINT16, DataType.DT_UINT32, DataType.DT_UINT64)
NUMERIC = FLOATS + INTEGERS

_HALF_KINDS = ("float16", "bfloat16")


# -- shape rules ------------------------------------------------------------------------

def _transposed(shape: Shape, transpose: bool) -> Shape:
    """``shape`` with its last two dimensions swapped when ``transpose`` (rank >= 2)."""
    if not transpose or len(shape) < 2:
        return shape
    return shape[:-2] + (shape[-1], shape[-2])


def _merge_dim(a: Dim, b: Dim) -> Dim:
    """Two dimensions that must agree: the known one wins."""
    if is_static_dim(a):
        return a
    return b if is_static_dim(b) else a


def matmul_shape(ctx: InferenceContext, a: Shape, b: Shape) -> tuple[Shape, Dim]:
    """The result shape of ``a @ b`` (NumPy rules) and the contracted dimension K.

    ``a`` and ``b`` are the operand shapes after any transposition. Raises the
    context's ``ShapeError`` when a rank is 0, K differs, or batches do not broadcast.
    """
    shown = f"a {format_shape(a)} and b {format_shape(b)}"
    if not a or not b:
        raise ctx.fail(f"operands must have rank >= 1, got {shown}")
    a_matrix = a if len(a) >= 2 else (1,) + a
    b_matrix = b if len(b) >= 2 else b + (1,)
    k_a, k_b = a_matrix[-1], b_matrix[-2]
    if not dims_equal(k_a, k_b):
        raise ctx.fail(f"inner dimensions differ ({k_a} vs {k_b}) for {shown}")
    batch = broadcast_shapes(a_matrix[:-2], b_matrix[:-2])
    if batch is None:
        raise ctx.fail(f"batch dimensions do not broadcast for {shown}")
    rows: Shape = (a_matrix[-2],) if len(a) >= 2 else ()
    columns: Shape = (b_matrix[-1],) if len(b) >= 2 else ()
    return tuple(batch) + rows + columns, _merge_dim(k_a, k_b)


def _static_or_one(dim: Dim) -> int:
    return dim if isinstance(dim, int) and is_static_dim(dim) else 1


def _bytes(descs: Sequence[Optional[TensorDesc]]) -> int:
    return sum(num_elements(d.shape) * d.dtype.itemsize for d in descs if d is not None)


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in the operands' dtype; half types accumulate in float32."""
    if a.dtype.name in _HALF_KINDS:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.asarray(np.matmul(a, b))


# -- MatMul -----------------------------------------------------------------------------

def _infer_matmul(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1)
    ctx.require_dtypes(0, NUMERIC)
    a = _transposed(ctx.shape(0), ctx.attr("transpose_a"))
    b = _transposed(ctx.shape(1), ctx.attr("transpose_b"))
    shape, _ = matmul_shape(ctx, a, b)
    return [TensorDesc(shape, dtype)]


def _matmul_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    a = _transposed(ctx.shape(0), ctx.attr("transpose_a"))
    b = _transposed(ctx.shape(1), ctx.attr("transpose_b"))
    inner = _merge_dim(a[-1], b[-2] if len(b) >= 2 else b[-1])
    flops = 2 * num_elements(outputs[0].shape) * _static_or_one(inner)
    return Cost(flops, _bytes(ctx.inputs) + _bytes(outputs))


@register_op(
    "MatMul",
    inputs=["a", "b"],
    attrs=[
        Attr("transpose_a", AttrType.BOOL, False, doc="swap the last two dims of a (rank >= 2)"),
        Attr("transpose_b", AttrType.BOOL, False, doc="swap the last two dims of b (rank >= 2)"),
    ],
    infer=_infer_matmul,
    cost=_matmul_cost,
)
def matmul_kernel(a: np.ndarray, b: np.ndarray, *, transpose_a: bool = False,
                  transpose_b: bool = False) -> np.ndarray:
    """y = a @ b as numpy.matmul: 1-D operands promoted, batch dimensions broadcast.

    ``transpose_a`` / ``transpose_b`` swap the last two dimensions of an operand
    of rank >= 2 first (a 1-D operand is its own transpose).
    """
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return _product(a, b)


# -- Gemm -------------------------------------------------------------------------------

def _unidirectional(ctx: InferenceContext, c: Shape, target: Shape) -> Shape:
    """``target`` refined by ``c``; fail unless ``c`` broadcasts to ``target``."""
    if len(c) > len(target):
        raise ctx.fail(f"c {format_shape(c)} has rank > 2")
    result = list(target)
    for position, dim in enumerate(c, start=len(target) - len(c)):
        want = target[position]
        if dim == 1 or dim == want:
            continue
        if not dims_equal(dim, want):
            raise ctx.fail(f"c {format_shape(c)} does not broadcast to the result "
                           f"{format_shape(target)}")
        if is_static_dim(dim):
            result[position] = dim
    return tuple(result)


def _gemm_operands(ctx: InferenceContext) -> tuple[Shape, Shape]:
    for index in (0, 1):
        ctx.require_rank(index, 2)
    a = _transposed(ctx.shape(0), bool(ctx.attr("transA")))
    b = _transposed(ctx.shape(1), bool(ctx.attr("transB")))
    return a, b


def _infer_gemm(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1, 2)
    ctx.require_dtypes(0, NUMERIC)
    a, b = _gemm_operands(ctx)
    shape, _ = matmul_shape(ctx, a, b)
    if ctx.has_input(2):
        shape = _unidirectional(ctx, ctx.shape(2), shape)
    return [TensorDesc(shape, dtype)]


def _gemm_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    a, b = _gemm_operands(ctx)
    elements = num_elements(outputs[0].shape)
    flops = 2 * elements * _static_or_one(_merge_dim(a[-1], b[-2]))
    if ctx.has_input(2):
        flops += 2 * elements
    return Cost(flops, _bytes(ctx.inputs) + _bytes(outputs))


def _scaled(array: np.ndarray, factor: float, dtype: np.dtype) -> np.ndarray:
    """``factor * array`` in ``dtype`` (integers scale in float64, then truncate)."""
    if factor == 1.0:
        return array
    if dtype.kind in "iu":
        return np.trunc(array.astype(np.float64) * factor).astype(dtype)
    return array * array.dtype.type(factor)


@register_op(
    "Gemm",
    inputs=["a", "b", Input("c", optional=True)],
    attrs=[
        Attr("alpha", AttrType.FLOAT, 1.0, doc="scale of a' @ b'"),
        Attr("beta", AttrType.FLOAT, 1.0, doc="scale of c"),
        Attr("transA", AttrType.INT, 0, choices=(0, 1), doc="1: a is [K, M]"),
        Attr("transB", AttrType.INT, 0, choices=(0, 1), doc="1: b is [N, K]"),
    ],
    infer=_infer_gemm,
    cost=_gemm_cost,
)
def gemm_kernel(a: np.ndarray, b: np.ndarray, c: Optional[np.ndarray] = None, *,
                alpha: float = 1.0, beta: float = 1.0, transA: int = 0,
                transB: int = 0) -> np.ndarray:
    """y = alpha * a' @ b' + beta * c, with a' = a.T if transA, b' = b.T if transB.

    ``a`` and ``b`` are matrices; ``c`` (optional) broadcasts to the [M, N] result.
    """
    dtype = a.dtype
    compute = np.dtype(np.float32) if dtype.name in _HALF_KINDS else dtype
    left = (a.T if transA else a).astype(compute, copy=False)
    right = (b.T if transB else b).astype(compute, copy=False)
    result = _scaled(np.asarray(np.matmul(left, right)), alpha, dtype)
    if c is not None:
        result = result + _scaled(c.astype(compute, copy=False), beta, dtype)
    return np.asarray(result).astype(dtype, copy=False)
