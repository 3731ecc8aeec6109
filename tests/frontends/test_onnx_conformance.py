"""ONNX's conformance suites through ``ge.backend`` (onnx.backend.test.BackendTest).

Every case of the node suite and of the model suites (``simple``,
``pytorch-converted``, ``pytorch-operator``) runs. The cases listed as failing in
``docs/onnx-coverage.md`` (each with its reason) are expected failures: a listed
case that starts to pass fails this run (unittest's unexpected success), so the
document stays exact.
"""

from __future__ import annotations

import warnings

import onnx.backend.test

import ge.backend
from tests.frontends.onnx_conformance import (
    GOAL,
    SUITES,
    case_names,
    known_failures,
    node_case_names,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _backend_test = onnx.backend.test.BackendTest(ge.backend, __name__)
for _name in known_failures():
    _backend_test.xfail(f"^{_name}_cpu$")

OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]
OnnxBackendSimpleModelTest = _backend_test.test_cases["OnnxBackendSimpleModelTest"]
OnnxBackendPyTorchConvertedModelTest = \
    _backend_test.test_cases["OnnxBackendPyTorchConvertedModelTest"]
OnnxBackendPyTorchOperatorModelTest = \
    _backend_test.test_cases["OnnxBackendPyTorchOperatorModelTest"]
# ge.backend runs on the CPU: the generated "_cuda" twins would only report as skipped.
for _case_class in (OnnxBackendNodeModelTest, OnnxBackendSimpleModelTest,
                    OnnxBackendPyTorchConvertedModelTest, OnnxBackendPyTorchOperatorModelTest):
    for _attribute in [a for a in vars(_case_class) if a.endswith("_cuda")]:
        delattr(_case_class, _attribute)

# Cases each suite of the pinned onnx generates.
SUITE_SIZES = {"node": 1884, "simple": 23, "pytorch-converted": 82, "pytorch-operator": 35}


def test_documented_failures_are_real_cases():
    names = {name for kind in SUITES for name in case_names(kind)}
    stale = sorted(set(known_failures()) - names)
    assert not stale, f"docs/onnx-coverage.md lists cases no suite has: {stale}"


def test_every_suite_runs_in_full():
    assert {kind: len(case_names(kind)) for kind in SUITES} == SUITE_SIZES
    classes = {kind: _backend_test.test_cases[name] for kind, name in SUITES.items()}
    for kind, case_class in classes.items():
        generated = [a for a in vars(case_class) if a.startswith("test_") and a.endswith("_cpu")]
        assert len(generated) == SUITE_SIZES[kind], kind


def test_pass_rate_meets_the_goal():
    total = len(node_case_names())
    failing = len(set(known_failures()) & set(node_case_names()))
    assert total == SUITE_SIZES["node"], "the pinned onnx should generate 1,884 node cases"
    assert (total - failing) / total >= GOAL, f"{total - failing} / {total} pass"
