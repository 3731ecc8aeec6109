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
