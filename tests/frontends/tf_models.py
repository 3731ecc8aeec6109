"""TensorFlow graphs for the TensorFlow frontend's tests: freezing a function into the
bytes of a GraphDef, and the Keras models of the test set (their weights seeded, their
batch-norm statistics random so that inference-mode batch norm computes something)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2


@dataclass
class Frozen:
    """A function frozen: the serialized GraphDef, its input placeholders and output
    tensors by name, and the concrete function (TensorFlow's reference)."""

    data: bytes
    inputs: list[str]
    outputs: list[str]
    function: Any

    @property
    def op_types(self) -> set[str]:
        graph_def = tf.compat.v1.GraphDef()
        graph_def.ParseFromString(self.data)
        return {node.op for node in graph_def.node}

    def reference(self, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """TensorFlow's outputs for ``feeds`` (in input order)."""
        result = self.function(*[tf.constant(f) for f in feeds])
        result = result if isinstance(result, (list, tuple)) else [result]
        return [np.asarray(r) for r in result]


def freeze(function: Callable[..., Any], specs: Sequence[tuple[Sequence[Any], Any]]) -> Frozen:
    """Freeze ``function`` traced on inputs of ``specs`` ((shape, dtype) pairs; a None size
    is dynamic), its inputs named ``x0``, ``x1``, ..."""
    signature = [tf.TensorSpec(shape, dtype, name=f"x{i}") for i, (shape, dtype) in
                 enumerate(specs)]
    concrete = tf.function(function).get_concrete_function(*signature)
    frozen = convert_variables_to_constants_v2(concrete)
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    return Frozen(graph_def.SerializeToString(), inputs, [t.name for t in frozen.outputs],
                  frozen)


def randomize(model: keras.Model, seed: int) -> keras.Model:
    """Give every batch norm random statistics and affine terms (seeded)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if weight.path.endswith("moving_variance"):
            weight.assign(rng.uniform(0.5, 1.5, shape).astype(np.float32))
        elif weight.path.endswith(("moving_mean", "beta")):
            weight.assign(rng.uniform(-0.3, 0.3, shape).astype(np.float32))
        elif weight.path.endswith("gamma"):
            weight.assign(rng.uniform(0.7, 1.3, shape).astype(np.float32))
    return model


def freeze_keras(model: keras.Model, shape: Sequence[Any]) -> Frozen:
    """The model in inference mode (``training=False``) frozen on inputs of ``shape``."""
    return freeze(lambda x: model(x, training=False), [(shape, tf.float32)])


def small_cnn(seed: int = 0) -> keras.Model:
    """Conv2D, BatchNormalization, ReLU, MaxPool, DepthwiseConv2D, SeparableConv2D,
    AveragePooling, Flatten, Dense and Softmax on 32x32x3 images."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        layers.Conv2D(8, 3, padding="same"),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.MaxPooling2D(2),
        layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2),
        layers.BatchNormalization(),
        layers.ReLU(max_value=6.0),
        layers.SeparableConv2D(16, 3, padding="valid", activation="elu"),
        layers.AveragePooling2D(2, padding="same"),
        layers.Flatten(),
        layers.Dense(24, activation="tanh"),
        layers.Dropout(0.5),
        layers.Dense(10),
        layers.Softmax(),
    ])
    return randomize(model, seed)


def small_dense(seed: int = 0) -> keras.Model:
    """A dense network on 20 features."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((20,)),
        layers.Dense(64, activation="relu"),
        layers.BatchNormalization(),
        layers.Dense(32, activation="sigmoid"),
        layers.Dense(10, activation="softmax"),
    ])
    return randomize(model, seed)


def mobilenet_v2(seed: int = 0) -> keras.Model:
    """``keras.applications.MobileNetV2`` at 224x224, its weights seeded, giving its
    logits (a softmax of 1000 near-equal scores would hide errors)."""
    keras.utils.set_random_seed(seed)
    model = keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3),
                                           classifier_activation=None)
    return randomize(model, seed)
