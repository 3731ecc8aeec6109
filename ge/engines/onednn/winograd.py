"""3x3 convolutions of stride 1 as Winograd's F(4x4, 3x3): a quarter of the multiplications.

A direct 3x3 convolution spends 9 multiply-adds per output and input channel; F(4x4, 3x3)
(Lavin and Gray, 2016) computes a 4x4 block of outputs from a 6x6 patch of the input with
36, in three steps: each patch of the NHWC input becomes ``B^T d B`` (36 values per
channel), one batched matrix product per each of the 36 positions multiplies the tiles'
channels by the filter transformed once at bind (``G g G^T``, ``[36, C, K]``, packed for
the product's kernel), and each 6x6 block of the product becomes its 4x4 outputs
``A^T m A``, plus the bias and a residual (summed where the output's bytes hold it, or
read where it lies), through a ReLU, leaky ReLU or clip, written into the node's slot of
the arena. The transforms are numba kernels on oneDNN's OpenMP threads
(``ge.engines.fused._winograd_kernels``), the product is oneDNN's matmul primitive.

The tiles run in chunks of about ``CHUNK_FLOATS`` transformed values, so that a chunk's
transformed input and product stay in the cache between the three steps. The chunk's
buffers are per thread, shared by every Winograd convolution the thread runs (they live
outside the memory plan, like the NCHW convolutions' channels-last scratch): about 4 MB.
The transformed filter is 4x the filter's bytes; ``table()`` (``ge run
--profile`` prints it) says what the kernels alive hold.

Measured alone on a 2-core AMD EPYC (Zen 4) at batch 1, ResNet-50's 3x3 convolutions of
64, 128 and 256 channels take 0.36-0.53 ms this way against oneDNN's 0.93-1.04 ms; at
batch 8, 3.8-5.0 ms against 7.7-8.5. Where the filter is large against the image (512
channels over 7x7 at batch 1), the transformed filter (4x the filter's bytes) is read
for few tiles and the direct kernel wins (``MIN_TILES``). Which kernel runs is the
tuner's choice (``tuning``): it times this one beside oneDNN's on the first run. The
result rounds differently from a direct convolution's, by 1-3e-6 of the output's
largest magnitude (float64 as the reference): ``agrees`` compares it with oneDNN's on
that run and leaves it out beyond ``TOLERANCE``. ``GE_WINOGRAD=0`` leaves it out
everywhere; ``GE_WINOGRAD=1`` takes it untimed wherever it applies and agrees (even
with the tuner off), for a run that must not depend on a timing.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.engines.onednn import _lib
from ge.errors import ExecutionError

__all__ = ["NAME", "available", "applies", "tiles", "Winograd", "agrees", "table",
           "scratch_bytes", "forced", "transformed_filter", "TOLERANCE", "VARIABLE", "MIN_TILES",
           "RESIDUALS"]

#: the kernel's name among oneDNN's implementations (in the tuner's choices)
NAME = "winograd_f4x3:ge"
#: the environment variable that leaves the kernel out ("0") or takes it untimed wherever
#: it applies and agrees with oneDNN ("1"); unset, the tuner times it beside oneDNN's
VARIABLE = "GE_WINOGRAD"
#: the fewest 4x4 tiles (over the batch) a convolution must have. The transformed filter
#: is 4x the filter's bytes, read from memory once a run (a model's filters do not stay
#: in the cache from one run to the next, as they do when the tuner times one kernel
#: over and over): 108 more bytes per input and output channel pair against 13.5 fewer
#: FLOPs per output pixel, even at about 5 tiles (80 pixels) for 20 GB/s and 200 GFLOP/s.
#: Measured in ResNet-50 at batch 1: its 7x7 convolutions (4 tiles) gained nothing,
#: its 14x14 ones (16 tiles) most of the model's 8 %.
MIN_TILES = 8
#: a chunk's transformed input holds about this many floats (2 MB)
CHUNK_FLOATS = 1 << 19
#: the largest difference from oneDNN's direct convolution accepted, relative to the
#: largest magnitude of its output
TOLERANCE = 1e-4

# F(4x4, 3x3)'s filter transform (the points 0, 1, -1, 2, -2 and infinity)
_G = np.array([[1 / 4, 0, 0],
               [-1 / 6, -1 / 6, -1 / 6],
               [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6],
               [1 / 24, -1 / 12, 1 / 6],
               [0, 0, 1]], dtype=np.float64)

_ACTIVATIONS = {"relu", "clip"}


def available() -> bool:
    """Whether the kernel can run here: numba and oneDNN's OpenMP runtime are loaded and
    ``GE_WINOGRAD`` is not "0"."""
    if os.environ.get(VARIABLE, "").strip() == "0":
        return False
    from ge.engines.fused import openmp

    if openmp.runtime() is None:
        return False
    return _kernels() is not None


def forced() -> str:
    """Why the kernel is taken untimed ("" where the tuner times it): ``GE_WINOGRAD=1``."""
    return f"{VARIABLE}=1" if os.environ.get(VARIABLE, "").strip() == "1" else ""


def _kernels() -> Any:
    try:
        from ge.engines.fused import _winograd_kernels
    except Exception:  # noqa: BLE001 - a broken numba is as good as none
        return None
    return _winograd_kernels


def tiles(batch: int, out_height: int, out_width: int) -> int:
    """The 4x4 tiles of an output."""
    return batch * -(-out_height // 4) * -(-out_width // 4)


def applies(weight_dims: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
            begin: Sequence[int], end: Sequence[int], eltwise: Optional[tuple[str, float, float]],
            tile_count: int) -> bool:
    """Whether a convolution (dense: no groups) is one this kernel computes and may win:
    a 3x3 filter, stride and dilation 1, no negative padding, no activation or one of
    ReLU, leaky ReLU and clip, and ``MIN_TILES`` tiles or more."""
    return (len(weight_dims) == 4 and tuple(weight_dims[2:]) == (3, 3)
            and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1)
            and all(p >= 0 for p in (*begin, *end))
            and tile_count >= MIN_TILES
            and (eltwise is None or eltwise[0] in _ACTIVATIONS))


def transformed_filter(oihw: np.ndarray) -> np.ndarray:
    """``G g G^T`` of every (output, input) pair of a [K, C, 3, 3] filter, as [36, C, K]
    float32 (position 6 i + j of the 6x6 block first), computed in float64."""
    u = np.einsum("ia,kcab,jb->ijck", _G, oihw.astype(np.float64), _G)
    out_channels, in_channels = oihw.shape[:2]
    return np.ascontiguousarray(u.reshape(36, in_channels, out_channels), dtype=np.float32)


def _bits(value: float) -> int:
    return int(np.array(value, np.float32).view(np.int32))


_scratch = threading.local()


def _scratch_floats(slot: str, size: int) -> np.ndarray:
    """The calling thread's scratch buffer ``slot`` (the transformed input "v", the
    product "m", the per-thread patches and blocks "work"), grown to ``size`` floats as
    needed and shared by every Winograd convolution the thread runs, one after another."""
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    found = buffers.get(slot)
    if found is None or found.size < size:
        found = buffers[slot] = np.empty(size, np.float32)
    return found


def scratch_bytes() -> int:
    """The bytes of the calling thread's scratch buffers."""
    return sum(a.nbytes for a in getattr(_scratch, "buffers", {}).values())


