"""Peak memory: GE's planned arenas against onnxruntime, each in a fresh process.

Three measurements, each contender in its own process (peak RSS is a per-process
figure; a shared process would charge one contender's memory to the other):

1. ResNet-50 at batch 1 and 8: peak RSS over 100 runs (after loading), GE
   (parse, compile at level 3, Session) against onnxruntime (CPU provider, default
   options), on the same ONNX file and inputs.
2. Creep as shapes vary: the BERT-style encoder (4 layers, 256 wide; positions up to
   512) with a dynamic sequence length, run 1,000 times over 100 lengths from 1 to 512
   (each length 10 times, shuffled), against the same model run at length 512 only.
   The ratio mixed / longest alone is the creep; GE's goal is at most 1.2.
3. Growth over many runs: the seed's SimpleCNN at batch 1, RSS after 1,000 runs and
   after 10,000.

    python bench/memory.py                 # everything, writes docs/benchmarks.md
    python bench/memory.py --quick --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import markers, write_section  # noqa: E402

BEGIN, END = markers("memory")
MAX_LENGTH = 512


def _peak_mb() -> float:
    """The process's peak RSS (VmHWM: unlike ``ru_maxrss``, not inherited across exec
    from the parent that exported the models)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def export_models(folder: Path) -> dict[str, str]:
    """ResNet-50, the encoder with a dynamic sequence, SimpleCNN: ONNX files in folder."""
    import torch

    from examples import zoo

    paths = {"resnet50": str(folder / "resnet50.onnx"), "simple_cnn": str(folder / "cnn.onnx"),
             "bert": str(folder / "bert.onnx")}
    zoo.export_onnx("resnet50", paths["resnet50"], batch=1, dynamic_batch=True)
    zoo.export_onnx("simple_cnn", paths["simple_cnn"], batch=1, dynamic_batch=True)
    torch.manual_seed(0)
    model = zoo.BertEncoder(max_pos=MAX_LENGTH).eval()
    ids = torch.zeros(1, 16, dtype=torch.int64)
    mask = torch.ones(1, 16, dtype=torch.int64)
    axes = {"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
            "last_hidden_state": {0: "batch", 1: "length"}}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), paths["bert"], dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamic_axes=axes)
    return paths


#: the contenders: GE with its default engines (oneDNN's and PyTorch's kernels), GE
#: on its NumPy engines alone (no PyTorch in the process), onnxruntime
CONTENDERS = {"ge": "GE (default engines)", "ge-numpy": "GE (NumPy engines)",
              "ort": "onnxruntime"}


def _runner(contender: str, path: str) -> Callable[[dict[str, Any]], Any]:
    if contender in ("ge", "ge-numpy"):
        import ge

        engines = ["fused", "numpy"] if contender == "ge-numpy" else None
        session = ge.Session(ge.compile(ge.parse_onnx(path), engines=engines))
        return session.run
    import onnxruntime

    ort = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda feed: ort.run(None, feed)


