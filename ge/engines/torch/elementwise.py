"""Elementwise ops on torch: unary math, activations and broadcasting arithmetic, each
written straight into its output slot through torch's ``out=`` forms.

- Unary ops and activations (``Relu``, ``Sigmoid``, ``Gelu``, ``Mish``, ...): one ``out=``
  call each. A few have no torch kernel with the registry's formula and take two or
  three calls: ``HardSigmoid`` (ONNX's alpha and beta), ``Swish`` with alpha != 1,
  ``Softsign``, ``ThresholdedRelu`` (NaN gives 0, as the reference) and ``Sign`` (torch's
  sign gives 0 for NaN, the reference keeps NaN). Torch's exact ``Gelu`` gives NaN at
  +inf (and inf from 1.7e38 on): the input's maximum is taken first, and an input
  holding NaN, +inf or values over 1e30 runs the reference's formula step by step. The
  tanh form runs as ``x * sigmoid(...)`` in four passes (``tanh_gelu``), twice as fast
  as torch's kernel for it.
  Every one is correct in place (the output being input 0's buffer): a step that would
  read an overwritten input works on a temporary.
- ``Clip`` with constant bounds (a NaN bound is declined).
- ``Pow``: a one-element exponent (constant, or given at run time) runs as torch's
  scalar power, which is what NumPy does for it too (``x ** 0.5`` as a square root,
  ``x ** 2`` as a square), except -0.5, which NumPy computes as a power and torch as a
  reciprocal square root (their results differ at -0 and -inf): that one runs as a
  power. Any other exponent runs as an elementwise power of two tensors.
- ``Add``, ``Sub``, ``Mul``, ``Div``, ``Max``, ``Min`` (NaN propagates) and ``Where``
  broadcast as NumPy does; a constant operand becomes a torch tensor once, at bind time.
  ``PRelu`` with one slope, or one per channel (axis 1), as torch's prelu.

Per call, a writer converts its arrays to tensors through converters that remember the
last array they saw (``remembering``): the memory plan hands a node the same arena
views run after run, and the conversion (about 1 us an operand) would otherwise cost
more than a small op itself. The ``nn`` family shares these helpers.

Cheap ops (``CHEAP``: ``Relu``, ``Add``, ...) on outputs of a known size under
``CHEAP_MIN_ELEMENTS`` elements stay on the NumPy engine, which calls them faster; so do
``Tanh``, ``Log``, ``Exp``, ``Sqrt`` and ``Reciprocal`` up to the larger sizes where
NumPy's ufunc keeps up with torch's kernel (``NUMPY_RANGE``).

Only float32 runs here (``Where``'s condition is bool; ``Pow``'s constant exponent may
be any numeric type). ``FusedElementwise`` belongs to the fused engine.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.torch._base import (
    FLOAT32,
    Binding,
    const_array,
    float32_node,
    known_size,
    register,
    tensor,
)
from ge.ir import DataType, Node, Value
from ge.ops.registry import has_op

__all__ = ["remembering", "make_binding"]

Arrays = Sequence[Optional[np.ndarray]]
Writer = Callable[[Arrays, Sequence[np.ndarray]], None]
#: ``compute(x, out)`` on torch tensors, correct when ``out`` is ``x``
Compute = Callable[[Any, Any], None]
#: an array as a torch tensor over its memory
Convert = Callable[[Any], Any]
#: gives a converter for one operand slot: ``remembering`` (writers) or ``tensor`` (kernels)
Fresh = Callable[[], Convert]


def remembering() -> Convert:
    """``tensor``, remembering the last array it converted and giving its tensor again
    for that same array object: the memory plan hands a node the same arena views run
    after run, and a conversion costs about 1 us, several times a small op's own time.
    One converter per operand slot; the last array and its tensor are read and set as
    one tuple, so that runs on several threads never pair an array with another's
    tensor. Only a tensor over the array's own memory is remembered (``tensor`` copies a
    read-only array, whose base may change before the next call). The last array stays
    referenced until the next call."""
    last: tuple[Any, Any] = (None, None)

    def convert(array: Any) -> Any:
        nonlocal last
        seen = last
        if seen[0] is array:
            return seen[1]
        converted = tensor(array)
        if array.flags.writeable and min(array.strides, default=0) >= 0:
            last = (array, converted)
        return converted

    return convert


def _plain() -> Convert:
    return tensor


def make_binding(make: Callable[[Fresh], Writer],
                 shapes: Callable[[Arrays], Sequence[tuple[tuple[int, ...], Any]]]) -> Binding:
    """A binding from ``make(fresh)``, which builds a writer converting each operand with
    a converter from ``fresh()``: the writer remembers its conversions, the kernel (fresh
    arrays every call) does not, and runs into arrays of ``shapes(inputs)`` (shape,
    dtype)."""
    plain = make(_plain)

    def kernel(inputs: Arrays) -> list[np.ndarray]:
        outs = [np.empty(shape, dtype) for shape, dtype in shapes(inputs)]
        plain(inputs, outs)
        return outs

    return Binding(kernel, make(remembering))


def _binding(make: Callable[[Fresh], Writer],
             shape_of: Callable[[Arrays], tuple[int, ...]]) -> Binding:
    """``make_binding`` for one float32 output of shape ``shape_of(inputs)``."""
    return make_binding(make, lambda inputs: [(shape_of(inputs), np.float32)])


def _owned(value: np.ndarray, dtype: Any) -> Any:
    """A constant as a torch tensor over a writable copy of its own (a constant's array
    is read-only, which torch does not take), its shape kept (0-d stays 0-d)."""
    import torch

    return torch.from_numpy(np.array(value, dtype=dtype, order="C", copy=True))


def _input(node: Node, index: int) -> Value:
    """Input ``index`` of ``node``, which must be present."""
    value = node.inputs[index]
    assert value is not None
    return value


def _first_shape(inputs: Arrays) -> tuple[int, ...]:
    first = inputs[0]
    assert first is not None
    return first.shape


def _broadcast_shape(inputs: Arrays) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(a.shape for a in inputs if a is not None)))


# -- unary ------------------------------------------------------------------------------

def _simple(function: Callable[..., Any], *args: Any) -> Binding:
    """``function(x, *args, out=out)``: one torch call."""

    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            function(source(inputs[0]), *args, out=target(outs[0]))

        return writer

    return _binding(make, _first_shape)


def _composite(compute: Compute) -> Binding:
    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            compute(source(inputs[0]), target(outs[0]))

        return writer

    return _binding(make, _first_shape)


def _check_unary(node: Node) -> bool:
    return float32_node(node)


#: op type -> the torch function (a name in ``torch``) it runs as, with no attributes
_TORCH_UNARY = {
    "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "neg", "Abs": "abs", "Sin": "sin",
    "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "Floor": "floor", "Ceil": "ceil", "Round": "round",  # torch rounds halves to even
}


def _bind_torch_unary(node: Node) -> Binding:
    import torch

    return _simple(getattr(torch, _TORCH_UNARY[node.op_type]))


def _bind_relu(node: Node) -> Binding:
    import torch

    return _simple(torch.clamp_min, 0.0)  # NaN propagates, as np.maximum


def _bind_sign(node: Node) -> Binding:
    import torch

    sign, where, isnan = torch.sign, torch.where, torch.isnan

    def compute(x: Any, out: Any) -> None:
        where(isnan(x), x, sign(x), out=out)

    return _composite(compute)


def _check_gelu(node: Node) -> bool:
    return float32_node(node) and node.attrs.get("approximate", "none") in ("none", "tanh")


#: tanh Gelu as x * sigmoid(2 * sqrt(2 / pi) * (x + 0.044715 * x^3)), which is
#: 0.5 * x * (1 + tanh(...)): the inner term's two constants
_TANH_GELU_LINEAR = 2.0 * math.sqrt(2.0 / math.pi)
_TANH_GELU_CUBIC = _TANH_GELU_LINEAR * 0.044715


def tanh_gelu(x: Any, out: Any) -> None:
    """Gelu's tanh form of ``x`` into ``out`` (which may be ``x``) in four vectorized
    passes: torch's own tanh Gelu kernel runs about 2x slower here (353 against 174 us
    over 128 x 3072). Same values at the edges: +-inf, NaN, and -0 for large negatives."""
    import torch

    inner = torch.empty_like(x) if out.data_ptr() == x.data_ptr() else out
    linear = torch.tensor(_TANH_GELU_LINEAR, dtype=x.dtype)
    torch.addcmul(linear, x, x, value=_TANH_GELU_CUBIC, out=inner)
    inner.mul_(x)
    torch.sigmoid_(inner)
    torch.mul(x, inner, out=out)


#: above this, torch's exact Gelu (NaN at +inf, inf from 1.7e38 on) parts from the formula
_GELU_SAFE = 1e30


def _bind_gelu(node: Node) -> Binding:
    import torch

    approximate = str(node.attrs.get("approximate", "none"))
    gelu: Callable[..., Any] = functools.partial(torch._C._nn.gelu, approximate=approximate)
    if approximate == "tanh":
        return _composite(tanh_gelu)
    amax, div, mul, erf = torch.amax, torch.div, torch.mul, torch.erf
    root_two = math.sqrt(2.0)

    def compute(x: Any, out: Any) -> None:
        if x.numel() == 0:
            return
        peak = float(amax(x))
        if peak <= _GELU_SAFE:  # no NaN, no +inf, nothing huge: torch's one-pass kernel
            gelu(x, out=out)
            return
        # the reference's formula step by step: 0.5 * x * (1 + erf(x / sqrt(2)))
        phi = div(x, root_two)
        erf(phi, out=phi)
        phi.add_(1.0)
        mul(x, 0.5, out=out)
        out.mul_(phi)

    return _composite(compute)


def _finite_attrs(*names: str) -> Callable[[Node], bool]:
    def check(node: Node) -> bool:
        return float32_node(node) and all(math.isfinite(float(node.attrs[n])) for n in names)

    return check


def _bind_leaky_relu(node: Node) -> Binding:
    import torch

    return _simple(torch._C._nn.leaky_relu, float(node.attrs["alpha"]))


def _bind_elu(node: Node) -> Binding:
    import torch

    # elu(x, alpha, scale, input_scale): x > 0 ? scale * x : alpha * scale * expm1(x)
    return _simple(torch._C._nn.elu, float(node.attrs["alpha"]), 1.0, 1.0)


def _bind_selu(node: Node) -> Binding:
    import torch

    return _simple(torch._C._nn.elu, float(node.attrs["alpha"]), float(node.attrs["gamma"]),
                   1.0)


def _check_celu(node: Node) -> bool:
    alpha = float(node.attrs["alpha"])
    return float32_node(node) and math.isfinite(alpha) and alpha > 0


def _bind_celu(node: Node) -> Binding:
    import torch

    alpha = float(node.attrs["alpha"])
    # celu(x) = x > 0 ? x : alpha * expm1(x / alpha): an elu with input_scale 1 / alpha
    return _simple(torch._C._nn.elu, alpha, 1.0, 1.0 / alpha)


def _bind_softplus(node: Node) -> Binding:
    import torch

    # beta 1; above the threshold 20, ln(1 + e^x) is x in float32
    return _simple(torch._C._nn.softplus, 1.0, 20.0)


def _bind_hard_swish(node: Node) -> Binding:
    import torch

    return _simple(torch._C._nn.hardswish)


def _bind_mish(node: Node) -> Binding:
    import torch

    return _simple(torch._C._nn.mish)


def _bind_hard_sigmoid(node: Node) -> Binding:
    import torch

    alpha, beta = float(node.attrs["alpha"]), float(node.attrs["beta"])
    offset = torch.tensor(beta, dtype=torch.float32)
    add = torch.add

    def compute(x: Any, out: Any) -> None:
        # beta + alpha * x in one pass (a fused multiply-add: within an ulp of NumPy's two
        # roundings), then the clamp in place
        add(offset, x, alpha=alpha, out=out)
        out.clamp_(0.0, 1.0)

    return _composite(compute)


def _bind_swish(node: Node) -> Binding:
    import torch

    alpha = float(node.attrs["alpha"])
    if alpha == 1.0:
        return _simple(torch._C._nn.silu)
    mul, sigmoid = torch.mul, torch.sigmoid

    def compute(x: Any, out: Any) -> None:
        gate = mul(x, alpha)
        sigmoid(gate, out=gate)
        mul(x, gate, out=out)

    return _composite(compute)


def _bind_silu(node: Node) -> Binding:
    import torch

    return _simple(torch._C._nn.silu)


def _bind_softsign(node: Node) -> Binding:
    import torch

    absolute, div = torch.abs, torch.div

    def compute(x: Any, out: Any) -> None:
        denominator = absolute(x)
        denominator.add_(1.0)
        div(x, denominator, out=out)

    return _composite(compute)


def _bind_thresholded_relu(node: Node) -> Binding:
    import torch

    alpha = float(node.attrs["alpha"])
    zero = torch.zeros((), dtype=torch.float32)
    where, greater = torch.where, torch.gt

    def compute(x: Any, out: Any) -> None:
        where(greater(x, alpha), x, zero, out=out)  # NaN > alpha is false: 0

    return _composite(compute)


def _bounds(node: Node) -> Optional[tuple[Optional[float], Optional[float]]]:
    """Clip's (min, max) as floats (None: absent), or None when a bound is not constant."""
    found: list[Optional[float]] = []
    for index in (1, 2):
        if index >= len(node.inputs) or node.inputs[index] is None:
            found.append(None)
            continue
        value = const_array(node, index)
        if value is None or value.size != 1:
            return None
        found.append(float(value.reshape(-1)[0]))
    return found[0], found[1]


