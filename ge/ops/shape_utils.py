"""Shape arithmetic shared by op definitions: broadcasting, axes, dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from ge.ir.tensor import Dim, Shape, is_static_dim

__all__ = ["broadcast_shapes", "broadcast_dim", "normalize_axis", "normalize_axes",
           "multiply_dims", "dims_equal"]


def broadcast_dim(a: Dim, b: Dim) -> Optional[Dim]:
    """The NumPy-broadcast of two dimensions, or None when they cannot broadcast.

    Unknown dimensions (``-1`` or names) stay unknown unless the other side fixes
    them: a known size > 1 wins (an unknown dimension must then be 1 or equal to
    it), and a size of 1 yields the other dimension.
    """
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if is_static_dim(a) and is_static_dim(b):
        return None
    if is_static_dim(a):
        return a
    if is_static_dim(b):
        return b
    return -1  # two different unknowns


def broadcast_shapes(*shapes: Sequence[Dim]) -> Optional[Shape]:
    """The broadcast of several shapes, or None when they are incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[Dim] = [1] * rank
    for shape in shapes:
        padded = [1] * (rank - len(shape)) + list(shape)
        for index, dim in enumerate(padded):
            merged = broadcast_dim(result[index], dim)
            if merged is None:
                return None
            result[index] = merged
    return tuple(result)


def normalize_axis(axis: int, rank: int) -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative index; ``ValueError`` otherwise."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Several axes normalized; duplicates are refused."""
    result = [normalize_axis(a, rank) for a in axes]
    if len(set(result)) != len(result):
        raise ValueError(f"axes {list(axes)} repeat an axis")
    return result


def multiply_dims(dims: Sequence[Dim]) -> Dim:
    """The product of dimensions; unknown if any is unknown."""
    total = 1
    for dim in dims:
        if not isinstance(dim, int) or dim < 0:
            return -1
        total *= dim
    return total


def dims_equal(a: Dim, b: Dim) -> bool:
    """True when two dimensions are known to be equal or either is unknown."""
    return a == b or not is_static_dim(a) or not is_static_dim(b)
