"""Control flow: If, Loop and Scan, ops that hold subgraphs.

Each op holds its subgraphs as ``ge.ir.Graph`` attributes. A subgraph never
reads a value of an enclosing graph: every outer value it needs is one of its
``Data`` nodes, and the op passes that value in explicitly as an extra
(*captured*) input. A subgraph's inputs are its ``Data`` nodes in order: first
its formal inputs (as ONNX lists them), then the captured values.

* ``If(cond, *captured)``: both branches take the same captured values.
* ``Loop(M, cond, *carried, *captured)``: the body takes
  ``(iteration, cond, *carried, *captured)`` and returns
  ``(cond, *carried, *scan_outputs)``; ``num_captured`` says how many of the
  trailing inputs are captured.
* ``Scan(*states, *scan_inputs, *captured)``: the body takes
  ``(*states, *scan_elements, *captured)`` and returns
  ``(*states, *scan_output_elements)``.

The kernels run their subgraphs with the reference interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import ExecutionError
from ge.ir import DataType, Graph, TensorDesc
from ge.ir.tensor import Dim, Shape, is_static_dim
from ge.ops.interpreter import evaluate
from ge.ops.registry import REQUIRED, Attr, AttrType, InferenceContext, Input, register_op
from ge.ops.shape_utils import normalize_axis

__all__ = ["MAX_LOOP_ITERATIONS", "merge_descs", "run_subgraph"]

# A Loop that runs this many iterations without reaching its trip count is taken to run away.
MAX_LOOP_ITERATIONS = 10_000_000


def _non_negative(value: int) -> Optional[str]:
    return None if value >= 0 else "must be >= 0"


def _merge_dim(a: Dim, b: Dim) -> Dim:
    return a if a == b else -1


def merge_descs(first: TensorDesc, second: TensorDesc) -> Optional[TensorDesc]:
    """One descriptor covering both: dimensions that differ become -1; None if ranks differ."""
    if len(first.shape) != len(second.shape):
        return None
    shape = tuple(_merge_dim(a, b) for a, b in zip(first.shape, second.shape))
    return TensorDesc(shape, first.dtype)


def run_subgraph(graph: Graph, args: Sequence[Any]) -> list[np.ndarray]:
    """Evaluate ``graph`` with its inputs (its ``Data`` nodes, in order) bound to ``args``."""
    inputs = graph.inputs
    if len(inputs) != len(args):
        raise ExecutionError(f"subgraph {graph.name!r} takes {len(inputs)} inputs, "
                             f"got {len(args)}")
    feeds = {value.producer.name: array for value, array in zip(inputs, args)}
    results = evaluate(graph, feeds)
    return [results[value.name] for value in graph.outputs]


def _as_dtype(array: np.ndarray, dtype: DataType) -> np.ndarray:
    return np.asarray(array).astype(dtype.np_dtype, copy=False)


def _scalar(array: np.ndarray, what: str) -> Any:
    flat = np.asarray(array).reshape(-1)
    if flat.size != 1:
        raise ExecutionError(f"{what} must hold exactly one element, got shape "
                             f"{list(np.shape(array))}")
    return flat[0].item()


def _check_graph_inputs(ctx: InferenceContext, key: str, expected: int, what: str) -> Graph:
    graph: Graph = ctx.attr(key)
    count = len(graph.inputs)
    if count != expected:
        raise ctx.fail(f"{key} takes {count} inputs; the node gives it {expected} ({what})")
    return graph


def _empty_like_desc(desc: TensorDesc, leading: Sequence[int] = ()) -> np.ndarray:
    """An empty array for a scan output that no iteration produced."""
    dims = [d if isinstance(d, int) and d >= 0 else 0 for d in desc.shape]
    return np.zeros(tuple(leading) + tuple(dims), dtype=desc.dtype.np_dtype)


# -- If ---------------------------------------------------------------------------------

def _infer_if(ctx: InferenceContext) -> list[TensorDesc]:
    if ctx.has_input(0) and ctx.dtype(0) is not DataType.DT_BOOL:
        raise ctx.fail_dtype(f"cond must be bool, got {ctx.dtype(0).short_name}")
    captured = ctx.num_inputs - 1
    then_graph = _check_graph_inputs(ctx, "then_branch", captured, "its captured values")
    else_graph = _check_graph_inputs(ctx, "else_branch", captured, "its captured values")
    then_outputs, else_outputs = then_graph.outputs, else_graph.outputs
    if len(then_outputs) != len(else_outputs):
        raise ctx.fail(f"then_branch has {len(then_outputs)} outputs, else_branch "
                       f"{len(else_outputs)}; both branches must give the same number")
    descs = []
    for index, (then_value, else_value) in enumerate(zip(then_outputs, else_outputs)):
        if then_value.dtype is not else_value.dtype:
            raise ctx.fail_dtype(f"output {index} is {then_value.dtype.short_name} in "
                                 f"then_branch but {else_value.dtype.short_name} in else_branch")
        merged = merge_descs(then_value.desc, else_value.desc)
        if merged is None:
            raise ctx.fail(f"output {index} has shape {list(then_value.shape)} in then_branch "
                           f"but {list(else_value.shape)} in else_branch; a GE value has one "
                           f"rank, so both branches must give the same rank (dimensions "
                           f"that differ become unknown)")
        descs.append(merged)
    return descs


@register_op(
    "If",
    inputs=["cond", Input("captured", optional=True, variadic=True,
                          doc="outer values the branches read, fed to their inputs in order")],
    outputs=("outputs",),
    attrs=[Attr("then_branch", AttrType.GRAPH, REQUIRED, doc="run when cond is true"),
           Attr("else_branch", AttrType.GRAPH, REQUIRED, doc="run when cond is false"),
           Attr("then_error", AttrType.STRING, "",
                doc="why then_branch cannot run (an imported branch that does not type "
                    "check; it holds the other branch as a placeholder): taking it raises "
                    "this at run time"),
           Attr("else_error", AttrType.STRING, "", doc="as then_error, for else_branch")],
    infer=_infer_if,
    variadic_outputs=True,
    num_outputs=lambda ctx: len(ctx.attr("then_branch").outputs),
)
def if_kernel(cond: np.ndarray, *captured: np.ndarray, then_branch: Graph,
              else_branch: Graph, then_error: str = "",
              else_error: str = "") -> tuple[np.ndarray, ...]:
    """outputs = then_branch(*captured) if cond else else_branch(*captured)."""
    taken = bool(_scalar(cond, "If's cond"))
    error = then_error if taken else else_error
    if error:
        branch = "then_branch" if taken else "else_branch"
        raise ExecutionError(f"the run took {branch}, which cannot run: {error}")
    chosen = then_branch if taken else else_branch
    results = run_subgraph(chosen, captured)
    return tuple(_as_dtype(array, value.dtype)
                 for array, value in zip(results, then_branch.outputs))


# -- Loop -------------------------------------------------------------------------------

def _loop_counts(ctx: InferenceContext) -> tuple[int, int, int]:
    """(carried, captured, scan outputs) of a Loop node."""
    values = max(ctx.num_inputs - 2, 0)
    captured = ctx.attr("num_captured")
    carried = values - captured
    if carried < 0:
        raise ctx.fail(f"num_captured is {captured} but the node has only {values} values "
                       f"after M and cond")
    body = _check_graph_inputs(ctx, "body", 2 + values,
                               "iteration number, cond, carried and captured values")
    scans = len(body.outputs) - 1 - carried
    if scans < 0:
        raise ctx.fail(f"body gives {len(body.outputs)} outputs; it must give cond and the "
                       f"{carried} carried values")
    return carried, captured, scans


def _infer_loop(ctx: InferenceContext) -> list[TensorDesc]:
    for index, what in ((0, "M"), (1, "cond")):
        if ctx.has_input(index) and len(ctx.shape(index)) > 1:
            raise ctx.fail(f"{what} must be a scalar, got shape {list(ctx.shape(index))}")
    carried, _, _ = _loop_counts(ctx)
    body: Graph = ctx.attr("body")
    outputs = body.outputs
    descs = _carried_descs(ctx, [ctx.input(2 + i) for i in range(carried)],
                           [v.desc for v in outputs[1:1 + carried]])
    descs += [TensorDesc((-1, *v.shape), v.dtype) for v in outputs[1 + carried:]]
    return descs


def _carried_descs(ctx: InferenceContext, initial: Sequence[TensorDesc],
                   produced: Sequence[TensorDesc]) -> list[TensorDesc]:
    """Final values of loop-carried values: the initial ones merged with the body's."""
    descs = []
    for index, (start, after) in enumerate(zip(initial, produced)):
        if start.dtype is not after.dtype:
            raise ctx.fail_dtype(f"carried value {index} enters the body as "
                                 f"{start.dtype.short_name} but leaves it as "
                                 f"{after.dtype.short_name}")
        merged = merge_descs(start, after)
        if merged is None:
            raise ctx.fail(f"carried value {index} enters the body with shape "
                           f"{list(start.shape)} but leaves it with {list(after.shape)}; its "
                           f"rank must not change")
        descs.append(merged)
    return descs


