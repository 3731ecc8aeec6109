"""Op by op: GE against onnxruntime on the single ops real models are made of.

Each case is a one-node ONNX model (a few are the small chains of nodes an exporter
writes for one layer: a decomposed LayerNorm or Gelu, SiLU, Conv+BatchNormalization+Relu)
at the size a real CNN, transformer, speech or OCR model uses it (activations,
elementwise and broadcast arithmetic, casts, depthwise and large-kernel convolutions,
pooling, resize, transposed convolutions, recurrent cells, normalizations, reductions,
products, shape and index ops, TopK, NonMaxSuppression, RoiAlign). GE (level 3, default
engines) and onnxruntime (CPU provider, default options) run it on the same inputs
through ``ge.benchmark.compare`` (each warmed up alone, then alternating blocks,
medians). Every case is checked first: GE's float outputs must match onnxruntime's
within 1e-4 of the output's scale and its integer and boolean outputs exactly (TopK and
NonMaxSuppression indices may differ only between equal values), else the case is
reported wrong and not timed; a case GE fails to compile or run is reported failed.

    python bench/ops.py                 # writes the ops section of docs/benchmarks.md
    python bench/ops.py --match Conv --no-write
    python bench/ops.py --check-only    # correctness only, no timing, nothing written
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ge  # noqa: E402
from bench.report import markers, write_section  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("ops")
RNG = np.random.default_rng(0)
TOLERANCE = 1e-4

# An input is a shape (float32 standard normal samples, drawn when the case is run) or
# the array to feed (any dtype: indices, masks, boxes, positive values).
Input = Union[Sequence[int], np.ndarray]
# For an integer output that selects values (TopK, NonMaxSuppression indices): the values
# the given indices select in the feeds, so that ties between equal values are accepted.
Ties = Callable[[Mapping[str, np.ndarray], np.ndarray], np.ndarray]
node = helper.make_node


def _weights(*shape: int, scale: float = 0.1) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _positive(*shape: int, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


def _ints(high: int, *shape: int, low: int = 0) -> np.ndarray:
    return RNG.integers(low, high, shape, dtype=np.int64)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _f32(value: float) -> np.ndarray:
    return np.array(value, np.float32)


class Case:
    """One model: its name, nodes, inputs, constant initializers, outputs and opset.

    ``Case(name, op, shapes, attrs, consts)`` is one ``op`` node whose inputs are the
    graph inputs ``x0, x1, ...`` (one per entry of ``shapes``: a shape for float32
    normal samples, or an array to feed) followed by the initializers ``c0, c1, ...``
    (``None`` for an omitted optional input); its outputs are ``y0, y1, ...``.
    ``Case.chain`` describes a small chain of nodes over named inputs and initializers.
    """

    def __init__(self, name: str, op: str, shapes: Sequence[Input],
                 attrs: Optional[dict[str, Any]] = None,
                 consts: Sequence[Optional[np.ndarray]] = (), outputs: int = 1,
                 opset: int = 17, ties: Optional[Ties] = None) -> None:
        inputs = {f"x{i}": shape for i, shape in enumerate(shapes)}
        names, initializers = list(inputs), {}
        for index, value in enumerate(consts):
            if value is None:
                names.append("")
                continue
            initializers[f"c{index}"] = value
            names.append(f"c{index}")
        results = [f"y{i}" for i in range(outputs)]
        self._define(name, [node(op, names, results, **(attrs or {}))], inputs,
                     initializers, results, opset, ties)

    @classmethod
    def chain(cls, name: str, nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, Input],
              consts: Optional[Mapping[str, np.ndarray]] = None,
              outputs: Sequence[str] = ("y",), opset: int = 17,
              ties: Optional[Ties] = None) -> Case:
        """A case of several nodes (``helper.make_node``) over the graph inputs
        ``inputs`` and the initializers ``consts``, by name."""
        case = cls.__new__(cls)
        case._define(name, nodes, inputs, consts or {}, outputs, opset, ties)
        return case

    def _define(self, name: str, nodes: Sequence[onnx.NodeProto],
                inputs: Mapping[str, Input], consts: Mapping[str, np.ndarray],
                outputs: Sequence[str], opset: int, ties: Optional[Ties]) -> None:
        self.name, self.nodes, self.opset, self.ties = name, list(nodes), opset, ties
        self.inputs = {key: value if isinstance(value, np.ndarray) else [int(d) for d in value]
                       for key, value in inputs.items()}
        self.consts, self.outputs = dict(consts), list(outputs)

    def feeds(self, seed: int = 0) -> dict[str, np.ndarray]:
        """The inputs to run on: the given arrays, and normal samples for the shapes (drawn
        as ``ge.benchmark.feeds_for`` draws them)."""
        rng = np.random.default_rng(seed)
        return {key: value if isinstance(value, np.ndarray)
                else rng.standard_normal(value).astype(np.float32)
                for key, value in self.inputs.items()}

    def model(self) -> bytes:
        inputs = []
        for key, value in self.inputs.items():
            dtype = value.dtype if isinstance(value, np.ndarray) else np.dtype(np.float32)
            shape = list(value.shape) if isinstance(value, np.ndarray) else value
            inputs.append(helper.make_tensor_value_info(
                key, helper.np_dtype_to_tensor_dtype(dtype), shape))
        initializers = [numpy_helper.from_array(value, key) for key, value in self.consts.items()]
        opsets = [helper.make_opsetid("", self.opset)]
        untyped = [helper.make_value_info(key, onnx.TypeProto()) for key in self.outputs]
        graph = helper.make_graph(self.nodes, self.name, inputs, untyped, initializers)
        inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph,
                                                                       opset_imports=opsets))
        # The outputs as shape inference types them (an int64 index, a float16 cast); one
        # it leaves untyped (a function op: GroupNormalization) has the first input's type
        # and rank, as the ops here that do so keep them.
        outputs = [value if value.type.HasField("tensor_type") else
                   helper.make_tensor_value_info(value.name, inputs[0].type.tensor_type.elem_type,
                                                 [None] * len(inputs[0].type.tensor_type.shape.dim))
                   for value in inferred.graph.output]
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, initializers)
        model = helper.make_model(graph, opset_imports=opsets)
        try:
            onnx.checker.check_model(model, full_check=True)
        except onnx.checker.ValidationError as error:
            # GroupNormalization-18 is still what an opset-18 model exporter writes, and
            # onnxruntime runs it; the checker only objects that opset 21 replaced it
            if "is deprecated in domain_version" not in str(error):
                raise
        return model.SerializeToString()


def _conv(name: str, shape: Sequence[int], cout: int, kernel: int, stride: int = 1,
          group: int = 1, pad: Optional[int] = None, dilation: int = 1) -> Case:
    """A convolution over the spatial dimensions of ``shape`` (1-D or 2-D), with bias."""
    pad = dilation * (kernel // 2) if pad is None else pad
    rank = len(shape) - 2
    attrs = {"kernel_shape": [kernel] * rank, "strides": [stride] * rank,
             "pads": [pad] * (2 * rank), "group": group}
    if dilation != 1:
        attrs["dilations"] = [dilation] * rank
    return Case(name, "Conv", [shape], attrs,
                [_weights(cout, shape[1] // group, *[kernel] * rank), _weights(cout)])


def _conv_transpose(name: str, shape: Sequence[int], cout: int, kernel: int, stride: int,
                    pad: int = 0, output_padding: int = 0) -> Case:
    attrs: dict[str, Any] = {"kernel_shape": [kernel, kernel], "strides": [stride, stride]}
    if pad:
        attrs["pads"] = [pad] * 4
    if output_padding:
        attrs["output_padding"] = [output_padding] * 2
    return Case(name, "ConvTranspose", [shape], attrs,
                [_weights(shape[1], cout, kernel, kernel), _weights(cout)])


def _pool(name: str, op: str, shape: Sequence[int], kernel: int, stride: int, pad: int = 0,
          **attrs: Any) -> Case:
    attrs.update(kernel_shape=[kernel, kernel], strides=[stride, stride])
    if pad:
        attrs["pads"] = [pad] * 4
    return Case(name, op, [shape], attrs)


def _lstm(name: str, seq: int, batch: int, inputs: int, hidden: int,
          direction: str = "forward") -> Case:
    directions = 2 if direction == "bidirectional" else 1
    return Case(name, "LSTM", [[seq, batch, inputs]],
                {"hidden_size": hidden, "direction": direction},
                [_weights(directions, 4 * hidden, inputs), _weights(directions, 4 * hidden, hidden),
                 _weights(directions, 8 * hidden)], outputs=1)


def _gru(name: str, seq: int, batch: int, inputs: int, hidden: int,
         linear_before_reset: int = 1, direction: str = "forward") -> Case:
    directions = 2 if direction == "bidirectional" else 1
    attrs: dict[str, Any] = {"hidden_size": hidden, "linear_before_reset": linear_before_reset}
    if direction != "forward":
        attrs["direction"] = direction
    return Case(name, "GRU", [[seq, batch, inputs]], attrs,
                [_weights(directions, 3 * hidden, inputs), _weights(directions, 3 * hidden, hidden),
                 _weights(directions, 6 * hidden)], outputs=1)


def _resize(name: str, mode: str, transform: str, shape: Sequence[int],
            nearest_mode: str = "floor", sizes: Optional[Sequence[int]] = None) -> Case:
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest_mode
    if sizes is not None:
        return Case(name, "Resize", [shape], attrs, [None, None, _i64(*sizes)], opset=13)
    scales = np.array([1, 1, 2, 2], np.float32)
    return Case(name, "Resize", [shape], attrs, [None, scales], opset=13)


def _topk_values(feeds: Mapping[str, np.ndarray], indices: np.ndarray) -> np.ndarray:
    return np.take_along_axis(feeds["x0"], indices, axis=-1)


def _topk(name: str, shape: Sequence[int], k: int) -> Case:
    return Case(name, "TopK", [shape], {"axis": -1}, [_i64(k)], outputs=2, ties=_topk_values)


def _nms_scores(feeds: Mapping[str, np.ndarray], selected: np.ndarray) -> np.ndarray:
    return feeds["scores"][selected[:, 0], selected[:, 1], selected[:, 2]]


def _nms(name: str, boxes: int) -> Case:
    """Detector post-processing: ``boxes`` valid [y1, x1, y2, x2] boxes in a 640x640 image,
    one class of scores in [0, 1]."""
    centre = RNG.uniform(0, 640, (1, boxes, 2))
    size = RNG.uniform(10, 120, (1, boxes, 2))
    corners = np.concatenate([centre - size / 2, centre + size / 2], axis=-1).astype(np.float32)
    scores = RNG.uniform(0, 1, (1, 1, boxes)).astype(np.float32)
    return Case.chain(name, [node("NonMaxSuppression",
                                  ["boxes", "scores", "max_boxes", "iou", "score"], ["y"])],
                      {"boxes": corners, "scores": scores},
                      {"max_boxes": _i64(100), "iou": np.array([0.5], np.float32),
                       "score": np.array([0.05], np.float32)}, ties=_nms_scores)


def _roi_align(name: str, shape: Sequence[int], rois: int, size: int,
               spatial_scale: float) -> Case:
    """RoiAlign over valid [x1, y1, x2, y2] boxes of the image the feature map comes from."""
    image = shape[2] / spatial_scale
    corner = RNG.uniform(0, image * 0.8, (rois, 2))
    extent = RNG.uniform(image * 0.05, image * 0.2, (rois, 2))
    boxes = np.concatenate([corner, np.minimum(corner + extent, image - 1)], axis=1)
    return Case.chain(name, [node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=size,
                                  output_width=size, sampling_ratio=2,
                                  spatial_scale=spatial_scale)],
                      {"x": shape, "rois": boxes.astype(np.float32),
                       "batch": np.zeros(rois, np.int64)})


def _layernorm_decomposed(name: str, shape: Sequence[int]) -> Case:
    """LayerNorm as PyTorch exports it without the fused op (opset 13 ReduceMean)."""
    width = shape[-1]
    return Case.chain(name, [
        node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        node("Sub", ["x", "mean"], ["centred"]),
        node("Pow", ["centred", "two"], ["squares"]),
        node("ReduceMean", ["squares"], ["variance"], axes=[-1], keepdims=1),
        node("Add", ["variance", "eps"], ["shifted"]),
        node("Sqrt", ["shifted"], ["deviation"]),
        node("Div", ["centred", "deviation"], ["normal"]),
        node("Mul", ["normal", "gamma"], ["scaled"]),
        node("Add", ["scaled", "beta"], ["y"]),
    ], {"x": shape}, {"two": _f32(2.0), "eps": _f32(1e-5), "gamma": _weights(width),
                      "beta": _weights(width)}, opset=13)


def _groupnorm_decomposed(name: str, shape: Sequence[int], groups: int) -> Case:
    """GroupNorm as PyTorch exports it: InstanceNormalization over groups, then the
    per-channel affine."""
    channels = shape[1]
    return Case.chain(name, [
        node("Reshape", ["x", "grouped"], ["g"]),
        node("InstanceNormalization", ["g", "ones", "zeros"], ["n"], epsilon=1e-5),
        node("Reshape", ["n", "shape"], ["r"]),
        node("Mul", ["r", "gamma"], ["scaled"]),
        node("Add", ["scaled", "beta"], ["y"]),
    ], {"x": shape}, {"grouped": _i64(shape[0], groups, -1),
                      "ones": np.ones(groups, np.float32), "zeros": np.zeros(groups, np.float32),
                      "shape": _i64(*shape), "gamma": _weights(channels, 1, 1),
                      "beta": _weights(channels, 1, 1)})


def _gelu_erf(name: str, shape: Sequence[int]) -> Case:
    """0.5 * x * (1 + erf(x / sqrt(2))), as exported from ``F.gelu``."""
    return Case.chain(name, [
        node("Div", ["x", "root2"], ["scaled"]),
        node("Erf", ["scaled"], ["erf"]),
        node("Add", ["erf", "one"], ["shifted"]),
        node("Mul", ["x", "shifted"], ["product"]),
        node("Mul", ["product", "half"], ["y"]),
    ], {"x": shape}, {"root2": _f32(math.sqrt(2.0)), "one": _f32(1.0), "half": _f32(0.5)})


def _gelu_tanh(name: str, shape: Sequence[int]) -> Case:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), as in GPT-2."""
    return Case.chain(name, [
        node("Pow", ["x", "three"], ["cube"]),
        node("Mul", ["cube", "k"], ["term"]),
        node("Add", ["x", "term"], ["inner"]),
        node("Mul", ["inner", "c"], ["arg"]),
        node("Tanh", ["arg"], ["tanh"]),
        node("Add", ["tanh", "one"], ["shifted"]),
        node("Mul", ["x", "shifted"], ["product"]),
        node("Mul", ["product", "half"], ["y"]),
    ], {"x": shape}, {"three": _f32(3.0), "k": _f32(0.044715),
                      "c": _f32(math.sqrt(2.0 / math.pi)), "one": _f32(1.0),
                      "half": _f32(0.5)})


