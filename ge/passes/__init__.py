"""Graph passes: the pass manager, the pattern language, and the optimizations."""

from ge.passes.base import Pass, PassFailure, PassResult
from ge.passes.manager import PassManager, PassRecord, format_report
from ge.passes.pattern import Constant, Input, Match, Node, Pattern, Refusal
from ge.passes.pipeline import LEVELS, passes_for_level
from ge.passes.rewrite import FunctionRule, ReplaceWith, RewritePass, Rule, remove_unused

__all__ = [
    "LEVELS", "Constant", "FunctionRule", "Input", "Match", "Node", "Pass", "PassFailure",
    "PassManager", "PassRecord", "PassResult", "Pattern", "Refusal", "ReplaceWith",
    "RewritePass", "Rule", "format_report", "passes_for_level", "remove_unused",
]
