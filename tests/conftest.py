"""Fixtures shared across the test rooms."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from examples import zoo

# oneDNN's kernel choices (ge.engines.onednn.tuning) go to a file of this test process's
# own, which the processes it starts (Ray's actors among them) inherit, never the user's
os.environ.setdefault("GE_TUNING_CACHE",
                      os.path.join(tempfile.mkdtemp(prefix="ge-tuning-"), "kernels.json"))


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """(name, fold) -> (model, onnx path); each model built once and each
    variant exported once per session."""
    models: dict[str, zoo.nn.Module] = {}
    paths: dict[tuple[str, bool], str] = {}
    root = tmp_path_factory.mktemp("zoo")

    def get(name: str, fold: bool):
        if name not in models:
            models[name] = zoo.MODELS[name].factory(seed=0)
        if (name, fold) not in paths:
            t0 = time.perf_counter()
            tag = "folded" if fold else "bn"
            paths[name, fold] = zoo.export_onnx(
                name, root / f"{name}-{tag}.onnx", batch=1, dynamic_batch=True,
                model=models[name], fold_batchnorm=fold)
            print(f"[zoo] export {name}-{tag}: {time.perf_counter() - t0:.2f}s")
        return models[name], paths[name, fold]

    return get


