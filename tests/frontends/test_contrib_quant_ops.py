"""onnxruntime's quantized and decoder contrib ops through GE, compared with onnxruntime.

One-node models (onnx.helper, domain com.microsoft) run through ``ge.parse_onnx``,
``ge.compile`` and ``ge.Session`` and through onnxruntime's CPU provider on the
same inputs. Integer outputs may differ by one step where the two round a float
halfway case differently; float outputs by the tolerance each test states.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import UnsupportedOpError
from tests.frontends.one_node import MS, one_node_model
from tests.tolerance import assert_close

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _draws_fixed_per_test(request: pytest.FixtureRequest) -> None:
    """Each test draws the same numbers whatever runs before it (xdist, -k, reruns)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))




def run_both(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(GE's outputs, onnxruntime's outputs) of ``model`` on ``feeds``."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, dict(feeds))
    actual = ge.Session(ge.compile(ge.parse_onnx(model))).run(dict(feeds))
    if isinstance(actual, dict):
        actual = [actual[o.name] for o in model.graph.output]
    return [np.asarray(a) for a in actual], expected


def check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], *, steps: int = 0,
          rtol: float = 1e-5, atol: float = 1e-5) -> float:
    """Compare GE with onnxruntime: integer outputs within ``steps`` quantization steps,
    float ones within (rtol, atol). Returns the largest difference seen."""
    actual, expected = run_both(model, feeds)
    worst = 0.0
    for index, (got, want) in enumerate(zip(actual, expected)):
        what = f"{model.graph.name} output {index}"
        assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
        if want.dtype.kind in "iub":
            assert got.dtype == want.dtype, what
            difference = np.abs(got.astype(np.int64) - want.astype(np.int64)).max(initial=0)
            assert difference <= steps, f"{what}: off by {difference}"
        else:
            difference = float(np.abs(got.astype(np.float64) - want).max(initial=0))
            assert_close(got, want, what=what, rtol=rtol, atol=atol)
        worst = max(worst, float(difference))
    return worst


def feeds_of(inputs: Mapping[str, Optional[np.ndarray]], constants: tuple[str, ...] = ()
             ) -> dict[str, np.ndarray]:
    return {n: a for n, a in inputs.items() if a is not None and n not in constants}


def compare(op_type: str, inputs: Mapping[str, Optional[np.ndarray]], outputs: list[str],
            attrs: Optional[dict[str, Any]] = None, constants: tuple[str, ...] = (),
            **tolerance: Any) -> float:
    model = one_node_model(op_type, inputs, outputs, attrs, constants)
    return check(model, feeds_of(inputs, constants), **tolerance)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


def i8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def scalar(value: float, dtype: Any = np.float32) -> np.ndarray:
    return np.asarray(value, dtype)


# -- dequantize, float op, quantize -----------------------------------------------------

def test_qlinear_average_pool() -> None:
    x = u8(1, 3, 7, 7)
    params = {"X": x, "x_scale": scalar(0.05), "x_zero_point": scalar(20, np.uint8),
              "y_scale": scalar(0.03), "y_zero_point": scalar(9, np.uint8)}
    compare("QLinearAveragePool", params, ["Y"], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                   "pads": [1, 1, 1, 1]}, steps=1)
    compare("QLinearAveragePool", params, ["Y"],
            {"kernel_shape": [2, 2], "count_include_pad": 1, "pads": [0, 0, 1, 1],
             "ceil_mode": 1}, steps=1)
    nhwc = dict(params, X=u8(1, 5, 5, 4))
    compare("QLinearAveragePool", nhwc, ["Y"], {"kernel_shape": [2, 2], "channels_last": 1},
            steps=1)


