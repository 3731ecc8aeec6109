"""Op by op: GE against onnxruntime on the single ops real models are made of.

Each case is a one-node ONNX model at the size a real CNN, transformer, speech or OCR
model uses it (activations, depthwise and large-kernel convolutions, pooling, resize,
transposed convolutions, recurrent cells, normalizations, products). GE (level 3,
default engines) and onnxruntime (CPU provider, default options) run it on the same
inputs through ``ge.benchmark.compare`` (each warmed up alone, then alternating
blocks, medians). Every case is checked first: GE's output must match onnxruntime's
within 1e-4 of the output's scale, else the case is reported wrong and not timed.

    python bench/ops.py                 # writes the ops section of docs/benchmarks.md
    python bench/ops.py --match Conv --no-write
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ge  # noqa: E402
from bench.report import markers, write_section  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("ops")
RNG = np.random.default_rng(0)


def _weights(*shape: int, scale: float = 0.1) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


class Case:
    """One single-op model: its name, op, input shapes, attributes and constant inputs."""

    def __init__(self, name: str, op: str, shapes: Sequence[Sequence[int]],
                 attrs: Optional[dict[str, Any]] = None,
                 consts: Sequence[Optional[np.ndarray]] = (), outputs: int = 1,
                 opset: int = 17) -> None:
        self.name, self.op, self.shapes = name, op, [list(s) for s in shapes]
        self.attrs, self.consts, self.outputs, self.opset = attrs or {}, list(consts), outputs, \
            opset

    def model(self) -> bytes:
        inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, shape)
                  for i, shape in enumerate(self.shapes)]
        names = [f"x{i}" for i in range(len(self.shapes))]
        initializers = []
        for index, value in enumerate(self.consts):
            if value is None:
                names.append("")
                continue
            name = f"c{index}"
            initializers.append(numpy_helper.from_array(value, name))
            names.append(name)
        outputs = [f"y{i}" for i in range(self.outputs)]
        node = helper.make_node(self.op, names, outputs, **self.attrs)
        graph = helper.make_graph([node], self.name, inputs,
                                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                   for o in outputs], initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        return model.SerializeToString()


def _conv(name: str, shape: Sequence[int], cout: int, kernel: int, stride: int = 1,
          group: int = 1, pad: Optional[int] = None) -> Case:
    pad = kernel // 2 if pad is None else pad
    return Case(name, "Conv", [shape], {"kernel_shape": [kernel, kernel],
                                        "strides": [stride, stride], "pads": [pad] * 4,
                                        "group": group},
                [_weights(cout, shape[1] // group, kernel, kernel), _weights(cout)])


def _lstm(name: str, seq: int, batch: int, inputs: int, hidden: int,
          direction: str = "forward") -> Case:
    directions = 2 if direction == "bidirectional" else 1
    return Case(name, "LSTM", [[seq, batch, inputs]],
                {"hidden_size": hidden, "direction": direction},
                [_weights(directions, 4 * hidden, inputs), _weights(directions, 4 * hidden, hidden),
                 _weights(directions, 8 * hidden)], outputs=1)


def _gru(name: str, seq: int, batch: int, inputs: int, hidden: int) -> Case:
    return Case(name, "GRU", [[seq, batch, inputs]],
                {"hidden_size": hidden, "linear_before_reset": 1},
                [_weights(1, 3 * hidden, inputs), _weights(1, 3 * hidden, hidden),
                 _weights(1, 6 * hidden)], outputs=1)


def _resize(name: str, mode: str, transform: str, shape: Sequence[int]) -> Case:
    scales = np.array([1, 1, 2, 2], np.float32)
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attrs["nearest_mode"] = "floor"
    return Case(name, "Resize", [shape], attrs, [None, scales], opset=13)


CASES = [
    Case("Relu (1x64x80x80)", "Relu", [[1, 64, 80, 80]]),
    Case("Sigmoid (1x64x80x80)", "Sigmoid", [[1, 64, 80, 80]]),
    Case("Tanh (1x128x3072)", "Tanh", [[1, 128, 3072]]),
    Case("Erf (1x128x3072)", "Erf", [[1, 128, 3072]]),
    Case("Gelu opset 20 (1x128x3072)", "Gelu", [[1, 128, 3072]], opset=20),
    Case("Gelu tanh opset 20 (1x128x3072)", "Gelu", [[1, 128, 3072]], {"approximate": "tanh"},
         opset=20),
    Case("HardSwish (1x64x80x80)", "HardSwish", [[1, 64, 80, 80]]),
    Case("Mish (1x64x80x80)", "Mish", [[1, 64, 80, 80]], opset=18),
    Case("LeakyRelu a=0.1 (1x64x80x80)", "LeakyRelu", [[1, 64, 80, 80]], {"alpha": 0.1}),
    Case("Softplus (1x64x80x80)", "Softplus", [[1, 64, 80, 80]]),
    Case("Exp (1x64x80x80)", "Exp", [[1, 64, 80, 80]]),
    Case("Pow x^3 const (1x128x3072)", "Pow", [[1, 128, 3072]],
         consts=[np.array(3.0, np.float32)]),
    Case("Add broadcast bias (1x64x80x80 + 64x1x1)", "Add", [[1, 64, 80, 80]],
         consts=[_weights(64, 1, 1)]),
    Case("Mul (1x64x80x80 x 1x64x80x80)", "Mul", [[1, 64, 80, 80], [1, 64, 80, 80]]),
    Case("Softmax last axis (1x12x128x128)", "Softmax", [[1, 12, 128, 128]], {"axis": -1}),
    Case("LayerNormalization (1x128x768)", "LayerNormalization", [[1, 128, 768]],
         {"axis": -1}, [_weights(768), _weights(768)]),
    Case("MatMul (1x128x768 @ 768x768)", "MatMul", [[1, 128, 768]], consts=[_weights(768, 768)]),
    Case("MatMul attention (1x12x128x64 @ 1x12x64x128)", "MatMul",
         [[1, 12, 128, 64], [1, 12, 64, 128]]),
    Case("Gemm (1x2048 -> 1000)", "Gemm", [[1, 2048]], {"transB": 1},
         [_weights(1000, 2048), _weights(1000)]),
    _conv("Conv 3x3 (1x64x56x56 -> 64)", [1, 64, 56, 56], 64, 3),
    _conv("Conv 1x1 (1x256x56x56 -> 64)", [1, 256, 56, 56], 64, 1),
    _conv("Conv 3x3 s2 stem (1x3x224x224 -> 32)", [1, 3, 224, 224], 32, 3, 2),
    _conv("Conv depthwise 3x3 g=64 (1x64x80x80)", [1, 64, 80, 80], 64, 3, 1, 64),
    _conv("Conv depthwise 3x3 s2 g=64 (1x64x80x80)", [1, 64, 80, 80], 64, 3, 2, 64),
    _conv("Conv depthwise 5x5 g=64 (1x64x80x80)", [1, 64, 80, 80], 64, 5, 1, 64),
    _conv("Conv depthwise 7x7 g=128 (1x128x40x40)", [1, 128, 40, 40], 128, 7, 1, 128),
    _conv("Conv grouped 3x3 g=32 (1x128x40x40 -> 128)", [1, 128, 40, 40], 128, 3, 1, 32),
    Case("ConvTranspose 2x2 s2 (1x64x40x40 -> 32)", "ConvTranspose", [[1, 64, 40, 40]],
         {"kernel_shape": [2, 2], "strides": [2, 2]}, [_weights(64, 32, 2, 2), _weights(32)]),
    Case("ConvTranspose 4x4 s2 p1 (1x64x40x40 -> 64)", "ConvTranspose", [[1, 64, 40, 40]],
         {"kernel_shape": [4, 4], "strides": [2, 2], "pads": [1, 1, 1, 1]},
         [_weights(64, 64, 4, 4), _weights(64)]),
    Case("MaxPool 3x3 s2 p1 (1x64x112x112)", "MaxPool", [[1, 64, 112, 112]],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("MaxPool 2x2 s2 (1x64x80x80)", "MaxPool", [[1, 64, 80, 80]],
         {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("MaxPool 5x5 s1 p2 SPPF (1x128x40x40)", "MaxPool", [[1, 128, 40, 40]],
         {"kernel_shape": [5, 5], "strides": [1, 1], "pads": [2, 2, 2, 2]}),
    Case("AveragePool 3x3 s1 p1 (1x64x80x80)", "AveragePool", [[1, 64, 80, 80]],
         {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    Case("GlobalAveragePool (1x1280x7x7)", "GlobalAveragePool", [[1, 1280, 7, 7]]),
    _resize("Resize nearest x2 (1x64x80x80)", "nearest", "asymmetric", [1, 64, 80, 80]),
    _resize("Resize linear x2 half_pixel (1x64x80x80)", "linear", "half_pixel", [1, 64, 80, 80]),
    _resize("Resize linear x2 align_corners (1x64x80x80)", "linear", "align_corners",
            [1, 64, 80, 80]),
    _lstm("LSTM (seq50 b1 in64 h128)", 50, 1, 64, 128),
    _lstm("LSTM bidirectional (seq50 b1 in64 h128)", 50, 1, 64, 128, "bidirectional"),
    _gru("GRU linear_before_reset (seq50 b1 in64 h128)", 50, 1, 64, 128),
    Case("Transpose NCHW->NHWC (1x64x80x80)", "Transpose", [[1, 64, 80, 80]],
         {"perm": [0, 2, 3, 1]}),
    Case("ReduceMean last axis (1x128x768)", "ReduceMean", [[1, 128, 768]],
         {"axes": [-1], "keepdims": 1}, opset=13),
]


def _check(path: str, feeds: dict[str, np.ndarray], session: Any, ort: Any) -> float:
    got = list(session.run(feeds).values())
    want = ort.run(None, feeds)
    worst = 0.0
    for a, b in zip(got, want):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(float(np.max(np.abs(b))), 1e-6)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst


def run(cases: Sequence[Case], rounds: int, block_seconds: float) -> list[dict[str, Any]]:
    import onnxruntime

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for case in cases:
            path = str(Path(folder) / "case.onnx")
            Path(path).write_bytes(case.model())
            feeds = benchmark.feeds_for(path, batch=1)
            executable = ge.compile(ge.parse_onnx(path))
            session = ge.Session(executable)
            ort = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            error = _check(path, feeds, session, ort)
            engines = ", ".join(sorted(executable.report["engines"]))
            row: dict[str, Any] = {"case": case.name, "error": error, "engines": engines}
            if error <= 1e-4:
                result = benchmark.compare({"ge": functools.partial(session.run, feeds),
                                            "onnxruntime": functools.partial(ort.run, None,
                                                                             feeds)},
                                           rounds=rounds, block_seconds=block_seconds,
                                           settle=0.05)
                row.update(ge=result.median("ge"), ort=result.median("onnxruntime"),
                           ratio=result.ratio("ge", "onnxruntime"))
            rows.append(row)
            shown = f"{row['ratio']:.2f}" if "ratio" in row else "WRONG"
            print(f"{case.name:55s} {shown:>6s}  ({engines}; error {error:.1e})", flush=True)
    return rows


def render(rows: list[dict[str, Any]], rounds: int) -> str:
    timed = [r for r in rows if "ratio" in r]
    ratios = sorted(r["ratio"] for r in timed)
    over3 = sum(1 for r in ratios if r > 3)
    over2 = sum(1 for r in ratios if r > 2)
    median = float(np.median(ratios)) if ratios else float("nan")
    lines = [BEGIN, "## Op by op: GE against onnxruntime", "",
             f"Measured by `python bench/ops.py` on {time.strftime('%Y-%m-%d')} "
             f"({benchmark.machine()['cpu']}, {benchmark.machine()['cores']} cores): "
             f"{len(rows)} one-node models at the sizes real models use them; GE at level 3 "
             f"with its default engines, onnxruntime with default options; alternating "
             f"blocks over {rounds} rounds, medians. Every case is first checked against "
             f"onnxruntime (error: max difference over the output's scale).", "",
             f"Median GE / onnxruntime {median:.2f}; {over2} of {len(timed)} over 2x, "
             f"{over3} over 3x; {len(rows) - len(timed)} wrong.", "",
             "| op (config) | onnxruntime ms | GE ms | GE / onnxruntime | GE's engines | error |",
             "|---|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: -r.get("ratio", float("inf"))):
        if "ratio" in row:
            lines.append(f"| {row['case']} | {row['ort'] * 1e3:.3f} | {row['ge'] * 1e3:.3f} | "
                         f"{row['ratio']:.2f} | {row['engines']} | {row['error']:.1e} |")
        else:
            lines.append(f"| {row['case']} | - | - | wrong | {row['engines']} | "
                         f"{row['error']:.1e} |")
    lines.append(END)
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--match", default="", help="only cases whose name contains this")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block-seconds", type=float, default=0.2)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.match in c.name]
    rows = run(cases, args.rounds, args.block_seconds)
    text = render(rows, args.rounds)
    print(text)
    if not args.no_write and not args.match:
        write_section("ops", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
