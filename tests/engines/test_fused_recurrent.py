"""The fused engine's compiled recurrences (ONNX LSTM, GRU, RNN) against the NumPy
engine's reference kernels and onnxruntime: every output, over directions, layouts,
biases, initial states, sequence lengths, clip, peepholes, input_forget, GRU's
linear_before_reset, batch and hidden sizes; and the nodes the engine declines, which
run on another engine and still agree."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines import get_engine
from ge.engines.fused import recurrent
from ge.ops import create_node
from tests.tolerance import assert_close

pytest.importorskip("numba")
ort = pytest.importorskip("onnxruntime")
onnx_helper = pytest.importorskip("onnx.helper")
numpy_helper = pytest.importorskip("onnx.numpy_helper")

RNG = np.random.default_rng(5)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
NAMES = {"RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
         "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
         "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]}
#: inputs that are constants of the graph (the engine takes only constant weights)
WEIGHTS = ("W", "R", "B", "P")
INPUT_SIZE = 4
#: (op type, attributes): every cell the compiled loops have
CELLS = [("LSTM", {}), ("GRU", {"linear_before_reset": 0}), ("GRU", {"linear_before_reset": 1}),
         ("RNN", {}), ("RNN", {"activations": ["Relu"]})]
CELL_IDS = ["lstm", "gru-lbr0", "gru-lbr1", "rnn-tanh", "rnn-relu"]
DIRECTIONS = ["forward", "reverse", "bidirectional"]
#: how many activations one direction of each op has
CELL_ACTIVATIONS = {"LSTM": 3, "GRU": 2, "RNN": 1}


def make_inputs(op_type: str, direction: str, *, seq: int = 6, batch: int = 3,
                hidden: int = 5, layout: int = 0, bias: bool = True, initial: bool = True,
                lengths: Optional[list[int]] = None, peephole: bool = False
                ) -> dict[str, np.ndarray]:
    """The node's inputs by ONNX name (absent optional inputs left out)."""
    gates, directions = GATES[op_type], 2 if direction == "bidirectional" else 1

    def sample(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (RNG.standard_normal(shape) * scale).astype(np.float32)

    state = (batch, directions, hidden) if layout else (directions, batch, hidden)
    inputs = {"X": sample(batch, seq, INPUT_SIZE) if layout else sample(seq, batch, INPUT_SIZE),
              "W": sample(directions, gates * hidden, INPUT_SIZE),
              "R": sample(directions, gates * hidden, hidden)}
    if bias:
        inputs["B"] = sample(directions, 2 * gates * hidden, scale=0.2)
    if lengths is not None:
        inputs["sequence_lens"] = np.array(lengths, np.int32)
    if initial:
        inputs["initial_h"] = sample(*state)
        if op_type == "LSTM":
            inputs["initial_c"] = sample(*state)
    if peephole:
        inputs["P"] = sample(directions, 3 * hidden)
    return inputs


def one_node_graph(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any],
                   constants: tuple[str, ...] = WEIGHTS, dynamic: bool = False
                   ) -> tuple[ge.Graph, list[str]]:
    """A graph of one node whose outputs are all the node's outputs (names returned); its
    fed inputs of unknown shape when ``dynamic``."""
    graph = ge.Graph(op_type.lower())
    values: list[Any] = []
    for name in NAMES[op_type]:
        array = inputs.get(name)
        if array is None:
            values.append(None)
        elif name in constants:
            values.append(create_node("Const", [], {"value": ge.Tensor(array)}, name, graph))
        else:
            shape = [-1] * array.ndim if dynamic else list(array.shape)
            values.append(create_node("Data", [], {"shape": shape, "dtype": array.dtype.name},
                                      name, graph))
    node = create_node(op_type, values, attrs, "cell", graph)
    graph.set_outputs(list(node.outputs))
    return graph, [v.name for v in node.outputs]


