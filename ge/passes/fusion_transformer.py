"""Transformer fusions: matrix product + bias, GELU, SiLU, LayerNorm and attention.

Each pass is a set of small rules (pattern, check saying why it refuses, rewrite)
run by the one rewrite driver. The patterns are the arrangements exporters emit
(torch, TensorFlow, Hugging Face code); constants are compared with a relative
tolerance of ``CONSTANT_RTOL``, so float32-rounded ``sqrt(2)`` or ``0.7978845``
match. Every replacement is a registry op (``MatMulBiasAdd``, ``Gelu``, ``Swish``,
``LayerNormalization``, ``Attention``), so the graph runs on the reference
engine at every stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Optional

import numpy as np

from ge.ir import Graph, Tensor, Value
from ge.ir import Node as IRNode
from ge.ir.tensor import Dim, is_static_dim
from ge.ops.core import channel_axis
from ge.ops.registry import const_value, create_node
from ge.passes.pattern import Constant, Input, Match, Node, Pattern
from ge.passes.rewrite import FunctionRule, ReplaceWith, RewritePass, Rule

__all__ = ["MatMulBiasFusionPass", "MatMulResidualFusionPass", "GeluFusionPass",
           "SiluFusionPass", "LayerNormFusionPass", "AttentionFusionPass", "Fusion",
           "CONSTANT_RTOL"]

#: how far a pattern's constant may be from the exact one (relative)
CONSTANT_RTOL = 1e-4

# -- shared helpers ---------------------------------------------------------------------

def _scalar(match: Match, name: str) -> Optional[float]:
    """The constant bound to ``name`` when it holds exactly one number."""
    data = match.constant(name)
    return float(data.reshape(-1)[0]) if data.size == 1 else None


def _check_constants(match: Match, wanted: dict[str, float]) -> Optional[str]:
    for name, target in wanted.items():
        value = _scalar(match, name)
        if value is None:
            return f"the {name} constant has {match.constant(name).size} elements, not 1"
        if not math.isclose(value, target, rel_tol=CONSTANT_RTOL):
            return f"the {name} constant is {value:.7g}, not {target:.7g}"
    return None


def _check_same(match: Match, names: Sequence[str]) -> Optional[str]:
    first = match.value(names[0])
    for name in names[1:]:
        if match.value(name) is not first:
            return f"{name} reads {match.value(name).name!r}, not {first.name!r}"
    return None


def _check_float(value: Value) -> Optional[str]:
    return None if value.dtype.is_float else f"{value.name!r} is {value.dtype.short_name}"


def _constant(graph: Graph, array: np.ndarray, base: str) -> Value:
    node = create_node("Const", [], {"value": Tensor(array)}, graph.unique_name(base), graph)
    return node.outputs[0]


def _new(graph: Graph, op_type: str, inputs: Sequence[Optional[Value]],
         attrs: Mapping[str, object], base: str) -> Sequence[Value]:
    return create_node(op_type, inputs, dict(attrs), graph.unique_name(base), graph).outputs


def _keep_names(match: Match, values: Sequence[Value]) -> Sequence[Value]:
    """The replacement keeps the explicit names of the root's outputs (graph outputs)."""
    for old, new in zip(match.root.outputs, values):
        if old.has_explicit_name and not new.has_explicit_name:
            new.name = old.name
    return values


class Fusion(FunctionRule):
    """A ``FunctionRule`` whose replacement keeps the names of the outputs it replaces."""

    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        return _keep_names(match, super().rewrite(match, graph))


class _ReplaceKeepingNames(ReplaceWith):
    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        return _keep_names(match, super().rewrite(match, graph))


def _same_dim(a: Dim, b: Dim) -> bool:
    """Known to be the same dimension (equal sizes, or the same symbolic name)."""
    return a == b and (is_static_dim(a) or isinstance(a, str))


# -- MatMul + bias ----------------------------------------------------------------------

def _bias_on_last_axis(node: IRNode) -> Optional[str]:
    rank = node.outputs[0].rank
    if rank >= 1 and channel_axis(node.attrs["data_format"], rank) != rank - 1:
        return f"BiasAdd {node.name!r} adds along axis 1 of a rank-{rank} tensor"
    return None