class _Chunk:
    """The product of one chunk size: oneDNN's batched matmul, [36, T, C] @ [36, C, K]."""

    def __init__(self, tiles: int, channels: int, out_channels: int, u: _lib.Packed) -> None:
        source = _lib.Desc.dense([36, tiles, channels])
        dest = _lib.Desc.dense([36, tiles, out_channels])
        pd, weights_md = _lib.matmul(source, _lib.Desc([36, channels, out_channels]), None,
                                     dest, None)
        self.filter = u.like(weights_md)
        self.filter_bytes = self.filter.nbytes
        self.primitive = _lib.made(pd, _lib.source_dest(source.handle, dest.handle),
                                   "the Winograd convolution's product",
                                   [(_lib.ARG_WEIGHTS, weights_md, self.filter)])
        self.tiles = tiles


#: how a convolution adds its residual: none, the one the output's bytes hold (the memory
#: plan put the output over it), or one read where it lies
RESIDUALS = ("", "in place", "apart")


class Winograd:
    """A 3x3 convolution of one NHWC input shape as F(4x4, 3x3), run like a primitive:
    ``run_arrays((x, out))``, or ``run_arrays((x, out, residual))`` for a residual read
    ``"apart"``; the residual is added before the activation. ``impl`` is ``NAME``."""

    impl = NAME

    def __init__(self, oihw: np.ndarray, bias: Optional[np.ndarray], shape: Sequence[int],
                 begin: Sequence[int], end: Sequence[int],
                 eltwise: Optional[tuple[str, float, float]], residual: str = "") -> None:
        if residual not in RESIDUALS:
            raise ValueError(f"residual {residual!r} is none of {RESIDUALS}")
        from ge.engines.fused import openmp

        found = openmp.runtime()
        kernels = _kernels()
        assert found is not None and kernels is not None, "Winograd needs available()"
        self._runtime, self._k = found, kernels
        batch, height, width, channels = (int(d) for d in shape)
        out_channels = int(oihw.shape[0])
        out_height = height + begin[0] + end[0] - 2
        out_width = width + begin[1] + end[1] - 2
        self.output_shape = (batch, out_height, out_width, out_channels)
        down, across = -(-out_height // 4), -(-out_width // 4)
        total = batch * down * across
        per_chunk = max(1, min(total, CHUNK_FLOATS // (36 * max(channels, out_channels))))
        self._total, self._per_chunk = total, per_chunk
        self._bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
        u = _lib.Packed(transformed_filter(oihw))
        self._chunks = {size: _Chunk(size, channels, out_channels, u)
                        for size in {per_chunk, total % per_chunk} if size}
        self.filter_bytes = sum(chunk.filter_bytes for chunk in
                                {id(c.filter): c for c in self._chunks.values()}.values())
        del u
        # the thread's scratch the chunks' views were cut from (views: for each chunk
        # size T, the first 36 T C floats of each as a dense [36, T, C] array)
        self._cut: tuple[Any, ...] = ()
        self._views: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        code, alpha, beta = kernels.NONE, 0.0, 0.0
        if eltwise is not None:
            name, alpha, beta = eltwise
            code = kernels.RELU if name == "relu" else kernels.CLIP
        k = kernels
        self._in = np.zeros(k.INPUT_OPERANDS, np.int64)
        self._in[[k.THREAD_COUNT, k.THREAD_NUMBER]] = found.functions
        self._in[[k.IN_BATCH, k.IN_HEIGHT, k.IN_WIDTH, k.IN_CHANNELS, k.IN_PAD_TOP,
                  k.IN_PAD_LEFT, k.IN_TILES_DOWN, k.IN_TILES_ACROSS]] = (
            batch, height, width, channels, begin[0], begin[1], down, across)
        self._out = np.zeros(k.OUTPUT_OPERANDS, np.int64)
        self._out[[k.THREAD_COUNT, k.THREAD_NUMBER]] = found.functions
        self._out[[k.OUT_HEIGHT, k.OUT_WIDTH, k.OUT_CHANNELS, k.OUT_TILES_DOWN,
                   k.OUT_TILES_ACROSS, k.OUT_BIAS, k.OUT_ACTIVATION, k.OUT_ALPHA,
                   k.OUT_BETA]] = (
            out_height, out_width, out_channels, down, across,
            0 if self._bias is None else self._bias.ctypes.data, code, _bits(alpha),
            _bits(beta))
        self._apart = residual == "apart"
        self._out[k.OUT_RESIDUAL_MODE] = {"": k.NO_RESIDUAL, "in place": k.IN_PLACE,
                                          "apart": k.APART}[residual]
        self._channels, self._out_channels = channels, out_channels
        self._lock = threading.Lock()
        self.input_shape = (batch, height, width, channels)
        self._layouts: set[tuple[Any, ...]] = set()
        library = _lib.openmp_runtime()
        count = getattr(library, "omp_get_max_threads", None)
        self._max_threads: Any = (lambda: 1) if count is None else count
        _made.add(self)

    def _buffers(self) -> None:
        """Point the operands at the calling thread's scratch: the chunk's transformed
        input and product, and each pool thread's patch (72 C floats) and buffers (41 K)."""
        threads = max(self._max_threads(), os.cpu_count() or 1)
        channels, out_channels, per_chunk = self._channels, self._out_channels, self._per_chunk
        v = _scratch_floats("v", 36 * per_chunk * channels)
        m = _scratch_floats("m", 36 * per_chunk * out_channels)
        work = _scratch_floats("work", threads * (72 * channels + 41 * out_channels))
        cut = self._cut
        if not cut or cut[0] is not v or cut[1] is not m or cut[2] is not work \
                or cut[3] != threads:
            self._views = {size: (v[:36 * size * channels].reshape(36, size, channels),
                                  m[:36 * size * out_channels].reshape(36, size, out_channels))
                           for size in self._chunks}
            k = self._k
            self._in[k.IN_V], self._out[k.OUT_M] = v.ctypes.data, m.ctypes.data
            self._in[k.IN_PATCH] = work.ctypes.data
            self._out[k.OUT_BLOCK] = work.ctypes.data + 4 * threads * 72 * channels
            self._cut = (v, m, work, threads)

    def _dense(self, a: np.ndarray, shape: tuple[int, ...]) -> None:
        """Check that ``a`` is a dense NHWC array of ``shape``, as itself or seen in NCHW
        order (the kernels read and write it by address)."""
        layout = (a.shape, a.strides)
        if layout in self._layouts:
            return
        nhwc = a.transpose(0, 2, 3, 1) if a.ndim == 4 and a.shape != shape else a
        if nhwc.shape != shape or not nhwc.flags.c_contiguous or nhwc.dtype != np.float32:
            raise ExecutionError(f"the Winograd convolution: an array of shape {list(a.shape)} "
                                 f"and strides {list(a.strides)} where a dense NHWC float32 "
                                 f"array of shape {list(shape)} was expected")
        self._layouts.add(layout)

    def run_arrays(self, arrays: Sequence[np.ndarray]) -> None:
        x, out = arrays[0], arrays[1]
        k, start = self._k, self._runtime.start
        self._dense(x, self.input_shape)
        self._dense(out, self.output_shape)
        if self._apart:
            self._dense(arrays[2], self.output_shape)
            self._out[k.OUT_RESIDUAL] = arrays[2].ctypes.data
        with self._lock:
            self._buffers()
            self._in[k.IN_X] = x.ctypes.data
            self._out[k.OUT_Y] = out.ctypes.data
            in_region = int(k.input_transform.address)
            out_region = int(k.output_transform.address)
            in_ops, out_ops = self._in.ctypes.data, self._out.ctypes.data
            first = 0
            while first < self._total:
                count = min(self._per_chunk, self._total - first)
                self._in[k.IN_FIRST] = self._out[k.OUT_FIRST] = first
                self._in[k.IN_COUNT] = self._out[k.OUT_COUNT] = count
                start(in_region, in_ops)
                self._chunks[count].primitive.run_arrays(self._views[count])
                start(out_region, out_ops)
                first += count


_made: "weakref.WeakSet[Winograd]" = weakref.WeakSet()


def table() -> str:
    """The Winograd kernels alive (made for a node, or a candidate not yet freed) and the
    memory they hold beyond the memory plan, one line ("" for none)."""
    kernels = list(_made)
    if not kernels:
        return ""
    filters = sum(kernel.filter_bytes for kernel in kernels)
    return (f"Winograd F(4x4, 3x3) convolutions: {len(kernels)} kernels, their transformed "
            f"filters {filters / 2**20:.1f} MB (4x a 3x3 filter's bytes), scratch shared by "
            f"the kernels a thread runs {scratch_bytes() / 2**20:.1f} MB "
            f"({VARIABLE}=0 leaves them out)")


def agrees(candidate: Any, reference: Any, arrays: Callable[[], tuple[np.ndarray, ...]]
           ) -> bool:
    """Whether ``candidate`` computes what ``reference`` (oneDNN's direct kernel) does, to
    ``TOLERANCE`` of the output's largest magnitude; ``arrays()`` gives each its own
    operands (the same input; an output, which may start as the residual)."""
    mine, others = arrays(), arrays()
    candidate.run_arrays(mine)
    reference.run_arrays(others)
    ours, theirs = mine[1], others[1]
    scale = float(np.max(np.abs(theirs))) if theirs.size else 0.0
    if not np.all(np.isfinite(theirs)):
        return bool(np.array_equal(ours, theirs, equal_nan=True))
    return bool(np.max(np.abs(ours - theirs), initial=0.0) <= TOLERANCE * max(scale, 1e-30))

