"""The NumPy engine's writing kernels against the reference kernels: each covered op on
random data (broadcasting, both layouts, groups, strides, pads, dilations, fused
activations), written into arrays filled with garbage first, and for the INPLACE ops
again with the output being input 0's buffer; which nodes get no writer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pytest

from ge.engines import get_engine
from ge.engines.numpy import writers
from ge.ir import DataType, Graph, Node, Tensor
from ge.ops import create_node, get_schema
from ge.ops.registry import Trait, all_op_types, ops_with, run_kernel
from tests.tolerance import assert_close

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, -1e-3, 0.5, -0.5, 30.0, -30.0, 100.0, -100.0]


def sample(shape: Sequence[int], dtype: str = "float32", seed: int = 0, low: float = -3.0,
           high: float = 3.0, edges: bool = False) -> np.ndarray:
    """Random values of ``dtype`` (integers in [low, high]), with edge values first."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high) + 1, size).astype(dtype).reshape(shape)
    values = rng.uniform(low, high, size).astype(dtype)
    if edges:
        edge = np.array(EDGES, dtype=dtype)[:size]
        values[:edge.size] = edge
    return values.reshape(shape)


def node_for(op_type: str, arrays: Sequence[Optional[np.ndarray]],
             attrs: Optional[dict[str, Any]] = None, const: Sequence[int] = ()) -> Node:
    """A node of ``op_type`` reading a graph input per array (a constant for ``const``)."""
    graph = Graph("writers")
    values: list[Any] = []
    for index, array in enumerate(arrays):
        if array is None:
            values.append(None)
        elif index in const:
            values.append(create_node("Const", [], {"value": Tensor(array)}, f"c{index}", graph))
        else:
            values.append(create_node("Data", [], {"shape": list(array.shape),
                                                   "dtype": array.dtype.name}, f"x{index}", graph))
    return create_node(op_type, values, attrs or {}, "op", graph)


def garbage(shape: tuple[int, ...], dtype: np.dtype, byte: int) -> np.ndarray:
    """An array whose every byte is ``byte`` (NaN or 0 for floats, -1 or 0 for integers)."""
    array = np.empty(shape, dtype)
    array.reshape(-1).view(np.uint8).fill(byte if dtype.kind != "b" else min(byte, 1))
    return array


def compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray], exact: bool,
            what: str) -> None:
    for result, expected in zip(got, want):
        assert result.dtype == expected.dtype, what
        if exact:
            np.testing.assert_array_equal(result, expected, err_msg=what)
        else:
            assert_close(result, expected, accumulate=True, what=what)


def check(op_type: str, arrays: Sequence[Optional[np.ndarray]],
          attrs: Optional[dict[str, Any]] = None, const: Sequence[int] = (),
          exact: bool = True) -> None:
    """The writer of the node writes what the reference kernel returns, into garbage, and
    (INPLACE ops) into input 0's own buffer."""
    node = node_for(op_type, arrays, attrs, const)
    writer = writers.writer_for(node)
    assert writer is not None, f"{op_type} {attrs} has no writer"
    schema = get_schema(op_type)
    expected = run_kernel(schema, "op", arrays, dict(node.attrs))
    for value, array in zip(node.outputs, expected):
        assert value.dtype.np_dtype == array.dtype
        assert tuple(value.shape) == array.shape
    for byte in (0xFF, 0x00):
        outs = [garbage(e.shape, e.dtype, byte) for e in expected]
        writer(arrays, outs)
        compare(outs, expected, exact, f"{op_type} {attrs} into {byte:#x}")
    first = arrays[0]
    if schema.has_trait(Trait.INPLACE) and first is not None \
            and first.shape == expected[0].shape and first.dtype == expected[0].dtype:
        buffer = np.ascontiguousarray(first).copy()
        outs = [buffer] + [garbage(e.shape, e.dtype, 0xFF) for e in expected[1:]]
        writer([buffer, *arrays[1:]], outs)
        compare(outs, expected, exact, f"{op_type} {attrs} in place")


# -- elementwise ------------------------------------------------------------------------

UNARY_FLOAT = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf",
               "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Asin",
               "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN"]
UNARY_HALF = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Reciprocal", "Floor"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type", UNARY_FLOAT)
def test_unary_ufuncs(op_type: str, dtype: str) -> None:
    check(op_type, [sample((4, 5, 6), dtype, edges=True)])