def _stack(pieces: list[np.ndarray], desc: TensorDesc, what: str) -> np.ndarray:
    if not pieces:
        return _empty_like_desc(desc, (0,))
    shapes = {piece.shape for piece in pieces}
    if len(shapes) > 1:
        raise ExecutionError(f"{what} changes shape between iterations ({sorted(shapes)}); "
                             f"every iteration must give the same shape")
    return _as_dtype(np.stack(pieces), desc.dtype)


@register_op(
    "Loop",
    inputs=[Input("max_trip_count", optional=True, doc="int64 scalar M; absent: no limit"),
            Input("cond", optional=True, doc="bool scalar; absent: true"),
            Input("values", optional=True, variadic=True,
                  doc="initial carried values, then the captured outer values")],
    outputs=("outputs",),
    attrs=[Attr("body", AttrType.GRAPH, REQUIRED,
                doc="(iteration, cond, *carried, *captured) -> (cond, *carried, *scans)"),
           Attr("num_captured", AttrType.INT, 0, check=_non_negative,
                doc="how many trailing inputs are captured outer values")],
    infer=_infer_loop,
    variadic_outputs=True,
    num_outputs=lambda ctx: max(len(ctx.attr("body").outputs) - 1, 0),
)
def loop_kernel(max_trip_count: Optional[np.ndarray], cond: Optional[np.ndarray],
                *values: np.ndarray, body: Graph, num_captured: int) -> tuple[np.ndarray, ...]:
    """Run ``body`` while ``iteration < M`` and ``cond``; stack the scan outputs.

    Without M the body's cond decides; without cond the loop runs M times (the
    body's cond is ignored). Raises ``ExecutionError`` past ``MAX_LOOP_ITERATIONS``.
    """
    carried_count = len(values) - num_captured
    carried = list(values[:carried_count])
    captured = list(values[carried_count:])
    limit = None if max_trip_count is None else int(_scalar(max_trip_count, "Loop's M"))
    keep_going = True if cond is None else bool(_scalar(cond, "Loop's cond"))
    outputs = body.outputs
    scans: list[list[np.ndarray]] = [[] for _ in outputs[1 + carried_count:]]
    iteration = 0
    while keep_going and (limit is None or iteration < limit):
        if iteration >= MAX_LOOP_ITERATIONS:
            raise ExecutionError(f"Loop ran {MAX_LOOP_ITERATIONS} iterations without ending "
                                 f"(no trip count, or one that large, and a condition that "
                                 f"stays true)")
        results = run_subgraph(body, [np.array(iteration, np.int64), np.array(keep_going),
                                      *carried, *captured])
        if cond is not None:
            keep_going = bool(_scalar(results[0], "Loop body's cond output"))
        carried = results[1:1 + carried_count]
        for pieces, array in zip(scans, results[1 + carried_count:]):
            pieces.append(np.asarray(array))
        iteration += 1
    finals = [np.asarray(array).astype(start.dtype, copy=False)
              for array, start in zip(carried, values)]
    stacked = [_stack(pieces, value.desc, f"Loop scan output {index}")
               for index, (pieces, value) in enumerate(zip(scans, outputs[1 + carried_count:]))]
    return tuple(finals + stacked)


