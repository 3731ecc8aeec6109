"""What third-party ONNX models hold, beyond what exporters of the zoo emit.

Models are made the way their authors make them: onnxruntime's own tools
(dynamic quantization, the transformers optimizer emitting com.microsoft ops),
torch.onnx on recurrent and HardSwish layers, and hand-made graphs with weights
as Constant nodes, a graph wrapped in If, scalar int64 inputs and declared
output shapes that are wrong. GE must agree with onnxruntime on each.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import ge
from examples import zoo
from tests.tolerance import rel_err


def onnxruntime_run(model, feeds):
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ge_run(model, feeds):
    return list(ge.Session(ge.compile(ge.parse_onnx(model))).run(feeds).values())


def assert_agree(model, feeds, tolerance=1e-5):
    for got, want in zip(ge_run(model, feeds), onnxruntime_run(model, feeds)):
        assert got.shape == want.shape and got.dtype == want.dtype
        if want.dtype.kind == "f":
            assert rel_err(got, want) <= tolerance, rel_err(got, want)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["bert", "resnet18"])
def test_dynamically_quantized_models(exported, name, tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    _, path = exported(name, name == "resnet18")
    target = tmp_path / f"{name}-int8.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(path, target, weight_type=QuantType.QUInt8,
                         op_types_to_quantize=["MatMul", "Conv", "Gemm"])
    kinds = {node.op_type for node in onnx.load(str(target)).graph.node}
    assert "DynamicQuantizeLinear" in kinds and kinds & {"MatMulInteger", "ConvInteger"}
    feeds = zoo.example_feeds(name, batch=2, seed=5)
    (ours,), (theirs,) = ge_run(str(target), feeds), onnxruntime_run(str(target), feeds)
    (unquantized,) = onnxruntime_run(path, feeds)
    # The integer arithmetic is exact (the node cases check it bit for bit), but a float
    # difference of one ulp upstream (a LayerNorm, a scale product) can move a value across
    # a rounding boundary of the next quantization, and four layers amplify that. So GE
    # must agree with onnxruntime more closely than onnxruntime agrees with the float model.
    assert rel_err(ours, theirs) <= rel_err(theirs, unquantized)
    assert rel_err(ours, theirs) <= 5e-3


def test_transformers_optimizer_contrib_ops(exported, tmp_path):
    from onnxruntime.transformers import optimizer

    _, path = exported("bert", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized = optimizer.optimize_model(path, model_type="bert", num_heads=4,
                                             hidden_size=256, opt_level=1)
    target = tmp_path / "bert-fused.onnx"
    optimized.save_model_to_file(str(target))
    contrib = {n.op_type for n in onnx.load(str(target)).graph.node if n.domain == "com.microsoft"}
    assert contrib, "the optimizer should have emitted com.microsoft ops"
    assert_agree(str(target), zoo.example_feeds("bert", batch=2, seed=6), tolerance=1e-4)


class Recurrent(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = torch.nn.GRU(32, 8, batch_first=True)
        self.head = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Hardswish())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        z, _ = self.gru(y)
        return self.head(z)


def test_recurrent_layers_and_hardswish_from_torch(tmp_path):
    torch.manual_seed(0)
    model = Recurrent().eval()
    path = tmp_path / "recurrent.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 5, 8),), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"], opset_version=14,
                          dynamic_axes={"x": {0: "batch", 1: "time"}})
    kinds = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert {"LSTM", "GRU", "HardSwish"} <= kinds
    x = np.random.default_rng(0).standard_normal((3, 7, 8)).astype(np.float32)
    assert_agree(str(path), {"x": x})


def constant_node(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))


def test_weights_as_constant_nodes_inside_an_if_with_a_scalar_int64_input():
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((4, 3)).astype(np.float32)
    branch = lambda scale, label: helper.make_graph(  # noqa: E731
        [constant_node(f"w_{label}", weight * scale),
         helper.make_node("MatMul", ["x", f"w_{label}"], [f"y_{label}"])],
        label, [], [helper.make_tensor_value_info(f"y_{label}", TensorProto.FLOAT, None)])
    nodes = [
        constant_node("zero", np.array(0, np.int64)),
        helper.make_node("Greater", ["mode", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["out"], then_branch=branch(1.0, "then"),
                         else_branch=branch(-2.0, "else")),
    ]
    graph = helper.make_graph(
        nodes, "wrapped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("mode", TensorProto.INT64, [])],
        # a declared output shape that is wrong: GE trusts its own inference
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [7, 7, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for mode in (3, -1):
        (got,) = ge_run(model, {"x": x, "mode": np.array(mode, np.int64)})
        np.testing.assert_allclose(got, x @ weight * (1.0 if mode > 0 else -2.0), rtol=1e-5)
    assert ge.parse_onnx(model).outputs[0].shape == ("n", 3)


def test_an_old_opset_model_is_upgraded():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "old", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 3
    (got,) = ge_run(model, {"x": np.array([-1, 0, 2], np.float32)})
    np.testing.assert_array_equal(got, [0, 0, 2])
