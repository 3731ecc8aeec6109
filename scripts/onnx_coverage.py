"""Run ONNX's conformance suites through ge.backend and write docs/onnx-coverage.md.

    python scripts/onnx_coverage.py            # every suite, every case
    python scripts/onnx_coverage.py relu conv  # only cases whose name contains one of these

The suites are ONNX's node cases (one operator each) and its model suites (``simple``,
``pytorch-converted``, ``pytorch-operator``: small whole models, their data shipped inside
the onnx package). The document lists each suite's pass rate, each ONNX op of the node
suite with the cases that use it, and every failing case with its reason.
tests/frontends/test_onnx_conformance.py reads that failure list: a case not listed must
pass, and a listed case must fail.
"""

from __future__ import annotations

import collections
import sys
import time
import unittest
import warnings
from pathlib import Path

import onnx
import onnx.backend.test
from onnx.backend.test.loader import load_model_tests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ge.backend  # noqa: E402

DOCUMENT = ROOT / "docs" / "onnx-coverage.md"

# Failures GE leaves by design: (what in the reason marks it, the category, why).
OUT_OF_SCOPE = [
    (("STRING", "String", "RegexFullMatch"), "strings",
     "GE's IR holds numeric tensors; text processing belongs before the model"),
    (("TfIdfVectorizer",), "n-gram featurization",
     "a text-pipeline operator (usually fed tokens from string ops), not a network layer"),
    (("Sequence", "sequence_type", "Optional", "optional_type"), "sequences and optionals",
     "GE's IR holds tensors; sequence and optional values are not modelled"),
    (("ai.onnx.preview.training",), "training operators",
     "GE compiles inference graphs; optimizer-update ops are training-time"),
    (("ai.onnx.ml",), "classical ML (ai.onnx.ml)",
     "scikit-learn-style operators are outside a deep-learning graph engine for now"),
    (("ImageDecoder",), "image decoding",
     "decoding JPEG/PNG/WebP needs image codecs GE does not carry"),
    (("Bernoulli", "RandomUniformLike"), "random sampling",
     "outputs are random draws; the cases compare with one generator's stream"),
]


# (load_model_tests kind, the test class BackendTest generates for it); node first.
SUITES = [
    ("node", "OnnxBackendNodeModelTest"),
    ("simple", "OnnxBackendSimpleModelTest"),
    ("pytorch-converted", "OnnxBackendPyTorchConvertedModelTest"),
    ("pytorch-operator", "OnnxBackendPyTorchOperatorModelTest"),
]


def case_ops(kind: str = "node") -> dict[str, set[str]]:
    """{case name: op types its model uses} for one suite."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind=kind)
    ops = {}
    for case in cases:
        if case.model is not None:
            model = case.model
        else:
            model = onnx.load(str(Path(case.model_dir) / "model.onnx"), load_external_data=False)
        ops[case.name] = {node.op_type for node in model.graph.node}
    return ops


def reason_of(trace: str) -> str:
    """The last line of a traceback, short and safe inside a Markdown table cell."""
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    text = lines[-1] if lines else "unknown"
    for index, line in enumerate(lines):
        if line.startswith(("ge.errors.", "AssertionError")):
            text = " ".join(part.strip() for part in lines[index:index + 3])
            break
    if "Mismatched elements" in trace:
        mismatch = [line.strip() for line in lines if "Max absolute difference" in line]
        text = "numbers differ" + (f" ({mismatch[0]})" if mismatch else "")
    text = text.replace("|", "\\|").replace("\n", " ")
    return text[:220]


def run_cases(filters: list[str], test_class: str = "OnnxBackendNodeModelTest") \
        -> tuple[list[str], dict[str, str]]:
    """Run one suite's cases; return (names run, {failing name: reason})."""
    backend_test = onnx.backend.test.BackendTest(ge.backend, "coverage")
    backend_test.exclude("_cuda$")
    case_class = backend_test.test_cases[test_class]
    suite = unittest.TestLoader().loadTestsFromTestCase(case_class)
    tests = [t for t in suite if t.id().endswith("_cpu")
             and (not filters or any(f in t.id() for f in filters))]
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unittest.TestSuite(tests).run(result)
    names = [t.id().rsplit(".", 1)[-1].removesuffix("_cpu") for t in tests]
    failures = {}
    for test, trace in result.failures + result.errors:
        failures[test.id().rsplit(".", 1)[-1].removesuffix("_cpu")] = reason_of(trace)
    return names, failures


