"""Transformer fusions: each test builds the graph before, states the graph expected after
(the op sequence, with the attributes that matter), and checks the numbers agree."""

from __future__ import annotations

import io
import math
import warnings
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge import graphpass as gp
from ge.ops import create_node, evaluate
from ge.passes import Pass, PassManager, PassResult
from ge.passes.folding import ShapeFoldingPass
from ge.passes.fusion_conv import ConvFusionPass
from ge.passes.fusion_transformer import (
    AttentionFusionPass,
    GeluFusionPass,
    LayerNormFusionPass,
    MatMulBiasFusionPass,
    MatMulResidualFusionPass,
    SiluFusionPass,
)
from tests.tolerance import assert_close

RNG = np.random.default_rng(3)
ALL = (MatMulBiasFusionPass, GeluFusionPass, LayerNormFusionPass, AttentionFusionPass)


# -- building graphs --------------------------------------------------------------------

def data(graph: ge.Graph, name: str, shape: tuple) -> ge.Node:
    return create_node("Data", [], {"shape": list(shape), "dtype": ge.DataType.DT_FLOAT}, name,
                       graph)


def const(graph: ge.Graph, name: str, array: Any) -> ge.Node:
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array, np.float32))}, name,
                       graph)


def op(graph: ge.Graph, op_type: str, inputs: list, name: str, **attrs: Any) -> ge.Node:
    return create_node(op_type, list(inputs), attrs, name, graph)


def structure(graph: ge.Graph, *keys: str) -> list[str]:
    """The computing nodes in order, with the attributes named in ``keys`` they have."""
    lines = []
    for node in graph.topological_order():
        if node.op_type in ("Data", "Const"):
            continue
        shown = [f"{k}={node.attrs[k]!r}" for k in keys if k in node.attrs]
        lines.append(f"{node.op_type}({', '.join(shown)})" if shown else node.op_type)
    return lines


def feeds_for(graph: ge.Graph) -> dict[str, np.ndarray]:
    return {v.producer.name: RNG.standard_normal([int(d) for d in v.shape]).astype(np.float32)
            for v in graph.inputs}


def rewrite(graph: ge.Graph, *passes: Pass) -> tuple[ge.Graph, list[PassResult]]:
    """Run ``passes`` on a copy, check it is valid and computes what ``graph`` computes."""
    after = graph.clone()
    results = [p.run(after) for p in passes]
    after.validate()
    feeds = feeds_for(graph)
    expected, actual = evaluate(graph, feeds), evaluate(after, feeds)
    assert list(actual) == list(expected), "output names changed"
    for name in expected:
        assert_close(actual[name], expected[name], accumulate=True, what=name)
    return after, results


def refusals(pass_: Any) -> list[str]:
    return [reason for stats in pass_.stats.values() for reason in stats.refused]


# -- MatMul + bias ----------------------------------------------------------------------

def dense(order: str = "product first", bias: Any = None, data_format: Optional[str] = None,
          transpose_b: bool = False) -> ge.Graph:
    """y = x @ w + b, as Add (either operand order) or BiasAdd."""
    graph = ge.Graph("dense")
    x = data(graph, "x", (2, 3, 4))
    w = const(graph, "w", RNG.standard_normal((5, 4) if transpose_b else (4, 5)))
    b = const(graph, "b", RNG.standard_normal(5) if bias is None else bias)
    product = op(graph, "MatMul", [x, w], "mm", transpose_b=transpose_b)
    if data_format is not None:
        y = op(graph, "BiasAdd", [product, b], "y", data_format=data_format)
    else:
        y = op(graph, "Add", [product, b] if order == "product first" else [b, product], "y")
    graph.set_outputs([y])
    return graph


def test_seed_apply_pattern_turns_matmul_biasadd_into_matmul_bias_add():
    before = dense(data_format="NHWC")
    fusion = gp.GraphPass()
    fusion.apply_pattern(pattern=gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd")]),
                         replacement=gp.Node("MatMulBiasAdd"), name="matmul_biasadd_fusion")
    after = fusion.run(before)
    assert structure(before) == ["MatMul", "BiasAdd"]
    assert structure(after, "activation") == ["MatMulBiasAdd(activation='none')"]
    feeds = feeds_for(before)
    assert_close(evaluate(after, feeds)["y"], evaluate(before, feeds)["y"])


