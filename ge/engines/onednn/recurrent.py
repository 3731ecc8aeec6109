"""``LSTM`` and ``GRU`` as oneDNN's recurrent primitives, one per direction and shape.

oneDNN runs a whole sequence in one call: the input projection of every step as one
product, then each step's recurrent product on all the run's threads, with its weights
packed once for its kernel. Where a step's recurrent product is large (a hidden size of
512 at batch 1 is 4 MB of weights a step) that beats both the fused engine's compiled
loop, which keeps to one thread, and the torch engine's: measured on a 2-core AVX-512
machine, 64 steps of an LSTM of input 256 and hidden 512 at batch 1 take 2.7 ms against
the torch engine's 3.9, a bidirectional one over 81 steps 8.5 ms against 11.4, and a GRU
of hidden 512 2.9 ms against the NumPy reference's 8.0 (torch has no GRU without
``linear_before_reset``). The fused engine, ahead of this one among the default
engines, keeps the recurrences whose steps are small enough for its loops
(``ge.engines.fused.recurrent.MAX_STEP_MACS``, or ``MAX_STEP_MACS_BESIDE_ONEDNN`` for one
direction: it runs two at once, this engine one after the other).

The ONNX weights are laid out for oneDNN at bind time: its gates come in another order
(an LSTM's i, f, c, o for ONNX's i, o, f, c; a GRU's z, r, h are oneDNN's u, r, o), its
weights are ``[input, gate, hidden]`` and its biases one per gate, the input and
recurrent biases summed (a GRU with ``linear_before_reset`` keeps the candidate's
recurrent bias apart: oneDNN's linear-before-reset GRU). Both layouts are read and
written in place through strides: a direction writes its own slice of ``Y`` and of the
final states, and a bidirectional node is the two directions one after the other, each
on all the threads.

Taken: float32, the default activations, constant ``W``, ``R`` and ``B``, every direction
and layout, initial states given or not. Declined (the next engine runs them): ``clip``,
an LSTM's peepholes or ``input_forget``, ``RNN``. A run whose ``sequence_lens`` holds a
length shorter than the sequence, or with no steps or no batch, runs the fused engine's
compiled loop (with numba; else the next engine's kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.fused import kernels
from ge.engines.fused import recurrent as fused
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _const, _Fallback
from ge.errors import UnsupportedOpError
from ge.ir import Node

__all__ = ["OP_TYPES", "check_recurrent", "bind_recurrent"]

OP_TYPES = ("LSTM", "GRU")
_X, _W, _R, _B, _LENS, _H0, _C0, _P = range(8)
_GATES = {"LSTM": 4, "GRU": 3}
#: oneDNN's gates, as indices of ONNX's
_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (0, 1, 2)}


def _present(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def check_recurrent(node: Node) -> bool:
    """True for the recurrences the module's docstring lists as taken."""
    if node.op_type not in OP_TYPES or fused.refusal(node, by_size=False) is not None:
        return False
    attrs = node.attrs
    if attrs.get("clip") is not None:
        return False
    return node.op_type != "LSTM" or not (int(attrs.get("input_forget", 0))
                                          or _present(node, _P))


