"""Models from the wild: what their declared shapes, control flow and old opsets mean.

* ``dim_param`` names are not constraints: onnxruntime runs a model whose inputs share
  a name (or say ``?``) with different sizes, so GE does too; concrete sizes are checked.
* ``If`` branches, ``Loop`` bodies and ``Scan`` bodies may give shapes that differ;
  the op's output merges them (unknown where they disagree).
* Opsets before 7 meant other things by ``PRelu``'s slope, ``broadcast``/``axis``,
  ``Cast``'s type names and ``Pad``'s ``paddings``; opsets 7 and 8 had
  ``BatchNormalization(spatial=0)``. GE keeps the old meaning.

onnxruntime is the reference; where it no longer runs an old model, the reference is
onnxruntime running the same computation written in a current opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.errors import InputError
from tests.tolerance import assert_close

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def tensor(name, element_type, shape):
    return helper.make_tensor_value_info(name, element_type, shape)


def model(nodes, inputs, outputs, opset=13, initializers=(), ir_version=None):
    tensors = [numpy_helper.from_array(array, name) for name, array in initializers]
    graph = helper.make_graph(nodes, "wild", inputs, outputs, tensors)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        proto.ir_version = ir_version
    return proto


def onnxruntime_run(proto, feeds):
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ge_run(proto, feeds):
    return list(ge.Session(ge.compile(ge.parse_onnx(proto))).run(feeds).values())


def assert_agree(proto, feeds, reference=None):
    expected = onnxruntime_run(reference or proto, feeds)
    got = ge_run(proto, feeds)
    assert len(got) == len(expected)
    for index, (ours, theirs) in enumerate(zip(got, expected)):
        assert ours.dtype == theirs.dtype
        assert_close(ours, theirs, accumulate=True, what=f"output {index}")


def random(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- (a) dim_param names are not constraints ------------------------------------------------

def shared_name_model(name):
    """Inputs x [name, 4] and y [name, 1] (the same dim_param); y is expanded to x's shape,
    and both are concatenated along their first axis."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Expand", ["y", "shape"], ["expanded"]),
             helper.make_node("Concat", ["x", "expanded"], ["both"], axis=0),
             helper.make_node("Concat", ["x", "y4"], ["stacked"], axis=0)]
    inputs = [tensor("x", FLOAT, [name, 4]), tensor("y", FLOAT, [name, 1]),
              tensor("y4", FLOAT, [name, 4])]
    return model(nodes, inputs, [tensor("both", FLOAT, [name, 4]),
                                 tensor("stacked", FLOAT, [name, 4])])


@pytest.mark.parametrize("name", ["N", "batch", "?"])
def test_inputs_sharing_a_dim_param_take_different_sizes(name):
    proto = shared_name_model(name)
    for rows_x, rows_y, rows_y4 in [(3, 1, 2), (2, 2, 5)]:
        feeds = {"x": random(rows_x, 4, seed=1), "y": random(rows_y, 1, seed=2),
                 "y4": random(rows_y4, 4, seed=3)}
        assert_agree(proto, feeds)


def test_an_empty_dim_param_and_a_name_repeated_within_one_input():
    nodes = [helper.make_node("ReduceSum", ["square"], ["total"], keepdims=0),
             helper.make_node("Concat", ["a", "b"], ["joined"], axis=1)]
    blank = onnx.TensorShapeProto.Dimension(dim_param="")
    a = tensor("a", FLOAT, ["n", 2])
    b = tensor("b", FLOAT, ["n", 2])
    b.type.tensor_type.shape.dim[0].CopyFrom(blank)
    proto = model(nodes, [tensor("square", FLOAT, ["n", "n"]), a, b],
                  [tensor("total", FLOAT, []), tensor("joined", FLOAT, ["n", 4])])
    assert_agree(proto, {"square": random(2, 3), "a": random(2, 2), "b": random(2, 2)})
    with pytest.raises(ge.errors.GEError):  # the Concat itself needs equal rows
        ge_run(proto, {"square": random(2, 3), "a": random(2, 2), "b": random(3, 2)})


def test_concrete_dimensions_are_still_checked():
    proto = shared_name_model("N")
    feeds = {"x": random(3, 5), "y": random(1, 1), "y4": random(2, 4)}
    with pytest.raises(InputError, match="'x'.*dimension 1 must be 4"):
        ge_run(proto, feeds)


