"""Lowering a ``FusedElementwise`` node's steps into a program of scalar instructions.

Each step becomes a few instructions of two kinds:

* ``loop``: an expression on scalars that the generated loop computes inline
  (arithmetic, comparisons, selections, NaN-propagating max/min, ``sqrt``);
  compiled by numba to vector code;
* ``call``: a transcendental function (``tanh``, ``exp``, ``log1p``, ...) that
  runs as one NumPy call over a whole array, between loops: NumPy's SIMD
  implementations are 3-50x faster per element than the scalar libm calls a
  numba loop makes (see ``ge.engines.fused.cost``); ``erf`` alone is computed
  inline, libm's being 10x faster than GE's NumPy erf.

Every instruction has a dtype, and every value is cast to the dtype the
registry infers for its step, so a float32 region computes in float32 and an
int32 region wraps as NumPy's int32 does. Constants are typed too (no bare
literal ever widens a float32 expression). The translations follow the steps'
reference kernels, NaN propagation and signed zeros included (``Max`` is
``a if a > b or a != a else b``, as NumPy's ``maximum``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ge.errors import GEError
from ge.ir import DataType, TensorDesc
from ge.ops.fused_elementwise import Operand, Step, parse_steps
from ge.ops.registry import InferenceContext, get_schema, normalize_attrs

__all__ = ["Instruction", "Program", "Unsupported", "lower", "CALLS", "INLINE_CALLS",
           "constant_value"]

#: the dtypes a generated loop computes in
LOOP_DTYPES = frozenset(np.dtype(name) for name in (
    "float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64"))

#: transcendental functions run as one NumPy call over an array (NumPy's SIMD code beats
#: numba's scalar libm calls several times over; see ge.engines.fused.cost)
CALLS: frozenset[str] = frozenset((
    "tanh", "exp", "expm1", "log", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "power"))

#: transcendental functions computed inside the loop instead, in float64 as the reference
#: does: GE's NumPy erf is a float64 series (about 40 ns an element), libm's about 4
INLINE_CALLS: dict[str, str] = {"erf": "math.erf(np.float64({0}))"}


class Unsupported(Exception):
    """The steps cannot be lowered; the message says why."""


@dataclass(frozen=True)
class Instruction:
    """One instruction: ``kind`` is "input", "constant", "loop" or "call".

    ``text`` is the expression template of a loop instruction (``{0}``, ``{1}`` name its
    operands), the function name of a call, the value of a constant (its ``repr``).
    """

    kind: str
    dtype: np.dtype
    operands: tuple[int, ...] = ()
    text: str = ""
    index: int = 0  # the op input an "input" instruction reads


@dataclass
class Program:
    """The lowered steps: instructions in order, the last one the op's output."""

    instructions: list[Instruction] = field(default_factory=list)

    @property
    def result(self) -> int:
        """The instruction giving the op's output."""
        return len(self.instructions) - 1


def constant_value(instruction: Instruction) -> Any:
    """The Python value of a constant instruction."""
    if instruction.dtype.kind == "f":
        return float(instruction.text)
    if instruction.dtype.kind == "b":
        return instruction.text == "True"
    return int(instruction.text)


