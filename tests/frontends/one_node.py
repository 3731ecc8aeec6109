"""One-node ONNX models for the contrib-op tests: the node under test, its inputs as graph
inputs or initializers, and the ONNX and ``com.microsoft`` opset imports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

MS = "com.microsoft"

_CODES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
          np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
          np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8,
          np.dtype(np.bool_): TensorProto.BOOL}


def one_node_model(op_type: str, inputs: Mapping[str, Optional[np.ndarray]], outputs: list[str],
                   attrs: Optional[dict[str, Any]] = None, constants: tuple[str, ...] = (),
                   domain: str = MS) -> onnx.ModelProto:
    """A model of one ``op_type`` node of ``domain``; ``None`` inputs are left out (empty
    names), those named in ``constants`` become initializers, the rest graph inputs."""
    graph_inputs, initializers = [], []
    for name, array in inputs.items():
        if array is None:
            continue
        if name in constants:
            initializers.append(onnx.numpy_helper.from_array(array, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, _CODES[array.dtype],
                                                              array.shape))
    node = helper.make_node(op_type, [n if a is not None else "" for n, a in inputs.items()],
                            outputs, name=f"the_{op_type}", domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], op_type, graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outputs if o],
                              initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(MS, 1)])
