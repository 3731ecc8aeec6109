"""ONNX's node conformance suite through ``ge.backend`` (onnx.backend.test.BackendTest).

Every node case runs. The cases listed as failing in ``docs/onnx-coverage.md`` (each
with its reason) are expected failures: a listed case that starts to pass fails this
run (unittest's unexpected success), so the document stays exact.
"""

from __future__ import annotations

import warnings

import onnx.backend.test

import ge.backend
from tests.frontends.onnx_conformance import GOAL, known_failures, node_case_names

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _backend_test = onnx.backend.test.BackendTest(ge.backend, __name__)
for _name in known_failures():
    _backend_test.xfail(f"^{_name}_cpu$")

OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]
# ge.backend runs on the CPU: the generated "_cuda" twins would only report as skipped.
for _attribute in [a for a in vars(OnnxBackendNodeModelTest) if a.endswith("_cuda")]:
    delattr(OnnxBackendNodeModelTest, _attribute)


def test_documented_failures_are_real_cases():
    names = set(node_case_names())
    stale = sorted(set(known_failures()) - names)
    assert not stale, f"docs/onnx-coverage.md lists cases the suite does not have: {stale}"


def test_pass_rate_meets_the_goal():
    total = len(node_case_names())
    failing = len(known_failures())
    assert total == 1884, "the pinned onnx should generate 1,884 node cases"
    assert (total - failing) / total >= GOAL, f"{total - failing} / {total} pass"
