"""Dynamically quantized recurrent layers: onnxruntime's ``DynamicQuantizeLSTM``.

The op is an LSTM (ONNX's gates i o f c, activations, clip, peepholes and
``sequence_lens``) whose two matrix products are integer products, as
onnxruntime's CPU kernel computes them. The weights come quantized: ``W``
``[directions, input, 4 * hidden]`` and ``R`` ``[directions, hidden, 4 * hidden]``
(int8 or uint8, transposed from ONNX's layout), each direction with one scale or
one scale per column (``[directions]`` or ``[directions, 4 * hidden]``) and one
zero point (onnxruntime reads the first of a per-column zero point and requires
them equal; int8 ones zero).

Activations are quantized on the fly as ``DynamicQuantizeLinear`` does: uint8 over
``[min(a, 0), max(a, 0)]``, scale ``(max - min) / 255``, zero point and values
rounded half to even. Per direction:

* the inputs of the steps that run (``max(sequence_lens)`` of them, each batch
  entry's own steps reversed for the reverse direction) are quantized as one
  tensor; their product with ``W`` is ``(x_q - x_zp) @ (W - W_zp)`` exactly, times
  the float32 ``x_scale * W_scale``;
* at every step the hidden state is quantized in groups of batch rows and added
  the same way, times ``h_scale * R_scale``. onnxruntime splits the batch over its
  threads when the batch has more than 4 rows, or 2 or more and ``hidden <= 256``:
  each group of ``ceil(batch / parallelism)`` rows then has its own scale;
  otherwise the whole batch shares one. ``parallelism`` is onnxruntime's degree of
  parallelism (its intra-op thread count), 0 for "at least one thread per row";
* the gates add ``Wb + Rb`` and run in float32. A batch entry past its length
  feeds zeros to the next step's product (onnxruntime's ``Y`` rows), has zero
  ``Y`` rows, and keeps its last ``Y_h`` and ``Y_c`` (zeros for length 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, is_static_dim, num_elements
from ge.ops.quantize import dynamic_quantize_linear_kernel
from ge.ops.registry import Attr, AttrType, Cost, InferenceContext, Input, register_op
from ge.ops.rnn import Activation, activations_per_direction, check_activations
from ge.ops.shape_utils import dims_equal

__all__ = ["rows_per_scale"]

_WEIGHT_TYPES = (DataType.DT_INT8, DataType.DT_UINT8)
_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
          "W_scale", "W_zero_point", "R_scale", "R_zero_point")


def rows_per_scale(batch: int, hidden: int, parallelism: int) -> int:
    """How many consecutive batch rows of the hidden state share one dynamic scale."""
    split = batch > 4 or (batch >= 2 and hidden <= 256)
    if not split:
        return max(batch, 1)
    if parallelism <= 0:
        return 1
    return -(-batch // parallelism)


class _QuantizedWeights:
    """One direction's quantized weight ``[inner, 4 * hidden]`` less its zero point, with
    its scale (one, or one per column)."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> None:
        self.centred = codes.astype(np.float64) - float(zero_point.reshape(-1)[0])
        self.scale = scale.astype(np.float32).reshape(-1)

    def product(self, a: np.ndarray) -> np.ndarray:
        """``a`` [rows, inner] quantized to uint8 as one tensor, times the weight: the
        exact integer product scaled to float32 [rows, 4 * hidden]."""
        if a.size == 0:
            return np.zeros((a.shape[0], self.centred.shape[1]), np.float32)
        codes, scale, zero = dynamic_quantize_linear_kernel(np.ascontiguousarray(a))
        centred = codes.astype(np.float64) - float(zero)
        exact = centred @ self.centred  # integers below 2**53: exact in float64
        return exact.astype(np.float32) * (scale * self.scale)


def _weights(codes: np.ndarray, scale: Optional[np.ndarray], zero: Optional[np.ndarray],
             direction: int) -> _QuantizedWeights:
    assert scale is not None and zero is not None
    return _QuantizedWeights(codes[direction], scale[direction], zero[direction])


def _state(initial: Optional[np.ndarray], direction: int, batch: int, hidden: int
           ) -> np.ndarray:
    if initial is None:
        return np.zeros((batch, hidden), np.float32)
    return initial[direction].astype(np.float32)