def test_shared_names_are_kept_and_a_feed_breaking_them_gets_its_own_plan():
    proto = shared_name_model("N")
    graph = ge.parse_onnx(proto)
    assert [value.shape[0] for value in graph.inputs] == ["N", "N", "N"]
    assert ge.parse_onnx(shared_name_model("?")).inputs[0].shape == (-1, 4)
    session = ge.Session(ge.compile(graph))
    agreeing = {"x": random(3, 4), "y": random(3, 1), "y4": random(3, 4)}
    session.run(agreeing)
    assert session.specialized == []  # feeds that keep the names run the main plan
    for rows in [(3, 1, 2), (3, 1, 2), (4, 1, 2)]:
        feeds = {"x": random(rows[0], 4), "y": random(rows[1], 1), "y4": random(rows[2], 4)}
        got = session.run(feeds)
        for (name, ours), theirs in zip(got.items(), onnxruntime_run(proto, feeds)):
            assert_close(ours, theirs, what=name)
    assert session.specialized == [frozenset({"N"})]  # one plan, reused


def test_a_graph_built_with_ge_keeps_its_names_as_a_promise():
    graph = ge.Graph("promise")
    x = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", "x")
                     .set_attr("shape", ["N", 4]).build())
    y = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", "y")
                     .set_attr("shape", ["N", 4]).build())
    graph.set_outputs([graph.add_op(ge.OperatorFactory.create_op("Add").set_input("x", x)
                                    .set_input("y", y).set_attr("name", "sum").build())])
    with pytest.raises(InputError, match="another input bound 'N' to 2"):
        ge.Session(ge.compile(graph)).run({"x": random(2, 4), "y": random(3, 4)})


# -- (b) control flow whose shapes differ ------------------------------------------------------

def constant(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))


def test_if_branches_with_different_symbolic_shapes():
    then_branch = helper.make_graph(
        [constant("start", np.array([0], np.int64)), constant("stop", np.array([2], np.int64)),
         helper.make_node("Slice", ["x", "start", "stop"], ["head"])],
        "then", [], [tensor("head", FLOAT, None)])  # declared with no shape at all
    else_branch = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["twice"], axis=0)],
        "else", [], [tensor("twice", FLOAT, ["M", 3])])
    nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0)]
    proto = model(nodes, [tensor("x", FLOAT, ["N", 3]), tensor("flag", BOOL, [])],
                  [tensor("y", FLOAT, ["N", 3]), tensor("total", FLOAT, [])])
    for flag, rows in [(True, 4), (False, 4), (False, 1)]:
        assert_agree(proto, {"x": random(rows, 3), "flag": np.array(flag)})
    assert ge.parse_onnx(proto).outputs[0].shape == (-1, 3)


def test_an_if_whose_output_rank_is_the_graphs_output_rank_is_refused_naming_the_node():
    # the graph's own output would have no single rank: GE's outputs have one, so GE says
    # clearly that it does not run this model (onnxruntime does)
    then_branch = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["summed"],
                                                      keepdims=0)],
                                    "then", [], [tensor("summed", FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])],
                                    "else", [], [tensor("same", FLOAT, None)])
    nodes = [helper.make_node("If", ["flag"], ["y"], name="choose", then_branch=then_branch,
                              else_branch=else_branch)]
    proto = model(nodes, [tensor("x", FLOAT, ["N", 3]), tensor("flag", BOOL, [])],
                  [tensor("y", FLOAT, None)])
    onnxruntime_run(proto, {"x": random(2, 3), "flag": np.array(True)})
    with pytest.raises(ge.errors.ShapeError, match="'choose'.*outputs to agree in rank"):
        ge.parse_onnx(proto)


