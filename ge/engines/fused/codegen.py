"""Generating one numexpr program from a ``FusedElementwise`` node's steps.

Each step becomes a numexpr expression tree over the op's inputs, built
directly from numexpr's expression nodes (not parsed from text), with every
literal a constant of the region's own precision: a float32 region is
computed in float32, as its unfused ops are, never silently widened to
float64. numexpr merges repeated subtrees, so a step read twice is computed
once, and evaluates the whole tree block by block, in cache: each input is
read once and the output written once.

Every op of FusedElementwise's language has a translation here. numexpr has
no ``erf``: float32 regions use an approximation accurate to a few float32
ulps (a Taylor series below 0.5, Numerical Recipes' Chebyshev fit of erfc,
fractional error < 1.2e-7, above); float64 regions with ``Erf`` (or the erf
form of ``Gelu``) are refused, so the reference kernel runs them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ge.ir import DataType
from ge.ops.fused_elementwise import Operand, Step
from ge.ops.registry import get_schema, normalize_attrs

__all__ = ["Generated", "Unsupported", "generate", "MAX_OPERANDS"]

#: numexpr takes a bounded number of operands; larger regions are refused
MAX_OPERANDS = 32

_KINDS = {DataType.DT_FLOAT: "float", DataType.DT_DOUBLE: "double", DataType.DT_BOOL: "bool"}
_SIGNATURE_TYPES: dict[str, Any] = {"float": float, "double": np.double, "bool": bool}

_ERF_TAYLOR = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(8))
_TANH_TAYLOR = (1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835)  # tanh(x) / x in powers of x**2
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277)


class Unsupported(Exception):
    """The steps cannot be generated; the message says why."""


@dataclass(frozen=True)
class Generated:
    """A generated program: the expression, and which op inputs it reads, with their types."""

    expression: Any  # a numexpr ExpressionNode
    inputs: tuple[int, ...]  # op input positions, in the order the program takes them
    signature: tuple[tuple[str, Any], ...]


class _Emitter:
    """Builds numexpr expression nodes in one precision (``kind``)."""

    def __init__(self, numexpr: ModuleType, kind: str) -> None:
        from numexpr import expressions

        self.numexpr, self.nodes, self.kind = numexpr, expressions, kind

    def k(self, value: float) -> Any:
        """A constant of the region's precision."""
        scalar = np.float32(value) if self.kind == "float" else np.float64(value)
        return self.nodes.ConstantNode(scalar)

    def f(self, name: str, *args: Any) -> Any:
        """A numexpr function call."""
        return self.nodes.functions[name](*args)

    def op(self, opcode: str, *args: Any) -> Any:
        """An operator node as is (numexpr's operator overloads may rewrite some)."""
        return self.nodes.OpNode(opcode, list(args))

    def where(self, condition: Any, yes: Any, no: Any) -> Any:
        return self.f("where", condition, yes, no)

    # numexpr's maximum, minimum, sign and round compute in float64: these stay in the
    # region's precision, and NaN propagates as in NumPy
    def maximum(self, a: Any, b: Any) -> Any:
        return self.where(a >= b, a, self.where(a != a, a, b))

    def minimum(self, a: Any, b: Any) -> Any:
        return self.where(a <= b, a, self.where(a != a, a, b))

    def at_least(self, x: Any, low: Any) -> Any:
        """max(x, low) for a bound that is not NaN."""
        return self.where(x < low, low, x)

    def at_most(self, x: Any, high: Any) -> Any:
        """min(x, high) for a bound that is not NaN."""
        return self.where(x > high, high, x)

    def sign(self, x: Any) -> Any:
        return self.where(x > self.k(0), self.k(1), self.where(x < self.k(0), self.k(-1), x))

    def clip(self, x: Any, low: Any, high: Any) -> Any:
        return self.at_most(self.at_least(x, low), high)

    def sigmoid(self, x: Any) -> Any:
        return self.op("div", self.k(1), self.k(1) + self.f("exp", -x))

    def softplus(self, x: Any) -> Any:
        return self.at_least(x, self.k(0)) + self.f("log1p", self.f("exp", -self.f("abs", x)))

    def elu(self, x: Any, alpha: float) -> Any:
        negative = self.k(alpha) * self.f("expm1", self.at_most(x, self.k(0)))
        return self.where(x > self.k(0), x, negative)

    def horner(self, x: Any, coefficients: Sequence[float]) -> Any:
        """c[0] + x * (c[1] + x * (...)), from the highest coefficient down."""
        result = self.k(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            result = self.k(coefficient) + x * result
        return result

    def erf(self, x: Any) -> Any:
        if self.kind != "float":
            raise Unsupported("Erf in float64 (the generated erf is accurate to float32 only)")
        magnitude = self.f("abs", x)
        near = x * self.horner(x * x, _ERF_TAYLOR)
        t = self.op("div", self.k(1), self.k(1) + self.k(0.5) * magnitude)
        complement = t * self.f("exp", self.horner(t, _ERFC_FIT) - magnitude * magnitude)
        far = self.where(x < self.k(0), complement - self.k(1), self.k(1) - complement)
        return self.where(magnitude < self.k(0.5), near, far)

    def tanh(self, x: Any) -> Any:
        """tanh; in float32 through exp (libm's tanhf is several times slower than expf):
        an odd Taylor polynomial below 0.3, (1 - e) / (1 + e) with e = exp(-2|x|) above."""
        if self.kind != "float":
            return self.f("tanh", x)
        magnitude = self.f("abs", x)
        square = x * x
        near = x * self.horner(square, _TANH_TAYLOR)
        e = self.f("exp", self.k(-2) * magnitude)
        far = self.op("div", self.k(1) - e, self.k(1) + e)
        return self.where(magnitude < self.k(0.3), near, self.where(x < self.k(0), -far, far))

    def gelu(self, x: Any, approximate: str) -> Any:
        if approximate == "tanh":
            inner = self.k(math.sqrt(2 / math.pi)) * (x + self.k(0.044715) * (x * x * x))
            return self.k(0.5) * x * (self.k(1) + self.tanh(inner))
        return self.k(0.5) * x * (self.k(1) + self.erf(self.op("div", x, self.k(math.sqrt(2)))))


Translation = Callable[[_Emitter, list[Any], dict[str, Any]], Any]


def _function(name: str) -> Translation:
    return lambda e, a, _: e.f(name, a[0])


def _clip(e: _Emitter, a: list[Any], _: dict[str, Any]) -> Any:
    if any(b is not None and not isinstance(b, e.nodes.ConstantNode) for b in a[1:]):
        raise Unsupported("Clip with bounds that are not literals")
    result = a[0]
    if len(a) > 1 and a[1] is not None:
        result = e.at_least(result, a[1])
    if len(a) > 2 and a[2] is not None:
        result = e.at_most(result, a[2])
    return result


def _is_inf(e: _Emitter, a: list[Any], attrs: dict[str, Any]) -> Any:
    if not (attrs.get("detect_negative", True) and attrs.get("detect_positive", True)):
        raise Unsupported("IsInf detecting one sign only")
    return e.f("isinf", a[0])


_TRANSLATIONS: dict[str, Translation] = {
    "Add": lambda e, a, _: a[0] + a[1],
    "Sub": lambda e, a, _: a[0] - a[1],
    "Mul": lambda e, a, _: a[0] * a[1],
    "Div": lambda e, a, _: e.op("div", a[0], a[1]),
    "Pow": lambda e, a, _: e.op("pow", a[0], a[1]),
    "Max": lambda e, a, _: e.maximum(a[0], a[1]),
    "Min": lambda e, a, _: e.minimum(a[0], a[1]),
    "PRelu": lambda e, a, _: e.where(a[0] < e.k(0), a[0] * a[1], a[0]),
    "Equal": lambda e, a, _: a[0] == a[1],
    "Less": lambda e, a, _: a[0] < a[1],
    "Greater": lambda e, a, _: a[0] > a[1],
    "LessOrEqual": lambda e, a, _: a[0] <= a[1],
    "GreaterOrEqual": lambda e, a, _: a[0] >= a[1],
    "And": lambda e, a, _: a[0] & a[1],
    "Or": lambda e, a, _: a[0] | a[1],
    "Xor": lambda e, a, _: a[0] != a[1],
    "Not": lambda e, a, _: ~a[0],
    "Where": lambda e, a, _: e.where(a[0], a[1], a[2]),
    "Clip": _clip,
    "Neg": lambda e, a, _: -a[0],
    "Reciprocal": lambda e, a, _: e.op("div", e.k(1), a[0]),
    "Relu": lambda e, a, _: e.where(a[0] < e.k(0), e.k(0), a[0]),
    "Sigmoid": lambda e, a, _: e.sigmoid(a[0]),
    "Erf": lambda e, a, _: e.erf(a[0]),
    "IsNaN": lambda e, a, _: a[0] != a[0],
    "Sign": lambda e, a, _: e.sign(a[0]),
    "IsInf": _is_inf,
    "LeakyRelu": lambda e, a, t: e.where(a[0] >= e.k(0), a[0], a[0] * e.k(t["alpha"])),
    "HardSigmoid": lambda e, a, t: e.clip(a[0] * e.k(t["alpha"]) + e.k(t["beta"]), e.k(0),
                                          e.k(1)),
    "Elu": lambda e, a, t: e.elu(a[0], t["alpha"]),
    "Selu": lambda e, a, t: e.k(t["gamma"]) * e.elu(a[0], t["alpha"]),
    "Celu": lambda e, a, t: e.at_least(a[0], e.k(0)) + e.at_most(e.k(t["alpha"]) * e.f(
        "expm1", e.op("div", e.at_most(a[0], e.k(0)), e.k(t["alpha"]))), e.k(0)),
    "ThresholdedRelu": lambda e, a, t: e.where(a[0] > e.k(t["alpha"]), a[0], e.k(0)),
    "Softplus": lambda e, a, _: e.softplus(a[0]),
    "Softsign": lambda e, a, _: e.op("div", a[0], e.k(1) + e.f("abs", a[0])),
    "HardSwish": lambda e, a, _: a[0] * e.clip(e.op("div", a[0], e.k(6)) + e.k(0.5), e.k(0),
                                               e.k(1)),
    "Mish": lambda e, a, _: a[0] * e.tanh(e.softplus(a[0])),
    "Tanh": lambda e, a, _: e.tanh(a[0]),
    "Swish": lambda e, a, t: a[0] * e.sigmoid(e.k(t["alpha"]) * a[0]),
    "Gelu": lambda e, a, t: e.gelu(a[0], t["approximate"]),
}
for _name, _numexpr_name in (("Abs", "abs"), ("Sqrt", "sqrt"), ("Exp", "exp"), ("Log", "log"),
                             ("Floor", "floor"), ("Ceil", "ceil"),
                             ("Sin", "sin"), ("Cos", "cos"),
                             ("Tan", "tan"), ("Asin", "arcsin"), ("Acos", "arccos"),
                             ("Atan", "arctan"), ("Sinh", "sinh"), ("Cosh", "cosh"),
                             ("Asinh", "arcsinh"), ("Acosh", "arccosh"), ("Atanh", "arctanh")):
    _TRANSLATIONS[_name] = _function(_numexpr_name)


def _region_kind(input_dtypes: Sequence[DataType], output: DataType) -> str:
    floats = {d for d in [*input_dtypes, output] if d.is_float}
    if len(floats) > 1:
        raise Unsupported(f"mixed float dtypes {sorted(d.short_name for d in floats)}")
    dtype = floats.pop() if floats else DataType.DT_FLOAT
    if dtype not in _KINDS:
        raise Unsupported(f"dtype {dtype.short_name} (numexpr computes float32 and float64)")
    for other in input_dtypes:
        if other not in _KINDS:
            raise Unsupported(f"an input of dtype {other.short_name}")
    return _KINDS[dtype]


def _literal(emitter: _Emitter, operand: Operand) -> Any:
    dtype = DataType.parse(operand.dtype)
    if dtype.is_float:
        return emitter.k(float(operand.value))
    if dtype is DataType.DT_BOOL:
        return emitter.nodes.ConstantNode(bool(operand.value))
    value = int(operand.value)
    if abs(value) < 2 ** 31:  # numexpr keeps a 32-bit integer constant from widening floats
        return emitter.nodes.ConstantNode(value)
    return emitter.k(float(value))


def generate(numexpr: ModuleType, steps: Sequence[Step], input_dtypes: Sequence[DataType],
             output: DataType) -> Generated:
    """The numexpr program for ``steps``; ``Unsupported`` says why there is none."""
    emitter = _Emitter(numexpr, _region_kind(input_dtypes, output))
    variables: dict[int, Any] = {}
    results: list[Any] = []
    for step in steps:
        translate = _TRANSLATIONS.get(step.op_type)
        if translate is None:
            raise Unsupported(f"no translation of {step.op_type}")
        operands: list[Any] = []
        for operand in step.operands:
            if operand.kind == "input":
                if operand.index not in variables:
                    kind = _KINDS[input_dtypes[operand.index]]
                    variables[operand.index] = emitter.nodes.VariableNode(
                        f"in{operand.index}", kind)
                operands.append(variables[operand.index])
            elif operand.kind == "step":
                operands.append(results[operand.index])
            elif operand.kind == "literal":
                operands.append(_literal(emitter, operand))
            else:
                operands.append(None)
        if step.op_type != "Clip" and any(o is None for o in operands):
            raise Unsupported(f"{step.op_type} with an absent input")
        attrs = normalize_attrs(get_schema(step.op_type), dict(step.attrs), step.op_type)
        results.append(translate(emitter, operands, attrs))
    if not variables:
        raise Unsupported("the steps read no input")
    if len(variables) > MAX_OPERANDS:
        raise Unsupported(f"{len(variables)} inputs (numexpr takes at most {MAX_OPERANDS})")
    if results[-1].astKind != _KINDS.get(output):
        raise Unsupported(f"the program computes {results[-1].astKind}, the op gives "
                          f"{output.short_name}")
    order = tuple(sorted(variables))
    signature = tuple((f"in{i}", _SIGNATURE_TYPES[_KINDS[input_dtypes[i]]]) for i in order)
    return Generated(results[-1], order, signature)
