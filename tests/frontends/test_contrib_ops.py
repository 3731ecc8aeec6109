"""onnxruntime's com.microsoft contrib ops through GE, compared with onnxruntime itself.

Each case builds a one-node ONNX model with onnx.helper, runs it through
``ge.backend`` and through onnxruntime on the same random inputs, and compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import onnxruntime as ort  # noqa: E402
import pytest

import ge.backend
from tests.frontends.one_node import MS, one_node_model
from tests.tolerance import assert_close


def compare(op_type: str, inputs: Mapping[str, Optional[np.ndarray]], outputs: list[str],
            attrs: Optional[dict[str, Any]] = None, domain: str = MS,
            constants: tuple[str, ...] = (), exact_within: Optional[int] = None,
            rtol: Optional[float] = None, atol: Optional[float] = None) -> None:
    """Run one node through GE and onnxruntime and compare every output."""
    model = one_node_model(op_type, inputs, outputs, attrs, constants, domain)
    feeds = {n: a for n, a in inputs.items() if a is not None and n not in constants}
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    actual = ge.backend.prepare(model).run(feeds)
    for index, (got, want) in enumerate(zip(actual, expected)):
        what = f"{op_type} output {index}"
        if exact_within is not None:
            assert got.shape == want.shape and got.dtype == want.dtype, what
            difference = np.abs(got.astype(np.int64) - want.astype(np.int64))
            assert difference.max(initial=0) <= exact_within, what
        else:
            assert_close(got, want, accumulate=True, what=what, rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)


def rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def test_gelu_family() -> None:
    x, bias = rand(2, 3, 8), rand(8)
    compare("Gelu", {"X": x}, ["Y"])
    compare("BiasGelu", {"A": x, "B": bias}, ["C"])
    compare("FastGelu", {"X": x, "bias": bias}, ["Y"])
    compare("FastGelu", {"X": x}, ["Y"])
    compare("QuickGelu", {"X": x}, ["Y"], {"alpha": 1.5})


def test_fused_conv_with_sum_and_activations() -> None:
    x, w, b, z = rand(1, 3, 8, 8), rand(4, 3, 3, 3), rand(4), rand(1, 4, 8, 8)
    compare("FusedConv", {"X": x, "W": w, "B": b, "Z": z}, ["Y"],
            {"activation": "Relu", "pads": [1, 1, 1, 1]}, constants=("W", "B"))
    compare("FusedConv", {"X": x, "W": w, "B": b}, ["Y"],
            {"activation": "Clip", "activation_params": [-0.5, 0.5], "strides": [2, 2]},
            constants=("W", "B"))
    compare("FusedConv", {"X": x, "W": w}, ["Y"],
            {"activation": "LeakyRelu", "activation_params": [0.2]}, constants=("W",))


def test_fused_gemm() -> None:
    a, b, c = rand(4, 5), rand(6, 5), rand(6)
    compare("FusedGemm", {"A": a, "B": b, "C": c}, ["Y"],
            {"transB": 1, "alpha": 0.5, "activation": "Sigmoid"}, constants=("B", "C"))
    compare("FusedGemm", {"A": a, "B": b, "C": c}, ["Y"],
            {"transB": 1, "activation": "HardSigmoid", "activation_alpha": 0.3,
             "activation_beta": 0.4}, constants=("B", "C"))


@pytest.mark.parametrize("attrs,a_shape,b_shape", [
    ({"alpha": 0.25}, (2, 3, 4), (4, 5)),
    ({"transA": 1, "transB": 1}, (2, 4, 3), (2, 5, 4)),
    ({"transBatchA": 1}, (3, 2, 4), (2, 4, 5)),
    ({"transBatchB": 1, "transB": 1}, (2, 3, 4), (5, 2, 4)),
    ({"transBatchA": 1, "transA": 1}, (4, 2, 3), (2, 4, 5)),
])
def test_fused_matmul(attrs: dict[str, Any], a_shape: tuple[int, ...],
                      b_shape: tuple[int, ...]) -> None:
    compare("FusedMatMul", {"A": rand(*a_shape), "B": rand(*b_shape)}, ["Y"], attrs)


def test_skip_layer_normalization_outputs() -> None:
    x, skip, gamma, beta, bias = rand(2, 3, 8), rand(2, 3, 8), rand(8), rand(8), rand(8)
    compare("SkipLayerNormalization",
            {"input": x, "skip": skip, "gamma": gamma, "beta": beta, "bias": bias},
            ["out", "mean", "inv", "sum"], {"epsilon": 1e-5})
    compare("SkipLayerNormalization", {"input": x, "skip": skip, "gamma": gamma},
            ["out", "", "", "sum"])


def test_simplified_layer_normalizations() -> None:
    x, skip, gamma, bias = rand(2, 3, 8), rand(2, 3, 8), rand(8), rand(8)
    compare("SkipSimplifiedLayerNormalization",
            {"input": x, "skip": skip, "gamma": gamma, "bias": bias},
            ["out", "", "inv", "sum"], {"epsilon": 1e-6})
    compare("SimplifiedLayerNormalization", {"X": x, "scale": gamma}, ["Y"],
            {"epsilon": 1e-6}, domain="")


def test_bias_add() -> None:
    x, bias, skip = rand(2, 4, 8), rand(8), rand(2, 4, 8)
    model = one_node_model("BiasAdd", {"X": x, "bias": bias, "skip": skip}, ["Y"])
    (y,) = ge.backend.prepare(model).run({"X": x, "bias": bias, "skip": skip})
    assert_close(y, x + bias + skip)  # onnxruntime runs this op on CUDA only


def _attention_inputs(batch: int = 2, seq: int = 4, hidden: int = 8
                      ) -> dict[str, Optional[np.ndarray]]:
    return {"input": rand(batch, seq, hidden), "weights": rand(hidden, 3 * hidden),
            "bias": rand(3 * hidden)}


@pytest.mark.parametrize("mask", ["none", "raw", "lengths", "start_end", "raw3d"])
def test_attention_masks(mask: str) -> None:
    inputs = _attention_inputs()
    if mask == "raw":
        inputs["mask_index"] = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32)
    elif mask == "lengths":
        inputs["mask_index"] = np.array([3, 2], np.int32)
    elif mask == "start_end":
        inputs["mask_index"] = np.array([4, 3, 1, 0], np.int32)
    elif mask == "raw3d":
        inputs["mask_index"] = (RNG.random((2, 4, 4)) > 0.3).astype(np.int32)
    compare("Attention", inputs, ["out"], {"num_heads": 2}, constants=("weights", "bias"),
            rtol=1e-4, atol=1e-4)


def test_attention_unidirectional_with_past_or_bias() -> None:
    inputs = _attention_inputs(seq=3)
    inputs["mask_index"] = None
    inputs["past"] = rand(2, 2, 2, 5, 4)
    compare("Attention", inputs, ["out", "present"], {"num_heads": 2, "unidirectional": 1},
            constants=("weights", "bias"), rtol=1e-4, atol=1e-4)
    inputs = _attention_inputs(seq=3)
    inputs.update(mask_index=None, past=None, attention_bias=rand(1, 2, 3, 3))
    compare("Attention", inputs, ["out", "present"], {"num_heads": 2, "unidirectional": 1},
            constants=("weights", "bias"), rtol=1e-4, atol=1e-4)


def test_attention_qkv_hidden_sizes_and_scale() -> None:
    inputs = {"input": rand(2, 3, 8), "weights": rand(8, 8 + 8 + 12), "bias": rand(28)}
    compare("Attention", inputs, ["out"],
            {"num_heads": 2, "qkv_hidden_sizes": [8, 8, 12], "scale": 0.3},
            constants=("weights", "bias"), rtol=1e-4, atol=1e-4)


def test_multi_head_attention_separate_and_bias() -> None:
    q, k, v = rand(2, 3, 8), rand(2, 5, 8), rand(2, 5, 8)
    compare("MultiHeadAttention",
            {"query": q, "key": k, "value": v, "bias": rand(24),
             "key_padding_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], np.int32)},
            ["out"], {"num_heads": 2}, rtol=1e-4, atol=1e-4)


def _ge_only(op_type: str, inputs: Mapping[str, Optional[np.ndarray]], outputs: list[str],
             attrs: dict[str, Any]) -> list[np.ndarray]:
    model = one_node_model(op_type, inputs, outputs, attrs)
    return ge.backend.prepare(model).run({n: a for n, a in inputs.items() if a is not None})


def _ort_only(op_type: str, inputs: Mapping[str, Optional[np.ndarray]], outputs: list[str],
              attrs: dict[str, Any]) -> list[np.ndarray]:
    model = one_node_model(op_type, inputs, outputs, attrs)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {n: a for n, a in inputs.items() if a is not None})


def test_multi_head_attention_packed_forms() -> None:
    """onnxruntime's CPU kernel lacks the packed forms: compare with the unpacked ones."""
    packed = rand(2, 3, 2, 3, 4)  # [B, S, N, 3, H]
    q, k, v = (packed[:, :, :, i].reshape(2, 3, 8) for i in range(3))
    (got,) = _ge_only("MultiHeadAttention", {"query": packed}, ["out"], {"num_heads": 2})
    (want,) = _ort_only("MultiHeadAttention", {"query": q, "key": k, "value": v}, ["out"],
                        {"num_heads": 2})
    assert_close(got, want, rtol=1e-4, atol=1e-4)
    query, kv = rand(2, 3, 8), rand(2, 5, 2, 2, 4)  # [B, L, N, 2, H]
    k, v = (kv[:, :, :, i].reshape(2, 5, 8) for i in range(2))
    (got,) = _ge_only("MultiHeadAttention", {"query": query, "key": kv}, ["out"],
                      {"num_heads": 2})
    (want,) = _ort_only("MultiHeadAttention", {"query": query, "key": k, "value": v}, ["out"],
                        {"num_heads": 2})
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_multi_head_attention_past_and_causal() -> None:
    compare("MultiHeadAttention",
            {"query": rand(2, 3, 8), "key": rand(2, 3, 8), "value": rand(2, 3, 8),
             "bias": None, "key_padding_mask": None, "attention_bias": None,
             "past_key": rand(2, 2, 4, 4), "past_value": rand(2, 2, 4, 4)},
            ["out", "pk", "pv"], {"num_heads": 2, "unidirectional": 1}, rtol=1e-4, atol=1e-4)


