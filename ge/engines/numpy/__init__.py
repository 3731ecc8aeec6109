"""The NumPy engine: every registry op, through the op's reference kernel.

It is the embedded default and the oracle the other engines are tested
against. Convolutions and matrix products inside the reference kernels go
through BLAS (im2col views and ``matmul``), never Python loops over pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.engines.base import BoundKernel, Engine, WritingKernel, register_engine
from ge.engines.numpy import control, writers
from ge.ir import Node
from ge.ops.registry import get_schema, has_op

__all__ = ["NumpyEngine"]


class NumpyEngine(Engine):
    """Runs each node through its op's reference NumPy kernel."""

    name = "numpy"

    def supports(self, node: Node) -> bool:
        """Every registered op except graph inputs, which are fed rather than computed."""
        return has_op(node.op_type) and node.op_type != "Data"

    def bind(self, node: Node) -> BoundKernel:
        """The reference kernel with the node's attributes bound (``If``: its branches
        compiled, see ``control``)."""
        if node.op_type == "If":
            return control.bind_if(node)
        kernel = get_schema(node.op_type).kernel
        attrs = dict(node.attrs)

        def run(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
            result = kernel(*inputs, **attrs)
            if isinstance(result, tuple):
                return [np.asarray(r) for r in result]
            return [np.asarray(result)]

        return run

    def bind_writer(self, node: Node) -> Optional[WritingKernel]:
        """A kernel writing ``node``'s outputs into given arrays (``writers``), or None
        when the node's op, attributes or dtypes are not covered."""
        return writers.writer_for(node)


register_engine(NumpyEngine())
