"""How each array a generated loop reads is laid out against the output: its broadcast kind.

The loop walks the output, C-contiguous, as ``blocks`` of ``inner`` elements
(``inner`` = the product of the output's dimensions from a split axis ``k`` on).
An array of the output's shape is ``full`` (read at the output's index); a
one-element array is a ``scalar`` (read once, before the loop); an array that
equals the output on its leading axes and is 1 on the rest (``[N, C, 1, 1]``
against ``[N, C, H, W]``) is ``outer`` (one value per block); one that is 1 on
the leading axes and equals the output on the rest (a bias ``[C]`` against
``[N, H, W, C]``) is ``inner`` (read at the index within the block). Any other
broadcast has no layout here, and the NumPy engine runs the node.

Shapes may hold unknown dimensions (-1 or a name) at compile time: an unknown
dimension is taken to equal the output's unknown dimension at the same place,
and never to be 1; the kinds found at compile time are checked against the real
shapes at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from ge.ir.tensor import Dim

__all__ = ["FULL", "SCALAR", "OUTER", "INNER", "Layout", "classify"]

FULL, SCALAR, OUTER, INNER = "full", "scalar", "outer", "inner"


@dataclass(frozen=True)
class Layout:
    """The kinds of a loop's arrays, and the split axis (None: no outer or inner array,
    so the loop may cut the output into blocks of any size)."""

    kinds: tuple[str, ...]
    split: Optional[int]


def _padded(shape: Sequence[Dim], rank: int) -> Optional[tuple[Dim, ...]]:
    if len(shape) > rank:
        return None
    return (1,) * (rank - len(shape)) + tuple(shape)


def _is_one(dims: Sequence[Dim]) -> bool:
    return all(d == 1 for d in dims)


def _kind(shape: tuple[Dim, ...], output: tuple[Dim, ...], split: int) -> Optional[str]:
    if _is_one(shape):
        return SCALAR
    if shape == output:
        return FULL
    if shape[:split] == output[:split] and _is_one(shape[split:]):
        return OUTER
    if _is_one(shape[:split]) and shape[split:] == output[split:]:
        return INNER
    return None


def classify(shapes: Sequence[Sequence[Dim]], output: Sequence[Dim]) -> Optional[Layout]:
    """The layout of arrays of ``shapes`` read by a loop over ``output``; None when some
    array broadcasts in a way no layout covers. The largest workable split is chosen
    (the most blocks to share among threads)."""
    rank = len(output)
    padded = [_padded(shape, rank) for shape in shapes]
    if any(p is None for p in padded):
        return None
    target = tuple(output)
    simple = [_kind(p, target, 0) for p in padded if p is not None]
    if all(kind in (FULL, SCALAR) for kind in simple):
        return Layout(tuple(k for k in simple if k is not None), None)
    for split in range(rank - 1, 0, -1):
        kinds = [_kind(p, target, split) for p in padded if p is not None]
        if all(kind is not None for kind in kinds):
            return Layout(tuple(k for k in kinds if k is not None), split)
    return None
