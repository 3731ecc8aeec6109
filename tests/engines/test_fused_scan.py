"""CumSum on the fused engine's compiled loop against the NumPy engine's reference
kernel, bit for bit: every axis but the last, exclusive and reverse, float32 and int64,
empty and one-long axes; and what the loop declines."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.ops import create_node

RNG = np.random.default_rng(13)


def _graph(shape: tuple[int, ...], dtype: str, axis: int, exclusive: bool, reverse: bool,
           axis_given: bool = False) -> ge.Graph:
    graph = ge.Graph("cumsum")
    x = create_node("Data", [], {"shape": list(shape), "dtype": dtype}, "x", graph)
    if axis_given:
        where = create_node("Data", [], {"shape": [], "dtype": "int64"}, "axis", graph)
    else:
        where = create_node("Const", [], {"value": ge.Tensor(np.array(axis, np.int64))}, "axis",
                            graph)
    graph.set_outputs([create_node("CumSum", [x, where], {"exclusive": exclusive,
                                                          "reverse": reverse}, "y", graph)])
    return graph


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape, axis", [((4, 7, 5), 1), ((4, 7, 5), 0), ((4, 7, 5), -2),
                                         ((9, 2), 0), ((3, 1, 2), 1), ((2, 0, 3), 1)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_cumsum_on_the_compiled_loop_equals_the_reference(shape, axis, reverse, exclusive,
                                                           dtype):
    x = (RNG.standard_normal(shape) * 100).astype(dtype)
    graph = _graph(shape, dtype, axis, exclusive, reverse)
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {"CumSum": 1}, \
        executable.report["engines_by_op"]
    got = ge.Session(executable).run({"x": x})["y"]
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run({"x": x})["y"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_cumsum_the_loop_declines_runs_elsewhere():
    x = RNG.standard_normal((3, 4))
    graph = _graph((3, 4), "float64", 1, False, False)  # float64: not compiled here
    executable = ge.compile(graph, opt_level=0)
    assert "fused" not in executable.report["engines_by_op"]
    np.testing.assert_array_equal(ge.Session(executable).run({"x": x})["y"], np.cumsum(x, 1))
    graph = _graph((3, 4), "float32", 0, False, False, axis_given=True)  # axis at run time
    assert "fused" not in ge.compile(graph, opt_level=0).report["engines_by_op"]
    graph = _graph((3, 4), "float32", -1, False, False)  # along the last axis
    assert "fused" not in ge.compile(graph, opt_level=0).report["engines_by_op"]


def _arg_graph(op_type: str, shape: tuple[int, ...], axis: int, keepdims: int,
               last: int) -> ge.Graph:
    graph = ge.Graph(op_type.lower())
    x = create_node("Data", [], {"shape": list(shape), "dtype": "float32"}, "x", graph)
    graph.set_outputs([create_node(op_type, [x], {"axis": axis, "keepdims": keepdims,
                                                  "select_last_index": last}, "y", graph)])
    return graph


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape, axis", [((2, 21, 6, 7), 1), ((5, 4, 3), 0), ((5, 4, 3), -2),
                                         ((1, 1, 4), 1)])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_max_and_min_on_the_compiled_loop_equal_the_reference(op_type, shape, axis,
                                                                   keepdims, last):
    x = np.round(RNG.standard_normal(shape) * 2).astype(np.float32)  # many ties
    flat = x.reshape(-1)
    flat[::7] = np.nan  # NaN wins, first or last
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    graph = _arg_graph(op_type, shape, axis, keepdims, last)
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {op_type: 1}, \
        executable.report["engines_by_op"]
    got = ge.Session(executable).run({"x": x})["y"]
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run({"x": x})["y"]
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    clean = np.round(RNG.standard_normal(shape) * 2).astype(np.float32)  # no NaN
    np.testing.assert_array_equal(
        ge.Session(executable).run({"x": clean})["y"],
        ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run({"x": clean})["y"])


def test_arg_max_along_the_last_axis_stays_with_numpy():
    executable = ge.compile(_arg_graph("ArgMax", (3, 4), -1, 1, 0), opt_level=0)
    assert "fused" not in executable.report["engines_by_op"]
