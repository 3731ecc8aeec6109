"""The benchmark harness: its structure and bookkeeping (no timing decides a test)."""

from __future__ import annotations

import numpy as np
import pytest

from ge import benchmark
from ge.cli import main


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    from examples.zoo import export_onnx

    return export_onnx("simple_cnn", tmp_path_factory.mktemp("bench") / "cnn.onnx")


def test_blocks_alternate_and_every_contender_gets_every_round():
    calls: list[str] = []
    runs = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    result = benchmark.compare(runs, rounds=3, block_seconds=0.0, warmup=1, untimed=1,
                               settle=0.0)
    assert {name: len(times) for name, times in result.times.items()} == {"a": 3, "b": 3}
    # warm-ups first (one each, then one to size the block), then blocks a, b, a, b, ...
    blocks = "".join(calls[4:])
    assert blocks == ("a" * 4 + "b" * 4) * 3  # 1 untimed + 3 timed runs per block
    assert all(t > 0 for times in result.times.values() for t in times)


def test_a_figure_far_from_its_solo_figure_is_flagged():
    result = benchmark.Result({"ge": [1.0, 1.0, 1.0], "onnxruntime": [2.0, 2.2, 2.1]})
    result.solo = {"ge": 1.05, "onnxruntime": 1.0}
    assert not result.flagged("ge") and result.flagged("onnxruntime")
    assert result.ratio("ge", "onnxruntime") == pytest.approx(1 / 2.1)
    rows = benchmark.table(result, flops=2e9, peak=100.0)
    assert rows[2].startswith("| ge | 1000.00 | 1050.00 | 1.00 (1.00-1.00) | 1.00 | 2.0 | 2 % |")
    # the rounds' own ratios: 1/2.0, 1/2.2, 1/2.1; the solo figures' ratio 1.05/1.0
    assert "(!)" in rows[3] and "| 0.48 (0.45-0.50) | 1.05 |" in rows[3]


def test_each_round_pairs_the_blocks_beside_each_other():
    result = benchmark.Result({"ge": [1.0, 2.0, 1.5], "onnxruntime": [1.0, 2.5, 1.2]})
    assert result.round_ratios("ge", "onnxruntime") == pytest.approx([1.0, 0.8, 1.25])
    assert result.spread("ge", "onnxruntime") == "1.25 (0.80-1.25)"  # 1.5 / 1.2
    assert result.solo_ratio("ge", "onnxruntime") is None


def test_feeds_follow_the_model_inputs(onnx_file):
    feeds = benchmark.feeds_for(str(onnx_file), batch=3)
    assert list(feeds) == ["input"] and feeds["input"].shape == (3, 3, 32, 32)
    assert feeds["input"].dtype == np.float32
    np.testing.assert_array_equal(feeds["input"], benchmark.feeds_for(str(onnx_file), 3)["input"])


def test_machine_names_the_cpu_and_blas_and_measures_a_peak():
    info = benchmark.machine()
    assert info["cores"] >= 1 and info["cpu"] and info["blas"]
    import torch

    assert info["torch"] == torch.__version__.split("+")[0] or info["torch"] == torch.__version__
    peaks = benchmark.matmul_peaks(size=128, seconds=0.05)
    assert set(peaks) == {"numpy", "onednn"} and min(peaks.values()) > 0
    assert benchmark.matmul_peak_gflops(size=128, seconds=0.05) > 0
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((64, 64), dtype=np.float32) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    product = benchmark._onednn_product(a, b, out)
    assert product is not None
    product()  # the product the peak times is a real one
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_ge_bench_prints_both_contenders_in_and_out_of_the_harness(onnx_file, capsys):
    assert main(["bench", str(onnx_file), "--rounds", "2", "--block-seconds", "0.02",
                 "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "matmul peak" in out and out.count("| contender |") == 1
    assert "batch 2" in out
    lines = [line for line in out.splitlines() if line.startswith("| onnxruntime |")]
    assert len(lines) == 1
    alone = lines[0].split("|")[3].strip().removesuffix(" (!)")
    assert float(alone) > 0  # measured in a fresh process
