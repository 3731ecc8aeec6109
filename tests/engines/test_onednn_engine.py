"""The oneDNN engine: each convolution and pool it takes agrees with the NumPy engine
(an independent reference), runs again from its cached primitive, writes into the arena,
and falls back where oneDNN cannot take a call."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper as onnx_helper
from onnx import numpy_helper

import ge
from ge.engines import get_engine
from ge.engines.onednn import _lib
from ge.ops import create_node
from ge.runtime import threads
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _graph(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
           const: Sequence[int] = ()) -> ge.Graph:
    graph = ge.Graph(op_type.lower())
    values: list[Any] = []
    for index, array in enumerate(arrays):
        if array is None:
            values.append(None)
        elif index in const:
            values.append(create_node("Const", [], {"value": ge.Tensor(array)}, f"c{index}",
                                      graph))
        else:
            values.append(create_node("Data", [], {"shape": list(array.shape),
                                                   "dtype": array.dtype.name}, f"x{index}",
                                      graph))
    graph.set_outputs([create_node(op_type, values, attrs, "op", graph)])
    return graph


def _feeds(arrays: Sequence[Optional[np.ndarray]], const: Sequence[int]) -> dict[str, Any]:
    return {f"x{i}": a for i, a in enumerate(arrays) if a is not None and i not in const}


def _reference(graph: ge.Graph, feeds: dict[str, Any]) -> np.ndarray:
    return ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)["op"]


def check_on_onednn(op_type: str, arrays: Sequence[Optional[np.ndarray]],
                    attrs: dict[str, Any], const: Sequence[int] = ()) -> None:
    """The node runs on the oneDNN engine, inside the arena, and agrees with NumPy."""
    graph = _graph(op_type, arrays, attrs, const)
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {op_type: 1}, \
        executable.report["engines_by_op"]
    feeds = _feeds(arrays, const)
    session = ge.Session(executable)
    got = session.run(feeds)["op"]
    again = session.run(feeds)["op"]  # the cached primitive, its pointers reset
    assert_close(got, _reference(graph, feeds), accumulate=True, what=f"{op_type} {attrs}")
    np.testing.assert_array_equal(again, got)
    assert not executable.memory["outside_arena"]


def declined(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
             const: Sequence[int] = ()) -> bool:
    node = next(n for n in _graph(op_type, arrays, attrs, const).nodes if n.name == "op")
    return not get_engine("onednn").supports(node)


CONV_CASES = [
    # (data_format, input (N, C, H, W), cout, kernel, stride, pads, dilation, groups, padding)
    ("NHWC", (2, 8, 9, 9), 16, 3, 1, [1, 1, 1, 1], 1, 1, "EXPLICIT"),
    ("NHWC", (1, 8, 10, 10), 16, 3, 2, [0, 1, 0, 1], 1, 1, "EXPLICIT"),  # asymmetric
    ("NHWC", (1, 8, 10, 10), 16, 3, 2, None, 1, 1, "SAME"),
    ("NHWC", (1, 8, 11, 11), 8, 3, 1, [2, 2, 2, 2], 2, 1, "EXPLICIT"),  # dilated
    ("NHWC", (1, 16, 12, 12), 16, 3, 1, [1, 1, 1, 1], 1, 16, "EXPLICIT"),  # depthwise
    ("NHWC", (1, 24, 14, 14), 24, 7, 1, [3, 3, 3, 3], 1, 24, "EXPLICIT"),  # large depthwise
    ("NHWC", (2, 20, 15, 15), 20, 3, 2, [0, 1, 0, 1], 1, 20, "EXPLICIT"),  # strided dw
    ("NHWC", (1, 16, 8, 8), 32, 3, 1, [1, 1, 1, 1], 1, 4, "EXPLICIT"),  # grouped
    ("NHWC", (3, 3, 16, 16), 8, 1, 1, [0, 0, 0, 0], 1, 1, "VALID"),
    ("NHWC", (1, 3, 33, 33), 32, 3, 2, [1, 1, 1, 1], 1, 1, "EXPLICIT"),  # a stem
    ("NCHW", (2, 8, 9, 9), 16, 3, 2, [1, 1, 1, 1], 1, 1, "EXPLICIT"),
    ("NCHW", (1, 6, 7, 7), 6, 3, 1, [1, 1, 1, 1], 1, 6, "EXPLICIT"),
    ("NCHW", (1, 5, 12, 10), 7, 5, 1, [2, 1, 0, 2], 1, 1, "EXPLICIT"),
]


def _conv_arrays(layout: str, shape: tuple[int, ...], cout: int, kernel: int, groups: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, c, h, w = shape
    x = _f32(n, h, w, c) if layout == "NHWC" else _f32(n, c, h, w)
    filt = _f32(kernel, kernel, c // groups, cout) if layout == "NHWC" \
        else _f32(cout, c // groups, kernel, kernel)
    return x, filt * 0.3, _f32(cout)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-{c[1]}-k{c[3]}-g{c[7]}-{c[8]}")
def test_conv2d(case):
    layout, shape, cout, kernel, stride, pads, dilation, groups, padding = case
    x, filt, bias = _conv_arrays(layout, shape, cout, kernel, groups)
    attrs = {"data_format": layout, "strides": [stride, stride], "dilations": [dilation] * 2,
             "groups": groups, "padding": padding}
    if pads is not None:
        attrs["pads"] = pads
    check_on_onednn("Conv2D", [x, filt, bias], attrs, const=(1, 2))
    check_on_onednn("Conv2D", [x, filt], attrs, const=(1,))


ACTIVATIONS = [("", {}), ("Relu", {}), ("Relu6", {}), ("Clip", {"clip_min": -0.5, "clip_max": 0.7}),
               ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}), ("HardSwish", {}),
               ("Swish", {})]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a[0] or "none")
def test_fused_conv2d_activations_and_residual(activation, residual, layout):
    """The activation after the residual add, both inside the kernel, as the op says."""
    name, extra = activation
    x, filt, bias = _conv_arrays(layout, (2, 8, 6, 6), 12, 3, 1)
    attrs = {"data_format": layout, "strides": [1, 1], "pads": [1, 1, 1, 1], "groups": 1,
             "activation": name, **extra}
    other = (_f32(2, 6, 6, 12) if layout == "NHWC" else _f32(2, 12, 6, 6)) * 3
    check_on_onednn("FusedConv2D", [x, filt, bias, other if residual else None], attrs,
                    const=(1, 2))


def test_convolutions_the_engine_declines():
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    attrs = {"data_format": "NHWC", "strides": [1, 1], "pads": [1, 1, 1, 1], "groups": 1}
    assert declined("Conv2D", [x, filt, bias], attrs)  # a filter that is not a constant
    assert declined("Conv2D", [x.astype(np.float64), filt.astype(np.float64)], attrs,
                    const=(1,))  # float64 stays on NumPy
    assert declined("FusedConv2D", [x, filt, bias], {**attrs, "activation": "Clip",
                                                     "clip_min": 0.0}, const=(1, 2))
    assert not declined("Conv2D", [x, filt, bias], attrs, const=(1, 2))


def test_a_filter_is_packed_per_input_shape():
    graph = ge.Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, -1, -1, 4]}, "x0", graph)
    filt = create_node("Const", [], {"value": ge.Tensor(_f32(3, 3, 4, 8))}, "w", graph)
    graph.set_outputs([create_node("Conv2D", [x, filt], {"data_format": "NHWC", "strides": [2, 2],
                                                         "padding": "SAME"}, "op", graph)])
    fast = ge.Session(ge.compile(graph, engines=["onednn", "numpy"]))
    assert fast.executable.engine_histogram() == {"onednn": 1}
    for shape in [(1, 8, 8, 4), (2, 9, 7, 4), (1, 8, 8, 4), (3, 5, 5, 4)]:
        feed = {"x0": _f32(*shape)}
        assert_close(fast.run(feed)["op"], _reference(graph, feed), accumulate=True, what=shape)


def test_a_residual_of_another_shape_fed_at_run_time_is_an_error_naming_the_node():
    graph = ge.Graph("residual")
    x = create_node("Data", [], {"shape": [1, 6, 6, 4]}, "x", graph)
    other = create_node("Data", [], {"shape": [-1, -1, -1, -1]}, "other", graph)
    filt = create_node("Const", [], {"value": ge.Tensor(_f32(3, 3, 4, 4))}, "w", graph)
    graph.set_outputs([create_node("FusedConv2D", [x, filt, None, other],
                                   {"data_format": "NHWC", "padding": "SAME",
                                    "activation": "Relu"}, "op", graph)])
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    good = {"x": _f32(1, 6, 6, 4), "other": _f32(1, 6, 6, 4)}
    assert_close(session.run(good)["op"], _reference(graph, good), accumulate=True)
    with pytest.raises(ge.errors.GEError, match="'op'.*residual has shape"):
        session.run({"x": _f32(1, 6, 6, 4), "other": _f32(1, 1, 1, 4)})


def test_a_configuration_onednn_refuses_runs_on_the_next_engine(monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ge.errors.UnsupportedOpError("refused (test)")

    monkeypatch.setattr(_lib, "convolution", refuse)
    monkeypatch.setattr(_lib, "pooling", refuse)
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    check_on_onednn("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                    const=(1, 2))
    check_on_onednn("MaxPool", [x], {"data_format": "NHWC", "ksize": [3, 3],
                                     "strides": [2, 2], "padding": "SAME"})


def _residual_block(layout: str = "NHWC") -> ge.Graph:
    """-relu(conv_b(relu(conv_a(x))) + y) with y = conv_c(x): y dies at the fused
    convolution that adds it, so the memory plan may write that output over it. x is
    [2, 7, 7, 8] (NHWC) or [2, 8, 7, 7] (NCHW)."""
    graph = ge.Graph("block")
    shape = [2, 7, 7, 8] if layout == "NHWC" else [2, 8, 7, 7]
    x = create_node("Data", [], {"shape": shape}, "x", graph)
    conv = {"data_format": layout, "strides": [1, 1], "pads": [1, 1, 1, 1], "groups": 1}

    def weights(name: str) -> Any:
        filt = _f32(3, 3, 8, 8) * 0.3
        return create_node("Const", [], {"value": ge.Tensor(
            filt if layout == "NHWC" else filt.transpose(3, 2, 0, 1))}, name, graph)

    side = create_node("Conv2D", [x, weights("wc")], conv, "side", graph)
    a = create_node("FusedConv2D", [x, weights("wa")], {**conv, "activation": "Relu"}, "a",
                    graph)
    end = create_node("FusedConv2D", [a, weights("wb"), None, side],
                      {**conv, "activation": "Relu"}, "end", graph)
    graph.set_outputs([create_node("Neg", [end], {}, "op", graph)])
    return graph


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("refused", [False, True])
def test_a_residual_that_dies_is_added_in_place(refused, layout, monkeypatch):
    """The plan writes the output over the residual; the kernel adds what it finds there
    (a sum post-op; in NCHW, what the channels-last scratch was given of it), and the
    next engine, where oneDNN refuses, gets a copy of it."""
    graph = _residual_block(layout)
    if refused:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ge.errors.UnsupportedOpError("refused (test)")

        monkeypatch.setattr(_lib, "convolution", refuse)
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    session = ge.Session(executable)
    shape = (2, 7, 7, 8) if layout == "NHWC" else (2, 8, 7, 7)
    feed = {"x": _f32(*shape)}
    got = session.run(feed)["op"]
    index = next(i for i, step in enumerate(executable.steps) if step.node == "end")
    plan = session._program.plan_for({"x": shape}).memory
    assert index in plan.inplace
    for _ in range(3):  # the straight-line runner too
        np.testing.assert_array_equal(session.run(feed)["op"], got)
    assert_close(got, _reference(graph, feed), accumulate=True)


def test_nchw_convolutions_of_several_sizes_share_each_threads_scratch():
    """NCHW convolutions run channels-last kernels on per-thread scratch: two sessions
    of different sizes, on two threads at once, each get their own results."""
    def chain(channels: int, size: int) -> tuple[ge.Session, np.ndarray, np.ndarray]:
        graph = ge.Graph(f"chain{channels}")
        x = create_node("Data", [], {"shape": [1, channels, size, size]}, "x", graph)
        conv = {"data_format": "NCHW", "strides": [1, 1], "pads": [1, 1, 1, 1]}
        wide = create_node("Const", [], {"value": ge.Tensor(
            _f32(2 * channels, channels, 3, 3) * 0.2)}, "w1", graph)
        narrow = create_node("Const", [], {"value": ge.Tensor(
            _f32(channels, 2 * channels, 1, 1) * 0.2)}, "w2", graph)
        first = create_node("FusedConv2D", [x, wide], {**conv, "activation": "Relu"}, "a",
                            graph)
        second = create_node("FusedConv2D", [first, narrow, None, x],
                             {**conv, "pads": [0, 0, 0, 0]}, "op", graph)
        graph.set_outputs([second])
        feed = _f32(1, channels, size, size)
        want = _reference(graph, {"x": feed})
        return ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])), feed, want

    cases = [chain(8, 20), chain(16, 9)]
    failures: list[str] = []

    def work(session: ge.Session, feed: np.ndarray, want: np.ndarray) -> None:
        for _ in range(20):
            got = session.run({"x": feed})["op"]
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                failures.append(f"{feed.shape}: off by {np.abs(got - want).max()}")
                return

    workers = [threading.Thread(target=work, args=case) for case in cases]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures, failures
    for session, feed, want in cases:  # and one after the other on this thread
        assert_close(session.run({"x": feed})["op"], want, accumulate=True)


def test_a_residual_that_is_also_the_image_is_not_overwritten():
    graph = ge.Graph("self")
    x = create_node("Data", [], {"shape": [1, 6, 6, 4]}, "x", graph)
    a = create_node("Relu", [x], {}, "a", graph)
    filt = create_node("Const", [], {"value": ge.Tensor(_f32(3, 3, 4, 4))}, "w", graph)
    graph.set_outputs([create_node("FusedConv2D", [a, filt, None, a],
                                   {"data_format": "NHWC", "padding": "SAME"}, "op", graph)])
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    session = ge.Session(executable)
    feed = {"x": _f32(1, 6, 6, 4)}
    assert_close(session.run(feed)["op"], _reference(graph, feed), accumulate=True)
    assert not session._program.plan_for({"x": (1, 6, 6, 4)}).memory.inplace - {0}


POOL_CASES = [
    ("MaxPool", [3, 3], [2, 2], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("MaxPool", [2, 2], [2, 2], None, "VALID", False, {}),
    ("MaxPool", [3, 3], [2, 2], [0, 0, 0, 0], "EXPLICIT", True, {}),  # ceil mode
    ("MaxPool", [3, 3], [2, 2], None, "SAME", False, {}),
    ("MaxPool", [5, 5], [1, 1], [2, 2, 2, 2], "EXPLICIT", False, {}),
    ("MaxPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {"dilations": [2, 2]}),
    ("MaxPool", [4, 4], [3, 3], [2, 1, 2, 1], "EXPLICIT", True, {}),
    ("AvgPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("AvgPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {"count_include_pad": True}),
    ("AvgPool", [2, 2], [2, 2], None, "VALID", False, {}),
    ("AvgPool", [3, 3], [2, 2], None, "SAME", False, {}),
    ("AvgPool", [3, 3], [2, 2], [1, 1, 1, 1], "EXPLICIT", True, {}),
    ("AvgPool", [3, 3], [2, 2], [1, 1, 1, 1], "EXPLICIT", True, {"count_include_pad": True}),
]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-{c[1][0]}-{c[4]}-{c[5]}-"
                         f"{'pad' if c[6].get('count_include_pad') else ''}")
def test_pooling(case, layout):
    op_type, ksize, strides, pads, padding, ceil_mode, extra = case
    x = _f32(2, 10, 9, 5) if layout == "NHWC" else _f32(2, 5, 10, 9)
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "ceil_mode": ceil_mode,
             "data_format": layout, **extra}
    if pads is not None:
        attrs["pads"] = pads
    check_on_onednn(op_type, [x], attrs)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("plane", [(7, 7), (1, 1), (5, 3)])
def test_global_pooling(op_type, layout, plane):
    x = _f32(2, *plane, 24) if layout == "NHWC" else _f32(2, 24, *plane)
    if op_type == "GlobalMaxPool" and layout == "NCHW":
        assert declined(op_type, [x], {"data_format": layout})
    else:
        check_on_onednn(op_type, [x], {"data_format": layout})


def test_one_session_runs_from_several_threads_at_once():
    """A primitive's memory objects are shared state: calls on it are serialized, and
    every thread gets its own input's result."""
    x, filt, bias = _conv_arrays("NHWC", (1, 16, 20, 20), 16, 3, 1)
    attrs = {"data_format": "NHWC", "strides": [1, 1], "pads": [1, 1, 1, 1], "groups": 1,
             "activation": "Relu"}
    graph = _graph("FusedConv2D", [x, filt, bias], attrs, const=(1, 2))
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    feeds = [{"x0": _f32(1, 20, 20, 16)} for _ in range(4)]
    wants = [_reference(graph, feed) for feed in feeds]
    failures: list[str] = []

    def work(index: int) -> None:
        for _ in range(30):
            got = session.run(feeds[index])["op"]
            if not np.allclose(got, wants[index], rtol=1e-4, atol=1e-4):
                failures.append(f"thread {index}")
                return

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures


