"""GE: a graph engine for deep-learning models.

Build a graph with the seed's API (``ge.Graph``, ``ge.OperatorFactory``), compile
it with ``ge.compile`` and run it with ``ge.Session``.
"""

import os as _os

# OpenBLAS's idle worker threads spin for 2^28 cycles (about 0.1 s of a core) after each
# product unless this is set before NumPy loads it. 2^22 cycles (about 1.4 ms) still
# bridges the gaps between the products of one run (ResNet-50 runs as fast) and lets the
# threads sleep about a millisecond after it. A value the user set is kept; NumPy loaded
# before GE keeps its own setting.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")

from ge import errors, graphpass, partition  # noqa: E402
from ge import ops as _ops  # noqa: F401, E402 - registers every op
from ge.builder import OperatorFactory, constant  # noqa: E402
from ge.compiler import Executable, compile  # noqa: E402
from ge.compiler.model_file import load, save  # noqa: E402
from ge.ir import DataType, Format, Graph, Node, Tensor, TensorDesc, Value  # noqa: E402
from ge.session import Session  # noqa: E402

__version__ = "0.1.0"


def parse_onnx(model, *, name=None):
    """Translate an ONNX model (path, bytes or ``onnx.ModelProto``) into a ``ge.Graph``.

    Needs the ``onnx`` extra. See ``ge.frontends.onnx.parse_onnx``.
    """
    from ge.frontends.onnx import parse_onnx as parse

    return parse(model, name=name)


def parse_pytorch(module, example_inputs, dynamic_batch=False, *, name=None):
    """Translate a PyTorch ``nn.Module``, traced by ``torch.export`` on ``example_inputs``,
    into a ``ge.Graph`` (a dynamic first axis when ``dynamic_batch``).

    Needs PyTorch. See ``ge.frontends.torch.parse_pytorch``.
    """
    from ge.frontends.torch import parse_pytorch as parse

    return parse(module, example_inputs, dynamic_batch, name=name)


def parse_tensorflow(model, inputs=None, outputs=None, *, input_shapes=None, name=None):
    """Translate a TensorFlow frozen ``GraphDef`` (a ``.pb`` path, its bytes or a
    ``GraphDef``) or a SavedModel directory into a ``ge.Graph``.

    Reading a ``.pb`` needs no TensorFlow (GE decodes the protobuf itself); a SavedModel
    is frozen through TensorFlow first. See ``ge.frontends.tensorflow.parse_tensorflow``.
    """
    from ge.frontends.tensorflow import parse_tensorflow as parse

    return parse(model, inputs, outputs, input_shapes=input_shapes, name=name)


def torch_backend(graph_module, example_inputs, **options):
    """GE as a ``torch.compile`` backend (``torch.compile(model, backend="ge")`` finds it
    through the ``torch_dynamo_backends`` entry point). See
    ``ge.frontends.torch.torch_backend``."""
    from ge.frontends.torch import torch_backend as backend

    return backend(graph_module, example_inputs, **options)


def export_onnx(graph, path=None, **options):
    """Write ``graph`` as an ONNX model to ``path`` (and return the ``onnx.ModelProto``).

    Needs the ``onnx`` extra. See ``ge.frontends.onnx.export_onnx``.
    """
    from ge.frontends.onnx import export_onnx as export

    return export(graph, path, **options)

__all__ = [
    "DataType", "Executable", "Format", "Graph", "Node", "OperatorFactory", "Session", "Tensor",
    "TensorDesc", "Value", "compile", "constant", "errors", "export_onnx", "graphpass", "load",
    "parse_onnx", "parse_pytorch", "parse_tensorflow", "partition", "save", "torch_backend",
]