def _flat_bias(match: Match) -> Optional[np.ndarray]:
    """A constant bias of shape [1, ..., 1, N] as 1-D, else None."""
    data = const_value(match.value("bias"))
    if data is None or data.ndim < 2 or any(d != 1 for d in data.shape[:-1]):
        return None
    return data.reshape(-1)


def _check_matmul_add(match: Match) -> Optional[str]:
    product, bias, total = match.node("matmul").outputs[0], match.value("bias"), match.root
    if bias.rank != 1 and _flat_bias(match) is None:
        return f"the addend {bias.name!r} {list(bias.shape)} is not a 1-D bias"
    if bias.dtype is not product.dtype:
        return f"the bias is {bias.dtype.short_name}, the product {product.dtype.short_name}"
    weights = match.node("matmul").inputs[1]
    if weights is None or weights.rank < 2:
        return "b is 1-D: the product has no column axis"
    size, columns = bias.shape[-1], product.shape[-1]
    if not (size == 1 or _same_dim(size, columns)):
        return f"the bias has {size} elements; the product has {columns} columns"
    if total.outputs[0].rank != product.rank:
        return "the bias would broadcast the product to a higher rank"
    return None


def _build_matmul_add(match: Match, graph: Graph) -> Sequence[Value]:
    matmul = match.node("matmul")
    bias = match.value("bias")
    flat = _flat_bias(match)
    if flat is not None:
        bias = _constant(graph, flat, f"{bias.name}/flat")
    return _new(graph, "MatMulBiasAdd", [*matmul.inputs, bias],
                {"transpose_a": matmul.attrs["transpose_a"],
                 "transpose_b": matmul.attrs["transpose_b"]}, "matmul_bias_add")


def _activation_rule(op_type: str, activation: Callable[[Match], str]) -> Rule:
    pattern = Pattern(Node(op_type, inputs=[Node("MatMulBiasAdd", name="fused",
                                                 attrs={"activation": "none"})]))

    def build(match: Match, graph: Graph) -> Sequence[Value]:
        fused = match.node("fused")
        attrs = dict(fused.attrs, activation=activation(match))
        return _new(graph, "MatMulBiasAdd", fused.inputs, attrs, "matmul_bias_add")

    return Fusion(f"MatMulBiasAdd{op_type}Fusion", pattern, build,
                  summary="fused {count} {ops} into MatMulBiasAdd with its activation")


def _gelu_activation(match: Match) -> str:
    return "gelu_tanh" if match.root.attrs["approximate"] == "tanh" else "gelu"


def _check_residual(match: Match) -> Optional[str]:
    fused, adder, other = match.node("fused"), match.root, match.value("residual")
    product = fused.outputs[0]
    if len(fused.inputs) > 3 and fused.inputs[3] is not None:
        return f"MatMulBiasAdd {fused.name!r} already adds a residual"
    if other is product:
        return f"Add {adder.name!r} adds the product {fused.name!r} to itself"
    if other.dtype is not product.dtype:
        return f"the addend is {other.dtype.short_name}, the product {product.dtype.short_name}"
    if other.rank != product.rank or not all(
            _same_dim(mine, theirs) for mine, theirs in zip(other.shape, product.shape)):
        return (f"Add {adder.name!r} adds {other.name!r} {list(other.shape)} to the product "
                f"{list(product.shape)}: not the same shape")
    return None


def _build_residual(match: Match, graph: Graph) -> Sequence[Value]:
    fused = match.node("fused")
    return _new(graph, "MatMulBiasAdd", [*fused.inputs[:3], match.value("residual")],
                fused.attrs, "matmul_bias_add")


#: Add(MatMulBiasAdd(x, W, b), r) -> MatMulBiasAdd(x, W, b, residual=r): a transformer's
#: skip connection added by the product's kernel as it writes (no pass over the sum)
RESIDUAL_RULE = Fusion(
    "MatMulBiasAddResidualFusion",
    Pattern(Node("Add", inputs=[Node("MatMulBiasAdd", name="fused", attrs={"activation": "none"}),
                                Input("residual")])),
    _build_residual, _check_residual,
    summary="fused {count} {ops} (a residual of the product's shape) into MatMulBiasAdd")

