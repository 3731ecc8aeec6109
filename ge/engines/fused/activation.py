"""Sigmoid, swish (SiLU), tanh and erf over float32 arrays, on the threads of oneDNN's
OpenMP pool.

EfficientNet-style and YOLO-style models put a swish after nearly every convolution.
oneDNN runs it slowly there: as the convolution's eltwise post-op it took a 1x1
convolution over [1, 16, 112, 112] from 0.30 ms to 1.23 ms, and as a primitive of its
own 0.41 ms for those 1.2M values, where onnxruntime's fused kernel takes 0.19 ms. This
kernel takes 0.19 ms: exp(-|x|) from a Cody-Waite reduction, a degree-6 polynomial and
the exponent's bits put in place, vectorized by LLVM (numba's ``fastmath``), the array
cut into one share per thread of a parallel region of the OpenMP runtime oneDNN runs
on (``openmp``). Within 4e-7 of float64's sigmoid (relative), 1.3e-6 absolute on swish.
Tanh is -m / (2 + m) with m = expm1(-2|x|) from the same reduction (a polynomial for
expm1 of the remainder, so no cancellation near 0): within 2e-7 relative, 0.19 ms over
1M values against oneDNN's 0.27 and NumPy's 0.40. Erf is its Taylor series below 1 in
magnitude and Abramowitz and Stegun's rational form (7.1.26) times exp(-x^2) above:
within 2e-7 absolute and 2.3e-7 relative of float64's erf (measured over 2M values),
68 us over [1, 128, 3072] against 207 for ``torch.erf``; oneDNN has no erf.

``available()`` is False without numba or that runtime, or with ``GE_FAST_SIGMOID=0``;
the callers then keep oneDNN's own. The nodes bound to run on it are listed by
``table()`` (``ge run --profile`` prints it).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from ge.engines.fused import openmp

__all__ = ["FUNCTIONS", "available", "apply", "record", "table", "VARIABLE"]

#: the environment variable that keeps sigmoid and swish on oneDNN ("0")
VARIABLE = "GE_FAST_SIGMOID"

#: the functions the kernel computes
FUNCTIONS = ("sigmoid", "swish", "tanh", "erf")

_local = threading.local()  # per thread: its operand array (a run may be on any thread)
_lock = threading.Lock()
_bound: list[str] = []  # the nodes bound to run on the kernel, in order


def record(what: str) -> None:
    """Note that ``what`` (a node and its function) was bound to run on the kernel."""
    with _lock:
        _bound.append(what)


def table() -> str:
    """The nodes bound to run on the kernel so far, one line each ("" for none)."""
    with _lock:
        bound = list(_bound)
    if not bound:
        return ""
    return "\n".join([f"activations on GE's sigmoid/swish/tanh/erf kernel "
                      f"({len(bound)} nodes; "
                      f"{VARIABLE}=0 keeps them off it):"] + [f"  {what}" for what in bound])


def available() -> bool:
    """Whether the kernel runs here (numba and oneDNN's OpenMP runtime are loaded, and
    ``GE_FAST_SIGMOID`` is not "0")."""
    return os.environ.get(VARIABLE, "").strip() != "0" and openmp.runtime() is not None


def apply(function: str, source: np.ndarray, destination: np.ndarray) -> None:
    """``destination = function(source)`` for float32 arrays of one shape (they may be
    the same array); either may have any strides (a copy is made for those not
    contiguous). ``available()`` must hold."""
    found = openmp.runtime()
    assert found is not None, "apply() needs available()"
    if source.shape != destination.shape:
        raise ValueError(f"{function}: the destination has shape {destination.shape}, the "
                         f"source {source.shape}")
    if not source.flags.c_contiguous:
        source = np.ascontiguousarray(source)
    target = destination if destination.flags.c_contiguous else np.empty(destination.shape,
                                                                          np.float32)
    kernels = found.kernels
    operands = getattr(_local, "operands", None)
    if operands is None:
        operands = _local.operands = np.zeros(kernels.ACTIVATION_OPERANDS, np.int64)
        operands[kernels.THREAD_COUNT], operands[kernels.THREAD_NUMBER] = found.functions
    operands[kernels.SOURCE] = source.ctypes.data
    operands[kernels.DESTINATION] = target.ctypes.data
    operands[kernels.COUNT] = source.size
    operands[kernels.FUNCTION] = {"sigmoid": kernels.SIGMOID, "swish": kernels.SWISH,
                                  "tanh": kernels.TANH, "erf": kernels.ERF}[function]
    if source.size:
        found.start(int(kernels.activation.address), operands.ctypes.data)
    if target is not destination:
        np.copyto(destination, target)