def rank_changing_if(name, flag, source, outputs):
    """If(flag) {ReduceSum(source) (rank 0)} else {Identity(source) (rank 2)} -> outputs."""
    then_branch = helper.make_graph([helper.make_node("ReduceSum", [source], [f"{name}_s"],
                                                      keepdims=0)],
                                    f"{name}_then", [], [tensor(f"{name}_s", FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", [source], [f"{name}_i"])],
                                    f"{name}_else", [], [tensor(f"{name}_i", FLOAT, None)])
    return helper.make_node("If", [flag], outputs, name=name, then_branch=then_branch,
                            else_branch=else_branch)


def test_an_if_whose_branches_differ_in_rank_carries_the_rest_of_the_graph_with_it():
    # the If's output has rank 0 or 2; what follows (Mul, ReduceMax to a scalar) is typed
    # once per branch by moving it into the branches
    nodes = [rank_changing_if("choose", "flag", "x", ["y"]),
             helper.make_node("Mul", ["y", "x"], ["scaled"]),
             helper.make_node("ReduceMax", ["scaled"], ["top"], keepdims=0),
             rank_changing_if("again", "flag2", "scaled", ["z"]),
             helper.make_node("Add", ["z", "top"], ["sum"]),
             helper.make_node("ReduceSum", ["sum"], ["out"], keepdims=0)]
    proto = model(nodes, [tensor("x", FLOAT, ["N", 3]), tensor("flag", BOOL, []),
                          tensor("flag2", BOOL, [])],
                  [tensor("top", FLOAT, []), tensor("out", FLOAT, [])])
    graph = ge.parse_onnx(proto)
    assert [node.op_type for node in graph.nodes if node.op_type == "If"] == ["If"]
    for flag in (True, False):
        for flag2 in (True, False):
            for rows in (2, 5):
                feeds = {"x": random(rows, 3, seed=rows), "flag": np.array(flag),
                         "flag2": np.array(flag2)}
                assert_agree(proto, feeds)


def test_torchscript_if_returning_different_ranks_runs_as_onnxruntime_runs_it():
    import io
    import warnings

    import torch

    class RankByRows(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.shape[0] > 3:
                y = x.sum(0)
            else:
                y = x * 2
            return y.sum() + y.mean()

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(RankByRows()), (torch.randn(5, 3),), buffer,
                          dynamo=False, input_names=["x"], output_names=["out"],
                          dynamic_axes={"x": {0: "rows"}}, opset_version=17)
    proto = onnx.load_from_string(buffer.getvalue())
    assert any(node.op_type == "If" for node in proto.graph.node)
    for rows in (2, 5):
        assert_agree(proto, {"x": random(rows, 3, seed=rows)})


def test_loop_carried_value_that_grows_every_iteration():
    body = helper.make_graph(
        [helper.make_node("Concat", ["rows", "extra"], ["rows_out"], axis=0),
         helper.make_node("Identity", ["keep_going"], ["keep_going_out"]),
         helper.make_node("ReduceSum", ["rows_out"], ["partial"], axes=[0], keepdims=0)],
        "body", [tensor("i", INT64, []), tensor("keep_going", BOOL, []),
                 tensor("rows", FLOAT, None)],
        [tensor("keep_going_out", BOOL, []), tensor("rows_out", FLOAT, None),
         tensor("partial", FLOAT, None)])
    nodes = [constant("extra", np.ones((1, 3), np.float32)),
             helper.make_node("Loop", ["trips", "", "x"], ["grown", "partials"], body=body)]
    proto = model(nodes, [tensor("x", FLOAT, ["N", 3]), tensor("trips", INT64, [])],
                  [tensor("grown", FLOAT, None), tensor("partials", FLOAT, None)], opset=11)
    for rows, trips in [(2, 3), (5, 1)]:
        assert_agree(proto, {"x": random(rows, 3), "trips": np.array(trips, np.int64)})
    assert ge.parse_onnx(proto).outputs[0].shape == (-1, 3)


def test_scan_state_declared_with_other_names_than_it_gets():
    body = helper.make_graph(
        [helper.make_node("Add", ["state", "element"], ["state_out"]),
         helper.make_node("Mul", ["state_out", "element"], ["scanned"])],
        "body", [tensor("state", FLOAT, ["S"]), tensor("element", FLOAT, ["E"])],
        [tensor("state_out", FLOAT, ["T"]), tensor("scanned", FLOAT, [None])])
    nodes = [helper.make_node("Scan", ["initial", "sequence"], ["final", "all"], body=body,
                              num_scan_inputs=1)]
    proto = model(nodes, [tensor("initial", FLOAT, ["width"]),
                          tensor("sequence", FLOAT, ["length", "width"])],
                  [tensor("final", FLOAT, None), tensor("all", FLOAT, None)], opset=11)
    for length, width in [(3, 4), (6, 2)]:
        assert_agree(proto, {"initial": random(width, seed=1),
                             "sequence": random(length, width, seed=2)})


def test_scan_state_that_grows_every_iteration():
    """onnxruntime refuses a Scan state whose shape changes (it preallocates the state);
    ONNX's Scan does not forbid it, and GE runs it: the reference is the loop in NumPy."""
    body = helper.make_graph(
        [constant("axis", np.array([0], np.int64)),
         helper.make_node("Unsqueeze", ["element", "axis"], ["row"]),
         helper.make_node("Concat", ["state", "row"], ["state_out"], axis=0),
         helper.make_node("ReduceSum", ["state_out"], ["total"], keepdims=0)],
        "body", [tensor("state", FLOAT, [None, 3]), tensor("element", FLOAT, [3])],
        [tensor("state_out", FLOAT, [None, 3]), tensor("total", FLOAT, [])])
    nodes = [helper.make_node("Scan", ["initial", "sequence"], ["final", "totals"], body=body,
                              num_scan_inputs=1)]
    proto = model(nodes, [tensor("initial", FLOAT, ["K", 3]),
                          tensor("sequence", FLOAT, ["length", 3])],
                  [tensor("final", FLOAT, None), tensor("totals", FLOAT, None)], opset=11)
    assert ge.parse_onnx(proto).outputs[0].shape == (-1, 3)
    for rows, length in [(1, 4), (3, 2)]:
        initial, sequence = random(rows, 3, seed=1), random(length, 3, seed=2)
        final, totals = ge_run(proto, {"initial": initial, "sequence": sequence})
        grown = np.concatenate([initial, sequence])
        assert_close(final, grown)
        assert_close(totals, [grown[:rows + step + 1].sum() for step in range(length)],
                     accumulate=True)


# -- (d) old opsets ------------------------------------------------------------------------------

X4 = random(2, 3, 4, 5, seed=7)
PER_CHANNEL = np.array([0.1, -0.2, 0.3], np.float32)


def _one_node(op_type, opset, initializers, reference_nodes=None, reference_opset=13,
              **attributes):
    inputs = [tensor("x", FLOAT, ["batch", 3, 4, 5])]
    names = ["x"] + [name for name, _ in initializers]
    old = model([helper.make_node(op_type, names, ["y"], **attributes)], inputs,
                [tensor("y", FLOAT, None)], opset, initializers, ir_version=3)
    if reference_nodes is None:
        return old, None
    new = model(reference_nodes, inputs, [tensor("y", FLOAT, None)], reference_opset,
                initializers)
    return old, new


def test_prelu_before_opset_7_applies_a_1d_slope_per_channel():
    old, _ = _one_node("PRelu", 6, [("slope", PER_CHANNEL)])
    reference = model([helper.make_node("PRelu", ["x", "slope"], ["y"])],
                      [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)], 13,
                      [("slope", PER_CHANNEL.reshape(3, 1, 1))])
    assert_agree(old, {"x": X4}, reference)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_broadcast_with_an_axis_before_opset_7(op_type):
    bias = np.array([1.5, -2.0, 0.5], np.float32)
    old, _ = _one_node(op_type, 6, [("b", bias)], broadcast=1, axis=1)
    reference = model([helper.make_node(op_type, ["x", "b"], ["y"])],
                      [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)], 13,
                      [("b", bias.reshape(3, 1, 1))])
    assert_agree(old, {"x": X4}, reference)


