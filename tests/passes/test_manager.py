"""The pass manager (records, validation between passes, the report) and the rewrite driver
(rules indexed by root op, per-rule statistics, refusals with reasons, the loop guard)."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.errors import GraphError
from ge.ir import Graph
from ge.ops import create_node, evaluate
from ge.passes import (
    FunctionRule,
    Input,
    Match,
    Node,
    Pass,
    PassManager,
    PassResult,
    Pattern,
    RewritePass,
    format_report,
    passes_for_level,
)
from ge.passes.cleanup import DeadCodeEliminationPass


def chain(graph_name: str = "chain", peek: bool = False) -> Graph:
    """x -> Neg -> Neg -> Exp (and, with ``peek``, the inner Neg also feeds a second output)."""
    graph = Graph(graph_name)
    x = create_node("Data", [], {"shape": [2, 3]}, "x", graph)
    n1 = create_node("Neg", [x], {}, "n1", graph)
    n2 = create_node("Neg", [n1], {}, "n2", graph)
    outputs = [create_node("Exp", [n2], {}, "e", graph)]
    if peek:
        outputs.append(create_node("Abs", [n1], {}, "peek", graph))
    graph.set_outputs(outputs)
    return graph


def double_negation(check=None) -> FunctionRule:
    """Neg(Neg(x)) -> x."""
    pattern = Pattern(Node("Neg", inputs=[Node("Neg", inputs=[Input("x")])]))
    return FunctionRule("double_negation", pattern, lambda m, g: [m.value("x")], check=check,
                        summary="removed {count} {ops} pairs")


def ops_of(graph: Graph) -> list[str]:
    return [node.op_type for node in graph.topological_order()]


FEED = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) / 6}


def test_rewrite_pass_before_and_after_with_statistics():
    before = chain()
    after = before.clone()
    rewrite = RewritePass([double_negation()], name="Simplify")
    result = rewrite.run(after)
    assert ops_of(before) == ["Data", "Neg", "Neg", "Exp"]
    assert ops_of(after) == ["Data", "Exp"]
    assert after.node("e").inputs[0].name == "x"
    np.testing.assert_allclose(evaluate(after, FEED)["e"], evaluate(before, FEED)["e"])
    stats = rewrite.stats["double_negation"]
    assert (stats.matched, stats.applied, stats.example) == (1, 1, "Neg+Neg")
    assert result.changed and result.counts == {"double_negation": 1}
    assert result.notes == ["removed 1 Neg+Neg pairs"]


def test_refusals_are_counted_with_their_reasons():
    graph = chain(peek=True)
    rewrite = RewritePass([double_negation()])
    result = rewrite.run(graph)
    assert not result.changed and ops_of(graph).count("Neg") == 2
    stats = rewrite.stats["double_negation"]
    assert stats.applied == 0
    assert dict(stats.refused) == {"Neg node 'n1' has another consumer (Abs node 'peek')": 1}


def test_a_rule_check_refuses_and_says_why():
    rewrite = RewritePass([double_negation(check=lambda match: "not today")])
    assert not rewrite.run(chain()).changed
    stats = rewrite.stats["double_negation"]
    assert (stats.matched, stats.applied, dict(stats.refused)) == (1, 0, {"not today": 1})


class CountingPattern(Pattern):
    """A pattern that records which nodes the driver tried it on."""

    def __init__(self, spec) -> None:
        super().__init__(spec)
        self.tried: list[str] = []

    def match(self, node):
        self.tried.append(node.op_type)
        return super().match(node)


def test_rules_are_tried_only_on_their_root_op_type():
    rooted = CountingPattern(Node("Exp", where=lambda n: False))
    anywhere = CountingPattern(Node(None, where=lambda n: False))
    rules = [FunctionRule("rooted", rooted, lambda m, g: []),
             FunctionRule("anywhere", anywhere, lambda m, g: [])]
    RewritePass(rules).run(chain())
    assert rooted.tried == ["Exp"]
    assert sorted(anywhere.tried) == ["Data", "Exp", "Neg", "Neg"]


def test_fixed_point_and_loop_guard():
    # Neg(Neg(Neg(Neg(x)))): two rounds of the rule leave x.
    graph = Graph("four")
    value = create_node("Data", [], {"shape": [3]}, "x", graph)
    for index in range(4):
        value = create_node("Neg", [value], {}, f"n{index}", graph)
    graph.set_outputs([create_node("Exp", [value], {}, "e", graph)])
    rewrite = RewritePass([double_negation()])
    result = rewrite.run(graph)
    assert ops_of(graph) == ["Data", "Exp"] and rewrite.stats["double_negation"].applied == 2
    assert not any("stopped" in note for note in result.notes)

    def again(match: Match, g: Graph):  # Relu -> a new Relu: fires for ever
        return create_node("Relu", [match.value("x")], {}, g.unique_name("relu"), g).outputs

    looping = Graph("loop")
    x = create_node("Data", [], {"shape": [3]}, "x", looping)
    looping.set_outputs([create_node("Relu", [x], {}, "r", looping)])
    guard = RewritePass([FunctionRule("again", Pattern(Node("Relu", inputs=[Input("x")])), again)],
                        max_rounds=5)
    result = guard.run(looping)
    # the guard allows max_rounds visits per node of the starting graph (Data and Relu)
    assert 0 < guard.stats["again"].applied <= 5 * (2 + 1) and guard.visits == 5 * (2 + 1)
    assert "stopped after 5 visits per node (rules keep firing)" in result.notes
    assert ops_of(looping) == ["Data", "Relu"] and looping.validate()


class FlipAddToSub(Pass):
    """A wrong pass: Add -> Sub."""

    def run(self, graph: Graph) -> PassResult:
        result = PassResult()
        for node in list(graph.nodes):
            if node.op_type == "Add":
                x, y = node.inputs
                sub = create_node("Sub", [x, y], {}, graph.unique_name("sub"), graph)
                node.outputs[0].replace_all_uses_with(sub.outputs[0])
                graph.remove_node(node)
                result.count("flipped")
        return result


class BreakShapes(Pass):
    """A broken pass: feeds Relu a value of another shape without re-inferring its output."""

    def run(self, graph: Graph) -> PassResult:
        relu = next(n for n in graph.nodes if n.op_type == "Relu")
        scalar = create_node("Const", [], {"value": ge.Tensor(np.float32(1.0))},
                             graph.unique_name("one"), graph)
        relu.replace_input_with(0, scalar.outputs[0])
        result = PassResult()
        result.note("broke a shape")
        return result


def small() -> Graph:
    """relu(x + x) with a dead Exp branch."""
    graph = Graph("small")
    x = create_node("Data", [], {"shape": [2, 2]}, "x", graph)
    add = create_node("Add", [x, x], {}, "add", graph)
    create_node("Exp", [x], {}, "dead", graph)
    graph.set_outputs([create_node("Relu", [add], {}, "relu", graph)])
    return graph


def test_manager_records_each_pass():
    graph = small()
    records = PassManager([DeadCodeEliminationPass(), FlipAddToSub()]).run(graph)
    assert [r.name for r in records] == ["DeadCodeEliminationPass", "FlipAddToSub"]
    assert [(r.nodes_before, r.nodes_after) for r in records] == [(4, 3), (3, 3)]
    assert all(r.seconds >= 0 for r in records)
    first = records[0].as_dict()
    assert first["changed"] and first["counts"] == {"removed": 1}
    assert first["notes"][0].startswith("removed 1 dead nodes (Exp")
    text = format_report([r.as_dict() for r in records])
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["pass", "ms", "nodes"]
    assert "4->3" in lines[1] and "removed 1 dead nodes (Exp" in lines[1]
    assert "flipped 1" in lines[2]
    assert lines[-1].startswith("total") and "4->3" in lines[-1]


def test_manager_names_the_pass_that_left_an_invalid_graph():
    graph = small()
    with pytest.raises(GraphError, match=r"pass BreakShapes left an invalid graph .*passes run "
                                         r"before it: DeadCodeEliminationPass"):
        PassManager([DeadCodeEliminationPass(), BreakShapes()]).run(graph)


def test_compile_report_lists_the_pipeline_of_each_level():
    graph = small()
    for level in range(4):
        executable = ge.compile(graph, opt_level=level)
        names = [record["pass"] for record in executable.report["passes"]]
        assert names == [p.name for p in passes_for_level(level)]
        assert executable.report["opt_level"] == level
        assert executable.report["nodes_before"] == 4
    assert ge.compile(graph, opt_level=0).report["nodes"] == 4
    text = executable.report_text()
    assert text.startswith("compiled 'small' at opt_level 3: 4 -> ")
    assert "DeadCodeEliminationPass" in text and "removed 1 dead nodes (Exp" in text
    assert len(graph) == 4  # compile works on a copy
    with pytest.raises(ge.errors.CompileError, match="opt_level must be one of"):
        ge.compile(graph, opt_level=7)
