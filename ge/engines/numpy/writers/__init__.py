"""Writing kernels of the NumPy engine: each op's reference computation, written into
the output arrays it is handed (see ``ge.engines.base`` for the contract).

``WRITERS`` maps an op type to a factory that, given a node, returns its writer with the
attributes bound, or None when the node's attributes or dtypes are not covered. The
writers run the same NumPy operations as the reference kernels, in the same order,
with ``out=`` arguments and in-place passes in place of fresh arrays, so their values
are the reference's bit for bit; the exceptions are NCHW convolutions (one product per
sample and group, ``[Cout, taps] @ [taps, pixels]``, straight into out: BLAS may sum in
another order) and NCHW max pools (a pass per tap: the sign of a zero maximum may
differ). Writers leave floating-point warnings to their caller: the runtime runs every
task with them silenced, as the reference kernels run. Every writer accepts ``outs[0]``
being ``inputs[0]``'s buffer; a formula that reads ``x`` after its first pass then works
in a scratch array.

The writers live by op family: ``elementwise`` (ufuncs, activations), ``tensor`` (data
movement, reductions, matrix products), ``conv`` (convolutions, pools),
``normalization`` (normalizations, softmax), ``fused`` (``FusedElementwise``, step by
step through the others); ``_base`` holds the table and helpers.

Only NumPy's own dtypes are covered (bool, integers, float16/32/64): bfloat16 and the
narrow float and integer types of ``ml_dtypes`` go through ``bind``. Ops whose reference
widens 16-bit floats to float32 are covered in float32 and float64 only.
"""

from __future__ import annotations

from typing import Optional

from ge.engines.base import WritingKernel
from ge.engines.numpy.writers import (  # noqa: F401 - register
    conv,
    elementwise,
    fused,
    normalization,
    tensor,
)
from ge.engines.numpy.writers._base import _NATIVE, WRITERS
from ge.ir import Node

__all__ = ["WRITERS", "writer_for", "covered_op_types"]


def writer_for(node: Node) -> Optional[WritingKernel]:
    """The writer of ``node`` with its attributes bound, or None when not covered."""
    factory = WRITERS.get(node.op_type)
    if factory is None:
        return None
    values = [v for v in (*node.inputs, *node.outputs) if v is not None]
    if any(v.dtype.np_dtype not in _NATIVE for v in values):
        return None
    return factory(node)


def covered_op_types() -> list[str]:
    """Every op type with a writer factory, sorted."""
    return sorted(WRITERS)
