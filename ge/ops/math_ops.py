"""Elementwise math: trigonometry, rounding, tests for inf and NaN, activations, integer
remainders, bit and logical operations.

Every op here follows the ONNX operator of the same name (inputs, attributes and their
defaults), so the ONNX frontend maps them directly. Activations on 16-bit floats are
computed in float32 and rounded once. Scans live in ``cumulative``, Einsum and Det in
``linalg``, BitCast in ``core``, and the signal ops in ``signal``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ops.elementwise import (
    ELEMENTWISE_TRAITS,
    INTEGERS,
    NUMERIC,
    broadcast_desc,
    erf,
    register_binary,
    register_unary,
)
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    InferenceContext,
    Trait,
    flops_per_output,
    register_op,
)

BOOL = (DataType.DT_BOOL,)


def _widened(function: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``function`` evaluated in at least float32 (16-bit floats lose too much midway)."""

    def apply(x: np.ndarray, **attrs: Any) -> np.ndarray:
        wide = x.astype(np.result_type(x.dtype, np.float32), copy=False)
        return function(wide, **attrs)

    return apply


# -- trigonometry and hyperbolic functions ----------------------------------------------

_TRIGONOMETRY: Sequence[tuple[str, np.ufunc]] = (
    ("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin), ("Acos", np.arccos),
    ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh),
    ("Acosh", np.arccosh), ("Atanh", np.arctanh))
for _op_type, _ufunc in _TRIGONOMETRY:
    register_unary(_op_type, _ufunc, f"y = {_ufunc.__name__}(x), elementwise "
                   f"(NaN outside the domain).", flops=8)


# -- sign, rounding, classification -----------------------------------------------------

register_unary("Sign", np.sign, "y = -1, 0 or 1 by the sign of x (NaN stays NaN).",
               allowed=NUMERIC, traits=(Trait.IDEMPOTENT,))
register_unary("Round", np.round, "y = x rounded to the nearest integer, halves to even.",
               traits=(Trait.IDEMPOTENT,))


def _is_inf(x: np.ndarray, detect_negative: bool, detect_positive: bool) -> np.ndarray:
    return np.isinf(x) & (((x > 0) & detect_positive) | ((x < 0) & detect_negative))


register_unary("IsInf", _is_inf, "y = true where x is infinite (of the detected signs).",
               attrs=[Attr("detect_negative", AttrType.BOOL, True),
                      Attr("detect_positive", AttrType.BOOL, True)],
               result=DataType.DT_BOOL)
register_unary("IsNaN", np.isnan, "y = true where x is NaN.", result=DataType.DT_BOOL)


# -- activations ------------------------------------------------------------------------

def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    return gamma * _elu(x, alpha)


def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.maximum(x, 0) + np.minimum(alpha * np.expm1(np.minimum(x, 0) / alpha), 0)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x.dtype.type(0), x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows
    exp_minus = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + exp_minus), exp_minus / (1 + exp_minus))


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(x.dtype))


_ALPHA_ONE = [Attr("alpha", AttrType.FLOAT, 1.0)]
_ACTIVATIONS: Sequence[tuple[str, Callable[..., np.ndarray], str, Sequence[Attr]]] = (
    ("Elu", _elu, "y = x if x > 0 else alpha * (exp(x) - 1).", _ALPHA_ONE),
    ("Selu", _selu, "y = gamma * (x if x > 0 else alpha * (exp(x) - 1)).",
     [Attr("alpha", AttrType.FLOAT, 1.67326319217681884765625),
      Attr("gamma", AttrType.FLOAT, 1.05070102214813232421875)]),
    ("Celu", _celu, "y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).", _ALPHA_ONE),
    ("ThresholdedRelu", lambda x, alpha: np.where(x > alpha, x, 0),
     "y = x if x > alpha else 0.", _ALPHA_ONE),
    ("Softplus", _softplus, "y = ln(1 + exp(x)), without overflow.", ()),
    ("Softsign", lambda x: x / (1 + np.abs(x)), "y = x / (1 + |x|).", ()),
    ("HardSwish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
     "y = x * max(0, min(1, x / 6 + 1 / 2)).", ()),
    ("Mish", lambda x: x * np.tanh(_softplus(x)), "y = x * tanh(ln(1 + exp(x))).", ()),
    ("Gelu", _gelu, "y = x * Phi(x), Phi the normal CDF through erf, or its tanh "
     "approximation when approximate='tanh'.",
     [Attr("approximate", AttrType.STRING, "none", choices=("none", "tanh"))]),
    ("Swish", lambda x, alpha: x * _sigmoid(alpha * x), "y = x * sigmoid(alpha * x).",
     _ALPHA_ONE),
)
for _activation, _function, _doc, _attrs in _ACTIVATIONS:
    register_unary(_activation, _widened(_function), _doc, attrs=_attrs, flops=6)


