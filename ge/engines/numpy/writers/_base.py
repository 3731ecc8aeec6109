"""What every writer module shares: the table of writer factories and small helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from ge.engines.base import WritingKernel
from ge.ir import Node

Inputs = Sequence[Optional[np.ndarray]]
Outs = Sequence[np.ndarray]
Factory = Callable[[Node], Optional[WritingKernel]]
#: ``apply(x, out)``: a unary computation written into ``out`` (which may be ``x``)
Unary = Callable[[np.ndarray, np.ndarray], None]

#: op type -> the factory of its writers
WRITERS: dict[str, Factory] = {}

_NATIVE: frozenset[np.dtype] = frozenset(np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))
_WIDE_FLOATS: frozenset[np.dtype] = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_FLOATS: frozenset[np.dtype] = _WIDE_FLOATS | {np.dtype(np.float16)}


def _writes(*op_types: str) -> Callable[[Factory], Factory]:
    """Decorator: register the decorated factory for ``op_types``."""

    def register(factory: Factory) -> Factory:
        for op_type in op_types:
            WRITERS[op_type] = factory
        return factory

    return register


def _dtype(node: Node, index: int = 0) -> np.dtype:
    """The NumPy dtype of input ``index`` of ``node``."""
    value = node.inputs[index]
    assert value is not None
    return value.dtype.np_dtype


def _out_dtype(node: Node) -> np.dtype:
    return node.outputs[0].dtype.np_dtype


def _scratch(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``out``, or a fresh array like it when ``out`` is ``x``'s buffer."""
    return np.empty_like(out) if np.may_share_memory(out, x) else out


def _array(inputs: Inputs, index: int) -> np.ndarray:
    array = inputs[index]
    assert array is not None
    return array


def _unary_writer(apply: Unary) -> WritingKernel:
    def run(inputs: Inputs, outs: Outs) -> None:
        apply(_array(inputs, 0), outs[0])

    return run


