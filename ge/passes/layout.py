"""Placeholder: this family of passes lands in its own change."""

from __future__ import annotations

from ge.ir import Graph
from ge.passes.base import Pass, PassResult


class LayoutPass(Pass):
    """Placeholder: changes nothing yet."""

    def run(self, graph: Graph) -> PassResult:
        return PassResult()
