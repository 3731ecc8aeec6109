"""3x3 convolutions as Winograd's F(4x4, 3x3), GE's own candidate beside oneDNN's kernels."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines.onednn import tuning, winograd
from ge.errors import ExecutionError
from ge.ops import create_node
from tests.engines.test_onednn_engine import _reference
from tests.tolerance import assert_close, rel_err

RNG = np.random.default_rng(7)
#: F(4x4, 3x3) rounds some 10-50 float32 epsilons off the exact result (its transforms
#: multiply by up to 5 and 8 before the sums cancel): measured 1-3e-6 of the output's scale
EXACT = 1e-5


def _direct(x: np.ndarray, oihw: np.ndarray, bias: Optional[np.ndarray],
            pads: tuple[int, int, int, int], activation: Optional[tuple[str, float, float]],
            residual: Optional[np.ndarray] = None) -> np.ndarray:
    """The convolution of NHWC ``x`` by a [K, C, 3, 3] filter, summed tap by tap in
    float64 (pads: top, left, bottom, right), plus a residual, then the activation."""
    top, left, bottom, right = pads
    padded = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    rows, cols = padded.shape[1] - 2, padded.shape[2] - 2
    out = np.zeros((x.shape[0], rows, cols, oihw.shape[0]))
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + rows, j:j + cols, :] @ oihw[:, :, i, j].T.astype(np.float64)
    if bias is not None:
        out += bias
    if residual is not None:
        out += residual
    if activation is not None:
        name, alpha, beta = activation
        out = np.where(out > 0, out, alpha * out) if name == "relu" else np.clip(out, alpha,
                                                                                  beta)
    return out


def _kernel(x: np.ndarray, oihw: np.ndarray, bias: Optional[np.ndarray],
            pads: tuple[int, int, int, int], activation: Optional[tuple[str, float, float]],
            residual: Optional[np.ndarray] = None, in_place: bool = False
            ) -> tuple[winograd.Winograd, np.ndarray]:
    form = "" if residual is None else "in place" if in_place else "apart"
    kernel = winograd.Winograd(oihw, bias, x.shape, pads[:2], pads[2:], activation, form)
    out = np.full(kernel.output_shape, np.nan, np.float32)
    if in_place:
        out[...] = residual
    kernel.run_arrays((x, out) if form != "apart" else (x, out, residual))
    return kernel, out


CASES = [
    # (batch, height, width, channels, filters, pads, activation, bias)
    (1, 8, 8, 16, 16, (1, 1, 1, 1), None, True),
    (2, 13, 11, 5, 7, (1, 1, 1, 1), ("relu", 0.0, 0.0), True),  # tiles past the edge
    (1, 9, 10, 3, 20, (0, 0, 0, 0), ("relu", 0.1, 0.0), False),  # leaky, no bias
    (3, 6, 7, 17, 9, (2, 1, 0, 2), ("clip", 0.0, 6.0), True),  # asymmetric padding
    (1, 1, 1, 4, 4, (1, 1, 1, 1), None, True),  # one pixel, all padding around it
    (1, 30, 30, 64, 48, (1, 1, 1, 1), ("relu", 0.0, 0.0), True),
]


@pytest.mark.parametrize("batch,height,width,channels,filters,pads,activation,bias", CASES)
def test_the_kernel_computes_the_direct_convolution(batch, height, width, channels, filters,
                                                    pads, activation, bias):
    x = RNG.standard_normal((batch, height, width, channels)).astype(np.float32)
    oihw = (RNG.standard_normal((filters, channels, 3, 3)) / np.sqrt(9 * channels)
            ).astype(np.float32)
    b = RNG.standard_normal(filters).astype(np.float32) if bias else None
    kernel, out = _kernel(x, oihw, b, pads, activation)
    expected = _direct(x, oihw, b, pads, activation)
    assert out.shape == expected.shape
    assert np.all(np.isfinite(out))  # every output written
    assert rel_err(out, expected) < EXACT, rel_err(out, expected)
    again = np.empty_like(out)
    kernel.run_arrays((x, again))
    np.testing.assert_array_equal(again, out)


@pytest.mark.parametrize("height,width", [(8, 12), (10, 7)])  # whole tiles; tiles past the edge
def test_a_residual_summed_in_place_or_read_apart_gives_the_same_bits(height, width):
    """The memory plan may put the output over the residual: either way the kernel adds
    it before the activation, and computes the same bits."""
    x = RNG.standard_normal((2, height, width, 6)).astype(np.float32)
    oihw = RNG.standard_normal((10, 6, 3, 3)).astype(np.float32) * 0.2
    b = RNG.standard_normal(10).astype(np.float32)
    residual = RNG.standard_normal((2, height, width, 10)).astype(np.float32)
    relu = ("relu", 0.0, 0.0)
    _, apart = _kernel(x, oihw, b, (1, 1, 1, 1), relu, residual)
    _, in_place = _kernel(x, oihw, b, (1, 1, 1, 1), relu, residual, in_place=True)
    np.testing.assert_array_equal(in_place, apart)
    assert rel_err(apart, _direct(x, oihw, b, (1, 1, 1, 1), relu, residual)) < EXACT
    with pytest.raises(ValueError, match="residual"):
        winograd.Winograd(oihw, b, x.shape, (1, 1), (1, 1), relu, "beside")


def test_a_run_in_many_chunks_computes_what_one_chunk_does(monkeypatch):
    """Tiles run in chunks (a whole number and a remainder): each chunk's tiles are its
    own, wherever they fall in the batch."""
    x = RNG.standard_normal((3, 14, 10, 8)).astype(np.float32)
    oihw = RNG.standard_normal((12, 8, 3, 3)).astype(np.float32) * 0.2
    b = RNG.standard_normal(12).astype(np.float32)
    whole, expected = _kernel(x, oihw, b, (1, 1, 1, 1), None)
    assert whole._per_chunk == whole._total
    monkeypatch.setattr(winograd, "CHUNK_FLOATS", 36 * 12 * 7)  # 7 tiles a chunk
    chunked, out = _kernel(x, oihw, b, (1, 1, 1, 1), None)
    assert chunked._per_chunk == 7 and chunked._total % 7 != 0
    assert rel_err(out, _direct(x, oihw, b, (1, 1, 1, 1), None)) < EXACT
    assert_close(out, expected, rtol=1e-6, atol=1e-6)


def test_the_kernels_a_thread_runs_share_its_scratch():
    """The transformed input and product are the thread's, as large as the largest
    kernel's needs, not one pair per node."""
    import threading

    def run_two() -> list[int]:
        sizes = []
        for channels in (8, 32, 16):
            x = RNG.standard_normal((1, 20, 20, channels)).astype(np.float32)
            _kernel(x, RNG.standard_normal((channels, channels, 3, 3)).astype(np.float32),
                    None, (1, 1, 1, 1), None)
            sizes.append(winograd.scratch_bytes())
        return sizes

    found: list[list[int]] = []
    thread = threading.Thread(target=lambda: found.append(run_two()))
    thread.start()
    thread.join()
    (sizes,) = found
    assert sizes[0] < sizes[1] == sizes[2]  # grown for 32 channels, not again for 16
    # the 32-channel kernel's two [36, 25 tiles, 32] arrays, and small per-thread buffers
    assert 2 * 36 * 25 * 32 * 4 < sizes[1] < 2 * 36 * 25 * 32 * 4 + (1 << 20)


