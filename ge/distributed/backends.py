"""The pipeline backends by name: ``threads`` (here) and ``ray`` (``ray_backend.py``).

Each name maps to a loader returning the backend class, so a backend's module (and
its framework) is imported only when a pipeline asks for it; the ``ray`` loader says
so when Ray is not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ge.distributed.base import Backend, BackendError, StageSpec

__all__ = ["known_backends", "create_backend"]


def _threads() -> type[Backend]:
    from ge.distributed.threads import ThreadsBackend

    return ThreadsBackend


def _ray() -> type[Backend]:
    try:
        from ge.distributed.ray_backend import RayBackend
    except ModuleNotFoundError as error:
        if error.name != "ray" and not (error.name or "").startswith("ray."):
            raise
        raise BackendError("the 'ray' pipeline backend needs Ray: pip install 'ge[dist]' "
                           "(or pip install ray)") from error
    return RayBackend


_BACKENDS: dict[str, Callable[[], type[Backend]]] = {"threads": _threads, "ray": _ray}


def known_backends() -> list[str]:
    """The backend names ``Pipeline`` knows."""
    return sorted(_BACKENDS)


def create_backend(name: str, stages: Sequence[StageSpec], **settings: Any) -> Backend:
    """The backend ``name`` running ``stages`` (``settings``: see ``Backend``)."""
    loader = _BACKENDS.get(name) if isinstance(name, str) else None
    if loader is None:
        raise BackendError(f"unknown pipeline backend {name!r}; known backends: "
                           f"{', '.join(known_backends())}")
    return loader()(stages, **settings)
