"""The torch engine's recurrent cells (ONNX LSTM, GRU, RNN) against the NumPy engine's
reference kernels: every output, over directions, biases, initial states, layouts,
batch and sequence sizes; and the nodes it declines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines import get_engine
from tests.engines.test_torch_engine import _feeds
from tests.engines.test_torch_engine import _graph as one_node_graph
from tests.tolerance import assert_close

pytest.importorskip("torch")

RNG = np.random.default_rng(11)

HIDDEN, INPUT = 16, 8
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: input indices of the recurrent ops
W, R, B, LENS, H0, C0, P = 1, 2, 3, 4, 5, 6, 7


def _graph(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
           const: Sequence[int]) -> tuple[ge.Graph, list[str]]:
    """A graph of one ``op_type`` node; its outputs are all the node's outputs (names
    returned)."""
    graph = one_node_graph(op_type, arrays, attrs, const)
    node = next(n for n in graph.nodes if n.name == "op")
    graph.set_outputs(list(node.outputs))
    return graph, [v.name for v in node.outputs]


def _arrays(op_type: str, directions: int, seq: int, batch: int, bias: bool, initial: bool,
            layout: int = 0, dtype: Any = np.float32) -> list[Optional[np.ndarray]]:
    gates = GATES[op_type]

    def f(*shape: int) -> np.ndarray:
        return (RNG.standard_normal(shape) * 0.5).astype(dtype)

    x = f(batch, seq, INPUT) if layout else f(seq, batch, INPUT)
    state_shape = (batch, directions, HIDDEN) if layout else (directions, batch, HIDDEN)
    arrays: list[Optional[np.ndarray]] = [
        x, f(directions, gates * HIDDEN, INPUT), f(directions, gates * HIDDEN, HIDDEN),
        f(directions, 2 * gates * HIDDEN) if bias else None, None,
        f(*state_shape) if initial else None]
    if op_type == "LSTM":
        arrays.append(f(*state_shape) if initial else None)
    return arrays


def _attrs(op_type: str, direction: str, layout: int = 0) -> dict[str, Any]:
    attrs: dict[str, Any] = {"direction": direction, "hidden_size": HIDDEN, "layout": layout}
    if op_type == "GRU":
        attrs["linear_before_reset"] = 1
    return attrs


def check_on_torch(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
                   const: Sequence[int] = (W, R, B)) -> None:
    """The node runs on the torch engine and every output agrees with the NumPy engine."""
    graph, names = _graph(op_type, arrays, attrs, const)
    executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
    assert executable.report["engines_by_op"].get("torch") == {op_type: 1}, \
        executable.report["engines_by_op"]
    feeds = _feeds(arrays, const)
    session = ge.Session(executable)
    got = session.run(feeds)
    again = session.run(feeds)
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)
    assert len(names) == (3 if op_type == "LSTM" else 2)
    for name in names:
        assert_close(got[name], want[name], accumulate=True, what=f"{op_type} {attrs} {name}")
        np.testing.assert_array_equal(again[name], got[name])


def _kernel_matches(op_type: str, arrays: Sequence[Optional[np.ndarray]],
                    attrs: dict[str, Any]) -> None:
    """The bound (allocating) kernel gives what the reference kernel gives."""
    graph, _ = _graph(op_type, arrays, attrs, (W, R, B))
    node = next(n for n in graph.nodes if n.name == "op")
    kernel = get_engine("torch").bind(node)
    reference = get_engine("numpy").bind(node)
    got, want = kernel(list(arrays)), reference(list(arrays))
    assert len(got) == len(want) == len(node.outputs)
    for g, w in zip(got, want):
        assert g.flags.c_contiguous
        assert_close(g, w, accumulate=True, what=f"{op_type} kernel {attrs}")


CASES = [
    # (direction, seq, batch, bias, initial states)
    ("forward", 7, 3, True, True),
    ("forward", 1, 1, False, False),
    ("forward", 7, 1, True, False),
    ("reverse", 7, 3, True, True),
    ("reverse", 1, 3, False, True),
    ("bidirectional", 7, 3, True, True),
    ("bidirectional", 7, 1, False, False),
    ("bidirectional", 1, 3, True, False),
]


@pytest.mark.parametrize("op_type", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_recurrent_cells(op_type, case):
    direction, seq, batch, bias, initial = case
    directions = 2 if direction == "bidirectional" else 1
    arrays = _arrays(op_type, directions, seq, batch, bias, initial)
    check_on_torch(op_type, arrays, _attrs(op_type, direction))


@pytest.mark.parametrize("op_type", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_batch_first_layout(op_type, direction):
    directions = 2 if direction == "bidirectional" else 1
    arrays = _arrays(op_type, directions, 7, 3, True, True, layout=1)
    check_on_torch(op_type, arrays, _attrs(op_type, direction, layout=1))


@pytest.mark.parametrize("op_type", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layout", [0, 1])
def test_the_allocating_kernel(op_type, layout):
    arrays = _arrays(op_type, 2, 5, 3, True, True, layout=layout)
    _kernel_matches(op_type, arrays, _attrs(op_type, "bidirectional", layout))
    arrays = _arrays(op_type, 1, 5, 2, False, False, layout=layout)
    _kernel_matches(op_type, arrays, _attrs(op_type, "reverse", layout))


def test_an_empty_sequence_keeps_the_initial_states():
    for layout in (0, 1):
        arrays = _arrays("LSTM", 2, 0, 3, True, True, layout=layout)
        _kernel_matches("LSTM", arrays, _attrs("LSTM", "bidirectional", layout))
        arrays = _arrays("GRU", 1, 0, 2, True, False, layout=layout)
        _kernel_matches("GRU", arrays, _attrs("GRU", "forward", layout))


@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_with_initial_h_only(layout):
    arrays = _arrays("LSTM", 2, 6, 3, True, True, layout=layout)
    arrays[C0] = None
    check_on_torch("LSTM", arrays, _attrs("LSTM", "bidirectional", layout))


def test_explicit_default_activations_and_relu():
    arrays = _arrays("LSTM", 2, 4, 2, True, True)
    check_on_torch("LSTM", arrays, {**_attrs("LSTM", "bidirectional"),
                                    "activations": ["Sigmoid", "Tanh", "Tanh"] * 2})
    arrays = _arrays("GRU", 1, 4, 2, True, True)
    check_on_torch("GRU", arrays, {**_attrs("GRU", "forward"),
                                   "activations": ["sigmoid", "tanh"]})
    for direction, names in (("forward", ["Relu"]), ("bidirectional", ["Relu"]),
                             ("bidirectional", ["Relu", "Relu"])):
        directions = 2 if direction == "bidirectional" else 1
        arrays = _arrays("RNN", directions, 5, 3, True, True)
        check_on_torch("RNN", arrays, {**_attrs("RNN", direction), "activations": names})


def _declined(op_type: str, arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any],
              const: Sequence[int] = (W, R, B)) -> bool:
    graph, _ = _graph(op_type, arrays, attrs, const)
    node = next(n for n in graph.nodes if n.name == "op")
    return not get_engine("torch").supports(node)


def test_the_cells_the_engine_declines():
    lstm = _arrays("LSTM", 1, 4, 2, True, True)
    with_peepholes = lstm + [(RNG.standard_normal(3 * HIDDEN) * 0.1).astype(np.float32)[None]]
    assert _declined("LSTM", with_peepholes, _attrs("LSTM", "forward"), (W, R, B, P))
    assert _declined("LSTM", lstm, {**_attrs("LSTM", "forward"), "clip": 3.0})
    assert _declined("LSTM", lstm, {**_attrs("LSTM", "forward"), "input_forget": 1})
    assert _declined("LSTM", lstm, {**_attrs("LSTM", "forward"),
                                    "activations": ["Sigmoid", "Tanh", "Relu"]})
    assert _declined("LSTM", lstm, _attrs("LSTM", "forward"), (R, B))  # W fed, not constant
    assert _declined("LSTM", lstm, _attrs("LSTM", "forward"), (W, B))  # R fed
    assert _declined("LSTM", lstm, _attrs("LSTM", "forward"), (W, R))  # B fed
    with_lengths = list(lstm)
    with_lengths[LENS] = np.array([4, 2], np.int32)
    assert _declined("LSTM", with_lengths, _attrs("LSTM", "forward"))
    as_float64 = _arrays("LSTM", 1, 4, 2, True, True, dtype=np.float64)
    assert _declined("LSTM", as_float64, _attrs("LSTM", "forward"))
    gru = _arrays("GRU", 1, 4, 2, True, True)
    assert _declined("GRU", gru, {**_attrs("GRU", "forward"), "linear_before_reset": 0})
    assert _declined("GRU", _arrays("GRU", 1, 4, 2, True, True, dtype=np.float64),
                     _attrs("GRU", "forward"))
    rnn = _arrays("RNN", 2, 4, 2, True, True)
    assert _declined("RNN", rnn, {**_attrs("RNN", "bidirectional"),
                                  "activations": ["Tanh", "Relu"]})
    assert _declined("RNN", rnn, {**_attrs("RNN", "bidirectional"),
                                  "activations": ["Sigmoid"]})
    assert _declined("RNN", rnn, {**_attrs("RNN", "bidirectional"), "clip": 1.0})


def test_declined_cells_run_on_numpy():
    lstm = _arrays("LSTM", 1, 4, 2, True, True)
    graph, names = _graph("LSTM", lstm, {**_attrs("LSTM", "forward"), "clip": 3.0}, (W, R, B))
    executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
    assert "torch" not in executable.report["engines_by_op"] \
        or "LSTM" not in executable.report["engines_by_op"]["torch"]
    got = ge.Session(executable).run(_feeds(lstm, (W, R, B)))
    assert set(names) <= set(got)