RELU_ACTIVATION_RULE = _activation_rule("Relu", lambda match: "relu")
GELU_ACTIVATION_RULE = _activation_rule("Gelu", _gelu_activation)


class MatMulBiasFusionPass(RewritePass):
    """MatMul + bias (+ activation) -> MatMulBiasAdd.

    MatMul -> BiasAdd (bias on the last axis) -> MatMulBiasAdd (the seed's rule, by
    ``ReplaceWith``); MatMul -> Add(1-D bias, either operand order; a constant
    ``[1, .., 1, N]`` is flattened) -> MatMulBiasAdd; MatMulBiasAdd -> Relu / Gelu ->
    MatMulBiasAdd with that activation. Refuses when the MatMul has another
    consumer, the addend is not a 1-D bias of the product's column count (or 1), the
    dtypes differ, b is 1-D, or a BiasAdd adds along the channel axis 1. Gemm stays Gemm.
    """

    def __init__(self) -> None:
        seed_rule = _ReplaceKeepingNames(
            "MatMulBiasAddFusion",
            Pattern([Node("MatMul"), Node("BiasAdd", where=_bias_on_last_axis)]),
            "MatMulBiasAdd")
        add_rule = Fusion(
            "MatMulAddFusion",
            Pattern(Node("Add", inputs=[Node("MatMul", name="matmul"), Input("bias")])),
            _build_matmul_add, _check_matmul_add,
            summary="fused {count} {ops} (1-D bias) into MatMulBiasAdd")
        super().__init__([seed_rule, add_rule, RELU_ACTIVATION_RULE, GELU_ACTIVATION_RULE])


class MatMulResidualFusionPass(RewritePass):
    """MatMulBiasAdd + residual Add (+ activation) -> MatMulBiasAdd with a residual.

    Add(MatMulBiasAdd(x, W, b), r), either operand order, with r of the product's shape
    and dtype -> MatMulBiasAdd(x, W, b, residual=r): a transformer's skip connection,
    added by the product's kernel as it writes its output; then Relu / Gelu ->
    MatMulBiasAdd with that activation (applied after the residual). Runs after the
    attention and LayerNorm fusions, so their patterns see the graph's own Adds. Refuses
    when the product already has an activation (the Add would follow it) or a residual,
    the Add would broadcast the product, or the dtypes differ.
    """

    def __init__(self) -> None:
        super().__init__([RESIDUAL_RULE, RELU_ACTIVATION_RULE, GELU_ACTIVATION_RULE])


# -- GELU -------------------------------------------------------------------------------

_SQRT2 = math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)


def _outer_forms(term: Callable[[], Node]) -> list[tuple[str, Node]]:
    """x * 0.5 * (1 + f) in the three groupings exporters write (each Mul either order)."""
    return [
        ("(x*(1+f))*0.5", Node("Mul", inputs=[Node("Mul", inputs=[Input("x"), term()]),
                                              Constant("half")])),
        ("(x*0.5)*(1+f)", Node("Mul", inputs=[Node("Mul", inputs=[Input("x"), Constant("half")]),
                                              term()])),
        ("x*((1+f)*0.5)", Node("Mul", inputs=[Input("x"), Node("Mul", inputs=[
            term(), Constant("half")])])),
    ]


def _erf_term(divide: bool) -> Callable[[], Node]:
    def term() -> Node:
        scaled = Node("Div" if divide else "Mul", inputs=[Input("x_erf"), Constant("erf_scale")])
        return Node("Add", inputs=[Node("Erf", inputs=[scaled]), Constant("one")])
    return term


def _squares(node: IRNode) -> bool:
    return node.inputs[0] is node.inputs[1]


def _tanh_term(power: bool) -> Callable[[], Node]:
    def term() -> Node:
        square = Node("Mul", where=_squares, inputs=[Input("x_cube"), Input("x_square")])
        cube = (Node("Pow", inputs=[Input("x_cube"), Constant("three")]) if power else
                Node("Mul", inputs=[square, Input("x_cube_last")]))
        inner = Node("Add", inputs=[Input("x_tanh"), Node("Mul", inputs=[cube, Constant("cubic")])])
        scaled = Node("Mul", inputs=[inner, Constant("tanh_scale")])
        return Node("Add", inputs=[Node("Tanh", inputs=[scaled]), Constant("one")])
    return term


