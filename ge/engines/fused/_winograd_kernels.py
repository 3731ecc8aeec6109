"""The machine code of the Winograd convolution's transforms (``ge.engines.onednn.winograd``),
run as OpenMP parallel regions (``openmp``): imported only where numba is installed.

F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016,
with the interpolation points 0, 1, -1, 2, -2 and infinity): a 6x6 patch of the input d
becomes ``B^T d B``, a 6x6 block of the product m becomes the 4x4 outputs ``A^T m A``.
Both run one tile per step and every channel of it in the inner loop, which LLVM
vectorizes (NHWC data: a pixel's channels lie side by side, and so do a transformed
tile's in the ``[36, tiles, channels]`` arrays the batched product reads and writes).
A tile that reaches past the input (its padding) is first copied into the thread's
patch buffer, zeros where the input has none; a tile that reaches past the output
writes its 4x4 block into the thread's own buffer and copies what lies inside.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types

from ge.engines.fused._openmp_kernels import (
    FAST,
    THREAD_COUNT,
    THREAD_NUMBER,
    call_int,
    float_of_bits,
    floats_at,
    integers_at,
)

# the input transform's operands, after the two thread functions: the input's address and
# its N, H, W, C; the padding at the top and left; the tiles down and across an image;
# the chunk's first tile and its tile count; the transformed tiles' address; the patch
# buffers' address (2 * 36 * C floats a thread)
(IN_X, IN_BATCH, IN_HEIGHT, IN_WIDTH, IN_CHANNELS, IN_PAD_TOP, IN_PAD_LEFT, IN_TILES_DOWN,
 IN_TILES_ACROSS, IN_FIRST, IN_COUNT, IN_V, IN_PATCH) = range(2, 15)
INPUT_OPERANDS = 15

# the output transform's operands: the product's address (``[36, count, K]``), the
# output's address and its H, W, K; the tiles down and across; the chunk's first tile and
# its tile count; the bias (0: none); the activation's code and its two parameters (as
# float32 bits); the buffers' address (41 * K floats a thread); the residual's mode and
# address (an NHWC array of the output's shape)
(OUT_M, OUT_Y, OUT_HEIGHT, OUT_WIDTH, OUT_CHANNELS, OUT_TILES_DOWN, OUT_TILES_ACROSS,
 OUT_FIRST, OUT_COUNT, OUT_BIAS, OUT_ACTIVATION, OUT_ALPHA, OUT_BETA, OUT_BLOCK,
 OUT_RESIDUAL_MODE, OUT_RESIDUAL) = range(2, 18)
OUTPUT_OPERANDS = 18

#: where the output transform finds a residual to add before the activation: none, in
#: the output's own bytes (the memory plan put the output over it), or at its own address
NO_RESIDUAL, IN_PLACE, APART = 0, 1, 2

#: the activations the output transform applies: y, max(y, 0) + alpha * min(y, 0),
#: min(max(y, alpha), beta)
NONE, RELU, CLIP = 0, 1, 2

_F = np.float32


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _bt(d0: Any, d1: Any, d2: Any, d3: Any, d4: Any, d5: Any) -> Any:
    """B^T applied to six values along one axis of a patch."""
    return (_F(4.0) * d0 - _F(5.0) * d2 + d4,
            d3 + d4 - _F(4.0) * (d1 + d2),
            d4 - d3 + _F(4.0) * (d1 - d2),
            d4 - d2 + _F(2.0) * (d3 - d1),
            d4 - d2 + _F(2.0) * (d1 - d3),
            _F(4.0) * d1 - _F(5.0) * d3 + d5)


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _at(m0: Any, m1: Any, m2: Any, m3: Any, m4: Any, m5: Any) -> Any:
    """A^T applied to six values along one axis of a product's block."""
    plus, minus = m1 + m2, m1 - m2
    plus2, minus2 = m3 + m4, m3 - m4
    return (m0 + plus + plus2,
            minus + _F(2.0) * minus2,
            plus + _F(4.0) * plus2,
            minus + _F(8.0) * minus2 + m5)


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _bt_line(source: Any, source_step: Any, dest: Any, dest_step: Any, channels: Any) -> None:
    """B^T along one line of six pixels, every channel: the six pixels' channels start
    ``source_step`` floats apart from address ``source``, the six results' ``dest_step``
    apart from ``dest``. One line a loop: six loads and six stores over the channels is
    what LLVM's vectorizer takes (a whole tile's 36 of each it leaves scalar, for the
    overlap checks between them)."""
    s = numba.carray(floats_at(source), (6, source_step))
    d = numba.carray(floats_at(dest), (6, dest_step))
    for c in range(channels):
        d[0, c], d[1, c], d[2, c], d[3, c], d[4, c], d[5, c] = _bt(
            s[0, c], s[1, c], s[2, c], s[3, c], s[4, c], s[5, c])