def onnxruntime_outputs(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]
                        ) -> list[np.ndarray]:
    """The node's outputs as onnxruntime computes them (weights as initializers)."""
    names = [n if n in inputs else "" for n in NAMES[op_type]]
    while not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][:3 if op_type == "LSTM" else 2]
    feeds = {n: a for n, a in inputs.items() if n not in WEIGHTS}
    codes = {np.dtype(np.float32): 1, np.dtype(np.int32): 6}  # TensorProto FLOAT, INT32
    graph = onnx_helper.make_graph(
        [onnx_helper.make_node(op_type, names, outputs, **attrs)], "cell",
        [onnx_helper.make_tensor_value_info(n, codes[a.dtype], a.shape) for n, a in feeds.items()],
        [onnx_helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inputs.items() if n in WEIGHTS])
    model = onnx_helper.make_model(graph, opset_imports=[onnx_helper.make_opsetid("", 14)])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def check(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any],
          engine: str = "fused", against_onnxruntime: bool = True,
          constants: tuple[str, ...] = WEIGHTS, engines: Optional[list[str]] = None) -> None:
    """The node runs on ``engine`` with ``engines`` (GE's default engines by default), and
    every output agrees with the NumPy engine and (layout 0: onnxruntime has no other)
    with onnxruntime, run after run; the fused engine's allocating kernel and writer
    agree too."""
    graph, names = one_node_graph(op_type, inputs, attrs, constants)
    executable = ge.compile(graph, opt_level=0, engines=engines)
    assert executable.report["engines_by_op"].get(engine, {}).get(op_type) == 1, \
        executable.report["engines_by_op"]
    feeds = {n: a for n, a in inputs.items() if n not in constants}
    session = ge.Session(executable)
    got = session.run(feeds)
    again = session.run(feeds)
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)
    what = f"{op_type} {attrs}"
    for name in names:
        assert_close(got[name], want[name], accumulate=True, what=f"{what} {name}")
        np.testing.assert_array_equal(again[name], got[name])
    if against_onnxruntime and attrs.get("layout", 0) == 0:
        for name, theirs in zip(names, onnxruntime_outputs(op_type, inputs, attrs)):
            assert_close(got[name], theirs, accumulate=True, what=f"{what} {name} (ort)")
    if engine == "fused":
        _check_bound_kernels(graph, inputs, [want[name] for name in names])


def _check_bound_kernels(graph: ge.Graph, inputs: dict[str, np.ndarray],
                         want: list[np.ndarray]) -> None:
    node = next(n for n in graph.nodes if n.name == "cell")
    arrays = [inputs.get(name) for name in NAMES[node.op_type]]
    bound = get_engine("fused").bind_node(node)
    assert bound.writer is not None and not bound.allocates
    outs = [np.full(w.shape, np.nan, np.float32) for w in want]
    bound.writer(arrays, outs)
    for kernel_out, written, expected in zip(bound.kernel(arrays), outs, want):
        assert kernel_out.flags.c_contiguous
        assert_close(kernel_out, expected, accumulate=True, what="allocating kernel")
        np.testing.assert_array_equal(written, kernel_out)


def attributes(op_type: str, cell: dict[str, Any], direction: str, hidden: int = 5,
               layout: int = 0, **extra: Any) -> dict[str, Any]:
    """The node's attributes; a cell's activations are given for each direction (as
    onnxruntime wants them)."""
    attrs = {"direction": direction, "hidden_size": hidden, "layout": layout, **cell, **extra}
    names = attrs.get("activations")
    if names and direction == "bidirectional" and len(names) == CELL_ACTIVATIONS[op_type]:
        attrs["activations"] = names * 2
    return attrs


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layout", [0, 1])
def test_cells(cell, direction, layout):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, direction, layout=layout)
    check(op_type, inputs, attributes(op_type, cell_attrs, direction, layout=layout))