def test_qlinear_softmax() -> None:
    params = {"X": u8(2, 3, 6), "X_scale": scalar(0.04), "x_zero_point": scalar(128, np.uint8),
              "y_scale": scalar(1 / 256), "y_zero_point": scalar(0, np.uint8)}
    compare("QLinearSoftmax", params, ["Y"], {"axis": -1, "opset": 13}, steps=1)
    compare("QLinearSoftmax", params, ["Y"], {"axis": 1, "opset": 12}, steps=1)
    compare("QLinearSoftmax", params, ["Y"], {"opset": 11}, steps=1)
    signed = {"X": i8(2, 5), "X_scale": scalar(0.05), "x_zero_point": scalar(-3, np.int8),
              "y_scale": scalar(1 / 256), "y_zero_point": scalar(-128, np.int8)}
    compare("QLinearSoftmax", signed, ["Y"], {"axis": -1, "opset": 13}, steps=1)


def test_qlinear_where() -> None:
    compare("QLinearWhere",
            {"condition": RNG.random((2, 3, 4)) > 0.5, "X": u8(2, 3, 4),
             "x_scale": scalar(0.02), "x_zero_point": scalar(100, np.uint8),
             "Y": u8(3, 4), "y_scale": scalar(0.05), "y_zero_point": scalar(7, np.uint8),
             "z_scale": scalar(0.04), "z_zero_point": scalar(90, np.uint8)}, ["Z"], steps=1)


# -- DynamicQuantizeLSTM ----------------------------------------------------------------

