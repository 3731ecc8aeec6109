"""The TensorFlow frontend: ``parse_tensorflow`` (a frozen ``GraphDef`` or a SavedModel ->
GE).

A frozen ``.pb`` is read by GE's own protobuf decoder (``protobuf.py``): parsing one needs
neither TensorFlow nor the protobuf package. A SavedModel directory is frozen by
TensorFlow first (``savedmodel.py``, the one module that imports it), then read the same
way. Each TensorFlow op becomes registry ops (``translate*.py``; ``TRANSLATED`` lists the
op types); data keeps TensorFlow's NHWC layout.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from ge.errors import ModelFormatError
from ge.frontends.tensorflow.importer import import_graph
from ge.frontends.tensorflow.protobuf import decode_graph_def
from ge.frontends.tensorflow.savedmodel import freeze_saved_model, is_saved_model
from ge.frontends.tensorflow.translate import PASSTHROUGH_OPS, translators
from ge.ir import Graph

__all__ = ["parse_tensorflow", "tensorflow_op_histogram", "translated_ops", "TRANSLATED"]

ModelSource = Union[str, os.PathLike, bytes, bytearray, memoryview, Any]


def translated_ops() -> list[str]:
    """Every TensorFlow op type GE translates, sorted."""
    return sorted(set(translators()) | PASSTHROUGH_OPS | {"Placeholder"})


#: the TensorFlow op types translated (for the README and error messages)
TRANSLATED = tuple(translated_ops())


def _is_text(data: bytes) -> bool:
    head = data[:512]
    return bool(head) and all(32 <= b < 127 or b in b"\t\r\n" for b in head)


def _read(model: ModelSource) -> tuple[bytes, str, Optional[tuple[list[str], list[str]]]]:
    """The serialized GraphDef, a default graph name, and a SavedModel signature's
    (inputs, outputs) when the model is a SavedModel."""
    if hasattr(model, "SerializeToString") and callable(model.SerializeToString):
        return bytes(model.SerializeToString()), "tensorflow_graph", None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "tensorflow_graph", None
    if not isinstance(model, (str, os.PathLike)):
        raise ModelFormatError(f"parse_tensorflow takes a path, the bytes of a GraphDef or a "
                               f"GraphDef, got {type(model).__name__}")
    path = Path(model)
    if path.name == "saved_model.pb" and is_saved_model(path.parent):
        path = path.parent
    if is_saved_model(path):
        frozen = freeze_saved_model(path)
        return frozen.graph_def, path.name or "saved_model", (frozen.inputs, frozen.outputs)
    if path.is_dir():
        raise ModelFormatError(f"{path}: a directory without a saved_model.pb is not a "
                               f"SavedModel")
    if not path.is_file():
        raise ModelFormatError(f"{path}: no such model file")
    return path.read_bytes(), path.stem, None


def parse_tensorflow(model: ModelSource, inputs: Optional[Sequence[str]] = None,
                     outputs: Optional[Sequence[str]] = None, *,
                     input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                     name: Optional[str] = None) -> Graph:
    """Translate a TensorFlow graph into a ``ge.Graph``.

    ``model`` is a frozen ``GraphDef``: a ``.pb`` path, its bytes, or a ``GraphDef``
    object (anything with ``SerializeToString()``); or a SavedModel directory, frozen
    through TensorFlow (its ``serving_default`` signature gives the inputs and outputs).
    Reading a ``.pb`` never imports TensorFlow.

    ``inputs`` names the tensors fed (``"x"`` or ``"x:0"``); by default every
    ``Placeholder`` the outputs read. ``outputs`` names the tensors computed; by default
    every node no other node reads, except ``NoOp`` and constants left over. Each input
    is a ``Data`` node named as the TensorFlow node (feed ``session.run({"x": ...})``);
    each output value is named as TensorFlow's tensor without ``:0`` (``"Identity"``;
    ``"split:1"`` for another output). A dimension the graph leaves unknown (``-1``)
    stays dynamic; ``input_shapes={"x": (1, 224, 224, 3)}`` sets an input's shape.

    Raises ``ModelFormatError`` for bytes that are not a readable GraphDef,
    ``GraphError`` for names that are not in the graph or a graph without outputs, and
    one ``UnsupportedOpError`` listing every op type GE does not translate with its nodes.
    """
    data, default_name, signature = _read(model)
    if not data:
        raise ModelFormatError("not a TensorFlow GraphDef: the model is empty")
    if _is_text(data):
        raise ModelFormatError("not a TensorFlow GraphDef: the model is text (GE reads the "
                               "binary .pb form, not .pbtxt)")
    graph_def = decode_graph_def(data)
    if signature is not None:
        inputs = signature[0] if inputs is None else inputs
        outputs = signature[1] if outputs is None else outputs
    return import_graph(graph_def, inputs, outputs, dict(input_shapes or {}),
                        name or default_name)


def tensorflow_op_histogram(path: Union[str, os.PathLike]) -> Counter[str]:
    """How many nodes of each TensorFlow op type a frozen ``.pb`` holds (``ge info``)."""
    data = Path(path).read_bytes()
    return Counter(node.op for node in decode_graph_def(data).nodes)
