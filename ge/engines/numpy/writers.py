"""Writing kernels of the NumPy engine: each op's reference computation, written into
the output arrays it is handed (see ``ge.engines.base`` for the contract).

``WRITERS`` maps an op type to a factory that, given a node, returns its writer with the
attributes bound, or None when the node's attributes or dtypes are not covered. The
writers run the same NumPy operations as the reference kernels, in the same order,
with ``out=`` arguments and in-place passes in place of fresh arrays, so their values
are the reference's bit for bit; the exceptions are NCHW convolutions (one product per
sample and group, ``[Cout, taps] @ [taps, pixels]``, straight into out: BLAS may sum in
another order) and NCHW max pools (a pass per tap: the sign of a zero maximum may
differ). Writers leave floating-point warnings to their caller: the runtime runs every task
with them silenced, as the reference kernels run. Every writer accepts ``outs[0]``
being ``inputs[0]``'s buffer; a formula that
reads ``x`` after its first pass then works in a scratch array.

Only NumPy's own dtypes are covered (bool, integers, float16/32/64): bfloat16 and the
narrow float and integer types of ``ml_dtypes`` go through ``bind``. Ops whose reference
widens 16-bit floats to float32 are covered in float32 and float64 only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ge.engines.base import WritingKernel
from ge.ir import Format, Node
from ge.ops.elementwise import erf
from ge.ops.fused_matmul import gelu_erf
from ge.ops.nn import resolve_window
from ge.ops.nn_window import Window, plan_axis, window_counts, window_view
from ge.ops.shape_utils import normalize_axes, normalize_axis

__all__ = ["WRITERS", "writer_for", "covered_op_types"]

Inputs = Sequence[Optional[np.ndarray]]
Outs = Sequence[np.ndarray]
Factory = Callable[[Node], Optional[WritingKernel]]
#: ``apply(x, out)``: a unary computation written into ``out`` (which may be ``x``)
Unary = Callable[[np.ndarray, np.ndarray], None]

#: op type -> the factory of its writers
WRITERS: dict[str, Factory] = {}

_NATIVE: frozenset[np.dtype] = frozenset(np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))
_WIDE_FLOATS: frozenset[np.dtype] = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_FLOATS: frozenset[np.dtype] = _WIDE_FLOATS | {np.dtype(np.float16)}


def writer_for(node: Node) -> Optional[WritingKernel]:
    """The writer of ``node`` with its attributes bound, or None when not covered."""
    factory = WRITERS.get(node.op_type)
    if factory is None:
        return None
    values = [v for v in (*node.inputs, *node.outputs) if v is not None]
    if any(v.dtype.np_dtype not in _NATIVE for v in values):
        return None
    return factory(node)


def covered_op_types() -> list[str]:
    """Every op type with a writer factory, sorted."""
    return sorted(WRITERS)


def _writes(*op_types: str) -> Callable[[Factory], Factory]:
    """Decorator: register the decorated factory for ``op_types``."""

    def register(factory: Factory) -> Factory:
        for op_type in op_types:
            WRITERS[op_type] = factory
        return factory

    return register


def _dtype(node: Node, index: int = 0) -> np.dtype:
    """The NumPy dtype of input ``index`` of ``node``."""
    value = node.inputs[index]
    assert value is not None
    return value.dtype.np_dtype


def _out_dtype(node: Node) -> np.dtype:
    return node.outputs[0].dtype.np_dtype


def _scratch(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``out``, or a fresh array like it when ``out`` is ``x``'s buffer."""
    return np.empty_like(out) if np.may_share_memory(out, x) else out


def _array(inputs: Inputs, index: int) -> np.ndarray:
    array = inputs[index]
    assert array is not None
    return array


def _unary_writer(apply: Unary) -> WritingKernel:
    def run(inputs: Inputs, outs: Outs) -> None:
        apply(_array(inputs, 0), outs[0])

    return run


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
    """x with its axes permuted, copied into out."""
    perm = node.attrs["perm"]

    def run(inputs: Inputs, outs: Outs) -> None:
        np.copyto(outs[0], np.transpose(_array(inputs, 0), perm))

    return run


@_writes("Concat")
def _concat(node: Node) -> Optional[WritingKernel]:
    """The inputs joined along ``axis`` into out."""
    axis = node.attrs["axis"]

    def run(inputs: Inputs, outs: Outs) -> None:
        np.concatenate([a for a in inputs if a is not None], axis=axis, out=outs[0])

    return run