@pytest.mark.parametrize("order", ["product first", "bias first"])
def test_matmul_add_becomes_matmul_bias_add_keeping_flags_and_names(order):
    before = dense(order, transpose_b=True)
    fusion = MatMulBiasFusionPass()
    after, (result,) = rewrite(before, fusion)
    assert structure(before) == ["MatMul", "Add"]
    assert structure(after, "transpose_b") == ["MatMulBiasAdd(transpose_b=True)"]
    assert after.outputs[0].producer.name == "y"
    assert result.notes == ["fused 1 MatMul+Add (1-D bias) into MatMulBiasAdd"]


def test_bias_shaped_1_1_n_is_flattened_to_1d():
    after, _ = rewrite(dense(bias=RNG.standard_normal((1, 1, 5))), MatMulBiasFusionPass())
    assert structure(after) == ["MatMulBiasAdd"]
    assert after.outputs[0].producer.inputs[2].shape == (5,)


def test_relu_after_the_bias_becomes_the_activation():
    before = dense()
    relu = op(before, "Relu", [before.node("y")], "relu")
    before.set_outputs([relu])
    after, _ = rewrite(before, MatMulBiasFusionPass())
    assert structure(before) == ["MatMul", "Add", "Relu"]
    assert structure(after, "activation") == ["MatMulBiasAdd(activation='relu')"]


@pytest.mark.parametrize(("graph_maker", "reason"), [
    (lambda: dense(bias=RNG.standard_normal((3, 5))), "is not a 1-D bias"),
    (lambda: dense(bias=RNG.standard_normal(3), data_format="NCHW"), "adds along axis 1"),
])
def test_matmul_bias_refusals(graph_maker, reason):
    before = graph_maker()
    fusion = MatMulBiasFusionPass()
    after, (result,) = rewrite(before, fusion)
    assert structure(after) == structure(before) and not result.changed
    if reason:
        assert any(reason in r for r in refusals(fusion))


def test_matmul_with_another_consumer_is_left_alone():
    before = dense()
    before.set_outputs([before.node("y"), op(before, "Relu", [before.node("mm")], "peek")])
    fusion = MatMulBiasFusionPass()
    after, _ = rewrite(before, fusion)
    assert sorted(structure(after)) == ["Add", "MatMul", "Relu"]
    assert any("has another consumer" in r for r in refusals(fusion))


def test_gemm_stays_gemm():
    graph = ge.Graph("gemm")
    x = data(graph, "x", (3, 4))
    gemm = op(graph, "Gemm", [x, const(graph, "w", np.ones((4, 5))), const(graph, "c", np.ones(5))],
              "gemm")
    graph.set_outputs([gemm])
    after, (result,) = rewrite(graph, MatMulBiasFusionPass())
    assert structure(after) == ["Gemm"] and not result.changed


def skip(order: str = "product first", residual_shape: tuple = (2, 3, 5),
         after: str = "", before: str = "") -> ge.Graph:
    """z = [act](x @ w + b [act] + r): a transformer's skip connection, the residual r
    computed (a Neg of a fed value), the Add's operands in either order."""
    graph = ge.Graph("skip")
    x = data(graph, "x", (2, 3, 4))
    r = op(graph, "Neg", [data(graph, "r_in", residual_shape)], "r")
    product = op(graph, "MatMul", [x, const(graph, "w", RNG.standard_normal((4, 5)))], "mm")
    y = op(graph, "Add", [product, const(graph, "b", RNG.standard_normal(5))], "y")
    if before:
        y = op(graph, before, [y], "act_before")
    z = op(graph, "Add", [y, r] if order == "product first" else [r, y], "z")
    if after:
        z = op(graph, after, [z], "act_after")
    graph.set_outputs([z])
    return graph


