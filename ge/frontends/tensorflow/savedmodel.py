"""A TensorFlow SavedModel directory, frozen into a ``GraphDef``.

The only module of GE that imports TensorFlow, and only when a SavedModel is read: it
loads the model, takes one of its signatures (``serving_default`` unless told), turns
its variables into constants with TensorFlow's ``convert_variables_to_constants_v2``
and serializes the resulting graph, which GE then reads as it reads a frozen ``.pb``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ge.errors import ModelFormatError

__all__ = ["FrozenSignature", "freeze_saved_model", "is_saved_model"]

DEFAULT_SIGNATURE = "serving_default"


@dataclass
class FrozenSignature:
    """A signature's function frozen: the serialized ``GraphDef`` and the tensor names of
    its inputs and outputs, in the signature's order."""

    graph_def: bytes
    inputs: list[str]
    outputs: list[str]


def is_saved_model(path: Path) -> bool:
    """True when ``path`` is a directory holding a ``saved_model.pb`` (or ``.pbtxt``)."""
    return path.is_dir() and any((path / name).is_file()
                                 for name in ("saved_model.pb", "saved_model.pbtxt"))


def freeze_saved_model(path: Path, signature: str = DEFAULT_SIGNATURE) -> FrozenSignature:
    """Load the SavedModel at ``path`` and freeze its ``signature``; ``ModelFormatError``
    when TensorFlow is missing, the model does not load or has no such signature."""
    try:
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )
    except ImportError:
        raise ModelFormatError(f"{path} is a SavedModel: reading one needs TensorFlow (pip "
                               f"install tensorflow-cpu); a frozen .pb does not") from None
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as error:  # noqa: BLE001 - TensorFlow raises many kinds
        raise ModelFormatError(f"{path}: TensorFlow cannot load the SavedModel: {error}") \
            from error
    signatures = dict(getattr(loaded, "signatures", {}) or {})
    if signature not in signatures:
        raise ModelFormatError(f"{path}: the SavedModel has no signature {signature!r} "
                               f"(it has {sorted(signatures) or 'none'})")
    function = signatures[signature]
    frozen = convert_variables_to_constants_v2(function)
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [t.name for t in frozen.outputs]
    return FrozenSignature(graph_def.SerializeToString(), inputs, outputs)
