"""``Add``, ``Sub``, ``Mul`` and ``Div`` of float32 arrays as oneDNN binary primitives.

The output has the first operand's shape; the second broadcasts into it (a residual, a
per-channel bias, a squeeze-excite scale, a scalar). Where only the first operand is
the broadcast one, ``Add`` and ``Mul`` swap their operands (bit for bit the same
result); ``Sub`` and ``Div`` run on the next engine then. A primitive is made once per
pair of input shapes and runs on the OpenMP pool; IEEE results, as NumPy's. A broadcast
oneDNN has only its reference code for (a statistic over the channels of an NHWC
array, [1, H, W, 1]) runs on the next engine, as does a row broadcast over earlier axes
(``_row_broadcast``: a per-channel scale of channels-last data), slower here than there.

Outputs under ``BINARY_MIN_ELEMENTS`` stay with the next engine: NumPy's ufunc runs at
memory speed there and costs less to call (measured in a run: a [1, 128, 256] + [256]
took 14 us here against 9 us in NumPy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _Fallback, _float32, _rank
from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ir.tensor import is_static_dim

__all__ = ["BINARY", "BINARY_MIN_ELEMENTS", "check_binary", "bind_binary"]

#: outputs of fewer elements stay with the next engine
BINARY_MIN_ELEMENTS = 1 << 16

#: GE op -> (oneDNN algorithm, whether its operands commute)
BINARY: dict[str, tuple[int, bool]] = {
    "Add": (_lib.BINARY_ADD, True),
    "Mul": (_lib.BINARY_MUL, True),
    "Sub": (_lib.BINARY_SUB, False),
    "Div": (_lib.BINARY_DIV, False),
}


def check_binary(node: Node) -> bool:
    """True for a float32 two-operand arithmetic node not known to be small, nor known to
    broadcast a row (``_row_broadcast``)."""
    if len(node.inputs) != 2 or any(v is None for v in node.inputs) \
            or len(node.outputs) != 1 or not _float32(node, (0, 1)):
        return False
    if max(_rank(node, 0), _rank(node, 1)) > _lib.MAX_DIMS:
        return False
    dims = node.outputs[0].shape
    known = [d for d in dims if isinstance(d, int) and is_static_dim(d)]
    if len(known) != len(dims):
        return True
    shapes = [v.shape for v in node.inputs if v is not None]
    if all(is_static_dim(d) for shape in shapes for d in shape):
        out = tuple(int(d) for d in dims)
        if any(_row_broadcast(tuple(int(d) for d in shape), out) for shape in shapes):
            return False
    return math.prod(known) >= BINARY_MIN_ELEMENTS


def _row_broadcast(shape: tuple[int, ...], into: tuple[int, ...]) -> bool:
    """Whether ``shape`` varies along the last axis of ``into`` and repeats over an
    earlier one (a per-channel scale of channels-last data, a bias over rows): oneDNN's
    kernel for that takes 1.2-2.6x torch's time and NumPy's (a squeeze-excite scale of
    [1, 112, 112, 32]: 0.155 ms against 0.06 and 0.12; [8, 128, 256] by [256]: 0.056
    against 0.045), where same shapes and a value per row run as fast as theirs."""
    dims = _broadcast_dims(shape, into)
    return dims is not None and len(dims) > 1 and dims[-1] == into[-1] != 1 and any(
        d == 1 and full > 1 for d, full in zip(dims[:-1], into[:-1]))


def _broadcast_dims(shape: tuple[int, ...], into: tuple[int, ...]) -> Optional[list[int]]:
    """``shape`` as oneDNN's src1 dims against ``into`` (ones prepended), or None where
    it does not broadcast into ``into`` alone."""
    if len(shape) > len(into):
        return None
    dims = [1] * (len(into) - len(shape)) + list(shape)
    if any(d not in (1, full) for d, full in zip(dims, into)):
        return None
    return dims


def bind_binary(node: Node) -> BoundNode:
    algorithm, commutes = BINARY[node.op_type]
    primitives = _lib.ShapeCache()
    fallback = _Fallback(node)
    what = f"the {node.op_type} {node.name!r}"

    def make(first: tuple[int, ...], second: tuple[int, ...]) -> Optional[_lib.Primitive]:
        dims = _broadcast_dims(second, first)
        if dims is None or _row_broadcast(second, first):
            return None
        source, other = _lib.Desc.dense(first), _lib.Desc.dense(dims)
        try:
            pd = _lib.binary(algorithm, source, other, source)
        except UnsupportedOpError:
            return None
        primitive = _lib.made(pd, [(_lib.ARG_SRC, source.handle),
                                   (_lib.ARG_SRC_1, other.handle),
                                   (_lib.ARG_DST, source.handle)], what)
        # a broadcast its JIT kernels lack (over a middle axis alone, [1, H, W, 1] into
        # NHWC) is oneDNN's reference loop: 100x NumPy's time
        return None if primitive.impl.startswith("ref") else primitive

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        a, b = inputs
        out = outs[0]
        assert a is not None and b is not None
        if out.size < BINARY_MIN_ELEMENTS or not out.flags.c_contiguous:
            fallback(inputs, outs)
            return
        if a.shape != out.shape or (out.ctypes.data == b.ctypes.data and b.size == out.size):
            # the full operand must come first, and the output may overwrite only it
            if not commutes or b.shape != out.shape:
                fallback(inputs, outs)
                return
            a, b = b, a
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        first, second = a.shape, b.shape
        primitive = primitives.get_or_make((first, second), lambda: make(first, second))
        if primitive is None:
            fallback(inputs, outs)
            return
        primitive.run_arrays((a, b, out))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        a, b = inputs
        assert a is not None and b is not None
        out = np.empty(np.broadcast_shapes(a.shape, b.shape), np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)
