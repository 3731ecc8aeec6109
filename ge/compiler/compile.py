"""``ge.compile``: graph in, executable out.

Steps: check the graph; copy it so the user's graph is never changed; run the
optimization passes of the chosen level on the copy (verifying each one
numerically when asked); order the nodes (a memory-aware order when it lowers the
estimated peak of live values); assign each node an engine (the first in the
preference list that supports it, the NumPy engine as fallback); give every value a
slot and work out after which step each slot's last reader has run; and assign the
steps to streams with the events between them (``streams.py``). The memory plan is
made per input signature when a session first runs it (``loader.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Callable, Optional

from ge.compiler.executable import Executable, IOSpec, Step
from ge.compiler.specialize import shared_dimension_names
from ge.compiler.streams import StreamPlan, assign_streams
from ge.engines import Engine, get_engine
from ge.errors import CompileError, GEError, GraphError, UnsupportedOpError
from ge.ir import MEMORY_OPTIONS_KEY, Graph, Node, Value, collector_paused, is_static
from ge.ir.tensor import Tensor, compact, num_elements
from ge.memory import StepUse, live_peak, memory_aware_order
from ge.ops.registry import has_op, node_cost
from ge.passes import PassManager, passes_for_level

__all__ = ["compile", "DEFAULT_ENGINES", "DEFAULT_OPT_LEVEL"]

#: the preference list when ``engines`` is not given: numba's compiled loops for what the
#: fused engine takes (the recurrences it compiles, which torch runs slower, and ops torch
#: has no kernel for, such as the fused elementwise regions), PyTorch's kernels where they
#: apply (when PyTorch is installed), NumPy for the rest
DEFAULT_ENGINES: tuple[str, ...] = ("fused", "onednn", "torch", "numpy")
DEFAULT_OPT_LEVEL = 3


def compile(graph: Graph, *, opt_level: int = DEFAULT_OPT_LEVEL,  # noqa: A001
            engines: Optional[Sequence[str]] = None, verify: bool = False,
            streams: Optional[int] = None, threads: Optional[int] = None) -> Executable:
    """Compile ``graph`` for execution by ``ge.Session``.

    ``opt_level``: 0 none, 1 basic (folding, elimination), 2 extended (and fusions),
    3 all (and layout; the default). ``verify`` runs the reference interpreter before
    and after every pass and raises ``VerificationError`` naming the first pass (and
    node) that changed the outputs. ``engines`` is the preference list of engine names;
    the NumPy engine is always the last resort. ``streams``: how many streams (worker
    threads) independent branches may run on; None lets the compiler decide from its
    cost estimates (``ge.compiler.streams``). ``threads``: how many threads one kernel
    may use (BLAS, the fused engine's loops), kept for the sessions of this executable
    (``ge.Session(executable, threads=)`` and ``GE_NUM_THREADS`` also set it). Raises
    ``GraphError`` kin for an invalid graph and ``UnsupportedOpError`` listing every op
    type no engine supports.
    """
    if not isinstance(graph, Graph):
        raise CompileError(f"ge.compile expects a ge.Graph, got {type(graph).__name__}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise CompileError(f"threads must be a positive integer or None, got {threads!r}")
    with collector_paused():
        executable = _compile(graph, opt_level, engines, verify, streams)
    executable.options["threads"] = threads
    return executable


def _compile(graph: Graph, opt_level: int, engines: Optional[Sequence[str]],
             verify: bool, streams: Optional[int]) -> Executable:
    if streams is not None and (isinstance(streams, bool) or not isinstance(streams, int)
                                or streams < 1):
        raise CompileError(f"streams must be a positive integer or None, got {streams!r}")
    started = time.perf_counter()
    _check_known_ops(graph)
    graph.validate()
    working = graph.clone()
    try:
        pipeline = passes_for_level(opt_level)
    except ValueError as error:
        raise CompileError(str(error)) from None
    records = PassManager(pipeline, verify=verify).run(working)
    # weights the optimizer left as views of a parsed file it mostly replaced get their
    # own bytes, so that the file's buffer can be freed
    compact(n.attrs["value"] for n in working.nodes
            if n.op_type == "Const" and isinstance(n.attrs.get("value"), Tensor))
    order = working.topological_order()
    chosen = _engine_list(engines)
    assignment = _assign_engines(order, chosen)
    executable = _plan(working, order, assignment)
    nodes = {node.name: node for node in order}
    if _is_chain(executable.steps):  # each step reads the one before: nothing to overlap
        stream_plan = StreamPlan.single(len(executable.steps), streams, "the steps are a chain")
    else:
        stream_plan = assign_streams(executable.steps, [_cost(nodes[step.node])
                                                        for step in executable.steps], streams)
    if stream_plan.count > 1:
        executable.streams = stream_plan.streams
        executable.stream_waits = stream_plan.waits
    executable.options = {"opt_level": opt_level, "engines": engines, "verify": verify,
                          "streams": streams}
    executable.memory_options = _memory_options(graph)
    if shared_dimension_names(graph):
        executable.source = graph.clone()
    executable.report = {
        "graph": graph.name,
        "opt_level": opt_level,
        "verified": verify,
        "nodes_before": len(graph),
        "nodes": len(working),
        "steps": len(executable.steps),
        "engines": executable.engine_histogram(),
        "engines_by_op": executable.engine_ops(),
        "engines_unavailable": {e.name: reason for e in chosen
                                if (reason := e.unavailable_reason()) is not None},
        "passes": [record.as_dict() for record in records],
        "schedule": executable.report.get("schedule", {}),
        "streams": stream_plan.report,
        "threads": _threads_report(nodes, executable.steps),
        "compile_seconds": time.perf_counter() - started,
    }
    return executable


#: a graph whose every step is estimated under this many floating-point operations and
#: bytes moved (a few microseconds of one core) runs its kernels on one thread unless told
#: how many: waking a second thread for each kernel and joining it costs more than it
#: saves (Silero-VAD: 72 us a run on one thread, 82 us on two). A step moving more data
#: (an elementwise op over 400K values: 3 MB) runs faster on every core.
SERIAL_STEP_FLOPS = 2e6
SERIAL_STEP_BYTES = 1e6


def _threads_report(nodes: dict[str, Node], steps: Sequence[Step]) -> dict[str, Any]:
    """The largest step's estimated flops and bytes (None where a shape or a cost is
    unknown) and whether the session runs the graph on one thread when no thread count
    is given."""
    flops = data = 0.0
    for step in steps:
        node = nodes[step.node]
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        cost = _cost(node) if all(is_static(v.shape) for v in values) else None
        if cost is None:
            return {"largest_step_flops": None, "largest_step_bytes": None, "serial": False}
        flops, data = max(flops, cost[0]), max(data, cost[1])
    return {"largest_step_flops": flops, "largest_step_bytes": data,
            "serial": bool(steps) and flops < SERIAL_STEP_FLOPS and data < SERIAL_STEP_BYTES}


def _is_chain(steps: Sequence[Step]) -> bool:
    """True when every step reads an output of the step just before it."""
    return all(set(step.inputs) & set(before.outputs)
               for before, step in zip(steps, steps[1:]))


def _cost(node: Node) -> Optional[tuple[float, float]]:
    try:
        flops, data = node_cost(node)
    except GEError:
        return None
    return float(flops), float(data)


def _memory_options(graph: Graph) -> dict[str, bool]:
    """The planner's switches: what ``gp.MemoryPass`` recorded on the graph, else all on."""
    recorded = graph.metadata.get(MEMORY_OPTIONS_KEY)
    recorded = recorded if isinstance(recorded, dict) else {}
    options = {"memory_reuse": bool(recorded.get("memory_reuse", True)),
               "inplace": bool(recorded.get("inplace", True))}
    if not recorded.get("batch_slicing", True):
        options["batch_slicing"] = False  # GE's own switch, named only when off
    return options


