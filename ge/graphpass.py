"""The seed's ``ge.graphpass`` module (imported as ``gp``): thin aliases over ``ge.passes``.

The article (section 5.1) writes its optimizations with these names::

    fusion_pass = gp.GraphPass()
    fusion_pass.apply_pattern(pattern=gp.Pattern([gp.Node("Conv2D"), gp.Node("FusedBatchNorm"),
                                                  gp.Node("Relu")]),
                              replacement=gp.Node("ConvBNReLU"), name="conv_bn_relu_fusion")
    optimized = fusion_pass.run(graph)

    optimization_pass = gp.OptimizationPass()
    optimization_pass.add_pass(gp.ConstantFoldingPass())
    optimized = optimization_pass.run(graph)

Every ``run(graph)`` here is functional (docs/seed-api.md, D10): it returns a new
graph and leaves its argument untouched, so "original nodes - optimized nodes" is
a real number. The work is done by ``ge.passes``: ``apply_pattern`` registers a
rule (D11) that ``run`` applies with the one rewrite driver (``RewritePass``),
and ``OptimizationPass`` runs its passes with the ``PassManager`` (timing,
validation after each pass, optional numerical verification). ``MemoryPass``
only records its settings on the graph; nothing in GE reads them (D12).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from ge.errors import GraphError, UnsupportedOpError
from ge.ir import MEMORY_OPTIONS_KEY, Graph, Value
from ge.ops import has_op
from ge.passes import (
    FunctionRule,
    Match,
    Pass,
    PassManager,
    PassRecord,
    PassResult,
    Pattern,
    ReplaceWith,
    RewritePass,
    Rule,
    format_report,
)
from ge.passes.cleanup import DeadCodeEliminationPass
from ge.passes.folding import ConstantFoldingPass
from ge.passes.pattern import Constant, Input, Node

__all__ = [
    "Constant", "ConstantFoldingPass", "DeadCodeEliminationPass", "GraphPass", "Input",
    "MEMORY_OPTIONS_KEY", "MemoryPass", "Node", "OptimizationPass", "Pattern",
]

#: where ``MemoryPass`` records its settings in ``Graph.metadata`` (``ge.compile`` does not read it)

Builder = Callable[[Match, Graph], Sequence[Value]]
Replacement = Union[Node, str, Builder, Rule]


def _graph_argument(graph: Any, who: str) -> Graph:
    if not isinstance(graph, Graph):
        raise GraphError(f"{who}.run expects a ge.Graph, got {type(graph).__name__}")
    return graph


class GraphPass:
    """A set of fusion rules registered with ``apply_pattern`` and applied by ``run``.

    ``run(graph)`` rewrites a copy of ``graph`` until no rule applies and returns
    the copy; each match becomes the replacement (before: ``Conv2D -> FusedBatchNorm
    -> Relu``; after: one ``ConvBNReLU`` taking the matched nodes' outside inputs by
    name and their attributes, with the last matched node's name). A match is
    refused when an inner node feeds anything outside the match or is a graph
    output; ``last_result`` and ``stats`` say what was applied and refused, and why.
    """

    def __init__(self, name: str = "GraphPass") -> None:
        self.name = name
        self.rules: list[Rule] = []
        self.last_result: Optional[PassResult] = None
        self._driver: Optional[RewritePass] = None

    def apply_pattern(self, *, pattern: Pattern, replacement: Replacement,
                      name: Optional[str] = None) -> Rule:
        """Register a rule: ``pattern`` is rewritten into ``replacement`` when ``run`` is called.

        ``replacement`` is a ``gp.Node("OpType")`` (or the op type as a string): the
        match becomes one node of that registry op, with the matched nodes' attributes
        the op has and the ``gp.Node``'s own ``attrs`` over them; or a builder function
        ``(match, graph) -> values`` returning the values that replace the match's
        root outputs; or a ready ``ge.passes.Rule``. Raises ``UnsupportedOpError``
        when the replacement op type is not in the registry.
        """
        if not isinstance(pattern, Pattern):
            raise TypeError(f"apply_pattern: pattern must be a gp.Pattern, "
                            f"got {type(pattern).__name__}")
        rule_name = name or f"rule_{len(self.rules)}"
        rule = _make_rule(rule_name, pattern, replacement)
        if any(existing.name == rule.name for existing in self.rules):
            raise ValueError(f"apply_pattern: a rule named {rule.name!r} is already registered")
        self.rules.append(rule)
        self._driver = None
        return rule

    def as_pass(self) -> RewritePass:
        """The registered rules as one ``ge.passes`` pass (mutates the graph it runs on)."""
        if self._driver is None:
            self._driver = RewritePass(self.rules, name=self.name)
        return self._driver

    def run(self, graph: Graph) -> Graph:
        """A rewritten copy of ``graph``; ``graph`` itself is left as it was."""
        working = _graph_argument(graph, "GraphPass").clone()
        driver = RewritePass(self.rules, name=self.name)
        self.last_result = driver.run(working)
        self._driver = driver
        working.validate()
        return working

    @property
    def stats(self) -> dict[str, Any]:
        """Per rule, from the last ``run``: matched, applied, and refusals by reason."""
        if self._driver is None:
            return {}
        return {name: {"matched": s.matched, "applied": s.applied, "refused": dict(s.refused)}
                for name, s in self._driver.stats.items()}


def _make_rule(name: str, pattern: Pattern, replacement: Replacement) -> Rule:
    if isinstance(replacement, Rule):
        return replacement
    if isinstance(replacement, (Node, str)):
        op_type = _replacement_op_type(replacement)
        if not has_op(op_type):
            raise UnsupportedOpError(
                f"apply_pattern({name!r}): replacement op type {op_type!r} is not in the op "
                f"registry")
        extra = dict(replacement.attrs) if isinstance(replacement, Node) else {}
        return _ReplaceWithAttrs(name, pattern, op_type, extra) if extra else \
            ReplaceWith(name, pattern, op_type)
    if callable(replacement):
        return FunctionRule(name, pattern, replacement)
    raise TypeError(f"apply_pattern: replacement must be a gp.Node, an op type, a builder "
                    f"function or a Rule, got {type(replacement).__name__}")


class _ReplaceWithAttrs(ReplaceWith):
    """``ReplaceWith`` whose new node also gets the replacement ``gp.Node``'s attributes
    (``gp.Node("MatMulBiasAdd", attrs={"activation": "relu"})``), over the matched ones."""

    def __init__(self, name: str, pattern: Pattern, op_type: str, extra: dict[str, Any]) -> None:
        super().__init__(name, pattern, op_type)
        self.extra = extra

    def _attrs(self, match: Match) -> Union[dict[str, Any], str]:
        attrs = super()._attrs(match)
        return attrs if isinstance(attrs, str) else {**attrs, **self.extra}


def _replacement_op_type(replacement: Union[Node, str]) -> str:
    if isinstance(replacement, str):
        return replacement
    if replacement.op_types is None or len(replacement.op_types) != 1:
        raise ValueError(f"a replacement gp.Node needs exactly one op type, got "
                         f"{replacement.label!r}")
    return replacement.op_types[0]


class MemoryPass:
    """The seed's memory options, recorded on the graph for ``ge.compile``'s memory plan.

    ``run`` changes no node: it returns a copy of the graph whose
    ``metadata["memory"]`` is ``{"memory_reuse": bool, "inplace": bool}`` (both True
    unless switched off), with ``"batch_slicing": False`` beside them where that is
    switched off. The memory plan reads
    them: without reuse every value has bytes of its own, without in-place no op writes
    over an input it last reads, and without batch slicing no run of steps goes a few
    samples at a time (``ge.compiler.slicing``; GE's own option, beside the seed's two).
    """

    def __init__(self) -> None:
        self.memory_reuse = True
        self.inplace = True
        self.batch_slicing = True

    def enable_memory_reuse(self, enabled: bool = True) -> None:
        """Whether buffers whose lifetimes do not overlap may share memory."""
        self.memory_reuse = bool(enabled)

    def enable_inplace(self, enabled: bool = True) -> None:
        """Whether an op may write into an input it last reads."""
        self.inplace = bool(enabled)

    def enable_batch_slicing(self, enabled: bool = True) -> None:
        """Whether runs of steps whose values outgrow the cache may go a few samples of
        the batch at a time."""
        self.batch_slicing = bool(enabled)

    def options(self) -> dict[str, bool]:
        """The settings as they are recorded on the graph."""
        options = {"memory_reuse": self.memory_reuse, "inplace": self.inplace}
        if not self.batch_slicing:
            options["batch_slicing"] = False
        return options

    def record(self, graph: Graph) -> None:
        """Write the settings into ``graph.metadata`` (in place)."""
        graph.metadata[MEMORY_OPTIONS_KEY] = self.options()

    def run(self, graph: Graph) -> Graph:
        """A copy of ``graph`` carrying the memory settings; ``graph`` is left as it was."""
        working = _graph_argument(graph, "MemoryPass").clone()
        self.record(working)
        return working


class _RecordMemoryOptions(Pass):
    """Inside an ``OptimizationPass``: no node changes; the memory settings go on the graph."""

    name = "MemoryPass"

    def __init__(self, memory: MemoryPass) -> None:
        self.memory = memory

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        self.memory.record(graph)
        options = ", ".join(f"{k}={v}" for k, v in self.memory.options().items())
        result.notes.append(f"recorded memory options ({options})")
        return result


PassLike = Union[Pass, GraphPass, MemoryPass]


class OptimizationPass:
    """A container of passes run in order by ``run`` on a copy of the graph.

    ``add_pass`` takes any ``ge.passes`` pass (``gp.ConstantFoldingPass()``,
    ``gp.DeadCodeEliminationPass()``, ...), a ``gp.GraphPass`` or a
    ``gp.MemoryPass``. With ``verify=True`` each pass is checked on the reference
    interpreter and the first that changes the outputs raises
    ``VerificationError``. ``records`` and ``report_text()`` describe the last run.
    """

    def __init__(self, *, verify: bool = False) -> None:
        self.passes: list[Pass] = []
        self.verify = verify
        self.records: list[PassRecord] = []

    def add_pass(self, graph_pass: PassLike) -> None:
        """Append a pass to the sequence."""
        if isinstance(graph_pass, GraphPass):
            self.passes.append(graph_pass.as_pass())
        elif isinstance(graph_pass, MemoryPass):
            self.passes.append(_RecordMemoryOptions(graph_pass))
        elif isinstance(graph_pass, Pass):
            self.passes.append(graph_pass)
        else:
            raise TypeError(f"add_pass expects a pass, got {type(graph_pass).__name__}")

    def run(self, graph: Graph) -> Graph:
        """The optimized copy of ``graph``; ``graph`` itself is left as it was."""
        working = _graph_argument(graph, "OptimizationPass").clone()
        self.records = PassManager(self.passes, verify=self.verify).run(working)
        return working

    def report_text(self) -> str:
        """Per pass of the last run: time, nodes before and after, what it did."""
        return format_report([record.as_dict() for record in self.records])
