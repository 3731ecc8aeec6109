"""Batch slicing: runs of steps that go a few samples at a time give the whole batch's
results, with inner values planned at one slice's size."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ge
import ge.graphpass as gp
from ge.compiler.loader import step_uses
from ge.compiler.slicing import (
    INNER,
    SLICED,
    VARIABLE,
    WHOLE,
    Separable,
    budget,
    plan_slices,
    separable,
)
from ge.ir import DataType, Node, TensorDesc
from ge.memory import StepUse, plan_memory
from ge.runtime.tasks import Mode
from tests.tolerance import rel_err

BATCH = 8
#: a budget under one 16-channel 32x32 value at batch 8 (512 KiB): the early steps slice
SMALL = 300_000


class _Net(nn.Module):
    """Convolutions, a residual, a depthwise convolution and pooling, then a head that
    mixes the batch nowhere but is small."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 5, padding=2, groups=16)
        self.norm = nn.BatchNorm2d(16)
        self.project = nn.Conv2d(16, 8, 1)
        self.head = nn.Linear(8, 5)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.conv(y) + y)
        y = torch.nn.functional.hardswish(self.norm(self.depthwise(y)))
        y = torch.nn.functional.max_pool2d(y, 2)
        y = torch.sigmoid(self.project(y)) * y[:, :8]
        return self.head(y.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def net() -> tuple[nn.Module, ge.Graph]:
    torch.manual_seed(3)
    model = _Net().eval()
    example = torch.randn(BATCH, 3, 32, 32)
    return model, ge.parse_pytorch(model, [example], dynamic_batch=True)


def _run(graph: ge.Graph, x: np.ndarray, engines=None) -> tuple[np.ndarray, ge.Executable]:
    executable = ge.compile(graph, engines=engines)
    session = ge.Session(executable)
    name = graph.inputs[0].producer.name
    out = session.run({name: x})[executable.outputs[0].name]
    return out, executable


@pytest.mark.parametrize("engines", [None, ["fused", "numpy"]], ids=["default", "numpy"])
def test_a_sliced_run_gives_the_whole_batch_s_results_in_a_smaller_arena(net, monkeypatch,
                                                                            engines):
    model, graph = net
    x = np.random.default_rng(0).standard_normal((BATCH, 3, 32, 32)).astype(np.float32)
    monkeypatch.setenv(VARIABLE, "0")
    whole, plain = _run(graph, x, engines)
    assert plain.memory["batch_slices"] == []
    monkeypatch.setenv(VARIABLE, str(SMALL))
    sliced, executable = _run(graph, x, engines)
    runs = executable.memory["batch_slices"]
    assert runs, executable.plan_text()
    for run in runs:
        assert run["batch"] == BATCH and run["slices"] >= 2 and run["steps"] >= 2
        assert run["width"] == -(-BATCH // run["slices"])
        assert run["largest_step_bytes"] > SMALL
    assert "batch sliced:" in executable.plan_text()
    assert executable.memory["planned_bytes"] < plain.memory["planned_bytes"]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert rel_err(whole, want) < 1e-4
    assert rel_err(sliced, want) < 1e-4
    assert rel_err(sliced, whole) < 1e-5


def test_inner_values_are_planned_at_one_slice_s_size_and_border_values_whole(net,
                                                                               monkeypatch):
    _model, graph = net
    monkeypatch.setenv(VARIABLE, str(SMALL))
    _out, executable = _run(graph, np.ones((BATCH, 3, 32, 32), np.float32))
    _shapes, bound = executable.last_plan
    uses = step_uses(executable)
    assert bound.slicings
    for sliced, _first, _last in bound.slicings:
        assert sliced.inner
        for slot in sliced.inner:
            assert bound.memory.descs[slot][0][0] == sliced.width
        for k, index in enumerate(range(sliced.first, sliced.last + 1)):
            assert bound.tasks.modes[index] is Mode.WRITE  # every member writes its slot
            for slot, how in zip(uses[index].outputs, sliced.outputs[k]):
                assert (how == SLICED) == (slot not in sliced.inner)
                if how == SLICED:
                    assert bound.memory.descs[slot][0][0] == BATCH
    assert all(run["inner_bytes"] > 0 for run in executable.memory["batch_slices"])


def test_no_slicing_at_batch_one_nor_when_switched_off(net, monkeypatch):
    _model, graph = net
    monkeypatch.setenv(VARIABLE, "1")  # every step over the budget
    _out, executable = _run(graph, np.ones((1, 3, 32, 32), np.float32))
    assert executable.memory["batch_slices"] == []
    memory = gp.MemoryPass()
    memory.enable_batch_slicing(False)
    switched = memory.run(graph)
    assert switched.metadata["memory"]["batch_slicing"] is False
    _out, executable = _run(switched, np.ones((BATCH, 3, 32, 32), np.float32))
    assert executable.memory_options["batch_slicing"] is False
    assert executable.memory["batch_slices"] == []
    monkeypatch.setenv(VARIABLE, "0")
    assert budget() == 0
    _out, executable = _run(graph, np.ones((BATCH, 3, 32, 32), np.float32))
    assert executable.memory["batch_slices"] == []


def test_a_profile_counts_a_sliced_step_once_with_its_slices(net, monkeypatch):
    _model, graph = net
    monkeypatch.setenv(VARIABLE, str(SMALL))
    executable = ge.compile(graph)
    session = ge.Session(executable)
    x = np.ones((BATCH, 3, 32, 32), np.float32)
    session.run({graph.inputs[0].producer.name: x}, profile=True)
    profile = session.last_profile
    slices = executable.memory["batch_slices"]
    assert slices
    nodes = profile.by_node()
    assert len(nodes) == len(executable.steps)
    sliced = {name for name, steps in _sliced_nodes(executable)}
    counts = {step.node: records for step, _ns, records in nodes}
    for name in sliced:
        assert counts[name] == slices[0]["slices"] or counts[name] > 1
    assert "slices)" in profile.table(len(executable.steps))
    assert sum(n for _op, _ns, n in profile.by_op_type()) == len(executable.steps)


def _sliced_nodes(executable: ge.Executable):
    _shapes, bound = executable.last_plan
    for sliced, _first, _last in bound.slicings:
        for index in range(sliced.first, sliced.last + 1):
            yield executable.steps[index].node, sliced


def test_a_value_held_over_a_sliced_run_shares_no_bytes_with_one_made_inside_it():
    f32 = np.dtype(np.float32)
    descs = {slot: ((256,), f32) for slot in range(5)}
    steps = [StepUse((), (0,)), StepUse((0,), (1,)), StepUse((1,), (2,)),
             StepUse((2,), (3,)), StepUse((3,), (4,))]
    # without holding: 0 dies at step 1 and 2 may take its bytes
    free = plan_memory(steps, descs, {4})
    assert free.offsets[0] == free.offsets[2]
    held = plan_memory(steps, descs, {4}, held={0: (1, 3), 3: (1, 3)})

    def apart(a: int, b: int) -> bool:
        return held.offsets[a] + 1024 <= held.offsets[b] or \
            held.offsets[b] + 1024 <= held.offsets[a]

    assert apart(0, 1) and apart(0, 2) and apart(0, 3)
    assert apart(3, 1)  # 3 is written by the run's first slice, while 1 is still read
    assert held.arena_bytes > free.arena_bytes


def _value(shape):
    return TensorDesc(tuple(shape), DataType.DT_FLOAT)


def _node(op_type, inputs, attrs, out_shape):
    values = [Node("Data", [], {"shape": list(s), "dtype": DataType.DT_FLOAT},
                   [_value(s)], f"in{k}").outputs[0] for k, s in enumerate(inputs)]
    return Node(op_type, values, attrs, [_value(out_shape)], op_type.lower())


def test_what_separates_by_batch_and_what_does_not():
    assert separable(_node("Add", [(4, 3), (4, 3)], {}, (4, 3)), frozenset()) == \
        Separable(True)
    assert separable(_node("Softmax", [(4, 3)], {"axis": 0}, (4, 3)), frozenset()) is None
    assert separable(_node("Softmax", [(4, 3)], {"axis": 1}, (4, 3)), frozenset()) \
        == Separable(False, (True,))
    assert separable(_node("Transpose", [(4, 3)], {"perm": [1, 0]}, (3, 4)),
                     frozenset()) is None
    assert separable(_node("MatMul", [(4, 3), (3, 2)], {}, (4, 2)), frozenset()) is None
    conv = _node("Conv2D", [(4, 3, 8, 8), (6, 3, 3, 3)], {}, (4, 6, 6, 6))
    assert separable(conv, frozenset()) is None  # a filter made at run time
    assert separable(conv, frozenset({"in1"})) == Separable(False, (True, False))


def test_a_run_whose_step_reads_whole_what_the_run_makes_is_not_sliced():
    f32 = np.dtype(np.float32)
    big = ((8, 1 << 14), f32)
    descs = {0: big, 1: big, 2: big, 3: ((1 << 14,), f32), 4: big}
    kinds = [Separable(True)] * 3
    # step 2 reads slot 3 whole (broadcast), fine as a graph input ...
    steps = [((0,), (1,)), ((1,), (2,)), ((2, 3), (4,))]
    found = plan_slices(steps, kinds, descs, [True] * 3, frozenset(), frozenset({0, 4}),
                        limit=1 << 16)
    assert len(found) == 1 and found[0].slices == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5),
                                                   (5, 6), (6, 7), (7, 8))
    assert found[0].inputs == ((SLICED,), (INNER,), (INNER, WHOLE))
    assert found[0].outputs == ((INNER,), (INNER,), (SLICED,))
    assert found[0].inner == frozenset({1, 2})
    # ... but not when the run itself makes it: a slice would read samples not yet made
    descs[3] = ((8,), f32)  # made by step 1, read by step 2 as a broadcast operand
    steps = [((0,), (1,)), ((1,), (3,)), ((2, 3), (4,))]
    found = plan_slices(steps, kinds, descs, [True] * 3, frozenset(), frozenset({0, 2, 4}),
                        limit=1 << 16)
    assert found == []


def test_the_report_page_shades_the_sliced_runs_of_the_memory_timeline(net, monkeypatch,
                                                                      tmp_path):
    from ge import viz

    _model, graph = net
    monkeypatch.setenv(VARIABLE, str(SMALL))
    _out, executable = _run(graph, np.ones((BATCH, 3, 32, 32), np.float32))
    runs = executable.memory["batch_slices"]
    text = viz.report_html(graph, executable, tmp_path / "r.html").read_text()
    assert text.count('class="sliced"') == len(runs) > 0
    assert f"{runs[0]['first']} .. {runs[0]['last']}" in text
    monkeypatch.setenv(VARIABLE, "0")
    _out, plain = _run(graph, np.ones((BATCH, 3, 32, 32), np.float32))
    assert 'class="sliced"' not in viz.report_html(graph, plain, tmp_path / "p.html").read_text()
