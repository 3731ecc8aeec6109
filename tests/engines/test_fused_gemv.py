"""The matrix-vector kernel: one row times a constant matrix, on oneDNN's OpenMP threads,
against float64 NumPy written here and against oneDNN's own matmul (the engine's path
for more rows); and its use by the oneDNN engine for single rows."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines.fused import gemv
from ge.ops import create_node
from ge.runtime.threads import limited
from tests.engines.test_onednn_engine import _f32
from tests.tolerance import assert_close


def _reference(x: np.ndarray, matrix: np.ndarray, bias: Optional[np.ndarray],
               residual: Optional[np.ndarray], activation: str) -> np.ndarray:
    z = x.astype(np.float64) @ matrix.astype(np.float64)
    if bias is not None:
        z = z + bias
    if residual is not None:
        z = z + residual
    if activation == "relu":
        return np.maximum(z, 0)
    if activation == "gelu":
        return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    if activation == "gelu_tanh":
        return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    return z


def test_the_kernel_is_available_where_numba_and_onednn_are() -> None:
    assert gemv.available()


@pytest.mark.parametrize("depth,columns", [(1, 1), (3, 5), (64, 1000), (300, 77),
                                           (1536, 384)])
@pytest.mark.parametrize("activation", sorted(gemv.ACTIVATIONS))
def test_one_row_times_a_matrix(depth: int, columns: int, activation: str) -> None:
    matrix, bias, x = _f32(depth, columns), _f32(columns), _f32(depth)
    product = gemv.MatrixVector(matrix, bias, activation)
    out = np.full(columns, np.nan, np.float32)
    product.run(x, out)
    assert_close(out, _reference(x, matrix, bias, None, activation), accumulate=True)


def test_a_transposed_matrix_a_residual_and_a_bias_given_at_each_call() -> None:
    stored = _f32(96, 200)  # [N, K]: the product reads its transpose
    product = gemv.MatrixVector(stored.T, None, "none")
    x, out = _f32(200), np.empty(96, np.float32)
    for seed in range(3):  # new values in the same arrays: the addresses are reused
        x[...] = _f32(200) * (seed + 1)
        bias, residual = _f32(96) * seed, _f32(96) + seed
        product.run(x, out, bias, residual)
        assert_close(out, _reference(x, stored.T, bias, residual, "none"), accumulate=True)


def test_the_residual_may_be_the_output_itself() -> None:
    matrix, x = _f32(128, 64), _f32(128)
    out = _f32(64)
    residual = out.copy()
    gemv.MatrixVector(matrix, None, "relu").run(x, out, residual=out)
    assert_close(out, _reference(x, matrix, None, residual, "relu"), accumulate=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_run_s_thread_limit_gives_the_same_values(threads: int) -> None:
    """Each column is one thread's sum over the whole row, whatever the thread count."""
    matrix, x = _f32(500, 333), _f32(500)
    product = gemv.MatrixVector(matrix)
    alone, shared = np.empty(333, np.float32), np.empty(333, np.float32)
    with limited(1):
        product.run(x, alone)
    with limited(threads):
        product.run(x, shared)
    np.testing.assert_array_equal(alone, shared)


def _layer(op_type: str, rows: int, dynamic: bool) -> tuple[ge.Graph, dict[str, np.ndarray]]:
    """x -> the product (constant weight; MatMulBiasAdd with a fed bias, a residual and
    GELU) -> Neg: the product's output lives in the arena."""
    graph = ge.Graph("layer")
    shape = [-1, 256] if dynamic else [rows, 256]
    x = create_node("Data", [], {"shape": shape}, "x", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(256, 192))}, "w", graph)
    feeds = {"x": _f32(rows, 256)}
    inputs: list[Any] = [x, weight]
    attrs: dict[str, Any] = {}
    if op_type == "MatMulBiasAdd":
        inputs.append(create_node("Data", [], {"shape": [192]}, "bias", graph))
        inputs.append(create_node("Data", [], {"shape": [rows, 192]}, "residual", graph))
        feeds.update(bias=_f32(192), residual=_f32(rows, 192))
        attrs["activation"] = "gelu"
    elif op_type == "Gemm":
        inputs.append(create_node("Const", [], {"value": ge.Tensor(_f32(192))}, "c", graph))
        attrs.update(beta=0.5)
    product = create_node(op_type, inputs, attrs, "p", graph)
    graph.set_outputs([create_node("Neg", [product], {}, "op", graph)])
    return graph, feeds


@pytest.mark.parametrize("op_type", ["MatMul", "Gemm", "MatMulBiasAdd"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_the_onednn_engine_runs_single_rows_on_the_kernel(op_type: str, dynamic: bool,
                                                          monkeypatch) -> None:
    calls: list[int] = []
    run = gemv.MatrixVector.run

    def counted(self: gemv.MatrixVector, *args: Any) -> None:
        calls.append(self.columns)
        run(self, *args)

    monkeypatch.setattr(gemv.MatrixVector, "run", counted)
    for rows in (1, 3):
        graph, feeds = _layer(op_type, rows, dynamic)
        executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
        assert executable.report["engines_by_op"]["onednn"] == {op_type: 1}
        session = ge.Session(executable)
        reference = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"]))
        calls.clear()
        for seed in range(3):
            for value in feeds.values():
                value[...] = _f32(*value.shape) * (seed + 1)
            assert_close(session.run(feeds)["op"], reference.run(feeds)["op"],
                         accumulate=True, what=f"{op_type}, {rows} rows")
        assert calls == ([192] * 3 if rows == 1 else [])
    assert "'p'" in gemv.table()


def test_without_the_kernel_single_rows_stay_on_onednn_s_matmul(monkeypatch) -> None:
    monkeypatch.setenv(gemv.VARIABLE, "0")
    assert not gemv.available()
    graph, feeds = _layer("MatMul", 1, False)
    made: list[Any] = []
    monkeypatch.setattr(gemv, "MatrixVector", lambda *args: made.append(args))
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    reference = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"]))
    assert_close(session.run(feeds)["op"], reference.run(feeds)["op"], accumulate=True)
    assert not made