def _check_clip(node: Node) -> bool:
    if not float32_node(node):
        return False
    bounds = _bounds(node)
    return bounds is not None and not any(b is not None and math.isnan(b) for b in bounds)


def _bind_clip(node: Node) -> Binding:
    import torch

    bounds = _bounds(node)
    assert bounds is not None
    low, high = bounds
    if low is None and high is None:
        def copy(x: Any, out: Any) -> None:
            if out.data_ptr() != x.data_ptr():
                out.copy_(x)

        return _composite(copy)
    # NumPy's order: max(x, low), then min(., high) (high wins when low > high); so does
    # torch's clamp, and NaN propagates through both
    return _simple(torch.clamp, low, high)


# -- Pow --------------------------------------------------------------------------------

def _check_pow(node: Node) -> bool:
    if not float32_node(node, (0,)):
        return False
    exponent = const_array(node, 1)
    if exponent is None:
        return _input(node, 1).dtype is FLOAT32
    if exponent.size == 1:
        return exponent.dtype.kind in "fiu"
    # an elementwise exponent runs in float32: take only those float32 holds exactly
    return exponent.dtype == np.float32 or (
        exponent.dtype.kind in "iu" and bool(np.all(np.abs(exponent) <= 2 ** 24)))


def _bind_pow(node: Node) -> Binding:
    import torch

    power = torch.pow
    minus_half = torch.tensor(-0.5, dtype=torch.float32)

    def scalar_power(x: Any, exponent: float, out: Any) -> None:
        if out.dim() != x.dim():  # the exponent adds leading ones: same elements
            out = out.view(x.shape)
        if exponent == -0.5:  # torch: a reciprocal square root; NumPy: a power
            power(x, minus_half, out=out)
        else:
            power(x, exponent, out=out)

    exponent = const_array(node, 1)
    constant = None if exponent is None or exponent.size == 1 else _owned(exponent, np.float32)
    value = None if exponent is None or exponent.size != 1 else float(exponent.reshape(-1)[0])

    def make(fresh: Fresh) -> Writer:
        source, target, given_of = fresh(), fresh(), fresh()
        if value is not None:
            def by_scalar(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
                scalar_power(source(inputs[0]), value, target(outs[0]))

            return by_scalar
        if constant is not None:
            def by_constant(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
                power(source(inputs[0]), constant, out=target(outs[0]))

            return by_constant

        def by_given(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            given = inputs[1]
            assert given is not None
            if given.size == 1:  # NumPy treats a one-element exponent as a scalar
                scalar_power(source(inputs[0]), float(given.reshape(-1)[0]), target(outs[0]))
            else:
                power(source(inputs[0]), given_of(given), out=target(outs[0]))

        return by_given

    return _binding(make, _broadcast_shape)


# -- binary -----------------------------------------------------------------------------

_TORCH_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "maximum",
                 "Min": "minimum"}


def _check_binary(node: Node) -> bool:
    return len(node.inputs) == 2 and float32_node(node)


def _constant_tensor(node: Node, index: int) -> Optional[Any]:
    value = const_array(node, index)
    if value is None:
        return None
    return _owned(value, np.float32)


def _bind_binary(node: Node) -> Binding:
    import torch

    function = getattr(torch, _TORCH_BINARY[node.op_type])
    left, right = _constant_tensor(node, 0), _constant_tensor(node, 1)

    def make(fresh: Fresh) -> Writer:
        first, second, target = fresh(), fresh(), fresh()
        if left is None and right is None:
            def both(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
                function(first(inputs[0]), second(inputs[1]), out=target(outs[0]))

            return both
        if left is None:
            def by_right(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
                function(first(inputs[0]), right, out=target(outs[0]))

            return by_right
        if right is None:
            def by_left(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
                function(left, second(inputs[1]), out=target(outs[0]))

            return by_left

        def constants(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            function(left, right, out=target(outs[0]))

        return constants

    return _binding(make, _broadcast_shape)


def _check_prelu(node: Node) -> bool:
    """A slope of one value or one per channel (axis 1), as torch's prelu takes it: a
    slope broadcast along other axes stays with NumPy (torch's select ran 1 ms over
    64x80x80 here, NumPy's 2.7 ms; the channel form 0.04)."""
    if not _check_binary(node):
        return False
    x, slope = node.inputs[0], node.inputs[1]
    if x is None or slope is None or len(x.shape) < 2 or len(slope.shape) > len(x.shape):
        return False
    padded = [1] * (len(x.shape) - len(slope.shape)) + list(slope.shape)
    if any(not isinstance(d, int) or d < 0 for d in padded):
        return False
    if all(d == 1 for d in padded):
        return True
    return padded[1] == x.shape[1] and all(d == 1 for i, d in enumerate(padded) if i != 1)


def _bind_prelu(node: Node) -> Binding:
    """torch's prelu with the slope as a vector (one value, or one per channel)."""
    import torch

    constant = _constant_tensor(node, 1)
    weight = None if constant is None else constant.reshape(-1).contiguous()
    prelu = torch.nn.functional.prelu

    def make(fresh: Fresh) -> Writer:
        first, second, target = fresh(), fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            slope = weight if weight is not None else second(inputs[1]).reshape(-1)
            target(outs[0]).copy_(prelu(first(inputs[0]), slope))

        return writer

    return _binding(make, _first_shape)


def _check_where(node: Node) -> bool:
    return (len(node.inputs) == 3 and _input(node, 0).dtype is DataType.DT_BOOL
            and float32_node(node, (1, 2)))


def _bind_where(node: Node) -> Binding:
    import torch

    where = torch.where
    constants = [const_array(node, i) for i in range(3)]
    fixed = [None if value is None else _owned(value, value.dtype) for value in constants]

    def make(fresh: Fresh) -> Writer:
        def operand(index: int) -> Callable[[Arrays], Any]:
            constant = fixed[index]
            if constant is not None:
                return lambda _inputs: constant
            convert = fresh()
            return lambda inputs: convert(inputs[index])

        condition, first, second, target = operand(0), operand(1), operand(2), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            where(condition(inputs), first(inputs), second(inputs), out=target(outs[0]))

        return writer

    return _binding(make, _broadcast_shape)


# -- registration -----------------------------------------------------------------------

_BINDS: dict[str, tuple[Callable[[Node], bool], Callable[[Node], Binding]]] = {
    **{op_type: (_check_unary, _bind_torch_unary) for op_type in _TORCH_UNARY},
    "Relu": (_check_unary, _bind_relu),
    "Sign": (_check_unary, _bind_sign),
    "Gelu": (_check_gelu, _bind_gelu),
    "LeakyRelu": (_finite_attrs("alpha"), _bind_leaky_relu),
    "Elu": (_finite_attrs("alpha"), _bind_elu),
    "Selu": (_finite_attrs("alpha", "gamma"), _bind_selu),
    "Celu": (_check_celu, _bind_celu),
    "Softplus": (_check_unary, _bind_softplus),
    "HardSwish": (_check_unary, _bind_hard_swish),
    "Mish": (_check_unary, _bind_mish),
    "HardSigmoid": (_finite_attrs("alpha", "beta"), _bind_hard_sigmoid),
    "Swish": (_finite_attrs("alpha"), _bind_swish),
    "Silu": (_check_unary, _bind_silu),
    "Softsign": (_check_unary, _bind_softsign),
    "ThresholdedRelu": (_finite_attrs("alpha"), _bind_thresholded_relu),
    "Clip": (_check_clip, _bind_clip),
    "Pow": (_check_pow, _bind_pow),
    **{op_type: (_check_binary, _bind_binary) for op_type in _TORCH_BINARY},
    "PRelu": (_check_prelu, _bind_prelu),
    "Where": (_check_where, _bind_where),
}

#: ops NumPy computes at memory speed: below ``CHEAP_MIN_ELEMENTS`` output elements
#: NumPy's ufunc beats a torch call with its tensor wrapping (an Add of 32k elements:
#: 4 us against 13 us), so the NumPy engine keeps them (decided at compile time for a
#: known size, per call otherwise); above it torch's kernels use every core
CHEAP = frozenset({"Relu", "Neg", "Abs", "Floor", "Ceil", "Clip", "Sign", "Add", "Sub", "Mul",
                   "Div", "Max", "Min", "Where"})
CHEAP_MIN_ELEMENTS = 1 << 16

#: ops whose NumPy ufunc keeps up with torch's kernel to larger sizes: op -> how many
#: ``CHEAP_MIN_ELEMENTS`` their output needs for torch to take it. Measured on 2 AVX-512
#: cores, float32, both writing into a given array: ``tanh`` 1.5 ms against torch's 6.1
#: on 4M values (torch's is slower at every size), ``log`` 1.7 against 2.1, ``exp`` 2.0
#: against 1.9; ``sqrt`` 36 against 41 us on 64k values and 99 against 71 on 256k;
#: ``reciprocal`` even at 64k
NUMPY_RANGE = {"Tanh": 1 << 12, "Log": 1 << 12, "Exp": 1 << 6, "Sqrt": 2, "Reciprocal": 1}


def numpy_below(op_type: str) -> int:
    """Output elements under which the NumPy engine keeps ``op_type`` (0: torch takes it
    at any size)."""
    if op_type in NUMPY_RANGE:
        return CHEAP_MIN_ELEMENTS * NUMPY_RANGE[op_type]
    return CHEAP_MIN_ELEMENTS if op_type in CHEAP else 0


def _large_enough(node: Node) -> bool:
    """False for an output of a known size under ``numpy_below`` elements (a size the
    data decides is taken, and settled per call: ``TorchEngine.bind_node``)."""
    size = known_size(node.outputs[0].shape)
    return size is None or size >= numpy_below(node.op_type)


def _sized(check: Callable[[Node], bool]) -> Callable[[Node], bool]:
    return lambda node: _large_enough(node) and check(node)


for _op_type, (_check, _bind) in _BINDS.items():
    if has_op(_op_type):
        register((_op_type,), _sized(_check) if numpy_below(_op_type) else _check, _bind)
