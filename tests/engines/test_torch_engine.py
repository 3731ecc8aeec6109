"""The torch engine's convolutions, pooling and products against the NumPy engine (the
reference kernels), one node at a time over the attributes real models use; what it
declines; how its outputs sit in memory; and GE without PyTorch."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines import get_engine
from ge.engines.torch import _base, conv, linear
from ge.ops import create_node
from tests.tolerance import assert_close

RNG = np.random.default_rng(7)

#: the size policy (small products and transposes go to NumPy), as the engine has it
SMALL_PRODUCT_MACS = linear.SMALL_PRODUCT_MACS
SMALL_TRANSPOSE_ELEMENTS = linear.SMALL_TRANSPOSE_ELEMENTS


@pytest.fixture(autouse=True)
def torch_kernels_at_every_size(monkeypatch):
    """The kernels under test at the small sizes these tests use: the size policy that
    sends small products to NumPy is tested on its own, below."""
    monkeypatch.setattr(linear, "SMALL_PRODUCT_MACS", 0)
    monkeypatch.setattr(linear, "SMALL_TRANSPOSE_ELEMENTS", 0)


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
                                                   "dtype": array.dtype.name}, f"x{index}", graph))
    graph.set_outputs([create_node(op_type, values, attrs, "op", graph)])
    return graph


def _feeds(arrays: Sequence[Optional[np.ndarray]], const: Sequence[int]) -> dict[str, Any]:
    return {f"x{i}": a for i, a in enumerate(arrays) if a is not None and i not in const}


def check_on_torch(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
                   const: Sequence[int] = ()) -> None:
    """The node runs on the torch engine and agrees with the NumPy engine."""
    graph = _graph(op_type, arrays, attrs, const)
    executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
    assert executable.report["engines_by_op"].get("torch") == {op_type: 1}, \
        executable.report["engines_by_op"]
    feeds = _feeds(arrays, const)
    session = ge.Session(executable)
    got = session.run(feeds)["op"]
    again = session.run(feeds)["op"]  # the packed filter and the plan, reused
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)["op"]
    assert_close(got, want, accumulate=True, what=f"{op_type} {attrs}")
    np.testing.assert_array_equal(again, got)


def declined(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
             const: Sequence[int] = ()) -> bool:
    graph = _graph(op_type, arrays, attrs, const)
    node = next(n for n in graph.nodes if n.name == "op")
    return not get_engine("torch").supports(node)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CONV_CASES = [
    # (data_format, input shape (N, C, H, W), cout, kernel, strides, pads, dilations, groups,
    #  padding)
    ("NHWC", (2, 8, 9, 9), 16, 3, 1, [1, 1, 1, 1], 1, 1, "EXPLICIT"),
    ("NHWC", (1, 8, 10, 10), 16, 3, 2, [0, 1, 0, 1], 1, 1, "EXPLICIT"),  # asymmetric
    ("NHWC", (1, 8, 10, 10), 16, 3, 2, None, 1, 1, "SAME"),
    ("NHWC", (1, 8, 11, 11), 8, 3, 1, [2, 2, 2, 2], 2, 1, "EXPLICIT"),  # dilated
    ("NHWC", (1, 16, 12, 12), 16, 3, 1, [1, 1, 1, 1], 1, 16, "EXPLICIT"),  # depthwise
    ("NHWC", (1, 16, 14, 14), 16, 7, 1, [3, 3, 3, 3], 1, 16, "EXPLICIT"),  # large depthwise
    ("NHWC", (1, 16, 8, 8), 32, 3, 1, [1, 1, 1, 1], 1, 4, "EXPLICIT"),  # grouped
    ("NHWC", (3, 3, 16, 16), 8, 1, 1, [0, 0, 0, 0], 1, 1, "VALID"),
    ("NCHW", (2, 8, 9, 9), 16, 3, 2, [1, 1, 1, 1], 1, 1, "EXPLICIT"),
    ("NCHW", (1, 6, 7, 7), 6, 3, 1, [1, 1, 1, 1], 1, 6, "EXPLICIT"),
]


def _conv_arrays(layout: str, shape: tuple[int, ...], cout: int, kernel: int, groups: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, c, h, w = shape
    x = _f32(n, h, w, c) if layout == "NHWC" else _f32(n, c, h, w)
    filt = _f32(kernel, kernel, c // groups, cout) if layout == "NHWC" \
        else _f32(cout, c // groups, kernel, kernel)
    return x, filt * 0.3, _f32(cout)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-{c[1]}-g{c[7]}-{c[8]}")
def test_conv2d(case):
    layout, shape, cout, kernel, stride, pads, dilation, groups, padding = case
    x, filt, bias = _conv_arrays(layout, shape, cout, kernel, groups)
    attrs = {"data_format": layout, "strides": [stride, stride], "dilations": [dilation] * 2,
             "groups": groups, "padding": padding}
    if pads is not None:
        attrs["pads"] = pads
    check_on_torch("Conv2D", [x, filt, bias], attrs, const=(1, 2))
    check_on_torch("Conv2D", [x, filt], attrs, const=(1,))


ACTIVATIONS = [("", {}), ("Relu", {}), ("Relu6", {}), ("Clip", {"clip_min": -0.5, "clip_max": 0.7}),
               ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}), ("HardSwish", {}),
               ("Swish", {})]


@pytest.mark.parametrize("kernel", [3, 1])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a[0] or "none")
def test_fused_conv2d_activations_and_residual(activation, residual, kernel):
    """1x1 filters over few pixels take the matrix-product path: the same post-ops."""
    name, extra = activation
    x, filt, bias = _conv_arrays("NHWC", (1, 8, 6, 6), 8, kernel, 1)
    attrs = {"data_format": "NHWC", "strides": [1, 1], "pads": [kernel // 2] * 4, "groups": 1,
             "activation": name, **extra}
    arrays = [x, filt, bias, _f32(1, 6, 6, 8) if residual else None]
    check_on_torch("FusedConv2D", arrays, attrs, const=(1, 2))


@pytest.mark.parametrize("residual", [False, True])
def test_a_pointwise_convolution_agrees_on_both_sides_of_the_product_threshold(monkeypatch,
                                                                              residual):
    x, filt, bias = _conv_arrays("NHWC", (2, 16, 5, 5), 24, 1, 1)
    attrs = {"data_format": "NHWC", "strides": [1, 1], "padding": "VALID", "groups": 1,
             "activation": "Relu6"}
    arrays = [x, filt, bias, _f32(2, 5, 5, 24) if residual else None]
    graph = _graph("FusedConv2D", arrays, attrs, const=(1, 2))
    feeds = _feeds(arrays, (1, 2))
    outputs = []
    for rows in (0, conv.SMALL_POINTWISE_ROWS):
        monkeypatch.setattr(conv, "SMALL_POINTWISE_ROWS", rows)
        executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
        outputs.append(ge.Session(executable).run(feeds)["op"])
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)["op"]
    for got in outputs:
        assert_close(got, want, accumulate=True, what="pointwise convolution")


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
    fast = ge.Session(ge.compile(graph, engines=["torch", "numpy"]))
    slow = ge.Session(ge.compile(graph, engines=["numpy"]))
    for shape in [(1, 8, 8, 4), (2, 9, 7, 4), (1, 8, 8, 4), (3, 5, 5, 4)]:
        feed = {"x0": _f32(*shape)}
        assert_close(fast.run(feed)["op"], slow.run(feed)["op"], accumulate=True, what=shape)


POOL_CASES = [
    ("MaxPool", [3, 3], [2, 2], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("MaxPool", [2, 2], [2, 2], None, "VALID", False, {}),
    ("MaxPool", [3, 3], [2, 2], [0, 0, 0, 0], "EXPLICIT", True, {}),  # ceil mode
    ("MaxPool", [3, 3], [2, 2], None, "SAME", False, {}),
    ("MaxPool", [5, 5], [1, 1], [2, 2, 2, 2], "EXPLICIT", False, {}),
    ("MaxPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {"dilations": [2, 2]}),
    ("AvgPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("AvgPool", [3, 3], [1, 1], [1, 1, 1, 1], "EXPLICIT", False, {"count_include_pad": True}),
    ("AvgPool", [2, 2], [2, 2], None, "VALID", False, {}),
    # windows reaching past both ends, and ceil mode past the padding
    ("MaxPool", [4, 4], [3, 3], [2, 1, 2, 1], "EXPLICIT", True, {}),
    ("MaxPool", [2, 2], [2, 2], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("AvgPool", [2, 2], [2, 2], [1, 1, 1, 1], "EXPLICIT", False, {}),
    ("AvgPool", [4, 4], [1, 1], [2, 2, 2, 2], "EXPLICIT", False, {"count_include_pad": True}),
]


@pytest.mark.parametrize("path", ["chosen", "separable", "torch-kernel"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-{c[1][0]}-{c[4]}-{c[5]}")
def test_pooling(case, layout, path, monkeypatch):
    """Each pool on the path the engine picks for its size, and forced onto each of its
    two implementations (separable passes, torch's pooling kernel)."""
    if path != "chosen":
        monkeypatch.setattr(conv, "_separable_pool", lambda *args: path == "separable")
    op_type, ksize, strides, pads, padding, ceil_mode, extra = case
    x = _f32(2, 9, 9, 5) if layout == "NHWC" else _f32(2, 5, 9, 9)
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "ceil_mode": ceil_mode,
             "data_format": layout, **extra}
    if pads is not None:
        attrs["pads"] = pads
    check_on_torch(op_type, [x], attrs)