@pytest.mark.parametrize("order", ["product first", "residual first"])
def test_a_residual_add_after_the_product_becomes_its_residual(order):
    before = skip(order)
    after, results = rewrite(before, MatMulBiasFusionPass(), MatMulResidualFusionPass())
    assert structure(before) == ["Neg", "MatMul", "Add", "Add"]
    assert structure(after) == ["Neg", "MatMulBiasAdd"]
    fused = after.outputs[0].producer
    assert fused.name == "z" and fused.inputs[3].producer.name == "r"
    assert results[1].notes == ["fused 1 MatMulBiasAdd+Add (a residual of the product's "
                                "shape) into MatMulBiasAdd"]


@pytest.mark.parametrize("activation", ["Relu", "Gelu"])
def test_an_activation_after_the_residual_add_is_fused_after_it(activation):
    after, _ = rewrite(skip(after=activation), MatMulBiasFusionPass(),
                       MatMulResidualFusionPass())
    expected = "relu" if activation == "Relu" else "gelu"
    assert structure(after, "activation") == ["Neg", f"MatMulBiasAdd(activation={expected!r})"]
    assert len(after.outputs[0].producer.inputs) == 4


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"residual_shape": (2, 1, 5)}, "not the same shape"),
    ({"residual_shape": (5,)}, "not the same shape"),
    ({"before": "Relu"}, ""),  # the Add follows an activation: the pattern does not match
])
def test_residual_refusals(kwargs, reason):
    before = skip(**kwargs)
    fusion = MatMulResidualFusionPass()
    after, (_, result) = rewrite(before, MatMulBiasFusionPass(), fusion)
    assert "Add" in structure(after) and not result.changed
    if reason:
        assert any(reason in r for r in refusals(fusion)), refusals(fusion)


def test_a_product_added_to_itself_is_refused():
    graph = ge.Graph("twice")
    x = data(graph, "x", (2, 3, 4))
    product = op(graph, "MatMulBiasAdd", [x, const(graph, "w", RNG.standard_normal((4, 5))),
                                          const(graph, "b", RNG.standard_normal(5))], "y")
    graph.set_outputs([op(graph, "Add", [product, product], "z")])
    fusion = MatMulResidualFusionPass()
    after, (result,) = rewrite(graph, fusion)
    assert structure(after) == ["MatMulBiasAdd", "Add"] and not result.changed


def test_compile_fuses_a_post_norm_encoder_layers_residuals():
    """ge.compile at its default level: each skip connection of a post-norm layer (the
    attention's output projection and the feed-forward's second product) is added by its
    product, and the result is what the unoptimized graph computes."""
    graph = ge.Graph("layer")
    x = data(graph, "x", (2, 8, 16))
    dense_ = lambda name, source, n: op(  # noqa: E731
        graph, "Add", [op(graph, "MatMul", [source, const(graph, f"{name}_w",
                                                           RNG.standard_normal((16, n)) * .3)],
                          f"{name}_mm"), const(graph, f"{name}_b", RNG.standard_normal(n))],
        name)
    norm = lambda name, source: op(  # noqa: E731
        graph, "LayerNormalization", [source, const(graph, f"{name}_g", np.ones(16)),
                                      const(graph, f"{name}_s", np.zeros(16))], name, axis=-1)
    h = norm("ln1", op(graph, "Add", [x, dense_("proj", x, 16)], "skip1"))
    inner = op(graph, "Relu", [dense_("up", h, 32)], "act")
    down = op(graph, "Add", [op(graph, "MatMul", [inner, const(
        graph, "down_w", RNG.standard_normal((32, 16)) * .3)], "down_mm"),
        const(graph, "down_b", RNG.standard_normal(16))], "down")
    graph.set_outputs([norm("ln2", op(graph, "Add", [h, down], "skip2"))])
    executable = ge.compile(graph)
    kinds = [n.op_type for n in executable.graph.nodes if n.op_type not in ("Data", "Const")]
    assert kinds.count("MatMulBiasAdd") == 3 and "Add" not in kinds, kinds
    residuals = [n for n in executable.graph.nodes
                 if n.op_type == "MatMulBiasAdd" and len(n.inputs) > 3]
    assert len(residuals) == 2
    (entry,) = [e for e in executable.report["passes"]
                if e["pass"] == "MatMulResidualFusionPass"]
    assert entry["counts"] == {"MatMulBiasAddResidualFusion": 2}
    feeds = feeds_for(graph)
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)["ln2"]
    assert_close(ge.Session(executable).run(feeds)["ln2"], want, accumulate=True)


