"""GE: a graph engine for deep-learning models.

Build a graph with the seed's API (``ge.Graph``, ``ge.OperatorFactory``), compile
it with ``ge.compile`` and run it with ``ge.Session``.
"""

from ge import errors
from ge import ops as _ops  # noqa: F401 - registers every op
from ge.builder import OperatorFactory, constant
from ge.compiler import Executable, compile
from ge.ir import DataType, Format, Graph, Node, Tensor, TensorDesc, Value
from ge.session import Session

__version__ = "0.1.0"

__all__ = [
    "DataType", "Executable", "Format", "Graph", "Node", "OperatorFactory", "Session", "Tensor",
    "TensorDesc", "Value", "compile", "constant", "errors",
]