def one(contender: str, case: str, path: str, size: int, runs: int) -> dict[str, Any]:
    """One contender on one case, in this (fresh) process."""
    import numpy as np

    rng = np.random.default_rng(0)
    before = _current_mb()
    run = _runner(contender, path)
    loaded = _current_mb()
    started = time.perf_counter()
    if case == "resnet50":
        feed = {"input": rng.standard_normal((size, 3, 224, 224)).astype(np.float32)}
        for _ in range(runs):
            run(feed)
        return {"loaded_mb": loaded, "import_mb": before, "peak_mb": _peak_mb(),
                "seconds_per_run": (time.perf_counter() - started) / runs}
    if case == "bert":
        lengths = ([MAX_LENGTH] * runs if size == 0 else
                   [int(n) for n in np.linspace(1, MAX_LENGTH, 100).round()] * (runs // 100))
        random.Random(0).shuffle(lengths)
        for length in lengths:
            ids = rng.integers(0, 1000, (1, length), dtype=np.int64)
            run({"input_ids": ids, "attention_mask": np.ones((1, length), np.int64)})
        return {"loaded_mb": loaded, "peak_mb": _peak_mb(), "runs": len(lengths)}
    feed = {"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    marks = {}
    for index in range(1, runs + 1):
        run(feed)
        if index in (1000, runs):
            marks[index] = _current_mb()
    return {"loaded_mb": loaded, "after_1000_mb": marks[1000], "after_all_mb": marks[runs],
            "runs": runs, "peak_mb": _peak_mb()}


def _fresh(contender: str, case: str, path: str, size: int, runs: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", contender, case, path, str(size), str(runs)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def measure(quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = export_models(Path(folder))
        resnet_runs = 10 if quick else 100
        for batch in (1, 8):
            for contender in CONTENDERS:
                key = f"resnet50 batch {batch} {contender}"
                results[key] = _fresh(contender, "resnet50", paths["resnet50"], batch,
                                      resnet_runs)
                print(key, results[key], flush=True)
        mixed_runs = 200 if quick else 1000
        for contender in CONTENDERS:
            for label, size, runs in (("mixed", 1, mixed_runs), ("longest", 0, 50)):
                key = f"bert {label} {contender}"
                results[key] = _fresh(contender, "bert", paths["bert"], size, runs)
                print(key, results[key], flush=True)
        small_runs = 2000 if quick else 10000
        for contender in CONTENDERS:
            key = f"simple_cnn {contender}"
            results[key] = _fresh(contender, "simple_cnn", paths["simple_cnn"], 1, small_runs)
            print(key, results[key], flush=True)
    return results


def report(results: dict[str, Any]) -> str:
    import numpy
    import onnxruntime

    lines = [BEGIN, "## Memory", "",
             f"Measured by `python bench/memory.py` on {time.strftime('%Y-%m-%d')}: "
             f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"NumPy {numpy.__version__}, onnxruntime {onnxruntime.__version__}. Every figure "
             "comes from a fresh process running one contender on one case; RSS is the "
             "process's (`VmHWM` for peaks, `/proc/self/statm` for the current size).", "",
             "GE runs with its default engines (oneDNN's primitives, writing into GE's "
             "arena, and PyTorch's kernels for what they take: the process then holds "
             "both libraries and the weights packed for oneDNN's kernels) and on its "
             "NumPy engines alone.", "",
             "### ResNet-50: peak RSS over the runs", "",
             "| batch | contender | loaded MB | peak MB | / onnxruntime (peak) | ms per run |",
             "|---|---|---|---|---|---|"]
    for batch in (1, 8):
        theirs = results[f"resnet50 batch {batch} ort"]
        for contender, label in CONTENDERS.items():
            mine = results[f"resnet50 batch {batch} {contender}"]
            lines.append(f"| {batch} | {label} | {mine['loaded_mb']:.0f} | "
                         f"{mine['peak_mb']:.0f} | {mine['peak_mb'] / theirs['peak_mb']:.2f} | "
                         f"{mine['seconds_per_run'] * 1e3:.1f} |")
    lines += ["", "### The encoder at varying sequence lengths: peak RSS", "",
              "| contender | 1,000 runs over 100 lengths (1-512) MB | 50 runs at 512 alone MB "
              "| mixed / alone |", "|---|---|---|---|"]
    for contender, label in CONTENDERS.items():
        mixed, alone = results[f"bert mixed {contender}"], results[f"bert longest {contender}"]
        lines.append(f"| {label} | {mixed['peak_mb']:.0f} | {alone['peak_mb']:.0f} | "
                     f"{mixed['peak_mb'] / alone['peak_mb']:.2f} |")
    lines += ["", "### SimpleCNN at batch 1: RSS as runs accumulate", "",
              "| contender | loaded MB | after 1,000 runs MB | after all runs MB | runs |",
              "|---|---|---|---|---|"]
    for contender, label in CONTENDERS.items():
        row = results[f"simple_cnn {contender}"]
        lines.append(f"| {label} | {row['loaded_mb']:.1f} | {row['after_1000_mb']:.1f} | "
                     f"{row['after_all_mb']:.1f} | {row['runs']:,} |")
    lines.append(END)
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        contender, case, path, size, runs = args.one
        print(json.dumps(one(contender, case, path, int(size), int(runs))))
        return 0
    text = report(measure(args.quick))
    print(text)
    if not args.no_write:
        write_section("memory", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
