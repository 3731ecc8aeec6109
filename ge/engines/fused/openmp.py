"""Kernels of our own run as parallel regions of the OpenMP runtime oneDNN runs on.

oneDNN's primitives run on that runtime's threads, which spin for a while after each
one; a region started with ``GOMP_parallel`` hands its body to them at once, where a
pool of our own would share the cores with them and wait for its threads to wake. The
bodies are numba ``cfunc``s (``_openmp_kernels``: machine code, no Python, no GIL) that
read their operands' addresses, and those of the runtime's ``omp_get_num_threads`` and
``omp_get_thread_num``, from an int64 array. ``runtime()`` is None without numba or
oneDNN's runtime; the callers then keep to oneDNN.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["Runtime", "runtime"]


@dataclass(frozen=True)
class Runtime:
    """``GOMP_parallel`` typed, the thread count and number functions' addresses (the
    first two operands of every region) and the module of compiled regions."""

    parallel: Any
    functions: tuple[int, int]
    kernels: Any

    def start(self, region: Any, operands: int) -> None:
        """Run ``region`` (a cfunc's address) on the pool's threads with the operand
        array at address ``operands``; returns when every thread is done."""
        self.parallel(region, operands, 0, 0)


_lock = threading.Lock()
_state: dict[str, Optional[Runtime]] = {}


def _find() -> Optional[Runtime]:
    try:
        from ge.engines.fused import _openmp_kernels as kernels
        from ge.engines.onednn import _lib
    except Exception:  # noqa: BLE001 - a broken numba is as good as none
        return None
    if _lib.unavailable_reason() is not None:
        return None
    library = _lib.openmp_runtime()
    if library is None:
        return None
    try:
        parallel = library.GOMP_parallel
        count = ctypes.cast(library.omp_get_num_threads, ctypes.c_void_p).value
        number = ctypes.cast(library.omp_get_thread_num, ctypes.c_void_p).value
    except AttributeError:
        return None
    if not count or not number:
        return None
    parallel.restype = None
    parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    return Runtime(parallel, (int(count), int(number)), kernels)


def runtime() -> Optional[Runtime]:
    """The runtime and the compiled regions (found, and compiled or loaded from numba's
    cache, at the first call), or None where they cannot be had."""
    with _lock:
        if "runtime" not in _state:
            _state["runtime"] = _find()
        return _state["runtime"]