def test_an_array_in_another_layout_is_refused():
    x = RNG.standard_normal((1, 8, 8, 4)).astype(np.float32)
    oihw = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    kernel = winograd.Winograd(oihw, None, x.shape, (1, 1), (1, 1), None)
    strided = np.empty((1, 8, 16, 4), np.float32)[:, :, ::2]
    with pytest.raises(ExecutionError, match="dense NHWC float32 array of shape"):
        kernel.run_arrays((x, strided))
    with pytest.raises(ExecutionError, match=r"shape \[1, 8, 8, 5\]"):
        kernel.run_arrays((np.zeros((1, 8, 8, 5), np.float32),
                           np.empty((1, 8, 8, 4), np.float32)))
    # a channels-last array seen in NCHW order is the same memory: taken
    nchw_view = np.empty((1, 8, 8, 4), np.float32).transpose(0, 3, 1, 2)
    kernel.run_arrays((x, nchw_view))
    expected = _direct(x, oihw, None, (1, 1, 1, 1), None)
    assert rel_err(nchw_view.transpose(0, 2, 3, 1), expected) < EXACT


@pytest.mark.parametrize("change,applies", [
    ({}, True),
    ({"weight_dims": (8, 8, 5, 5)}, False),
    ({"strides": (2, 2)}, False),
    ({"dilations": (2, 2)}, False),
    ({"eltwise": ("swish", 1.0, 0.0)}, False),
    ({"eltwise": ("clip", 0.0, 6.0)}, True),
    ({"begin": (-1, 0)}, False),
    ({"tile_count": winograd.MIN_TILES - 1}, False),
])
def test_what_the_kernel_takes(change, applies):
    args: dict[str, Any] = {"weight_dims": (8, 8, 3, 3), "strides": (1, 1),
                            "dilations": (1, 1), "begin": (1, 1), "end": (1, 1),
                            "eltwise": ("relu", 0.0, 0.0), "tile_count": winograd.MIN_TILES}
    args.update(change)
    assert winograd.applies(**args) is applies