class _Cell:
    """One direction's gates: pre-activations in, new hidden and cell states out."""

    def __init__(self, bias: Optional[np.ndarray], peepholes: Optional[np.ndarray],
                 functions: list[Activation], attrs: dict[str, Any], hidden: int) -> None:
        self.hidden = hidden
        fused = np.zeros(4 * hidden, np.float32) if bias is None else \
            (bias[:4 * hidden] + bias[4 * hidden:]).astype(np.float32)
        self.bias = [fused[k * hidden:(k + 1) * hidden] for k in range(4)]  # i o f c
        self.peepholes = None if peepholes is None else \
            [peepholes[k * hidden:(k + 1) * hidden] for k in range(3)]  # i o f
        self.f, self.g, self.h = functions
        self.clip = attrs["clip"]
        self.input_forget = bool(attrs["input_forget"])

    def _gate(self, sums: np.ndarray, index: int, cell: Optional[np.ndarray]) -> np.ndarray:
        value = sums[:, index * self.hidden:(index + 1) * self.hidden]
        if self.peepholes is not None and cell is not None:
            value = value + self.peepholes[index] * cell
        value = value + self.bias[index]
        return value if self.clip is None else np.clip(value, -self.clip, self.clip)

    def __call__(self, sums: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = self.f(self._gate(sums, 0, cell))
        forget = 1 - i if self.input_forget else self.f(self._gate(sums, 2, cell))
        new_cell = forget * cell + i * self.g(self._gate(sums, 3, None))
        o = self.f(self._gate(sums, 1, new_cell))
        return o * self.h(new_cell), new_cell


def _step_order(steps: int, lengths: np.ndarray, reverse: bool) -> np.ndarray:
    """[steps, batch]: the input step each processing step reads (its own inverse)."""
    index = np.arange(steps)[:, None]
    order = np.broadcast_to(index, (steps, lengths.size))
    return np.where(index < lengths, lengths - 1 - index, index) if reverse else order


def _direction(x: np.ndarray, lengths: np.ndarray, reverse: bool,
               weights: tuple[_QuantizedWeights, _QuantizedWeights], cell: _Cell,
               states: tuple[np.ndarray, np.ndarray], rows: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run one direction: every hidden state [seq, batch, hidden], the last h and c."""
    seq, batch = x.shape[0], x.shape[1]
    order = _step_order(seq, lengths, reverse)
    steps = int(lengths.max(initial=0))
    ordered = np.take_along_axis(x, order[:, :, None], 0)[:steps]
    projected = weights[0].product(ordered.reshape(steps * batch, -1)).reshape(steps, batch, -1)
    h, c = states
    fed = h  # what the next step's product quantizes
    ys = np.zeros((seq, batch, cell.hidden), np.float32)
    for step in range(steps):
        recurrent = [weights[1].product(fed[start:start + rows])
                     for start in range(0, batch, rows)]
        new_h, new_c = cell(projected[step] + np.concatenate(recurrent), c)
        live = (step < lengths)[:, None]
        h, c = np.where(live, new_h, h), np.where(live, new_c, c)
        fed = ys[step] = np.where(live, new_h, 0)
    empty = (lengths == 0)[:, None]
    h, c = np.where(empty, 0, h), np.where(empty, 0, c)
    return np.take_along_axis(ys, order[:, :, None], 0), h, c


# -- inference and cost -----------------------------------------------------------------

def _hidden_size(ctx: InferenceContext) -> Dim:
    given, rows = ctx.attr("hidden_size"), ctx.shape(2)[1]
    if given is None:
        return rows
    if not dims_equal(rows, given):
        raise ctx.fail(f"R {list(ctx.shape(2))} does not match hidden_size={given}")
    return int(given)


def _check_parameters(ctx: InferenceContext, directions: int, hidden: Dim) -> None:
    for weights, scale, zero in ((1, 8, 9), (2, 10, 11)):
        ctx.require_dtypes(scale, (DataType.DT_FLOAT,))
        if ctx.dtype(zero) is not ctx.dtype(weights):
            raise ctx.fail_dtype(f"input {ctx.schema.input_name(zero)!r} must have the dtype "
                                 f"of {ctx.schema.input_name(weights)!r}")
        for index in (scale, zero):
            shape = ctx.shape(index)
            wide = is_static_dim(hidden) and len(shape) == 2 and \
                not dims_equal(shape[1], 4 * int(hidden))
            if len(shape) not in (1, 2) or not dims_equal(shape[0], directions) or wide:
                raise ctx.fail(f"input {ctx.schema.input_name(index)!r} {list(shape)} must be "
                               f"[{directions}] or [{directions}, 4 * hidden]")


def _infer(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, (DataType.DT_FLOAT,))
    for index in (0, 1, 2):
        ctx.require_rank(index, 3)
    ctx.require_dtypes(1, _WEIGHT_TYPES)
    ctx.require_dtypes(2, _WEIGHT_TYPES)
    for index in (3, 5, 6, 7):
        if ctx.has_input(index):
            ctx.require_dtypes(index, (DataType.DT_FLOAT,))
    if ctx.has_input(4):
        ctx.require_dtypes(4, (DataType.DT_INT32,))
    directions = 2 if ctx.attr("direction") == "bidirectional" else 1
    hidden = _hidden_size(ctx)
    x, w, r = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    columns = 4 * hidden if is_static_dim(hidden) else -1
    if not (dims_equal(w[0], directions) and dims_equal(w[1], x[2])
            and dims_equal(w[2], columns)):
        raise ctx.fail(f"W {list(w)} must be [{directions}, input {x[2]}, 4 * hidden]")
    if not (dims_equal(r[0], directions) and dims_equal(r[2], columns)):
        raise ctx.fail(f"R {list(r)} must be [{directions}, hidden, 4 * hidden]")
    _check_parameters(ctx, directions, hidden)
    seq, batch = x[0], x[1]
    state = TensorDesc((directions, batch, hidden), DataType.DT_FLOAT)
    return [TensorDesc((seq, directions, batch, hidden), DataType.DT_FLOAT), state, state]


def _cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    columns = num_elements(ctx.shape(1)[::2])  # directions * 4 * hidden
    inner = num_elements(ctx.shape(0)[2:]) + num_elements(ctx.shape(2)[1:2])
    steps = num_elements(ctx.shape(0)[:2])  # seq * batch
    flops = 2 * steps * columns * inner + 8 * steps * columns
    data = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(flops, data + sum(num_elements(d.shape) * d.dtype.itemsize for d in outputs))


# -- the op -----------------------------------------------------------------------------

@register_op(
    "DynamicQuantizeLSTM",
    inputs=[Input("X"), Input("W", doc="[directions, input, 4 * hidden], int8 or uint8"),
            Input("R", doc="[directions, hidden, 4 * hidden], as W"),
            Input("B", optional=True), Input("sequence_lens", optional=True),
            Input("initial_h", optional=True), Input("initial_c", optional=True),
            Input("P", optional=True, doc="peepholes, i o f"),
            Input("W_scale", doc="[directions] or [directions, 4 * hidden]"),
            Input("W_zero_point", doc="shaped as W_scale, W's dtype"),
            Input("R_scale", doc="as W_scale"), Input("R_zero_point", doc="as W_zero_point")],
    outputs=("Y", "Y_h", "Y_c"),
    attrs=[Attr("activation_alpha", AttrType.FLOATS, None,
                doc="alphas of the activations that take one, in order"),
           Attr("activation_beta", AttrType.FLOATS, None,
                doc="betas of the activations that take one, in order"),
           Attr("activations", AttrType.STRINGS, None, check=check_activations,
                doc="activation names, per direction (forward first)"),
           Attr("clip", AttrType.FLOAT, None, doc="bound the gates' inputs to [-clip, clip]"),
           Attr("direction", AttrType.STRING, "forward",
                choices=("forward", "reverse", "bidirectional")),
           Attr("hidden_size", AttrType.INT, None, doc="default: from R's shape"),
           Attr("input_forget", AttrType.INT, 0, doc="couple the input and forget gates"),
           Attr("parallelism", AttrType.INT, 0,
                doc="onnxruntime's thread count the hidden state's row groups follow; "
                    "0: one row per group")],
    infer=_infer, cost=_cost)
def dynamic_quantize_lstm_kernel(*inputs: Optional[np.ndarray], **attrs: Any
                                 ) -> tuple[np.ndarray, ...]:
    """onnxruntime's DynamicQuantizeLSTM: ONNX's LSTM whose input and recurrent products
    quantize X and each step's hidden state to uint8 (DynamicQuantizeLinear) and multiply
    them exactly with the quantized W and R, then scale to float32."""
    arrays = dict(zip(_NAMES, inputs))
    x, w, r = arrays["X"], arrays["W"], arrays["R"]
    assert x is not None and w is not None and r is not None
    x = x.astype(np.float32, copy=False)
    seq, batch, hidden = x.shape[0], x.shape[1], r.shape[1]
    directions = 2 if attrs["direction"] == "bidirectional" else 1
    given = arrays["sequence_lens"]
    lengths = np.full(batch, seq, np.int64) if given is None else \
        np.minimum(given.astype(np.int64), seq)
    functions = activations_per_direction("LSTM", attrs, directions)
    rows = rows_per_scale(batch, hidden, int(attrs["parallelism"]))
    results = []
    for d in range(directions):
        weights = (_weights(w, arrays["W_scale"], arrays["W_zero_point"], d),
                   _weights(r, arrays["R_scale"], arrays["R_zero_point"], d))
        bias, peepholes = arrays["B"], arrays["P"]
        cell = _Cell(None if bias is None else bias[d],
                     None if peepholes is None else peepholes[d].astype(np.float32),
                     functions[d], attrs, hidden)
        states = (_state(arrays["initial_h"], d, batch, hidden),
                  _state(arrays["initial_c"], d, batch, hidden))
        reverse = attrs["direction"] == "reverse" or d == 1
        results.append(_direction(x, lengths, reverse, weights, cell, states, rows))
    y = np.stack([result[0] for result in results], axis=1)
    last_h = np.stack([result[1] for result in results])
    last_c = np.stack([result[2] for result in results])
    return y.astype(np.float32), last_h.astype(np.float32), last_c.astype(np.float32)