@pytest.mark.parametrize("op_type", UNARY_HALF)
def test_unary_in_float16(op_type: str) -> None:
    check(op_type, [sample((4, 33), "float16", edges=True)])


@pytest.mark.parametrize("op_type,dtype", [("Relu", "int32"), ("Neg", "int8"), ("Abs", "int8"),
                                           ("Sign", "int64"), ("BitwiseNot", "uint16"),
                                           ("Not", "bool")])
def test_unary_integers_and_bool(op_type: str, dtype: str) -> None:
    check(op_type, [sample((3, 7), dtype, low=-100, high=100)])


ACTIVATIONS: list[tuple[str, dict[str, Any]]] = [
    ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 0.1, "beta": 0.4}), ("HardSwish", {}), ("Swish", {}),
    ("Swish", {"alpha": 1.702}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.3}),
    ("ThresholdedRelu", {"alpha": 0.5}), ("Softplus", {}), ("Softsign", {}), ("Mish", {}),
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"})]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type,attrs", ACTIVATIONS)
def test_activations(op_type: str, attrs: dict[str, Any], dtype: str) -> None:
    check(op_type, [sample((5, 40), dtype, seed=1, low=-8, high=8, edges=True)], attrs)


@pytest.mark.parametrize("op_type,attrs", [("LeakyRelu", {}), ("HardSigmoid", {})])
def test_activations_in_float16(op_type: str, attrs: dict[str, Any]) -> None:
    check(op_type, [sample((5, 40), "float16", seed=1, low=-8, high=8, edges=True)], attrs)


BROADCASTS = [((3, 4, 5), (3, 4, 5)), ((3, 4, 5), (5,)), ((3, 1, 5), (4, 1)), ((2, 3), (1,)),
              ((1,), (2, 3)), ((6,), ())]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("op_type,dtype", [
    ("Add", "float32"), ("Sub", "float32"), ("Mul", "float32"), ("Div", "float32"),
    ("Max", "float32"), ("Min", "float32"), ("Pow", "float32"), ("Add", "int32"),
    ("Sub", "int64"), ("Mul", "int16"), ("Max", "uint8"), ("Min", "int8"), ("Div", "float64"),
    ("Pow", "float64"), ("Max", "bool"), ("Equal", "float32"), ("Less", "int32"),
    ("Greater", "float64"), ("LessOrEqual", "float32"), ("GreaterOrEqual", "int8"),
    ("BitwiseAnd", "int32"), ("BitwiseOr", "uint8"), ("BitwiseXor", "int64"), ("And", "bool"),
    ("Or", "bool"), ("Xor", "bool"), ("Mod", "int32"), ("Mod", "float32")])
def test_binary(op_type: str, dtype: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    low = 0.1 if op_type == "Pow" else -9
    x = sample(shapes[0], dtype, seed=2, low=low, high=9)
    y = sample(shapes[1], dtype, seed=3, low=-3 if op_type != "Mod" else 1, high=3)
    check(op_type, [x, y])
    if op_type == "Mod":
        check(op_type, [x, y], {"fmod": True})


@pytest.mark.parametrize("layout,shape", [("NHWC", (2, 3, 4, 5)), ("NCHW", (2, 5, 3, 4)),
                                          ("ND", (7, 5))])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_bias_add(layout: str, shape: tuple[int, ...], dtype: str) -> None:
    check("BiasAdd", [sample(shape, dtype), sample((5,), dtype, seed=4)],
          {"data_format": layout})


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (None, 0.5), (-0.5, None), (None, None)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_clip(bounds: tuple[Optional[float], Optional[float]], dtype: str) -> None:
    scalars = [None if b is None else np.array(b * 4, dtype) for b in bounds]
    while scalars and scalars[-1] is None:
        scalars.pop()
    check("Clip", [sample((4, 9), dtype, low=-6, high=6, edges=dtype == "float32"), *scalars])


@pytest.mark.parametrize("slope_shape", [(1,), (6,), (5, 1), (5, 6)])
def test_prelu(slope_shape: tuple[int, ...]) -> None:
    check("PRelu", [sample((3, 5, 6), edges=True), sample(slope_shape, seed=5)])


def test_where() -> None:
    check("Where", [sample((3, 1, 5), "bool"), sample((4, 5), seed=1), sample((3, 4, 1), seed=2)])


# -- plumbing ---------------------------------------------------------------------------

@pytest.mark.parametrize("source,target", [
    ("float32", "int32"), ("float64", "int8"), ("float32", "float16"), ("float16", "float32"),
    ("int64", "float32"), ("int32", "uint8"), ("float32", "bool"), ("bool", "float32"),
    ("float64", "uint16"), ("int8", "int64")])
def test_cast(source: str, target: str) -> None:
    check("Cast", [sample((6, 7), source, low=-200, high=200)], {"dtype": target})


def test_identity_and_views() -> None:
    x = sample((2, 3, 4, 1))
    check("Identity", [x])
    check("Reshape", [x, np.array([6, -1], np.int64)], const=[1])
    check("Flatten", [x], {"axis": 2})
    check("Squeeze", [x, np.array([3], np.int64)], const=[1])
    check("Squeeze", [x])
    check("Unsqueeze", [x, np.array([0, 5], np.int64)], const=[1])


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 1, 0, 2]])
def test_transpose(perm: Optional[list[int]]) -> None:
    check("Transpose", [sample((2, 3, 4, 5))], {"perm": perm})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis: int) -> None:
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    arrays = [sample([s if i != axis % 3 else s + k for i, s in enumerate(shape)], seed=k)
              for k, shape in enumerate(shapes)]
    check("Concat", arrays, {"axis": axis})


