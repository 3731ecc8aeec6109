"""GE: a graph engine for deep-learning models."""
from ge import errors
from ge.builder import OperatorFactory
from ge.ir import DataType, Format, Graph, Tensor, TensorDesc
from ge import ops  # noqa: F401  - registers every op

__all__ = ["DataType", "Format", "Graph", "OperatorFactory", "Tensor", "TensorDesc", "errors"]
