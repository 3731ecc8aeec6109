"""RNN, GRU, LSTM and the quantization ops: what ONNX's node suite does not cover.

Recurrent layers with sequence lengths, both directions, peepholes, clipping,
the batch-first layout and non-default activations are compared with
onnxruntime; shape inference is checked with dynamic dimensions, and bad
inputs must raise GE's errors naming the node.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnxruntime as ort  # noqa: E402
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.backend
from ge.errors import DTypeError, ShapeError
from ge.ops import create_node, get_schema
from tests.tolerance import assert_close

RNG = np.random.default_rng(1)
_NAMES = {"RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
          "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
          "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _recurrent_inputs(op_type: str, seq: int, batch: int, size: int, hidden: int,
                      directions: int, layout: int, lengths: bool) -> dict[str, np.ndarray]:
    gates = _GATES[op_type]
    x_shape = (seq, batch, size) if layout == 0 else (batch, seq, size)
    state = (directions, batch, hidden) if layout == 0 else (batch, directions, hidden)
    inputs = {
        "X": RNG.standard_normal(x_shape).astype(np.float32),
        "W": RNG.standard_normal((directions, gates * hidden, size)).astype(np.float32) * 0.5,
        "R": RNG.standard_normal((directions, gates * hidden, hidden)).astype(np.float32) * 0.5,
        "B": RNG.standard_normal((directions, 2 * gates * hidden)).astype(np.float32) * 0.1,
        "initial_h": RNG.standard_normal(state).astype(np.float32),
    }
    if lengths:
        inputs["sequence_lens"] = RNG.integers(1, seq + 1, batch).astype(np.int32)
    if op_type == "LSTM":
        inputs["initial_c"] = RNG.standard_normal(state).astype(np.float32)
        inputs["P"] = RNG.standard_normal((directions, 3 * hidden)).astype(np.float32)
    return inputs


def _compare_with_onnxruntime(op_type: str, inputs: dict[str, np.ndarray],
                              attrs: dict[str, Any]) -> None:
    names = [n if n in inputs else "" for n in _NAMES[op_type]]
    while names and not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][:3 if op_type == "LSTM" else 2]
    codes = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outputs, **attrs)], "rnn",
        [helper.make_tensor_value_info(n, codes[a.dtype], a.shape) for n, a in inputs.items()
         if n not in ("W", "R")],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(inputs[n], n) for n in ("W", "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    feeds = {n: a for n, a in inputs.items() if n not in ("W", "R")}
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    actual = ge.backend.prepare(model).run(feeds)
    for name, got, want in zip(outputs, actual, expected):
        assert_close(got, want, accumulate=True, what=f"{op_type} {name}")


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lengths_against_onnxruntime(op_type: str, direction: str) -> None:
    directions = 2 if direction == "bidirectional" else 1
    inputs = _recurrent_inputs(op_type, 5, 3, 4, 3, directions, 0, lengths=True)
    _compare_with_onnxruntime(op_type, inputs, {"hidden_size": 3, "direction": direction})


def _run_ge(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]
            ) -> list[np.ndarray]:
    graph = ge.Graph(op_type)
    values = [None if n not in inputs else
              _data(graph, n, list(inputs[n].shape), ge.DataType.parse(inputs[n].dtype))
              for n in _NAMES[op_type]]
    node = create_node(op_type, values, attrs, "cell", graph)
    graph.set_outputs(node.outputs)
    results = ge.Session(ge.compile(graph)).run(inputs)
    return [results[v.name] for v in node.outputs]


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_batch_first_layout_matches_the_sequence_first_one(op_type: str) -> None:
    """onnxruntime refuses layout=1: compare with layout 0 on transposed data."""
    inputs = _recurrent_inputs(op_type, 4, 2, 3, 5, 2, 1, lengths=True)
    attrs = {"hidden_size": 5, "direction": "bidirectional"}
    batch_first = _run_ge(op_type, inputs, dict(attrs, layout=1))
    swapped = {n: (a.swapaxes(0, 1) if n in ("X", "initial_h", "initial_c") else a)
               for n, a in inputs.items()}
    sequence_first = _run_ge(op_type, swapped, attrs)
    assert_close(batch_first[0], sequence_first[0].transpose(2, 0, 1, 3))
    for got, want in zip(batch_first[1:], sequence_first[1:]):
        assert_close(got, want.swapaxes(0, 1))


def test_gru_linear_before_reset_and_clip() -> None:
    inputs = _recurrent_inputs("GRU", 4, 2, 3, 4, 1, 0, lengths=False)
    _compare_with_onnxruntime("GRU", inputs, {"hidden_size": 4, "linear_before_reset": 1,
                                              "clip": 0.7})


def test_activations_with_parameters() -> None:
    inputs = _recurrent_inputs("LSTM", 3, 2, 3, 4, 1, 0, lengths=False)
    _compare_with_onnxruntime("LSTM", inputs, {
        "hidden_size": 4, "activations": ["HardSigmoid", "LeakyRelu", "Tanh"],
        "activation_alpha": [0.3, 0.1], "activation_beta": [0.4]})
    inputs = _recurrent_inputs("RNN", 3, 2, 3, 4, 2, 0, lengths=False)
    _compare_with_onnxruntime("RNN", inputs, {
        "hidden_size": 4, "direction": "bidirectional", "activations": ["Relu", "Sigmoid"]})


def test_lstm_input_forget() -> None:
    inputs = _recurrent_inputs("LSTM", 4, 2, 3, 4, 1, 0, lengths=False)
    del inputs["P"]
    _compare_with_onnxruntime("LSTM", inputs, {"hidden_size": 4, "input_forget": 1})


# -- shape inference and errors ---------------------------------------------------------

def _data(graph: ge.Graph, name: str, shape: list[Any], dtype: Any = ge.DataType.DT_FLOAT
          ) -> Any:
    return create_node("Data", [], {"shape": shape, "dtype": dtype}, name, graph).outputs[0]


def test_recurrent_inference_keeps_dynamic_dims() -> None:
    graph = ge.Graph("g")
    x = _data(graph, "x", ["seq", -1, 4])
    w, r = _data(graph, "w", [2, 9, 4]), _data(graph, "r", [2, 9, 3])
    node = create_node("GRU", [x, w, r], {"direction": "bidirectional"}, "gru", graph)
    assert [v.shape for v in node.outputs] == [("seq", 2, -1, 3), (2, -1, 3)]
    batch_first = create_node("LSTM", [_data(graph, "x1", [-1, "t", 4]),
                                       _data(graph, "w1", [1, 12, 4]),
                                       _data(graph, "r1", [1, 12, 3])],
                              {"layout": 1}, "lstm", graph)
    assert [v.shape for v in batch_first.outputs] == [(-1, "t", 1, 3), (-1, 1, 3), (-1, 1, 3)]


def test_recurrent_errors_name_the_node() -> None:
    graph = ge.Graph("g")
    x, w = _data(graph, "x", [5, 2, 4]), _data(graph, "w", [1, 12, 4])
    with pytest.raises(ShapeError, match="'cell'.*rows"):
        create_node("LSTM", [x, w, _data(graph, "r", [1, 12, 4])], {}, "cell", graph)
    with pytest.raises(ShapeError, match="'cell'.*direction"):
        create_node("GRU", [x, w, _data(graph, "r2", [1, 12, 4])],
                    {"direction": "bidirectional"}, "cell", graph)
    with pytest.raises(ShapeError, match="'cell'.*activations"):
        create_node("RNN", [x, _data(graph, "w3", [1, 4, 4]), _data(graph, "r3", [1, 4, 4])],
                    {"activations": ["Swish"]}, "cell", graph)


def test_quantize_inference_and_errors() -> None:
    graph = ge.Graph("g")
    x = _data(graph, "x", [-1, 3, "h"])
    scale = _data(graph, "s", [3])
    zero = _data(graph, "z", [3], ge.DataType.DT_INT8)
    node = create_node("QuantizeLinear", [x, scale, zero], {"axis": 1}, "q", graph)
    assert node.outputs[0].shape == (-1, 3, "h")
    assert node.outputs[0].dtype is ge.DataType.DT_INT8
    unsigned = create_node("QuantizeLinear", [x, scale], {}, "u", graph)
    assert unsigned.outputs[0].dtype is ge.DataType.DT_UINT8
    back = create_node("DequantizeLinear", [node.outputs[0], scale, zero], {}, "d", graph)
    assert back.outputs[0].shape == (-1, 3, "h")
    with pytest.raises(ShapeError, match="'bad'.*3 values"):
        create_node("QuantizeLinear", [_data(graph, "x2", [2, 3, 4]), scale], {"axis": 2},
                    "bad", graph)
    with pytest.raises(DTypeError, match="'mixed'"):
        create_node("DequantizeLinear", [node.outputs[0], scale,
                                         _data(graph, "z8", [3], ge.DataType.DT_UINT8)],
                    {}, "mixed", graph)


def _quantize(x: np.ndarray, scale: np.ndarray, zero: Optional[np.ndarray] = None,
              **attrs: Any) -> np.ndarray:
    kernel = get_schema("QuantizeLinear").kernel
    full = {"axis": 1, "block_size": 0, "output_dtype": None, "saturate": 1, "precision": None}
    full.update(attrs)
    return np.asarray(kernel(x, scale, zero, **full))


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, 300.0, -300.0], np.float32)
    got = _quantize(x, np.float32(1.0), np.int8(0))
    np.testing.assert_array_equal(got, np.array([0, 2, 2, 0, 127, -128], np.int8))
    floats = _quantize(np.array([1e6, -np.inf, 1.0], np.float32), np.float32(1.0),
                       output_dtype=ge.DataType.DT_FLOAT8_E4M3FN)
    np.testing.assert_array_equal(floats.astype(np.float32), [448.0, -448.0, 1.0])
    wrapped = _quantize(np.array([1e6], np.float32), np.float32(1.0),
                        output_dtype=ge.DataType.DT_FLOAT8_E5M2, saturate=0)
    assert np.isinf(wrapped.astype(np.float32)[0])


def test_blocked_quantization_with_a_short_last_block() -> None:
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    scale = np.array([[1.0, 2.0], [0.5, 4.0]], np.float32)
    got = _quantize(x, scale, axis=1, block_size=3,
                    output_dtype=ge.DataType.DT_INT4).astype(np.int64)
    expected = np.clip(np.rint(x / np.repeat(scale, 3, axis=1)[:, :5]), -8, 7)
    np.testing.assert_array_equal(got, expected)


def test_dynamic_quantize_linear_of_zeros() -> None:
    kernel = get_schema("DynamicQuantizeLinear").kernel
    y, scale, zero = kernel(np.zeros((2, 2), np.float32))
    assert scale == np.float32(1 / 255) and zero == 0 and not y.any()


# -- integer convolutions and products against onnxruntime ------------------------------

def _run_both(node: Any, inputs: dict[str, np.ndarray], constants: dict[str, Any]
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    codes = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8,
             np.dtype(np.float32): TensorProto.FLOAT}
    graph = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info(n, codes[a.dtype], a.shape)
                      for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in node.output],
        initializer=[numpy_helper.from_array(a, n) for n, a in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return ge.backend.prepare(model).run(inputs), session.run(None, inputs)


def test_qlinear_conv_per_channel_with_bias() -> None:
    constants = {
        "xs": np.asarray(0.02, np.float32), "xz": np.asarray(120, np.uint8),
        "w": RNG.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8),
        "ws": (RNG.random(4) * 0.01 + 0.005).astype(np.float32),
        "wz": np.zeros(4, np.int8), "ys": np.asarray(0.05, np.float32),
        "yz": np.asarray(128, np.uint8), "b": RNG.integers(-500, 500, 4).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
    x = RNG.integers(0, 256, (2, 3, 7, 6)).astype(np.uint8)
    (got,), (want,) = _run_both(node, {"x": x}, constants)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def test_conv_integer_and_matmul_integer_with_zero_points() -> None:
    x = RNG.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = RNG.integers(0, 256, (3, 2, 2, 2)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"])
    (got,), (want,) = _run_both(node, {"x": x}, {"w": w, "xz": np.asarray(7, np.uint8),
                                                 "wz": np.asarray(200, np.uint8)})
    np.testing.assert_array_equal(got, want)
    a = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    (got,), (want,) = _run_both(node, {"a": a}, {"b": b, "az": np.asarray(9, np.uint8),
                                                 "bz": RNG.integers(-5, 5, 5).astype(np.int8)})
    np.testing.assert_array_equal(got, want)