def test_a_run_s_thread_limit_reaches_the_openmp_pool():
    runtime = _lib.openmp_runtime()
    assert runtime is not None
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    graph = _graph("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                   const=(1, 2))
    ge.Session(ge.compile(graph, engines=["onednn", "numpy"])).run(_feeds([x], ()))
    before = runtime.omp_get_max_threads()
    with threads.limited(1):
        inside = runtime.omp_get_max_threads()
    assert inside == 1
    assert runtime.omp_get_max_threads() == before


def test_without_onednn_the_next_engine_takes_the_convolution(monkeypatch):
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    graph = _graph("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                   const=(1, 2))
    monkeypatch.setattr(_lib, "_state", {"error": "oneDNN is not installed (test)"})
    executable = ge.compile(graph)
    assert "onednn" not in executable.report["engines"]
    assert "not installed" in executable.report["engines_unavailable"]["onednn"]
    got = ge.Session(executable).run(_feeds([x], ()))["op"]
    assert_close(got, _reference(graph, _feeds([x], ())), accumulate=True)


def test_a_saved_model_with_onednn_steps_loads_without_onednn(monkeypatch, tmp_path):
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    graph = _graph("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                   const=(1, 2))
    executable = ge.compile(graph, engines=["onednn", "numpy"])
    assert executable.engine_histogram() == {"onednn": 1}
    path = tmp_path / "conv.gem"
    ge.save(executable, str(path))
    feed = _feeds([x], ())
    want = ge.Session(executable).run(feed)["op"]
    monkeypatch.setattr(_lib, "_state", {"error": "oneDNN is not installed (test)"})
    loaded = ge.load(str(path))
    assert loaded.engine_histogram() == {"numpy": 1}
    assert "its steps run on numpy" in loaded.report["engines_unavailable"]["onednn"]
    assert_close(ge.Session(loaded).run(feed)["op"], want, accumulate=True)


def test_a_library_of_another_major_version_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(_lib, "_state", {})
    monkeypatch.setenv(_lib.LIBRARY_VARIABLE, str(tmp_path / "libdnnl.so.3"))
    reason = _lib.unavailable_reason()
    assert reason is not None and "not installed" in reason
    monkeypatch.setattr(_lib, "_state", {})
    (tmp_path / "libdnnl.so.3").write_bytes(b"not a library")
    reason = _lib.unavailable_reason()
    assert reason is not None and "could not be loaded" in reason


UNARY_REFERENCES = {
    "Tanh": np.tanh, "Exp": np.exp, "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Relu": lambda x: np.maximum(x, 0), "Sqrt": np.sqrt, "Abs": np.abs,
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
}


@pytest.mark.parametrize("op_type", sorted(UNARY_REFERENCES))
def test_unary_activations(op_type):
    """Against float64 NumPy written here, edge values included: large magnitudes,
    zeros, and (for Sqrt) negatives, which give NaN as they do in NumPy."""
    from ge.engines.onednn.eltwise import SMALL_BY_OP, SMALL_ELEMENTS

    small = SMALL_BY_OP.get(op_type, SMALL_ELEMENTS)
    x = (_f32(-(-small // 5120), 64, 80) * 4).astype(np.float32)
    x.reshape(-1)[:8] = [0.0, -0.0, 80.0, -80.0, 100.0, -100.0, 1e-30, -1e-30]
    assert x.size >= small
    if op_type == "Sqrt":
        x.reshape(-1)[8:16] = np.abs(x.reshape(-1)[8:16]) + 1e-3
    graph = _graph(op_type, [x], {})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {op_type: 1}
    got = ge.Session(executable).run({"x0": x})["op"]
    with np.errstate(all="ignore"):
        want = UNARY_REFERENCES[op_type](x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)],
                                  want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-6,
                               err_msg=op_type)
    assert declined(op_type, [x[:1, :4, :4]], {})  # small: the next engine's


def test_a_unary_activation_of_unknown_shape_falls_back_when_small():
    graph = ge.Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, 64]}, "x0", graph)
    graph.set_outputs([create_node("Tanh", [x], {}, "op", graph)])
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    assert session.executable.engine_histogram() == {"onednn": 1}
    for rows in (1, 4096, 2):
        feed = {"x0": _f32(rows, 64)}
        assert_close(session.run(feed)["op"], np.tanh(feed["x0"]), what=rows)


@pytest.mark.parametrize("op_type", ["Softmax"])
@pytest.mark.parametrize("shape,axis", [((2, 12, 64, 64), -1), ((4, 96, 80), 2),
                                        ((128, 256), -1)])
def test_softmax(op_type, shape, axis):
    x = (_f32(*shape) * 5).astype(np.float32)
    x.reshape(-1)[:4] = [80.0, -80.0, 0.0, 30.0]
    graph = _graph(op_type, [x], {"axis": axis})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {op_type: 1}
    got = ge.Session(executable).run({"x0": x})["op"]
    wide = x.astype(np.float64)
    shifted = wide - wide.max(axis=axis, keepdims=True)
    total = np.exp(shifted).sum(axis=axis, keepdims=True)
    want = np.exp(shifted) / total
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7, err_msg=op_type)
    assert declined(op_type, [x.reshape(-1)[:64]], {"axis": -1})  # small: the next engine's
    assert declined(op_type, [x], {"axis": 0})  # an outer axis: oneDNN's slow code
    assert declined("LogSoftmax", [x], {"axis": -1})  # oneDNN's log: short of float32