def _check_gelu(match: Match, same: Sequence[str], wanted: dict[str, float]) -> Optional[str]:
    x = match.value("x")
    reason = _check_same(match, same) or _check_float(x) or _check_constants(match, wanted)
    if reason is None and match.root.outputs[0].rank != x.rank:
        reason = "a constant broadcasts x to a higher rank"
    return reason


def _gelu_builder(approximate: str) -> Callable[[Match, Graph], Sequence[Value]]:
    def build(match: Match, graph: Graph) -> Sequence[Value]:
        return _new(graph, "Gelu", [match.value("x")], {"approximate": approximate}, "gelu")
    return build


def _gelu_rules() -> list[Rule]:
    rules: list[Rule] = []
    for divide in (True, False):
        wanted = {"half": 0.5, "one": 1.0, "erf_scale": _SQRT2 if divide else 1 / _SQRT2}
        for form, pattern in _outer_forms(_erf_term(divide)):
            rules.append(Fusion(
                f"GeluErfFusion[{'x/sqrt2' if divide else 'x*0.7071'}, {form}]",
                Pattern(pattern), _gelu_builder("none"),
                partial(_check_gelu, same=("x", "x_erf"), wanted=wanted),
                summary="fused {count} {ops} into Gelu"))
    for power in (True, False):
        wanted = {"half": 0.5, "one": 1.0, "cubic": 0.044715, "tanh_scale": _TANH_SCALE}
        same = ("x", "x_tanh", "x_cube") if power else \
            ("x", "x_tanh", "x_cube", "x_square", "x_cube_last")
        if power:
            wanted["three"] = 3.0
        for form, pattern in _outer_forms(_tanh_term(power)):
            rules.append(Fusion(
                f"GeluTanhFusion[{'pow' if power else 'x*x*x'}, {form}]",
                Pattern(pattern), _gelu_builder("tanh"),
                partial(_check_gelu, same=same, wanted=wanted),
                summary="fused {count} {ops} into Gelu(approximate=tanh)"))
    return rules


class GeluFusionPass(RewritePass):
    """Decomposed GELU -> Gelu, then MatMulBiasAdd -> Gelu -> MatMulBiasAdd(activation).

    Erf form: x * 0.5 * (1 + erf(x / sqrt(2))) (or ``x * 0.70710678``), in the three
    groupings of the products -> Gelu(approximate="none"). Tanh form:
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), the cube as Pow(x, 3) or
    x*x*x -> Gelu(approximate="tanh"). Refuses when the terms read different tensors,
    a constant is off by more than ``CONSTANT_RTOL`` or has more than one element, x is
    not a float, or an inner node has another consumer.
    """

    def __init__(self) -> None:
        super().__init__([*_gelu_rules(), GELU_ACTIVATION_RULE])


# -- SiLU -------------------------------------------------------------------------------

def _check_silu(match: Match) -> Optional[str]:
    x = match.value("x")
    reason = _check_same(match, ("x", "x_sigmoid")) or _check_float(x)
    if reason is None and match.root.outputs[0].rank != x.rank:
        reason = "the product broadcasts x to a higher rank"
    return reason


def _build_silu(match: Match, graph: Graph) -> Sequence[Value]:
    return _keep_names(match, _new(graph, "Swish", [match.value("x")], {"alpha": 1.0}, "silu"))


SILU_RULE = Fusion("SiluFusion",
                   Pattern(Node("Mul", inputs=[Input("x"), Node("Sigmoid", name="sigmoid",
                                                                inputs=[Input("x_sigmoid")])])),
                   _build_silu, _check_silu, summary="fused {count} {ops} into Swish (SiLU)")


class SiluFusionPass(RewritePass):
    """x * Sigmoid(x) -> Swish(x, alpha=1), the SiLU activation that exporters write as
    two nodes (YOLO-style detectors after every convolution, EfficientNet, ...): one
    pass over memory instead of two, and an activation a convolution can take as a
    post-op. Refuses when the two operands are different tensors, x is not a float, or
    the Sigmoid has another consumer."""

    def __init__(self) -> None:
        super().__init__([SILU_RULE])


