"""The fused engine: each ``FusedElementwise`` node as generated loops compiled by numba,
ONNX's recurrences (``LSTM``, ``GRU``, ``RNN``) as compiled loops over time, and
``NonMaxSuppression`` as a compiled greedy walk and ``RoiAlign`` as a compiled loop
over each region's planes (``detection``), ``CumSum``,
``ArgMax`` and ``ArgMin`` along any axis but the last as one compiled pass (``scan``),
and ``TopK`` with a small constant k as one pass keeping a heap of the best (``select``).

At bind time the node's steps are lowered to scalar instructions
(``lowering``), staged into loops and NumPy calls (``plan``), and each loop is
generated as Python source (``codegen``) and compiled by numba (``kernels``),
once per process and, through an on-disk cache, once per machine. A run then
calls the compiled loops (``runner``): each reads its inputs once and writes its
output once, where the unfused graph makes a pass over memory per op.

Transcendental functions (tanh, exp, log1p, ...) run as NumPy calls between
loops: NumPy's SIMD versions are 3-50x faster than the scalar libm calls a numba
loop makes (``erf`` is the exception, computed inline).

``supports`` declines, and the NumPy engine runs the node, when the
cost model (``cost``) finds the loops would not beat the unfused ops, when numba
is missing, and for what the loops cannot express: float16 and bfloat16, integer
division and powers, inputs that broadcast other than along leading or trailing
axes (see ``layout``).

A recurrence (``recurrent``) runs a whole sequence per direction in one compiled call
after one matrix product projects every step's input; its loops are compiled, and
cached, the same way. ``supports`` takes the float32 recurrences with constant weights
and the default activations that ``recurrent.refusal`` accepts; the others go to the
next engine.
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from ge.engines.base import BoundKernel, BoundNode, Engine, WritingKernel, register_engine
from ge.engines.fused import cost, detection, kernels, recurrent, scan, select
from ge.engines.fused.codegen import describe, generate
from ge.engines.fused.layout import Layout, classify
from ge.engines.fused.lowering import Unsupported, lower
from ge.engines.fused.plan import Plan, stage, value_shapes
from ge.engines.fused.runner import (
    PARALLEL_MIN_ELEMENTS,
    FusedKernel,
    StageKernels,
    write_into,
)
from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE
from ge.ops.registry import Cost, get_schema, node_cost
from ge.ops.shape_utils import broadcast_shapes

__all__ = ["FusedElementwiseEngine", "Analysis", "analyse", "COMPILE_MIN_ELEMENTS"]

#: Outputs smaller than this run the reference kernel: compiling a loop (0.3 s cold) would
#: cost more than it could ever save on them.
COMPILE_MIN_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class Analysis:
    """What the engine makes of a node: its staged plan and each loop stage's layout."""

    steps: tuple[str, ...]
    plan: Plan
    layouts: tuple[Layout, ...]
    size: Optional[int]  # output elements, None when not known before running


_Key = tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[Any, ...], ...], tuple[Any, ...],
             str]


def _key(node: Node) -> Optional[_Key]:
    if node.op_type != FUSED_ELEMENTWISE or any(v is None for v in node.inputs):
        return None
    inputs = [v for v in node.inputs if v is not None]
    output = node.outputs[0]
    return (tuple(node.attrs["steps"]), tuple(v.dtype.np_dtype.name for v in inputs),
            tuple(tuple(v.shape) for v in inputs), tuple(output.shape),
            output.dtype.np_dtype.name)


def _static_size(shape: Sequence[Any]) -> Optional[int]:
    if all(isinstance(d, int) and d >= 0 for d in shape):
        return math.prod(shape)
    return None


@functools.lru_cache(maxsize=512)
def analyse(key: _Key) -> Union[Analysis, str]:
    """The analysis of a node with this key, or why the engine declines it."""
    steps, dtypes, shapes, output, output_dtype = key
    try:
        program = lower(steps, [np.dtype(d) for d in dtypes])
    except Unsupported as error:
        return str(error)
    if program.instructions[program.result].dtype != np.dtype(output_dtype):
        return f"the steps compute {program.instructions[program.result].dtype}; the op " \
               f"gives {output_dtype}"
    plan = stage(program)
    if not any(program.instructions[i].kind == "input" for i in plan.live):
        return "the steps read no input"
    known = value_shapes(plan, shapes, output, lambda *s: broadcast_shapes(*s) or ())
    layouts = []
    for loop in plan.stages:
        layout = classify([known[r] for r in loop.reads], output)
        if layout is None:
            listing = ", ".join(str(list(known[r])) for r in loop.reads)
            return f"inputs {listing} broadcast to {list(output)} other than along leading " \
                   f"or trailing axes"
        layouts.append(layout)
    return Analysis(steps, plan, tuple(layouts), _static_size(output))


