"""export_onnx writes valid ONNX that onnxruntime runs to the original model's numbers."""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import warnings
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest

import ge
from examples import zoo
from ge.ops import fused_conv, fused_elementwise, fused_matmul  # noqa: F401 - registered ops
from tests.examples.test_seed_examples import EXAMPLES
from tests.op_harness import build_op_graph, feeds_for
from tests.tolerance import rel_err


def run_with_onnxruntime(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, [np.asarray(a) for a in inputs])))


def assert_matches(got, want, rtol: float, atol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def ge_passes(case) -> ge.Graph | None:
    """The parsed graph when GE runs the case correctly, else None."""
    inputs, expected = case.data_sets[0]
    try:
        graph = ge.parse_onnx(case.model)
        outputs = ge.Session(ge.compile(graph)).run(
            dict(zip([v.name for v in graph.inputs], inputs)))
        for got, want in zip(outputs.values(), expected):
            assert_matches(got, want, case.rtol, case.atol, case.name)
    except (ge.errors.GEError, AssertionError):
        return None
    return graph


def onnxruntime_outputs(model: onnx.ModelProto, inputs: list) -> list[np.ndarray] | None:
    """The original model's outputs by onnxruntime, or None where onnxruntime cannot run it."""
    try:
        return run_with_onnxruntime(model, inputs)
    except Exception:  # noqa: BLE001 - onnxruntime lacks some ops, opsets and forms
        return None


@functools.lru_cache(maxsize=1)
def node_cases_ge_runs() -> tuple[tuple[Any, ge.Graph], ...]:
    """Every ONNX node conformance case GE runs correctly, with its parsed graph."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
        passing = [(case, ge_passes(case)) for case in cases]
    return tuple((case, graph) for case, graph in passing if graph is not None)


def test_every_node_case_ge_runs_round_trips_through_onnxruntime():
    """parse -> export -> onnxruntime gives what onnxruntime gives on the original model."""
    failures, checked = [], 0
    for case, graph in node_cases_ge_runs():
        inputs = case.data_sets[0][0]
        original = onnxruntime_outputs(case.model, inputs)
        if original is None:
            continue
        try:
            exported = ge.export_onnx(graph)
            for got, want in zip(run_with_onnxruntime(exported, inputs), original):
                assert_matches(got, want, case.rtol, case.atol, case.name)
            checked += 1
        except Exception as error:  # noqa: BLE001 - collected and reported together
            failures.append(f"{case.name}: {type(error).__name__}: {error}"[:300])
    assert not failures, "\n".join(failures)
    assert checked > 1000


@pytest.mark.parametrize("name", ["simple_cnn", "resnet18", "mobilenet_v2", "bert"])
def test_real_models_round_trip(exported, name, tmp_path):
    _, path = exported(name, False)
    graph = ge.parse_onnx(path)
    target = tmp_path / f"{name}-ge.onnx"
    ge.export_onnx(graph, target)
    onnx.checker.check_model(onnx.load(str(target)), full_check=True)
    feeds = zoo.example_feeds(name, batch=2, seed=3)
    original = zoo.run_onnxruntime(path, feeds)
    again = zoo.run_onnxruntime(target, feeds)
    for got, want in zip(again, original):
        assert rel_err(got, want) <= 1e-5


def test_the_seeds_nhwc_cnn_exports_through_transposes():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from seed_4_2_cnn import build_cnn_model
    finally:
        sys.path.remove(str(EXAMPLES))
    np.random.seed(3)
    with contextlib.redirect_stdout(io.StringIO()):
        graph = build_cnn_model()
    model = ge.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    images = np.random.default_rng(0).standard_normal((2, 32, 32, 3), dtype=np.float32)
    expected = ge.Session(ge.compile(graph)).run({"input": images})["fc2_softmax"]
    (got,) = run_with_onnxruntime(model, [images])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 0  # still dynamic


def test_export_refuses_what_is_not_a_graph():
    with pytest.raises(ge.errors.GraphError, match="expects a ge.Graph"):
        ge.export_onnx("model.onnx")


# -- every registry op has an ONNX form ---------------------------------------------------

def _array(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _bytes(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True,
                                                dtype=dtype)


def _spread(shape: tuple[int, ...], dtype: Any = np.float64, step: float = 0.25) -> np.ndarray:
    """Evenly spaced values around zero: divided by a quantizer's scale they land on halves
    (where rounding to even matters) and, with a large step, past the saturation bounds."""
    count = int(np.prod(shape))
    return ((np.arange(count) - count // 2) * step).reshape(shape).astype(dtype)


_NHWC_WINDOW = {"strides": [1, 2, 2, 1], "data_format": "NHWC"}

# What no node case reaches: the TensorFlow layouts, GE's own attributes and dtypes ONNX's
# op does not take. (label, op type, inputs, attributes)
HAND_BUILT: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("conv2d_nhwc_same", "Conv2D",
     {"input": _array((2, 7, 6, 3)), "filter": _array((3, 3, 3, 4), seed=1),
      "bias": _array((4,), seed=2)}, {**_NHWC_WINDOW, "padding": "SAME"}),
    ("conv2d_nchw_float64_grouped", "Conv2D",
     {"input": _array((1, 4, 7, 6), np.float64), "filter": _array((6, 2, 2, 3), np.float64, 1),
      "bias": _array((6,), np.float64, 2)},
     {"data_format": "NCHW", "groups": 2, "strides": [1, 2], "dilations": [2, 1],
      "padding": "EXPLICIT", "pads": [1, 0, 2, 1]}),
    ("conv3d_ndhwc_same", "Conv3D",
     {"input": _array((1, 4, 5, 6, 2)), "filter": _array((2, 3, 2, 2, 3), seed=1)},
     {"strides": [1, 1, 2, 1, 1], "padding": "SAME"}),
    ("conv3d_ncdhw_float64", "Conv3D",
     {"input": _array((1, 2, 4, 5, 4), np.float64), "filter": _array((3, 2, 2, 2, 2),
                                                                     np.float64, 1),
      "bias": _array((3,), np.float64, 2)},
     {"data_format": "NCDHW", "padding": "EXPLICIT", "pads": [1, 0, 0, 1, 1, 1]}),
    ("conv3d_ncdhw_dilated", "Conv3D",
     {"input": _array((2, 4, 5, 6, 5)), "filter": _array((2, 2, 3, 2, 2), seed=1)},
     {"data_format": "NCDHW", "groups": 2, "dilations": [1, 2, 1], "strides": [2, 1, 1]}),
    ("max_pool_nhwc_same", "MaxPool", {"input": _array((2, 7, 6, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 3, 3, 1], "padding": "SAME"}),
    ("avg_pool_nhwc_ceil_pad", "AvgPool", {"input": _array((2, 7, 6, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 3, 2, 1], "padding": "EXPLICIT", "pads": [1, 0, 1, 1],
      "ceil_mode": True, "count_include_pad": True}),
    ("avg_pool_nhwc_same", "AvgPool", {"input": _array((1, 5, 6, 2))},
     {**_NHWC_WINDOW, "ksize": [1, 2, 3, 1], "padding": "SAME"}),
    ("max_pool3d_ndhwc_same", "MaxPool3D", {"input": _array((1, 5, 4, 6, 2))},
     {"ksize": [2, 2, 3], "strides": [2, 1, 2], "padding": "SAME"}),
    ("avg_pool3d_ndhwc_ceil", "AvgPool3D", {"input": _array((2, 5, 4, 6, 3))},
     {"ksize": [2, 3, 2], "strides": [2, 2, 2], "ceil_mode": True}),
    ("avg_pool3d_ncdhw_pads", "AvgPool3D", {"input": _array((1, 2, 5, 4, 6))},
     {"ksize": [3, 2, 2], "data_format": "NCDHW", "padding": "EXPLICIT",
      "pads": [1, 1, 0, 1, 1, 0], "count_include_pad": True}),
    ("max_pool_with_argmax_tensorflow", "MaxPoolWithArgmax", {"input": _array((2, 7, 6, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 3, 2, 1], "padding": "SAME"}),
    ("max_pool_with_argmax_nhwc_batch_columns", "MaxPoolWithArgmax",
     {"input": _array((2, 6, 5, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 2, 2, 1], "include_batch_in_index": True,
      "storage_order": 1}),
    ("max_pool_with_argmax_nchw_columns", "MaxPoolWithArgmax", {"input": _array((2, 3, 6, 7))},
     {"data_format": "NCHW", "ksize": [3, 3], "strides": [2, 2], "padding": "EXPLICIT",
      "pads": [1, 1, 0, 1], "storage_order": 1}),
    ("fused_batch_norm_nhwc", "FusedBatchNorm",
     {"x": _array((2, 4, 3, 5)), "scale": _array((5,), seed=1), "offset": _array((5,), seed=2),
      "mean": _array((5,), seed=3), "variance": np.abs(_array((5,), seed=4)) + 0.5}, {}),
    ("global_average_pool_nhwc", "GlobalAveragePool", {"x": _array((2, 4, 3, 5))},
     {"data_format": "NHWC"}),
    ("global_max_pool_nhwc", "GlobalMaxPool", {"x": _array((2, 4, 3, 5))},
     {"data_format": "NHWC"}),
    ("bias_add_nhwc", "BiasAdd", {"value": _array((2, 3, 4, 5)), "bias": _array((5,), seed=1)},
     {}),
    ("bias_add_nchw", "BiasAdd", {"value": _array((2, 3, 4, 5)), "bias": _array((3,), seed=1)},
     {"data_format": "NCHW"}),
    ("matmul_transposed", "MatMul", {"a": _array((2, 4, 3)), "b": _array((2, 5, 4), seed=1)},
     {"transpose_a": True, "transpose_b": True}),
    ("batch_normalization_training_statistics", "BatchNormalizationTraining",
     {"X": _array((3, 4, 2, 5)), "scale": _array((4,), seed=1), "B": _array((4,), seed=2),
      "input_mean": _array((4,), seed=3), "input_var": np.abs(_array((4,), seed=4))},
     {"momentum": 0.8}),
    ("quantize_float64_per_axis", "QuantizeLinear",
     {"x": _spread((2, 3, 4), step=1.25), "y_scale": np.array([0.5, 0.0625, 1.0]),
      "y_zero_point": np.array([3, -4, 0], np.int8)}, {"axis": 1}),
    ("quantize_float64_blocked", "QuantizeLinear",
     {"x": _spread((2, 5)), "y_scale": np.array([[0.5, 2.0], [1.0, 0.25]]),
      "y_zero_point": np.array([[3, 40], [0, 128]], np.uint8)}, {"axis": 1, "block_size": 3}),
    ("quantize_float16_in_float32", "QuantizeLinear",
     {"x": _spread((3, 4), np.float16), "y_scale": np.array(0.75, np.float16)}, {}),
    ("quantize_float64_to_float8", "QuantizeLinear",
     {"x": _spread((4, 4), step=40.0), "y_scale": np.array(0.5)},
     {"output_dtype": ge.DataType.DT_FLOAT8_E4M3FN}),
    ("dequantize_int32_float64_scale", "DequantizeLinear",
     {"x": np.array([[2 ** 30 + 1, -7, 5]], np.int32), "x_scale": np.array([0.1, 3.0, 1e-3]),
      "x_zero_point": np.array([1, 2, 3], np.int32)}, {"axis": 1}),
    ("dequantize_blocked", "DequantizeLinear",
     {"x": _bytes((2, 5), np.uint8), "x_scale": np.array([[0.5, 2.0], [1.0, 0.25]], np.float32),
      "x_zero_point": np.array([[3, 40], [0, 128]], np.uint8)}, {"axis": 1, "block_size": 3}),
    ("range_of_one_element_tensors", "Range",
     {"start": np.array([2], np.int64), "limit": np.array([11], np.int64),
      "delta": np.array([3], np.int64)}, {}),
    ("range_float16", "Range",
     {"start": np.array(0.5, np.float16), "limit": np.array(4, np.float16),
      "delta": np.array(0.75, np.float16)}, {}),
    ("fused_conv2d_nhwc_residual_relu6", "FusedConv2D",
     {"input": _array((2, 6, 5, 3)), "filter": _array((3, 3, 3, 4), seed=1),
      "bias": _array((4,), seed=2), "residual": _array((2, 3, 3, 4), seed=3)},
     {**_NHWC_WINDOW, "padding": "SAME", "activation": "Relu6"}),
    ("conv_bn_relu_nchw", "ConvBNReLU",
     {"input": _array((2, 3, 6, 5)), "filter": _array((4, 3, 3, 3), seed=1),
      "scale": _array((4,), seed=2), "offset": _array((4,), seed=3),
      "mean": _array((4,), seed=4), "variance": np.abs(_array((4,), seed=5)) + 0.5},
     {"data_format": "NCHW", "padding": "EXPLICIT", "pads": [1, 1, 0, 1]}),
    ("matmul_bias_add_gelu_tanh", "MatMulBiasAdd",
     {"a": _array((2, 3, 4)), "b": _array((5, 4), seed=1), "bias": _array((5,), seed=2)},
     {"transpose_b": True, "activation": "gelu_tanh"}),
    ("fused_elementwise_chain", "FusedElementwise",
     {"inputs": [_array((3, 4)), _array((4,), seed=1)]},
     {"steps": ["Mul in0 0.5:float32", "Add s0 in1", "LeakyRelu s1 alpha=0.1"]}),
    ("max_pool_nhwc_same_dynamic", "MaxPool", {"input": _array((2, 7, 6, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 3, 3, 1], "padding": "SAME"}),
    ("avg_pool_nhwc_same_dynamic", "AvgPool", {"input": _array((1, 5, 6, 2))},
     {**_NHWC_WINDOW, "ksize": [1, 2, 3, 1], "padding": "SAME"}),
    ("max_pool_with_argmax_dynamic", "MaxPoolWithArgmax", {"input": _array((2, 7, 6, 3))},
     {**_NHWC_WINDOW, "ksize": [1, 3, 2, 1], "padding": "SAME", "storage_order": 1}),
    ("conv2d_float64_dynamic", "Conv2D",
     {"input": _array((1, 5, 6, 2), np.float64), "filter": _array((2, 2, 2, 3), np.float64, 1)},
     {**_NHWC_WINDOW, "padding": "SAME"}),
    ("cast_float_to_int8", "Cast", {"x": _array((3, 4)) * 50}, {"dtype": ge.DataType.DT_INT8}),
    # onnxruntime's contrib op; one batch row, so its thread count cannot matter
    ("dynamic_quantize_lstm_contrib", "DynamicQuantizeLSTM",
     {"X": _array((4, 1, 5)), "W": _bytes((2, 5, 16), np.int8, 1),
      "R": _bytes((2, 4, 16), np.int8, 2), "B": _array((2, 32), seed=3) * 0.1,
      "sequence_lens": np.array([3], np.int32), "initial_h": _array((2, 1, 4), seed=4),
      "initial_c": _array((2, 1, 4), seed=5), "P": _array((2, 12), seed=6) * 0.1,
      "W_scale": np.abs(_array((2, 16), seed=7)) * 0.01 + 0.005,
      "W_zero_point": np.zeros((2, 16), np.int8), "R_scale": np.array([0.02, 0.01], np.float32),
      "R_zero_point": np.zeros(2, np.int8)},
     {"direction": "bidirectional", "clip": 2.0}),
]


# The hand-built cases whose inputs are declared with unknown sizes.
DYNAMIC = {"max_pool_nhwc_same_dynamic": ("input",), "avg_pool_nhwc_same_dynamic": ("input",),
           "max_pool_with_argmax_dynamic": ("input",), "conv2d_float64_dynamic": ("input",)}


def run_exported(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
                 ) -> tuple[list[np.ndarray], str]:
    """The exported model's outputs by onnxruntime, or by ONNX's reference evaluator where
    onnxruntime cannot load the model (an op or opset it lacks)."""
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - onnxruntime lacks some ops, opsets and forms
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, feeds)), "reference evaluator"
    return session.run(None, feeds), "onnxruntime"


def exported_matches_ge(graph: ge.Graph, feeds: dict[str, np.ndarray], rtol: float,
                        atol: float, what: str) -> str:
    """Export ``graph``, run it, and compare with GE's own outputs; return the runner."""
    feeds = {name: np.asarray(array) for name, array in feeds.items()}
    expected = list(ge.Session(ge.compile(graph)).run(feeds).values())
    got, runner = run_exported(ge.export_onnx(graph), feeds)
    assert len(got) == len(expected), f"{what}: {len(got)} outputs, GE gives {len(expected)}"
    for index, (value, want) in enumerate(zip(got, expected)):
        value, want = np.asarray(value), np.asarray(want)
        if value.dtype.kind in "iu" and want.dtype.kind == "V":  # float8 bits from onnxruntime
            value = value.view(want.dtype)
        wide = want.astype(np.float64) if want.dtype.kind in "fV" else np.zeros(0)
        scale = float(np.max(np.abs(wide[np.isfinite(wide)]), initial=0.0))
        assert_matches(value, want, rtol, max(atol, rtol * scale),  # libraries round apart
                       f"{what} output {index} ({runner})")
    return runner


def _op_types(graph: ge.Graph) -> set[str]:
    found = set()
    for node in graph.nodes:
        found.add(node.op_type)
        for value in node.attrs.values():
            if isinstance(value, ge.Graph):
                found |= _op_types(value)
    return found


def _hand_built_failures(covered: dict[str, str]) -> list[str]:
    failures = []
    for label, op_type, inputs, attrs in HAND_BUILT:
        try:
            graph = build_op_graph(op_type, inputs, attrs, dynamic=DYNAMIC.get(label, ()))
            runner = exported_matches_ge(graph, feeds_for(inputs), 1e-5, 1e-6, label)
            covered.setdefault(op_type, f"{label} ({runner})")
        except Exception as error:  # noqa: BLE001 - collected and reported together
            failures.append(f"{label}: {type(error).__name__}: {error}"[:400])
    return failures


def _node_case_witness(op_type: str) -> tuple[str | None, str]:
    """The first node case using ``op_type`` whose export gives GE's numbers, or the error of
    the first that does not."""
    first_error = f"{op_type}: no node case GE runs uses it"
    tried = 0
    for case, graph in node_cases_ge_runs():
        if op_type not in _op_types(graph):
            continue
        feeds = dict(zip([v.name for v in graph.inputs], case.data_sets[0][0]))
        try:
            runner = exported_matches_ge(graph, feeds, case.rtol, case.atol, case.name)
            return f"{case.name} ({runner})", ""
        except Exception as error:  # noqa: BLE001 - collected and reported together
            if not tried:
                first_error = f"{op_type}: {case.name}: {type(error).__name__}: {error}"[:400]
        tried += 1
    return None, first_error


def test_every_registry_op_has_an_onnx_form():
    """Each registry op, in a graph built with GE's API or parsed from a node case, exports
    to ONNX that onnxruntime (or ONNX's reference evaluator, for ops onnxruntime lacks)
    runs to GE's own outputs."""
    covered: dict[str, str] = {"Data": "every graph", "Const": "every graph"}
    failures = _hand_built_failures(covered)
    for op_type in ge.ops.all_op_types():
        if op_type in covered:
            continue
        witness, error = _node_case_witness(op_type)
        if witness is None:
            failures.append(error)
        else:
            covered[op_type] = witness
    assert not failures, "\n".join(failures)
    assert set(covered) == set(ge.ops.all_op_types())


@pytest.mark.parametrize("name", ["resnet18", "bert"])
def test_optimized_real_models_round_trip(exported, name, tmp_path):
    """What ge.compile makes of a model (fused convolutions, MatMulBiasAdd, Attention,
    FusedElementwise, NHWC layout) exports to ONNX that onnxruntime runs to the numbers."""
    _, path = exported(name, False)
    optimized = ge.compile(ge.parse_onnx(path)).graph
    target = tmp_path / f"{name}-optimized.onnx"
    ge.export_onnx(optimized, target)
    feeds = zoo.example_feeds(name, batch=2, seed=3)
    original = zoo.run_onnxruntime(path, feeds)
    again = zoo.run_onnxruntime(target, feeds)
    for got, want in zip(again, original):
        assert rel_err(got, want) <= 1e-5


def test_unused_optional_outputs_are_left_out_and_the_opset_fits_the_ops():
    """A GE-built Attention (ONNX opset 23) whose caches nothing reads: the model is written
    at an opset that has Attention, and the optional outputs are left out."""
    inputs = {name: _array((1, 2, 3, 4), seed=seed) for seed, name in enumerate("QKV")}
    graph = build_op_graph("Attention", inputs)
    graph.set_outputs([graph.node("op").outputs[0]])
    model = ge.export_onnx(graph)
    (attention,) = [node for node in model.graph.node if node.op_type == "Attention"]
    assert list(attention.output) == [graph.outputs[0].name]
    assert model.opset_import[0].version >= 23
    exported_matches_ge(graph, feeds_for(inputs), 1e-5, 1e-6, "attention")
    with pytest.raises(ge.errors.UnsupportedOpError, match="opset 21 has no Attention"):
        ge.export_onnx(graph, opset=21)
