"""TransposeSinkingPass: transposes moved down through elementwise ops, Slice, Squeeze
and Unsqueeze to the transpose they cancel against; every rewrite checked against the
reference interpreter on the graph before it."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.ops import create_node, evaluate
from ge.passes.cleanup import NoOpEliminationPass
from ge.passes.transpose import FlattenedTransposeFoldingPass, TransposeSinkingPass
from ge.passes.verify import random_feeds
from tests.passes.test_layout import apply as apply_pass
from tests.tolerance import assert_close


def const(graph, name, array, dtype=np.int64):
    return create_node("Const", [], {"value": ge.Tensor(np.asarray(array, dtype))}, name, graph)


def op(graph, op_type, inputs, name, **attrs):
    return create_node(op_type, list(inputs), attrs, name, graph)


def apply(graph):
    """Sink the transposes, then cancel what meets; check the numbers; return the copy
    and the sinking pass's result."""
    feeds = random_feeds(graph, seed=2)
    expected = evaluate(graph, feeds)
    after = graph.clone()
    result = TransposeSinkingPass().run(after)
    NoOpEliminationPass().run(after)
    after.validate()
    got = evaluate(after, feeds)
    assert list(got) == list(expected)
    for name in expected:
        assert_close(got[name], expected[name], what=name)
    return after, result


def ops(graph):
    return [n.op_type for n in graph.topological_order() if n.op_type not in ("Data", "Const")]


def spectrum(graph, x, slice_axes=True):
    """An STFT's magnitude between two channels-last convolutions, as the layout pass
    leaves it: to_nchw, squeeze, real and imaginary halves, sqrt(re^2 + im^2),
    unsqueeze, to_nhwc."""
    nchw = op(graph, "Transpose", [x], "to_nchw", perm=[0, 3, 1, 2])
    flat = op(graph, "Squeeze", [nchw, const(graph, "sq", [2])], "squeeze")
    halves = []
    for k, (start, end) in enumerate(((0, 5), (5, 10))):
        if slice_axes:  # axis 1 of 3, counted from the end
            inputs = [flat, const(graph, f"s{k}", [start]), const(graph, f"e{k}", [end]),
                      const(graph, f"a{k}", [-2])]
        else:  # axes implied (the first ones): slice axis 0 whole, then axis 1
            inputs = [flat, const(graph, f"s{k}", [0, start]), const(graph, f"e{k}", [9, end])]
        halves.append(op(graph, "Slice", inputs, f"half{k}"))
    squares = [op(graph, "Mul", [h, h], f"square{k}") for k, h in enumerate(halves)]
    total = op(graph, "Add", squares, "sum")
    root = op(graph, "Sqrt", [total], "magnitude")
    shaped = op(graph, "Unsqueeze", [root, const(graph, "un", [2])], "unsqueeze")
    return op(graph, "Transpose", [shaped], "to_nhwc", perm=[0, 2, 3, 1])


@pytest.mark.parametrize("slice_axes", [True, False])
def test_a_magnitude_spectrum_between_two_regions_loses_both_transposes(slice_axes):
    graph = ge.Graph("spectrum")
    x = op(graph, "Data", [], "x", shape=[1, 1, 4, 10])
    graph.set_outputs([op(graph, "Relu", [spectrum(graph, x, slice_axes)], "out")])
    after, result = apply(graph)
    assert "Transpose" not in ops(after)
    assert result.counts["ops now on untransposed data"] == 8
    assert result.notes and "moved transposes past 8 ops in 1 regions" in result.notes[0]


def test_a_second_transpose_by_the_same_perm_joins_the_region():
    graph = ge.Graph("two")
    a = op(graph, "Data", [], "a", shape=[2, 3, 4])
    b = op(graph, "Data", [], "b", shape=[2, 3, 4])
    ta = op(graph, "Transpose", [a], "ta", perm=[0, 2, 1])
    tb = op(graph, "Transpose", [b], "tb", perm=[0, 2, 1])
    added = op(graph, "Add", [op(graph, "Tanh", [ta], "tanh"), tb], "add")
    scaled = op(graph, "Mul", [added, const(graph, "k", [2.0], np.float32)], "scaled")
    graph.set_outputs([op(graph, "Exp", [scaled], "out")])
    after, _ = apply(graph)
    assert ops(after).count("Transpose") == 1  # two in, one out


