"""GE: a graph engine for deep-learning models.

Build a graph with the seed's API (``ge.Graph``, ``ge.OperatorFactory``), compile
it with ``ge.compile`` and run it with ``ge.Session``.
"""

from ge import errors, graphpass
from ge import ops as _ops  # noqa: F401 - registers every op
from ge.builder import OperatorFactory, constant
from ge.compiler import Executable, compile
from ge.compiler.model_file import load, save
from ge.ir import DataType, Format, Graph, Node, Tensor, TensorDesc, Value
from ge.session import Session

__version__ = "0.1.0"


def parse_onnx(model, *, name=None):
    """Translate an ONNX model (path, bytes or ``onnx.ModelProto``) into a ``ge.Graph``.

    Needs the ``onnx`` extra. See ``ge.frontends.onnx.parse_onnx``.
    """
    from ge.frontends.onnx import parse_onnx as parse

    return parse(model, name=name)


def export_onnx(graph, path=None, **options):
    """Write ``graph`` as an ONNX model to ``path`` (and return the ``onnx.ModelProto``).

    Needs the ``onnx`` extra. See ``ge.frontends.onnx.export_onnx``.
    """
    from ge.frontends.onnx import export_onnx as export

    return export(graph, path, **options)

__all__ = [
    "DataType", "Executable", "Format", "Graph", "Node", "OperatorFactory", "Session", "Tensor",
    "TensorDesc", "Value", "compile", "constant", "errors", "export_onnx", "graphpass", "load",
    "parse_onnx", "save",
]
