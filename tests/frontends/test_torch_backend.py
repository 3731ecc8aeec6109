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
    return frontend.graphs_run_by_ge


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


class _Sorting(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values * 2


def test_a_graph_ge_cannot_translate_runs_as_pytorch_traced_it():
    torch._dynamo.reset()
    x = torch.randn(2, 5)
    before = _ran_by_ge()
    got = torch.compile(_Sorting(), backend="ge")(x)
    assert _ran_by_ge() == before  # handed back
    np.testing.assert_array_equal(got.numpy(), (torch.sort(x, dim=-1).values * 2).numpy())
