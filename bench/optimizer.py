"""What the optimizer buys on real models: node counts per level and NumPy-engine latency.

For ResNet-50 and the BERT-style encoder of ``examples/zoo.py`` (exported to ONNX,
parsed by GE), this compiles the graph at opt_level 0, 1, 2 and 3 and reports for each
level the node count and the median latency of ``Session.run`` on the default engines
(timed by ``ge.benchmark``: blocks alternating between levels over several rounds), and
the ratio level 3 / level 0 (the goal is <= 0.7). Outputs of every level are checked
against level 0. GE against onnxruntime and PyTorch is ``bench/speed.py``'s.

    python bench/optimizer.py                    # both models, 5 rounds, writes the docs
    python bench/optimizer.py --models bert --runs 3 --no-write

The results replace the optimizer section of ``docs/benchmarks.md`` (between its
markers), so the document always shows the latest run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ge  # noqa: E402
from bench.report import DOC, markers, write_section  # noqa: E402
from examples import zoo  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("optimizer")
GOAL = 0.7
LEVELS = (0, 1, 2, 3)


@dataclass
class ModelResult:
    """One model's numbers."""

    name: str
    nodes: dict[int, int] = field(default_factory=dict)
    computing: dict[int, int] = field(default_factory=dict)
    latency: dict[int, float] = field(default_factory=dict)
    compile_seconds: dict[int, float] = field(default_factory=dict)
    max_error: dict[int, float] = field(default_factory=dict)
    top_ops: str = ""

    @property
    def ratio(self) -> float:
        """Level 3 latency over level 0 latency."""
        return self.latency[3] / self.latency[0]


def _relative_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for key, expected in want.items():
        scale = max(float(np.max(np.abs(expected))), 1e-6)
        difference = np.abs(got[key].astype(np.float64) - expected)
        worst = max(worst, float(np.max(difference)) / scale)
    return worst


def compile_levels(result: ModelResult, graph: ge.Graph, feeds: dict[str, np.ndarray]
                   ) -> dict[str, Callable[[], Any]]:
    """Compile at every level; record nodes, compile time and error vs level 0; return a
    runner per level."""
    runners: dict[str, Callable[[], Any]] = {}
    reference: dict[str, np.ndarray] = {}
    for level in LEVELS:
        started = time.perf_counter()
        executable = ge.compile(graph, opt_level=level)
        result.compile_seconds[level] = time.perf_counter() - started
        optimized = executable.graph
        result.nodes[level] = len(optimized)
        result.computing[level] = sum(1 for n in optimized.nodes
                                      if n.op_type not in ("Data", "Const"))
        session = ge.Session(executable)
        outputs = session.run(feeds)
        reference = reference or outputs
        result.max_error[level] = _relative_error(outputs, reference)
        runners[f"ge{level}"] = _runner(session, feeds)
    histogram: dict[str, int] = {}
    for node in optimized.nodes:
        if node.op_type not in ("Data", "Const"):
            histogram[node.op_type] = histogram.get(node.op_type, 0) + 1
    ranked = sorted(histogram.items(), key=lambda item: -item[1])
    result.top_ops = ", ".join(f"{op} x{n}" for op, n in ranked[:6])
    return runners


def _runner(session: ge.Session, feeds: dict[str, np.ndarray]) -> Callable[[], Any]:
    return lambda: session.run(feeds)


def bench_model(name: str, runs: int, folder: str) -> ModelResult:
    """All numbers for one zoo model (batch 1)."""
    path = zoo.export_onnx(name, os.path.join(folder, f"{name}.onnx"))
    graph = ge.parse_onnx(path)
    feeds = zoo.example_feeds(name, batch=1, seed=0)
    result = ModelResult(name)
    runners = compile_levels(result, graph, feeds)
    timed = benchmark.compare(runners, rounds=runs, block_seconds=0.3)
    result.latency = {level: timed.median(f"ge{level}") for level in LEVELS}
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def render_console(result: ModelResult) -> str:
    lines = [f"== {result.name} =="]
    for level in LEVELS:
        lines.append(f"  level {level}: {result.nodes[level]:4d} nodes "
                     f"({result.computing[level]:3d} computing), "
                     f"{_ms(result.latency[level]):>8} ms/run, compile "
                     f"{_ms(result.compile_seconds[level])} ms, "
                     f"max rel. error vs level 0 {result.max_error[level]:.1e}")
    verdict = "meets" if result.ratio <= GOAL else "misses"
    lines.append(f"  latency level 3 / level 0 = {result.ratio:.2f} ({verdict} the goal <= {GOAL})")
    return "\n".join(lines)


def render_markdown(results: list[ModelResult], runs: int) -> str:
    """The optimizer section of docs/benchmarks.md."""
    lines = [
        BEGIN,
        "## Optimizer: node counts and latency per opt_level",
        "",
        f"Measured by `python bench/optimizer.py` on {time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"NumPy {np.__version__}. Batch 1, GE on its default engines; the four levels timed "
        f"by `ge.benchmark` (blocks of runs alternating over {runs} rounds, medians). Nodes "
        "include `Const` and `Data`; computing nodes exclude them. Goal: level 3 / level 0 "
        f"latency <= {GOAL}. GE against onnxruntime and PyTorch: the speed section below.",
        "",
        "| model | nodes L0 | L1 | L2 | L3 | computing L0 -> L3 | ms L0 | ms L1 | ms L2 | ms L3 "
        "| L3 / L0 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.nodes[0]} | {r.nodes[1]} | {r.nodes[2]} | {r.nodes[3]} | "
            f"{r.computing[0]} -> {r.computing[3]} | "
            + " | ".join(_ms(r.latency[level]) for level in LEVELS)
            + f" | **{r.ratio:.2f}** |")
    lines += ["", "Level 3 graphs (computing ops, most frequent first):", ""]
    lines += [f"- {r.name}: {r.top_ops}; max relative error vs level 0: "
              f"{max(r.max_error.values()):.1e}" for r in results]
    lines += ["", END]
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert"],
                        choices=sorted(zoo.MODELS))
    parser.add_argument("--runs", type=int, default=5, help="rounds of timed blocks")
    parser.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            results.append(bench_model(name, args.runs, folder))
            print(render_console(results[-1]), flush=True)
    if not args.no_write:
        write_section("optimizer", render_markdown(results, args.runs))
        print(f"wrote the optimizer section of {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