NEAREST = {"mode": "nearest"}
RESIZE_CASES = [
    # (input shape, attrs, scales or None, sizes or None, a whole-number repeat)
    ((1, 8, 10, 12), {**NEAREST, "coordinate_transformation_mode": "asymmetric",
                      "nearest_mode": "floor"}, [1, 1, 2, 2], None, True),
    ((1, 8, 10, 12), NEAREST, [1, 1, 2, 2], None, True),  # half_pixel, round_prefer_floor
    ((2, 10, 12, 8), NEAREST, [1, 3, 2, 1], None, True),  # NHWC, unequal factors
    ((2, 8, 10, 12), NEAREST, None, [2, 8, 40, 36], True),
    ((1, 8, 10, 12), {**NEAREST, "coordinate_transformation_mode": "align_corners"},
     [1, 1, 2, 2], None, True),  # align_corners by 2 happens to repeat every cell
    ((1, 8, 10, 12), {**NEAREST, "coordinate_transformation_mode": "align_corners"},
     [1, 1, 3, 3], None, False),  # by 3 it does not: the next engine
    ((1, 8, 10, 12), NEAREST, [1, 1, 1.5, 2], None, False),
    ((1, 8, 10, 12), {**NEAREST, "coordinate_transformation_mode": "tf_half_pixel_for_nn",
                      "nearest_mode": "ceil"}, [1, 1, 2, 2], None, False),
]


