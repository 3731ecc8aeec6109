"""One small TensorFlow graph per translated op (and per mode of the ops with modes), for
``test_tensorflow_frontend.py``: each names the TensorFlow op its frozen graph must hold,
so a case that TensorFlow rewrote into other ops fails instead of testing nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

F32, I32, I64 = tf.float32, tf.int32, tf.int64


@dataclass
class Case:
    """A graph of ``function`` on inputs ``inputs`` ((shape, dtype) pairs; a None shape
    has an unknown rank, given to GE by ``input_shapes``) that holds TF op ``op``;
    ``feed`` says how to draw the inputs ("normal", "positive", "ints", "indices")."""

    name: str
    op: str
    function: Callable[..., Any]
    inputs: list[tuple[Any, Any]] = field(default_factory=list)
    feed: str = "normal"
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _weights(*shape: int, seed: int = 7) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _image(shape: tuple[int, ...] = (2, 8, 8, 3)) -> list[tuple[tuple[int, ...], Any]]:
    return [(shape, F32)]


def _conv(strides: int, padding: Any, dilations: int = 1, kernel: int = 3
          ) -> Callable[[tf.Tensor], tf.Tensor]:
    weights = _weights(kernel, kernel, 3, 4)
    return lambda x: tf.nn.conv2d(x, weights, strides, padding, dilations=dilations)


def _depthwise(strides: int, padding: str) -> Callable[[tf.Tensor], tf.Tensor]:
    weights = _weights(3, 3, 3, 2)
    return lambda x: tf.nn.depthwise_conv2d(x, weights, [1, strides, strides, 1], padding)


def _batch_norm(x: tf.Tensor) -> tf.Tensor:
    rng = np.random.default_rng(3)
    scale, offset, mean = (tf.constant(rng.uniform(-1, 1, 3).astype(np.float32))
                           for _ in range(3))
    variance = tf.constant(rng.uniform(0.5, 2, 3).astype(np.float32))
    return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, mean, variance, epsilon=1e-3,
                                            is_training=False)[0]


CONVOLUTIONS = [
    Case("conv-same-s1", "Conv2D", _conv(1, "SAME"), _image()),
    Case("conv-same-s2-even", "Conv2D", _conv(2, "SAME"), _image((1, 8, 8, 3))),
    Case("conv-same-s2-odd", "Conv2D", _conv(2, "SAME"), _image((1, 7, 9, 3))),
    Case("conv-same-s2-k2", "Conv2D", _conv(2, "SAME", kernel=2), _image((1, 7, 8, 3))),
    Case("conv-valid-s1", "Conv2D", _conv(1, "VALID"), _image()),
    Case("conv-valid-s2", "Conv2D", _conv(2, "VALID"), _image((1, 9, 8, 3))),
    Case("conv-same-dilated", "Conv2D", _conv(1, "SAME", dilations=2), _image()),
    Case("conv-explicit", "Conv2D", _conv(1, [[0, 0], [1, 2], [0, 1], [0, 0]]), _image()),
    Case("depthwise-same-s1", "DepthwiseConv2dNative", _depthwise(1, "SAME"), _image()),
    Case("depthwise-same-s2", "DepthwiseConv2dNative", _depthwise(2, "SAME"), _image()),
    Case("depthwise-valid-s2", "DepthwiseConv2dNative", _depthwise(2, "VALID"),
         _image((1, 9, 9, 3))),
    Case("bias-add", "BiasAdd", lambda x: tf.nn.bias_add(x, _weights(3)), _image()),
    Case("bias-add-v1", "BiasAddV1", lambda x: tf.raw_ops.BiasAddV1(value=x, bias=_weights(3)),
         _image()),
    Case("fused-batch-norm", "FusedBatchNormV3", _batch_norm, _image()),
    Case("fused-batch-norm-v1", "FusedBatchNorm", lambda x: tf.raw_ops.FusedBatchNorm(
        x=x, scale=_weights(3), offset=_weights(3, seed=8), mean=_weights(3, seed=9),
        variance=tf.abs(_weights(3, seed=10)) + 0.5, epsilon=0.01, is_training=False)[0],
        _image()),
    Case("fused-batch-norm-v2", "FusedBatchNormV2", lambda x: tf.raw_ops.FusedBatchNormV2(
        x=x, scale=_weights(3), offset=_weights(3, seed=8), mean=_weights(3, seed=9),
        variance=tf.abs(_weights(3, seed=10)) + 0.5, is_training=False)[0], _image()),
    Case("grouped-conv", "Conv2D", lambda x: tf.nn.conv2d(x, _weights(3, 3, 2, 6), 1, "SAME"),
         [((1, 6, 6, 4), F32)]),
    Case("max-pool-same-s2", "MaxPool", lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"),
         _image((1, 8, 7, 3))),
    Case("max-pool-valid", "MaxPool", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), _image()),
    Case("avg-pool-same-s2", "AvgPool", lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"),
         _image((1, 8, 7, 3))),
    Case("avg-pool-valid-s1", "AvgPool", lambda x: tf.nn.avg_pool2d(x, 2, 1, "VALID"),
         _image()),
]

_MATRIX = ((3, 4), F32)
MATRICES = [
    Case("matmul", "MatMul", lambda a, b: tf.matmul(a, b), [((3, 4), F32), ((4, 5), F32)]),
    Case("matmul-transpose-a", "MatMul", lambda a, b: tf.matmul(a, b, transpose_a=True),
         [((4, 3), F32), ((4, 5), F32)]),
    Case("matmul-transpose-b", "MatMul", lambda a, b: tf.matmul(a, b, transpose_b=True),
         [((3, 4), F32), ((5, 4), F32)]),
    Case("batch-matmul", "BatchMatMulV2", lambda a, b: tf.matmul(a, b),
         [((2, 3, 4), F32), ((2, 4, 5), F32)]),
    Case("batch-matmul-adj-x", "BatchMatMulV2", lambda a, b: tf.matmul(a, b, adjoint_a=True),
         [((2, 4, 3), F32), ((2, 4, 5), F32)]),
    Case("batch-matmul-adj-y-broadcast", "BatchMatMulV2",
         lambda a, b: tf.matmul(a, b, adjoint_b=True), [((2, 1, 3, 4), F32), ((3, 5, 4), F32)]),
    Case("batch-matmul-v1", "BatchMatMul", lambda a, b: tf.raw_ops.BatchMatMul(
        x=a, y=b, adj_x=True), [((2, 4, 3), F32), ((2, 4, 5), F32)]),
    Case("batch-matmul-v3", "BatchMatMulV3", lambda a, b: tf.raw_ops.BatchMatMulV3(
        x=a, y=b, Tout=tf.float32, adj_y=True), [((2, 3, 4), F32), ((2, 5, 4), F32)]),
    Case("batch-matmul-adj-both", "BatchMatMulV2",
         lambda a, b: tf.matmul(a, b, adjoint_a=True, adjoint_b=True),
         [((2, 4, 3), F32), ((2, 5, 4), F32)]),
]


def _unary(op: str, function: Callable[[tf.Tensor], tf.Tensor], feed: str = "normal") -> Case:
    return Case(op.lower(), op, function, [((2, 3, 4), F32)], feed)


def _binary(op: str, function: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
            feed: str = "normal", dtype: Any = F32) -> Case:
    return Case(op.lower(), op, function, [((2, 3, 4), dtype), ((3, 1), dtype)], feed)


ELEMENTWISE = [
    _unary("Relu", tf.nn.relu), _unary("Relu6", tf.nn.relu6), _unary("Elu", tf.nn.elu),
    _unary("Selu", tf.nn.selu), _unary("Sigmoid", tf.sigmoid), _unary("Tanh", tf.tanh),
    _unary("Softplus", tf.nn.softplus), _unary("LeakyRelu", lambda x: tf.nn.leaky_relu(x, 0.3)),
    _unary("Softmax", tf.nn.softmax), _unary("LogSoftmax", tf.nn.log_softmax),
    _unary("Rsqrt", tf.math.rsqrt, "positive"), _unary("Sqrt", tf.sqrt, "positive"),
    _unary("Square", tf.square), _unary("Exp", tf.exp), _unary("Neg", tf.negative),
    _unary("Abs", tf.abs), _unary("Log", tf.math.log, "positive"), _unary("Erf", tf.math.erf),
    _unary("Floor", tf.floor), _unary("Reciprocal", tf.math.reciprocal, "positive"),
    _binary("Add", lambda a, b: tf.raw_ops.Add(x=a, y=b)), _binary("AddV2", tf.add),
    _binary("Sub", tf.subtract), _binary("Mul", tf.multiply),
    _binary("RealDiv", tf.divide, "positive"), _binary("Maximum", tf.maximum),
    _binary("Minimum", tf.minimum), _binary("Pow", tf.pow, "positive"),
    _binary("SquaredDifference", tf.math.squared_difference),
    _binary("FloorDiv", tf.math.floordiv, "ints", I32),
    _binary("FloorMod", tf.math.floormod, "ints", I32),
    _binary("Greater", lambda a, b: tf.cast(a > b, tf.float32)),
    _unary("Ceil", tf.math.ceil), _unary("Round", lambda x: tf.round(x * 2.0)),
    _unary("Sign", tf.sign), _unary("Softsign", tf.nn.softsign), _unary("Sin", tf.sin),
    _unary("Cos", tf.cos), _unary("Inv", lambda x: tf.raw_ops.Inv(x=x), "positive"),
    _unary("IsNan", lambda x: tf.cast(tf.math.is_nan(tf.math.log(x)), tf.float32)),
    _unary("Tan", tf.tan), _unary("Sinh", tf.sinh), _unary("Cosh", tf.cosh),
    _unary("Asin", lambda x: tf.asin(tf.tanh(x))),
    _unary("Acos", lambda y: tf.acos(tf.tanh(y))),
    _unary("Atan", tf.atan), _unary("Asinh", tf.asinh),
    _unary("Acosh", lambda x: tf.acosh(x + 1.0), "positive"),
    _unary("Atanh", lambda x: tf.atanh(tf.tanh(x) * 0.9)),
    _unary("Snapshot", lambda x: tf.raw_ops.Snapshot(input=x) + 1.0),
    _unary("PreventGradient", lambda x: tf.raw_ops.PreventGradient(input=x) + 1.0),
    _unary("EnsureShape", lambda x: tf.ensure_shape(x, [2, 3, 4]) + 1.0),
    _unary("CheckNumerics", lambda x: tf.debugging.check_numerics(x, "x") + 1.0),
    _binary("Div", lambda a, b: tf.raw_ops.Div(x=a, y=b), "ints", I32),
    _binary("Equal", lambda a, b: tf.cast(tf.equal(a, b), tf.int32), "ints", I32),
    _binary("NotEqual", lambda a, b: tf.cast(tf.not_equal(a, b), tf.int32), "ints", I32),
    _binary("Less", lambda a, b: tf.cast(a < b, tf.float32)),
    _binary("LessEqual", lambda a, b: tf.cast(a <= b, tf.int32), "ints", I32),
    _binary("GreaterEqual", lambda a, b: tf.cast(a >= b, tf.int32), "ints", I32),
    _binary("LogicalAnd", lambda a, b: tf.cast(tf.logical_and(a > 0, b > 0), tf.float32)),
    _binary("LogicalOr", lambda a, b: tf.cast(tf.logical_or(a > 0, b > 0), tf.float32)),
    _unary("LogicalNot", lambda x: tf.cast(tf.logical_not(x > 0), tf.float32)),
    Case("add-n", "AddN", lambda a, b, c: tf.add_n([a, b, c]), [_MATRIX] * 3),
    Case("select-v1-rows", "Select", lambda a, b: tf.raw_ops.Select(
        condition=a[:, 0] > 0, x=a, y=b), [_MATRIX] * 2),
    Case("select", "SelectV2", lambda a, b: tf.where(a > 0, a, b), [_MATRIX] * 2),
]


def _reduce(op: str, function: Callable[..., tf.Tensor], axis: Any, keepdims: bool) -> Case:
    tag = f"{op.lower()}-{axis}{'-keep' if keepdims else ''}"
    return Case(tag, op, lambda x: function(x, axis=axis, keepdims=keepdims),
                [((2, 3, 4), F32)])


REDUCTIONS = [
    _reduce("Mean", tf.reduce_mean, [1, 2], False), _reduce("Mean", tf.reduce_mean, -1, True),
    _reduce("Sum", tf.reduce_sum, 0, False), _reduce("Max", tf.reduce_max, [0, -1], True),
    _reduce("Min", tf.reduce_min, 1, False), _reduce("Prod", tf.reduce_prod, 2, False),
    Case("argmax", "ArgMax", lambda x: tf.argmax(x, axis=1), [((3, 5), F32)]),
    Case("argmin-int32", "ArgMin", lambda x: tf.argmin(x, axis=-1, output_type=tf.int32),
         [((3, 5), F32)]),
]

_X234 = [((2, 3, 4), F32)]
SHAPES = [
    Case("reshape", "Reshape", lambda x: tf.reshape(x, [4, -1]), _X234),
    Case("reshape-dynamic-batch", "Reshape",
         lambda x: tf.reshape(x, [tf.shape(x)[0], -1]), [((None, 3, 4), F32)]),
    Case("squeeze", "Squeeze", lambda x: tf.squeeze(x, [1]), [((2, 1, 4, 1), F32)]),
    Case("squeeze-all", "Squeeze", tf.squeeze, [((2, 1, 4, 1), F32)]),
    Case("expand-dims", "ExpandDims", lambda x: tf.expand_dims(x, 1), _X234),
    Case("expand-dims-negative", "ExpandDims", lambda x: tf.expand_dims(x, -1), _X234),
    Case("concat", "ConcatV2", lambda a, b: tf.concat([a, b], 1), [_MATRIX, ((3, 2), F32)]),
    Case("concat-negative-axis", "ConcatV2", lambda a, b: tf.concat([a, b, a], -1),
         [_MATRIX, ((3, 2), F32)]),
    Case("pack", "Pack", lambda a, b: tf.stack([a, b]), [_MATRIX] * 2),
    Case("pack-negative-axis", "Pack", lambda a, b: tf.stack([a, b, a], axis=-1),
         [_MATRIX] * 2),
    Case("unpack", "Unpack", lambda x: tf.unstack(x, axis=1), _X234),
    Case("pad", "Pad", lambda x: tf.pad(x, [[0, 1], [2, 0], [1, 1]]), _X234),
    Case("pad-v2", "PadV2", lambda x: tf.pad(x, [[1, 0], [0, 0], [0, 2]], constant_values=1.5),
         _X234),
    Case("mirror-pad", "MirrorPad", lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1]], "REFLECT"),
         _X234),
    Case("transpose", "Transpose", lambda x: tf.transpose(x, [2, 0, 1]), _X234),
    Case("conjugate-transpose", "ConjugateTranspose",
         lambda x: tf.raw_ops.ConjugateTranspose(x=x, perm=[1, 2, 0]), _X234),
    Case("rank", "Rank", lambda x: tf.cast(tf.rank(x), tf.float32) * x, [(None, F32)],
         input_shapes={"x0": (2, 3)}),
    Case("shape", "Shape", lambda x: tf.shape(x) * 2, [((None, 3, 4), F32)]),
    Case("size-rank", "Size", lambda x: tf.size(x) + tf.rank(x), [((None, 3), F32)]),
    Case("tile", "Tile", lambda x: tf.tile(x, [2, 1, 3]), _X234),
    Case("split", "Split", lambda x: tf.split(x, 2, axis=2), _X234),
    Case("split-v", "SplitV", lambda x: tf.split(x, [1, -1], axis=1), _X234),
    Case("slice", "Slice", lambda x: tf.slice(x, [1, 0, 1], [1, -1, 2]), _X234),
    Case("broadcast-to", "BroadcastTo", lambda x: tf.broadcast_to(x, [2, 3, 4]),
         [((3, 1), F32)]),
]

_X4 = [((4, 5, 6, 3), F32)]
STRIDED_SLICES = [
    Case("strided-slice-begin-end", "StridedSlice", lambda x: x[1:3, ::2], _X4),
    Case("strided-slice-masks", "StridedSlice", lambda x: x[:2, 1:, :-1], _X4),
    Case("strided-slice-ellipsis-shrink", "StridedSlice", lambda x: x[..., 1], _X4),
    Case("strided-slice-new-axis", "StridedSlice", lambda x: x[:, tf.newaxis, 1:], _X4),
    Case("strided-slice-negative-stride", "StridedSlice", lambda x: x[::-1, -1], _X4),
    Case("strided-slice-negative-bounds", "StridedSlice", lambda x: x[-3:-1, ..., ::-2], _X4),
    Case("strided-slice-shrink-two", "StridedSlice", lambda x: x[1, 2], _X4),
    Case("strided-slice-ellipsis-middle", "StridedSlice",
         lambda x: x[1:, ..., tf.newaxis, 0], _X4),
    Case("strided-slice-reverse-step-3", "StridedSlice", lambda x: x[:, 4:0:-3, 1::2], _X4),
]

GENERATORS = [
    Case("cast-to-int", "Cast", lambda x: tf.cast(x * 3, tf.int32), _X234),
    Case("cast-to-float", "Cast", lambda x: tf.cast(x, tf.float32) / 2, [((3, 4), I32)],
         "ints"),
    Case("gather-axis-1", "GatherV2", lambda x: tf.gather(x, [[2, 0], [1, 1]], axis=1), _X234),
    Case("gather-axis-0", "GatherV2", lambda x: tf.gather(x, [1, 0, 1]), _X234),
    Case("gather-v1", "Gather", lambda x: tf.raw_ops.Gather(params=x, indices=[[1], [0]]),
         _X234),
    Case("concat-v1", "Concat", lambda a, b: tf.raw_ops.Concat(concat_dim=0, values=[a, b]),
         [_MATRIX] * 2),
    Case("identity-n", "IdentityN", lambda a, b: tf.identity_n([a * 2.0, b]), [_MATRIX] * 2),
    Case("gather-indices-input", "GatherV2", lambda x, i: tf.gather(x, i, axis=-1),
         [((2, 3, 4), F32), ((5,), I32)], "indices"),
    Case("fill", "Fill", lambda x: tf.fill(tf.shape(x), 2.5) + x, [((None, 3), F32)]),
    Case("range", "Range", lambda x: tf.cast(tf.range(tf.shape(x)[0]), tf.float32) * 2.0,
         [((None, 3), F32)]),
    Case("zeros-like", "ZerosLike", lambda x: tf.zeros_like(x) + 1, [((None, 3), F32)]),
    Case("ones-like", "OnesLike", lambda x: tf.ones_like(x) * x, [((None, 3), F32)]),
    Case("identity-stop-gradient", "StopGradient", lambda x: tf.stop_gradient(x) * 2, _X234),
    Case("identity", "Identity", tf.identity, _X234),
]

ALL = CONVOLUTIONS + MATRICES + ELEMENTWISE + REDUCTIONS + SHAPES + STRIDED_SLICES \
    + GENERATORS


def feeds(case: Case, batch: int = 2, seed: int = 0) -> list[np.ndarray]:
    """Inputs for ``case`` (a None size takes ``batch``)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for index, (shape, dtype) in enumerate(case.inputs):
        shape = case.input_shapes[f"x{index}"] if shape is None else shape
        concrete = tuple(batch if d is None else d for d in shape)
        if dtype != F32:
            if case.feed == "indices":
                arrays.append(rng.integers(0, 4, concrete).astype(dtype.as_numpy_dtype))
            else:  # numbers of either sign; a second input (a divisor) never 0
                array = rng.integers(-20, 20, concrete)
                if arrays:
                    array = np.where(array == 0, 3, array)
                arrays.append(array.astype(dtype.as_numpy_dtype))
            continue
        array = rng.standard_normal(concrete).astype(np.float32)
        if case.feed == "positive":
            array = np.abs(array) + 0.5
        arrays.append(array)
    return arrays
