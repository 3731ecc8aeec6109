"""Throughput of a pipeline backend: a zoo model split into 1, 2 and 4 stages.

The model (ResNet-50 by default) is exported at a fixed batch (the micro-batch) and
compiled at the default level; ``partition.CostPartitioner`` splits the compiled
graph into balanced stages and ``ge.distributed.Pipeline(backend="threads")`` streams
micro-batches through them, each stage on its own thread (``--backend ray``: each
stage on a Ray actor of a local Ray instance, ``--num-cpus`` CPUs, or of the cluster
``RAY_ADDRESS`` names). For each stage count the
table shows samples per second over ``--microbatches`` micro-batches (median of
``--rounds`` timed calls after one untimed call), against one session running the
micro-batches one after the other. The outputs are checked bit for bit against that
session's.

Stages overlap only as far as there are cores: on a machine of two cores, four stages
cannot run faster than two (and each stage's kernels also want several threads:
``--threads`` caps the threads of one kernel). A Ray stage actor's kernels use
``--threads`` threads, 1 when not given; the single session then uses as many, so
that the outputs stay bit for bit the same.

    python bench/pipeline.py                              # ResNet-50, micro-batch 4
    python bench/pipeline.py --model resnet18 --batch 1 --microbatches 8 --rounds 1
    python bench/pipeline.py --backend ray --model resnet18 --num-cpus 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import ge  # noqa: E402
from bench.report import markers, write_section  # noqa: E402
from examples import zoo  # noqa: E402
from ge import distributed, partition  # noqa: E402


def timed(work: Callable[[], Any], rounds: int) -> float:
    """The median seconds of ``work`` over ``rounds`` calls, after one untimed call."""
    work()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def same(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]]) -> bool:
    return all(list(g) == list(w) and all(np.array_equal(g[k], w[k]) for k in w)
               for g, w in zip(got, want))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(zoo.MODELS))
    parser.add_argument("--batch", type=int, default=4, help="samples per micro-batch")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--stages", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="threads per kernel")
    parser.add_argument("--backend", default="threads", choices=distributed.known_backends())
    parser.add_argument("--num-cpus", type=int, default=None,
                        help="CPUs of the local Ray instance (--backend ray)")
    parser.add_argument("--write", action="store_true",
                        help="also write the table to docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.backend == "ray" and args.threads is None:
        args.threads = 1  # what each stage actor uses: the single session does the same
    backend_options = {"num_cpus": args.num_cpus} if args.backend == "ray" else {}
    with tempfile.TemporaryDirectory() as folder:
        path = zoo.export_onnx(args.model, os.path.join(folder, f"{args.model}.onnx"),
                               batch=args.batch, dynamic_batch=False)
        executable = ge.compile(ge.parse_onnx(path), threads=args.threads)
    feeds = [zoo.example_feeds(args.model, batch=args.batch, seed=seed)
             for seed in range(args.microbatches)]
    samples = args.batch * args.microbatches
    session = ge.Session(executable)
    want = [session.run(feed) for feed in feeds]
    single = timed(lambda: [session.run(feed) for feed in feeds], args.rounds)
    rows = [f"| one session | - | {single * 1e3:.1f} | {samples / single:.1f} | 1.00 | yes |"]
    print(rows[0], flush=True)
    for stages in args.stages:
        parts = partition.CostPartitioner().create_partitions(executable, num_partitions=stages)
        plan = partition.PipelineScheduler().create_schedule(
            parts, num_microbatches=args.microbatches)
        balance = partition.summarize(parts).balance
        with distributed.Pipeline(plan, backend=args.backend,
                                  backend_options=backend_options) as pipeline:
            got = pipeline.run_many(feeds)
            seconds = timed(lambda pipeline=pipeline: pipeline.run_many(feeds), args.rounds)
        row = (f"| {plan.num_stages} stages | {balance:.3f} | {seconds * 1e3:.1f} | "
               f"{samples / seconds:.1f} | {single / seconds:.2f} | "
               f"{'yes' if same(got, want) else 'NO'} |")
        rows.append(row)
        print(row, flush=True)
    section = "pipeline" if args.backend == "threads" else f"pipeline-{args.backend}"
    begin, end = markers(section)
    head = [begin, f"## Pipeline: the {args.backend} backend", "",
            f"Measured by `python bench/pipeline.py` on {time.strftime('%Y-%m-%d')}: "
            f"{args.model}, {args.microbatches} micro-batches of {args.batch} samples, "
            f"{os.cpu_count()} cores, {args.threads or 'default'} threads per kernel, "
            f"median of {args.rounds} calls. Stages from "
            "`partition.CostPartitioner` (balance: estimated max / mean stage cost).", "",
            "| run | balance | ms per call | samples/s | speed-up | bit-exact |",
            "|---|---|---|---|---|---|"]
    text = "\n".join(head + rows + [end])
    print(text)
    if args.write:
        write_section(section, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
