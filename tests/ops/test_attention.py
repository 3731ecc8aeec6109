"""Attention, transformer-block, resampling and detection ops: what ONNX's node suite
leaves out (dynamic-shape inference, error messages, older opsets, adaptive RoiAlign
sampling, grouped FlexAttention with a modifier), checked against onnx's reference
evaluator where numbers are involved."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ge
import ge.backend
from ge.errors import AttrError, DTypeError, ShapeError
from ge.ops import create_node

RNG = np.random.default_rng(7)


def _data(graph: ge.Graph, name: str, shape: list[Any], dtype: Any = np.float32) -> ge.ir.Value:
    return create_node("Data", [], {"shape": shape, "dtype": ge.DataType.parse(dtype)}, name,
                       graph).outputs[0]


def _const(graph: ge.Graph, name: str, array: np.ndarray) -> ge.ir.Value:
    return create_node("Const", [], {"value": ge.Tensor(array)}, name, graph).outputs[0]


def _model(op_type: str, inputs: dict[str, np.ndarray], outputs: list[str], opset: int,
           domain: str = "", **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node(op_type, list(inputs), outputs, domain=domain, **attrs)
    infos = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                           array.shape) for name, array in inputs.items()]
    results = [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None)
               for name in outputs]
    graph = helper.make_graph([node], "case", infos, results)
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


def _against_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray],
                       expected: Optional[list[np.ndarray]] = None, rtol: float = 1e-5,
                       atol: float = 1e-6) -> None:
    got = ge.backend.prepare(model).run(inputs)
    want = expected if expected is not None else ReferenceEvaluator(model).run(None, inputs)
    assert len(got) == len(want)
    for actual, reference in zip(got, want):
        assert actual.dtype == reference.dtype
        np.testing.assert_allclose(actual, reference, rtol=rtol, atol=atol)


def _random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- Attention --------------------------------------------------------------------------

def test_attention_keeps_dynamic_dims() -> None:
    graph = ge.Graph("attention")
    q = _data(graph, "q", ["batch", 8, "seq", 64])
    k = _data(graph, "k", ["batch", 2, "kv", 64])
    v = _data(graph, "v", ["batch", 2, "kv", 32])
    past_k = _data(graph, "pk", ["batch", 2, "past", 64])
    past_v = _data(graph, "pv", ["batch", 2, "past", 32])
    node = create_node("Attention", [q, k, v, None, past_k, past_v], {"is_causal": 1},
                       "attn", graph)
    y, present_k, present_v, scores = (value.shape for value in node.outputs)
    assert y == ("batch", 8, "seq", 32)
    assert present_k == ("batch", 2, -1, 64) and present_v == ("batch", 2, -1, 32)
    assert scores == ("batch", 8, "seq", -1)


def test_attention_3d_inference_splits_heads() -> None:
    graph = ge.Graph("attention3d")
    q = _data(graph, "q", [-1, "seq", 512])
    k = _data(graph, "k", [-1, "seq", 128])
    v = _data(graph, "v", [-1, "seq", 128])
    node = create_node("Attention", [q, k, v], {"q_num_heads": 8, "kv_num_heads": 2}, "a",
                       graph)
    assert node.outputs[0].shape == (-1, "seq", 512)
    assert node.outputs[1].shape == (-1, 2, "seq", 64)


@pytest.mark.parametrize("shapes, attrs, message", [
    ([[1, 3, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8]], {}, "not a multiple"),
    ([[1, 4, 24], [1, 4, 24], [1, 4, 24]], {}, "q_num_heads"),
    ([[1, 2, 4, 8], [1, 2, 4, 6], [1, 2, 4, 8]], {}, "head size"),
])
def test_attention_errors_name_the_node(shapes: list[list[int]], attrs: dict[str, Any],
                                        message: str) -> None:
    graph = ge.Graph("bad")
    values = [_data(graph, name, shape) for name, shape in zip("qkv", shapes)]
    with pytest.raises(ShapeError, match=f"Attention node 'attn'.*{message}"):
        create_node("Attention", values, attrs, "attn", graph)


def test_attention_past_key_needs_past_value() -> None:
    graph = ge.Graph("bad")
    values = [_data(graph, name, [1, 2, 4, 8]) for name in ("q", "k", "v", "pk")]
    with pytest.raises(ShapeError, match="together"):
        create_node("Attention", [*values[:3], None, values[3]], {}, "attn", graph)


def test_attention_refuses_integer_queries() -> None:
    graph = ge.Graph("bad")
    values = [_data(graph, name, [1, 2, 4, 8], np.int32) for name in "qkv"]
    with pytest.raises(DTypeError, match="Attention node 'attn'"):
        create_node("Attention", values, {}, "attn", graph)


def test_attention_gqa_3d_causal_window_matches_reference() -> None:
    inputs = {"Q": _random(2, 5, 48), "K": _random(2, 7, 16), "V": _random(2, 7, 24),
              "attn_mask": RNG.random((5, 7)) > 0.2}
    model = _model("Attention", inputs, ["Y", "present_key", "present_value"], 25,
                   q_num_heads=6, kv_num_heads=2, is_causal=1, left_window_size=3,
                   softcap=4.0)
    _against_reference(model, inputs)


# -- RotaryEmbedding, RMSNormalization, sequence mixers ---------------------------------

def test_rotary_and_rms_keep_dynamic_dims() -> None:
    graph = ge.Graph("blocks")
    x = _data(graph, "x", ["b", "s", 64])
    cos = _data(graph, "cos", [-1, 8])
    ids = _data(graph, "ids", ["b", "s"], np.int64)
    node = create_node("RotaryEmbedding", [x, cos, cos, ids],
                       {"num_heads": 4, "rotary_embedding_dim": 16}, "rope", graph)
    assert node.outputs[0].shape == ("b", "s", 64)
    scale = _data(graph, "scale", [64])
    assert create_node("RMSNormalization", [x, scale], {}, "rms", graph).outputs[0].shape \
        == ("b", "s", 64)
    wrong = _data(graph, "wrong", [-1, 5])
    with pytest.raises(ShapeError, match="rotary_embedding_dim / 2"):
        create_node("RotaryEmbedding", [x, wrong, wrong, ids], {"num_heads": 4}, "rope2", graph)


def test_linear_attention_and_causal_conv_inference() -> None:
    graph = ge.Graph("mixers")
    q = _data(graph, "q", ["b", "t", 64])
    kv = _data(graph, "kv", ["b", "t", 32])
    node = create_node("LinearAttention", [q, kv, kv], {"q_num_heads": 8, "kv_num_heads": 4,
                                                        "update_rule": "linear"}, "la", graph)
    assert node.outputs[0].shape == ("b", "t", 64)
    assert node.outputs[1].shape == ("b", 4, 8, 8)
    with pytest.raises(ShapeError, match="needs the decay input"):
        create_node("LinearAttention", [q, kv, kv], {"q_num_heads": 8, "kv_num_heads": 4},
                    "la2", graph)
    x = _data(graph, "x", ["b", 16, "len"])
    weight = _data(graph, "w", [16, 1, 4])
    conv = create_node("CausalConvWithState", [x, weight], {"activation": "silu"}, "cc", graph)
    assert conv.outputs[0].shape == ("b", 16, "len") and conv.outputs[1].shape == ("b", 16, 3)
    with pytest.raises(AttrError, match="activation"):
        create_node("CausalConvWithState", [x, weight], {"activation": "gelu"}, "cc2", graph)


# -- Resize and Upsample ----------------------------------------------------------------

def test_resize_inference() -> None:
    graph = ge.Graph("resize")
    x = _data(graph, "x", ["n", 3, 20, 30])
    sizes = _data(graph, "sizes", [2], np.int64)
    dynamic = create_node("Resize", [x, None, None, sizes], {"axes": [2, 3]}, "r1", graph)
    assert dynamic.outputs[0].shape == ("n", 3, -1, -1)
    scales = _const(graph, "scales", np.array([1, 1, 2, 0.5], np.float32))
    static = create_node("Resize", [x, None, scales], {"mode": "linear"}, "r2", graph)
    assert static.outputs[0].shape == ("n", 3, 40, 15)
    fixed = _const(graph, "fixed", np.array([10, 10], np.int64))
    kept = create_node("Resize", [x, None, None, fixed],
                       {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, "r3", graph)
    assert kept.outputs[0].shape == ("n", 3, 7, 10)
    with pytest.raises(AttrError, match="mode"):
        create_node("Resize", [x, None, scales], {"mode": "area"}, "r4", graph)


def test_resize_uint8_cubic_antialias_matches_reference() -> None:
    inputs = {"X": RNG.integers(0, 256, (1, 2, 9, 11)).astype(np.uint8),
              "sizes": np.array([1, 2, 5, 4], np.int64)}
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="cubic", antialias=1)],
        "resize", [helper.make_tensor_value_info("X", TensorProto.UINT8, [1, 2, 9, 11])],
        [helper.make_tensor_value_info("Y", TensorProto.UINT8, None)],
        [onnx.numpy_helper.from_array(inputs["sizes"], "sizes")]),
        opset_imports=[helper.make_opsetid("", 19)])
    got = ge.backend.prepare(model).run({"X": inputs["X"]})[0]
    want = ReferenceEvaluator(model).run(None, {"X": inputs["X"]})[0]
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_upsample_7_and_resize_10_are_asymmetric() -> None:
    x = _random(1, 1, 3, 4)
    scales = np.array([1, 1, 2, 2.5], np.float32)
    model = _model("Upsample", {"X": x}, ["Y"], 7, scales=scales.tolist(), mode="linear")
    modern = _model("Resize", {"X": x, "roi": np.zeros(0, np.float32), "scales": scales}, ["Y"],
                    13, mode="linear", coordinate_transformation_mode="asymmetric")
    reference = ReferenceEvaluator(modern).run(None, {"X": x, "roi": np.zeros(0, np.float32),
                                                      "scales": scales})
    _against_reference(model, {"X": x}, reference)
    nearest = _model("Resize", {"X": x, "scales": np.array([1, 1, 2, 3], np.float32)}, ["Y"],
                     10)
    expected = x.repeat(2, axis=2).repeat(3, axis=3)
    _against_reference(nearest, {"X": x, "scales": np.array([1, 1, 2, 3], np.float32)},
                       [expected])


# -- GridSample, AffineGrid -------------------------------------------------------------

@pytest.mark.parametrize("mode, padding", [("bilinear", "reflection"), ("bicubic", "border"),
                                           ("nearest", "zeros")])
def test_grid_sample_16_matches_reference(mode: str, padding: str) -> None:
    inputs = {"X": _random(2, 3, 5, 6), "grid": RNG.uniform(-1.4, 1.4, (2, 4, 7, 2))
              .astype(np.float32)}
    model = _model("GridSample", inputs, ["Y"], 16, mode=mode, padding_mode=padding)
    modern = _model("GridSample", inputs, ["Y"], 22, padding_mode=padding,
                    mode={"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode))
    _against_reference(model, inputs, ReferenceEvaluator(modern).run(None, inputs), atol=1e-5)


def test_affine_grid_dynamic_size_keeps_rank() -> None:
    graph = ge.Graph("affine")
    theta = _data(graph, "theta", ["n", 3, 4])
    size = _data(graph, "size", [5], np.int64)
    node = create_node("AffineGrid", [theta, size], {}, "grid", graph)
    assert node.outputs[0].shape == ("n", -1, -1, -1, 3)


# -- RoiAlign, NonMaxSuppression --------------------------------------------------------

@pytest.mark.parametrize("opset, mode", [(10, "avg"), (22, "max"), (22, "avg")])
def test_roi_align_adaptive_sampling_matches_reference(opset: int, mode: str) -> None:
    rois = np.array([[0, 0, 9, 9], [2.5, 1, 7.2, 8.9], [4, 4, 4.5, 12], [-3, 1, 30, 2]],
                    np.float32)
    inputs = {"X": _random(2, 3, 10, 12), "rois": rois,
              "batch_indices": np.array([0, 1, 1, 0], np.int64)}
    model = _model("RoiAlign", inputs, ["Y"], opset, output_height=3, output_width=4,
                   sampling_ratio=0, spatial_scale=0.8, mode=mode)
    modern = _model("RoiAlign", inputs, ["Y"], 22, output_height=3, output_width=4,
                    sampling_ratio=0, spatial_scale=0.8, mode=mode,
                    coordinate_transformation_mode="output_half_pixel" if opset < 16
                    else "half_pixel")
    _against_reference(model, inputs, ReferenceEvaluator(modern).run(None, inputs), atol=1e-5)


def test_non_max_suppression_matches_reference() -> None:
    corners = RNG.uniform(0, 10, (2, 30, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners[:, :, 0], corners[:, :, 0] + corners[:, :, 1]], axis=2)
    inputs = {"boxes": boxes, "scores": RNG.random((2, 3, 30)).astype(np.float32),
              "max_output_boxes_per_class": np.array([7], np.int64),
              "iou_threshold": np.array([0.3], np.float32),
              "score_threshold": np.array([0.2], np.float32)}
    _against_reference(_model("NonMaxSuppression", inputs, ["selected"], 11), inputs)


def test_non_max_suppression_output_is_dynamic() -> None:
    graph = ge.Graph("nms")
    boxes = _data(graph, "boxes", ["b", "n", 4])
    scores = _data(graph, "scores", ["b", 5, "n"])
    assert create_node("NonMaxSuppression", [boxes, scores], {}, "nms", graph).outputs[0].shape \
        == (-1, 3)
    wrong = _data(graph, "wrong", ["b", 5, "n", 1])
    with pytest.raises(ShapeError, match="NonMaxSuppression node 'nms2'"):
        create_node("NonMaxSuppression", [boxes, wrong], {}, "nms2", graph)


# -- FlexAttention ----------------------------------------------------------------------

def test_flex_attention_grouped_with_score_mod_matches_reference() -> None:
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [], [0.5])
    score_mod = helper.make_graph(
        [helper.make_node("Tanh", ["scores"], ["capped"]),
         helper.make_node("Add", ["capped", "bias"], ["out"])], "score_mod",
        [helper.make_tensor_value_info("scores", TensorProto.UNDEFINED, None)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [bias])
    inputs = {"Q": _random(1, 4, 3, 8), "K": _random(1, 2, 5, 8), "V": _random(1, 2, 5, 6)}
    model = _model("FlexAttention", inputs, ["Y"], 26, domain="ai.onnx.preview",
                   score_mod=score_mod, scale=0.3)
    _against_reference(model, inputs)
