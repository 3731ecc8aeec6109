"""Property tests: broadcasting shape inference (Add, MatMul batches) agrees with NumPy.

Static shapes must infer exactly NumPy's result, and a ``ShapeError`` must be
raised exactly when NumPy refuses. With some dimensions unknown (``-1``) or
named, an inferred dimension is either NumPy's or unknown, never a different
size; a name in the result is the name of an input dimension that equals
NumPy's dimension there.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from ge.errors import ShapeError
from ge.ops import create_node
from tests.op_harness import run_op

PROPERTY = settings(max_examples=50, deadline=None, database=None)

SHAPE = st.lists(st.integers(0, 4), max_size=4).map(tuple)
PAIR = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4)


def _inferred(op_type: str, shapes: list[tuple], attrs: Optional[dict] = None) -> tuple:
    inputs = [create_node("Data", [], {"shape": list(shape)}, name=f"in{index}")
              for index, shape in enumerate(shapes)]
    return tuple(create_node(op_type, inputs, attrs or {}).shape)


def _numpy_broadcast(*shapes: tuple) -> Optional[tuple]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _numpy_matmul(a: tuple, b: tuple) -> Optional[tuple]:
    try:
        return np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape
    except ValueError:
        return None


def _hide(shape: tuple, mask: list[bool], prefix: str, named: bool) -> tuple:
    """``shape`` with the dims chosen by ``mask`` made unknown (-1) or named."""
    return tuple((f"{prefix}{i}" if named else -1) if hidden else dim
                 for i, (dim, hidden) in enumerate(zip(shape, mask)))


def _check_unknown_dims(inferred: tuple, expected: tuple, hidden: list[tuple],
                        names: dict[str, int]) -> None:
    """Every inferred dim is NumPy's, or unknown; a kept name's size is NumPy's dim."""
    assert len(inferred) == len(expected)
    for position, (got, want) in enumerate(zip(inferred, expected)):
        if isinstance(got, str):
            assert names[got] == want, (position, inferred, expected)
        elif got != -1:
            assert got == want, (position, inferred, expected)
        column = [s[len(s) - len(expected) + position] for s in hidden
                  if len(s) - len(expected) + position >= 0]
        static = [d for d in column if isinstance(d, int) and d != -1]
        if len(static) == len(column) or any(d != 1 for d in static):
            assert got == want, f"known dims {column} should fix dim {position}: {inferred}"


def _masks(draw: Any, shapes: tuple) -> list[list[bool]]:
    return [draw(st.lists(st.booleans(), min_size=len(s), max_size=len(s))) for s in shapes]


# -- elementwise broadcasting ---------------------------------------------------------

@PROPERTY
@given(PAIR)
def test_add_infers_numpy_broadcast(pair: Any) -> None:
    x, y = pair.input_shapes
    assert _inferred("Add", [x, y]) == pair.result_shape == np.broadcast_shapes(x, y)


@PROPERTY
@given(SHAPE, SHAPE)
def test_add_refuses_exactly_what_numpy_refuses(x: tuple, y: tuple) -> None:
    expected = _numpy_broadcast(x, y)
    if expected is None:
        with pytest.raises(ShapeError, match="do not broadcast"):
            _inferred("Add", [x, y])
    else:
        assert _inferred("Add", [x, y]) == expected


@PROPERTY
@given(mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_where_broadcasts_three_shapes(shapes: Any) -> None:
    condition, x, y = shapes.input_shapes
    inputs = [create_node("Data", [], {"shape": list(condition), "dtype": "bool"}, name="c"),
              create_node("Data", [], {"shape": list(x)}, name="x"),
              create_node("Data", [], {"shape": list(y)}, name="y")]
    assert tuple(create_node("Where", inputs).shape) == shapes.result_shape


@PROPERTY
@given(PAIR, st.booleans(), st.data())
def test_unknown_dims_never_contradict_numpy(pair: Any, named: bool, data: Any) -> None:
    x, y = pair.input_shapes
    x_mask, y_mask = _masks(data.draw, (x, y))
    hidden = [_hide(x, x_mask, "x", named), _hide(y, y_mask, "y", named)]
    names = {f"{p}{i}": dim for p, shape in (("x", x), ("y", y)) for i, dim in enumerate(shape)}
    inferred = _inferred("Add", hidden)
    _check_unknown_dims(inferred, pair.result_shape, hidden, names)


@settings(max_examples=25, deadline=None, database=None)
@given(PAIR)
def test_add_kernel_result_has_the_inferred_shape(pair: Any) -> None:
    x, y = (np.ones(shape, np.float32) for shape in pair.input_shapes)
    (result,) = run_op("Add", {"x": x, "y": y}, dynamic=["x"])
    assert result.shape == pair.result_shape
    assert np.all(result == 2)


# -- MatMul batches -------------------------------------------------------------------

@st.composite
def matmul_operands(draw: Any, compatible: bool = True) -> tuple[tuple, tuple]:
    """Operand shapes for MatMul; batches broadcast and K agrees when ``compatible``."""
    if compatible:
        batch_a, batch_b = draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                              max_side=3)).input_shapes
    else:
        batch_a, batch_b = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple)), \
            draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    k_b = k if compatible else draw(st.integers(1, 4))
    a = (k,) if draw(st.booleans()) and not batch_a else batch_a + (m, k)
    b = (k_b,) if draw(st.booleans()) and not batch_b else batch_b + (k_b, n)
    return a, b


@PROPERTY
@given(matmul_operands())
def test_matmul_infers_numpy_matmul_shape(operands: tuple[tuple, tuple]) -> None:
    a, b = operands
    assert _inferred("MatMul", [a, b]) == _numpy_matmul(a, b)


@PROPERTY
@given(matmul_operands(compatible=False))
def test_matmul_refuses_exactly_what_numpy_refuses(operands: tuple[tuple, tuple]) -> None:
    a, b = operands
    expected = _numpy_matmul(a, b)
    if expected is None:
        with pytest.raises(ShapeError):
            _inferred("MatMul", [a, b])
    else:
        assert _inferred("MatMul", [a, b]) == expected


def _swap_last_two(shape: tuple, swap: bool) -> tuple:
    return shape[:-2] + (shape[-1], shape[-2]) if swap and len(shape) >= 2 else shape


@PROPERTY
@given(matmul_operands(), st.booleans(), st.booleans())
def test_matmul_transposes_agree_with_swapped_operands(
        operands: tuple[tuple, tuple], transpose_a: bool, transpose_b: bool) -> None:
    a, b = operands
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    stored = [_swap_last_two(a, transpose_a), _swap_last_two(b, transpose_b)]
    assert _inferred("MatMul", stored, attrs) == _numpy_matmul(a, b)


@PROPERTY
@given(matmul_operands(), st.data())
def test_matmul_unknown_dims_never_contradict_numpy(operands: tuple[tuple, tuple],
                                                    data: Any) -> None:
    a, b = operands
    a_mask, b_mask = _masks(data.draw, (a, b))
    expected = _numpy_matmul(a, b)
    assert expected is not None
    inferred = _inferred("MatMul", [_hide(a, a_mask, "a", False), _hide(b, b_mask, "b", False)])
    assert len(inferred) == len(expected)
    for got, want in zip(inferred, expected):
        assert got in (want, -1), (a, b, a_mask, b_mask, inferred, expected)
