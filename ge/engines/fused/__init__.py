"""The fused engine: each ``FusedElementwise`` node as one generated single-pass kernel.

At bind time the node's steps are translated into one numexpr program and
compiled once (``ge.engines.fused.codegen``); a run then only calls the
compiled program, which streams over its inputs block by block on numexpr's
threads, reading each input once and writing the output once, where the
reference kernel makes one full pass over memory per step.

numexpr is an optional dependency, imported on first use. Without it, or for
steps it cannot compile (dtypes other than float32 and float64, ``Erf`` in
float64, more than ``MAX_OPERANDS`` inputs), ``supports`` answers False and the
NumPy engine's reference kernel runs the node.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Optional, Union

import numpy as np

from ge.engines.base import BoundKernel, Engine, register_engine
from ge.engines.fused.codegen import Generated, Unsupported, generate
from ge.errors import UnsupportedOpError
from ge.ir import DataType, Node
from ge.ops.fused_elementwise import FUSED_ELEMENTWISE, parse_steps

__all__ = ["FusedElementwiseEngine", "numexpr_module"]


@functools.lru_cache(maxsize=1)
def numexpr_module() -> Optional[ModuleType]:
    """The numexpr module, or None when it is not installed."""
    try:
        import numexpr
    except ImportError:
        return None
    return numexpr


_Key = tuple[tuple[str, ...], tuple[DataType, ...], DataType]


@functools.lru_cache(maxsize=512)
def _program(key: _Key) -> Union[tuple[Generated, Any], str]:
    """The generated and compiled program for a node's steps and dtypes, or why there is
    none. Nodes with the same steps and dtypes share one compiled program."""
    numexpr = numexpr_module()
    if numexpr is None:
        return "numexpr is not installed"
    texts, input_dtypes, output = key
    try:
        generated = generate(numexpr, parse_steps(texts), input_dtypes, output)
        compiled = numexpr.NumExpr(generated.expression, signature=list(generated.signature))
    except Unsupported as error:
        return str(error)
    except (NotImplementedError, TypeError, ValueError, KeyError) as error:
        return f"numexpr cannot compile the steps ({error})"
    return generated, compiled


def _key(node: Node) -> Optional[_Key]:
    if node.op_type != FUSED_ELEMENTWISE or any(v is None for v in node.inputs):
        return None
    dtypes = tuple(v.dtype for v in node.inputs if v is not None)
    return tuple(node.attrs["steps"]), dtypes, node.outputs[0].dtype


class FusedElementwiseEngine(Engine):
    """Runs ``FusedElementwise`` nodes as generated numexpr programs."""

    name = "fused"

    def refusal(self, node: Node) -> Optional[str]:
        """Why this engine does not run ``node`` (None: it does)."""
        key = _key(node)
        if key is None:
            return f"{node.op_type} is not {FUSED_ELEMENTWISE}"
        program = _program(key)
        return program if isinstance(program, str) else None

    def supports(self, node: Node) -> bool:
        """True for FusedElementwise nodes whose steps compile to one numexpr program."""
        return self.refusal(node) is None

    def bind(self, node: Node) -> BoundKernel:
        """The node's compiled program (compiled here, once), as a kernel."""
        key = _key(node)
        program = _program(key) if key is not None else "not a FusedElementwise node"
        if isinstance(program, str):
            raise UnsupportedOpError(f"{node.op_type} node {node.name!r}: the fused engine "
                                     f"cannot run it: {program}")
        generated, compiled = program
        numexpr = numexpr_module()
        assert numexpr is not None
        uses_vml = bool(getattr(numexpr, "use_vml", False))
        positions = generated.inputs

        def run(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
            arrays = [np.asarray(inputs[i]) for i in positions]
            result = compiled(*arrays, order="K", casting="safe", ex_uses_vml=uses_vml)
            return [np.asarray(result)]

        return run


register_engine(FusedElementwiseEngine())
