"""The NN ops (ge/ops/nn.py) against torch.nn.functional, and their error cases."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ge
from ge.errors import AttrError, DTypeError, OpArgumentError, ShapeError
from ge.ops import Trait, create_node, get_schema, node_cost
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(20240611)


def _random(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _torch(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(array, dtype=np.float64))


def _tf_same(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow's SAME padding (begin, end), written out from its documentation."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _to_nchw(x: np.ndarray, layout: str) -> torch.Tensor:
    return _torch(x.transpose(0, 3, 1, 2) if layout == "NHWC" else x)


def _from_nchw(y: torch.Tensor, layout: str) -> np.ndarray:
    out = y.numpy()
    return out.transpose(0, 2, 3, 1) if layout == "NHWC" else out


# -- Conv2D -----------------------------------------------------------------------------

def _conv_reference(x: np.ndarray, weights: np.ndarray, bias: Optional[np.ndarray],
                    attrs: dict[str, Any], pads: tuple[int, int, int, int]) -> np.ndarray:
    layout = attrs.get("data_format", "NHWC")
    filter_format = attrs.get("filter_format", "OIHW" if layout == "NCHW" else "HWIO")
    oihw = weights if filter_format == "OIHW" else weights.transpose(3, 2, 0, 1)
    top, bottom, left, right = pads
    padded = F.pad(_to_nchw(x, layout), (left, right, top, bottom))
    result = F.conv2d(padded, _torch(oihw), None if bias is None else _torch(bias),
                      stride=attrs.get("_stride", 1), dilation=attrs.get("_dilation", 1),
                      groups=attrs.get("groups", 1))
    return _from_nchw(result, layout)


def _layout_shape(layout: str, n: int, c: int, h: int, w: int) -> tuple[int, ...]:
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def _filter_shape(filter_format: str, kh: int, kw: int, cin: int, cout: int) -> tuple[int, ...]:
    return (cout, cin, kh, kw) if filter_format == "OIHW" else (kh, kw, cin, cout)


# (data_format, filter_format, strides attr, dilations attr, padding, pads, groups, bias)
CONV_CASES = [
    ("NHWC", None, [1, 1, 1, 1], None, "SAME", None, 1, False),
    ("NHWC", None, [1, 2, 2, 1], None, "SAME", None, 1, True),
    ("NHWC", "OIHW", [2, 1], [1, 2, 2, 1], "VALID", None, 1, True),
    ("NCHW", None, [1, 1, 2, 1], [2, 2], "EXPLICIT", [1, 2, 0, 1], 1, False),
    ("NCHW", "HWIO", [1, 1], None, None, [1, 1], 2, True),
    ("NHWC", None, [1, 3, 2, 1], [1, 1, 2, 1], "SAME", None, 3, False),
    ("NHWC", None, [1, 1], None, "SAME", None, 6, True),  # depthwise, multiplier 2
    ("NCHW", None, [2, 2], [1, 1, 2, 2], "EXPLICIT", [2, 1, 1, 2], 6, False),  # depthwise
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "-".join(map(str, c[:2] + c[4:5])))
def test_conv2d_matches_torch(case: tuple[Any, ...]) -> None:
    layout, filter_format, strides, dilations, padding, pads, groups, with_bias = case
    channels, cout, kh, kw, height, width = 6, 12, 3, 2, 11, 9
    x = _random(*_layout_shape(layout, 2, channels, height, width))
    weights = _random(*_filter_shape(filter_format or ("OIHW" if layout == "NCHW" else "HWIO"),
                                     kh, kw, channels // groups, cout))
    bias = _random(cout) if with_bias else None
    attrs: dict[str, Any] = {"data_format": layout, "strides": strides, "groups": groups}
    for key, value in (("filter_format", filter_format), ("dilations", dilations),
                       ("padding", padding), ("pads", pads)):
        if value is not None:
            attrs[key] = value
    stride = tuple(strides[-2:] if len(strides) == 2 else
                   strides[2:] if layout == "NCHW" else strides[1:3])
    dilation = (1, 1) if dilations is None else tuple(
        dilations[-2:] if len(dilations) == 2 else
        dilations[2:] if layout == "NCHW" else dilations[1:3])
    if padding == "SAME":
        full = _tf_same(height, kh, stride[0], dilation[0]) + \
            _tf_same(width, kw, stride[1], dilation[1])
    elif pads is None:
        full = (0, 0, 0, 0)
    else:
        full = tuple(pads) if len(pads) == 4 else (pads[0], pads[0], pads[1], pads[1])
    inputs = {"input": x, "filter": weights}
    if bias is not None:
        inputs["bias"] = bias
    (result,) = run_op("Conv2D", inputs, attrs, const=["filter"])
    expected = _conv_reference(x, weights, bias, {**attrs, "_stride": stride,
                                                  "_dilation": dilation}, full)
    assert_close(result, expected, accumulate=True, what=str(case))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.float64])
def test_conv2d_dtypes(dtype: Any) -> None:
    np_dtype = ge.DataType.parse(dtype).np_dtype
    x = _random(1, 7, 7, 4).astype(np_dtype)
    weights = (_random(3, 3, 4, 5) * 0.3).astype(np_dtype)
    (result,) = run_op("Conv2D", {"input": x, "filter": weights},
                       {"strides": [1, 2, 2, 1], "padding": "SAME"})
    assert result.dtype == np_dtype
    pads = _tf_same(7, 3, 2) * 2
    expected = _conv_reference(x.astype(np.float64), weights.astype(np.float64), None,
                               {"_stride": 2}, pads)
    assert_close(result, expected.astype(np_dtype), accumulate=True)


def test_conv2d_seed_graph_shapes() -> None:
    """Section 4.2's first block: SAME 3x3 convolution, then a 2x2/2 SAME max pool."""
    graph = ge.Graph("seed")
    data = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", "input")
                        .set_attr("shape", [-1, 32, 32, 3]).build())
    conv = graph.add_op(ge.OperatorFactory.create_op("Conv2D").set_input("input", data)
                        .set_input("filter", _random(3, 3, 3, 32))
                        .set_attr("strides", [1, 1, 1, 1]).set_attr("padding", "SAME")
                        .set_attr("name", "conv1").build())
    pool = graph.add_op(ge.OperatorFactory.create_op("MaxPool").set_input("input", conv)
                        .set_attr("ksize", [1, 2, 2, 1]).set_attr("strides", [1, 2, 2, 1])
                        .set_attr("padding", "SAME").set_attr("name", "pool1").build())
    assert conv.shape == (-1, 32, 32, 32)
    assert pool.shape == (-1, 16, 16, 32)
    assert conv.outputs[0].desc.format is ge.Format.NHWC


