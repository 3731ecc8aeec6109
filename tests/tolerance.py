"""The tolerances every numerical comparison in the tests uses, stated once."""

from __future__ import annotations

from typing import Any

import numpy as np

# (rtol, atol) per dtype name: what an op may differ from an independent reference.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}

# Reductions over many terms (convolutions, matrix products, norms) accumulate rounding
# differently in every library: they get this factor on top.
ACCUMULATION_FACTOR = 10.0


def assert_close(actual: Any, expected: Any, *, accumulate: bool = False, what: str = "",
                 rtol: float | None = None, atol: float | None = None) -> None:
    """Assert equal shapes and dtypes kinds, and values within the dtype's tolerance."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "biu" or expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    base_rtol, base_atol = TOLERANCE.get(actual.dtype.name, TOLERANCE["float32"])
    factor = ACCUMULATION_FACTOR if accumulate else 1.0
    np.testing.assert_allclose(
        actual.astype(np.float64), expected.astype(np.float64),
        rtol=rtol if rtol is not None else base_rtol * factor,
        atol=atol if atol is not None else base_atol * factor, err_msg=what)


def rel_err(got: Any, ref: Any) -> float:
    """Max absolute error relative to the reference's scale (its max magnitude)."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref))), 1e-6)
    return float(np.max(np.abs(got - ref))) / scale