def test_pooling_the_engine_declines():
    x = _f32(1, 9, 9, 3)
    assert declined("AvgPool", [x], {"ksize": [3, 3], "strides": [2, 2], "padding": "SAME",
                                     "data_format": "NHWC"})  # asymmetric: divisor differs
    assert declined("AvgPool", [x], {"ksize": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "ceil_mode": True, "data_format": "NHWC"})


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_global_average_pool(layout):
    check_on_torch("GlobalAveragePool", [_f32(2, 7, 7, 16)], {"data_format": layout})


CONV_TRANSPOSE_CASES = [
    ({"strides": [2, 2]}, 1),
    ({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 1),
    ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, 1),
    ({"strides": [3, 2], "output_shape": [20, 15]}, 1),
    ({"strides": [1, 1], "dilations": [2, 2], "pads": [0, 1, 2, 0]}, 1),
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, 4),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV_TRANSPOSE_CASES, ids=str)
def test_conv_transpose(case, bias):
    attrs, group = case
    x, weights = _f32(2, 8, 6, 7), _f32(8, 12 // group, 3, 3)
    arrays = [x, weights, _f32(12) if bias else None]
    check_on_torch("ConvTranspose", arrays, {**attrs, "group": group}, const=(1, 2))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("kernel, attrs", [
    ((2, 2), {"strides": [2, 2]}),  # windows that tile the output: one product
    ((3, 2), {"strides": [3, 2]}),
    ((2, 2), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),  # cropped: the general path
    ((2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),
], ids=str)
def test_conv_transpose_whose_windows_tile_the_output(kernel, attrs, bias):
    x, weights = _f32(2, 6, 5, 7), _f32(6, 4, *kernel)
    check_on_torch("ConvTranspose", [x, weights, _f32(4) if bias else None],
                   {**attrs, "group": 1}, const=(1, 2))


MATMUL_CASES = [((4, 8), (8, 5)), ((2, 3, 4, 8), (8, 6)), ((3, 4, 8), (3, 8, 6)),
                ((2, 1, 4, 8), (3, 8, 2)), ((1, 8), (8, 1))]


@pytest.mark.parametrize("const_b", [False, True])
@pytest.mark.parametrize("shapes", MATMUL_CASES, ids=str)
def test_matmul(shapes, const_b):
    a_shape, b_shape = shapes
    check_on_torch("MatMul", [_f32(*a_shape), _f32(*b_shape)], {},
                   const=(1,) if const_b else ())


def test_a_vector_operand_stays_on_numpy():
    assert declined("MatMul", [_f32(8), _f32(8, 3)], {})
    assert declined("MatMul", [_f32(4, 8), _f32(8)], {}, const=(1,))


@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(True, False), (False, True),
                                                          (True, True)])
