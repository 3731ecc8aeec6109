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

import math
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


# -- reductions -------------------------------------------------------------------------

def _reduce(op_type: str, as_bool: bool = False) -> Translate:
    """sum/prod/amax/amin/mean/any/max/min over ``dim`` (none or empty: every axis), the
    input first cast to the output dtype (a sum of bools or ints is int64)."""

    def translate(ctx: _Context, node: Any) -> Value:
        import torch

        args = _arguments(node)
        out = torch.bool if as_bool else _out_dtype(node)
        x = _operand(ctx, args["self"], out)
        if as_bool and isinstance(args.get("dim"), (list, tuple)) and not args["dim"]:
            return x  # any.dims over no axes reduces nothing
        dims = _dims(args.get("dim"), _rank(args["self"]))
        inputs = [x, ctx.ints(dims, "axes")] if dims else [x]
        return ctx.op(op_type, inputs, {"keepdims": int(bool(args.get("keepdim")))}, node.name)

    return translate


def _arg_reduce(op_type: str) -> Translate:
    """argmax/argmin: int64 positions, the first on ties; no dim: over the flattened input."""

    def translate(ctx: _Context, node: Any) -> Value:
        args = _arguments(node)
        x, dim, keepdim = ctx.value(args["self"]), args.get("dim"), bool(args.get("keepdim"))
        if dim is not None:
            return ctx.op(op_type, [x], {"axis": int(dim), "keepdims": int(keepdim)}, node.name)
        flat = ctx.op("Reshape", [x, ctx.ints([-1], "shape")])
        position = ctx.op(op_type, [flat], {"axis": 0, "keepdims": 0},
                          "" if keepdim else node.name)
        if not keepdim:
            return position
        return ctx.op("Reshape", [position, ctx.ints([1] * _rank(args["self"]), "shape")], {},
                      node.name)

    return translate


def _extreme_with_index(reduce_type: str, arg_type: str) -> Translate:
    """max.dim/min.dim: (values, int64 indices of the first extreme)."""

    def translate(ctx: _Context, node: Any) -> tuple[Value, ...]:
        args = _arguments(node)
        x, dim, keepdim = ctx.value(args["self"]), int(args["dim"]), int(bool(args["keepdim"]))
        values = ctx.op(reduce_type, [x, ctx.ints([dim], "axes")], {"keepdims": keepdim},
                        node.name)
        indices = ctx.op(arg_type, [x], {"axis": dim, "keepdims": keepdim}, node.name + "_indices")
        return values, indices

    return translate


def _variance(ctx: _Context, node: Any, with_mean: bool = False) -> Any:
    """var.correction (and var_mean): sum((x - mean)^2) / max(N - correction, 0)."""
    args = _arguments(node)
    x = ctx.value(args["self"])
    dims = _dims(args.get("dim"), _rank(args["self"]))
    shape = _shape_list(_fake(args["self"]).shape)
    if any(shape[d] == -1 for d in dims):
        raise _declined(node, "a variance over a symbolic size")
    correction = 1.0 if args.get("correction") is None else float(args["correction"])
    count = max(float(np.prod([shape[d] for d in dims])) - correction, 0.0)
    keepdim = int(bool(args.get("keepdim")))
    axes = ctx.ints(dims, "axes")
    mean = ctx.op("ReduceMean", [x, axes], {"keepdims": 1})
    centered = ctx.op("Sub", [x, mean])
    total = ctx.op("ReduceSum", [ctx.op("Mul", [centered, centered]), axes], {"keepdims": keepdim})
    variance = ctx.op("Div", [total, _scalar(ctx, count, x)], {}, node.name)
    if not with_mean:
        return variance
    if not keepdim:
        mean = ctx.op("Squeeze", [mean, axes], {}, node.name + "_mean")
    return variance, mean


