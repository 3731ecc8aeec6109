"""Unary activations and softmax as oneDNN primitives (JIT, vectorized, on the OpenMP
pool).

``Tanh``, ``Exp``, ``Sigmoid``, ``Relu``, ``Sqrt``, ``Abs``, ``HardSwish``, ``Mish`` and
``Swish`` (alpha 1: SiLU) in float32, one primitive per element count: the input (made
contiguous when it is not) and the output are seen as flat vectors, which may be one
buffer (an in-place step). Measured on a 2-core AVX-512 machine over [1, 64, 80, 80]:
``tanh`` 50 us against 500 us for ``torch.tanh`` and 68 us for NumPy's single-threaded
one. ``Sigmoid``, ``Swish`` and ``Tanh`` run on the fused engine's kernel instead where
it is available (``FAST``): 0.19 ms against oneDNN's 0.31, 0.41 and 0.27 over 1.2M
values. ``Erf``, which oneDNN lacks, runs on that kernel only (``FAST_ONLY``): within
2e-7 of float64's erf, 68 us over 393k values against 207 for ``torch.erf``. ``Log``
and ``Softplus`` are not taken: oneDNN's are within 4e-6 absolute, short of NumPy's
float32 (softplus far below zero loses all its relative precision).

``Softmax`` over the last axis is a softmax primitive per input shape (the
max-subtracting form, as the reference). ``LogSoftmax`` is not taken: oneDNN's log is
within 4e-6, short of float32.

Arrays under ``SMALL_ELEMENTS`` (``Tanh``: ``SMALL_BY_OP``) stay with the next engine
(oneDNN's call through ctypes costs more than a NumPy ufunc there); a run whose shape the
graph did not fix and that turns out small goes to the next engine's kernel as well.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.fused import activation as fast_activation
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _Fallback, _float32, _rank
from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ir.tensor import is_static_dim

__all__ = ["UNARY", "FAST_ONLY", "SMALL_ELEMENTS", "check_unary", "bind_unary", "check_softmax",
           "bind_softmax"]

#: GE op -> (oneDNN eltwise algorithm, alpha, beta)
UNARY: dict[str, tuple[str, float, float]] = {
    "Tanh": ("tanh", 0.0, 0.0),
    "Exp": ("exp", 0.0, 0.0),
    "Sigmoid": ("logistic", 0.0, 0.0),
    "Relu": ("relu", 0.0, 0.0),
    "Sqrt": ("sqrt", 0.0, 0.0),
    "Abs": ("abs", 0.0, 0.0),
    "HardSwish": ("hardswish", 1.0 / 6.0, 0.5),
    "Mish": ("mish", 0.0, 0.0),
    "Swish": ("swish", 1.0, 0.0),  # alpha 1 only (SiLU)
}

#: activations the fused engine's kernel computes, 1.3-2x faster than oneDNN's (see
#: ``ge.engines.fused.activation``): op -> the kernel's function
FAST = {"Sigmoid": "sigmoid", "Swish": "swish", "Tanh": "tanh", "Erf": "erf"}

#: activations oneDNN has no algorithm for, taken only where the fused engine's kernel
#: runs: ``Erf`` (68 us over [1, 128, 3072] on 2 cores against 207 for ``torch.erf``)
FAST_ONLY = ("Erf",)

#: fewer elements than this stay with the next engine
SMALL_ELEMENTS = 1 << 14

#: ops whose NumPy ufunc stays ahead to larger sizes: ``tanh`` over 64k values takes
#: 36 us against oneDNN's 48 (both threads), over 256k 103 against 85; the fused
#: engine's kernel, where available, overtakes NumPy from 32k values (``FAST_SMALL``)
SMALL_BY_OP = {"Tanh": 1 << 17}
FAST_SMALL = {"Tanh": 1 << 15}


def _small(node: Node) -> int:
    if node.op_type in FAST_SMALL and fast_activation.available():
        return FAST_SMALL[node.op_type]
    return SMALL_BY_OP.get(node.op_type, SMALL_ELEMENTS)


def _large(node: Node) -> bool:
    """False when the output's shape is fixed and under the op's small size."""
    dims = [d for d in node.outputs[0].shape if isinstance(d, int) and is_static_dim(d)]
    if len(dims) == len(node.outputs[0].shape):
        return math.prod(dims) >= _small(node)
    return True


def check_unary(node: Node) -> bool:
    """True for a float32 activation of ``UNARY`` that is not known to be small."""
    if not _float32(node, (0,)) or len(node.outputs) != 1 or node.inputs[0] is None:
        return False
    if node.op_type == "Swish" and float(node.attrs.get("alpha", 1.0)) != 1.0:
        return False
    if node.op_type in FAST_ONLY and not fast_activation.available():
        return False
    return _large(node)


def bind_unary(node: Node) -> BoundNode:
    function = FAST.get(node.op_type)
    if function is not None and fast_activation.available():
        return _fast(node, function)
    algorithm, alpha, beta = UNARY[node.op_type]

    def make(shape: tuple[int, ...]) -> Any:
        count = math.prod(shape)
        desc = _lib.Desc([count], [1])  # elementwise: any shape is one flat vector
        return _lib.eltwise(algorithm, desc, desc, alpha, beta), desc

    return _same_shape(node, make, _small(node))


def _fast(node: Node, function: str) -> BoundNode:
    """The fused engine's kernel on arrays of ``_small(node)`` values or more, the next
    engine's writer on smaller ones."""
    fallback = _Fallback(node)
    small = _small(node)
    fast_activation.record(f"{node.op_type} {node.name!r}")

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        assert x is not None
        if out.size < small or x.shape != out.shape:
            fallback(inputs, outs)
            return
        fast_activation.apply(function, x, out)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        out = np.empty(x.shape, np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)


