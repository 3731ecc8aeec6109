"""More core ATen translations for the PyTorch frontend (``ge/frontends/torch.py``).

``translations()`` maps ``torch.ops.aten`` overloads, as they stand after
``run_decompositions()``, to translate functions ``(ctx, fx_node) -> Value | tuple``
in the style of ``torch.py``'s own; ``torch.py`` merges them under its table, so an op it
already translates keeps its translation there. ``TRANSLATED`` names the ops covered.

Every translation reproduces ATen exactly, including its type promotion: operands are
cast to the dtype ATen computes in (the node's own output dtype, or for comparisons the
promoted dtype of the operands), and a Python scalar becomes a constant of that dtype.
What cannot be mapped exactly (a data-dependent shape, a symbolic size where a static
one is needed, an option the registry op lacks) raises ``UnsupportedOpError`` naming
the node and why; nothing is translated approximately.

``PRESERVED`` names ops that the default decomposition table breaks up but that map
whole onto one registry op (SiLU, HardSwish, pixel shuffle, reflection padding...): a
frontend that keeps them out of ``run_decompositions`` gets one GE op for each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import UnsupportedOpError
from ge.frontends.torch import _Context, _shape_list
from ge.ir import DataType, Tensor, Value
from ge.ops import create_node

__all__ = ["translations", "TRANSLATED", "PRESERVED", "decomposition_table"]

Translate = Callable[[_Context, Any], Any]

_FAR = 1 << 62  # a slice end past any dimension


# -- arguments, dtypes and operands -----------------------------------------------------

def _arguments(node: Any) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in (None where absent)."""
    found: dict[str, Any] = {}
    for index, argument in enumerate(node.target._schema.arguments):
        if index < len(node.args) and not argument.kwarg_only:
            found[argument.name] = node.args[index]
        elif argument.name in node.kwargs:
            found[argument.name] = node.kwargs[argument.name]
        else:
            found[argument.name] = argument.default_value if argument.has_default_value() \
                else None
    return found


def _is_node(argument: Any) -> bool:
    return hasattr(argument, "name") and hasattr(argument, "op")


def _fake(argument: Any) -> Any:
    """The fake tensor torch.export recorded for an FX node (the first of a tuple)."""
    found = argument.meta["val"]
    return found[0] if isinstance(found, (tuple, list)) else found


def _ge_dtype(torch_dtype: Any) -> DataType:
    return DataType.parse(str(torch_dtype).replace("torch.", ""))


def _out_dtype(node: Any) -> Any:
    return _fake(node).dtype


def _static_shape(argument: Any) -> Optional[list[int]]:
    """The node's shape when every size is static, else None."""
    sizes = _shape_list(_fake(argument).shape)
    return None if -1 in sizes else sizes


def _rank(argument: Any) -> int:
    return len(_fake(argument).shape)


def _promoted(*arguments: Any) -> Any:
    """The dtype ATen computes a binary op of these arguments (nodes or scalars) in."""
    import torch

    samples = [torch.empty(() if _rank(a) == 0 else (0,), dtype=_fake(a).dtype)
               if _is_node(a) else a for a in arguments]
    if not any(isinstance(s, torch.Tensor) for s in samples):
        return torch.result_type(torch.tensor(samples[0]), samples[1])
    if not isinstance(samples[0], torch.Tensor):
        samples = samples[::-1]
    return torch.result_type(samples[0], samples[1])


def _constant(ctx: _Context, array: Any, name: str = "const") -> Value:
    """A Const holding ``array`` with its own shape (``ctx.constant`` makes 0-d arrays 1-d)."""
    value = Tensor(np.array(array, order="C"))
    return create_node("Const", [], {"value": value}, ctx.graph.unique_name(name),
                       ctx.graph).outputs[0]


def _cast(ctx: _Context, value: Value, dtype: DataType) -> Value:
    return value if value.dtype == dtype else ctx.op("Cast", [value], {"dtype": dtype})


def _operand(ctx: _Context, argument: Any, torch_dtype: Any) -> Value:
    """A node's value cast to ``torch_dtype``, or a Python scalar as a constant of it."""
    dtype = _ge_dtype(torch_dtype)
    if _is_node(argument):
        return _cast(ctx, ctx.value(argument), dtype)
    return _constant(ctx, np.asarray(argument, dtype=dtype.np_dtype))