class Builder:
    """Appends instructions to a program; values are instruction indices."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._constants: dict[tuple[str, str], int] = {}
        self._inputs: dict[int, int] = {}

    def dtype(self, value: int) -> np.dtype:
        """The dtype of ``value``."""
        return self.program.instructions[value].dtype

    def _add(self, instruction: Instruction) -> int:
        self.program.instructions.append(instruction)
        return len(self.program.instructions) - 1

    def input(self, index: int, dtype: np.dtype) -> int:
        """The op's input ``index`` (one instruction however often it is read)."""
        if index not in self._inputs:
            self._inputs[index] = self._add(Instruction("input", dtype, index=index))
        return self._inputs[index]

    def constant(self, value: Any, dtype: np.dtype) -> int:
        """A constant of ``dtype`` (one instruction per value and dtype)."""
        typed = np.array(value).astype(dtype)[()].item()
        key = (repr(typed), dtype.str)
        if key not in self._constants:
            self._constants[key] = self._add(Instruction("constant", dtype, text=repr(typed)))
        return self._constants[key]

    def like(self, value: int, constant: float) -> int:
        """A constant of ``value``'s dtype."""
        return self.constant(constant, self.dtype(value))

    def loop(self, template: str, *operands: int, dtype: Optional[np.dtype] = None) -> int:
        """An inline expression; its dtype is its first operand's unless given."""
        kind = self.dtype(operands[0]) if dtype is None else dtype
        return self._add(Instruction("loop", kind, tuple(operands), template))

    def call(self, function: str, *operands: int) -> int:
        """A transcendental function: a NumPy call over a whole array, or inline."""
        if function in INLINE_CALLS:
            return self.loop(INLINE_CALLS[function], *operands)
        assert function in CALLS, function
        return self._add(Instruction("call", self.dtype(operands[0]), tuple(operands),
                                     function))

    def cast(self, value: int, dtype: np.dtype) -> int:
        """``value`` as ``dtype`` (no instruction when it already is)."""
        if self.dtype(value) == dtype:
            return value
        return self.loop("{0}", value, dtype=dtype)

    # -- the arithmetic every translation uses -------------------------------------------
    def binary(self, symbol: str, a: int, b: int) -> int:
        """``a symbol b`` in ``a``'s dtype."""
        return self.loop(f"({{0}} {symbol} {{1}})", a, b)

    def compare(self, symbol: str, a: int, b: int) -> int:
        """``a symbol b``, a bool."""
        return self.loop(f"({{0}} {symbol} {{1}})", a, b, dtype=np.dtype(bool))

    def where(self, condition: int, yes: int, no: int) -> int:
        """``yes`` where ``condition`` else ``no``."""
        return self.loop("({1} if {0} else {2})", condition, yes, no, dtype=self.dtype(yes))

    def maximum(self, a: int, b: int) -> int:
        """NumPy's ``maximum``: NaN propagates, ties give ``b``."""
        return self.loop("({0} if ({0} > {1} or {0} != {0}) else {1})", a, b)

    def minimum(self, a: int, b: int) -> int:
        """NumPy's ``minimum``: NaN propagates, ties give ``b``."""
        return self.loop("({0} if ({0} < {1} or {0} != {0}) else {1})", a, b)

    def clip(self, x: int, low: float, high: float) -> int:
        """NumPy's ``clip`` with constant bounds."""
        return self.minimum(self.maximum(x, self.like(x, low)), self.like(x, high))

    def sigmoid(self, x: int) -> int:
        """1 / (1 + exp(-x)), through exp(-|x|) so that exp never overflows."""
        e = self.call("exp", self.loop("(-abs({0}))", x))
        one = self.like(x, 1)
        denominator = self.binary("+", one, e)
        return self.where(self.compare(">=", x, self.like(x, 0)),
                          self.binary("/", one, denominator), self.binary("/", e, denominator))

    def elu(self, x: int, alpha: float) -> int:
        """x if x > 0 else alpha * expm1(min(x, 0))."""
        negative = self.binary("*", self.like(x, alpha),
                               self.call("expm1", self.minimum(x, self.like(x, 0))))
        return self.where(self.compare(">", x, self.like(x, 0)), x, negative)


# -- translations, one per step op ------------------------------------------------------

Translation = Callable[[Builder, list[Optional[int]], dict[str, Any]], int]


def _operands(values: list[Optional[int]]) -> list[int]:
    return [v for v in values if v is not None]


def _power(b: Builder, values: list[Optional[int]], attrs: dict[str, Any]) -> int:
    x, y = _operands(values)
    if b.dtype(x).kind != "f":
        raise Unsupported(f"Pow on {b.dtype(x)}")
    wide = np.result_type(b.dtype(x), b.dtype(y))  # the reference computes in this dtype
    instruction = b.program.instructions[y]
    if instruction.kind == "constant" and float(instruction.text) in (1.0, 2.0, 3.0):
        base = b.cast(x, wide)
        result = base
        for _count in range(int(float(instruction.text)) - 1):
            result = b.binary("*", result, base)
        return b.cast(result, b.dtype(x))
    return b.cast(b.call("power", b.cast(x, wide), b.cast(y, wide)), b.dtype(x))


def _divide(b: Builder, values: list[Optional[int]], _: dict[str, Any]) -> int:
    x, y = _operands(values)
    if b.dtype(x).kind != "f":
        raise Unsupported(f"Div on {b.dtype(x)} (integer division truncates and raises)")
    return b.binary("/", x, y)


def _prelu(b: Builder, x: int, slope: int) -> int:
    return b.where(b.compare("<", x, b.like(x, 0)), b.binary("*", x, slope), x)


def _clip(b: Builder, values: list[Optional[int]], _: dict[str, Any]) -> int:
    result = values[0]
    assert result is not None
    if len(values) > 1 and values[1] is not None:
        result = b.maximum(result, values[1])
    if len(values) > 2 and values[2] is not None:
        result = b.minimum(result, values[2])
    return result


def _sign(b: Builder, x: int) -> int:
    zero, one, minus = b.like(x, 0), b.like(x, 1), b.like(x, -1)
    return b.loop("({1} if {0} > {3} else ({2} if {0} < {3} else ({0} if {0} != {0} else {3})))",
                  x, one, minus, zero)


def _softplus(b: Builder, x: int) -> int:
    """log(1 + exp(x)) as NumPy's logaddexp(0, x) computes it (its own code is scalar)."""
    tail = b.call("log1p", b.call("exp", b.loop("(-abs({0}))", x)))
    return b.binary("+", b.maximum(x, b.like(x, 0)), tail)


