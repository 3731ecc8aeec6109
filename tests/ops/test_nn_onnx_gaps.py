"""NN ops the ONNX node suite does not reach: the TensorFlow-layout 3-D ops, argmax
pooling in NHWC, batch-norm training statistics, seeded dropout, inference with dynamic
dimensions, and the errors (each naming its node)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ge.errors import AttrError, DTypeError, ShapeError
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(20250611)


def _random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _torch(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


@pytest.mark.parametrize("layout", ["NDHWC", "NCDHW"])
def test_conv3d_matches_torch_in_both_layouts(layout: str) -> None:
    x, w, b = _random(2, 4, 5, 6, 3), _random(3, 2, 2, 3, 4), _random(4)  # NDHWC, DHWIO
    attrs: dict[str, Any] = {"strides": [1, 2, 1], "pads": [1, 0, 0, 1, 1, 1],
                             "dilations": [1, 1, 2]}
    if layout == "NCDHW":
        x, w = x.transpose(0, 4, 1, 2, 3), w.transpose(4, 3, 0, 1, 2)
        attrs["data_format"] = "NCDHW"
    (result,) = run_op("Conv3D", {"input": x, "filter": w, "bias": b}, attrs)
    data = _torch(x if layout == "NCDHW" else x.transpose(0, 4, 1, 2, 3))
    weight = _torch(w if layout == "NCDHW" else w.transpose(4, 3, 0, 1, 2))
    padded = F.pad(data, (1, 1, 0, 1, 1, 0))  # torch lists the last axis first
    expected = F.conv3d(padded, weight, _torch(b), stride=(1, 2, 1), dilation=(1, 1, 2))
    if layout == "NDHWC":
        expected = expected.permute(0, 2, 3, 4, 1)
    assert_close(result, expected.numpy(), accumulate=True)


def test_pool3d_ndhwc_same_padding() -> None:
    x = _random(1, 5, 4, 6, 2)
    attrs = {"ksize": [1, 2, 2, 3, 1], "strides": [1, 2, 2, 2, 1], "padding": "SAME"}
    (largest,) = run_op("MaxPool3D", {"input": x}, attrs)
    assert largest.shape == (1, 3, 2, 3, 2)
    (mean,) = run_op("AvgPool3D", {"input": x}, attrs)
    # the first window has no padding: plain maximum and mean of its cells
    corner = x[0, :2, :2, :3, :]
    np.testing.assert_allclose(largest[0, 0, 0, 0], corner.max(axis=(0, 1, 2)), rtol=1e-6)
    np.testing.assert_allclose(mean[0, 0, 0, 0], corner.mean(axis=(0, 1, 2)), rtol=1e-5)


def test_max_pool_with_argmax_nhwc_indexes_the_nhwc_input() -> None:
    x = _random(2, 5, 5, 3)
    attrs = {"ksize": [2, 2], "strides": [2, 2], "padding": "SAME"}
    values, argmax = run_op("MaxPoolWithArgmax", {"input": x}, attrs)
    assert argmax.dtype == np.int64
    per_sample = x.reshape(2, -1)
    for n in range(2):
        np.testing.assert_array_equal(per_sample[n][argmax[n]], values[n])
    _, with_batch = run_op("MaxPoolWithArgmax", {"input": x},
                           {**attrs, "include_batch_in_index": True})
    np.testing.assert_array_equal(x.reshape(-1)[with_batch], values)


def test_batch_normalization_training_statistics() -> None:
    x = _random(4, 3, 5)
    ones, zeros = np.ones(3, np.float32), np.zeros(3, np.float32)
    y, running_mean, running_var, mean, var = run_op(
        "BatchNormalizationTraining",
        {"X": x, "scale": ones, "B": zeros, "input_mean": zeros, "input_var": ones},
        {"momentum": 0.8, "epsilon": 1e-5})
    assert_close(mean, x.mean(axis=(0, 2)))
    assert_close(var, x.var(axis=(0, 2)))
    assert_close(running_mean, 0.2 * x.mean(axis=(0, 2)))
    assert_close(running_var, 0.8 + 0.2 * x.var(axis=(0, 2)))
    expected = F.batch_norm(_torch(x), None, None, training=True, eps=1e-5)
    assert_close(y, expected.numpy())


def test_dropout_is_seeded_and_scales_what_it_keeps() -> None:
    x = np.ones((64, 64), np.float32)
    inputs = {"data": x, "ratio": np.asarray(0.25, np.float32),
              "training_mode": np.asarray(True)}
    first, mask = run_op("Dropout", inputs, {"seed": 7})
    again, _ = run_op("Dropout", inputs, {"seed": 7})
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first[mask], 1 / 0.75)
    assert np.all(first[~mask] == 0) and 0.2 < 1 - mask.mean() < 0.3
    idle, all_kept = run_op("Dropout", {**inputs, "training_mode": np.asarray(False)})
    np.testing.assert_array_equal(idle, x)
    assert all_kept.all()


def test_global_max_pool_nhwc() -> None:
    x = _random(2, 3, 4, 5)
    (result,) = run_op("GlobalMaxPool", {"x": x}, {"data_format": "NHWC"})
    np.testing.assert_array_equal(result, x.max(axis=(1, 2), keepdims=True))


# -- dynamic dimensions -----------------------------------------------------------------

def test_reduce_with_run_time_axes_keeps_the_rank_it_can_know() -> None:
    x = _random(2, 3, 4)
    inputs = {"x": x, "axes": np.array([0, 2])}  # axes arrive as a Data input
    graph = build_op_graph("ReduceL2", inputs, {"keepdims": 0})
    assert tuple(graph.outputs[0].shape) == (-1,)
    (result,) = run_op("ReduceLogSumExp", inputs, {"keepdims": 0})
    expected = torch.logsumexp(_torch(x), dim=(0, 2)).numpy()
    assert_close(result, expected, accumulate=True)


def test_window_ops_keep_unknown_dims_unknown() -> None:
    x = _random(1, 2, 6, 6)
    conv = build_op_graph("ConvTranspose", {"X": x, "W": _random(2, 3, 3, 3)},
                          {"strides": [2, 2]}, dynamic=["X"])
    assert tuple(conv.outputs[0].shape) == (-1, 3, -1, -1)
    pool = build_op_graph("LpPool", {"X": x}, {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER",
                                               "strides": [2, 2]}, dynamic=["X"])
    assert len(pool.outputs[0].shape) == 4
    (result,) = run_op("LpPool", {"X": x}, {"kernel_shape": [2, 2], "strides": [2, 2]},
                       dynamic=["X"])
    expected = F.lp_pool2d(_torch(x), 2, 2, stride=2).numpy()
    assert_close(result, expected)


def test_loss_keeps_named_dims() -> None:
    scores, target = _random(3, 5, 2), RNG.integers(0, 5, (3, 2))
    graph = build_op_graph("NegativeLogLikelihoodLoss", {"input": scores, "target": target},
                           {"reduction": "none"}, dynamic=["input"])
    assert tuple(graph.outputs[0].shape) == (3, 2)  # the target's dims fill the unknowns
    loss, _ = run_op("SoftmaxCrossEntropyLoss", {"scores": scores, "labels": target},
                     {"reduction": "mean"})
    expected = F.cross_entropy(_torch(scores), torch.from_numpy(target)).numpy()
    assert_close(loss, expected)


# -- errors name their node -------------------------------------------------------------

def test_errors_name_the_node() -> None:
    x5, x4 = np.zeros((1, 3, 4, 4, 4), np.float32), np.zeros((2, 4, 3, 3), np.float32)
    channel = np.ones(4, np.float32)
    cases = [
        ("Conv3D", {"input": x5, "filter": np.zeros((2, 2, 2, 3, 8), np.float32)}, {},
         ShapeError, "channels"),
        ("MaxPool3D", {"input": x5}, {"ksize": [2, 2]}, AttrError, "3 or 5"),
        ("Conv3D", {"input": x5, "filter": np.zeros((1, 1, 1, 3, 2), np.float32)},
         {"pads": [1, 1]}, AttrError, "pads"),
        ("GroupNormalization", {"X": x4, "scale": channel, "bias": channel},
         {"num_groups": 3}, ShapeError, "num_groups"),
        ("InstanceNormalization", {"input": x4, "scale": np.ones(3, np.float32),
                                   "B": channel}, {}, ShapeError, "channels"),
        ("NegativeLogLikelihoodLoss", {"input": x4, "target": np.zeros((2, 3), np.int64)}, {},
         ShapeError, "class axis"),
        ("SoftmaxCrossEntropyLoss", {"scores": x4, "labels": np.zeros((2, 3, 3), np.float32)},
         {}, DTypeError, "targets"),
        ("ReduceL1", {"x": x4, "axes": np.zeros((1, 1), np.int64)}, {"keepdims": 0},
         ShapeError, "1-D"),
        ("ConvTranspose", {"X": x4, "W": np.zeros((3, 2, 3, 3), np.float32)}, {},
         ShapeError, "channels"),
    ]
    for op_type, inputs, attrs, error, text in cases:
        with pytest.raises(error, match=text) as caught:
            build_op_graph(op_type, inputs, attrs)
        assert caught.type is error, (op_type, attrs)
        assert "'op'" in str(caught.value)
