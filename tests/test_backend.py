"""``ge.backend``, ONNX's backend interface: it runs models, and every way of calling it
wrongly gives a ``ge.errors`` type (never a builtin exception)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge.backend as backend
from ge.errors import GEError, GERuntimeError, InputError, ModelFormatError, UnsupportedOpError

RELU = helper.make_node("Relu", ["x"], ["y"])


def relu_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [RELU], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


X = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)


def test_a_model_runs_from_a_list_a_dict_one_array_and_bytes():
    want = np.maximum(X, 0)
    rep = backend.prepare(relu_model())
    for inputs in ([X], (X,), {"x": X}, X):
        np.testing.assert_array_equal(rep.run(inputs)[0], want)
    np.testing.assert_array_equal(
        backend.run_model(relu_model().SerializeToString(), [X])[0], want)
    np.testing.assert_array_equal(backend.run_node(RELU, [X])[0], want)


@pytest.mark.parametrize(("device", "supported"), [
    ("CPU", True), ("cpu", True), ("CPU:0", True), ("CUDA", False), ("CUDA:1", False),
    ("bogus", False), ("", False), (None, False), (3, False)])
def test_supports_device_answers_without_raising(device, supported):
    assert backend.supports_device(device) is supported


CALLS: list[tuple[str, type[GEError], Callable[[], Any]]] = [
    ("a GPU", GERuntimeError, lambda: backend.prepare(relu_model(), "CUDA")),
    ("an unknown device", GERuntimeError, lambda: backend.prepare(relu_model(), "bogus")),
    ("run_model on a GPU", GERuntimeError, lambda: backend.run_model(relu_model(), [X], "CUDA")),
    ("run_node on a GPU", GERuntimeError, lambda: backend.run_node(RELU, [X], device="CUDA")),
    ("a number for a model", ModelFormatError, lambda: backend.prepare(42)),
    ("garbage bytes", ModelFormatError, lambda: backend.prepare(b"not a model")),
    ("a missing file", ModelFormatError, lambda: backend.prepare("/no/such/model.onnx")),
    ("a string for a node", ModelFormatError, lambda: backend.run_node("Relu", [X])),
    ("an op GE lacks", UnsupportedOpError,
     lambda: backend.run_node(helper.make_node("NoSuchOp", ["x"], ["y"]), [X])),
    ("too many inputs", InputError, lambda: backend.prepare(relu_model()).run([X, X])),
    ("no inputs", InputError, lambda: backend.prepare(relu_model()).run([])),
    ("None for inputs", InputError, lambda: backend.prepare(relu_model()).run(None)),
    ("a number for inputs", InputError, lambda: backend.prepare(relu_model()).run(5)),
    ("a string for inputs", InputError, lambda: backend.prepare(relu_model()).run("x")),
    ("an unknown input name", InputError, lambda: backend.prepare(relu_model()).run({"z": X})),
    ("the wrong dtype", InputError,
     lambda: backend.prepare(relu_model()).run([X.astype(np.int64)])),
    ("the wrong shape", InputError, lambda: backend.prepare(relu_model()).run([X[:1]])),
]


@pytest.mark.parametrize(("what", "error", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_a_bad_call_raises_a_ge_error(what, error, call):
    with pytest.raises(error) as raised:
        call()
    assert type(raised.value).__module__ == "ge.errors", what