# -- Scan -------------------------------------------------------------------------------

def _scan_counts(ctx: InferenceContext) -> tuple[int, int, int, int]:
    """(states, scan inputs, captured, scan outputs) of a Scan node."""
    scan_inputs, captured = ctx.attr("num_scan_inputs"), ctx.attr("num_captured")
    states = ctx.num_inputs - scan_inputs - captured
    if scan_inputs < 1 or states < 0:
        raise ctx.fail(f"{ctx.num_inputs} inputs cannot hold {scan_inputs} scan inputs and "
                       f"{captured} captured values")
    body = _check_graph_inputs(ctx, "body", ctx.num_inputs, "states, scan elements, captured")
    scan_outputs = len(body.outputs) - states
    if scan_outputs < 0:
        raise ctx.fail(f"body gives {len(body.outputs)} outputs; it must give the {states} "
                       f"states")
    return states, scan_inputs, captured, scan_outputs


def _listed(ctx: InferenceContext, key: str, count: int) -> list[int]:
    values = ctx.attr(key)
    if values is None:
        return [0] * count
    if len(values) != count:
        raise ctx.fail(f"{key} has {len(values)} entries; expected {count}")
    return list(values)


def _infer_scan(ctx: InferenceContext) -> list[TensorDesc]:
    states, scan_inputs, _, scan_outputs = _scan_counts(ctx)
    axes = _listed(ctx, "scan_input_axes", scan_inputs)
    _listed(ctx, "scan_input_directions", scan_inputs)
    _listed(ctx, "scan_output_directions", scan_outputs)
    length: Dim = -1
    for index, axis in enumerate(axes):
        shape = ctx.shape(states + index)
        dim = shape[normalize_axis(axis, len(shape))]
        if is_static_dim(dim):
            if is_static_dim(length) and length != dim:
                raise ctx.fail(f"scan inputs have different sequence lengths ({length} and "
                               f"{dim})")
            length = dim
        elif not is_static_dim(length) and isinstance(dim, str):
            length = dim
    body: Graph = ctx.attr("body")
    outputs = body.outputs
    descs = _carried_descs(ctx, [ctx.input(i) for i in range(states)],
                           [v.desc for v in outputs[:states]])
    out_axes = _listed(ctx, "scan_output_axes", scan_outputs)
    for value, axis in zip(outputs[states:], out_axes):
        dims: list[Dim] = list(value.shape)
        dims.insert(normalize_axis(axis, len(dims) + 1), length)
        descs.append(TensorDesc(tuple(dims), value.dtype))
    return descs


