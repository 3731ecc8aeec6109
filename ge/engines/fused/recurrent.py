"""Recurrences compiled by numba: ONNX's ``LSTM``, ``GRU`` and ``RNN``, a whole sequence in
one compiled call per direction.

A run projects the input of every step and direction at once, ``X @ W^T``, in one matrix
product: oneDNN's, with ``W^T`` packed once for its kernel, where the library is present
(2-5x NumPy's BLAS on the sizes recurrent models have: 81 x 512 by 512 x 2048, 0.34
against 0.95 ms), else NumPy's, which also takes one row of small weights
(``SMALL_PROJECTION_MACS``: a model that runs one step a call). A compiled loop then
walks the time steps: each adds the biases and the recurrent product ``H @ R^T``
(explicit loops over ``R^T``, laid out once at bind time, whose innermost loop runs
along contiguous memory so that LLVM vectorizes it) and applies the gates. Sigmoid and
tanh are computed inside the loop from an ``expm1`` of our own, a Cody-Waite reduction
and a degree-7 Taylor polynomial, in loops LLVM vectorizes (within 2.5 ulp of the exact
values for |x| <= 87, measured; below -87 the sigmoid gives 1.6e-38): libm's scalar
calls, which numba would make, are not vectorized and cost more than the recurrent
product. ``Y``, ``Y_h`` and ``Y_c`` are written straight into the arrays the run hands
over, in either layout.

A step past a batch entry's ``sequence_lens`` leaves its states as they were and
writes zeros into its ``Y`` row of that time; the reverse direction starts from the
entry's last valid step (the reference kernels' semantics, ``ge/ops/rnn.py``).

The loops are the plain Python functions below, compiled serially (numba's threads
take longer to wake than one step takes) and without fastmath, from a module written to
the kernel cache directory under the hash of its source as the generated loops are
(``kernels``): numba's disk cache keeps the machine code next to it.

The two directions of a bidirectional node are independent: where each has
``PARALLEL_DIRECTION_MACS`` multiply-adds of recurrent products or more, and the run may
use two threads or more, they run at once, one per thread (the compiled loops release
the GIL). The threads are those of the OpenMP pool oneDNN runs on, where it is loaded:
after a product its idle threads spin for milliseconds, so a thread of our own would
share a core with one of them, while a parallel region of two hands the second
direction to the spinning thread at once; without oneDNN, a worker thread of the
process. Measured on a 2-core machine, a CRNN's bidirectional LSTM (81 steps, hidden
256, its input projection included) takes 2.3 ms against 3.4 ms one direction after
the other.

Taken, and nothing else: float32; constant ``W``, ``R``, ``B`` and ``P``; ``X``,
``sequence_lens`` and the initial states at run time or constant; every direction
and layout; ``clip``; LSTM peepholes and ``input_forget``; GRU with either
``linear_before_reset``; the default activations only (LSTM Sigmoid/Tanh/Tanh, GRU
Sigmoid/Tanh, RNN Tanh or Relu per direction); at most ``MAX_STEP_MACS`` multiply-adds
in one step's recurrent product (with the batch known when compiling, else one).
"""

from __future__ import annotations

import ctypes
import inspect
import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.fused import kernels
from ge.errors import GEError
from ge.ir import DataType, Node
from ge.ops.registry import get_schema
from ge.runtime.threads import current_limit

__all__ = ["OP_TYPES", "MAX_STEP_MACS", "MAX_STEP_MACS_BESIDE_ONEDNN", "refusal",
           "RecurrentKernel", "bind_recurrent", "loop_source", "compiled_loop"]

OP_TYPES = frozenset({"LSTM", "GRU", "RNN"})
#: the most multiply-adds one step's recurrent product (batch x gates x hidden^2) may
#: have here. The loops make about 20 per ns on one core; measured against the torch
#: engine (seq 20-50): LSTM batch 1 hidden 256 (2^18) 0.43 ms here, 0.72 there; batch 2
#: hidden 256 0.67 against 0.59; batch 8 hidden 128 1.6 against 0.7 (oneDNN's batched
#: products); GRU batch 4 hidden 128 0.67 against 1.19
MAX_STEP_MACS = 1 << 18
#: the most for a node of one direction (LSTM or GRU) where oneDNN's recurrent primitive
#: can take it: oneDNN runs each step's product on every thread, and wins from about
#: here (seq 100, batch 1, measured: LSTM hidden 160 (102K) 0.68 ms there against 0.81
#: here, GRU hidden 192 0.87 against 0.92, GRU hidden 160 (77K) 0.80 against 0.66). Two
#: directions keep ``MAX_STEP_MACS``: the loops run them at once, oneDNN one after the
#: other (hidden 256: 2.9 ms here against 3.7)
MAX_STEP_MACS_BESIDE_ONEDNN = 3 << 15
#: a bidirectional node whose directions each have this many multiply-adds of recurrent
#: products (steps x batch x gates x hidden^2) or more runs them on two threads at once:
#: handing a direction to another thread and back costs tens of microseconds, a
#: direction of this size about 0.1 ms
PARALLEL_DIRECTION_MACS = 1 << 21

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}
_RNN_ACTIVATIONS = ("tanh", "relu")
#: input indices
_X, _W, _R, _B, _LENS, _H0, _C0, _P = range(8)

# -- the compiled loops, as plain Python ---------------------------------------------------

