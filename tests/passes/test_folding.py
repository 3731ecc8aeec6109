"""Constant folding and shape folding: each test shows the graph before, the graph expected
after (as the expression each output computes), and checks the numbers agree."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.ir import Graph, Node, Value
from ge.ops import create_node, evaluate, get_schema
from ge.passes import Pass, PassManager
from ge.passes.cleanup import AlgebraicSimplificationPass, DeadCodeEliminationPass
from ge.passes.folding import ConstantFoldingPass, ShapeFoldingPass, is_foldable

# -- helpers shared with test_cleanup ----------------------------------------------------------


def data(graph: Graph, name: str, shape: list[Any], dtype: str = "float32") -> Node:
    """A graph input."""
    return create_node("Data", [], {"shape": shape, "dtype": dtype}, name, graph)


def const(graph: Graph, array: Any, dtype: Optional[str] = None, name: Optional[str] = None,
          ) -> Node:
    """A constant."""
    tensor = ge.Tensor(np.asarray(array, dtype=dtype))
    return create_node("Const", [], {"value": tensor}, name, graph)


def op(graph: Graph, op_type: str, *inputs: Any, name: Optional[str] = None,
       **attrs: Any) -> Node:
    """A node of ``op_type`` reading ``inputs`` (nodes, values or None)."""
    return create_node(op_type, list(inputs), attrs, name, graph)


def expr(value: Value) -> str:
    """What ``value`` computes, as one expression: inputs by name, small constants by value,
    attributes that differ from their defaults in braces."""
    node = value.producer
    if node.op_type == "Data":
        return node.name
    if node.op_type == "Const":
        array = node.attrs["value"].numpy()
        return repr(array.tolist()) if array.size <= 8 else f"Const{list(array.shape)}"
    schema = get_schema(node.op_type)
    attrs = [f"{k}={getattr(v, 'short_name', v)}" for k, v in sorted(node.attrs.items())
             if k in schema.attrs and v != schema.attrs[k].default]
    args = ", ".join(["_" if v is None else expr(v) for v in node.inputs])
    braces = "{" + ", ".join(attrs) + "}" if attrs else ""
    index = f":{value.index}" if value.index else ""
    return f"{node.op_type}{braces}({args}){index}"


def exprs(graph: Graph) -> list[str]:
    """The expression of every graph output."""
    return [expr(value) for value in graph.outputs]


def feeds_for(graph: Graph, sizes: Optional[dict[str, int]] = None, seed: int = 0,
              ) -> dict[str, np.ndarray]:
    """Random feeds; named or unknown dimensions take ``sizes[name]`` (default 3)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        shape = [d if isinstance(d, int) and d >= 0 else (sizes or {}).get(str(d), 3)
                 for d in value.shape]
        array = rng.standard_normal(shape) * 4
        feeds[value.producer.name] = array.astype(value.dtype.np_dtype)
    return feeds


def run_pass(graph: Graph, *passes: Pass, sizes: Optional[dict[str, int]] = None,
             ) -> tuple[Graph, list[Any]]:
    """Run ``passes`` on a copy of ``graph`` through the pass manager (validation between
    passes), check the copy computes what the original does, and return (copy, records)."""
    after = graph.clone()
    records = PassManager(list(passes)).run(after)
    feeds = feeds_for(graph, sizes)
    want, got = evaluate(graph, feeds), evaluate(after, feeds)
    assert list(want) == list(got), "the output names changed"
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)
        assert got[name].dtype == want[name].dtype
    return after, records


def notes(records: list[Any]) -> str:
    """Every report line of the records, joined."""
    return "; ".join(line for record in records for line in record.result.notes)


# -- constant folding --------------------------------------------------------------------------


def test_constant_subgraph_folds_through_the_reference_kernel():
    before = Graph("fold")
    x = data(before, "x", [3])
    scaled = op(before, "Mul", const(before, [1.0, 2.0, 3.0], "float32"),
                const(before, 2.0, "float32"))
    before.set_outputs([op(before, "Add", x, scaled, name="y")])
    assert exprs(before) == ["Add(x, Mul([1.0, 2.0, 3.0], 2.0))"]

    after, records = run_pass(before, ConstantFoldingPass())

    assert exprs(after) == ["Add(x, [2.0, 4.0, 6.0])"]
    assert len(after) == 3
    assert notes(records) == "folded 1 nodes into constants (Mul 1)"