def test_gemm_broadcast_before_opset_7_and_initializers_not_listed_as_inputs():
    weight, bias = random(4, 3, seed=3), random(3, seed=4)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["y"], broadcast=1, alpha=0.5, beta=2.0)]
    old = model(nodes, [tensor("a", FLOAT, [2, 4])], [tensor("y", FLOAT, None)], 6,
                [("w", weight), ("c", bias)], ir_version=3)
    reference = model([helper.make_node("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
                      [tensor("a", FLOAT, [2, 4])], [tensor("y", FLOAT, None)], 13,
                      [("w", weight), ("c", bias)])
    assert_agree(old, {"a": random(2, 4, seed=5)}, reference)


def test_batch_normalization_spatial_0_has_one_value_per_activation():
    scale, bias, mean = (random(3, 4, 5, seed=s) for s in (1, 2, 3))
    variance = np.abs(random(3, 4, 5, seed=4)) + 0.5
    names = [("scale", scale), ("bias", bias), ("mean", mean), ("variance", variance)]
    for opset in (6, 7):
        attributes = {"spatial": 0, **({"is_test": 1} if opset < 7 else {})}
        old, _ = _one_node("BatchNormalization", opset, names, **attributes)
        expected = (X4 - mean) / np.sqrt(variance + 1e-5) * scale + bias
        (got,) = ge_run(old, {"x": X4})
        assert_close(got, expected, accumulate=True)
    assert_agree(old, {"x": X4})  # onnxruntime still runs opset 7's spatial=0


def test_cast_with_a_type_name_and_pad_with_paddings_in_opset_1():
    x = random(2, 3, seed=6) * 4
    nodes = [helper.make_node("Cast", ["x"], ["whole"], to="INT32"),
             helper.make_node("Pad", ["x"], ["padded"], paddings=[0, 1, 1, 0], value=2.0)]
    old = model(nodes, [tensor("x", FLOAT, [2, 3])],
                [tensor("whole", TensorProto.INT32, None), tensor("padded", FLOAT, None)], 1)
    reference = model(
        [helper.make_node("Cast", ["x"], ["whole"], to=TensorProto.INT32),
         helper.make_node("Pad", ["x", "pads", "value"], ["padded"])],
        [tensor("x", FLOAT, [2, 3])],
        [tensor("whole", TensorProto.INT32, None), tensor("padded", FLOAT, None)], 13,
        [("pads", np.array([0, 1, 1, 0], np.int64)), ("value", np.array(2.0, np.float32))])
    assert_agree(old, {"x": x}, reference)


def _old_cnn(opset):
    """Conv, BatchNormalization, PRelu, a residual Add, pools, Gemm, Dropout and Softmax as
    an exporter of ``opset`` wrote them (consumed_inputs, is_test, broadcast), with a
    symbolic batch; and the same network in opset 13."""
    rng = np.random.default_rng(opset)
    weights = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4),
               "s": rng.standard_normal(4), "bb": rng.standard_normal(4),
               "m": rng.standard_normal(4), "v": rng.random(4) + 0.5,
               "fw": rng.standard_normal((10, 16)), "fb": rng.standard_normal(10),
               "slope": np.array([0.1, 0.2, 0.3, 0.4])}
    weights = {name: np.asarray(array, np.float32) for name, array in weights.items()}
    old_bn = {"is_test": 1, **({"consumed_inputs": [0, 0, 0, 1, 1]} if opset < 6 else {})}

    def network(bn_attributes, slope, gemm_attributes, dropout_attributes):
        return [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                                 pads=[1, 1, 1, 1]),
                helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"],
                                 **bn_attributes),
                helper.make_node("PRelu", ["n", slope], ["r"]),
                helper.make_node("Add", ["r", "c"], ["a"]),
                helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[2, 2],
                                 strides=[2, 2]),
                helper.make_node("Flatten", ["q"], ["flat"], axis=1),
                helper.make_node("Gemm", ["flat", "fw", "fb"], ["g"], transB=1,
                                 **gemm_attributes),
                helper.make_node("Dropout", ["g"], ["d"], **dropout_attributes),
                helper.make_node("Softmax", ["d"], ["y"])]

    x = tensor("x", FLOAT, ["batch", 3, 8, 8])
    old_inputs = [x] + [tensor(name, FLOAT, list(array.shape)) for name, array in weights.items()]
    old = model(network(old_bn, "slope", {"broadcast": 1}, {"is_test": 1}), old_inputs,
                [tensor("y", FLOAT, ["batch", 10])], opset, list(weights.items()), ir_version=3)
    current = dict(weights, slope_c=weights["slope"].reshape(4, 1, 1))
    new = model(network({}, "slope_c", {}, {}), [x], [tensor("y", FLOAT, ["batch", 10])], 13,
                list(current.items()))
    return old, new