_LOG2E = np.float32(1.4426950408889634)
#: ln 2 in two parts: n * _LN2_HI is exact for the n a float32 argument gives
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.4286068203094173e-06)
#: arguments below this give an exponential under float32's normal range
_EXP_FLOOR = np.float32(-87.0)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_HALF = np.float32(0.5)
_ZERO = np.float32(0.0)
_EXPONENT_BIAS = np.float32(127.0)
_MANTISSA_SCALE = np.float32(8388608.0)  # 2^23: shifts an exponent into place
_TAYLOR = tuple(np.float32(1.0 / f) for f in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))
_T2, _T3, _T4, _T5, _T6, _T7 = _TAYLOR


def _expm1_parts(values: np.ndarray, factor: np.float32, fraction: np.ndarray,
                 bits: np.ndarray) -> None:
    """For each x = -factor * |value|: expm1(x) = 2^n * (fraction + 1) - 1, with
    ``fraction`` = expm1(r), |r| <= ln 2 / 2, and the float32 bits of 2^n in ``bits``."""
    for j in range(values.shape[0]):
        x = -factor * abs(values[j])
        if x < _EXP_FLOOR:
            x = _EXP_FLOOR
        n = np.floor(x * _LOG2E + _HALF)
        r = (x - n * _LN2_HI) - n * _LN2_LO
        fraction[j] = r + r * r * (_T2 + r * (_T3 + r * (_T4 + r * (_T5 + r * (_T6 + r * _T7)))))
        bits[j] = np.int32((n + _EXPONENT_BIAS) * _MANTISSA_SCALE)


def _sigmoid(values: np.ndarray, fraction: np.ndarray, bits: np.ndarray) -> None:
    """values = 1 / (1 + exp(-values)), in place, from e = exp(-|x|)."""
    _expm1_parts(values, _ONE, fraction, bits)
    scale = bits.view(np.float32)
    for j in range(values.shape[0]):
        e = scale[j] * (fraction[j] + _ONE)
        s = _ONE / (_ONE + e)
        x = values[j]
        values[j] = s if x >= _ZERO else e * s


def _tanh(values: np.ndarray, fraction: np.ndarray, bits: np.ndarray) -> None:
    """values = tanh(values), in place, as -m / (2 + m) with m = expm1(-2|x|)."""
    _expm1_parts(values, _TWO, fraction, bits)
    scale = bits.view(np.float32)
    for j in range(values.shape[0]):
        s = scale[j]
        m = s * fraction[j] + (s - _ONE)
        t = (_ZERO - m) / (_TWO + m)
        x = values[j]
        values[j] = t if x >= _ZERO else -t


def _relu(values: np.ndarray) -> None:
    """values = max(values, 0), in place (NaN stays NaN)."""
    for j in range(values.shape[0]):
        if values[j] < _ZERO:
            values[j] = _ZERO


def _clip(values: np.ndarray, bound: np.float32) -> None:
    """values clamped to [-bound, bound], in place (NaN stays NaN)."""
    for j in range(values.shape[0]):
        x = values[j]
        if x > bound:
            values[j] = bound
        elif x < -bound:
            values[j] = -bound


def _accumulate(states: np.ndarray, transposed: np.ndarray, sums: np.ndarray) -> None:
    """sums[b] += states[b] @ transposed for every batch row b: eight rows of
    ``transposed`` at a time, each read once for two batch rows (a sum is loaded and
    stored once per eight products). Written out in one function: calling a helper per
    block of rows measured 15-25 % slower."""
    batch, hidden = states.shape
    width = transposed.shape[1]
    k = 0
    while k + 8 <= hidden:
        r0, r1, r2, r3 = transposed[k], transposed[k + 1], transposed[k + 2], transposed[k + 3]
        r4, r5, r6, r7 = transposed[k + 4], transposed[k + 5], transposed[k + 6], \
            transposed[k + 7]
        b = 0
        while b + 2 <= batch:
            h, g = states[b, k:k + 8], states[b + 1, k:k + 8]
            h0, h1, h2, h3, h4, h5, h6, h7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
            g0, g1, g2, g3, g4, g5, g6, g7 = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
            first, second = sums[b], sums[b + 1]
            for j in range(width):
                a0, a1, a2, a3 = r0[j], r1[j], r2[j], r3[j]
                a4, a5, a6, a7 = r4[j], r5[j], r6[j], r7[j]
                first[j] += ((h0 * a0 + h1 * a1) + (h2 * a2 + h3 * a3)) \
                    + ((h4 * a4 + h5 * a5) + (h6 * a6 + h7 * a7))
                second[j] += ((g0 * a0 + g1 * a1) + (g2 * a2 + g3 * a3)) \
                    + ((g4 * a4 + g5 * a5) + (g6 * a6 + g7 * a7))
            b += 2
        if b < batch:
            h = states[b, k:k + 8]
            h0, h1, h2, h3, h4, h5, h6, h7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
            row = sums[b]
            for j in range(width):
                row[j] += ((h0 * r0[j] + h1 * r1[j]) + (h2 * r2[j] + h3 * r3[j])) \
                    + ((h4 * r4[j] + h5 * r5[j]) + (h6 * r6[j] + h7 * r7[j]))
        k += 8
    while k < hidden:
        r = transposed[k]
        for b in range(batch):
            hk = states[b, k]
            row = sums[b]
            for j in range(width):
                row[j] += hk * r[j]
        k += 1


