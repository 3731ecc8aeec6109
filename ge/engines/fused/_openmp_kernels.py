"""The machine code of the kernels run as OpenMP parallel regions (``openmp``):
imported only where numba is installed.

A region's body reads everything from its operand array, the OpenMP runtime's
``omp_get_num_threads`` and ``omp_get_thread_num`` included (their addresses, called
through a pointer), so that nothing in the compiled code depends on the process it was
compiled in and numba keeps it in its disk cache. Each thread's loop runs from index 0
over arrays that start at its share (an index known not to be negative lets LLVM
vectorize the loads and stores), and ``error_model="numpy"`` keeps divisions free of
Python's zero check, which would stop the vectorizer.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# every operand array starts with the addresses of omp_get_num_threads and
# omp_get_thread_num
THREAD_COUNT, THREAD_NUMBER = 0, 1

# matrix_vector's operands: then the addresses of x, the transposed weight, the bias (0:
# none), the residual (0: none) and the output; K, N and the activation's code
X, WEIGHT, BIAS, RESIDUAL, OUT, DEPTH, COLUMNS, ACTIVATION = range(2, 10)
OPERANDS = 10

# activation's operands: then the addresses of the source and the destination (which
# may be the source), the element count and the function's code
SOURCE, DESTINATION, COUNT, FUNCTION = range(2, 6)
ACTIVATION_OPERANDS = 6
SIGMOID, SWISH, TANH, ERF = 0, 1, 2, 3

_HALF_ROOT = 1.0 / math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)

# exp(t) for t <= 0 as 2^k * p(r): k = round(t / ln 2), r = t - k ln 2 in two parts
# (Cody-Waite), p a degree-6 Taylor polynomial, |r| <= ln 2 / 2
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_T2, _T3, _T4, _T5, _T6, _T7 = (np.float32(1.0 / f)
                                for f in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))
_ONE, _TWO, _HALF, _ZERO = np.float32(1.0), np.float32(2.0), np.float32(0.5), np.float32(0.0)
_EXP_FLOOR = np.float32(-87.0)  # exp under float32's normal range below this
_EXPONENT_BIAS = np.float32(127.0)

#: LLVM's fast-math flags but those assuming no NaN and no infinity: NaN and infinities
#: keep their meaning; reassociation lets a sum use several vector accumulators
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


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


@intrinsic
def _float_of_bits(typingctx: Any, bits: Any) -> Any:
    """The float32 whose bits an int32 holds."""
    signature = types.float32(types.int32)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return signature, codegen


floats_at: Any = _floats_at
integers_at: Any = _integers_at
call_int: Any = _call_int
float_of_bits: Any = _float_of_bits


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _exp_negative(t: Any) -> Any:
    """exp(t) for t <= 0 (the reduction above; under -87, exp(-87))."""
    t = max(t, _EXP_FLOOR)
    k = np.floor(t * _LOG2E + _HALF)
    r = (t - k * _LN2_HI) - k * _LN2_LO
    p = _ONE + r * (_ONE + r * (_T2 + r * (_T3 + r * (_T4 + r * (_T5 + r * _T6)))))
    return p * float_of_bits(np.int32(k + _EXPONENT_BIAS) << 23)


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _tanh(x: Any) -> Any:
    """tanh(x) = -m / (2 + m) for x >= 0, m = expm1(-2x) = 2^k (p + 1) - 1 with p =
    expm1(r) a degree-7 Taylor polynomial: no cancellation near 0, where m is p."""
    t = max(-_TWO * abs(x), _EXP_FLOOR)
    k = np.floor(t * _LOG2E + _HALF)
    r = (t - k * _LN2_HI) - k * _LN2_LO
    p = r + r * r * (_T2 + r * (_T3 + r * (_T4 + r * (_T5 + r * (_T6 + r * _T7)))))
    scale = float_of_bits(np.int32(k + _EXPONENT_BIAS) << 23)
    m = scale * p + (scale - _ONE)
    y = (_ZERO - m) / (_TWO + m)
    if x != x:  # NaN stays NaN
        y = x
    return y if x >= _ZERO else -y


# erf(x) for |x| < 1: x times its Taylor series in x^2 to the x^21 term (the next is
# under 2e-9 of the value), c_n = (-1)^n 2 / (sqrt(pi) n! (2n + 1))
_ERF_SERIES = tuple(np.float32((-1.0) ** n * 2.0 / (math.sqrt(math.pi) * math.factorial(n)
                                                        * (2 * n + 1))) for n in range(11))
# erf(x) for |x| >= 1: 1 - t (a1 + t (a2 + ...)) exp(-x^2), t = 1 / (1 + p |x|)
# (Abramowitz and Stegun 7.1.26, within 1.5e-7 absolute)
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027,
                                       1.061405429))


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _erf(x: Any) -> Any:
    """erf(x): a series near 0 (no cancellation where erf is small), the rational form
    of Abramowitz and Stegun beyond, both computed and one picked so that the loop
    stays vectorized; within 2e-7 absolute, 3e-7 relative."""
    a = abs(x)
    u = a * a
    c = _ERF_SERIES
    series = a * (c[0] + u * (c[1] + u * (c[2] + u * (c[3] + u * (c[4] + u * (
        c[5] + u * (c[6] + u * (c[7] + u * (c[8] + u * (c[9] + u * c[10]))))))))))
    t = _ONE / (_ONE + _ERF_P * a)
    w = _ERF_A
    poly = t * (w[0] + t * (w[1] + t * (w[2] + t * (w[3] + t * w[4]))))
    y = series if a < _ONE else _ONE - poly * _exp_negative(_ZERO - u)
    if x != x:  # NaN stays NaN
        y = x
    return y if x >= _ZERO else -y


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _activated(x: Any, function: Any) -> Any:
    """sigmoid(x), x * sigmoid(x) for ``SWISH``, tanh(x) for ``TANH``: from e =
    exp(-|x|), sigmoid is 1 / (1 + e) for x >= 0 and e / (1 + e) below; erf(x) for
    ``ERF``."""
    if function == TANH:
        return _tanh(x)
    if function == ERF:
        return _erf(x)
    e = _exp_negative(-abs(x))
    s = _ONE / (_ONE + e)
    g = s if x >= _ZERO else e * s
    if x != x:  # NaN stays NaN
        g = x
    return x * g if function == SWISH else g


@numba.cfunc(types.void(types.voidptr), fastmath=FAST, error_model="numpy", cache=True)
def activation(data: Any) -> None:
    """One thread's share of an elementwise sigmoid, swish (x * sigmoid(x)), tanh or erf.
    In place, one array is read and written: two arrays at one address would make LLVM's
    overlap check send the loop to its scalar version."""
    operands = numba.carray(integers_at(data), ACTIVATION_OPERANDS)
    count, function = operands[COUNT], operands[FUNCTION]
    threads, me = call_int(operands[THREAD_COUNT]), call_int(operands[THREAD_NUMBER])
    start = count * me // threads // 16 * 16  # whole 64-byte lines per thread
    stop = count if me == threads - 1 else count * (me + 1) // threads // 16 * 16
    size = stop - start
    destination = numba.carray(floats_at(operands[DESTINATION] + 4 * start), size)
    if operands[SOURCE] == operands[DESTINATION]:
        for j in range(size):
            destination[j] = _activated(destination[j], function)
    else:
        source = numba.carray(floats_at(operands[SOURCE] + 4 * start), size)
        for j in range(size):
            destination[j] = _activated(source[j], function)


@numba.cfunc(types.void(types.voidptr), fastmath=FAST, error_model="numpy", cache=True)
def matrix_vector(data: Any) -> None:
    """One thread's share of the columns: a dot product of the row with each one's
    row of the transposed weight, then bias, residual and activation."""
    operands = numba.carray(integers_at(data), OPERANDS)
    depth, columns, code = operands[DEPTH], operands[COLUMNS], operands[ACTIVATION]
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
        if code == 1:
            total = max(total, np.float32(0.0))
        elif code == 2:
            total = np.float32(0.5 * total * (1.0 + math.erf(total * _HALF_ROOT)))
        elif code == 3:
            cubic = total + 0.044715 * total * total * total
            total = np.float32(0.5 * total * (1.0 + math.tanh(_TANH_SCALE * cubic)))
        out[n] = total