class FusedElementwiseEngine(Engine):
    """Runs ``FusedElementwise`` nodes as generated numba loops (and NumPy calls), and
    LSTM, GRU and RNN nodes as compiled recurrences."""

    name = "fused"

    def analysis(self, node: Node) -> Union[Analysis, str]:
        """The node's analysis, or why the engine cannot run it at all."""
        key = _key(node)
        if key is None:
            return f"{node.op_type} is not {FUSED_ELEMENTWISE}"
        if kernels.numba_module() is None:
            return "numba is not installed"
        return analyse(key)

    def refusal(self, node: Node) -> Optional[str]:
        """Why this engine does not run ``node`` (None: it does): it cannot, or the cost
        model expects the NumPy engine to be as fast."""
        if node.op_type in _LOOP_OPS:
            return _loop_refusal(node)
        analysis = self.analysis(node)
        if isinstance(analysis, str):
            return analysis
        return cost.refusal(analysis.plan, analysis.layouts, analysis.steps, analysis.size)

    def supports(self, node: Node) -> bool:
        """True for FusedElementwise nodes the generated loops run faster than NumPy, and
        that are not known to be too small to repay a compile; the recurrences the
        compiled loops take (``recurrent.refusal``); NonMaxSuppression and RoiAlign; CumSum,
        ArgMax and ArgMin along inner axes; TopK with a constant k up to ``select.MAX_K``."""
        if node.op_type in _LOOP_OPS:
            return self.refusal(node) is None
        analysis = self.analysis(node)
        if isinstance(analysis, Analysis) and analysis.size is not None \
                and analysis.size < COMPILE_MIN_ELEMENTS:
            return False
        return self.refusal(node) is None

    def estimate(self, node: Node) -> Cost:
        """The registry's operations, and the bytes the staged loops move."""
        key = _key(node)
        analysis = analyse(key) if key is not None else None
        base = node_cost(node)
        if not isinstance(analysis, Analysis) or analysis.size is None:
            return base
        return Cost(base.flops, cost.bytes_moved(analysis.plan, analysis.layouts, analysis.size))

    def bind(self, node: Node) -> BoundKernel:
        """The node's kernel; its loops are compiled here, once (or loaded from the cache).
        A node the cost model declines still binds (``supports`` is the compiler's
        question); one the engine cannot run raises ``UnsupportedOpError``. A recurrence
        binds to its compiled loop."""
        if node.op_type in recurrent.OP_TYPES:
            return self._bind_recurrent(node)
        if node.op_type in detection.OP_TYPES:
            return self._bind_detection(node)
        if node.op_type in scan.OP_TYPES:
            return self._bind_scan(node)[0]
        if node.op_type in select.OP_TYPES:
            return self._bind_select(node)[0]
        analysis = self.analysis(node)
        if isinstance(analysis, str):
            raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: the fused engine "
                                     f"cannot run it: {analysis}")
        reference = _reference(analysis.steps)
        if analysis.size is not None:
            return _build(analysis, reference, node.name)
        return _CompileWhenLarge(analysis, reference, node.name)

    def bind_writer(self, node: Node) -> Optional[WritingKernel]:
        """The node's kernel writing into the output array it is handed (the compiled
        loops write the result straight into it); None when the engine cannot run it.
        A recurrence's writer fills all its outputs."""
        if node.op_type in recurrent.OP_TYPES:
            return _recurrent_writer(self._bind_recurrent(node))
        if node.op_type in detection.OP_TYPES:
            return None  # its output's length is the data's to decide
        if node.op_type in scan.OP_TYPES:
            return self._bind_scan(node)[1]
        if node.op_type in select.OP_TYPES:
            return self._bind_select(node)[1]
        if isinstance(self.analysis(node), str):
            return None
        kernel = self.bind(node)

        def write(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
            _run_into(kernel, inputs, outs[0])

        return write

    def bind_node(self, node: Node) -> BoundNode:
        """``bind`` and ``bind_writer`` sharing one binding (a recurrence's weights are
        laid out once)."""
        if node.op_type in recurrent.OP_TYPES:
            kernel = self._bind_recurrent(node)
            return BoundNode(kernel, _recurrent_writer(kernel))
        if node.op_type in detection.OP_TYPES:
            return BoundNode(self._bind_detection(node))
        if node.op_type in scan.OP_TYPES:
            return BoundNode(*self._bind_scan(node))
        if node.op_type in select.OP_TYPES:
            return BoundNode(*self._bind_select(node))
        return super().bind_node(node)

    def _bind_scan(self, node: Node) -> tuple[BoundKernel, WritingKernel]:
        _check_loop(node)
        return scan.bind(node)

    def _bind_select(self, node: Node) -> tuple[BoundKernel, WritingKernel]:
        _check_loop(node)
        return select.bind(node)

    def _bind_detection(self, node: Node) -> BoundKernel:
        _check_loop(node)
        return detection.bind(node)

    def _bind_recurrent(self, node: Node) -> BoundKernel:
        _check_loop(node)
        return recurrent.bind_recurrent(node)


#: the op types the engine runs as hand-written compiled loops (not FusedElementwise)
_LOOP_OPS = recurrent.OP_TYPES | detection.OP_TYPES | scan.OP_TYPES | select.OP_TYPES


def _loop_refusal(node: Node, by_size: bool = True) -> Optional[str]:
    """Why the compiled loops do not take ``node`` (None: they do); ``by_size`` off
    ignores a recurrence's size limit (a node bound on purpose still runs)."""
    if kernels.numba_module() is None:
        return "numba is not installed"
    if node.op_type in recurrent.OP_TYPES:
        return recurrent.refusal(node, by_size=by_size)
    if node.op_type in detection.OP_TYPES:
        return detection.refusal(node)
    if node.op_type in select.OP_TYPES:
        return select.refusal(node)
    return scan.refusal(node)


def _check_loop(node: Node) -> None:
    reason = _loop_refusal(node, by_size=False)
    if reason is not None:
        raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: the fused engine "
                                 f"cannot run it: {reason}")


