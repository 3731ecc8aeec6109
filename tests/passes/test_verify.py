"""Numerical verification: every pass of every level keeps the zoo models' outputs, and a
wrong pass planted in a pipeline is named, with the first node whose value differs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import ge
from ge.errors import VerificationError
from ge.ir import Graph
from ge.ops import create_node
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
    passes_for_level,
)
from ge.passes.cleanup import DeadCodeEliminationPass


@pytest.fixture(scope="module")
def zoo_graphs(tmp_path_factory) -> dict[str, Graph]:
    """simple_cnn, a one-layer BERT encoder and a ResNet of one BasicBlock per stage (ResNet-18
    has two; batch 1: the verifier runs each model once per pass), exported and parsed."""
    from examples.zoo import BasicBlock, BertEncoder, ResNet, _build, export_onnx

    folder = tmp_path_factory.mktemp("verify")
    small_bert = _build(lambda: BertEncoder(layers=1), 0)
    small_resnet = _build(lambda: ResNet(BasicBlock, [1, 1, 1, 1]), 0)
    models = {"simple_cnn": (None, True), "bert": (small_bert, True),
              "resnet18": (small_resnet, False)}
    return {name: ge.parse_onnx(export_onnx(name, folder / f"{name}.onnx", model=model,
                                            dynamic_batch=dynamic))
            for name, (model, dynamic) in models.items()}


@pytest.mark.parametrize("name", ["simple_cnn", "bert", "resnet18"])
def test_every_pass_keeps_the_outputs_of_zoo_models(zoo_graphs, name):
    graph = zoo_graphs[name]
    executable = ge.compile(graph, opt_level=3, verify=True)
    assert executable.report["verified"] is True
    assert [r["pass"] for r in executable.report["passes"]] == \
        [p.name for p in passes_for_level(3)]


def test_the_seed_cnn_verifies():
    from tests.examples.test_seed_examples import load_example

    np.random.seed(3)
    graph = load_example("seed_4_2_cnn").CNNGraphBuilder("cnn").build([-1, 32, 32, 3], 10)
    ge.compile(graph, opt_level=3, verify=True)


def flip_add(victim: str) -> RewritePass:
    """A wrong rewrite: the Add named ``victim`` becomes a Sub (which keeps its name)."""

    def build(match: Match, graph: Graph):
        return create_node("Sub", [match.value("x"), match.value("y")], {},
                           graph.unique_name("flipped"), graph).outputs

    pattern = Pattern(Node("Add", inputs=[Input("x"), Input("y")],
                           where=lambda node: node.name == victim))
    return RewritePass([FunctionRule("flip_add", pattern, build)], name="FlipAddPass")


def residual_adds(graph: Graph) -> list[str]:
    return [n.name for n in graph.topological_order() if n.op_type == "Add"]


def test_a_planted_wrong_pass_is_named_with_the_first_differing_node(zoo_graphs):
    graph = zoo_graphs["bert"].clone()
    adds = residual_adds(graph)
    victim = adds[len(adds) // 2]  # in the middle of the network
    manager = PassManager([DeadCodeEliminationPass(), flip_add(victim), DeadCodeEliminationPass()],
                          verify=True)
    with pytest.raises(VerificationError) as caught:
        manager.run(graph)
    error = caught.value
    assert error.pass_name == "FlipAddPass"
    assert error.node == victim  # the Sub took the Add's node and value names
    assert f"computed by Sub node {victim!r}" in str(error)
    assert "Passes run before it (verified): DeadCodeEliminationPass" in str(error)


class RenameAndFlip(Pass):
    """A wrong pass whose new node has a new name: the first shared value downstream differs."""

    def run(self, graph: Graph) -> PassResult:
        add = graph.node("add")
        sub = create_node("Sub", list(add.inputs), {}, "brand_new", graph)
        add.outputs[0].replace_all_uses_with(sub.outputs[0])
        graph.remove_node(add)
        result = PassResult()
        result.note("flipped an Add")
        return result


def test_a_new_node_is_located_through_the_first_shared_value_downstream():
    graph = Graph("renamed")
    x = create_node("Data", [], {"shape": [4]}, "x", graph)
    y = create_node("Data", [], {"shape": [4]}, "y", graph)
    add = create_node("Add", [x, y], {}, "add", graph)
    graph.set_outputs([create_node("Exp", [create_node("Relu", [add], {}, "relu", graph)], {},
                                   "exp", graph)])
    with pytest.raises(VerificationError) as caught:
        PassManager([RenameAndFlip()], verify=True).run(graph)
    assert caught.value.pass_name == "RenameAndFlip" and caught.value.node == "relu"
    assert "Passes run before it (verified): none" in str(caught.value)


def test_compile_with_verify_names_a_wrong_pass_in_its_pipeline(monkeypatch, zoo_graphs):
    compiling = importlib.import_module("ge.compiler.compile")  # the package exports compile()

    graph = zoo_graphs["simple_cnn"].clone()
    x = graph.outputs[0]
    graph.set_outputs([create_node("Add", [x, x], {}, "doubled", graph)])
    victim = "doubled"
    planted = lambda level: passes_for_level(level) + [flip_add(victim)]  # noqa: E731
    monkeypatch.setattr(compiling, "passes_for_level", planted)
    with pytest.raises(VerificationError, match="pass FlipAddPass changed the graph's outputs"):
        ge.compile(graph, opt_level=1, verify=True)
    ge.compile(graph, opt_level=1)  # without verify the wrong pass goes unnoticed
    assert residual_adds(graph)[-1] == victim  # the user's graph is untouched either way


def test_tolerance_is_relative_to_the_output_scale():
    graph = Graph("scale")
    x = create_node("Data", [], {"shape": [3]}, "x", graph)
    graph.set_outputs([create_node("Exp", [x], {}, "e", graph)])

    class Nudge(Pass):
        """Adds a tiny constant to the output: within tolerance at rtol=1e-2."""

        def run(self, g: Graph) -> PassResult:
            exp = g.node("e")
            tiny = create_node("Const", [], {"value": ge.Tensor(np.float32(1e-4))}, "tiny", g)
            add = create_node("Add", [exp, tiny], {}, "nudged", g)
            g.replace_output(exp.outputs[0], add.outputs[0])
            return PassResult(changed=True)

    PassManager([Nudge()], verify=True, rtol=1e-2, atol=1e-3).run(graph.clone())
    with pytest.raises(VerificationError):
        PassManager([Nudge()], verify=True, rtol=1e-7, atol=1e-7).run(graph.clone())
