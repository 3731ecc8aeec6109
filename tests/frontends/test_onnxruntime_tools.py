"""Models rewritten by onnxruntime's own tools load in GE and agree with onnxruntime.

``quantize_static`` (QOperator and QDQ formats) and ``quantize_dynamic`` emit the quantized
contrib ops (QLinear*, QGemm, QAttention, QEmbedLayerNormalization,
DynamicQuantizeLSTM), the weight-only quantizers MatMulNBits, GatherBlockQuantized and
MatMulBnb4; the transformer optimizer emits the fused ones
(EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu, FastGelu).
Each test checks that the tool emitted the ops it is about, then runs the rewritten
model in GE and onnxruntime on the same inputs.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

import ge
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _draws_fixed_per_test(request: pytest.FixtureRequest) -> None:
    """Each test draws the same numbers whatever runs before it (xdist, -k, reruns)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))


def _run_both(path: Path, feeds: Mapping[str, np.ndarray], threads: Optional[int] = None
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(GE's outputs, onnxruntime's), onnxruntime with ``threads`` intra-op threads if given."""
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    expected = ort.InferenceSession(str(path), options,
                                    providers=["CPUExecutionProvider"]).run(None, dict(feeds))
    actual = ge.Session(ge.compile(ge.parse_onnx(str(path)))).run(dict(feeds))
    if isinstance(actual, dict):
        actual = list(actual.values())
    return [np.asarray(a) for a in actual], expected


def _contrib_ops(path: Path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node if n.domain == "com.microsoft"}


def _weight(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


# -- quantize_static, QOperator format --------------------------------------------------

def _cnn(path: Path) -> None:
    """Conv, pooling, activations, Add/Mul, Concat, Where, Gemm, MatMul and Softmax."""
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("AveragePool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "w2", "b2"], ["c2"]),
        node("Sigmoid", ["c2"], ["s2"]),
        node("LeakyRelu", ["p1"], ["l2"], alpha=0.1),
        node("Add", ["s2", "l2"], ["a2"]),
        node("Mul", ["a2", "l2"], ["m2"]),
        node("Concat", ["a2", "m2"], ["cat"], axis=1),
        node("MaxPool", ["cat"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        node("AveragePool", ["cat"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Greater", ["mp", "ap"], ["cond"]),
        node("Where", ["cond", "mp", "ap"], ["wh"]),
        node("GlobalAveragePool", ["wh"], ["g"]),
        node("Flatten", ["g"], ["f"]),
        node("Gemm", ["f", "wg", "bg"], ["gm"], transB=1),
        node("MatMul", ["gm", "wm"], ["mm"]),
        node("Softmax", ["mm"], ["y"], axis=-1),
    ]
    weights = [_weight("w1", 4, 3, 3, 3), _weight("b1", 4), _weight("w2", 4, 4, 1, 1),
               _weight("b2", 4), _weight("wg", 6, 8), _weight("bg", 6), _weight("wm", 6, 5)]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


class _Images(CalibrationDataReader):
    def __init__(self, count: int) -> None:
        self.batches: Iterator[dict[str, np.ndarray]] = iter(
            [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(count)])

    def get_next(self) -> Optional[dict[str, np.ndarray]]:
        return next(self.batches, None)


def test_quantize_static_qoperator(tmp_path: Path) -> None:
    """Every op of the model becomes a QLinear op; GE agrees with onnxruntime within one
    step of the output's quantization (it gave the same bytes when this was written)."""
    source, target = tmp_path / "cnn.onnx", tmp_path / "cnn.quant.onnx"
    _cnn(source)
    quantize_static(str(source), str(target), _Images(8), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"ForceQuantizeNoInputCheck": True})
    assert _contrib_ops(target) >= {
        "QLinearAveragePool", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearAdd", "QLinearMul",
        "QLinearConcat", "QLinearWhere", "QLinearGlobalAveragePool", "QGemm", "QLinearSoftmax"}
    for _ in range(3):
        feeds = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}
        (got,), (want,) = _run_both(target, feeds)
        step = 1 / 256  # QLinearSoftmax's output scale
        assert_close(got, want, rtol=0, atol=step * 1.01, what="QOperator cnn")


def test_quantize_static_qdq_contrib(tmp_path: Path) -> None:
    """The QDQ format with com.microsoft Quantize/DequantizeLinear: onnxruntime fuses the
    groups into integer kernels, GE computes them in float: one output step apart."""
    source, target = tmp_path / "cnn.onnx", tmp_path / "cnn.qdq.onnx"
    _cnn(source)
    quantize_static(str(source), str(target), _Images(8), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"ForceQuantizeNoInputCheck": True, "UseQDQContribOps": True})
    assert _contrib_ops(target) == {"QuantizeLinear", "DequantizeLinear"}
    for _ in range(3):
        feeds = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}
        (got,), (want,) = _run_both(target, feeds)
        assert_close(got, want, rtol=0, atol=1.01 / 255, what="QDQ cnn")


# -- quantize_dynamic: DynamicQuantizeLSTM ----------------------------------------------

