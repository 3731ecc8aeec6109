"""MatMul and Gemm against torch: shapes, 1-D promotion, batch broadcasting, transposes."""

from __future__ import annotations

import itertools
from typing import Any, Optional

import ml_dtypes
import numpy as np
import pytest
import torch

import ge
from ge.errors import AttrError, DTypeError, OpArgumentError, ShapeError
from ge.ops import create_node, node_cost
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(7)


def _random(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _torch(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def _inferred(op_type: str, shapes: list[Optional[list[Any]]], attrs: Optional[dict] = None,
              dtype: ge.DataType = ge.DataType.DT_FLOAT) -> tuple:
    """The output shape that inference gives for inputs of ``shapes`` (None: absent)."""
    inputs = [None if shape is None else
              create_node("Data", [], {"shape": shape, "dtype": dtype}, name=f"in{i}")
              for i, shape in enumerate(shapes)]
    return tuple(create_node(op_type, inputs, attrs or {}).shape)


# -- MatMul -----------------------------------------------------------------------------

SHAPES = [
    ((3, 4), (4, 5)),  # the seed's [N, K] @ [K, units]
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 5)),
    ((2, 1, 4, 5), (3, 5, 6)),
    ((4, 5), (2, 5, 6)),
    ((2, 3, 4), (4, 5)),
    ((1, 2, 3), (7, 1, 3, 2)),
    ((2, 0, 3), (3, 4)),
]


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
def test_matmul_matches_torch(a_shape: tuple, b_shape: tuple) -> None:
    a, b = _random(a_shape), _random(b_shape)
    (result,) = run_op("MatMul", {"a": a, "b": b})
    expected = torch.matmul(_torch(a), _torch(b)).numpy()
    assert_close(result, expected, accumulate=True, what=f"{a_shape} @ {b_shape}")


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
def test_matmul_shape_equals_numpy(a_shape: tuple, b_shape: tuple) -> None:
    expected = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    assert _inferred("MatMul", [list(a_shape), list(b_shape)]) == expected


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16])
def test_matmul_float_dtypes(dtype: Any) -> None:
    a, b = _random((2, 8, 16), dtype), _random((16, 4), dtype)
    (result,) = run_op("MatMul", {"a": a, "b": b})
    assert result.dtype == np.dtype(dtype)
    wide = torch.matmul(_torch(a.astype(np.float64)), _torch(b.astype(np.float64))).numpy()
    assert_close(result, wide.astype(dtype), accumulate=True)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_matmul_integers_are_exact(dtype: Any) -> None:
    a = RNG.integers(0, 4, (3, 5)).astype(dtype)
    b = RNG.integers(0, 4, (5, 2)).astype(dtype)
    (result,) = run_op("MatMul", {"a": a, "b": b})
    expected = torch.matmul(_torch(a.astype(np.int64)), _torch(b.astype(np.int64))).numpy()
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, expected.astype(dtype))


@pytest.mark.parametrize(("transpose_a", "transpose_b"),
                         list(itertools.product([False, True], [False, True])))
@pytest.mark.parametrize("batch", [(), (2,)])
def test_matmul_transposes(transpose_a: bool, transpose_b: bool, batch: tuple) -> None:
    a_shape = batch + ((5, 3) if transpose_a else (3, 5))
    b_shape = batch + ((4, 5) if transpose_b else (5, 4))
    a, b = _random(a_shape), _random(b_shape)
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    (result,) = run_op("MatMul", {"a": a, "b": b}, attrs)
    left = _torch(a).transpose(-1, -2) if transpose_a else _torch(a)
    right = _torch(b).transpose(-1, -2) if transpose_b else _torch(b)
    assert_close(result, torch.matmul(left, right).numpy(), accumulate=True)
    assert result.shape == batch + (3, 4)


def test_matmul_transpose_of_a_vector_is_the_vector() -> None:
    a, b = _random((5,)), _random((3, 5))
    (result,) = run_op("MatMul", {"a": a, "b": b}, {"transpose_a": True, "transpose_b": True})
    assert_close(result, torch.matmul(_torch(a), _torch(b).T).numpy(), accumulate=True)


def test_matmul_dynamic_inputs_run_and_infer_unknown_dims() -> None:
    a, b = _random((2, 3, 4)), _random((4, 5))
    graph = build_op_graph("MatMul", {"a": a, "b": b}, dynamic=["a"])
    assert tuple(graph.outputs[0].shape) == (-1, -1, 5)
    (result,) = run_op("MatMul", {"a": a, "b": b}, dynamic=["a", "b"])
    assert_close(result, torch.matmul(_torch(a), _torch(b)).numpy(), accumulate=True)


@pytest.mark.parametrize(("a_shape", "b_shape", "expected"), [
    (["batch", 4, 5], [5, 6], ("batch", 4, 6)),
    ([-1, 4, -1], [5, 6], (-1, 4, 6)),
    (["n", "k"], ["k", "m"], ("n", "m")),
    ([-1, 1, 4, 5], [3, 5, 6], (-1, 3, 4, 6)),
    ([2, -1, 4, 5], [-1, 5, 6], (2, -1, 4, 6)),
    ([-1], [-1, 7], (7,)),
])
def test_matmul_keeps_dynamic_dims(a_shape: list, b_shape: list, expected: tuple) -> None:
    assert _inferred("MatMul", [a_shape, b_shape]) == expected


