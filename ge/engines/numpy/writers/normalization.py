"""Writers of normalizations and softmax."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers._base import _WIDE_FLOATS, Inputs, Outs, _array, _dtype, _writes
from ge.ir import Node
from ge.ops.shape_utils import normalize_axis

# -- normalizations and softmax ---------------------------------------------------------

@_writes("LayerNormalization")
def _layer_norm(node: Node) -> Optional[WritingKernel]:
    """x - mean into out, the variance from one scratch array of squares, then the
    division, scale and bias in place (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    epsilon, axis = node.attrs["epsilon"], node.attrs["axis"]

    def run(inputs: Inputs, outs: Outs) -> None:
        x, scale, out = _array(inputs, 0), _array(inputs, 1), outs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
        np.subtract(x, x.mean(axis=axes, keepdims=True), out=out)
        variance = np.mean(np.multiply(out, out), axis=axes, keepdims=True)
        np.divide(out, np.sqrt(variance + x.dtype.type(epsilon)), out=out)
        np.multiply(out, scale, out=out)
        if bias is not None:
            np.add(out, bias, out=out)

    return run


@_writes("Softmax", "LogSoftmax")
def _softmax(node: Node) -> Optional[WritingKernel]:
    """x - max along the axis into out; then exp and the division by the sum (Softmax),
    or the subtraction of log(sum(exp)) (LogSoftmax), in place (float32 and float64)."""
    if _dtype(node) not in _WIDE_FLOATS:
        return None
    axis, log = node.attrs["axis"], node.op_type == "LogSoftmax"

    def run(inputs: Inputs, outs: Outs) -> None:
        x, out = _array(inputs, 0), outs[0]
        if out.size == 0:
            return
        np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        if log:
            total = np.exp(out).sum(axis=axis, keepdims=True)
            np.subtract(out, np.log(total), out=out)
        else:
            np.exp(out, out=out)
            np.divide(out, out.sum(axis=axis, keepdims=True), out=out)

    return run
