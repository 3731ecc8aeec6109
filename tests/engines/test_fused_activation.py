"""The sigmoid, swish, tanh and erf kernel on oneDNN's OpenMP threads, against float64
NumPy written here (and Python's ``math.erf``); and its use by the oneDNN engine, for a
convolution's activation and for the activation ops, against the NumPy engine."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ge
from ge.engines.fused import activation
from ge.ops import create_node
from tests.engines.test_onednn_engine import _f32, _graph

EDGES = [0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 20.0, -20.0, 80.0, -80.0, 87.5, -87.5, 100.0,
         -100.0, 1e4, -1e4, np.inf, np.nan]


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _check(function: str, x: np.ndarray, got: np.ndarray) -> None:
    gate = _sigmoid64(x)
    want = x * gate if function == "swish" else gate
    if function == "tanh":
        want = np.tanh(x.astype(np.float64))
    if function == "erf":
        want = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    # a few units in the last place, and the tails below float32's normal range flushed
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-37 if
                               function != "swish" else 1e-30)


def test_the_kernel_is_available_where_numba_and_onednn_are() -> None:
    assert activation.available()


@pytest.mark.parametrize("function", activation.FUNCTIONS)
@pytest.mark.parametrize("size", [1, 15, 16, 17, 1000, 100_003])
def test_each_value_against_float64(function: str, size: int) -> None:
    """Sizes that do not split evenly into the threads' shares of whole lines."""
    x = (_f32(size) * 30).astype(np.float32)
    x[:min(size, len(EDGES))] = EDGES[:size]
    out = np.full(size, 7.0, np.float32)
    activation.apply(function, x, out)
    _check(function, x, out)


@pytest.mark.parametrize("function", activation.FUNCTIONS)
def test_in_place_and_through_strides(function: str) -> None:
    x = (_f32(64, 200) * 10).astype(np.float32)
    same = x.copy()
    activation.apply(function, same, same)
    _check(function, x, same)
    wide = np.zeros((64, 400), np.float32)
    activation.apply(function, x[:, ::-1], wide[:, ::2])  # strided both ways
    _check(function, x[:, ::-1], wide[:, ::2])
    assert not wide[:, 1::2].any()  # nothing written between the strided values
    with pytest.raises(ValueError, match="shape"):
        activation.apply(function, x, wide)


@pytest.mark.parametrize("function", activation.FUNCTIONS)
def test_an_empty_array(function: str) -> None:
    x = np.empty((0, 5), np.float32)
    activation.apply(function, x, x)


@pytest.mark.parametrize("op_type", ["Sigmoid", "Swish", "Tanh"])
@pytest.mark.parametrize("fast", [True, False])
def test_the_onednn_engine_s_sigmoid_swish_and_tanh(op_type: str, fast: bool,
                                               monkeypatch) -> None:
    """On the kernel where it is available, on oneDNN's eltwise primitive where not."""
    if not fast:
        monkeypatch.setenv(activation.VARIABLE, "0")
    calls: list[str] = []
    apply = activation.apply
    monkeypatch.setattr(activation, "apply", lambda *args: (calls.append(args[0]),
                                                            apply(*args)))
    x = (_f32(26, 64, 80) * 8).astype(np.float32)  # over oneDNN's size for Tanh (128K)
    attrs: dict[str, Any] = {"alpha": 1.0} if op_type == "Swish" else {}
    graph = _graph(op_type, [x], attrs)
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {op_type: 1}
    got = ge.Session(executable).run({"x0": x})["op"]
    reference = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"]))
    np.testing.assert_allclose(got, reference.run({"x0": x})["op"], rtol=2e-6, atol=1e-6)
    assert calls == ([op_type.lower()] if fast else [])


@pytest.mark.parametrize("fast", [True, False])
def test_erf_runs_on_the_kernel_and_is_declined_without_it(fast: bool, monkeypatch) -> None:
    """oneDNN has no erf: the engine takes Erf only where the kernel runs."""
    if not fast:
        monkeypatch.setenv(activation.VARIABLE, "0")
    x = (_f32(1, 128, 3072) * 3).astype(np.float32)
    x[0, 0, :len(EDGES)] = EDGES
    graph = _graph("Erf", [x], {})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == ({"Erf": 1} if fast else None)
    got = ge.Session(executable).run({"x0": x})["op"]
    want = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=2e-7)


def test_a_swish_of_another_alpha_is_not_taken() -> None:
    x = _f32(4, 64, 80)
    graph = _graph("Swish", [x], {"alpha": 1.5})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert "onednn" not in executable.report["engines_by_op"]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("act", ["Swish", "Sigmoid", "Tanh"])
def test_a_convolution_s_sigmoid_or_swish_runs_after_it_on_the_kernel(layout: str, act: str,
                                                                       monkeypatch) -> None:
    calls: list[str] = []
    apply = activation.apply
    monkeypatch.setattr(activation, "apply", lambda *args: (calls.append(args[0]),
                                                            apply(*args)))
    graph = ge.Graph("conv")
    shape = [1, 20, 20, 16] if layout == "NHWC" else [1, 16, 20, 20]
    x = create_node("Data", [], {"shape": shape}, "x", graph)
    kernel = _f32(3, 3, 16, 24) * 0.3  # HWIO with NHWC data, OIHW with NCHW
    if layout == "NCHW":
        kernel = np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))
    filters = create_node("Const", [], {"value": ge.Tensor(kernel)}, "w", graph)
    bias = create_node("Const", [], {"value": ge.Tensor(_f32(24))}, "b", graph)
    conv = create_node("FusedConv2D", [x, filters, bias],
                       {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": layout,
                        "activation": act}, "op", graph)
    graph.set_outputs([conv])
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {"FusedConv2D": 1}
    feed = {"x": _f32(*shape)}
    session = ge.Session(executable)
    reference = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"]))
    for _ in range(2):
        np.testing.assert_allclose(session.run(feed)["op"], reference.run(feed)["op"],
                                   rtol=1e-5, atol=2e-5)
    assert calls == [act.lower()] * 2
    assert f"'op': {act.lower()} after the convolution" in activation.table()
