"""Transposes that are matrix transposes, through OpenBLAS's ``omatcopy``.

Most transposes a model runs swap two groups of axes: the layout pass's NCHW <-> NHWC
at a region's ends is ``[N, C, H*W] -> [N, H*W, C]``, a batch of matrix transposes.
Strided element copies (NumPy's ``copyto``, torch's ``copy_``) move such data at about
0.6 ns an element here; OpenBLAS's out-of-place matrix transpose (``omatcopy``, an
extension of BLAS that NumPy's OpenBLAS exports) moves it 2.5-3x faster (64 x 6,400
floats: 0.14 ms against 0.25-0.35).

``matrix_plan(shape, perm)`` reduces a permutation to its groups of axes that stay
together (``(0, 2, 3, 1)`` on ``[N, C, H, W]`` is ``[N][C][H, W] -> [N][H, W][C]``)
and answers ``(batch, rows, cols)`` when it is a batch of ``rows x cols`` matrices
transposed, else None. ``transpose_into(plan, x, out)`` runs it for float32 and
float64 data (bit for bit: the kernel copies, and with alpha 1 multiplies by one).
Without an OpenBLAS that exports the routine, or for other types, it returns False
and the caller copies as before.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.runtime.threads import openblas_libraries

__all__ = ["matrix_plan", "transpose_into", "available", "Transposer", "MAX_BATCH",
           "MIN_ELEMENTS"]

#: more matrices than this are one strided copy (a call per matrix would cost more)
MAX_BATCH = 64
#: fewer elements than this are one strided copy (the call costs about 2 us)
MIN_ELEMENTS = 1 << 12

# (CBLAS entry point, whether its integers are 64-bit): NumPy's wheels bundle OpenBLAS
# with a "scipy_" prefix and a 64-bit interface; a system OpenBLAS has the plain names
_NAMES: dict[np.dtype, tuple[tuple[str, bool], ...]] = {
    np.dtype(np.float32): (("scipy_cblas_somatcopy64_", True), ("cblas_somatcopy64_", True),
                           ("cblas_somatcopy", False)),
    np.dtype(np.float64): (("scipy_cblas_domatcopy64_", True), ("cblas_domatcopy64_", True),
                           ("cblas_domatcopy", False))}
_ROW_MAJOR, _TRANSPOSE = 101, 112  # CBLAS's CblasRowMajor and CblasTrans

_lock = threading.Lock()
_found: Optional[dict[np.dtype, Any]] = None


def _routines() -> dict[np.dtype, Any]:
    """The omatcopy routine per dtype, found among the OpenBLAS libraries this process
    has loaded (NumPy's, once NumPy is imported); empty where none exports it."""
    global _found
    with _lock:
        if _found is not None:
            return _found
        _found = {}
        for path in openblas_libraries():
            try:
                library = ctypes.CDLL(path)
            except OSError:
                continue
            for dtype, names in _NAMES.items():
                for name, wide in names:
                    routine = getattr(library, name, None)
                    if routine is None or dtype in _found:
                        continue
                    integer = ctypes.c_int64 if wide else ctypes.c_int32
                    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
                    routine.argtypes = [ctypes.c_int, ctypes.c_int, integer, integer, scalar,
                                        ctypes.c_void_p, integer, ctypes.c_void_p, integer]
                    routine.restype = None
                    _found[dtype] = routine
        return _found


def available(dtype: Any) -> bool:
    """Whether ``transpose_into`` can run data of ``dtype``."""
    wanted: np.dtype = np.dtype(dtype)
    return wanted in _routines()


def matrix_plan(shape: Sequence[int], perm: Sequence[int]) -> Optional[tuple[int, int, int]]:
    """``(batch, rows, cols)`` when permuting ``shape`` by ``perm`` transposes ``batch``
    matrices of ``rows x cols`` (the batch axes leading, kept in order), else None."""
    kept = [axis for axis in perm if shape[axis] != 1]  # axes of one element move freely
    if len(kept) < 2:
        return None
    groups: list[list[int]] = [[kept[0]]]  # runs of input axes that stay adjacent
    for axis in kept[1:]:
        previous = groups[-1][-1]
        if axis > previous and all(shape[a] == 1 for a in range(previous + 1, axis)):
            groups[-1].append(axis)
        else:
            groups.append([axis])
    sizes = [math.prod(shape[a] for a in group) for group in groups]
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])  # the input's order
    if len(groups) == 2 and order == [1, 0]:
        return 1, sizes[1], sizes[0]
    if len(groups) == 3 and order == [0, 2, 1]:
        return sizes[0], sizes[2], sizes[1]
    return None


def transpose_into(plan: tuple[int, int, int], x: np.ndarray, out: np.ndarray) -> bool:
    """Write ``x`` transposed as ``plan`` says into ``out`` (both C-contiguous, of one
    dtype); False, having written nothing, where the routine cannot."""
    batch, rows, cols = plan
    routine = _routines().get(x.dtype)
    if routine is None or out.dtype != x.dtype or not x.flags.c_contiguous \
            or not out.flags.c_contiguous or batch > MAX_BATCH:
        return False
    step = rows * cols * x.itemsize
    source, target = x.ctypes.data, out.ctypes.data
    for index in range(batch):
        routine(_ROW_MAJOR, _TRANSPOSE, rows, cols, 1.0, source + index * step, cols,
                target + index * step, rows)
    return True


class Transposer:
    """One Transpose node's fast path: ``__call__(x, out)`` writes ``x`` permuted into
    ``out`` through ``omatcopy`` and returns True, or returns False (nothing written)
    where that does not apply; the plan is worked out once per input shape."""

    def __init__(self, perm: Sequence[int]) -> None:
        self.perm = [int(p) for p in perm]
        self.plans: dict[tuple[int, ...], Optional[tuple[int, int, int]]] = {}

    def __call__(self, x: np.ndarray, out: np.ndarray) -> bool:
        if x.size < MIN_ELEMENTS:
            return False
        shape = x.shape
        if shape in self.plans:
            plan = self.plans[shape]
        else:
            plan = matrix_plan(shape, self.perm) if len(shape) == len(self.perm) else None
            if len(self.plans) >= 64:
                self.plans.clear()
            self.plans[shape] = plan
        return plan is not None and transpose_into(plan, x, out)