@pytest.mark.parametrize("shape,attrs,scales,sizes,repeat", RESIZE_CASES)
def test_nearest_resize(shape, attrs, scales, sizes, repeat, monkeypatch):
    x = _f32(*shape)
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    arrays = [x, None, None if scales is None else np.array(scales, np.float32),
              None if sizes is None else np.array(sizes, np.int64)]
    graph = _graph("Resize", arrays, attrs, const=(2, 3))
    session, fell_back = _resize_session(graph, monkeypatch)
    for _ in range(2):
        got = session.run({"x0": x})["op"]
        np.testing.assert_array_equal(got, _reference(graph, {"x0": x}))  # bit for bit
    assert bool(fell_back) != repeat


def _resize_session(graph: ge.Graph, monkeypatch: Any) -> tuple[ge.Session, list[str]]:
    """A session of the one-Resize graph on the oneDNN engine, and the list of the nodes
    each of its runs handed to the next engine."""
    from ge.engines.onednn import movement

    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {"Resize": 1}
    fell_back: list[str] = []
    original = movement._Fallback.__call__

    def note(self: Any, inputs: Any, outs: Any) -> None:
        fell_back.append(self.node.name)
        original(self, inputs, outs)

    monkeypatch.setattr(movement._Fallback, "__call__", note)
    return ge.Session(executable), fell_back


