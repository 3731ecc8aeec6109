"""The PyTorch frontend: the model zoo through torch.export, against torch eager; what it
refuses, and how it says so."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import ge
from examples import zoo
from tests.tolerance import rel_err


def _run(module, names, feeds, session, graph):
    fed = {value.producer.name: feeds[name] for value, name in zip(graph.inputs, names)}
    got = session.run(fed)
    with torch.inference_mode():
        want = module(*[torch.from_numpy(feeds[name]) for name in names])
    want = want if isinstance(want, (tuple, list)) else [want]
    return [got[spec.name] for spec in session.executable.outputs], [w.numpy() for w in want]


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_every_zoo_model_matches_torch_eager_at_every_batch(name):
    entry = zoo.MODELS[name]
    module = entry.factory(seed=0).eval()
    example = zoo.example_feeds(name, batch=2)
    graph = ge.parse_pytorch(module, [torch.from_numpy(example[n]) for n in entry.input_names],
                             dynamic_batch=True)
    forward = list(inspect.signature(module.forward).parameters)
    # the inputs are named as the module's forward names them
    assert [v.producer.name for v in graph.inputs] == forward[:len(graph.inputs)]
    assert graph.inputs[0].shape[0] == -1  # the batch stays dynamic
    session = ge.Session(ge.compile(graph))
    for batch in (1, 3):
        feeds = zoo.example_feeds(name, batch=batch, seed=batch)
        got, want = _run(module, entry.input_names, feeds, session, graph)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            assert rel_err(a, b) < 1e-4, (name, batch)


def test_parameters_and_buffers_become_constants():
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                 torch.nn.ReLU())
    module[1].running_mean.fill_(0.5)
    graph = ge.parse_pytorch(module, [torch.randn(1, 3, 8, 8)])
    constants = [n for n in graph.nodes if n.op_type == "Const"]
    assert any(np.allclose(n.attrs["value"].numpy(), 0.5) for n in constants)
    assert {n.op_type for n in graph.nodes} >= {"Data", "Conv2D", "FusedBatchNorm", "Relu"}
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with pytest.raises(ge.errors.InputError):  # no dynamic batch was asked for
        ge.Session(ge.compile(graph)).run({graph.inputs[0].producer.name: x})


class _Exotic(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x) + torch.fft.rfft(x, n=8).real.sum(-1, keepdim=True)


def test_every_untranslated_op_is_named_with_its_source_line():
    with pytest.raises(ge.errors.UnsupportedOpError) as caught:
        ge.parse_pytorch(_Exotic(), [torch.randn(2, 5)])
    message = str(caught.value)
    assert "aten.special_bessel_j0" in message and "aten._fft_r2c" in message
    assert "torch.special.bessel_j0(x)" in message  # the line torch.export recorded


def test_what_is_not_a_module_is_refused():
    with pytest.raises(ge.errors.ModelFormatError, match="nn.Module"):
        ge.parse_pytorch(lambda x: x, [torch.randn(2)])


class _Nothing(torch.nn.Module):
    def forward(self, x):
        return None


def test_a_module_that_returns_no_tensor_is_refused():
    with pytest.raises(ge.errors.ModelFormatError, match="returns None, not a tensor"):
        ge.parse_pytorch(_Nothing(), [torch.randn(2)])


def test_inputs_the_module_cannot_take_are_a_model_format_error():
    with pytest.raises(ge.errors.ModelFormatError, match="could not trace"):
        ge.parse_pytorch(torch.nn.Linear(3, 2), [torch.randn(2, 5)])
