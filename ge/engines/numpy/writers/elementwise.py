"""Writers of elementwise ops: plain ufuncs and activations."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers._base import (
    _FLOATS,
    _NATIVE,
    _WIDE_FLOATS,
    WRITERS,
    Factory,
    Inputs,
    Outs,
    Unary,
    _array,
    _dtype,
    _scratch,
    _unary_writer,
    _writes,
)
from ge.ir import Format, Node
from ge.ops.elementwise import erf
from ge.ops.shape_utils import normalize_axis

# -- elementwise: plain ufuncs ----------------------------------------------------------

_UNARY_UFUNCS: dict[str, Callable[..., Any]] = {
    "Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Tanh": np.tanh, "Neg": np.negative,
    "Abs": np.abs, "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil,
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
    "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh, "Sign": np.sign, "Round": np.round,
    "BitwiseNot": np.invert, "Not": np.logical_not, "IsNaN": np.isnan,
}


@_writes(*_UNARY_UFUNCS)
def _unary_ufunc(node: Node) -> Optional[WritingKernel]:
    """``ufunc(x, out=out)``."""
    ufunc = _UNARY_UFUNCS[node.op_type]

    def run(inputs: Inputs, outs: Outs) -> None:
        ufunc(_array(inputs, 0), out=outs[0])

    return run


_BINARY_UFUNCS: dict[str, Callable[..., Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Min": np.minimum,
    "Max": np.maximum, "Equal": np.equal, "Less": np.less, "Greater": np.greater,
    "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal,
    "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor, "Div": np.divide,
}


@_writes(*_BINARY_UFUNCS)
def _binary_ufunc(node: Node) -> Optional[WritingKernel]:
    """``ufunc(x, y, out=out)`` with broadcasting; integer Div (truncating) is not covered."""
    if node.op_type == "Div" and _dtype(node).kind != "f":
        return None
    ufunc = _BINARY_UFUNCS[node.op_type]

    def run(inputs: Inputs, outs: Outs) -> None:
        ufunc(_array(inputs, 0), _array(inputs, 1), out=outs[0])

    return run


@_writes("Mod")
def _mod(node: Node) -> Optional[WritingKernel]:
    """``fmod`` (the sign of x) or ``mod`` (the sign of y) into out."""
    ufunc = np.fmod if node.attrs["fmod"] else np.mod

    def run(inputs: Inputs, outs: Outs) -> None:
        ufunc(_array(inputs, 0), _array(inputs, 1), out=outs[0])

    return run


@_writes("Pow")
def _pow(node: Node) -> Optional[WritingKernel]:
    """``power(x, y, out=out)`` for float32/float64 x with an exponent of x's dtype."""
    if _dtype(node) not in _WIDE_FLOATS or _dtype(node, 1) != _dtype(node):
        return None
    return _binary_ufunc_of(np.power)


def _binary_ufunc_of(ufunc: Callable[..., Any]) -> WritingKernel:
    def run(inputs: Inputs, outs: Outs) -> None:
        ufunc(_array(inputs, 0), _array(inputs, 1), out=outs[0])

    return run


def _channel_column(values: np.ndarray, data_format: Format, rank: int) -> np.ndarray:
    """A 1-D per-channel array shaped to broadcast along the channel axis of ``rank``-D data
    (axis 1 for NCHW, the last axis otherwise)."""
    shape = [1] * rank
    shape[normalize_axis(1 if data_format is Format.NCHW else -1, rank)] = -1
    return values.reshape(shape)


@_writes("BiasAdd")
def _bias_add(node: Node) -> Optional[WritingKernel]:
    """``value + bias`` along the channel axis, into out."""
    layout = node.attrs["data_format"]

    def run(inputs: Inputs, outs: Outs) -> None:
        value = _array(inputs, 0)
        np.add(value, _channel_column(_array(inputs, 1), layout, value.ndim), out=outs[0])

    return run


@_writes("Where")
def _where(node: Node) -> Optional[WritingKernel]:
    """y copied into out, then x where the condition holds (both broadcast)."""

    def run(inputs: Inputs, outs: Outs) -> None:
        np.copyto(outs[0], _array(inputs, 2))
        np.copyto(outs[0], _array(inputs, 1), where=_array(inputs, 0))

    return run