LINEAR = {"mode": "linear"}
LINEAR_CASES = [
    # (channels-last input shape, attrs, scales or None, sizes or None, oneDNN computes it)
    ((1, 10, 12, 8), LINEAR, [1, 2, 2, 1], None, True),  # half_pixel
    ((2, 10, 12, 8), {**LINEAR, "coordinate_transformation_mode": "pytorch_half_pixel"},
     [1, 2, 2, 1], None, True),
    ((2, 10, 14, 3), LINEAR, None, [2, 15, 21, 3], True),  # sizes: a ratio of 1.5
    ((1, 20, 30, 4), LINEAR, None, [1, 7, 9, 4], True),  # shrinking, no antialias
    ((1, 10, 10, 4), LINEAR, [1, 2.5, 1, 1], None, True),  # one axis
    ((2, 9, 6), LINEAR, [1, 3, 1], None, True),  # 1-D signal
    ((1, 4, 5, 6, 2), LINEAR, [1, 2, 2, 2, 1], None, True),  # volume
    ((1, 10, 13, 3), LINEAR, [1, 1.55, 1.3, 1], None, False),  # sizes rounded down
    ((1, 10, 13, 3), {**LINEAR, "coordinate_transformation_mode": "pytorch_half_pixel"},
     None, [1, 1, 26, 3], False),  # an axis of one: pytorch_half_pixel samples index 0
]


def _onnxruntime_resize(x: np.ndarray, attrs: dict[str, Any], scales: Optional[list[float]],
                        sizes: Optional[list[int]]) -> np.ndarray:
    """onnxruntime's linear resize of channels-last ``x``, run on its channels-first
    transpose (the layout onnxruntime's kernel takes)."""
    rank = x.ndim
    order = [0, rank - 1] + list(range(1, rank - 1))
    first = np.ascontiguousarray(x.transpose(order))
    name = "scales" if scales is not None else "sizes"
    given = np.array([(scales if scales is not None else sizes)[i] for i in order],
                     np.float32 if scales is not None else np.int64)
    model = onnx_helper.make_model(onnx_helper.make_graph(
        [onnx_helper.make_node("Resize", ["x", "", *(["scales"] if scales is not None
                                                       else ["", "sizes"])], ["y"], **{
            "mode": "linear", "coordinate_transformation_mode":
                attrs.get("coordinate_transformation_mode", "half_pixel")})],
        "resize", [onnx_helper.make_tensor_value_info("x", 1, list(first.shape))],
        [onnx_helper.make_empty_tensor_value_info("y")],
        initializer=[numpy_helper.from_array(given, name)]),
        opset_imports=[onnx_helper.make_opsetid("", 13)])
    y = ort.InferenceSession(model.SerializeToString(),
                             providers=["CPUExecutionProvider"]).run(None, {"x": first})[0]
    return y.transpose(np.argsort(order))


@pytest.mark.parametrize("shape,attrs,scales,sizes,taken", LINEAR_CASES)
def test_linear_resize(shape, attrs, scales, sizes, taken, monkeypatch):
    x = _f32(*shape)
    arrays = [x, None, None if scales is None else np.array(scales, np.float32),
              None if sizes is None else np.array(sizes, np.int64)]
    graph = _graph("Resize", arrays, attrs, const=(2, 3))
    session, fell_back = _resize_session(graph, monkeypatch)
    want = _reference(graph, {"x0": x})
    for _ in range(2):
        assert_close(session.run({"x0": x})["op"], want, accumulate=True, what=str(shape))
    assert bool(fell_back) != taken
    if taken:
        assert_close(session.run({"x0": x})["op"], _onnxruntime_resize(x, attrs, scales, sizes),
                     accumulate=True, what="onnxruntime")


def test_channels_first_linear_resizes_go_to_torch_where_it_runs(monkeypatch):
    """oneDNN's resampling is slower than torch's on channels-first data: it takes it only
    without torch."""
    x = _f32(1, 4, 6, 6)
    scales = np.array([1, 1, 2, 2], np.float32)
    assert declined("Resize", [x, None, scales], LINEAR, const=(2,))
    monkeypatch.setattr(type(get_engine("torch")), "unavailable_reason",
                        lambda self: "PyTorch is not installed")
    assert not declined("Resize", [x, None, scales], LINEAR, const=(2,))
    graph = _graph("Resize", [x, None, scales], LINEAR, const=(2,))
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    got = ge.Session(executable).run({"x0": x})["op"]
    assert_close(got, _reference(graph, {"x0": x}), accumulate=True)