def test_multi_head_attention_per_head_key_value() -> None:
    compare("MultiHeadAttention",
            {"query": rand(2, 3, 8), "key": rand(2, 2, 5, 4), "value": rand(2, 2, 5, 4)},
            ["out"], {"num_heads": 2, "scale": 0.5}, rtol=1e-4, atol=1e-4)


# -- quantized contrib ops --------------------------------------------------------------

def _u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


def _scale(value: float) -> np.ndarray:
    return np.asarray(value, np.float32)


def test_qlinear_binary_and_unary() -> None:
    a, b = _u8(2, 3, 4), _u8(2, 3, 4)
    zero = np.asarray(128, np.uint8)
    params = {"A": a, "A_scale": _scale(0.05), "A_zero_point": zero, "B": b,
              "B_scale": _scale(0.02), "B_zero_point": np.asarray(100, np.uint8),
              "C_scale": _scale(0.07), "C_zero_point": np.asarray(120, np.uint8)}
    compare("QLinearAdd", params, ["C"], exact_within=1)
    compare("QLinearMul", params, ["C"], exact_within=1)
    unary = {"X": a, "X_scale": _scale(0.05), "X_zero_point": zero, "Y_scale": _scale(1 / 256),
             "Y_zero_point": np.asarray(0, np.uint8)}
    compare("QLinearSigmoid", unary, ["Y"], exact_within=1)
    compare("QLinearLeakyRelu", dict(unary, Y_scale=_scale(0.04)), ["Y"], {"alpha": 0.1},
            exact_within=1)