def _lstm(path: Path, direction: str) -> None:
    dirs, size, hidden = (2 if direction == "bidirectional" else 1), 6, 8
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"],
                            hidden_size=hidden, direction=direction)
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, size])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
         for name in ("y", "y_h", "y_c")],
        initializer=[_weight("W", dirs, 4 * hidden, size), _weight("R", dirs, 4 * hidden, hidden),
                     _weight("B", dirs, 8 * hidden, scale=0.1)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), str(path))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_quantize_dynamic_lstm(tmp_path: Path, direction: str, per_channel: bool) -> None:
    """GE quantizes X and each step's hidden state to uint8 as onnxruntime does for its
    integer GEMMs (onnxruntime with a thread per batch row, as GE assumes): only float32
    rounding in the gates is left. The tool writes int8 weights whatever ``weight_type``."""
    source, target = tmp_path / f"{direction}.onnx", tmp_path / f"{direction}.quant.onnx"
    _lstm(source, direction)
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8,
                     per_channel=per_channel)
    assert _contrib_ops(target) == {"DynamicQuantizeLSTM"}
    feeds = {"x": RNG.standard_normal((5, 2, 6)).astype(np.float32)}
    actual, expected = _run_both(target, feeds, threads=8)
    for got, want in zip(actual, expected):
        assert_close(got, want, rtol=0, atol=2e-6, what=f"{direction} LSTM")


# -- weight-only quantizers: MatMulNBits, GatherBlockQuantized, MatMulBnb4 -------------

def _embedding_projection() -> onnx.ModelProto:
    nodes = [helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=0),
             helper.make_node("MatMul", ["embedded", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[_weight("table", 10, 64, scale=1.0), _weight("w", 64, 16, scale=1.0)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_weight_only_quantizers(tmp_path: Path) -> None:
    """Both quantizers' outputs dequantize to the same weights in GE: exact agreement."""
    from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    nbits = MatMulNBitsQuantizer(_embedding_projection(), block_size=32, is_symmetric=False,
                                 op_types_to_quantize=("MatMul", "Gather"),
                                 quant_axes=(("MatMul", 0), ("Gather", 1)))
    bnb = MatMulBnb4Quantizer(_embedding_projection(), MatMulBnb4Quantizer.NF4, 32)
    expected_ops = ({"GatherBlockQuantized", "MatMulNBits"}, {"MatMulBnb4"})
    for quantizer, ops in zip((nbits, bnb), expected_ops):
        quantizer.process()
        path = tmp_path / "quantized.onnx"
        onnx.save(quantizer.model.model, str(path))
        assert _contrib_ops(path) == ops
        (got,), (want,) = _run_both(path, {"ids": np.array([[1, 2, 3], [9, 0, -1]], np.int64)})
        assert_close(got, want, rtol=1e-5, atol=1e-5, what=f"weight-only {sorted(ops)}")


# -- the transformer optimizer, then quantize_dynamic, on a small BERT ------------------

def _bert(path: Path) -> None:
    """A two-layer BERT exported by torch's TorchScript exporter, as Hugging Face's are."""
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, tanh_gelu: bool, hidden: int = 16, heads: int = 2) -> None:
            super().__init__()
            self.heads, self.hidden, self.tanh_gelu = heads, hidden, tanh_gelu
            self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
            self.norm1, self.norm2 = (nn.LayerNorm(hidden, eps=1e-12) for _ in range(2))
            self.up, self.down = nn.Linear(hidden, 2 * hidden), nn.Linear(2 * hidden, hidden)

        def split(self, x: Any) -> Any:
            batch, length, _ = x.shape
            return x.view(batch, length, self.heads, -1).permute(0, 2, 1, 3)

        def forward(self, x: Any, mask: Any) -> Any:
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hidden // self.heads)
            heads = torch.matmul((scores + mask).softmax(-1), v).permute(0, 2, 1, 3)
            merged = heads.contiguous().view(x.shape[0], x.shape[1], self.hidden)
            x = self.norm1(self.o(merged) + x)
            approximate = "tanh" if self.tanh_gelu else "none"
            inner = nn.functional.gelu(self.up(x), approximate=approximate)
            return self.norm2(self.down(inner) + x)

    class Bert(nn.Module):
        def __init__(self, hidden: int = 16) -> None:
            super().__init__()
            self.word, self.position = nn.Embedding(30, hidden), nn.Embedding(16, hidden)
            self.segment = nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList([Layer(False), Layer(True)])

        def forward(self, ids: Any, mask: Any, segments: Any) -> Any:
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.norm(self.word(ids) + self.position(positions) + self.segment(segments))
            additive = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
            for layer in self.layers:
                x = layer(x, additive)
            return x

    torch.manual_seed(0)
    example = (torch.randint(0, 30, (2, 6)), torch.ones(2, 6, dtype=torch.int64),
               torch.zeros(2, 6, dtype=torch.int64))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(Bert().eval(), example, str(path), input_names=names,
                      output_names=["out"], opset_version=14, dynamo=False,
                      dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names})


def _bert_feeds() -> dict[str, np.ndarray]:
    return {"input_ids": RNG.integers(0, 30, (2, 6)),
            "attention_mask": np.array([[1] * 6, [1] * 4 + [0] * 2], np.int64),
            "token_type_ids": RNG.integers(0, 2, (2, 6))}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's TorchScript exporter
def test_optimized_and_quantized_bert(tmp_path: Path) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    source = tmp_path / "bert.onnx"
    optimized, quantized = tmp_path / "bert.opt.onnx", tmp_path / "bert.quant.onnx"
    _bert(source)
    optimize_model(str(source), model_type="bert", num_heads=2, hidden_size=16,
                   opt_level=0).save_model_to_file(str(optimized))
    assert _contrib_ops(optimized) == {"EmbedLayerNormalization", "Attention",
                                       "SkipLayerNormalization", "BiasGelu", "FastGelu"}
    (got,), (want,) = _run_both(optimized, _bert_feeds())
    assert_close(got, want, rtol=1e-4, atol=1e-4, what="optimized BERT")
    quantize_dynamic(str(optimized), str(quantized), weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})
    assert {"QAttention", "QEmbedLayerNormalization"} <= _contrib_ops(quantized)
    (got,), (want,) = _run_both(quantized, _bert_feeds())
    assert_close(got, want, rtol=1e-4, atol=1e-4, what="quantized BERT")
