"""Running a staged plan: the bound kernel of one ``FusedElementwise`` node.

A run allocates the output (and any temporary a call needs), then performs the
plan's actions in order: each loop stage through its compiled serial or
parallel loop, each call through NumPy. The layout of every loop's arrays is
worked out once per distinct set of input shapes and remembered; shapes that
broadcast in a way the compiled loops do not cover, and empty outputs, go to
the op's reference kernel. A large plan with NumPy calls between its loops runs
chunk by chunk (``CHUNK_ELEMENTS``), its temporaries staying in cache.

Serial or parallel is chosen per run by the output's size: numba's threads,
asleep between kernels, take 0.1-0.3 ms to wake on this 2-core machine (and
OpenMP's several ms), which only large loops repay (``PARALLEL_MIN_ELEMENTS``,
measured). Parallel loops without a split axis are cut into blocks of
``BLOCK_ELEMENTS``; one parallel loop runs at a time in the process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ge.engines.fused.layout import Layout, classify
from ge.engines.fused.lowering import constant_value
from ge.engines.fused.plan import Plan, Stage, value_shapes
from ge.runtime.threads import current_limit

__all__ = ["CALL_FUNCTIONS", "StageKernels", "FusedKernel", "PARALLEL_MIN_ELEMENTS",
           "BLOCK_ELEMENTS", "write_into"]

#: outputs of at least this many elements run the parallel loop: measured on 2 cores, the
#: parallel loop wins from 2-4M elements on (threads asleep, or after a matrix product)
PARALLEL_MIN_ELEMENTS = 1 << 22
#: the block a parallel loop gives a thread at a time, when the layout leaves it free
BLOCK_ELEMENTS = 1 << 16
#: plans with NumPy calls between loops run this many elements at a time, so that their
#: temporaries (512 KB in float32) stay in the 1 MB L2 cache; measured on the benchmark
#: chain: 2^14 26.7 ms (per-chunk overhead), 2^16 17.2, 2^17 15.6, 2^18 14.9, unchunked 21.8
CHUNK_ELEMENTS = 1 << 17

Function = Callable[..., np.ndarray]

#: one parallel loop at a time: numba's workqueue threads abort the process when two Python
#: threads launch parallel loops at once; a run that finds the lock taken runs serially
_PARALLEL = threading.Lock()


#: the NumPy function of each call (the steps' own reference computations)
CALL_FUNCTIONS: dict[str, Function] = {
    "tanh": np.tanh, "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "arcsinh": np.arcsinh,
    "arccosh": np.arccosh, "arctanh": np.arctanh, "power": np.power,
}


def write_into(result: np.ndarray, out: Optional[np.ndarray]) -> np.ndarray:
    """``result`` when ``out`` is None, else ``out`` holding a copy of it (no copy when
    ``result`` is ``out`` already)."""
    if out is None:
        return result
    if result is not out:
        np.copyto(out, result)
    return out


@dataclass(frozen=True)
class StageKernels:
    """A stage's compiled loops for the layout found at bind time (``parallel`` None when
    it was not compiled: outputs known to be small)."""

    layout: Layout
    serial: Callable[..., Any]
    parallel: Optional[Callable[..., Any]]


@dataclass(frozen=True)
class _RunLayout:
    """What one set of input shapes needs: the output's shape and size, and each stage's
    block length (None: the stage has no layout for these shapes)."""

    shape: tuple[int, ...]
    size: int
    inner: tuple[Optional[int], ...]


class FusedKernel:
    """The bound kernel: ``kernel(inputs) -> [output]``."""

    def __init__(self, plan: Plan, kernels: Sequence[StageKernels], threads: int,
                 reference: Callable[[Sequence[Optional[np.ndarray]]], np.ndarray]) -> None:
        self.plan = plan
        self.kernels = list(kernels)
        self.threads = threads
        self.reference = reference
        instructions = plan.program.instructions
        self._inputs = sorted((i, instructions[i].index) for i in plan.live
                              if instructions[i].kind == "input")
        self._constants = {i: np.array(constant_value(instructions[i]), instructions[i].dtype)
                           for i in plan.live if instructions[i].kind == "constant"}
        self._layouts: dict[tuple[tuple[int, ...], ...], _RunLayout] = {}
        self.fallbacks = 0  # runs the reference kernel took (layouts not compiled)

    def _run_layout(self, key: tuple[tuple[int, ...], ...]) -> _RunLayout:
        output = tuple(np.broadcast_shapes(*key))
        by_position = {position: shape for (_, position), shape in zip(self._inputs, key)}
        shapes = value_shapes(self.plan, by_position, output, np.broadcast_shapes)
        inner: list[Optional[int]] = []
        for stage, kernels in zip(self.plan.stages, self.kernels):
            layout = classify([shapes[r] for r in stage.reads], output)
            if layout != kernels.layout:
                inner.append(None)
            elif layout.split is None:
                inner.append(0)
            else:
                inner.append(math.prod(output[layout.split:]))
        found = _RunLayout(output, math.prod(output), tuple(inner))
        if len(self._layouts) > 256:
            self._layouts.clear()
        self._layouts[key] = found
        return found

    def __call__(self, inputs: Sequence[Optional[np.ndarray]],
                 out: Optional[np.ndarray] = None) -> list[np.ndarray]:
        """The node's output; written into ``out`` when given (a C-contiguous array of the
        output's shape and dtype, overlapping no input), which is then returned."""
        values: dict[int, Any] = dict(self._constants)
        for index, position in self._inputs:
            values[index] = np.asarray(inputs[position])
        key = tuple(values[i].shape for i, _ in self._inputs)
        layout = self._layouts.get(key) or self._run_layout(key)
        if layout.size == 0 or None in layout.inner:
            self.fallbacks += 1
            return [write_into(np.asarray(self.reference(inputs)), out)]
        with np.errstate(all="ignore"):
            if self.plan.calls and layout.size >= 2 * CHUNK_ELEMENTS \
                    and not any(layout.inner):
                return [self._chunked(values, layout, out)]
            self._execute(values, layout.shape, layout.size, layout.inner, out)
        return [write_into(values[self.plan.program.result].reshape(layout.shape), out)]

    def _execute(self, values: dict[int, Any], shape: tuple[int, ...], size: int,
                 inner: Sequence[Optional[int]], out: Optional[np.ndarray] = None) -> None:
        """The plan's actions on ``values``, for an output of ``shape`` (written into
        ``out`` when given and the last action is a loop)."""
        stages = iter(zip(inner, self.kernels))
        for action in self.plan.actions:
            if action.stage is not None:
                block, kernels = next(stages)
                self._loop(action.stage, kernels, values, shape, size, block, out)
            else:
                assert action.call is not None
                self._call(action.call, action.in_place, values)

    def _chunked(self, values: dict[int, Any], layout: _RunLayout,
                 out: Optional[np.ndarray] = None) -> np.ndarray:
        """A plan with NumPy calls between its loops, on an output whose loops need no
        split axis, run ``CHUNK_ELEMENTS`` at a time: its temporaries then stay in cache
        instead of making a round trip through memory each. Written into ``out`` if given."""
        result = self.plan.program.result
        if out is None:
            out = np.empty(layout.shape, self.plan.program.instructions[result].dtype)
        flat_out = out.reshape(-1)
        arrays = {i: np.ravel(values[i]) for i, _ in self._inputs}
        for start in range(0, layout.size, CHUNK_ELEMENTS):
            stop = min(start + CHUNK_ELEMENTS, layout.size)
            chunk = dict(self._constants)
            for index, array in arrays.items():
                chunk[index] = array[start:stop] if array.size == layout.size else array
            target = flat_out[start:stop]
            self._execute(chunk, (stop - start,), stop - start, [0] * len(self.kernels), target)
            if chunk[result] is not target:
                target[...] = chunk[result]
        return out

    def _loop(self, stage: Stage, kernels: StageKernels, values: dict[int, Any],
              shape: tuple[int, ...], size: int, inner: Optional[int],
              out: Optional[np.ndarray]) -> None:
        instructions = self.plan.program.instructions
        outputs = []
        for index in stage.writes:
            if out is not None and index == self.plan.program.result:
                values[index] = out
            else:
                values[index] = np.empty(shape, instructions[index].dtype)
            outputs.append(values[index].reshape(-1))
        reads = [np.ravel(values[index]) for index in stage.reads]
        limit = current_limit()
        threads = self.threads if limit is None else min(self.threads, limit)
        if kernels.parallel is not None and size >= PARALLEL_MIN_ELEMENTS and threads > 1 \
                and _PARALLEL.acquire(blocking=False):
            try:
                block = inner or min(BLOCK_ELEMENTS, -(-size // threads))
                if threads != self.threads:
                    _set_numba_threads(threads)
                try:
                    kernels.parallel(size, block, *outputs, *reads)
                finally:
                    if threads != self.threads:
                        _set_numba_threads(self.threads)
            finally:
                _PARALLEL.release()
        else:
            kernels.serial(size, inner or size, *outputs, *reads)

    def _call(self, index: int, in_place: bool, values: dict[int, Any]) -> None:
        instruction = self.plan.program.instructions[index]
        function = CALL_FUNCTIONS[instruction.text]
        operands = [values[o] for o in instruction.operands]
        if in_place:
            values[index] = function(operands[0], out=operands[0])
        else:
            values[index] = np.asarray(function(*operands))


def _set_numba_threads(count: int) -> None:
    """numba's thread count for this thread's next parallel loops (a run's limit)."""
    import numba

    numba.set_num_threads(count)
