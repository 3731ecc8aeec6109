"""Elementwise-chain fusion: a chain of 8 elementwise ops over 16M float32 values.

Times, in one run on this machine (median of ``--repeat`` runs each):

* unfused: the graph compiled at opt_level=0 on the NumPy engine (one pass over memory,
  and one temporary, per op);
* fused: the graph compiled at opt_level=3 with the fused engine (one FusedElementwise,
  one generated numexpr kernel reading x once and writing y once);
* fused, reference kernel: the same fused graph on the NumPy engine (the steps one by one),
  to show that the gain comes from the generated kernel;
* onnxruntime on the same chain exported with ``ge.export_onnx`` (ORT's own optimizations
  on), and PyTorch eager on the same ops.

Prints each time, and ratios against the unfused graph and against onnxruntime and torch.
Goal: fused >= 3x faster than unfused. A benchmark, not a test: it passes or fails nothing.

    python bench/elementwise_fusion.py [--size 16777216] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ge  # noqa: E402
import ge.engines.fused  # noqa: E402,F401 - registers the fused engine
from ge.ir import Graph, Tensor  # noqa: E402
from ge.ops import create_node  # noqa: E402

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


def median_seconds(run: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median wall-clock seconds of one run, and median CPU seconds (all threads)."""
    run()  # warm up: first-touch allocation, kernel binding, thread pools
    wall, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0,
                        help="numexpr threads (default: numexpr's own choice)")
    args = parser.parse_args()
    numexpr = ge.engines.fused.numexpr_module()
    if numexpr is None:
        sys.exit("the fused engine needs numexpr: pip install numexpr")
    if args.threads:
        numexpr.set_num_threads(args.threads)
    x = np.random.default_rng(0).uniform(-3, 3, args.size).astype(np.float32)
    graph = build_chain(args.size)

    unfused, _ = ge_runner(graph, 0, ["numpy"], x)
    fused, executable = ge_runner(graph, 3, ["fused"], x)
    reference_fused, _ = ge_runner(graph, 3, ["numpy"], x)
    expected = unfused()
    np.testing.assert_allclose(fused(), expected, rtol=1e-5, atol=1e-6)
    print(f"chain: {CHAIN}")
    print(f"values: {args.size} float32; cores: {os.cpu_count()}; numexpr "
          f"{numexpr.__version__} on {numexpr.get_num_threads()} threads (VML: "
          f"{bool(numexpr.use_vml)}); load average {os.getloadavg()[0]:.1f}; "
          f"median of {args.repeat}")
    print(f"graph: {len(graph)} nodes at level 0 -> {len(executable.graph)} at level 3 "
          f"(engines {executable.report['engines']})")

    rows = [("ge unfused (level 0, numpy engine)", unfused),
            ("ge fused (level 3, fused engine)", fused),
            ("ge fused, reference kernel (level 3, numpy engine)", reference_fused)]
    ort = onnxruntime_runner(graph, x)
    if ort is not None:
        rows.append(("onnxruntime (same chain, ORT optimizations on)", ort))
    eager = torch_runner(x)
    if eager is not None:
        rows.append(("pytorch eager", eager))
    times = {label: median_seconds(run, args.repeat) for label, run in rows}
    fused_time = times["ge fused (level 3, fused engine)"][0]
    print(f"  {'':<52} {'wall ms':>9} {'cpu ms':>9}   fused is")
    for label, (seconds, cpu) in times.items():
        print(f"  {label:<52} {seconds * 1e3:9.1f} {cpu * 1e3:9.1f}   "
              f"{seconds / fused_time:5.2f}x faster")
    ratio = times["ge unfused (level 0, numpy engine)"][0] / fused_time
    verdict = "met" if ratio >= 3 else "NOT met"
    print(f"fused vs unfused: {ratio:.2f}x faster (goal >= 3x: {verdict})")


if __name__ == "__main__":
    main()
