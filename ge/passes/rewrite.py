"""Rewrite rules and the one driver that applies them.

A rule is a pattern, a check that says *why* it refuses a match, and a rewrite
that builds the replacement and returns the values that take the place of the
root's outputs. The driver indexes rules by the op type their pattern starts
from, walks the graph, applies rules until nothing changes (with a guard
against rules that undo each other), removes what the rewrites left unused, and
keeps per-rule statistics: matched, applied, and refused with reasons.
"""

from __future__ import annotations

import abc
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ge.errors import GEError, GraphError
from ge.ir import Graph, Node, Value
from ge.ops.registry import create_node, get_schema
from ge.passes.base import Pass, PassResult
from ge.passes.pattern import Match, Pattern, Refusal

__all__ = ["Rule", "ReplaceWith", "FunctionRule", "RewritePass", "RuleStats", "remove_unused"]


class Rule(abc.ABC):
    """A pattern, a check, and a rewrite."""

    name: str = ""
    pattern: Pattern

    def check(self, match: Match) -> Optional[str]:
        """Why this match must not be rewritten (None: go ahead)."""
        return None

    @abc.abstractmethod
    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        """Add the replacement; return the values that replace the root's outputs."""

    def describe(self, applied: int, example: str) -> str:
        """The report line for ``applied`` rewrites (``example``: the matched op types)."""
        return f"{self.name}: rewrote {applied} {example}"


class FunctionRule(Rule):
    """A rule whose rewrite is a builder function ``(match, graph) -> values``."""

    def __init__(self, name: str, pattern: Pattern,
                 build: Callable[[Match, Graph], Sequence[Value]],
                 check: Optional[Callable[[Match], Optional[str]]] = None,
                 summary: Optional[str] = None) -> None:
        self.name, self.pattern, self._build, self._check = name, pattern, build, check
        self._summary = summary

    def check(self, match: Match) -> Optional[str]:
        return self._check(match) if self._check else None

    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        return self._build(match, graph)

    def describe(self, applied: int, example: str) -> str:
        if self._summary:
            return self._summary.format(count=applied, ops=example)
        return super().describe(applied, example)


class ReplaceWith(Rule):
    """Replace the matched nodes with one registry op of type ``op_type``.

    The new node's inputs are the match's external inputs, mapped by input name
    (``Conv2D.filter`` feeds ``ConvBNReLU.filter``, ``FusedBatchNorm.scale`` feeds
    ``ConvBNReLU.scale``); its attributes are the matched nodes' attributes that
    the new op has. It takes the root's name, so output names stay stable.
    """

    def __init__(self, name: str, pattern: Pattern, op_type: str) -> None:
        self.name, self.pattern, self.op_type = name, pattern, op_type

    def _inputs(self, match: Match) -> Union[list[Optional[Value]], str]:
        schema = get_schema(self.op_type)
        names = {spec.name for spec in schema.inputs}
        external: dict[str, Value] = {}
        for node, index, value in match.external_inputs():
            name = get_schema(node.op_type).input_name(index)
            if name not in names:
                return f"{self.op_type} has no input {name!r} for {node.op_type}'s outside input"
            if name in external and external[name] is not value:
                return f"two different outside inputs are both named {name!r}"
            external[name] = value
        inputs: list[Optional[Value]] = []
        for spec in schema.inputs:
            if spec.name in external:
                inputs.append(external[spec.name])
            elif spec.optional:
                inputs.append(None)
            else:
                return f"no matched input named {spec.name!r} for {self.op_type}"
        while inputs and inputs[-1] is None:
            inputs.pop()
        return inputs

    def _attrs(self, match: Match) -> Union[dict[str, Any], str]:
        schema = get_schema(self.op_type)
        attrs: dict[str, Any] = {}
        for node in match.nodes:
            for key, value in node.attrs.items():
                if key not in schema.attrs or value is None:
                    continue
                if key in attrs and attrs[key] != value:
                    return f"matched nodes disagree on attribute {key!r}"
                attrs[key] = value
        return attrs

    def check(self, match: Match) -> Optional[str]:
        inputs, attrs = self._inputs(match), self._attrs(match)
        return inputs if isinstance(inputs, str) else attrs if isinstance(attrs, str) else None

    def rewrite(self, match: Match, graph: Graph) -> Sequence[Value]:
        inputs, attrs = self._inputs(match), self._attrs(match)
        assert not isinstance(inputs, str) and not isinstance(attrs, str)
        node = create_node(self.op_type, inputs, attrs, graph.unique_name(self.op_type.lower()),
                           graph)
        return node.outputs

    def describe(self, applied: int, example: str) -> str:
        return f"fused {applied} {example} into {self.op_type}"


