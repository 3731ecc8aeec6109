"""The contract every pass keeps.

A pass takes a graph, changes it in place, and returns a ``PassResult`` saying
whether it changed anything, with counts and one line of plain words per kind
of change ("fused 53 Conv2D+FusedBatchNorm+Relu into FusedConv2D"). Those lines
are what the compile report, ``ge compile --report`` and ``ge info`` show.

When a kernel or an inference function raises inside a pass (constant folding runs
reference kernels), the pass leaves that node as it is and records a ``PassFailure``
(pass, node, error) instead of hiding it: the report lists every one.
"""

from __future__ import annotations

import abc
import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from ge.ir import Graph

__all__ = ["Pass", "PassResult", "PassFailure", "describe_error"]


def describe_error(error: BaseException) -> str:
    """``TypeName: message`` of the error a kernel or inference raised: the original one
    when GE translated it (``ExecutionError`` from a NumPy ``ValueError``)."""
    cause = error.__cause__ if isinstance(error.__cause__, Exception) else error
    return f"{type(cause).__name__}: {cause}"


@dataclass(frozen=True)
class PassFailure:
    """A kernel or inference function that raised inside a pass, on one node."""

    pass_name: str
    node: str
    error: str

    def as_dict(self) -> dict[str, str]:
        """Plain data for the executable's report."""
        return {"pass": self.pass_name, "node": self.node, "error": self.error}

    def __str__(self) -> str:
        return f"{self.pass_name} on node {self.node!r}: {self.error}"


@dataclass
class PassResult:
    """What one run of a pass did, and what failed in it (``failures``)."""

    changed: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    failures: list[PassFailure] = field(default_factory=list)

    def fail(self, node: str, error: BaseException, pass_name: str = "") -> None:
        """Record that a kernel or inference raised ``error`` on ``node`` (the pass left the
        node as it was). The pass manager fills in ``pass_name`` when it is not given."""
        self.failures.append(PassFailure(pass_name, node, describe_error(error)))

    def name_failures(self, pass_name: str) -> None:
        """Give ``pass_name`` to the failures recorded without one."""
        self.failures = [f if f.pass_name else dataclasses.replace(f, pass_name=pass_name)
                         for f in self.failures]

    def note(self, text: str) -> None:
        """Record one line for the report (and mark the graph changed)."""
        self.changed = True
        self.notes.append(text)

    def count(self, key: str, amount: int = 1) -> None:
        """Add to a counter (and mark the graph changed when ``amount`` > 0)."""
        if amount:
            self.changed = True
            self.counts[key] += amount

    def merge(self, other: PassResult) -> None:
        """Fold another result into this one."""
        self.changed = self.changed or other.changed
        self.counts.update(other.counts)
        self.notes.extend(other.notes)
        self.failures.extend(other.failures)

    def describe(self) -> str:
        """The notes, or the counts when there are no notes, or 'no change'."""
        if self.notes:
            return "; ".join(self.notes)
        if self.counts:
            return ", ".join(f"{key} {value}" for key, value in sorted(self.counts.items()))
        return "no change"


class Pass(abc.ABC):
    """A graph-to-graph rewrite that keeps the graph's outputs (within tolerance)."""

    #: the name shown in reports; the class name by default
    name: str = ""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    @abc.abstractmethod
    def run(self, graph: Graph) -> PassResult:
        """Rewrite ``graph`` in place; say what changed."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
