"""Recurrent cells on torch: ONNX's ``LSTM``, ``GRU`` and ``RNN`` as torch's fused
recurrences (``_VF.lstm``, which runs oneDNN's LSTM for float32, ``_VF.gru``,
``_VF.rnn_tanh``/``_VF.rnn_relu``), the functions ``torch.nn.LSTM`` and its kin call,
without the module's per-call checks.

The weights are laid out once at bind time: each direction's gate blocks go from
ONNX's order to torch's (LSTM: i o f c -> i f g o; GRU: z r h -> r z n) and ONNX's
bias ``B = [Wb, Rb]`` splits into torch's ``bias_ih`` and ``bias_hh``. Direction
``reverse`` runs a forward cell over the time-flipped input and flips its outputs back;
``bidirectional`` is torch's own. Layout 1 (batch first) is torch's ``batch_first``.
Torch returns ``Y`` as ``[seq, batch, directions * hidden]``, which is ONNX's
``[seq, directions, batch, hidden]`` after a permute (and ONNX's layout-1 ``Y`` as it
is); the writer copies each output into its arena slot with ``copy_``, cheap beside
the recurrence.

Taken exactly, and nothing else: float32; constant ``W``, ``R`` (and ``B``); the
default activations (LSTM Sigmoid/Tanh/Tanh, GRU Sigmoid/Tanh; RNN Tanh or Relu, the
same in both directions); no ``clip``, no ``sequence_lens``, no LSTM peepholes ``P``
or ``input_forget``; GRU only with ``linear_before_reset=1`` (torch's GRU applies the
recurrence weights before the reset gate; ONNX's default 0 does not, and torch has no
such cell). Everything else runs on the NumPy engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.torch._base import (
    Binding,
    array,
    const_array,
    float32_node,
    is_const,
    one_thread,
    rank,
    register,
    tensor,
)
from ge.ir import Node

__all__: list[str] = []

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: a recurrence whose step (its recurrent product) has at most this many multiply-adds
#: runs on one thread: each step is a small product, and forking the pool for it cost
#: more than it saved (a seq-50, hidden-128 RNN: 0.40 ms on 2 threads, 0.27 ms on 1)
SERIAL_MAX_STEP_MACS = 1 << 18
#: torch's gate blocks, as indices of ONNX's blocks
_TORCH_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}
_DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh"),
                        "RNN": ("tanh",)}
#: input indices
_X, _W, _R, _B, _LENS, _H0, _C0, _P = range(8)


def _present(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def _directions(node: Node) -> int:
    return 2 if node.attrs.get("direction", "forward") == "bidirectional" else 1


def _activations(node: Node) -> Optional[list[str]]:
    """The activation names of every direction, lower case, or None when the node's
    list does not give each direction exactly its own."""
    defaults = _DEFAULT_ACTIVATIONS[node.op_type]
    directions = _directions(node)
    given = node.attrs.get("activations")
    names = [str(n).lower() for n in (given or defaults * directions)]
    if len(names) == len(defaults) and directions == 2:
        names = names * 2
    return names if len(names) == len(defaults) * directions else None


def _nonlinearity(node: Node) -> Optional[str]:
    """The torch cell's nonlinearity for the node's activations, or None when none fits."""
    names = _activations(node)
    if names is None:
        return None
    if node.op_type == "RNN":
        return names[0] if names[0] in ("tanh", "relu") and len(set(names)) == 1 else None
    defaults = list(_DEFAULT_ACTIVATIONS[node.op_type])
    return "tanh" if names == defaults * _directions(node) else None


def _static(shape: Sequence[Any]) -> bool:
    return all(isinstance(d, int) and d >= 0 for d in shape)


def _check(node: Node) -> bool:
    op_type = node.op_type
    if op_type not in _GATES or not float32_node(node):
        return False
    attrs = node.attrs
    if attrs.get("clip") is not None or attrs.get("layout", 0) not in (0, 1):
        return False
    if attrs.get("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        return False
    if op_type == "LSTM" and (attrs.get("input_forget", 0) or _present(node, _P)):
        return False
    if op_type == "GRU" and attrs.get("linear_before_reset", 0) != 1:
        return False
    if _present(node, _LENS) or _nonlinearity(node) is None:
        return False
    if not (is_const(node, _W) and is_const(node, _R)) or rank(node, _X) != 3:
        return False
    if _present(node, _B) and not is_const(node, _B):
        return False
    w, r = node.inputs[_W], node.inputs[_R]
    assert w is not None and r is not None
    if len(w.shape) != 3 or len(r.shape) != 3 or not _static(w.shape) or not _static(r.shape):
        return False
    directions, gates, hidden = _directions(node), _GATES[op_type], r.shape[2]
    if hidden == 0 or w.shape[2] == 0:
        return False
    if tuple(w.shape[:2]) != (directions, gates * hidden) \
            or tuple(r.shape) != (directions, gates * hidden, hidden):
        return False
    b = node.inputs[_B] if _present(node, _B) else None
    if b is not None and tuple(b.shape) != (directions, 2 * gates * hidden):
        return False
    states = (_H0, _C0) if op_type == "LSTM" else (_H0,)
    return all(rank(node, i) in (-1, 3) for i in states)


def _parameters(node: Node) -> tuple[list[Any], bool]:
    """Torch's flat weight list (per direction: w_ih, w_hh[, b_ih, b_hh]) and whether it
    has biases."""
    import torch

    w, r, b = const_array(node, _W), const_array(node, _R), const_array(node, _B)
    assert w is not None and r is not None
    hidden = r.shape[2]
    order = _TORCH_ORDER[node.op_type]
    rows = len(order) * hidden

    def torch_order(matrix: np.ndarray) -> Any:
        blocks = [matrix[g * hidden:(g + 1) * hidden] for g in order]
        return torch.from_numpy(np.ascontiguousarray(np.concatenate(blocks), np.float32))

    params: list[Any] = []
    for d in range(w.shape[0]):
        params += [torch_order(w[d]), torch_order(r[d])]
        if b is not None:
            params += [torch_order(b[d, :rows]), torch_order(b[d, rows:])]
    for p in params:
        p.requires_grad_(False)
    return params, b is not None


def _bind(node: Node) -> Binding:
    import torch
    from torch import _VF

    op_type = node.op_type
    params, has_biases = _parameters(node)
    r = node.inputs[_R]
    assert r is not None
    hidden = int(r.shape[2])
    direction = node.attrs.get("direction", "forward")
    reverse, bidirectional = direction == "reverse", direction == "bidirectional"
    directions = 2 if bidirectional else 1
    batch_first = node.attrs.get("layout", 0) == 1
    time_axis = 1 if batch_first else 0
    is_lstm = op_type == "LSTM"
    count = len(node.outputs)
    name = {"LSTM": "lstm", "GRU": "gru"}.get(op_type) \
        or ("rnn_relu" if _nonlinearity(node) == "relu" else "rnn_tanh")
    recurrence: Callable[..., Any] = getattr(_VF, name)
    no_grad, zeros, flip, float32 = torch.no_grad, torch.zeros, torch.flip, torch.float32

    def state(given: Optional[np.ndarray], batch: int) -> Any:
        """An initial state as torch's [directions, batch, hidden]."""
        if given is None:
            return zeros((directions, batch, hidden), dtype=float32)
        h = tensor(given)
        return (h.transpose(0, 1) if batch_first else h).contiguous()

    def compute(inputs: Sequence[Optional[np.ndarray]]) -> list[Any]:
        """The node's outputs as torch tensors in ONNX's layout (views, maybe strided)."""
        source = inputs[_X]
        assert source is not None
        x = tensor(source)
        seq, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
        h0 = state(inputs[_H0] if len(inputs) > _H0 else None, batch)
        c0 = state(inputs[_C0] if len(inputs) > _C0 else None, batch) if is_lstm else None
        if seq == 0 or batch == 0:  # no step runs: the last states are the initial ones
            y_shape = (batch, seq, directions, hidden) if batch_first \
                else (seq, directions, batch, hidden)
            finals = [h0] if c0 is None else [h0, c0]
            return [zeros(y_shape, dtype=float32)] \
                + [_onnx_state(s.clone(), batch_first) for s in finals]
        if reverse:
            x = flip(x, [time_axis])
        with no_grad():
            if is_lstm:
                y, h_n, c_n = recurrence(x, (h0, c0), params, has_biases, 1, 0.0, False,
                                         bidirectional, batch_first)
                finals = [h_n, c_n]
            else:
                y, h_n = recurrence(x, h0, params, has_biases, 1, 0.0, False, bidirectional,
                                    batch_first)
                finals = [h_n]
        if reverse:
            y = flip(y, [time_axis])
        if batch_first:  # [batch, seq, directions * hidden] is ONNX's [batch, seq, D, H]
            y = y.view(batch, seq, directions, hidden)
        else:
            y = y.view(seq, batch, directions, hidden).permute(0, 2, 1, 3)
        return [y] + [_onnx_state(s, batch_first) for s in finals]

    gates = _GATES[op_type]

    def run(inputs: Sequence[Optional[np.ndarray]]) -> list[Any]:
        source = inputs[_X]
        assert source is not None
        batch = source.shape[0] if batch_first else source.shape[1]
        if batch * gates * hidden * hidden > SERIAL_MAX_STEP_MACS:
            return compute(inputs)
        with one_thread():
            return compute(inputs)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        for out, result in zip(outs, run(inputs)):
            tensor(out).copy_(result)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        results = run(inputs)[:count]
        return [array(result.contiguous()) for result in results]

    return Binding(kernel, writer)


def _onnx_state(state: Any, batch_first: bool) -> Any:
    """A last state from torch's [directions, batch, hidden] to ONNX's layout."""
    return state.transpose(0, 1) if batch_first else state


register(("LSTM", "GRU", "RNN"), _check, _bind)
