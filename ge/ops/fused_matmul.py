"""Fused matrix products: ``MatMulBiasAdd``, the seed's MatMul + BiasAdd in one op.

    y = activation(a' @ b' + bias + residual)

``a' @ b'`` is ``MatMul`` (NumPy rules, optional ``transpose_a`` / ``transpose_b``),
``bias`` is 1-D and is added along the last axis of the product, the optional
``residual`` has the product's shape (a transformer's skip connection: no
broadcasting), and ``activation`` is ``none``, ``relu``, ``gelu`` (the erf form) or
``gelu_tanh``. The optimizer's transformer fusions produce it; the ONNX exporter writes
it as its decomposition (``decompose_matmul_bias_add``): MatMul, then Add of the bias,
then Add of the residual, then Relu / Gelu.

The kernel adds the bias and the residual and applies the activation in place on the
product, so the result is written once. For float32 (and 16-bit floats, computed in float32)
the erf-form GELU uses ``gelu_erf``: erfc from a fitted rational form, accurate to
about 1e-6 relative, several times faster than the float64 series of ``Erf``;
float64 keeps the series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, Graph, Node, TensorDesc, Value
from ge.ir.tensor import Shape, format_shape, is_static_dim, num_elements
from ge.ops.elementwise import erf
from ge.ops.matmul import NUMERIC, matmul_shape
from ge.ops.registry import (
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    create_node,
    register_op,
)
from ge.ops.shape_utils import dims_equal

__all__ = ["ACTIVATIONS", "gelu_erf", "gelu_tanh", "decompose_matmul_bias_add"]

#: the activations MatMulBiasAdd applies after the bias
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh")

_FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
_ACTIVATION_FLOPS = {"none": 0, "relu": 1, "gelu": 30, "gelu_tanh": 10}


# -- GELU -------------------------------------------------------------------------------

# erfc(z) = t * exp(P(s) - z*z) for z >= 0, with t = 1 / (1 + z / 2) and s = 2.4 t - 1.4
# (t in (1/6, 1] mapped onto (-1, 1]). P: our least-squares fit of log(erfc(z) / t) + z*z
# on z in [0, 10] against math.erfc (degree 10, lowest power first). In float32 the
# result is within 4e-7 absolute and 2e-5 relative (where z*z itself rounds) of erfc.
_ERFC_FIT = (-0.5585953566232539, 0.5703071245466117, 0.015745231087992705,
             -0.029470664030307646, -0.0010468959981606758, 0.003708789010699913,
             -0.00027197249219747575, -0.0005362407327978134, 0.00012507220134452712,
             5.5786047608547907e-05, -2.0848787078154524e-05)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def _erfc_positive(z: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0 (float32) as a new array; ``scratch`` (z's shape) is overwritten."""
    t = z * z.dtype.type(0.5)
    t += 1
    np.reciprocal(t, out=t)
    s = np.multiply(t, z.dtype.type(2.4), out=scratch)
    s -= z.dtype.type(1.4)
    result = s * z.dtype.type(_ERFC_FIT[-1])
    result += z.dtype.type(_ERFC_FIT[-2])
    for coefficient in reversed(_ERFC_FIT[:-2]):
        result *= s
        result += z.dtype.type(coefficient)
    result -= np.multiply(z, z, out=scratch)
    np.exp(result, out=result)
    result *= t
    return result


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """y = x * Phi(x) = x / 2 * erfc(-x / sqrt(2)), the exact (erf) GELU.

    float64 goes through the float64 series of ``Erf``; other floats are computed
    in float32 through the fitted erfc (relative error about 1e-6), and cast back.
    Few temporaries: the kernel is bound by memory traffic, not arithmetic.
    """
    if x.dtype == np.float64:
        return np.asarray(0.5 * x * (1.0 + erf(x / math.sqrt(2.0))))
    wide = x.astype(np.float32, copy=False)
    z = np.abs(wide)
    z *= np.float32(1.0 / math.sqrt(2.0))
    phi = _erfc_positive(z, scratch=np.empty_like(z))
    phi *= np.float32(0.5)  # Phi(-|x|)
    # Phi(x) = Phi(-|x|) + [x >= 0] (1 - 2 Phi(-|x|)): exactly Phi(-|x|) for x < 0, so
    # the tail keeps its relative accuracy; plain passes, where a masked subtraction
    # (NumPy's where=) costs several times as much
    upper = np.multiply(phi, np.float32(-2.0), out=z)
    upper += np.float32(1.0)
    upper *= wide >= 0
    phi += upper  # Phi(x)
    phi *= np.maximum(wide, np.float32(-20.0), out=z)  # Phi underflows below -14: gelu(-inf) = 0
    return phi.astype(x.dtype, copy=False)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """y = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), in at least float32."""
    wide = x.astype(np.result_type(x.dtype, np.float32), copy=False)
    inner = wide * wide
    inner *= _CUBIC
    inner += 1
    inner *= wide
    inner *= _TANH_SCALE
    np.tanh(inner, out=inner)
    inner += 1
    inner *= wide
    inner *= 0.5
    return inner.astype(x.dtype, copy=False)