# -- GELU -------------------------------------------------------------------------------

def erf_gelu(form: str, scale: float = math.sqrt(2.0)) -> ge.Graph:
    """x * 0.5 * (1 + erf(x / sqrt 2)) in the groupings exporters write."""
    graph = ge.Graph("gelu")
    x = data(graph, "x", (2, 8))
    if form == "mul 0.7071":
        scaled = op(graph, "Mul", [const(graph, "c", 1 / scale), x], "scaled")
    else:
        scaled = op(graph, "Div", [x, const(graph, "c", scale)], "scaled")
    term = op(graph, "Add", [op(graph, "Erf", [scaled], "erf"), const(graph, "one", 1.0)], "term")
    half = const(graph, "half", 0.5)
    if form in ("torch", "mul 0.7071"):  # (x * (1 + erf)) * 0.5
        y = op(graph, "Mul", [op(graph, "Mul", [x, term], "xt"), half], "y")
    elif form == "hugging face":  # (x * 0.5) * (1 + erf)
        y = op(graph, "Mul", [op(graph, "Mul", [half, x], "hx"), term], "y")
    else:  # x * ((1 + erf) * 0.5)
        y = op(graph, "Mul", [op(graph, "Mul", [term, half], "ht"), x], "y")
    graph.set_outputs([y])
    return graph


def tanh_gelu(cube: str) -> ge.Graph:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), torch's arrangement."""
    graph = ge.Graph("gelu_tanh")
    x = data(graph, "x", (2, 8))
    if cube == "pow":
        cubed = op(graph, "Pow", [x, const(graph, "three", 3.0)], "cube")
    else:
        cubed = op(graph, "Mul", [x, op(graph, "Mul", [x, x], "square")], "cube")
    inner = op(graph, "Add", [x, op(graph, "Mul", [const(graph, "k", 0.044715), cubed], "kc")],
               "inner")
    scaled = op(graph, "Mul", [inner, const(graph, "s", math.sqrt(2 / math.pi))], "scaled")
    term = op(graph, "Add", [const(graph, "one", 1.0), op(graph, "Tanh", [scaled], "tanh")],
              "term")
    half = op(graph, "Mul", [x, const(graph, "half", 0.5)], "hx")
    graph.set_outputs([op(graph, "Mul", [half, term], "y")])
    return graph


@pytest.mark.parametrize("form", ["torch", "hugging face", "grouped", "mul 0.7071"])
def test_erf_gelu_arrangements_become_gelu(form):
    before = erf_gelu(form)
    after, (result,) = rewrite(before, GeluFusionPass())
    assert len(structure(before)) == 5
    assert structure(after, "approximate") == ["Gelu(approximate='none')"]
    assert after.outputs[0].producer.name == "y"
    assert "into Gelu" in result.describe()


@pytest.mark.parametrize("cube", ["pow", "x*x*x"])
def test_tanh_gelu_becomes_gelu_tanh(cube):
    after, _ = rewrite(tanh_gelu(cube), GeluFusionPass())
    assert structure(after, "approximate") == ["Gelu(approximate='tanh')"]


def test_gelu_with_a_wrong_constant_is_refused_with_the_reason():
    fusion = GeluFusionPass()
    after, (result,) = rewrite(erf_gelu("torch", scale=1.5), fusion)
    assert not result.changed and "Gelu" not in structure(after)
    assert "the erf_scale constant is 1.5, not 1.414214" in refusals(fusion)


def test_gelu_whose_terms_read_different_tensors_is_refused():
    graph = erf_gelu("torch")
    other = data(graph, "other", (2, 8))
    graph.node("xt").replace_input_with(0, other.outputs[0])
    fusion = GeluFusionPass()
    after, (result,) = rewrite(graph, fusion)
    assert not result.changed
    assert any("reads 'x', not 'other'" in r for r in refusals(fusion))


