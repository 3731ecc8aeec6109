"""The writer of ``FusedElementwise``: its steps run one after another through the
writers of their own op types.

The reference kernel interprets the step program on every call (parses, normalizes,
looks up each step's kernel); this writer does all of that once, when it is bound, and
builds each step's writer from a stand-in node carrying the step's operands' types. A
run is then one writer call per step: intermediate results in fresh arrays, the last
step straight into the output. The values are the reference's, step by step, since
each step's writer computes what its op's reference kernel does. Where a step's op
has no writer (or its dtypes none), the node is not covered and runs its reference.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers._base import _NATIVE, WRITERS, Inputs, Outs, _writes
from ge.ir import DataType, Node, TensorDesc, Value, is_static
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE, parse_steps
from ge.ops.registry import get_schema, infer_outputs, normalize_attrs


def _stand_in(descs: list[TensorDesc]) -> list[Value]:
    """Values of the given types, each the output of a ``Data`` node outside any graph."""
    return [Node("Data", [], {"shape": list(d.shape), "dtype": d.dtype}, [d]).outputs[0]
            for d in descs]


@_writes(FUSED_ELEMENTWISE)
def _fused_elementwise(node: Node) -> Optional[WritingKernel]:
    """One writer per step, bound once; None when a step's op or dtype has no writer."""
    steps = parse_steps(tuple(node.attrs["steps"]))
    given = [None if v is None else v.desc for v in node.inputs]
    results: list[TensorDesc] = []
    # per step: its writer and where each operand comes from
    program: list[tuple[WritingKernel, tuple[tuple[str, Any], ...]]] = []
    for position, step in enumerate(steps):
        factory = WRITERS.get(step.op_type)
        if factory is None:
            return None
        descs: list[Optional[TensorDesc]] = []
        sources: list[tuple[str, Any]] = []
        for operand in step.operands:
            if operand.kind == "input":
                descs.append(given[operand.index])
                sources.append(("input", operand.index))
            elif operand.kind == "step":
                descs.append(results[operand.index])
                sources.append(("step", operand.index))
            elif operand.kind == "literal":
                literal = operand.literal_array()
                descs.append(TensorDesc((), DataType.parse(literal.dtype)))
                sources.append(("literal", literal))
            else:
                descs.append(None)
                sources.append(("absent", None))
        if any(d is not None and d.dtype.np_dtype not in _NATIVE for d in descs):
            return None
        schema = get_schema(step.op_type)
        name = f"{node.name}/s{position}"
        attrs = normalize_attrs(schema, dict(step.attrs), name)
        values = [None if d is None else v
                  for d, v in zip(descs, _stand_in([d or TensorDesc((), DataType.DT_FLOAT)
                                                    for d in descs]))]
        outputs = infer_outputs(schema, name, values, attrs)
        if len(outputs) != 1 or outputs[0].dtype.np_dtype not in _NATIVE:
            return None
        writer = factory(Node(step.op_type, values, attrs, outputs, name))
        if writer is None:
            return None
        results.append(outputs[0])
        program.append((writer, tuple(sources)))
    dtypes = [desc.dtype.np_dtype for desc in results]
    # the shape of each intermediate result where the graph knows it, else None
    shapes: list[Optional[tuple[int, ...]]] = [
        tuple(int(d) for d in desc.shape) if is_static(desc.shape) else None
        for desc in results]
    last = len(program) - 1
    output = node.outputs[0].shape if node.outputs else None
    bound = tuple(int(d) for d in output) if output is not None and is_static(output) else None

    def run(inputs: Inputs, outs: Outs) -> None:
        # the graph's shapes hold for the output the node was bound for; a run on other
        # shapes (a slice of the batch) works each result's shape out from its operands
        known = bound is not None and outs[0].shape == bound
        done: list[np.ndarray] = []
        for position, (writer, sources) in enumerate(program):
            arguments: list[Optional[np.ndarray]] = []
            for kind, where in sources:
                if kind == "input":
                    arguments.append(inputs[where])
                elif kind == "step":
                    arguments.append(done[where])
                elif kind == "literal":
                    arguments.append(where)
                else:
                    arguments.append(None)
            if position == last:
                out = outs[0]
                if any(a is not None and np.may_share_memory(a, out) for a in arguments[1:]):
                    # a step's writer may be handed its first operand's buffer only
                    scratch = np.empty_like(out)
                    writer(arguments, (scratch,))
                    np.copyto(out, scratch)
                else:
                    writer(arguments, outs)
                return
            shape = shapes[position] if known else None
            if shape is None:
                shape = np.broadcast_shapes(*(a.shape for a in arguments if a is not None))
            result = np.empty(shape, dtypes[position])
            writer(arguments, (result,))
            done.append(result)

    return run
