"""One row times a constant matrix, on the threads of oneDNN's OpenMP pool.

A transformer's decoding step, a classifier's head at batch 1 and a small MLP multiply
a single row by a weight matrix: the product streams the matrix once, and its speed is
the speed of that stream. oneDNN's matmul (BRGEMM over blocked weights) streams it more
slowly there than onnxruntime's MLAS; this kernel keeps up with MLAS (figures in
``ge.engines.onednn.linear``).

The weight is copied once, transposed: each output column is then the dot product of
the row with one contiguous row of the copy, summed in vector registers (numba's
``fastmath`` lets LLVM split the sum over several accumulators), with the bias, the
residual and the activation applied as the value is written. The columns are shared out
among the threads of a parallel region of the OpenMP runtime oneDNN runs on
(``openmp``). Without numba or that runtime, or
with ``GE_MATRIX_VECTOR=0``, ``available()`` is False and products stay with oneDNN.
``table()`` lists the products made on this kernel (``ge run --profile`` prints it).
"""

from __future__ import annotations

import os
import threading
from typing import Optional

import numpy as np

from ge.engines.fused import openmp

__all__ = ["ACTIVATIONS", "MatrixVector", "available", "table", "VARIABLE"]

#: the environment variable that keeps single rows on oneDNN's matmul ("0")
VARIABLE = "GE_MATRIX_VECTOR"

#: activation name -> the code the kernel reads
ACTIVATIONS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}

_lock = threading.Lock()
_made: list[str] = []  # what each MatrixVector was made for, in order


def available() -> bool:
    """Whether the kernel runs here: numba and oneDNN's OpenMP runtime are loaded, and
    ``GE_MATRIX_VECTOR`` is not "0"."""
    return os.environ.get(VARIABLE, "").strip() != "0" and openmp.runtime() is not None


def table() -> str:
    """The products made on this kernel so far, one line each ("" for none)."""
    with _lock:
        made = list(_made)
    if not made:
        return ""
    lines = [f"single rows on GE's matrix-vector kernel ({len(made)} products; "
             f"{VARIABLE}=0 keeps them on oneDNN's matmul):"]
    lines += [f"  {what}" for what in made]
    return "\n".join(lines)


class MatrixVector:
    """``out = activation(x @ matrix + bias + residual)`` for one row ``x``: the matrix
    ([K, N], any strides) copied once, the bias ([N] float32) and activation fixed."""

    def __init__(self, matrix: np.ndarray, bias: Optional[np.ndarray] = None,
                 activation: str = "none", what: str = "a product") -> None:
        found = openmp.runtime()
        if found is None:
            raise RuntimeError("the matrix-vector kernel needs numba and oneDNN's OpenMP")
        self._runtime, kernels = found, found.kernels
        self._region = int(kernels.matrix_vector.address)
        depth, columns = (int(d) for d in matrix.shape)
        self.weight = np.ascontiguousarray(np.asarray(matrix, np.float32).T)
        self.bias = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
        self.depth, self.columns = depth, columns
        operands = self._operands = np.zeros(kernels.OPERANDS, np.int64)
        operands[kernels.THREAD_COUNT], operands[kernels.THREAD_NUMBER] = found.functions
        operands[kernels.WEIGHT] = self.weight.ctypes.data
        operands[kernels.BIAS] = 0 if self.bias is None else self.bias.ctypes.data
        operands[kernels.DEPTH], operands[kernels.COLUMNS] = depth, columns
        operands[kernels.ACTIVATION] = ACTIVATIONS[activation]
        self._slots = (kernels.X, kernels.OUT, kernels.BIAS, kernels.RESIDUAL)
        self._address = self._operands.ctypes.data
        self._lock = threading.Lock()
        with _lock:
            _made.append(f"{what}: [1, {depth}] x [{depth}, {columns}]"
                         + ("" if activation == "none" else f", {activation}"))
        # the arrays whose addresses the operands hold: x, out, bias, residual (an
        # address costs about 0.7 us to ask for; the memory plan hands a node the same
        # arrays run after run)
        self._held: list[Optional[np.ndarray]] = [None, None, None, None]

    @property
    def nbytes(self) -> int:
        """Bytes of the weight's copy."""
        return int(self.weight.nbytes)

    def run(self, x: np.ndarray, out: np.ndarray, bias: Optional[np.ndarray] = None,
            residual: Optional[np.ndarray] = None) -> None:
        """One product: ``x`` of K contiguous float32 values, ``out`` of N, a ``bias``
        given at run time (instead of the constant one) and a ``residual`` of N (it may
        be ``out`` itself)."""
        with self._lock:
            operands, held = self._operands, self._held
            at_x, at_out, at_bias, at_residual = self._slots
            if held[0] is not x:
                operands[at_x], held[0] = x.ctypes.data, x
            if held[1] is not out:
                operands[at_out], held[1] = out.ctypes.data, out
            if bias is not None and held[2] is not bias:
                operands[at_bias], held[2] = bias.ctypes.data, bias
            if held[3] is not residual:
                operands[at_residual] = 0 if residual is None else residual.ctypes.data
                held[3] = residual
            self._runtime.start(self._region, self._address)
