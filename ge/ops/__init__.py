"""The op registry and every registered op.

Importing this package registers all op families (one module per family) and
installs the registry's node check into ``Graph.validate``.
"""

from ge.ir import set_node_checker
from ge.ops import (  # noqa: F401 - each module registers its op family
    attention,
    control_flow,
    core,
    cumulative,
    detection,
    elementwise,
    fused_conv,
    fused_elementwise,
    fused_matmul,
    image,
    linalg,
    math_ops,
    matmul,
    nn,
    nn_deform,
    nn_loss,
    nn_nd,
    nn_transpose,
    normalization,
    quantize,
    quantized_rnn,
    reduce,
    regularization,
    rnn,
    sequence_mixers,
    signal,
    tensor_generators,
    tensor_index,
    tensor_ops,
    tensor_rearrange,
)
from ge.ops.interpreter import evaluate
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    LayoutRole,
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
    op_has_trait,
    ops_with,
    register_op,
    run_kernel,
)

set_node_checker(check_node)

__all__ = [
    "REQUIRED", "Attr", "AttrType", "Cost", "InferenceContext", "Input", "LayoutRole", "OpSchema",
    "Trait", "all_op_types", "check_node", "create_node", "evaluate", "get_schema", "has_op",
    "infer_outputs", "node_cost", "normalize_attrs", "ops_with", "register_op", "run_kernel",
    "op_has_trait",
]
