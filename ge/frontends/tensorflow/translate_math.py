"""TensorFlow elementwise arithmetic, activations, comparisons and reductions.

Ops with a registry op of the same meaning map one to one (``AddV2`` -> ``Add``,
``RealDiv`` -> ``Div``, ``Maximum`` -> ``Max``, ``Relu`` -> ``Relu``); the others are
written with registry ops: ``Relu6`` is ``Clip(x, 0, 6)``, ``Rsqrt`` is
``Reciprocal(Sqrt(x))``, ``Square`` is ``Mul(x, x)``, ``SquaredDifference`` is the
square of ``Sub``, ``AddN`` a chain of ``Add``, integer ``FloorDiv`` is
``(x - Mod(x, y)) / y`` (``Div`` truncates integers in both). Reductions take
TensorFlow's axes (an ``int32`` input) as the registry's optional ``axes`` input; an empty
axes list reduces nothing, as in TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ge.frontends.tensorflow.translate import NodeContext, translates
from ge.ir import Value

__all__: list[str] = []

_UNARY = {
    "Relu": "Relu", "Elu": "Elu", "Selu": "Selu", "Sigmoid": "Sigmoid", "Tanh": "Tanh",
    "Softplus": "Softplus", "Softsign": "Softsign", "Exp": "Exp", "Log": "Log",
    "Sqrt": "Sqrt", "Neg": "Neg", "Abs": "Abs", "Reciprocal": "Reciprocal",
    "Inv": "Reciprocal", "Floor": "Floor", "Ceil": "Ceil", "Round": "Round", "Sign": "Sign",
    "Erf": "Erf", "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Sinh": "Sinh", "Cosh": "Cosh",
    "Asin": "Asin", "Acos": "Acos", "Atan": "Atan", "Asinh": "Asinh", "Acosh": "Acosh",
    "Atanh": "Atanh", "LogicalNot": "Not", "IsNan": "IsNaN",
}

_BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
    "Div": "Div",  # integers: truncated towards zero, as the registry's Div
    "Maximum": "Max", "Minimum": "Min", "Pow": "Pow", "Equal": "Equal", "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual", "Less": "Less", "LessEqual": "LessOrEqual",
    "LogicalAnd": "And", "LogicalOr": "Or",
}

_REDUCTIONS = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax",
               "Min": "ReduceMin", "Prod": "ReduceProd"}


def _unary(op_type: str) -> Callable[[NodeContext], Value]:
    return lambda ctx: ctx.op(op_type, [ctx.input(0)])


def _binary(op_type: str) -> Callable[[NodeContext], Value]:
    return lambda ctx: ctx.op(op_type, [ctx.input(0), ctx.input(1)])


for _tf, _ge in _UNARY.items():
    translates(_tf)(_unary(_ge))
for _tf, _ge in _BINARY.items():
    translates(_tf)(_binary(_ge))


@translates("Relu6")
def _relu6(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.op("Clip", [x, ctx.scalar(0, x), ctx.scalar(6, x)])


@translates("LeakyRelu")
def _leaky_relu(ctx: NodeContext) -> Value:
    return ctx.op("LeakyRelu", [ctx.input(0)], {"alpha": float(ctx.attr("alpha", 0.2))})


@translates("Rsqrt")
def _rsqrt(ctx: NodeContext) -> Value:
    return ctx.op("Reciprocal", [ctx.op("Sqrt", [ctx.input(0)])])


@translates("Square")
def _square(ctx: NodeContext) -> Value:
    return ctx.op("Mul", [ctx.input(0), ctx.input(0)])


@translates("SquaredDifference")
def _squared_difference(ctx: NodeContext) -> Value:
    difference = ctx.op("Sub", [ctx.input(0), ctx.input(1)])
    return ctx.op("Mul", [difference, difference])


@translates("NotEqual")
def _not_equal(ctx: NodeContext) -> Value:
    return ctx.op("Not", [ctx.op("Equal", [ctx.input(0), ctx.input(1)])])


@translates("FloorDiv")
def _floor_divide(ctx: NodeContext) -> Value:
    """x / y rounded down; for integers, where the registry's ``Div`` truncates,
    ``(x - Mod(x, y)) / y`` is exact (``Mod`` takes the divisor's sign)."""
    x, y = ctx.input(0), ctx.input(1)
    if x.dtype.is_integer:
        return ctx.op("Div", [ctx.op("Sub", [x, ctx.op("Mod", [x, y])]), y])
    return ctx.op("Floor", [ctx.op("Div", [x, y])])


@translates("FloorMod")
def _floor_mod(ctx: NodeContext) -> Value:
    x, y = ctx.input(0), ctx.input(1)
    if x.dtype.is_integer:
        return ctx.op("Mod", [x, y])
    # x - floor(x / y) * y: the sign of the divisor, as Python's % and TensorFlow's
    floor = ctx.op("Floor", [ctx.op("Div", [x, y])])
    return ctx.op("Sub", [x, ctx.op("Mul", [floor, y])])


@translates("AddN")
def _add_n(ctx: NodeContext) -> Value:
    total = ctx.input(0)
    for index in range(1, len(ctx.inputs)):
        total = ctx.op("Add", [total, ctx.input(index)])
    return total if len(ctx.inputs) > 1 else ctx.op("Identity", [total])


@translates("Select", "SelectV2")
def _select(ctx: NodeContext) -> Value:
    condition, x, y = ctx.input(0), ctx.input(1), ctx.input(2)
    if ctx.op_type == "Select" and condition.rank == 1 and x.rank > 1:
        # Select (v1) with a vector condition picks whole rows of x and y
        shape = ctx.const(np.asarray([-1] + [1] * (x.rank - 1), np.int64))
        condition = ctx.op("Reshape", [condition, shape])
    return ctx.op("Where", [condition, x, y])


def _reduction(op_type: str) -> Callable[[NodeContext], Value]:
    def translate(ctx: NodeContext) -> Value:
        keep = bool(ctx.attr("keep_dims", False))
        return ctx.op(op_type, [ctx.input(0), ctx.shape_input(1)],
                      {"keepdims": int(keep), "noop_with_empty_axes": 1})

    return translate


for _tf, _ge in _REDUCTIONS.items():
    translates(_tf)(_reduction(_ge))


@translates("ArgMax", "ArgMin")
def _arg_reduce(ctx: NodeContext) -> Value:
    axis = ctx.ints(1, "dimension")
    if len(axis) != 1:
        raise ctx.unsupported(f"dimension {axis} must be one axis")
    found = ctx.op(ctx.op_type, [ctx.input(0)], {"axis": axis[0], "keepdims": 0})
    wanted = ctx.dtype("output_type") if ctx.node.has_attr("output_type") else found.dtype
    return found if wanted == found.dtype else ctx.op("Cast", [found], {"dtype": wanted})
