"""Fixtures shared across the test rooms."""

from __future__ import annotations

import time

import pytest

from examples import zoo


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


