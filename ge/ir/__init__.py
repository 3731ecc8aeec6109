"""The graph IR: graphs, nodes, values, tensors, descriptors and data types."""

from ge.ir.dtypes import DataType, from_numpy_dtype, to_numpy_dtype
from ge.ir.graph import (
    DIMENSION_NAMES_ARE_HINTS,
    MEMORY_OPTIONS_KEY,
    Graph,
    Node,
    Usage,
    Value,
    as_value,
    collector_paused,
    set_node_checker,
)
from ge.ir.tensor import (
                          Dim,
                          Format,
                          Shape,
                          Tensor,
                          TensorDesc,
                          format_shape,
                          is_static,
                          normalize_shape,
                          num_elements,
)

__all__ = [
    "DIMENSION_NAMES_ARE_HINTS", "MEMORY_OPTIONS_KEY", "DataType", "Dim", "Format", "Graph",
    "Node", "Shape",
    "Tensor", "TensorDesc", "Usage",
    "Value", "as_value", "collector_paused", "format_shape", "from_numpy_dtype", "is_static",
    "normalize_shape", "num_elements", "set_node_checker", "to_numpy_dtype",
]
