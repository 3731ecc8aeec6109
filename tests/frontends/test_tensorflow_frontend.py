"""The TensorFlow frontend: frozen Keras models and one graph per translated op, each
against TensorFlow; dynamic batch, SavedModel directories, reading a ``.pb`` where
TensorFlow cannot be imported, GE's protobuf decoder, and the errors of bad models."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import ge
from ge.errors import GEError, GraphError, ModelFormatError, UnsupportedOpError
from ge.frontends.tensorflow import TRANSLATED
from ge.frontends.tensorflow.protobuf import decode_graph_def, decode_tensor
from tests.frontends import tf_cases, tf_models
from tests.tolerance import assert_close, rel_err

ROOT = Path(__file__).resolve().parents[2]

#: a model's outputs may differ from TensorFlow's by this, relative to the output's scale
MODEL_TOLERANCE = 1e-4


def _run(graph: ge.Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ge.Session(ge.compile(graph))
    results = session.run(feeds)
    return [results[spec.name] for spec in session.executable.outputs]


def _check_model(name: str, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want) == 1
    error = rel_err(got[0], want[0])
    scale = float(np.max(np.abs(want[0])))
    print(f"[tf] {name}: max abs error {error * scale:.3g}, relative to the output scale "
          f"{scale:.3g}: {error:.3g}")
    assert got[0].shape == want[0].shape
    assert error < MODEL_TOLERANCE, (name, error)


# -- the Keras models -------------------------------------------------------------------

_MODELS = {"small_cnn": (tf_models.small_cnn, [None, 32, 32, 3], 2),
           "small_dense": (tf_models.small_dense, [None, 20], 3),
           "mobilenet_v2": (tf_models.mobilenet_v2, [None, 224, 224, 3], 1)}


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """name -> (Keras model, frozen graph, path of its .pb), each built and frozen once."""
    root = tmp_path_factory.mktemp("tensorflow")
    built: dict[str, tuple] = {}

    def get(name: str):
        if name not in built:
            started = time.perf_counter()
            factory, shape, _ = _MODELS[name]
            model = factory(seed=0)
            frozen = tf_models.freeze_keras(model, shape)
            path = root / f"{name}.pb"
            path.write_bytes(frozen.data)
            built[name] = (model, frozen, path)
            print(f"[tf] built and froze {name} in {time.perf_counter() - started:.2f}s")
        return built[name]

    return get


@pytest.mark.parametrize("name", list(_MODELS))
def test_frozen_keras_models_match_tensorflow(name, keras_model):
    model, frozen, path = keras_model(name)
    graph = ge.parse_tensorflow(path)
    assert [v.producer.name for v in graph.inputs] == ["x0"]
    assert graph.inputs[0].shape[0] == -1  # Keras' batch stays dynamic
    assert [v.name for v in graph.outputs] == [frozen.outputs[0].split(":")[0]]
    batch = _MODELS[name][2]
    x = np.random.default_rng(1).standard_normal(
        [batch] + _MODELS[name][1][1:]).astype(np.float32)
    want = [np.asarray(model(x, training=False))]
    _check_model(name, _run(graph, {"x0": x}), want)


def test_the_small_cnn_keeps_its_layers(keras_model):
    _, frozen, path = keras_model("small_cnn")
    assert {"Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "MatMul",
            "Softmax", "Relu", "Relu6", "Elu", "Tanh"} <= frozen.op_types
    ops = {node.op_type for node in ge.parse_tensorflow(path).nodes}
    assert {"Conv2D", "MaxPool", "AvgPool", "MatMul", "Softmax", "Relu", "Clip"} <= ops
    depthwise = [n for n in ge.parse_tensorflow(path).nodes
                 if n.op_type == "Conv2D" and n.attrs["groups"] > 1]
    assert depthwise and all(n.attrs["data_format"] is ge.Format.NHWC for n in depthwise)


@pytest.mark.parametrize("name", ["small_dense", "small_cnn"])
def test_a_dynamic_batch_runs_at_two_sizes(name, keras_model):
    model, _, path = keras_model(name)
    session = ge.Session(ge.compile(ge.parse_tensorflow(path)))
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal(
            [batch] + _MODELS[name][1][1:]).astype(np.float32)
        got = session.run({"x0": x})[session.executable.outputs[0].name]
        assert got.shape[0] == batch
        assert rel_err(got, np.asarray(model(x, training=False))) < MODEL_TOLERANCE


def test_input_shapes_fix_unknown_sizes(keras_model):
    _, frozen, path = keras_model("small_cnn")
    graph = ge.parse_tensorflow(path, input_shapes={"x0:0": (1, 32, 32, 3)})
    assert graph.inputs[0].shape == (1, 32, 32, 3)
    assert graph.outputs[0].shape == (1, 10)  # inference sees every size now
    x = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)
    assert rel_err(_run(graph, {"x0": x})[0], frozen.reference([x])[0]) < MODEL_TOLERANCE


def test_path_bytes_and_graph_def_give_the_same_graph(keras_model):
    _, frozen, path = keras_model("small_dense")
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(frozen.data)
    texts = {ge.parse_tensorflow(source, name="g").to_json()
             for source in (path, str(path), frozen.data, bytearray(frozen.data), graph_def)}
    assert len(texts) == 1


# -- one graph per op -------------------------------------------------------------------

@pytest.mark.parametrize("case", tf_cases.ALL, ids=[c.name for c in tf_cases.ALL])
def test_each_op_matches_tensorflow(case):
    frozen = tf_models.freeze(case.function, case.inputs)
    assert case.op in frozen.op_types, f"TensorFlow rewrote {case.op}: {frozen.op_types}"
    graph = ge.parse_tensorflow(frozen.data, outputs=frozen.outputs,
                                input_shapes=case.input_shapes)
    feeds = tf_cases.feeds(case)
    got = _run(graph, {f"x{i}": array for i, array in enumerate(feeds)})
    want = frozen.reference(feeds)
    assert len(got) == len(want)
    for index, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, (index, a.dtype, b.dtype)
        assert_close(a, b, accumulate=True, what=f"{case.name} output {index}")


def test_nchw_graphs_match_tensorflow_computing_in_nhwc():
    """TensorFlow's CPU kernels refuse NCHW: the graph is traced in NCHW, and GE's result
    compared with the same ops computed by TensorFlow in NHWC."""
    weights = np.random.default_rng(4).standard_normal((3, 3, 3, 4)).astype(np.float32)
    bias = np.arange(4, dtype=np.float32)
    weights2 = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)

    def network(x, layout):
        y = tf.nn.conv2d(x, weights, 2, "SAME", data_format=layout)
        y = tf.nn.bias_add(y, bias, data_format=layout)
        explicit = [[0, 0], [1, 2], [0, 1], [0, 0]]  # top 1, bottom 2, left 0, right 1
        if layout == "NCHW":
            explicit = [explicit[0], explicit[3], explicit[1], explicit[2]]
        y = tf.nn.conv2d(tf.nn.relu(y), weights2, 1, explicit, data_format=layout)
        return tf.nn.max_pool2d(y, 2, 1, "VALID", data_format=layout)

    frozen = tf_models.freeze(lambda x: network(x, "NCHW"), [((1, 3, 9, 8), tf.float32)])
    graph = ge.parse_tensorflow(frozen.data)
    assert {n.attrs["data_format"] for n in graph.nodes
            if n.op_type in ("Conv2D", "BiasAdd", "MaxPool")} == {ge.Format.NCHW}
    assert [n.attrs["pads"] for n in graph.nodes if n.op_type == "Conv2D"] == [None, [1, 2, 0, 1]]
    x = np.random.default_rng(5).standard_normal((1, 3, 9, 8)).astype(np.float32)
    want = network(tf.constant(x.transpose(0, 2, 3, 1)), "NHWC").numpy().transpose(0, 3, 1, 2)
    assert_close(_run(graph, {"x0": x})[0], want, accumulate=True)


def test_every_translated_op_has_its_one_op_graph():
    # PlaceholderWithDefault has a test of its own, below
    tested = {case.op for case in tf_cases.ALL} | {"Placeholder", "Const", "NoOp",
                                                   "PlaceholderWithDefault"}
    assert tested == set(TRANSLATED), (sorted(tested - set(TRANSLATED)),
                                       sorted(set(TRANSLATED) - tested))
    required = {"Placeholder", "Const", "Identity", "NoOp", "Conv2D", "DepthwiseConv2dNative",
                "BiasAdd", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "Relu",
                "Relu6", "Elu", "Sigmoid", "Tanh", "Softmax", "MatMul", "BatchMatMulV2", "Add",
                "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Rsqrt", "Square",
                "Mean", "Sum", "Max", "MaxPool", "AvgPool", "Reshape", "Squeeze",
                "ExpandDims", "ConcatV2", "Pad", "Transpose", "Shape", "StridedSlice", "Pack",
                "Cast", "GatherV2", "AddN", "Sqrt", "Exp", "Neg", "Fill", "Range", "ZerosLike",
                "StopGradient", "PlaceholderWithDefault", "MirrorPad"}
    assert required <= set(TRANSLATED), sorted(required - set(TRANSLATED))


def test_a_dynamic_shape_chain_runs_at_two_batches():
    case = next(c for c in tf_cases.ALL if c.name == "reshape-dynamic-batch")
    frozen = tf_models.freeze(case.function, case.inputs)
    assert {"Shape", "StridedSlice", "Pack", "Reshape"} <= frozen.op_types
    graph = ge.parse_tensorflow(frozen.data)
    session = ge.Session(ge.compile(graph))
    for batch in (1, 4):
        x = tf_cases.feeds(case, batch=batch)
        got = session.run({"x0": x[0]})[session.executable.outputs[0].name]
        np.testing.assert_array_equal(got, frozen.reference(x)[0])


def test_a_second_output_is_named_node_colon_index():
    case = next(c for c in tf_cases.ALL if c.name == "split")
    frozen = tf_models.freeze(case.function, case.inputs)
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(frozen.data)
    split = next(node.name for node in graph_def.node if node.op == "Split")
    graph = ge.parse_tensorflow(frozen.data, outputs=[f"{split}:1", f"{split}:0"])
    assert [v.name for v in graph.outputs] == [f"{split}:1", split]
    feeds = tf_cases.feeds(case)
    got = _run(graph, {"x0": feeds[0]})
    want = frozen.reference(feeds)
    np.testing.assert_array_equal(got[0], want[1])
    np.testing.assert_array_equal(got[1], want[0])


def test_placeholder_with_default_is_its_default_unless_fed():
    def function(x):
        scale = tf.compat.v1.placeholder_with_default(tf.constant([2.0, 3.0]), [2], "scale")
        return x * scale

    frozen = tf_models.freeze(function, [((3, 2), tf.float32)])
    assert "PlaceholderWithDefault" in frozen.op_types
    x = np.ones((3, 2), np.float32)
    default = ge.parse_tensorflow(frozen.data)
    assert [v.producer.name for v in default.inputs] == ["x0"]
    np.testing.assert_array_equal(_run(default, {"x0": x})[0], x * [2.0, 3.0])
    fed = ge.parse_tensorflow(frozen.data, inputs=["x0", "scale"])
    got = _run(fed, {"x0": x, "scale": np.asarray([5.0, 7.0], np.float32)})
    np.testing.assert_array_equal(got[0], x * [5.0, 7.0])


def test_an_input_of_unknown_rank_needs_its_shape():
    frozen = tf_models.freeze(lambda x: tf.nn.relu(x) * 2.0, [(None, tf.float32)])
    with pytest.raises(GraphError, match="x0.*input_shapes"):
        ge.parse_tensorflow(frozen.data)
    graph = ge.parse_tensorflow(frozen.data, input_shapes={"x0": (2, 3)})
    x = np.asarray([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(_run(graph, {"x0": x})[0], np.maximum(x, 0) * 2)


# -- SavedModel -------------------------------------------------------------------------

class _Affine(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(5)
        self.weights = tf.Variable(rng.standard_normal((6, 4)).astype(np.float32))
        self.bias = tf.Variable(rng.standard_normal(4).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="features")])
    def __call__(self, features):
        return {"scores": tf.nn.softmax(tf.matmul(features, self.weights) + self.bias)}


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    module = _Affine()
    path = tmp_path_factory.mktemp("saved") / "affine"
    tf.saved_model.save(module, str(path), signatures=module.__call__)
    return module, path


def test_a_saved_model_directory_is_frozen_and_parsed(saved_model):
    module, path = saved_model
    x = np.random.default_rng(2).standard_normal((3, 6)).astype(np.float32)
    want = module(tf.constant(x))["scores"].numpy()
    for source in (path, path / "saved_model.pb"):
        graph = ge.parse_tensorflow(source)
        assert graph.name == "affine"
        assert graph.inputs[0].shape == (-1, 6)
        (name,) = [v.producer.name for v in graph.inputs]
        assert "features" in name
        assert "MatMul" in {n.op_type for n in graph.nodes}
        got = _run(graph, {name: x})
        assert rel_err(got[0], want) < 1e-6


def test_a_directory_that_is_no_saved_model_is_refused(tmp_path):
    with pytest.raises(ModelFormatError, match="not a SavedModel"):
        ge.parse_tensorflow(tmp_path)


# -- reading without TensorFlow ---------------------------------------------------------

def test_a_pb_is_read_where_tensorflow_cannot_be_imported(keras_model, saved_model,
                                                          tmp_path):
    model, _, path = keras_model("small_cnn")
    x = np.random.default_rng(3).standard_normal((2, 32, 32, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import json, sys
        sys.modules["tensorflow"] = None  # "import tensorflow" now raises ImportError
        sys.modules["google.protobuf"] = None
        import numpy as np
        import ge
        graph = ge.parse_tensorflow({str(path)!r})
        session = ge.Session(ge.compile(graph))
        result = session.run({{"x0": np.load({str(tmp_path / 'x.npy')!r})}})
        np.save({str(tmp_path / 'y.npy')!r}, result[session.executable.outputs[0].name])
        try:
            ge.parse_tensorflow({str(saved_model[1])!r})
            refused = ""
        except ge.errors.ModelFormatError as error:
            refused = str(error)
        try:
            import tensorflow
            blocked = False
        except ImportError:
            blocked = True
        print(json.dumps({{"blocked": blocked, "refused": refused}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               cwd=ROOT, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["blocked"]
    assert "needs TensorFlow" in report["refused"]
    got = np.load(tmp_path / "y.npy")
    assert rel_err(got, np.asarray(model(x, training=False))) < MODEL_TOLERANCE


# -- GE's protobuf decoder --------------------------------------------------------------

_ARRAYS = {
    "float32": np.asarray([[1.5, -2.25, 3.0], [0.0, 1e-8, -7.0]], np.float32),
    "float64": np.asarray([1.0, -2.5e100, 3.25]),
    "float16": np.asarray([0.5, -1.25, 65504.0], np.float16),
    "int32": np.asarray([[-3, 7], [2 ** 31 - 1, -(2 ** 31)]], np.int32),
    "int64": np.asarray([-(2 ** 40), 5, 0], np.int64),
    "int8": np.asarray([-128, 3, 127], np.int8),
    "int16": np.asarray([-300, 4], np.int16),
    "uint8": np.asarray([0, 200, 255], np.uint8),
    "bool": np.asarray([True, False, True]),
}


@pytest.mark.parametrize("dtype", list(_ARRAYS))
def test_tensors_decode_as_tensorflow_reads_them(dtype):
    array = _ARRAYS[dtype]
    as_content = tf.make_tensor_proto(array)  # tensor_content: the raw bytes
    as_values = tf.make_tensor_proto(array.reshape(-1)[:1], shape=[4])  # one value fills all
    for proto in (as_content, as_values):
        decoded = decode_tensor(memoryview(proto.SerializeToString()), dtype)
        expected = tf.make_ndarray(proto)
        assert decoded.dtype == expected.dtype and decoded.shape == expected.shape
        np.testing.assert_array_equal(decoded, expected)
    assert not decode_tensor(memoryview(as_content.SerializeToString()), "").flags.writeable


def test_typed_values_fill_a_shaped_tensor_with_the_last_value():
    proto = tf.make_tensor_proto(0.0, shape=[2, 3])
    proto.ClearField("float_val")
    proto.float_val.extend([1.5, -2.0])
    decoded = decode_tensor(memoryview(proto.SerializeToString()), "c")
    np.testing.assert_array_equal(decoded, [[1.5, -2.0, -2.0], [-2.0, -2.0, -2.0]])
    np.testing.assert_array_equal(decoded, tf.make_ndarray(proto))
    half = tf.make_tensor_proto(np.float16(0), shape=[3])
    half.ClearField("half_val")
    half.half_val.extend([int(np.float16(-0.75).view(np.uint16))])
    np.testing.assert_array_equal(decode_tensor(memoryview(half.SerializeToString()), "h"),
                                  [-0.75] * 3)
    ints = tf.make_tensor_proto(np.int32(0), shape=[3])
    ints.ClearField("int_val")
    ints.int_val.extend([-5, 9])
    np.testing.assert_array_equal(decode_tensor(memoryview(ints.SerializeToString()), "i"),
                                  [-5, 9, 9])


def test_unpacked_repeated_numbers_decode_as_packed_ones():
    # dtype DT_FLOAT, shape [2], then float_val as two separate fixed32 fields (not packed)
    data = bytes([0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02]) \
        + b"\x2d" + np.float32(1.5).tobytes() + b"\x2d" + np.float32(-4.0).tobytes()
    np.testing.assert_array_equal(decode_tensor(memoryview(data), "t"), [1.5, -4.0])


def test_a_graph_def_decodes_nodes_inputs_and_attributes(keras_model):
    _, frozen, _ = keras_model("small_cnn")
    mine = decode_graph_def(frozen.data)
    theirs = tf.compat.v1.GraphDef()
    theirs.ParseFromString(frozen.data)
    assert [(n.name, n.op, n.inputs) for n in mine.nodes] == \
        [(n.name, n.op, list(n.input)) for n in theirs.node]
    conv = next(n for n in mine.nodes if n.op == "Conv2D")
    proto = next(n for n in theirs.node if n.name == conv.name)
    assert conv.attr("strides") == list(proto.attr["strides"].list.i)
    assert conv.attr("padding") == proto.attr["padding"].s.decode()
    assert conv.attr("T") == proto.attr["T"].type
    assert conv.attr("use_cudnn_on_gpu") is proto.attr["use_cudnn_on_gpu"].b
    placeholder = next(n for n in mine.nodes if n.op == "Placeholder")
    assert placeholder.attr("shape") == [-1, 32, 32, 3]


# -- bad models -------------------------------------------------------------------------

def _node(name, op, inputs=(), dtype=tf.float32, **attrs):
    node = tf.compat.v1.NodeDef(name=name, op=op, input=list(inputs))
    node.attr["dtype" if op in ("Placeholder", "Const") else "T"].type = dtype.as_datatype_enum
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _graph(*nodes) -> bytes:
    graph_def = tf.compat.v1.GraphDef()
    graph_def.node.extend(nodes)
    return graph_def.SerializeToString()


def _placeholder(name="x"):
    shape = tf.compat.v1.AttrValue(shape=tf.TensorShape([2, 3]).as_proto())
    return _node(name, "Placeholder", shape=shape)


def _const(name, value):
    return _node(name, "Const", value=tf.compat.v1.AttrValue(
        tensor=tf.make_tensor_proto(np.asarray(value, np.float32))))


def _onnx_model() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph).SerializeToString() if onnx else b""


_NOT_GRAPH_DEFS = {
    "onnx": (_onnx_model, "ONNX"),
    "random": (lambda: np.random.default_rng(0).bytes(4096), "GraphDef"),
    "text": (lambda: b"Just some notes about the model.\nNothing else.\n", "text"),
    "pbtxt": (lambda: str(tf.compat.v1.GraphDef(node=[_placeholder()])).encode(), "text"),
    "empty": (lambda: b"", "empty"),
}


@pytest.mark.parametrize("kind", list(_NOT_GRAPH_DEFS))
def test_a_file_that_is_not_a_graph_def_is_refused(kind, tmp_path):
    make, expected = _NOT_GRAPH_DEFS[kind]
    path = tmp_path / "model.pb"
    path.write_bytes(make())
    with pytest.raises(ModelFormatError, match=expected):
        ge.parse_tensorflow(path)


def test_a_truncated_graph_def_is_refused(keras_model):
    _, frozen, _ = keras_model("small_cnn")
    for cut in (5, len(frozen.data) // 2, len(frozen.data) - 1):
        with pytest.raises(ModelFormatError, match="truncated"):
            ge.parse_tensorflow(frozen.data[:cut])


def test_every_prefix_of_a_graph_fails_as_a_ge_error_or_parses():
    data = _graph(_placeholder(), _const("c", [1.0, 2.0, 3.0]),
                  _node("y", "Mul", ["x", "c"]), _node("z", "Relu", ["y"]))
    outcomes = set()
    for cut in range(len(data)):
        try:
            ge.parse_tensorflow(data[:cut])
            outcomes.add("parsed")
        except GEError as error:
            outcomes.add(type(error).__name__)
    assert outcomes <= {"parsed", "ModelFormatError", "GraphError"}
    assert "ModelFormatError" in outcomes and "parsed" in outcomes


def test_a_graph_without_outputs_is_refused():
    with pytest.raises(GraphError, match="no outputs"):
        ge.parse_tensorflow(_graph(_placeholder(), _const("c", [1.0])))


def test_unknown_input_and_output_names_are_refused():
    data = _graph(_placeholder(), _node("y", "Relu", ["x"]))
    assert [v.name for v in ge.parse_tensorflow(data, outputs=["y:0"]).outputs] == ["y"]
    with pytest.raises(GraphError, match="output 'nope' is not a node"):
        ge.parse_tensorflow(data, outputs=["nope"])
    with pytest.raises(GraphError, match="input 'missing' is not a node"):
        ge.parse_tensorflow(data, inputs=["missing"])
    with pytest.raises(GraphError, match="input_shapes names.*'w'"):
        ge.parse_tensorflow(data, input_shapes={"w": (1,)})
    with pytest.raises(GraphError, match="no output 3"):
        ge.parse_tensorflow(data, outputs=["y:3"])


def test_an_output_needing_a_placeholder_that_is_not_an_input_is_refused():
    data = _graph(_placeholder("a"), _placeholder("b"), _node("y", "Add", ["a", "b"]))
    with pytest.raises(GraphError, match="placeholder 'b'"):
        ge.parse_tensorflow(data, inputs=["a"])


def test_a_node_reading_a_missing_node_is_refused():
    data = _graph(_placeholder(), _node("y", "Relu", ["x"]), _node("z", "Add", ["y", "gone:1"]))
    with pytest.raises(ModelFormatError, match="'z' reads 'gone:1'.*no node 'gone'"):
        ge.parse_tensorflow(data)


def test_every_untranslated_op_is_listed_in_one_error():
    def function(x):
        ranked = tf.math.cumsum(x, axis=1) + tf.math.cumsum(x, axis=0)
        return tf.math.top_k(ranked, 2).values + tf.math.cumprod(x[:, :2], axis=1)

    frozen = tf_models.freeze(function, [((3, 4), tf.float32)])
    with pytest.raises(UnsupportedOpError) as raised:
        ge.parse_tensorflow(frozen.data)
    message = str(raised.value)
    assert "3 TensorFlow op type(s)" in message
    for op in ("Cumsum (nodes 'Cumsum', 'Cumsum_1')", "Cumprod (node 'Cumprod')",
               "TopKV2 (node 'TopKV2')"):
        assert op in message, message


def test_other_bad_arguments_are_model_format_errors(tmp_path):
    with pytest.raises(ModelFormatError, match="no such model file"):
        ge.parse_tensorflow(tmp_path / "missing.pb")
    with pytest.raises(ModelFormatError, match="got int"):
        ge.parse_tensorflow(42)
    training = _node("bn", "FusedBatchNormV3", ["x", "s", "s", "s", "s"],
                     is_training=tf.compat.v1.AttrValue(b=True))
    data = _graph(_node("x", "Placeholder", shape=tf.compat.v1.AttrValue(
        shape=tf.TensorShape([1, 2, 2, 3]).as_proto())), _const("s", [1.0, 1.0, 1.0]), training)
    with pytest.raises(UnsupportedOpError, match="'bn'.*is_training"):
        ge.parse_tensorflow(data)
