"""Math ops (ge/ops/math_ops.py, cumulative.py, linalg.py, signal.py) and Cast's
narrow-type rules.

ONNX's node suite checks these ops' numbers case by case; here is what it does not
cover: inference with dynamic dimensions, the errors that name the node, values
against torch beyond the suite's few examples, and Cast's E8M0 rounding modes.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ge.errors import AttrError, DTypeError, ShapeError
from ge.ops import create_node
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

RNG = np.random.default_rng(11)


def _one(op_type: str, inputs: dict[str, Any], attrs: dict | None = None, **options: Any
         ) -> np.ndarray:
    (result,) = run_op(op_type, inputs, attrs, **options)
    return result


def _data(shape: list[Any], dtype: str = "float32", name: str = "x") -> Any:
    return create_node("Data", [], {"shape": shape, "dtype": dtype}, name=name)


def _const(array: np.ndarray) -> Any:
    from ge.ir import Tensor

    return create_node("Const", [], {"value": Tensor(np.asarray(array))})


# -- inference with dynamic dimensions ---------------------------------------------------

def test_elementwise_inference_keeps_dynamic_dims() -> None:
    x = _data(["batch", -1, 4])
    assert create_node("Sin", [x]).shape == ("batch", -1, 4)
    assert create_node("IsNaN", [x]).dtype.short_name == "bool"
    slope = _data([4], name="slope")
    assert create_node("PRelu", [x, slope]).shape == ("batch", -1, 4)
    flags = _data(["batch", 1, 1], "bool")
    assert create_node("Xor", [flags, _data([1, 3, 1], "bool", "y")]).shape == ("batch", 3, 1)


def test_einsum_and_det_inference() -> None:
    a, b = _data(["b", -1, 5]), _data(["b", 5, 7], name="y")
    node = create_node("Einsum", [a, b], {"equation": "bij,bjk->bik"})
    assert node.shape == ("b", -1, 7)
    implicit = create_node("Einsum", [_data([2, 3, 4, 5])], {"equation": "...ij"})
    assert implicit.shape == (2, 3, 4, 5)
    summed = create_node("Einsum", [_data([6, "n", 6])], {"equation": "iji->j"})
    assert summed.shape == ("n",)
    assert create_node("Det", [_data(["b", 3, 3])]).shape == ("b",)


def test_signal_inference_without_constants() -> None:
    size = _data([], "int64", "size")
    assert create_node("HannWindow", [size]).shape == (-1,)
    assert create_node("HannWindow", [_const(np.int64(8))]).shape == (8,)
    x = _data([1, "n", 10, 1])
    axis = _data([], "int64", "axis")
    assert create_node("DFT", [x, None, axis]).shape == (1, "n", 10, 2)
    assert create_node("DFT", [x, None, axis], {"onesided": True}).shape == (-1, -1, -1, 2)
    known = create_node("DFT", [x, None, _const(np.int64(2))], {"onesided": True})
    assert known.shape == (1, "n", 6, 2)
    signal, step = _data([2, 128, 1]), _const(np.int64(8))
    assert create_node("STFT", [signal, step, None, _const(np.int64(16))]).shape == (2, 15, 9, 2)
    assert create_node("STFT", [signal, _data([], "int64", "s"), _data([16], name="w")]) \
        .shape == (2, -1, 9, 2)


# -- errors name the node -----------------------------------------------------------------

@pytest.mark.parametrize(("op_type", "inputs", "attrs", "error", "match"), [
    ("BitShift", {"x": np.ones(2, np.float32), "y": np.ones(2, np.float32)},
     {"direction": "LEFT"}, DTypeError, "BitShift node 'op'.*float32"),
    ("BitShift", {"x": np.ones(2, np.uint8), "y": np.ones(2, np.uint8)},
     {"direction": "UP"}, AttrError, "direction"),
    ("And", {"x": np.ones(2, np.int32), "y": np.ones(2, np.int32)}, {}, DTypeError, "bool"),
    ("Mod", {"x": np.ones(2, np.int32), "y": np.ones(2, np.int64)}, {}, DTypeError,
     "share one dtype"),
    ("Gelu", {"x": np.ones(2, np.float32)}, {"approximate": "erf"}, AttrError, "approximate"),
    ("BitCast", {"x": np.ones(2, np.float32)}, {"to": "int64"}, DTypeError, "32 bits"),
    ("Det", {"x": np.ones((2, 3), np.float32)}, {}, ShapeError, "not square"),
    ("Einsum", {"inputs": [np.ones((2, 3), np.float32)]}, {"equation": "ijk->i"}, ShapeError,
     "Einsum node 'op'.*3 dimensions"),
    ("Einsum", {"inputs": [np.ones((2, 3), np.float32)]}, {"equation": "ij,jk->ik"},
     ShapeError, "2 operand"),
    ("CumSum", {"x": np.ones(3, np.float32), "axis": np.array(1, np.int64)}, {}, ShapeError,
     "axis 1 is out of range"),
    ("PRelu", {"x": np.ones(3, np.float32), "slope": np.ones((2, 3), np.float32)}, {},
     ShapeError, "must broadcast to x"),
])
def test_errors_name_the_node(op_type: str, inputs: dict, attrs: dict, error: type,
                              match: str) -> None:
    const = [name for name in inputs if name == "axis"]
    with pytest.raises(error, match=match):
        build_op_graph(op_type, inputs, attrs, const=const)


# -- values beyond the suite ----------------------------------------------------------

def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


@pytest.mark.parametrize(("op_type", "attrs", "reference"), [
    ("Celu", {"alpha": 0.7}, lambda x: F.celu(x, 0.7)),
    ("Elu", {"alpha": 0.5}, lambda x: F.elu(x, 0.5)),
    ("Selu", {}, F.selu),
    ("Softplus", {}, F.softplus),
    ("Softsign", {}, F.softsign),
    ("HardSwish", {}, F.hardswish),
    ("Mish", {}, F.mish),
    ("Gelu", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    ("Gelu", {}, F.gelu),
    ("Swish", {"alpha": 1.5}, lambda x: x * torch.sigmoid(1.5 * x)),
    ("Asinh", {}, torch.asinh),
    ("Tan", {}, torch.tan),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_activations_match_torch(op_type: str, attrs: dict, reference: Any, dtype: Any) -> None:
    x = RNG.uniform(-6, 6, (4, 25)).astype(dtype)
    result = _one(op_type, {"x": x}, attrs)
    assert result.dtype == np.dtype(dtype)
    expected = reference(_t(x.astype(np.float64))).numpy().astype(dtype)
    assert_close(result, expected, what=op_type)


def test_softplus_and_mish_do_not_overflow() -> None:
    x = np.array([-1000.0, -90.0, 0.0, 90.0, 1000.0], np.float32)
    with np.errstate(all="raise"):
        np.testing.assert_allclose(_one("Softplus", {"x": x}), [0, 0, math.log(2), 90, 1000],
                                   atol=1e-30)
        assert np.all(np.isfinite(_one("Mish", {"x": x})))


def test_shrink_on_integers_and_prelu_unidirectional() -> None:
    x = np.array([-5, -1, 0, 1, 5], np.int32)
    np.testing.assert_array_equal(_one("Shrink", {"x": x}, {"lambd": 1.5, "bias": 1.0}),
                                  [-4, 0, 0, 0, 4])
    data, slope = RNG.normal(size=(2, 3, 4)).astype(np.float32), np.array([0.1, 0.2, 0.3, 0.4],
                                                                         np.float32)
    expected = F.prelu(_t(data).permute(0, 2, 1), _t(slope)).permute(0, 2, 1).numpy()
    assert_close(_one("PRelu", {"x": data, "slope": slope}), expected)


def test_mod_and_bit_shift_semantics() -> None:
    x, y = np.array([-7, 7, -7, 7], np.int32), np.array([3, -3, -3, 3], np.int32)
    np.testing.assert_array_equal(_one("Mod", {"x": x, "y": y}), [2, -2, -1, 1])
    np.testing.assert_array_equal(_one("Mod", {"x": x, "y": y}, {"fmod": 1}), [-1, 1, -1, 1])
    values = np.array([-8, 8, -1, 1], np.int16)
    shifts = np.array([1, 20, -2, 15], np.int16)
    np.testing.assert_array_equal(_one("BitShift", {"x": values, "y": shifts},
                                       {"direction": "RIGHT"}), [-4, 0, -1, 0])
    np.testing.assert_array_equal(_one("BitShift", {"x": values, "y": shifts},
                                       {"direction": "LEFT"}), [-16, 0, 0, -32768])


def test_integer_pow_with_negative_exponents_truncates() -> None:
    x = np.array([2, 3, -1, 1, -1, 7], np.int32)
    y = np.array([-1, 2, -3, -5, -2, 0], np.int64)
    np.testing.assert_array_equal(_one("Pow", {"x": x, "y": y}), [0, 9, -1, 1, 1, 1])


def test_einsum_matches_torch_implicit_and_ellipsis() -> None:
    a = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    b = RNG.normal(size=(4, 5)).astype(np.float32)
    for equation in ("...ij,jk", "bij,jk->bik", "bij,jk", "Bij,jk->kB", "bij->"):
        inputs = [a, b] if "," in equation else [a]
        result = _one("Einsum", {"inputs": inputs}, {"equation": equation})
        expected = torch.einsum(equation, *[_t(i) for i in inputs]).numpy()
        assert_close(result, expected, accumulate=True, what=equation)


def test_cumulative_ops_dynamic_axis_and_float16() -> None:
    x = RNG.uniform(0.5, 1.5, (3, 50)).astype(np.float16)
    for axis in (1, -2):
        for op_type, reference in (("CumSum", torch.cumsum), ("CumProd", torch.cumprod)):
            result = _one(op_type, {"x": x, "axis": np.array(axis, np.int32)}, {"reverse": 1})
            expected = reference(_t(x.astype(np.float64)).flip(axis), axis).flip(axis)
            assert_close(result, expected.numpy().astype(np.float16), what=op_type)


def test_det_batches_match_torch() -> None:
    x = RNG.normal(size=(2, 3, 4, 4))
    assert_close(_one("Det", {"x": x}), torch.linalg.det(_t(x)).numpy(), accumulate=True)


@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize(("op_type", "reference"), [
    ("HannWindow", torch.hann_window), ("BlackmanWindow", torch.blackman_window),
    ("HammingWindow", lambda *a, **k: torch.hamming_window(*a, alpha=25 / 46, beta=21 / 46, **k)),
])
def test_windows_match_torch(op_type: str, reference: Any, periodic: int) -> None:
    result = _one(op_type, {"size": np.array(12, np.int64)}, {"periodic": periodic},
                  const=["size"])
    expected = reference(12, periodic=bool(periodic), dtype=torch.float64).numpy()
    assert_close(result, expected.astype(np.float32))


def test_dft_and_stft_match_torch() -> None:
    signal = RNG.normal(size=(2, 64)).astype(np.float32)
    spectrum = _one("DFT", {"input": signal[..., None], "axis": np.array(1, np.int64)},
                    {"onesided": 1}, const=["axis"])
    expected = torch.view_as_real(torch.fft.rfft(_t(signal), dim=1)).numpy()
    assert_close(spectrum, expected, accumulate=True)
    back = _one("DFT", {"input": spectrum, "axis": np.array(1, np.int64)},
                {"inverse": 1, "onesided": 1}, const=["axis"])
    assert_close(back[..., 0], signal, accumulate=True)
    window = np.hanning(16).astype(np.float32)
    frames = _one("STFT", {"signal": signal[..., None], "frame_step": np.array(4, np.int64),
                           "window": window}, const=["frame_step"])
    expected = torch.stft(_t(signal), 16, hop_length=4, window=_t(window), center=False,
                          return_complex=True)
    assert_close(frames, torch.view_as_real(expected).transpose(1, 2).numpy(), accumulate=True)


# -- Cast to narrow types --------------------------------------------------------------

def test_cast_float8_saturation_and_its_absence() -> None:
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 0.3], np.float32)
    saturated = _one("Cast", {"x": x}, {"dtype": "float8_e4m3fn"}).astype(np.float32)
    np.testing.assert_array_equal(saturated[:4], [448, -448, 448, -448])
    assert np.isnan(saturated[4])
    wrapped = _one("Cast", {"x": x}, {"dtype": "float8_e5m2", "saturate": False})
    np.testing.assert_array_equal(wrapped.astype(np.float32)[:4], [np.inf, -np.inf] * 2)
    integers = _one("Cast", {"x": np.array([1000, -3], np.int32)}, {"dtype": "float8_e4m3fnuz"})
    np.testing.assert_array_equal(integers.astype(np.float32), [240, -3])


@pytest.mark.parametrize(("round_mode", "expected"), [
    ("up", [2.0**-127, 0.125, 2.0, 4.0, 2.0**127]),
    ("down", [2.0**-127, 0.0625, 1.0, 2.0, 2.0**127]),
    ("nearest", [2.0**-127, 0.125, 1.0, 4.0, 2.0**127]),
])
def test_cast_e8m0_round_modes(round_mode: str, expected: list[float]) -> None:
    x = np.array([0.0, 0.124, 1.1, 3.5, 3e38], np.float32)
    result = _one("Cast", {"x": x}, {"dtype": "float8_e8m0fnu", "round_mode": round_mode})
    assert result.dtype == np.dtype(ml_dtypes.float8_e8m0fnu)
    np.testing.assert_array_equal(result.astype(np.float64), expected)


def test_bitcast_round_trips_bits() -> None:
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    as_int = _one("BitCast", {"x": x}, {"to": "int32"})
    np.testing.assert_array_equal(as_int, x.view(np.int32))
    nibbles = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    np.testing.assert_array_equal(_one("BitCast", {"x": nibbles}, {"to": "uint4"})
                                  .astype(np.int32), [8, 15, 0, 7])
