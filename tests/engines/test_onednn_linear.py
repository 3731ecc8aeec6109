"""The oneDNN engine's matrix products: each MatMul, MatMulBiasAdd and Gemm it takes
agrees with the NumPy engine (an independent reference), in the arena, from its cached
primitive; the small and the unsupported stay with the next engine."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ge
from ge.engines.onednn import _lib
from ge.engines.onednn.linear import SMALL_PRODUCT_MACS
from ge.ops import create_node
from tests.engines.test_onednn_engine import _f32, _reference, check_on_onednn, declined
from tests.tolerance import assert_close


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (96,), (1, 96), ()])
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_gemm_with_a_constant_weight(trans_b, c_shape, beta):
    b = _f32(96, 80) if trans_b else _f32(80, 96)
    arrays: list[Any] = [_f32(24, 80), b]
    const = [1]
    if c_shape is not None:
        arrays.append(_f32(*c_shape))
        const.append(2)
    check_on_onednn("Gemm", arrays, {"transB": trans_b, "beta": beta}, const=const)


@pytest.mark.parametrize("shape", [(64, 96), (2, 32, 96), (2, 3, 8, 96)])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_of_rows_by_a_constant_weight(shape, transpose_b):
    weight = _f32(72, 96) if transpose_b else _f32(96, 72)
    check_on_onednn("MatMul", [_f32(*shape), weight], {"transpose_b": transpose_b},
                    const=(1,))


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("bias_constant", [True, False])
def test_matmul_bias_add_with_each_activation(activation, bias_constant):
    arrays = [_f32(2, 40, 64), _f32(64, 128), _f32(128)]
    check_on_onednn("MatMulBiasAdd", arrays, {"activation": activation},
                    const=(1, 2) if bias_constant else (1,))


@pytest.mark.parametrize("activation", ["none", "relu", "gelu"])
def test_matmul_bias_add_with_a_residual_read_where_it_lies(activation):
    """A residual fed to the graph is never overwritten: a binary post-op reads it."""
    arrays = [_f32(2, 40, 64), _f32(64, 128), _f32(128), _f32(2, 40, 128)]
    check_on_onednn("MatMulBiasAdd", arrays, {"activation": activation}, const=(1, 2))


def _skip_block(refused: bool = False) -> ge.Graph:
    """x -> Relu (the residual, read by nothing else) -> MatMulBiasAdd(x, W, b, residual)
    -> Neg: the plan may write the product over the residual, which dies there."""
    graph = ge.Graph("skip")
    x = create_node("Data", [], {"shape": [2, 40, 64]}, "x", graph)
    skip = create_node("Relu", [create_node("Neg", [x], {}, "n", graph)], {}, "skip", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(64, 64))}, "w", graph)
    bias = create_node("Const", [], {"value": ge.Tensor(_f32(64))}, "b", graph)
    product = create_node("MatMulBiasAdd", [x, weight, bias, skip], {"activation": "relu"},
                          "product", graph)
    graph.set_outputs([create_node("Neg", [product], {}, "op", graph)])
    return graph


@pytest.mark.parametrize("refused", [False, True])
def test_a_residual_that_dies_is_summed_in_place(refused, monkeypatch):
    """The plan writes the product over the residual; the kernel adds what it finds there
    (a sum post-op), the same bits as reading it from elsewhere; where oneDNN refuses,
    the next engine gets a copy of it."""
    graph, feed = _skip_block(), {"x": _f32(2, 40, 64)}
    apart = ge.graphpass.MemoryPass()
    apart.enable_inplace(False)
    separate = ge.compile(apart.run(graph), opt_level=0, engines=["onednn", "numpy"])
    assert not separate.memory["inplace_count"]
    want = ge.Session(separate).run(feed)["op"]
    if refused:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ge.errors.UnsupportedOpError("refused (test)")

        monkeypatch.setattr(_lib, "matmul", refuse)
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"]["onednn"] == {"MatMulBiasAdd": 1}
    session = ge.Session(executable)
    got = session.run(feed)["op"]
    index = next(i for i, step in enumerate(executable.steps) if step.node == "product")
    assert index in session._program.plan_for({"x": (2, 40, 64)}).memory.inplace
    assert_close(got, _reference(graph, feed), accumulate=True)
    for _ in range(3):  # the cached primitive, and the straight-line runner
        np.testing.assert_array_equal(session.run(feed)["op"], got)
    if not refused:
        np.testing.assert_array_equal(got, want)


def test_a_residual_that_is_also_the_rows_is_not_overwritten():
    graph = ge.Graph("self")
    x = create_node("Data", [], {"shape": [64, 64]}, "x", graph)
    rows = create_node("Relu", [x], {}, "rows", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(64, 64))}, "w", graph)
    bias = create_node("Const", [], {"value": ge.Tensor(_f32(64))}, "b", graph)
    graph.set_outputs([create_node("MatMulBiasAdd", [rows, weight, bias, rows], {}, "op",
                                   graph)])
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"]["onednn"] == {"MatMulBiasAdd": 1}
    session = ge.Session(executable)
    feed = {"x": _f32(64, 64)}
    assert_close(session.run(feed)["op"], _reference(graph, feed), accumulate=True)
    assert not session._program.plan_for({"x": (64, 64)}).memory.inplace


def test_a_bias_of_one_value_fed_at_run_time_broadcasts():
    arrays = [_f32(64, 64), _f32(64, 96), _f32(1)]
    check_on_onednn("MatMulBiasAdd", arrays, {"activation": "relu"}, const=(1,))


@pytest.mark.parametrize("a_shape,b_shape,transpose_b", [
    ((4, 64, 32), (4, 32, 64), False),        # attention's P @ V
    ((2, 4, 64, 32), (2, 4, 64, 32), True),   # Q @ K^T, K read through its strides
    ((2, 4, 64, 32), (1, 4, 32, 48), False),  # a batch dim of 1 broadcasts
    ((3, 64, 32), (2, 1, 32, 40), False),     # ranks differ: leading axes of 1
    ((96, 64), (64, 80), False),              # two computed matrices
])
def test_batched_matmul_of_two_computed_operands(a_shape, b_shape, transpose_b):
    check_on_onednn("MatMul", [_f32(*a_shape), _f32(*b_shape)], {"transpose_b": transpose_b})


def test_products_the_engine_declines():
    weight = _f32(64, 64)
    assert declined("MatMul", [_f32(4, 8), _f32(8, 4)], {}, const=(1,))  # too small
    assert 4 * 8 * 4 < SMALL_PRODUCT_MACS
    assert declined("MatMul", [_f32(64), weight], {}, const=(1,))  # a vector
    assert declined("MatMul", [_f32(64, 64), weight], {"transpose_a": True}, const=(1,))
    assert declined("MatMul", [_f32(64, 64).astype(np.float64), weight.astype(np.float64)],
                    {}, const=(1,))
    assert declined("Gemm", [_f32(64, 64), weight], {"alpha": 2.0}, const=(1,))
    assert declined("Gemm", [_f32(64, 64), weight, _f32(64, 64)], {}, const=(1, 2))
    assert declined("Gemm", [_f32(64, 64), weight, _f32(64)], {}, const=(1,))
    assert declined("MatMulBiasAdd", [_f32(64, 64), weight, _f32(64)], {}, const=(2,))
    assert not declined("Gemm", [_f32(64, 64), weight, _f32(64)], {}, const=(1, 2))


def test_a_weight_is_packed_per_input_shape_and_empty_rows_are_fine():
    graph = ge.Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, -1, 64]}, "x0", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(64, 48))}, "w", graph)
    bias = create_node("Const", [], {"value": ge.Tensor(_f32(48))}, "b", graph)
    graph.set_outputs([create_node("MatMulBiasAdd", [x, weight, bias], {"activation": "gelu"},
                                   "op", graph)])
    fast = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    assert fast.executable.engine_histogram() == {"onednn": 1}
    for shape in [(1, 16, 64), (3, 7, 64), (1, 16, 64), (2, 0, 64), (1, 1, 64)]:
        feed = {"x0": _f32(*shape)}
        got = fast.run(feed)["op"]
        assert got.shape == (*shape[:-1], 48)
        assert_close(got, _reference(graph, feed), accumulate=True, what=shape)


def test_a_product_onednn_refuses_runs_on_the_next_engine(monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ge.errors.UnsupportedOpError("refused (test)")

    monkeypatch.setattr(_lib, "matmul", refuse)
    check_on_onednn("MatMul", [_f32(64, 64), _f32(64, 64)], {}, const=(1,))
    check_on_onednn("MatMul", [_f32(2, 64, 64), _f32(2, 64, 64)], {"transpose_b": True})


def test_the_product_s_operands_keep_their_values():
    """The packing reads the constant; the run must not write into any operand."""
    a, b, bias = _f32(32, 64), _f32(64, 64), _f32(64)
    graph = ge.Graph("keep")
    x = create_node("Data", [], {"shape": [32, 64]}, "x0", graph)
    y = create_node("Data", [], {"shape": [64, 64]}, "x1", graph)
    c = create_node("Const", [], {"value": ge.Tensor(bias)}, "c", graph)
    product = create_node("MatMul", [x, y], {}, "p", graph)
    graph.set_outputs([create_node("Add", [product, c], {}, "op", graph)])
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    feed = {"x0": a.copy(), "x1": b.copy()}
    got = session.run(feed)["op"]
    np.testing.assert_array_equal(feed["x0"], a)
    np.testing.assert_array_equal(feed["x1"], b)
    assert_close(got, a.astype(np.float64) @ b + bias, accumulate=True)


@pytest.mark.parametrize("op_type,attrs,bias", [("MatMul", {}, None),
                                                ("Gemm", {"transB": 1, "beta": 0.5}, "const"),
                                                ("MatMulBiasAdd", {}, "fed"),
                                                ("MatMulBiasAdd", {"activation": "gelu"}, "const")])
def test_a_single_row(op_type, attrs, bias):
    weight = _f32(256, 512) if attrs.get("transB") else _f32(512, 256)
    arrays: list[Any] = [_f32(1, 512), weight]
    if bias is not None:
        arrays.append(_f32(256))
    check_on_onednn(op_type, arrays, attrs, const=(1, 2) if bias == "const" else (1,))


def test_a_weight_is_packed_once_per_layout_and_old_shapes_are_dropped():
    matrix = _f32(256, 128)
    packer = _lib.Packed(matrix)
    layouts = []
    for rows in (8, 64, 100, 8):
        x, out = _f32(rows, 256), np.empty((rows, 128), np.float32)
        pd, weights_md = _lib.matmul(_lib.Desc.of(x), _lib.Desc([256, 128]), None,
                                     _lib.Desc.of(out), None)
        try:
            layouts.append(packer.like(weights_md))
        finally:
            _lib.destroy(pd)
    assert layouts[0] is layouts[3]  # the same layout asked again: the same copy
    assert packer.layouts == len({id(copy) for copy in layouts}) <= 3
    cache = _lib.ShapeCache()
    for key in range(cache.capacity + 5):
        cache[key] = key
    assert list(cache) == list(range(5, cache.capacity + 5))  # the oldest went first


@pytest.mark.parametrize("strided", [False, True])
def test_runs_on_the_same_arrays_with_new_values(strided):
    """The writer reuses its reshaped operands for the arrays it was given last time:
    an array changed in place between runs, or one the writer had to copy (a strided
    feed, a fed bias), gives this run's values, not the last run's."""
    graph = ge.Graph("again")
    x = create_node("Data", [], {"shape": [3, 16, 64]}, "x", graph)
    bias = create_node("Data", [], {"shape": [128]}, "bias", graph)
    residual = create_node("Data", [], {"shape": [3, 16, 128]}, "residual", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(64, 128))}, "w", graph)
    product = create_node("MatMulBiasAdd", [x, weight, bias, residual], {}, "p", graph)
    graph.set_outputs([create_node("Neg", [product], {}, "op", graph)])  # p in the arena
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"]["onednn"]["MatMulBiasAdd"] == 1
    session = ge.Session(executable)
    wide = _f32(3, 16, 128)
    feed = {"x": wide[:, :, ::2] if strided else _f32(3, 16, 64), "bias": _f32(256)[::2],
            "residual": _f32(3, 16, 128)}
    weights = graph.nodes[[n.name for n in graph.nodes].index("w")].attrs["value"].numpy()
    for run in range(3):
        for name in feed:
            feed[name][...] = _f32(*feed[name].shape) * (run + 1)
        got = session.run(feed)["op"]
        want = -(feed["x"].astype(np.float64) @ weights + feed["bias"] + feed["residual"])
        assert_close(got, want, accumulate=True)
