"""Recurrent layers: RNN, GRU and LSTM, with ONNX's inputs, attributes and outputs.

Every op takes ``X`` ``[seq, batch, input]`` (``[batch, seq, input]`` when
``layout`` is 1), weights ``W`` ``[directions, gates * hidden, input]`` and
recurrence weights ``R`` ``[directions, gates * hidden, hidden]`` with the gates
stacked in ONNX's order (GRU: z r h; LSTM: i o f c), optional biases ``B``
``[directions, 2 * gates * hidden]`` (the W biases, then the R biases), optional
``sequence_lens`` ``[batch]`` and initial states. Outputs are ``Y`` (every hidden
state, ``[seq, directions, batch, hidden]``) and the last hidden state ``Y_h``
(and, for LSTM, the last cell state ``Y_c``), ``[directions, batch, hidden]``;
layout 1 puts the batch first in all of them.

With ``sequence_lens``, a batch entry stops at its own length: its later ``Y``
rows are zero, its last states are those of its last valid step, and the
reverse direction starts from its own last valid element. The reference
kernels project the whole input sequence in one product and then loop over the
time steps only; half precision computes in float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, is_static_dim, num_elements
from ge.ops.registry import Attr, AttrType, Cost, InferenceContext, Input, register_op
from ge.ops.shape_utils import dims_equal

__all__ = ["ACTIVATIONS", "Activation", "activation_function", "activations_per_direction",
           "check_activations"]

_FLOATS = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_DOUBLE)
_DIRECTIONS = ("forward", "reverse", "bidirectional")

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.exp(-np.logaddexp(0, -x)).astype(x.dtype, copy=False)
    return result


# name (lower case) -> (default alpha, default beta, function of x, alpha, beta)
ACTIVATIONS: dict[str, tuple[Optional[float], Optional[float],
                             Callable[[np.ndarray, float, float], np.ndarray]]] = {
    "sigmoid": (None, None, lambda x, a, b: _sigmoid(x)),
    "tanh": (None, None, lambda x, a, b: np.tanh(x)),
    "relu": (None, None, lambda x, a, b: np.maximum(x, 0)),
    "affine": (1.0, 0.0, lambda x, a, b: a * x + b),
    "leakyrelu": (0.01, None, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (1.0, None, lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (1.0, 1.0, lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (0.2, 0.5, lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (1.0, None, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1))),
    "softsign": (None, None, lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (None, None, lambda x, a, b: np.logaddexp(0, x)),
}

_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                        "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def activation_function(name: str, alpha: Optional[float] = None,
                        beta: Optional[float] = None) -> Activation:
    """The activation called ``name`` (ONNX's RNN activation names, any case)."""
    default_alpha, default_beta, function = ACTIVATIONS[name.lower()]
    a = default_alpha if alpha is None else alpha
    b = default_beta if beta is None else beta

    def apply(x: np.ndarray) -> np.ndarray:
        return np.asarray(function(x, x.dtype.type(a or 0.0), x.dtype.type(b or 0.0)),
                          dtype=x.dtype)

    return apply


def activations_per_direction(op_type: str, attrs: dict[str, Any], directions: int
                              ) -> list[list[Activation]]:
    """One list of activation functions per direction; alphas and betas are consumed in
    order by the activations that take them."""
    per_direction = len(_DEFAULT_ACTIVATIONS[op_type])
    names = list(attrs.get("activations") or _DEFAULT_ACTIVATIONS[op_type] * directions)
    if len(names) == per_direction and directions == 2:
        names = names * 2
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    functions: list[Activation] = []
    for name in names:
        default_alpha, default_beta, _ = ACTIVATIONS[name.lower()]
        alpha = alphas.pop(0) if default_alpha is not None and alphas else None
        beta = betas.pop(0) if default_beta is not None and betas else None
        functions.append(activation_function(name, alpha, beta))
    return [functions[d * per_direction:(d + 1) * per_direction] for d in range(directions)]


def check_activations(names: Sequence[str]) -> Optional[str]:
    """Why the activation ``names`` are refused (an unknown name), or None."""
    unknown = [n for n in names if n.lower() not in ACTIVATIONS]
    return f"unknown activations {unknown}" if unknown else None


# -- shape inference --------------------------------------------------------------------

def _hidden_size(ctx: InferenceContext, gates: int) -> Dim:
    given = ctx.attr("hidden_size")
    recurrence = ctx.shape(2)
    if given is not None:
        if not dims_equal(recurrence[2], given):
            raise ctx.fail(f"R {list(recurrence)} does not match hidden_size={given}")
        return int(given)
    if is_static_dim(recurrence[2]):
        return recurrence[2]
    weights_rows = ctx.shape(1)[1]
    return weights_rows // gates if isinstance(weights_rows, int) and weights_rows >= 0 else -1


def _check_weights(ctx: InferenceContext, gates: int, directions: int, hidden: Dim) -> None:
    for index in (1, 2):
        shape = ctx.shape(index)
        if not dims_equal(shape[0], directions):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} {list(shape)} must have "
                           f"{directions} direction(s) first ({ctx.attr('direction')})")
        if is_static_dim(hidden) and not dims_equal(shape[1], gates * hidden):
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} {list(shape)} must have "
                           f"{gates} x hidden {hidden} = {gates * hidden} rows")
    if not dims_equal(ctx.shape(1)[2], ctx.shape(0)[2]):
        raise ctx.fail(f"W {list(ctx.shape(1))} does not match the input size of "
                       f"X {list(ctx.shape(0))}")


