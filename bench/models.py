"""Model by model: GE against onnxruntime on third-party-style models.

The models of ``examples/third_party.py`` re-create the architectures users bring to GE
(DBNet and CRNN / SVTR text detection and recognition, a ConvNeXt and a YOLOv8n
detector, Silero-style voice activity detection, a Magika-style file-type classifier, a
GRU keyword spotter), at batch 1 and their realistic sizes, exported from PyTorch as a
user would export them. GE (level 3, default engines) and onnxruntime (CPU provider,
default options) run each on the same inputs through ``ge.benchmark.compare`` (each
warmed up alone, then alternating blocks, medians). Every model is checked first: each
of GE's outputs must match onnxruntime's within 1e-4 of the output's scale (its largest
magnitude), else the model is reported wrong and not timed; a model GE fails to compile
or run is reported failed, with the error.

    python bench/models.py                  # writes the models section of docs/benchmarks.md
    python bench/models.py --match crnn --no-write
    python bench/models.py --check-only     # correctness only, no timing, nothing written
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import ge  # noqa: E402
from bench.report import markers, write_section  # noqa: E402
from examples import third_party  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("models")
TOLERANCE = 1e-4


def output_error(got: Any, want: np.ndarray) -> tuple[float, Optional[str]]:
    """Max |GE - onnxruntime| over the largest |onnxruntime| of one output (inf on a
    shape, dtype or NaN mismatch), and what is wrong, if anything."""
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return math.inf, f"{got.dtype}{list(got.shape)}, onnxruntime {want.dtype}{list(want.shape)}"
    a, b = got.astype(np.float64), want.astype(np.float64)
    if (np.isnan(a) != np.isnan(b)).any():
        return math.inf, "NaN where onnxruntime has a number"
    difference = np.where(np.isnan(a) | (a == b), 0.0, np.abs(a - b))
    finite = np.abs(b[np.isfinite(b)])
    error = float(difference.max()) / max(float(finite.max()) if finite.size else 0.0, 1e-6)
    return error, None if error <= TOLERANCE else f"error {error:.1e}"


def check(session: Any, ort: Any, feeds: dict[str, np.ndarray]) -> tuple[float, Optional[str]]:
    """GE's worst error over the model's outputs against onnxruntime, and the outputs that
    are wrong (None when all are right)."""
    got = session.run(feeds)
    worst, problems = 0.0, []
    for value, expected in zip(ort.get_outputs(), ort.run(None, feeds)):
        if value.name not in got:
            return math.inf, f"{value.name}: missing from GE's outputs"
        error, problem = output_error(got[value.name], expected)
        worst = max(worst, error)
        if problem:
            problems.append(f"{value.name}: {problem}")
    return worst, "; ".join(problems) or None


def _failure(stage: str, error: BaseException) -> str:
    lines = str(error).strip().splitlines() or [""]
    text = f"{stage}: {type(error).__name__}: {lines[0]}".replace("|", "/")
    return text if len(text) <= 300 else text[:297] + "..."


def measure(name: str, rounds: int, block_seconds: float, check_only: bool) -> dict[str, Any]:
    """One model's row: ``failed`` (why) when it did not export, compile or run, ``problem``
    when GE is wrong, else (unless ``check_only``) the medians and their ratio."""
    import onnxruntime

    spec = third_party.MODELS[name]
    row: dict[str, Any] = {"model": name, "engines": "-"}
    stage = "export"
    try:
        model, feeds = spec.onnx(), spec.feeds()
        stage = "onnxruntime"
        ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        stage = "GE"
        executable = ge.compile(ge.parse_onnx(model))
        session = ge.Session(executable)
        steps = sorted(executable.engine_histogram().items(), key=lambda item: -item[1])
        row["engines"] = ", ".join(f"{engine} {count}" for engine, count in steps) or "-"
        row["error"], row["problem"] = check(session, ort, feeds)
        if row["problem"] is None and not check_only:
            stage = "timing"
            result = benchmark.compare({"ge": functools.partial(session.run, feeds),
                                        "onnxruntime": functools.partial(ort.run, None, feeds)},
                                       rounds=rounds, block_seconds=block_seconds)
            row.update(ge=result.median("ge"), ort=result.median("onnxruntime"),
                       ratio=result.ratio("ge", "onnxruntime"))
    except Exception as error:  # a model that cannot run is a result, not a crash
        row["failed"] = _failure(stage, error)
    return row


def _shown(row: dict[str, Any]) -> str:
    if "failed" in row:
        return f"{row['model']:14s} FAILED  {row['failed']}"
    verdict = f"{row['ratio']:.2f}" if "ratio" in row else "WRONG" if row["problem"] else "ok"
    note = f"; {row['problem']}" if row["problem"] else ""
    return f"{row['model']:14s} {verdict:>6s}  ({row['engines']}; error {row['error']:.1e}{note})"


def render(rows: list[dict[str, Any]], rounds: int, block_seconds: float) -> str:
    """The models section: what was measured, the summary, one table row per model."""
    timed = [r for r in rows if "ratio" in r]
    failed = sum(1 for r in rows if "failed" in r)
    ratios = [r["ratio"] for r in timed]
    median = float(np.median(ratios)) if ratios else float("nan")
    info = benchmark.machine()
    lines = [BEGIN, "## Model by model: GE against onnxruntime on third-party-style models", "",
             f"Measured by `python bench/models.py` on {time.strftime('%Y-%m-%d')} "
             f"({info['cpu']}, {info['cores']} cores): the {len(rows)} models of "
             "`examples/third_party.py`, small PyTorch re-creations of models users bring "
             "(DBNet, ConvNeXt, CRNN, SVTR, Silero VAD, YOLOv8n, Magika, a GRU keyword "
             "spotter) with random weights, batch 1, exported by `torch.onnx.export` "
             "(opset 17); GE at level 3 with its default engines, onnxruntime with default "
             f"options; alternating blocks of about {block_seconds} s over {rounds} rounds, "
             "medians. Every model is first checked against onnxruntime (error: the worst "
             "output's max difference over its largest magnitude; over 1e-4 is wrong and "
             "not timed). GE's engines: the steps each engine runs.", "",
             f"Median GE / onnxruntime {median:.2f}; "
             f"{sum(1 for r in ratios if r > 2)} of {len(timed)} over 2x; "
             f"{len(rows) - len(timed) - failed} wrong, {failed} failed.", "",
             "| model | onnxruntime ms | GE ms | GE / onnxruntime | GE's engines | error |",
             "|---|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: -r.get("ratio", math.inf)):
        if "ratio" in row:
            lines.append(f"| {row['model']} | {row['ort'] * 1e3:.3f} | {row['ge'] * 1e3:.3f} | "
                         f"{row['ratio']:.2f} | {row['engines']} | {row['error']:.1e} |")
        elif "failed" in row:
            lines.append(f"| {row['model']} | - | - | failed | {row['engines']} | "
                         f"{row['failed']} |")
        else:
            lines.append(f"| {row['model']} | - | - | wrong | {row['engines']} | "
                         f"{row['problem']} |")
    lines.append(END)
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--match", default="", help="only models whose name contains this")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--check-only", action="store_true",
                        help="check each model against onnxruntime once; no timing, no "
                             "writing; exit status 1 if any is wrong or failed")
    args = parser.parse_args(argv)
    rows = []
    for name in [n for n in third_party.MODELS if args.match in n]:
        rows.append(measure(name, args.rounds, args.block_seconds, args.check_only))
        print(_shown(rows[-1]), flush=True)
    if args.check_only:
        bad = [r for r in rows if "failed" in r or r.get("problem")]
        print(f"{len(rows) - len(bad)} of {len(rows)} models right; {len(bad)} wrong or failed")
        return 1 if bad else 0
    text = render(rows, args.rounds, args.block_seconds)
    print(text)
    if not args.no_write and not args.match:
        write_section("models", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
