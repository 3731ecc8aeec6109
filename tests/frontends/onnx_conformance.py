"""ONNX's node conformance suite, through ``ge.backend``: the shared setup.

``known_failures()`` reads the cases that are expected to fail, with their
reasons, from ``docs/onnx-coverage.md`` (written by ``scripts/onnx_coverage.py``),
so that nothing is excluded silently.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COVERAGE = ROOT / "docs" / "onnx-coverage.md"
GOAL = 0.90


def node_case_names() -> list[str]:
    """Names of every node test case the installed onnx generates."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted(case.name for case in load_model_tests(kind="node"))


def known_failures() -> dict[str, str]:
    """{case name: reason} from the coverage document's failure table."""
    if not COVERAGE.exists():
        return {}
    failures = {}
    for line in COVERAGE.read_text().splitlines():
        match = re.match(r"^\| `(test_[A-Za-z0-9_]+)` \| (.*) \|$", line)
        if match:
            failures[match.group(1)] = match.group(2)
    return failures
