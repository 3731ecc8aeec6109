"""Compiling generated loop modules with numba: once per process, and once per machine.

A generated module is written to the kernel cache directory under the hash of
its source and imported from there, so numba's own on-disk cache
(``cache=True``) keeps the compiled machine code next to it: a later process
loads it instead of compiling (about 50x faster, see ``docs/benchmarks.md``).
The directory is ``$GE_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/ge/kernels``,
else ``~/.cache/ge/kernels``; ``GE_KERNEL_CACHE=""`` turns the disk cache off.
When the directory cannot be written, the module is compiled in memory.

Within a process, each module and each variant (serial, parallel) is compiled
once, whichever nodes share it. numba is imported on first use only.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from ge.engines.fused.codegen import source_key

__all__ = ["CACHE_ENVIRONMENT", "numba_module", "cache_directory", "Compiled", "compile_loop",
           "statistics"]

CACHE_ENVIRONMENT = "GE_KERNEL_CACHE"

_LOCK = threading.RLock()
_MODULES: dict[str, tuple[ModuleType, Optional[Path]]] = {}
_COMPILED: dict[tuple[str, bool], "Compiled"] = {}
_STATISTICS = {"modules": 0, "written": 0, "in_memory": 0, "compiled": 0, "seconds": 0.0}


@functools.lru_cache(maxsize=1)
def numba_module() -> Optional[ModuleType]:
    """The numba module, or None when it is not installed (or cannot be imported)."""
    try:
        import numba
    except Exception:  # noqa: BLE001 - a broken numba is as good as none
        return None
    return numba


def cache_directory() -> Optional[Path]:
    """Where generated modules and their compiled code are kept (None: nowhere)."""
    value = os.environ.get(CACHE_ENVIRONMENT)
    if value is not None:
        return Path(value).expanduser() if value.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ge" / "kernels"


@dataclass(frozen=True)
class Compiled:
    """One compiled loop: the callable, where its source lies (None: in memory), and the
    seconds compiling (or loading it from the disk cache) took."""

    function: Callable[..., Any]
    path: Optional[Path]
    seconds: float


def _write(directory: Path, key: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"ge_fused_{key}.py"
    if not path.exists() or path.read_text() != source:
        temporary = directory / f".ge_fused_{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        temporary.write_text(source)
        os.replace(temporary, path)  # atomic: a reader never sees half a file
    return path


def _import(path: Path, key: str) -> ModuleType:
    name = f"ge_fused_{key}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _in_memory(source: str, key: str) -> ModuleType:
    module = ModuleType(f"ge_fused_{key}")
    exec(compile(source, f"<ge fused loop {key}>", "exec"), module.__dict__)  # noqa: S102
    return module


def _module(source: str) -> tuple[str, ModuleType, Optional[Path]]:
    key = source_key(source)
    if key in _MODULES:
        return (key, *_MODULES[key])
    directory = cache_directory()
    path: Optional[Path] = None
    if directory is not None:
        try:
            path = _write(directory, key, source)
            module = _import(path, key)
            _STATISTICS["written"] += 1
        except OSError:
            path = None
    if path is None:
        module = _in_memory(source, key)
        _STATISTICS["in_memory"] += 1
    _STATISTICS["modules"] += 1
    _MODULES[key] = (module, path)
    return key, module, path


def _jit(numba: ModuleType, module: ModuleType, parallel: bool, cache: bool) -> Any:
    function = module.parallel_loop if parallel else module.serial_loop
    options = dict(parallel=parallel, error_model="numpy", nogil=True)
    if cache:
        try:
            return numba.njit(module.SIGNATURE, cache=True, **options)(function)
        except RuntimeError:  # no writable place for numba's cache: compile without it
            pass
    return numba.njit(module.SIGNATURE, **options)(function)


def _choose_threading_layer(numba: ModuleType) -> None:
    """numba's "workqueue" threads, unless the user chose: measured here, OpenMP's threads
    stall a parallel loop by 4-7 ms when they were asleep or when OpenBLAS's threads
    spin after a matrix product; workqueue's do not."""
    if os.environ.get("NUMBA_THREADING_LAYER"):
        return
    from numba.np.ufunc import parallel as numba_parallel

    if not getattr(numba_parallel, "_is_initialized", True):
        numba.config.THREADING_LAYER = "workqueue"


def compile_loop(source: str, parallel: bool) -> Compiled:
    """The compiled serial or parallel loop of the generated module ``source``."""
    numba = numba_module()
    if numba is None:
        raise RuntimeError("numba is not installed")
    with _LOCK:
        key, module, path = _module(source)
        found = _COMPILED.get((key, parallel))
        if found is not None:
            return found
        if parallel:
            _choose_threading_layer(numba)
        started = time.perf_counter()
        compiled = _jit(numba, module, parallel, cache=path is not None)
        seconds = time.perf_counter() - started
        _STATISTICS["compiled"] += 1
        _STATISTICS["seconds"] += seconds
        _COMPILED[(key, parallel)] = Compiled(compiled, path, seconds)
        return _COMPILED[(key, parallel)]


def statistics() -> dict[str, float]:
    """Counts for this process: modules made, written to disk or kept in memory, loops
    compiled (or loaded from the disk cache) and the seconds that took."""
    return dict(_STATISTICS)
