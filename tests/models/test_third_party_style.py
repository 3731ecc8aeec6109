"""Third-party-style models (``examples/third_party.py``): GE runs them to onnxruntime's
numbers and to the PyTorch module's own.

Every output of every model, on inputs other than those the export was traced on,
within 1e-4 of the reference's scale (fp32), as ``test_ge_vs_onnxruntime`` checks the zoo;
and the Silero-style detector carries its LSTM state from one chunk to the next.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import onnxruntime
import pytest
import torch

import ge
from examples import third_party
from tests.tolerance import rel_err

REL_TOL = 1e-4
NAMES = list(third_party.MODELS)


class Exported(NamedTuple):
    module: torch.nn.Module
    onnx: bytes
    onnxruntime: Any


@pytest.fixture(scope="module")
def exported():
    """name -> the model's module, ONNX bytes and onnxruntime session, built once."""
    cache: dict[str, Exported] = {}

    def get(name: str) -> Exported:
        if name not in cache:
            spec = third_party.MODELS[name]
            module = spec.build(seed=0)
            model = spec.onnx(module=module)
            cache[name] = Exported(module, model, onnxruntime.InferenceSession(
                model, providers=["CPUExecutionProvider"]))
        return cache[name]

    return get


@pytest.fixture(scope="module")
def sessions(exported):
    """name -> GE's session on the model (level 3, default engines), compiled once."""
    cache: dict[str, ge.Session] = {}

    def get(name: str) -> ge.Session:
        if name not in cache:
            cache[name] = ge.Session(ge.compile(ge.parse_onnx(exported(name).onnx)))
        return cache[name]

    return get


def _assert_agree(name: str, got: dict[str, Any], expected: list[np.ndarray],
                  reference: str) -> None:
    assert list(got) == list(third_party.MODELS[name].outputs)
    for (output, value), want in zip(got.items(), expected):
        value = np.asarray(value)
        assert value.shape == want.shape and value.dtype == want.dtype, (output, value.shape)
        error = rel_err(value, want)
        assert error <= REL_TOL, f"{name}.{output}: {error:.1e} off {reference}"


@pytest.mark.parametrize("name", NAMES)
def test_ge_agrees_with_onnxruntime(exported, sessions, name):
    feeds = third_party.MODELS[name].feeds(seed=1)
    expected = exported(name).onnxruntime.run(None, feeds)
    _assert_agree(name, sessions(name).run(feeds), expected, "onnxruntime")


@pytest.mark.parametrize("name", NAMES)
def test_ge_agrees_with_pytorch(exported, sessions, name):
    spec = third_party.MODELS[name]
    feeds = spec.feeds(seed=2)
    expected = spec.run_torch(exported(name).module, feeds)
    _assert_agree(name, sessions(name).run(feeds), expected, "PyTorch")


def test_silero_vad_state_round_trips(exported, sessions):
    spec = third_party.MODELS["silero_vad"]
    first, second = spec.feeds(seed=3), spec.feeds(seed=4)
    ort, session = exported("silero_vad").onnxruntime, sessions("silero_vad")
    _, h, c = ort.run(None, first)
    state = session.run(first)
    assert rel_err(state["h_out"], h) <= REL_TOL and rel_err(state["c_out"], c) <= REL_TOL
    follow = {"audio": second["audio"], "h": state["h_out"], "c": state["c_out"]}
    expected = ort.run(None, {"audio": second["audio"], "h": h, "c": c})
    _assert_agree("silero_vad", session.run(follow), expected, "onnxruntime's second chunk")
    # the state matters: the second chunk from a fresh state gives other numbers
    fresh = session.run({"audio": second["audio"], "h": np.zeros_like(h),
                         "c": np.zeros_like(c)})
    assert rel_err(fresh["h_out"], expected[1]) > 1e-2