def scan_element_shape(shape: Shape, axis: int) -> Shape:
    """The shape of one element of a scan input: ``shape`` without ``axis``."""
    axis = normalize_axis(axis, len(shape))
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


def _scan_views(inputs: Sequence[np.ndarray], axes: Sequence[int],
                directions: Sequence[int]) -> tuple[list[np.ndarray], int]:
    """Each scan input with its scan axis first (reversed if backward), and the length."""
    views = []
    for array, axis, direction in zip(inputs, axes, directions):
        moved = np.moveaxis(array, normalize_axis(axis, array.ndim), 0)
        views.append(moved[::-1] if direction else moved)
    lengths = {view.shape[0] for view in views}
    if len(lengths) != 1:
        raise ExecutionError(f"Scan inputs have different sequence lengths {sorted(lengths)}")
    return views, lengths.pop()


def _scan_output(pieces: list[np.ndarray], desc: TensorDesc, axis: int, direction: int,
                 index: int) -> np.ndarray:
    stacked = _stack(pieces, desc, f"Scan output {index}")
    if direction:
        stacked = stacked[::-1]
    return np.moveaxis(stacked, 0, normalize_axis(axis, stacked.ndim))


@register_op(
    "Scan",
    inputs=[Input("values", variadic=True,
                  doc="initial states, then scan inputs, then captured outer values")],
    outputs=("outputs",),
    attrs=[Attr("body", AttrType.GRAPH, REQUIRED,
                doc="(*states, *scan_elements, *captured) -> (*states, *scan_elements)"),
           Attr("num_scan_inputs", AttrType.INT, REQUIRED),
           Attr("scan_input_axes", AttrType.INTS, None),
           Attr("scan_input_directions", AttrType.INTS, None, doc="0 forward, 1 backward"),
           Attr("scan_output_axes", AttrType.INTS, None),
           Attr("scan_output_directions", AttrType.INTS, None, doc="0 append, 1 prepend"),
           Attr("num_captured", AttrType.INT, 0, check=_non_negative,
                doc="how many trailing inputs are captured outer values")],
    infer=_infer_scan,
    variadic_outputs=True,
    num_outputs=lambda ctx: len(ctx.attr("body").outputs),
)
def scan_kernel(*values: np.ndarray, body: Graph, num_scan_inputs: int,
                scan_input_axes: Optional[list[int]], scan_input_directions: Optional[list[int]],
                scan_output_axes: Optional[list[int]],
                scan_output_directions: Optional[list[int]],
                num_captured: int) -> tuple[np.ndarray, ...]:
    """Run ``body`` once per element along the scan axes, carrying the states."""
    state_count = len(values) - num_scan_inputs - num_captured
    states = list(values[:state_count])
    scanned = values[state_count:state_count + num_scan_inputs]
    captured = list(values[state_count + num_scan_inputs:])
    views, length = _scan_views(scanned, scan_input_axes or [0] * num_scan_inputs,
                                scan_input_directions or [0] * num_scan_inputs)
    out_values = body.outputs[state_count:]
    pieces: list[list[np.ndarray]] = [[] for _ in out_values]
    for step in range(length):
        results = run_subgraph(body, [*states, *(view[step] for view in views), *captured])
        states = results[:state_count]
        for collected, array in zip(pieces, results[state_count:]):
            collected.append(np.asarray(array))
    finals = [np.asarray(array).astype(start.dtype, copy=False)
              for array, start in zip(states, values)]
    out_axes = scan_output_axes or [0] * len(out_values)
    out_directions = scan_output_directions or [0] * len(out_values)
    outputs = [_scan_output(collected, value.desc, axis, direction, index)
               for index, (collected, value, axis, direction)
               in enumerate(zip(pieces, out_values, out_axes, out_directions))]
    return tuple(finals + outputs)

