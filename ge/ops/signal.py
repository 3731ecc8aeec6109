"""Signal processing: the Hann, Hamming and Blackman windows, DFT, STFT and MelWeightMatrix.

Each follows the ONNX operator of the same name (opset 17, DFT as of opset 20 with its
axis an input). Complex tensors are real ones with a last dimension of 2 (real,
imaginary); a real signal may have a last dimension of 1. Transforms run in NumPy's FFT,
in double precision for float64 input and in single precision otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ir.tensor import Dim, num_elements
from ge.ops.elementwise import FLOATS
from ge.ops.registry import (
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    register_op,
)
from ge.ops.shape_utils import normalize_axis

__all__ = ["window_values", "mel_weight_matrix"]

_INTEGER_SCALARS = (DataType.DT_INT32, DataType.DT_INT64)


def _scalar(ctx: InferenceContext, index: int) -> Optional[int]:
    """The value of a scalar integer input when it is a constant; it must be a scalar."""
    shape = ctx.shape(index)
    if len(shape) > 1 or any(d != 1 for d in shape):
        raise ctx.fail(f"input {ctx.schema.input_name(index)!r} must be a scalar, "
                       f"got shape {list(shape)}")
    value = ctx.const(index)
    return None if value is None else int(value.reshape(-1)[0])


def _fft_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    count = num_elements(outputs[0].shape)
    work = 5 * count * max(1, int(math.log2(max(count, 2))))
    read = sum(num_elements(d.shape) * d.dtype.itemsize for d in ctx.inputs if d is not None)
    return Cost(work, read + count * outputs[0].dtype.itemsize)


# -- windows ----------------------------------------------------------------------------

# cosine-sum windows: w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)
_WINDOW_COEFFICIENTS = {
    "HannWindow": (0.5, 0.5),
    "HammingWindow": (25 / 46, 21 / 46),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


def window_values(kind: str, size: int, periodic: bool) -> np.ndarray:
    """The ``kind`` window of ``size`` points (float64); periodic windows have period size."""
    if size <= 1:
        return np.ones(max(size, 0))
    period = size if periodic else size - 1
    phase = 2 * np.pi * np.arange(size, dtype=np.float64) / period
    result = np.zeros(size)
    for order, coefficient in enumerate(_WINDOW_COEFFICIENTS[kind]):
        result += (-1) ** order * coefficient * np.cos(order * phase)
    return result


def _infer_window(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, _INTEGER_SCALARS, "a size must be")
    size = _scalar(ctx, 0)
    if size is not None and size < 0:
        raise ctx.fail(f"the window size is {size}; it must be >= 0")
    return [TensorDesc((-1 if size is None else size,), ctx.attr("output_datatype"))]


def _register_window(kind: str, doc: str) -> None:
    def kernel(size: np.ndarray, *, periodic: bool = True,
               output_datatype: DataType = DataType.DT_FLOAT) -> np.ndarray:
        values = window_values(kind, int(size.reshape(-1)[0]), periodic)
        return values.astype(output_datatype.np_dtype)

    kernel.__doc__ = doc
    kernel.__name__ = f"{kind.lower()}_kernel"
    register_op(kind, inputs=["size"],
                attrs=[Attr("periodic", AttrType.BOOL, True,
                            doc="period `size` (for spectra) rather than symmetric"),
                       Attr("output_datatype", AttrType.DTYPE, DataType.DT_FLOAT)],
                infer=_infer_window)(kernel)


_register_window("HannWindow", "y[n] = 0.5 - 0.5 cos(2 pi n / N), N = size (periodic) or "
                 "size - 1.")
_register_window("HammingWindow", "y[n] = 25/46 - 21/46 cos(2 pi n / N), N = size (periodic) or "
                 "size - 1.")
_register_window("BlackmanWindow", "y[n] = 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N), "
                 "N = size (periodic) or size - 1.")


# -- DFT --------------------------------------------------------------------------------

def _complex(x: np.ndarray) -> np.ndarray:
    """[..., 1] (real) or [..., 2] (real, imaginary) as a complex array [...]: complex128
    for float64 input, else complex64 (NumPy's FFT keeps single precision)."""
    real = np.float64 if x.dtype == np.float64 else np.float32
    wide = x.astype(real)
    result = wide[..., 0].astype(np.result_type(real, np.complex64))
    if x.shape[-1] == 2:
        result.imag = wide[..., 1]
    return result


def _interleaved(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A complex array [...] as [..., 2] (real, imaginary) of ``dtype``."""
    return np.stack([values.real, values.imag], axis=-1).astype(dtype)


def _dft_axis(ctx: InferenceContext, rank: int) -> Optional[int]:
    if not ctx.has_input(2):
        return rank - 2
    value = _scalar(ctx, 2)
    if value is None:
        return None
    if not -rank <= value < rank - 1 or value == -1:
        raise ctx.fail(f"axis {value} is out of range: the signal axes of a rank-{rank} input "
                       f"are [{-rank}, -2] and [0, {rank - 2}]")
    return normalize_axis(value, rank)


def _dft_length(ctx: InferenceContext, axis: Optional[int]) -> Dim:
    if ctx.has_input(1):
        length = _scalar(ctx, 1)
        if length is not None and length < 1:
            raise ctx.fail(f"dft_length is {length}; it must be >= 1")
        return -1 if length is None else length
    if axis is None:
        return -1
    size = ctx.shape(0)[axis]
    if ctx.attr("inverse") and ctx.attr("onesided"):
        return 2 * (size - 1) if isinstance(size, int) and size > 0 else -1
    return size


def _infer_dft(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    shape = list(ctx.shape(0))
    if len(shape) < 2 or (shape[-1] not in (1, 2, -1) and not isinstance(shape[-1], str)):
        raise ctx.fail(f"input 'input' {shape} must be [..., 1] (real) or [..., 2] (complex)")
    for index in (1, 2):
        if ctx.has_input(index):
            ctx.require_dtypes(index, _INTEGER_SCALARS)
    axis = _dft_axis(ctx, len(shape))
    length = _dft_length(ctx, axis)
    inverse, onesided = ctx.attr("inverse"), ctx.attr("onesided")
    if onesided and not inverse:
        size: Dim = length // 2 + 1 if isinstance(length, int) and length > 0 else -1
    else:
        size = length
    last = 1 if inverse and onesided else 2
    if axis is None:
        changed = ctx.has_input(1) or onesided
        return [TensorDesc(tuple([-1 if changed else d for d in shape[:-1]] + [last]),
                           ctx.dtype(0))]
    shape[axis] = size
    return [TensorDesc(tuple(shape[:-1] + [last]), ctx.dtype(0))]


@register_op("DFT", inputs=["input", Input("dft_length", optional=True),
                            Input("axis", optional=True)],
             attrs=[Attr("inverse", AttrType.BOOL, False), Attr("onesided", AttrType.BOOL, False)],
             infer=_infer_dft, cost=_fft_cost)
def dft_kernel(x: np.ndarray, dft_length: Optional[np.ndarray] = None,
               axis: Optional[np.ndarray] = None, *, inverse: bool = False,
               onesided: bool = False) -> np.ndarray:
    """The discrete Fourier transform of x along ``axis`` (default -2), zero-padded or cut
    to ``dft_length``. ``onesided`` keeps the first n//2+1 frequencies (forward), or takes
    them and returns the real signal [..., 1] (inverse). The inverse divides by n."""
    position = normalize_axis(-2 if axis is None else int(axis.reshape(-1)[0]), x.ndim)
    signal = _complex(x)
    if dft_length is not None:
        length = int(dft_length.reshape(-1)[0])
    elif inverse and onesided:
        length = 2 * (x.shape[position] - 1)
    else:
        length = x.shape[position]
    if inverse and onesided:
        return np.fft.irfft(signal, n=length, axis=position)[..., np.newaxis].astype(x.dtype)
    if inverse:
        return _interleaved(np.fft.ifft(signal, n=length, axis=position), x.dtype)
    spectrum = np.fft.fft(signal, n=length, axis=position)
    if onesided:
        spectrum = np.take(spectrum, np.arange(length // 2 + 1), axis=position)
    return _interleaved(spectrum, x.dtype)


# -- STFT -------------------------------------------------------------------------------

def _stft_frame_length(ctx: InferenceContext) -> Dim:
    length: Dim = -1
    if ctx.has_input(3):
        ctx.require_dtypes(3, _INTEGER_SCALARS)
        value = _scalar(ctx, 3)
        length = -1 if value is None else value
    if ctx.has_input(2):
        ctx.require_rank(2, 1)
        window = ctx.shape(2)[0]
        if isinstance(window, int) and window >= 0:
            if isinstance(length, int) and length >= 0 and length != window:
                raise ctx.fail(f"the window has {window} points; frame_length is {length}")
            length = window
    elif not ctx.has_input(3):
        length = ctx.shape(0)[1]
    return length


def _infer_stft(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    ctx.require_rank(0, 3)
    ctx.require_dtypes(1, _INTEGER_SCALARS)
    batch, samples, parts = ctx.shape(0)
    if parts not in (1, 2, -1) and not isinstance(parts, str):
        raise ctx.fail(f"signal {list(ctx.shape(0))} must be [batch, length, 1 or 2]")
    step, length = _scalar(ctx, 1), _stft_frame_length(ctx)
    if step is not None and step < 1:
        raise ctx.fail(f"frame_step is {step}; it must be >= 1")
    known = isinstance(length, int) and length >= 0
    frames: Dim = -1
    if known and step is not None and isinstance(samples, int) and samples >= 0:
        assert isinstance(length, int)
        frames = max((samples - length) // step + 1, 0)
    bins: Dim = -1
    if known:
        assert isinstance(length, int)
        bins = length // 2 + 1 if ctx.attr("onesided") else length
    return [TensorDesc((batch, frames, bins, 2), ctx.dtype(0))]


@register_op("STFT", inputs=["signal", "frame_step", Input("window", optional=True),
                             Input("frame_length", optional=True)],
             attrs=[Attr("onesided", AttrType.BOOL, True)], infer=_infer_stft, cost=_fft_cost)
def stft_kernel(signal: np.ndarray, frame_step: np.ndarray,
                window: Optional[np.ndarray] = None, frame_length: Optional[np.ndarray] = None,
                *, onesided: bool = True) -> np.ndarray:
    """The short-time Fourier transform: the DFT of each windowed frame of ``frame_length``
    samples, every ``frame_step`` samples: [batch, length, 1|2] -> [batch, frames, bins, 2]."""
    samples = _complex(signal)
    step = int(frame_step.reshape(-1)[0])
    if frame_length is not None:
        length = int(frame_length.reshape(-1)[0])
    else:
        length = window.shape[0] if window is not None else signal.shape[1]
    weights = np.ones(length, samples.real.dtype) if window is None \
        else window.astype(samples.real.dtype)
    frames = max((signal.shape[1] - length) // step + 1, 0)
    positions = np.arange(frames)[:, np.newaxis] * step + np.arange(length)[np.newaxis, :]
    spectrum = np.fft.fft(samples[:, positions] * weights, axis=-1)
    if onesided:
        spectrum = spectrum[..., :length // 2 + 1]
    return _interleaved(spectrum, signal.dtype)


# -- MelWeightMatrix --------------------------------------------------------------------

def _mel(hertz: float) -> float:
    return 2595 * math.log10(1 + hertz / 700)


def mel_weight_matrix(mel_bins: int, dft_length: int, sample_rate: float, lower: float,
                      upper: float) -> np.ndarray:
    """Triangular filters on the mel scale, [dft_length // 2 + 1, mel_bins] (float64).

    Filter i rises from spectrum bin edge[i] to edge[i+1] and falls to edge[i+2], peak 1;
    the edges are the mel points between ``lower`` and ``upper`` Hz, mapped to bins as
    ONNX's reference does (the mel span cut in mel_bins + 2 steps, bins floor((n+1) f / sr)).
    """
    step = (_mel(upper) - _mel(lower)) / (mel_bins + 2)
    mels = _mel(lower) + step * np.arange(mel_bins + 2)
    hertz = 700 * (10 ** (mels / 2595) - 1)
    edges = np.floor((dft_length + 1) * hertz / sample_rate).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    bins = np.arange(dft_length // 2 + 1)[:, np.newaxis]
    rising = np.where(center > left, (bins - left) / np.maximum(center - left, 1), 1.0)
    falling = (right - bins) / np.maximum(right - center, 1)
    on_rise = (bins >= left) & (bins <= center)
    on_fall = (bins >= center) & (bins < right) & (right > center)
    return np.where(on_fall, falling, np.where(on_rise, rising, 0.0))


def _infer_mel(ctx: InferenceContext) -> Sequence[TensorDesc]:
    for index in (0, 1, 2):
        ctx.require_dtypes(index, _INTEGER_SCALARS)
    for index in (3, 4):
        ctx.require_dtypes(index, FLOATS)
    mel_bins, dft_length = _scalar(ctx, 0), _scalar(ctx, 1)
    rows = -1 if dft_length is None else dft_length // 2 + 1
    return [TensorDesc((rows, -1 if mel_bins is None else mel_bins),
                       ctx.attr("output_datatype"))]


def _as_float(value: np.ndarray) -> float:
    return float(value.reshape(-1)[0])


@register_op("MelWeightMatrix",
             inputs=["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                     "upper_edge_hertz"],
             attrs=[Attr("output_datatype", AttrType.DTYPE, DataType.DT_FLOAT)],
             infer=_infer_mel)
def mel_weight_matrix_kernel(num_mel_bins: np.ndarray, dft_length: np.ndarray,
                             sample_rate: np.ndarray, lower_edge_hertz: np.ndarray,
                             upper_edge_hertz: np.ndarray, *,
                             output_datatype: DataType = DataType.DT_FLOAT) -> np.ndarray:
    """Weights that map a linear spectrum [..., dft_length // 2 + 1] to num_mel_bins mel
    bands (right-multiply a spectrogram by it)."""
    matrix = mel_weight_matrix(int(_as_float(num_mel_bins)), int(_as_float(dft_length)),
                               _as_float(sample_rate), _as_float(lower_edge_hertz),
                               _as_float(upper_edge_hertz))
    return matrix.astype(output_datatype.np_dtype)