def _gate_major(matrix: np.ndarray, gates: int, order: Sequence[int]) -> np.ndarray:
    """ONNX's ``[gates * hidden, K]`` as oneDNN's ``[1, 1, K, gates, hidden]``, its gates
    in oneDNN's order."""
    rows, depth = matrix.shape
    blocks = matrix.reshape(gates, rows // gates, depth)[list(order)]
    return np.ascontiguousarray(blocks.transpose(2, 0, 1)).reshape(
        1, 1, depth, gates, rows // gates)


class _Direction:
    """One direction's weights, laid out for oneDNN, and packed once per layout its
    kernels ask for."""

    def __init__(self, node: Node, d: int) -> None:
        op_type = node.op_type
        gates, order = _GATES[op_type], _ORDER[op_type]
        w, r, b = _const(node, _W), _const(node, _R), _const(node, _B)
        assert w is not None and r is not None
        hidden = int(r.shape[2])
        rows = gates * hidden
        self.reverse = node.attrs.get("direction", "forward") == "reverse" or d == 1
        self.weights = _lib.Packed(_gate_major(np.asarray(w[d], np.float32), gates, order))
        self.recurrent = _lib.Packed(_gate_major(np.asarray(r[d], np.float32), gates, order))
        biases = np.zeros(2 * rows, np.float32) if b is None else np.asarray(b[d], np.float32)
        given, recurrent = biases[:rows].reshape(gates, hidden), biases[rows:].reshape(
            gates, hidden)
        if op_type == "GRU" and node.attrs.get("linear_before_reset", 0):
            # u, r summed; the candidate's input bias; its recurrent bias, inside the reset
            bias = np.stack([given[0] + recurrent[0], given[1] + recurrent[1], given[2],
                             recurrent[2]])
        else:
            bias = (given + recurrent)[list(order)]
        self.bias = np.ascontiguousarray(bias, np.float32).reshape(1, 1, *bias.shape)
        self.bias_desc = _lib.Desc.of(self.bias)


class _Elsewhere:
    """Runs oneDNN does not take: the fused engine's compiled loop over the time steps
    (one thread), else the next engine's kernel; bound at first need."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.loop: Optional[fused.RecurrentKernel] = None
        self.next_engine = _Fallback(node)

    def __call__(self, inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]
                 ) -> None:
        if self.loop is None and kernels.numba_module() is not None:
            bound = fused.bind_recurrent(self.node)
            if isinstance(bound, fused.RecurrentKernel):
                self.loop = bound
        if self.loop is not None:
            self.loop.write(inputs, outs)
        else:
            self.next_engine(inputs, outs)


def _state_view(state: np.ndarray, d: int, layout: int) -> np.ndarray:
    """Direction ``d``'s ``[1, 1, batch, hidden]`` view of an initial or final state."""
    one = state[:, d] if layout else state[d]
    return one[None, None]


def bind_recurrent(node: Node) -> BoundNode:
    op_type = node.op_type
    kind = "lstm" if op_type == "LSTM" else \
        "lbr_gru" if node.attrs.get("linear_before_reset", 0) else "gru"
    lstm = op_type == "LSTM"
    layout = int(node.attrs.get("layout", 0))
    directions = [_Direction(node, d) for d in range(
        2 if node.attrs.get("direction", "forward") == "bidirectional" else 1)]
    r = _const(node, _R)
    assert r is not None
    hidden = int(r.shape[2])
    count = len(node.outputs)
    width = int(directions[0].weights.source.shape[2])  # W's input features
    plans = _lib.ShapeCache()
    fallback = _Elsewhere(node)
    what = f"the {op_type} {node.name!r}"

    def make(d: int, arrays: Sequence[np.ndarray], has_state: bool, has_state_out: bool
             ) -> Optional[_lib.Primitive]:
        """Direction ``d``'s primitive over ``arrays``: the input and output sequences,
        then the states given in and out (with their cell states for an LSTM)."""
        direction = directions[d]
        descs = [_lib.Desc.of(a) for a in arrays]
        source, dest = descs[0], descs[1]
        states = iter(descs[2:])
        state = cell = state_out = cell_out = None
        if has_state:
            state = next(states)
            cell = next(states) if lstm else None
        if has_state_out:
            state_out = next(states)
            cell_out = next(states) if lstm else None
        weights_any = _lib.Desc([1, 1, width, _GATES[op_type], hidden])
        recurrent_any = _lib.Desc([1, 1, hidden, _GATES[op_type], hidden])
        try:
            pd, weights_md, recurrent_md = _lib.recurrence(
                kind, _lib.RIGHT_TO_LEFT if direction.reverse else _lib.LEFT_TO_RIGHT,
                source, state, cell, weights_any, recurrent_any, direction.bias_desc, dest,
                state_out, cell_out)
        except UnsupportedOpError:  # shapes oneDNN refuses: the next engine says what is wrong
            return None
        args = [_lib.ARG_SRC, _lib.ARG_DST]
        if has_state:
            args += [_lib.ARG_SRC_ITER] + ([_lib.ARG_SRC_ITER_C] if lstm else [])
        if has_state_out:
            args += [_lib.ARG_DST_ITER] + ([_lib.ARG_DST_ITER_C] if lstm else [])
        constants = [(_lib.ARG_WEIGHTS, weights_md, direction.weights.like(weights_md)),
                     (_lib.ARG_WEIGHTS_ITER, recurrent_md,
                      direction.recurrent.like(recurrent_md)),
                     (_lib.ARG_BIAS, direction.bias_desc.handle, direction.bias)]
        return _lib.made(pd, [(arg, desc.handle) for arg, desc in zip(args, descs)], what,
                         constants)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x = inputs[_X]
        assert x is not None
        steps, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
        lengths = inputs[_LENS] if len(inputs) > _LENS else None
        if steps == 0 or batch == 0 or \
                (lengths is not None and np.any(np.asarray(lengths) != steps)):
            fallback(inputs, outs)
            return
        if x.shape[2] != width:
            raise ValueError(f"X has {x.shape[2]} input features; W expects {width}")
        source = x.transpose(1, 0, 2) if layout else x
        shapes = _shapes(x)
        y = outs[0] if count else np.empty(shapes[0], np.float32)
        h0 = inputs[_H0] if len(inputs) > _H0 else None
        c0 = inputs[_C0] if lstm and len(inputs) > _C0 else None
        has_state = h0 is not None or c0 is not None
        if has_state:
            zeros = np.zeros(shapes[1], np.float32)
            h0 = zeros if h0 is None else h0
            c0 = (zeros if c0 is None else c0) if lstm else None
        has_state_out = count > 1
        h_out: Optional[np.ndarray] = None
        c_out: Optional[np.ndarray] = None
        if has_state_out:
            h_out = outs[1]
            c_out = (outs[2] if count > 2 else np.empty(shapes[1], np.float32)) \
                if lstm else None
        primitives = []
        for d in range(len(directions)):
            arrays = [source, y[:, :, d].transpose(1, 0, 2) if layout else y[:, d]]
            if has_state:
                assert h0 is not None
                arrays.append(_state_view(h0, d, layout))
                if c0 is not None:
                    arrays.append(_state_view(c0, d, layout))
            if h_out is not None:
                arrays.append(_state_view(h_out, d, layout))
                if c_out is not None:
                    arrays.append(_state_view(c_out, d, layout))
            key = (d, has_state, has_state_out) + tuple((a.shape, a.strides) for a in arrays)
            primitive = plans.get_or_make(
                key, lambda: make(d, arrays, has_state, has_state_out))  # noqa: B023
            if primitive is None:
                fallback(inputs, outs)
                return
            primitives.append((primitive, arrays))
        for primitive, arrays in primitives:
            primitive.run_arrays(arrays)

    def _shapes(x: np.ndarray) -> list[tuple[int, ...]]:
        first, second = int(x.shape[0]), int(x.shape[1])
        directions_count = len(directions)
        if layout == 0:
            return [(first, directions_count, second, hidden),
                    (directions_count, second, hidden)]
        return [(first, second, directions_count, hidden), (first, directions_count, hidden)]

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[_X]
        assert x is not None
        shapes = _shapes(x)
        outs = [np.empty(shapes[min(i, 1)], np.float32) for i in range(count)]
        writer(inputs, outs)
        return outs

    return BoundNode(kernel, writer)