def _recurrent_writer(kernel: BoundKernel) -> Optional[WritingKernel]:
    """The writer of a bound recurrence (None for the reference kernel numba failing
    leaves)."""
    return kernel.write if isinstance(kernel, recurrent.RecurrentKernel) else None


def _run_into(kernel: BoundKernel, inputs: Sequence[Optional[np.ndarray]],
              out: np.ndarray) -> None:
    """Run a bound kernel of this engine with its output written into ``out``."""
    if isinstance(kernel, (FusedKernel, _CompileWhenLarge)):
        kernel(inputs, out)
    else:  # the reference kernel, numba having failed
        write_into(kernel(inputs)[0], out)


def _build(analysis: Analysis, reference: Any, name: str) -> BoundKernel:
    """Compile the node's loops now (from the disk cache when warm)."""
    try:
        compiled = _compile(analysis)
    except Exception as error:  # noqa: BLE001 - a numba failure must not lose the node
        warnings.warn(f"fused engine: node {name!r} runs its reference kernel; "
                      f"numba failed: {error}", RuntimeWarning, stacklevel=3)
        return lambda inputs: [np.asarray(reference(inputs))]
    numba = kernels.numba_module()
    assert numba is not None
    return FusedKernel(analysis.plan, compiled, numba.get_num_threads(), reference)


class _CompileWhenLarge:
    """A node whose size is known only at run time: small runs take the reference kernel
    (a compile would cost more than it saves); the first large run compiles the loops,
    once, and every later run of any size uses them."""

    def __init__(self, analysis: Analysis, reference: Any, name: str) -> None:
        self.analysis, self.reference, self.name = analysis, reference, name
        self.compiled: Optional[BoundKernel] = None
        self.lock = threading.Lock()

    def __call__(self, inputs: Sequence[Optional[np.ndarray]],
                 out: Optional[np.ndarray] = None) -> list[np.ndarray]:
        if self.compiled is None:
            shapes = [a.shape for a in inputs if a is not None]
            if math.prod(np.broadcast_shapes(*shapes)) < COMPILE_MIN_ELEMENTS:
                return [write_into(np.asarray(self.reference(inputs)), out)]
        compiled = self.force()
        if out is None:
            return compiled(inputs)
        _run_into(compiled, inputs, out)
        return [out]

    def force(self) -> BoundKernel:
        """The compiled kernel, compiling it now if no run has yet."""
        with self.lock:
            if self.compiled is None:
                self.compiled = _build(self.analysis, self.reference, self.name)
        return self.compiled


def _reference(steps: tuple[str, ...]) -> Any:
    kernel = get_schema(FUSED_ELEMENTWISE).kernel

    def run(inputs: Sequence[Optional[np.ndarray]]) -> np.ndarray:
        return kernel(*inputs, steps=steps)

    return run


def _compile(analysis: Analysis) -> list[StageKernels]:
    """Each stage's loops: serial always, parallel unless the output is known small."""
    large = analysis.size is None or analysis.size >= PARALLEL_MIN_ELEMENTS
    description = describe(analysis.steps)
    compiled = []
    for loop, layout in zip(analysis.plan.stages, analysis.layouts):
        source = generate(analysis.plan.program, loop, layout, description)
        serial = kernels.compile_loop(source, parallel=False).function
        parallel = kernels.compile_loop(source, parallel=True).function if large else None
        compiled.append(StageKernels(layout, serial, parallel))
    return compiled


register_engine(FusedElementwiseEngine())
