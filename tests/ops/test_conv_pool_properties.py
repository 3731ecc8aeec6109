"""Property tests of the window arithmetic of Conv2D and the pools.

For each drawn geometry the shape inference promised at build time is compared with
the shape torch produces (on input padded the same way) and, for SAME padding, with
TensorFlow's formula written out here independently; ``run_op`` checks the kernel's
output against the inferred shape, and the numbers are compared with torch too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ge.ops.nn import conv_output_size, same_padding
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

SETTINGS = settings(max_examples=40, deadline=None)


def _tf_same(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int, int]:
    """TensorFlow's SAME rule, from its documentation: (output, pad_begin, pad_end)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return out, total // 2, total - total // 2


@st.composite
def _axes(draw: Any, dilated: bool) -> dict[str, Any]:
    """Geometry of both spatial axes: size, kernel, stride, dilation and padding."""
    mode = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    geometry: dict[str, Any] = {"mode": mode, "axes": []}
    for _ in range(2):
        size, kernel = draw(st.integers(1, 12)), draw(st.integers(1, 4))
        stride = draw(st.integers(1, 3))
        dilation = draw(st.integers(1, 3)) if dilated else 1
        pads = (draw(st.integers(0, 3)), draw(st.integers(0, 3))) if mode == "EXPLICIT" \
            else (0, 0)
        if mode == "SAME":
            pads = _tf_same(size, kernel, stride, dilation)[1:]
        geometry["axes"].append((size, kernel, stride, dilation, pads))
    return geometry


def _fits(geometry: dict[str, Any]) -> bool:
    return all(size + sum(pads) >= (kernel - 1) * dilation + 1
               for size, kernel, _, dilation, pads in geometry["axes"])


def _attrs(geometry: dict[str, Any], layout: str) -> dict[str, Any]:
    (_, _, sh, dh, ph), (_, _, sw, dw, pw) = geometry["axes"]
    strides = [1, 1, sh, sw] if layout == "NCHW" else [1, sh, sw, 1]
    attrs: dict[str, Any] = {"strides": strides, "dilations": [dh, dw], "data_format": layout,
                             "padding": geometry["mode"]}
    if geometry["mode"] == "EXPLICIT":
        attrs["pads"] = [ph[0], ph[1], pw[0], pw[1]]
    return attrs


def _torch_padded(x: np.ndarray, layout: str, geometry: dict[str, Any],
                  value: float = 0.0) -> torch.Tensor:
    data = torch.from_numpy(x.transpose(0, 3, 1, 2) if layout == "NHWC" else x).double()
    (*_, (top, bottom)), (*_, (left, right)) = geometry["axes"]
    return F.pad(data, (left, right, top, bottom), value=value)


def _inferred(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any],
              const: tuple[str, ...] = ()) -> tuple[Any, ...]:
    return build_op_graph(op_type, inputs, attrs, const=const).outputs[0].shape


def _spatial(shape: tuple[Any, ...], layout: str) -> tuple[Any, Any]:
    return (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])


@SETTINGS
@given(geometry=_axes(dilated=True), layout=st.sampled_from(["NHWC", "NCHW"]),
       groups=st.sampled_from([1, 2]))