def test_gelu_after_matmul_bias_add_becomes_its_activation():
    before = dense()
    x = before.node("y").outputs[0]  # torch's GELU on the dense layer's output
    scaled = op(before, "Div", [x, const(before, "c", math.sqrt(2))], "scaled")
    term = op(before, "Add", [op(before, "Erf", [scaled], "erf"), const(before, "one", 1.0)], "t")
    xt = op(before, "Mul", [x, term], "xt")
    before.set_outputs([op(before, "Mul", [xt, const(before, "half", 0.5)], "gelu")])
    assert structure(before) == ["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"]
    after, _ = rewrite(before, MatMulBiasFusionPass(), GeluFusionPass())
    assert structure(after, "activation") == ["MatMulBiasAdd(activation='gelu')"]


# -- SiLU -------------------------------------------------------------------------------

@pytest.mark.parametrize("sigmoid_first", [False, True])
def test_x_times_its_sigmoid_becomes_swish(sigmoid_first):
    graph = ge.Graph("silu")
    x = data(graph, "x", (2, 3, 8))
    sigmoid = op(graph, "Sigmoid", [x], "sigmoid")
    graph.set_outputs([op(graph, "Mul", [sigmoid, x] if sigmoid_first else [x, sigmoid], "y")])
    after, (result,) = rewrite(graph, SiluFusionPass())
    assert structure(after, "alpha") == ["Swish(alpha=1.0)"]
    assert after.outputs[0].producer.name == "y"
    assert "into Swish (SiLU)" in result.describe()


def test_silu_is_refused_when_the_sigmoid_reads_another_tensor_or_is_read_again():
    graph = ge.Graph("not silu")
    x, other = data(graph, "x", (2, 8)), data(graph, "other", (2, 8))
    sigmoid = op(graph, "Sigmoid", [other], "sigmoid")
    product = op(graph, "Mul", [x, sigmoid], "y")
    graph.set_outputs([product])
    fusion = SiluFusionPass()
    after, (result,) = rewrite(graph, fusion)
    assert not result.changed
    assert any("reads 'other', not 'x'" in r or "reads 'x', not 'other'" in r
               for r in refusals(fusion))
    graph = ge.Graph("sigmoid read twice")
    x = data(graph, "x", (2, 8))
    sigmoid = op(graph, "Sigmoid", [x], "sigmoid")
    graph.set_outputs([op(graph, "Mul", [x, sigmoid], "y"), sigmoid])
    after, (result,) = rewrite(graph, SiluFusionPass())
    assert not result.changed and structure(after) == ["Sigmoid", "Mul"]


def test_silu_after_a_convolution_becomes_its_post_op():
    graph = ge.Graph("conv silu")
    x = data(graph, "x", (1, 6, 6, 4))
    weights = const(graph, "w", RNG.standard_normal((3, 3, 4, 5)) * 0.3)
    conv = op(graph, "Conv2D", [x, weights], "conv", data_format="NHWC", pads=[1, 1, 1, 1])
    graph.set_outputs([op(graph, "Mul", [conv, op(graph, "Sigmoid", [conv], "sigmoid")], "y")])
    after, _ = rewrite(graph, SiluFusionPass(), ConvFusionPass())
    assert structure(after, "activation") == ["FusedConv2D(activation='Swish')"]


# -- LayerNorm --------------------------------------------------------------------------