@pytest.mark.parametrize("opset", [1, 5, 6])
def test_an_old_cnn_with_a_symbolic_batch(opset):
    old, new = _old_cnn(opset)
    for batch in (1, 3):
        assert_agree(old, {"x": random(batch, 3, 8, 8, seed=batch)}, new)


EXPERIMENTAL = {
    "ImageScaler": ({"scale": 2.0, "bias": [1.0, -2.0, 3.0]}, ()),
    "Crop": ({"border": [1, 2, 0, 1]}, ()),
    "Crop-scale": ({"border": [1, 2, 3, 1], "scale": [2, 2]}, ()),
    "Affine": ({"alpha": 2.0, "beta": 0.5}, ()),
    "ScaledTanh": ({"alpha": 2.0, "beta": 0.5}, ()),
    "ParametricSoftplus": ({"alpha": 2.0, "beta": 0.5}, ()),
    "DynamicSlice": ({}, (("starts", np.array([0, 1], np.int64)),
                          ("ends", np.array([1, 3], np.int64)),
                          ("axes", np.array([0, 3], np.int64)))),
}


@pytest.mark.parametrize("case", sorted(EXPERIMENTAL))
def test_experimental_ops_of_old_opsets_that_onnxruntime_still_runs(case):
    attributes, constants = EXPERIMENTAL[case]
    op_type = case.split("-")[0]
    node = helper.make_node(op_type, ["x", *(name for name, _ in constants)], ["y"],
                            **attributes)
    proto = model([node], [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)],
                  9 if op_type == "DynamicSlice" else 8, constants)
    assert_agree(proto, {"x": X4})