@pytest.mark.parametrize(("a_shape", "b_shape", "match"), [
    ([3, 4], [5, 6], r"inner dimensions differ.*\[3,4\].*\[5,6\]"),
    ([4], [5], "inner dimensions differ"),
    ([2, 3, 4], [3, 4, 5], "batch dimensions do not broadcast"),
    ([], [3], "rank >= 1"),
])
def test_matmul_shape_errors(a_shape: list, b_shape: list, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        _inferred("MatMul", [a_shape, b_shape])


def test_matmul_errors_for_bad_dtypes_and_attributes() -> None:
    a, b = _random((2, 3)), _random((3, 2))
    with pytest.raises(DTypeError, match="share one dtype"):
        build_op_graph("MatMul", {"a": a, "b": b.astype(np.float64)})
    with pytest.raises(DTypeError):
        build_op_graph("MatMul", {"a": a > 0, "b": b > 0})
    with pytest.raises(AttrError, match="transpose_a"):
        build_op_graph("MatMul", {"a": a, "b": b}, {"transpose_a": "yes"})
    with pytest.raises(OpArgumentError, match="'transpose_a', 'transpose_b'"):
        build_op_graph("MatMul", {"a": a, "b": b}, {"adj_x": True})
    with pytest.raises(OpArgumentError, match="valid inputs: 'a', 'b'"):
        build_op_graph("MatMul", {"x1": a, "b": b})


def test_matmul_cost_counts_two_flops_per_multiply_add() -> None:
    graph = build_op_graph("MatMul", {"a": _random((2, 1, 4, 5)), "b": _random((3, 5, 6))})
    assert node_cost(graph.node("op")).flops == 2 * (2 * 3) * 4 * 6 * 5
    graph = build_op_graph("MatMul", {"a": _random((6, 4)), "b": _random((5, 6))},
                           {"transpose_a": True, "transpose_b": True})
    assert node_cost(graph.node("op")).flops == 2 * 4 * 5 * 6


# -- Gemm -------------------------------------------------------------------------------

C_SHAPES = [None, (), (1,), (4,), (3, 1), (1, 4), (3, 4)]


@pytest.mark.parametrize(("trans_a", "trans_b"), list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize("c_shape", C_SHAPES)
def test_gemm_matches_torch_addmm(trans_a: int, trans_b: int, c_shape: Optional[tuple]) -> None:
    m, k, n = 3, 5, 4
    a = _random((k, m) if trans_a else (m, k))
    b = _random((n, k) if trans_b else (k, n))
    alpha, beta = 0.75, -1.5
    attrs = {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}
    inputs = {"a": a, "b": b}
    left = _torch(a).T if trans_a else _torch(a)
    right = _torch(b).T if trans_b else _torch(b)
    if c_shape is None:
        expected = alpha * torch.mm(left, right)
    else:
        inputs["c"] = _random(c_shape)
        expected = torch.addmm(_torch(inputs["c"]), left, right, beta=beta, alpha=alpha)
    (result,) = run_op("Gemm", inputs, attrs)
    assert_close(result, expected.numpy(), accumulate=True)


def test_gemm_defaults_and_float16() -> None:
    a, b, c = (_random(s, np.float16) for s in [(3, 8), (8, 2), (2,)])
    (result,) = run_op("Gemm", {"a": a, "b": b, "c": c})
    wide = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    assert result.dtype == np.float16
    assert_close(result, wide.astype(np.float16), accumulate=True)


def test_gemm_integers() -> None:
    a = RNG.integers(-3, 4, (2, 3)).astype(np.int32)
    b = RNG.integers(-3, 4, (3, 4)).astype(np.int32)
    c = RNG.integers(-3, 4, (4,)).astype(np.int32)
    (result,) = run_op("Gemm", {"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(result, a.astype(np.int64) @ b + c)
    assert result.dtype == np.int32


def test_gemm_dynamic_dims() -> None:
    assert _inferred("Gemm", [["n", 5], [5, 4], [4]]) == ("n", 4)
    assert _inferred("Gemm", [[-1, 5], [5, -1], [3, 4]]) == (3, 4)
    assert _inferred("Gemm", [[5, -1], [4, 5], None], {"transA": 1, "transB": 1}) == (-1, 4)
    a, b, c = _random((3, 5)), _random((5, 4)), _random((3, 4))
    (result,) = run_op("Gemm", {"a": a, "b": b, "c": c}, dynamic=["a", "c"])
    assert_close(result, a @ b + c, accumulate=True)


@pytest.mark.parametrize(("shapes", "attrs", "match"), [
    ([[3, 5], [5, 4], [5]], {}, "does not broadcast"),
    ([[3, 5], [5, 4], [2, 4]], {}, "does not broadcast"),
    ([[3, 5], [5, 4], [1, 3, 4]], {}, "rank > 2"),
    ([[3, 5], [4, 5], None], {}, "inner dimensions differ"),
    ([[2, 3, 5], [5, 4], None], {}, "rank 2"),
])
def test_gemm_shape_errors(shapes: list, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        _inferred("Gemm", shapes, attrs)


def test_gemm_attribute_errors() -> None:
    a, b = _random((3, 5)), _random((5, 4))
    with pytest.raises(AttrError, match="transA"):
        build_op_graph("Gemm", {"a": a, "b": b}, {"transA": 2})
    with pytest.raises(AttrError, match="alpha"):
        build_op_graph("Gemm", {"a": a, "b": b}, {"alpha": "big"})
    with pytest.raises(DTypeError):
        build_op_graph("Gemm", {"a": a, "b": b, "c": np.zeros(4, np.float64)})


def test_gemm_cost() -> None:
    graph = build_op_graph("Gemm", {"a": _random((3, 5)), "b": _random((5, 4)),
                                    "c": _random((4,))})
    assert node_cost(graph.node("op")).flops == 2 * 3 * 4 * 5 + 2 * 3 * 4
