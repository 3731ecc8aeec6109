"""`make demo`: build the seed's graphs with the seed's API, compile them, run them.

Prints each graph, the compiled plan, the outputs' shapes and checksums, and the
time per run on the NumPy engine.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from seed_4_1_simple_graph import build_simple_graph  # noqa: E402
from seed_4_2_cnn import build_cnn_model  # noqa: E402

import ge  # noqa: E402


def time_per_run(session: ge.Session, feed: dict[str, np.ndarray], repeats: int = 10) -> float:
    """Median seconds per ``session.run`` after one warm-up run."""
    session.run(feed)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        session.run(feed)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def show(title: str, graph: ge.Graph, feed: dict[str, np.ndarray]) -> None:
    """Print one graph, compile and run it, and print what came out."""
    print(f"=== {title} ===")
    print(graph)
    executable = ge.compile(graph)
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


if __name__ == "__main__":
    main()
