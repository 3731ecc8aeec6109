"""What the torch engine's op families share: the binding table and array conversions.

An op family registers, per op type, a ``check`` (does the engine take this node?), a
``bind`` (the node's kernels, a :class:`BoundNode`) and whether the kernel allocates.
A binding's kernel takes and returns NumPy arrays; underneath, the arrays and torch
tensors share memory (``from_numpy``/``numpy()``), so no bytes are copied on the way in
or out.

Two kinds of binding:

- a *writer* computes into the arrays the memory plan hands it (torch's ``out=``
  variants, ``copy_`` into a view): its outputs live in the arena;
- an *allocating* kernel returns tensors torch allocated itself, for kernels that have
  no ``out=`` form (oneDNN's fused convolutions, pooling); the memory plan leaves those
  values outside the arena and the memory report counts them as such.
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from ge.engines.base import BoundNode
from ge.ir import DataType, Node

if TYPE_CHECKING:
    import torch

__all__ = ["Binding", "Entry", "register", "entry_of", "registered_op_types", "available",
           "tensor", "array", "const_array", "const_tensor", "is_const", "rank", "one_thread",
           "FLOAT32", "float32_node", "known_size"]

#: the dtype the engine computes in; other dtypes run on the NumPy engine
FLOAT32 = DataType.DT_FLOAT


Binding = BoundNode

Check = Callable[[Node], bool]
Bind = Callable[[Node], BoundNode]


@dataclass(frozen=True)
class Entry:
    """One op type's kernels on this engine."""

    check: Check
    bind: Bind
    #: whether the bound kernel returns memory torch allocated (decided before binding)
    allocates: Callable[[Node], bool]


_TABLE: dict[str, Entry] = {}


def register(op_types: Sequence[str], check: Check, bind: Bind,
             allocates: Union[bool, Callable[[Node], bool]] = False) -> None:
    """Give ``op_types`` to this engine: ``check`` says which nodes it takes, ``bind``
    binds one, ``allocates`` says (per node, before binding) whether the kernel returns
    memory of torch's own rather than writing into the arena."""
    decide = allocates if callable(allocates) else (lambda node, flag=bool(allocates): flag)
    for op_type in op_types:
        _TABLE[op_type] = Entry(check, bind, decide)


def entry_of(op_type: str) -> Optional[Entry]:
    """The registered kernels of ``op_type``, or None."""
    return _TABLE.get(op_type)


def registered_op_types() -> list[str]:
    """The op types some family of this engine covers (for some attributes and dtypes)."""
    return sorted(_TABLE)


_AVAILABLE: Optional[bool] = None


def available() -> bool:
    """True when PyTorch can be imported (checked without importing it)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = importlib.util.find_spec("torch") is not None
    return _AVAILABLE


def float32_node(node: Node, inputs: Sequence[int] = ()) -> bool:
    """True when every output and the given inputs (all present ones when empty) of
    ``node`` are float32."""
    values = [node.inputs[i] for i in inputs] if inputs else list(node.inputs)
    return (all(v.dtype is FLOAT32 for v in node.outputs)
            and all(v is None or v.dtype is FLOAT32 for v in values))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one of torch's threads: for kernels too small for the pool's
    fork and join to pay (restored after, whatever the run's limit was)."""
    import torch

    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def tensor(a: np.ndarray) -> "torch.Tensor":
    """``a`` as a torch tensor over the same memory (copied only when torch cannot share
    it: a read-only array, or one with negative strides)."""
    import torch

    if not a.flags.writeable or any(step < 0 for step in a.strides):
        a = np.array(a)
    return torch.from_numpy(a)


def const_tensor(value: np.ndarray) -> "torch.Tensor":
    """A constant (a layer's weight) as a C-contiguous float32 tensor, sharing its memory
    when it already is one (weights are read-only: torch's warning about that is
    silenced, since no kernel writes into them), else a laid-out copy."""
    import torch

    if value.dtype != np.float32 or any(step < 0 for step in value.strides):
        return torch.from_numpy(np.array(value, dtype=np.float32, order="C"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        shared = torch.from_numpy(value)
    # a transposed weight is laid out by torch's blocked copy (NumPy's strided copy of a
    # 2048 x 1000 transpose took 16 ms)
    return shared if value.flags.c_contiguous else shared.contiguous()


def array(t: "torch.Tensor") -> np.ndarray:
    """``t`` as a NumPy array over the same memory (the array keeps the tensor alive)."""
    return t.numpy()


def rank(node: Node, index: int) -> int:
    """The rank of input ``index`` of ``node`` (-1 when absent)."""
    value = node.inputs[index] if index < len(node.inputs) else None
    return -1 if value is None else len(value.shape)


def known_size(dims: Sequence[Any]) -> Optional[int]:
    """The element count of a shape, or None when a dimension is known only at run time."""
    size = 1
    for dim in dims:
        if not isinstance(dim, int) or dim < 0:
            return None
        size *= dim
    return size


def is_const(node: Node, index: int) -> bool:
    """True when a constant feeds input ``index`` of ``node`` (its data is not read: a
    folded filter may still be pending, and checking a node must not compute it)."""
    value = node.inputs[index] if index < len(node.inputs) else None
    if value is None:
        return False
    producer = value.producer
    return producer is not None and producer.op_type == "Const" \
        and producer.attrs.get("value") is not None


def const_array(node: Node, index: int) -> Optional[np.ndarray]:
    """Input ``index`` of ``node`` when a constant feeds it, else None."""
    value = node.inputs[index] if index < len(node.inputs) else None
    if value is None:
        return None
    producer = value.producer
    if producer is None or producer.op_type != "Const":
        return None
    constant: Any = producer.attrs.get("value")
    return None if constant is None else constant.numpy()
