"""The machine code of ``gemv``: imported only where numba is installed.

The region body reads everything from its operand array, the OpenMP runtime's
``omp_get_num_threads`` and ``omp_get_thread_num`` included (their addresses, called
through a pointer), so that nothing in the compiled code depends on the process it was
compiled in and numba keeps it in its disk cache.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# the operand array: addresses of x, the transposed weight, the bias (0: none), the
# residual (0: none) and the output; K, N and the activation's code; the addresses of
# omp_get_num_threads and omp_get_thread_num
X, WEIGHT, BIAS, RESIDUAL, OUT, DEPTH, COLUMNS, ACTIVATION, THREAD_COUNT, THREAD_NUMBER = \
    range(10)
OPERANDS = 10

_HALF_ROOT = 1.0 / math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)


@intrinsic
def _floats_at(typingctx: Any, address: Any) -> Any:
    """The float32 pointer at an address held as an integer."""
    signature = types.CPointer(types.float32)(types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

    return signature, codegen


@intrinsic
def _integers_at(typingctx: Any, pointer: Any) -> Any:
    """The int64 pointer a region's ``void *`` argument is."""
    signature = types.CPointer(types.int64)(types.voidptr)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], context.get_value_type(sig.return_type))

    return signature, codegen


@intrinsic
def _call_int(typingctx: Any, address: Any) -> Any:
    """The value of ``int f(void)`` at an address held as an integer."""
    signature = types.int32(types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        function = ir.FunctionType(ir.IntType(32), [])
        return builder.call(builder.inttoptr(args[0], function.as_pointer()), [])

    return signature, codegen


floats_at: Any = _floats_at
integers_at: Any = _integers_at
call_int: Any = _call_int


@numba.cfunc(types.void(types.voidptr), fastmath=True, cache=True)
def region(data: Any) -> None:
    """One thread's share of the columns: a dot product of the row with each one's
    row of the transposed weight, then bias, residual and activation."""
    operands = numba.carray(integers_at(data), OPERANDS)
    depth, columns, activation = operands[DEPTH], operands[COLUMNS], operands[ACTIVATION]
    x = numba.carray(floats_at(operands[X]), depth)
    weight = numba.carray(floats_at(operands[WEIGHT]), (columns, depth))
    out = numba.carray(floats_at(operands[OUT]), columns)
    bias = numba.carray(floats_at(operands[BIAS]), columns)
    residual = numba.carray(floats_at(operands[RESIDUAL]), columns)
    threads, me = call_int(operands[THREAD_COUNT]), call_int(operands[THREAD_NUMBER])
    for n in range(me * columns // threads, (me + 1) * columns // threads):
        total = np.float32(0.0)
        for k in range(depth):
            total += x[k] * weight[n, k]
        if operands[BIAS] != 0:
            total += bias[n]
        if operands[RESIDUAL] != 0:
            total += residual[n]
        if activation == 1:
            total = max(total, np.float32(0.0))
        elif activation == 2:
            total = np.float32(0.5 * total * (1.0 + math.erf(total * _HALF_ROOT)))
        elif activation == 3:
            cubic = total + 0.044715 * total * total * total
            total = np.float32(0.5 * total * (1.0 + math.tanh(_TANH_SCALE * cubic)))
        out[n] = total