@_writes("Gather")
def _gather(node: Node) -> Optional[WritingKernel]:
    """``take(x, indices, axis, out=out)``; negative indices count from the end."""

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
    """``activation(a' @ b' + bias)`` with the product written into out and the rest
    applied in place (16-bit floats are not covered)."""
    if _dtype(node) == np.float16:
        return None
    attrs = node.attrs
    activation = attrs["activation"]

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _matmul_into(*_operands(inputs, attrs["transpose_a"], attrs["transpose_b"]), out)
        np.add(out, _array(inputs, 2), out=out)
        if activation == "relu":
            np.maximum(out, out.dtype.type(0), out=out)
        elif activation == "gelu":
            np.copyto(out, gelu_erf(out))
        elif activation == "gelu_tanh":
            _gelu_tanh_into(out)

    return run


# -- convolutions -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Conv:
    """A convolution's bound attributes."""

    nchw: bool
    oihw: bool
    window: Window
    groups: int


def _conv_spec(attrs: dict[str, Any]) -> Optional[_Conv]:
    layout = attrs["data_format"]
    if layout not in (Format.NCHW, Format.NHWC):
        return None
    filter_format = attrs.get("filter_format") or ("OIHW" if layout is Format.NCHW else "HWIO")
    try:
        window = resolve_window(attrs)
    except ValueError:
        return None
    return _Conv(layout is Format.NCHW, filter_format == "OIHW", window, attrs["groups"])


def _convolve(x: np.ndarray, weights: np.ndarray, out: np.ndarray, spec: _Conv) -> None:
    """The cross-correlation of x with the filter (no bias) written into out."""
    if spec.nchw:
        oihw = weights if spec.oihw else weights.transpose(3, 2, 0, 1)
        windows = _nchw_windows(x, spec.window, oihw.shape[2:])
        if spec.groups > 1 and oihw.shape[1] == 1:
            _depthwise_nchw(windows, oihw, out, spec.groups)
        else:
            _grouped_nchw(windows, oihw, out, spec.groups)
        return
    hwio = weights.transpose(2, 3, 1, 0) if spec.oihw else weights
    windows = window_view(x, spec.window, hwio.shape[:2], 0.0)
    if spec.groups > 1 and hwio.shape[2] == 1:
        _depthwise_nhwc(windows, hwio, out, spec.groups)
    else:
        _grouped_nhwc(windows, hwio, out, spec.groups)


def _nchw_windows(x: np.ndarray, window: Window, kernel: Sequence[int], fill: float = 0.0
                  ) -> np.ndarray:
    """A read-only ``[N, C, kh, kw, Ho, Wo]`` view of the windows over NCHW ``x`` (padded
    with ``fill``), the im2col order of an OIHW filter."""
    plans = [plan_axis(window, axis, x.shape[2 + axis], kernel[axis]) for axis in (0, 1)]
    widths = [(0, 0), (0, 0)] + [(p.pad_begin, p.pad_end + p.overhang) for p in plans]
    if any(any(pair) for pair in widths):
        x = np.pad(x, widths, constant_values=fill)
    steps = x.strides
    shape = (x.shape[0], x.shape[1], kernel[0], kernel[1], plans[0].output, plans[1].output)
    strides = (steps[0], steps[1], steps[2] * window.dilations[0],
               steps[3] * window.dilations[1], steps[2] * window.strides[0],
               steps[3] * window.strides[1])
    return as_strided(x, shape, strides, writeable=False)


def _grouped_nchw(windows: np.ndarray, oihw: np.ndarray, out: np.ndarray, groups: int) -> None:
    """Per sample and group, [Cout/groups, taps] @ [taps, pixels] written into that block
    of out (one sample's im2col matrix at a time stays in cache); the taps in the
    reference's (kh, kw, C) order."""
    n, channels, kh, kw, out_h, out_w = windows.shape
    cout = oihw.shape[0]
    per_group, per_out = channels // groups, cout // groups
    taps = per_group * kh * kw
    ordered = windows.transpose(0, 2, 3, 1, 4, 5)  # [N, kh, kw, C, Ho, Wo]
    matrices = [oihw[g * per_out:(g + 1) * per_out].transpose(0, 2, 3, 1).reshape(per_out, taps)
                for g in range(groups)]
    for sample in range(n):
        for group, matrix in enumerate(matrices):
            columns = ordered[sample, :, :, group * per_group:(group + 1) * per_group]
            block = out[sample, group * per_out:(group + 1) * per_out]
            np.matmul(matrix, columns.reshape(taps, out_h * out_w),
                      out=block.reshape(per_out, out_h * out_w))


