"""The fused engine's cost model: will the staged loops beat the unfused ops?

Every number here was measured on this project's 2-core AMD EPYC (Zen 5,
AVX-512) by ``python bench/elementwise_fusion.py --per-op`` (the tables are in
``docs/benchmarks.md``), in nanoseconds per float32 element, 2M elements:

* the unfused side: each step op's reference kernel alone (``REFERENCE_NS``);
* the fused side: a generated loop costs ``LOOP_ARRAY_NS`` for each full-size
  array it reads or writes (the arithmetic inside is nearly free: the loops are
  vectorized and memory-bound), plus ``INLINE_NS`` for an inline libm call; a
  NumPy call between loops costs ``CALL_NS``.

Transcendental functions stay NumPy calls because numba's scalar libm calls are
3-50x slower than NumPy's SIMD ones (tanh 14-19 vs 0.3-0.4 ns); only ``erf`` is
computed inline, where libm (4-6 ns) beats GE's float64 NumPy series (42-55 ns).
Small outputs add fixed per-call costs (microseconds): a region is fused when
the estimate is at most ``WORTH`` of the unfused one. A region of transcendental
calls with little arithmetic between them gains nothing and is declined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from ge.engines.fused.layout import FULL, Layout
from ge.engines.fused.plan import Plan

__all__ = ["REFERENCE_NS", "CALL_NS", "estimate", "refusal", "bytes_moved", "WORTH"]

#: each step op's reference kernel, ns per element (measured; see the module docstring)
REFERENCE_NS: dict[str, float] = {
    "Relu": 0.40, "Neg": 0.20, "Abs": 0.12, "Sqrt": 0.35, "Floor": 0.15, "Ceil": 0.24,
    "Sign": 0.51, "Reciprocal": 0.23, "IsNaN": 0.09, "IsInf": 2.33, "LeakyRelu": 1.44,
    "HardSigmoid": 0.53, "HardSwish": 0.76, "Softsign": 0.71, "ThresholdedRelu": 1.09,
    "Sigmoid": 3.38, "Tanh": 0.27, "Exp": 0.60, "Log": 0.49, "Erf": 49.8, "Sin": 1.07,
    "Cos": 1.09, "Tan": 0.41, "Asin": 0.36, "Acos": 0.38, "Atan": 0.30, "Sinh": 0.35,
    "Cosh": 0.36, "Asinh": 0.53, "Acosh": 0.90, "Atanh": 0.68, "Softplus": 12.0, "Elu": 1.92,
    "Selu": 2.92, "Celu": 2.93, "Mish": 16.3, "Swish": 6.16, "Gelu": 3.97, "Add": 0.20,
    "Sub": 0.20, "Mul": 0.22, "Div": 0.20, "Max": 0.31, "Min": 0.27, "PRelu": 0.95,
    "Equal": 0.21, "Less": 0.22, "Greater": 0.19, "LessOrEqual": 0.19, "GreaterOrEqual": 0.19,
    "Pow": 1.65, "Clip": 0.78, "Where": 4.33, "And": 0.04, "Or": 0.04, "Xor": 0.03,
    "Not": 0.03,
}
# (Acosh: as the arccosh call, in its domain; the per-op bench samples (0, 1), where it
# is NaN throughout and takes a slow path)
#: Gelu's exact (erf) form: GE's NumPy erf dominates it
GELU_ERF_NS = 41.0

#: a NumPy call between loops, ns per element (measured)
CALL_NS: dict[str, float] = {
    "tanh": 0.30, "exp": 0.62, "expm1": 0.64, "log": 0.59, "log1p": 0.82, "sin": 1.56,
    "cos": 1.47, "tan": 0.81, "arcsin": 0.60, "arccos": 0.83, "arctan": 0.53, "sinh": 0.53,
    "cosh": 0.54, "arcsinh": 0.66, "arccosh": 0.83, "arctanh": 0.58, "power": 0.70,
}
#: an inline libm call in a loop, ns per element, by the function the template calls
INLINE_NS: dict[str, float] = {"math.erf": 4.06}
#: a loop, per full-size array read or written (Neg: 1 + 1 arrays, 0.13-0.22 ns)
LOOP_ARRAY_NS = 0.08
#: fixed costs per call, microseconds: an unfused step, a fused kernel's run, each of
#: its loops, each of its NumPy calls (measured on 16-element inputs)
STEP_US, RUN_US, LOOP_US, CALL_US = 3.0, 1.5, 2.5, 2.0
#: fuse when the fused estimate is at most this fraction of the unfused one
WORTH = 0.85
#: the element count assumed when the output's size is not known before running
ASSUMED_SIZE = 1 << 20


def _unfused_ns(steps: Sequence[str]) -> float:
    total = 0.0
    for step in steps:
        words = step.split()
        if words[0] == "Gelu" and 'approximate="tanh"' not in words:
            total += GELU_ERF_NS
        else:
            total += REFERENCE_NS.get(words[0], 1.0)
    return total


def _fused_ns(plan: Plan, layouts: Sequence[Layout]) -> float:
    instructions = plan.program.instructions
    total = 0.0
    for stage, layout in zip(plan.stages, layouts):
        arrays = len(stage.writes) + sum(kind == FULL for kind in layout.kinds)
        total += LOOP_ARRAY_NS * arrays
        for index in stage.instructions:
            text = instructions[index].text
            total += sum(ns for name, ns in INLINE_NS.items() if name in text)
    return total + sum(CALL_NS[instructions[i].text] for i in plan.calls)


def estimate(plan: Plan, layouts: Sequence[Layout], steps: Sequence[str],
             size: Optional[int]) -> tuple[float, float]:
    """Microseconds for one run: (fused, unfused), for an output of ``size`` elements."""
    elements = ASSUMED_SIZE if size is None else size
    fused = RUN_US + LOOP_US * len(plan.stages) + CALL_US * len(plan.calls) \
        + _fused_ns(plan, layouts) * elements * 1e-3
    unfused = STEP_US * len(steps) + _unfused_ns(steps) * elements * 1e-3
    return fused, unfused


def refusal(plan: Plan, layouts: Sequence[Layout], steps: Sequence[str],
            size: Optional[int]) -> Optional[str]:
    """Why the NumPy engine should run the node rather than the loops (None: fuse)."""
    fused, unfused = estimate(plan, layouts, steps, size)
    if fused <= WORTH * unfused:
        return None
    return (f"the cost model expects no gain: fused {fused:.1f} us vs unfused {unfused:.1f} us "
            f"({len(plan.stages)} loops, {len(plan.calls)} NumPy calls, "
            f"{'unknown' if size is None else size} elements)")


def bytes_moved(plan: Plan, layouts: Sequence[Layout], size: int) -> int:
    """Bytes the loops and calls read and write for an output of ``size`` elements (arrays
    broadcast along an axis counted at their own, small, size as nothing)."""
    instructions = plan.program.instructions
    total = 0
    for stage, layout in zip(plan.stages, layouts):
        for index, kind in zip(stage.reads, layout.kinds):
            total += instructions[index].dtype.itemsize * size if kind == FULL else 0
        total += sum(instructions[i].dtype.itemsize * size for i in stage.writes)
    total += sum(2 * instructions[i].dtype.itemsize * size for i in plan.calls)
    return total
