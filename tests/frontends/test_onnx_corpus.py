"""A corpus of models as third-party tools write them, each run by GE and by onnxruntime.

Small models (a conv net with a dynamic batch, a transformer block with a symbolic
sequence length, a model with ``Loop``/``If`` from TorchScript control flow or
``torch.cond``, an LSTM) are exported by ``torch.onnx.export`` with both the
TorchScript exporter (``dynamo=False``) and the dynamo exporter (``dynamo=True``),
then passed through onnxruntime's own tools: ``quantize_dynamic``, ``quantize_static``
in the QDQ and QOperator formats, and the transformers optimizer. Every model keeps
symbolic dimensions and is checked at two different input sizes.

Quantized graphs are compared with onnxruntime running them as written (graph
optimizations off): its optimizer turns ``DequantizeLinear -> op -> QuantizeLinear``
into integer kernels that round their requantization differently, one quantization
step apart from the graph's own meaning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnxruntime.quantization import CalibrationDataReader

import ge
from tests.tolerance import assert_close

Feeds = dict[str, np.ndarray]


# -- the source models --------------------------------------------------------------------

class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, stride=2), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class TransformerBlock(torch.nn.Module):
    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.project = torch.nn.Linear(width, width)
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.feed_forward = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        size = width // self.heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, length, self.heads, size).transpose(1, 2)

        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        weights = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / size ** 0.5, dim=-1)
        mixed = (weights @ heads(v)).transpose(1, 2).reshape(batch, length, width)
        x = x + self.project(mixed)
        return x + self.feed_forward(self.norm2(x))


class ScriptedControlFlow(torch.nn.Module):
    """A loop whose trip count is an input, then a data-dependent branch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        y = x
        for _ in range(steps):
            y = torch.tanh(self.linear(y))
        if bool(y.sum() > 0):
            y = y * 2.0
        else:
            y = y - 1.0
        return y


class ExportedCondition(torch.nn.Module):
    """``torch.cond``, which the dynamo exporter writes as an ONNX ``If``."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return torch.cond(y.sum() > 0, lambda t: t * 2.0, lambda t: t.abs() - 1.0, (y,))


class Recurrent(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 12, batch_first=True)
        self.head = torch.nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y)


def _random(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@dataclass
class Source:
    """A torch model, an example input, and its symbolic axes per input."""

    factory: Callable[[], torch.nn.Module]
    example: tuple
    axes: dict[str, dict[int, str]]
    feeds: list[Feeds]  # two feeds of different sizes
    calibration: list[Feeds] = field(default_factory=list)


SOURCES = {
    "convnet": Source(ConvNet, (torch.randn(2, 3, 16, 16),), {"x": {0: "batch"}},
                      [{"x": _random(1, 1, 3, 16, 16)}, {"x": _random(2, 5, 3, 16, 16)}],
                      [{"x": _random(3, 2, 3, 16, 16)}, {"x": _random(4, 3, 3, 16, 16)}]),
    "transformer": Source(TransformerBlock, (torch.randn(2, 7, 32),),
                          {"x": {0: "batch", 1: "sequence"}},
                          [{"x": _random(5, 1, 5, 32)}, {"x": _random(6, 3, 11, 32)}],
                          [{"x": _random(7, 2, 5, 32)}, {"x": _random(8, 1, 9, 32)}]),
    "lstm": Source(Recurrent, (torch.randn(2, 7, 6),), {"x": {0: "batch", 1: "time"}},
                   [{"x": _random(9, 1, 5, 6)}, {"x": _random(10, 3, 9, 6)}],
                   [{"x": _random(11, 2, 5, 6)}, {"x": _random(12, 1, 8, 6)}]),
    "cond": Source(ExportedCondition, (torch.randn(2, 4),), {"x": {0: "batch"}},
                   [{"x": _random(13, 2, 4) + 3.0}, {"x": _random(14, 5, 4) - 3.0}]),
}


def _torchscript_export(name: str, path: Path) -> None:
    torch.manual_seed(0)
    if name == "loop":
        model = torch.jit.script(ScriptedControlFlow().eval())
        torch.onnx.export(model, (torch.randn(2, 4), 3), str(path), dynamo=False,
                          input_names=["x", "steps"], dynamic_axes={"x": {0: "batch"}},
                          opset_version=17)
        return
    source = SOURCES[name]
    torch.onnx.export(source.factory().eval(), source.example, str(path), dynamo=False,
                      input_names=list(source.axes), dynamic_axes=source.axes, opset_version=17)


def _dynamo_export(name: str, path: Path) -> None:
    from torch.export import Dim

    torch.manual_seed(0)
    source = SOURCES[name]
    shapes = tuple({axis: Dim(label, min=1, max=64) for axis, label in axes.items()}
                   for axes in source.axes.values())
    torch.onnx.export(source.factory().eval(), source.example, str(path), dynamo=True,
                      input_names=list(source.axes), dynamic_shapes=shapes, verbose=False)


LOOP_FEEDS = [{"x": _random(15, 2, 4), "steps": np.array(3, np.int64)},
              {"x": _random(16, 5, 4) - 2.0, "steps": np.array(1, np.int64)}]


# -- building the corpus --------------------------------------------------------------------

class Corpus:
    """Exports and converts models on first use; each file is made once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        if name not in self.paths:
            target = self.root / f"{name}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._make(name, target)
            self.paths[name] = target
        return self.paths[name]

    def _make(self, name: str, target: Path) -> None:
        model, _, tool = name.partition(":")
        if tool == "":
            base, exporter = model.rsplit("-", 1)
            (_dynamo_export if exporter == "dynamo" else _torchscript_export)(base, target)
        elif tool == "dynamic":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(self.path(model), target, weight_type=QuantType.QInt8)
        elif tool in ("QDQ", "QOperator"):
            from onnxruntime.quantization import QuantFormat, quantize_static

            quantize_static(self.path(model), target, _Calibration(SOURCES[_base(model)]),
                            quant_format=QuantFormat[tool])
        else:
            from onnxruntime.transformers import optimizer

            optimized = optimizer.optimize_model(str(self.path(model)), model_type="bert",
                                                 num_heads=4, hidden_size=32, opt_level=1)
            optimized.save_model_to_file(str(target))


