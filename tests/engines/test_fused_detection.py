"""NonMaxSuppression and RoiAlign on the fused engine's compiled loops against the NumPy
engine's reference kernels and onnxruntime. NonMaxSuppression: the same selection,
index for index, over corner and centre boxes, several batch entries and classes, tied
scores, NaN boxes and scores, thresholds given as constants or at run time, limits of 0
and past the candidates. RoiAlign: average and max, both coordinate modes, fixed and
adaptive sampling, empty regions and regions past the map's edges."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.ops import create_node
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)


def _boxes(batch: int, count: int, center: bool) -> np.ndarray:
    corner = RNG.uniform(0, 60, (batch, count, 2))
    size = RNG.uniform(2, 25, (batch, count, 2))
    if center:  # [x_center, y_center, width, height]
        return np.concatenate([corner + size / 2, size], -1).astype(np.float32)
    flip = RNG.random((batch, count, 1)) < 0.3  # corners in either order
    first, second = corner, corner + size
    return np.concatenate([np.where(flip, second, first), np.where(flip, first, second)],
                          -1).astype(np.float32)


def _graph(limit: int, iou: float, floor: Optional[float], center: int, runtime: bool
           ) -> ge.Graph:
    graph = ge.Graph("nms")
    boxes = create_node("Data", [], {"shape": [-1, -1, 4]}, "boxes", graph)
    scores = create_node("Data", [], {"shape": [-1, -1, -1]}, "scores", graph)
    values: list[Any] = [np.array([limit], np.int64), np.array([iou], np.float32)]
    if floor is not None:
        values.append(np.array([floor], np.float32))
    extra = []
    for name, value in zip(("limit", "iou", "floor"), values):
        if runtime:
            extra.append(create_node("Data", [], {"shape": [1], "dtype": value.dtype.name},
                                     name, graph))
        else:
            extra.append(create_node("Const", [], {"value": ge.Tensor(value)}, name, graph))
    graph.set_outputs([create_node("NonMaxSuppression", [boxes, scores, *extra],
                                   {"center_point_box": center}, "nms", graph)])
    return graph


def _onnx(limit: int, iou: float, floor: Optional[float], center: int) -> bytes:
    consts = [numpy_helper.from_array(np.array([limit], np.int64), "limit"),
              numpy_helper.from_array(np.array([iou], np.float32), "iou")]
    if floor is not None:
        consts.append(numpy_helper.from_array(np.array([floor], np.float32), "floor"))
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"] + [c.name for c in consts],
                            ["nms"], center_point_box=center)
    graph = helper.make_graph(
        [node], "nms",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [None, None, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, None, None])],
        [helper.make_tensor_value_info("nms", TensorProto.INT64, [None, 3])], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


CASES = [  # (batch, classes, boxes, limit, iou, floor, center)
    (1, 1, 300, 50, 0.5, 0.05, 0),
    (2, 3, 80, 10, 0.3, None, 0),
    (2, 2, 60, 100, 0.5, 0.2, 1),  # the limit past the candidates
    (1, 4, 40, 0, 0.5, None, 0),  # a limit of 0 selects nothing
    (1, 1, 0, 5, 0.5, None, 0),  # no boxes
    (3, 1, 50, 7, 0.0, 0.5, 0),  # any overlap suppresses
]


@pytest.mark.parametrize("runtime", [False, True], ids=["constants", "given"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_nms_on_the_compiled_loop_agrees_with_the_reference(case, runtime):
    batch, classes, count, limit, iou, floor, center = case
    boxes = _boxes(batch, count, bool(center))
    scores = np.round(RNG.uniform(0, 1, (batch, classes, count)), 1).astype(np.float32)
    if count:  # tied scores above, NaN here
        boxes[0, 0, 1] = np.nan
        scores[0, 0, -1] = np.nan
    feeds = {"boxes": boxes, "scores": scores}
    if runtime:
        feeds.update(limit=np.array([limit], np.int64), iou=np.array([iou], np.float32))
        if floor is not None:
            feeds["floor"] = np.array([floor], np.float32)
    graph = _graph(limit, iou, floor, center, runtime)
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {"NonMaxSuppression": 1}, \
        executable.report["engines_by_op"]
    got = ge.Session(executable).run(feeds)["nms"]
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)["nms"]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64 and got.shape[1:] == (3,)


def test_nms_with_scores_for_other_boxes_is_an_error_naming_the_node():
    executable = ge.compile(_graph(5, 0.5, None, 0, False), opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {"NonMaxSuppression": 1}
    feeds = {"boxes": _boxes(1, 10, False), "scores": np.ones((1, 2, 12), np.float32)}
    with pytest.raises(ge.errors.GEError, match="NonMaxSuppression node 'nms'"):
        ge.Session(executable).run(feeds)


@pytest.mark.parametrize("case", CASES[:3], ids=str)
def test_nms_agrees_with_onnxruntime(case):
    batch, classes, count, limit, iou, floor, center = case
    boxes = _boxes(batch, count, bool(center))
    scores = RNG.uniform(0, 1, (batch, classes, count)).astype(np.float32)  # no ties
    feeds = {"boxes": boxes, "scores": scores}
    model = _onnx(limit, iou, floor, center)
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]) \
        .run(None, feeds)[0]
    got = ge.Session(ge.compile(ge.parse_onnx(model))).run(feeds)["nms"]
    np.testing.assert_array_equal(got, want)


def _roi_graph(attrs: dict[str, Any]) -> ge.Graph:
    graph = ge.Graph("roi_align")
    x = create_node("Data", [], {"shape": [-1, -1, -1, -1]}, "x", graph)
    rois = create_node("Data", [], {"shape": [-1, 4]}, "rois", graph)
    batch = create_node("Data", [], {"shape": [-1], "dtype": "int64"}, "batch", graph)
    graph.set_outputs([create_node("RoiAlign", [x, rois, batch], attrs, "y", graph)])
    return graph


def _regions(count: int, images: int, extent: float) -> tuple[np.ndarray, np.ndarray]:
    corner = RNG.uniform(-4, extent, (count, 2))
    size = RNG.uniform(0, extent / 2, (count, 2))
    size[:2] = 0.0  # empty regions: adaptive sampling gives no sample
    rois = np.concatenate([corner, corner + size], -1).astype(np.float32)  # x1 y1 x2 y2
    return rois, RNG.integers(0, images, count).astype(np.int64)


ROI_CASES = [
    {"output_height": 7, "output_width": 7, "sampling_ratio": 2, "spatial_scale": 0.25},
    {"output_height": 3, "output_width": 5, "sampling_ratio": 0, "spatial_scale": 0.5},
    {"output_height": 4, "output_width": 4, "sampling_ratio": 1, "spatial_scale": 1.0,
     "coordinate_transformation_mode": "output_half_pixel"},
    {"output_height": 2, "output_width": 3, "sampling_ratio": 2, "spatial_scale": 0.5,
     "mode": "max"},
    {"output_height": 2, "output_width": 2, "sampling_ratio": 0, "spatial_scale": 1.0,
     "mode": "max", "coordinate_transformation_mode": "output_half_pixel"},
]


@pytest.mark.parametrize("attrs", ROI_CASES, ids=str)
def test_roi_align_on_the_compiled_loop_agrees_with_the_reference(attrs):
    x = RNG.standard_normal((2, 5, 12, 10)).astype(np.float32)
    rois, batch = _regions(9, 2, 14.0 / attrs["spatial_scale"])
    graph = _roi_graph(attrs)
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("fused") == {"RoiAlign": 1}, \
        executable.report["engines_by_op"]
    feeds = {"x": x, "rois": rois, "batch": batch}
    got = ge.Session(executable).run(feeds)["y"]
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)["y"]
    assert_close(got, want, accumulate=True, what=str(attrs))


@pytest.mark.parametrize("attrs", ROI_CASES[:3], ids=str)
def test_roi_align_agrees_with_onnxruntime(attrs):
    x = RNG.standard_normal((2, 5, 12, 10)).astype(np.float32)
    rois, batch = _regions(6, 2, 14.0 / attrs["spatial_scale"])
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "roi", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 12, 10]),
                        helper.make_tensor_value_info("rois", TensorProto.FLOAT, [6, 4]),
                        helper.make_tensor_value_info("batch", TensorProto.INT64, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]) \
        .SerializeToString()
    feeds = {"x": x, "rois": rois, "batch": batch}
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]) \
        .run(None, feeds)[0]
    got = ge.Session(ge.compile(ge.parse_onnx(model))).run(feeds)["y"]
    assert_close(got, want, accumulate=True, what=str(attrs))
