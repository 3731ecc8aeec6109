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


class _Convolutions(torch.nn.Module):
    """1-D, 2-D and 3-D convolutions and a transposed 1-D one, strided, padded, grouped."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.one = torch.nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1, groups=2)
        self.up = torch.nn.ConvTranspose1d(6, 3, 4, stride=2, padding=1, output_padding=1)
        self.three = torch.nn.Conv3d(2, 4, (3, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1))

    def forward(self, signal, volume):
        return self.up(torch.relu(self.one(signal))), self.three(volume)


def test_one_and_three_dimensional_convolutions_match_eager():
    signal, volume = torch.randn(2, 4, 33), torch.randn(1, 2, 5, 9, 4)
    module = _Convolutions().eval()
    graph = ge.parse_pytorch(module, [signal, volume])
    types = {node.op_type for node in graph}
    assert {"Conv2D", "ConvTranspose", "Conv3D"} <= types
    session = ge.Session(ge.compile(graph))
    got = session.run({value.producer.name: x.numpy()
                       for value, x in zip(graph.inputs, (signal, volume))})
    with torch.no_grad():
        want = module(signal, volume)
    for spec, expected in zip(session.executable.outputs, want):
        assert got[spec.name].shape == tuple(expected.shape)
        assert rel_err(got[spec.name], expected.numpy()) < 1e-5


class _Mixed(torch.nn.Module):
    """Integer and boolean tensors meeting floats and Python numbers, and a full mean."""

    def forward(self, x, counts):
        return (counts / 2, (x > 0) * x, counts + 1, x.mean(dim=None) + 1,
                torch.sigmoid(counts))


def test_mixed_dtypes_promote_as_aten_does():
    x = torch.randn(3, 4)
    counts = torch.arange(12, dtype=torch.int64).reshape(3, 4) - 5
    module = _Mixed()
    graph = ge.parse_pytorch(module, [x, counts])
    session = ge.Session(ge.compile(graph))
    got = session.run({value.producer.name: t.numpy()
                       for value, t in zip(graph.inputs, (x, counts))})
    for spec, expected in zip(session.executable.outputs, module(x, counts)):
        value = got[spec.name]
        assert value.dtype == expected.numpy().dtype and value.shape == tuple(expected.shape)
        np.testing.assert_allclose(value, expected.numpy(), rtol=1e-6, atol=1e-7)


def test_a_dynamic_batch_traced_from_an_example_of_one():
    # torch.export takes a size of 1 for a constant: the frontend traces at 2
    module = zoo.MODELS["simple_cnn"].factory(seed=0).eval()
    example = torch.from_numpy(zoo.example_feeds("simple_cnn", batch=1)["input"])
    graph = ge.parse_pytorch(module, [example], dynamic_batch=True)
    assert not isinstance(graph.inputs[0].shape[0], int) or graph.inputs[0].shape[0] < 0
    session = ge.Session(ge.compile(graph))
    for batch in (1, 3):
        x = torch.from_numpy(zoo.example_feeds("simple_cnn", batch=batch, seed=batch)["input"])
        (got,) = session.run({graph.inputs[0].producer.name: x.numpy()}).values()
        with torch.no_grad():
            assert rel_err(got, module(x).numpy()) < 1e-5