# -- LayerNorm --------------------------------------------------------------------------

def _normalization(square: bool, reciprocal: bool) -> Node:
    centred = Node("Sub", name="centred", inputs=[Input("x"), Node(
        "ReduceMean", name="mean", inputs=[Input("x_mean"), Constant("mean_axes")])])
    squared = (Node("Mul", inputs=[Input("centred_a"), Input("centred_b")]) if square else
               Node("Pow", inputs=[Input("centred_a"), Constant("two")]))
    variance = Node("ReduceMean", name="variance", inputs=[squared, Constant("variance_axes")])
    deviation = Node("Sqrt", inputs=[Node("Add", inputs=[variance, Constant("epsilon")])])
    if reciprocal:
        return Node("Mul", inputs=[centred, Node("Reciprocal", inputs=[deviation])])
    return Node("Div", inputs=[centred, deviation])


def _trailing_axes(match: Match) -> Optional[int]:
    """The first normalized axis when both means reduce the same trailing axes, kept."""
    rank = match.value("x").rank
    found = []
    for name, node in (("mean_axes", "mean"), ("variance_axes", "variance")):
        if not match.node(node).attrs.get("keepdims", 1):
            return None
        axes = sorted(int(a) % rank for a in match.constant(name).reshape(-1)) if rank else []
        found.append(axes)
    first = found[0]
    if not first or found[1] != first or first != list(range(first[0], rank)):
        return None
    return first[0]


def _check_layer_norm(match: Match, square: bool) -> Optional[str]:
    centred = match.node("centred").outputs[0]
    reason = _check_same(match, ("x", "x_mean")) or _check_float(match.value("x"))
    if reason:
        return reason
    for name in ("centred_a", "centred_b") if square else ("centred_a",):
        if match.value(name) is not centred:
            return f"the variance squares {match.value(name).name!r}, not x - mean"
    if not square and _scalar(match, "two") != 2.0:
        return "the variance's Pow exponent is not 2"
    epsilon = _scalar(match, "epsilon")
    if epsilon is None or not 0 <= epsilon < 1:
        return "epsilon is not one number in [0, 1)"
    if _trailing_axes(match) is None:
        return "the means do not both reduce the same trailing axes (with keepdims)"
    if match.root.outputs[0].rank != match.value("x").rank:
        return "a constant broadcasts x to a higher rank"
    return None


def _build_layer_norm(match: Match, graph: Graph) -> Sequence[Value]:
    x = match.value("x")
    axis = _trailing_axes(match)
    epsilon = _scalar(match, "epsilon")
    ones = _constant(graph, np.ones((1,), x.dtype.np_dtype), "layer_norm/scale")
    return _new(graph, "LayerNormalization", [x, ones], {"axis": axis, "epsilon": epsilon},
                "layer_norm")


def _normalized_rank(norm: IRNode) -> int:
    rank = norm.outputs[0].rank
    return rank - norm.attrs["axis"] % max(rank, 1)


def _check_affine(match: Match) -> Optional[str]:
    norm = match.node("norm")
    if len(norm.inputs) > 2 and norm.inputs[2] is not None and const_value(norm.inputs[2]) is None:
        return "the LayerNormalization's bias is not a constant"
    operand = match.constant("operand")
    extra = operand.shape[:max(operand.ndim - _normalized_rank(norm), 0)]
    if any(d != 1 for d in extra) or match.root.outputs[0].rank != norm.outputs[0].rank:
        return f"the constant {list(operand.shape)} reaches outside the normalized axes"
    if operand.dtype != match.constant("scale").dtype:
        return "the constant's dtype differs from the scale's"
    return None


