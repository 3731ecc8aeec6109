"""export_onnx writes valid ONNX that onnxruntime runs to the original model's numbers."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest

import ge
from examples import zoo
from tests.examples.test_seed_examples import EXAMPLES
from tests.tolerance import rel_err


def run_with_onnxruntime(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, [np.asarray(a) for a in inputs])))


def assert_matches(got, want, rtol: float, atol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def ge_passes(case) -> ge.Graph | None:
    """The parsed graph when GE runs the case correctly, else None."""
    inputs, expected = case.data_sets[0]
    try:
        graph = ge.parse_onnx(case.model)
        outputs = ge.Session(ge.compile(graph)).run(
            dict(zip([v.name for v in graph.inputs], inputs)))
        for got, want in zip(outputs.values(), expected):
            assert_matches(got, want, case.rtol, case.atol, case.name)
    except (ge.errors.GEError, AssertionError):
        return None
    return graph


def onnxruntime_outputs(model: onnx.ModelProto, inputs: list) -> list[np.ndarray] | None:
    """The original model's outputs by onnxruntime, or None where onnxruntime cannot run it."""
    try:
        return run_with_onnxruntime(model, inputs)
    except Exception:  # noqa: BLE001 - onnxruntime lacks some ops, opsets and forms
        return None


def test_every_node_case_ge_runs_round_trips_through_onnxruntime():
    """parse -> export -> onnxruntime gives what onnxruntime gives on the original model."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    failures, checked = [], 0
    for case in cases:
        graph = ge_passes(case)
        inputs = case.data_sets[0][0]
        original = None if graph is None else onnxruntime_outputs(case.model, inputs)
        if original is None:
            continue
        try:
            exported = ge.export_onnx(graph)
            for got, want in zip(run_with_onnxruntime(exported, inputs), original):
                assert_matches(got, want, case.rtol, case.atol, case.name)
            checked += 1
        except Exception as error:  # noqa: BLE001 - collected and reported together
            failures.append(f"{case.name}: {type(error).__name__}: {error}"[:300])
    assert not failures, "\n".join(failures)
    assert checked > 1000


@pytest.mark.parametrize("name", ["simple_cnn", "resnet18", "mobilenet_v2", "bert"])
def test_real_models_round_trip(exported, name, tmp_path):
    _, path = exported(name, False)
    graph = ge.parse_onnx(path)
    target = tmp_path / f"{name}-ge.onnx"
    ge.export_onnx(graph, target)
    onnx.checker.check_model(onnx.load(str(target)), full_check=True)
    feeds = zoo.example_feeds(name, batch=2, seed=3)
    original = zoo.run_onnxruntime(path, feeds)
    again = zoo.run_onnxruntime(target, feeds)
    for got, want in zip(again, original):
        assert rel_err(got, want) <= 1e-5


def test_the_seeds_nhwc_cnn_exports_through_transposes():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from seed_4_2_cnn import build_cnn_model
    finally:
        sys.path.remove(str(EXAMPLES))
    np.random.seed(3)
    with contextlib.redirect_stdout(io.StringIO()):
        graph = build_cnn_model()
    model = ge.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    images = np.random.default_rng(0).standard_normal((2, 32, 32, 3), dtype=np.float32)
    expected = ge.Session(ge.compile(graph)).run({"input": images})["fc2_softmax"]
    (got,) = run_with_onnxruntime(model, [images])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 0  # still dynamic


def test_export_refuses_what_is_not_a_graph():
    with pytest.raises(ge.errors.GraphError, match="expects a ge.Graph"):
        ge.export_onnx("model.onnx")