@pytest.mark.parametrize("axis,indices", [(0, [[0, -1], [2, 1]]), (1, [3, -4, 0]), (-1, 2),
                                          (2, np.zeros((0,), np.int64))])
@pytest.mark.parametrize("constant", [False, True])
def test_gather(axis: int, indices: Any, constant: bool) -> None:
    check("Gather", [sample((3, 4, 5)), np.asarray(indices, np.int64)], {"axis": axis},
          const=(1,) if constant else ())


@pytest.mark.parametrize("constant", [False, True])
@pytest.mark.parametrize("indices", [[0, 3], 3, -4])
def test_gather_refuses_an_index_out_of_range(indices: Any, constant: bool) -> None:
    x, given = sample((3, 4)), np.array(indices, np.int64)
    node = node_for("Gather", [x, given])
    if constant:  # x's rows known only when it runs: the range is checked then
        graph = Graph("late")
        data = create_node("Data", [], {"shape": [-1, 4]}, "x", graph)
        node = create_node("Gather", [data, create_node("Const", [], {"value": Tensor(given)},
                                                        "indices", graph)], {}, "op", graph)
    writer = writers.writer_for(node)
    assert writer is not None
    with pytest.raises(IndexError):
        writer([x, given], [np.empty(given.shape + (4,), np.float32)])


@pytest.mark.parametrize("op_type,dtype", [
    ("ReduceSum", "float32"), ("ReduceSum", "int32"), ("ReduceMean", "float64"),
    ("ReduceMax", "float32"), ("ReduceMin", "int16"), ("ReduceMax", "bool"),
    ("ReduceMin", "float16")])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0),
                                           ([], 1)])
def test_reduce(op_type: str, dtype: str, axes: Optional[list[int]], keepdims: int) -> None:
    x = sample((3, 4, 5), dtype, low=-9, high=9)
    arrays = [x] if axes is None else [x, np.array(axes, np.int64)]
    check(op_type, arrays, {"keepdims": keepdims}, const=[1])
    if axes == []:
        check(op_type, arrays, {"keepdims": keepdims, "noop_with_empty_axes": 1}, const=[1])


# -- matrix products --------------------------------------------------------------------

MATMUL_SHAPES = [((4, 5), (5, 3)), ((2, 4, 5), (5, 3)), ((2, 4, 5), (2, 5, 3)),
                 ((3, 1, 4, 5), (2, 5, 6)), ((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul(shapes: tuple[tuple[int, ...], ...], dtype: str) -> None:
    a, b = sample(shapes[0], dtype, seed=1), sample(shapes[1], dtype, seed=2)
    check("MatMul", [a, b], exact=dtype == "int32")


@pytest.mark.parametrize("transpose_a,transpose_b", [(True, False), (False, True), (True, True)])
def test_matmul_transposed(transpose_a: bool, transpose_b: bool) -> None:
    a = sample((2, 5, 4) if transpose_a else (2, 4, 5), seed=1)
    b = sample((3, 5) if transpose_b else (5, 3), seed=2)
    check("MatMul", [a, b], {"transpose_a": transpose_a, "transpose_b": transpose_b},
          exact=False)


@pytest.mark.parametrize("c_shape", [None, (3,), (4, 1), (4, 3)])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 2.0, "transA": 1},
                                   {"transB": 1, "beta": 0.0}])