def layer_norm(square: str = "pow", affine: bool = True, axes: tuple = (-1, -1),
               reciprocal: bool = False, keepdims: int = 1) -> ge.Graph:
    """(x - mean) / sqrt(var + eps) * w + b, as torch exports it before opset 17."""
    graph = ge.Graph("layer_norm")
    x = data(graph, "x", (2, 3, 8))
    axes_mean = create_node("Const", [], {"value": ge.Tensor(np.array([axes[0]], np.int64))},
                            "axes_mean", graph)
    axes_var = create_node("Const", [], {"value": ge.Tensor(np.array([axes[1]], np.int64))},
                           "axes_var", graph)
    mean = op(graph, "ReduceMean", [x, axes_mean], "mean", keepdims=keepdims)
    centred = op(graph, "Sub", [x, mean], "centred")
    squared = (op(graph, "Pow", [centred, const(graph, "two", 2.0)], "square") if square == "pow"
               else op(graph, "Mul", [centred, centred], "square"))
    variance = op(graph, "ReduceMean", [squared, axes_var], "variance", keepdims=keepdims)
    deviation = op(graph, "Sqrt", [op(graph, "Add", [variance, const(graph, "eps", 1e-5)],
                                      "plus_eps")], "deviation")
    if reciprocal:
        y = op(graph, "Mul", [centred, op(graph, "Reciprocal", [deviation], "inv")], "normed")
    else:
        y = op(graph, "Div", [centred, deviation], "normed")
    if affine:
        y = op(graph, "Mul", [const(graph, "w", RNG.uniform(0.5, 1.5, 8)), y], "scaled")
        y = op(graph, "Add", [y, const(graph, "b", RNG.standard_normal(8))], "y")
    graph.set_outputs([y])
    return graph


@pytest.mark.parametrize(("square", "reciprocal"), [("pow", False), ("x*x", False),
                                                    ("pow", True)])
def test_decomposed_layer_norm_with_affine_becomes_one_layer_normalization(square, reciprocal):
    before = layer_norm(square, reciprocal=reciprocal)
    fusion = LayerNormFusionPass()
    after, (result,) = rewrite(before, fusion)
    assert len(structure(before)) == 10 if reciprocal else 9
    assert structure(after, "axis") == ["LayerNormalization(axis=2)"]
    norm = after.outputs[0].producer
    assert norm.attrs["epsilon"] == pytest.approx(1e-5)
    assert norm.name == "y" and len(norm.inputs) == 3
    np.testing.assert_allclose(ge.ops.registry.const_value(norm.inputs[1]),
                               ge.ops.registry.const_value(before.node("w").outputs[0]))
    assert "folded 1 scale" in result.describe() and "folded 1 bias" in result.describe()


def test_layer_norm_without_affine_gets_a_unit_scale():
    after, _ = rewrite(layer_norm(affine=False), LayerNormFusionPass())
    assert structure(after) == ["LayerNormalization"]
    assert after.outputs[0].producer.inputs[1].shape == (1,)


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"axes": (-1, 1)}, "the means do not both reduce the same trailing axes"),
    ({"axes": (1, 1)}, "the means do not both reduce the same trailing axes"),
])
def test_layer_norm_refusals(kwargs, reason):
    fusion = LayerNormFusionPass()
    after, (result,) = rewrite(layer_norm(**kwargs), fusion)
    assert "LayerNormalization" not in structure(after) and not result.changed
    assert any(reason in r for r in refusals(fusion))


# -- attention --------------------------------------------------------------------------

B, H, S, D = 2, 3, 5, 4


def attention(scaling: str = "Div", mask_shape: Optional[tuple] = (B, 1, 1, S),
              key_layout: str = "BHDS", axis: int = -1, scale: Any = 2.0) -> ge.Graph:
    """softmax(Q @ K^T / sqrt(D) + mask) @ V on 4-D [B, H, S, D] tensors."""
    graph = ge.Graph("attention")
    q, v = data(graph, "q", (B, H, S, D)), data(graph, "v", (B, H, S, D))
    if key_layout == "BHDS":  # K given, transposed by a Transpose
        k_t = op(graph, "Transpose", [data(graph, "k", (B, H, S, D))], "k_t", perm=[0, 1, 3, 2])
    else:  # K as [B, S, H, D], transposed straight to [B, H, D, S] (BERT's exports)
        k_t = op(graph, "Transpose", [data(graph, "k", (B, S, H, D))], "k_t", perm=[0, 2, 3, 1])
    scores = op(graph, "MatMul", [q, k_t], "scores")
    if scaling != "none":
        scores = op(graph, scaling, [scores, const(graph, "c", scale)], "scaled")
    if mask_shape is not None:
        mask = data(graph, "mask", mask_shape)
        scores = op(graph, "Add", [mask, scores], "masked")
    probs = op(graph, "Softmax", [scores], "probs", axis=axis)
    graph.set_outputs([op(graph, "MatMul", [probs, v], "context")])
    return graph