@dataclass
class RuleStats:
    """How often a rule's pattern matched, was applied, and was refused (with reasons)."""

    matched: int = 0
    applied: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    example: str = ""


def remove_unused(graph: Graph, candidates: Sequence[Node]) -> int:
    """Remove candidates (and what they alone fed) that nothing uses; return how many."""
    removed = 0
    stack = list(candidates)
    while stack:
        node = stack.pop()
        if node.graph is not graph or node.op_type == "Data":
            continue
        if any(value.num_users or value.is_graph_output() for value in node.outputs):
            continue
        producers = node.predecessors()
        graph.remove_node(node)
        removed += 1
        stack.extend(producers)
    return removed


class RewritePass(Pass):
    """Applies a set of rules to a fixed point, visiting only what changed.

    Every node is visited once, in topological order; a rewrite puts back on the
    work list only its neighbourhood: the replacement nodes, the nodes that now
    read them, and the producers of their inputs (whose single-consumer checks
    may now pass). So the work is proportional to the graph plus the changes,
    not to the graph times the number of rounds. ``visits`` counts the nodes the
    last run looked at. The loop guard stops after ``max_rounds`` visits per node
    of the starting graph, as rules that undo each other would otherwise run on.
    """

    def __init__(self, rules: Sequence[Rule], name: Optional[str] = None,
                 max_rounds: int = 16) -> None:
        self.rules = list(rules)
        if name:
            self.name = name
        self.max_rounds = max_rounds
        self.visits = 0
        self._result = PassResult()
        self.stats: dict[str, RuleStats] = {rule.name: RuleStats() for rule in self.rules}
        self._seen_refusals: set[tuple[str, int, str]] = set()
        self._index: dict[Optional[str], list[Rule]] = defaultdict(list)
        for rule in self.rules:
            for op_type in rule.pattern.root_types or (None,):
                self._index[op_type].append(rule)

    def run(self, graph: Graph) -> PassResult:
        result = self._result = PassResult()
        self.stats = {rule.name: RuleStats() for rule in self.rules}
        self._seen_refusals = set()
        self.visits = 0
        order = graph.topological_order()
        budget = self.max_rounds * (len(order) + 1)
        work: deque[Node] = deque(order)
        queued = {id(node) for node in order}
        while work:
            if self.visits >= budget:
                result.notes.append(f"stopped after {self.max_rounds} visits per node "
                                    f"(rules keep firing)")
                break
            node = work.popleft()
            queued.discard(id(node))
            if node.graph is not graph:
                continue
            self.visits += 1
            for rule in self._index.get(node.op_type, []) + self._index.get(None, []):
                changed = self._try(rule, node, graph)
                if changed is not None:
                    for neighbour in changed:
                        if id(neighbour) not in queued:
                            queued.add(id(neighbour))
                            work.append(neighbour)
                    break
        for rule in self.rules:
            stats = self.stats[rule.name]
            if stats.applied:
                result.note(rule.describe(stats.applied, stats.example))
                result.count(rule.name, stats.applied)
        return result

    def _try(self, rule: Rule, node: Node, graph: Graph) -> Optional[list[Node]]:
        """Apply ``rule`` at ``node``; return the nodes whose neighbourhood changed, or None
        when the rule did not apply."""
        stats = self.stats[rule.name]
        found = rule.pattern.match(node)
        if isinstance(found, Refusal):
            if not found.structural:
                self._refuse(rule, node, found.reason)
            return None
        stats.matched += 1
        reason = rule.check(found)
        if reason is not None:
            self._refuse(rule, node, reason)
            return None
        with graph.recording() as added, graph.inserting_before(node):
            try:
                replacements = list(rule.rewrite(found, graph))
            except GEError as error:  # a builder's inference refused: leave the match as it is
                remove_unused(graph, added)
                self._result.fail(node.name, error)
                self._refuse(rule, node, f"the rewrite failed: {error}")
                return None
            if len(replacements) != len(node.outputs):
                raise GraphError(f"rule {rule.name} gave {len(replacements)} values for the "
                                 f"{len(node.outputs)} outputs of {node.op_type} node "
                                 f"{node.name!r}")
            root_name = node.name
            renames = [_redirect(graph, old, new) for old, new in zip(node.outputs, replacements)]
        fresh = {id(n) for n in added}
        producers = [v.producer for n in found.nodes for v in n.inputs
                     if v is not None and id(v.producer) not in fresh]
        remove_unused(graph, found.nodes)
        _take_name(graph, [v for v in replacements if id(v.producer) in fresh], root_name)
        for value, name in renames:
            if value is not None and not graph.has_value(name):
                value.name = name
        stats.applied += 1
        stats.example = stats.example or found.describe()
        return _neighbourhood(graph, [*added, *(v.producer for v in replacements)], producers)

    def _refuse(self, rule: Rule, node: Node, reason: str) -> None:
        """Count a refusal once per node and reason, however often it is seen."""
        key = (rule.name, id(node), reason)
        if key not in self._seen_refusals:
            self._seen_refusals.add(key)
            self.stats[rule.name].refused[reason] += 1