def test_gemm(c_shape: Optional[tuple[int, ...]], attrs: dict[str, Any]) -> None:
    a = sample((5, 4) if attrs.get("transA") else (4, 5), seed=1)
    b = sample((3, 5) if attrs.get("transB") else (5, 3), seed=2)
    arrays = [a, b] + ([] if c_shape is None else [sample(c_shape, seed=3)])
    check("Gemm", arrays, attrs, exact=False)


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shapes", [((6, 5), (5, 3)), ((2, 6, 5), (5, 3)),
                                    ((2, 6, 5), (2, 5, 3))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_bias_add(activation: str, shapes: tuple[tuple[int, ...], ...],
                         dtype: str) -> None:
    arrays = [sample(shapes[0], dtype, seed=1), sample(shapes[1], dtype, seed=2),
              sample((3,), dtype, seed=3)]
    check("MatMulBiasAdd", arrays, {"activation": activation}, exact=False)
    residual = sample((*np.broadcast_shapes(shapes[0][:-2], shapes[1][:-2]), shapes[0][-2], 3),
                      dtype, seed=4)
    check("MatMulBiasAdd", [*arrays, residual], {"activation": activation}, exact=False)


def test_matmul_bias_add_transposed_integers() -> None:
    arrays = [sample((5, 4), "int32", seed=1), sample((3, 5), "int32", seed=2),
              sample((3,), "int32", seed=3)]
    check("MatMulBiasAdd", arrays, {"transpose_a": True, "transpose_b": True,
                                    "activation": "relu"})


# -- convolutions -----------------------------------------------------------------------

def conv_inputs(layout: str, filter_format: str, channels: int, cout: int, groups: int,
                kernel: tuple[int, int] = (3, 3), size: tuple[int, int] = (7, 6),
                dtype: str = "float32") -> list[np.ndarray]:
    n = 2
    shape = (n, channels, *size) if layout == "NCHW" else (n, *size, channels)
    per_group = channels // groups
    weights = (cout, per_group, *kernel) if filter_format == "OIHW" else (*kernel, per_group,
                                                                          cout)
    return [sample(shape, dtype, seed=1), sample(weights, dtype, seed=2)]


WINDOWS: list[dict[str, Any]] = [
    {},
    {"strides": [2, 2], "padding": "SAME"},
    {"dilations": [2, 1], "pads": [1, 2, 0, 1]},
    {"strides": [1, 2], "dilations": [1, 2], "padding": "SAME"},
]
LAYOUTS = [("NHWC", "HWIO"), ("NCHW", "OIHW"), ("NHWC", "OIHW"), ("NCHW", "HWIO")]
GROUPS = [(4, 6, 1), (4, 6, 2), (4, 4, 4), (3, 6, 3)]  # channels, cout, groups


@pytest.mark.parametrize("window", WINDOWS, ids=str)
@pytest.mark.parametrize("layout,filter_format", LAYOUTS)
@pytest.mark.parametrize("channels,cout,groups", GROUPS)
def test_conv2d(window: dict[str, Any], layout: str, filter_format: str, channels: int,
                cout: int, groups: int) -> None:
    arrays = conv_inputs(layout, filter_format, channels, cout, groups)
    attrs = {"data_format": layout, "filter_format": filter_format, "groups": groups, **window}
    check("Conv2D", arrays, attrs, exact=False)
    check("Conv2D", [*arrays, sample((cout,), seed=3)], attrs, exact=False)


