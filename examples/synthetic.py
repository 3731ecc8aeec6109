"""Synthetic ONNX models of any size, for measuring how GE scales with graph size.

``elementwise_chain(n)`` is a chain of ``n`` elementwise nodes (Add, Relu, Mul,
Sigmoid repeating) on a [4, 16] tensor, the two-input ones reading one shared
constant. ``transformer_stack(blocks)`` repeats a feed-forward transformer block
written out in primitive ONNX ops, as exporters write it: MatMul + Add, GELU in
its erf form, MatMul + Add, the residual Add and a decomposed LayerNorm
(ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add): 21 nodes a block,
each with its own weights. Both have a symbolic batch dimension.

    python -c "from examples import synthetic; open('chain.onnx', 'wb').write(
        synthetic.elementwise_chain(8000))"
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["elementwise_chain", "transformer_stack", "CHAIN_SHAPE"]

CHAIN_SHAPE = ("batch", 16)
_OPSET = 18


def _model(nodes: list[onnx.NodeProto], initializers: list[onnx.TensorProto], name: str,
           input_shape: tuple, output: str) -> bytes:
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(input_shape))],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    return model.SerializeToString()


def elementwise_chain(length: int) -> bytes:
    """A chain of ``length`` elementwise nodes, serialized as ONNX."""
    shared = numpy_helper.from_array(np.full((1, 16), 0.5, np.float32), "c")
    nodes: list[onnx.NodeProto] = []
    previous = "x"
    for index in range(length):
        op_type = ("Add", "Relu", "Mul", "Sigmoid")[index % 4]
        inputs = [previous, "c"] if op_type in ("Add", "Mul") else [previous]
        nodes.append(helper.make_node(op_type, inputs, [f"v{index}"], name=f"n{index}"))
        previous = f"v{index}"
    return _model(nodes, [shared], f"chain{length}", CHAIN_SHAPE, previous)


def transformer_stack(blocks: int, width: int = 16, hidden: int = 32, seed: int = 0) -> bytes:
    """``blocks`` feed-forward transformer blocks in primitive ops, serialized as ONNX."""
    rng = np.random.default_rng(seed)
    initializers = [numpy_helper.from_array(np.array(value, np.float32), name) for name, value in
                    (("sqrt2", math.sqrt(2.0)), ("one", 1.0), ("half", 0.5), ("two", 2.0),
                     ("eps", 1e-5))]
    initializers.append(numpy_helper.from_array(np.array([-1], np.int64), "last_axis"))
    nodes: list[onnx.NodeProto] = []
    previous = "x"
    for block in range(blocks):
        def name(part: str, block: int = block) -> str:
            return f"b{block}/{part}"

        def weight(part: str, shape: tuple) -> str:
            array = (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)
            initializers.append(numpy_helper.from_array(array, name(part)))
            return name(part)

        def node(op_type: str, inputs: list[str], part: str, **attrs: int) -> str:
            nodes.append(helper.make_node(op_type, inputs, [name(part)], name=name(part),
                                          **attrs))
            return name(part)

        up = node("Add", [node("MatMul", [previous, weight("w1", (width, hidden))], "mm1"),
                          weight("b1", (hidden,))], "bias1")
        erf = node("Erf", [node("Div", [up, "sqrt2"], "gelu/div")], "gelu/erf")
        gelu = node("Mul", [node("Mul", [up, node("Add", [erf, "one"], "gelu/add")], "gelu/mul"),
                            "half"], "gelu/out")
        down = node("Add", [node("MatMul", [gelu, weight("w2", (hidden, width))], "mm2"),
                            weight("b2", (width,))], "bias2")
        residual = node("Add", [down, previous], "residual")
        mean = node("ReduceMean", [residual, "last_axis"], "ln/mean", keepdims=1)
        centred = node("Sub", [residual, mean], "ln/sub")
        variance = node("ReduceMean", [node("Pow", [centred, "two"], "ln/pow"), "last_axis"],
                        "ln/var", keepdims=1)
        deviation = node("Sqrt", [node("Add", [variance, "eps"], "ln/add_eps")], "ln/sqrt")
        normed = node("Div", [centred, deviation], "ln/div")
        previous = node("Add", [node("Mul", [normed, weight("gamma", (width,))], "ln/scale"),
                                weight("beta", (width,))], "ln/out")
    return _model(nodes, initializers, f"stack{blocks}", ("batch", 8, width), previous)