def _start_step(projection: np.ndarray, geometry: np.ndarray, lengths: np.ndarray,
                step: int, reverse: bool, bias: np.ndarray, first: int, sums: np.ndarray
                ) -> None:
    """sums[b] = the projected input of each batch entry's time at ``step`` plus ``bias``,
    from column ``first`` of the direction's gates on (entries past their length take
    their last step: their results are not used)."""
    column, time_stride, batch_stride = geometry[0] + first, geometry[1], geometry[2]
    width = sums.shape[1]
    added = bias[first:first + width]
    for b in range(sums.shape[0]):
        t = _time_of(step, lengths[b], reverse)
        row = projection[t * time_stride + b * batch_stride, column:column + width]
        out = sums[b]
        for j in range(width):
            out[j] = row[j] + added[j]


def _time_of(step: int, length: int, reverse: bool) -> int:
    """The time index a batch entry of ``length`` steps processes at ``step``."""
    if step >= length:
        return max(length - 1, 0)
    return length - 1 - step if reverse else step


def _emit(y: np.ndarray, geometry: np.ndarray, step: int, length: int, reverse: bool,
          b: int, state: np.ndarray) -> None:
    """Write batch entry ``b``'s hidden state of ``step`` into Y (zeros past its length,
    at the step's own time)."""
    offset, time_stride, batch_stride = geometry[3], geometry[4], geometry[5]
    if step >= length:
        row = y[offset + step * time_stride + b * batch_stride]
        for j in range(row.shape[0]):
            row[j] = _ZERO
        return
    t = length - 1 - step if reverse else step
    row = y[offset + t * time_stride + b * batch_stride]
    for j in range(row.shape[0]):
        row[j] = state[j]


def lstm_loop(projection: np.ndarray, geometry: np.ndarray, lengths: np.ndarray,
              reverse: bool, bias: np.ndarray, transposed: np.ndarray, peephole: np.ndarray,
              clip: np.float32, input_forget: bool, h: np.ndarray, c: np.ndarray,
              y: np.ndarray) -> None:
    """One direction of an LSTM over Y's time steps; ``h`` and ``c`` hold the initial
    states and are left holding the last (ONNX's gate order i o f c; ``clip`` inf: none)."""
    batch, hidden = h.shape
    sums = np.empty((batch, 4 * hidden), np.float32)
    fraction = np.empty(hidden, np.float32)
    bits = np.empty(hidden, np.int32)
    squashed = np.empty(hidden, np.float32)
    clipping = clip < np.inf
    p_i, p_o, p_f = peephole[:hidden], peephole[hidden:2 * hidden], peephole[2 * hidden:]
    for step in range(geometry[6]):
        _start_step(projection, geometry, lengths, step, reverse, bias, 0, sums)
        _accumulate(h, transposed, sums)
        for b in range(batch):
            if step < lengths[b]:
                cb, hb = c[b], h[b]
                i, o = sums[b, :hidden], sums[b, hidden:2 * hidden]
                f, g = sums[b, 2 * hidden:3 * hidden], sums[b, 3 * hidden:]
                for j in range(hidden):
                    i[j] += p_i[j] * cb[j]
                    f[j] += p_f[j] * cb[j]
                if clipping:
                    _clip(i, clip)
                    _clip(f, clip)
                    _clip(g, clip)
                _sigmoid(i, fraction, bits)
                if not input_forget:
                    _sigmoid(f, fraction, bits)
                _tanh(g, fraction, bits)
                for j in range(hidden):
                    forget = _ONE - i[j] if input_forget else f[j]
                    cell = forget * cb[j] + i[j] * g[j]
                    cb[j] = cell
                    squashed[j] = cell
                    o[j] += p_o[j] * cell
                if clipping:
                    _clip(o, clip)
                _sigmoid(o, fraction, bits)
                _tanh(squashed, fraction, bits)
                for j in range(hidden):
                    hb[j] = o[j] * squashed[j]
            _emit(y, geometry, step, lengths[b], reverse, b, h[b])