@pytest.mark.parametrize("case", ["no gain", "graph output inside", "axes at run time",
                                  "other ranks"])
def test_regions_that_would_not_lose_a_transpose_stay(case):
    graph = ge.Graph(case)
    x = op(graph, "Data", [], "x", shape=[2, 3, 4])
    t = op(graph, "Transpose", [x], "t", perm=[1, 0, 2])
    if case == "no gain":  # one transpose in, one out before the Exp
        graph.set_outputs([op(graph, "Exp", [op(graph, "Relu", [t], "relu")], "out")])
    elif case == "graph output inside":
        relu = op(graph, "Relu", [t], "relu")
        back = op(graph, "Transpose", [relu], "back", perm=[1, 0, 2])
        graph.set_outputs([back, relu])
    elif case == "axes at run time":
        axes = op(graph, "Data", [], "axes", shape=[1], dtype=ge.DataType.DT_INT64)
        sliced = op(graph, "Slice", [t, const(graph, "s", [0]), const(graph, "e", [1]), axes],
                    "slice")
        graph.set_outputs([op(graph, "Transpose", [sliced], "back", perm=[1, 0, 2])])
    else:  # an operand of rank 1 that is not a single element broadcasts by position
        bias = const(graph, "bias", np.arange(4), np.float32)
        added = op(graph, "Add", [t, bias], "add")
        graph.set_outputs([op(graph, "Transpose", [added], "back", perm=[1, 0, 2])])
    after, result = apply(graph)
    assert not result.changed
    assert ops(after).count("Transpose") >= 1


def test_level_3_runs_the_spectrum_between_convolutions_without_transposes():
    rng = np.random.default_rng(4)
    graph = ge.Graph("audio")
    x = op(graph, "Data", [], "x", shape=[1, 1, 1, 40])
    w1 = create_node("Const", [], {"value": ge.Tensor(
        rng.standard_normal((10, 1, 1, 8)).astype(np.float32))}, "w1", graph)
    frames = op(graph, "Conv2D", [x, w1], "stft", data_format="NCHW", strides=[1, 4],
                pads=[0, 0, 0, 0])
    nhwc = op(graph, "Transpose", [frames], "pre", perm=[0, 2, 3, 1])  # [1, 1, 9, 10]
    magnitude = spectrum(graph, nhwc)
    chw = op(graph, "Transpose", [magnitude], "post", perm=[0, 3, 1, 2])
    w2 = create_node("Const", [], {"value": ge.Tensor(
        rng.standard_normal((6, 5, 1, 3)).astype(np.float32))}, "w2", graph)
    graph.set_outputs([op(graph, "Conv2D", [chw, w2], "encoder", data_format="NCHW",
                          pads=[0, 1, 0, 1])])
    feed = {"x": rng.standard_normal((1, 1, 1, 40)).astype(np.float32)}
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feed)["encoder"]
    executable = ge.compile(graph)
    assert_close(ge.Session(executable).run(feed)["encoder"], want, accumulate=True)
    # the one transpose left gives the graph output its NCHW layout
    assert [step.node for step in executable.steps if step.op_type == "Transpose"] == \
        ["encoder/to_nchw"]
    record = next(r for r in executable.report["passes"] if r["pass"] == "TransposeSinkingPass")
    assert record["changed"]


# -- FlattenedTransposeFoldingPass -------------------------------------------------------