RESAMPLING = {
    "Upsample-7-nearest": (7, helper.make_node("Upsample", ["x"], ["y"],
                                               scales=[1.0, 1.0, 2.0, 3.0]), ()),
    "Upsample-7-linear": (7, helper.make_node("Upsample", ["x"], ["y"], mode="linear",
                                              scales=[1.0, 1.0, 2.0, 2.0]), ()),
    "Upsample-9-linear": (9, helper.make_node("Upsample", ["x", "scales"], ["y"], mode="linear"),
                          (("scales", np.array([1, 1, 2, 1.5], np.float32)),)),
    "Resize-10-nearest": (10, helper.make_node("Resize", ["x", "scales"], ["y"]),
                          (("scales", np.array([1, 1, 1.5, 2], np.float32)),)),
    "Resize-10-linear": (10, helper.make_node("Resize", ["x", "scales"], ["y"], mode="linear"),
                         (("scales", np.array([1, 1, 2, 0.6], np.float32)),)),
    "Softmax-11-flattens": (11, helper.make_node("Softmax", ["x"], ["y"], axis=2), ()),
    "LogSoftmax-9-default": (9, helper.make_node("LogSoftmax", ["x"], ["y"]), ()),
}


@pytest.mark.parametrize("case", sorted(RESAMPLING))
def test_resampling_and_softmax_as_older_opsets_meant_them(case):
    opset, node, constants = RESAMPLING[case]
    proto = model([node], [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)],
                  opset, constants)
    assert_agree(proto, {"x": X4})


def test_upsample_of_opset_1_names_its_scales_and_says_bilinear():
    old = model([helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0,
                                  mode="bilinear")],
                [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)], 1)
    reference = model([helper.make_node("Upsample", ["x"], ["y"], mode="linear",
                                        scales=[1.0, 1.0, 2.0, 3.0])],
                      [tensor("x", FLOAT, ["batch", 3, 4, 5])], [tensor("y", FLOAT, None)], 7)
    assert_agree(old, {"x": X4}, reference)


# -- shape-setting inputs an exporter computes ------------------------------------------

