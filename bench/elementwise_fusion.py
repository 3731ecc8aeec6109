"""Elementwise-chain fusion: a chain of 8 elementwise ops over 16M float32 values.

The chain (one transcendental op, as real activations have)::

    y = sqrt(relu(tanh(x * 0.5 + 1) * x - 0.1) + 0.5)   [Mul Add Tanh Mul Sub Relu Add Sqrt]

GE's contenders are timed round-robin (one run of each per round, so that load on
this shared machine hits all alike), medians; onnxruntime and PyTorch eager are
timed after them, each alone, because their threads, still spinning after a run
returns, slowed whatever ran next (measured: the unfused graph 64 -> 220 ms after
PyTorch, the fused one 21.6 -> 28.8 ms after onnxruntime):

* unfused: the graph at opt_level=0 on the NumPy engine (a pass over memory and a
  temporary per op);
* fused: opt_level=3 with the fused engine: one FusedElementwise, run as a numba loop
  (x*0.5+1 -> t), NumPy's tanh in place on t, and a second loop (t, x -> y), 128K
  elements at a time so that t stays in cache;
* fused, reference kernel: the same fused graph on the NumPy engine (the steps one by one);
* onnxruntime on the chain exported with ``ge.export_onnx``, and PyTorch eager.

Other modes: ``--per-op`` times every step op alone (NumPy's reference kernel vs the
fused engine), and every transcendental function as NumPy's SIMD call vs numba's inline
libm call; ``--compile-times`` times binding the chain with a cold and a warm kernel
cache, each in a fresh process. A benchmark, not a test: it passes or fails nothing.

    python bench/elementwise_fusion.py [--size 16777216] [--rounds 9] [--per-op]
                                       [--compile-times]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ge  # noqa: E402
from ge.engines import get_engine  # noqa: E402
from ge.ir import Graph, Tensor  # noqa: E402
from ge.ops import create_node, get_schema  # noqa: E402
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE  # noqa: E402

CHAIN = "y = sqrt(relu(tanh(x * 0.5 + 1) * x - 0.1) + 0.5)  [Mul Add Tanh Mul Sub Relu Add Sqrt]"


def build_chain(size: int) -> Graph:
    """The 8-op chain over a [size] float32 input ``x``."""
    graph = Graph("elementwise_chain")
    x = create_node("Data", [], {"shape": [size], "dtype": "float32"}, "x", graph)

    def const(value: float) -> Any:
        return create_node("Const", [], {"value": Tensor(np.array([value], np.float32))},
                           graph=graph)

    def op(op_type: str, *inputs: Any, name: Optional[str] = None) -> Any:
        return create_node(op_type, list(inputs), {}, name, graph)

    value = op("Mul", x, const(0.5))
    value = op("Add", value, const(1.0))
    value = op("Tanh", value)
    value = op("Mul", value, x)
    value = op("Sub", value, const(0.1))
    value = op("Relu", value)
    value = op("Add", value, const(0.5))
    graph.set_outputs([op("Sqrt", value, name="y")])
    return graph


def round_robin(runners: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of each runner, one run of each per round, after a warm-up."""
    for run in runners.values():
        run()
    times: dict[str, list[float]] = {label: [] for label in runners}
    for _ in range(rounds):
        for label, run in runners.items():
            started = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in times.items()}


def ge_runner(graph: Graph, opt_level: int, engines: list[str], x: np.ndarray
              ) -> tuple[Callable[[], Any], Any]:
    executable = ge.compile(graph, opt_level=opt_level, engines=engines)
    session = ge.Session(executable)
    return (lambda: session.run({"x": x})["y"]), executable


def onnxruntime_runner(graph: Graph, x: np.ndarray) -> Optional[Callable[[], Any]]:
    try:
        import onnxruntime
    except ImportError:
        return None
    model = ge.export_onnx(graph)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": x})[0]


def torch_runner(x: np.ndarray) -> Optional[Callable[[], Any]]:
    try:
        import torch
    except ImportError:
        return None
    tensor = torch.from_numpy(x)

    def run() -> Any:
        with torch.inference_mode():
            value = torch.tanh(tensor * 0.5 + 1.0) * tensor - 0.1
            return torch.sqrt(torch.relu(value) + 0.5)

    return run