def _base(model: str) -> str:
    return model.rsplit("-", 1)[0]


class _Calibration(CalibrationDataReader):
    """A tiny CalibrationDataReader over a source's calibration feeds."""

    def __init__(self, source: Source) -> None:
        self.pending = iter(source.calibration)

    def get_next(self):
        return next(self.pending, None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("corpus"))


# -- the cases ---------------------------------------------------------------------------------

# name: "<source>-<exporter>" for an export, then ":<tool>" for what a tool made of it.
CASES = [
    "convnet-torchscript", "convnet-dynamo",
    "transformer-torchscript", "transformer-dynamo",
    "lstm-torchscript", "lstm-dynamo",
    "loop-torchscript", "cond-dynamo",
    "convnet-torchscript:dynamic", "convnet-torchscript:QDQ", "convnet-torchscript:QOperator",
    "transformer-torchscript:dynamic", "transformer-torchscript:QDQ",
    "transformer-torchscript:QOperator",
    "lstm-torchscript:dynamic", "lstm-torchscript:QDQ", "lstm-torchscript:QOperator",
    "convnet-dynamo:QDQ", "transformer-dynamo:dynamic", "lstm-dynamo:QOperator",
    "transformer-torchscript:optimizer", "transformer-dynamo:optimizer",
]


# Cases GE does not yet match, each with its reason: strict expected failures, so a case
# that starts to agree fails the run until it is taken off this list.
KNOWN_GAPS: dict[str, str] = {}


def _cases() -> list:
    return [pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True))
            if name in KNOWN_GAPS else name for name in CASES]


def _feeds(name: str) -> list[Feeds]:
    base = _base(name.partition(":")[0])
    return LOOP_FEEDS if base == "loop" else SOURCES[base].feeds


# onnxruntime's threads, at least one per batch row of every feed: its DynamicQuantizeLSTM
# quantizes each row's hidden state on its own then, as GE does.
THREADS = 8


def _onnxruntime(path: Path, feeds: Feeds, optimize: bool) -> list[np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    if not optimize:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _has_symbolic_input(model: onnx.ModelProto) -> bool:
    return any(dim.dim_param for info in model.graph.input
               for dim in info.type.tensor_type.shape.dim)


# What each tool must have written, so that a case tests what its name says.
_DYNAMIC_OPS = {"DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulInteger",
                "ConvInteger", "DynamicQuantizeLSTM"}


def _wrote_what_it_should(name: str, model: onnx.ModelProto) -> bool:
    kinds = {node.op_type for node in model.graph.node}
    tool = name.partition(":")[2]
    if tool == "dynamic":
        return bool(kinds & _DYNAMIC_OPS)
    if tool == "QDQ":
        return {"QuantizeLinear", "DequantizeLinear"} <= kinds
    if tool == "QOperator":
        return any(kind.startswith(("QLinear", "QGemm")) for kind in kinds)
    if tool == "optimizer":
        return any(node.domain == "com.microsoft" for node in model.graph.node)
    if name.startswith("loop"):
        return {"Loop", "If"} <= kinds
    return "If" in kinds if name.startswith("cond") else bool(kinds)


@pytest.mark.parametrize("name", _cases())
def test_corpus_model_agrees_with_onnxruntime(corpus, name):
    path = corpus.path(name)
    proto = onnx.load(str(path), load_external_data=False)
    assert _has_symbolic_input(proto), "the corpus keeps symbolic input dimensions"
    assert _wrote_what_it_should(name, proto), sorted({n.op_type for n in proto.graph.node})
    session = ge.Session(ge.compile(ge.parse_onnx(str(path))))
    quantized = ":" in name and not name.endswith(":optimizer")
    sizes = set()
    for feeds in _feeds(name):
        expected = _onnxruntime(path, feeds, optimize=not quantized)
        got = list(session.run(feeds).values())
        assert len(got) == len(expected)
        for index, (ours, theirs) in enumerate(zip(got, expected)):
            assert_close(ours, theirs, accumulate=True, what=f"{name} output {index}")
        sizes.add(tuple(np.shape(v) for v in feeds.values()))
    assert len(sizes) == 2