def _gelu(b: Builder, x: int, approximate: str) -> int:
    half, one = b.like(x, 0.5), b.like(x, 1)
    if approximate == "tanh":
        cube = b.binary("*", b.binary("*", x, x), x)
        inner = b.binary("*", b.like(x, math.sqrt(2 / math.pi)),
                         b.binary("+", x, b.binary("*", b.like(x, 0.044715), cube)))
        phi = b.call("tanh", inner)
    else:
        phi = b.call("erf", b.binary("/", x, b.like(x, math.sqrt(2))))
    return b.binary("*", b.binary("*", half, x), b.binary("+", one, phi))


def _celu(b: Builder, x: int, alpha: float) -> int:
    zero = b.like(x, 0)
    scaled = b.binary("/", b.minimum(x, zero), b.like(x, alpha))
    negative = b.minimum(b.binary("*", b.like(x, alpha), b.call("expm1", scaled)), zero)
    return b.binary("+", b.maximum(x, zero), negative)


def _unary(function: Callable[[Builder, int], int]) -> Translation:
    return lambda b, v, _: function(b, _operands(v)[0])


def _with_attrs(function: Callable[..., int], *names: str) -> Translation:
    return lambda b, v, attrs: function(b, _operands(v)[0], *(attrs[n] for n in names))


def _symbol(symbol: str) -> Translation:
    return lambda b, v, _: b.binary(symbol, *_operands(v))


def _comparison(symbol: str) -> Translation:
    return lambda b, v, _: b.compare(symbol, *_operands(v))


def _call(function: str) -> Translation:
    return _unary(lambda b, x: b.call(function, x))


TRANSLATIONS: dict[str, Translation] = {
    "Add": _symbol("+"), "Sub": _symbol("-"), "Mul": _symbol("*"), "Div": _divide,
    "Pow": _power,
    "Max": lambda b, v, _: b.maximum(*_operands(v)),
    "Min": lambda b, v, _: b.minimum(*_operands(v)),
    "PRelu": lambda b, v, _: _prelu(b, *_operands(v)),
    "Equal": _comparison("=="), "Less": _comparison("<"), "Greater": _comparison(">"),
    "LessOrEqual": _comparison("<="), "GreaterOrEqual": _comparison(">="),
    "And": _comparison("and"), "Or": _comparison("or"), "Xor": _comparison("!="),
    "Not": _unary(lambda b, x: b.loop("(not {0})", x)),
    "Where": lambda b, v, _: b.where(*_operands(v)),
    "Clip": _clip,
    "Neg": _unary(lambda b, x: b.loop("(-{0})", x)),
    "Abs": _unary(lambda b, x: b.loop("abs({0})", x)),
    "Reciprocal": _unary(lambda b, x: b.binary("/", b.like(x, 1), x)),
    "Sqrt": _unary(lambda b, x: b.loop("math.sqrt({0})", x)),
    "Floor": _unary(lambda b, x: b.loop("np.floor({0})", x)),
    "Ceil": _unary(lambda b, x: b.loop("np.ceil({0})", x)),
    "Sign": _unary(_sign),
    "Relu": _unary(lambda b, x: b.maximum(x, b.like(x, 0))),
    "IsNaN": _unary(lambda b, x: b.compare("!=", x, x)),
    "IsInf": _unary(lambda b, x: b.compare("==", b.loop("abs({0})", x), b.like(x, math.inf))),
    "Sigmoid": _unary(lambda b, x: b.sigmoid(x)),
    "Softsign": _unary(lambda b, x: b.binary("/", x, b.binary("+", b.like(x, 1),
                                                                b.loop("abs({0})", x)))),
    "HardSwish": _unary(lambda b, x: b.binary("*", x, b.clip(
        b.binary("+", b.binary("/", x, b.like(x, 6)), b.like(x, 0.5)), 0, 1))),
    "LeakyRelu": _with_attrs(lambda b, x, alpha: b.where(
        b.compare(">=", x, b.like(x, 0)), x, b.binary("*", x, b.like(x, alpha))), "alpha"),
    "HardSigmoid": _with_attrs(lambda b, x, alpha, beta: b.clip(b.binary(
        "+", b.binary("*", x, b.like(x, alpha)), b.like(x, beta)), 0, 1), "alpha", "beta"),
    "ThresholdedRelu": _with_attrs(lambda b, x, alpha: b.where(
        b.compare(">", x, b.like(x, alpha)), x, b.like(x, 0)), "alpha"),
    "Elu": _with_attrs(lambda b, x, alpha: b.elu(x, alpha), "alpha"),
    "Selu": _with_attrs(lambda b, x, alpha, gamma: b.binary(
        "*", b.like(x, gamma), b.elu(x, alpha)), "alpha", "gamma"),
    "Celu": _with_attrs(_celu, "alpha"),
    "Softplus": _unary(_softplus),
    "Mish": _unary(lambda b, x: b.binary("*", x, b.call("tanh", _softplus(b, x)))),
    "Swish": _with_attrs(lambda b, x, alpha: b.binary(
        "*", x, b.sigmoid(b.binary("*", b.like(x, alpha), x))), "alpha"),
    "Gelu": _with_attrs(_gelu, "approximate"),
    "Erf": _call("erf"), "Tanh": _call("tanh"), "Exp": _call("exp"), "Log": _call("log"),
    "Sin": _call("sin"), "Cos": _call("cos"), "Tan": _call("tan"), "Asin": _call("arcsin"),
    "Acos": _call("arccos"), "Atan": _call("arctan"), "Sinh": _call("sinh"),
    "Cosh": _call("cosh"), "Asinh": _call("arcsinh"), "Acosh": _call("arccosh"),
    "Atanh": _call("arctanh"),
}