def _build_affine(match: Match, graph: Graph, multiply: bool) -> Sequence[Value]:
    """LayerNormalization(x, scale, bias) * c -> (x, scale * c, bias * c); + c -> bias + c."""
    norm = match.node("norm")
    scale, operand = match.constant("scale"), match.constant("operand")
    bias = const_value(norm.inputs[2]) if len(norm.inputs) > 2 else None
    operand = operand.reshape(operand.shape[max(operand.ndim - _normalized_rank(norm), 0):])
    if multiply:
        scale = scale * operand
        bias = None if bias is None else bias * operand
    else:
        bias = operand if bias is None else bias + operand
    inputs = [norm.inputs[0], _constant(graph, scale, "layer_norm/scale")]
    if bias is not None:
        inputs.append(_constant(graph, np.asarray(bias), "layer_norm/bias"))
    return _new(graph, "LayerNormalization", inputs, dict(norm.attrs), "layer_norm")


def _affine_rule(op_type: str) -> Rule:
    norm = Node("LayerNormalization", name="norm", inputs=[Input("x"), Constant("scale")])
    pattern = Pattern(Node(op_type, inputs=[norm, Constant("operand")]))
    multiply = op_type == "Mul"
    return Fusion(
        f"LayerNorm{'Scale' if multiply else 'Bias'}Fusion", pattern,
        partial(_build_affine, multiply=multiply), _check_affine,
        summary="folded {count} " + ("scale" if multiply else "bias") +
                " {ops} into LayerNormalization")


class LayerNormFusionPass(RewritePass):
    """Decomposed layer normalization -> LayerNormalization.

    (x - ReduceMean(x)) / Sqrt(ReduceMean((x - mean)^2) + eps) over the trailing axes
    (the square as Pow(., 2) or a product; the division also as Mul by Reciprocal)
    -> LayerNormalization(x, ones, axis, epsilon); then LayerNormalization -> Mul(constant
    scale) -> Add(constant bias) fold into its scale and bias. Refuses when the means
    reduce different or non-trailing axes or drop them, the two x's differ, epsilon is
    not one number in [0, 1), x is not a float, an inner node has another consumer, or a
    scale/bias constant reaches outside the normalized axes.
    """

    def __init__(self) -> None:
        rules: list[Rule] = []
        for square in (False, True):
            for reciprocal in (False, True):
                rules.append(Fusion(
                    f"LayerNormFusion[{'x*x' if square else 'pow'}"
                    f"{', reciprocal' if reciprocal else ''}]",
                    Pattern(_normalization(square, reciprocal)), _build_layer_norm,
                    partial(_check_layer_norm, square=square),
                    summary="fused {count} {ops} into LayerNormalization"))
        super().__init__([*rules, _affine_rule("Mul"), _affine_rule("Add")])


# -- attention --------------------------------------------------------------------------

def _attention_pattern(scaling: Optional[str], masked: bool) -> Node:
    scores: Node = Node("MatMul", name="scores", inputs=[Input("q"), Input("k_t")])
    if scaling is not None:
        scores = Node(scaling, name="scaling", inputs=[scores, Constant("scale")])
    if masked:
        scores = Node("Add", name="masking", inputs=[scores, Input("mask")])
    probs = Node("Softmax", name="softmax", inputs=[scores])
    return Node("MatMul", name="context", inputs=[probs, Input("v")])


def _attention_scale(match: Match) -> Optional[float]:
    if "scaling" not in match.bindings:
        return 1.0
    value = _scalar(match, "scale")
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return 1.0 / value if match.node("scaling").op_type == "Div" else value


def _check_broadcast(q: Value, k_t: Value, v: Value) -> Optional[str]:
    for index, what in ((0, "batch"), (1, "head")):
        for name, other in (("K", k_t), ("V", v)):
            dim, want = other.shape[index], q.shape[index]
            if is_static_dim(dim) and is_static_dim(want) and dim not in (1, want):
                return f"{name}'s {what} dimension {dim} does not match Q's {want}"
    return None


def _check_mask(match: Match) -> Optional[str]:
    if "mask" not in match.bindings:
        return None
    mask, scores = match.value("mask"), match.node("masking").outputs[0]
    if not mask.dtype.is_float or not 1 <= mask.rank <= 4:
        return f"the mask {mask.name!r} is not a float tensor of rank 1 to 4"
    if not _same_dim(mask.shape[-1], scores.shape[-1]):
        return f"the mask {list(mask.shape)} is not known to span the key axis"
    if scores.rank != 4:
        return "the mask broadcasts the scores to a higher rank"
    query = match.value("q")
    for axis, dim in enumerate(mask.shape[:-1], start=4 - mask.rank):
        if dim != 1 and not _same_dim(dim, query.shape[axis]):
            return (f"mask dimension {axis} ({dim!r}) is not known to be 1 or Q's "
                    f"({query.shape[axis]!r}): it could enlarge the scores")
    return None