def _shrink(x: np.ndarray, bias: float, lambd: float) -> np.ndarray:
    wide = x.astype(np.float64)
    return np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0))


register_unary("Shrink", _shrink, "y = x + bias if x < -lambd, x - bias if x > lambd, else 0.",
               allowed=NUMERIC, flops=3,
               attrs=[Attr("bias", AttrType.FLOAT, 0.0), Attr("lambd", AttrType.FLOAT, 0.5)])


def _infer_prelu(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, NUMERIC)
    ctx.require_same_dtype(0, 1)
    desc = broadcast_desc(ctx, (0, 1), ctx.dtype(0))
    if len(desc.shape) != len(ctx.shape(0)):
        raise ctx.fail(f"slope {list(ctx.shape(1))} must broadcast to x {list(ctx.shape(0))}")
    return [TensorDesc(ctx.shape(0), ctx.dtype(0), ctx.input(0).format)]


@register_op("PRelu", inputs=["x", "slope"], infer=_infer_prelu, cost=flops_per_output(2),
             traits=ELEMENTWISE_TRAITS)
def prelu_kernel(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """y = x if x >= 0 else slope * x; slope broadcasts to x's shape."""
    return np.where(x < 0, x * slope, x).astype(x.dtype, copy=False)


# -- integer remainder, shifts, bits and logic ------------------------------------------

def _mod(x: np.ndarray, y: np.ndarray, fmod: bool) -> np.ndarray:
    return np.fmod(x, y) if fmod else np.mod(x, y)


register_binary("Mod", _mod, "y = x mod y: with fmod, the sign of x (C fmod); else the sign "
                "of y (Python %). Integers mod 0 give 0.",
                attrs=[Attr("fmod", AttrType.BOOL, False)])


def _bit_shift(x: np.ndarray, y: np.ndarray, direction: str) -> np.ndarray:
    outside = (y < 0) | (y >= x.dtype.itemsize * 8)
    amount = np.where(outside, 0, y).astype(x.dtype)
    if direction == "LEFT":
        return np.where(outside, 0, np.left_shift(x, amount))
    # right shifts of signed integers are arithmetic: the sign bit fills the vacated bits
    return np.where(outside, np.where(x < 0, -1, 0), np.right_shift(x, amount))


register_binary("BitShift", _bit_shift, "y = x << y or x >> y. Right shifts of signed integers "
                "extend the sign; a shift < 0 or >= the bit width leaves only the fill (0, or "
                "-1 for a right shift of a negative x).",
                allowed=INTEGERS,
                attrs=[Attr("direction", AttrType.STRING, REQUIRED, choices=("LEFT", "RIGHT"))])
register_binary("BitwiseAnd", np.bitwise_and, "y = x & y.", allowed=INTEGERS, commutative=True,
                traits=(Trait.SELF_IDEMPOTENT,))
register_binary("BitwiseOr", np.bitwise_or, "y = x | y.", allowed=INTEGERS, commutative=True,
                traits=(Trait.SELF_IDEMPOTENT,), identity_element=0)
register_binary("BitwiseXor", np.bitwise_xor, "y = x ^ y.", allowed=INTEGERS, commutative=True,
                identity_element=0)
register_unary("BitwiseNot", np.invert, "y = ~x.", allowed=INTEGERS, traits=(Trait.INVOLUTION,))
register_binary("And", np.logical_and, "y = x and y (bool).", allowed=BOOL, commutative=True,
                traits=(Trait.SELF_IDEMPOTENT,), identity_element=True)
register_binary("Or", np.logical_or, "y = x or y (bool).", allowed=BOOL, commutative=True,
                traits=(Trait.SELF_IDEMPOTENT,), identity_element=False)
register_binary("Xor", np.logical_xor, "y = x xor y (bool).", allowed=BOOL, commutative=True,
                identity_element=False)
register_unary("Not", np.logical_not, "y = not x (bool).", allowed=BOOL,
               traits=(Trait.INVOLUTION,))
