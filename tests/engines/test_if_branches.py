"""``If`` on the NumPy engine: each branch compiled into a session of its own, the
enclosing graph's constants made the branch's constants, against the reference
interpreter running the same node."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.engines.numpy import control
from ge.ir import Tensor
from ge.ops import create_node
from ge.ops.control_flow import if_kernel

RNG = np.random.default_rng(4)


def _branch(name: str, weight_shape: tuple[int, ...], activation: str) -> ge.Graph:
    """x [64, 64] @ w + b, then ``activation``; x, w and b are the branch's inputs."""
    graph = ge.Graph(name)
    x = create_node("Data", [], {"shape": [64, 64]}, "x", graph)
    w = create_node("Data", [], {"shape": list(weight_shape)}, "w", graph)
    b = create_node("Data", [], {"shape": [weight_shape[1]]}, "b", graph)
    product = create_node("MatMul", [x, w], {}, "product", graph)
    biased = create_node("Add", [product, b], {}, "biased", graph)
    graph.set_outputs([create_node(activation, [biased], {}, "out", graph)])
    return graph


def _if_node() -> tuple[ge.Graph, dict[str, np.ndarray]]:
    graph = ge.Graph("outer")
    cond = create_node("Data", [], {"shape": [], "dtype": "bool"}, "cond", graph)
    x = create_node("Data", [], {"shape": [64, 64]}, "x", graph)
    weights = {name: (RNG.standard_normal(shape) * 0.2).astype(np.float32)
               for name, shape in (("w", (64, 32)), ("b", (32,)))}
    constants = [create_node("Const", [], {"value": Tensor(v)}, name, graph)
                 for name, v in weights.items()]
    node = create_node("If", [cond, x, *constants],
                       {"then_branch": _branch("then", (64, 32), "Relu"),
                        "else_branch": _branch("else", (64, 32), "Tanh")}, "choice", graph)
    graph.set_outputs([node])
    return graph, weights


@pytest.mark.parametrize("taken", [True, False])
def test_a_compiled_branch_gives_the_interpreter_s_result(taken):
    graph, weights = _if_node()
    node = graph.node("choice")
    kernel = control.bind_if(node)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    got = kernel([np.array(taken), x, weights["w"], weights["b"]])
    want = if_kernel(np.array(taken), x, weights["w"], weights["b"],
                     then_branch=node.attrs["then_branch"],
                     else_branch=node.attrs["else_branch"])
    assert len(got) == 1
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_the_enclosing_constants_become_the_branch_s_constants():
    graph, weights = _if_node()
    branch = control._Branch(graph.node("choice"), "then_branch")
    assert branch.feeds == ["x"]  # w and b are constants inside the branch now
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    branch.run([x, weights["w"], weights["b"]])
    histogram = branch.session.executable.engine_histogram()
    assert set(histogram) - {"numpy"}, histogram  # the product with its constant weight: onednn
    executable = ge.compile(graph)
    out = ge.Session(executable).run({"cond": np.array(True), "x": x})["choice"]
    np.testing.assert_allclose(out, np.maximum(x @ weights["w"] + weights["b"], 0),
                               rtol=1e-5, atol=1e-5)


def test_a_branch_that_did_not_import_raises_when_taken():
    graph, weights = _if_node()
    node = graph.node("choice")
    node.attrs["else_error"] = "ShapeError: the LSTM 'cell' got rank 4"
    kernel = control.bind_if(node)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    kernel([np.array(True), x, weights["w"], weights["b"]])
    with pytest.raises(ge.errors.ExecutionError, match="else_branch.*cell"):
        kernel([np.array(False), x, weights["w"], weights["b"]])


def test_a_branch_that_does_not_compile_runs_on_the_reference(monkeypatch):
    import ge.compiler

    def refuse(graph, **options):
        raise ge.errors.CompileError("no engine today")

    monkeypatch.setattr(ge.compiler, "compile", refuse)
    graph, weights = _if_node()
    node = graph.node("choice")
    kernel = control.bind_if(node)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="reference interpreter"):
        got = kernel([np.array(False), x, weights["w"], weights["b"]])
    want = if_kernel(np.array(False), x, weights["w"], weights["b"],
                     then_branch=node.attrs["then_branch"],
                     else_branch=node.attrs["else_branch"])
    np.testing.assert_array_equal(got[0], want[0])