def _infer_recurrent(ctx: InferenceContext) -> Sequence[TensorDesc]:
    op_type = ctx.schema.op_type
    gates = _GATES[op_type]
    ctx.require_dtypes(0, _FLOATS)
    state_inputs = [i for i in range(ctx.num_inputs) if i != 4]
    dtype = ctx.require_same_dtype(*state_inputs)
    for index in (0, 1, 2):
        ctx.require_rank(index, 3)
    if ctx.has_input(4):
        ctx.require_dtypes(4, (DataType.DT_INT32, DataType.DT_INT64))
    directions = 2 if ctx.attr("direction") == "bidirectional" else 1
    hidden = _hidden_size(ctx, gates)
    _check_weights(ctx, gates, directions, hidden)
    x = ctx.shape(0)
    if ctx.attr("layout") == 0:
        seq, batch = x[0], x[1]
        shapes = [(seq, directions, batch, hidden), (directions, batch, hidden)]
    else:
        batch, seq = x[0], x[1]
        shapes = [(batch, seq, directions, hidden), (batch, directions, hidden)]
    count = 3 if op_type == "LSTM" else 2
    return [TensorDesc(shapes[0], dtype)] + [TensorDesc(shapes[1], dtype)] * (count - 1)


def _recurrent_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    gates = _GATES[ctx.schema.op_type]
    rows = num_elements(ctx.shape(1)[:2])  # directions * gates * hidden
    inner = num_elements(ctx.shape(0)[2:]) + num_elements(ctx.shape(2)[2:])
    steps = num_elements(ctx.shape(0)[:2])  # seq * batch
    flops = 2 * steps * rows * inner + 4 * steps * rows // max(gates, 1)
    data = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, data + sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs))


def _common_attrs() -> list[Attr]:
    return [
        Attr("activation_alpha", AttrType.FLOATS, None,
             doc="alphas of the activations that take one, in order"),
        Attr("activation_beta", AttrType.FLOATS, None,
             doc="betas of the activations that take one, in order"),
        Attr("activations", AttrType.STRINGS, None, check=check_activations,
             doc="activation names, per direction (forward first)"),
        Attr("clip", AttrType.FLOAT, None,
             doc="bound the activations' inputs to [-clip, clip]"),
        Attr("direction", AttrType.STRING, "forward", choices=_DIRECTIONS),
        Attr("hidden_size", AttrType.INT, None, doc="default: from R's shape"),
        Attr("layout", AttrType.INT, 0, choices=(0, 1),
             doc="0: X is [seq, batch, input]; 1: [batch, seq, input]"),
    ]


def _common_inputs() -> list[Input]:
    return [Input("X"), Input("W"), Input("R"), Input("B", optional=True),
            Input("sequence_lens", optional=True), Input("initial_h", optional=True)]


# -- the time loop ----------------------------------------------------------------------

class _Sequence:
    """The input of one direction in processing order, its step mask and its undo map."""

    def __init__(self, x: np.ndarray, lengths: Optional[np.ndarray], reverse: bool) -> None:
        seq, batch = x.shape[0], x.shape[1]
        steps = np.arange(seq)[:, None]
        if lengths is None:
            self.mask: Optional[np.ndarray] = None
            self.order: Optional[np.ndarray] = None
            self.x = x[::-1] if reverse else x
            self.flip = reverse
            return
        lengths = np.minimum(lengths.astype(np.int64), seq)[None, :]
        self.mask = np.broadcast_to(steps < lengths, (seq, batch))
        self.flip = False
        self.order = np.where(self.mask, lengths - 1 - steps, steps) if reverse else None
        self.x = x if self.order is None else np.take_along_axis(x, self.order[:, :, None], 0)

    def restore(self, y: np.ndarray) -> np.ndarray:
        """Outputs in processing order back in input order."""
        if self.flip:
            return y[::-1]
        if self.order is not None:
            return np.take_along_axis(y, self.order[:, :, None], 0)
        return y