def test_conv2d_dynamic_batch_gives_same_numbers() -> None:
    x, weights, bias = _random(3, 8, 8, 4), _random(3, 3, 4, 5), _random(5)
    inputs = {"input": x, "filter": weights, "bias": bias}
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    (static,) = run_op("Conv2D", inputs, attrs, const=["filter", "bias"])
    (dynamic,) = run_op("Conv2D", inputs, attrs, const=["filter", "bias"], dynamic=["input"])
    np.testing.assert_array_equal(static, dynamic)
    graph = build_op_graph("Conv2D", inputs, attrs, const=["filter", "bias"], dynamic=["input"])
    assert graph.outputs[0].shape == (-1, -1, -1, 5)


def _data(shape: list[Any], dtype: ge.DataType = ge.DataType.DT_FLOAT) -> ge.ir.Node:
    return create_node("Data", [], {"shape": shape, "dtype": dtype})


def test_named_dims_are_kept_where_they_can_be() -> None:
    data = _data(["batch", "height", 16, 4])
    weights = ge.builder.constant(_random(3, 3, 4, 8))
    same = create_node("Conv2D", [data, weights], {"padding": "SAME"})
    assert same.shape == ("batch", "height", 16, 8)
    strided = create_node("Conv2D", [data, weights], {"padding": "SAME", "strides": [2, 2]})
    assert strided.shape == ("batch", -1, 8, 8)
    valid = create_node("MaxPool", [data], {"ksize": [2, 2], "strides": [2, 2]})
    assert valid.shape == ("batch", -1, 8, 4)