def _conv_bn_relu(name: str, shape: Sequence[int], cout: int) -> Case:
    return Case.chain(name, [
        node("Conv", ["x", "w", "b"], ["conv"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["conv", "scale", "bias", "mean", "var"], ["bn"]),
        node("Relu", ["bn"], ["y"]),
    ], {"x": shape}, {"w": _weights(cout, shape[1], 3, 3), "b": _weights(cout),
                      "scale": _positive(cout), "bias": _weights(cout),
                      "mean": _weights(cout), "var": _positive(cout)})


def _channel_shuffle(name: str, shape: Sequence[int], groups: int) -> Case:
    batch, channels, height, width = shape
    return Case.chain(name, [
        node("Reshape", ["x", "split"], ["grouped"]),
        node("Transpose", ["grouped"], ["swapped"], perm=[0, 2, 1, 3, 4]),
        node("Reshape", ["swapped", "shape"], ["y"]),
    ], {"x": shape}, {"split": _i64(batch, groups, channels // groups, height, width),
                      "shape": _i64(*shape)})


def _position_ids(name: str, shape: Sequence[int]) -> Case:
    """Position ids 0..n-1 for the sequence length of a [batch, seq, hidden] input."""
    return Case.chain(name, [
        node("Shape", ["x"], ["shape"]),
        node("Gather", ["shape", "axis"], ["length"], axis=0),
        node("Range", ["start", "length", "step"], ["y"]),
    ], {"x": shape}, {"axis": np.array(1, np.int64), "start": np.array(0, np.int64),
                      "step": np.array(1, np.int64)})


def _linear(name: str, shape: Sequence[int], out: int) -> Case:
    return Case.chain(name, [node("MatMul", ["x", "w"], ["product"]),
                             node("Add", ["product", "b"], ["y"])],
                      {"x": shape}, {"w": _weights(shape[-1], out), "b": _weights(out)})


def _silu(name: str, shape: Sequence[int]) -> Case:
    return Case.chain(name, [node("Sigmoid", ["x"], ["gate"]), node("Mul", ["x", "gate"], ["y"])],
                      {"x": shape})


IMAGE = [1, 64, 80, 80]
TOKENS = [1, 128, 256]
BIG = np.iinfo(np.int64).max


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
    # Activations and elementwise math.
    Case("Tanh (1x64x80x80)", "Tanh", [IMAGE]),
    Case("Erf (1x64x80x80)", "Erf", [IMAGE]),
    Case("Relu (1x128x256)", "Relu", [TOKENS]),
    Case("Clip 0..6 Relu6 (1x64x80x80)", "Clip", [_weights(*IMAGE, scale=4.0)],
         consts=[_f32(0.0), _f32(6.0)]),
    Case("HardSigmoid (1x64x80x80)", "HardSigmoid", [IMAGE]),
    Case("Elu (1x64x80x80)", "Elu", [IMAGE]),
    Case("Selu (1x64x80x80)", "Selu", [IMAGE]),
    Case("Softsign (1x64x80x80)", "Softsign", [IMAGE]),
    Case("PRelu per-channel (1x64x80x80)", "PRelu", [IMAGE], consts=[_weights(64, 1, 1)]),
    Case("Abs (1x64x80x80)", "Abs", [IMAGE]),
    Case("Neg (1x64x80x80)", "Neg", [IMAGE]),
    Case("Floor (1x64x80x80)", "Floor", [IMAGE]),
    Case("Reciprocal (1x64x80x80)", "Reciprocal", [IMAGE]),
    Case("Sqrt positive input (1x64x80x80)", "Sqrt", [_positive(*IMAGE, low=0.01, high=4.0)]),
    Case("Log positive input (1x64x80x80)", "Log", [_positive(*IMAGE, low=0.01, high=4.0)]),
    Case("Sin (1x128x256)", "Sin", [TOKENS]),
    Case("Cos (1x128x256)", "Cos", [TOKENS]),
    Case("Identity (1x64x80x80)", "Identity", [IMAGE]),
    Case("Pow x^2 const (1x64x80x80)", "Pow", [IMAGE], consts=[_f32(2.0)]),
    Case("Pow x^2 const (1x128x256)", "Pow", [TOKENS], consts=[_f32(2.0)]),
    Case("Pow x^0.5 const positive input (1x64x80x80)", "Pow",
         [_positive(*IMAGE, low=0.01, high=4.0)], consts=[_f32(0.5)]),
    Case("Pow x^y two inputs, positive x (1x64x80x80)", "Pow",
         [_positive(*IMAGE, low=0.1, high=4.0), IMAGE]),
    _gelu_erf("Gelu decomposed erf form Div/Erf/Add/Mul/Mul (1x128x3072)", [1, 128, 3072]),
    _gelu_tanh("Gelu decomposed tanh form Pow/Mul/Add/Mul/Tanh/Add/Mul/Mul (1x128x3072)",
               [1, 128, 3072]),
    _silu("SiLU x*Sigmoid(x) Sigmoid/Mul (1x64x80x80)", IMAGE),
    # Broadcast arithmetic, comparisons and selection.
    Case("Add broadcast bias (1x128x256 + 256)", "Add", [TOKENS], consts=[_weights(256)]),
    Case("Add residual (1x64x80x80 + 1x64x80x80)", "Add", [IMAGE, IMAGE]),
    Case("Add attention mask broadcast (1x12x128x128 + 1x1x1x128)", "Add",
         [[1, 12, 128, 128], [1, 1, 1, 128]]),
    Case("Sub broadcast (1x128x256 - 1x128x1)", "Sub", [TOKENS, [1, 128, 1]]),
    Case("Div broadcast (1x128x256 / 1x128x1 positive)", "Div",
         [TOKENS, _positive(1, 128, 1)]),
    Case("Mul SE scale broadcast (1x64x80x80 x 1x64x1x1 input)", "Mul", [IMAGE, [1, 64, 1, 1]]),
    Case("Mul row broadcast (1x64x80x80 x 1x1x80x80 input)", "Mul", [IMAGE, [1, 1, 80, 80]]),
    Case("Mul scalar const (1x64x80x80 x scalar)", "Mul", [IMAGE], consts=[_f32(0.125)]),
    Case("Mul scalar const (1x128x256 x scalar)", "Mul", [TOKENS], consts=[_f32(0.125)]),
    Case("Max two inputs (1x64x80x80)", "Max", [IMAGE, IMAGE]),
    Case("Sum three inputs (1x64x80x80)", "Sum", [IMAGE, IMAGE, IMAGE]),
    Case("Equal vs scalar const, rounded input (1x64x80x80)", "Equal",
         [np.round(_weights(*IMAGE, scale=2.0))], consts=[_f32(1.0)]),
    Case("Where same shape (1x64x80x80 bool, 1x64x80x80, 1x64x80x80)", "Where",
         [RNG.random(IMAGE) < 0.5, IMAGE, IMAGE]),
    Case("Where causal mask broadcast (1x1x128x128 bool, 1x12x128x128, scalar)", "Where",
         [np.tril(np.ones((128, 128), bool))[None, None], [1, 12, 128, 128]],
         consts=[_f32(-1e4)]),
    # Casts.
    Case("Cast float32->float16 (1x64x80x80)", "Cast", [IMAGE], {"to": TensorProto.FLOAT16}),
    Case("Cast float16->float32 (1x64x80x80)", "Cast", [_weights(*IMAGE, scale=1.0)
                                                         .astype(np.float16)],
         {"to": TensorProto.FLOAT}),
    Case("Cast int64->float32 (1x128x128)", "Cast", [_ints(1000, 1, 128, 128)],
         {"to": TensorProto.FLOAT}),
    Case("Cast bool->float32 (1x12x128x128)", "Cast", [RNG.random((1, 12, 128, 128)) < 0.5],
         {"to": TensorProto.FLOAT}),
    # Softmax, normalizations and reductions.
    Case("Softmax last axis (12x128x128)", "Softmax", [[12, 128, 128]], {"axis": -1}),
    Case("Softmax axis=1 OCR classes (1x6625x80)", "Softmax", [[1, 6625, 80]], {"axis": 1}),
    Case("LogSoftmax last axis CTC (1x200x5000)", "LogSoftmax", [[1, 200, 5000]], {"axis": -1}),
    Case("LayerNormalization (1x128x256)", "LayerNormalization", [TOKENS], {"axis": -1},
         [_weights(256), _weights(256)]),
    _layernorm_decomposed("LayerNorm decomposed ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add"
                          " (1x128x768)", [1, 128, 768]),
    Case("BatchNormalization (1x64x80x80)", "BatchNormalization", [IMAGE], {},
         [_positive(64), _weights(64), _weights(64), _positive(64)]),
    Case("InstanceNormalization (1x64x80x80)", "InstanceNormalization", [IMAGE], {},
         [_positive(64), _weights(64)]),
    Case("GroupNormalization opset 18 g=32 (1x64x80x80)", "GroupNormalization", [IMAGE],
         {"num_groups": 32}, [_positive(32), _weights(32)], opset=18),
    Case("GroupNormalization opset 21 g=32 (1x64x80x80)", "GroupNormalization", [IMAGE],
         {"num_groups": 32}, [_positive(64), _weights(64)], opset=21),
    _groupnorm_decomposed("GroupNorm decomposed Reshape/InstanceNormalization/Reshape/Mul/Add"
                          " g=32 (1x64x80x80)", IMAGE, 32),
    Case("LpNormalization p=2 last axis (1x128x256)", "LpNormalization", [TOKENS],
         {"axis": -1, "p": 2}),
    Case("ReduceMean last axis (1x128x256)", "ReduceMean", [TOKENS],
         {"axes": [-1], "keepdims": 1}, opset=13),
    Case("ReduceMean axes=[2,3] SE (1x64x80x80)", "ReduceMean", [IMAGE],
         {"axes": [2, 3], "keepdims": 1}, opset=13),
    Case("ReduceMean axis=1 CBAM (1x64x80x80)", "ReduceMean", [IMAGE],
         {"axes": [1], "keepdims": 1}, opset=13),
    Case("ReduceMax axis=1 (1x64x80x80)", "ReduceMax", [IMAGE], {"axes": [1], "keepdims": 1}),
    Case("ReduceSum last axis (1x128x256)", "ReduceSum", [TOKENS], {"keepdims": 1},
         [_i64(-1)]),
    Case("ReduceL2 last axis (1x128x256)", "ReduceL2", [TOKENS], {"axes": [-1], "keepdims": 1}),
    Case("ArgMax last axis OCR CTC (1x80x6625)", "ArgMax", [[1, 80, 6625]], {"axis": -1}),
    Case("ArgMax axis=1 segmentation (1x21x160x160)", "ArgMax", [[1, 21, 160, 160]],
         {"axis": 1}),
    # Products.
    Case("MatMul (1x128x256 @ 256x1024)", "MatMul", [TOKENS], consts=[_weights(256, 1024)]),
    Case("MatMul GEMV decode (1x1x768 @ 768x3072)", "MatMul", [[1, 1, 768]],
         consts=[_weights(768, 3072)]),
    Case("MatMul 2-D const weight (512x512 @ 512x512)", "MatMul", [[512, 512]],
         consts=[_weights(512, 512)]),
    Case("MatMul 2-D two inputs (512x512 @ 512x512)", "MatMul", [[512, 512], [512, 512]]),
    Case("MatMul batched 3-D (12x128x64 @ 12x64x128)", "MatMul", [[12, 128, 64], [12, 64, 128]]),
    Case("MatMul attention scores x V (1x12x128x128 @ 1x12x128x64)", "MatMul",
         [[1, 12, 128, 128], [1, 12, 128, 64]]),
    _linear("MatMul+Add linear with bias (1x128x768 @ 768x3072 + 3072)", [1, 128, 768], 3072),
    Case("Gemm transB (128x768 -> 3072)", "Gemm", [[128, 768]], {"transB": 1},
         [_weights(3072, 768), _weights(3072)]),
    Case("Gemm alpha=0.5 beta=2 (512x512 @ 512x512 + 512x512)", "Gemm", [[512, 512]],
         {"alpha": 0.5, "beta": 2.0}, [_weights(512, 512), _weights(512, 512)]),
    Case("Einsum bhqd,bhkd->bhqk (1x12x128x64, 1x12x128x64)", "Einsum",
         [[1, 12, 128, 64], [1, 12, 128, 64]], {"equation": "bhqd,bhkd->bhqk"}),
    Case("Einsum bhqk,bhkd->bhqd (1x12x128x128, 1x12x128x64)", "Einsum",
         [[1, 12, 128, 128], [1, 12, 128, 64]], {"equation": "bhqk,bhkd->bhqd"}),
    Case("Einsum bij,jk->bik two inputs (1x128x256, 256x256)", "Einsum", [TOKENS, [256, 256]],
         {"equation": "bij,jk->bik"}),
    # Convolutions.
    _conv("Conv 3x3 (1x64x80x80 -> 64)", IMAGE, 64, 3),
    _conv("Conv 3x3 (1x128x40x40 -> 128)", [1, 128, 40, 40], 128, 3),
    _conv("Conv 3x3 s2 (1x64x80x80 -> 128)", IMAGE, 128, 3, 2),
    _conv("Conv 3x3 dilation 2 (1x128x40x40 -> 128)", [1, 128, 40, 40], 128, 3, dilation=2),
    _conv("Conv 1x1 (1x64x80x80 -> 64)", IMAGE, 64, 1),
    _conv("Conv 1x1 (1x128x40x40 -> 256)", [1, 128, 40, 40], 256, 1),
    _conv("Conv 3x3 s2 stem (1x3x640x640 -> 16)", [1, 3, 640, 640], 16, 3, 2),
    _conv("Conv 7x7 s2 p3 stem (1x3x224x224 -> 64)", [1, 3, 224, 224], 64, 7, 2),
    _conv("Conv depthwise 3x3 g=128 (1x128x40x40)", [1, 128, 40, 40], 128, 3, 1, 128),
    _conv("Conv depthwise 7x7 g=64 (1x64x80x80)", IMAGE, 64, 7, 1, 64),
    _conv("Conv grouped 3x3 g=4 (1x128x40x40 -> 128)", [1, 128, 40, 40], 128, 3, 1, 4),
    _conv("Conv1D k=3 speech (1x80x300 -> 256)", [1, 80, 300], 256, 3),
    _conv("Conv1D depthwise k=31 g=256 conformer (1x256x200)", [1, 256, 200], 256, 31, 1, 256),
    _conv_bn_relu("Conv 3x3+BatchNormalization+Relu (1x64x80x80 -> 64)", IMAGE, 64),
    _conv_transpose("ConvTranspose 3x3 s2 p1 output_padding 1 (1x64x40x40 -> 64)",
                    [1, 64, 40, 40], 64, 3, 2, 1, 1),
    _conv_transpose("ConvTranspose 4x4 s2 p1 (1x128x40x40 -> 64)", [1, 128, 40, 40], 64, 4, 2,
                    1),
    # Pooling and resize.
    _pool("MaxPool 3x3 s2 p1 (1x64x80x80)", "MaxPool", IMAGE, 3, 2, 1),
    _pool("AveragePool 2x2 s2 (1x64x80x80)", "AveragePool", IMAGE, 2, 2),
    _pool("AveragePool 3x3 s1 p1 count_include_pad (1x64x80x80)", "AveragePool", IMAGE, 3, 1, 1,
          count_include_pad=1),
    Case("GlobalAveragePool (1x2048x7x7)", "GlobalAveragePool", [[1, 2048, 7, 7]]),
    Case("GlobalAveragePool (1x64x80x80)", "GlobalAveragePool", [IMAGE]),
    Case("GlobalMaxPool (1x64x80x80)", "GlobalMaxPool", [IMAGE]),
    _resize("Resize nearest x2 half_pixel round_prefer_floor (1x64x80x80)", "nearest",
            "half_pixel", IMAGE, nearest_mode="round_prefer_floor"),
    _resize("Resize linear x2 pytorch_half_pixel (1x64x80x80)", "linear", "pytorch_half_pixel",
            IMAGE),
    _resize("Resize linear to sizes 1x64x160x160 (1x64x80x80)", "linear", "half_pixel", IMAGE,
            sizes=[1, 64, 160, 160]),
    _resize("Resize cubic x2 half_pixel (1x64x80x80)", "cubic", "half_pixel", IMAGE),
    # Recurrent cells.
    _gru("GRU linear_before_reset=0 (seq50 b1 in64 h128)", 50, 1, 64, 128, 0),
    _gru("GRU linear_before_reset bidirectional (seq50 b1 in64 h128)", 50, 1, 64, 128, 1,
         "bidirectional"),
    _lstm("LSTM bidirectional CRNN (seq80 b1 in512 h256)", 80, 1, 512, 256, "bidirectional"),
    _lstm("LSTM language model (seq64 b1 in256 h512)", 64, 1, 256, 512),
    _gru("GRU linear_before_reset=0 speech (seq100 b4 in80 h512)", 100, 4, 80, 512, 0),
    # Shape, layout and copy ops.
    Case("Transpose heads 0213 (1x128x12x64)", "Transpose", [[1, 128, 12, 64]],
         {"perm": [0, 2, 1, 3]}),
    Case("Transpose K^T 0132 (1x12x128x64)", "Transpose", [[1, 12, 128, 64]],
         {"perm": [0, 1, 3, 2]}),
    Case("Reshape (1x64x80x80 -> 1x64x6400)", "Reshape", [IMAGE], consts=[_i64(1, 64, 6400)]),
    Case("Reshape heads (1x128x768 -> 1x128x12x64)", "Reshape", [[1, 128, 768]],
         consts=[_i64(1, 128, 12, 64)]),
    _channel_shuffle("Reshape+Transpose+Reshape channel shuffle g=2 (1x128x40x40)",
                     [1, 128, 40, 40], 2),
    Case("Flatten axis=1 (1x2048x7x7)", "Flatten", [[1, 2048, 7, 7]], {"axis": 1}),
    Case("Squeeze axis=2 CRNN (1x512x1x80)", "Squeeze", [[1, 512, 1, 80]], consts=[_i64(2)]),
    Case("Unsqueeze axes=[1,2] (1x128)", "Unsqueeze", [[1, 128]], consts=[_i64(1, 2)]),
    Case("Expand (1x1x128 -> 1x128x128)", "Expand", [[1, 1, 128]], consts=[_i64(1, 128, 128)]),
    Case("Expand (1x64x1x1 -> 1x64x80x80)", "Expand", [[1, 64, 1, 1]], consts=[_i64(*IMAGE)]),
    Case("Tile [1,1,2,2] (1x64x40x40)", "Tile", [[1, 64, 40, 40]], consts=[_i64(1, 1, 2, 2)]),
    Case("Concat last axis (2 x 1x128x256)", "Concat", [TOKENS, TOKENS], {"axis": -1}),
    Case("Concat axis=1 (2 x 1x64x80x80)", "Concat", [IMAGE, IMAGE], {"axis": 1}),
    Case("Concat axis=1 SPPF (4 x 1x128x40x40)", "Concat", [[1, 128, 40, 40]] * 4, {"axis": 1}),
    Case("Split last axis in 3 QKV (1x128x2304)", "Split", [[1, 128, 2304]], {"axis": -1},
         [_i64(768, 768, 768)], outputs=3),
    Case("Split axis=1 in 2 (1x128x80x80)", "Split", [[1, 128, 80, 80]], {"axis": 1},
         [_i64(64, 64)], outputs=2),
    Case("Slice channels [0:32] (1x64x80x80)", "Slice", [IMAGE], {},
         [_i64(0), _i64(32), _i64(1)]),
    Case("Slice last axis first half (1x128x3072)", "Slice", [[1, 128, 3072]], {},
         [_i64(0), _i64(1536), _i64(-1)]),
    Case("Slice spatial step 2 [::2, ::2] Focus (1x64x80x80)", "Slice", [IMAGE], {},
         [_i64(0, 0), _i64(BIG, BIG), _i64(2, 3), _i64(2, 2)]),
    Case("Pad constant 1 (1x64x80x80)", "Pad", [IMAGE], {"mode": "constant"},
         [_i64(0, 0, 1, 1, 0, 0, 1, 1)]),
    Case("Pad edge 1 (1x64x80x80)", "Pad", [IMAGE], {"mode": "edge"},
         [_i64(0, 0, 1, 1, 0, 0, 1, 1)]),
    Case("Pad reflect 1 (1x64x80x80)", "Pad", [IMAGE], {"mode": "reflect"},
         [_i64(0, 0, 1, 1, 0, 0, 1, 1)]),
    Case("Pad reflect 3 (1x64x80x80)", "Pad", [IMAGE], {"mode": "reflect"},
         [_i64(0, 0, 3, 3, 0, 0, 3, 3)]),
    Case("DepthToSpace DCR b=2 (1x256x40x40)", "DepthToSpace", [[1, 256, 40, 40]],
         {"blocksize": 2, "mode": "DCR"}),
    Case("DepthToSpace CRD b=2 pixel shuffle (1x256x40x40)", "DepthToSpace", [[1, 256, 40, 40]],
         {"blocksize": 2, "mode": "CRD"}),
    Case("SpaceToDepth b=2 (1x64x80x80)", "SpaceToDepth", [IMAGE], {"blocksize": 2}),
    _position_ids("Shape+Gather+Range position ids (from 1x128x256)", TOKENS),
    # Indexing, scans and selection.
    Case("Gather axis=1 scalar index CLS token (1x128x768)", "Gather", [[1, 128, 768]],
         {"axis": 1}, [np.array(0, np.int64)]),
    Case.chain("Gather embedding (30000x256 table, 1x128 ids)",
               [node("Gather", ["table", "ids"], ["y"], axis=0)], {"ids": _ints(30000, 1, 128)},
               {"table": _weights(30000, 256)}),
    Case("GatherElements axis=1 (1x128x256, indices 1x64x256)", "GatherElements",
         [TOKENS, _ints(128, 1, 64, 256)], {"axis": 1}),
    Case.chain("ScatterND KV-cache row update (1x12x512x64, 1 row)",
               [node("ScatterND", ["cache", "index", "row"], ["y"])],
               {"cache": [1, 12, 512, 64],
                "index": np.stack([np.zeros(12, np.int64), np.arange(12),
                                   np.full(12, 300)], axis=-1).reshape(1, 12, 1, 3),
                "row": [1, 12, 1, 64]}),
    Case("CumSum last axis (1x64x80x80)", "CumSum", [IMAGE], consts=[np.array(-1, np.int64)]),
    Case("CumSum axis=1 (1x128x256)", "CumSum", [TOKENS], consts=[np.array(1, np.int64)]),
    Case("CumSum axis=1 int64 position ids from mask (1x512)", "CumSum",
         [np.concatenate([np.zeros((1, 112), np.int64), np.ones((1, 400), np.int64)], axis=1)],
         consts=[np.array(1, np.int64)]),
    _topk("TopK k=5 (1x1000)", [1, 1000], 5),
    _topk("TopK k=100 (1x8400)", [1, 8400], 100),
    _topk("TopK k=50 last axis LM logits (1x16x30000)", [1, 16, 30000], 50),
    _nms("NonMaxSuppression 1 class (1x1000 boxes)", 1000),
    _roi_align("RoiAlign 7x7 (1x256x50x50, 100 rois)", [1, 256, 50, 50], 100, 7, 1 / 16),
]


def _compare(name: str, got: Any, want: np.ndarray, case: Case,
             feeds: Mapping[str, np.ndarray]) -> tuple[float, Optional[str]]:
    """The error of one output (max |difference| over the output's scale for floats, the
    fraction of differing elements for integers and booleans) and why it is wrong, if it
    is."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return math.inf, f"{name}: shape {list(got.shape)}, onnxruntime {list(want.shape)}"
    if got.dtype != want.dtype:
        return math.inf, f"{name}: dtype {got.dtype}, onnxruntime {want.dtype}"
    if want.size == 0:
        return 0.0, None
    if want.dtype.kind == "f":
        a, b = got.astype(np.float64), want.astype(np.float64)
        same_nan = np.isnan(a) & np.isnan(b)
        difference = np.where(same_nan | (a == b), 0.0, np.abs(a - b))
        if np.isnan(difference).any():
            return math.inf, f"{name}: NaN where onnxruntime has a number"
        finite = np.abs(b[np.isfinite(b)])
        scale = max(float(finite.max()) if finite.size else 0.0, 1e-6)
        error = float(difference.max()) / scale
        return error, None if error <= TOLERANCE else f"{name}: error {error:.1e}"
    differing = got != want
    if not differing.any():
        return 0.0, None
    error = float(differing.mean())
    if case.ties is not None and want.dtype.kind in "iu":
        try:
            if np.array_equal(case.ties(feeds, got), case.ties(feeds, want)):
                return 0.0, None  # other indices of equal values
        except (IndexError, ValueError):
            pass
    return error, f"{name}: {int(differing.sum())} of {want.size} elements differ"


def _check(case: Case, feeds: dict[str, np.ndarray], session: Any,
           ort: Any) -> tuple[float, Optional[str]]:
    """GE's worst error on ``feeds`` against onnxruntime, and why the case is wrong (None
    when it is right)."""
    got = session.run(feeds)
    want = ort.run(None, feeds)
    worst, problems = 0.0, []
    for value, expected in zip(ort.get_outputs(), want):
        if value.name not in got:
            return math.inf, f"{value.name}: missing from GE's outputs"
        error, problem = _compare(value.name, got[value.name], expected, case, feeds)
        worst = max(worst, error)
        if problem:
            problems.append(problem)
    return worst, "; ".join(problems) or None


def _failure(stage: str, error: BaseException) -> str:
    lines = str(error).strip().splitlines() or [""]
    text = f"{stage}: {type(error).__name__}: {lines[0]}".replace("|", "/")
    return text if len(text) <= 200 else text[:197] + "..."


def run(cases: Sequence[Case], rounds: int, block_seconds: float,
        check_only: bool = False) -> list[dict[str, Any]]:
    """Check each case, then (unless ``check_only``) time the right ones. A row has
    ``failed`` (why) when the case did not build or run, ``problem`` when GE is wrong,
    else ``ratio`` once timed."""
    import onnxruntime

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for case in cases:
            path = str(Path(folder) / "case.onnx")
            row: dict[str, Any] = {"case": case.name, "engines": "-"}
            stage = "model"
            try:
                Path(path).write_bytes(case.model())
                feeds = case.feeds()
                stage = "onnxruntime"
                ort = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                ort.run(None, feeds)
                stage = "GE"
                executable = ge.compile(ge.parse_onnx(path))
                session = ge.Session(executable)
                row["engines"] = ", ".join(sorted(executable.report["engines"])) or "-"
                row["error"], row["problem"] = _check(case, feeds, session, ort)
                if row["problem"] is None and not check_only:
                    stage = "timing"
                    result = benchmark.compare(
                        {"ge": functools.partial(session.run, feeds),
                         "onnxruntime": functools.partial(ort.run, None, feeds)},
                        rounds=rounds, block_seconds=block_seconds, settle=0.05)
                    row.update(ge=result.median("ge"), ort=result.median("onnxruntime"),
                               ratio=result.ratio("ge", "onnxruntime"))
            except Exception as error:  # a case that cannot run is a result, not a crash
                row["failed"] = _failure(stage, error)
            rows.append(row)
            if "failed" in row:
                print(f"{case.name:55s} FAILED  {row['failed']}", flush=True)
                continue
            shown = (f"{row['ratio']:.2f}" if "ratio" in row else
                     "WRONG" if row["problem"] else "ok")
            note = f"; {row['problem']}" if row["problem"] else ""
            print(f"{case.name:55s} {shown:>6s}  ({row['engines']}; error {row['error']:.1e}"
                  f"{note})", flush=True)
    return rows


def render(rows: list[dict[str, Any]], rounds: int) -> str:
    timed = [r for r in rows if "ratio" in r]
    failed = sum(1 for r in rows if "failed" in r)
    ratios = sorted(r["ratio"] for r in timed)
    over3 = sum(1 for r in ratios if r > 3)
    over2 = sum(1 for r in ratios if r > 2)
    median = float(np.median(ratios)) if ratios else float("nan")
    lines = [BEGIN, "## Op by op: GE against onnxruntime", "",
             f"Measured by `python bench/ops.py` on {time.strftime('%Y-%m-%d')} "
             f"({benchmark.machine()['cpu']}, {benchmark.machine()['cores']} cores): "
             f"{len(rows)} one-node models (and a few small chains, named by their ops) at "
             f"the sizes real models use them; GE at level 3 with its default engines, "
             f"onnxruntime with default options; alternating "
             f"blocks over {rounds} rounds, medians. Every case is first checked against "
             f"onnxruntime (error: max difference over the output's scale; integer and "
             f"boolean outputs must match exactly, their error is the fraction that "
             f"differ).", "",
             f"Median GE / onnxruntime {median:.2f}; {over2} of {len(timed)} over 2x, "
             f"{over3} over 3x; {len(rows) - len(timed) - failed} wrong, {failed} failed.", "",
             "| op (config) | onnxruntime ms | GE ms | GE / onnxruntime | GE's engines | error |",
             "|---|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: -r.get("ratio", float("inf"))):
        if "ratio" in row:
            lines.append(f"| {row['case']} | {row['ort'] * 1e3:.3f} | {row['ge'] * 1e3:.3f} | "
                         f"{row['ratio']:.2f} | {row['engines']} | {row['error']:.1e} |")
        elif "failed" in row:
            lines.append(f"| {row['case']} | - | - | failed | {row['engines']} | "
                         f"{row['failed']} |")
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
    parser.add_argument("--check-only", action="store_true",
                        help="check each case against onnxruntime once; no timing, no writing; "
                             "exit status 1 if any is wrong or failed")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.match in c.name]
    rows = run(cases, args.rounds, args.block_seconds, check_only=args.check_only)
    if args.check_only:
        bad = [r for r in rows if "failed" in r or r.get("problem")]
        print(f"{len(rows) - len(bad)} of {len(rows)} cases right; {len(bad)} wrong or failed")
        return 1 if bad else 0
    text = render(rows, args.rounds)
    print(text)
    if not args.no_write and not args.match:
        write_section("ops", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
