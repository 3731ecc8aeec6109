"""TopK on the fused engine's compiled heap against the NumPy engine's reference kernel
(a stable sort), exactly: ties, NaN, infinities and signed zeros, the largest and the
smallest, every axis, float32 and int64; data sorted the wrong way (every value enters
the heap); and what the loop declines."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.engines.fused import select
from ge.ops import create_node

RNG = np.random.default_rng(29)


def _graph(shape: tuple[int, ...], dtype: str, k: int, axis: int, largest: int,
           k_given: bool = False) -> ge.Graph:
    graph = ge.Graph("topk")
    x = create_node("Data", [], {"shape": list(shape), "dtype": dtype}, "x", graph)
    if k_given:
        count = create_node("Data", [], {"shape": [1], "dtype": "int64"}, "k", graph)
    else:
        count = create_node("Const", [], {"value": ge.Tensor(np.array([k], np.int64))}, "k",
                            graph)
    top = create_node("TopK", [x, count], {"axis": axis, "largest": largest}, "top", graph)
    graph.set_outputs([top.outputs[0], top.outputs[1]])
    return graph


def _run_both(graph: ge.Graph, feed: dict[str, np.ndarray]) -> tuple[list, list]:
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {"TopK": 1}, \
        executable.report["engines_by_op"]
    got = list(ge.Session(executable).run(feed).values())
    want = list(ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feed).values())
    return got, want


def _awkward(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    x = np.round(RNG.standard_normal(shape) * 2).astype(dtype)  # many ties
    if dtype == "float32":
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = np.inf
        flat[5::13] = -np.inf
        flat[2::9] = -0.0
    return x


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("shape, axis, k", [((3, 40), -1, 5), ((3, 40), 1, 40), ((2, 9, 4), 1, 1),
                                            ((6, 5), 0, 3), ((1, 300), -1, 256)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_top_k_on_the_compiled_heap_equals_the_stable_sort(shape, axis, k, largest, dtype):
    x = _awkward(shape, dtype)
    got, want = _run_both(_graph(shape, dtype, k, axis, largest), {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_of_data_sorted_the_wrong_way(largest):
    # every value beats the root and enters the heap: the slowest path, still exact
    x = np.sort(RNG.standard_normal((2, 500)).astype(np.float32), axis=1)
    if not largest:
        x = x[:, ::-1].copy()
    x[:, 100:110] = x[:, 100:101]  # a run of equal values
    got, want = _run_both(_graph((2, 500), "float32", 37, -1, largest), {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_top_k_the_loop_declines_runs_elsewhere():
    cases = [_graph((3, 4), "float64", 2, -1, 1),  # float64: not compiled here
             _graph((3, 4), "float32", 2, -1, 1, k_given=True),  # k known at run time
             _graph((2, 600), "float32", select.MAX_K + 1, -1, 1),
             _graph((2, select.MAX_LENGTH + 1), "float32", 5, -1, 1)]
    for graph in cases:
        executable = ge.compile(graph, opt_level=0)
        assert "fused" not in executable.report["engines_by_op"], graph
        x = RNG.standard_normal(graph.node("x").outputs[0].shape).astype(
            graph.node("x").outputs[0].dtype.np_dtype)
        feed = {"x": x}
        if "k" in [spec[0] for spec in ge.Session(executable).get_inputs()]:
            feed["k"] = np.array([2], np.int64)
        got = ge.Session(executable).run(feed)
        want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feed)
        for g, w in zip(got.values(), want.values()):
            np.testing.assert_array_equal(g, w)