def _check_attention(match: Match) -> Optional[str]:
    scores, context = match.node("scores"), match.root
    q, k_t, v = match.value("q"), match.value("k_t"), match.value("v")
    if any(value.rank != 4 for value in (q, k_t, v)):
        return "Q, K and V are not all 4-D [batch, heads, sequence, head size]"
    if scores.attrs["transpose_a"] or context.attrs["transpose_a"] or \
            context.attrs["transpose_b"]:
        return "a MatMul transposes Q, the probabilities or V"
    axis = match.node("softmax").attrs["axis"]
    if axis not in (-1, 3):
        return f"the Softmax normalizes axis {axis}, not the key axis"
    if _attention_scale(match) is None:
        return "the scale is not one positive finite number"
    if q.dtype is not k_t.dtype or q.dtype is not v.dtype or not q.dtype.is_float:
        return "Q, K and V are not floats of one dtype"
    return _check_broadcast(q, k_t, v) or _check_mask(match)


def _prescaled(value: Value) -> tuple[Value, float]:
    """(x, c) when ``value`` is Mul(x, c) by one positive constant read only here, else
    (value, 1): torch's scaled_dot_product_attention scales Q and K^T by sqrt(scale)."""
    producer = value.producer
    if producer.op_type != "Mul" or value.num_users != 1 or value.is_graph_output():
        return value, 1.0
    for index in (0, 1):
        data = const_value(producer.inputs[index])
        other = producer.inputs[1 - index]
        if data is not None and data.size == 1 and other is not None and \
                other.rank == value.rank and other.dtype is value.dtype:
            factor = float(data.reshape(-1)[0])
            if math.isfinite(factor) and factor > 0:
                return other, factor
    return value, 1.0


def _transpose(graph: Graph, source: Value, perm: list[int]) -> Value:
    """Transpose(source, perm), reusing one that already exists (or source itself)."""
    if perm == list(range(len(perm))):
        return source
    for usage in source.users:
        node = usage.node
        if node.op_type == "Transpose" and list(node.attrs.get("perm") or []) == perm:
            return node.outputs[0]
    return _new(graph, "Transpose", [source], {"perm": perm}, "attention/key")[0]


def _key(graph: Graph, k_t: Value, transposed: bool) -> Value:
    """K [B, H, S, D] from the second operand of Q @ K^T."""
    if transposed:
        return k_t
    producer = k_t.producer
    if producer.op_type == "Transpose" and producer.inputs[0] is not None:
        perm = [int(p) % 4 for p in producer.attrs.get("perm") or [3, 2, 1, 0]]
        return _transpose(graph, producer.inputs[0], perm[:2] + [perm[3], perm[2]])
    return _transpose(graph, k_t, [0, 1, 3, 2])


def _build_attention(match: Match, graph: Graph) -> Sequence[Value]:
    query, query_factor = _prescaled(match.value("q"))
    key_t, key_factor = _prescaled(match.value("k_t"))
    key = _key(graph, key_t, bool(match.node("scores").attrs["transpose_b"]))
    scale = _attention_scale(match)
    assert scale is not None
    inputs = [query, key, match.value("v")]
    if "mask" in match.bindings:
        inputs.append(match.value("mask"))
    attrs = {"scale": scale * query_factor * key_factor}
    return _new(graph, "Attention", inputs, attrs, "attention")[:1]


_HEADS_PERM = [0, 2, 1, 3]


def _split_heads(name: str) -> Node:
    reshape = Node("Reshape", name=f"split_{name}", inputs=[Input(f"x_{name}"), Constant()])
    return Node("Transpose", attrs={"perm": _HEADS_PERM}, inputs=[reshape])


def _heads_pattern() -> Node:
    attention = Node("Attention", name="attention",
                     inputs=[_split_heads("q"), _split_heads("k"), _split_heads("v")])
    merged = Node("Transpose", attrs={"perm": _HEADS_PERM}, inputs=[attention])
    return Node("Reshape", inputs=[merged, Constant()])


