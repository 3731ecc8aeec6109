"""Transposes of a batch of matrices through OpenBLAS's omatcopy (``ge.engines.transpose``):
which permutations are such a batch, the copies against NumPy's own transpose bit for bit
(NaN, infinities, signed zeros), and the NumPy and torch engines' Transpose writers
taking the path or falling back."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.engines import transpose
from ge.engines.transpose import Transposer, matrix_plan
from ge.ops import create_node

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("shape, perm, plan", [
    ((2, 3, 4, 5), (0, 2, 3, 1), (2, 3, 20)),  # NCHW -> NHWC
    ((2, 4, 5, 3), (0, 3, 1, 2), (2, 20, 3)),  # NHWC -> NCHW
    ((1, 3, 4, 5), (0, 2, 3, 1), (1, 3, 20)),  # a batch of one is dropped
    ((6, 7), (1, 0), (1, 6, 7)),
    ((4, 1, 6), (2, 1, 0), (1, 4, 6)),  # an axis of one moves freely
    ((2, 3, 4, 5), (2, 3, 0, 1), (1, 6, 20)),
    ((2, 3, 4, 5), (0, 1, 3, 2), (6, 4, 5)),
    ((2, 3, 4, 5), (0, 2, 1, 3), None),  # the rows of 5 move: not a matrix transpose
    ((2, 3, 4, 5), (1, 0, 2, 3), None),
    ((2, 3, 4), (0, 1, 2), None),  # nothing moves
    ((2, 3, 4, 5), (3, 2, 1, 0), None),
])
def test_which_permutations_transpose_a_batch_of_matrices(shape, perm, plan):
    assert matrix_plan(shape, perm) == plan


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, perm", [((2, 16, 24, 32), (0, 2, 3, 1)),
                                         ((3, 24, 32, 16), (0, 3, 1, 2)),
                                         ((96, 130), (1, 0))])
def test_the_omatcopy_path_copies_bit_for_bit(dtype, shape, perm):
    assert transpose.available(dtype)  # NumPy's OpenBLAS exports it
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::97], flat[1::89], flat[2::83], flat[3::79] = np.nan, np.inf, -np.inf, -0.0
    out = np.full(np.transpose(x, perm).shape, 7, dtype)
    assert Transposer(perm)(x, out)
    want = np.ascontiguousarray(np.transpose(x, perm))
    assert out.tobytes() == want.tobytes()


def test_the_path_declines_what_it_cannot_copy():
    perm = (0, 2, 3, 1)
    x = RNG.standard_normal((2, 16, 24, 32)).astype(np.float32)
    out = np.zeros((2, 24, 32, 16), np.float32)
    assert not Transposer(perm)(x.astype(np.int32), out.astype(np.int32))  # no routine
    assert not Transposer(perm)(x[:, :, :, ::-1], out)  # not contiguous
    assert not Transposer(perm)(x[:, :2, :2, :2], out[:, :2, :2, :2])  # too small
    many = RNG.standard_normal((transpose.MAX_BATCH + 1, 8, 64)).astype(np.float32)
    assert not Transposer((0, 2, 1))(many, np.empty((transpose.MAX_BATCH + 1, 64, 8),
                                                    np.float32))


@pytest.mark.parametrize("engines", [["numpy"], ["torch", "numpy"]])
@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2], [0, 2, 1, 3]])
def test_transpose_nodes_give_numpy_transpose(engines, perm):
    graph = ge.Graph("t")
    x = create_node("Data", [], {"shape": [2, 32, 40, 24]}, "x", graph)
    graph.set_outputs([create_node("Transpose", [x], {"perm": perm}, "y", graph)])
    executable = ge.compile(graph, opt_level=0, engines=engines)
    assert executable.report["engines_by_op"] == {engines[0]: {"Transpose": 1}}
    data = RNG.standard_normal((2, 32, 40, 24)).astype(np.float32)
    session = ge.Session(executable)
    for _ in range(2):
        np.testing.assert_array_equal(session.run({"x": data})["y"],
                                      np.transpose(data, perm))
