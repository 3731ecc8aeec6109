"""GE against onnxruntime and PyTorch eager on the model zoo, with a harness to trust.

For each model of ``examples/zoo.py`` (ResNet-18, ResNet-50, MobileNetV2, the BERT-style
encoder, the seed's SimpleCNN) at batch 1 and 8, ``ge.benchmark`` times GE (level 3,
default engines), onnxruntime (CPU provider, default options, all optimizations) and
PyTorch eager (``torch.inference_mode``, default threads) on the same inputs: each
warmed up on its own, then blocks of runs alternating over several rounds, medians.
Each contender is also timed alone in a fresh process, and an in-harness figure more
than 10 % off its solo figure is flagged (!). Achieved GFLOP/s (GE's cost model's FLOPs
over the median time) is shown against the machine's measured float32 matmul peak (the
faster of NumPy's BLAS and oneDNN). The summary is measured again, in the harness only,
in a child process with OpenBLAS's core type switched (``OPENBLAS_CORETYPE=Haswell`` set
where it was unset, unset where it was set): it picks NumPy's matrix-product kernels.

    python bench/speed.py                          # writes the speed section of the docs
    python bench/speed.py --models resnet18 --batches 1 --rounds 3 --no-write
    python bench/speed.py --no-other-blas             # skip the second BLAS setting
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.report import cpu_times, markers, noise_note, write_section  # noqa: E402
from examples import zoo  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("speed")
CONTENDERS = ("ge", "onnxruntime", "torch")


def measure(name: str, batch: int, folder: str, rounds: int, block_seconds: float,
            solo: bool) -> tuple[benchmark.Result, float]:
    path = zoo.export_onnx(name, os.path.join(folder, f"{name}.onnx"), batch=1,
                           dynamic_batch=True)
    feeds = zoo.example_feeds(name, batch=batch)
    inputs = os.path.join(folder, f"{name}-{batch}.npz")
    np.savez(inputs, **feeds)  # the same inputs for the runs alone
    specs = [benchmark.Spec(contender, path, batch, zoo=name, feeds=inputs)
             for contender in CONTENDERS]
    runs = {spec.contender: benchmark.runner(spec, feeds) for spec in specs}
    result = benchmark.compare(runs, rounds=rounds, block_seconds=block_seconds)
    if solo:
        for spec in specs:
            result.solo[spec.contender] = benchmark.solo(spec, rounds, block_seconds,
                                                         extra_path=str(ROOT))
    return result, benchmark.estimated_flops(path, batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(zoo.MODELS))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--no-solo", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-other-blas", action="store_true",
                        help="do not measure the summary again under the other "
                             "OPENBLAS_CORETYPE setting")
    parser.add_argument("--summary-only", action="store_true",
                        help="print the BLAS settings, the matmul peaks and the summary "
                             "rows only (what the run under the other setting reports)")
    args = parser.parse_args(argv)
    if args.summary_only:
        args.no_solo = args.no_write = args.no_other_blas = True
    info = benchmark.machine()
    peaks = benchmark.matmul_peaks()
    peak = max(peaks.values())
    import onnxruntime
    import torch

    settings = _settings(info["blas_settings"])
    peak_text = ", ".join(f"{name} {rate:.0f} GFLOP/s" for name, rate in peaks.items())
    if args.summary_only:
        print(f"SETTINGS {settings}\nPEAKS {peak_text}", flush=True)
    lines = [BEGIN, "## Speed: GE against onnxruntime and PyTorch eager", "",
             f"Measured by `python bench/speed.py` on {time.strftime('%Y-%m-%d')}: "
             f"{info['cpu']}, {info['cores']} cores; Python {info['python']}, NumPy "
             f"{info['numpy']} with {info['blas']} ({settings}); onnxruntime "
             f"{onnxruntime.__version__}; PyTorch {torch.__version__}; oneDNN "
             f"{info['onednn'] or 'not installed'} (the onednn engine). float32 matmul "
             f"peak here (1024^3, the faster library counts): {peak_text}"
             ". GE at level 3 on its default engines; "
             "onnxruntime with default options; PyTorch eager under `inference_mode`. Each "
             f"contender warmed up alone, then blocks of about {args.block_seconds} s "
             f"alternating over {args.rounds} rounds (each block after 2 untimed runs); "
             "medians. \"alone\" is the same measurement in a fresh process running only "
             "that contender; (!) marks an in-harness figure over 10 % off it. In the "
             "harness the peers run in a process whose C heap GE has tuned (glibc's "
             "`mallopt`, a setting of the whole process: "
             "`ge.runtime.memory.tune_process_heap`); alone, they run without it. A ratio is "
             "that of the medians; in parentheses, the lowest and highest of the rounds' "
             "own ratios (each round's GE block against the peer's block beside it). "
             "GFLOP/s counts GE's cost-model FLOPs.", ""]
    summary = ["| model | batch | GE ms | onnxruntime ms | PyTorch ms | GE / onnxruntime "
               "| GE / PyTorch |", "|---|---|---|---|---|---|---|"]
    details: list[str] = []
    start = cpu_times()
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            for batch in args.batches:
                result, flops = measure(name, batch, folder, args.rounds, args.block_seconds,
                                        not args.no_solo)
                ms = {c: result.median(c) * 1e3 for c in CONTENDERS}
                flags = {c: " (!)" if result.flagged(c) else "" for c in CONTENDERS}
                row = (f"| {name} | {batch} | {ms['ge']:.2f}{flags['ge']} | "
                       f"{ms['onnxruntime']:.2f}{flags['onnxruntime']} | "
                       f"{ms['torch']:.2f}{flags['torch']} | "
                       f"{result.spread('ge', 'onnxruntime')} | "
                       f"{result.spread('ge', 'torch')} |")
                summary.append(row)
                print(("ROW " if args.summary_only else "") + row, flush=True)
                details += ["", f"{name}, batch {batch}:", "",
                            *benchmark.table(result, flops, peak)]
    noise = noise_note(start, cpu_times())
    if args.summary_only:
        return 0
    other = [] if args.no_other_blas else other_blas(args)
    text = "\n".join(lines + summary + ([""] + [noise] if noise else []) + other
                     + ["", "### Each contender, in the harness and alone"]
                     + details + [END])
    print(text)
    if not args.no_write:
        write_section("speed", text)
    return 0


def _settings(found: dict[str, str]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in found.items()) or "no BLAS variables set"


def other_blas(args: argparse.Namespace) -> list[str]:
    """The summary measured again in a child process under the other OpenBLAS core type
    (the harness only, no solo runs), as lines of the document."""
    environment = dict(os.environ)
    if "OPENBLAS_CORETYPE" in environment:
        del environment["OPENBLAS_CORETYPE"]
    else:
        environment["OPENBLAS_CORETYPE"] = "Haswell"
    command = [sys.executable, __file__, "--summary-only", "--rounds", str(args.rounds),
               "--block-seconds", str(args.block_seconds), "--models", *args.models,
               "--batches", *map(str, args.batches)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True,
                          check=False)
    found = {key: line[len(key) + 1:] for line in done.stdout.splitlines()
             for key in ("SETTINGS", "PEAKS") if line.startswith(key + " ")}
    rows = [line[4:] for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if done.returncode != 0 or not rows:
        return ["", "### The other OpenBLAS setting", "",
                f"The run under the other setting failed (exit {done.returncode}): "
                f"{done.stderr.strip().splitlines()[-1:] or ''}"]
    return ["", "### The other OpenBLAS setting", "",
            f"The same harness (no solo runs) in a child process with "
            f"{found.get('SETTINGS', '?')}; matmul peak there: {found.get('PEAKS', '?')}. "
            "OpenBLAS's core type picks the kernels of NumPy's matrix products, which GE "
            "runs where a step computes with NumPy; onnxruntime and PyTorch bring their "
            "own matrix-product kernels.", "",
            "| model | batch | GE ms | onnxruntime ms | PyTorch ms | GE / onnxruntime "
            "| GE / PyTorch |", "|---|---|---|---|---|---|---|", *rows]


if __name__ == "__main__":
    raise SystemExit(main())