def _scalar(ctx: _Context, number: Any, like: Value) -> Value:
    """A 0-d constant of ``like``'s dtype."""
    return _constant(ctx, np.asarray(number, dtype=like.dtype.np_dtype))


def _outputs(ctx: _Context, op_type: str, inputs: Sequence[Any], attrs: dict[str, Any],
             name: str) -> tuple[Value, ...]:
    """Every output of a new node (``ctx.op`` gives only the first)."""
    node = create_node(op_type, list(inputs), attrs, ctx.graph.unique_name(name), ctx.graph)
    return tuple(node.outputs)


def _declined(node: Any, why: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{node.name} ({node.target}): {why}")


def _dims(dims: Any, rank: int) -> list[int]:
    """A dim argument (None, an int or a list; empty means every axis) as a list."""
    if dims is None:
        return list(range(rank))
    listed = [int(dims)] if isinstance(dims, int) else [int(d) for d in dims]
    return listed or list(range(rank))


# -- elementwise ------------------------------------------------------------------------

def _unary(op_type: str, integers_unchanged: bool = False,
           attrs: Optional[dict[str, Any]] = None) -> Translate:
    """``op_type`` on the input cast to the output dtype (exp of an int64 is float32);
    rounding ops leave integers as they are."""

    def translate(ctx: _Context, node: Any) -> Value:
        out = _out_dtype(node)
        if integers_unchanged and not out.is_floating_point:
            return ctx.value(node.args[0])
        return ctx.op(op_type, [_operand(ctx, node.args[0], out)], dict(attrs or {}),
                      node.name)

    return translate


def _binary(op_type: str, attrs: Optional[dict[str, Any]] = None) -> Translate:
    """``op_type`` on both operands cast to the output dtype."""

    def translate(ctx: _Context, node: Any) -> Value:
        out = _out_dtype(node)
        a, b = node.args[:2]
        return ctx.op(op_type, [_operand(ctx, a, out), _operand(ctx, b, out)],
                      dict(attrs or {}), node.name)

    return translate


def _scalar_arithmetic(op_type: str) -> Translate:
    """add/sub/mul/div.Scalar: ``self op alpha * other`` in the output dtype."""

    def translate(ctx: _Context, node: Any) -> Value:
        args, out = _arguments(node), _out_dtype(node)
        other = args["other"] * args.get("alpha", 1) if "alpha" in args else args["other"]
        return ctx.op(op_type, [_operand(ctx, args["self"], out), _operand(ctx, other, out)],
                      {}, node.name)

    return translate


def _comparison(op_type: str, negate: bool = False) -> Translate:
    def translate(ctx: _Context, node: Any) -> Value:
        a, b = node.args[:2]
        compute = _promoted(a, b)
        result = ctx.op(op_type, [_operand(ctx, a, compute), _operand(ctx, b, compute)], {},
                        "" if negate else node.name)
        return ctx.op("Not", [result], {}, node.name) if negate else result

    return translate


def _logical(op_type: str) -> Translate:
    """A logical op: every operand read as bool (non-zero is true)."""

    def translate(ctx: _Context, node: Any) -> Value:
        import torch

        inputs = [_operand(ctx, a, torch.bool) for a in node.args[:2] if a is not None]
        return ctx.op(op_type, inputs, {}, node.name)

    return translate


def _bitwise(bool_op: str, integer_op: str) -> Translate:
    def translate(ctx: _Context, node: Any) -> Value:
        out = _out_dtype(node)
        op_type = bool_op if str(out) == "torch.bool" else integer_op
        return ctx.op(op_type, [_operand(ctx, a, out) for a in node.args[:2]], {}, node.name)

    return translate


def _where(ctx: _Context, node: Any) -> Value:
    import torch

    condition, a, b = node.args[:3]
    out = _out_dtype(node)
    return ctx.op("Where", [_operand(ctx, condition, torch.bool), _operand(ctx, a, out),
                            _operand(ctx, b, out)], {}, node.name)


def _clamp(ctx: _Context, node: Any) -> Value:
    """clamp / clamp_min / clamp_max with scalar bounds: Clip; with tensor bounds: Max, Min."""
    args, out = _arguments(node), _out_dtype(node)
    low = args.get("min")
    high = args.get("max")
    value = _operand(ctx, args["self"], out)
    if not _is_node(low) and not _is_node(high):
        bounds = [None if b is None else _operand(ctx, b, out) for b in (low, high)]
        return ctx.op("Clip", [value] + bounds, {}, node.name)
    if low is not None:
        value = ctx.op("Max", [value, _operand(ctx, low, out)], {},
                       node.name if high is None else "")
    if high is not None:
        value = ctx.op("Min", [value, _operand(ctx, high, out)], {}, node.name)
    return value


def _rsqrt(ctx: _Context, node: Any) -> Value:
    root = ctx.op("Sqrt", [_operand(ctx, node.args[0], _out_dtype(node))])
    return ctx.op("Reciprocal", [root], {}, node.name)


def _truncated(ctx: _Context, x: Value, name: str) -> Value:
    """x rounded toward zero (ceil below 0, floor above: -0.5 gives -0.0 as trunc does)."""
    negative = ctx.op("Less", [x, _scalar(ctx, 0, x)])
    return ctx.op("Where", [negative, ctx.op("Ceil", [x]), ctx.op("Floor", [x])], {}, name)


def _trunc(ctx: _Context, node: Any) -> Value:
    out = _out_dtype(node)
    if not out.is_floating_point:
        return ctx.value(node.args[0])
    return _truncated(ctx, _operand(ctx, node.args[0], out), node.name)


def _round(ctx: _Context, node: Any) -> Value:
    """round.decimals as ATen computes it: nearbyint(x * 10^d) / 10^d (d < 0: the other
    way round), in the input's dtype."""
    decimals = int(_arguments(node).get("decimals") or 0)
    x = ctx.value(node.args[0])
    if not _out_dtype(node).is_floating_point:
        return x
    if decimals == 0:
        return ctx.op("Round", [x], {}, node.name)
    power = _scalar(ctx, 10.0 ** abs(decimals), x)
    inner, outer = ("Mul", "Div") if decimals > 0 else ("Div", "Mul")
    return ctx.op(outer, [ctx.op("Round", [ctx.op(inner, [x, power])]), power], {}, node.name)


def _log1p(ctx: _Context, node: Any) -> Value:
    """log(1 + x) to a few ulps without a Log1p op: log(u) * x / (u - 1), u = 1 + x
    (Kahan), x itself where u - 1 rounds to 0, and inf where u is."""
    x = _operand(ctx, node.args[0], _out_dtype(node))
    u = ctx.op("Add", [x, _scalar(ctx, 1, x)])
    shifted = ctx.op("Sub", [u, _scalar(ctx, 1, x)])
    scaled = ctx.op("Mul", [ctx.op("Log", [u]), ctx.op("Div", [x, shifted])])
    tiny = ctx.op("Where", [ctx.op("Equal", [shifted, _scalar(ctx, 0, x)]), x, scaled])
    infinite = ctx.op("IsInf", [u], {"detect_negative": False})
    return ctx.op("Where", [infinite, u, tiny], {}, node.name)


def _expm1(ctx: _Context, node: Any) -> Value:
    """exp(x) - 1 to a few ulps without an Expm1 op: (u - 1) * x / log(u), u = exp(x)
    (Kahan), x where u rounds to 1, -1 where u - 1 does, inf where u is."""
    x = _operand(ctx, node.args[0], _out_dtype(node))
    u = ctx.op("Exp", [x])
    less = ctx.op("Sub", [u, _scalar(ctx, 1, x)])
    scaled = ctx.op("Mul", [less, ctx.op("Div", [x, ctx.op("Log", [u])])])
    result = ctx.op("Where", [ctx.op("Equal", [less, _scalar(ctx, -1, x)]), less, scaled])
    result = ctx.op("Where", [ctx.op("Equal", [u, _scalar(ctx, 1, x)]), x, result])
    infinite = ctx.op("IsInf", [u], {"detect_negative": False})
    return ctx.op("Where", [infinite, u, result], {}, node.name)


def _divide_with_mode(ctx: _Context, node: Any) -> Value:
    """div.Tensor_mode: true, truncating or flooring division, as ATen rounds each."""
    mode = node.kwargs.get("rounding_mode")
    out = _out_dtype(node)
    a, b = (_operand(ctx, arg, out) for arg in node.args[:2])
    if mode is None or (mode == "trunc" and not out.is_floating_point):
        return ctx.op("Div", [a, b], {}, node.name)  # integer Div truncates
    if mode == "trunc":
        return _truncated(ctx, ctx.op("Div", [a, b]), node.name)
    if not out.is_floating_point:  # exact: a - a mod b is a multiple of b
        remainder = ctx.op("Mod", [a, b], {"fmod": False})
        return ctx.op("Div", [ctx.op("Sub", [a, remainder]), b], {}, node.name)
    return _floor_divide_floats(ctx, a, b, node.name)


def _floor_divide_floats(ctx: _Context, a: Value, b: Value, name: str) -> Value:
    """ATen's div_floor_floating: q = (a - fmod(a, b)) / b, one less when the remainder's
    sign differs from b's, then floor(q) rounded up when q - floor(q) > 1/2; ±0 when q is
    0; a / b when b is 0."""
    zero, one, half = (_scalar(ctx, v, a) for v in (0, 1, 0.5))
    remainder = ctx.op("Mod", [a, b], {"fmod": True})
    quotient = ctx.op("Div", [ctx.op("Sub", [a, remainder]), b])
    signs_differ = ctx.op("Xor", [ctx.op("Less", [b, zero]), ctx.op("Less", [remainder, zero])])
    adjust = ctx.op("And", [ctx.op("Not", [ctx.op("Equal", [remainder, zero])]), signs_differ])
    quotient = ctx.op("Where", [adjust, ctx.op("Sub", [quotient, one]), quotient])
    floored = ctx.op("Floor", [quotient])
    round_up = ctx.op("Greater", [ctx.op("Sub", [quotient, floored]), half])
    floored = ctx.op("Where", [round_up, ctx.op("Add", [floored, one]), floored])
    true_quotient = ctx.op("Div", [a, b])
    signed_zero = ctx.op("Mul", [zero, ctx.op("Sign", [true_quotient])])
    result = ctx.op("Where", [ctx.op("Equal", [quotient, zero]), signed_zero, floored])
    return ctx.op("Where", [ctx.op("Equal", [b, zero]), true_quotient, result], {}, name)


def _is_nan_or_inf(op_type: str) -> Translate:
    """isnan/isinf; an integer input (never NaN nor infinite) is read as float32."""

    def translate(ctx: _Context, node: Any) -> Value:
        import torch

        source = node.args[0]
        kind = _fake(source).dtype
        x = _operand(ctx, source, kind if kind.is_floating_point else torch.float32)
        return ctx.op(op_type, [x], {}, node.name)

    return translate


# -- activations ------------------------------------------------------------------------

def _leaky_relu(ctx: _Context, node: Any) -> Value:
    slope = float(_arguments(node)["negative_slope"])
    return ctx.op("LeakyRelu", [ctx.value(node.args[0])], {"alpha": slope}, node.name)


def _elu(ctx: _Context, node: Any) -> Value:
    """x > 0: scale * x, else alpha * scale * (exp(x) - 1): Elu, or Selu when scaled."""
    args = _arguments(node)
    alpha, scale, input_scale = (float(args[k]) for k in ("alpha", "scale", "input_scale"))
    if input_scale != 1.0:
        raise _declined(node, f"elu with input_scale {input_scale} (no registry op scales "
                        "only the negative side's input)")
    x = ctx.value(node.args[0])
    if scale == 1.0:
        return ctx.op("Elu", [x], {"alpha": alpha}, node.name)
    return ctx.op("Selu", [x], {"alpha": alpha, "gamma": scale}, node.name)


def _softplus(ctx: _Context, node: Any) -> Value:
    """log(1 + exp(beta x)) / beta, or x where beta x > threshold; a threshold of 15 or
    more gives x there to float32 precision anyway (log1p(exp(-15)) < x * 2^-24)."""
    args = _arguments(node)
    beta, threshold = float(args["beta"]), float(args["threshold"])
    if threshold < 15:
        raise _declined(node, f"softplus with threshold {threshold} < 15 (Softplus has none)")
    x = ctx.value(node.args[0])
    if beta == 1.0:
        return ctx.op("Softplus", [x], {}, node.name)
    beta_value = _scalar(ctx, beta, x)
    return ctx.op("Div", [ctx.op("Softplus", [ctx.op("Mul", [x, beta_value])]), beta_value],
                  {}, node.name)


def _log_softmax(ctx: _Context, node: Any) -> Value:
    if node.args[2]:
        raise _declined(node, "_log_softmax with half_to_float")
    return ctx.op("LogSoftmax", [ctx.value(node.args[0])], {"axis": int(node.args[1])},
                  node.name)


# -- the table --------------------------------------------------------------------------

_UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "reciprocal": "Reciprocal", "erf": "Erf", "sin": "Sin", "cos": "Cos", "tan": "Tan",
          "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
          "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "sign": "Sign"}
_ROUNDING = {"floor": "Floor", "ceil": "Ceil"}
_COMPARISONS = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
                "ge": "GreaterOrEqual"}