def test_qlinear_global_average_pool_and_concat() -> None:
    x = _u8(1, 3, 4, 4)
    compare("QLinearGlobalAveragePool",
            {"X": x, "x_scale": _scale(0.1), "x_zero_point": np.asarray(10, np.uint8),
             "y_scale": _scale(0.05), "y_zero_point": np.asarray(5, np.uint8)}, ["Y"],
            exact_within=1)
    compare("QLinearConcat",
            {"Y_scale": _scale(0.1), "Y_zero_point": np.asarray(3, np.uint8),
             "a": _u8(2, 3), "a_scale": _scale(0.2), "a_zero": np.asarray(1, np.uint8),
             "b": _u8(2, 2), "b_scale": _scale(0.05), "b_zero": np.asarray(7, np.uint8)},
            ["Y"], {"axis": 1}, exact_within=1)


def test_integer_matmuls_to_float() -> None:
    a, b = _u8(2, 3, 4), RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    compare("MatMulIntegerToFloat",
            {"A": a, "B": b, "a_scale": _scale(0.03), "b_scale": rand(5) * 0.01 + 0.05,
             "a_zero_point": np.asarray(128, np.uint8), "b_zero_point": None,
             "bias": rand(5)}, ["Y"], constants=("B",), rtol=1e-5, atol=1e-5)
    compare("DynamicQuantizeMatMul",
            {"A": rand(2, 3, 4), "B": b, "b_scale": _scale(0.02), "b_zero_point": None,
             "bias": rand(5)}, ["Y"], constants=("B",), rtol=1e-5, atol=1e-5)