@pytest.mark.parametrize(("scaling", "expected_scale"), [("Div", 0.5), ("Mul", 2.0),
                                                         ("none", 1.0)])
def test_scaled_dot_product_attention_becomes_attention(scaling, expected_scale):
    before = attention(scaling)
    fusion = AttentionFusionPass()
    after, (result,) = rewrite(before, fusion)
    scaled = [] if scaling == "none" else [scaling]
    assert structure(before) == ["Transpose", "MatMul", *scaled, "Add", "Softmax", "MatMul"]
    assert structure(after, "scale") == [f"Attention(scale={expected_scale})"]
    node = after.outputs[0].producer
    assert [v.name for v in node.inputs] == ["q", "k", "v", "mask"]  # K^T's Transpose undone
    assert "into Attention" in result.describe()


def test_key_transposed_from_bshd_gets_one_composed_transpose():
    after, _ = rewrite(attention(key_layout="BSHD", mask_shape=None), AttentionFusionPass())
    assert structure(after, "perm") == ["Transpose(perm=[0, 2, 1, 3])", "Attention"]


def test_constants_scaling_q_and_k_fold_into_the_scale():
    graph = attention("none", mask_shape=None)
    scores = graph.node("scores")
    for index, name in ((0, "q"), (1, "k_t")):
        scaled = op(graph, "Mul", [scores.inputs[index], const(graph, f"root_{name}", 0.5)],
                    f"pre_{name}")
        scores.replace_input_with(index, scaled.outputs[0])
    after, _ = rewrite(graph, AttentionFusionPass())
    assert structure(after, "scale") == ["Attention(scale=0.25)"]


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"axis": 2}, "the Softmax normalizes axis 2, not the key axis"),
    ({"mask_shape": (B, 1, 1, 1)}, "is not known to span the key axis"),
    ({"scale": [1.0, 2.0, 3.0, 4.0, 5.0]}, "the scale is not one positive finite number"),
    ({"scale": -2.0}, "the scale is not one positive finite number"),
])
def test_attention_refusals(kwargs, reason):
    fusion = AttentionFusionPass()
    after, (result,) = rewrite(attention(**kwargs), fusion)
    assert "Attention" not in structure(after) and not result.changed
    assert any(reason in r for r in refusals(fusion)), refusals(fusion)


def test_attention_refuses_a_mask_that_could_enlarge_the_batch():
    # Attention's output has Q's batch; a mask whose batch may be larger (a name of its
    # own, as a feed that breaks an ONNX model's dim_param gives) must stay unfused
    fusion = AttentionFusionPass()
    graph = attention(mask_shape=("mask_batch", 1, 1, S))
    PassManager([fusion]).run(graph)
    assert "Attention" not in structure(graph)
    assert any("mask dimension 0 ('mask_batch') is not known to be 1 or Q's (2)" in r
               for r in refusals(fusion)), refusals(fusion)


def test_attention_whose_probabilities_are_also_an_output_is_refused():
    graph = attention()
    graph.set_outputs([graph.node("context"), graph.node("probs")])
    after, _ = rewrite(graph, AttentionFusionPass())
    assert "Attention" not in structure(after)


def bert_attention(merged_width: int = H * D) -> ge.Graph:
    """BERT's self-attention after shape folding: [B, S, H*D] tensors split into heads,
    attended, and merged back."""
    graph = ge.Graph("bert_attention")
    split = create_node("Const", [], {"value": ge.Tensor(np.array([0, 0, H, D], np.int64))},
                        "split", graph)
    merge = create_node("Const", [], {"value": ge.Tensor(np.array([0, 0, merged_width],
                                                                  np.int64))}, "merge", graph)
    heads = {}
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        x = data(graph, name, (B, S, H * D))
        heads[name] = op(graph, "Transpose", [op(graph, "Reshape", [x, split], f"{name}_4d")],
                         f"{name}_heads", perm=perm)
    scores = op(graph, "Div", [op(graph, "MatMul", [heads["q"], heads["k"]], "scores"),
                               const(graph, "c", math.sqrt(D))], "scaled")
    masked = op(graph, "Add", [scores, data(graph, "mask", (B, 1, 1, S))], "masked")
    context = op(graph, "MatMul", [op(graph, "Softmax", [masked], "probs"), heads["v"]], "ctx")
    merged = op(graph, "Transpose", [context], "ctx_t", perm=[0, 2, 1, 3])
    graph.set_outputs([op(graph, "Reshape", [merged, merge], "context")])
    return graph