_ACTIVATIONS = {"silu": ("Swish", {"alpha": 1.0}), "hardswish": ("HardSwish", {}),
                "hardsigmoid": ("HardSigmoid", {"alpha": 1.0 / 6.0, "beta": 0.5}),
                "mish": ("Mish", {})}


def _elementwise_entries(aten: Any) -> dict[Any, Translate]:
    table: dict[Any, Translate] = {}
    for name, op_type in _UNARY.items():
        table[getattr(aten, name).default] = _unary(op_type)
    for name, op_type in _ROUNDING.items():
        table[getattr(aten, name).default] = _unary(op_type, integers_unchanged=True)
    for name, (op_type, attrs) in _ACTIVATIONS.items():
        table[getattr(aten, name).default] = _unary(op_type, attrs=attrs)
    for name, op_type in _COMPARISONS.items():
        table[getattr(aten, name).Tensor] = table[getattr(aten, name).Scalar] = \
            _comparison(op_type)
    table[aten.ne.Tensor] = table[aten.ne.Scalar] = _comparison("Equal", negate=True)
    for overload in (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar):
        table[overload] = _binary("Pow")
    for name, op_type in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div")):
        table[getattr(aten, name).Scalar] = _scalar_arithmetic(op_type)
    for name, fmod in (("remainder", False), ("fmod", True)):
        table[getattr(aten, name).Tensor] = table[getattr(aten, name).Scalar] = \
            _binary("Mod", {"fmod": fmod})
    for name, (bool_op, integer_op) in {"and": ("And", "BitwiseAnd"), "or": ("Or", "BitwiseOr"),
                                        "xor": ("Xor", "BitwiseXor")}.items():
        table[getattr(aten, f"logical_{name}").default] = _logical(bool_op)
        bitwise = getattr(aten, f"bitwise_{name}")
        table[bitwise.Tensor] = table[bitwise.Scalar] = _bitwise(bool_op, integer_op)
    table.update({
        aten.round.default: _round, aten.round.decimals: _round, aten.trunc.default: _trunc,
        aten.rsqrt.default: _rsqrt, aten.log1p.default: _log1p, aten.expm1.default: _expm1,
        aten.isnan.default: _is_nan_or_inf("IsNaN"), aten.isinf.default: _is_nan_or_inf("IsInf"),
        aten.logical_not.default: _logical("Not"),
        aten.bitwise_not.default: _bitwise("Not", "BitwiseNot"),
        aten.maximum.default: _binary("Max"), aten.minimum.default: _binary("Min"),
        aten.div.Tensor_mode: _divide_with_mode, aten.where.self: _where,
        aten.clamp.default: _clamp, aten.clamp.Tensor: _clamp, aten.clamp_min.default: _clamp,
        aten.clamp_max.default: _clamp, aten.clamp_min.Tensor: _clamp,
        aten.clamp_max.Tensor: _clamp, aten.leaky_relu.default: _leaky_relu,
        aten.elu.default: _elu, aten.softplus.default: _softplus,
        aten._log_softmax.default: _log_softmax,
    })
    return table