def _activate(y: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(y, y.dtype.type(0), out=y)
    if activation == "gelu":
        return gelu_erf(y)
    if activation == "gelu_tanh":
        return gelu_tanh(y)
    return y


# -- MatMulBiasAdd ----------------------------------------------------------------------

def _transposed(shape: Shape, transpose: bool) -> Shape:
    if not transpose or len(shape) < 2:
        return shape
    return shape[:-2] + (shape[-1], shape[-2])


def _infer_matmul_bias_add(ctx: InferenceContext) -> Sequence[TensorDesc]:
    dtype = ctx.require_same_dtype(0, 1, 2)
    ctx.require_dtypes(0, _FLOATS if ctx.attr("activation").startswith("gelu") else NUMERIC)
    ctx.require_rank(2, 1)
    a = _transposed(ctx.shape(0), ctx.attr("transpose_a"))
    b = _transposed(ctx.shape(1), ctx.attr("transpose_b"))
    shape, _ = matmul_shape(ctx, a, b)
    if not shape:
        raise ctx.fail(f"a {format_shape(a)} @ b {format_shape(b)} is a scalar; the bias "
                       f"needs an axis")
    size, columns = ctx.shape(2)[0], shape[-1]
    if is_static_dim(size) and is_static_dim(columns) and size not in (1, columns):
        raise ctx.fail(f"bias has {size} elements; the product {format_shape(shape)} has "
                       f"{columns} columns")
    if ctx.has_input(3):
        residual = ctx.input(3)
        if residual.dtype is not dtype:
            raise ctx.fail_dtype(f"residual has dtype {residual.dtype.short_name}; the "
                                 f"product's is {dtype.short_name}")
        if len(residual.shape) != len(shape) or not all(
                dims_equal(a, b) for a, b in zip(residual.shape, shape)):
            raise ctx.fail(f"residual has shape {format_shape(residual.shape)}; it must be "
                           f"the product's shape {format_shape(shape)} (no broadcasting)")
    return [TensorDesc(shape, dtype)]


def _matmul_bias_add_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    a = _transposed(ctx.shape(0), ctx.attr("transpose_a"))
    inner = a[-1] if isinstance(a[-1], int) and is_static_dim(a[-1]) else 1
    elements = num_elements(outputs[0].shape)
    added = 2 if ctx.has_input(3) else 1  # the bias, and the residual
    flops = elements * (2 * inner + added + _ACTIVATION_FLOPS[ctx.attr("activation")])
    moved = sum(num_elements(d.shape) * d.dtype.itemsize for d in [*ctx.inputs, *outputs]
                if d is not None)
    return Cost(flops, moved)


@register_op(
    "MatMulBiasAdd",
    inputs=["a", "b", "bias",
            Input("residual", optional=True, doc="added after the bias, before the "
                                                 "activation; the product's shape")],
    attrs=[
        Attr("transpose_a", AttrType.BOOL, False, doc="swap the last two dims of a (rank >= 2)"),
        Attr("transpose_b", AttrType.BOOL, False, doc="swap the last two dims of b (rank >= 2)"),
        Attr("activation", AttrType.STRING, "none", choices=ACTIVATIONS,
             doc="applied last: none, relu, gelu (erf form) or gelu_tanh"),
    ],
    infer=_infer_matmul_bias_add,
    cost=_matmul_bias_add_cost,
)
def matmul_bias_add_kernel(a: np.ndarray, b: np.ndarray, bias: np.ndarray,
                           residual: Optional[np.ndarray] = None, *,
                           transpose_a: bool = False, transpose_b: bool = False,
                           activation: str = "none") -> np.ndarray:
    """y = activation(a' @ b' + bias + residual): MatMul (NumPy rules), the 1-D bias added
    along the last axis, the residual (the product's shape) added, then none, relu, gelu
    (erf) or gelu_tanh. 16-bit floats compute in float32."""
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    dtype = a.dtype
    compute = np.dtype(np.float32) if dtype.name in ("float16", "bfloat16") else dtype
    a, b = a.astype(compute, copy=False), b.astype(compute, copy=False)
    if a.ndim > 2 and b.ndim == 2:  # one large product instead of one per leading index
        y = np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
    else:
        y = np.asarray(np.matmul(a, b))
    if y.ndim == 0:
        raise ValueError("MatMulBiasAdd: the product is a scalar; the bias needs an axis")
    y += bias.astype(compute, copy=False)
    if residual is not None:
        if residual.shape != y.shape:
            raise ValueError(f"MatMulBiasAdd: the residual has shape {list(residual.shape)}, "
                             f"the product {list(y.shape)}")
        y += residual.astype(compute, copy=False)
    return np.asarray(_activate(y, activation)).astype(dtype, copy=False)


# -- decomposition (for exporters) ------------------------------------------------------

def decompose_matmul_bias_add(node: Node, graph: Graph) -> Value:
    """Add ``node``'s decomposition to ``graph``; return the value that replaces its output.

    MatMul(a, b, transpose_a, transpose_b) -> Add(product, bias) -> Add(residual), when
    there is one -> Relu | Gelu (approximate "none" for gelu, "tanh" for gelu_tanh) |
    nothing. The caller moves the uses of ``node.outputs[0]`` to the returned value and
    removes ``node``.
    """
    a, b, bias = node.inputs[:3]
    residual = node.inputs[3] if len(node.inputs) > 3 else None
    base = node.name or "matmul_bias_add"
    product = create_node("MatMul", [a, b], {"transpose_a": node.attrs.get("transpose_a", False),
                                             "transpose_b": node.attrs.get("transpose_b", False)},
                          graph.unique_name(f"{base}/MatMul"), graph)
    result = create_node("Add", [product, bias], {}, graph.unique_name(f"{base}/Add"), graph)
    if residual is not None:
        result = create_node("Add", [result.outputs[0], residual], {},
                             graph.unique_name(f"{base}/residual"), graph)
    activation: Optional[str] = node.attrs.get("activation", "none")
    if activation == "relu":
        result = create_node("Relu", [result], {}, graph.unique_name(f"{base}/Relu"), graph)
    elif activation in ("gelu", "gelu_tanh"):
        approximate = "tanh" if activation == "gelu_tanh" else "none"
        result = create_node("Gelu", [result], {"approximate": approximate},
                             graph.unique_name(f"{base}/Gelu"), graph)
    return result.outputs[0]