def _depthwise_nchw(windows: np.ndarray, oihw: np.ndarray, out: np.ndarray,
                    groups: int) -> None:
    """One multiply-add per tap, as the reference: out starts at zero and each tap's
    products (in one reused scratch array) are added to it."""
    n, _, kh, kw, out_h, out_w = windows.shape
    per_out = oihw.shape[0] // groups
    taps = oihw.reshape(groups, per_out, kh, kw, 1, 1)
    target = out.reshape(n, groups, per_out, out_h, out_w)
    target[...] = 0
    product = np.empty(target.shape, out.dtype)
    for row in range(kh):
        for column in range(kw):
            np.multiply(windows[:, :, None, row, column], taps[:, :, row, column], out=product)
            np.add(target, product, out=target)


#: the largest im2col matrix an NHWC convolution builds at once (whole samples; at least
#: one): a batch is convolved a few samples at a time, so the patches stay a transient
#: of this size rather than of the batch's
PATCH_BYTES = 8 << 20


def _grouped_nhwc(windows: np.ndarray, hwio: np.ndarray, out: np.ndarray, groups: int) -> None:
    """One product of the im2col matrix and the filter per group, [pixels, taps] @
    [taps, Cout/groups], written straight into out's columns of that group, for as many
    samples at a time as fit in ``PATCH_BYTES`` of patches."""
    n, out_h, out_w = windows.shape[:3]
    kh, kw, per_group, cout = hwio.shape
    per_out = cout // groups
    split = hwio.reshape(kh, kw, per_group, groups, per_out)
    taps = kh * kw * per_group
    per_sample = out_h * out_w * taps * out.dtype.itemsize
    chunk = max(1, PATCH_BYTES // max(per_sample, 1))
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        rows = (stop - start) * out_h * out_w
        part = windows[start:stop]
        matrix_out = out[start:stop].reshape(rows, cout)
        for group in range(groups):
            channels = slice(group * per_group, (group + 1) * per_group)
            columns = part if groups == 1 else part[..., channels]
            np.matmul(columns.reshape(rows, taps),
                      split[:, :, :, group, :].reshape(taps, per_out),
                      out=matrix_out[:, group * per_out:(group + 1) * per_out])


def _depthwise_nhwc(windows: np.ndarray, hwio: np.ndarray, out: np.ndarray,
                    groups: int) -> None:
    """One multiply-add per tap over all pixels, as the reference: out starts at zero and
    each tap's products (in one reused scratch array) are added to it."""
    n, out_h, out_w = windows.shape[:3]
    kh, kw, _, cout = hwio.shape
    per_out = cout // groups
    taps = hwio.reshape(kh, kw, groups, per_out)
    target = out.reshape(n, out_h, out_w, groups, per_out)
    target[...] = 0
    product = np.empty(target.shape, out.dtype)
    for row in range(kh):
        for column in range(kw):
            np.multiply(windows[:, :, :, row, column, :, None], taps[row, column], out=product)
            np.add(target, product, out=target)


def _add_channels(out: np.ndarray, values: np.ndarray, nchw: bool) -> None:
    """out += a per-channel 1-D array."""
    layout = Format.NCHW if nchw else Format.NHWC
    np.add(out, _channel_column(values.astype(out.dtype, copy=False), layout, out.ndim),
           out=out)


def _conv_factory_checks(node: Node) -> Optional[_Conv]:
    """The node's convolution attributes when its dtypes are covered (float32 and float64,
    which the reference computes in)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    return _conv_spec(node.attrs)


@_writes("Conv2D")
def _conv2d(node: Node) -> Optional[WritingKernel]:
    """Conv2D: the product into out, then the bias added in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _convolve(_array(inputs, 0), _array(inputs, 1), out, spec)
        bias = inputs[2] if len(inputs) > 2 else None
        if bias is not None:
            _add_channels(out, bias, spec.nchw)

    return run


def _conv_activation(attrs: dict[str, Any]) -> Optional[Callable[[np.ndarray], None]]:
    """FusedConv2D's activation as an in-place pass, None when there is none."""
    activation = attrs["activation"]
    low, high = {"Relu": (0.0, None), "Relu6": (0.0, 6.0),
                 "Clip": (attrs["clip_min"], attrs["clip_max"])}.get(activation, (None, None))
    if activation in ("Relu", "Relu6", "Clip"):
        return lambda y: _clip_in_place(y, low, high)
    unary: Optional[Unary] = {"LeakyRelu": _leaky_relu(attrs["alpha"]), "Sigmoid": _sigmoid,
                              "Tanh": lambda x, out: np.tanh(x, out=out),
                              "HardSwish": _hard_swish}.get(activation)
    if unary is None:
        return None
    apply = unary
    return lambda y: apply(y, y)


def _clip_in_place(y: np.ndarray, low: Optional[float], high: Optional[float]) -> None:
    if low is not None:
        np.maximum(y, y.dtype.type(low), out=y)
    if high is not None:
        np.minimum(y, y.dtype.type(high), out=y)


@_writes("FusedConv2D")
def _fused_conv2d(node: Node) -> Optional[WritingKernel]:
    """activation(Conv2D + bias + residual): the product into out, the rest in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None
    activation = _conv_activation(node.attrs)

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _convolve(_array(inputs, 0), _array(inputs, 1), out, spec)
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        if bias is not None:
            _add_channels(out, bias, spec.nchw)
        if residual is not None:
            np.add(out, residual, out=out)
        if activation is not None:
            activation(out)

    return run


def _batch_norm_into(x: np.ndarray, parameters: Sequence[np.ndarray], epsilon: float,
                     layout: Format, out: np.ndarray) -> None:
    """(x - mean) * (scale / sqrt(variance + epsilon)) + offset, per channel, into out."""
    scale, offset, mean, variance = (
        _channel_column(p.astype(x.dtype, copy=False), layout, x.ndim) for p in parameters)
    factor = scale / np.sqrt(variance + x.dtype.type(epsilon))
    np.subtract(x, mean, out=out)
    np.multiply(out, factor, out=out)
    np.add(out, offset, out=out)


@_writes("ConvBNReLU")
def _conv_bn_relu(node: Node) -> Optional[WritingKernel]:
    """Relu(FusedBatchNorm(Conv2D + bias)): the product into out, the rest in place."""
    spec = _conv_factory_checks(node)
    if spec is None:
        return None
    epsilon = node.attrs["epsilon"]
    layout = Format.NCHW if spec.nchw else Format.NHWC

    def run(inputs: Inputs, outs: Outs) -> None:
        out = outs[0]
        _convolve(_array(inputs, 0), _array(inputs, 1), out, spec)
        bias = inputs[6] if len(inputs) > 6 else None
        if bias is not None:
            _add_channels(out, bias, spec.nchw)
        parameters = [_array(inputs, i) for i in range(2, 6)]
        _batch_norm_into(out, parameters, epsilon, layout, out)
        np.maximum(out, out.dtype.type(0), out=out)

    return run


@_writes("FusedBatchNorm")
def _fused_batch_norm(node: Node) -> Optional[WritingKernel]:
    """The inference batch norm into out (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    epsilon, layout = node.attrs["epsilon"], node.attrs["data_format"]

    def run(inputs: Inputs, outs: Outs) -> None:
        parameters = [_array(inputs, i) for i in range(1, 5)]
        _batch_norm_into(_array(inputs, 0), parameters, epsilon, layout, outs[0])

    return run


# -- pools ------------------------------------------------------------------------------

def _pair(values: Sequence[int], nchw: bool) -> tuple[int, int]:
    """The two spatial entries of a 2- or 4-value window attribute."""
    if len(values) == 2:
        return values[0], values[1]
    return (values[2], values[3]) if nchw else (values[1], values[2])


@dataclass(frozen=True)
class _Pool:
    nchw: bool
    kernel: tuple[int, int]
    window: Window


def _pool_spec(node: Node, dtypes: frozenset[np.dtype]) -> Optional[_Pool]:
    attrs = node.attrs
    if _dtype(node) not in dtypes or attrs["data_format"] not in (Format.NCHW, Format.NHWC):
        return None
    nchw = attrs["data_format"] is Format.NCHW
    try:
        window = resolve_window(attrs, attrs["ceil_mode"])
    except ValueError:
        return None
    return _Pool(nchw, _pair(attrs["ksize"], nchw), window)


def _reduce_taps(ufunc: Callable[..., Any], windows: np.ndarray, out: np.ndarray) -> None:
    """out = ufunc over the taps of ``[N, C, kh, kw, Ho, Wo]`` windows, one pass per tap
    (NCHW windows reduce slowly along their middle axes)."""
    kh, kw = windows.shape[2:4]
    np.copyto(out, windows[:, :, 0, 0])
    for tap in range(1, kh * kw):
        ufunc(out, windows[:, :, tap // kw, tap % kw], out=out)


@_writes("MaxPool")
def _max_pool(node: Node) -> Optional[WritingKernel]:
    """The maximum over each window (floats; -inf padding), into out."""
    spec = _pool_spec(node, _FLOATS)
    if spec is None:
        return None

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        if spec.nchw:
            _reduce_taps(np.maximum, _nchw_windows(x, spec.window, spec.kernel, -np.inf),
                         outs[0])
        else:
            np.max(window_view(x, spec.window, spec.kernel, -np.inf), axis=(3, 4), out=outs[0])

    return run


@_writes("AvgPool")
def _avg_pool(node: Node) -> Optional[WritingKernel]:
    """Each window's sum divided by its count (float32/64), as the reference: NHWC
    straight into out; NCHW in an NHWC scratch array then transposed into out (a
    summation order of its own would change the last bit)."""
    spec = _pool_spec(node, _WIDE_FLOATS)
    if spec is None:
        return None
    include_pad = node.attrs["count_include_pad"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        data = x.transpose(0, 2, 3, 1) if spec.nchw else x
        windows = window_view(data, spec.window, spec.kernel, 0.0)
        target = np.sum(windows, axis=(3, 4)) if spec.nchw else outs[0]
        if not spec.nchw:
            np.sum(windows, axis=(3, 4), out=target)
        counts = window_counts(spec.window, spec.kernel, data.shape[1:3], include_pad,
                               x.dtype)
        np.divide(target, counts, out=target)
        if spec.nchw:
            np.copyto(outs[0], target.transpose(0, 3, 1, 2))

    return run


def _spatial_axes(layout: Format, rank: int) -> tuple[int, ...]:
    return tuple(range(2, rank)) if layout is Format.NCHW else tuple(range(1, rank - 1))


@_writes("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node) -> Optional[WritingKernel]:
    """The mean (float32/64) or maximum over the spatial axes, reduced into out."""
    average = node.op_type == "GlobalAveragePool"
    if _dtype(node) not in (_WIDE_FLOATS if average else _FLOATS):
        return None
    layout = node.attrs["data_format"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x = _array(inputs, 0)
        axes = _spatial_axes(layout, x.ndim)
        if average:
            np.mean(x, axis=axes, keepdims=True, out=outs[0])
        else:
            np.max(x, axis=axes, keepdims=True, out=outs[0])

    return run


# -- normalizations and softmax ---------------------------------------------------------

@_writes("LayerNormalization")
def _layer_norm(node: Node) -> Optional[WritingKernel]:
    """x - mean into out, the variance from one scratch array of squares, then the
    division, scale and bias in place (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    epsilon, axis = node.attrs["epsilon"], node.attrs["axis"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x, scale, out = _array(inputs, 0), _array(inputs, 1), outs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
        np.subtract(x, x.mean(axis=axes, keepdims=True), out=out)
        variance = np.mean(np.multiply(out, out), axis=axes, keepdims=True)
        np.divide(out, np.sqrt(variance + x.dtype.type(epsilon)), out=out)
        np.multiply(out, scale, out=out)
        if bias is not None:
            np.add(out, bias, out=out)

    return run


@_writes("Softmax", "LogSoftmax")
def _softmax(node: Node) -> Optional[WritingKernel]:
    """x - max along the axis into out; then exp and the division by the sum (Softmax),
    or the subtraction of log(sum(exp)) (LogSoftmax), in place (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    axis, log = node.attrs["axis"], node.op_type == "LogSoftmax"

    def run(inputs: Inputs, outs: Outs) -> None:
        x, out = _array(inputs, 0), outs[0]
        if out.size == 0:
            return
        np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        if log:
            total = np.exp(out).sum(axis=axis, keepdims=True)
            np.subtract(out, np.log(total), out=out)
        else:
            np.exp(out, out=out)
            np.divide(out, out.sum(axis=axis, keepdims=True), out=out)

    return run
