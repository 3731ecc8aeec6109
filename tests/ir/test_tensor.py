"""Data types, tensors and descriptors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ge.ir import DataType, Format, Tensor, TensorDesc, normalize_shape

SEED_NAMES = {
    "DT_FLOAT": np.float32, "DT_FLOAT16": np.float16, "DT_BF16": ml_dtypes.bfloat16,
    "DT_DOUBLE": np.float64, "DT_INT8": np.int8, "DT_INT16": np.int16, "DT_INT32": np.int32,
    "DT_INT64": np.int64, "DT_UINT8": np.uint8, "DT_BOOL": np.bool_,
}


@pytest.mark.parametrize("name, numpy_type", SEED_NAMES.items())
def test_seed_names_map_to_numpy_and_back(name, numpy_type):
    member = DataType[name]
    assert member.np_dtype == np.dtype(numpy_type)
    assert DataType.parse(np.dtype(numpy_type)) is member
    assert DataType.parse(name) is member
    assert member.itemsize == np.dtype(numpy_type).itemsize


def test_unknown_dtypes_are_refused():
    with pytest.raises(ValueError):
        DataType.parse("complex64")
    with pytest.raises(ValueError):
        DataType.parse(np.complex64)


def test_tensor_copies_to_contiguous_read_only_storage():
    source = np.arange(6, dtype=np.float32).reshape(2, 3)
    transposed = source.T.astype(np.float32)  # F-ordered, as in the seed's section 7.1
    tensor = Tensor(transposed)
    assert tensor.numpy().flags.c_contiguous
    assert not tensor.numpy().flags.writeable
    np.testing.assert_array_equal(tensor.numpy(), source.T)
    source[0, 0] = 100  # later writes by the caller do not reach the tensor
    assert Tensor(source).numpy()[0, 0] == 100 and tensor.numpy()[0, 0] == 0
    assert tensor.shape == (3, 2) and tensor.dtype is DataType.DT_FLOAT and tensor.nbytes == 24


def test_tensor_equality_and_bfloat16():
    a = Tensor(np.ones(3, ml_dtypes.bfloat16))
    assert a.dtype is DataType.DT_BF16
    assert a == Tensor(np.ones(3, ml_dtypes.bfloat16))
    assert a != Tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        Tensor(np.array([object()]))


def test_descriptor_keeps_dynamic_dimensions():
    desc = TensorDesc([-1, "seq", 256], DataType.DT_FLOAT, "NHWC")
    assert desc.shape == (-1, "seq", 256)
    assert desc.format is Format.NHWC
    assert not desc.is_static
    assert str(desc) == "float32[?,seq,256]@NHWC"
    assert TensorDesc((2, 3)).is_static


@pytest.mark.parametrize("shape", [[-2], [1.5], [""], [True], "abc"])
def test_bad_shapes_are_refused(shape):
    with pytest.raises(ValueError):
        normalize_shape(shape)


# -- pending tensors: a scaling and a transposition computed in one pass when read ------

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("shape, axis, perm", [
    ((96, 80, 3, 3), 0, (2, 3, 1, 0)),   # OIHW filter, scaled per O, to HWIO (blocked)
    ((64, 130, 1, 1), 0, (2, 3, 1, 0)),  # 1x1 filter whose inner axis is scaled
    ((3, 3, 8, 200), 3, (3, 2, 0, 1)),   # HWIO back to OIHW
    ((5, 7), 1, (1, 0)),                 # small: one shot
])
def test_a_scaled_then_transposed_tensor_equals_numpy_doing_both(dtype, shape, axis, perm):
    rng = np.random.default_rng(3)
    base = rng.standard_normal(shape).astype(dtype)
    factor = rng.uniform(0.1, 3.0, shape[axis])
    compute = np.result_type(dtype, np.float32)
    broadcast = [1] * len(shape)
    broadcast[axis] = -1
    scaled = (base.astype(compute) * factor.astype(compute).reshape(broadcast)).astype(dtype)
    want = np.ascontiguousarray(scaled.transpose(perm))

    tensor = Tensor.scaled(base, factor, axis)
    moved = tensor.transposed(perm)
    assert moved.is_pending and tensor.is_pending
    assert moved.shape == want.shape and moved.dtype is DataType.parse(dtype)
    assert moved.nbytes == want.nbytes and moved.is_pending  # known without computing
    got = moved.numpy()
    assert not moved.is_pending and got.flags.c_contiguous and not got.flags.writeable
    np.testing.assert_array_equal(got, want)  # bit for bit: one rounding, as NumPy does
    np.testing.assert_array_equal(tensor.numpy(), scaled)
    assert tensor.is_pending is False


def test_transpositions_compose_and_a_computed_tensor_transposes_its_data():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    twice = Tensor.scaled(base, np.ones(3), 1).transposed((2, 0, 1)).transposed((1, 2, 0))
    np.testing.assert_array_equal(twice.numpy(), base.transpose(2, 0, 1).transpose(1, 2, 0))
    plain = Tensor(base)
    np.testing.assert_array_equal(plain.transposed((2, 1, 0)).numpy(), base.transpose(2, 1, 0))
    with pytest.raises(ValueError):
        plain.transposed((0, 0, 1))
    with pytest.raises(ValueError):
        Tensor.scaled(base, np.ones(4), 1)


def test_threads_reading_one_pending_tensor_all_get_its_data():
    from concurrent.futures import ThreadPoolExecutor

    base = np.random.default_rng(0).standard_normal((256, 64, 3, 3)).astype(np.float32)
    factor = np.linspace(0.5, 2.0, 256)
    want = np.ascontiguousarray((base * factor.astype(np.float32).reshape(-1, 1, 1, 1))
                                .transpose(2, 3, 1, 0))
    for _ in range(5):
        tensor = Tensor.scaled(base, factor, 0).transposed((2, 3, 1, 0))
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(Tensor.numpy, [tensor] * 8))
        for result in results:
            np.testing.assert_array_equal(result, want)


def test_compact_lets_a_mostly_unused_buffer_go():
    import gc
    import weakref

    from ge.ir.tensor import aligned_copy, compact

    big = aligned_copy(np.arange(1000, dtype=np.float32))
    big.setflags(write=False)
    root = big
    while root.base is not None:  # the memory itself, which views keep alive
        root = root.base
    gone = weakref.ref(root)
    del root
    # views starting on 64-byte boundaries: wrap keeps them as views
    small, middle = Tensor.wrap(big[:10]), Tensor.wrap(big[512:800])
    pending = Tensor.scaled(big.reshape(10, 100), np.ones(10), 0)  # not counted
    assert compact([small, middle, small, pending]) == (10 + 288) * 4
    np.testing.assert_array_equal(small.numpy(), np.arange(10, dtype=np.float32))
    assert not small.numpy().flags.writeable
    assert small.numpy().ctypes.data % 64 == 0 and middle.numpy().ctypes.data % 64 == 0
    del big
    gc.collect()
    assert gone() is not None  # the pending tensor still reads it
    pending.numpy()
    gc.collect()
    assert gone() is None


def test_compact_keeps_views_of_a_buffer_mostly_in_use():
    from ge.ir.tensor import aligned_copy, compact

    big = aligned_copy(np.arange(100, dtype=np.float32))
    big.setflags(write=False)
    half = Tensor.wrap(big[:60])
    assert compact([half]) == 0 and half.numpy().base is not None


def test_constants_start_on_a_cache_line_and_compact_aligns_misaligned_views():
    from ge.ir.tensor import ALIGNMENT, compact

    raw = np.frombuffer(b"\x00" * 3 + np.arange(64, dtype=np.float32).tobytes(), np.uint8)
    view = raw[3:].view(np.float32)  # as a model file's bytes may lie: not even 4-aligned
    view.setflags(write=False)
    wrapped = Tensor.wrap(view)
    assert np.shares_memory(wrapped.numpy(), raw)  # parsing copies nothing
    assert compact([wrapped], keep_share=0.0) == 64 * 4  # compiling gives it its own bytes
    assert wrapped.numpy().ctypes.data % ALIGNMENT == 0
    assert not np.shares_memory(wrapped.numpy(), raw) and not wrapped.numpy().flags.writeable
    np.testing.assert_array_equal(wrapped.numpy(), np.arange(64, dtype=np.float32))
    made = Tensor(np.ones((3, 5), np.float64).T)
    assert made.numpy().ctypes.data % ALIGNMENT == 0 and made.numpy().flags.c_contiguous
