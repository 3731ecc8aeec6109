"""The model zoo exports to valid ONNX that onnxruntime runs to PyTorch's numbers."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
import torch

from examples import zoo
from tests.tolerance import rel_err

BN_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "simple_cnn"]

NAMES = list(zoo.MODELS)
# (model, fold_batchnorm): every model with BatchNormalization nodes kept, and the
# BN models also in the exporter's default form with BN fused into Conv.
CASES = [(n, False) for n in NAMES] + [(n, True) for n in BN_MODELS]
CASE_IDS = [f"{n}-{'folded' if f else 'bn'}" for n, f in CASES]
REL_TOL = 1e-4


@pytest.mark.parametrize("name,fold", CASES, ids=CASE_IDS)
def test_export_is_valid_onnx(exported, name, fold):
    _, path = exported(name, fold)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    entry = zoo.MODELS[name]
    assert [i.name for i in proto.graph.input] == entry.input_names
    assert [o.name for o in proto.graph.output] == entry.output_names
    # the batch axis is symbolic on every input and output
    for vi in list(proto.graph.input) + list(proto.graph.output):
        dim0 = vi.type.tensor_type.shape.dim[0]
        assert dim0.dim_param == "batch", (vi.name, dim0)
    assert any(o.domain in ("", "ai.onnx") and o.version == 17 for o in proto.opset_import)
    bns = [n for n in proto.graph.node if n.op_type == "BatchNormalization"]
    if name in BN_MODELS and not fold:
        assert bns, "BatchNormalization nodes should be kept"
        for n in bns:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            assert attrs.get("training_mode", 0) == 0
            assert len(n.output) == 1
    else:
        assert not bns
    assert not [n for n in proto.graph.node if n.op_type == "Dropout"]


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("name,fold", CASES, ids=CASE_IDS)
def test_onnxruntime_matches_torch(exported, name, fold, batch):
    model, path = exported(name, fold)
    feeds = zoo.example_feeds(name, batch=batch, seed=batch)
    t0 = time.perf_counter()
    got = zoo.run_onnxruntime(path, feeds)
    t_ort = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = zoo.torch_outputs(model, feeds, name)
    t_torch = time.perf_counter() - t0
    print(f"[zoo] {name} fold={fold} b={batch}: ort {t_ort:.2f}s torch {t_torch:.2f}s")
    assert len(got) == len(ref) == len(zoo.MODELS[name].output_names)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        assert g.dtype == np.float32
        assert np.all(np.isfinite(r))
        assert rel_err(g, r) <= REL_TOL, (name, batch, rel_err(g, r))


def test_bert_padding_is_masked(exported):
    """Ids under the padding mask do not change the outputs at kept positions."""
    _, path = exported("bert", False)
    feeds = zoo.example_feeds("bert", batch=2, seed=7)
    out = zoo.run_onnxruntime(path, feeds)[0]
    ids2 = feeds["input_ids"].copy()
    pad = feeds["attention_mask"] == 0
    ids2[pad] = (ids2[pad] + 1) % 1000
    out2 = zoo.run_onnxruntime(path, {**feeds, "input_ids": ids2})[0]
    keep = ~pad
    assert rel_err(out2[keep], out[keep]) <= REL_TOL
    assert not np.allclose(out2[pad], out[pad])


def test_models_are_deterministic_and_bn_is_nontrivial():
    a = zoo.simple_cnn(seed=3)
    b = zoo.simple_cnn(seed=3)
    c = zoo.simple_cnn(seed=4)
    for (ka, va), (_, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(va, vb), ka
    assert not torch.equal(a.conv1.weight, c.conv1.weight)
    assert not a.training
    mean, var = a.bn1.running_mean, a.bn1.running_var
    assert mean is not None and var is not None
    assert float(mean.abs().max()) > 0.0
    assert float((var - 1.0).abs().max()) > 0.0
    # building a model does not disturb the caller's RNG stream
    torch.manual_seed(123)
    x1 = torch.rand(3)
    torch.manual_seed(123)
    zoo.simple_cnn(seed=0)
    assert torch.equal(torch.rand(3), x1)


def test_bert_mask_has_trailing_padding():
    feeds = zoo.example_feeds("bert", batch=4, seed=0)
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    assert ids.dtype == np.int64 and mask.dtype == np.int64
    assert ids.shape == mask.shape == (4, 128)
    assert ids.min() >= 0 and ids.max() < 1000
    for row in mask:
        n = int(row.sum())
        assert 0 < n < 128
        assert row[:n].all() and not row[n:].any()