def test_a_chain_folds_in_one_run_and_the_leftover_constants_go():
    before = Graph("chain")
    x = data(before, "x", [2, 3])
    weights = const(before, np.arange(6, dtype=np.float32).reshape(3, 2))
    turned = op(before, "Transpose", weights, perm=[1, 0])
    negated = op(before, "Neg", turned)
    before.set_outputs([op(before, "Add", x, negated)])

    after, records = run_pass(before, ConstantFoldingPass())

    assert exprs(after) == ["Add(x, [[-0.0, -2.0, -4.0], [-1.0, -3.0, -5.0]])"]
    assert [n.op_type for n in after.topological_order()] == ["Data", "Const", "Add"]
    assert records[0].result.counts["folded"] == 2


def test_a_folded_graph_output_keeps_its_name():
    before = Graph("named")
    x = data(before, "x", [2])
    total = op(before, "Add", const(before, [1, 2], "int64"), const(before, [3, 4], "int64"),
               name="total")
    before.set_outputs([op(before, "Relu", x, name="r"), total])

    after, _ = run_pass(before, ConstantFoldingPass())

    assert [v.name for v in after.outputs] == ["r", "total"]
    assert exprs(after) == ["Relu(x)", "[4, 6]"]
    assert after.node("total").op_type == "Const"


def test_every_output_of_a_multi_output_node_folds():
    before = Graph("split")
    pieces = op(before, "Split", const(before, np.arange(6, dtype=np.float32)), num_outputs=2)
    x = data(before, "x", [3])
    before.set_outputs([op(before, "Add", x, pieces.outputs[0]),
                        op(before, "Mul", x, pieces.outputs[1])])

    after, _ = run_pass(before, ConstantFoldingPass())

    assert exprs(after) == ["Add(x, [0.0, 1.0, 2.0])", "Mul(x, [3.0, 4.0, 5.0])"]


def test_size_cap_and_growth_rule_keep_large_results_unfolded():
    before = Graph("big")
    x = data(before, "x", [1000, 1000])
    ones = op(before, "Expand", const(before, 1.0, "float32"),
              const(before, [1000, 1000], "int64"))
    before.set_outputs([op(before, "Add", x, ones)])

    capped, records = run_pass(before, ConstantFoldingPass(max_elements=1000))
    assert exprs(capped) == exprs(before)
    assert "left unfolded: 1 (over the size cap)" in notes(records)

    grown, records = run_pass(before, ConstantFoldingPass())
    assert exprs(grown) == exprs(before)
    assert "(would grow the stored constants)" in notes(records)

    allowed, _ = run_pass(before, ConstantFoldingPass(growth_bytes=1 << 30))
    assert exprs(allowed) == ["Add(x, Const[1000, 1000])"]


def test_the_total_budget_stops_folding_once_spent():
    before = Graph("budget")
    x = data(before, "x", [100])
    outputs = [op(before, "Add", x, op(before, "Neg", const(before, np.full(100, float(i),
                                                                          np.float32))))
               for i in range(3)]
    before.set_outputs(outputs)

    after, _ = run_pass(before, ConstantFoldingPass(total_elements=250))

    assert [e.startswith("Add(x, Neg(") for e in exprs(after)] == [False, False, True]


def test_random_and_subgraph_ops_are_not_folded():
    before = Graph("random")
    noisy = op(before, "Dropout", const(before, np.ones(4, np.float32)),
               const(before, 0.5, "float32"), const(before, True, "bool"), seed=3)
    before.set_outputs([noisy.outputs[0]])

    after = before.clone()
    result = ConstantFoldingPass().run(after)

    assert not result.changed and exprs(after) == exprs(before)
    assert not is_foldable(Node("If", [], {}, []))
    assert not is_foldable(Node("Data", [], {}, []))
    assert is_foldable(Node("Gather", [], {}, []))


def _branch(name: str, activation: str) -> Graph:
    """x [2, 3] and the captured scale -> activation(x * scale) [2, 3]."""
    graph = Graph(name)
    x, scale = data(graph, "x", [2, 3]), data(graph, "scale", [3])
    graph.set_outputs([op(graph, activation, op(graph, "Mul", x, scale), name="act")])
    return graph


def _if_graph(cond: Any, passthrough: bool = False) -> Graph:
    graph = Graph("choose")
    x = data(graph, "x", [2, 3])
    scale = const(graph, [0.5, -1.0, 2.0], "float32", name="scale")
    flag = const(graph, cond, "bool", name="flag") if cond is not None else \
        data(graph, "flag", [], "bool")
    else_branch = _branch("else", "Tanh")
    if passthrough:  # the else branch gives its captured x back as it is
        else_branch.set_outputs([else_branch.inputs[0]])
    node = op(graph, "If", flag, x, scale, name="choice",
              then_branch=_branch("then", "Relu"), else_branch=else_branch)
    graph.set_outputs([node.outputs[0], op(graph, "Neg", node, name="negated")])
    return graph


