"""ReduceSum / Mean / Max / Min / Prod (ONNX 18: axes as an input) against torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pytest
import torch

import ge
from ge.errors import AttrError, DTypeError, OpArgumentError, ShapeError
from ge.ops import create_node, node_cost
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)


def _torch_prod(x: torch.Tensor, dims: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    for dim in sorted(dims, reverse=True):  # torch.prod takes one dim at a time
        x = torch.prod(x, dim=dim, keepdim=keepdim)
    return x


TORCH: dict[str, Callable[[torch.Tensor, tuple[int, ...], bool], torch.Tensor]] = {
    "ReduceSum": lambda x, dims, keep: torch.sum(x, dim=dims, keepdim=keep),
    "ReduceMean": lambda x, dims, keep: torch.mean(x, dim=dims, keepdim=keep),
    "ReduceMax": lambda x, dims, keep: torch.amax(x, dim=dims, keepdim=keep),
    "ReduceMin": lambda x, dims, keep: torch.amin(x, dim=dims, keepdim=keep),
    "ReduceProd": _torch_prod,
}


def _expected(op_type: str, x: np.ndarray, axes: Optional[list[int]], keepdims: int) -> np.ndarray:
    dims = tuple(range(x.ndim)) if not axes else tuple(a % x.ndim for a in axes)
    return TORCH[op_type](torch.from_numpy(x), dims, bool(keepdims)).numpy()


def _inferred(op_type: str, shape: list[Any], axes: Optional[list[int]] = None,
              attrs: Optional[dict] = None) -> tuple:
    x = create_node("Data", [], {"shape": shape}, name="x")
    axes_node = None if axes is None else ge.builder.constant(np.array(axes, np.int64))
    inputs = [x] if axes_node is None else [x, axes_node]
    return tuple(create_node(op_type, inputs, attrs or {}).shape)


AXES = [[0], [-1], [1], [0, 2], [-1, -3], [2, 0, 1], None]


@pytest.mark.parametrize("op_type", sorted(TORCH))
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_matches_torch(op_type: str, axes: Optional[list[int]], keepdims: int) -> None:
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    inputs: dict[str, Any] = {"x": x}
    if axes is not None:
        inputs["axes"] = np.array(axes, np.int64)
    (result,) = run_op(op_type, inputs, {"keepdims": keepdims}, const=["axes"])
    assert_close(result, _expected(op_type, x, axes, keepdims), accumulate=True,
                 what=f"{op_type} axes={axes} keepdims={keepdims}")
    assert result.dtype == np.float32


@pytest.mark.parametrize("op_type", sorted(TORCH))
def test_empty_axes_reduce_everything_by_default(op_type: str) -> None:
    x = RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    for keepdims, shape in [(1, (1, 1)), (0, ())]:
        (result,) = run_op(op_type, {"x": x, "axes": np.array([], np.int64)},
                           {"keepdims": keepdims}, const=["axes"])
        assert result.shape == shape
        assert_close(result, _expected(op_type, x, None, keepdims), accumulate=True)


@pytest.mark.parametrize("op_type", sorted(TORCH))
@pytest.mark.parametrize("axes", [None, []])
def test_noop_with_empty_axes_returns_the_input(op_type: str, axes: Optional[list]) -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    inputs: dict[str, Any] = {"x": x}
    if axes is not None:
        inputs["axes"] = np.array(axes, np.int64)
    attrs = {"noop_with_empty_axes": 1, "keepdims": 0}
    graph = build_op_graph(op_type, inputs, attrs, const=["axes"])
    assert tuple(graph.outputs[0].shape) == (3, 4)
    (result,) = run_op(op_type, inputs, attrs, const=["axes"])
    np.testing.assert_array_equal(result, x)


def test_noop_flag_does_not_change_nonempty_axes() -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    (result,) = run_op("ReduceSum", {"x": x, "axes": np.array([1])},
                       {"noop_with_empty_axes": 1, "keepdims": 0}, const=["axes"])
    assert_close(result, torch.sum(torch.from_numpy(x), dim=1).numpy(), accumulate=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_other_float_dtypes(dtype: Any, op_type: str) -> None:
    x = RNG.uniform(-1, 1, (4, 6)).astype(dtype)
    (result,) = run_op(op_type, {"x": x, "axes": np.array([1])}, const=["axes"])
    assert result.dtype == np.dtype(dtype)
    wide = _expected(op_type, x.astype(np.float64), [1], 1)
    assert_close(result, wide.astype(dtype), accumulate=True)


def test_reduce_mean_float16_accumulates_in_float32() -> None:
    # the sum (100000) overflows float16 (max 65504); a float16 accumulator gives inf
    x = np.full((10000,), 10.0, np.float16)
    (result,) = run_op("ReduceMean", {"x": x})
    assert result.dtype == np.float16
    assert result.shape == (1,)
    assert float(result[0]) == 10.0


def test_reduce_integers() -> None:
    x = RNG.integers(-5, 6, (3, 4)).astype(np.int32)
    axes = {"axes": np.array([0])}
    (total,) = run_op("ReduceSum", {"x": x, **axes}, {"keepdims": 0}, const=["axes"])
    np.testing.assert_array_equal(total, torch.sum(torch.from_numpy(x), dim=0).numpy())
    assert total.dtype == np.int32
    (largest,) = run_op("ReduceMax", {"x": x, **axes}, {"keepdims": 0}, const=["axes"])
    np.testing.assert_array_equal(largest, x.max(axis=0))
    pair = np.array([[-3, -4], [3, 4]], np.int64)
    (mean,) = run_op("ReduceMean", {"x": pair, "axes": np.array([1])}, {"keepdims": 0},
                     const=["axes"])
    np.testing.assert_array_equal(mean, [-3, 3])  # -3.5 and 3.5 truncate toward zero


def test_reduce_max_propagates_nan_and_empty_reductions() -> None:
    x = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    (result,) = run_op("ReduceMax", {"x": x, "axes": np.array([1])}, {"keepdims": 0},
                       const=["axes"])
    assert np.isnan(result[0]) and result[1] == 3.0
    empty = np.zeros((2, 0), np.float32)
    axes = {"axes": np.array([1])}
    (largest,) = run_op("ReduceMax", {"x": empty, **axes}, {"keepdims": 0}, const=["axes"])
    (smallest,) = run_op("ReduceMin", {"x": empty, **axes}, {"keepdims": 0}, const=["axes"])
    (total,) = run_op("ReduceSum", {"x": empty, **axes}, {"keepdims": 0}, const=["axes"])
    assert np.all(largest == -np.inf) and np.all(smallest == np.inf)
    np.testing.assert_array_equal(total, [0.0, 0.0])


@pytest.mark.parametrize(("shape", "axes", "attrs", "expected"), [
    (["batch", 4, 5], [1], {"keepdims": 0}, ("batch", 5)),
    (["batch", 4, 5], [0], {"keepdims": 1}, (1, 4, 5)),
    ([-1, -1, 5], [-1], {}, (-1, -1, 1)),
    ([-1, "t", 5], None, {"keepdims": 0}, ()),
    ([-1, "t", 5], [], {"noop_with_empty_axes": 1}, (-1, "t", 5)),
])
def test_reduce_keeps_dynamic_dims(shape: list, axes: Optional[list], attrs: dict,
                                   expected: tuple) -> None:
    assert _inferred("ReduceSum", shape, axes, attrs) == expected


def test_reduce_dynamic_input_runs() -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    inputs = {"x": x, "axes": np.array([-2])}
    graph = build_op_graph("ReduceMean", inputs, {"keepdims": 0}, const=["axes"],
                           dynamic=["x"])
    assert tuple(graph.outputs[0].shape) == (-1, -1)
    (result,) = run_op("ReduceMean", inputs, {"keepdims": 0}, const=["axes"], dynamic=["x"])
    assert_close(result, torch.mean(torch.from_numpy(x), dim=1).numpy(), accumulate=True)


def test_non_constant_axes_with_keepdims_give_unknown_dims() -> None:
    x = RNG.standard_normal((2, 1, 4)).astype(np.float32)
    inputs = {"x": x, "axes": np.array([0, 2])}
    graph = build_op_graph("ReduceSum", inputs)  # axes arrive as a Data input
    assert tuple(graph.outputs[0].shape) == (-1, 1, -1)
    (result,) = run_op("ReduceSum", inputs)
    assert_close(result, x.sum(axis=(0, 2), keepdims=True), accumulate=True)


def test_non_constant_axes_without_keepdims_give_a_known_rank() -> None:
    # one axis fed at run time from a [2, 3] input: the rank is 1, the size unknown
    inputs = {"x": np.zeros((2, 3), np.float32), "axes": np.array([0])}
    graph = build_op_graph("ReduceMean", inputs, {"keepdims": 0})
    assert graph.outputs[0].shape == (-1,)
    got = run_op("ReduceMean", {"x": np.arange(6, dtype=np.float32).reshape(2, 3),
                                "axes": np.array([0])}, {"keepdims": 0})[0]
    np.testing.assert_allclose(got, [1.5, 2.5, 3.5])


@pytest.mark.parametrize(("axes", "match"), [
    ([3], "out of range"),
    ([-4], "out of range"),
    ([0, -3], "repeat"),
])
def test_bad_axes_are_shape_errors(axes: list, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        _inferred("ReduceMax", [2, 3, 4], axes)


def test_reduce_argument_errors() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(DTypeError, match="axes"):
        build_op_graph("ReduceSum", {"x": x, "axes": np.array([0.0])}, const=["axes"])
    with pytest.raises(ShapeError, match="1-D"):
        build_op_graph("ReduceSum", {"x": x, "axes": np.array([[0]])}, const=["axes"])
    with pytest.raises(DTypeError):
        build_op_graph("ReduceSum", {"x": x > 0})
    with pytest.raises(AttrError, match="keepdims"):
        build_op_graph("ReduceSum", {"x": x}, {"keepdims": 2})
    with pytest.raises(AttrError, match="keepdims"):
        build_op_graph("ReduceSum", {"x": x}, {"keepdims": "yes"})
    with pytest.raises(OpArgumentError, match="'keepdims', 'noop_with_empty_axes'"):
        build_op_graph("ReduceSum", {"x": x}, {"axis": 0})
    with pytest.raises(OpArgumentError, match="valid inputs: 'x', 'axes'"):
        build_op_graph("ReduceSum", {"data": x})


def test_reduce_cost_counts_input_elements() -> None:
    graph = build_op_graph("ReduceSum", {"x": np.zeros((2, 3, 4), np.float32),
                                         "axes": np.array([1])}, const=["axes"])
    assert node_cost(graph.node("op")).flops == 24
