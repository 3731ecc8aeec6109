"""Run one registry op the way a user would: build it, validate, compile, run.

``run_op`` builds a graph with one ``Data`` node per array input (or a
``Const`` for inputs listed in ``const``), adds the op through the seed's
builder API, validates the graph, runs it, and checks that each output has the
dtype and a shape compatible with what shape inference promised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

import ge
from ge.ops import evaluate, get_schema
from tests.tolerance import assert_close


def build_op_graph(op_type: str, inputs: dict[str, Any], attrs: Optional[dict[str, Any]] = None,
                   const: Sequence[str] = (), dynamic: Sequence[str] = ()) -> ge.Graph:
    """A graph holding one ``op_type`` node fed by ``inputs`` (name -> array or list)."""
    graph = ge.Graph(f"test_{op_type}")
    builder = ge.OperatorFactory.create_op(op_type)
    schema = get_schema(op_type)
    for name, array in inputs.items():
        variadic = schema.inputs[schema.input_index(name)].variadic
        arrays = array if variadic and isinstance(array, (list, tuple)) else [array]
        handles = []
        for position, item in enumerate(arrays):
            item = np.asarray(item)
            label = name if len(arrays) == 1 else f"{name}{position}"
            if name in const:
                handle = graph.add_op(ge.OperatorFactory.create_op("Const")
                                      .set_attr("value", ge.Tensor(item)).build())
            else:
                shape = [-1] * item.ndim if name in dynamic else list(item.shape)
                handle = graph.add_op(
                    ge.OperatorFactory.create_op("Data").set_attr("name", label)
                    .set_attr("shape", shape).set_attr("dtype", ge.DataType.parse(item.dtype))
                    .build())
            handles.append(handle)
        builder.set_input(name, handles if variadic else handles[0])
    for key, value in (attrs or {}).items():
        builder.set_attr(key, value)
    node = graph.add_op(builder.set_attr("name", "op").build())
    graph.set_outputs(node.outputs)
    graph.validate()
    return graph


def feeds_for(inputs: dict[str, Any], const: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The feed dict matching ``build_op_graph``'s Data nodes."""
    feeds: dict[str, np.ndarray] = {}
    for name, array in inputs.items():
        if name in const:
            continue
        if isinstance(array, (list, tuple)) and array and isinstance(array[0], np.ndarray):
            if len(array) == 1:
                feeds[name] = array[0]
            else:
                feeds.update({f"{name}{i}": item for i, item in enumerate(array)})
        else:
            feeds[name] = np.asarray(array)
    return feeds


def run_op(op_type: str, inputs: dict[str, Any], attrs: Optional[dict[str, Any]] = None,
           const: Sequence[str] = (), dynamic: Sequence[str] = ()) -> list[np.ndarray]:
    """Build, validate, compile and run one op; return its outputs in order."""
    graph = build_op_graph(op_type, inputs, attrs, const, dynamic)
    declared = [value.desc for value in graph.outputs]
    feeds = feeds_for(inputs, const)
    results = _execute(graph, feeds)
    for desc, result in zip(declared, results):
        assert ge.DataType.parse(result.dtype) is desc.dtype, \
            f"{op_type}: kernel gave {result.dtype}, inference promised {desc.dtype}"
        assert len(result.shape) == len(desc.shape), \
            f"{op_type}: kernel gave rank {result.ndim}, inference promised {list(desc.shape)}"
        for got, want in zip(result.shape, desc.shape):
            assert not isinstance(want, int) or want == -1 or got == want, \
                f"{op_type}: kernel gave shape {result.shape}, inference promised {desc.shape}"
    return results


def _execute(graph: ge.Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The default engines' results, checked against the oracle: within the accumulation
    tolerance where the torch or oneDNN engine ran (their kernels sum in their own
    order), and the NumPy engines' results too, which must give the reference's bits."""
    executable = ge.compile(graph)
    session_results = list(ge.Session(executable).run(feeds).values())
    reference = list(evaluate(graph, feeds).values())
    if {"torch", "onednn"} & set(executable.report["engines"]):
        for got, want in zip(session_results, reference):
            assert_close(got, want, accumulate=True)
        _check_bits(list(ge.Session(ge.compile(graph, engines=["fused", "numpy"]))
                         .run(feeds).values()), reference, graph)
    else:
        _check_bits(session_results, reference, graph)
    return session_results


def _check_bits(results: list[np.ndarray], reference: list[np.ndarray], graph: ge.Graph
                ) -> None:
    loose = any(node.op_type in SUMMATION_ORDER_MAY_DIFFER for node in graph.nodes)
    for got, want in zip(results, reference):  # the engine agrees with the oracle
        if loose and np.asarray(got).dtype.kind == "f":
            assert_close(got, want, accumulate=True)
        else:
            np.testing.assert_array_equal(got, want)


#: ops whose engine kernels may sum in another order than the reference (BLAS products
#: per sample and group for NCHW convolutions; an Einsum that is a matrix product, which
#: the optimizer makes a MatMul): compared within the accumulation tolerance; every
#: other op must give the reference's bits
SUMMATION_ORDER_MAY_DIFFER = frozenset({"Conv2D", "FusedConv2D", "ConvBNReLU", "Einsum"})