@pytest.mark.parametrize("cond,passthrough,want", [
    (True, False, "Relu(Mul(x, [0.5, -1.0, 2.0]))"),
    (False, False, "Tanh(Mul(x, [0.5, -1.0, 2.0]))"),
    (False, True, "Identity(x)"),
])
def test_an_if_on_a_known_condition_becomes_its_taken_branch(cond, passthrough, want):
    before = _if_graph(cond, passthrough)

    after, records = run_pass(before, ConstantFoldingPass())

    assert exprs(after) == [want, f"Neg({want})"]
    assert [v.name for v in after.outputs] == [v.name for v in before.outputs]
    assert not any(node.op_type == "If" for node in after.nodes)
    assert "If (branch inlined) 1" in notes(records)


def test_an_if_on_a_fed_condition_or_a_branch_that_did_not_import_stays():
    fed = _if_graph(None)
    assert not ConstantFoldingPass().run(fed).changed
    broken = _if_graph(True)
    broken.node("choice").attrs["then_error"] = "the branch did not import"
    assert not ConstantFoldingPass().run(broken).changed


# -- shape folding -----------------------------------------------------------------------------


def test_shape_and_size_of_a_static_value_fold():
    before = Graph("static")
    x = data(before, "x", [2, 3, 4])
    flat = op(before, "Reshape", x, op(before, "Concat", op(
        before, "Unsqueeze", op(before, "Size", x), const(before, [0], "int64")), axis=0))
    before.set_outputs([flat, op(before, "Shape", x, start=1, name="dims")])

    after, records = run_pass(before, ShapeFoldingPass())

    assert exprs(after) == ["Reshape(x, [24])", "[3, 4]"]
    assert after.outputs[0].shape == (24,)
    assert "folded 4 shape computations into constants" in notes(records)


def bert_view(batch: Any = "batch") -> Graph:
    """``q.view(q.size(0), q.size(1), 4, 64)`` as the TorchScript exporter writes it."""
    graph = Graph("view")
    q = data(graph, "q", [batch, 128, 256])
    shape = op(graph, "Shape", q)
    pieces = [op(graph, "Unsqueeze", op(graph, "Gather", shape, const(graph, i, "int64")),
                 const(graph, [0], "int64")) for i in (0, 1)]
    target = op(graph, "Concat", *pieces, const(graph, [4], "int64"), const(graph, [64], "int64"),
                axis=0)
    heads = op(graph, "Reshape", q, target, name="heads")
    graph.set_outputs([op(graph, "Transpose", heads, perm=[0, 2, 1, 3], name="out")])
    return graph


@pytest.mark.parametrize("batch", ["batch", -1])
def test_a_view_with_a_dynamic_batch_becomes_a_constant_reshape(batch):
    before = bert_view(batch)
    assert exprs(before) == [
        "Transpose{perm=[0, 2, 1, 3]}(Reshape(q, Concat{axis=0}("
        "Unsqueeze(Gather(Shape(q), 0), [0]), Unsqueeze(Gather(Shape(q), 1), [0]), [4], [64])))"]
    assert before.node("heads").outputs[0].shape == (-1, -1, -1, -1)

    after, records = run_pass(before, ShapeFoldingPass(), sizes={"batch": 5})

    assert exprs(after) == ["Transpose{perm=[0, 2, 1, 3]}(Reshape(q, [0, 128, 4, 64]))"]
    assert after.node("heads").outputs[0].shape == (batch, 128, 4, 64)
    assert after.outputs[0].shape == (batch, 4, 128, 64)
    assert "made 1 dynamic shape targets constant (Reshape 1)" in notes(records)
    assert len(after) == 4  # q, the target, Reshape, Transpose


def test_a_dimension_of_another_value_is_copied_when_named_and_inferred_otherwise():
    before = Graph("other")
    x = data(before, "x", ["n", 6])
    y = data(before, "y", ["n", 2])
    z = data(before, "z", [-1, 6])
    size_n = op(before, "Slice", op(before, "Shape", y), const(before, [0], "int64"),
                const(before, [1], "int64"))
    size_z = op(before, "Slice", op(before, "Shape", z), const(before, [0], "int64"),
                const(before, [1], "int64"))
    three = const(before, [2, 3], "int64")
    named = op(before, "Reshape", x, op(before, "Concat", size_n, three, axis=0))
    unnamed = op(before, "Reshape", x, op(before, "Concat", size_z, three, axis=0))
    before.set_outputs([named, unnamed])

    after, _ = run_pass(before, ShapeFoldingPass(), sizes={"n": 4, "-1": 4})

    # y's "n" is x's "n" (names agree at run time); z's unknown dimension is not x's, but
    # with 2 and 3 known it is what the element count leaves over
    assert exprs(after) == ["Reshape(x, [0, 2, 3])", "Reshape(x, [-1, 2, 3])"]
    assert after.outputs[0].shape == ("n", 2, 3)


