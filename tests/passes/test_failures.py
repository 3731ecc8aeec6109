"""Failures are visible: a kernel or inference that raises inside a pass is recorded in
the pass's result (pass, node, error) and printed by the compile report, instead of
silently becoming "not folded"."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ge
from ge.errors import ExecutionError, ShapeError
from ge.ops import create_node, evaluate, get_schema
from ge.passes import PassFailure, PassManager, PassResult, format_report
from ge.passes.folding import ConstantFoldingPass, ShapeFoldingPass


def _boom(message: str, kind: type[Exception] = ValueError) -> Any:
    def kernel(*inputs: Any, **attrs: Any) -> Any:
        raise kind(message)
    return kernel


def constant_chain(dtype: str = "float32") -> ge.Graph:
    """x + Neg(Const): the Neg node ('negate') is foldable."""
    graph = ge.Graph("planted")
    x = create_node("Data", [], {"shape": [3], "dtype": ge.DataType.parse(dtype)}, "x", graph)
    c = create_node("Const", [], {"value": ge.Tensor(np.array([1, 2, 3], dtype))}, "c", graph)
    negated = create_node("Neg", [c], {}, "negate", graph)
    graph.set_outputs([create_node("Add", [x, negated], {}, "y", graph)])
    return graph


def _op_types(graph: ge.Graph) -> dict[str, str]:
    return {node.name: node.op_type for node in graph.nodes}


@pytest.fixture()
def broken_neg(monkeypatch):
    """Neg's reference kernel raises (a planted bug), for the length of one test."""
    monkeypatch.setattr(get_schema("Neg"), "kernel", _boom("planted bug"))


def test_a_kernel_that_raises_in_constant_folding_is_in_the_compile_report(broken_neg):
    executable = ge.compile(constant_chain(), opt_level=1)

    records = {r["pass"]: r for r in executable.report["passes"]}
    assert records["ConstantFoldingPass"]["failures"] == [
        {"pass": "ConstantFoldingPass", "node": "negate", "error": "ValueError: planted bug"}]
    assert _op_types(executable.graph)["negate"] == "Neg"  # left as it was
    text = executable.report_text()
    assert "FAILED in ConstantFoldingPass on node 'negate': ValueError: planted bug" in text
    assert "1 failure(s)" in text


def test_without_a_failure_the_report_has_none():
    executable = ge.compile(constant_chain(), opt_level=3)

    assert all(r["failures"] == [] for r in executable.report["passes"])
    assert "FAILED" not in executable.report_text()
    assert _op_types(executable.graph).get("negate", "Const") == "Const"  # folded


def test_every_folding_pass_that_meets_the_bug_reports_it(broken_neg):
    executable = ge.compile(constant_chain(), opt_level=3)

    failed = [(f["pass"], f["node"]) for r in executable.report["passes"] for f in r["failures"]]
    assert failed == [("ConstantFoldingPass", "negate")] * 2  # level 3 folds twice


def test_a_kernel_bug_of_any_type_is_recorded_with_its_type(monkeypatch):
    monkeypatch.setattr(get_schema("Neg"), "kernel",
                        _boom("'NoneType' has no attribute 'shape'", AttributeError))
    graph = constant_chain()

    result = ConstantFoldingPass().run(graph)

    assert result.failures == [PassFailure("ConstantFoldingPass", "negate",
                                           "AttributeError: 'NoneType' has no attribute 'shape'")]
    assert "left unfolded: 1 (kernel failed)" in result.describe()


def test_the_shape_analysis_reports_a_kernel_that_raises(broken_neg):
    graph = constant_chain("int64")  # small integer vectors are tracked element by element

    records = PassManager([ShapeFoldingPass()]).run(graph)

    assert records[0].as_dict()["failures"] == [
        {"pass": "ShapeFoldingPass", "node": "negate", "error": "ValueError: planted bug"}]


def test_an_inference_that_raises_while_shapes_are_refined_is_reported(monkeypatch):
    graph = constant_chain()

    def refuse(ctx: Any) -> Any:
        raise ShapeError("planted inference bug")

    monkeypatch.setattr(get_schema("Add"), "infer", refuse)
    result = ShapeFoldingPass().run(graph)  # run alone: validation would refuse the graph

    assert [(f.pass_name, f.node, f.error) for f in result.failures] == [
        ("ShapeFoldingPass", "y", "ShapeError: planted inference bug")]


def test_the_reference_interpreter_still_names_the_node(broken_neg):
    graph = constant_chain()
    with pytest.raises(ExecutionError, match="Neg node 'negate': planted bug"):
        evaluate(graph, {"x": np.zeros(3, np.float32)})


def test_results_merge_their_failures_and_reports_of_old_files_still_print():
    first, second = PassResult(), PassResult()
    first.fail("a", ValueError("one"), pass_name="P")
    second.fail("b", ExecutionError("Neg node 'b': two"))
    first.merge(second)
    assert [str(f) for f in first.failures] == [
        "P on node 'a': ValueError: one", " on node 'b': ExecutionError: Neg node 'b': two"]
    old = {"pass": "OldPass", "seconds": 0.001, "nodes_before": 3, "nodes_after": 2,
           "changed": True, "counts": {}, "notes": ["removed 1"]}  # saved before failures
    assert "OldPass" in format_report([old]) and "FAILED" not in format_report([old])


def test_a_rewrite_whose_inference_raises_is_reported_and_leaves_the_match():
    from ge.passes import FunctionRule, Input, Node, Pattern, RewritePass

    def bad_build(match, graph):  # builds a MatMul of mismatched operands: inference refuses
        x = match.value("x")
        wrong = create_node("Const", [], {"value": ge.Tensor(np.ones((7, 2), np.float32))},
                            graph.unique_name("wrong"), graph)
        return create_node("MatMul", [x, wrong], {}, graph.unique_name("mm"), graph).outputs

    rule = FunctionRule("planted", Pattern(Node("Neg", inputs=[Input("x")])), bad_build)
    graph = constant_chain()
    before = _op_types(graph)
    records = PassManager([RewritePass([rule], name="PlantedRewrite")]).run(graph)
    failures = records[0].result.failures
    assert [(f.pass_name, f.node) for f in failures] == [("PlantedRewrite", "negate")]
    assert "ShapeError" in failures[0].error
    assert _op_types(graph) == before and graph.validate()  # nothing half-built is left
    assert "PlantedRewrite on node 'negate'" in format_report([r.as_dict() for r in records])