SIZES = [
    # (direction, seq, batch, hidden, bias, initial states)
    ("forward", 7, 1, 16, True, False),
    ("bidirectional", 5, 1, 16, False, True),
    ("reverse", 4, 3, 16, True, True),
    ("bidirectional", 1, 3, 5, False, False),
    ("forward", 3, 2, 9, True, True),
]


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "-".join(map(str, s)))
def test_sizes_biases_and_initial_states(cell, size):
    op_type, cell_attrs = cell
    direction, seq, batch, hidden, bias, initial = size
    inputs = make_inputs(op_type, direction, seq=seq, batch=batch, hidden=hidden, bias=bias,
                         initial=initial)
    check(op_type, inputs, attributes(op_type, cell_attrs, direction, hidden))


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_sequence_lengths(cell, direction):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, direction, seq=6, batch=4, lengths=[6, 2, 4, 1])
    check(op_type, inputs, attributes(op_type, cell_attrs, direction))


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_sequence_lengths_batch_first(cell):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, "bidirectional", layout=1, lengths=[3, 6, 1])
    check(op_type, inputs, attributes(op_type, cell_attrs, "bidirectional", layout=1))


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_a_zero_length_entry_keeps_its_initial_state(cell):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, "bidirectional", lengths=[0, 6, 3])
    check(op_type, inputs, attributes(op_type, cell_attrs, "bidirectional"),
          against_onnxruntime=False)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_clip(cell, direction):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, direction, lengths=[6, 3, 5])
    for key in ("X", "W"):
        inputs[key] = inputs[key] * 4  # pre-activations beyond the bound
    check(op_type, inputs, attributes(op_type, cell_attrs, direction, clip=0.8))


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_peepholes(direction, layout):
    inputs = make_inputs("LSTM", direction, layout=layout, lengths=[6, 4, 5], peephole=True)
    check("LSTM", inputs, attributes("LSTM", {}, direction, layout=layout))


@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_input_forget(peephole, direction):
    inputs = make_inputs("LSTM", direction, peephole=peephole)
    check("LSTM", inputs, attributes("LSTM", {}, direction, input_forget=1))


def test_lstm_peepholes_clip_and_input_forget_together():
    inputs = make_inputs("LSTM", "bidirectional", hidden=16, lengths=[2, 6, 6], peephole=True)
    check("LSTM", inputs, attributes("LSTM", {}, "bidirectional", 16, clip=0.5,
                                     input_forget=1))


@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_with_initial_h_only(layout):
    inputs = make_inputs("LSTM", "bidirectional", layout=layout)
    del inputs["initial_c"]
    check("LSTM", inputs, attributes("LSTM", {}, "bidirectional", layout=layout))


def test_explicit_default_activations():
    inputs = make_inputs("LSTM", "bidirectional")
    check("LSTM", inputs, attributes("LSTM", {}, "bidirectional",
                                     activations=["Sigmoid", "Tanh", "Tanh"] * 2))
    inputs = make_inputs("GRU", "forward")
    check("GRU", inputs, attributes("GRU", {}, "forward", activations=["sigmoid", "tanh"]))
    inputs = make_inputs("RNN", "bidirectional")
    check("RNN", inputs, attributes("RNN", {}, "bidirectional", activations=["Relu", "Tanh"]))


def test_one_direction_of_activations_serves_both():
    """GE, as its reference kernels, reads one direction's activations as both's."""
    inputs = make_inputs("RNN", "bidirectional")
    attrs = {"direction": "bidirectional", "hidden_size": 5, "activations": ["Relu"]}
    check("RNN", inputs, attrs, against_onnxruntime=False)
    inputs = make_inputs("GRU", "bidirectional")
    attrs = {"direction": "bidirectional", "hidden_size": 5, "activations": ["Sigmoid", "Tanh"]}
    check("GRU", inputs, attrs, against_onnxruntime=False)


def test_runtime_states_and_constant_lengths():
    inputs = make_inputs("GRU", "reverse", lengths=[5, 6, 2])
    check("GRU", inputs, attributes("GRU", {}, "reverse"),
          constants=WEIGHTS + ("sequence_lens", "initial_h"))


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op_type,engine", [("LSTM", "fused"), ("GRU", "fused"),
                                            ("LSTM", "onednn"), ("GRU", "onednn")])
def test_an_empty_sequence_and_an_empty_batch(layout, op_type, engine):
    """The fused loops and oneDNN's recurrences (whose runs go to the loops here)."""
    for seq, batch in ((0, 3), (4, 0)):
        inputs = make_inputs(op_type, "bidirectional", seq=seq, batch=batch, layout=layout)
        graph, names = one_node_graph(op_type, inputs, attributes(
            op_type, {}, "bidirectional", layout=layout))
        node = next(n for n in graph.nodes if n.name == "cell")
        arrays = [inputs.get(name) for name in NAMES[op_type]]
        got = get_engine(engine).bind(node)(arrays)
        want = get_engine("numpy").bind(node)(arrays)
        for g, w in zip(got, want):
            assert_close(g, w)


# -- what the engine declines ------------------------------------------------------------