def test_head_split_and_merge_fold_into_the_3d_attention():
    before = bert_attention()
    after, (result,) = rewrite(before, AttentionFusionPass())
    assert structure(before) == ["Reshape", "Transpose"] * 3 + [
        "MatMul", "Div", "Add", "Softmax", "MatMul", "Transpose", "Reshape"]
    assert structure(after, "q_num_heads", "kv_num_heads", "scale") == \
        [f"Attention(q_num_heads={H}, kv_num_heads={H}, scale=0.5)"]
    assert [v.name for v in after.outputs[0].producer.inputs] == ["q", "k", "v", "mask"]
    assert after.outputs[0].producer.name == "context"
    assert "head split and merge of 1 Attention" in result.describe()


# -- models from exporters --------------------------------------------------------------

def test_torch_exports_of_gelu_and_layer_norm_fuse():
    """What torch.onnx (opset 14) writes for nn.GELU, nn.GELU('tanh'), Hugging Face's
    gelu_new and a hand-written LayerNorm."""
    import torch

    class Block(torch.nn.Module):
        def forward(self, a, b, c, d):
            gelu = torch.nn.functional.gelu(a)
            tanh = torch.nn.functional.gelu(b, approximate="tanh")
            new = 0.5 * c * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                              (c + 0.044715 * torch.pow(c, 3.0))))
            mean = d.mean(-1, keepdim=True)
            variance = (d - mean).pow(2).mean(-1, keepdim=True)
            norm = (d - mean) / torch.sqrt(variance + 1e-6) * 1.5 + 0.25
            return gelu, tanh, new, norm

    buffer = io.BytesIO()
    inputs = tuple(torch.randn(2, 3, 8) for _ in range(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Block().eval(), inputs, buffer, opset_version=14, dynamo=False)
    graph = ge.parse_onnx(buffer.getvalue())
    after, _ = rewrite(graph, GeluFusionPass(), LayerNormFusionPass())
    assert sorted(structure(after, "approximate")) == [
        "Gelu(approximate='none')", "Gelu(approximate='tanh')", "Gelu(approximate='tanh')",
        "LayerNormalization"]


def test_zoo_bert_fuses_and_computes_the_same(tmp_path):
    from examples.zoo import example_feeds, export_onnx
    before = ge.parse_onnx(export_onnx("bert", tmp_path / "bert.onnx", opset=14))
    graph = before.clone()
    # shape folding first, as the pipeline does: it proves Q's batch is the mask's (the
    # attention fusion refuses a mask that could enlarge the scores)
    records = PassManager([ShapeFoldingPass(), *(p() for p in ALL)]).run(graph)
    feeds = example_feeds("bert", 1, 0)
    assert_close(evaluate(graph, feeds)["last_hidden_state"],
                 evaluate(before, feeds)["last_hidden_state"], accumulate=True)
    counts = {r.name: dict(r.result.counts) for r in records}
    assert counts["MatMulBiasFusionPass"] == {"MatMulAddFusion": 24}
    assert sum(counts["GeluFusionPass"].values()) == 8  # 4 Gelu, then 4 absorbed
    assert sum(counts["LayerNormFusionPass"].values()) == 27  # 9 norms, 9 scales, 9 biases
    assert counts["AttentionFusionPass"] == {"AttentionFusion[Div, masked]": 4,
                                             "AttentionHeadsFusion": 4}
    kinds = {node.op_type for node in graph.nodes}
    assert not kinds & {"Erf", "Softmax", "ReduceMean", "MatMul", "Sqrt", "Pow"}