def _check_known_ops(graph: Graph) -> None:
    unknown = sorted({node.op_type for node in graph.nodes if not has_op(node.op_type)})
    if unknown:
        raise UnsupportedOpError(f"graph {graph.name!r} uses op types GE does not know: "
                                 f"{', '.join(unknown)}")


def _engine_list(names: Optional[Sequence[str]]) -> list[Engine]:
    ordered = list(names or DEFAULT_ENGINES)
    if "numpy" not in ordered:
        ordered.append("numpy")
    return [get_engine(name) for name in ordered]


def _assign_engines(order: list[Node], engines: list[Engine]) -> dict[int, str]:
    assignment: dict[int, str] = {}
    unsupported: set[str] = set()
    for node in order:
        if node.op_type in ("Data", "Const"):
            continue
        engine = next((e for e in engines if e.supports(node)), None)
        if engine is None:
            unsupported.add(node.op_type)
        else:
            assignment[id(node)] = engine.name
    if unsupported:
        names = ", ".join(e.name for e in engines)
        raise UnsupportedOpError(f"no engine among ({names}) supports op types: "
                                 f"{', '.join(sorted(unsupported))}")
    return assignment


def _plan(graph: Graph, order: list[Node], assignment: dict[int, str]) -> Executable:
    slots: dict[int, int] = {}

    def slot_of(value: Value) -> int:
        return slots.setdefault(id(value), len(slots))

    inputs = [IOSpec(v.producer.name, v.desc, slot_of(v)) for v in graph.inputs]
    if len({spec.name for spec in inputs}) != len(inputs):
        raise GraphError(f"graph {graph.name!r} has two inputs with the same name")
    constants = {slot_of(n.outputs[0]): n.name for n in order if n.op_type == "Const"}
    computing = [n for n in order if id(n) in assignment]
    inputs_slots = {spec.slot for spec in inputs}
    for node in computing:  # number every value before ordering
        for produced in node.outputs:
            slot_of(produced)
    pinned = inputs_slots | set(constants) | {slot_of(v) for v in graph.outputs}
    computing, schedule = _memory_aware(computing, slot_of, pinned)
    last_reader: dict[int, int] = {}
    for position, node in enumerate(computing):
        for value in node.inputs:
            if value is not None:
                last_reader[slot_of(value)] = position
        for value in node.outputs:
            slot_of(value)
    kept = {slot_of(v) for v in graph.outputs} | set(constants) | {s.slot for s in inputs}
    releases: dict[int, list[int]] = {}
    for slot, position in last_reader.items():
        if slot not in kept:
            releases.setdefault(position, []).append(slot)
    for position, node in enumerate(computing):  # outputs nobody reads die at once
        for value in node.outputs:
            slot = slot_of(value)
            if slot not in last_reader and slot not in kept:
                releases.setdefault(position, []).append(slot)
    steps = [
        Step(node.name, node.op_type, assignment[id(node)],
             tuple(-1 if v is None else slot_of(v) for v in node.inputs),
             tuple(slot_of(v) for v in node.outputs),
             tuple(sorted(releases.get(position, ()))))
        for position, node in enumerate(computing)
    ]
    outputs = [IOSpec(v.name, v.desc, slot_of(v)) for v in graph.outputs]
    executable = Executable(graph, steps, inputs, outputs, constants, len(slots))
    executable.report["schedule"] = schedule
    return executable


def _memory_aware(computing: list[Node], slot_of: Callable[[Value], int], pinned: set[int]
                  ) -> tuple[list[Node], dict[str, Any]]:
    """``computing`` in the memory-aware order when that lowers the estimated peak of
    live bytes (unknown dimensions counted as 1), else as it was; and what was decided."""
    uses = [StepUse(tuple(-1 if v is None else slot_of(v) for v in node.inputs),
                    tuple(slot_of(v) for v in node.outputs)) for node in computing]
    if all(set(use.inputs) & set(before.outputs) for before, use in zip(uses, uses[1:])):
        return computing, {"order": "graph order (a chain: the only order)"}
    sizes = {slot_of(v): num_elements(v.shape) * v.dtype.itemsize
             for node in computing for v in node.outputs}
    given = live_peak(uses, sizes, pinned)
    order = memory_aware_order(uses, sizes, pinned)
    reordered = live_peak(uses, sizes, pinned, order)
    chosen = "memory-aware" if reordered < given else "graph order"
    if chosen == "memory-aware":
        computing = [computing[i] for i in order]
    return computing, {"order": chosen, "graph_order_peak_bytes": given,
                       "memory_aware_peak_bytes": reordered}