@_writes("Clip")
def _clip(node: Node) -> Optional[WritingKernel]:
    """``minimum(maximum(x, min), max)`` into out; an absent bound does not clip."""

    def run(inputs: Inputs, outs: Outs) -> None:
        source, out = _array(inputs, 0), outs[0]
        low = inputs[1] if len(inputs) > 1 else None
        high = inputs[2] if len(inputs) > 2 else None
        if low is not None:
            np.maximum(source, low.reshape(()), out=out)
            source = out
        if high is not None:
            np.minimum(source, high.reshape(()), out=out)
            source = out
        if source is not out:
            np.copyto(out, source)

    return run


@_writes("PRelu")
def _prelu(node: Node) -> Optional[WritingKernel]:
    """x into out, then ``x * slope`` where x < 0."""

    def run(inputs: Inputs, outs: Outs) -> None:
        x, slope, out = _array(inputs, 0), _array(inputs, 1), outs[0]
        negative = x < 0
        if not np.may_share_memory(out, x):
            np.copyto(out, x)
        np.multiply(out, slope, out=out, where=negative)

    return run


# -- elementwise: activations -----------------------------------------------------------

def _relu(x: np.ndarray, out: np.ndarray) -> None:
    np.maximum(x, x.dtype.type(0), out=out)


