"""Per-op overhead: a chain of 1,000 tiny elementwise ops, against onnxruntime.

The chain (``examples/synthetic.py``: Add, Relu, Mul, Sigmoid repeating on a [1, 16]
tensor) is compiled at level 0, so every op is its own step, and timed by
``ge.benchmark`` (alternating blocks, medians) beside onnxruntime running the same model
(onnxruntime may fuse some of it; its figure is for orientation). The per-step
figure is GE's whole run divided by its steps: kernel and overhead together, an upper
bound on the overhead.

    python bench/overhead.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ge  # noqa: E402
from bench.report import markers, write_section  # noqa: E402
from examples import synthetic  # noqa: E402
from ge import benchmark  # noqa: E402

BEGIN, END = markers("overhead")


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chain.onnx"
        path.write_bytes(synthetic.elementwise_chain(1000))
        executable = ge.compile(ge.parse_onnx(str(path)), opt_level=0)
        session = ge.Session(executable)
        feeds = benchmark.feeds_for(str(path), batch=1)
        import onnxruntime

        ort = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        result = benchmark.compare({"ge": lambda: session.run(feeds),
                                    "onnxruntime": lambda: ort.run(None, feeds)})
    steps = len(executable.steps)
    ge_us = result.median("ge") * 1e6
    ort_us = result.median("onnxruntime") * 1e6
    line = (f"{steps} steps; GE {ge_us / 1e3:.2f} ms/run = {ge_us / steps:.2f} us per step "
            f"(kernel included); onnxruntime {ort_us / 1e3:.2f} ms/run = "
            f"{ort_us / steps:.2f} us per op; GE / onnxruntime {ge_us / ort_us:.2f}")
    print(line)
    text = "\n".join([BEGIN, "## Per-op overhead", "",
                      f"Measured by `python bench/overhead.py` on {time.strftime('%Y-%m-%d')}"
                      ": a chain of 1,000 tiny elementwise ops ([1, 16]) at level 0, one "
                      "step per op, timed by `ge.benchmark` beside onnxruntime. GE's figure "
                      "is its whole run over its steps, kernels included.", "", line, END])
    write_section("overhead", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