def classifier(product="Gemm", flatten="Reshape", perm=(0, 3, 1, 2), shape=(0, -1),
               computed_weight=False, **attrs):
    """x [2, 4, 3, 5] (NHWC) -> Relu -> Transpose(perm) -> flatten -> a product with a
    constant weight (Gemm: [10, K] with transB, else [K, 10]; a fed one when
    ``computed_weight``) -> out."""
    graph = ge.Graph("classifier")
    x = create_node("Data", [], {"shape": [2, 4, 3, 5]}, "x", graph)
    nchw = op(graph, "Transpose", [op(graph, "Relu", [x], "relu")], "to_nchw", perm=list(perm))
    if flatten == "Reshape":
        flat = op(graph, "Reshape", [nchw, const(graph, "shape", list(shape))], "flat")
    else:
        flat = op(graph, "Flatten", [nchw], "flat", axis=1)
    size = int(flat.outputs[0].shape[0 if attrs.get("transA") else 1])
    rng = np.random.default_rng(4)
    wide = attrs.get("transB") or attrs.get("transpose_b")
    dims = (10, size) if wide else (size, 10)
    if computed_weight:
        weight = create_node("Data", [], {"shape": list(dims)}, "w", graph)
    else:
        weight = const(graph, "w", rng.standard_normal(dims), np.float32)
    bias = const(graph, "b", rng.standard_normal(10), np.float32)
    inputs = [flat, weight] + ([bias] if product != "MatMul" else [])
    graph.set_outputs([op(graph, product, inputs, "out", **attrs)])
    return graph


def fold(graph):
    """Run the folding pass on a copy; check the numbers; return the copy and result."""
    return apply_pass(graph, FlattenedTransposeFoldingPass())


@pytest.mark.parametrize(("product", "flatten", "attrs"), [
    ("Gemm", "Reshape", {"transB": 1}),
    ("Gemm", "Flatten", {"transB": 0}),
    ("MatMul", "Reshape", {}),
    ("MatMulBiasAdd", "Flatten", {"transpose_b": True}),
])
def test_a_transpose_before_a_classifiers_flatten_folds_into_its_weight(product, flatten, attrs):
    after, result = fold(classifier(product, flatten, **attrs))
    assert ops(after) == ["Relu", flatten, product]
    assert result.notes == ["folded 1 transposes before a flatten into the next product's "
                            "constant weight"]


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"perm": (3, 1, 2, 0)}, "the transpose moves the batch axis"),
    ({"shape": (1, -1)}, "the reshape folds the batch into the features"),
    ({"computed_weight": True}, "the weight is computed at run time"),
    ({"transA": 1}, "the product reads its operand transposed"),
])
def test_what_does_not_fold_stays(kwargs, why):
    graph = classifier("Gemm", transB=1, **kwargs)
    after, result = fold(graph)
    assert "Transpose" in ops(after) and not result.changed, why


def test_a_transpose_read_twice_stays():
    graph = classifier("Gemm", transB=1)
    graph.set_outputs([*graph.outputs, graph.node("to_nchw").outputs[0]])
    after, result = fold(graph)
    assert "Transpose" in ops(after) and not result.changed


def test_compile_drops_the_seed_cnns_transpose_before_its_classifier():
    """The layout pass's to_nchw before the flatten is gone at level 3, and the result
    is the unoptimized graph's."""
    graph = ge.Graph("cnn")
    data = create_node("Data", [], {"shape": [2, 3, 8, 8]}, "x", graph)
    filt = create_node("Const", [], {"value": ge.Tensor(
        np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float32))}, "f", graph)
    conv = op(graph, "Conv2D", [data, filt], "conv", data_format="NCHW", pads=[1, 1, 1, 1])
    flat = op(graph, "Reshape", [op(graph, "Relu", [conv], "relu"), const(graph, "s", [0, -1])],
              "flat")
    weight = create_node("Const", [], {"value": ge.Tensor(
        np.random.default_rng(6).standard_normal((10, 256)).astype(np.float32))}, "w", graph)
    graph.set_outputs([op(graph, "Gemm", [flat, weight], "out", transB=1)])
    executable = ge.compile(graph)
    kinds = [n.op_type for n in executable.graph.nodes if n.op_type not in ("Data", "Const")]
    assert kinds.count("Transpose") == 1, kinds  # only the input's to_nhwc
    entries = [e for e in executable.report["passes"]
               if e["pass"] == "FlattenedTransposeFoldingPass"]
    assert entries and entries[0]["counts"] == {"transposes folded into weights": 1}
    feeds = random_feeds(graph, seed=7)
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)["out"]
    assert_close(ge.Session(executable).run(feeds)["out"], want, accumulate=True)
