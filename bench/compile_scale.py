"""How parsing and compiling time grows with graph size, next to onnxruntime's session creation.

For ONNX chains of N elementwise nodes (``examples/synthetic.py``: Add, Relu, Mul,
Sigmoid repeating on a [batch, 16] tensor), stacks of feed-forward transformer blocks in
primitive ops, and ResNet-50 (``examples/zoo.py``), this times ``ge.parse_onnx``,
``ge.compile`` at level 0 and at level 3, ``ge.Session`` and onnxruntime's
``InferenceSession`` (CPU provider, default options, all graph optimizations) on the
same serialized model. Each model runs in a fresh process; within it GE (parse +
compile level 3 + Session) and onnxruntime alternate, ``--repeats`` times each after one
untimed warm-up of each, and the medians are reported; the garbage collector runs before
each contender's timed block, so that one's leftovers are not freed on the other's clock.
Level 0 is timed once per round on its own parse. onnxruntime is also timed alone, in a
process that never imports GE.

    python bench/compile_scale.py                        # 1k/8k/32k/128k, stacks, ResNet-50
    python bench/compile_scale.py --chains 1000 8000 --no-stacks --no-write

The results replace the compile-scale section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import markers, write_section  # noqa: E402

BEGIN, END = markers("compile-scale")


def _model_bytes(kind: str, size: int, folder: str) -> bytes:
    from examples import synthetic, zoo

    if kind == "chain":
        return synthetic.elementwise_chain(size)
    if kind == "stack":
        return synthetic.transformer_stack(size)
    path = zoo.export_onnx(kind, Path(folder) / f"{kind}.onnx", batch=1, dynamic_batch=True,
                           model=zoo.MODELS[kind].factory(seed=0), fold_batchnorm=False)
    return Path(path).read_bytes()


def measure_alone(kind: str, size: int, repeats: int) -> dict[str, Any]:
    """onnxruntime's session creation alone in this process (no GE imported or run)."""
    import onnxruntime

    with tempfile.TemporaryDirectory() as folder:
        model = _model_bytes(kind, size, folder)
    times = []
    for _ in range(repeats + 1):
        gc.collect()
        started = time.perf_counter()
        onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        times.append(time.perf_counter() - started)
    return {"ort_alone": statistics.median(times[1:])}


def measure(kind: str, size: int, repeats: int) -> dict[str, Any]:
    """One model's figures, in this process (the parent runs each model in a fresh one)."""
    import onnxruntime

    import ge

    with tempfile.TemporaryDirectory() as folder:
        model = _model_bytes(kind, size, folder)
    times: dict[str, list[float]] = {k: [] for k in
                                     ("parse", "compile0", "compile3", "session", "ort")}
    nodes = 0
    for round_ in range(repeats + 1):
        gc.collect()  # each contender starts on a clean heap: no one's garbage on its clock
        started = time.perf_counter()
        graph = ge.parse_onnx(model)
        parsed = time.perf_counter()
        executable = ge.compile(graph)
        compiled = time.perf_counter()
        ge.Session(executable)
        done = time.perf_counter()
        nodes = len(graph)
        level0_graph = ge.parse_onnx(model)
        level0_started = time.perf_counter()
        ge.compile(level0_graph, opt_level=0)
        level0 = time.perf_counter() - level0_started
        del graph, executable, level0_graph
        gc.collect()
        ort_started = time.perf_counter()
        onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        ort = time.perf_counter() - ort_started
        if round_ == 0:
            continue  # warm-up: imports, first allocations
        for key, value in (("parse", parsed - started), ("compile3", compiled - parsed),
                           ("session", done - compiled), ("compile0", level0), ("ort", ort)):
            times[key].append(value)
    result: dict[str, Any] = {key: statistics.median(values) for key, values in times.items()}
    result.update(kind=kind, size=size, nodes=nodes)
    return result


def _run_fresh(kind: str, size: int, repeats: int, mode: str = "--one") -> dict[str, Any]:
    command = [sys.executable, __file__, mode, kind, str(size), "--repeats", str(repeats)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def _label(row: dict[str, Any]) -> str:
    if row["kind"] == "chain":
        return f"chain of {row['size']:,}"
    if row["kind"] == "stack":
        return f"{row['size']:,} transformer blocks"
    return row["kind"]


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | nodes | `parse_onnx` s | `compile` L0 s | `compile` L3 s | `Session` s "
             "| GE total s | onnxruntime session s (same process / alone) | GE / onnxruntime "
             "| growth vs previous |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    previous: dict[str, dict[str, Any]] = {}
    for row in rows:
        total = row["parse"] + row["compile3"] + row["session"]
        before = previous.get(row["kind"])
        growth = ""
        if before is not None:
            before_total = before["parse"] + before["compile3"] + before["session"]
            growth = f"{total / before_total:.2f}x for {row['nodes'] / before['nodes']:.1f}x nodes"
        previous[row["kind"]] = row
        lines.append(f"| {_label(row)} | {row['nodes']:,} | {row['parse']:.3f} | "
                     f"{row['compile0']:.3f} | {row['compile3']:.3f} | {row['session']:.4f} | "
                     f"{total:.3f} | {row['ort']:.3f} / {row['ort_alone']:.3f}{_flag(row)} | "
                     f"{total / row['ort']:.2f} | {growth} |")
    return "\n".join(lines)


def _flag(row: dict[str, Any]) -> str:
    """A mark where the same-process figure is over 10 % off the figure alone."""
    return " (!)" if abs(row["ort"] / row["ort_alone"] - 1) > 0.10 else ""



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", nargs="*", type=int, default=[1000, 8000, 32000, 128000])
    parser.add_argument("--stacks", nargs="*", type=int, default=[50, 400, 1600])
    parser.add_argument("--no-stacks", action="store_true")
    parser.add_argument("--models", nargs="*", default=["resnet50"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--alone", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.repeats)))
        return 0
    if args.alone:
        print(json.dumps(measure_alone(args.alone[0], int(args.alone[1]), args.repeats)))
        return 0
    jobs = [("chain", n) for n in args.chains]
    jobs += [] if args.no_stacks else [("stack", n) for n in args.stacks]
    jobs += [(name, 1) for name in args.models]
    rows = []
    for kind, size in jobs:
        repeats = args.repeats if kind not in ("chain", "stack") or size <= 32000 else 1
        row = _run_fresh(kind, size, repeats)
        row.update(_run_fresh(kind, size, repeats, "--alone"))
        rows.append(row)
        print(f"{_label(row)}: {json.dumps(row)}", flush=True)
    import numpy
    import onnxruntime

    text = "\n".join([
        BEGIN,
        "## Parsing and compiling at scale",
        "",
        f"Measured by `python bench/compile_scale.py` on {time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"NumPy {numpy.__version__}, onnxruntime {onnxruntime.__version__}. Each model in a "
        "fresh process; GE (parse, compile at level 3, Session) and onnxruntime's "
        "InferenceSession (CPU provider, default options) alternate on the same serialized "
        f"model, medians of {args.repeats} rounds after a warm-up round (one round for "
        "graphs over 32,000 nodes); onnxruntime is also timed alone in a fresh process, and "
        "(!) marks a same-process figure more than 10 % off that one. Level 0 is timed on "
        "its own parse. Chains: N elementwise "
        "nodes (Add, Relu, Mul, Sigmoid) on [batch, 16]; transformer blocks: 21 primitive "
        "ops each (MatMul, Add, erf GELU, decomposed LayerNorm), fused to 4.",
        "",
        table(rows),
        END,
    ])
    print(text)
    if not args.no_write:
        write_section("compile-scale", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