@pytest.mark.parametrize("op_type", ["Pad", "Slice", "Unsqueeze", "ReduceSum", "Resize"])
def test_a_shape_setting_input_computed_from_constants_and_shapes_fixes_the_shape(op_type):
    """TorchScript's exporter computes reflect padding's pads (and slice bounds, axes,
    sizes) from constants and ``Shape``: the output's shape is still known at import,
    so a rank-changing ``If`` on it later folds (a Silero-style VAD once failed there)."""
    x = tensor("x", FLOAT, [1, 4, 32])
    width = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "two"], ["width"], axis=0),
             helper.make_node("Div", ["width", "eight"], ["eighth"])]  # 4, from the shape
    constants = [("two", np.array([2], np.int64)), ("eight", np.array([8], np.int64))]
    if op_type == "Pad":
        nodes = width + [
            helper.make_node("ConstantOfShape", ["four"], ["zeros"],
                             value=numpy_helper.from_array(np.array([0], np.int64))),
            helper.make_node("Concat", ["zeros", "eighth", "zeros", "eighth"], ["pads"],
                             axis=0),
            helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")]
        constants += [("four", np.array([2], np.int64))]
        want = [1, 4, 40]
    elif op_type == "Slice":
        nodes = width + [helper.make_node("Sub", ["width", "eighth"], ["end"]),
                         helper.make_node("Slice", ["x", "eighth", "end", "two"], ["y"])]
        want = [1, 4, 24]
    elif op_type == "Unsqueeze":
        nodes = width + [helper.make_node("Sub", ["eighth", "two"], ["axis"]),
                         helper.make_node("Unsqueeze", ["x", "axis"], ["y"])]
        want = [1, 4, 1, 32]
    elif op_type == "ReduceSum":
        nodes = width + [helper.make_node("Sub", ["eighth", "two"], ["axis"]),
                         helper.make_node("ReduceSum", ["x", "axis"], ["y"], keepdims=0)]
        want = [1, 4]
    else:
        nodes = width + [helper.make_node("Mul", ["width", "two"], ["wide"]),
                         helper.make_node("Concat", ["lead", "wide"], ["sizes"], axis=0),
                         helper.make_node("Resize", ["x", "", "", "sizes"], ["y"],
                                          mode="nearest")]
        constants += [("lead", np.array([1, 4], np.int64))]
        want = [1, 4, 64]
    proto = model(nodes, [x], [tensor("y", FLOAT, None)], initializers=constants)
    graph = ge.parse_onnx(proto)
    assert list(graph.outputs[0].shape) == want
    assert_agree(proto, {"x": random(1, 4, 32)})


def test_a_branch_that_cannot_type_check_fails_only_when_a_run_takes_it():
    """What TorchScript's exporter writes for ``x.squeeze(1)`` with a dimension it could
    not see: an If squeezing when the size is 1, else passing x on; an LSTM after it.
    onnxruntime types the LSTM's input as of unknown rank and checks it when it runs;
    GE moves the LSTM into both branches, where the else branch's is rank 4, so that
    branch cannot type-check. It imports all the same, the live branch runs, and a run
    that takes the dead one names the If and the LSTM, as onnxruntime fails then."""
    rng = np.random.default_rng(3)
    constants = [("w", (rng.standard_normal((1, 16, 8)) * 0.3).astype(np.float32)),
                 ("r", (rng.standard_normal((1, 16, 4)) * 0.3).astype(np.float32)),
                 ("one", np.array(1, np.int64)), ("axis", np.array([1], np.int64))]
    then_branch = helper.make_graph([helper.make_node("Squeeze", ["x", "axis"], ["thin"])],
                                    "then", [], [tensor("thin", FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])],
                                    "else", [], [tensor("same", FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["width"], axis=0),
             helper.make_node("Equal", ["width", "one"], ["narrow"]),
             helper.make_node("If", ["narrow"], ["squeezed"], name="choice",
                              then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Unsqueeze", ["squeezed", "axis"], ["sequence"]),
             helper.make_node("LSTM", ["sequence", "w", "r"], ["y"], hidden_size=4,
                              name="cell")]
    proto = model(nodes, [tensor("x", FLOAT, ["steps", "width", 8])],
                  [tensor("y", FLOAT, None)], initializers=constants)
    narrow, wide = random(5, 1, 8), random(5, 2, 8)
    assert_agree(proto, {"x": narrow})
    graph = ge.parse_onnx(proto)
    session = ge.Session(ge.compile(graph))
    with pytest.raises(ge.errors.ExecutionError, match="(?s)choice.*else_branch.*cell"):
        session.run({"x": wide})
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument):
        onnxruntime_run(proto, {"x": wide})  # the same: at run time
    assert_close(session.run({"x": narrow})["y"], onnxruntime_run(proto, {"x": narrow})[0],
                 what="the session still runs")
    with pytest.raises(ge.errors.UnsupportedOpError, match="choice"):
        ge.export_onnx(graph)
