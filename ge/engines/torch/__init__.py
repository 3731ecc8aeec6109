"""The torch engine: convolutions, matrix products and the common activations on
PyTorch's CPU kernels (oneDNN and MKL), with NumPy for everything it does not take.

What it does, per family:

- ``conv``: ``Conv2D`` and ``FusedConv2D`` (dense, grouped and depthwise) through
  oneDNN's fused convolution, with the filter packed once per input shape into the
  blocked format the kernel reads, the bias, a residual add and the activation
  applied inside the convolution; NHWC activations run channels-last without a
  reorder. Pooling through torch's channels-last kernels.
- ``linear``: ``MatMul``, ``Gemm`` and ``MatMulBiasAdd`` as MKL products written into
  the arena (``out=``), weights laid out once at bind time; ``Transpose``.
- further families (elementwise, normalization, ...) register themselves the same way.

Only float32 runs here. PyTorch is an optional dependency: without it ``supports``
declines every node, the compiler gives them to the other engines, and the compile
report says the torch engine was unavailable. PyTorch is imported when the first node
is bound, not when GE is imported.

Threads: torch's kernels run on its OpenMP pool. The pool is set to the run's
intra-op limit (``runtime.threads``), and while a run uses this engine, BLAS (NumPy's
OpenBLAS) keeps to one thread: two pools whose idle threads spin on the same cores
slow each other several-fold (see ``threads.ENGINE_POOLS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.engines.base import BoundKernel, BoundNode, Engine, WritingKernel, register_engine
from ge.engines.torch import _base
from ge.errors import UnsupportedOpError
from ge.ir import Node

__all__ = ["TorchEngine"]

#: ops whose small calls run on the NumPy engine's kernel when their size is known only
#: at run time (a known size decides at compile time: ``elementwise.CHEAP``)
RUNTIME_SMALL_OPS = frozenset({"Cast"})

_FAMILIES_LOADED = False


def _load_families() -> None:
    """Import the op families (each registers its ops; none imports torch at import)."""
    global _FAMILIES_LOADED
    if not _FAMILIES_LOADED:
        from ge.engines.torch import conv, elementwise, linear, nn, rnn  # noqa: F401 - registers
        _FAMILIES_LOADED = True


class TorchEngine(Engine):
    """PyTorch's CPU kernels for the nodes its families cover."""

    name = "torch"
    owns_thread_pool = True

    def unavailable_reason(self) -> Optional[str]:
        return None if _base.available() else "PyTorch is not installed (pip install torch)"

    def supports(self, node: Node) -> bool:
        if not _base.available():
            return False
        _load_families()
        entry = _base.entry_of(node.op_type)
        return entry is not None and entry.check(node)

    def bind_node(self, node: Node) -> BoundNode:
        _load_families()
        entry = _base.entry_of(node.op_type)
        if entry is None:
            raise UnsupportedOpError(f"the torch engine has no kernel for {node.op_type} "
                                     f"node {node.name!r}")
        _import_torch()
        return _small_on_numpy(node, entry.bind(node))

    def bind(self, node: Node) -> BoundKernel:
        return self.bind_node(node).kernel

    def bind_writer(self, node: Node) -> Optional[WritingKernel]:
        return self.bind_node(node).writer

    def allocates(self, node: Node) -> bool:
        _load_families()
        entry = _base.entry_of(node.op_type)
        return entry is not None and entry.allocates(node)


_TORCH_READY = False


def _import_torch() -> None:
    global _TORCH_READY
    if not _TORCH_READY:
        from ge.engines.torch import _pool

        _pool.install()
        _TORCH_READY = True


register_engine(TorchEngine())


def _small_on_numpy(node: Node, bound: BoundNode) -> BoundNode:
    """``bound``, or the NumPy engine's kernel for the cheap ops when their output has
    under ``elementwise.numpy_below`` elements: below that size a NumPy ufunc costs
    less than a torch call and its tensor wrapping. The compiler's check decided
    for sizes known when compiling; a session binds the shapes of each input signature,
    which settles most of the others here, and the rest (sizes the data decides) are
    chosen per call."""
    from ge.engines import get_engine
    from ge.engines.torch.elementwise import CHEAP_MIN_ELEMENTS, numpy_below

    below = numpy_below(node.op_type) or (
        CHEAP_MIN_ELEMENTS if node.op_type in RUNTIME_SMALL_OPS else 0)
    if not below:
        return bound
    small = get_engine("numpy").bind_node(node)
    large_writer, small_writer = bound.writer, small.writer
    if large_writer is None or small_writer is None or bound.allocates or small.allocates:
        return bound
    size = _base.known_size(node.outputs[0].shape)
    if size is not None:  # known when binding
        return small if size < below else bound
    large_kernel, small_kernel = bound.kernel, small.kernel

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        if outs[0].size < below:
            small_writer(inputs, outs)
        else:
            large_writer(inputs, outs)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        size = max((a.size for a in inputs if a is not None), default=0)
        return small_kernel(inputs) if size < below else large_kernel(inputs)

    return BoundNode(kernel, writer, bound.allocates)