def test_a_target_with_two_unprovable_dimensions_stays():
    before = Graph("unknown")
    x = data(before, "x", [-1, -1])
    z = data(before, "z", [-1, -1])
    target = op(before, "Shape", z)
    before.set_outputs([op(before, "Reshape", x, target)])

    after = before.clone()
    result = ShapeFoldingPass().run(after)

    assert not result.changed and exprs(after) == ["Reshape(x, Shape(z))"]


def test_an_expand_target_equal_to_the_input_dimension_becomes_one():
    before = Graph("expand")
    x = data(before, "x", [-1, 1])
    rows = op(before, "Slice", op(before, "Shape", x), const(before, [0], "int64"),
              const(before, [1], "int64"))
    target = op(before, "Concat", rows, const(before, [5], "int64"), axis=0)
    before.set_outputs([op(before, "Expand", x, target)])

    after, _ = run_pass(before, ShapeFoldingPass())

    assert exprs(after) == ["Expand(x, [1, 5])"]


def test_known_integer_arithmetic_on_shapes_folds():
    before = Graph("arith")
    x = data(before, "x", ["b", 4, 8])
    inner = op(before, "Mul", op(before, "Gather", op(before, "Shape", x),
                                 const(before, 1, "int64")),
               op(before, "Gather", op(before, "Shape", x), const(before, 2, "int64")))
    target = op(before, "Concat", const(before, [-1], "int64"),
                op(before, "Unsqueeze", inner, const(before, [0], "int64")), axis=0)
    before.set_outputs([op(before, "Reshape", x, target)])

    after, _ = run_pass(before, ShapeFoldingPass())

    assert exprs(after) == ["Reshape(x, [-1, 32])"]
    assert after.outputs[0].shape == ("b", 32)


def test_torch_expand_arange_and_new_zeros_get_named_shapes_and_simplify():
    """``pos = arange(s).unsqueeze(0).expand(b, s); y = x + pos[..., None] + x.new_zeros(b, s,
    8)`` as the TorchScript exporter writes it (expand tests its sizes against -1)."""
    before = Graph("torch")
    x = data(before, "x", ["b", "s", 8])
    shape = op(before, "Shape", x)
    b = op(before, "Unsqueeze", op(before, "Gather", shape, const(before, 0, "int64")),
           const(before, [0], "int64"))
    s = op(before, "Gather", shape, const(before, 1, "int64"))
    sizes = op(before, "Concat", b, op(before, "Unsqueeze", s, const(before, [0], "int64")),
               axis=0)
    fixed = op(before, "Where", op(before, "Equal", sizes, const(before, [-1, -1], "int64")),
               const(before, [1, 1], "int64"), sizes)
    positions = op(before, "Range", const(before, 0, "int64"), s, const(before, 1, "int64"))
    grid = op(before, "Expand", op(before, "Unsqueeze", positions, const(before, [0], "int64")),
              fixed, name="grid")
    column = op(before, "Cast", op(before, "Unsqueeze", grid, const(before, [2], "int64")),
                dtype="float32")
    zeros = op(before, "ConstantOfShape", op(before, "Concat", sizes, const(before, [8], "int64"),
                                             axis=0))
    before.set_outputs([op(before, "Add", op(before, "Add", x, column), zeros, name="y")])
    assert before.node("grid").outputs[0].shape == (-1, -1)

    after, records = run_pass(before, ShapeFoldingPass(), ConstantFoldingPass(),
                              AlgebraicSimplificationPass(), DeadCodeEliminationPass(),
                              sizes={"b": 2, "s": 5})

    assert after.node("grid").outputs[0].shape == ("b", "s")
    assert positions.outputs[0].shape == (-1,) and after.find_value(
        positions.outputs[0].name).shape == ("s",)
    ops = {n.op_type for n in after.nodes}
    assert not ops & {"Equal", "Where", "ConstantOfShape"}, ops  # folded, then simplified away
    assert "Where with a constant condition 1" in notes(records)
    assert "Add(x, 0) 1" in notes(records)


def test_bert_from_the_zoo_loses_its_shape_subgraphs(exported):
    _, path = exported("bert", False)
    graph = ge.parse_onnx(path)
    assert sum(n.op_type == "Shape" for n in graph.nodes) == 33

    executable = ge.compile(graph, opt_level=1)

    kinds = {n.op_type for n in executable.graph.nodes}
    assert not kinds & {"Shape", "Concat", "Unsqueeze", "Slice"}
    assert len(executable.graph) < 0.5 * len(graph)
    feeds = {"input_ids": np.arange(256).reshape(2, 128) % 1000,
             "attention_mask": np.ones((2, 128), np.int64)}
    want = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    got = ge.Session(executable).run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