def test_conv2d_output_shape(geometry: dict[str, Any], layout: str, groups: int) -> None:
    assume(_fits(geometry))
    (height, kh, *_), (width, kw, *_) = geometry["axes"]
    x = np.random.default_rng(0).standard_normal(
        (1, 2, height, width) if layout == "NCHW" else (1, height, width, 2)).astype(np.float32)
    oihw = np.random.default_rng(1).standard_normal((4, 2 // groups, kh, kw)).astype(np.float32)
    weights = oihw if layout == "NCHW" else oihw.transpose(2, 3, 1, 0)
    attrs = {**_attrs(geometry, layout), "groups": groups}
    inputs = {"input": x, "filter": weights}
    inferred = _inferred("Conv2D", inputs, attrs, const=("filter",))
    (strides_h, dil_h), (strides_w, dil_w) = [(a[2], a[3]) for a in geometry["axes"]]
    expected = F.conv2d(_torch_padded(x, layout, geometry), torch.from_numpy(oihw).double(),
                        stride=(strides_h, strides_w), dilation=(dil_h, dil_w), groups=groups)
    assert _spatial(inferred, layout) == tuple(expected.shape[2:])
    if geometry["mode"] == "SAME":
        assert _spatial(inferred, layout) == (_tf_same(height, kh, strides_h, dil_h)[0],
                                              _tf_same(width, kw, strides_w, dil_w)[0])
    (result,) = run_op("Conv2D", inputs, attrs, const=["filter"])  # checks kernel vs inferred
    reference = expected.numpy() if layout == "NCHW" else expected.numpy().transpose(0, 2, 3, 1)
    assert_close(result, reference, accumulate=True)


@st.composite
def _pool_geometry(draw: Any) -> dict[str, Any]:
    geometry = draw(_axes(dilated=False))
    if geometry["mode"] == "EXPLICIT":  # torch pools take symmetric pads of at most k / 2
        geometry["axes"] = [(size, kernel, stride, 1, (min(p[0], kernel // 2),) * 2)
                            for size, kernel, stride, _, p in geometry["axes"]]
    geometry["ceil_mode"] = geometry["mode"] != "SAME" and draw(st.booleans())
    return geometry


@SETTINGS
@given(geometry=_pool_geometry(), layout=st.sampled_from(["NHWC", "NCHW"]),
       kind=st.sampled_from(["MaxPool", "AvgPool"]), include_pad=st.booleans())
def test_pool_output_shape(geometry: dict[str, Any], layout: str, kind: str,
                           include_pad: bool) -> None:
    assume(_fits(geometry))
    (height, kh, sh, _, ph), (width, kw, sw, _, pw) = geometry["axes"]
    x = np.random.default_rng(2).standard_normal(
        (1, 3, height, width) if layout == "NCHW" else (1, height, width, 3)).astype(np.float32)
    attrs = {**_attrs(geometry, layout), "ceil_mode": geometry["ceil_mode"]}
    del attrs["dilations"]
    attrs["ksize"] = [1, 1, kh, kw] if layout == "NCHW" else [1, kh, kw, 1]
    if kind == "AvgPool":
        attrs["count_include_pad"] = include_pad
    inferred = _inferred(kind, {"input": x}, attrs)
    if geometry["mode"] == "SAME":
        assert _spatial(inferred, layout) == (_tf_same(height, kh, sh)[0],
                                              _tf_same(width, kw, sw)[0])
        data = _torch_padded(x, layout, geometry, -math.inf if kind == "MaxPool" else 0.0)
        padding: tuple[int, int] = (0, 0)
    else:
        data = _torch_padded(x, layout, {"axes": [a[:4] + ((0, 0),) for a in geometry["axes"]]})
        padding = (ph[0], pw[0])
    if kind == "MaxPool":
        expected = F.max_pool2d(data, (kh, kw), (sh, sw), padding,
                                ceil_mode=geometry["ceil_mode"])
    else:
        expected = F.avg_pool2d(data, (kh, kw), (sh, sw), padding,
                                ceil_mode=geometry["ceil_mode"], count_include_pad=include_pad)
    assert _spatial(inferred, layout) == tuple(expected.shape[2:])
    (result,) = run_op(kind, {"input": x}, attrs)  # checks kernel vs inferred
    if kind == "MaxPool" or geometry["mode"] != "SAME" or include_pad:  # torch counts pads
        reference = expected.numpy() if layout == "NCHW" else expected.numpy().transpose(0, 2, 3, 1)
        assert_close(result, reference, accumulate=True)


@SETTINGS
@given(size=st.integers(1, 40), kernel=st.integers(1, 7), stride=st.integers(1, 5),
       dilation=st.integers(1, 4))
def test_same_padding_helpers_follow_tensorflow(size: int, kernel: int, stride: int,
                                                dilation: int) -> None:
    out, begin, end = _tf_same(size, kernel, stride, dilation)
    assert same_padding(size, kernel, stride, dilation) == (begin, end)
    assert conv_output_size(size, kernel, stride, dilation, (begin, end)) == out


@SETTINGS
@given(size=st.integers(1, 40), kernel=st.integers(1, 7), stride=st.integers(1, 5),
       pad=st.integers(0, 3), ceil_mode=st.booleans())
def test_conv_output_size_matches_torch(size: int, kernel: int, stride: int, pad: int,
                                        ceil_mode: bool) -> None:
    pad = min(pad, kernel // 2)
    assume(size + 2 * pad >= kernel)
    expected = F.max_pool1d(torch.zeros(1, 1, size), kernel, stride, pad, ceil_mode=ceil_mode)
    assert conv_output_size(size, kernel, stride, 1, (pad, pad), ceil_mode) == expected.shape[-1]
