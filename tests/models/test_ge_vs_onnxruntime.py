"""Real networks exported by torch.onnx, parsed and run by GE, agree with onnxruntime.

Every output of every model, at batch 1 and at a dynamic batch of 4, within 1e-4
of onnxruntime's relative to the output's scale (fp32).
"""

from __future__ import annotations

import pytest

import ge
from examples import zoo
from tests.tolerance import rel_err

REL_TOL = 1e-4
NAMES = ["simple_cnn", "resnet18", "resnet50", "mobilenet_v2", "bert"]


@pytest.fixture(scope="module")
def sessions(exported):
    cache: dict[str, ge.Session] = {}

    def get(name: str) -> ge.Session:
        if name not in cache:
            _, path = exported(name, False)
            cache[name] = ge.Session(ge.compile(ge.parse_onnx(path)))
        return cache[name]

    return get


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("name", NAMES)
def test_every_output_agrees_with_onnxruntime(exported, sessions, name, batch):
    _, path = exported(name, False)
    feeds = zoo.example_feeds(name, batch=batch, seed=10 + batch)
    expected = zoo.run_onnxruntime(path, feeds)
    outputs = sessions(name).run(feeds)
    assert list(outputs) == zoo.MODELS[name].output_names
    for got, want in zip(outputs.values(), expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert rel_err(got, want) <= REL_TOL, (name, batch, rel_err(got, want))


@pytest.mark.parametrize("name", NAMES)
def test_the_batch_dimension_stays_dynamic(exported, name):
    _, path = exported(name, False)
    graph = ge.parse_onnx(path)
    for value in graph.inputs:
        assert value.shape[0] == "batch", (value.name, value.shape)
    for value in graph.outputs:  # inferred, or the model's name for it where inference can't
        assert value.shape[0] == "batch", (value.name, value.shape)
        assert all(isinstance(d, int) and d > 0 for d in value.shape[1:]), value.shape


def test_bert_with_one_mask_for_a_batch_of_inputs_runs_as_onnxruntime_does(exported, sessions):
    # input_ids and attention_mask both declare "batch"; onnxruntime also runs a mask of
    # batch 1 against 3 sequences, or 3 masks against one sequence (broadcasting)
    _, path = exported("bert", False)
    session = sessions("bert")
    for ids_batch, mask_batch in [(3, 1), (1, 3)]:
        feeds = zoo.example_feeds("bert", batch=ids_batch, seed=7)
        feeds["attention_mask"] = zoo.example_feeds("bert", batch=mask_batch,
                                                    seed=8)["attention_mask"]
        expected = zoo.run_onnxruntime(path, feeds)
        outputs = session.run(feeds)
        for got, want in zip(outputs.values(), expected):
            assert got.shape == want.shape
            assert rel_err(got, want) <= REL_TOL, (ids_batch, mask_batch, rel_err(got, want))
    assert session.specialized == [frozenset({"batch"})]