def test_matmul_transposes(transpose_a, transpose_b):
    a = _f32(2, 8, 4) if transpose_a else _f32(2, 4, 8)
    b = _f32(5, 8) if transpose_b else _f32(8, 5)
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    check_on_torch("MatMul", [a, b], attrs, const=(1,))
    check_on_torch("MatMul", [a, b], attrs)


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("a_shape", [(6, 16), (2, 5, 16)], ids=str)
def test_matmul_bias_add(a_shape, activation):
    check_on_torch("MatMulBiasAdd", [_f32(*a_shape), _f32(16, 12), _f32(12)],
                   {"activation": activation}, const=(1, 2))
    check_on_torch("MatMulBiasAdd", [_f32(*a_shape), _f32(12, 16), _f32(12)],
                   {"activation": activation, "transpose_b": True}, const=(1,))
    residual = _f32(*a_shape[:-1], 12)
    check_on_torch("MatMulBiasAdd", [_f32(*a_shape), _f32(16, 12), _f32(12), residual],
                   {"activation": activation}, const=(1, 2))


@pytest.mark.parametrize("c_shape", [None, (5,), (1, 5), (4, 5), (4, 1)], ids=str)
@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm(c_shape, trans_a, trans_b):
    a = _f32(6, 4) if trans_a else _f32(4, 6)
    b = _f32(5, 6) if trans_b else _f32(6, 5)
    c = None if c_shape is None else _f32(*c_shape)
    attrs = {"alpha": 0.5, "beta": 2.0, "transA": trans_a, "transB": trans_b}
    check_on_torch("Gemm", [a, b, c], attrs, const=(1, 2))
    check_on_torch("Gemm", [a, b, c], {**attrs, "alpha": 1.0, "beta": 0.0})


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2], [1, 0], [2, 0, 1]], ids=str)
def test_transpose(perm):
    shape = {2: (5, 7), 3: (3, 4, 5), 4: (2, 3, 4, 5)}[len(perm)]
    check_on_torch("Transpose", [_f32(*shape)], {"perm": perm})