def test_the_linear_resizes_the_engine_declines():
    x = _f32(1, 6, 6, 4)
    scales = np.array([1, 2, 2, 1], np.float32)
    assert not declined("Resize", [x, None, scales], LINEAR, const=(2,))
    for mapping in ("align_corners", "asymmetric", "half_pixel_symmetric"):
        assert declined("Resize", [x, None, scales],
                        {**LINEAR, "coordinate_transformation_mode": mapping}, const=(2,))
    assert declined("Resize", [x, None, scales], {**LINEAR, "antialias": 1}, const=(2,))
    assert declined("Resize", [x, None, scales], {"mode": "cubic"}, const=(2,))
    assert declined("Resize", [x, None, np.array([2, 2, 2, 1], np.float32)], LINEAR,
                    const=(2,))  # the batch resized
    assert declined("Resize", [_f32(8, 6), None, np.array([2, 1], np.float32)], LINEAR,
                    const=(2,))  # rank 2: no batch and channel axes


def test_a_resize_fed_its_scales_at_run_time_is_declined():
    x = _f32(1, 4, 6, 6)
    assert declined("Resize", [x, None, np.array([1, 1, 2, 2], np.float32)], NEAREST)
    assert declined("Resize", [x, None, np.array([1, 1, 2, 2], np.float32)], LINEAR)


CONV_TRANSPOSE_CASES = [
    ({"strides": [2, 2]}, 1, (3, 3)),
    ({"strides": [2, 2]}, 1, (2, 2)),  # a text detector's upsampling
    ({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 1, (3, 3)),
    ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, 1, (3, 3)),
    ({"strides": [2, 2], "auto_pad": "SAME_LOWER"}, 1, (3, 3)),
    ({"strides": [3, 2], "output_shape": [20, 15]}, 1, (3, 3)),  # grown: the next engine
    ({"strides": [1, 1], "dilations": [2, 2], "pads": [0, 1, 2, 0]}, 1, (3, 3)),
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, 4, (3, 3)),
    ({"strides": [2, 2], "pads": [1, 0, 0, 1]}, 2, (2, 2)),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV_TRANSPOSE_CASES, ids=str)
def test_conv_transpose(case, bias, monkeypatch):
    from ge.engines.onednn import deconv

    def refuse(self: Any, inputs: Any, outs: Any) -> None:
        raise AssertionError("fell back")

    attrs, group, kernel = case
    if "output_shape" not in attrs:  # an output larger than the full one is padded after
        monkeypatch.setattr(deconv._Fallback, "__call__", refuse)
    x, weights = _f32(2, 8, 6, 7), _f32(8, 12 // group, *kernel)
    check_on_onednn("ConvTranspose", [x, weights, _f32(12) if bias else None],
                    {**attrs, "group": group}, const=(1, 2))


def test_conv_transpose_the_engine_declines():
    x, weights = _f32(1, 4, 5, 5), _f32(4, 6, 3, 3)
    assert declined("ConvTranspose", [x, weights], {"group": 1})  # a computed filter
    assert declined("ConvTranspose", [_f32(1, 4, 5), _f32(4, 6, 3)], {"group": 1},
                    const=(1,))  # 1-D
    assert not declined("ConvTranspose", [x, weights], {"group": 1}, const=(1,))


@pytest.mark.parametrize("shape,perm", [((1, 64, 20, 20), (0, 2, 3, 1)),
                                        ((2, 20, 20, 64), (0, 3, 1, 2)),
                                        ((2, 12, 128, 16), (0, 2, 1, 3)),
                                        ((64, 300), (1, 0)),
                                        ((3, 4, 40, 50), (3, 1, 0, 2))])
def test_transpose(shape, perm):
    x = _f32(*shape)
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    graph = _graph("Transpose", [x], {"perm": list(perm)})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.report["engines_by_op"].get("onednn") == {"Transpose": 1}
    session = ge.Session(executable)
    for _ in range(2):
        got = session.run({"x0": x})["op"]
        np.testing.assert_array_equal(got, np.transpose(x, perm))  # bit for bit
    assert np.signbit(got.reshape(-1)[np.argmax(np.transpose(
        np.arange(x.size).reshape(shape), perm).reshape(-1) == 1)])
    assert declined("Transpose", [x[..., :2] if x.ndim > 1 else x], {"perm": list(perm)})


def test_transpose_into_a_strided_slot():
    """A destination that is not dense takes the matrix path or a strided copy."""
    from ge.engines.onednn import movement

    x = _f32(2, 64, 20, 20)
    node = next(n for n in _graph("Transpose", [x], {"perm": [0, 2, 3, 1]}).nodes
                if n.name == "op")
    bound = movement.bind_transpose(node)
    dense = bound.kernel([x])[0]
    np.testing.assert_array_equal(dense, np.transpose(x, (0, 2, 3, 1)))
    wide = np.full((2, 20, 20, 128), np.nan, np.float32)
    bound.writer([x], [wide[..., ::2]])
    np.testing.assert_array_equal(wide[..., ::2], np.transpose(x, (0, 2, 3, 1)))
    assert np.isnan(wide[..., 1::2]).all()  # nothing written between


def _layer_norm64(x: np.ndarray, scale: np.ndarray, bias: Optional[np.ndarray], axis: int,
                  epsilon: float) -> np.ndarray:
    """LayerNormalization in float64, written from the operator's definition."""
    wide = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    centred = wide - wide.mean(axis=axes, keepdims=True)
    deviation = np.sqrt((centred ** 2).mean(axis=axes, keepdims=True) + epsilon)
    out = centred / deviation * scale
    return out + bias if bias is not None else out


@pytest.mark.parametrize("shape,axis,scale_shape,with_bias", [
    ((1, 128, 256), -1, (256,), True),
    ((3, 50, 768), 2, (768,), False),
    ((2, 64, 8, 8), 1, (64, 8, 8), True),   # ConvNeXt-style: all but the batch axis
    ((4, 32, 96), -2, (1, 96), True),       # a scale smaller than the normalized shape
])
def test_layer_normalization(shape, axis, scale_shape, with_bias):
    x = (_f32(*shape) * 3 + 2).astype(np.float32)
    scale = _f32(*scale_shape)
    bias = _f32(*scale_shape) if with_bias else None
    arrays = [x, scale, bias] if with_bias else [x, scale]
    attrs = {"axis": axis, "epsilon": 1e-5}
    check_on_onednn("LayerNormalization", arrays, attrs, const=(1, 2))
    graph = _graph("LayerNormalization", arrays, attrs, const=(1, 2))
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    got = session.run({"x0": x})["op"]
    want = _layer_norm64(x, scale, bias, axis, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_layer_normalizations_the_engine_declines():
    x, scale = _f32(2, 128, 64), _f32(64)
    attrs = {"axis": -1, "epsilon": 1e-5}
    assert not declined("LayerNormalization", [x, scale], attrs, const=(1,))
    assert declined("LayerNormalization", [x, scale], attrs)  # a computed scale
    assert declined("LayerNormalization", [x, scale, _f32(64)], attrs, const=(1,))
    assert not declined("LayerNormalization", [x[:1, :1], scale], attrs, const=(1,))  # small
    assert declined("LayerNormalization", [x[:0], scale], attrs, const=(1,))  # empty


def test_a_layer_normalization_of_unknown_rows_runs_small_and_large_feeds():
    graph = ge.Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, 96]}, "x0", graph)
    scale = create_node("Const", [], {"value": ge.Tensor(_f32(96))}, "s", graph)
    graph.set_outputs([create_node("LayerNormalization", [x, scale], {"epsilon": 1e-5},
                                   "op", graph)])
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    assert session.executable.engine_histogram() == {"onednn": 1}
    weights = graph.node("s").attrs["value"].numpy()
    for rows in (1, 512, 3):
        feed = _f32(rows, 96)
        np.testing.assert_allclose(session.run({"x0": feed})["op"],
                                   _layer_norm64(feed, weights, None, -1, 1e-5),
                                   rtol=1e-5, atol=2e-6, err_msg=str(rows))