def _heads_of(match: Match, name: str) -> Optional[int]:
    """H when x_<name> [B, S, H*D] is reshaped to [B, S, H, D] (static H and D), else None."""
    x, split = match.value(f"x_{name}"), match.node(f"split_{name}").outputs[0]
    if x.rank != 3 or split.rank != 4 or not all(map(_same_dim, x.shape[:2], split.shape[:2])):
        return None
    heads, size = split.shape[2], split.shape[3]
    if not (isinstance(heads, int) and isinstance(size, int) and heads > 0 and size > 0):
        return None
    return heads if x.shape[2] == heads * size else None


def _check_heads(match: Match) -> Optional[str]:
    attention = match.node("attention")
    if attention.attrs.get("q_num_heads") is not None or len(attention.inputs) > 4:
        return "the Attention already packs heads or reads a cache"
    if any(_heads_of(match, name) is None for name in "qkv"):
        return "Q, K or V is not a [B, S, H*D] tensor split into static heads"
    merged, heads_last = match.root.outputs[0], attention.outputs[0]
    per_head = heads_last.shape[3]
    if merged.rank != 3 or not isinstance(per_head, int) or \
            merged.shape[2] != heads_last.shape[1] * per_head or \
            not all(map(_same_dim, merged.shape[:2], (heads_last.shape[0], heads_last.shape[2]))):
        return "the output is not merged back into [B, S, H*D]"
    return None


def _build_heads(match: Match, graph: Graph) -> Sequence[Value]:
    attention = match.node("attention")
    inputs = [match.value("x_q"), match.value("x_k"), match.value("x_v"), *attention.inputs[3:]]
    attrs = dict(attention.attrs, q_num_heads=_heads_of(match, "q"),
                 kv_num_heads=_heads_of(match, "k"))
    return _new(graph, "Attention", inputs, attrs, "attention")[:1]


class AttentionFusionPass(RewritePass):
    """Scaled dot-product attention -> Attention (ONNX opset-23 form).

    MatMul(Q, K^T) -> Div(c) | Mul(c) | nothing -> Add(mask) | nothing -> Softmax(last
    axis) -> MatMul(., V), with 4-D Q, K, V [B, heads, S, D] -> Attention(Q, K, V,
    mask, scale = 1/c | c | 1). Q and K^T scaled first by constants (Mul, as torch's
    scaled_dot_product_attention exports) fold into the scale. K is recovered from K^T
    by composing the Transpose that made it (or MatMul's transpose_b; otherwise a
    Transpose is added), reusing an equal Transpose when one exists. Refuses when
    Q, K or V is not 4-D, a MatMul transposes Q, the probabilities or V, the Softmax is
    not over the key axis, the scale is not one positive finite number, the dtypes
    differ, a known batch or head count of K/V neither matches Q's nor is 1, the mask is
    not float, is not known to span the key axis, or grows the scores' rank, or an inner
    node (scores, probabilities) has another consumer.

    Then Reshape([B, S, H*D] -> [B, S, H, D]) -> Transpose(0, 2, 1, 3) on each of Q, K, V,
    Attention, Transpose(0, 2, 1, 3) -> Reshape([B, S, H*D]) -> Attention in its 3-D form
    (q_num_heads, kv_num_heads): the head split and merge vanish. Refused when a size
    is not static, the reshapes change more than the last axis, or a node is shared.
    """

    def __init__(self) -> None:
        rules: list[Rule] = []
        for scaling in ("Div", "Mul", None):
            for masked in (True, False):
                rules.append(Fusion(
                    f"AttentionFusion[{scaling or 'unscaled'}{', masked' if masked else ''}]",
                    Pattern(_attention_pattern(scaling, masked)), _build_attention,
                    _check_attention, summary="fused {count} {ops} into Attention"))
        rules.append(Fusion("AttentionHeadsFusion", Pattern(_heads_pattern()), _build_heads,
                            _check_heads, summary="folded the head split and merge of {count} "
                            "Attention into its 3-D form ({ops})"))
        super().__init__(rules)