def test_products_write_into_the_arena_and_convolutions_sit_outside_it():
    graph = ge.Graph("mixed")
    x = create_node("Data", [], {"shape": [1, 8, 8, 4]}, "x", graph)
    filt = create_node("Const", [], {"value": ge.Tensor(_f32(3, 3, 4, 6))}, "w", graph)
    conv = create_node("Conv2D", [x, filt], {"data_format": "NHWC", "padding": "SAME"}, "conv",
                       graph)
    flat = create_node("Reshape", [conv, create_node(
        "Const", [], {"value": ge.Tensor(np.array([1, -1], np.int64))}, "shape", graph)],
        {}, "flat", graph)
    weight = create_node("Const", [], {"value": ge.Tensor(_f32(384, 10))}, "fc", graph)
    product = create_node("MatMul", [flat, weight], {}, "product", graph)
    graph.set_outputs([create_node("Transpose", [product], {"perm": [1, 0]}, "out", graph)])
    executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
    feed = {"x": _f32(1, 8, 8, 4)}
    got = ge.Session(executable).run(feed)["out"]
    memory = executable.memory
    assert memory["outside_arena"] == {"Conv2D": 1}  # oneDNN allocates its output
    assert memory["written_in_slot"] == 2  # the product and the transpose: into the arena
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feed)["out"]
    assert_close(got, want, accumulate=True)


