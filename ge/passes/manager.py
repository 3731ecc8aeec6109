"""The pass manager: runs passes in order, times them, checks the graph between them.

After each pass the graph's structure is validated, and the nodes the pass
added or rewired are checked against their ops (shapes, dtypes); the whole
graph is checked after the last pass (after every pass when verifying). With
``verify`` the reference interpreter also checks that the pass kept the
outputs, and the first pass that did not is named with the node where the
values first differ. Failures a pass recorded (a kernel or inference that raised on
a node) stay in its record and are printed by ``format_report``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ge.errors import GEError, GraphError, VerificationError
from ge.ir import Graph
from ge.ir import Node as IRNode
from ge.passes.base import Pass, PassResult
from ge.passes.verify import DEFAULT_ATOL, DEFAULT_RTOL, Verifier

__all__ = ["PassManager", "PassRecord", "format_report"]


@dataclass
class PassRecord:
    """One pass's line in the compile report."""

    name: str
    seconds: float
    nodes_before: int
    nodes_after: int
    result: PassResult

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the executable's report."""
        return {"pass": self.name, "seconds": self.seconds, "nodes_before": self.nodes_before,
                "nodes_after": self.nodes_after, "changed": self.result.changed,
                "counts": dict(self.result.counts), "notes": list(self.result.notes),
                "failures": [failure.as_dict() for failure in self.result.failures]}


class PassManager:
    """Runs a sequence of passes over a graph, in place."""

    def __init__(self, passes: Sequence[Pass], *, verify: bool = False,
                 rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL, seed: int = 0) -> None:
        self.passes = list(passes)
        self.verify = verify
        self.rtol, self.atol, self.seed = rtol, atol, seed

    def run(self, graph: Graph) -> list[PassRecord]:
        """Run every pass once, in order; return one record per pass."""
        verifier = Verifier(graph, self.rtol, self.atol, self.seed) if self.verify else None
        expected = verifier.outputs(graph) if verifier else None
        records: list[PassRecord] = []
        for current in self.passes:
            before = graph.clone() if verifier else None
            nodes_before = len(graph)
            started = time.perf_counter()
            with graph.recording(rewired=True) as touched:
                result = current.run(graph)
            seconds = time.perf_counter() - started
            result.name_failures(current.name)
            # each pass's own changes are checked against their ops (every node when
            # verifying); the structure, every time, and the whole graph after the last pass
            self._validate(graph, current, records, None if verifier else touched)
            if verifier is not None and before is not None and expected is not None:
                self._verify(verifier, before, graph, expected, current, records)
            records.append(PassRecord(current.name, seconds, nodes_before, len(graph), result))
        if records and not verifier:
            try:
                graph.validate()
            except GEError as error:
                ran = ", ".join(r.name for r in records)
                raise GraphError(f"the optimized graph is invalid ({error}); passes run: {ran}. "
                                 f"Compile with verify=True to name the pass") from error
        return records

    def _validate(self, graph: Graph, current: Pass, earlier: list[PassRecord],
                  changed: Optional[list[IRNode]] = None) -> None:
        try:
            graph.validate(changed)
        except GEError as error:
            ran = ", ".join(r.name for r in earlier) or "none"
            raise GraphError(f"pass {current.name} left an invalid graph ({error}); passes run "
                             f"before it: {ran}") from error

    def _verify(self, verifier: Verifier, before: Graph, after: Graph,
                expected: list[np.ndarray], current: Pass, earlier: list[PassRecord]) -> None:
        found: Optional[tuple[str, str]] = verifier.first_difference(before, after, expected)
        if found is None:
            return
        node, what = found
        ran = ", ".join(r.name for r in earlier) or "none"
        raise VerificationError(
            f"pass {current.name} changed the graph's outputs beyond rtol={self.rtol}, "
            f"atol={self.atol}: {what}. Passes run before it (verified): {ran}",
            pass_name=current.name, node=node)


def format_report(records: Sequence[dict[str, Any]]) -> str:
    """The compile report as text: one line per pass (``PassRecord.as_dict`` form), a line
    under it per failure it recorded, then the total and the failure count."""
    lines = [f"{'pass':<34} {'ms':>8} {'nodes':>11}  what it did"]
    failed = 0
    for record in records:
        nodes = f"{record['nodes_before']}->{record['nodes_after']}"
        notes = "; ".join(record["notes"]) or ", ".join(
            f"{k} {v}" for k, v in sorted(record["counts"].items())) or "no change"
        lines.append(f"{record['pass']:<34} {record['seconds'] * 1e3:>8.2f} {nodes:>11}  {notes}")
        for failure in record.get("failures", []):
            lines.append(f"  FAILED in {failure['pass']} on node {failure['node']!r}: "
                         f"{failure['error']}")
            failed += 1
    if records:
        total = sum(r["seconds"] for r in records)
        nodes = f"{records[0]['nodes_before']}->{records[-1]['nodes_after']}"
        lines.append(f"{'total':<34} {total * 1e3:>8.2f} {nodes:>11}")
    if failed:
        lines.append(f"{failed} failure(s): a kernel or inference raised; those nodes were "
                     f"left as they were")
    return "\n".join(lines)
