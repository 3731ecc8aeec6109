"""Clean-up passes (dead code, CSE, no-ops, algebraic identities): each test shows the graph
before, the graph expected after (as the expression each output computes), and checks the
numbers agree; a property test runs them on random graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ge.ir import Graph, Node
from ge.ops import Trait, evaluate, register_op, registry
from ge.passes import PassManager
from ge.passes.cleanup import (
    AlgebraicSimplificationPass,
    CommonSubexpressionEliminationPass,
    DeadCodeEliminationPass,
    NoOpEliminationPass,
)
from ge.passes.folding import ConstantFoldingPass, ShapeFoldingPass
from tests.passes.test_folding import const, data, exprs, feeds_for, notes, op, run_pass

# -- dead code and common subexpressions -------------------------------------------------------


def test_dead_code_goes_and_inputs_stay():
    before = Graph("dead")
    x = data(before, "x", [2])
    data(before, "unused", [2])
    op(before, "Exp", op(before, "Neg", x))
    before.set_outputs([op(before, "Relu", x)])

    after, records = run_pass(before, DeadCodeEliminationPass())

    assert exprs(after) == ["Relu(x)"]
    assert sorted(n.name for n in after.nodes if n.op_type == "Data") == ["unused", "x"]
    assert notes(records) == "removed 2 dead nodes (Exp 1, Neg 1)"


def test_cse_merges_commutative_duplicates_and_equal_constants():
    before = Graph("cse")
    x, y = data(before, "x", [3]), data(before, "y", [3])
    left = op(before, "Add", op(before, "Mul", x, y), const(before, [1.0, 2.0, 3.0], "float32"))
    right = op(before, "Add", op(before, "Mul", y, x), const(before, [1.0, 2.0, 3.0], "float32"))
    before.set_outputs([op(before, "Sub", left, right, name="z")])

    after, records = run_pass(before, CommonSubexpressionEliminationPass())

    assert exprs(before) == [
        "Sub(Add(Mul(x, y), [1.0, 2.0, 3.0]), Add(Mul(y, x), [1.0, 2.0, 3.0]))"]
    assert exprs(after) == [  # one Const, one Mul, one Add, read twice
        "Sub(Add(Mul(x, y), [1.0, 2.0, 3.0]), Add(Mul(x, y), [1.0, 2.0, 3.0]))"]
    assert sorted(n.op_type for n in after.nodes) == ["Add", "Const", "Data", "Data", "Mul",
                                                      "Sub"]
    assert notes(records) == "merged 3 duplicate nodes (Add 1, Const 1, Mul 1)"


def test_cse_leaves_random_ops_and_a_pair_of_graph_outputs():
    before = Graph("keep")
    x = data(before, "x", [4])
    on = const(before, True, "bool")
    drops = [op(before, "Dropout", x, None, on, seed=1).outputs[0] for _ in range(2)]
    before.set_outputs(drops + [op(before, "Exp", x, name="e1"), op(before, "Exp", x, name="e2")])

    after = before.clone()
    result = CommonSubexpressionEliminationPass().run(after)

    assert not result.changed and len(after) == len(before)


def test_cse_keeps_the_name_of_a_graph_output_it_merges():
    before = Graph("rename")
    x = data(before, "x", [4])
    inner = op(before, "Exp", x, name="inner")
    before.set_outputs([op(before, "Relu", inner), op(before, "Exp", x, name="result")])

    after, _ = run_pass(before, CommonSubexpressionEliminationPass())

    assert [v.name for v in after.outputs][1] == "result"
    assert exprs(after) == ["Relu(Exp(x))", "Exp(x)"]
    assert len(after) == 3


# -- no-ops ------------------------------------------------------------------------------------


def noop_graph() -> Graph:
    """Identity, inference Dropout, same-shape Reshape/Expand/Cast, whole Slice, Concat of one,
    Pad by zeros, Tile by ones, a cancelling Transpose pair: all around one Relu."""
    graph = Graph("noops")
    x = data(graph, "x", [2, 3])
    value = op(graph, "Identity", x)
    value = op(graph, "Dropout", value).outputs[0]
    value = op(graph, "Reshape", value, const(graph, [2, 3], "int64"))
    value = op(graph, "Expand", value, const(graph, [1, 3], "int64"))
    value = op(graph, "Cast", value, dtype="float32")
    value = op(graph, "Slice", value, const(graph, [0], "int64"), const(graph, [99], "int64"))
    value = op(graph, "Concat", value, axis=0)
    value = op(graph, "Relu", value)
    value = op(graph, "Pad", value, const(graph, [0, 0, 0, 0], "int64"))
    value = op(graph, "Tile", value, const(graph, [1, 1], "int64"))
    value = op(graph, "Transpose", value, perm=[1, 0])
    graph.set_outputs([op(graph, "Transpose", value, perm=[1, 0], name="y")])
    return graph


def test_no_ops_are_removed_and_the_output_keeps_its_name():
    before = noop_graph()

    after, records = run_pass(before, NoOpEliminationPass())

    assert exprs(after) == ["Relu(x)"]
    assert [v.name for v in after.outputs] == ["y"]
    assert len(after) == 2
    text = notes(records)
    assert text.startswith("removed 10 no-ops (")
    for kind in ("Identity 1", "Dropout 1", "Reshape to the same shape 1", "Transpose pair 1",
                 "Pad of zeros 1", "Tile by ones 1", "Concat of one input 1"):
        assert kind in text


def test_an_expand_that_keeps_every_size_goes_even_over_a_dynamic_batch():
    before = Graph("expand")
    x = data(before, "x", [-1, 4, 8])
    kept = op(before, "Expand", x, const(before, [1, 4, 1], "int64"))
    grown = op(before, "Expand", op(before, "Relu", kept), const(before, [2, 1, 4, 8], "int64"))
    before.set_outputs([op(before, "Relu", grown, name="y")])

    after, records = run_pass(before, NoOpEliminationPass(), sizes={"x": 3})

    assert exprs(after) == ["Relu(Expand(Relu(x), [2, 1, 4, 8]))"]  # the growing one stays
    assert "Expand that keeps every size 1" in notes(records)


def test_an_identity_from_a_graph_input_to_a_graph_output_stays():
    before = Graph("passthrough")
    x = data(before, "x", [2])
    before.set_outputs([op(before, "Identity", x, name="y")])

    after = before.clone()
    assert not NoOpEliminationPass().run(after).changed
    assert exprs(after) == ["Identity(x)"]


def test_views_round_trip_and_chains_collapse_into_one_reshape():
    before = Graph("views")
    x = data(before, "x", ["n", 1, 4])
    squeezed = op(before, "Squeeze", x, const(before, [1], "int64"))
    back = op(before, "Unsqueeze", squeezed, const(before, [1], "int64"))
    mask = data(before, "mask", ["n", 4])
    twice = op(before, "Unsqueeze", op(before, "Unsqueeze", mask, const(before, [1], "int64")),
               const(before, [2], "int64"))
    before.set_outputs([op(before, "Relu", back), op(before, "Neg", twice)])

    after, records = run_pass(before, NoOpEliminationPass(), sizes={"n": 2})

    assert exprs(after) == ["Relu(x)", "Neg(Reshape(mask, [0, 1, 1, 4]))"]
    assert "view round trip 1" in notes(records)
    assert "view chain into one Reshape 1" in notes(records)


def test_elementwise_ops_between_a_squeeze_and_its_unsqueeze_move_inside():
    """A Conv1d layer's views: Unsqueeze(LeakyRelu(Clip(Squeeze(x, [2]), 0, 6)), [2]) ->
    LeakyRelu(Clip(x)), over a length no one knows (the views undo each other whatever
    the sizes); a chain whose op reads a full second operand, or whose inner result has
    another reader, stays."""
    before = Graph("conv1d")
    x = data(before, "x", [1, 8, 1, -1])
    y = data(before, "y", [1, 8, -1])
    two = const(before, [2], "int64")
    squeezed = op(before, "Squeeze", x, two)
    clipped = op(before, "Clip", squeezed, const(before, 0.0, "float32"),
                 const(before, 6.0, "float32"))
    back = op(before, "Unsqueeze", op(before, "LeakyRelu", clipped, alpha=0.1), two)
    mixed = op(before, "Unsqueeze", op(before, "Add", op(before, "Squeeze", x, two), y), two)
    shared = op(before, "Squeeze", x, two)
    kept = op(before, "Unsqueeze", op(before, "Relu", shared), two)
    before.set_outputs([back, mixed, kept, shared])

    after, records = run_pass(before, NoOpEliminationPass(), sizes={})

    assert exprs(after)[0] == "LeakyRelu{alpha=0.1}(Clip(x, 0.0, 6.0))"
    assert exprs(after)[1].startswith("Unsqueeze(Add(Squeeze(x")
    assert exprs(after)[2].startswith("Unsqueeze(Relu(Squeeze(x")
    assert "elementwise ops moved inside a view round trip 1" in notes(records)


def test_unknown_unnamed_dimensions_are_not_assumed_equal():
    before = Graph("maybe")
    x = data(before, "x", [-1, 4])
    before.set_outputs([op(before, "Reshape", x, op(before, "Shape", x))])  # [?, ?] after

    after = before.clone()
    assert not NoOpEliminationPass().run(after).changed


def test_transposes_compose_and_casts_round_trip_only_when_exact():
    before = Graph("compose")
    x = data(before, "x", [2, 3, 4])
    turned = op(before, "Transpose", op(before, "Transpose", x, perm=[1, 0, 2]), perm=[0, 2, 1])
    wide = op(before, "Cast", op(before, "Cast", x, dtype="float64"), dtype="float32")
    narrow = op(before, "Cast", op(before, "Cast", x, dtype="float16"), dtype="float32")
    before.set_outputs([turned, op(before, "Neg", wide), op(before, "Neg", narrow)])

    after, records = run_pass(before, NoOpEliminationPass())

    assert exprs(after) == ["Transpose{perm=[1, 2, 0]}(x)", "Neg(x)",
                            "Neg(Cast{dtype=float32}(Cast{dtype=float16}(x)))"]
    assert "Transpose chain into one 1" in notes(records)


def test_a_transpose_of_unit_dimensions_becomes_a_view_and_merges_with_flatten():
    before = Graph("pooled")
    pooled = op(before, "Relu", data(before, "x", ["n", 1, 1, 8]))  # NHWC after global pooling
    back = op(before, "Transpose", pooled, perm=[0, 3, 1, 2])  # to NCHW: no element moves
    kept = op(before, "Transpose", data(before, "y", [2, 1, 3]), perm=[2, 1, 0])
    before.set_outputs([op(before, "Flatten", back, axis=1), kept])

    after, records = run_pass(before, NoOpEliminationPass(), sizes={"n": 2})

    assert exprs(after) == ["Reshape(Relu(x), [0, 8])", "Transpose{perm=[2, 1, 0]}(y)"]
    assert "Transpose of unit dimensions as a Reshape 1" in notes(records)


def test_a_round_trip_from_a_graph_input_to_a_graph_output_keeps_its_name():
    before = Graph("io")
    x = data(before, "x", [3], "int32")
    before.set_outputs([op(before, "Cast", op(before, "Cast", x, dtype="int64"), dtype="int32",
                           name="y")])

    after = before.clone()
    NoOpEliminationPass().run(after)

    assert [v.name for v in after.outputs] == ["y"]  # x cannot take the name "y"


def test_a_widening_cast_round_trip_inside_the_graph_goes():
    before = Graph("roundtrip")
    x = data(before, "x", [3], "int32")
    back = op(before, "Cast", op(before, "Cast", x, dtype="int64"), dtype="int32")
    before.set_outputs([op(before, "Neg", back)])

    after, _ = run_pass(before, NoOpEliminationPass())

    assert exprs(after) == ["Neg(x)"]


def test_int64_through_float64_is_not_a_round_trip():
    before = Graph("int64")
    x = data(before, "x", [3], "int64")
    back = op(before, "Cast", op(before, "Cast", x, dtype="float64"), dtype="int64")
    before.set_outputs([op(before, "Neg", back)])  # 2**53 + 1 would come back as 2**53

    after = before.clone()
    assert not NoOpEliminationPass().run(after).changed


def test_dropout_that_may_train_or_whose_mask_is_used_stays():
    before = Graph("dropout")
    x = data(before, "x", [4])
    training = op(before, "Dropout", x, None, data(before, "train", [], "bool"), seed=0)
    masked = op(before, "Dropout", op(before, "Neg", x))
    before.set_outputs([training.outputs[0], masked.outputs[1]])

    after = before.clone()
    assert not NoOpEliminationPass().run(after).changed


# -- algebraic simplification ------------------------------------------------------------------


def test_identity_elements_on_either_side_where_allowed():
    before = Graph("identities")
    x = data(before, "x", [2, 3])
    ones, zeros = const(before, np.ones(3, np.float32)), const(before, 0.0, "float32")
    value = op(before, "Mul", ones, x)
    value = op(before, "Add", value, zeros)
    value = op(before, "Sub", value, zeros)
    value = op(before, "Div", value, const(before, 1.0, "float32"))
    value = op(before, "Pow", value, const(before, 1.0, "float32"))
    kept = op(before, "Sub", zeros, x)  # 0 - x is not x
    before.set_outputs([op(before, "Exp", value), kept])

    after, records = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Exp(x)", "Sub(0.0, x)"]
    assert notes(records).startswith("simplified 5 expressions (")


def test_a_broadcasting_multiply_by_ones_stays():
    before = Graph("broadcast")
    x = data(before, "x", [3])
    before.set_outputs([op(before, "Mul", x, const(before, np.ones((2, 3), np.float32)))])

    after = before.clone()
    assert not AlgebraicSimplificationPass().run(after).changed


def test_double_negation_idempotence_and_non_negative_inputs():
    before = Graph("unary")
    x = data(before, "x", [5])
    negated = op(before, "Neg", op(before, "Neg", x))
    relu = op(before, "Relu", op(before, "Relu", op(before, "Abs", op(before, "Exp", x))))
    same = op(before, "Max", negated, negated)
    before.set_outputs([op(before, "Add", same, relu)])

    after, _ = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Add(x, Exp(x))"]


def test_every_op_that_declares_a_trait_gets_its_rule():
    """The ops newly declaring a property are simplified like the old named ones."""
    before = Graph("declared")
    i, f = data(before, "i", [4], "int32"), data(before, "f", [4])
    b, c = data(before, "b", [4], "bool"), data(before, "c", [4], "bool")
    not_not = op(before, "BitwiseNot", op(before, "BitwiseNot", i))
    or_zero = op(before, "BitwiseOr", not_not, const(before, 0, "int32"))
    xor_false = op(before, "Xor", const(before, [False] * 4), b)  # commutative: either side
    before.set_outputs([op(before, "Mul", or_zero, i), op(before, "Or", xor_false, c),
                        op(before, "Relu", op(before, "Sqrt", f))])

    after, records = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Mul(i, i)", "Or(b, c)", "Sqrt(f)"]
    for label in ("BitwiseNot(BitwiseNot(x)) 1", "BitwiseOr(x, 0) 1", "Xor(False, x) 1",
                  "Relu(Sqrt(x)) 1"):
        assert label in notes(records)


@pytest.fixture()
def flip_op():
    """A throwaway op ``TestFlip`` (y = -x) declared an involution, and nothing else."""

    def flip_kernel(x: np.ndarray) -> np.ndarray:
        """y = -x."""
        return -x

    register_op("TestFlip", inputs=["x"], infer=lambda ctx: [ctx.input(0)],
                traits=(Trait.PURE, Trait.INVOLUTION))(flip_kernel)
    yield "TestFlip"
    registry._REGISTRY.pop("TestFlip")


def test_the_simplifier_asks_the_registry_not_a_list_of_names(flip_op):
    before = Graph("registered")
    x = data(before, "x", [3])
    before.set_outputs([op(before, "Exp", op(before, flip_op, op(before, flip_op, x)))])

    after, records = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Exp(x)"]
    assert "TestFlip(TestFlip(x)) 1" in notes(records)


def test_times_zero_folds_for_integers_and_stays_for_floats():
    before = Graph("zero")
    i = data(before, "i", [2], "int64")
    f = data(before, "f", [2])
    before.set_outputs([op(before, "Add", op(before, "Mul", i, const(before, 0, "int64")), i),
                        op(before, "Mul", f, const(before, 0.0, "float32"))])

    after, _ = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Add([0, 0], i)", "Mul(f, 0.0)"]  # NaN * 0 is NaN


def test_where_with_a_constant_condition_picks_its_branch():
    before = Graph("where")
    a, b = data(before, "a", [3]), data(before, "b", [3])
    before.set_outputs([op(before, "Neg", op(before, "Where", const(before, [True] * 3), a, b))])

    after, _ = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == ["Neg(a)"]


@pytest.mark.parametrize("equation, a, b, want", [
    ("bij,jk->bik", [2, 3, 4], [4, 5], "MatMul(a, b)"),
    ("bhqk,bhkd->bhqd", [1, 2, 3, 4], [1, 2, 4, 5], "MatMul(a, b)"),
    ("bhqd,bhkd->bhqk", [1, 2, 3, 4], [1, 2, 5, 4], "MatMul(a, Transpose{perm=[0, 1, 3, 2]}(b))"),
    ("bid,nd->bin", [2, 3, 4], [5, 4], "MatMul(a, Transpose{perm=[1, 0]}(b))"),
    ("...ij,...jk->...ik", [2, 3, 4], [2, 4, 5], "MatMul(a, b)"),
    ("ij,jk", [3, 4], [4, 5], "MatMul(a, b)"),  # the implicit output, ik
    ("ij,kj->ik", [3, 4], [5, 4], "MatMul(a, Transpose{perm=[1, 0]}(b))"),
])
def test_an_einsum_that_is_a_matrix_product_becomes_a_matmul(equation, a, b, want):
    before = Graph("einsum")
    left, right = data(before, "a", a), data(before, "b", b)
    before.set_outputs([op(before, "Einsum", left, right, equation=equation, name="y")])

    after, records = run_pass(before, AlgebraicSimplificationPass())

    assert exprs(after) == [want]
    assert after.outputs[0].name == "y"
    assert notes(records) == "rewrote 1 into cheaper forms (Einsum as MatMul 1)"
    feeds = feeds_for(before)
    np.testing.assert_allclose(evaluate(after, feeds)["y"],
                               np.einsum(equation, feeds["a"], feeds["b"]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation, a, b", [
    ("bij,jk->bki", [2, 3, 4], [4, 5]),    # the output's order is not a product's
    ("ii,ij->ij", [3, 3], [3, 4]),         # a diagonal
    ("ji,jk->ik", [4, 3], [4, 5]),         # the left operand contracts its first axis
    ("bij,cjk->bcik", [2, 3, 4], [2, 4, 5]),  # different batch labels: an outer product
    ("ij,jk->ijk", [3, 4], [4, 5]),        # nothing contracted
])
def test_an_einsum_that_is_no_plain_product_stays(equation, a, b):
    before = Graph("einsum")
    left, right = data(before, "a", a), data(before, "b", b)
    before.set_outputs([op(before, "Einsum", left, right, equation=equation, name="y")])

    after, _ = run_pass(before, AlgebraicSimplificationPass())

    assert [n.op_type for n in after.nodes if n.op_type != "Data"] == ["Einsum"]


# -- property: random graphs -------------------------------------------------------------------

UNARY = ["Identity", "Relu", "Neg", "Abs", "Exp"]
BINARY_CONSTANTS: list[tuple[str, Any]] = [("Mul", 1.0), ("Add", 0.0), ("Sub", 0.0),
                                           ("Div", 1.0), ("Mul", 2.0), ("Add", 0.5)]
STEPS = st.lists(st.tuples(st.sampled_from(["unary", "binary", "transpose", "reshape", "reuse"]),
                           st.integers(0, 99)), min_size=1, max_size=12)


def random_graph(steps: list[tuple[str, int]]) -> Graph:
    """A chain over x: [2, 3] of no-ops, identities, and real work, with reused values."""
    graph = Graph("random")
    values: list[Node] = [data(graph, "x", [2, 3])]
    for kind, pick in steps:
        last = values[-1]
        if kind == "unary":
            node = op(graph, UNARY[pick % len(UNARY)], last)
        elif kind == "binary":
            name, constant = BINARY_CONSTANTS[pick % len(BINARY_CONSTANTS)]
            node = op(graph, name, last, const(graph, constant, "float32"))
        elif kind == "transpose":
            node = op(graph, "Transpose", last, perm=[1, 0])
        elif kind == "reshape":
            node = op(graph, "Reshape", last, const(graph, list(last.shape)[::-1], "int64"))
        else:
            node = op(graph, "Add", last, values[pick % len(values)]) \
                if values[pick % len(values)].shape == last.shape else op(graph, "Neg", last)
        values.append(node)
    graph.set_outputs([values[-1], op(graph, "Identity", values[len(values) // 2])])
    return graph


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_random_graphs_keep_their_outputs_and_never_grow(steps):
    before = random_graph(steps)
    after = before.clone()
    PassManager([ShapeFoldingPass(), ConstantFoldingPass(), NoOpEliminationPass(),
                 AlgebraicSimplificationPass(), CommonSubexpressionEliminationPass(),
                 DeadCodeEliminationPass()]).run(after)

    assert len(after) <= len(before)
    feeds = feeds_for(before)
    want, got = evaluate(before, feeds), evaluate(after, feeds)
    assert list(want) == list(got)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)