def _node(op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any],
          constants: tuple[str, ...] = WEIGHTS) -> Any:
    graph, _ = one_node_graph(op_type, inputs, attrs, constants)
    return next(n for n in graph.nodes if n.name == "cell")


def test_the_cells_the_engine_declines():
    engine = get_engine("fused")
    lstm = make_inputs("LSTM", "forward")
    assert not engine.supports(_node("LSTM", lstm, attributes(
        "LSTM", {}, "forward", activations=["Sigmoid", "Tanh", "Relu"])))
    assert not engine.supports(_node("LSTM", lstm, attributes("LSTM", {}, "forward"),
                                     constants=("R", "B")))  # W fed at run time
    assert not engine.supports(_node("GRU", make_inputs("GRU", "forward"), attributes(
        "GRU", {}, "forward", activations=["HardSigmoid", "Tanh"])))
    assert not engine.supports(_node("RNN", make_inputs("RNN", "forward"), attributes(
        "RNN", {}, "forward", activations=["Sigmoid"])))
    as_float64 = {n: a.astype(np.float64) if a.dtype == np.float32 else a
                  for n, a in lstm.items()}
    assert not engine.supports(_node("LSTM", as_float64, attributes("LSTM", {}, "forward")))
    hidden = 1 + int((recurrent.MAX_STEP_MACS // 4) ** 0.5)  # one step's product too large
    large = make_inputs("LSTM", "forward", seq=1, batch=1, hidden=hidden, bias=False,
                        initial=False)
    assert not engine.supports(_node("LSTM", large, attributes("LSTM", {}, "forward", hidden)))


@pytest.mark.parametrize("case", [
    ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]}),
    ("GRU", {"activations": ["HardSigmoid", "Tanh"], "linear_before_reset": 1}),
    ("RNN", {"activations": ["Sigmoid"]}),
], ids=["lstm", "gru", "rnn"])
def test_declined_cells_run_on_another_engine(case):
    op_type, cell_attrs = case
    inputs = make_inputs(op_type, "forward")
    graph, _ = one_node_graph(op_type, inputs, attributes(op_type, cell_attrs, "forward"))
    engines = ge.compile(graph, opt_level=0).report["engines_by_op"]
    assert op_type not in engines.get("fused", {})
    other = next(name for name, ops in engines.items() if op_type in ops)
    check(op_type, inputs, attributes(op_type, cell_attrs, "forward"), engine=other)


def test_lstm_states_written_over_the_initial_states_they_start_from():
    """The writer updates a forward LSTM's states in its Y_h and Y_c buffers, unless an
    initial state lies there (a memory plan may give a dying input's bytes to an output):
    with Y_h written over initial_c and Y_c over initial_h it gives what fresh buffers
    get."""
    inputs = make_inputs("LSTM", "forward", seq=4, batch=2, hidden=6)
    node = _node("LSTM", inputs, attributes("LSTM", {}, "forward", hidden=6))
    bound = get_engine("fused").bind_node(node)
    assert bound.writer is not None
    arrays = [inputs.get(name) for name in NAMES["LSTM"]]
    want = get_engine("numpy").bind(node)(arrays)
    fresh = [np.empty_like(w) for w in want]
    bound.writer(arrays, fresh)
    h0, c0 = inputs["initial_h"].copy(), inputs["initial_c"].copy()
    swapped = [np.empty_like(want[0]), c0, h0]  # Y_h over initial_c, Y_c over initial_h
    bound.writer([*arrays[:5], h0, c0, *arrays[7:]], swapped)
    for got_fresh, got_swapped, expected in zip(fresh, swapped, want):
        assert_close(got_fresh, expected, accumulate=True)
        np.testing.assert_array_equal(got_swapped, got_fresh)