def test_contrib_quantize_dequantize_aliases() -> None:
    x = rand(2, 3)
    compare("QuantizeLinear", {"x": x, "s": _scale(0.02), "z": np.asarray(3, np.int8)}, ["y"],
            exact_within=0)
    compare("DequantizeLinear",
            {"x": _u8(2, 3), "s": rand(3) * 0.1, "z": _u8(3)}, ["y"], {"axis": 1})


def test_qgemm_float_and_quantized_outputs() -> None:
    a = _u8(3, 4)
    b = RNG.integers(-128, 128, (5, 4)).astype(np.int8)
    inputs: dict[str, Optional[np.ndarray]] = {
        "A": a, "a_scale": _scale(0.02), "a_zero_point": np.asarray(100, np.uint8), "B": b,
        "b_scale": _scale(0.01), "b_zero_point": np.asarray(0, np.int8),
        "C": RNG.integers(-300, 300, 5).astype(np.int32)}
    compare("QGemm", inputs, ["Y"], {"transB": 1}, constants=("B", "C"), rtol=1e-5, atol=1e-5)
    inputs.update(y_scale=_scale(0.05), y_zero_point=np.asarray(128, np.uint8))
    compare("QGemm", inputs, ["Y"], {"transB": 1, "alpha": 0.5}, constants=("B", "C"),
            exact_within=1)


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    padded = np.pad(codes, [(0, 0)] * (codes.ndim - 1) + [(0, -codes.shape[-1] % per_byte)])
    fields = padded.reshape(padded.shape[:-1] + (-1, per_byte)).astype(np.uint8)
    return np.bitwise_or.reduce(fields << (np.arange(per_byte, dtype=np.uint8) * bits), axis=-1)


@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
def test_matmul_nbits(zero_points: str) -> None:
    n, k, block, bits = 6, 40, 16, 4
    blocks = -(-k // block)
    codes = RNG.integers(0, 16, (n, blocks * block))
    inputs: dict[str, Optional[np.ndarray]] = {
        "A": rand(2, 3, k), "B": _pack(codes.reshape(n, blocks, block), bits),
        "scales": (RNG.random(n * blocks) * 0.1).astype(np.float32), "zero_points": None}
    if zero_points == "packed":
        inputs["zero_points"] = _pack(RNG.integers(0, 16, (n, blocks)), bits).reshape(-1)
    elif zero_points == "float":
        inputs["zero_points"] = (RNG.random(n * blocks) * 15).astype(np.float32)
    inputs["g_idx"] = None
    inputs["bias"] = rand(n)
    compare("MatMulNBits", inputs, ["Y"],
            {"K": k, "N": n, "bits": bits, "block_size": block},
            constants=("B", "scales", "zero_points"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("with_mask", [True, False])
def test_embed_layer_normalization(with_mask: bool) -> None:
    inputs: dict[str, Optional[np.ndarray]] = {
        "input_ids": RNG.integers(0, 10, (2, 5)).astype(np.int32),
        "segment_ids": RNG.integers(0, 2, (2, 5)).astype(np.int32),
        "word": rand(10, 8), "position": rand(7, 8), "segment": rand(2, 8),
        "gamma": rand(8), "beta": rand(8),
        "mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32) if with_mask else None}
    compare("EmbedLayerNormalization", inputs, ["out", "mask_index", "sum"],
            {"epsilon": 1e-5}, constants=("word", "position", "segment", "gamma", "beta"))