#: the ops whose translations also hold for bool and integer operands (cast back to the
#: step's dtype, integer arithmetic wraps as NumPy's does); the others take floats only
_INTEGER_OPS = frozenset(("Add", "Sub", "Mul", "Max", "Min", "PRelu", "Equal", "Less",
                          "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                          "Not", "Where", "Clip", "Neg", "Abs", "Sign", "Relu"))


def _step_dtype(step: Step, position: int, operand_dtypes: list[Optional[np.dtype]],
                literals: list[Optional[np.ndarray]]) -> np.dtype:
    """The dtype the registry infers for ``step`` (shapes do not matter here)."""
    schema = get_schema(step.op_type)
    attrs = normalize_attrs(schema, dict(step.attrs), f"step {position}")
    descs = [None if d is None else TensorDesc((), DataType.parse(d)) for d in operand_dtypes]
    context = InferenceContext(schema, f"s{position}", descs, attrs, literals)
    return np.dtype(schema.infer(context)[0].dtype.np_dtype)


def _lower_step(builder: Builder, step: Step, position: int, results: list[int],
                input_dtypes: Sequence[np.dtype]) -> int:
    values: list[Optional[int]] = []
    literals: list[Optional[np.ndarray]] = []
    for operand in step.operands:
        values.append(_operand(builder, operand, results, input_dtypes))
        literals.append(operand.literal_array() if operand.kind == "literal" else None)
    dtypes = [None if v is None else builder.dtype(v) for v in values]
    try:
        dtype = _step_dtype(step, position, dtypes, literals)
    except (GEError, ValueError, TypeError, IndexError, KeyError) as error:  # refused dtypes
        raise Unsupported(f"step {position} ({step.op_type}) does not infer: {error}") from None
    if dtype not in LOOP_DTYPES or any(d is not None and d not in LOOP_DTYPES for d in dtypes):
        raise Unsupported(f"step {position} ({step.op_type}) on {dtype} "
                          f"(loops compute bool, integer, float32 and float64 values)")
    computed = dtypes[:1] if step.op_type == "Pow" else dtypes  # any exponent dtype will do
    integers = [d for d in computed if d is not None and d.kind in "iub"]
    if integers and step.op_type not in _INTEGER_OPS:
        raise Unsupported(f"{step.op_type} on {integers[0]}")
    attrs = normalize_attrs(get_schema(step.op_type), dict(step.attrs), f"step {position}")
    return builder.cast(TRANSLATIONS[step.op_type](builder, values, attrs), dtype)


def _operand(builder: Builder, operand: Operand, results: list[int],
             input_dtypes: Sequence[np.dtype]) -> Optional[int]:
    if operand.kind == "input":
        if operand.index >= len(input_dtypes):
            raise Unsupported(f"a step reads in{operand.index}; the op has "
                              f"{len(input_dtypes)} inputs")
        return builder.input(operand.index, input_dtypes[operand.index])
    if operand.kind == "step":
        return results[operand.index]
    if operand.kind == "literal":
        array = operand.literal_array()
        return builder.constant(array[()].item(), array.dtype)
    return None


def lower(steps: Sequence[str], input_dtypes: Sequence[np.dtype]) -> Program:
    """The program computing ``steps`` over inputs of ``input_dtypes``; ``Unsupported`` says
    why there is none."""
    program = Program()
    builder = Builder(program)
    results: list[int] = []
    for position, step in enumerate(parse_steps(steps)):
        if step.op_type not in TRANSLATIONS:
            raise Unsupported(f"no translation of {step.op_type}")
        results.append(_lower_step(builder, step, position, results, input_dtypes))
    if results[-1] != program.result:  # the output is an input or an earlier value
        builder.loop("{0}", results[-1])
    return program
