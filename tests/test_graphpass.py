"""The seed's ge.graphpass names: functional runs, rules registered by apply_pattern, the
real passes behind ConstantFoldingPass / DeadCodeEliminationPass, and MemoryPass's settings."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge import graphpass as gp
from ge.errors import UnsupportedOpError, VerificationError
from ge.ops import create_node, evaluate
from ge.passes import Input, Match, cleanup, folding


def dense_graph(extra_reader: bool = False) -> ge.Graph:
    """x -> MatMul(w) -> BiasAdd(b) -> Relu, a dead Exp, and a foldable constant subtree."""
    graph = ge.Graph("dense")
    x = create_node("Data", [], {"shape": [-1, 4]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.full((4, 3), 0.5, np.float32))}, "w",
                    graph)
    half = create_node("Const", [], {"value": ge.Tensor(np.full(3, 0.5, np.float32))}, "half",
                       graph)
    bias = create_node("Add", [half, half], {}, "bias", graph)  # constant: 1.0
    mm = create_node("MatMul", [x, w], {}, "mm", graph)
    biased = create_node("BiasAdd", [mm, bias], {}, "biased", graph)
    create_node("Exp", [x], {}, "dead", graph)
    outputs = [create_node("Relu", [biased], {}, "relu", graph)]
    if extra_reader:
        outputs.append(create_node("Neg", [mm], {}, "peek", graph))
    graph.set_outputs(outputs)
    return graph


FEED = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}


def types(graph: ge.Graph) -> list[str]:
    return sorted(node.op_type for node in graph.nodes)


def same_numbers(before: ge.Graph, after: ge.Graph) -> None:
    want, got = evaluate(before, FEED), evaluate(after, FEED)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_apply_pattern_with_a_node_replacement_fuses_and_leaves_the_input_alone():
    before = dense_graph()
    fusion = gp.GraphPass()
    fusion.apply_pattern(pattern=gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd")]),
                         replacement=gp.Node("MatMulBiasAdd"), name="matmul_biasadd_fusion")
    after = fusion.run(before)
    assert after is not before
    assert types(before) == ["Add", "BiasAdd", "Const", "Const", "Data", "Exp", "MatMul", "Relu"]
    assert types(after) == ["Add", "Const", "Const", "Data", "Exp", "MatMulBiasAdd", "Relu"]
    fused = after.node("biased")  # the replaced root's name
    assert [v.name for v in fused.inputs] == ["x", "w", "bias"]  # a, b, bias by input name
    same_numbers(before, after)
    assert fusion.stats == {"matmul_biasadd_fusion": {"matched": 1, "applied": 1, "refused": {}}}
    assert fusion.last_result is not None
    assert fusion.last_result.notes == ["fused 1 MatMul+BiasAdd into MatMulBiasAdd"]


def test_a_match_whose_inner_node_feeds_something_else_is_refused():
    before = dense_graph(extra_reader=True)
    fusion = gp.GraphPass()
    fusion.apply_pattern(pattern=gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd")]),
                         replacement=gp.Node("MatMulBiasAdd"), name="mm_bias")
    after = fusion.run(before)
    assert types(after) == types(before)
    assert fusion.stats["mm_bias"]["refused"] == {
        "MatMul node 'mm' has another consumer (Neg node 'peek')": 1}


def test_a_builder_function_is_a_replacement():
    before = ge.Graph("negneg")
    x = create_node("Data", [], {"shape": [2, 4]}, "x", before)
    n1 = create_node("Neg", [x], {}, "n1", before)
    n2 = create_node("Neg", [n1], {}, "n2", before)
    before.set_outputs([create_node("Exp", [n2], {}, "e", before)])

    def drop_both(match: Match, graph: ge.Graph):
        return [match.value("x")]

    simplify = gp.GraphPass()
    pattern = gp.Pattern(gp.Node("Neg", inputs=[gp.Node("Neg", inputs=[Input("x")])]))
    simplify.apply_pattern(pattern=pattern, replacement=drop_both, name="double_negation")
    after = simplify.run(before)
    assert types(before) == ["Data", "Exp", "Neg", "Neg"] and types(after) == ["Data", "Exp"]
    same_numbers(before, after)


def test_apply_pattern_refuses_what_it_cannot_build():
    fusion = gp.GraphPass()
    pattern = gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd")])
    with pytest.raises(UnsupportedOpError, match="'NoSuchFusedOp' is not in the op registry"):
        fusion.apply_pattern(pattern=pattern, replacement=gp.Node("NoSuchFusedOp"), name="x")
    with pytest.raises(ValueError, match="exactly one op type"):
        fusion.apply_pattern(pattern=pattern, replacement=gp.Node(("Relu", "Tanh")), name="y")
    with pytest.raises(TypeError, match="must be a gp.Pattern"):
        fusion.apply_pattern(pattern=[gp.Node("Relu")], replacement=gp.Node("Relu"))
    fusion.apply_pattern(pattern=pattern, replacement="Relu", name="same")
    with pytest.raises(ValueError, match="already registered"):
        fusion.apply_pattern(pattern=pattern, replacement="Relu", name="same")
    with pytest.raises(ge.errors.GraphError, match="expects a ge.Graph"):
        fusion.run("graph")


def test_optimization_pass_runs_the_real_passes_on_a_copy():
    assert gp.ConstantFoldingPass is folding.ConstantFoldingPass
    assert gp.DeadCodeEliminationPass is cleanup.DeadCodeEliminationPass
    before = dense_graph()
    optimization = gp.OptimizationPass()
    optimization.add_pass(gp.ConstantFoldingPass())
    optimization.add_pass(gp.DeadCodeEliminationPass())
    after = optimization.run(before)
    assert "Exp" in types(before) and "Exp" not in types(after)
    bias = after.node("biased").inputs[1].producer
    assert bias.op_type == "Const"  # half + half folded
    np.testing.assert_array_equal(bias.attrs["value"].numpy(), np.ones(3, np.float32))
    same_numbers(before, after)
    assert [r.name for r in optimization.records] == ["ConstantFoldingPass",
                                                      "DeadCodeEliminationPass"]
    text = optimization.report_text()
    assert "ConstantFoldingPass" in text and "removed 1 dead nodes" in text
    with pytest.raises(TypeError, match="add_pass expects a pass"):
        optimization.add_pass("ConstantFolding")


def test_optimization_pass_takes_graph_and_memory_passes_and_verifies():
    fusion = gp.GraphPass("Fusions")
    fusion.apply_pattern(pattern=gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd")]),
                         replacement=gp.Node("MatMulBiasAdd"), name="mm_bias")
    memory = gp.MemoryPass()
    memory.enable_inplace(False)
    optimization = gp.OptimizationPass(verify=True)
    optimization.add_pass(fusion)
    optimization.add_pass(memory)
    after = optimization.run(dense_graph())
    assert "MatMulBiasAdd" in types(after)
    assert after.metadata["memory"] == {"memory_reuse": True, "inplace": False}
    assert [r.name for r in optimization.records] == ["Fusions", "MemoryPass"]
    assert "recorded memory options (memory_reuse=True, inplace=False)" in \
        optimization.report_text()


def test_a_wrong_rule_is_caught_when_verifying():
    wrong = gp.GraphPass("WrongPass")
    wrong.apply_pattern(pattern=gp.Pattern([gp.Node("Relu")]), replacement=gp.Node("Neg"),
                        name="relu_is_not_neg")
    optimization = gp.OptimizationPass(verify=True)
    optimization.add_pass(wrong)
    with pytest.raises(VerificationError, match="pass WrongPass changed") as caught:
        optimization.run(dense_graph())
    assert caught.value.node == "relu"


def test_memory_pass_records_its_settings_for_compile():
    before = dense_graph()
    memory = gp.MemoryPass()
    memory.enable_memory_reuse(True)
    memory.enable_inplace(True)
    after = memory.run(before)
    assert types(after) == types(before) and after is not before
    assert after.metadata[gp.MEMORY_OPTIONS_KEY] == {"memory_reuse": True, "inplace": True}
    assert gp.MEMORY_OPTIONS_KEY not in before.metadata
    memory.enable_memory_reuse(False)
    assert memory.run(before).metadata["memory"]["memory_reuse"] is False
    restored = ge.Graph.from_json(after.to_json())  # the settings travel with the graph
    assert restored.metadata["memory"] == {"memory_reuse": True, "inplace": True}
    executable = ge.compile(after)
    assert executable.graph.metadata["memory"] == {"memory_reuse": True, "inplace": True}


def test_a_replacement_that_cannot_take_every_input_is_refused():
    before = ge.Graph("mul_add")
    x, y, z = (create_node("Data", [], {"shape": [3]}, n, before) for n in "xyz")
    product = create_node("Mul", [x, y], {}, "product", before)
    before.set_outputs([create_node("Add", [product, z], {}, "total", before)])
    wrong = gp.GraphPass()
    wrong.apply_pattern(pattern=gp.Pattern([gp.Node("Mul"), gp.Node("Add")]),
                        replacement=gp.Node("Add"), name="mul_add_into_add")
    after = wrong.run(before)  # Mul.y and Add.y are both "y": z has nowhere to go
    assert types(after) == types(before)
    assert wrong.stats["mul_add_into_add"]["applied"] == 0


def test_a_replacement_node_may_set_attributes():
    before = dense_graph()
    fusion = gp.GraphPass()
    fusion.apply_pattern(pattern=gp.Pattern([gp.Node("MatMul"), gp.Node("BiasAdd"),
                                             gp.Node("Relu")]),
                         replacement=gp.Node("MatMulBiasAdd", attrs={"activation": "relu"}),
                         name="matmul_bias_relu")
    after = fusion.run(before)
    fused = after.node("relu")
    assert fused.op_type == "MatMulBiasAdd" and fused.attrs["activation"] == "relu"
    assert "Relu" not in types(after)
    same_numbers(before, after)