@pytest.mark.parametrize("channels,cout,groups", [(4, 6, 1), (4, 6, 2)])
def test_an_nhwc_batch_is_convolved_a_few_samples_at_a_time(
        monkeypatch: pytest.MonkeyPatch, channels: int, cout: int, groups: int) -> None:
    # patches of one sample: 7 * 6 pixels * 9 taps * channels/groups * 4 bytes
    per_sample = 7 * 6 * 9 * (channels // groups) * 4
    monkeypatch.setattr(writers.conv, "PATCH_BYTES", per_sample + 1)  # one sample per product
    arrays = conv_inputs("NHWC", "HWIO", channels, cout, groups)
    arrays[0] = np.concatenate([arrays[0]] * 3)  # a batch of 6
    check("Conv2D", arrays, {"data_format": "NHWC", "groups": groups}, exact=False)


@pytest.mark.parametrize("window", WINDOWS[:3], ids=str)
def test_a_depthwise_convolution_is_done_a_few_rows_at_a_time(
        monkeypatch: pytest.MonkeyPatch, window: dict[str, Any]) -> None:
    monkeypatch.setattr(writers.conv, "DEPTHWISE_BLOCK_BYTES", 6 * 4 * 4)  # 1-2 rows a block
    arrays = conv_inputs("NHWC", "HWIO", 4, 4, 4)
    check("Conv2D", arrays, {"data_format": "NHWC", "groups": 4, **window}, exact=False)
    check("FusedConv2D", [*arrays, sample((4,), seed=3)],
          {"data_format": "NHWC", "groups": 4, "activation": "Relu6", **window}, exact=False)


def test_conv2d_float64_with_four_value_windows() -> None:
    arrays = conv_inputs("NCHW", "OIHW", 3, 5, 1, dtype="float64")
    attrs = {"data_format": "NCHW", "strides": [1, 1, 2, 1], "dilations": [1, 1, 1, 2],
             "padding": "VALID"}
    check("Conv2D", [*arrays, sample((5,), "float64")], attrs, exact=False)


FUSED_ACTIVATIONS: list[dict[str, Any]] = [
    {"activation": ""}, {"activation": "Relu"}, {"activation": "Relu6"},
    {"activation": "Clip", "clip_min": -0.5, "clip_max": 1.0}, {"activation": "Clip",
                                                                "clip_max": 0.3},
    {"activation": "LeakyRelu", "alpha": 0.2}, {"activation": "Sigmoid"},
    {"activation": "Tanh"}, {"activation": "HardSwish"}]


@pytest.mark.parametrize("activation", FUSED_ACTIVATIONS, ids=str)
@pytest.mark.parametrize("layout,filter_format", LAYOUTS[:2])
@pytest.mark.parametrize("channels,cout,groups", [(4, 6, 1), (4, 4, 4)])
@pytest.mark.parametrize("with_bias,with_residual", [(True, True), (False, True), (True, False)])
def test_fused_conv2d(activation: dict[str, Any], layout: str, filter_format: str,
                      channels: int, cout: int, groups: int, with_bias: bool,
                      with_residual: bool) -> None:
    arrays: list[Optional[np.ndarray]] = list(
        conv_inputs(layout, filter_format, channels, cout, groups))
    attrs = {"data_format": layout, "groups": groups, "strides": [2, 2], "padding": "SAME",
             **activation}
    out_shape = (2, cout, 4, 3) if layout == "NCHW" else (2, 4, 3, cout)
    arrays.append(sample((cout,), seed=3) if with_bias else None)
    if with_residual:
        arrays.append(sample(out_shape, seed=4))
    check("FusedConv2D", arrays, attrs, exact=False)


@pytest.mark.parametrize("layout,filter_format", LAYOUTS[:2])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_bn_relu(layout: str, filter_format: str, with_bias: bool) -> None:
    arrays: list[np.ndarray] = conv_inputs(layout, filter_format, 3, 5, 1)
    arrays += [sample((5,), seed=5), sample((5,), seed=6), sample((5,), seed=7),
               sample((5,), seed=8, low=0.1, high=2.0)]
    if with_bias:
        arrays.append(sample((5,), seed=9))
    check("ConvBNReLU", arrays, {"data_format": layout, "padding": "SAME", "epsilon": 1e-3},
          exact=False)


# -- pools and normalizations -----------------------------------------------------------

POOL_WINDOWS: list[dict[str, Any]] = [
    {"ksize": [2, 2], "strides": [2, 2]},
    {"ksize": [3, 3], "strides": [2, 2], "padding": "SAME"},
    {"ksize": [3, 2], "pads": [1, 1, 0, 1], "ceil_mode": True, "strides": [2, 2]},
    {"ksize": [2, 2], "dilations": [2, 2], "pads": [1, 1]},
]


@pytest.mark.parametrize("window", POOL_WINDOWS, ids=str)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("op_type,dtype,extra", [
    ("MaxPool", "float32", {}), ("MaxPool", "float16", {}), ("AvgPool", "float32", {}),
    ("AvgPool", "float64", {"count_include_pad": True})])
def test_pools(window: dict[str, Any], layout: str, op_type: str, dtype: str,
               extra: dict[str, Any]) -> None:
    shape = (2, 3, 7, 6) if layout == "NCHW" else (2, 7, 6, 3)
    check(op_type, [sample(shape, dtype)], {"data_format": layout, **window, **extra},
          exact=op_type == "MaxPool")


def test_pool_with_four_value_window_attributes() -> None:
    check("MaxPool", [sample((2, 3, 7, 6))],
          {"data_format": "NCHW", "ksize": [1, 1, 3, 3], "strides": [1, 1, 2, 2]})


@pytest.mark.parametrize("op_type,dtype", [("GlobalAveragePool", "float32"),
                                           ("GlobalAveragePool", "float64"),
                                           ("GlobalMaxPool", "float32"),
                                           ("GlobalMaxPool", "float16")])
@pytest.mark.parametrize("layout,shape", [("NCHW", (2, 3, 5, 4)), ("NHWC", (2, 5, 4, 3)),
                                          ("NCHW", (2, 3, 7))])
def test_global_pools(op_type: str, dtype: str, layout: str, shape: tuple[int, ...]) -> None:
    check(op_type, [sample(shape, dtype)], {"data_format": layout})


@pytest.mark.parametrize("layout,shape", [("NHWC", (2, 3, 4, 5)), ("NCHW", (2, 5, 3, 4)),
                                          ("NHWC", (6, 5))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_batch_norm(layout: str, shape: tuple[int, ...], dtype: str) -> None:
    parameters = [sample((5,), dtype, seed=s) for s in (1, 2, 3)]
    parameters.append(sample((5,), dtype, seed=4, low=0.1, high=2.0))
    check("FusedBatchNorm", [sample(shape, dtype), *parameters],
          {"data_format": layout, "epsilon": 1e-3})


@pytest.mark.parametrize("axis,scale_shape", [(-1, (6,)), (1, (5, 6)), (1, (1, 6)), (0, (6,))])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_normalization(axis: int, scale_shape: tuple[int, ...], with_bias: bool,
                             dtype: str) -> None:
    arrays = [sample((3, 5, 6), dtype), sample(scale_shape, dtype, seed=1)]
    if with_bias:
        arrays.append(sample(scale_shape, dtype, seed=2))
    check("LayerNormalization", arrays, {"axis": axis, "epsilon": 1e-5})


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax(op_type: str, axis: int, dtype: str) -> None:
    check(op_type, [sample((3, 5, 6), dtype, low=-20, high=20)], {"axis": axis})


# -- coverage ---------------------------------------------------------------------------

def test_every_covered_op_is_registered() -> None:
    registered = set(all_op_types())
    assert set(writers.covered_op_types()) <= registered
    assert set(writers.WRITERS) == set(writers.covered_op_types())


HOT_INPLACE = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Clip", "BiasAdd",
               "FusedBatchNorm"}


def test_which_inplace_ops_have_writers() -> None:
    inplace = {schema.op_type for schema in ops_with(Trait.INPLACE)}
    covered = inplace & set(writers.covered_op_types())
    assert HOT_INPLACE <= covered
    # the INPLACE ops left to bind: each reference has semantics the writers do not copy
    assert inplace - covered == {"BitShift", "RMSNormalization", "Shrink"}


@pytest.mark.parametrize("op_type,arrays,attrs", [
    ("Div", [np.ones((3,), np.int32), np.ones((3,), np.int32)], {}),
    ("Pow", [np.ones((3,), np.float32), np.ones((3,), np.int32)], {}),
    ("Swish", [np.ones((3,), np.float16)], {}),
    ("Conv2D", [np.ones((1, 3, 3, 2), np.float16), np.ones((1, 1, 2, 2), np.float16)], {}),
    ("MatMul", [np.ones((2, 2), np.float16), np.ones((2, 2), np.float16)], {}),
    ("ReduceMean", [np.ones((2, 2), np.int32)], {}),
    ("AvgPool", [np.ones((1, 3, 3, 2), np.float16)], {"ksize": [2, 2]}),
    ("Shrink", [np.ones((3,), np.float32)], {}),
])
def test_nodes_without_writers(op_type: str, arrays: list[np.ndarray],
                               attrs: dict[str, Any]) -> None:
    assert writers.writer_for(node_for(op_type, arrays, attrs)) is None


def test_bfloat16_and_float8_get_no_writer() -> None:
    bf16 = DataType.DT_BF16.np_dtype
    assert writers.writer_for(node_for("Add", [np.ones(3, bf16), np.ones(3, bf16)])) is None
    cast = node_for("Cast", [np.ones(3, np.float32)], {"dtype": "float8_e5m2"})
    assert writers.writer_for(cast) is None


def test_the_numpy_engine_binds_writers() -> None:
    engine = get_engine("numpy")
    x, y = sample((3, 4)), sample((4,), seed=1)
    writer = engine.bind_writer(node_for("Add", [x, y]))
    assert writer is not None
    out = np.empty((3, 4), np.float32)
    writer([x, y], [out])
    np.testing.assert_array_equal(out, x + y)
    assert engine.bind_writer(node_for("Shrink", [x])) is None


# -- the fused engine -------------------------------------------------------------------

FUSED_STEPS = [
    ["Mul in0 in1", "Add s0 1.5:float32", "Max s1 in0"],  # one loop
    ["Mul in0 0.5:float32", "Add s0 1.0:float32", "Tanh s1", "Mul s2 in0", "Relu s3"],  # call
    ["Exp in0", "Log s0", "Tanh s1"],  # calls only
]


def fused_node(steps: list[str], arrays: list[np.ndarray],
               shapes: Optional[list[tuple[int, ...]]] = None) -> Node:
    graph = Graph("fused")
    inputs = [create_node("Data", [], {"shape": list(s), "dtype": a.dtype.name}, f"x{i}", graph)
              for i, (a, s) in enumerate(zip(arrays, shapes or [a.shape for a in arrays]))]
    return create_node("FusedElementwise", inputs, {"steps": steps}, "fused", graph)


@pytest.mark.parametrize("steps", FUSED_STEPS, ids=str)
@pytest.mark.parametrize("rows,dynamic", [(300, False), (3000, False), (10, True),
                                          (3000, True)])
def test_fused_engine_writes_into_the_given_output(steps: list[str], rows: int,
                                                   dynamic: bool) -> None:
    pytest.importorskip("numba")
    engine = get_engine("fused")
    count = 1 + max(int(word[2:]) for step in steps for word in step.split()
                    if word.startswith("in"))
    arrays = [sample((rows, 257), seed=k, low=0.1, high=3) for k in range(count)]
    shapes = [(-1, 257)] * count if dynamic else None
    node = fused_node(steps, arrays, shapes)
    writer = engine.bind_writer(node)
    assert writer is not None
    expected = engine.bind(node)(arrays)[0]
    for byte in (0xFF, 0x00):
        out = garbage(expected.shape, expected.dtype, byte)
        writer(arrays, [out])
        np.testing.assert_array_equal(out, expected)


def test_fused_kernel_returns_the_output_it_was_given() -> None:
    pytest.importorskip("numba")
    from ge.engines.fused.runner import FusedKernel

    arrays = [sample((300, 257), seed=k) for k in range(2)]
    kernel = get_engine("fused").bind(fused_node(FUSED_STEPS[0], arrays))
    assert isinstance(kernel, FusedKernel)
    out = np.empty((300, 257), np.float32)
    assert kernel(arrays, out)[0] is out


def test_the_fused_engine_gives_no_writer_for_what_it_cannot_run() -> None:
    x = sample((4, 4))
    assert get_engine("fused").bind_writer(node_for("Add", [x, x])) is None


@pytest.fixture(autouse=True)
def _silent_floating_point():
    """The runtime calls writers with floating-point warnings silenced; so do these tests."""
    with np.errstate(all="ignore"):
        yield


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize("shape,pads,axes", [
    ((1, 1, 512), [0, 0, 64, 0, 0, 64], None),          # a VAD's reflect before its STFT
    ((2, 3, 5, 7), [0, 0, 1, 2, 0, 0, 3, 1], None),      # corners, uneven sides
    ((2, 3, 5, 7), [0, 1, -1, 2, 0, 0, 2, -2], None),    # negative pads crop
    ((4, 6), [3, 0, 0, 5], None),                        # the widest reflect, no end pad
    ((3, 4, 5), [2, 1, 1, 2], [2, -3]),                  # chosen axes
])
def test_pad(mode: str, shape: tuple[int, ...], pads: list[int],
             axes: Optional[list[int]]) -> None:
    arrays: list[Optional[np.ndarray]] = [sample(shape, seed=5), np.array(pads, np.int64)]
    arrays.append(np.array(1.5, np.float32) if mode == "constant" else None)
    if axes is not None:
        arrays.append(np.array(axes, np.int64))
    check("Pad", arrays, {"mode": mode}, const=(1, 2, 3))


def test_a_wrap_wider_than_its_axis() -> None:
    check("Pad", [sample((2, 3), seed=6), np.array([5, 0, 7, 1], np.int64)], {"mode": "wrap"},
          const=(1,))


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0], [129], [1], None),                       # the first half of an STFT's bins
    ([129], [2 ** 62], [1], None),                 # to the end, clamped
    ([-1, 0], [-1000, 3], [2, 0], [-1, 2]),        # backwards, and every other row
    ([1, 1, 1], [-1, -1, -1], None, None),         # default axes, negative ends
    ([5], [2], [-1], None),                        # empty
])
def test_slice(starts: list[int], ends: list[int], axes: Optional[list[int]],
               steps: Optional[list[int]]) -> None:
    x = sample((4, 258, 6), seed=7)
    arrays: list[Optional[np.ndarray]] = [x, np.array(starts, np.int64),
                                          np.array(ends, np.int64)]
    arrays.append(None if axes is None else np.array(axes, np.int64))
    arrays.append(None if steps is None else np.array(steps, np.int64))
    check("Slice", arrays, const=(1, 2, 3, 4))