def gru_loop(projection: np.ndarray, geometry: np.ndarray, lengths: np.ndarray,
             reverse: bool, bias: np.ndarray, transposed_gates: np.ndarray,
             transposed_candidate: np.ndarray, candidate_bias: np.ndarray, clip: np.float32,
             linear_before_reset: bool, h: np.ndarray, y: np.ndarray) -> None:
    """One direction of a GRU over Y's time steps; ``h`` holds the initial state and is
    left holding the last (ONNX's gate order z r h). ``bias`` holds the input biases plus
    the recurrent ones applied outside the reset gate. With ``linear_before_reset``,
    ``transposed_gates`` is all of R^T (one product gives the gates and the candidate's
    recurrent part) and ``candidate_bias`` is ``Rb_h``; without, it is R^T's z and r
    columns and ``transposed_candidate`` its h columns, applied to r * H."""
    batch, hidden = h.shape
    gates = np.empty((batch, transposed_gates.shape[1]), np.float32)
    candidate = np.empty((batch, hidden), np.float32)
    other = np.empty((batch, hidden), np.float32)  # r * h, or the projected candidate
    fraction = np.empty(2 * hidden, np.float32)
    bits = np.empty(2 * hidden, np.int32)
    clipping = clip < np.inf
    for step in range(geometry[6]):
        _start_step(projection, geometry, lengths, step, reverse, bias, 0, gates)
        if linear_before_reset:
            _start_step(projection, geometry, lengths, step, reverse, bias, 2 * hidden, other)
            for b in range(batch):
                recurrent = gates[b, 2 * hidden:]
                for j in range(hidden):
                    recurrent[j] = candidate_bias[j]
        _accumulate(h, transposed_gates, gates)
        for b in range(batch):
            zr = gates[b, :2 * hidden]
            if clipping:
                _clip(zr, clip)
            _sigmoid(zr, fraction, bits)
        if linear_before_reset:
            for b in range(batch):
                r, recurrent = gates[b, hidden:2 * hidden], gates[b, 2 * hidden:]
                p, n = other[b], candidate[b]
                for j in range(hidden):
                    n[j] = p[j] + r[j] * recurrent[j]
        else:
            for b in range(batch):
                r, hb, rh = gates[b, hidden:2 * hidden], h[b], other[b]
                for j in range(hidden):
                    rh[j] = r[j] * hb[j]
            _start_step(projection, geometry, lengths, step, reverse, bias, 2 * hidden,
                        candidate)
            _accumulate(other, transposed_candidate, candidate)
        for b in range(batch):
            if step < lengths[b]:
                n, z, hb = candidate[b], gates[b, :hidden], h[b]
                if clipping:
                    _clip(n, clip)
                _tanh(n, fraction, bits)
                for j in range(hidden):
                    hb[j] = (_ONE - z[j]) * n[j] + z[j] * hb[j]
            _emit(y, geometry, step, lengths[b], reverse, b, h[b])


def rnn_loop(projection: np.ndarray, geometry: np.ndarray, lengths: np.ndarray,
             reverse: bool, bias: np.ndarray, transposed: np.ndarray, clip: np.float32,
             relu: bool, h: np.ndarray, y: np.ndarray) -> None:
    """One direction of an RNN (tanh, or relu) over Y's time steps; ``h`` holds the initial
    state and is left holding the last."""
    batch, hidden = h.shape
    sums = np.empty((batch, hidden), np.float32)
    fraction = np.empty(hidden, np.float32)
    bits = np.empty(hidden, np.int32)
    clipping = clip < np.inf
    for step in range(geometry[6]):
        _start_step(projection, geometry, lengths, step, reverse, bias, 0, sums)
        _accumulate(h, transposed, sums)
        for b in range(batch):
            if step < lengths[b]:
                a, hb = sums[b], h[b]
                if clipping:
                    _clip(a, clip)
                if relu:
                    _relu(a)
                else:
                    _tanh(a, fraction, bits)
                for j in range(hidden):
                    hb[j] = a[j]
            _emit(y, geometry, step, lengths[b], reverse, b, h[b])


# -- compiling the loops -------------------------------------------------------------------

_CONSTANT_NAMES = ("_LOG2E", "_LN2_HI", "_LN2_LO", "_EXP_FLOOR", "_ONE", "_TWO", "_HALF",
                   "_ZERO", "_EXPONENT_BIAS", "_MANTISSA_SCALE", "_T2", "_T3", "_T4", "_T5",
                   "_T6", "_T7")
_HELPERS: tuple[Callable[..., Any], ...] = (_expm1_parts, _sigmoid, _tanh, _relu, _clip,
                                            _accumulate, _start_step, _time_of, _emit)
_ARRAY = "float32[:, ::1]"
_VECTOR = "float32[::1]"
_INDICES = "int64[::1]"
_HEAD = f"{_ARRAY}, {_INDICES}, {_INDICES}, boolean, {_VECTOR}"
#: each op's loop and its numba signature
_LOOPS: dict[str, tuple[Callable[..., None], str]] = {
    "LSTM": (lstm_loop, f"void({_HEAD}, {_ARRAY}, {_VECTOR}, float32, boolean, {_ARRAY}, "
                        f"{_ARRAY}, {_ARRAY})"),
    "GRU": (gru_loop, f"void({_HEAD}, {_ARRAY}, {_ARRAY}, {_VECTOR}, float32, boolean, "
                      f"{_ARRAY}, {_ARRAY})"),
    "RNN": (rnn_loop, f"void({_HEAD}, {_ARRAY}, float32, boolean, {_ARRAY}, {_ARRAY})"),
}


def loop_source(op_type: str) -> str:
    """The module ``kernels`` compiles for ``op_type``: the constants, the helpers (compiled
    as part of the loop that calls them) and the op's loop as ``serial_loop``."""
    function, signature = _LOOPS[op_type]
    module = globals()
    lines = ["import numba", "import numpy as np", "",
             '_inner = numba.njit(error_model="numpy", fastmath=False)', ""]
    lines += [f"{name} = np.float32({float(module[name])!r})" for name in _CONSTANT_NAMES]
    for helper in _HELPERS:
        lines += ["", "", "@_inner", inspect.getsource(helper).rstrip()]
    lines += ["", "", inspect.getsource(function).rstrip(), "", "",
              f"serial_loop = {function.__name__}", f"SIGNATURE = {signature!r}", ""]
    return "\n".join(lines)


_COMPILED: dict[str, Callable[..., None]] = {}
_COMPILE_LOCK = threading.Lock()


def compiled_loop(op_type: str) -> Callable[..., None]:
    """``op_type``'s compiled loop (compiled once per process, loaded from the kernel cache
    when a process before compiled it)."""
    with _COMPILE_LOCK:
        if op_type not in _COMPILED:
            _COMPILED[op_type] = kernels.compile_loop(loop_source(op_type),
                                                      parallel=False).function
        return _COMPILED[op_type]


