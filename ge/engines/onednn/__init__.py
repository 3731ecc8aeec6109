"""The oneDNN engine: convolutions, pooling, matrix products, attention, activations and
resizes as oneDNN primitives, made once per input shape and called through oneDNN's C API.

It takes ``Conv2D``/``FusedConv2D`` (bias, residual add and activation fused as
post-ops), 2-D ``MaxPool``/``AvgPool`` and ``GlobalAveragePool``/``GlobalMaxPool`` in
float32, NHWC or NCHW (``conv``; a heavy convolution's kernel is the fastest of
oneDNN's candidates timed at its first run, ``tuning``); 2-D ``ConvTranspose`` (``deconv``);
``MatMul``/``MatMulBiasAdd``/``Gemm`` with a constant weight packed for its kernel, or
two computed operands as a batched product (``linear``); scaled dot-product
``Attention`` (``attention``); on large arrays, unary activations such as ``Tanh``,
``Exp``, ``Sigmoid`` and (on the fused engine's kernel) ``Erf``, and ``Softmax``
(``eltwise``), and broadcasting ``Add``,
``Sub``, ``Mul`` and ``Div`` (``binary``); ``LayerNormalization``
(``norm``); nearest ``Resize`` by
whole-number factors and large ``Transpose`` as reorders, linear ``Resize`` of
channels-last data as resampling (``movement``); and ``LSTM`` and
``GRU`` as oneDNN's recurrent primitives (``recurrent``). It writes their
outputs into the memory plan's arena. What it takes it runs for the cost of the kernel
plus about a microsecond a call; PyTorch's route to the same library (the torch engine)
pays about 25 us a call to rebuild the primitive's description.

oneDNN is an optional dependency (the ``onednn-cpu-gomp`` wheel). Without it
``supports`` declines every node and the compiler gives them to the next engine; the
compile report names the engine as unavailable and why.

Threads: oneDNN runs on OpenMP. With PyTorch loaded both share one OpenMP runtime (found
by its soname), so the run's thread limit set on torch's pool is the limit here too; the
engine registers the runtime's own setter with ``runtime.threads`` as well, for runs
without torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

from ge.engines.base import BoundKernel, BoundNode, Engine, WritingKernel, register_engine
from ge.errors import UnsupportedOpError
from ge.ir import Node

__all__ = ["OneDNNEngine"]

_POOL_READY = False


@functools.cache
def _table() -> dict[str, tuple[Callable[[Node], bool], Callable[[Node], BoundNode]]]:
    from ge.engines.onednn import (
        attention,
        binary,
        conv,
        deconv,
        eltwise,
        linear,
        movement,
        norm,
        recurrent,
    )

    table = {op: (eltwise.check_unary, eltwise.bind_unary)
             for op in (*eltwise.UNARY, *eltwise.FAST_ONLY)}
    table["Softmax"] = (eltwise.check_softmax, eltwise.bind_softmax)
    table.update({op: (binary.check_binary, binary.bind_binary) for op in binary.BINARY})
    table["LayerNormalization"] = (norm.check_layer_norm, norm.bind_layer_norm)
    table["Resize"] = (movement.check_resize, movement.bind_resize)
    table["Transpose"] = (movement.check_transpose, movement.bind_transpose)
    table["Concat"] = (movement.check_concat, movement.bind_concat)
    table["ConvTranspose"] = (deconv.check_conv_transpose, deconv.bind_conv_transpose)
    table.update({op: (recurrent.check_recurrent, recurrent.bind_recurrent)
                  for op in recurrent.OP_TYPES})
    return {**table,
            "Attention": (attention.check_attention, attention.bind_attention),
            "MatMul": (linear.check_linear, linear.bind_linear),
            "MatMulBiasAdd": (linear.check_linear, linear.bind_linear),
            "Gemm": (linear.check_linear, linear.bind_linear),
            "Conv2D": (conv.check_conv, conv.bind_conv),
            "FusedConv2D": (conv.check_conv, conv.bind_conv),
            "MaxPool": (conv.check_pool, conv.bind_pool),
            "AvgPool": (conv.check_pool, conv.bind_pool),
            "GlobalAveragePool": (conv.check_global_pool, conv.bind_global_pool),
            "GlobalMaxPool": (conv.check_global_pool, conv.bind_global_pool)}


def _register_pool() -> None:
    global _POOL_READY
    if _POOL_READY:
        return
    from ge.engines.onednn import _lib
    from ge.runtime.threads import register_pool

    runtime = _lib.openmp_runtime()
    if runtime is not None:
        register_pool("openmp", runtime.omp_get_max_threads, runtime.omp_set_num_threads)
    _POOL_READY = True


class OneDNNEngine(Engine):
    """oneDNN primitives for convolutions, pooling, matrix products and attention."""

    name = "onednn"
    owns_thread_pool = True

    def unavailable_reason(self) -> Optional[str]:
        from ge.engines.onednn import _lib

        return _lib.unavailable_reason()

    def supports(self, node: Node) -> bool:
        entry = _table().get(node.op_type)
        if entry is None or not entry[0](node):
            return False
        return self.unavailable_reason() is None

    def bind_node(self, node: Node) -> BoundNode:
        entry = _table().get(node.op_type)
        if entry is None:
            raise UnsupportedOpError(f"the onednn engine has no kernel for {node.op_type} "
                                     f"node {node.name!r}")
        _register_pool()
        return entry[1](node)

    def inplace_input(self, node: Node) -> Optional[int]:
        """A FusedConv2D's or MatMulBiasAdd's residual (input 3): its writer adds it where
        it lies, with a sum post-op, when the plan hands it the residual's buffer as the
        output."""
        if node.op_type in ("FusedConv2D", "MatMulBiasAdd") and len(node.inputs) > 3 \
                and node.inputs[3] is not None:
            return 3
        return None

    def bind(self, node: Node) -> BoundKernel:
        return self.bind_node(node).kernel

    def bind_writer(self, node: Node) -> Optional[WritingKernel]:
        return self.bind_node(node).writer


register_engine(OneDNNEngine())