def test_without_pytorch_the_other_engines_run_and_the_report_says_why(monkeypatch):
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    graph = _graph("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                   const=(1, 2))
    monkeypatch.setattr(_base, "_AVAILABLE", False)
    executable = ge.compile(graph)
    assert "torch" not in executable.report["engines"]
    assert "PyTorch is not installed" in executable.report["engines_unavailable"]["torch"]
    assert "engine torch: unavailable, PyTorch is not installed" in executable.report_text()
    got = ge.Session(executable).run(_feeds([x], ()))["op"]
    monkeypatch.setattr(_base, "_AVAILABLE", True)
    want = ge.Session(ge.compile(graph, engines=["torch", "numpy"])).run(_feeds([x], ()))["op"]
    assert_close(got, want, accumulate=True)


def test_importing_ge_and_compiling_does_not_import_pytorch():
    script = ("import sys, numpy as np, ge\n"
              "from ge.ops import create_node\n"
              "g = ge.Graph('g')\n"
              "x = create_node('Data', [], {'shape': [64, 64]}, 'x', g)\n"
              "w = create_node('Const', [], {'value': ge.Tensor(np.ones((64, 64), np.float32))},"
              " 'w', g)\n"
              "g.set_outputs([create_node('MatMul', [x, w], {}, 'y', g)])\n"
              "e = ge.compile(g, engines=['torch', 'numpy'])\n"
              "print('torch' in sys.modules, e.report['engines'])\n"
              "ge.Session(e)\n"
              "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "False {'torch': 1}"  # the engine is chosen without importing it
    assert out[1] == "True"  # binding the kernels imports it


def test_a_saved_model_loads_without_pytorch_and_runs_its_steps_on_numpy(monkeypatch,
                                                                          tmp_path):
    x, filt, bias = _conv_arrays("NHWC", (1, 4, 6, 6), 4, 3, 1)
    graph = _graph("Conv2D", [x, filt, bias], {"data_format": "NHWC", "padding": "SAME"},
                   const=(1, 2))
    executable = ge.compile(graph, engines=["torch", "numpy"])
    assert executable.engine_histogram() == {"torch": 1}
    path = tmp_path / "conv.gem"
    ge.save(executable, str(path))
    feed = _feeds([x], ())
    want = ge.Session(executable).run(feed)["op"]
    monkeypatch.setattr(_base, "_AVAILABLE", False)
    loaded = ge.load(str(path))
    assert loaded.engine_histogram() == {"numpy": 1}
    assert "its steps run on numpy" in loaded.report["engines_unavailable"]["torch"]
    assert_close(ge.Session(loaded).run(feed)["op"], want, accumulate=True)


def _product_graph(rows: Any, transpose_b: bool = False) -> ge.Graph:
    graph = ge.Graph("product")
    x = create_node("Data", [], {"shape": [rows, 256]}, "x", graph)
    weight = _f32(10, 256) if transpose_b else _f32(256, 10)
    w = create_node("Const", [], {"value": ge.Tensor(weight)}, "w", graph)
    b = create_node("Const", [], {"value": ge.Tensor(_f32(10))}, "b", graph)
    graph.set_outputs([create_node("MatMulBiasAdd", [x, w, b], {"transpose_b": transpose_b},
                                   "op", graph)])
    return graph


@pytest.mark.parametrize("transpose_b", [False, True])
def test_small_products_go_to_numpy_and_large_ones_stay(monkeypatch, transpose_b):
    monkeypatch.setattr(linear, "SMALL_PRODUCT_MACS", SMALL_PRODUCT_MACS)
    small = ge.compile(_product_graph(4, transpose_b), engines=["torch", "numpy"])
    assert small.report["engines_by_op"] == {"numpy": {"MatMulBiasAdd": 1}}  # decided, shown
    rows = SMALL_PRODUCT_MACS // (256 * 10) + 1
    large = ge.compile(_product_graph(rows, transpose_b), engines=["torch", "numpy"])
    assert large.report["engines_by_op"] == {"torch": {"MatMulBiasAdd": 1}}
    # a batch known only at run time: the torch kernel sends small products to NumPy
    graph = _product_graph(-1, transpose_b)
    dynamic = ge.compile(graph, engines=["torch", "numpy"])
    assert dynamic.report["engines_by_op"] == {"torch": {"MatMulBiasAdd": 1}}
    reference = ge.Session(ge.compile(graph, engines=["numpy"]))
    session = ge.Session(dynamic)
    for batch in (1, 3, rows):
        feed = {"x": _f32(batch, 256)}
        assert_close(session.run(feed)["op"], reference.run(feed)["op"], accumulate=True)


def test_small_transposes_go_to_numpy(monkeypatch):
    monkeypatch.setattr(linear, "SMALL_TRANSPOSE_ELEMENTS", SMALL_TRANSPOSE_ELEMENTS)
    assert declined("Transpose", [_f32(3, 4, 5)], {"perm": [2, 0, 1]})
    assert not declined("Transpose", [_f32(64, 16, 32)], {"perm": [2, 0, 1]})
    graph = ge.Graph("t")
    x = create_node("Data", [], {"shape": [-1, 4, 5]}, "x", graph)
    graph.set_outputs([create_node("Transpose", [x], {"perm": [2, 0, 1]}, "op", graph)])
    session = ge.Session(ge.compile(graph, engines=["torch", "numpy"]))
    for batch in (2, 1000):  # small on NumPy inside the kernel, large on torch
        data = _f32(batch, 4, 5)
        np.testing.assert_array_equal(session.run({"x": data})["op"], data.transpose(2, 0, 1))


@pytest.mark.parametrize(("trans_a", "trans_b", "c_shape"),
                         [(0, 0, (7,)), (1, 1, (1, 7)), (0, 1, None), (1, 0, (5, 7))])
def test_small_gemms_on_numpy_inside_the_kernel_equal_the_reference(monkeypatch, trans_a,
                                                                    trans_b, c_shape):
    monkeypatch.setattr(linear, "SMALL_PRODUCT_MACS", SMALL_PRODUCT_MACS)
    graph = ge.Graph("gemm")
    a_shape = [-1, 5] if trans_a else [5, -1]  # the reduced length known only at run time
    x = create_node("Data", [], {"shape": a_shape}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(_f32(7, 9) if trans_b else _f32(9, 7))},
                    "w", graph)
    inputs = [x, w]
    if c_shape is not None:
        inputs.append(create_node("Const", [], {"value": ge.Tensor(_f32(*c_shape))}, "c",
                                  graph))
    graph.set_outputs([create_node("Gemm", inputs, {"transA": trans_a, "transB": trans_b,
                                                    "alpha": 0.5, "beta": 2.0}, "op", graph)])
    executable = ge.compile(graph, engines=["torch", "numpy"])
    assert executable.report["engines_by_op"] == {"torch": {"Gemm": 1}}
    feed = {"x": _f32(9, 5) if trans_a else _f32(5, 9)}
    want = ge.Session(ge.compile(graph, engines=["numpy"])).run(feed)["op"]
    assert_close(ge.Session(executable).run(feed)["op"], want, accumulate=True)


@pytest.mark.parametrize("equation, shapes", [
    ("bhqk,bhkd->bhqd", [(1, 3, 5, 7), (1, 3, 7, 4)]),  # attention's weighted sum
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),  # scores against keys
    ("bij,jk->bik", [(2, 5, 6), (6, 3)]),
    ("ij,jk", [(4, 5), (5, 3)]),  # implicit output: the labels used once, sorted
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("ii->i", [(5, 5)]),  # a diagonal
    ("bn,bn->b", [(4, 6), (4, 6)]),
])
@pytest.mark.parametrize("const_second", [False, True])
def test_einsum(equation, shapes, const_second):
    arrays = [_f32(*shape) for shape in shapes]
    const = (1,) if const_second and len(arrays) > 1 else ()
    check_on_torch("Einsum", arrays, {"equation": equation}, const=const)
