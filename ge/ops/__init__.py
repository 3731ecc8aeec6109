"""The op registry and every registered op.

Importing this package registers all op families (one module per family) and
installs the registry's node check into ``Graph.validate``.
"""

from ge.ir import set_node_checker
from ge.ops import (  # noqa: F401 - each module registers its op family
    attention,
    control_flow,
    core,
    elementwise,
    fused_conv,
    fused_elementwise,
    fused_matmul,
    math_ops,
    matmul,
    nn,
    nn_extra,
    quantize,
    reduce,
    rnn,
    tensor_extra,
    tensor_ops,
)
from ge.ops.interpreter import evaluate
from ge.ops.registry import (
                             REQUIRED,
                             Attr,
                             AttrType,
                             Cost,
                             InferenceContext,
                             Input,
                             OpSchema,
                             Trait,
                             all_op_types,
                             check_node,
                             create_node,
                             get_schema,
                             has_op,
                             infer_outputs,
                             node_cost,
                             normalize_attrs,
                             register_op,
)

set_node_checker(check_node)

__all__ = [
    "REQUIRED", "Attr", "AttrType", "Cost", "InferenceContext", "Input", "OpSchema", "Trait",
    "all_op_types", "check_node", "create_node", "evaluate", "get_schema", "has_op",
    "infer_outputs", "node_cost", "normalize_attrs", "register_op",
]