Cell = Callable[[np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _scan(projected: np.ndarray, sequence: _Sequence, states: tuple[np.ndarray, ...],
          cell: Cell) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run ``cell`` over the time steps; return every hidden state and the last states."""
    seq = projected.shape[0]
    outputs = np.zeros((seq,) + states[0].shape, states[0].dtype)
    for step in range(seq):
        new_states = cell(projected[step], states)
        if sequence.mask is not None:
            keep = sequence.mask[step][:, None]
            new_states = tuple(np.where(keep, new, old) for new, old in zip(new_states, states))
            outputs[step] = np.where(keep, new_states[0], 0)
        else:
            outputs[step] = new_states[0]
        states = new_states
    return sequence.restore(outputs), states


def _clipper(clip: Optional[float]) -> Activation:
    if clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)


class _Weights:
    """One direction's weights in the compute dtype."""

    def __init__(self, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray], gates: int,
                 hidden: int, compute: np.dtype) -> None:
        self.w = w.astype(compute, copy=False)
        self.r = r.astype(compute, copy=False)
        bias = np.zeros(2 * gates * hidden, compute) if b is None else b.astype(compute)
        self.wb, self.rb = bias[:gates * hidden], bias[gates * hidden:]

    def project(self, x: np.ndarray) -> np.ndarray:
        """x @ W^T + Wb for every step at once: [seq, batch, gates * hidden]."""
        projected: np.ndarray = np.matmul(x, self.w.T) + self.wb
        return projected


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _prepare(x: np.ndarray, states: Sequence[Optional[np.ndarray]], layout: int,
             compute: np.dtype) -> tuple[np.ndarray, list[Optional[np.ndarray]]]:
    """X as [seq, batch, input] and states as [directions, batch, hidden]."""
    if layout == 1:
        x = x.swapaxes(0, 1)
        states = [None if s is None else s.swapaxes(0, 1) for s in states]
    return (x.astype(compute, copy=False),
            [None if s is None else s.astype(compute, copy=False) for s in states])


def _finish(ys: list[np.ndarray], finals: list[tuple[np.ndarray, ...]], layout: int,
            dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """Stack the directions into Y, Y_h (and Y_c) in the requested layout and dtype."""
    y = np.stack(ys, axis=1)  # [seq, directions, batch, hidden]
    last = [np.stack([f[i] for f in finals]) for i in range(len(finals[0]))]
    if layout == 1:
        y = y.transpose(2, 0, 1, 3)
        last = [s.swapaxes(0, 1) for s in last]
    return tuple(np.ascontiguousarray(a).astype(dtype, copy=False) for a in [y] + last)


def _run(op_type: str, arrays: dict[str, Optional[np.ndarray]], attrs: dict[str, Any],
         make_cell: Callable[[_Weights, Optional[np.ndarray], list[Activation], Activation], Cell]
         ) -> tuple[np.ndarray, ...]:
    """The shared driver of RNN, GRU and LSTM."""
    x_in, w, r = arrays["X"], arrays["W"], arrays["R"]
    assert x_in is not None and w is not None and r is not None
    gates, hidden = _GATES[op_type], r.shape[2]
    compute = _compute_dtype(x_in.dtype)
    directions = 2 if attrs["direction"] == "bidirectional" else 1
    state_names = ["initial_h", "initial_c"] if op_type == "LSTM" else ["initial_h"]
    x, initial = _prepare(x_in, [arrays.get(n) for n in state_names], attrs["layout"], compute)
    batch = x.shape[1]
    functions = activations_per_direction(op_type, attrs, directions)
    clip = _clipper(attrs["clip"])
    ys, finals = [], []
    for d in range(directions):
        reverse = attrs["direction"] == "reverse" or d == 1
        sequence = _Sequence(x, arrays["sequence_lens"], reverse)
        bias = arrays["B"]
        weights = _Weights(w[d], r[d], None if bias is None else bias[d], gates, hidden, compute)
        peephole = arrays.get("P")
        cell = make_cell(weights, None if peephole is None else peephole[d].astype(compute),
                         functions[d], clip)
        states = tuple(np.zeros((batch, hidden), compute) if s is None else s[d]
                       for s in initial)
        y, last = _scan(weights.project(sequence.x), sequence, states, cell)
        ys.append(y)
        finals.append(last)
    return _finish(ys, finals, attrs["layout"], x_in.dtype)


# -- the cells --------------------------------------------------------------------------

def _rnn_cell(weights: _Weights, peephole: Optional[np.ndarray], functions: list[Activation],
              clip: Activation) -> Cell:
    f = functions[0]

    def cell(projected: np.ndarray, states: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        return (f(clip(projected + states[0] @ weights.r.T + weights.rb)),)

    return cell


def _gru_cell(linear_before_reset: int) -> Callable[..., Cell]:
    def make(weights: _Weights, peephole: Optional[np.ndarray], functions: list[Activation],
             clip: Activation) -> Cell:
        f, g = functions
        hidden = weights.r.shape[1]
        r_gates, r_candidate = weights.r[:2 * hidden].T, weights.r[2 * hidden:].T
        rb_gates, rb_candidate = weights.rb[:2 * hidden], weights.rb[2 * hidden:]

        def cell(projected: np.ndarray, states: tuple[np.ndarray, ...]) -> tuple[np.ndarray]:
            h = states[0]
            zr = f(clip(projected[:, :2 * hidden] + h @ r_gates + rb_gates))
            z, reset = zr[:, :hidden], zr[:, hidden:]
            if linear_before_reset:
                recurrent = reset * (h @ r_candidate + rb_candidate)
            else:
                recurrent = (reset * h) @ r_candidate + rb_candidate
            candidate = g(clip(projected[:, 2 * hidden:] + recurrent))
            return ((1 - z) * candidate + z * h,)

        return cell

    return make


def _lstm_cell(input_forget: int) -> Callable[..., Cell]:
    def make(weights: _Weights, peephole: Optional[np.ndarray], functions: list[Activation],
             clip: Activation) -> Cell:
        f, g, h_act = functions
        hidden = weights.r.shape[1]
        recurrence, bias = weights.r.T, weights.rb
        p_i, p_o, p_f = (np.zeros(hidden, recurrence.dtype),) * 3 if peephole is None \
            else (peephole[:hidden], peephole[hidden:2 * hidden], peephole[2 * hidden:])

        def cell(projected: np.ndarray, states: tuple[np.ndarray, ...]
                 ) -> tuple[np.ndarray, np.ndarray]:
            h, c = states
            gates = projected + h @ recurrence + bias
            i = f(clip(gates[:, :hidden] + p_i * c))
            forget = 1 - i if input_forget else f(clip(gates[:, 2 * hidden:3 * hidden] + p_f * c))
            c_new = forget * c + i * g(clip(gates[:, 3 * hidden:]))
            o = f(clip(gates[:, hidden:2 * hidden] + p_o * c_new))
            return o * h_act(c_new), c_new

        return cell

    return make


# -- the ops ----------------------------------------------------------------------------

def _arrays(names: Sequence[str], values: Sequence[Optional[np.ndarray]]
            ) -> dict[str, Optional[np.ndarray]]:
    arrays = dict.fromkeys(names)
    arrays.update(zip(names, values))
    return arrays


_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


@register_op("RNN", inputs=_common_inputs(), outputs=("Y", "Y_h"), attrs=_common_attrs(),
             infer=_infer_recurrent, cost=_recurrent_cost)
def rnn_kernel(*inputs: Optional[np.ndarray], **attrs: Any) -> tuple[np.ndarray, ...]:
    """ONNX RNN: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), f = Tanh by default."""
    return _run("RNN", _arrays(_NAMES, inputs), attrs, _rnn_cell)


@register_op("GRU", inputs=_common_inputs(), outputs=("Y", "Y_h"),
             attrs=_common_attrs() + [Attr("linear_before_reset", AttrType.INT, 0,
                                           doc="apply R_h (and Rb_h) before the reset gate")],
             infer=_infer_recurrent, cost=_recurrent_cost)
def gru_kernel(*inputs: Optional[np.ndarray], **attrs: Any) -> tuple[np.ndarray, ...]:
    """ONNX GRU: update z and reset r gates (f = Sigmoid), candidate h (g = Tanh),
    H_t = (1 - z) * h + z * H_{t-1}; ``linear_before_reset`` applies R_h before r."""
    make = _gru_cell(attrs["linear_before_reset"])
    return _run("GRU", _arrays(_NAMES, inputs), attrs, make)


@register_op("LSTM",
             inputs=_common_inputs() + [Input("initial_c", optional=True),
                                        Input("P", optional=True, doc="peepholes, i o f")],
             outputs=("Y", "Y_h", "Y_c"),
             attrs=_common_attrs() + [Attr("input_forget", AttrType.INT, 0,
                                           doc="couple the input and forget gates")],
             infer=_infer_recurrent, cost=_recurrent_cost)
def lstm_kernel(*inputs: Optional[np.ndarray], **attrs: Any) -> tuple[np.ndarray, ...]:
    """ONNX LSTM: gates i, o, f (f = Sigmoid, with peepholes P), cell candidate g = Tanh,
    C_t = f * C_{t-1} + i * g, H_t = o * h(C_t), h = Tanh."""
    return _run("LSTM", _arrays(_NAMES, inputs), attrs, _lstm_cell(attrs["input_forget"]))