def _vector_norm(ctx: _Context, node: Any) -> Value:
    args = _arguments(node)
    order = float(args["ord"])
    if args.get("dtype") is not None:
        raise _declined(node, "linalg_vector_norm with a dtype")
    x = ctx.value(args["self"])
    dims = _dims(args.get("dim"), _rank(args["self"]))
    attrs = {"keepdims": int(bool(args.get("keepdim")))}
    axes = ctx.ints(dims, "axes")
    if order in (1.0, 2.0):
        return ctx.op("ReduceL1" if order == 1.0 else "ReduceL2", [x, axes], attrs, node.name)
    if order in (math.inf, -math.inf):
        return ctx.op("ReduceMax" if order > 0 else "ReduceMin", [ctx.op("Abs", [x]), axes],
                      attrs, node.name)
    raise _declined(node, f"a vector norm of order {order} (1, 2 and inf are translated)")


def _cumsum(ctx: _Context, node: Any) -> Value:
    x = _operand(ctx, node.args[0], _out_dtype(node))
    axis = _constant(ctx, np.asarray(int(node.args[1]), np.int64), "axis")
    return ctx.op("CumSum", [x, axis], {}, node.name)


def _topk(ctx: _Context, node: Any) -> tuple[Value, ...]:
    args = _arguments(node)
    if not isinstance(args["k"], int):
        raise _declined(node, "topk with a symbolic k")
    return _outputs(ctx, "TopK", [ctx.value(args["self"]), ctx.ints([args["k"]], "k")],
                    {"axis": int(args["dim"]), "largest": int(bool(args["largest"]))}, node.name)


def _sort(ctx: _Context, node: Any) -> tuple[Value, ...]:
    """sort: TopK of every element (stable: equal values keep their order; NaN largest)."""
    args = _arguments(node)
    dim = int(args["dim"])
    size = _shape_list(_fake(args["self"]).shape)[dim]
    if size == -1:
        raise _declined(node, "a sort along a symbolic size")
    return _outputs(ctx, "TopK", [ctx.value(args["self"]), ctx.ints([size], "k")],
                    {"axis": dim, "largest": int(bool(args["descending"]))}, node.name)


# -- joining, splitting, selecting ------------------------------------------------------

def _cat(ctx: _Context, node: Any) -> Value:
    """cat: Concat of the inputs cast to the output dtype (legacy empty 1-D inputs, which
    ATen skips, are skipped)."""
    tensors, out = node.args[0], _out_dtype(node)
    dim = int(node.args[1]) if len(node.args) > 1 else int(node.kwargs.get("dim", 0))
    rank = _rank(node)
    kept = [t for t in tensors if not (_rank(t) == 1 != rank and _static_shape(t) == [0])]
    return ctx.op("Concat", [_operand(ctx, t, out) for t in kept], {"axis": dim}, node.name)


def _split_with_sizes(ctx: _Context, node: Any) -> tuple[Value, ...]:
    args = _arguments(node)
    sizes = list(args["split_sizes"])
    if not all(isinstance(s, int) for s in sizes):
        raise _declined(node, "a split into symbolic sizes")
    return _outputs(ctx, "Split", [ctx.value(args["self"]), ctx.ints(sizes, "split")],
                    {"axis": int(args["dim"])}, node.name)


def _squeeze(ctx: _Context, node: Any) -> Value:
    """squeeze.dims/dim/default: the listed (default: every) axes whose size is 1; ATen
    skips the others, so a symbolic size among them is refused."""
    args = _arguments(node)
    chosen = args.get("dims", args.get("dim"))
    rank = _rank(args["self"])
    if isinstance(chosen, (list, tuple)) and not chosen:
        return ctx.value(args["self"])  # squeeze.dims of no axes
    shape = _shape_list(_fake(args["self"]).shape)
    axes = sorted({d % rank for d in _dims(chosen, rank)}) if rank else []
    if any(shape[a] == -1 for a in axes):
        raise _declined(node, "a squeeze of a symbolic size (1 or not only at run time)")
    ones = [a for a in axes if shape[a] == 1]
    if not ones:
        return ctx.value(args["self"])
    return ctx.op("Squeeze", [ctx.value(args["self"]), ctx.ints(ones, "axes")], {}, node.name)


