"""The fused engine against the reference kernel: op by op in float32 and float64 on edge
values, broadcasting kinds, strided inputs, integer dtypes, serial and parallel loops,
random chains; compiled once; the kernel cache directory; the cost model; without numba.

Compiled loops are shared through numba's and the engine's caches, so a warm run is fast;
a cold one (empty kernel cache) compiles about 150 small loops.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from ge.engines import fused, get_engine
from ge.engines.fused import cost, kernels, runner
from ge.errors import UnsupportedOpError
from ge.ir import Graph, Node
from ge.ops import create_node, get_schema
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE
from tests.tolerance import assert_close

pytest.importorskip("numba")

ENGINE = get_engine("fused")
DTYPES = ("float32", "float64")
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5,
         6.0, -6.0, 30.0, -30.0, 100.0, -100.0, 1e30, -1e30]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fused_node(steps: list[str], arrays: list[np.ndarray], shapes=None) -> Node:
    """A FusedElementwise node reading one graph input per array (of ``shapes``, when
    given: -1 for dynamic dimensions)."""
    graph = Graph("fused")
    inputs = [create_node("Data", [], {"shape": list(s), "dtype": a.dtype.name}, f"x{i}", graph)
              for i, (a, s) in enumerate(zip(arrays, shapes or [a.shape for a in arrays]))]
    node = create_node(FUSED_ELEMENTWISE, inputs, {"steps": steps}, "fused", graph)
    graph.set_outputs([node])
    return node


def reference(steps: list[str], arrays: list[np.ndarray]) -> np.ndarray:
    return get_schema(FUSED_ELEMENTWISE).kernel(*arrays, steps=steps)


def check(steps: list[str], arrays: list[np.ndarray], accumulate: bool = False,
          node: Node = None) -> np.ndarray:
    """The engine's result equals the reference's: dtype, shape, values (NaN where NaN) and
    the sign of zeros."""
    node = node or fused_node(steps, arrays)
    got = ENGINE.bind(node)(arrays)[0]
    expected = reference(steps, arrays)
    assert got.dtype == expected.dtype and got.shape == expected.shape, steps
    assert_close(got, expected, accumulate=accumulate, what=" / ".join(steps))
    if got.dtype.kind == "f" and not accumulate:
        zeros = expected == 0
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros])), steps
    return got


def sample(dtype: str, shape: tuple[int, ...] = (64,), seed: int = 0, low: float = -4.0,
           high: float = 4.0, edges: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(low, high, size=int(np.prod(shape))).astype(dtype)
    if edges:
        edge = np.array(EDGES, dtype=dtype)[: values.size]
        values[: edge.size] = edge
    return values.reshape(shape)


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Floor",
         "Ceil", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
         "Asinh", "Acosh", "Atanh", "IsNaN", "IsInf", "LeakyRelu alpha=0.2",
         "HardSigmoid alpha=0.3 beta=0.4", "Elu alpha=0.5", "Selu", "Celu alpha=2.0",
         "ThresholdedRelu alpha=0.5", "Softplus", "Softsign", "HardSwish", "Mish",
         "Swish alpha=1.5", 'Gelu approximate="tanh"', "Gelu", "Erf"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_each_unary_op_matches_the_reference_on_edge_values(op, dtype):
    name, *attrs = op.split()
    check([" ".join([name, "in0", *attrs])], [sample(dtype)])


BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY)
def test_each_binary_op_matches_the_reference_on_edge_values(op, dtype):
    left = sample(dtype, (len(EDGES), len(EDGES)))
    right = np.ascontiguousarray(left.T)  # every pair of edge values meets
    check([f"{op} in0 in1"], [left, right])


@pytest.mark.parametrize("shapes", [
    [(6, 5), (5,)],               # inner: a bias on the last axis
    [(2, 3, 4, 5), (4, 5)],       # inner over two axes
    [(6, 5), (6, 1)],             # outer: one value per row
    [(2, 3, 4, 5), (2, 3, 1, 1)],  # outer: [N, C, 1, 1] against NCHW
    [(6, 1), (1, 5)],             # an outer product: no input has the output's shape
    [(6, 5), ()],                 # a scalar input
    [(1, 6, 5), (6, 5), (5,), (1, 1)],
])
def test_broadcasting_along_leading_and_trailing_axes(shapes):
    arrays = [sample("float32", s, seed=i, edges=False) for i, s in enumerate(shapes)]
    steps = ["Mul in0 in1", "Add s0 1.5:float32", "Max s1 in0"]
    for extra in range(2, len(arrays)):
        steps.append(f"Sub s{len(steps) - 1} in{extra}")
    check(steps, arrays)


def test_other_broadcasts_are_declined_and_the_numpy_engine_runs_them():
    arrays = [sample("float32", (4, 1, 6), edges=False), sample("float32", (3, 1), seed=1)]
    node = fused_node(["Mul in0 in1", "Relu s0"], arrays)
    assert not ENGINE.supports(node)
    assert "broadcast" in ENGINE.refusal(node)
    with pytest.raises(UnsupportedOpError):
        ENGINE.bind(node)
    executable = ge.compile(node.graph, opt_level=0, engines=["fused"])
    assert executable.report["engines"] == {"numpy": 1}
    out = ge.Session(executable).run({"x0": arrays[0], "x1": arrays[1]})
    assert_close(out["fused"], reference(node.attrs["steps"], arrays))


def test_non_contiguous_inputs():
    base = sample("float32", (16, 12), seed=11)
    arrays = [base.T, base[::-1, 0], np.asfortranarray(sample("float32", (12, 16)))]
    node = fused_node(["Sub in0 in1", "Abs s0", "Mul s1 in2"],
                      [np.ascontiguousarray(a) for a in arrays])
    assert_close(ENGINE.bind(node)(arrays)[0], reference(node.attrs["steps"], arrays))


def test_comparisons_logic_and_where():
    x = sample("float32", (6, 7))
    mask = np.random.default_rng(6).random((1, 7)) < 0.5
    check(["Greater in0 0.0:float32", "Mul in0 0.1:float32", "Where s0 in0 s1",
           "Where in1 s2 -1.5:float32", "IsNaN s3", "Where s4 0.0:float32 s3"], [x, mask])
    rng = np.random.default_rng(5)
    left, right = rng.random(32) < 0.5, rng.random(32) < 0.5
    for op in ("And", "Or", "Xor"):
        check([f"{op} in0 in1", "Not s0"], [left, right])


def test_clip_with_literal_bounds_an_absent_minimum_and_nan():
    check(["Clip in0 -1.0:float64 2.0:float64", "Clip s0 _ 1.5:float64"], [sample("float64")])


def test_pow_with_literal_exponents_computes_as_the_reference():
    x = sample("float32")
    check(["Pow in0 3:int64", "IsInf s0"], [x])
    for exponent in ("2:int64", "2.0:float32", "1.5:float32", "-1:int64"):
        check([f"Pow in0 {exponent}", "Neg s0"], [x])


def test_a_shared_step_and_a_scalar_input():
    x, scalar = sample("float32", (3, 4)), np.array(0.75, np.float32)
    check(["Mul in0 in1", "Sigmoid s0", "Mul s0 s1", "Add s2 s0"], [x, scalar])


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_regions_wrap_as_numpy_does(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    x = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
    x[:2] = [info.min, info.max]
    y = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
    steps = ["Add in0 in1", "Mul s0 in0", "Max s1 in1", "Sub s2 3:%s" % dtype,
             "Clip s3 2:%s 100:%s" % (dtype, dtype), "Less s3 s4", "Where s5 s3 s1"]
    if info.min < 0:
        steps += ["Neg s6", "Abs s7", "Sign s8", "Relu s9"]
    check(steps, [x, y])


@pytest.mark.parametrize("dtype,steps,why", [
    ("float16", ["Add in0 in0", "Relu s0"], "float16"),
    ("int32", ["Div in0 in0", "Abs s0"], "Div on int32"),
    ("int32", ["Pow in0 in0", "Abs s0"], "Pow on int32"),
])
def test_what_the_engine_leaves_to_the_numpy_engine(dtype, steps, why):
    node = fused_node(steps, [np.ones(4, dtype)])
    assert not ENGINE.supports(node)
    assert why in ENGINE.refusal(node)


def test_other_ops_are_not_supported():
    graph = Graph("g")
    x = create_node("Data", [], {"shape": [2]}, "x", graph)
    assert not ENGINE.supports(create_node("Relu", [x], name="relu", graph=graph))


def test_the_cost_model_fuses_arithmetic_and_declines_transcendentals_alone():
    x = sample("float32", (1 << 20,), edges=False)
    chain = fused_node(["Mul in0 0.5:float32", "Add s0 1.0:float32", "Tanh s1", "Mul s2 in0",
                        "Sub s3 0.1:float32", "Relu s4", "Add s5 0.5:float32", "Sqrt s6"], [x])
    assert ENGINE.supports(chain)
    calls_only = fused_node(["Exp in0", "Log s0", "Tanh s1"], [x])
    assert not ENGINE.supports(calls_only)
    assert "cost model" in ENGINE.refusal(calls_only)
    analysis = ENGINE.analysis(chain)
    fused, unfused = cost.estimate(analysis.plan, analysis.layouts, analysis.steps, x.size)
    assert 0 < fused < unfused
    # loop 1 reads x, writes t; tanh reads and writes t; loop 2 reads x and t, writes y
    assert ENGINE.estimate(chain).bytes == 7 * 4 * x.size


def compiled(kernel):
    """The loops behind a bound kernel: a node of unknown size compiles on its first large
    run; the tests take them at once."""
    return kernel.force() if hasattr(kernel, "force") else kernel


def test_small_runs_of_a_dynamic_node_take_the_reference_until_a_large_one():
    steps = ["Mul in0 0.5:float32", "Add s0 1.0:float32", "Relu s1"]
    small = [sample("float32", (3, 5))]
    kernel = ENGINE.bind(fused_node(steps, small, shapes=[(-1, 5)]))
    assert_close(kernel(small)[0], reference(steps, small))
    assert kernel.compiled is None  # nothing compiled for a small run
    large = [sample("float32", (fused.COMPILE_MIN_ELEMENTS // 5 + 1, 5), edges=False)]
    assert_close(kernel(large)[0], reference(steps, large))
    assert kernel.compiled is not None


def test_a_bound_kernel_serves_changing_shapes_and_empty_ones():
    arrays = [sample("float32", (2, 3)), sample("float32", (3,))]
    steps = ["Mul in0 in1", "Tanh s0", "Add s1 in1"]
    kernel = compiled(ENGINE.bind(fused_node(steps, arrays, shapes=[(-1, 3), (3,)])))
    for rows in (1, 2, 17, 0):
        arrays = [sample("float32", (rows, 3), seed=rows, edges=False), arrays[1]]
        assert_close(kernel(arrays)[0], reference(steps, arrays))
    # a dynamic dimension that turns out to broadcast runs the reference kernel
    wide = [sample("float32", (4, 3)), sample("float32", (1, 3))]
    dynamic = compiled(ENGINE.bind(fused_node(steps, wide, shapes=[(-1, 3), (-1, 3)])))
    assert_close(dynamic(wide)[0], reference(steps, wide))
    assert dynamic.fallbacks == 1


@pytest.fixture(scope="module")
def parallel_kernels():
    """Two nodes with dynamic shapes (so both loop variants are compiled): a flat one with a
    NumPy call between its loops, and one with a bias on the last axis."""
    flat = ["Mul in0 0.5:float32", "Add s0 1.0:float32", "Tanh s1", "Mul s2 in0", "Relu s3"]
    bias = ["Add in0 in1", "Max s0 in0", "Mul s1 1.5:float32"]
    x, b = sample("float32", (8, 5)), sample("float32", (5,))
    return {"flat": (flat, compiled(ENGINE.bind(fused_node(flat, [x], shapes=[(-1, 5)])))),
            "bias": (bias, compiled(ENGINE.bind(fused_node(bias, [x, b],
                                                           shapes=[(-1, 5), (5,)]))))}


@pytest.mark.parametrize("rows", [1, 3, 4099])
@pytest.mark.parametrize("which", ["flat", "bias"])
def test_parallel_and_serial_loops_agree(parallel_kernels, monkeypatch, which, rows):
    steps, kernel = parallel_kernels[which]
    assert all(k.parallel is not None for k in kernel.kernels)
    arrays = [sample("float32", (rows, 5), seed=rows)] + \
        ([sample("float32", (5,), seed=1)] if which == "bias" else [])
    serial = kernel(arrays)[0]
    monkeypatch.setattr(runner, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setattr(runner, "BLOCK_ELEMENTS", 1000)  # several blocks and a short tail
    parallel = kernel(arrays)[0]
    np.testing.assert_array_equal(parallel, serial)
    assert_close(parallel, reference(steps, arrays))


@pytest.mark.parametrize("steps,shapes", [
    (["Mul in0 0.5:float32", "Add s0 1.0:float32", "Tanh s1", "Mul s2 in0", "Relu s3"],
     [(-1, 5)]),
    (["Mul in0 in1", "Tanh s0"], [(-1, 5), (-1, 5)]),               # a call gives the output
    (["Exp in1", "Mul in0 s0", "Sigmoid s1", "Add s2 in1"], [(-1, 5), ()]),  # a call on an input
])
def test_plans_with_calls_run_chunk_by_chunk(monkeypatch, steps, shapes):
    arrays = [sample("float32", (4099, 5) if s else (), seed=i) for i, s in enumerate(shapes)]
    kernel = compiled(ENGINE.bind(fused_node(steps, arrays, shapes=shapes)))
    whole = kernel(arrays)[0]
    monkeypatch.setattr(runner, "CHUNK_ELEMENTS", 1000)  # 21 chunks, the last one short
    chunked = kernel(arrays)[0]
    np.testing.assert_array_equal(chunked, whole)
    assert_close(chunked, reference(steps, arrays))


def test_parallel_loops_from_several_threads_at_once(parallel_kernels, monkeypatch):
    steps, kernel = parallel_kernels["flat"]
    monkeypatch.setattr(runner, "PARALLEL_MIN_ELEMENTS", 1)
    arrays = [[sample("float32", (2000, 5), seed=seed)] for seed in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(kernel, arrays * 4))
    for got, inputs in zip(results, arrays * 4):
        assert_close(got[0], reference(steps, inputs))


_CHAIN_OPS = {1: ["Tanh", "Sigmoid", "Relu", "Abs", "Neg", "Sqrt", "Softsign", "Erf"],
              2: ["Add", "Sub", "Mul", "Max", "Min", "Div"]}


@st.composite
def random_chains(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shapes = [(4, 5), (5,), (4, 1), ()]
    inputs = [(4, 5)] + [draw(st.sampled_from(shapes)) for _ in range(draw(st.integers(0, 2)))]
    steps: list[str] = []
    for position in range(draw(st.integers(2, 6))):
        arity = draw(st.sampled_from([1, 2]))
        words = [draw(st.sampled_from(_CHAIN_OPS[arity])),
                 f"s{position - 1}" if position else "in0"]
        if arity == 2:
            choices = [f"in{i}" for i in range(len(inputs))] + [f"s{j}" for j in range(position)]
            words.append(draw(st.sampled_from(choices + ["0.5:" + dtype])))
        steps.append(" ".join(words))
    seed = draw(st.integers(0, 1000))
    return steps, [sample(dtype, s, seed=seed + i, low=-2, high=2, edges=False)
                   for i, s in enumerate(inputs)]


@settings(max_examples=12, deadline=None)
@given(random_chains())
def test_random_chains_match_the_reference(chain):
    steps, arrays = chain
    check(steps, arrays, accumulate=True)


def test_generated_loops_are_vectorized(monkeypatch):
    monkeypatch.setenv("GE_KERNEL_CACHE", "")  # numba shows no assembly of cached code
    literal = f"{1 + uuid.uuid4().int % 1000 / 1e4!r}:float32"  # a loop new to this process
    steps = [f"Mul in0 {literal}", "Add s0 in1", "Max s1 0.0:float32", "Sqrt s2", "Mul s3 in1"]
    arrays = [sample("float32", (64,)), sample("float32", (64,), seed=1)]
    serial = ENGINE.bind(fused_node(steps, arrays)).kernels[0].serial
    assembly = serial.inspect_asm(serial.signatures[0])
    assert re.search(r"\bv?mulps\b", assembly) and re.search(r"\bv?sqrtps\b", assembly)


def test_loops_are_compiled_once_per_process(monkeypatch):
    x = sample("float32", (5,))
    steps = ["Exp in0", "Add s0 1.25:float32", "Mul s1 in0"]
    ENGINE.bind(fused_node(steps, [x]))
    before = kernels.statistics()["compiled"]
    kernel = ENGINE.bind(fused_node(steps, [x]))  # another node, the same loops
    for _ in range(3):
        kernel([x])
    assert kernels.statistics()["compiled"] == before


def test_generated_modules_and_compiled_code_go_to_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("GE_KERNEL_CACHE", str(tmp_path))
    literal = f"{1 + uuid.uuid4().int % 1000 / 1e4!r}:float32"  # loops new to this process
    steps = ["Mul in0 " + literal, "Relu s0", "Add s1 in0"]
    x = sample("float32", (7,))
    check(steps, [x])
    sources = list(tmp_path.glob("ge_fused_*.py"))
    assert len(sources) == 1 and "Relu s0" in sources[0].read_text()
    assert list((tmp_path / "__pycache__").glob("*.nbi"))  # numba's cache index
    # a new process loads the compiled loop from the cache instead of compiling it
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import ge.engines.fused
        assert "numba" not in sys.modules, "numba must be imported lazily"
        from tests.engines.test_fused_engine import ENGINE, fused_node
        x = np.ones(7, np.float32)
        kernel = ENGINE.bind(fused_node({steps!r}, [x]))
        print(sum(kernel.kernels[0].serial.stats.cache_hits.values()))
    """)
    env = dict(os.environ, GE_KERNEL_CACHE=str(tmp_path), PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) >= 1


