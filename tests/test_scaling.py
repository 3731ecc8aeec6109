"""Parsing and compiling grow linearly with graph size: checked by counting work, not time.

Each test runs the same pipeline on a graph and on one four times larger and counts
what the front half does: walks over the whole graph (which must not grow with the
graph: a walk per node is how quadratic time creeps in), reads of node inputs and of
value users (the unit of work of passes and patterns), the nodes the rewrite driver
visits, and look-ups by name (which must not walk the graph at all).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnxruntime
import pytest

import ge
from examples import synthetic
from ge.ir import Graph, Node, Value
from ge.passes import RewritePass
from ge.passes.cleanup import NoOpEliminationPass
from ge.passes.fusion_transformer import LayerNormFusionPass, MatMulBiasFusionPass

SMALL, FACTOR = 200, 4
#: allowed growth of the work per node from the small graph to the large one
SLACK = 1.15


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts whole-graph walks, input reads and user reads while a test runs."""
    counts: Counter[str] = Counter()
    walk, inputs, users = Graph._walk, Node.inputs, Value.users

    def counted_walk(graph: Graph) -> Iterator[Node]:
        counts["walks"] += 1
        return walk(graph)

    def counted(key: str, original: property) -> property:
        def read(self: Any) -> Any:
            counts[key] += 1
            return original.fget(self)  # type: ignore[misc]
        return property(read)

    monkeypatch.setattr(Graph, "_walk", counted_walk)
    monkeypatch.setattr(Node, "inputs", counted("inputs", inputs))
    monkeypatch.setattr(Value, "users", counted("users", users))
    return counts


def measure(work: Counter[str], step: Callable[[], Any]) -> Counter[str]:
    work.clear()
    step()
    return Counter(work)


def assert_linear(small: Counter[str], large: Counter[str], what: str) -> None:
    assert large["walks"] <= small["walks"] + 2, (
        f"{what}: whole-graph walks grew from {small['walks']} to {large['walks']} "
        f"when the graph grew {FACTOR}x")
    for key in ("inputs", "users"):
        assert large[key] <= FACTOR * SLACK * max(small[key], 1), (
            f"{what}: {key} reads grew from {small[key]} to {large[key]} "
            f"({large[key] / max(small[key], 1):.2f}x) when the graph grew {FACTOR}x")


@pytest.mark.parametrize("build, sizes", [
    (synthetic.elementwise_chain, (SMALL, SMALL * FACTOR)),
    (synthetic.transformer_stack, (SMALL // 20, SMALL // 20 * FACTOR)),
], ids=["elementwise-chain", "transformer-stack"])
def test_parse_and_compile_work_grows_linearly(work, build, sizes):
    models = [build(size) for size in sizes]
    counted = []
    for model in models:
        parse = measure(work, functools.partial(ge.parse_onnx, model))
        compiled = measure(work, functools.partial(ge.compile, ge.parse_onnx(model)))
        counted.append((parse, compiled))
    (parse_small, compile_small), (parse_large, compile_large) = counted
    assert_linear(parse_small, parse_large, "parse_onnx")
    assert_linear(compile_small, compile_large, "ge.compile")


@pytest.mark.parametrize("size", [SMALL, SMALL * FACTOR])
def test_large_chain_is_still_right(size):
    model = synthetic.elementwise_chain(size)
    executable = ge.compile(ge.parse_onnx(model))
    assert len(executable.steps) < 4  # the whole chain is one fused op
    x = np.random.default_rng(size).standard_normal((3, 16)).astype(np.float32)
    expected = onnxruntime.InferenceSession(model).run(None, {"x": x})[0]
    got = ge.Session(executable).run({"x": x})
    np.testing.assert_allclose(next(iter(got.values())), expected, rtol=1e-5, atol=1e-6)


def test_large_transformer_stack_is_fused_and_right():
    blocks = SMALL // 20 * FACTOR
    model = synthetic.transformer_stack(blocks)
    executable = ge.compile(ge.parse_onnx(model))
    ops = Counter(node.op_type for node in executable.graph.nodes)
    assert ops["MatMulBiasAdd"] == 2 * blocks and ops["LayerNormalization"] == blocks
    x = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
    expected = onnxruntime.InferenceSession(model).run(None, {"x": x})[0]
    got = ge.Session(executable).run({"x": x})
    np.testing.assert_allclose(next(iter(got.values())), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make_pass", [
    lambda: RewritePass(MatMulBiasFusionPass().rules + LayerNormFusionPass().rules),
    NoOpEliminationPass,
], ids=["rewrite-driver", "forwarding-driver"])
def test_rewrite_drivers_visit_each_node_a_bounded_number_of_times(make_pass):
    visits = []
    for blocks in (SMALL // 20, SMALL // 20 * FACTOR):
        graph = ge.parse_onnx(synthetic.transformer_stack(blocks))
        nodes = len(graph)
        rewrite = make_pass()
        rewrite.run(graph)
        assert graph.validate()
        visits.append(rewrite.visits / nodes)
    assert 0 < visits[1] <= visits[0] * SLACK, f"visits per node went {visits[0]} -> {visits[1]}"
    assert visits[1] < 3


def test_look_ups_by_name_do_not_walk_the_graph(work):
    graph = ge.parse_onnx(synthetic.elementwise_chain(SMALL))
    work.clear()
    for index in range(0, SMALL, 7):
        assert graph.node(f"n{index}").name == f"n{index}"
        assert graph.find_value(f"v{index}").producer is graph.node(f"n{index}")
    assert work["walks"] == 0


def test_indexes_follow_renames_and_removals():
    graph = ge.parse_onnx(synthetic.elementwise_chain(8))
    node = graph.node("n7")
    graph.rename_node(node, "last")
    assert graph.node("last") is node and not graph.has_node("n7")
    value = graph.find_value("v7")  # an explicit value name survives the node's rename
    value.name = "renamed"
    assert graph.find_value("renamed") is value and not graph.has_value("v7")
    graph.set_outputs([graph.find_value("v6")])
    graph.remove_node(node)
    assert not graph.has_value("renamed") and not graph.has_node("last")
    with pytest.raises(ge.errors.GraphError, match="no node named 'last'"):
        graph.node("last")