def _neighbourhood(graph: Graph, changed: Sequence[Node], producers: Sequence[Node]) -> list[Node]:
    """``changed`` nodes still in the graph with every node that reads one of them, and the
    ``producers`` still there (a shared constant's other readers are not revisited)."""
    found: dict[int, Node] = {}
    for node in changed:
        if node.graph is not graph:
            continue
        found.setdefault(id(node), node)
        for user in node.successors():
            found.setdefault(id(user), user)
    for node in producers:
        if node.graph is graph:
            found.setdefault(id(node), node)
    return list(found.values())


def _redirect(graph: Graph, old: Value, new: Value) -> tuple[Optional[Value], str]:
    """Make ``old``'s users read ``new``; return (value to take old's name, that name).

    A graph output keeps its name: a fresh replacement takes it; a value that already has
    a name of its own (an input, a constant, another output) feeds an Identity that does.
    """
    if new.name == old.name:  # the rule already handed the name over
        old.replace_all_uses_with(new)
        return None, old.name
    keep = old.has_explicit_name or old.is_graph_output()
    owned = new.has_explicit_name or new.is_graph_output() or \
        new.producer.op_type in ("Data", "Const")
    if old.is_graph_output() and owned and new is not old:
        keeper = create_node("Identity", [new], {}, graph.unique_name("keep_output"), graph)
        for usage in list(old.users):
            usage.node.replace_input_with(usage.input_index, new)
        graph.replace_output(old, keeper.outputs[0])
        return keeper.outputs[0], old.name
    old.replace_all_uses_with(new)
    return (new if keep and not owned else None), old.name


def _take_name(graph: Graph, values: Sequence[Value], name: str) -> None:
    """The replacement's producer takes the replaced root's name when it is free again."""
    if not values:
        return
    producer = values[0].producer
    if producer.graph is graph and producer.op_type not in ("Data", "Const") and \
            not graph.has_node(name):
        graph.rename_node(producer, name)