@pytest.mark.parametrize("setting", ["", "file"])
def test_without_a_writable_cache_directory_loops_compile_in_memory(tmp_path, monkeypatch,
                                                                     setting):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GE_KERNEL_CACHE", str(blocker / "kernels") if setting else "")
    in_memory = kernels.statistics()["in_memory"]
    check([f"Mul in0 {2 + uuid.uuid4().int % 1000 / 1e4!r}:float64", "Sqrt s0"],
          [sample("float64")])
    assert kernels.statistics()["in_memory"] == in_memory + 1


def chain_graph(dtype: str = "float32") -> Graph:
    graph = Graph("chain")
    x = create_node("Data", [], {"shape": [-1, 8], "dtype": dtype}, "x", graph)
    node = create_node(FUSED_ELEMENTWISE, [x], {"steps": [
        "Mul in0 1.5:%s" % dtype, "Tanh s0", "Add s1 in0", "Mul s2 0.5:%s" % dtype]}, "y", graph)
    graph.set_outputs([node])
    return graph


def test_without_numba_the_numpy_engine_runs_the_node(monkeypatch):
    monkeypatch.setattr(kernels, "numba_module", lambda: None)
    graph = chain_graph()
    node = graph.node("y")
    assert not ENGINE.supports(node)
    assert ENGINE.refusal(node) == "numba is not installed"
    executable = ge.compile(graph, opt_level=0, engines=["fused"])
    assert executable.report["engines"] == {"numpy": 1}
    x = sample("float32", (3, 8))
    assert_close(ge.Session(executable).run({"x": x})["y"], reference(node.attrs["steps"], [x]))


def test_compile_assigns_the_fused_engine_and_runs_dynamic_batches():
    graph = chain_graph()
    executable = ge.compile(graph, opt_level=0, engines=["fused"])
    assert executable.report["engines"] == {"fused": 1}
    session = ge.Session(executable)
    for rows in (1, 5):
        x = sample("float32", (rows, 8), seed=rows)
        assert_close(session.run({"x": x})["y"], reference(graph.node("y").attrs["steps"], [x]))