def _sigmoid(x: np.ndarray, out: np.ndarray) -> None:
    """1 / (1 + exp(-x)) where x >= 0, exp(x) / (1 + exp(x)) elsewhere (as Sigmoid's
    reference), without masked passes: from e = exp(-|x|), the numerator is
    max(e, x >= 0) (1 where x >= 0, as e <= 1; e elsewhere), divided by 1 + e."""
    positive = np.greater_equal(x, 0)
    np.abs(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    _split_ratio(out, positive, out)


def _split_ratio(exp_minus: np.ndarray, positive: np.ndarray, out: np.ndarray) -> None:
    """out = where(positive, 1, e) / (1 + e) for e = ``exp_minus`` (in [0, 1] or NaN),
    which ``out`` may be; one scratch array."""
    denominator = np.add(exp_minus, 1)
    np.maximum(exp_minus, positive, out=out)
    np.divide(out, denominator, out=out)


def _leaky_relu(alpha: float) -> Unary:
    """where(x >= 0, x, alpha * x): for 0 <= alpha <= 1 that is max(x, alpha * x) (the
    rounded alpha * x lies between 0 and x), else a masked multiply."""

    def apply(x: np.ndarray, out: np.ndarray) -> None:
        slope = x.dtype.type(alpha)
        if 0 <= alpha <= 1:
            scaled = _scratch(out, x)
            np.multiply(x, slope, out=scaled)
            np.maximum(x, scaled, out=out)
            return
        negative = x < 0
        if not np.may_share_memory(out, x):
            np.copyto(out, x)
        np.multiply(out, slope, out=out, where=negative)

    return apply


def _hard_sigmoid(alpha: float, beta: float) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        np.multiply(x, x.dtype.type(alpha), out=out)
        np.add(out, x.dtype.type(beta), out=out)
        np.clip(out, 0, 1, out=out)

    return apply


def _hard_swish(x: np.ndarray, out: np.ndarray) -> None:
    """x * clip(x / 6 + 0.5, 0, 1)."""
    gate = _scratch(out, x)
    np.divide(x, 6, out=gate)
    np.add(gate, 0.5, out=gate)
    np.clip(gate, 0, 1, out=gate)
    np.multiply(x, gate, out=out)


def _swish(alpha: float) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        """x * sigmoid(alpha * x), the sigmoid as math_ops' (exp(-|z|), split by sign)."""
        gate = np.multiply(x, alpha)
        positive = gate >= 0
        np.abs(gate, out=gate)
        np.negative(gate, out=gate)
        np.exp(gate, out=gate)
        _split_ratio(gate, positive, gate)
        np.multiply(x, gate, out=out)

    return apply


def _elu_into(x: np.ndarray, out: np.ndarray, alpha: float) -> None:
    """where(x > 0, x, alpha * expm1(min(x, 0))); out may be x."""
    positive = x > 0
    work = _scratch(out, x)
    np.minimum(x, 0, out=work)
    np.expm1(work, out=work)
    np.multiply(work, alpha, out=work)
    np.copyto(work, x, where=positive)
    if work is not out:
        np.copyto(out, work)


def _elu(alpha: float) -> Unary:
    return lambda x, out: _elu_into(x, out, alpha)


def _selu(alpha: float, gamma: float) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        _elu_into(x, out, alpha)
        np.multiply(out, gamma, out=out)

    return apply


def _celu(alpha: float) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        """max(x, 0) + min(alpha * expm1(min(x, 0) / alpha), 0)."""
        negative = np.minimum(x, 0)
        np.divide(negative, alpha, out=negative)
        np.expm1(negative, out=negative)
        np.multiply(negative, alpha, out=negative)
        np.minimum(negative, 0, out=negative)
        np.maximum(x, 0, out=out)
        np.add(out, negative, out=out)

    return apply


def _thresholded_relu(alpha: float) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        below = np.logical_not(x > alpha)
        if not np.may_share_memory(out, x):
            np.copyto(out, x)
        np.copyto(out, 0, where=below)

    return apply


def _softplus(x: np.ndarray, out: np.ndarray) -> None:
    np.logaddexp(x.dtype.type(0), x, out=out)


def _softsign(x: np.ndarray, out: np.ndarray) -> None:
    """x / (1 + |x|)."""
    denominator = _scratch(out, x)
    np.abs(x, out=denominator)
    np.add(denominator, 1, out=denominator)
    np.divide(x, denominator, out=out)


def _mish(x: np.ndarray, out: np.ndarray) -> None:
    """x * tanh(softplus(x))."""
    gate = np.logaddexp(x.dtype.type(0), x)
    np.tanh(gate, out=gate)
    np.multiply(x, gate, out=out)


def _gelu(approximate: str) -> Unary:
    def apply(x: np.ndarray, out: np.ndarray) -> None:
        """0.5 * x * (1 + erf(x / sqrt 2)), or with the tanh of the cubic approximation;
        the factor (1 + ...) is built in a scratch array, then out = (0.5 * x) * factor."""
        factor = np.empty_like(out)
        if approximate == "tanh":
            np.power(x, 3, out=factor)
            np.multiply(factor, 0.044715, out=factor)
            np.add(x, factor, out=factor)
            np.multiply(factor, math.sqrt(2 / math.pi), out=factor)
            np.tanh(factor, out=factor)
        else:
            np.divide(x, math.sqrt(2), out=factor)
            np.copyto(factor, erf(factor), casting="same_kind")
        np.add(factor, 1, out=factor)
        np.multiply(x, 0.5, out=out)
        np.multiply(out, factor, out=out)

    return apply


def _activation_factory(build: Callable[[dict[str, Any]], Unary], dtypes: frozenset[np.dtype]
                        ) -> Factory:
    def factory(node: Node) -> Optional[WritingKernel]:
        if _dtype(node) not in dtypes:
            return None
        return _unary_writer(build(node.attrs))

    return factory


_ACTIVATIONS: dict[str, tuple[Callable[[dict[str, Any]], Unary], frozenset[np.dtype]]] = {
    "Relu": (lambda attrs: _relu, _NATIVE),
    "Sigmoid": (lambda attrs: _sigmoid, _FLOATS),
    "LeakyRelu": (lambda attrs: _leaky_relu(attrs["alpha"]), _FLOATS),
    "HardSigmoid": (lambda attrs: _hard_sigmoid(attrs["alpha"], attrs["beta"]), _FLOATS),
    # math_ops' activations compute 16-bit floats in float32: float32 and float64 only
    "HardSwish": (lambda attrs: _hard_swish, _WIDE_FLOATS),
    "Swish": (lambda attrs: _swish(attrs["alpha"]), _WIDE_FLOATS),
    "Elu": (lambda attrs: _elu(attrs["alpha"]), _WIDE_FLOATS),
    "Selu": (lambda attrs: _selu(attrs["alpha"], attrs["gamma"]), _WIDE_FLOATS),
    "Celu": (lambda attrs: _celu(attrs["alpha"]), _WIDE_FLOATS),
    "ThresholdedRelu": (lambda attrs: _thresholded_relu(attrs["alpha"]), _WIDE_FLOATS),
    "Softplus": (lambda attrs: _softplus, _WIDE_FLOATS),
    "Softsign": (lambda attrs: _softsign, _WIDE_FLOATS),
    "Mish": (lambda attrs: _mish, _WIDE_FLOATS),
    "Gelu": (lambda attrs: _gelu(attrs["approximate"]), _WIDE_FLOATS),
}
for _op_type, (_build, _dtypes) in _ACTIVATIONS.items():
    WRITERS[_op_type] = _activation_factory(_build, _dtypes)


@_writes("Erf")
def _erf(node: Node) -> Optional[WritingKernel]:
    """The reference's float64 erf, cast into out."""

    def run(inputs: Inputs, outs: Outs) -> None:
        np.copyto(outs[0], erf(_array(inputs, 0)), casting="unsafe")

    return run