def test_a_slice_writer_fed_new_bounds_each_run() -> None:
    """The index kept per shape and bounds: other bounds, or another shape, recompute it."""
    x = sample((6, 8), seed=8)
    node = node_for("Slice", [x, np.array([0]), np.array([3]), np.array([1])])
    writer = writers.writer_for(node)
    assert writer is not None
    for start, stop, source in ((0, 3, x), (2, 5, x), (0, 3, x[:, ::-1].copy())):
        out = np.empty((6, 3), np.float32)
        writer([source, np.array([start]), np.array([stop]), np.array([1])], [out])
        np.testing.assert_array_equal(out, source[:, start:stop])


def test_a_pad_writer_fed_new_pads_and_shapes_each_run() -> None:
    """The slices kept per shape and pads: other pads, or another shape, plan anew; a crop
    beside a wrap wider than its axis goes to np.pad on the cropped input."""
    node = node_for("Pad", [sample((1, 1, 8)), np.array([0, 0, 2, 0, 0, 2], np.int64)],
                    {"mode": "reflect"})
    writer = writers.writer_for(node)
    assert writer is not None
    for shape, pads in (((1, 1, 8), [0, 0, 2, 0, 0, 2]), ((1, 1, 8), [0, 0, 3, 0, 0, 1]),
                        ((2, 1, 6), [0, 0, 2, 0, 0, 2]), ((1, 1, 8), [0, 0, 2, 0, 0, 2])):
        x = sample(shape, seed=len(pads) + shape[0])
        widths = [(pads[i], pads[i + 3]) for i in range(3)]
        out = np.empty([n + b + e for n, (b, e) in zip(shape, widths)], np.float32)
        writer([x, np.array(pads, np.int64)], [out])
        np.testing.assert_array_equal(out, np.pad(x, widths, mode="reflect"))
    check("Pad", [sample((5, 3), seed=9), np.array([-2, 7, 0, 0], np.int64)], {"mode": "wrap"},
          const=(1,))


