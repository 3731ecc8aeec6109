"""`make demo`: the seed's graphs built with the seed's API, and a real network from ONNX.

Part 1 builds the seed's graphs of sections 4.1 and 4.2, compiles and runs them,
and prints each graph, the compiled plan, the outputs' shapes and checksums, and
the time per run. Part 2 exports a ResNet-18 (random weights) from PyTorch to
ONNX, runs it through GE and through onnxruntime, and prints both timings and the
largest difference.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from seed_4_1_simple_graph import build_simple_graph  # noqa: E402
from seed_4_2_cnn import build_cnn_model  # noqa: E402

import ge  # noqa: E402
from ge import benchmark  # noqa: E402


def time_per_run(session: ge.Session, feed: dict[str, np.ndarray], repeats: int = 10) -> float:
    """Median seconds per ``session.run`` after one warm-up run."""
    return time_per_run_of(lambda: session.run(feed), repeats)


def show(title: str, graph: ge.Graph, feed: dict[str, np.ndarray]) -> None:
    """Print one graph, compile and run it, and print what came out."""
    print(f"=== {title} ===")
    print(graph)
    executable = ge.compile(graph)
    print(executable.report_text())
    print(executable.summary())
    session = ge.Session(executable)
    outputs = session.run(feed)
    for name, array in outputs.items():
        flat = array.reshape(-1).astype(np.float64)
        print(f"output {name}: shape {list(array.shape)} dtype {array.dtype}")
        print(f"  checksums: sum {flat.sum():.6f}, L2 norm {np.linalg.norm(flat):.6f}, "
              f"position-weighted sum {float(flat @ np.arange(flat.size)) / flat.size:.6f}")
        print(f"  first values: {np.array2string(flat[:4], precision=5)}")
    seconds = time_per_run(session, feed)
    print(f"time per run: {seconds * 1e3:.3f} ms\n")


def onnx_resnet18(directory: str) -> None:
    """Export ResNet-18 to ONNX; run it with GE and onnxruntime; compare."""
    import onnxruntime
    from zoo import example_feeds, export_onnx

    print("=== ResNet-18 (random weights) through ONNX ===")
    path = os.path.join(directory, "resnet18.onnx")
    started = time.perf_counter()
    export_onnx("resnet18", path)
    print(f"exported {path} in {time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    graph = ge.parse_onnx(path)
    session = ge.Session(ge.compile(graph))
    print(f"GE parsed and compiled {len(graph)} nodes in {time.perf_counter() - started:.2f} s")
    feeds = example_feeds("resnet18", batch=1, seed=0)
    reference = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    ours = session.run(feeds)["logits"]
    theirs = reference.run(None, feeds)[0]
    # each warmed up alone, then blocks of runs alternating over rounds (ge.benchmark)
    timed = benchmark.compare({"ge": lambda: session.run(feeds),
                               "onnxruntime": lambda: reference.run(None, feeds)},
                              rounds=3, block_seconds=0.3)
    error = float(np.abs(ours - theirs).max())
    histogram = session.executable.engine_histogram()
    engines = ", ".join(f"{k}: {v}" for k, v in sorted(histogram.items()))
    print(f"GE (opt_level 3; steps per engine {engines}): {timed.median('ge') * 1e3:.2f} ms "
          f"per run")
    print(f"onnxruntime: {timed.median('onnxruntime') * 1e3:.2f} ms per run (GE / onnxruntime "
          f"{timed.ratio('ge', 'onnxruntime'):.2f}; `ge bench` also times each alone)")
    print(f"max abs error {error:.3g} (output scale {float(np.abs(theirs).max()):.3g}); "
          f"top-1 class GE {int(ours.argmax())}, onnxruntime {int(theirs.argmax())}")


def time_per_run_of(function, repeats: int = 10) -> float:  # type: ignore[no-untyped-def]
    """Median seconds per call of ``function`` after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def main() -> None:
    """Run the demo."""
    np.random.seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # the builders' own chatter
        simple = build_simple_graph()
        cnn = build_cnn_model()
    rng = np.random.default_rng(0)
    show("seed section 4.1: y = relu(a * b + c)", simple, {
        "a": rng.standard_normal((1024, 1024), dtype=np.float32),
        "b": rng.standard_normal((1024, 1024), dtype=np.float32),
    })
    show("seed section 4.2: CNN, batch 8 of 32x32x3 (NHWC)", cnn, {
        "input": rng.standard_normal((8, 32, 32, 3), dtype=np.float32),
    })
    with tempfile.TemporaryDirectory() as directory:
        onnx_resnet18(directory)


if __name__ == "__main__":
    main()