class _Shifted:
    """A kernel that computes another kernel's output plus an offset."""

    def __init__(self, kernel: Any, offset: float) -> None:
        self.kernel, self.offset = kernel, offset

    def run_arrays(self, arrays: Any) -> None:
        self.kernel.run_arrays(arrays)
        np.add(arrays[1], self.offset, out=arrays[1])


def test_a_kernel_off_by_more_than_the_tolerance_disagrees():
    x = RNG.standard_normal((1, 8, 8, 4)).astype(np.float32)
    kernel, out = _kernel(x, RNG.standard_normal((4, 4, 3, 3)).astype(np.float32), None,
                          (1, 1, 1, 1), None)
    scale = float(np.max(np.abs(out)))

    def arrays() -> tuple[np.ndarray, ...]:
        return x, np.empty_like(out)

    assert winograd.agrees(kernel, kernel, arrays)
    assert winograd.agrees(_Shifted(kernel, scale * winograd.TOLERANCE / 4), kernel, arrays)
    assert not winograd.agrees(_Shifted(kernel, scale * winograd.TOLERANCE * 4), kernel,
                               arrays)
    assert not winograd.agrees(_Shifted(kernel, float("nan")), kernel, arrays)


@pytest.fixture
def tune_every_conv(monkeypatch, tmp_path):
    monkeypatch.setattr(tuning, "MIN_FLOPS", 0.0)
    monkeypatch.delenv(tuning.VARIABLE, raising=False)
    monkeypatch.delenv(winograd.VARIABLE, raising=False)
    monkeypatch.setenv(tuning.CACHE_VARIABLE, str(tmp_path / "kernels.json"))
    tuning.forget_choices()
    yield
    tuning.forget_choices()


def _conv_graph(layout: str = "NHWC", activation: str = "Relu") -> tuple[ge.Graph, dict]:
    graph = ge.Graph("conv")
    shape = [2, 12, 10, 16] if layout == "NHWC" else [2, 16, 12, 10]
    x = create_node("Data", [], {"shape": shape}, "x", graph)
    filt = (RNG.standard_normal((3, 3, 16, 24)) * 0.1).astype(np.float32)
    w = create_node("Const", [], {"value": ge.Tensor(
        filt if layout == "NHWC" else filt.transpose(3, 2, 0, 1))}, "w", graph)
    b = create_node("Const", [], {"value": ge.Tensor(
        RNG.standard_normal(24).astype(np.float32))}, "b", graph)
    graph.set_outputs([create_node("FusedConv2D", [x, w, b],
                                   {"data_format": layout, "strides": [1, 1],
                                    "pads": [1, 1, 1, 1], "activation": activation},
                                   "op", graph)])
    return graph, {"x": RNG.standard_normal(shape).astype(np.float32)}


def _run(graph: ge.Graph, feed: dict[str, Any]) -> np.ndarray:
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    return session.run(feed)["op"]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_the_tuner_times_the_kernel_beside_onednn_and_either_computes_the_node(
        tune_every_conv, layout):
    graph, feed = _conv_graph(layout)
    expected = _reference(graph, feed)
    assert_close(_run(graph, feed), expected, accumulate=True)
    (key, choice), = tuning._choices.items()
    names = [name for name, _ in choice.times_ms]
    assert winograd.NAME in names and choice.first == names[0] != winograd.NAME, names
    for name in (winograd.NAME, choice.first):  # each kept in its turn
        tuning._choices[key] = dataclasses.replace(choice, chosen=name)
        assert rel_err(_run(graph, feed), expected) < EXACT, name


def test_a_winograd_choice_is_read_back_from_the_machines_file(tune_every_conv):
    graph, feed = _conv_graph()
    _run(graph, feed)
    (key, choice), = tuning._choices.items()
    tuning._choices[key] = dataclasses.replace(choice, chosen=winograd.NAME)
    tuning._store(key, winograd.NAME)
    first = _run(graph, feed)
    path = tuning.cache_file()
    assert path is not None and winograd.NAME in json.loads(path.read_text()).values()
    tuning.forget_choices()  # as a new process
    np.testing.assert_array_equal(_run(graph, feed), first)
    (read,) = tuning.choices()
    assert read.chosen == winograd.NAME and not read.timed and read.first == choice.first


