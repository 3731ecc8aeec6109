"""Elementwise and plumbing ops (ge/ops/elementwise.py, ge/ops/core.py) against torch / NumPy.

Every case goes through ``run_op``: the graph is built, validated, compiled and
run, and the result is compared with an independent reference.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ge
from ge.errors import AttrError, DTypeError, ExecutionError, OpArgumentError, ShapeError
from ge.ops import Trait, create_node, get_schema, node_cost
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(3)


def _random(shape: tuple[int, ...], dtype: Any = np.float32, low: float = -3.0,
            high: float = 3.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(dtype)


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def _one(op_type: str, inputs: dict[str, Any], attrs: Optional[dict] = None,
         **options: Any) -> np.ndarray:
    (result,) = run_op(op_type, inputs, attrs, **options)
    return result


def _inferred(op_type: str, shapes: list[list[Any]], dtype: Any = "float32") -> tuple:
    names = get_schema(op_type).inputs
    inputs = [create_node("Data", [], {"shape": shape, "dtype": dtype}, name=spec.name)
              for shape, spec in zip(shapes, names)]
    return tuple(create_node(op_type, inputs).shape)


# -- binary arithmetic and comparisons -------------------------------------------------

BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
    "Min": torch.minimum, "Max": torch.maximum, "Pow": torch.pow,
    "Equal": torch.eq, "Less": torch.lt, "Greater": torch.gt,
}
PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)),
         ((2, 1, 5), (3, 1)), ((0, 3), (1, 3))]


@pytest.mark.parametrize("op_type", sorted(BINARY))
@pytest.mark.parametrize(("x_shape", "y_shape"), PAIRS)
def test_binary_float32_matches_torch(op_type: str, x_shape: tuple, y_shape: tuple) -> None:
    x = _random(x_shape, low=0.5) if op_type == "Pow" else _random(x_shape)
    y = _random(y_shape, low=0.5) if op_type == "Div" else _random(y_shape)
    if op_type in ("Equal", "Min", "Max") and x.size and y.size:
        y = np.broadcast_to(x.reshape(-1)[:1], y_shape).copy()  # some ties
    result = _one(op_type, {"x": x, "y": y})
    assert_close(result, BINARY[op_type](_t(x), _t(y)).numpy(), what=op_type)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Max"])
def test_binary_other_float_dtypes(dtype: Any, op_type: str) -> None:
    x, y = _random((3, 4), dtype), _random((4,), dtype, low=0.5)
    result = _one(op_type, {"x": x, "y": y})
    assert result.dtype == np.dtype(dtype)
    expected = BINARY[op_type](_t(x.astype(np.float64)), _t(y.astype(np.float64))).numpy()
    assert_close(result, expected.astype(dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Min", "Max", "Less", "Equal"])
def test_binary_integers_are_exact(dtype: Any, op_type: str) -> None:
    low = 0 if np.dtype(dtype).kind == "u" else -5
    x = RNG.integers(low, 6, (3, 4)).astype(dtype)
    y = RNG.integers(low, 6, (4,)).astype(dtype)
    result = _one(op_type, {"x": x, "y": y})
    expected = BINARY[op_type](_t(x), _t(y)).numpy()
    np.testing.assert_array_equal(result, expected)
    assert result.dtype == expected.dtype


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype: Any) -> None:
    x = np.array([[7, -7, 7, -7, 0, 6, -6, 1, -1]], dtype)
    y = np.array([[2], [-2], [3], [-5]], dtype)
    result = _one("Div", {"x": x, "y": y})
    signs = np.sign(x).astype(np.int64) * np.sign(y).astype(np.int64)
    expected = (signs * (np.abs(x).astype(np.int64) // np.abs(y).astype(np.int64)))
    np.testing.assert_array_equal(result, expected.astype(dtype))
    assert result.dtype == np.dtype(dtype)


def test_unsigned_div_and_integer_div_by_zero() -> None:
    x, y = np.array([250, 7, 3], np.uint8), np.array([3, 2, 5], np.uint8)
    np.testing.assert_array_equal(_one("Div", {"x": x, "y": y}), [83, 3, 0])
    with pytest.raises(ExecutionError, match="division by zero"):
        run_op("Div", {"x": np.array([1, 2], np.int32), "y": np.array([0, 1], np.int32)})


def test_pow_mixed_and_integer_exponents() -> None:
    x, y = np.array([2.0, 4.0, 9.0], np.float32), np.array([2.0, 0.5, -0.5], np.float64)
    result = _one("Pow", {"x": x, "y": y})
    assert result.dtype == np.float32
    assert_close(result, torch.pow(_t(x).double(), _t(y)).float().numpy())
    xi, yi = np.array([2, -2, 3, 5], np.int64), np.array([3, 3, 0, 2], np.int64)
    np.testing.assert_array_equal(_one("Pow", {"x": xi, "y": yi}), [8, -8, 1, 25])


def test_min_max_propagate_nan() -> None:
    x = np.array([1.0, np.nan, 3.0], np.float32)
    y = np.array([np.nan, 2.0, 1.0], np.float32)
    for op_type in ("Min", "Max"):
        result = _one(op_type, {"x": x, "y": y})
        np.testing.assert_array_equal(result, BINARY[op_type](_t(x), _t(y)).numpy())


def test_comparisons_give_bool_and_equal_takes_bools() -> None:
    x, y = np.array([True, False, True]), np.array([True, True, False])
    result = _one("Equal", {"x": x, "y": y})
    np.testing.assert_array_equal(result, [True, False, False])
    assert _one("Less", {"x": _random((2,)), "y": _random((2,))}).dtype == np.bool_


# -- unary math and activations --------------------------------------------------------

UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], float, float]] = {
    "Relu": (torch.relu, -3, 3), "Sigmoid": (torch.sigmoid, -8, 8),
    "Sqrt": (torch.sqrt, 0, 9), "Exp": (torch.exp, -5, 5), "Log": (torch.log, 0.01, 10),
    "Tanh": (torch.tanh, -4, 4), "Erf": (torch.erf, -4, 4), "Neg": (torch.neg, -3, 3),
    "Abs": (torch.abs, -3, 3), "Reciprocal": (torch.reciprocal, 0.1, 5),
    "Floor": (torch.floor, -5, 5), "Ceil": (torch.ceil, -5, 5),
}


@pytest.mark.parametrize("op_type", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_matches_torch(op_type: str, dtype: Any) -> None:
    reference, low, high = UNARY[op_type]
    x = _random((3, 17), dtype, low, high)
    result = _one(op_type, {"x": x})
    assert result.dtype == np.dtype(dtype)
    assert_close(result, reference(_t(x)).numpy(), what=f"{op_type} {np.dtype(dtype)}")


@pytest.mark.parametrize("op_type", ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Erf"])
def test_unary_float16(op_type: str) -> None:
    reference, low, high = UNARY[op_type]
    x = _random((40,), np.float16, low, high)
    result = _one(op_type, {"x": x})
    assert result.dtype == np.float16
    assert_close(result, reference(_t(x.astype(np.float32))).numpy().astype(np.float16))


def test_integer_unaries() -> None:
    x = np.array([-3, 0, 4], np.int32)
    np.testing.assert_array_equal(_one("Relu", {"x": x}), [0, 0, 4])
    np.testing.assert_array_equal(_one("Neg", {"x": x}), [3, 0, -4])
    np.testing.assert_array_equal(_one("Abs", {"x": x}), [3, 0, 4])


@pytest.mark.parametrize(("dtype", "magnitudes"), [
    (np.float32, [88.0, 89.0, 100.0, 1000.0, 3.0e38]),
    (np.float16, [11.0, 12.0, 100.0, 60000.0]),
    (np.float64, [709.0, 710.0, 1.0e308]),
])
def test_sigmoid_large_inputs_do_not_overflow(dtype: Any, magnitudes: list[float]) -> None:
    x = np.array([-m for m in magnitudes] + [0.0] + magnitudes + [-np.inf, np.inf], dtype)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        result = _one("Sigmoid", {"x": x})
    assert np.all(np.isfinite(result)) and np.all((result >= 0) & (result <= 1))
    expected = torch.sigmoid(_t(x.astype(np.float64))).numpy().astype(dtype)
    assert_close(result, expected)


def test_erf_float64_is_exact_and_float32_close() -> None:
    x = np.linspace(-5, 5, 101)
    assert_close(_one("Erf", {"x": x}), torch.erf(_t(x)).numpy())
    np.testing.assert_allclose(_one("Erf", {"x": x}), [math.erf(v) for v in x], rtol=1e-15)
    x32 = x.astype(np.float32)
    assert_close(_one("Erf", {"x": x32}), torch.erf(_t(x32)).numpy())


def test_erf_float32_small_inputs_keep_relative_accuracy() -> None:
    x = np.array([1e-10, -1e-8, 1e-6, 1e-5, 1e-4, 0.5, -0.99, 1.0, 1.5, -3.0, 6.0], np.float32)
    np.testing.assert_allclose(_one("Erf", {"x": x}), torch.erf(_t(x)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("alpha", [None, 0.2])
def test_leaky_relu(alpha: Optional[float]) -> None:
    x = _random((4, 5))
    attrs = {} if alpha is None else {"alpha": alpha}
    result = _one("LeakyRelu", {"x": x}, attrs)
    expected = F.leaky_relu(_t(x), negative_slope=0.01 if alpha is None else alpha)
    assert_close(result, expected.numpy())


def test_hard_sigmoid() -> None:
    x = _random((50,), low=-6, high=6)
    torch_like = _one("HardSigmoid", {"x": x}, {"alpha": 1 / 6, "beta": 0.5})
    assert_close(torch_like, F.hardsigmoid(_t(x)).numpy())
    onnx_default = _one("HardSigmoid", {"x": x})
    assert_close(onnx_default, np.minimum(np.maximum(0.2 * x + 0.5, 0.0), 1.0))


# -- Clip, Where, BiasAdd --------------------------------------------------------------

@pytest.mark.parametrize(("low", "high"), [(-1.0, 2.0), (-1.0, None), (None, 2.0), (None, None),
                                           (2.0, -1.0)])
def test_clip_matches_torch_clamp(low: Optional[float], high: Optional[float]) -> None:
    x = _random((3, 7))
    inputs: dict[str, Any] = {"x": x}
    if low is not None:
        inputs["min"] = np.array(low, np.float32)
    if high is not None:
        inputs["max"] = np.array(high, np.float32)
    result = _one("Clip", inputs, const=["min", "max"])
    if low is None and high is None:  # torch.clamp refuses; nothing is clipped
        np.testing.assert_array_equal(result, x)
    else:
        assert_close(result, torch.clamp(_t(x), min=low, max=high).numpy())


def test_clip_integers_and_fed_bounds() -> None:
    x = np.arange(-3, 4, dtype=np.int32)
    result = _one("Clip", {"x": x, "min": np.array(-1, np.int32), "max": np.array([2], np.int32)})
    np.testing.assert_array_equal(result, torch.clamp(_t(x), -1, 2).numpy())


def test_clip_errors() -> None:
    x = _random((3,))
    with pytest.raises(ShapeError, match="scalar"):
        build_op_graph("Clip", {"x": x, "min": np.zeros(2, np.float32)})
    with pytest.raises(DTypeError, match="dtype"):
        build_op_graph("Clip", {"x": x, "max": np.array(1.0)})


def test_where_broadcasts_like_torch() -> None:
    condition = RNG.random((2, 1, 4)) > 0.5
    x, y = _random((3, 4)), _random((2, 3, 1))
    result = _one("Where", {"condition": condition, "x": x, "y": y})
    assert_close(result, torch.where(_t(condition), _t(x), _t(y)).numpy())
    with pytest.raises(DTypeError, match="bool"):
        build_op_graph("Where", {"condition": x, "x": x, "y": x})
    with pytest.raises(DTypeError):
        build_op_graph("Where", {"condition": condition, "x": x, "y": y.astype(np.float64)})


@pytest.mark.parametrize(("data_format", "shape", "axis"), [
    (None, (2, 3, 4, 5), 3), ("NHWC", (2, 3, 4, 5), 3), ("ND", (6, 5), 1),
    ("NCHW", (2, 5, 3, 4), 1), (ge.Format.NCHW, (2, 5, 3), 1),
])
def test_bias_add(data_format: Any, shape: tuple, axis: int) -> None:
    value, bias = _random(shape), _random((5,))
    attrs = {} if data_format is None else {"data_format": data_format}
    result = _one("BiasAdd", {"value": value, "bias": bias}, attrs)
    view = [1] * len(shape)
    view[axis] = 5
    assert_close(result, (_t(value) + _t(bias).reshape(view)).numpy())


def test_bias_add_errors() -> None:
    with pytest.raises(ShapeError, match="bias has 4 elements"):
        build_op_graph("BiasAdd", {"value": _random((2, 3, 5)), "bias": _random((4,))})
    with pytest.raises(ShapeError, match="rank 1"):
        build_op_graph("BiasAdd", {"value": _random((2, 5)), "bias": _random((1, 5))})
    with pytest.raises(AttrError, match="data_format"):
        build_op_graph("BiasAdd", {"value": _random((2, 5)), "bias": _random((5,))},
                       {"data_format": "NCDHW"})


# -- Cast, Identity, Shape -------------------------------------------------------------

@pytest.mark.parametrize(("source", "target", "torch_target"), [
    (np.float32, "int32", torch.int32), (np.float64, "DT_INT64", torch.int64),
    (np.float32, ge.DataType.DT_FLOAT16, torch.float16), (np.float32, "bool", torch.bool),
    (np.int64, "float32", torch.float32), (np.float16, np.float64, torch.float64),
])
def test_cast_matches_torch(source: Any, target: Any, torch_target: torch.dtype) -> None:
    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.5, 3.9], np.float64).astype(source)
    result = _one("Cast", {"x": x}, {"dtype": target})
    expected = _t(x).to(torch_target).numpy()
    assert result.dtype == expected.dtype
    assert_close(result, expected)


def test_identity_keeps_value_and_dtype() -> None:
    for array in (_random((2, 3)), np.array([1, 2], np.uint16), np.array(True)):
        result = _one("Identity", {"x": array})
        np.testing.assert_array_equal(result, array)
        assert result.dtype == array.dtype


@pytest.mark.parametrize(("start", "end"), [(None, None), (1, None), (-3, -1), (0, 10),
                                            (-10, 2), (5, None), (3, 1)])
def test_shape_start_end(start: Optional[int], end: Optional[int]) -> None:
    x = np.zeros((2, 3, 4, 5), np.float32)
    attrs = {key: value for key, value in (("start", start), ("end", end)) if value is not None}
    expected = np.array(x.shape[slice(start, end)], np.int64)
    graph = build_op_graph("Shape", {"x": x}, attrs, dynamic=["x"])
    assert tuple(graph.outputs[0].shape) == (len(expected),)
    result = _one("Shape", {"x": x}, attrs, dynamic=["x"])
    np.testing.assert_array_equal(result, expected)
    assert result.dtype == np.int64


# -- dynamic dimensions ----------------------------------------------------------------

def test_dynamic_inputs_run_and_infer_unknown_dims() -> None:
    x, y = _random((2, 3, 4)), _random((3, 1))
    graph = build_op_graph("Add", {"x": x, "y": y}, dynamic=["x"])
    assert tuple(graph.outputs[0].shape) == (-1, 3, -1)  # y's 3 fixes the middle dim
    graph = build_op_graph("Mul", {"x": _random((2, 3)), "y": _random((3,))}, dynamic=["y"])
    assert tuple(graph.outputs[0].shape) == (2, 3)
    assert_close(_one("Add", {"x": x, "y": y}, dynamic=["x", "y"]), (_t(x) + _t(y)).numpy())
    assert_close(_one("Sigmoid", {"x": x}, dynamic=["x"]), torch.sigmoid(_t(x)).numpy())


@pytest.mark.parametrize(("x_shape", "y_shape", "expected"), [
    (["n", 3], [3], ("n", 3)),
    (["n", 1], [1, 4], ("n", 4)),
    ([-1, 4], [3, 1], (3, 4)),
    (["n", 4], ["n", 4], ("n", 4)),
    (["n", 4], ["m", 4], (-1, 4)),
])
def test_named_and_unknown_dims_broadcast(x_shape: list, y_shape: list, expected: tuple) -> None:
    assert _inferred("Add", [x_shape, y_shape]) == expected


# -- errors, traits, cost --------------------------------------------------------------

def test_mismatched_dtypes_are_dtype_errors() -> None:
    with pytest.raises(DTypeError, match="share one dtype"):
        build_op_graph("Add", {"x": _random((2,)), "y": _random((2,), np.float64)})
    with pytest.raises(DTypeError):
        build_op_graph("Add", {"x": np.array([True]), "y": np.array([False])})
    with pytest.raises(DTypeError):
        build_op_graph("Sqrt", {"x": np.array([4], np.int32)})
    with pytest.raises(DTypeError):
        build_op_graph("Relu", {"x": np.array([4], np.uint8)})


@pytest.mark.parametrize(("x_shape", "y_shape"), [((2, 3), (4,)), ((2, 3, 4), (3, 3, 4)),
                                                  ((5, 0), (5, 2))])
def test_non_broadcastable_shapes_are_shape_errors(x_shape: tuple, y_shape: tuple) -> None:
    with pytest.raises(ShapeError, match="do not broadcast"):
        build_op_graph("Add", {"x": _random(x_shape), "y": _random(y_shape)})


def test_unknown_names_list_the_valid_ones() -> None:
    builder = ge.OperatorFactory.create_op("Add")
    with pytest.raises(OpArgumentError, match="valid inputs: 'x', 'y'"):
        builder.set_input("z", _random((2,)))
    with pytest.raises(OpArgumentError, match="valid attributes: 'alpha'"):
        ge.OperatorFactory.create_op("LeakyRelu").set_attr("slope", 0.1)
    with pytest.raises(OpArgumentError, match="valid attributes: none"):
        build_op_graph("Relu", {"x": _random((2,))}, {"alpha": 0.1})


@pytest.mark.parametrize(("op_type", "attrs"), [
    ("LeakyRelu", {"alpha": "big"}), ("HardSigmoid", {"beta": [0.5]}),
    ("Shape", {"start": 1.5}), ("Shape", {"end": "x"}), ("Cast", {"dtype": "float99"}),
])
def test_wrong_attribute_types_are_attr_errors(op_type: str, attrs: dict) -> None:
    with pytest.raises(AttrError, match=next(iter(attrs))):
        build_op_graph(op_type, {"x": _random((2,))}, attrs)


def test_traits_and_cost() -> None:
    assert get_schema("Add").has_trait(Trait.COMMUTATIVE)
    assert not get_schema("Sub").has_trait(Trait.COMMUTATIVE)
    assert get_schema("Relu").has_trait(Trait.ELEMENTWISE)
    assert not get_schema("Equal").has_trait(Trait.INPLACE)  # bool output, other dtype
    graph = build_op_graph("Add", {"x": _random((2, 3)), "y": _random((3,))})
    assert node_cost(graph.node("op")).flops == 6
