"""parse_onnx on good, odd and broken models; ge.backend's module interface."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.backend
from ge.errors import ModelFormatError, UnsupportedOpError


def tiny_model(nodes=None, inputs=None, outputs=None, initializers=(), opset=17):
    nodes = nodes or [helper.make_node("Relu", ["x"], ["y"])]
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, None])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_path_bytes_and_proto_give_the_same_graph(tmp_path):
    model = tiny_model()
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    texts = {ge.parse_onnx(source).to_json()
             for source in (model, model.SerializeToString(), str(path), path)}
    assert len(texts) == 1


def test_dynamic_dimensions_survive():
    graph = ge.parse_onnx(tiny_model())
    assert graph.inputs[0].shape == ("batch", 3, -1)
    assert graph.outputs[0].shape == ("batch", 3, -1)
    out = ge.Session(ge.compile(graph)).run({"x": -np.ones((2, 3, 5), np.float32)})
    assert out["y"].shape == (2, 3, 5) and not out["y"].any()


def test_garbage_and_truncated_files_are_model_format_errors(tmp_path, exported):
    with pytest.raises(ModelFormatError):
        ge.parse_onnx(b"this is not a protobuf at all \xff\xfe")
    _, path = exported("resnet18", False)
    data = open(path, "rb").read()
    for cut in (len(data) // 2, len(data) - 7, 100):
        truncated = tmp_path / f"cut{cut}.onnx"
        truncated.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError):
            ge.parse_onnx(truncated)
    with pytest.raises(ModelFormatError, match="no such model file"):
        ge.parse_onnx(tmp_path / "missing.onnx")


def test_a_reference_to_an_undefined_value_is_a_model_format_error():
    model = tiny_model(nodes=[helper.make_node("Relu", ["nowhere"], ["y"])])
    with pytest.raises(ModelFormatError, match="nowhere"):
        ge.parse_onnx(model)


def test_a_graph_with_no_outputs_or_an_output_nothing_makes_is_refused():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [])
    with pytest.raises(ge.errors.GraphError, match="no outputs"):
        ge.parse_onnx(helper.make_model(graph))
    model = tiny_model(outputs=[helper.make_tensor_value_info("zzz", TensorProto.FLOAT, None)])
    with pytest.raises(ModelFormatError, match="'zzz' is never produced"):
        ge.parse_onnx(model)


def test_a_file_of_another_kind_is_a_model_format_error(tmp_path):
    text = tmp_path / "notes.onnx"
    text.write_text("name: resnet\nlayers: 50\n")
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        ge.parse_onnx(text)


def test_every_unsupported_op_is_listed_at_once():
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"], domain="example.custom"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Twiddle", ["b"], ["c"], domain="example.custom"),
             helper.make_node("Frobnicate", ["c"], ["y"], domain="example.custom")]
    model = tiny_model(nodes=nodes)
    model.opset_import.append(helper.make_opsetid("example.custom", 1))
    with pytest.raises(UnsupportedOpError) as raised:
        ge.parse_onnx(model)
    message = str(raised.value)
    assert "2 op type(s)" in message
    assert "example.custom::Frobnicate (x2)" in message
    assert "example.custom::Twiddle (x1)" in message


def test_external_data_is_loaded(tmp_path):
    weight = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)
    model = tiny_model(
        nodes=[helper.make_node("MatMul", ["x", "w"], ["y"])],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        initializers=[numpy_helper.from_array(weight, "w")])
    path = tmp_path / "external.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    x = np.ones((2, 3), np.float32)
    out = ge.Session(ge.compile(ge.parse_onnx(path))).run({"x": x})
    np.testing.assert_array_equal(out["y"], x @ weight)


def test_initializers_listed_as_inputs_are_constants():
    weight = np.full((3,), 2.0, np.float32)
    model = tiny_model(
        nodes=[helper.make_node("Mul", ["x", "w"], ["y"])],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])],
        initializers=[numpy_helper.from_array(weight, "w")])
    graph = ge.parse_onnx(model)
    assert [v.name for v in graph.inputs] == ["x"]


def test_unsupported_element_types_are_named():
    model = tiny_model(inputs=[helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                       nodes=[helper.make_node("Identity", ["x"], ["y"])])
    with pytest.raises(UnsupportedOpError, match="STRING"):
        ge.parse_onnx(model)


def test_backend_module_interface():
    assert ge.backend.supports_device("CPU") and not ge.backend.supports_device("CUDA")
    x = np.array([-1.0, 2.0], np.float32)
    (y,) = ge.backend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, [0.0, 2.0])
    rep = ge.backend.prepare(tiny_model().SerializeToString())
    (out,) = rep.run([np.ones((1, 3, 2), np.float32)])
    assert out.shape == (1, 3, 2)
    (out,) = ge.backend.run_model(tiny_model(), {"x": -np.ones((1, 3, 1), np.float32)})
    assert out.sum() == 0


def _weights_model() -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    arrays = {"w32": rng.standard_normal((3, 4)).astype(np.float32),
              "w16": rng.standard_normal((4,)).astype(np.float16),
              "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
              "flags": np.array([True, False])}
    nodes = [helper.make_node("MatMul", ["x", "w32"], ["y"]),
             helper.make_node("Identity", ["w16"], ["h"]),
             helper.make_node("Identity", ["ids"], ["i"]),
             helper.make_node("Identity", ["flags"], ["f"])]
    graph = helper.make_graph(
        nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("y", TensorProto.FLOAT), ("h", TensorProto.FLOAT16), ("i", TensorProto.INT64),
          ("f", TensorProto.BOOL))],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_weights_are_read_in_place_from_the_model_bytes_and_equal_onnx_s_reading():
    proto = _weights_model()
    data = proto.SerializeToString()
    graph = ge.parse_onnx(data)
    whole = np.frombuffer(data, np.uint8)
    for tensor in proto.graph.initializer:
        array = graph.node(tensor.name).attrs["value"].numpy()
        expected = numpy_helper.to_array(tensor)
        assert array.dtype == expected.dtype and np.array_equal(array, expected)
        assert not array.flags.writeable
        if tensor.data_type != TensorProto.BOOL:  # bool is read the usual way
            assert np.shares_memory(array, whole), tensor.name  # no copy was made


def test_the_wire_walk_gives_up_on_bytes_it_does_not_understand():
    from ge.frontends.onnx.wire import raw_data_views

    data = _weights_model().SerializeToString()
    assert set(raw_data_views(data)) == {"w32", "w16", "ids", "flags"}
    for broken in (data[: len(data) // 2], b"\xff" * 40, b"\x3b\x01"):
        assert raw_data_views(broken) == {}