BINARY_REFERENCES = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                     "Div": np.divide}


@pytest.mark.parametrize("op_type", sorted(BINARY_REFERENCES))
@pytest.mark.parametrize("first,second", [
    ((1, 64, 40, 40), (1, 64, 40, 40)),   # a residual
    ((1, 64, 40, 40), (64, 1, 1)),        # a per-channel bias
    ((4, 96, 256), (4, 96, 1)),           # a per-row statistic
    ((1, 64, 32, 32), ()),                # a scalar
    ((1, 64, 1, 1), (1, 64, 32, 32)),     # the first operand broadcasts
])
def test_binary_arithmetic_is_numpy_s_bit_for_bit(op_type, first, second):
    a, b = _f32(*first), _f32(*second)
    if op_type == "Div":
        b = (np.abs(b) + 0.5).astype(np.float32)
        b.reshape(-1)[:1] = 0.0  # a division by zero: inf or nan, as NumPy's
    graph = _graph(op_type, [a, b], {})
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.engine_histogram() == {"onednn": 1}
    session = ge.Session(executable)
    got = session.run({"x0": a, "x1": b})["op"]
    with np.errstate(all="ignore"):
        want = BINARY_REFERENCES[op_type](a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(session.run({"x0": a, "x1": b})["op"], want)


@pytest.mark.parametrize("first,second", [
    ((2, 128, 256), (256,)),                   # a row bias
    ((1, 12, 128, 64), (1, 1, 1, 64)),         # an attention mask
    ((1, 56, 56, 32), (1, 1, 1, 32)),          # a squeeze-excite scale, channels-last
])
def test_a_row_broadcast_over_earlier_axes_is_left_to_the_next_engine(first, second,
                                                                        monkeypatch):
    """oneDNN's kernel for it is slower than torch's and NumPy's: declined when the shapes
    are known, handed to the next engine's writer when only the run says them."""
    from ge.engines.onednn import conv

    a, b = _f32(*first), _f32(*second)
    assert declined("Mul", [a, b], {})
    assert not declined("Mul", [a, _f32(*first[:-1], 1)], {})  # a value per row: taken
    handed: list[str] = []
    original = conv._Fallback.__call__
    monkeypatch.setattr(conv._Fallback, "__call__",
                        lambda self, inputs, outs: (handed.append(self.node.name),
                                                    original(self, inputs, outs)))
    graph = ge.Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, *first[1:]]}, "x", graph)
    y = create_node("Data", [], {"shape": list(second)}, "y", graph)
    graph.set_outputs([create_node("Mul", [x, y], {}, "op", graph)])
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.engine_histogram() == {"onednn": 1}
    got = ge.Session(executable).run({"x": a, "y": b})["op"]
    np.testing.assert_array_equal(got, a * b)
    assert handed == ["op"]


@pytest.mark.parametrize("op_type", ["Add", "Sub"])
def test_binary_in_place_on_either_operand(op_type):
    """Where the output may overwrite a dying operand, the result is still the
    reference's: ``(x + 1) op (x * 2)`` with both inner results dying at the node."""
    graph = ge.Graph("in_place")
    x = create_node("Data", [], {"shape": [1, 64, 32, 32]}, "x", graph)
    one = create_node("Const", [], {"value": ge.Tensor(np.float32(1.0))}, "one", graph)
    two = create_node("Const", [], {"value": ge.Tensor(np.float32(2.0))}, "two", graph)
    left = create_node("Add", [x, one], {}, "left", graph)
    right = create_node("Mul", [x, two], {}, "right", graph)
    graph.set_outputs([create_node(op_type, [left, right], {}, "op", graph)])
    feed = _f32(1, 64, 32, 32)
    got = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])).run(
        {"x": feed})["op"]
    want = BINARY_REFERENCES[op_type](feed + np.float32(1), feed * np.float32(2))
    np.testing.assert_array_equal(got, want)