def _select(ctx: _Context, node: Any) -> Value:
    x, dim, index = node.args[:3]
    if not isinstance(index, int):
        raise _declined(node, "a select at a symbolic index")
    position = _constant(ctx, np.asarray(index, np.int64), "index")
    return ctx.op("Gather", [ctx.value(x), position], {"axis": int(dim)}, node.name)


def _index_select(ctx: _Context, node: Any) -> Value:
    x, dim, index = node.args[:3]
    indices = ctx.value(index)
    if _rank(index) == 0:
        indices = ctx.op("Reshape", [indices, ctx.ints([1], "shape")])
    return ctx.op("Gather", [ctx.value(x), indices], {"axis": int(dim)}, node.name)


def _gather(ctx: _Context, node: Any) -> Value:
    """gather: GatherElements; ATen lets the index be smaller than the input on the other
    axes, so the input is first cut to the index's sizes there."""
    x, dim, index = node.args[:3]
    data = ctx.value(x)
    data_shape, index_shape = _shape_list(_fake(x).shape), _shape_list(_fake(index).shape)
    dim = int(dim) % max(len(data_shape), 1)
    cut = [a for a, (d, i) in enumerate(zip(data_shape, index_shape)) if a != dim and d != i]
    if any(data_shape[a] == -1 or index_shape[a] == -1 for a in cut):
        raise _declined(node, "a gather whose index may be smaller than the input on a "
                        "symbolic axis")
    if cut:
        data = ctx.op("Slice", [data, ctx.ints([0] * len(cut), "starts"),
                                ctx.ints([index_shape[a] for a in cut], "ends"),
                                ctx.ints(cut, "axes")])
    return ctx.op("GatherElements", [data, ctx.value(index)], {"axis": dim}, node.name)


def _index(ctx: _Context, node: Any) -> Value:
    """index.Tensor with integer index tensors (None: a whole axis). One index: Gather.
    Several: GatherND over the indexed axes moved first, their broadcast shape put back
    where the first indexed axis was when they are adjacent (else first), as NumPy does."""
    x, indices = node.args[0], list(node.args[1])
    positions = [axis for axis, index in enumerate(indices) if index is not None]
    for axis in positions:
        if str(_fake(indices[axis]).dtype) in ("torch.bool", "torch.uint8"):
            raise _declined(node, "a boolean mask index (its result's shape depends on data)")
    if len(positions) == 1:
        return ctx.op("Gather", [ctx.value(x), ctx.value(indices[positions[0]])],
                      {"axis": positions[0]}, node.name)
    return _index_several(ctx, node, x, [indices[a] for a in positions], positions)


def _index_several(ctx: _Context, node: Any, x: Any, tensors: list[Any],
                   positions: list[int]) -> Value:
    import torch

    shapes = [_static_shape(t) for t in tensors]
    if any(s is None for s in shapes):
        raise _declined(node, "index tensors of symbolic shape")
    broadcast = list(np.broadcast_shapes(*[tuple(s) for s in shapes if s is not None]))
    columns = []
    for tensor in tensors:
        column = ctx.op("Expand", [_operand(ctx, tensor, torch.int64),
                                   ctx.ints(broadcast, "shape")])
        columns.append(ctx.op("Unsqueeze", [column, ctx.ints([-1], "axes")]))
    rank = _rank(x)
    others = [a for a in range(rank) if a not in positions]
    data = ctx.value(x)
    if positions + others != list(range(rank)):
        data = ctx.op("Transpose", [data], {"perm": positions + others})
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    front, count = positions[0] if adjacent else 0, len(broadcast)
    gathered = ctx.op("GatherND", [data, ctx.op("Concat", columns, {"axis": -1})], {},
                      "" if front else node.name)
    if not front:
        return gathered
    perm = list(range(count, count + front)) + list(range(count)) + \
        list(range(count + front, count + len(others)))
    return ctx.op("Transpose", [gathered], {"perm": perm}, node.name)