def translations() -> dict[Any, Callable[[_Context, Any], Any]]:
    """The ATen overloads translated here, each to its translate function."""
    import torch

    aten = torch.ops.aten
    from ge.frontends.torch_aten_structure import structural_entries

    return {**_elementwise_entries(aten), **structural_entries(aten)}


#: ops the default decompositions break up that translate whole here (as ``aten`` names)
PRESERVED = ("silu.default", "hardswish.default", "hardsigmoid.default", "mish.default",
             "softplus.default", "pixel_shuffle.default", "pixel_unshuffle.default",
             "reflection_pad1d.default", "reflection_pad2d.default",
             "replication_pad1d.default", "replication_pad2d.default")


def decomposition_table() -> dict[Any, Any]:
    """``torch.export``'s default decompositions less the ``PRESERVED`` ops, for
    ``run_decompositions`` to keep those whole."""
    import torch

    table = torch.export.default_decompositions()
    for name in PRESERVED:
        packet, overload = name.split(".")
        table.pop(getattr(getattr(torch.ops.aten, packet), overload), None)
    return dict(table)


#: the core ATen ops translated here (by name)
TRANSLATED = (
    '_adaptive_avg_pool2d.default', '_log_softmax.default',
    '_native_batch_norm_legit.no_stats', 'abs.default', 'acos.default', 'acosh.default',
    'add.Scalar', 'amax.default', 'amin.default', 'any.default', 'any.dim', 'any.dims',
    'arange.default', 'arange.start', 'arange.start_step', 'argmax.default',
    'argmin.default', 'asin.default', 'asinh.default', 'atan.default', 'atanh.default',
    'bitwise_and.Scalar', 'bitwise_and.Tensor', 'bitwise_not.default', 'bitwise_or.Scalar',
    'bitwise_or.Tensor', 'bitwise_xor.Scalar', 'bitwise_xor.Tensor', 'cat.default',
    'ceil.default', 'clamp.Tensor', 'clamp.default', 'clamp_max.Tensor',
    'clamp_max.default', 'clamp_min.Tensor', 'clamp_min.default', 'constant_pad_nd.default',
    'copy.default', 'cos.default', 'cosh.default', 'cumsum.default', 'detach.default',
    'div.Scalar', 'div.Tensor_mode', 'elu.default', 'empty.memory_format',
    'empty_permuted.default', 'eq.Scalar', 'eq.Tensor', 'erf.default', 'exp.default',
    'expm1.default', 'flip.default', 'floor.default', 'fmod.Scalar', 'fmod.Tensor',
    'full.default', 'full_like.default', 'gather.default', 'ge.Scalar', 'ge.Tensor',
    'gt.Scalar', 'gt.Tensor', 'hardsigmoid.default', 'hardswish.default', 'index.Tensor',
    'index_select.default', 'isinf.default', 'isnan.default', 'le.Scalar', 'le.Tensor',
    'leaky_relu.default', 'lift_fresh_copy.default', 'linalg_vector_norm.default',
    'log.default', 'log1p.default', 'logical_and.default', 'logical_not.default',
    'logical_or.default', 'logical_xor.default', 'lt.Scalar', 'lt.Tensor', 'max.default',
    'max.dim', 'maximum.default', 'mean.default', 'min.default', 'min.dim',
    'minimum.default', 'mish.default', 'mul.Scalar', 'native_group_norm.default',
    'ne.Scalar', 'ne.Tensor', 'neg.default', 'pixel_shuffle.default',
    'pixel_unshuffle.default', 'pow.Scalar', 'pow.Tensor_Scalar', 'pow.Tensor_Tensor',
    'prod.default', 'prod.dim_int', 'reciprocal.default', 'reflection_pad1d.default',
    'reflection_pad2d.default', 'remainder.Scalar', 'remainder.Tensor', 'repeat.default',
    'replication_pad1d.default', 'replication_pad2d.default', 'round.decimals',
    'round.default', 'rsqrt.default', 'scalar_tensor.default', 'select.int', 'sign.default',
    'silu.default', 'sin.default', 'sinh.default', 'softplus.default', 'sort.default',
    'sort.stable', 'split_with_sizes.default', 'sqrt.default',
    'squeeze.default', 'squeeze.dim', 'squeeze.dims', 'sub.Scalar', 'sum.default',
    'sum.dim_IntList', 'tan.default', 'topk.default', 'trunc.default',
    'upsample_bilinear2d.default', 'upsample_bilinear2d.vec', 'upsample_nearest2d.default',
    'upsample_nearest2d.vec', 'var.correction', 'var_mean.correction', 'where.self',
)