def machine() -> str:
    """The CPU model, cores and load average, for the record."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, load average {load}"


def chain(size: int, rounds: int) -> None:
    """The chain benchmark: prints a markdown table."""
    x = np.random.default_rng(0).uniform(-3, 3, size).astype(np.float32)
    graph = build_chain(size)
    unfused, _ = ge_runner(graph, 0, ["numpy"], x)
    fused, executable = ge_runner(graph, 3, ["fused"], x)
    reference_fused, _ = ge_runner(graph, 3, ["numpy"], x)
    error = float(np.max(np.abs(fused() - unfused())))
    runners = {"GE unfused (opt_level=0, NumPy engine)": unfused,
               "GE fused (opt_level=3, fused engine)": fused,
               "GE fused, reference kernel (opt_level=3, NumPy engine)": reference_fused}
    times = round_robin(runners, rounds)
    # alone, after GE's: their thread pools, still spinning after a run returns, slow
    # whatever runs next (measured: the fused graph 21.6 -> 28.8 ms after onnxruntime)
    ort = onnxruntime_runner(graph, x)
    if ort is not None:
        times.update(round_robin({"onnxruntime (CPU provider, default options)": ort}, rounds))
    eager = torch_runner(x)
    if eager is not None:
        times.update(round_robin({"PyTorch eager": eager}, rounds))
    fused_time = times["GE fused (opt_level=3, fused engine)"]
    print(f"chain: {CHAIN}; {size} float32 values; {machine()}; median of {rounds} rounds")
    print(f"graph: {len(graph)} nodes at opt_level=0 -> {len(executable.graph)} at 3 "
          f"(engines {executable.report['engines']}); max |fused - unfused| = {error:.3g}\n")
    print("| contender | ms | time / fused |\n|---|---|---|")
    for label, seconds in times.items():
        print(f"| {label} | {seconds * 1e3:.1f} | {seconds / fused_time:.2f} |")
    ratio = times["GE unfused (opt_level=0, NumPy engine)"] / fused_time
    print(f"\nfused vs unfused: {ratio:.2f}x faster (goal >= 3x: "
          f"{'met' if ratio >= 3 else 'NOT met'})")


PER_OP_UNARY = [
    "Relu", "Neg", "Abs", "Sqrt", "Floor", "Ceil", "Sign", "Reciprocal", "IsNaN", "IsInf",
    "LeakyRelu alpha=0.1", "HardSigmoid", "HardSwish", "Softsign", "ThresholdedRelu",
    "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
    "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Elu", "Selu", "Celu", "Mish", "Swish",
    'Gelu approximate="tanh"', "Gelu"]
PER_OP_BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu", "Equal", "Less", "Greater",
                 "LessOrEqual", "GreaterOrEqual", "Pow"]
#: other steps: (label, steps, which arrays: x, y floats; p, q bools)
PER_OP_OTHER = [("Clip", ["Clip in0 0.2:float32 0.8:float32"], "x"),
                ("Where", ["Where in0 in1 in2"], "pxy"), ("And", ["And in0 in1"], "pq"),
                ("Or", ["Or in0 in1"], "pq"), ("Xor", ["Xor in0 in1"], "pq"),
                ("Not", ["Not in0"], "p")]
#: the functions a fused loop leaves to NumPy, and the scalar code a numba loop would run
INLINE_CALLS = {
    "tanh": "math.tanh(v)", "exp": "math.exp(v)", "expm1": "math.expm1(v)",
    "log": "math.log(v)", "log1p": "math.log1p(v)", "sin": "math.sin(v)",
    "cos": "math.cos(v)", "tan": "math.tan(v)", "arcsin": "math.asin(v)",
    "arccos": "math.acos(v)", "arctan": "math.atan(v)", "sinh": "math.sinh(v)",
    "cosh": "math.cosh(v)", "arcsinh": "math.asinh(v)", "arccosh": "math.acosh(v + 1)",
    "arctanh": "math.atanh(v)", "power": "v ** w",
    "erf (GE's NumPy erf)": "math.erf(np.float64(v))", "sqrt (a loop op)": "math.sqrt(v)"}
NUMPY_CALLS: dict[str, Callable[..., Any]] = {
    "tanh": np.tanh, "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "arcsinh": np.arcsinh,
    "arccosh": lambda v: np.arccosh(v + 1), "arctanh": np.arctanh, "power": np.power,
    "erf (GE's NumPy erf)": get_schema("Erf").kernel, "sqrt (a loop op)": np.sqrt}


def _fused_node(steps: list[str], arrays: list[np.ndarray]) -> Any:
    graph = Graph("per_op")
    inputs = [create_node("Data", [], {"shape": list(a.shape), "dtype": a.dtype.name},
                          f"x{i}", graph) for i, a in enumerate(arrays)]
    node = create_node(FUSED_ELEMENTWISE, inputs, {"steps": steps}, "fused", graph)
    graph.set_outputs([node])
    return node


def _per_element(seconds: float, size: int) -> str:
    return f"{seconds * 1e9 / size:.2f}"


def per_op(size: int, rounds: int) -> None:
    """Each step op alone over ``size`` float32 values: the reference kernel (the unfused
    op) against the fused engine's kernel, in ns per element; then each transcendental
    function as NumPy's call against numba's inline scalar call."""
    engine = get_engine("fused")
    reference = get_schema(FUSED_ELEMENTWISE).kernel
    rng = np.random.default_rng(0)
    x = rng.uniform(0.05, 0.95, size).astype(np.float32)  # in every op's domain
    y = rng.uniform(0.5, 2.0, size).astype(np.float32)
    print(f"per op, {size} float32 values, ns per element, median of {rounds}; {machine()}\n")
    print("| op | NumPy reference | fused engine | fused engine is | cost model |")
    print("|---|---|---|---|---|")
    named = {"x": x, "y": y, "p": x > 0.5, "q": y > 1.0}
    cases = [(text, [text.split()[0] + " in0 " + " ".join(text.split()[1:])], "x")
             for text in PER_OP_UNARY]
    cases += [(text, [f"{text} in0 in1"], "xy") for text in PER_OP_BINARY] + PER_OP_OTHER
    for text, steps, names in cases:
        arrays = [named[n] for n in names]
        node = _fused_node(steps, arrays)
        kernel = engine.bind(node)
        times = round_robin({"reference": functools.partial(reference, *arrays, steps=steps),
                             "fused": functools.partial(kernel, arrays)}, rounds)
        decision = "fuse" if engine.supports(node) else "decline"
        print(f"| {text} | {_per_element(times['reference'], size)} | "
              f"{_per_element(times['fused'], size)} | "
              f"{times['reference'] / times['fused']:.1f}x | {decision} |")
    _inline_calls(x, y, rounds)


def _inline_calls(x: np.ndarray, y: np.ndarray, rounds: int) -> None:
    import numba

    print("\n| function | NumPy call | numba inline (scalar libm) | numba / NumPy |")
    print("|---|---|---|---|")
    out = np.empty_like(x)
    for name, expression in INLINE_CALLS.items():
        source = (f"def loop(out, a, b):\n    for i in range(a.size):\n        v = a[i]\n"
                  f"        w = b[i]\n        out[i] = np.float32({expression})\n")
        namespace: dict[str, Any] = {"np": np, "math": math}
        exec(source, namespace)  # noqa: S102 - a measurement of our own source
        loop = numba.njit(error_model="numpy")(namespace["loop"])
        function = NUMPY_CALLS[name]
        arguments = [x, y] if name == "power" else [x]
        times = round_robin({"numpy": functools.partial(function, *arguments),
                             "numba": functools.partial(loop, out, x, y)}, rounds)
        print(f"| {name} | {_per_element(times['numpy'], x.size)} | "
              f"{_per_element(times['numba'], x.size)} | "
              f"{times['numba'] / times['numpy']:.1f} |")


def compile_times(size: int) -> None:
    """Binding the chain (ge.compile and Session) in fresh processes: with an empty
    kernel cache, then with the cache the first filled; and in-process, a second bind."""
    script = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as directory:
        environment = dict(os.environ, GE_KERNEL_CACHE=directory)
        results = []
        for _ in range(3):
            output = subprocess.run([sys.executable, script, "--bind-only", "--size", str(size)],
                                    env=environment, capture_output=True, text=True, check=True)
            results.append(float(output.stdout.split()[-1]))
    graph = build_chain(size)
    x = np.zeros(size, np.float32)
    ge_runner(graph, 3, ["fused"], x)
    started = time.perf_counter()
    ge_runner(graph, 3, ["fused"], x)
    again = time.perf_counter() - started
    print(f"binding the chain (2 loops, serial and parallel variants; compile + Session), "
          f"{machine()}:")
    print(f"- cold kernel cache, new process: {results[0]:.2f} s")
    print(f"- warm kernel cache, new process: {results[1]:.2f} s, {results[2]:.2f} s")
    print(f"- same process, second bind: {again * 1e3:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--per-op", action="store_true", help="the per-op cost table")
    parser.add_argument("--compile-times", action="store_true",
                        help="binding the chain with a cold and a warm kernel cache")
    parser.add_argument("--bind-only", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.bind_only:
        started = time.perf_counter()
        ge_runner(build_chain(arguments.size), 3, ["fused"],
                  np.zeros(arguments.size, np.float32))
        print(f"{time.perf_counter() - started:.3f}")
    elif arguments.per_op:
        per_op(2 * 1024 * 1024, arguments.rounds)
    elif arguments.compile_times:
        compile_times(arguments.size)
    else:
        chain(arguments.size, arguments.rounds)
