"""The seed's section 5.1 program (examples/seed_5_1_fusion.py): fusions through ge.graphpass
give a real reduction, keep every step's result (B3), leave the input graph untouched (D10),
record the memory options without applying them (D12), and keep the outputs. Bn and Dn are
the entries of docs/seed-api.md."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import ge
from tests.examples.test_seed_examples import EXAMPLES, load_example, quietly
from tests.tolerance import assert_close


@pytest.fixture(scope="module")
def results():
    module = load_example("seed_5_1_fusion")
    found, printed = quietly(module.main)
    return found, printed


def ops(graph: ge.Graph) -> Counter[str]:
    return Counter(op.op_type for op in graph.get_ops())


def run(graph: ge.Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return ge.Session(ge.compile(graph, opt_level=0)).run(feeds)


def test_the_summaries_report_real_reductions(results):
    _, printed = results
    summaries = printed.split("=== Graph Optimization Summary ===")[1:]
    assert len(summaries) == 2
    assert "Original graph nodes: 25\nOptimized graph nodes: 23\nReduction: 2 nodes" \
        in summaries[0]
    assert "Original graph nodes: 27\nOptimized graph nodes: 22\nReduction: 5 nodes" \
        in summaries[1]
    for line in ("Applied Conv+BN+ReLU fusion", "Applied MatMul+BiasAdd fusion",
                 "Applied constant folding optimization", "Applied dead code elimination",
                 "Recorded memory options (reuse, in-place); GE does not apply them"):
        assert printed.count(line) == 2


def test_section_4_2_cnn_fuses_both_dense_layers(results):
    original, optimized = results[0]["section 4.2 CNN"]
    assert ops(original)["BiasAdd"] == 2 and ops(original)["MatMul"] == 2  # untouched (D10)
    after = ops(optimized)
    assert after["MatMulBiasAdd"] == 2 and not after["MatMul"] and not after["BiasAdd"]
    assert after["Conv2D"] == 3 and after["Relu"] == 4  # no BatchNorm: nothing to fuse there
    assert optimized.node("fc1_biasadd").op_type == "MatMulBiasAdd"  # the root's name is kept
    images = np.random.default_rng(0).standard_normal((2, 32, 32, 3), dtype=np.float32)
    want, got = run(original, {"input": images}), run(optimized, {"input": images})
    assert list(got) == list(want) == ["fc2_softmax"]
    assert_close(got["fc2_softmax"], want["fc2_softmax"], accumulate=True)


def test_section_7_1_cnn_fuses_conv_bn_relu_and_the_classifier(results):
    original, optimized = results[0]["section 7.1 SimpleCNN"]
    assert ops(original)["FusedBatchNorm"] == 2
    after = ops(optimized)
    assert after["ConvBNReLU"] == 2 and after["MatMulBiasAdd"] == 1  # every step kept (B3)
    assert not (after["Conv2D"] or after["FusedBatchNorm"] or after["Relu"] or after["BiasAdd"])
    fused = optimized.node("relu1")
    assert fused.op_type == "ConvBNReLU" and fused.attrs["epsilon"] == pytest.approx(1e-5)
    assert str(fused.attrs["data_format"]).endswith("NCHW")
    assert optimized.metadata["memory"] == {"memory_reuse": True, "inplace": True}  # D12
    assert "memory" not in original.metadata
    images = np.random.default_rng(1).standard_normal((3, 3, 32, 32), dtype=np.float32)
    want, got = run(original, {"input": images}), run(optimized, {"input": images})
    assert_close(got["fc"], want["fc"], accumulate=True)


def test_section_7_1_graph_matches_torch(results):
    import torch
    functional = torch.nn.functional
    original, _ = results[0]["section 7.1 SimpleCNN"]

    def const(node: str, index: int):
        return torch.from_numpy(np.array(original.node(node).inputs[index].producer.attrs[
            "value"].numpy()))

    images = np.random.default_rng(2).standard_normal((2, 3, 32, 32), dtype=np.float32)
    x = torch.from_numpy(images)
    for layer in ("1", "2"):
        x = functional.conv2d(x, const(f"conv{layer}", 1), const(f"conv{layer}", 2), padding=1)
        bn = f"bn{layer}"
        x = functional.batch_norm(x, const(bn, 3), const(bn, 4), const(bn, 1), const(bn, 2),
                                  eps=1e-5)
        x = functional.max_pool2d(functional.relu(x), 2)
    expected = x.reshape(2, -1) @ const("fc_matmul", 1) + const("fc", 1)
    assert_close(run(original, {"input": images})["fc"], expected.numpy(), accumulate=True)


def test_the_script_runs():
    completed = subprocess.run([sys.executable, str(EXAMPLES / "seed_5_1_fusion.py")],
                               capture_output=True, text=True, timeout=120, check=True)
    assert "Reduction: 2 nodes" in completed.stdout and "Reduction: 5 nodes" in completed.stdout