def test_the_variable_leaves_the_kernel_out(tune_every_conv, monkeypatch):
    monkeypatch.setenv(winograd.VARIABLE, "0")
    assert not winograd.available()
    graph, feed = _conv_graph()
    assert rel_err(_run(graph, feed), _reference(graph, feed)) < EXACT
    (choice,) = tuning.choices()
    assert winograd.NAME not in dict(choice.times_ms)


def test_an_activation_it_does_not_apply_keeps_the_node_on_onednn(tune_every_conv):
    graph, feed = _conv_graph(activation="HardSwish")
    assert_close(_run(graph, feed), _reference(graph, feed), accumulate=True)
    (choice,) = tuning.choices()
    assert winograd.NAME not in dict(choice.times_ms)


def test_a_resnet_runs_its_3x3_convolutions_on_the_kernel_and_matches_onnxruntime(
        exported, monkeypatch, tmp_path):
    """ResNet-18's stride-1 3x3 convolutions at batch 2, every one on the kernel
    (GE_WINOGRAD=1 takes it untimed): the model's output agrees with onnxruntime's."""
    import onnxruntime

    monkeypatch.setenv(tuning.CACHE_VARIABLE, str(tmp_path / "kernels.json"))
    monkeypatch.setenv(winograd.VARIABLE, "1")
    tuning.forget_choices()
    _, path = exported("resnet18", True)
    x = RNG.standard_normal((2, 3, 224, 224)).astype(np.float32)
    session = ge.Session(ge.compile(ge.parse_onnx(str(path)), opt_level=3))
    got = session.run({"input": x})
    expected = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    made, listed = tuning.choices(), tuning.table()
    tuning.forget_choices()
    taken = [c for c in made if c.chosen == winograd.NAME]
    # ResNet-18's stride-1 3x3 convolutions over 56x56, 28x28 and 14x14 at batch 2 (its
    # 7x7 ones have 8 tiles too); all are taken, none timed
    assert {c.what.split(" * ")[0] for c in taken} >= {
        "NHWC [2, 64, 56, 56]", "NHWC [2, 128, 28, 28]", "NHWC [2, 256, 14, 14]"}, made
    assert all(c.forced == "GE_WINOGRAD=1" and not c.times_ms for c in taken)
    assert "Winograd F(4x4, 3x3) convolutions" in winograd.table()
    assert "untimed (GE_WINOGRAD=1" in listed
    stored = tmp_path / "kernels.json"  # the other convolutions' timed choices
    assert winograd.NAME not in (stored.read_text() if stored.exists() else "")
    assert rel_err(next(iter(got.values())), expected) < 1e-4


def test_the_variable_set_to_one_takes_the_kernel_untimed_even_with_timing_off(
        monkeypatch, tmp_path):
    """GE_WINOGRAD=1 with GE_ONEDNN_TUNE=0 and a convolution below the tuner's floor."""
    monkeypatch.setenv(tuning.CACHE_VARIABLE, str(tmp_path / "kernels.json"))
    monkeypatch.setenv(tuning.VARIABLE, "0")
    monkeypatch.setenv(winograd.VARIABLE, "1")
    tuning.forget_choices()
    graph, feed = _conv_graph()
    try:
        assert rel_err(_run(graph, feed), _reference(graph, feed)) < EXACT
        (choice,) = tuning.choices()
    finally:
        tuning.forget_choices()
    assert choice.chosen == winograd.NAME and choice.forced and not choice.times_ms


def test_a_choice_made_without_the_kernel_does_not_keep_it_out_later(tune_every_conv,
                                                                     monkeypatch):
    """GE's own candidates are part of a convolution's signature: what a process chose
    among oneDNN's kernels alone (GE_WINOGRAD=0) is not read back where the Winograd
    kernel is offered."""
    graph, feed = _conv_graph()
    monkeypatch.setenv(winograd.VARIABLE, "0")
    _run(graph, feed)
    (without,) = tuning.choices()
    assert winograd.NAME not in dict(without.times_ms)
    monkeypatch.delenv(winograd.VARIABLE)
    tuning.forget_choices()  # a new process, the machine's file kept
    _run(graph, feed)
    (offered,) = tuning.choices()
    assert offered.timed and winograd.NAME in dict(offered.times_ms)
