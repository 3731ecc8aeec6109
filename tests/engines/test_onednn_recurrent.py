"""The oneDNN engine's recurrences (ONNX LSTM and GRU as oneDNN's recurrent primitives)
against the NumPy engine's reference kernels and onnxruntime: every output over cells,
directions, layouts, initial states and sizes; the outputs a graph leaves unread; runs
that go to the next engine (sequence lengths shorter than the sequence, no steps, no
batch); the cells the engine declines; and which engine the default order gives a
recurrence."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ge
from ge.engines import get_engine
from ge.engines.fused import recurrent as fused_recurrent
from ge.engines.onednn import _lib
from ge.engines.onednn import recurrent as onednn_recurrent
from tests.engines import test_fused_recurrent as fused_tests
from tests.engines.test_fused_recurrent import (
    NAMES,
    WEIGHTS,
    _node,
    attributes,
    make_inputs,
    one_node_graph,
    onnxruntime_outputs,
)
from tests.tolerance import assert_close

if _lib.unavailable_reason() is not None:
    pytest.fail(f"oneDNN is a test dependency: {_lib.unavailable_reason()}")

CELLS = [("LSTM", {}), ("GRU", {"linear_before_reset": 0}), ("GRU", {"linear_before_reset": 1})]
CELL_IDS = ["lstm", "gru-lbr0", "gru-lbr1"]
DIRECTIONS = ["forward", "reverse", "bidirectional"]
ENGINES = ["onednn", "numpy"]


def check(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any],
          constants: tuple[str, ...] = WEIGHTS) -> None:
    """The node runs on the oneDNN engine, and every output agrees with the NumPy engine
    and (layout 0) with onnxruntime; a second run gives the same values."""
    fused_tests.check(op_type, inputs, attrs, engine="onednn", constants=constants,
                      engines=ENGINES)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("initial", [True, False])
def test_cells(cell, direction, layout, initial):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, direction, layout=layout, initial=initial)
    check(op_type, inputs, attributes(op_type, cell_attrs, direction, layout=layout))


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("size", [
    # (direction, seq, batch, hidden, bias)
    ("forward", 9, 1, 64, True),
    ("bidirectional", 5, 4, 48, False),
    ("reverse", 1, 2, 33, True),
], ids=lambda s: "-".join(map(str, s)))
def test_sizes_and_biases(cell, size):
    op_type, cell_attrs = cell
    direction, seq, batch, hidden, bias = size
    inputs = make_inputs(op_type, direction, seq=seq, batch=batch, hidden=hidden, bias=bias)
    check(op_type, inputs, attributes(op_type, cell_attrs, direction, hidden))


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("given", ["initial_h", "initial_c"])
def test_an_lstm_with_one_initial_state(layout, given):
    """oneDNN takes both states or neither: the one not given starts at zeros."""
    inputs = make_inputs("LSTM", "bidirectional", layout=layout)
    del inputs["initial_c" if given == "initial_h" else "initial_h"]
    check("LSTM", inputs, attributes("LSTM", {}, "bidirectional", layout=layout))


def test_states_given_as_constants_and_full_sequence_lengths():
    inputs = make_inputs("GRU", "reverse", lengths=[6, 6, 6])
    check("GRU", inputs, attributes("GRU", {}, "reverse"),
          constants=WEIGHTS + ("sequence_lens", "initial_h"))


def _lstm(inputs: dict[str, np.ndarray], attrs: dict[str, Any], dynamic: bool = False
          ) -> tuple[ge.Graph, Any]:
    """A graph holding one LSTM node, and the node (its outputs for the caller to pick)."""
    graph, _ = one_node_graph("LSTM", inputs, attrs, dynamic=dynamic)
    return graph, next(n for n in graph.nodes if n.name == "cell")


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("read", [[0], [1], [0, 1], [2]])
def test_outputs_left_unread(layout, read):
    """A graph that reads some of an LSTM's outputs gets them right: the others are still
    computed somewhere (oneDNN writes its final states in pairs)."""
    inputs = make_inputs("LSTM", "bidirectional", layout=layout)
    graph, node = _lstm(inputs, attributes("LSTM", {}, "bidirectional", layout=layout))
    graph.set_outputs([node.outputs[i] for i in read])
    executable = ge.compile(graph, opt_level=0, engines=ENGINES)
    assert executable.report["engines_by_op"].get("onednn") == {"LSTM": 1}
    feeds = {n: a for n, a in inputs.items() if n not in WEIGHTS}
    got = ge.Session(executable).run(feeds)
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)
    assert got.keys() == want.keys()
    for name in want:
        assert_close(got[name], want[name], accumulate=True, what=name)


def test_a_shape_per_run():
    """One bound node over runs of other lengths and batches: a primitive per shape."""
    inputs = make_inputs("LSTM", "bidirectional", seq=5, batch=2)
    graph, names = one_node_graph("LSTM", inputs, attributes("LSTM", {}, "bidirectional"))
    node = next(n for n in graph.nodes if n.name == "cell")
    bound = get_engine("onednn").bind_node(node)
    reference = get_engine("numpy").bind(node)
    rng = np.random.default_rng(7)
    for seq, batch in ((5, 2), (3, 4), (5, 2), (1, 1)):
        arrays: list[Any] = [inputs.get(name) for name in NAMES["LSTM"]]
        arrays[0] = rng.standard_normal((seq, batch, arrays[0].shape[2])).astype(np.float32)
        arrays[5] = rng.standard_normal((2, batch, 5)).astype(np.float32)
        arrays[6] = rng.standard_normal((2, batch, 5)).astype(np.float32)
        for got, want in zip(bound.kernel(arrays), reference(arrays)):
            assert_close(got, want, accumulate=True, what=f"seq {seq} batch {batch}")


# -- runs the next engine takes ----------------------------------------------------------

@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_shorter_sequence_lengths_run_the_fused_loop(cell):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, "bidirectional", seq=6, batch=4, lengths=[6, 2, 4, 1])
    attrs = attributes(op_type, cell_attrs, "bidirectional")
    check(op_type, inputs, attrs)
    node = _node(op_type, inputs, attrs)
    bound = get_engine("onednn").bind_node(node)
    arrays = [inputs.get(name) for name in NAMES[op_type]]
    got = bound.kernel(arrays)
    elsewhere = next(c.cell_contents for c in bound.writer.__closure__
                     if isinstance(c.cell_contents, onednn_recurrent._Elsewhere))
    assert isinstance(elsewhere.loop, fused_recurrent.RecurrentKernel)
    for g, w in zip(got, get_engine("numpy").bind(node)(arrays)):
        assert_close(g, w, accumulate=True)


def test_input_features_w_does_not_fit_are_a_clear_error():
    """X's last axis unknown when compiling: a run that feeds the wrong size gets an error
    naming the node and the sizes, and the session runs on."""
    inputs = make_inputs("LSTM", "forward", hidden=200, initial=False)
    graph, node = _lstm(inputs, attributes("LSTM", {}, "forward", 200), dynamic=True)
    graph.set_outputs(list(node.outputs))
    executable = ge.compile(graph, opt_level=0)
    assert executable.report["engines_by_op"].get("onednn") == {"LSTM": 1}
    session = ge.Session(executable)
    with pytest.raises(ge.errors.ExecutionError, match=r"cell.*7 input features; W expects 4"):
        session.run({"X": np.zeros((6, 3, 7), np.float32)})
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run({"X": inputs["X"]})
    got = session.run({"X": inputs["X"]})
    for name in want:
        assert_close(got[name], want[name], accumulate=True, what=name)


# (an empty sequence or batch: test_fused_recurrent's test covers this engine too)


# -- what the engine declines, and the default order ----------------------------------------

def test_the_cells_the_engine_declines():
    engine = get_engine("onednn")
    lstm = make_inputs("LSTM", "forward")
    assert engine.supports(_node("LSTM", lstm, attributes("LSTM", {}, "forward")))
    assert not engine.supports(_node("LSTM", lstm, attributes("LSTM", {}, "forward", clip=1.0)))
    assert not engine.supports(_node("LSTM", lstm, attributes("LSTM", {}, "forward",
                                                              input_forget=1)))
    peephole = make_inputs("LSTM", "forward", peephole=True)
    assert not engine.supports(_node("LSTM", peephole, attributes("LSTM", {}, "forward")))
    assert not engine.supports(_node("LSTM", lstm, attributes(
        "LSTM", {}, "forward", activations=["Sigmoid", "Tanh", "Relu"])))
    assert not engine.supports(_node("LSTM", lstm, attributes("LSTM", {}, "forward"),
                                     constants=("R", "B")))  # W fed at run time
    assert not engine.supports(_node("RNN", make_inputs("RNN", "forward"),
                                     attributes("RNN", {}, "forward")))
    as_float64 = {n: a.astype(np.float64) if a.dtype == np.float32 else a
                  for n, a in lstm.items()}
    assert not engine.supports(_node("LSTM", as_float64, attributes("LSTM", {}, "forward")))


@pytest.mark.parametrize("attrs", [{"clip": 0.8}, {"input_forget": 1}],
                         ids=["clip", "input-forget"])
def test_declined_cells_still_agree(attrs):
    inputs = make_inputs("LSTM", "forward")
    graph, names = one_node_graph("LSTM", inputs, attributes("LSTM", {}, "forward", **attrs))
    executable = ge.compile(graph, opt_level=0, engines=ENGINES)
    assert "LSTM" not in executable.report["engines_by_op"].get("onednn", {})
    feeds = {"X": inputs["X"], "initial_h": inputs["initial_h"],
             "initial_c": inputs["initial_c"]}
    got = ge.Session(executable).run(feeds)
    for name, theirs in zip(names, onnxruntime_outputs("LSTM", inputs, attributes(
            "LSTM", {}, "forward", **attrs))):
        assert_close(got[name], theirs, accumulate=True, what=name)


def test_the_default_order_gives_large_steps_to_onednn():
    """The fused engine keeps the recurrences its loops run fast; a step's product over
    its limit goes to oneDNN, not to torch. One direction's limit is lower than two's:
    the loops run two directions at once."""
    largest = 1 + int((fused_recurrent.MAX_STEP_MACS // 4) ** 0.5)
    middle = 1 + int((fused_recurrent.MAX_STEP_MACS_BESIDE_ONEDNN // 4) ** 0.5)
    assert middle < largest
    for size, direction, engine in ((8, "forward", "fused"), (largest, "forward", "onednn"),
                                    (middle, "reverse", "onednn"),
                                    (middle, "bidirectional", "fused"),
                                    (largest, "bidirectional", "onednn")):
        inputs = make_inputs("LSTM", direction, seq=3, batch=1, hidden=size)
        graph, _ = one_node_graph("LSTM", inputs, attributes("LSTM", {}, direction, size))
        engines = ge.compile(graph, opt_level=0).report["engines_by_op"]
        assert engines.get(engine, {}).get("LSTM") == 1, (size, direction, engines)


def test_without_onednn_the_loops_keep_one_direction_up_to_their_own_limit(monkeypatch):
    middle = 1 + int((fused_recurrent.MAX_STEP_MACS_BESIDE_ONEDNN // 4) ** 0.5)
    inputs = make_inputs("LSTM", "forward", seq=3, batch=1, hidden=middle)
    node = _node("LSTM", inputs, attributes("LSTM", {}, "forward", middle))
    assert not get_engine("fused").supports(node)
    monkeypatch.setattr(type(get_engine("onednn")), "unavailable_reason",
                        lambda self: "not installed")
    assert get_engine("fused").supports(node)