@pytest.mark.parametrize("steps,shapes", [
    (["Mul in0 in0", "Mul in1 in1", "Add s0 s1", "Sqrt s2"], [(1, 129, 4), (1, 129, 4)]),
    (["Mul in0 0.5:float32", "Add s0 in1", "Sigmoid s1"], [(2, 3, 4), (1, 4)]),
    (["Sub in0 in1", "Max s0 in2", "Where in3 s1 in0"], [(3, 5), (5,), (3, 1), (3, 5)]),
    (["Gelu in0", "Mul s0 in1"], [(4, 6), (4, 6)]),
])
def test_fused_elementwise(steps: list[str], shapes: list[tuple[int, ...]]) -> None:
    arrays = [sample(shape, seed=index, edges=True) for index, shape in enumerate(shapes)]
    if steps[-1].startswith("Where"):
        arrays[3] = sample(shapes[3], "bool", seed=3)
    attrs = {"steps": steps}
    check("FusedElementwise", arrays, attrs)
    # the output given the buffer of an input other than the first step's first operand
    node = node_for("FusedElementwise", arrays, attrs)
    writer = writers.writer_for(node)
    assert writer is not None
    expected = run_kernel(get_schema("FusedElementwise"), "op", arrays, attrs)[0]
    last = len(arrays) - 1 if steps[-1].startswith("Where") else 1
    if arrays[last].shape == expected.shape and arrays[last].dtype == expected.dtype:
        buffer = arrays[last].copy()
        writer([*arrays[:last], buffer, *arrays[last + 1:]], [buffer])
        np.testing.assert_array_equal(buffer, expected)
