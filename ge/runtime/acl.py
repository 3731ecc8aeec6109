"""The seed's ACL-style runtime module (``import acl``; docs/seed-api.md, section 2.4).

``acl.init()`` / ``acl.finalize()`` bracket a use of the runtime, and
``acl.rt`` (:mod:`ge.runtime.acl_rt`) holds devices, memory, copies, streams and
events. A §6.1-style program::

    import acl
    import numpy as np

    acl.init()
    acl.rt.set_device(0)
    data = np.arange(4, dtype=np.float32)
    ptr, _ = acl.rt.malloc(data.nbytes)
    acl.rt.memcpy(ptr, data, data.nbytes, acl.rt.MEMCPY_HOST_TO_DEVICE)
    back = np.zeros(4, dtype=np.float32)
    acl.rt.memcpy(back, ptr, data.nbytes, acl.rt.MEMCPY_DEVICE_TO_HOST)
    acl.rt.free(ptr)
    acl.rt.reset_device(0)
    acl.finalize()

Decisions (docs/seed-api.md, D18, D19, D24):

- ``init`` and ``finalize`` are reference-counted: every ``init`` needs one
  ``finalize``; ``init`` may be called again after the count went back to zero.
- The ``finalize`` that brings the count to zero closes every stream (its queued
  work is done first and its thread joined; errors no synchronize reported are
  dropped), frees every buffer still allocated on every device (with one
  ``RuntimeWarning`` naming how many), drops events, and makes cpu:0 current
  again. It never raises for leaks.
- ``finalize`` without a matching ``init`` raises ``NotInitializedError``: an
  unbalanced call is a bug worth seeing.
- ``acl.rt`` works without ``init`` (on the current device, cpu:0 by default).
- Every call returns ``SUCCESS`` (0) or raises a ``ge.errors`` exception.
"""

from __future__ import annotations

import threading
import warnings

from ge.errors import NotInitializedError
from ge.runtime import acl_rt as rt

__all__ = ["SUCCESS", "finalize", "init", "init_count", "rt"]

SUCCESS = 0
"""The return code of every successful call (failures raise instead)."""

_lock = threading.Lock()
_init_count = 0


def init(config_path: str | None = None) -> int:
    """Start (or join) a use of the runtime. ``config_path`` is accepted and ignored."""
    global _init_count
    del config_path
    with _lock:
        _init_count += 1
    return SUCCESS


def finalize() -> int:
    """End one use of the runtime; the last one frees whatever is still allocated."""
    global _init_count
    with _lock:
        if _init_count == 0:
            raise NotInitializedError("acl.finalize() was called without a matching acl.init()")
        _init_count -= 1
        if _init_count:
            return SUCCESS
        leaks = rt._release_everything()
    if leaks:
        count = sum(buffers for _, buffers, _ in leaks)
        where = ", ".join(f"{nbytes} bytes on {name}" for name, _, nbytes in leaks)
        warnings.warn(f"acl.finalize() freed {count} device buffer(s) still allocated ({where})",
                      RuntimeWarning, stacklevel=2)
    return SUCCESS


def init_count() -> int:
    """How many ``init`` calls are not yet balanced by ``finalize``."""
    return _init_count