@numba.cfunc(types.void(types.voidptr), fastmath=FAST, error_model="numpy", cache=True)
def input_transform(data: Any) -> None:
    """One thread's share of a chunk's tiles: each 6x6 patch (stride 4) of the NHWC input
    into ``B^T d B``."""
    operands = numba.carray(integers_at(data), INPUT_OPERANDS)
    height, width, channels = operands[IN_HEIGHT], operands[IN_WIDTH], operands[IN_CHANNELS]
    top, left = operands[IN_PAD_TOP], operands[IN_PAD_LEFT]
    down, across = operands[IN_TILES_DOWN], operands[IN_TILES_ACROSS]
    first, count = operands[IN_FIRST], operands[IN_COUNT]
    threads, me = call_int(operands[THREAD_COUNT]), call_int(operands[THREAD_NUMBER])
    v_at = operands[IN_V]
    patch_at = operands[IN_PATCH] + 4 * 2 * 36 * channels * me
    work_at = patch_at + 4 * 36 * channels
    patch = numba.carray(floats_at(patch_at), (6, 6, channels))
    row_bytes = 4 * width * channels
    for t in range(count * me // threads, count * (me + 1) // threads):
        tile = first + t
        image = tile // (down * across)
        y0 = (tile // across) % down * 4 - top
        x0 = tile % across * 4 - left
        origin = operands[IN_X] + (image * height + y0) * row_bytes + 4 * x0 * channels
        if y0 >= 0 and x0 >= 0 and y0 + 6 <= height and x0 + 6 <= width:
            # inside the input: six rows of six pixels, each row one run of memory
            at, step = origin, row_bytes
        else:  # copied into the patch buffer, zeros outside the input
            for i in range(6):
                for j in range(6):
                    if 0 <= y0 + i < height and 0 <= x0 + j < width:
                        pixel = numba.carray(floats_at(
                            origin + i * row_bytes + 4 * j * channels), channels)
                        for c in range(channels):
                            patch[i, j, c] = pixel[c]
                    else:
                        for c in range(channels):
                            patch[i, j, c] = _F(0.0)
            at, step = patch_at, 4 * 6 * channels
        # down the columns (B^T d, into the thread's buffer), then along the rows
        for j in range(6):
            _bt_line(at + 4 * j * channels, step // 4, work_at + 4 * j * channels,
                     6 * channels, channels)
        for i in range(6):
            _bt_line(work_at + 4 * i * 6 * channels, channels,
                     v_at + 4 * (6 * i * count + t) * channels, count * channels, channels)


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _activate(y: Any, code: Any, alpha: Any, beta: Any) -> Any:
    if code == RELU:  # +0 below zero when alpha is 0 (-inf included), as oneDNN's
        if y > _F(0.0):
            return y
        return alpha * y if alpha != _F(0.0) else _F(0.0)
    if code == CLIP:
        return min(max(y, alpha), beta)
    return y


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _at_line(source: Any, source_step: Any, dest: Any, dest_step: Any, channels: Any) -> None:
    """A^T along one line of six values of the product, every channel (as ``_bt_line``)."""
    s = numba.carray(floats_at(source), (6, source_step))
    d = numba.carray(floats_at(dest), (4, dest_step))
    for c in range(channels):
        d[0, c], d[1, c], d[2, c], d[3, c] = _at(s[0, c], s[1, c], s[2, c], s[3, c], s[4, c],
                                                 s[5, c])


@numba.njit(inline="always", fastmath=FAST, error_model="numpy")
def _at_row(source: Any, dest: Any, residual: Any, mode: Any, bias: Any, code: Any,
            alpha: Any, beta: Any, channels: Any) -> None:
    """A^T along one row of six, into four pixels' channels (``dest``, a pixel apart),
    plus the bias and, by ``mode``, no residual (``NO_RESIDUAL``), the one ``dest`` holds
    (``IN_PLACE``) or the one at ``residual`` (``APART``), through the activation. Each
    mode its own loop: a residual read at the address written would send the loop to
    LLVM's scalar version."""
    s = numba.carray(floats_at(source), (6, channels))
    d = numba.carray(floats_at(dest), (4, channels))
    if mode == IN_PLACE:
        for c in range(channels):
            y0, y1, y2, y3 = _at(s[0, c], s[1, c], s[2, c], s[3, c], s[4, c], s[5, c])
            b = bias[c]
            d[0, c] = _activate(y0 + b + d[0, c], code, alpha, beta)
            d[1, c] = _activate(y1 + b + d[1, c], code, alpha, beta)
            d[2, c] = _activate(y2 + b + d[2, c], code, alpha, beta)
            d[3, c] = _activate(y3 + b + d[3, c], code, alpha, beta)
    elif mode == APART:
        r = numba.carray(floats_at(residual), (4, channels))
        for c in range(channels):
            y0, y1, y2, y3 = _at(s[0, c], s[1, c], s[2, c], s[3, c], s[4, c], s[5, c])
            b = bias[c]
            d[0, c] = _activate(y0 + b + r[0, c], code, alpha, beta)
            d[1, c] = _activate(y1 + b + r[1, c], code, alpha, beta)
            d[2, c] = _activate(y2 + b + r[2, c], code, alpha, beta)
            d[3, c] = _activate(y3 + b + r[3, c], code, alpha, beta)
    else:
        for c in range(channels):
            y0, y1, y2, y3 = _at(s[0, c], s[1, c], s[2, c], s[3, c], s[4, c], s[5, c])
            b = bias[c]
            d[0, c] = _activate(y0 + b, code, alpha, beta)
            d[1, c] = _activate(y1 + b, code, alpha, beta)
            d[2, c] = _activate(y2 + b, code, alpha, beta)
            d[3, c] = _activate(y3 + b, code, alpha, beta)


@numba.cfunc(types.void(types.voidptr), fastmath=FAST, error_model="numpy", cache=True)
def output_transform(data: Any) -> None:
    """One thread's share of a chunk's tiles: each 6x6 block of the product into its 4x4
    outputs ``A^T m A``, plus the bias, through the activation, into the NHWC output."""
    operands = numba.carray(integers_at(data), OUTPUT_OPERANDS)
    height, width, channels = operands[OUT_HEIGHT], operands[OUT_WIDTH], operands[OUT_CHANNELS]
    down, across = operands[OUT_TILES_DOWN], operands[OUT_TILES_ACROSS]
    first, count = operands[OUT_FIRST], operands[OUT_COUNT]
    code = operands[OUT_ACTIVATION]
    mode, residual_at = operands[OUT_RESIDUAL_MODE], operands[OUT_RESIDUAL]
    alpha = float_of_bits(np.int32(operands[OUT_ALPHA]))
    beta = float_of_bits(np.int32(operands[OUT_BETA]))
    threads, me = call_int(operands[THREAD_COUNT]), call_int(operands[THREAD_NUMBER])
    m_at = operands[OUT_M]
    bias = numba.carray(floats_at(operands[OUT_BIAS]), channels)
    # the thread's buffers: A^T m (4 x 6 x K), a block reaching past the output (16 K),
    # and zeros for a missing bias (K)
    work_at = operands[OUT_BLOCK] + 4 * 41 * channels * me
    block_at = work_at + 4 * 24 * channels
    if operands[OUT_BIAS] == 0:
        bias = numba.carray(floats_at(block_at + 4 * 16 * channels), channels)
        for c in range(channels):
            bias[c] = _F(0.0)
    block = numba.carray(floats_at(block_at), (4, 4, channels))
    row_bytes = 4 * width * channels
    for t in range(count * me // threads, count * (me + 1) // threads):
        tile = first + t
        image = tile // (down * across)
        y0 = (tile // across) % down * 4
        x0 = tile % across * 4
        origin = operands[OUT_Y] + (image * height + y0) * row_bytes + 4 * x0 * channels
        whole = y0 + 4 <= height and x0 + 4 <= width
        at, step = (origin, row_bytes) if whole else (block_at, 4 * 4 * channels)
        beside = residual_at + (image * height + y0) * row_bytes + 4 * x0 * channels
        for j in range(6):  # down the columns: A^T m
            _at_line(m_at + 4 * (j * count + t) * channels, 6 * count * channels,
                     work_at + 4 * j * channels, 6 * channels, channels)
        for i in range(4):  # along the rows: (A^T m) A, into the output
            if whole:
                _at_row(work_at + 4 * i * 6 * channels, at + i * step,
                        beside + i * row_bytes, mode, bias, code, alpha, beta, channels)
            else:  # the residual and the activation when copied out
                _at_row(work_at + 4 * i * 6 * channels, at + i * step, 0, NO_RESIDUAL, bias,
                        NONE, alpha, beta, channels)
        if not whole:  # the part of the block inside the output
            for i in range(min(4, height - y0)):
                for j in range(min(4, width - x0)):
                    offset = i * row_bytes + 4 * j * channels
                    pixel = numba.carray(floats_at(origin + offset), channels)
                    if mode == IN_PLACE:
                        for c in range(channels):
                            pixel[c] = _activate(block[i, j, c] + pixel[c], code, alpha, beta)
                    elif mode == APART:
                        other = numba.carray(floats_at(beside + offset), channels)
                        for c in range(channels):
                            pixel[c] = _activate(block[i, j, c] + other[c], code, alpha, beta)
                    else:
                        for c in range(channels):
                            pixel[c] = _activate(block[i, j, c], code, alpha, beta)
