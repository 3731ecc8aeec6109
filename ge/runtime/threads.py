"""Intra-op threads: how many threads one run's kernels may use.

``limited(n)`` holds the limit for the calling thread while a run executes: engines read
it (``current_limit()``; the fused engine caps its parallel loops with it) and BLAS is
set to ``n`` threads for the run and set back after. BLAS's thread count is a process
setting: two sessions with different limits running at once in one process see each
other's setting.

BLAS is reached through its own C entry points (``openblas_set_num_threads`` and its
``scipy_openblas`` spelling, the OpenBLAS NumPy's wheels bundle), found among the
libraries the process has mapped (Linux). Where none is found, ``set_blas_threads``
says so by returning False and BLAS keeps its own count.

An engine with a thread pool of its own (PyTorch's OpenMP pool) registers it with
``register_pool``: ``limited`` sets it to the run's limit as it does BLAS. A run that
uses such an engine passes ``blas=1``: BLAS then keeps to one thread for the run, since
the idle threads of two pools spin on the same cores and slow each other several-fold
(measured: a ResNet-50 run on oneDNN convolutions took 2.5x longer with OpenBLAS's
threads spinning beside torch's).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional

__all__ = ["limited", "current_limit", "blas_threads", "set_blas_threads", "resolve_threads",
           "register_pool", "openblas_libraries", "cpu_model", "ENVIRONMENT_VARIABLE"]

#: the environment variable a session reads when neither it nor ge.compile got a count
ENVIRONMENT_VARIABLE = "GE_NUM_THREADS"

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_", "openblas_get_num_threads")

_local = threading.local()
_blas: Optional[tuple[Any, Any]] = None
_blas_searched = False
_blas_lock = threading.Lock()
#: name -> (get the pool's thread count, set it), for engines with pools of their own
_POOLS: dict[str, tuple[Callable[[], int], Callable[[int], None]]] = {}


def register_pool(name: str, get: Callable[[], int], set_count: Callable[[int], None]) -> None:
    """Let ``limited`` set the thread pool ``name`` (an engine's own) to a run's limit."""
    _POOLS[name] = (get, set_count)


def resolve_threads(*choices: Optional[int]) -> Optional[int]:
    """The first of ``choices`` given, else ``GE_NUM_THREADS``, else None (every core)."""
    for choice in choices:
        if choice is not None:
            return _positive(choice, "threads")
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    return _positive(int(value), ENVIRONMENT_VARIABLE) if value else None


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return value


def current_limit() -> Optional[int]:
    """The thread limit of the run executing on this thread, or None."""
    return getattr(_local, "limit", None)


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in ``/proc/cpuinfo`` (empty where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if not line.strip():
                    if fields:
                        break
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), with its family,
    model and stepping numbers where the kernel gives them (a virtual machine may name
    processors of different generations alike, "AMD EPYC"); else what ``platform``
    knows."""
    fields = _cpuinfo()
    name = fields.get("model name")
    if not name:
        return platform.processor() or platform.machine()
    numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model", "stepping")
               if fields.get(key)]
    return f"{name} ({', '.join(numbers)})" if numbers else name


def openblas_libraries() -> list[str]:
    """The paths of the OpenBLAS libraries this process has loaded (NumPy's, once NumPy is
    imported), from ``/proc/self/maps``; empty where that cannot be read."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps
                           if "openblas" in line.lower() and line.split()[-1].startswith("/")})
    except OSError:
        return []


def _find_blas() -> Optional[tuple[Any, Any]]:
    global _blas, _blas_searched
    if _blas_searched:  # set once, after ``_blas``: no lock on a run's path
        return _blas
    with _blas_lock:
        if _blas_searched:
            return _blas
        for path in openblas_libraries():
            try:
                library = ctypes.CDLL(path)
            except OSError:
                continue
            setter = next((getattr(library, n) for n in _SETTERS if hasattr(library, n)), None)
            getter = next((getattr(library, n) for n in _GETTERS if hasattr(library, n)), None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                _blas = (setter, getter)
                break
        _blas_searched = True
        return _blas


def blas_threads() -> Optional[int]:
    """BLAS's thread count, or None when GE cannot reach BLAS."""
    found = _find_blas()
    return None if found is None else int(found[1]())


def set_blas_threads(count: int) -> bool:
    """Set BLAS's thread count; False when GE cannot reach BLAS."""
    found = _find_blas()
    if found is None:
        return False
    found[0](int(count))
    return True


class limited:  # noqa: N801 - used as a function: ``with limited(n):``
    """Run the block with at most ``count`` threads per kernel (None: no limit), and
    BLAS at ``blas`` threads when given (else at ``count``). A plain class rather than
    a generator context manager: a run enters it once, and a small run's whole
    overhead is a few microseconds."""

    __slots__ = ("count", "blas", "previous", "restore")

    def __init__(self, count: Optional[int], blas: Optional[int] = None) -> None:
        self.count, self.blas = count, blas
        self.previous: Optional[int] = None
        self.restore: list[tuple[Callable[[int], None], int]] = []

    def __enter__(self) -> None:
        count = self.count
        self.previous = current_limit()
        _local.limit = count
        target = self.blas if self.blas is not None else count
        restore = self.restore
        try:
            if target is not None:
                before = blas_threads()
                if before is not None and before != target and set_blas_threads(target):
                    restore.append((_set_blas, before))
            if count is not None:
                for get, set_count in list(_POOLS.values()):
                    had = get()
                    if had != count:
                        set_count(count)
                        restore.append((set_count, had))
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> None:
        _local.limit = self.previous
        restore = self.restore
        while restore:
            set_count, had = restore.pop()
            set_count(had)


def _set_blas(count: int) -> None:
    set_blas_threads(count)


@contextlib.contextmanager
def inherited(count: Optional[int]) -> Iterator[None]:
    """On a worker thread of a run: the run's limit, without touching BLAS again."""
    previous = current_limit()
    _local.limit = count
    try:
        yield
    finally:
        _local.limit = previous