@pytest.mark.parametrize("refused", [False, True])
def test_the_input_projection_runs_on_onednn_or_numpy(refused, monkeypatch):
    """X @ W^T through a oneDNN product (weights packed once, a primitive per row count)
    where oneDNN takes it, through NumPy where it refuses and for one row of small
    weights: the same numbers."""
    from ge.engines.onednn import _lib

    if refused:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ge.errors.UnsupportedOpError("refused (test)")

        monkeypatch.setattr(_lib, "matmul", refuse)
    weights = RNG.standard_normal((24, 40)).astype(np.float32)
    project = recurrent._Projection(weights)
    assert project._lib is _lib  # oneDNN comes with GE's torch dependency
    for count in (7, 1, 7, 0):
        rows = RNG.standard_normal((count, 24)).astype(np.float32)
        assert_close(project(rows), rows.astype(np.float64) @ weights, accumulate=True)
    made = [p for p in project._primitives.values() if p is not None]
    # 7 rows; one row of 24 x 40 weights goes to NumPy's dot; 0 rows never asks oneDNN
    assert len(made) == (0 if refused else 1)
    monkeypatch.setattr(recurrent, "SMALL_PROJECTION_MACS", 0)
    rows = RNG.standard_normal((1, 24)).astype(np.float32)
    assert_close(project(rows), rows.astype(np.float64) @ weights, accumulate=True)
    made = [p for p in project._primitives.values() if p is not None]
    assert len(made) == (0 if refused else 2)  # now one row asks oneDNN too


# -- both directions at once -------------------------------------------------------------

@pytest.fixture(params=["openmp", "worker thread"])
def directions_at_once(request, monkeypatch):
    """Every bidirectional node's directions run at once: on the OpenMP pool oneDNN runs
    on, or (as without oneDNN) on the process's worker thread."""
    monkeypatch.setattr(recurrent, "PARALLEL_DIRECTION_MACS", 0)
    monkeypatch.setattr(recurrent, "_CORES", 2)
    if request.param == "worker thread":
        monkeypatch.setattr(recurrent, "_OPENMP", [None])
    else:
        assert recurrent._openmp() is not None, "oneDNN's OpenMP runtime is not reachable"
    return request.param


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("layout", [0, 1])
def test_both_directions_at_once_compute_what_one_after_the_other_does(
        cell, layout, directions_at_once, monkeypatch):
    op_type, cell_attrs = cell
    inputs = make_inputs(op_type, "bidirectional", seq=9, batch=2, layout=layout,
                         lengths=[9, 4])
    attrs = attributes(op_type, cell_attrs, "bidirectional", layout=layout)
    graph, names = one_node_graph(op_type, inputs, attrs)
    feeds = {n: a for n, a in inputs.items() if n not in WEIGHTS}
    pairs: list[int] = []
    both = recurrent._both
    monkeypatch.setattr(recurrent, "_both", lambda *args: (pairs.append(1), both(*args)))
    check(op_type, inputs, attrs)  # against NumPy and onnxruntime
    at_once = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    assert pairs, "the directions ran one after the other"
    monkeypatch.setattr(recurrent, "PARALLEL_DIRECTION_MACS", 1 << 62)
    count = len(pairs)
    in_turn = ge.Session(ge.compile(graph, opt_level=0)).run(feeds)
    assert len(pairs) == count
    for name in names:
        np.testing.assert_array_equal(at_once[name], in_turn[name], err_msg=name)


def test_an_error_in_either_direction_reaches_the_caller_after_both_ran(directions_at_once):
    ran: list[str] = []

    def loop(tag: str) -> None:
        ran.append(tag)
        if tag == "bad":
            raise ValueError("a bad direction")

    for first, second in (("bad", "good"), ("good", "bad")):
        ran.clear()
        with pytest.raises(ValueError, match="a bad direction"):
            recurrent._both(loop, (first,), (second,))
        assert sorted(ran) == ["bad", "good"]


def test_a_run_of_one_thread_runs_its_directions_one_after_the_other(monkeypatch):
    monkeypatch.setattr(recurrent, "PARALLEL_DIRECTION_MACS", 0)
    monkeypatch.setattr(recurrent, "_CORES", 2)
    inputs = make_inputs("LSTM", "bidirectional")
    graph, names = one_node_graph("LSTM", inputs, attributes("LSTM", {}, "bidirectional"))
    feeds = {n: a for n, a in inputs.items() if n not in WEIGHTS}
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)
    pairs: list[int] = []
    both = recurrent._both
    monkeypatch.setattr(recurrent, "_both", lambda *args: (pairs.append(1), both(*args)))
    for threads, expected in ((1, 0), (2, 1)):
        got = ge.Session(ge.compile(graph, opt_level=0), threads=threads).run(feeds)
        assert len(pairs) == expected, f"{threads} thread(s)"
        for name in names:
            assert_close(got[name], want[name], accumulate=True, what=name)