def _same_shape(node: Node, describe: Callable[[tuple[int, ...]], Any],
                small: int = SMALL_ELEMENTS) -> BoundNode:
    """The binding of a one-input primitive whose output has the input's shape, in place
    when the step is: ``describe(shape)`` gives its descriptor, the memory descriptor of
    both operands and, optionally, its constant operands (``_lib.made``'s), or None for
    the next engine; made once per shape, run on contiguous data of at least ``small``
    values, the next engine's writer otherwise."""
    primitives = _lib.ShapeCache()
    fallback = _Fallback(node)

    def make(shape: tuple[int, ...]) -> Optional[_lib.Primitive]:
        try:
            described = describe(shape)
        except UnsupportedOpError:
            return None
        if described is None:
            return None
        pd, desc, *constants = described
        what = f"the {node.op_type} {node.name!r}"
        return _lib.made(pd, _lib.source_dest(desc.handle, desc.handle), what,
                         constants[0] if constants else ())

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        assert x is not None
        if out.size < small or not out.flags.c_contiguous or x.shape != out.shape:
            fallback(inputs, outs)
            return
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        primitive = primitives.get_or_make(x.shape, lambda: make(x.shape))
        fallback.or_run(primitive, x, out, inputs, outs)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        out = np.empty(x.shape, np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)


# -- Softmax -------------------------------------------------------------------

def check_softmax(node: Node) -> bool:
    """True for a float32 ``Softmax`` over the last axis that is not known
    to be small (oneDNN's softmax over an outer axis is its slow reference code: 32 ms
    over [1, 6625, 80] on axis 1)."""
    if not _float32(node, (0,)) or len(node.outputs) != 1 or node.inputs[0] is None:
        return False
    rank = _rank(node, 0)
    return rank >= 1 and int(node.attrs["axis"]) in (-1, rank - 1) and _large(node)


def bind_softmax(node: Node) -> BoundNode:
    """One softmax primitive per input shape over its last axis, in place when the step
    is."""

    def make(shape: tuple[int, ...]) -> Any:
        desc = _lib.Desc.dense(shape)
        return _lib.softmax(desc, desc, len(shape) - 1), desc

    return _same_shape(node, make)