def test_conv2d_cost_counts_multiply_adds() -> None:
    graph = build_op_graph("Conv2D", {"input": _random(2, 6, 5, 4), "filter": _random(3, 3, 2, 6)},
                           {"padding": "SAME", "groups": 2}, const=["filter"])
    cost = node_cost(graph.node("op"))
    assert cost.flops == 2 * 2 * 6 * 5 * 6 * (4 // 2) * 3 * 3
    assert cost.bytes == 4 * (2 * 6 * 5 * 4 + 3 * 3 * 2 * 6 + 2 * 6 * 5 * 6)


# -- pooling ----------------------------------------------------------------------------

# (ksize, strides, padding, pads, ceil_mode, count_include_pad)
POOL_CASES = [
    ([1, 2, 2, 1], [1, 2, 2, 1], "VALID", None, False, False),
    ([1, 3, 3, 1], [1, 2, 2, 1], "SAME", None, False, False),
    ([3, 2], [2, 1], "SAME", None, False, True),
    ([3, 3], [2, 2], None, [1, 1], False, True),
    ([3, 3], [2, 2], None, [1, 1], True, False),
    ([3, 3], [2, 2], None, [1, 1], True, True),
    ([2, 3], [3, 2], "EXPLICIT", [0, 0, 1, 1], True, True),
    ([3, 2], [1, 2], "EXPLICIT", [1, 0, 1, 0], False, True),  # asymmetric
]


def _pool_reference(kind: str, x: np.ndarray, layout: str, case: tuple[Any, ...]
                    ) -> np.ndarray:
    ksize, strides, padding, pads, ceil_mode, include_pad = case
    kernel = tuple(ksize[1:3]) if len(ksize) == 4 else tuple(ksize)
    stride = tuple(strides[1:3]) if len(strides) == 4 else tuple(strides)
    data = _to_nchw(x, layout)
    height, width = data.shape[2:]
    if padding == "SAME":
        pads = _tf_same(height, kernel[0], stride[0]) + _tf_same(width, kernel[1], stride[1])
    pads = (0, 0, 0, 0) if pads is None else pads
    full = pads if len(pads) == 4 else (pads[0], pads[0], pads[1], pads[1])
    if full[0] == full[1] and full[2] == full[3] and 2 * max(full) <= min(kernel):
        torch_pads = (full[0], full[2])
        if kind == "MaxPool":
            return _from_nchw(F.max_pool2d(data, kernel, stride, torch_pads,
                                           ceil_mode=ceil_mode), layout)
        return _from_nchw(F.avg_pool2d(data, kernel, stride, torch_pads, ceil_mode=ceil_mode,
                                       count_include_pad=include_pad), layout)
    assert not ceil_mode
    widths = (full[2], full[3], full[0], full[1])
    if kind == "MaxPool":
        padded = F.pad(data, widths, value=-math.inf)
        return _from_nchw(F.max_pool2d(padded, kernel, stride), layout)
    sums = F.avg_pool2d(F.pad(data, widths), kernel, stride, divisor_override=1)
    ones = F.pad(torch.ones_like(data[:1, :1]), widths, value=float(include_pad))
    counts = F.avg_pool2d(ones, kernel, stride, divisor_override=1)
    return _from_nchw(sums / counts, layout)


@pytest.mark.parametrize("kind", ["MaxPool", "AvgPool"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pool_matches_torch(kind: str, layout: str, case: tuple[Any, ...]) -> None:
    ksize, strides, padding, pads, ceil_mode, include_pad = case
    if layout == "NCHW" and len(ksize) == 4:
        ksize, strides = [1, 1, *ksize[1:3]], [1, 1, *strides[1:3]]
    x = _random(*_layout_shape(layout, 2, 3, 9, 8))
    attrs: dict[str, Any] = {"ksize": ksize, "strides": strides, "data_format": layout,
                             "ceil_mode": ceil_mode}
    if padding is not None:
        attrs["padding"] = padding
    if pads is not None:
        attrs["pads"] = pads
    if kind == "AvgPool":
        attrs["count_include_pad"] = include_pad
    (result,) = run_op(kind, {"input": x}, attrs)
    assert_close(result, _pool_reference(kind, x, layout, case), accumulate=True, what=kind)


def test_pools_dynamic_batch_and_half_precision() -> None:
    x = _random(3, 7, 7, 2, dtype=np.float16)
    attrs = {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    for kind in ("MaxPool", "AvgPool"):
        (static,) = run_op(kind, {"input": x}, attrs)
        (dynamic,) = run_op(kind, {"input": x}, attrs, dynamic=["input"])
        assert static.dtype == np.float16
        np.testing.assert_array_equal(static, dynamic)
        expected = _pool_reference(kind, x.astype(np.float64), "NHWC",
                                   (attrs["ksize"], attrs["strides"], "SAME", None, False, False))
        assert_close(static, expected.astype(np.float16), accumulate=True)


def test_global_average_pool() -> None:
    x = _random(2, 5, 6, 7)
    (nchw,) = run_op("GlobalAveragePool", {"x": x})
    assert_close(nchw, F.adaptive_avg_pool2d(_torch(x), 1).numpy(), accumulate=True)
    (nhwc,) = run_op("GlobalAveragePool", {"x": x}, {"data_format": "NHWC"}, dynamic=["x"])
    assert_close(nhwc, _torch(x).mean(dim=(1, 2), keepdim=True).numpy(), accumulate=True)
    graph = build_op_graph("GlobalAveragePool", {"x": x}, {"data_format": "NHWC"})
    assert graph.outputs[0].shape == (2, 1, 1, 7)


# -- normalization and softmax -------------------------------------------------------------

@pytest.mark.parametrize("layout,shape", [("NHWC", (2, 4, 5, 3)), ("NCHW", (2, 3, 4, 5)),
                                          ("NHWC", (6, 3)), ("NCHW", (6, 3))])
def test_fused_batch_norm_matches_torch_eval(layout: str, shape: tuple[int, ...]) -> None:
    x = _random(*shape)
    scale, offset, mean = _random(3), _random(3), _random(3)
    variance = RNG.uniform(0.5, 2.0, 3).astype(np.float32)
    inputs = {"x": x, "scale": scale, "offset": offset, "mean": mean, "variance": variance}
    for dynamic in ((), ("x",)):
        (result,) = run_op("FusedBatchNorm", inputs, {"data_format": layout},
                           const=["scale", "offset", "mean", "variance"], dynamic=dynamic)
        channels_first = x if len(shape) == 2 or layout == "NCHW" else x.transpose(0, 3, 1, 2)
        expected = F.batch_norm(_torch(channels_first), _torch(mean), _torch(variance),
                                _torch(scale), _torch(offset), training=False, eps=1e-4).numpy()
        if len(shape) == 4 and layout == "NHWC":
            expected = expected.transpose(0, 2, 3, 1)
        assert_close(result, expected, accumulate=True)
    assert get_schema("FusedBatchNorm").has_trait(Trait.INPLACE)


@pytest.mark.parametrize("axis,with_bias", [(-1, True), (-2, False), (1, True)])
def test_layer_normalization_matches_torch(axis: int, with_bias: bool) -> None:
    x = _random(2, 3, 4, 5)
    normalized = x.shape[axis:]
    scale = _random(*normalized)
    inputs = {"x": x, "scale": scale}
    bias = _random(*normalized) if with_bias else None
    if bias is not None:
        inputs["bias"] = bias
    (result,) = run_op("LayerNormalization", inputs, {"axis": axis, "epsilon": 1e-3},
                       dynamic=["x"])
    expected = F.layer_norm(_torch(x), normalized, _torch(scale),
                            None if bias is None else _torch(bias), eps=1e-3).numpy()
    assert_close(result, expected, accumulate=True)


def test_layer_normalization_broadcasts_scale() -> None:
    x, scale = _random(2, 3, 4).astype(np.float16), _random(4).astype(np.float16)
    (result,) = run_op("LayerNormalization", {"x": x, "scale": scale}, {"axis": 1})
    wide = _torch(x)
    expected = F.layer_norm(wide, (3, 4), eps=1e-5) * _torch(scale)
    assert result.dtype == np.float16
    assert_close(result, expected.numpy().astype(np.float16), accumulate=True)


@pytest.mark.parametrize("op_type,function", [("Softmax", F.softmax),
                                              ("LogSoftmax", F.log_softmax)])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_torch(op_type: str, function: Any, axis: int) -> None:
    x = _random(3, 4, 5) * 300  # large logits: an unstable softmax overflows
    (result,) = run_op(op_type, {"logits": x}, {"axis": axis}, dynamic=["logits"])
    assert np.isfinite(result).all()
    assert_close(result, function(_torch(x), dim=axis).numpy(), accumulate=True)


def test_softmax_default_axis_and_bfloat16() -> None:
    x = _random(4, 10).astype(ge.DataType.DT_BF16.np_dtype)
    (result,) = run_op("Softmax", {"logits": x})
    assert result.dtype == x.dtype
    expected = F.softmax(_torch(x.astype(np.float64)), dim=-1).numpy()
    assert_close(result, expected.astype(x.dtype))


# -- errors -----------------------------------------------------------------------------

CONV_INPUTS = {"input": np.zeros((1, 8, 8, 4), np.float32),
               "filter": np.zeros((3, 3, 4, 6), np.float32)}


@pytest.mark.parametrize("inputs,attrs,error", [
    ({"filter": np.zeros((3, 3, 3, 6), np.float32)}, {}, ShapeError),  # Cin 4 vs 3
    ({"filter": np.zeros((3, 3, 2, 6), np.float32)}, {"groups": 3}, ShapeError),  # 2*3 != 4
    ({"filter": np.zeros((3, 3, 1, 6), np.float32)}, {"groups": 4}, ShapeError),  # 6 % 4
    ({"bias": np.zeros(5, np.float32)}, {}, ShapeError),
    ({"filter": np.zeros((9, 9, 4, 6), np.float32)}, {"padding": "VALID"}, ShapeError),
    ({}, {"padding": "FULL"}, AttrError),
    ({}, {"strides": [1, 1, 1]}, AttrError),
    ({}, {"strides": [2, 1, 1, 1]}, AttrError),  # batch stride
    ({}, {"strides": [1, 1, 1, 1], "data_format": "NCHW", "filter_format": "HWIO",
          "dilations": [1, 2, 2, 1]}, AttrError),  # NHWC-style dilations on NCHW data
    ({}, {"padding": "EXPLICIT"}, AttrError),  # no pads
    ({}, {"padding": "SAME", "pads": [1, 1, 1, 1]}, AttrError),
    ({}, {"pads": [1, 1, -1, 1]}, AttrError),
    ({}, {"groups": 0}, AttrError),
    ({}, {"filter_format": "HWCN"}, AttrError),
    ({}, {"data_format": "ND"}, AttrError),
    ({"input": np.zeros((1, 8, 8, 4), np.int32)}, {}, DTypeError),
    ({"filter": np.zeros((3, 3, 4, 6), np.float64)}, {}, DTypeError),
], ids=lambda v: str(v)[:40] if not isinstance(v, dict) else None)
def test_conv2d_errors_name_the_node(inputs: dict[str, Any], attrs: dict[str, Any],
                                     error: type) -> None:
    with pytest.raises(error, match="Conv2D node 'op'") as caught:
        build_op_graph("Conv2D", {**CONV_INPUTS, **inputs}, attrs)
    assert caught.type is error


def test_conv2d_unknown_attribute_is_an_argument_error() -> None:
    with pytest.raises(OpArgumentError, match="'stride'.*'strides'"):
        build_op_graph("Conv2D", CONV_INPUTS, {"stride": [1, 1]})


def test_other_errors_name_the_node() -> None:
    x = np.zeros((2, 4, 4, 3), np.float32)
    params = {name: np.ones(3, np.float32) for name in ("scale", "offset", "mean", "variance")}
    cases = [
        ("FusedBatchNorm", {"x": x, **params}, {"is_training": True}, AttrError, "training"),
        ("FusedBatchNorm", {"x": x, **params}, {"data_format": "NCHW"}, ShapeError, "4"),
        ("MaxPool", {"input": x}, {"ksize": [2, 2, 2]}, AttrError, "2 or 4"),
        ("MaxPool", {"input": x}, {"ksize": [2, 2], "padding": "same"}, AttrError, "same"),
        ("AvgPool", {"input": x}, {"ksize": [1, 2, 2, 2]}, AttrError, "channel"),
        ("MaxPool", {"input": x}, {}, OpArgumentError, "ksize"),
        ("LayerNormalization", {"x": x, "scale": np.ones(4, np.float32)}, {}, ShapeError,
         "broadcast"),
        ("LayerNormalization", {"x": x, "scale": np.ones(3, np.float32)}, {"axis": 4},
         AttrError, "axis"),
        ("Softmax", {"logits": x}, {"axis": -5}, AttrError, "axis"),
        ("GlobalAveragePool", {"x": np.zeros((2, 3), np.float32)}, {}, ShapeError, "rank"),
    ]
    for op_type, inputs, attrs, error, text in cases:
        with pytest.raises(error, match=text) as caught:
            build_op_graph(op_type, inputs, attrs)
        assert caught.type is error, (op_type, attrs)
        assert "'op'" in str(caught.value)
