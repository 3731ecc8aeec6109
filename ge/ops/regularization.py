"""Regularization ops: Dropout (ONNX's, with its training mode and seeded mask)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ge.ir import DataType, TensorDesc
from ge.ops.elementwise import FLOATS
from ge.ops.normalization import compute_dtype
from ge.ops.registry import Attr, AttrType, InferenceContext, Input, flops_per_output, register_op

# -- Dropout ----------------------------------------------------------------------------

def _infer_dropout(ctx: InferenceContext) -> Sequence[TensorDesc]:
    ctx.require_dtypes(0, FLOATS)
    for index in (1, 2):
        if ctx.has_input(index) and ctx.input(index).rank != 0:
            raise ctx.fail(f"input {ctx.schema.input_name(index)!r} must be a scalar, got "
                           f"shape {list(ctx.shape(index))}")
    if ctx.has_input(2):
        ctx.require_dtypes(2, (DataType.DT_BOOL,), "training_mode must be")
    x = ctx.input(0)
    return [x, TensorDesc(x.shape, DataType.DT_BOOL)]


@register_op("Dropout",
             inputs=["data", Input("ratio", optional=True, doc="scalar, default 0.5"),
                     Input("training_mode", optional=True, doc="bool scalar, default false")],
             outputs=("output", "mask"),
             attrs=[Attr("seed", AttrType.INT, None, doc="seed of the random generator")],
             infer=_infer_dropout, cost=flops_per_output(2), traits=())
def dropout_kernel(data: np.ndarray, ratio: Optional[np.ndarray] = None,
                   training_mode: Optional[np.ndarray] = None, *, seed: Optional[int],
                   ) -> tuple[np.ndarray, np.ndarray]:
    """ONNX Dropout. Out of training mode: output = data, mask all true. In training mode
    each element is kept with probability 1 - ratio (kept when a uniform draw in [0, 1) is
    >= ratio; NumPy's MT19937 generator, seeded by ``seed`` when given) and scaled by
    1 / (1 - ratio); the mask says which were kept."""
    if training_mode is None or not bool(training_mode):
        return data, np.ones(data.shape, np.bool_)
    drop = 0.5 if ratio is None else float(ratio)
    generator = np.random.RandomState(seed)
    mask = generator.uniform(0.0, 1.0, data.shape) >= drop
    scale = 0.0 if drop >= 1 else 1.0 / (1.0 - drop)
    output = data.astype(compute_dtype(data.dtype)) * mask * scale
    return output.astype(data.dtype, copy=False), mask
