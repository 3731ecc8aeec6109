"""Two streams against one, on models with parallel branches.

Models: two independent towers (MatMul + Tanh, 4 deep, 512 wide, batch 256) joined by
an Add, and an Inception-style block (1x1; 1x1 -> 3x3; 1x1 -> 5x5; 3x3 max pool ->
1x1; concatenated) on a [8, 28, 28, 192] NHWC input. Each is compiled with
``streams=1`` and ``streams=2`` and the two sessions are timed in blocks of runs that
alternate over several rounds (after a warm-up of each); medians are reported, with the
compiler's own choice (``streams=None``). Runs twice, each in a fresh process: with
BLAS's default threads, and with ``OPENBLAS_NUM_THREADS=1`` (where the products leave
cores free for a second stream). Results are checked equal bit for bit.

    python bench/streams.py            # writes docs/benchmarks.md
    python bench/streams.py --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import markers, write_section  # noqa: E402

BEGIN, END = markers("streams")


def _op(graph: Any, op_type: str, inputs: list[Any], name: str, **attrs: Any) -> Any:
    from ge.ops import create_node

    return create_node(op_type, inputs, attrs, name, graph)


def towers() -> tuple[Any, dict[str, Any]]:
    import numpy as np

    import ge

    graph, rng = ge.Graph("two_towers"), np.random.default_rng(0)
    x = _op(graph, "Data", [], "x", shape=[256, 512])
    ends = []
    for tower in "ab":
        value = x
        for i in range(4):
            weights = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
            w = _op(graph, "Const", [], f"{tower}w{i}", value=ge.Tensor(weights))
            value = _op(graph, "Tanh", [_op(graph, "MatMul", [value, w], f"{tower}m{i}")],
                        f"{tower}t{i}")
        ends.append(value)
    graph.set_outputs([_op(graph, "Add", ends, "y")])
    return graph, {"x": rng.standard_normal((256, 512)).astype(np.float32)}


def inception() -> tuple[Any, dict[str, Any]]:
    import numpy as np

    import ge

    graph, rng = ge.Graph("inception_block"), np.random.default_rng(0)
    x = _op(graph, "Data", [], "x", shape=[8, 28, 28, 192])

    def conv(value: Any, cin: int, cout: int, k: int, name: str) -> Any:
        weights = (rng.standard_normal((k, k, cin, cout)) / np.sqrt(k * k * cin))
        w = _op(graph, "Const", [], f"{name}_w", value=ge.Tensor(weights.astype(np.float32)))
        pad = k // 2
        out = _op(graph, "Conv2D", [value, w], name, strides=[1, 1],
                  pads=[pad, pad, pad, pad], data_format="NHWC")
        return _op(graph, "Relu", [out], f"{name}_relu")

    b1 = conv(x, 192, 64, 1, "b1")
    b2 = conv(conv(x, 192, 96, 1, "b2a"), 96, 128, 3, "b2b")
    b3 = conv(conv(x, 192, 16, 1, "b3a"), 16, 32, 5, "b3b")
    pooled = _op(graph, "MaxPool", [x], "b4_pool", ksize=[3, 3], strides=[1, 1],
                 pads=[1, 1, 1, 1], data_format="NHWC")
    b4 = conv(pooled, 192, 32, 1, "b4")
    graph.set_outputs([_op(graph, "Concat", [b1, b2, b3, b4], "y", axis=3)])
    return graph, {"x": rng.standard_normal((8, 28, 28, 192)).astype(np.float32)}


def measure(rounds: int, block: int) -> dict[str, Any]:
    import numpy as np

    import ge

    results: dict[str, Any] = {"blas_threads": os.environ.get("OPENBLAS_NUM_THREADS",
                                                              "default")}
    for name, build in (("two towers", towers), ("Inception-style block", inception)):
        graph, feed = build()
        sessions = {n: ge.Session(ge.compile(graph, streams=n)) for n in (1, 2)}
        auto = ge.compile(graph)
        outputs = {n: s.run(feed) for n, s in sessions.items()}
        for key in outputs[1]:
            assert np.array_equal(outputs[1][key], outputs[2][key]), "streams changed bits"
        times: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(rounds):
            for count, session in sessions.items():
                started = time.perf_counter()
                for _ in range(block):
                    session.run(feed)
                times[count].append((time.perf_counter() - started) / block)
        one, two = statistics.median(times[1]), statistics.median(times[2])
        results[name] = {"one_ms": one * 1e3, "two_ms": two * 1e3, "ratio": two / one,
                         "auto_streams": auto.stream_count,
                         "events": sum(len(w) for w in sessions[2].executable.stream_waits)}
    return results


def _fresh(blas_threads: str, rounds: int, block: int) -> dict[str, Any]:
    environment = dict(os.environ)
    if blas_threads != "default":
        environment["OPENBLAS_NUM_THREADS"] = blas_threads
    command = [sys.executable, __file__, "--one", str(rounds), str(block)]
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            env=environment).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def report(runs: list[dict[str, Any]], rounds: int, block: int) -> str:
    import numpy

    lines = [BEGIN, "## Streams", "",
             f"Measured by `python bench/streams.py` on {time.strftime('%Y-%m-%d')}: "
             f"{platform.machine()}, {os.cpu_count()} CPUs, NumPy {numpy.__version__}. Each "
             f"model compiled with 1 and with 2 streams; the two sessions alternate in blocks "
             f"of {block} runs over {rounds} rounds, medians; outputs equal bit for bit. "
             "\"auto\" is the number of streams `ge.compile` chose by itself.", "",
             "| model | BLAS threads | 1 stream ms | 2 streams ms | 2 / 1 | events | auto |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        for name in ("two towers", "Inception-style block"):
            row = run[name]
            lines.append(f"| {name} | {run['blas_threads']} | {row['one_ms']:.2f} | "
                         f"{row['two_ms']:.2f} | {row['ratio']:.2f} | {row['events']} | "
                         f"{row['auto_streams']} |")
    lines.append(END)
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(int(args.one[0]), int(args.one[1]))))
        return 0
    runs = [_fresh(threads, args.rounds, args.block) for threads in ("default", "1")]
    text = report(runs, args.rounds, args.block)
    print(text)
    if not args.no_write:
        write_section("streams", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
