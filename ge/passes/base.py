"""The contract every pass keeps.

A pass takes a graph, changes it in place, and returns a ``PassResult`` saying
whether it changed anything, with counts and one line of plain words per kind
of change ("fused 53 Conv2D+FusedBatchNorm+Relu into FusedConv2D"). Those lines
are what the compile report, ``ge compile --report`` and ``ge info`` show.
"""

from __future__ import annotations

import abc
from collections import Counter
from dataclasses import dataclass, field

from ge.ir import Graph

__all__ = ["Pass", "PassResult"]


@dataclass
class PassResult:
    """What one run of a pass did."""

    changed: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

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
