"""MatMulBiasAdd against torch (linear + residual + activation), its inference, cost and
decomposition, and the fast erf-form GELU against math.erfc."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

import ge
import ge.ops.fused_matmul  # noqa: F401 - registers MatMulBiasAdd
from ge.errors import AttrError, DTypeError, ShapeError
from ge.ops import create_node, evaluate, node_cost
from ge.ops.fused_matmul import decompose_matmul_bias_add, gelu_erf, gelu_tanh
from tests.op_harness import run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)

TORCH_ACTIVATIONS = {
    "none": lambda t: t,
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
}


def _random(shape: tuple, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _torch_reference(a: np.ndarray, b: np.ndarray, bias: np.ndarray, activation: str,
                     transpose_b: bool = False, residual: Any = None) -> np.ndarray:
    a_t, b_t = torch.from_numpy(a.astype(np.float64)), torch.from_numpy(b.astype(np.float64))
    if transpose_b:
        b_t = b_t.transpose(-1, -2)
    y = torch.matmul(a_t, b_t) + torch.from_numpy(bias.astype(np.float64))
    if residual is not None:
        y = y + torch.from_numpy(residual.astype(np.float64))
    return TORCH_ACTIVATIONS[activation](y).numpy()


@pytest.mark.parametrize("activation", sorted(TORCH_ACTIVATIONS))
@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                                                  ((2, 3, 4), (2, 4, 5)), ((4,), (4, 5))])
def test_matmul_bias_add_matches_torch(activation, a_shape, b_shape):
    a, b, bias = _random(a_shape), _random(b_shape), _random((b_shape[-1],))
    (y,) = run_op("MatMulBiasAdd", {"a": a, "b": b, "bias": bias}, {"activation": activation},
                  const=["b", "bias"])
    assert_close(y, _torch_reference(a, b, bias, activation).astype(np.float32),
                 accumulate=True)


@pytest.mark.parametrize("activation", sorted(TORCH_ACTIVATIONS))
@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 4), (4, 5)), ((2, 3, 4), (4, 5))])
def test_residual_is_added_before_the_activation(activation, a_shape, b_shape):
    a, b, bias = _random(a_shape), _random(b_shape), _random((b_shape[-1],))
    residual = _random((*a_shape[:-1], b_shape[-1]))
    (y,) = run_op("MatMulBiasAdd", {"a": a, "b": b, "bias": bias, "residual": residual},
                  {"activation": activation}, const=["b", "bias"])
    expected = _torch_reference(a, b, bias, activation, residual=residual)
    assert_close(y, expected.astype(np.float32), accumulate=True)


def test_transpose_b_and_a_size_one_bias():
    a, b, bias = _random((3, 4)), _random((5, 4)), _random((1,))
    (y,) = run_op("MatMulBiasAdd", {"a": a, "b": b, "bias": bias}, {"transpose_b": True})
    assert_close(y, _torch_reference(a, b, bias, "none", transpose_b=True).astype(np.float32),
                 accumulate=True)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_other_float_types_keep_their_dtype(dtype):
    a, b, bias = _random((3, 8), dtype), _random((8, 4), dtype), _random((4,), dtype)
    (y,) = run_op("MatMulBiasAdd", {"a": a, "b": b, "bias": bias}, {"activation": "gelu"})
    assert y.dtype == np.dtype(dtype)
    expected = _torch_reference(a, b, bias, "gelu").astype(dtype)
    assert_close(y, expected, accumulate=True)


@pytest.mark.parametrize(("shapes", "attrs", "error", "words"), [
    (((3, 4), (4, 5), (4,)), {}, ShapeError, "bias has 4 elements"),
    (((3, 4), (4, 5), (1, 5)), {}, ShapeError, "must have rank 1"),
    (((3, 4), (5, 5), (5,)), {}, ShapeError, "inner dimensions differ"),
    (((4,), (4,), (1,)), {}, ShapeError, "is a scalar"),
    (((3, 4), (4, 5), (5,)), {"activation": "swish"}, AttrError, "activation"),
    (((3, 4), (4, 5), (5,), (1, 5)), {}, ShapeError, "no broadcasting"),
    (((3, 4), (4, 5), (5,), (5,)), {}, ShapeError, r"residual has shape \[5\]"),
])
def test_inference_refuses_bad_inputs(shapes, attrs, error, words):
    inputs = [create_node("Data", [], {"shape": list(s)}, name=f"in{i}")
              for i, s in enumerate(shapes)]
    with pytest.raises(error, match=words):
        create_node("MatMulBiasAdd", inputs, attrs)


def test_a_residual_of_another_dtype_is_refused():
    inputs = [create_node("Data", [], {"shape": s}, name=f"in{n}")
              for n, s in enumerate(([3, 4], [4, 5], [5]))]
    wide = create_node("Data", [], {"shape": [3, 5], "dtype": ge.DataType.DT_DOUBLE}, name="r")
    with pytest.raises(DTypeError, match="residual has dtype"):
        create_node("MatMulBiasAdd", [*inputs, wide])


def test_gelu_needs_floats_and_operands_one_dtype():
    ints = [create_node("Data", [], {"shape": s, "dtype": ge.DataType.DT_INT32}, name=f"i{n}")
            for n, s in enumerate(([3, 4], [4, 5], [5]))]
    assert create_node("MatMulBiasAdd", ints, {"activation": "relu"}).dtype is \
        ge.DataType.DT_INT32
    with pytest.raises(DTypeError):
        create_node("MatMulBiasAdd", ints, {"activation": "gelu"})
    mixed = [create_node("Data", [], {"shape": [3, 4]}), create_node("Data", [], {"shape": [4, 5]}),
             ints[2]]
    with pytest.raises(DTypeError):
        create_node("MatMulBiasAdd", mixed)


def test_cost_counts_the_product_the_bias_and_the_activation():
    inputs = [create_node("Data", [], {"shape": s}, name=f"in{n}")
              for n, s in enumerate(([2, 3, 4], [4, 5], [5]))]
    plain = node_cost(create_node("MatMulBiasAdd", inputs))
    with_gelu = node_cost(create_node("MatMulBiasAdd", inputs, {"activation": "gelu"}))
    assert plain.flops == 2 * 3 * 5 * (2 * 4 + 1)
    assert with_gelu.flops > plain.flops
    assert plain.bytes == 4 * (24 + 20 + 5 + 30)
    residual = create_node("Data", [], {"shape": [2, 3, 5]}, name="r")
    with_residual = node_cost(create_node("MatMulBiasAdd", [*inputs, residual]))
    assert with_residual.flops == plain.flops + 2 * 3 * 5
    assert with_residual.bytes == plain.bytes + 4 * 30


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh"])
def test_decomposition_computes_the_same(activation, residual):
    graph = ge.Graph("fused")
    x = create_node("Data", [], {"shape": [2, 3, 4]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(_random((4, 5)))}, "w", graph)
    b = create_node("Const", [], {"value": ge.Tensor(_random((5,)))}, "b", graph)
    inputs = [x, w, b]
    feeds = {"x": _random((2, 3, 4))}
    if residual:
        inputs.append(create_node("Data", [], {"shape": [2, 3, 5]}, "r", graph))
        feeds["r"] = _random((2, 3, 5))
    fused = create_node("MatMulBiasAdd", inputs, {"activation": activation}, "dense", graph)
    graph.set_outputs([fused])
    expected = evaluate(graph, feeds)["dense"]
    replacement = decompose_matmul_bias_add(fused, graph)
    fused.outputs[0].replace_all_uses_with(replacement)
    graph.remove_node(fused)
    graph.validate()
    kinds = [n.op_type for n in graph.topological_order() if n.op_type not in ("Data", "Const")]
    tail = {"none": [], "relu": ["Relu"], "gelu": ["Gelu"], "gelu_tanh": ["Gelu"]}[activation]
    assert kinds == ["MatMul", "Add", *(["Add"] if residual else []), *tail]
    assert_close(next(iter(evaluate(graph, feeds).values())), expected, accumulate=True)


# -- the GELU kernels -------------------------------------------------------------------

def _exact_gelu(x: np.ndarray) -> np.ndarray:
    return np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])


def test_fast_erf_gelu_is_float32_accurate_over_the_whole_range():
    x = np.concatenate([np.linspace(-12, 12, 4001), RNG.standard_normal(2000) * 3]
                       ).astype(np.float32)
    got, exact = gelu_erf(x).astype(np.float64), _exact_gelu(x)
    error = np.abs(got - exact)
    assert np.all(error <= 4e-7 * np.maximum(np.abs(x), 1.0))  # the body
    tail = np.abs(exact) > 1e-30
    assert np.all(error[tail] <= 2e-5 * np.abs(exact[tail]))  # the negative tail, relatively
    assert gelu_erf(np.array([np.inf, -np.inf], np.float32)).tolist() == [np.inf, 0.0]


def test_float64_gelu_uses_the_float64_erf_and_tanh_form_matches_torch():
    x = RNG.standard_normal(500) * 4
    np.testing.assert_allclose(gelu_erf(x), _exact_gelu(x), rtol=1e-12, atol=1e-15)
    expected = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(gelu_tanh(x), expected, rtol=1e-12, atol=1e-15)