def test_binary_arithmetic_the_engine_declines():
    a = _f32(16, 64, 64)
    assert not declined("Add", [a, a], {})
    assert declined("Add", [a[:1, :2], a[:1, :2]], {})  # small
    assert declined("Add", [_f32(1, 128, 256), _f32(256)], {})  # NumPy's is quicker there
    assert declined("Add", [a.astype(np.float64), a.astype(np.float64)], {})


@pytest.mark.parametrize("op_type", ["Add", "Mul", "Sub", "Div"])
def test_a_binary_writer_given_its_second_operand_as_output(op_type):
    """The writer's output may be either operand's buffer (an in-place step)."""
    from ge.engines.onednn.binary import bind_binary

    a, b = _f32(1, 64, 32, 32), (np.abs(_f32(1, 64, 32, 32)) + 0.5).astype(np.float32)
    want = BINARY_REFERENCES[op_type](a, b)
    node = next(n for n in _graph(op_type, [a, b], {}).nodes if n.name == "op")
    writer = bind_binary(node).writer
    assert writer is not None
    first, second = a.copy(), b.copy()
    writer([first, second], [second])
    np.testing.assert_array_equal(second, want)
    first, second = a.copy(), b.copy()
    writer([first, second], [first])
    np.testing.assert_array_equal(first, want)


def test_a_broadcast_onednn_has_only_reference_code_for_runs_on_the_next_engine(
        monkeypatch):
    """[1, H, W, 1] into NHWC data (a mean over channels) is oneDNN's reference loop,
    a hundred times NumPy's time: the writer leaves it to the next engine."""
    from ge.engines.onednn import conv
    from ge.engines.onednn.binary import bind_binary

    handed: list[str] = []
    original = conv._Fallback.__call__

    def counting(self, inputs, outs):
        handed.append(self.node.name)
        original(self, inputs, outs)

    monkeypatch.setattr(conv._Fallback, "__call__", counting)
    for shape, expected in (((1, 40, 40, 1), ["op"]), ((1, 40, 1, 1), [])):
        handed.clear()
        a, b = _f32(1, 40, 40, 64), _f32(*shape)
        node = next(n for n in _graph("Sub", [a, b], {}).nodes if n.name == "op")
        writer = bind_binary(node).writer
        assert writer is not None
        out = np.empty_like(a)
        writer([a, b], [out])
        np.testing.assert_array_equal(out, a - b)
        assert handed == expected, shape


@pytest.mark.parametrize("bias", [False, True])
def test_a_transposed_convolution_that_tiles_its_output_is_one_matmul(bias):
    """Stride equal to the kernel and no padding: each input pixel writes its own
    kh x kw tile, a matrix product and one reorder (no deconvolution, no reorder in)."""
    from ge.engines.onednn import deconv

    x, weights = _f32(2, 24, 10, 12), _f32(24, 5, 2, 2)
    arrays = [x, weights, _f32(5) if bias else None]
    check_on_onednn("ConvTranspose", arrays, {"strides": [2, 2], "group": 1}, const=(1, 2))
    node = next(n for n in _graph("ConvTranspose", arrays, {"strides": [2, 2], "group": 1},
                                  const=(1, 2)).nodes if n.name == "op")
    bound = deconv.bind_conv_transpose(node)
    got = bound.kernel([x, weights, arrays[2]])[0]
    cache = next(c.cell_contents for c in bound.writer.__closure__
                 if isinstance(c.cell_contents, _lib.ShapeCache))
    (steps,) = cache.values()
    assert steps.into is None  # the product reads the NCHW input where it lies
    want = np.zeros((2, 5, 20, 24), np.float32)  # written here from the definition
    for i in range(2):
        for j in range(2):
            want[:, :, i::2, j::2] = np.einsum("nchw,cm->nmhw", x, weights[:, :, i, j])
    if bias:
        want += arrays[2].reshape(1, 5, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes,axis", [
    ([(1, 40, 40, 24)] * 4, 3),                       # a DBNet neck's channels, NHWC
    ([(1, 40, 40, 16), (1, 40, 40, 32)], -1),         # YOLO's C2f: unequal parts
    ([(4, 64, 8, 4), (4, 64, 8, 4), (4, 64, 4, 4)], 2),  # a middle axis, short runs
    ([(1, 128, 128, 64), (1, 128, 128, 32)], 3),      # a U-Net's skip: large, longer runs
])
def test_concatenation_along_short_runs(shapes, axis):
    arrays = [_f32(*shape) for shape in shapes]
    graph = ge.Graph("concat")
    values = [create_node("Data", [], {"shape": list(a.shape)}, f"x{i}", graph)
              for i, a in enumerate(arrays)]
    graph.set_outputs([create_node("Concat", values, {"axis": axis}, "op", graph)])
    executable = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert executable.engine_histogram() == {"onednn": 1}
    session = ge.Session(executable)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    want = np.concatenate(arrays, axis=axis)
    np.testing.assert_array_equal(session.run(feeds)["op"], want)
    np.testing.assert_array_equal(session.run(feeds)["op"], want)


def test_concatenations_the_engine_leaves_to_numpy():
    big = [_f32(1, 24, 80, 80)] * 2
    assert declined("Concat", big, {"axis": 1})  # NCHW channels: long runs, block copies
    assert declined("Concat", [_f32(1, 40, 40, 64)] * 2, {"axis": 3})  # 64-value runs
    assert declined("Concat", [_f32(1, 64, 64, 2048)] * 2, {"axis": 3})  # runs too long
    assert not declined("Concat", [_f32(1, 64, 64, 64)] * 2, {"axis": 3})  # a large output
    assert declined("Concat", [_f32(1, 4, 4, 8)] * 2, {"axis": 3})  # small
    assert not declined("Concat", [_f32(1, 80, 80, 24)] * 2, {"axis": 3})
