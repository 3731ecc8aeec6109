"""Which passes run at which optimization level.

0: none. 1 (basic): folding and elimination. 2 (extended): and fusions.
3 (all, the default): and the layout pass, with clean-up around it.
"""

from __future__ import annotations

from ge.passes.base import Pass
from ge.passes.cleanup import (
    AlgebraicSimplificationPass,
    CommonSubexpressionEliminationPass,
    DeadCodeEliminationPass,
    NoOpEliminationPass,
)
from ge.passes.folding import ConstantFoldingPass, ShapeFoldingPass
from ge.passes.fusion_conv import BatchNormFoldingPass, ConvFusionPass
from ge.passes.fusion_elementwise import ElementwiseFusionPass
from ge.passes.fusion_transformer import (
    AttentionFusionPass,
    GeluFusionPass,
    LayerNormFusionPass,
    MatMulBiasFusionPass,
    MatMulResidualFusionPass,
    SiluFusionPass,
)
from ge.passes.layout import LayoutPass
from ge.passes.transpose import FlattenedTransposeFoldingPass, TransposeSinkingPass

__all__ = ["passes_for_level", "LEVELS"]

LEVELS = {0: "none", 1: "basic", 2: "extended", 3: "all"}


def _basic() -> list[Pass]:
    return [ShapeFoldingPass(), ConstantFoldingPass(), NoOpEliminationPass(),
            AlgebraicSimplificationPass(), CommonSubexpressionEliminationPass(),
            DeadCodeEliminationPass()]


def _fusions() -> list[Pass]:
    # SiLU first: a convolution then takes it as a post-op
    return [BatchNormFoldingPass(), SiluFusionPass(), ConvFusionPass(), MatMulBiasFusionPass(),
            GeluFusionPass(), LayerNormFusionPass(), AttentionFusionPass(),
            MatMulResidualFusionPass()]


def passes_for_level(level: int) -> list[Pass]:
    """The pass pipeline of optimization level ``level`` (0 to 3)."""
    if level not in LEVELS:
        raise ValueError(f"opt_level must be one of {sorted(LEVELS)}, got {level!r}")
    passes: list[Pass] = []
    if level >= 1:
        passes += _basic()
    if level >= 2:
        passes += _fusions() + [ConstantFoldingPass(), DeadCodeEliminationPass()]
    if level >= 3:
        passes += [LayoutPass(), TransposeSinkingPass(), NoOpEliminationPass(),
                   FlattenedTransposeFoldingPass(), DeadCodeEliminationPass()]
    if level >= 2:
        passes += [ElementwiseFusionPass(), DeadCodeEliminationPass()]
    return passes
