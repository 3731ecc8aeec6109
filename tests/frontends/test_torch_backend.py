"""GE as a torch.compile backend: results equal to eager, GE running the graphs, and
the cases it hands back to PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ge
from examples import zoo
from ge.frontends import torch as frontend
from tests.tolerance import rel_err


def _ran_by_ge() -> int:
    return frontend.backend_stats["graphs_ge"]


class _Counting:
    """The "ge" backend, counting how often dynamo compiles (a recompile calls it again)
    and keeping what it returned."""

    def __init__(self) -> None:
        self.compiled: list = []

    def __call__(self, graph_module, example_inputs):
        self.compiled.append(ge.torch_backend(graph_module, example_inputs))
        return self.compiled[-1]


def test_ge_is_a_registered_dynamo_backend():
    assert "ge" in torch._dynamo.list_backends()


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_a_compiled_zoo_model_equals_eager_and_runs_on_ge(name):
    torch._dynamo.reset()
    module = zoo.MODELS[name].factory(seed=0).eval()
    feeds = zoo.example_feeds(name, batch=2)
    args = [torch.from_numpy(feeds[n]) for n in zoo.MODELS[name].input_names]
    before = _ran_by_ge()
    compiled = torch.compile(module, backend="ge")
    with torch.no_grad():
        got, want = compiled(*args), module(*args)
    assert _ran_by_ge() == before + 1  # one graph, translated and run by GE
    assert rel_err(got.numpy(), want.numpy()) < 1e-4


def test_the_backend_takes_compile_options_and_is_ge_torch_backend():
    torch._dynamo.reset()
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.GELU()).eval()
    x = torch.randn(3, 8)
    compiled = torch.compile(module, backend=lambda gm, ex: ge.torch_backend(gm, ex,
                                                                            opt_level=0))
    before = _ran_by_ge()
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), module(x).numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert _ran_by_ge() == before + 1


def test_a_parameter_changed_in_place_is_seen():
    torch._dynamo.reset()
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    x = torch.randn(3, 8)
    compiled = torch.compile(module, backend="ge")
    with torch.no_grad():
        compiled(x)
        module[0].weight.mul_(-2.0)  # the GE graph holds the old weights as constants
        np.testing.assert_allclose(compiled(x).numpy(), module(x).numpy(), rtol=1e-5,
                                   atol=1e-6)


class _Spectrum(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs() * 2  # complex numbers: nothing GE translates


def test_a_graph_ge_cannot_translate_runs_as_pytorch_traced_it():
    torch._dynamo.reset()
    x = torch.randn(2, 8)
    before = dict(frontend.backend_stats)
    got = torch.compile(_Spectrum(), backend="ge")(x)
    assert _ran_by_ge() == before["graphs_ge"]  # handed back
    assert frontend.backend_stats["graphs_fallback"] == before["graphs_fallback"] + 1
    np.testing.assert_array_equal(got.numpy(), (torch.fft.rfft(x).abs() * 2).numpy())


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_dynamic_shapes_compile_once_and_run_every_batch_size_on_ge(name):
    """torch.compile(dynamic=True): one dynamo graph, one GE executable whose unknown
    sizes GE plans per run, every batch size equal to eager."""
    torch._dynamo.reset()
    module = zoo.MODELS[name].factory(seed=0).eval()
    backend = _Counting()
    compiled = torch.compile(module, backend=backend, dynamic=True)
    before = dict(frontend.backend_stats)
    for batch in (2, 3, 5):
        feeds = zoo.example_feeds(name, batch=batch, seed=batch)
        args = [torch.from_numpy(feeds[n]) for n in zoo.MODELS[name].input_names]
        with torch.no_grad():
            got, want = compiled(*args), module(*args)
        assert got.shape == want.shape
        assert rel_err(got.numpy(), want.numpy()) < 1e-4, batch
    assert len(backend.compiled) == 1  # no recompile across batch sizes
    assert backend.compiled[0].ge_executables() == 1  # one GE graph, not one per shape
    assert frontend.backend_stats["graphs_ge"] == before["graphs_ge"] + 1
    assert frontend.backend_stats["graphs_fallback"] == before["graphs_fallback"]


class _Broken(torch.nn.Module):
    """Two halves GE runs around one it cannot (a graph break dynamo makes at the
    print, and a complex-valued middle)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(8, 8)
        self.last = torch.nn.Linear(5, 3)

    def forward(self, x):
        y = torch.relu(self.first(x))
        torch._dynamo.graph_break()
        z = torch.fft.rfft(y).abs()
        torch._dynamo.graph_break()
        return torch.tanh(self.last(z))


def test_graph_breaks_count_the_nodes_ge_ran_and_those_it_handed_back():
    torch._dynamo.reset()
    module = _Broken().eval()
    x = torch.randn(4, 8)
    before = dict(frontend.backend_stats)
    with torch.no_grad():
        got = torch.compile(module, backend="ge")(x)
        want = module(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    ran = {key: frontend.backend_stats[key] - before[key] for key in before}
    assert ran["graphs_ge"] == 2 and ran["graphs_fallback"] == 1
    # linear + relu, then linear + tanh, on GE; rfft + abs handed back
    assert ran["nodes_ge"] == 4 and ran["nodes_fallback"] == 2, ran