def _quantized_weight(real: np.ndarray, per_column: bool, signed: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONNX LSTM weights [D, 4H, I] as onnxruntime's [D, I, 4H] codes, scales and zero
    points, per direction or per column of the 4H axis: symmetric int8 (zero points 0), or
    asymmetric uint8 with one zero point per direction (onnxruntime requires a per-column
    one to be constant) and per-column scales spread around the direction's."""
    moved = np.swapaxes(real, 1, 2)
    directions, columns = moved.shape[0], moved.shape[2]
    if signed:
        bound = np.abs(moved).max(axis=(1,) if per_column else (1, 2))
        scale = (bound / 127).astype(np.float32)
        zero = np.zeros(scale.shape, np.int8)
    else:
        low = np.minimum(moved.min(axis=(1, 2)), 0)
        high = np.maximum(moved.max(axis=(1, 2)), 0)
        scale = ((high - low) / 255).astype(np.float32)
        zero = np.rint(-low / scale).astype(np.uint8)
        if per_column:
            spread = (1 + 0.2 * RNG.random((directions, columns))).astype(np.float32)
            scale = scale[:, None] * spread
            zero = np.repeat(zero[:, None], columns, axis=1)
    shape = (directions, 1, -1 if per_column else 1)
    bounds = (-127, 127) if signed else (0, 255)
    codes = np.clip(np.rint(moved / scale.reshape(shape)) + zero.reshape(shape), *bounds)
    return codes.astype(zero.dtype), scale, zero


_LSTM_CONSTANTS = ("W", "R", "B", "P", "W_scale", "W_zero_point", "R_scale", "R_zero_point")


def _lstm_inputs(seq: int, batch: int, size: int, hidden: int, direction: str,
                 per_column: bool, signed: bool, lengths: Optional[list[int]], states: bool,
                 peepholes: bool = False) -> dict[str, Optional[np.ndarray]]:
    dirs = 2 if direction == "bidirectional" else 1
    w, w_scale, w_zero = _quantized_weight(rand(dirs, 4 * hidden, size) * 0.5, per_column,
                                           signed)
    r, r_scale, r_zero = _quantized_weight(rand(dirs, 4 * hidden, hidden) * 0.5, per_column,
                                           signed)
    return {"X": rand(seq, batch, size), "W": w, "R": r, "B": rand(dirs, 8 * hidden) * 0.1,
            "sequence_lens": None if lengths is None else np.array(lengths, np.int32),
            "initial_h": rand(dirs, batch, hidden) * 0.5 if states else None,
            "initial_c": rand(dirs, batch, hidden) * 0.5 if states else None,
            "P": rand(dirs, 3 * hidden) * 0.3 if peepholes else None,
            "W_scale": w_scale, "W_zero_point": w_zero, "R_scale": r_scale, "R_zero_point": r_zero}


def _onnxruntime_lstm(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                      threads: int) -> list[np.ndarray]:
    """onnxruntime's outputs with ``threads`` intra-op threads (its hidden-state row groups
    follow them)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


# GE follows an onnxruntime with at least a thread per batch row (``parallelism`` 0).
_ENOUGH_THREADS = 8
# What GE's float32 gates and NumPy's sigmoid and tanh leave against onnxruntime's.
_LSTM_ATOL = 2e-6

# (seq, batch, size, hidden, direction, per_column, signed, sequence_lens, initial states)
_LSTM_CASES = {
    "forward_per_tensor_int8": (5, 2, 6, 4, "forward", False, True, None, False),
    "bidirectional_per_column_int8_states_lengths":
        (5, 2, 6, 4, "bidirectional", True, True, [5, 3], True),
    "reverse_per_column_uint8_lengths": (5, 3, 6, 4, "reverse", True, False, [2, 5, 4], False),
    "bidirectional_per_tensor_uint8_states": (4, 3, 5, 6, "bidirectional", False, False, None,
                                              True),
    "bidirectional_empty_and_short_rows":
        (6, 5, 5, 4, "bidirectional", False, True, [0, 6, 3, 1, 6], True),
    "wide_hidden_shares_one_scale": (3, 3, 5, 260, "forward", True, True, [3, 1, 2], True),
}


@pytest.mark.parametrize("case", list(_LSTM_CASES))
def test_dynamic_quantize_lstm(case: str) -> None:
    """GE quantizes X and each step's hidden state as onnxruntime does and multiplies them
    exactly with the quantized weights: only float32 rounding in the gates remains."""
    seq, batch, size, hidden, direction, *rest = _LSTM_CASES[case]
    inputs = _lstm_inputs(seq, batch, size, hidden, direction, *rest)
    model = one_node_model("DynamicQuantizeLSTM", inputs, ["Y", "Y_h", "Y_c"],
                           {"hidden_size": hidden, "direction": direction},
                           constants=_LSTM_CONSTANTS)
    feeds = feeds_of(inputs, _LSTM_CONSTANTS)
    actual = ge.Session(ge.compile(ge.parse_onnx(model))).run(feeds)
    expected = _onnxruntime_lstm(model, feeds, _ENOUGH_THREADS)
    for name, want in zip(("Y", "Y_h", "Y_c"), expected):
        assert_close(actual[name], want, rtol=0, atol=_LSTM_ATOL, what=f"{case} {name}")


def test_dynamic_quantize_lstm_peepholes_clip_and_activations() -> None:
    attrs = {"hidden_size": 5, "direction": "bidirectional", "clip": 1.5, "input_forget": 1,
             "activations": ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu", "Tanh"],
             "activation_alpha": [0.3], "activation_beta": [0.4]}
    inputs = _lstm_inputs(4, 2, 3, 5, "bidirectional", True, True, [4, 2], True,
                          peepholes=True)
    model = one_node_model("DynamicQuantizeLSTM", inputs, ["Y", "Y_h", "Y_c"], attrs,
                           constants=_LSTM_CONSTANTS)
    feeds = feeds_of(inputs, _LSTM_CONSTANTS)
    actual = ge.Session(ge.compile(ge.parse_onnx(model))).run(feeds)
    for name, want in zip(("Y", "Y_h", "Y_c"), _onnxruntime_lstm(model, feeds, _ENOUGH_THREADS)):
        assert_close(actual[name], want, rtol=0, atol=_LSTM_ATOL, what=name)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_dynamic_quantize_lstm_follows_fewer_threads(threads: int) -> None:
    """With fewer threads than batch rows, onnxruntime quantizes each group of
    ceil(batch / threads) rows of the hidden state with one scale: ``parallelism`` says so."""
    inputs = _lstm_inputs(5, 6, 4, 4, "bidirectional", True, True, [5, 3, 4, 2, 5, 1], True)
    model = one_node_model("DynamicQuantizeLSTM", inputs, ["Y", "Y_h", "Y_c"],
                           {"hidden_size": 4, "direction": "bidirectional"},
                           constants=_LSTM_CONSTANTS)
    schema = ge.ops.get_schema("DynamicQuantizeLSTM")
    attrs = ge.ops.normalize_attrs(schema, {"hidden_size": 4, "direction": "bidirectional",
                                            "parallelism": threads}, "lstm")
    actual = ge.ops.run_kernel(schema, "lstm", list(inputs.values()), attrs)
    expected = _onnxruntime_lstm(model, feeds_of(inputs, _LSTM_CONSTANTS), threads)
    for got, want in zip(actual, expected):
        assert_close(got, want, rtol=0, atol=_LSTM_ATOL, what=f"{threads} threads")


# -- QAttention -------------------------------------------------------------------------

def test_qattention() -> None:
    batch, seq, hidden = 2, 4, 8
    inputs: dict[str, Optional[np.ndarray]] = {
        "input": u8(batch, seq, hidden), "weight": i8(hidden, 3 * hidden),
        "bias": rand(3 * hidden), "input_scale": scalar(0.02),
        "weight_scale": scalar(0.01), "mask_index": np.array([3, 4], np.int32),
        "input_zero_point": scalar(120, np.uint8), "weight_zero_point": scalar(0, np.int8)}
    constants = ("weight", "bias", "weight_scale", "weight_zero_point")
    compare("QAttention", inputs, ["out"], {"num_heads": 2}, constants=constants,
            rtol=1e-4, atol=1e-4)
    per_column = dict(inputs, weight=u8(hidden, 3 * hidden),
                      weight_scale=(RNG.random(3 * hidden) * 0.01 + 0.005).astype(np.float32),
                      weight_zero_point=u8(3 * hidden),
                      mask_index=np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32))
    compare("QAttention", per_column, ["out"], {"num_heads": 2}, constants=constants,
            rtol=1e-4, atol=1e-4)
    with_past = dict(inputs, mask_index=None, past=rand(2, batch, 2, 3, hidden // 2))
    compare("QAttention", with_past, ["out", "present"], {"num_heads": 2, "unidirectional": 1},
            constants=constants, rtol=1e-4, atol=1e-4)


# -- QEmbedLayerNormalization -----------------------------------------------------------

def _quantized_table(real: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    low, high = min(real.min(), 0.0), max(real.max(), 0.0)
    scale = np.float32((high - low) / 255)
    zero = np.uint8(np.clip(np.round(-low / scale), 0, 255))
    codes = np.clip(np.round(real / scale) + zero, 0, 255).astype(np.uint8)
    return codes, np.asarray(scale), np.asarray(zero)


def test_qembed_layer_normalization() -> None:
    tables = {name: _quantized_table(rand(*shape)) for name, shape in
              (("word", (10, 8)), ("position", (7, 8)), ("segment", (2, 8)),
               ("gamma", (8,)), ("beta", (8,)))}
    inputs: dict[str, Optional[np.ndarray]] = {
        "input_ids": RNG.integers(0, 10, (2, 5)).astype(np.int32),
        "segment_ids": RNG.integers(0, 2, (2, 5)).astype(np.int32)}
    inputs.update({name: codes for name, (codes, _, _) in tables.items()})
    inputs["mask"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    inputs.update({f"{name}_scale": scale for name, (_, scale, _) in tables.items()})
    inputs.update({f"{name}_zero_point": zero for name, (_, _, zero) in tables.items()})
    constants = tuple(n for n in inputs if n not in ("input_ids", "segment_ids", "mask"))
    compare("QEmbedLayerNormalization", inputs, ["out", "mask_index"], {"epsilon": 1e-5},
            constants=constants, rtol=1e-4, atol=1e-4)


# -- rotary embeddings and grouped-query attention --------------------------------------

def _caches(positions: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    angles = np.outer(np.arange(positions), 1.0 / 10000 ** (np.arange(width) / width))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def test_rotary_embedding() -> None:
    cos, sin = _caches(16, 4)
    base = {"input": rand(2, 3, 16), "position_ids": np.array([5], np.int64),
            "cos_cache": cos, "sin_cache": sin}
    compare("RotaryEmbedding", base, ["out"], {"interleaved": 1})
    compare("RotaryEmbedding", base, ["out"], {"num_heads": 2, "scale": 2.0})
    ids = RNG.integers(0, 16, (2, 3)).astype(np.int64)
    compare("RotaryEmbedding", dict(base, position_ids=ids), ["out"])
    compare("RotaryEmbedding", dict(base, input=rand(2, 2, 3, 8), position_ids=ids), ["out"])
    partial_cos, partial_sin = _caches(16, 2)
    compare("RotaryEmbedding", dict(base, cos_cache=partial_cos, sin_cache=partial_sin),
            ["out"], {"num_heads": 2, "rotary_embedding_dim": 4})


def _gqa_inputs(batch: int, seq: int, past: int, heads: int = 4, kv_heads: int = 2,
                head: int = 8) -> dict[str, Optional[np.ndarray]]:
    return {"query": rand(batch, seq, heads * head), "key": rand(batch, seq, kv_heads * head),
            "value": rand(batch, seq, kv_heads * head),
            "past_key": rand(batch, kv_heads, past, head),
            "past_value": rand(batch, kv_heads, past, head),
            "seqlens_k": np.full(batch, past + seq - 1, np.int32),
            "total_sequence_length": np.asarray(past + seq, np.int32)}


def test_group_query_attention_prompt_and_decode() -> None:
    outputs = ["out", "present_key", "present_value"]
    gqa = {"num_heads": 4, "kv_num_heads": 2}
    compare("GroupQueryAttention", _gqa_inputs(2, 5, 0), outputs, gqa, rtol=1e-4, atol=1e-4)
    compare("GroupQueryAttention", _gqa_inputs(2, 1, 6), outputs, gqa, rtol=1e-4, atol=1e-4)
    padded = dict(_gqa_inputs(2, 5, 0), seqlens_k=np.array([4, 2], np.int32))
    compare("GroupQueryAttention", padded, outputs, gqa, rtol=1e-4, atol=1e-4)
    compare("GroupQueryAttention", _gqa_inputs(1, 3, 4), outputs,
            dict(gqa, local_window_size=3, softcap=2.0, scale=0.2), rtol=1e-4, atol=1e-4)


def test_group_query_attention_cache_longer_than_the_past() -> None:
    """A past buffer of 6 rows holding fewer tokens per batch row: the new token goes at
    row seqlens_k[b], and the cache is max(6, total_sequence_length) long."""
    outputs = ["out", "present_key", "present_value"]
    for seqlens, total in (([4, 5], 6), ([3, 3], 4), ([6, 5], 7)):
        inputs = dict(_gqa_inputs(2, 1, 6), seqlens_k=np.array(seqlens, np.int32),
                      total_sequence_length=np.asarray(total, np.int32))
        compare("GroupQueryAttention", inputs, outputs, {"num_heads": 4, "kv_num_heads": 2},
                rtol=1e-4, atol=1e-4)


def test_group_query_attention_rotary_and_packed() -> None:
    outputs = ["out", "present_key", "present_value"]
    cos, sin = _caches(16, 8)  # onnxruntime rotates heads of a multiple of 16 only
    for past, seq in ((0, 4), (5, 1)):
        inputs = dict(_gqa_inputs(2, seq, past, head=16), cos_cache=cos, sin_cache=sin)
        compare("GroupQueryAttention", inputs, outputs,
                {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1,
                 "rotary_interleaved": int(past > 0)},
                rtol=1e-4, atol=1e-4)
    inputs = _gqa_inputs(2, 4, 0)
    packed = np.concatenate([inputs["query"], inputs["key"], inputs["value"]], axis=-1)
    inputs.update(query=packed, key=None, value=None)
    compare("GroupQueryAttention", inputs, outputs, {"num_heads": 4, "kv_num_heads": 2},
            rtol=1e-4, atol=1e-4)


# -- what GE refuses, it refuses by name ------------------------------------------------

@pytest.mark.parametrize("op_type,inputs,attrs,message", [
    ("GroupQueryAttention", dict(_gqa_inputs(1, 2, 0), cos_cache=None, sin_cache=None,
                                 position_ids=None, attention_bias=None,
                                 head_sink=np.zeros(4, np.float32)),
     {"num_heads": 4, "kv_num_heads": 2}, "head_sink"),
    ("GroupQueryAttention", _gqa_inputs(1, 2, 0), {"num_heads": 4}, "kv_num_heads"),
    ("RotaryEmbedding", {"input": np.zeros((1, 2, 8), np.float32),
                         "position_ids": np.zeros(1, np.int64),
                         "cos_cache": np.zeros((4, 4), np.float32),
                         "sin_cache": np.zeros((4, 4), np.float32)},
     {"is_packed_batching": 1}, "packed batching"),
    ("QAttention", {"input": u8(1, 2, 4), "weight": u8(4, 12), "bias": rand(12),
                    "input_scale": scalar(0.1), "weight_scale": scalar(0.1)}, {}, "num_heads"),
])
def test_refusals_name_the_node(op_type: str, inputs: dict[str, Optional[np.ndarray]],
                                attrs: dict[str, Any], message: str) -> None:
    model = one_node_model(op_type, inputs, ["out"], attrs)
    with pytest.raises(UnsupportedOpError, match=message) as caught:
        ge.parse_onnx(model)
    assert f"the_{op_type}" in str(caught.value)


# -- GatherBlockQuantized ---------------------------------------------------------------

def _int4_tensor(name: str, codes: np.ndarray, signed: bool) -> onnx.TensorProto:
    code = TensorProto.INT4 if signed else TensorProto.UINT4
    return helper.make_tensor(name, code, codes.shape, codes.reshape(-1).tolist())


def _pack_nibbles(codes: np.ndarray) -> np.ndarray:
    pairs = codes.reshape(codes.shape[:-1] + (-1, 2)).astype(np.uint8)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)


def _gather_model(data: onnx.TensorProto, scales: np.ndarray, zero: Optional[onnx.TensorProto],
                  indices: np.ndarray, attrs: dict[str, Any]) -> onnx.ModelProto:
    inputs = ["data", "indices", "scales"] + (["zero_points"] if zero is not None else [])
    node = helper.make_node("GatherBlockQuantized", inputs, ["out"], name="gather", domain=MS,
                            **attrs)
    initializers = [data, onnx.numpy_helper.from_array(scales, "scales")]
    initializers += [zero] if zero is not None else []
    graph = helper.make_graph(
        [node], "GatherBlockQuantized",
        [helper.make_tensor_value_info("indices", TensorProto.INT64, indices.shape)],
        [helper.make_empty_tensor_value_info("out")], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid(MS, 1)])


def test_gather_block_quantized() -> None:
    rows, width, block = 6, 40, 16
    blocks = -(-width // block)
    indices = np.array([[0, 5, 2], [3, 3, -1]], np.int64)
    scales = (RNG.random((rows, blocks)) * 0.1 + 0.01).astype(np.float32)
    signed = RNG.integers(-8, 8, (rows, width))
    model = _gather_model(_int4_tensor("data", signed, True), scales,
                          _int4_tensor("zero_points", RNG.integers(-8, 8, (rows, blocks)), True),
                          indices, {"block_size": block, "quantize_axis": 1})
    check(model, {"indices": indices}, rtol=0, atol=0)
    unsigned = RNG.integers(0, 16, (rows, width))
    model = _gather_model(_int4_tensor("data", unsigned, False), scales, None, indices,
                          {"block_size": block})
    check(model, {"indices": indices}, rtol=0, atol=0)
    packed = onnx.numpy_helper.from_array(_pack_nibbles(unsigned), "data")
    zero = onnx.numpy_helper.from_array(
        _pack_nibbles(RNG.integers(0, 16, (rows, blocks + 1)))[:, : -(-blocks // 2)], "zero_points")
    model = _gather_model(packed, scales, zero, indices, {"block_size": block, "bits": 4})
    check(model, {"indices": indices}, rtol=0, atol=0)
    columns = _gather_model(_int4_tensor("data", signed, True),
                            (RNG.random((1, width)) * 0.1).astype(np.float32), None,
                            np.array([1, 7], np.int64),
                            {"block_size": 16, "quantize_axis": 0, "gather_axis": 1})
    check(columns, {"indices": np.array([1, 7], np.int64)}, rtol=0, atol=0)


# -- DecoderMaskedMultiHeadAttention ----------------------------------------------------

def test_decoder_masked_multi_head_attention() -> None:
    batch, heads, head, buffer, past = 2, 2, 4, 6, 3
    hidden = heads * head
    step: dict[str, Optional[np.ndarray]] = {
        "query": rand(batch, 1, hidden), "key": rand(batch, 1, hidden),
        "value": rand(batch, 1, hidden),
        "mask_index": np.array([[1, 1, 1, 1], [0, 1, 1, 1]], np.int32),
        "attention_bias": None, "past_key": rand(batch, heads, buffer, head),
        "past_value": rand(batch, heads, buffer, head),
        "past_sequence_length": np.asarray(past, np.int32), "beam_width": None,
        "cache_indirection": None, "bias": rand(3 * hidden)}
    shared = {"num_heads": heads, "past_present_share_buffer": 1}
    outputs = ["out", "present_key", "present_value"]
    compare("DecoderMaskedMultiHeadAttention", step, outputs, shared, rtol=1e-4, atol=1e-4)
    biased = dict(step, mask_index=None, attention_bias=rand(1, heads, 1, past + 1))
    compare("DecoderMaskedMultiHeadAttention", biased, outputs, dict(shared, scale=0.3),
            rtol=1e-4, atol=1e-4)
    cross = {"query": rand(batch, 1, hidden), "key": rand(batch, heads, 5, head),
             "value": rand(batch, heads, 5, head),
             "mask_index": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)}
    compare("DecoderMaskedMultiHeadAttention", cross, ["out"], {"num_heads": heads},
            rtol=1e-4, atol=1e-4)


# -- MatMulBnb4 -------------------------------------------------------------------------

def test_matmul_bnb4() -> None:
    """An identity A shows every dequantized weight exactly; a random A the product."""
    n, k, block = 5, 23, 16
    codes = RNG.integers(0, 16, n * k + 1)  # n * k is odd: the last byte is half used
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    absmax = (RNG.random(-(-n * k // block)) + 0.5).astype(np.float32)
    for quant_type in (0, 1):
        attrs = {"K": k, "N": n, "block_size": block, "quant_type": quant_type}
        weights = {"B": packed, "absmax": absmax}
        compare("MatMulBnb4", {"A": np.eye(k, dtype=np.float32), **weights}, ["Y"], attrs,
                constants=("B", "absmax"), rtol=0, atol=0)
        compare("MatMulBnb4", {"A": rand(2, 3, k), **weights}, ["Y"], attrs,
                constants=("B", "absmax"), rtol=1e-5, atol=1e-5)
