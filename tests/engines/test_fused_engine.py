"""The fused engine against the reference kernel: op by op, on random chains, float32 and
float64, with broadcasting and changing shapes; compiled once; absent without numexpr."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
import ge.engines.fused as fused_engine
from ge.engines import get_engine
from ge.ir import Graph, Node
from ge.ops import create_node, get_schema
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE
from tests.tolerance import assert_close

pytest.importorskip("numexpr")

ENGINE = get_engine("fused")
DTYPES = ("float32", "float64")
EDGES = [0.0, -0.0, 1e-3, -1e-3, 0.49, 0.5, 0.51, 1.0, -1.0, 2.5, -2.5, 6.0, -6.0, 30.0, -30.0,
         100.0, -100.0, np.inf, -np.inf, np.nan]


def fused_node(steps: list[str], arrays: list[np.ndarray]) -> Node:
    """A FusedElementwise node reading one graph input per array."""
    graph = Graph("fused")
    inputs = [create_node("Data", [], {"shape": list(a.shape), "dtype": a.dtype.name}, f"x{i}",
                          graph) for i, a in enumerate(arrays)]
    node = create_node(FUSED_ELEMENTWISE, inputs, {"steps": steps}, "fused", graph)
    graph.set_outputs([node])
    return node


def reference(node: Node, arrays: list[np.ndarray]) -> np.ndarray:
    return get_schema(FUSED_ELEMENTWISE).kernel(*arrays, steps=node.attrs["steps"])


def check(steps: list[str], arrays: list[np.ndarray], accumulate: bool = False) -> None:
    node = fused_node(steps, arrays)
    assert ENGINE.supports(node), ENGINE.refusal(node)
    got = ENGINE.bind(node)(arrays)[0]
    expected = reference(node, arrays)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert_close(got, expected, accumulate=accumulate, what=" / ".join(steps))


def sample(dtype: str, shape: tuple[int, ...] = (64,), seed: int = 0, low: float = -4.0,
           high: float = 4.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(low, high, size=int(np.prod(shape))).astype(dtype)
    edges = np.array(EDGES, dtype=dtype)[: values.size]
    values[: edges.size] = edges
    return values.reshape(shape)


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Floor",
         "Ceil", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
         "Asinh", "Acosh", "Atanh", "LeakyRelu alpha=0.2", "HardSigmoid alpha=0.3 beta=0.4",
         "Elu alpha=0.5", "Selu", "Celu alpha=2.0", "ThresholdedRelu alpha=0.5", "Softplus",
         "Softsign", "HardSwish", "Mish", "Swish alpha=1.5", 'Gelu approximate="tanh"', "Gelu",
         "Erf"]
FLOAT64_ONLY_IN_REFERENCE = {"Erf", "Gelu"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_each_unary_op_matches_the_reference(op, dtype):
    name, *attrs = op.split()
    if dtype == "float64" and name in FLOAT64_ONLY_IN_REFERENCE and "tanh" not in op:
        node = fused_node([f"{name} in0"], [sample(dtype)])
        assert not ENGINE.supports(node)
        assert "float64" in ENGINE.refusal(node)
        return
    check([" ".join([name, "in0", *attrs])], [sample(dtype)])


def test_erf_is_accurate_across_its_range():
    x = np.linspace(-6, 6, 200001, dtype=np.float32)
    check(["Erf in0"], [x])


BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY)
def test_each_binary_op_matches_the_reference_with_broadcasting(op, dtype):
    left = sample(dtype, (4, 1, 6), seed=1)
    right = sample(dtype, (3, 1), seed=2, low=0.5 if op == "Pow" else -4.0)
    if op == "PRelu":
        right = sample(dtype, (1, 6), seed=2)
    check([f"{op} in0 in1"], [left, right])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_give_bools(op):
    left = np.round(sample("float32", (5, 8), seed=3))
    right = np.round(sample("float32", (8,), seed=4))
    check([f"{op} in0 in1"], [left, right])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_ops(op):
    rng = np.random.default_rng(5)
    left, right = rng.random(32) < 0.5, rng.random(32) < 0.5
    check([f"{op} in0 in1", "Not s0"], [left, right])


def test_where_with_a_bool_input_and_literals():
    x = sample("float32", (6, 7))
    mask = np.random.default_rng(6).random((1, 7)) < 0.5
    check(["Greater in0 0.0:float32", "Mul in0 0.1:float32", "Where s0 in0 s1",
           "Where in1 s2 -1.5:float32", "IsNaN s3", "Where s4 0.0:float32 s3"], [x, mask])


def test_clip_with_literal_bounds_and_an_absent_minimum():
    x = sample("float64")
    check(["Clip in0 -1.0:float64 2.0:float64", "Clip s0 _ 1.5:float64"], [x])


def test_pow_with_an_integer_literal_exponent_and_is_inf():
    x = sample("float32")
    check(["Pow in0 3:int64", "IsInf s0"], [x])
    check(["Pow in0 2:int64"], [x])


def test_a_shared_step_and_a_scalar_input():
    x, scalar = sample("float32", (3, 4)), np.array(0.75, np.float32)
    check(["Mul in0 in1", "Sigmoid s0", "Mul s0 s1", "Add s2 s0"], [x, scalar])


def test_bound_kernel_serves_changing_shapes():
    node = fused_node(["Mul in0 in1", "Tanh s0"], [sample("float32", (2, 3)),
                                                   sample("float32", (3,))])
    kernel = ENGINE.bind(node)
    for rows in (1, 2, 17):
        arrays = [sample("float32", (rows, 3), seed=rows), sample("float32", (3,), seed=9)]
        assert_close(kernel(arrays)[0], reference(node, arrays))


def test_strided_inputs():
    base = sample("float32", (8, 6), seed=11)
    arrays = [base.T, base[::2].T.copy()[:, :1]]
    node = fused_node(["Sub in0 in1", "Abs s0"], [np.ascontiguousarray(a) for a in arrays])
    assert_close(ENGINE.bind(node)(arrays)[0], reference(node, arrays))


def test_the_program_is_compiled_once(monkeypatch):
    numexpr = fused_engine.numexpr_module()
    calls = []
    original = numexpr.NumExpr

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(numexpr, "NumExpr", counting)
    fused_engine._program.cache_clear()
    x = sample("float32", (5,))
    node = fused_node(["Exp in0", "Add s0 1.0:float32", "Log s1"], [x])
    assert ENGINE.supports(node)
    kernel = ENGINE.bind(node)
    for _ in range(3):
        kernel([x])
    assert len(calls) == 1
    fused_engine._program.cache_clear()


@pytest.mark.parametrize("dtype,steps,why", [
    ("float16", ["Add in0 in0", "Relu s0"], "float16"),
    ("float64", ["Erf in0", "Abs s0"], "float64"),
    ("int32", ["Add in0 in0", "Abs s0"], "int32"),
])
def test_what_the_engine_leaves_to_the_reference(dtype, steps, why):
    node = fused_node(steps, [np.ones(4, dtype)])
    assert not ENGINE.supports(node)
    assert why in ENGINE.refusal(node)


def test_other_ops_are_not_supported():
    graph = Graph("g")
    x = create_node("Data", [], {"shape": [2]}, "x", graph)
    assert not ENGINE.supports(create_node("Relu", [x], name="relu", graph=graph))


def chain_graph(dtype: str = "float32") -> Graph:
    graph = Graph("chain")
    x = create_node("Data", [], {"shape": [-1, 8], "dtype": dtype}, "x", graph)
    node = create_node(FUSED_ELEMENTWISE, [x], {"steps": [
        "Mul in0 1.5:%s" % dtype, "Tanh s0", "Add s1 in0"]}, "y", graph)
    graph.set_outputs([node])
    return graph


def test_without_numexpr_the_numpy_engine_runs_the_node(monkeypatch):
    monkeypatch.setattr(fused_engine, "numexpr_module", lambda: None)
    fused_engine._program.cache_clear()
    try:
        graph = chain_graph()
        node = graph.node("y")
        assert not ENGINE.supports(node)
        assert ENGINE.refusal(node) == "numexpr is not installed"
        executable = ge.compile(graph, opt_level=0, engines=["fused"])
        assert executable.report["engines"] == {"numpy": 1}
        x = sample("float32", (3, 8))
        out = ge.Session(executable).run({"x": x})
        assert_close(out["y"], reference(node, [x]))
    finally:
        fused_engine._program.cache_clear()


def test_compile_assigns_the_fused_engine_and_runs_dynamic_batches():
    graph = chain_graph()
    executable = ge.compile(graph, opt_level=0, engines=["fused"])
    assert executable.report["engines"] == {"fused": 1}
    session = ge.Session(executable)
    for rows in (1, 5):
        x = sample("float32", (rows, 8), seed=rows)
        assert_close(session.run({"x": x})["y"], reference(graph.node("y"), [x]))


_CHAIN_OPS = {
    1: ["Tanh", "Sigmoid", "Relu", "Abs", "Neg", "Sin", "Softsign", "LeakyRelu", "HardSwish",
        "Erf"],
    2: ["Add", "Sub", "Mul", "Max", "Min"],
}


@st.composite
def random_chains(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shapes = [(4, 5), (5,), (4, 1), ()]
    inputs = [draw(st.sampled_from(shapes)) for _ in range(draw(st.integers(1, 3)))]
    inputs[0] = (4, 5)
    steps: list[str] = []
    for position in range(draw(st.integers(1, 8))):
        arity = draw(st.sampled_from([1, 2]))
        op = draw(st.sampled_from(_CHAIN_OPS[arity]))
        if op == "Erf" and dtype == "float64":
            op = "Tanh"
        words = [op, f"s{position - 1}" if position else "in0"]
        if arity == 2:
            choices = [f"in{i}" for i in range(len(inputs))] + [f"s{j}" for j in range(position)]
            words.append(draw(st.sampled_from(choices + ["0.5:" + dtype])))
        steps.append(" ".join(words))
    seed = draw(st.integers(0, 1000))
    arrays = [sample(dtype, shape, seed=seed + i, low=-2, high=2) for i, shape in
              enumerate(inputs)]
    return steps, arrays


@settings(max_examples=40, deadline=None)
@given(random_chains())
def test_random_chains_match_the_reference(chain):
    steps, arrays = chain
    arrays = [np.where(np.isfinite(a), a, 0.5).astype(a.dtype) for a in arrays]
    check(steps, arrays, accumulate=True)
