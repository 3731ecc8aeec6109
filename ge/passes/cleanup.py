"""Clean-up passes: dead code, common subexpressions, no-ops, algebraic identities."""

from __future__ import annotations

from ge.ir import Graph, Node
from ge.passes.base import Pass, PassResult

__all__ = ["DeadCodeEliminationPass", "CommonSubexpressionEliminationPass",
           "NoOpEliminationPass", "AlgebraicSimplificationPass"]


class DeadCodeEliminationPass(Pass):
    """Remove every node whose outputs no graph output depends on.

    before: ``y = Relu(x); unused = Exp(x)`` with output ``y`` -> after: ``y = Relu(x)``.
    Graph inputs (``Data`` nodes) are kept even when unused: they are the feed interface.
    """

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        live: set[int] = set()
        stack: list[Node] = [value.producer for value in graph.outputs]
        while stack:
            node = stack.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            stack.extend(node.predecessors())
        dead = [n for n in graph.topological_order() if id(n) not in live and n.op_type != "Data"]
        for node in reversed(dead):
            graph.remove_node(node, force=True)
        if dead:
            kinds = sorted({n.op_type for n in dead})
            result.count("removed", len(dead))
            result.note(f"removed {len(dead)} dead nodes ({', '.join(kinds)})")
        return result


class CommonSubexpressionEliminationPass(Pass):
    """Placeholder until the clean-up family lands: changes nothing."""

    def run(self, graph: Graph) -> PassResult:
        return PassResult()


class NoOpEliminationPass(Pass):
    """Placeholder until the clean-up family lands: changes nothing."""

    def run(self, graph: Graph) -> PassResult:
        return PassResult()


class AlgebraicSimplificationPass(Pass):
    """Placeholder until the clean-up family lands: changes nothing."""

    def run(self, graph: Graph) -> PassResult:
        return PassResult()