# -- which nodes -----------------------------------------------------------------------------

def _present(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def _constant_producer(node: Node, index: int) -> Optional[Node]:
    """The ``Const`` node feeding input ``index`` (its data not computed: a folded constant
    may still be pending, and asking must not compute it), or None."""
    value = node.inputs[index] if _present(node, index) else None
    producer = None if value is None else value.producer
    if producer is None or producer.op_type != "Const" or producer.attrs.get("value") is None:
        return None
    return producer


def _constant(node: Node, index: int) -> Optional[np.ndarray]:
    """Input ``index`` when a constant feeds it (its data computed now), else None."""
    producer = _constant_producer(node, index)
    return None if producer is None else producer.attrs["value"].numpy()


def _directions(node: Node) -> int:
    return 2 if node.attrs.get("direction", "forward") == "bidirectional" else 1


def _activation_flags(node: Node) -> Optional[list[bool]]:
    """Per direction, whether its activation is relu (RNN only; the other ops: False),
    or None when the node's activations are not ones the loops compute."""
    directions = _directions(node)
    given = node.attrs.get("activations")
    if node.op_type == "RNN":
        names = [str(n).lower() for n in (given or ["tanh"])]
        if len(names) == 1:
            names *= directions
        if len(names) != directions or any(n not in _RNN_ACTIVATIONS for n in names):
            return None
        return [n == "relu" for n in names]
    defaults = list(_DEFAULT_ACTIVATIONS[node.op_type])
    names = [str(n).lower() for n in (given or defaults)]
    if names not in (defaults, defaults * directions):
        return None
    return [False] * directions


def _static(shape: Sequence[Any]) -> bool:
    return all(isinstance(d, int) and d >= 0 for d in shape)


def _shape_refusal(node: Node, by_size: bool) -> Optional[str]:
    w, r, x = node.inputs[_W], node.inputs[_R], node.inputs[_X]
    assert w is not None and r is not None and x is not None
    if len(x.shape) != 3 or len(w.shape) != 3 or len(r.shape) != 3:
        return "X, W and R are not all of rank 3"
    if not (_static(w.shape) and _static(r.shape)):
        return "W or R has a dimension known only at run time"
    directions, gates, hidden = _directions(node), _GATES[node.op_type], int(r.shape[2])
    if hidden == 0 or tuple(w.shape[:2]) != (directions, gates * hidden) \
            or tuple(r.shape) != (directions, gates * hidden, hidden):
        return f"W {list(w.shape)} and R {list(r.shape)} do not fit {directions} " \
               f"direction(s) of {gates} gate(s)"
    b = node.inputs[_B] if _present(node, _B) else None
    if b is not None and tuple(b.shape) != (directions, 2 * gates * hidden):
        return f"B {list(b.shape)} does not fit W and R"
    p = node.inputs[_P] if node.op_type == "LSTM" and _present(node, _P) else None
    if p is not None and tuple(p.shape) != (directions, 3 * hidden):
        return f"P {list(p.shape)} does not fit R"
    batch = x.shape[0] if node.attrs.get("layout", 0) == 1 else x.shape[1]
    if not isinstance(batch, int) or batch < 0:
        batch = 1  # known only at run time: at least one
    if by_size and batch * gates * hidden * hidden > _step_limit(node, directions):
        return f"a step's recurrent product ({batch} x {gates * hidden} x {hidden}) is " \
               f"larger than the loops are fast for"
    return None


def _step_limit(node: Node, directions: int) -> int:
    """The most multiply-adds of one step's recurrent product the loops take for
    ``node``: less where oneDNN's recurrent primitive runs it faster."""
    if directions == 1 and node.op_type in ("LSTM", "GRU"):
        from ge.engines import get_engine
        from ge.engines.onednn.recurrent import check_recurrent

        onednn = get_engine("onednn")
        if onednn.unavailable_reason() is None and check_recurrent(node):
            return MAX_STEP_MACS_BESIDE_ONEDNN
    return MAX_STEP_MACS


def refusal(node: Node, by_size: bool = True) -> Optional[str]:
    """Why the compiled loops do not run ``node`` (None: they do); ``by_size`` False
    leaves out the refusal of steps too large for the loops to be fast."""
    op_type = node.op_type
    if op_type not in OP_TYPES:
        return f"{op_type} is not a recurrence"
    float32 = DataType.DT_FLOAT
    if any(v is not None and i != _LENS and v.dtype is not float32
           for i, v in enumerate(node.inputs)) \
            or any(v.dtype is not float32 for v in node.outputs):
        return f"{op_type} is not float32 throughout"
    attrs = node.attrs
    if attrs.get("layout", 0) not in (0, 1) \
            or attrs.get("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        return f"{op_type} has layout {attrs.get('layout')} or direction {attrs.get('direction')}"
    if _activation_flags(node) is None:
        return f"{op_type} has activations {attrs.get('activations')} (the defaults only)"
    clip = attrs.get("clip")
    if clip is not None and not clip > 0:
        return f"{op_type} has clip {clip}"
    constants = (_W, _R, _B, _P) if op_type == "LSTM" else (_W, _R, _B)
    if any(_constant_producer(node, i) is None for i in constants if _present(node, i)):
        return f"{op_type} has W, R, B or P fed at run time (constants only)"
    return _shape_refusal(node, by_size)


# -- bound nodes -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Direction:
    """One direction's weights as the loop reads them: ``bias`` [gates * hidden], the
    input biases plus the recurrent ones applied outside a gate; ``transposed``, R^T
    [hidden, gates * hidden] (a GRU without linear_before_reset: its z and r columns,
    and ``candidate`` its h columns); ``candidate_bias``, a GRU with linear_before_reset's
    ``Rb_h``; ``peephole``, an LSTM's P [3 * hidden] (zeros when absent). The arrays an
    op does not use are placeholders."""

    reverse: bool
    bias: np.ndarray
    transposed: np.ndarray
    candidate: np.ndarray
    candidate_bias: np.ndarray
    peephole: np.ndarray
    relu: bool


def _owned(array: np.ndarray) -> np.ndarray:
    """A C-contiguous, writable float32 copy (the compiled loops take writable arrays, and
    a constant's data is read-only)."""
    return np.array(array, np.float32, order="C")


def _layout_direction(node: Node, d: int, relu: bool) -> _Direction:
    """Direction ``d``'s weights laid out for the loop."""
    op_type, gates = node.op_type, _GATES[node.op_type]
    r, b = _constant(node, _R), _constant(node, _B)
    p = _constant(node, _P) if op_type == "LSTM" else None
    assert r is not None
    hidden = int(r.shape[2])
    rows = gates * hidden
    biases = np.zeros(2 * rows, np.float32) if b is None else _owned(b[d])
    input_bias, recurrent_bias = biases[:rows], biases[rows:]
    bias = input_bias + recurrent_bias
    transposed = _owned(r[d].T)
    candidate, candidate_bias = np.zeros((1, 1), np.float32), np.zeros(1, np.float32)
    if op_type == "GRU" and node.attrs.get("linear_before_reset", 0):
        bias[2 * hidden:] = input_bias[2 * hidden:]  # Rb_h goes inside the reset gate
        candidate_bias = _owned(recurrent_bias[2 * hidden:])
    elif op_type == "GRU":  # z and r take R^T's first columns, the candidate its last
        candidate = _owned(transposed[:, 2 * hidden:])
        transposed = _owned(transposed[:, :2 * hidden])
    peephole = np.zeros(3 * hidden, np.float32) if p is None else _owned(p[d])
    reverse = node.attrs.get("direction", "forward") == "reverse" or d == 1
    return _Direction(reverse, bias, transposed, candidate, candidate_bias, peephole, relu)


#: the most multiply-adds of an input projection of one row that NumPy's ``dot`` computes
#: rather than oneDNN: a vector-matrix product this small costs less in NumPy than a
#: oneDNN call waking its threads (measured on 2 cores, 1 x 128 by 128 x 512: 2.7 us
#: against 5.1; 1 x 64 by 64 x 256: 0.9 against 4.3; 1 x 256 by 256 x 1024: 10.8 against
#: 7.8). A voice-activity detector's LSTM runs one step a call.
SMALL_PROJECTION_MACS = 1 << 16


class _Projection:
    """``rows @ weights`` into a new array: a oneDNN matrix product per row count (the
    weights packed once for it), NumPy's ``dot`` where oneDNN is absent or refuses, and
    for one row of at most ``SMALL_PROJECTION_MACS`` multiply-adds."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights
        self._lib: Any = None
        self._packed: Any = None
        self._primitives: dict[int, Any] = {}
        try:
            from ge.engines import onednn
            from ge.engines.onednn import _lib
        except ImportError:  # pragma: no cover - the package ships with GE
            return
        if _lib.unavailable_reason() is None:
            onednn._register_pool()  # a run's thread limit reaches its OpenMP pool
            self._lib = _lib

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((rows.shape[0], self.weights.shape[1]), np.float32)
        small = rows.shape[0] == 1 and self.weights.size <= SMALL_PROJECTION_MACS
        primitive = self._primitive(rows, out) \
            if self._lib is not None and rows.size and not small else None
        if primitive is None:
            np.dot(rows, self.weights, out=out)
        else:
            primitive.run_arrays((rows, out))
        return out

    def _primitive(self, rows: np.ndarray, out: np.ndarray) -> Any:
        count = rows.shape[0]
        if count in self._primitives:
            return self._primitives[count]
        lib = self._lib
        made = None
        try:
            source, dest = lib.Desc.of(rows), lib.Desc.of(out)
            pd, weights_md = lib.matmul(source, lib.Desc(list(self.weights.shape)), None,
                                        dest, None)
            try:
                if self._packed is None:
                    self._packed = lib.Packed(self.weights)
                made = lib.Primitive(pd, lib.source_dest(source.handle, dest.handle),
                                     "a recurrent input projection",
                                     [(lib.ARG_WEIGHTS, weights_md,
                                       self._packed.like(weights_md))])
            finally:
                lib.destroy(pd)
        except GEError:
            made = None
        if len(self._primitives) >= _KEPT_SIZES:
            self._primitives.clear()
        self._primitives[count] = made
        return made


#: sizes (sequence length, batch) a bound node keeps its geometry and lengths for
_KEPT_SIZES = 8


class RecurrentKernel:
    """A bound LSTM, GRU or RNN node: calling it returns new output arrays; ``write``
    fills given ones."""

    def __init__(self, node: Node, loop: Callable[..., None]) -> None:
        w = _constant(node, _W)
        flags = _activation_flags(node)
        assert w is not None and flags is not None
        self.op_type = node.op_type
        self.loop = loop
        self.count = len(node.outputs)
        self.directions = _directions(node)
        self.layout = int(node.attrs.get("layout", 0))
        self.input_size = int(w.shape[2])
        self.width = int(w.shape[1])  # gates * hidden
        # W^T of every direction side by side: one product projects them all
        self.input_weights = _owned(np.concatenate([w[d].T for d in range(self.directions)],
                                                   axis=1))
        self.project = _Projection(self.input_weights)
        self.per_direction = [_layout_direction(node, d, flags[d])
                              for d in range(self.directions)]
        self.hidden = self.width // _GATES[self.op_type]
        clip = node.attrs.get("clip")
        self.clip = np.float32(np.inf if clip is None else clip)
        self.input_forget = bool(node.attrs.get("input_forget", 0))
        self._geometries: dict[tuple[int, int, int], np.ndarray] = {}
        self._lengths: dict[tuple[int, int], np.ndarray] = {}
        self.linear_before_reset = bool(node.attrs.get("linear_before_reset", 0))

    def shapes(self, x: np.ndarray) -> list[tuple[int, ...]]:
        """The outputs' shapes for input ``x``."""
        first, second = int(x.shape[0]), int(x.shape[1])
        directions, hidden = self.directions, self.hidden
        if self.layout == 0:
            shapes = [(first, directions, second, hidden), (directions, second, hidden)]
        else:
            shapes = [(first, second, directions, hidden), (first, directions, hidden)]
        return [shapes[0]] + [shapes[1]] * (self.count - 1)

    def __call__(self, inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[_X]
        assert x is not None
        outs = [np.empty(shape, np.float32) for shape in self.shapes(x)]
        self.write(inputs, outs)
        return outs

    def write(self, inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]
              ) -> None:
        """Compute the node on ``inputs`` into ``outs`` (C-contiguous, of the outputs'
        shapes)."""
        given = inputs[_X]
        assert given is not None
        x = np.ascontiguousarray(given, np.float32)
        seq, batch = (x.shape[1], x.shape[0]) if self.layout else (x.shape[0], x.shape[1])
        projection = self.project(x.reshape(seq * batch, self.input_size))
        given_lengths = inputs[_LENS] if len(inputs) > _LENS else None
        lengths = self._full_lengths(seq, batch) if given_lengths is None else \
            _lengths(given_lengths, seq, batch)
        y = outs[0] if outs else np.empty(self.shapes(x)[0], np.float32)
        rows = y.reshape(seq * self.directions * batch, self.hidden)
        calls: list[tuple[Any, ...]] = []
        stores: list[tuple[int, int, np.ndarray]] = []  # (output, direction, state)
        for d, weights in enumerate(self.per_direction):
            geometry = self._geometry(d, seq, batch)
            h, h_in_place = self._state(inputs, _H0, d, batch, outs, 1)
            if self.op_type == "LSTM":
                c, c_in_place = self._state(inputs, _C0, d, batch, outs, 2)
                calls.append((projection, geometry, lengths, weights.reverse, weights.bias,
                              weights.transposed, weights.peephole, self.clip,
                              self.input_forget, h, c, rows))
                if len(outs) > 2 and not c_in_place:
                    stores.append((2, d, c))
            elif self.op_type == "GRU":
                calls.append((projection, geometry, lengths, weights.reverse, weights.bias,
                              weights.transposed, weights.candidate, weights.candidate_bias,
                              self.clip, self.linear_before_reset, h, rows))
            else:
                calls.append((projection, geometry, lengths, weights.reverse, weights.bias,
                              weights.transposed, self.clip, weights.relu, h, rows))
            if len(outs) > 1 and not h_in_place:
                stores.append((1, d, h))
        # each direction writes its own rows of Y and its own states: the two may run at once
        if len(calls) == 2 and self._in_parallel(seq * batch):
            _both(self.loop, calls[0], calls[1])
        else:
            for call in calls:
                self.loop(*call)
        for out, d, state in stores:
            self._store(outs[out], d, state)

    def _in_parallel(self, steps: int) -> bool:
        """Whether the run may give its directions two threads, and they are worth it."""
        limit = current_limit()
        if (limit is not None and limit < 2) or _CORES < 2:
            return False
        return steps * self.width * self.hidden >= PARALLEL_DIRECTION_MACS

    def _geometry(self, d: int, seq: int, batch: int) -> np.ndarray:
        """Where direction ``d`` reads its projected input and writes Y's rows: the
        projection's first column, time and batch strides; Y's first row, time and batch
        strides (Y as rows of ``hidden``); the sequence length. Kept per size (the loops
        only read it)."""
        key = (d, seq, batch)
        found = self._geometries.get(key)
        if found is not None:
            return found
        directions = self.directions
        if self.layout == 0:
            strides = (batch, 1, d * batch, directions * batch, 1)
        else:
            strides = (1, seq, d, directions, seq * directions)
        found = np.array((d * self.width, *strides, seq), np.int64)
        if len(self._geometries) >= _KEPT_SIZES:
            self._geometries.clear()
        self._geometries[key] = found
        return found

    def _full_lengths(self, seq: int, batch: int) -> np.ndarray:
        """Every batch entry's length ``seq`` (no ``sequence_lens`` given), kept per size."""
        key = (seq, batch)
        found = self._lengths.get(key)
        if found is None:
            if len(self._lengths) >= _KEPT_SIZES:
                self._lengths.clear()
            found = self._lengths[key] = _lengths(None, seq, batch)
        return found

    def _state(self, inputs: Sequence[Optional[np.ndarray]], index: int, d: int,
               batch: int, outs: Sequence[np.ndarray], out: int) -> tuple[np.ndarray, bool]:
        """Direction ``d``'s initial state as a [batch, hidden] array the loop updates in
        place, and whether it is the output ``outs[out]``'s own rows (where they are one
        contiguous block: one direction, the default layout) or a fresh array."""
        given = inputs[index] if len(inputs) > index else None
        target: Optional[np.ndarray] = None
        if len(outs) > out and self.layout == 0 and self.directions == 1:
            target = outs[out][0]
            for state in inputs[_H0:_C0 + 1]:
                if state is not None and np.may_share_memory(state, target):
                    target = None  # an initial state lies where this new one goes
                    break
        in_place = target is not None
        if target is None:
            target = np.empty((batch, self.hidden), np.float32)
        if given is None:
            target.fill(0)
        else:
            np.copyto(target, given[:, d] if self.layout else given[d])
        return target, in_place

    def _store(self, out: np.ndarray, d: int, state: np.ndarray) -> None:
        if self.layout:
            out[:, d] = state
        else:
            out[d] = state


_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
    (os.cpu_count() or 1)
_WORKER: list[ThreadPoolExecutor] = []
_OPENMP: list[Optional[Any]] = []  # [libgomp with GOMP_parallel typed, or None], once looked up
_SHARED_LOCK = threading.Lock()
_REGION = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _worker() -> ThreadPoolExecutor:
    """The process's worker threads for second directions (made at first need)."""
    with _SHARED_LOCK:
        if not _WORKER:
            _WORKER.append(ThreadPoolExecutor(max_workers=2,
                                              thread_name_prefix="ge-recurrent"))
        return _WORKER[0]


def _openmp() -> Optional[Any]:
    """The OpenMP runtime oneDNN runs on, where oneDNN is loaded, with ``GOMP_parallel``
    and ``omp_get_thread_num`` typed; else None."""
    with _SHARED_LOCK:
        if not _OPENMP:
            runtime = None
            try:
                from ge.engines.onednn import _lib

                if _lib.unavailable_reason() is None:
                    runtime = _lib.openmp_runtime()
                if runtime is not None:
                    runtime.GOMP_parallel.restype = None
                    runtime.GOMP_parallel.argtypes = [_REGION, ctypes.c_void_p, ctypes.c_uint,
                                                      ctypes.c_uint]
                    runtime.omp_get_thread_num.restype = ctypes.c_int
                    runtime.omp_get_thread_num.argtypes = []
            except (GEError, OSError, AttributeError):
                runtime = None
            _OPENMP.append(runtime)
        return _OPENMP[0]


def _both(loop: Callable[..., None], first: tuple[Any, ...], second: tuple[Any, ...]) -> None:
    """``loop(*first)`` and ``loop(*second)`` at once, on two threads (the module's
    docstring says which); each that no thread ran (a pool that gave fewer threads)
    then runs here. The first error raised is raised here, after both ended."""
    calls, done = (first, second), [False, False]
    errors: list[BaseException] = []
    runtime = _openmp()
    if runtime is not None:
        def body(_data: Any) -> None:
            index = runtime.omp_get_thread_num()
            if index < 2:
                try:
                    loop(*calls[index])
                except BaseException as error:  # noqa: BLE001 - not across the C frames
                    errors.append(error)
                done[index] = True

        region = _REGION(body)  # alive until GOMP_parallel returns
        runtime.GOMP_parallel(region, None, 2, 0)
    else:
        other: Future[None] = _worker().submit(loop, *second)
        try:
            loop(*first)
            done[0] = True
        finally:
            try:
                other.result()
            except BaseException as error:  # noqa: BLE001 - raised below, after the first
                errors.append(error)
            done[1] = True
    if errors:
        raise errors[0]
    for call, ran in zip(calls, done):
        if not ran:
            loop(*call)


def _lengths(given: Optional[np.ndarray], seq: int, batch: int) -> np.ndarray:
    """Each batch entry's step count, within [0, seq]."""
    if given is None:
        return np.full(batch, seq, np.int64)
    return np.clip(np.asarray(given).astype(np.int64).reshape(batch), 0, seq)


def bind_recurrent(node: Node) -> Callable[[Sequence[Optional[np.ndarray]]], list[np.ndarray]]:
    """The node's kernel (a ``RecurrentKernel``; its loop compiled now, or loaded from the
    cache); the op's reference kernel, with a warning, when numba fails to compile it."""
    try:
        loop = compiled_loop(node.op_type)
    except Exception as error:  # noqa: BLE001 - a numba failure must not lose the node
        warnings.warn(f"fused engine: node {node.name!r} runs its reference kernel; numba "
                      f"failed: {error}", RuntimeWarning, stacklevel=3)
        kernel = get_schema(node.op_type).kernel
        attrs = dict(node.attrs)
        return lambda inputs: [np.asarray(a) for a in kernel(*inputs, **attrs)]
    return RecurrentKernel(node, loop)