Results = dict[str, tuple[list[str], dict[str, str]]]


def write_document(results: Results, ops: dict[str, set[str]]) -> None:
    """Write docs/onnx-coverage.md from every suite's (names, failures)."""
    names, failures = results["node"]
    passed = len(names) - len(failures)
    per_op: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name in names:
        for op in ops.get(name, {"?"}):
            per_op[op][0 if name not in failures else 1] += 1
    lines = [
        "# ONNX conformance: ONNX's backend test suites through `ge.backend`",
        "",
        f"Generated by `scripts/onnx_coverage.py` with onnx {onnx.__version__}.",
        "",
        f"**{passed} / {len(names)} node cases pass ({passed / len(names):.1%}).**",
        "",
        *suite_table(results),
        "",
        "## Ops",
        "",
        "A case counts for every op type its model uses (the `_expanded` cases use the ops",
        "of a function's body), so a case can appear under several ops.",
        "",
        "| op | cases | pass | fail |",
        "|---|---:|---:|---:|",
    ]
    for op in sorted(per_op):
        good, bad = per_op[op]
        lines.append(f"| {op} | {good + bad} | {good} | {bad} |")
    every_failure = {name: reason for _, failed in results.values()
                     for name, reason in failed.items()}
    lines += out_of_scope_section(every_failure)
    lines += ["", "## Failing node cases", "", "| case | reason |", "|---|---|"]
    lines += [f"| `{name}` | {failures[name]} |" for name in sorted(failures)]
    for kind, (_, failed) in results.items():
        if kind == "node":
            continue
        lines += ["", f"## Failing cases of the {kind} models", ""]
        if not failed:
            lines.append("None.")
            continue
        lines += ["| case | reason |", "|---|---|"]
        lines += [f"| `{name}` | {failed[name]} |" for name in sorted(failed)]
    DOCUMENT.parent.mkdir(exist_ok=True)
    DOCUMENT.write_text("\n".join(lines) + "\n")


def suite_table(results: Results) -> list[str]:
    """The pass counts of every suite, as a Markdown table."""
    lines = ["| suite | cases | pass | fail |", "|---|---:|---:|---:|"]
    for kind, (names, failed) in results.items():
        lines.append(f"| {kind} | {len(names)} | {len(names) - len(failed)} | {len(failed)} |")
    return lines


def category_of(reason: str) -> str | None:
    """The out-of-scope category a failure reason falls in, if any."""
    for marks, category, _ in OUT_OF_SCOPE:
        if any(mark in reason for mark in marks):
            return category
    return None


def out_of_scope_section(failures: dict[str, str]) -> list[str]:
    """The document's table of failures judged out of scope, and what is left."""
    counts = collections.Counter(category_of(reason) for reason in failures.values())
    lines = ["", "## Judged out of scope", "", "Failing cases of every suite, by category.", "",
             "| category | cases | why |", "|---|---:|---|"]
    for _, category, why in OUT_OF_SCOPE:
        lines.append(f"| {category} | {counts.get(category, 0)} | {why} |")
    lines += ["", f"Failures outside these categories: {counts.get(None, 0)} "
              f"(listed below with the others)."]
    return lines


def main() -> None:
    """Run, print a summary, and (for a full run) write the document."""
    filters = sys.argv[1:]
    results: Results = {}
    for kind, test_class in SUITES:
        started = time.perf_counter()
        names, failures = run_cases(filters, test_class)
        seconds = time.perf_counter() - started
        for name in sorted(failures):
            print(f"FAIL {name}: {failures[name]}")
        passed = len(names) - len(failures)
        print(f"{kind}: {passed} / {len(names)} passed "
              f"({passed / max(len(names), 1):.1%}) in {seconds:.0f} s")
        results[kind] = (names, failures)
    if not filters:
        write_document(results, case_ops())
        print(f"wrote {DOCUMENT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