def _constant_pad(ctx: _Context, node: Any) -> Value:
    """constant_pad_nd: Pad; ``pad`` lists (begin, end) pairs from the last axis back;
    negative amounts crop."""
    args = _arguments(node)
    amounts = list(args["pad"])
    if not all(isinstance(p, int) for p in amounts):
        raise _declined(node, "padding by a symbolic amount")
    x = ctx.value(args["self"])
    fill = _scalar(ctx, args.get("value") or 0, x)
    return ctx.op("Pad", [x, _pads(amounts, _rank(args["self"]), ctx), fill],
                  {"mode": "constant"}, node.name)


def _pads(amounts: list[int], rank: int, ctx: _Context) -> Value:
    begins, ends = [0] * rank, [0] * rank
    for pair in range(len(amounts) // 2):
        axis = rank - 1 - pair
        begins[axis], ends[axis] = amounts[2 * pair], amounts[2 * pair + 1]
    return ctx.ints(begins + ends, "pads")


def _mode_pad(mode: str) -> Translate:
    """reflection_pad / replication_pad: Pad in ``reflect`` / ``edge`` mode."""

    def translate(ctx: _Context, node: Any) -> Value:
        x, amounts = node.args[0], list(node.args[1])
        if not all(isinstance(p, int) and p >= 0 for p in amounts):
            raise _declined(node, "padding by a symbolic or negative amount")
        return ctx.op("Pad", [ctx.value(x), _pads(amounts, _rank(x), ctx)], {"mode": mode},
                      node.name)

    return translate


def _repeat(ctx: _Context, node: Any) -> Value:
    x, repeats = node.args[0], [int(r) for r in node.args[1]]
    value = ctx.value(x)
    extra = len(repeats) - _rank(x)
    if extra:
        value = ctx.op("Unsqueeze", [value, ctx.ints(list(range(extra)), "axes")])
    return ctx.op("Tile", [value, ctx.ints(repeats, "repeats")], {}, node.name)


def _flip(ctx: _Context, node: Any) -> Value:
    x, dims = node.args[0], [int(d) for d in node.args[1]]
    if not dims:
        return ctx.value(x)
    count = len(dims)
    return ctx.op("Slice", [ctx.value(x), ctx.ints([-1] * count, "starts"),
                            ctx.ints([-_FAR] * count, "ends"), ctx.ints(dims, "axes"),
                            ctx.ints([-1] * count, "steps")], {}, node.name)


def _copy(ctx: _Context, node: Any) -> Value:
    """copy(dst, src): src cast to dst's dtype and broadcast to dst's shape."""
    destination, source = node.args[:2]
    value = _operand(ctx, source, _fake(destination).dtype)
    if _shape_list(_fake(source).shape) == _shape_list(_fake(destination).shape):
        return value
    shape = _static_shape(destination)
    if shape is None:
        raise _declined(node, "a broadcasting copy into a symbolic shape")
    return ctx.op("Expand", [value, ctx.ints(shape, "shape")], {}, node.name)


def _same(ctx: _Context, node: Any) -> Value:
    return ctx.value(node.args[0])


# -- tensors made from nothing ----------------------------------------------------------

def _created(ctx: _Context, node: Any) -> Value:
    """full/arange/scalar_tensor/empty...: evaluated by ATen now, a Const (empty ones hold
    zeros: their contents are unspecified)."""
    values = list(node.args) + list(node.kwargs.values())
    flat = [v for value in values for v in (value if isinstance(value, (list, tuple))
                                            else [value])]
    if any(_is_node(v) or type(v).__name__.startswith("Sym") for v in flat):
        raise _declined(node, "a tensor created with symbolic or computed arguments")
    kwargs = dict(node.kwargs)
    if "device" in kwargs:
        kwargs["device"] = "cpu"
    tensor = node.target(*node.args, **kwargs)
    if str(tensor.dtype) == "torch.bfloat16":
        raise _declined(node, "a bfloat16 constant")
    array = tensor.numpy()
    if "empty" in str(node.target):
        array = np.zeros_like(array)
    return _constant(ctx, array, node.name)


def _full_like(ctx: _Context, node: Any) -> Value:
    """full_like (zeros_like, ones_like, fill): a Const when the shape is static, else the
    fill value expanded to the input's run-time shape."""
    args = _arguments(node)
    dtype = _ge_dtype(_out_dtype(node))
    fill = np.asarray(args["fill_value"], dtype=dtype.np_dtype)
    shape = _static_shape(args["self"])
    if shape is not None:
        return _constant(ctx, np.full(shape, fill, dtype=dtype.np_dtype), node.name)
    return ctx.op("Expand", [_constant(ctx, fill), ctx.op("Shape", [ctx.value(args["self"])])],
                  {}, node.name)


# -- resampling -------------------------------------------------------------------------

def _resample_sizes(node: Any) -> tuple[Any, list[int], list[int], list[Optional[float]]]:
    """(input node, input and output spatial sizes, ATen's scales or None) of an
    upsample_*2d.vec or .default node; static sizes only."""
    args = _arguments(node)
    x = args.get("input", args.get("self"))
    shape = _shape_list(_fake(x).shape)
    if len(shape) != 4 or -1 in shape[2:]:
        raise _declined(node, "a resize of symbolic spatial sizes or of a non-4-D shape")
    sizes = shape[2:]
    factors = args.get("scale_factors")
    if "scales_h" in args:
        scales: list[Optional[float]] = [args["scales_h"], args["scales_w"]]
        out = [int(s) for s in args["output_size"]]
    elif args.get("output_size") is not None:
        scales, out = [None, None], [int(s) for s in args["output_size"]]
    elif factors is not None:
        given = [float(f) for f in factors]
        scales = list(given)
        out = [int(math.floor(size * f)) for size, f in zip(sizes, given)]
    else:
        raise _declined(node, "a resize with neither sizes nor scales")
    return x, sizes, out, scales


def _aten_nearest(out: int, size: int, scale: Optional[float]) -> np.ndarray:
    """The source index ATen's nearest upsampling reads for each output index (float32)."""
    positions = np.arange(out, dtype=np.int64)
    if out == size:
        return positions
    if out == 2 * size:
        return positions >> 1
    step = np.float32(1.0 / scale) if scale else np.float32(size) / np.float32(out)
    chosen = np.floor(positions.astype(np.float32) * step).astype(np.int64)
    return np.minimum(chosen, size - 1)


def _upsample_nearest(ctx: _Context, node: Any) -> Value:
    """Resize (asymmetric, floor) when it reads the very pixels ATen's float32 index
    arithmetic reads; else two Gathers of those indices."""
    x, sizes, out, scales = _resample_sizes(node)
    wanted = [_aten_nearest(o, s, f) for o, s, f in zip(out, sizes, scales)]
    resized = [np.minimum(np.floor(np.arange(o) / (o / s)), s - 1).astype(np.int64)
               for o, s in zip(out, sizes)]
    if all(np.array_equal(a, b) for a, b in zip(wanted, resized)):
        return ctx.op("Resize", [ctx.value(x), None, None, ctx.ints(out, "sizes")],
                      {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                       "nearest_mode": "floor", "axes": [2, 3]}, node.name)
    rows = ctx.op("Gather", [ctx.value(x), ctx.ints(list(wanted[0]), "rows")], {"axis": 2})
    return ctx.op("Gather", [rows, ctx.ints(list(wanted[1]), "columns")], {"axis": 3},
                  node.name)


def _upsample_bilinear(ctx: _Context, node: Any) -> Value:
    """Resize, linear: align_corners maps corner to corner over the output sizes; else
    half-pixel centers with ATen's scale (1 / the given factor, or in / out). Sampling
    positions clamp at the borders in both."""
    x, sizes, out, scales = _resample_sizes(node)
    align = bool(_arguments(node)["align_corners"])
    attrs = {"mode": "linear", "axes": [2, 3],
             "coordinate_transformation_mode": "align_corners" if align else "half_pixel"}
    exact = all(f is None or s * f == o for s, o, f in zip(sizes, out, scales))
    if align or exact:
        return ctx.op("Resize", [ctx.value(x), None, None, ctx.ints(out, "sizes")], attrs,
                      node.name)
    factors = np.asarray(scales, np.float32)
    if [int(math.floor(float(f) * s)) for f, s in zip(factors, sizes)] != out:
        raise _declined(node, f"scales {scales} give other sizes in float32 than ATen's {out}")
    return ctx.op("Resize", [ctx.value(x), None, _constant(ctx, factors, "scales")], attrs,
                  node.name)


def _adaptive_avg_pool(ctx: _Context, node: Any) -> Value:
    """_adaptive_avg_pool2d whose output sizes divide the input's: AvgPool with the
    quotient as window and stride (ATen's windows are then exactly those)."""
    from ge.ir import Format

    x, out = node.args[0], [int(s) for s in node.args[1]]
    shape = _shape_list(_fake(x).shape)
    if len(shape) != 4 or any(i == -1 or i % o for i, o in zip(shape[2:], out)):
        raise _declined(node, f"adaptive average pooling of {shape} to {out} (only sizes "
                        "that divide the input's, on static 4-D input)")
    window = [i // o for i, o in zip(shape[2:], out)]
    return ctx.op("AvgPool", [ctx.value(x)], {
        "ksize": window, "strides": window, "padding": "EXPLICIT", "pads": [0, 0, 0, 0],
        "data_format": Format.NCHW}, node.name)


def _pixel_shuffle(op_type: str) -> Translate:
    """pixel_shuffle / pixel_unshuffle of 4-D input: DepthToSpace / SpaceToDepth, CRD."""

    def translate(ctx: _Context, node: Any) -> Value:
        x, factor = node.args[:2]
        if _rank(x) != 4:
            raise _declined(node, "a pixel shuffle of a non-4-D input")
        return ctx.op(op_type, [ctx.value(x)], {"blocksize": int(factor), "mode": "CRD"},
                      node.name)

    return translate


# -- normalization ----------------------------------------------------------------------

def _channel_vector(ctx: _Context, argument: Any, channels: int, fill: float) -> Value:
    if argument is not None:
        return ctx.value(argument)
    return _constant(ctx, np.full(channels, fill, np.float32))


def _group_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    x, weight, bias, _batch, channels, _pixels, groups, eps = node.args
    if not isinstance(channels, int):
        raise _declined(node, "a group norm over a symbolic number of channels")
    out = ctx.op("GroupNormalization", [
        ctx.value(x), _channel_vector(ctx, weight, channels, 1.0),
        _channel_vector(ctx, bias, channels, 0.0)],
        {"epsilon": float(eps), "num_groups": int(groups)}, node.name)
    return (out,)  # the saved mean and rstd are not translated: a consumer is refused


def _batch_statistics_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    """_native_batch_norm_legit.no_stats (instance norm's form): normalize by the mean and
    biased variance over every axis but 1: (x - mean) * rsqrt(var + eps) * w + b."""
    x, weight, bias, training, _momentum, eps = node.args
    if not training:
        raise _declined(node, "batch norm without statistics outside training mode")
    rank = _rank(x)
    axes = ctx.ints([0] + list(range(2, rank)), "axes")
    value = ctx.value(x)
    centered = ctx.op("Sub", [value, ctx.op("ReduceMean", [value, axes], {"keepdims": 1})])
    variance = ctx.op("ReduceMean", [ctx.op("Mul", [centered, centered]), axes], {"keepdims": 1})
    spread = ctx.op("Sqrt", [ctx.op("Add", [variance, _scalar(ctx, float(eps), variance)])])
    steps = [(op_type, argument) for op_type, argument in (("Mul", weight), ("Add", bias))
             if argument is not None]
    out = ctx.op("Mul", [centered, ctx.op("Reciprocal", [spread])], {},
                 "" if steps else node.name)
    along = ctx.ints([-1] + [1] * (rank - 2), "shape")
    for index, (op_type, argument) in enumerate(steps):
        vector = ctx.op("Reshape", [ctx.value(argument), along])
        out = ctx.op(op_type, [out, vector], {}, node.name if index == len(steps) - 1 else "")
    return (out,)


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


def _structural_entries(aten: Any) -> dict[Any, Translate]:
    return {
        aten.sum.dim_IntList: _reduce("ReduceSum"), aten.sum.default: _reduce("ReduceSum"),
        aten.mean.default: _reduce("ReduceMean"), aten.prod.dim_int: _reduce("ReduceProd"),
        aten.prod.default: _reduce("ReduceProd"), aten.amax.default: _reduce("ReduceMax"),
        aten.amin.default: _reduce("ReduceMin"), aten.max.default: _reduce("ReduceMax"),
        aten.min.default: _reduce("ReduceMin"), aten.any.default: _reduce("ReduceMax", True),
        aten.any.dim: _reduce("ReduceMax", True), aten.any.dims: _reduce("ReduceMax", True),
        aten.argmax.default: _arg_reduce("ArgMax"), aten.argmin.default: _arg_reduce("ArgMin"),
        aten.max.dim: _extreme_with_index("ReduceMax", "ArgMax"),
        aten.min.dim: _extreme_with_index("ReduceMin", "ArgMin"),
        aten.var.correction: _variance,
        aten.var_mean.correction: lambda ctx, node: _variance(ctx, node, with_mean=True),
        aten.linalg_vector_norm.default: _vector_norm, aten.cumsum.default: _cumsum,
        aten.topk.default: _topk, aten.sort.default: _sort, aten.sort.stable: _sort,
        aten.cat.default: _cat, aten.split_with_sizes.default: _split_with_sizes,
        aten.squeeze.dims: _squeeze, aten.squeeze.dim: _squeeze,
        aten.squeeze.default: _squeeze, aten.select.int: _select,
        aten.index_select.default: _index_select, aten.gather.default: _gather,
        aten.index.Tensor: _index, aten.constant_pad_nd.default: _constant_pad,
        aten.reflection_pad1d.default: _mode_pad("reflect"),
        aten.reflection_pad2d.default: _mode_pad("reflect"),
        aten.replication_pad1d.default: _mode_pad("edge"),
        aten.replication_pad2d.default: _mode_pad("edge"),
        aten.repeat.default: _repeat, aten.flip.default: _flip, aten.copy.default: _copy,
        aten.lift_fresh_copy.default: _same, aten.detach.default: _same,
        aten.full.default: _created, aten.scalar_tensor.default: _created,
        aten.arange.default: _created, aten.arange.start: _created,
        aten.arange.start_step: _created, aten.empty_permuted.default: _created,
        aten.empty.memory_format: _created, aten.full_like.default: _full_like,
        aten.upsample_nearest2d.vec: _upsample_nearest,
        aten.upsample_nearest2d.default: _upsample_nearest,
        aten.upsample_bilinear2d.vec: _upsample_bilinear,
        aten.upsample_bilinear2d.default: _upsample_bilinear,
        aten._adaptive_avg_pool2d.default: _adaptive_avg_pool,
        aten.pixel_shuffle.default: _pixel_shuffle("DepthToSpace"),
        aten.pixel_unshuffle.default: _pixel_shuffle("SpaceToDepth"),
        aten.native_group_norm.default: _group_norm,
        aten._native_batch_norm_legit.no_stats: _batch_statistics_norm,
    }


def translations() -> dict[Any, Callable[[_Context, Any], Any]]:
    """The ATen overloads translated here, each to its translate function."""
    import torch

    aten = torch.ops.aten
    return {**_elementwise_entries(aten), **_structural_entries(aten)}


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
