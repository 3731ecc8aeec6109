"""Data movement ops (Reshape ... Pad) against PyTorch, or NumPy where torch has no twin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from ge.errors import DTypeError, ExecutionError, OpArgumentError, ShapeError
from ge.ops import Trait, get_schema, node_cost
from tests.op_harness import build_op_graph, run_op
from tests.tolerance import assert_close

INT_MAX = 2**63 - 1
INT_MIN = -(2**63)
RNG = np.random.default_rng(7)
FAST = settings(max_examples=30, deadline=None)


def _rand(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _torch(array: np.ndarray) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.asarray(array)


def _one(op_type: str, inputs: dict[str, Any], attrs: Optional[dict[str, Any]] = None,
         const: Sequence[str] = (), dynamic: Sequence[str] = ()) -> np.ndarray:
    results = run_op(op_type, inputs, attrs, const, dynamic)
    assert len(results) == 1
    return results[0]


def _out_shape(op_type: str, inputs: dict[str, Any], attrs: Optional[dict[str, Any]] = None,
               const: Sequence[str] = (), dynamic: Sequence[str] = ()) -> tuple[Any, ...]:
    return build_op_graph(op_type, inputs, attrs, const, dynamic).outputs[0].shape


def _symbolic(op_type: str, first: str, dims: Sequence[Any], attrs: Optional[dict] = None,
              **consts: Any) -> list[tuple[Any, ...]]:
    """Output shapes of ``op_type`` fed by a Data of ``dims`` (names allowed) and Consts."""
    graph = ge.Graph(f"sym_{op_type}")
    data = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", first)
                        .set_attr("shape", list(dims)).build())
    builder = ge.OperatorFactory.create_op(op_type).set_input(first, data)
    for name, value in consts.items():
        builder.set_input(name, np.asarray(value, dtype=np.int64))
    for key, value in (attrs or {}).items():
        builder.set_attr(key, value)
    node = graph.add_op(builder.set_attr("name", "op").build())
    return [value.shape for value in node.outputs]


def _fails(error: type, build: Callable[[], Any], match: str = "") -> None:
    """``build`` raises exactly ``error``, with a message naming the node 'op'."""
    with pytest.raises(error) as caught:
        build()
    assert caught.type is error, f"raised {caught.type.__name__}, expected {error.__name__}"
    assert "'op'" in str(caught.value), str(caught.value)
    if match:
        assert match in str(caught.value), str(caught.value)


# -- registry facts ---------------------------------------------------------------------

OPS = ["Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "Squeeze", "Unsqueeze",
       "Flatten", "Expand", "Pad"]


def test_traits() -> None:
    views = {"Reshape", "Squeeze", "Unsqueeze", "Flatten"}
    for op_type in OPS:
        schema = get_schema(op_type)
        assert schema.has_trait(Trait.PURE), op_type
        assert schema.has_trait(Trait.VIEW) == (op_type in views), op_type
        assert schema.doc, op_type


def test_cost_moves_bytes_only() -> None:
    graph = build_op_graph("Transpose", {"x": _rand(2, 3)})
    cost = node_cost(graph.outputs[0].producer)
    assert cost.flops == 0 and cost.bytes == 2 * 6 * 4


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.bool_, np.float16,
                                   ml_dtypes.bfloat16, np.float64])
def test_dtypes_pass_through(dtype: Any) -> None:
    x = (RNG.standard_normal((2, 3, 4)) * 3).astype(dtype)
    cases = [
        ("Reshape", {"tensor": x, "shape": [4, -1]}, {}),
        ("Transpose", {"x": x}, {"perm": [2, 0, 1]}),
        ("Concat", {"x": [x, x]}, {"axis": -1}),
        ("Slice", {"x": x, "starts": [1], "ends": [3], "axes": [2]}, {}),
        ("Gather", {"x": x, "indices": np.array([2, 0])}, {"axis": 1}),
        ("Expand", {"x": x, "shape": [2, 2, 3, 4]}, {}),
        ("Pad", {"x": x, "pads": [0, 1, 0, 0, 1, 0]}, {"mode": "edge"}),
        ("Flatten", {"x": x}, {}),
    ]
    for op_type, inputs, attrs in cases:
        result = _one(op_type, inputs, attrs)
        assert result.dtype == x.dtype, op_type
    parts = run_op("Split", {"x": x}, {"axis": 2, "num_outputs": 2})
    assert all(p.dtype == x.dtype for p in parts)
    np.testing.assert_array_equal(_one("Flatten", {"x": x}, {"axis": 2}), x.reshape(6, 4))


def test_index_inputs_must_be_integers() -> None:
    x = _rand(2, 3)
    floats = np.array([1.0, 2.0], np.float32)
    cases = [("Reshape", {"tensor": x, "shape": floats}),
             ("Slice", {"x": x, "starts": floats, "ends": np.array([2, 3])}),
             ("Gather", {"x": x, "indices": floats}),
             ("Squeeze", {"x": x, "axes": floats}),
             ("Unsqueeze", {"x": x, "axes": floats}),
             ("Expand", {"x": x, "shape": floats}),
             ("Pad", {"x": x, "pads": np.zeros(4, np.float32)}),
             ("Split", {"x": x, "split": floats})]
    for op_type, inputs in cases:
        for const in ((), tuple(inputs)[1:]):
            _fails(DTypeError, lambda op=op_type, feed=inputs, const=const:
                   build_op_graph(op, feed, const=const))


# -- Reshape ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [[6, 4], [-1], [4, -1, 2], [0, 12], [0, 0, -1], [2, 3, 4, 1]])
def test_reshape_matches_torch(spec: list[int]) -> None:
    x = _rand(2, 3, 4)
    expected = torch.from_numpy(x).reshape([x.shape[i] if v == 0 else v
                                            for i, v in enumerate(spec)])
    for const in (["shape"], []):
        got = _one("Reshape", {"tensor": x, "shape": np.array(spec)}, const=const)
        np.testing.assert_array_equal(got, _torch(expected))


def test_reshape_seed_python_list_and_int32_shape() -> None:
    x = _rand(2, 64, 4, 4)
    assert _one("Reshape", {"tensor": x, "shape": [-1, 1024]}).shape == (2, 1024)
    got = _one("Reshape", {"tensor": x, "shape": np.array([2, -1], np.int32)}, const=["shape"])
    np.testing.assert_array_equal(got, x.reshape(2, -1))


def test_reshape_allowzero() -> None:
    x = np.zeros((0, 3), np.float32)
    got = _one("Reshape", {"tensor": x, "shape": [3, 0]}, {"allowzero": 1}, const=["shape"])
    assert got.shape == (3, 0)
    got = _one("Reshape", {"tensor": _rand(2, 3), "shape": [0, 3]}, const=["shape"])
    assert got.shape == (2, 3)
    # A copied 0 cancels out, so the -1 is well defined even for an empty tensor.
    for const in (["shape"], []):
        got = _one("Reshape", {"tensor": x, "shape": np.array([0, -1])}, const=const)
        assert got.shape == (0, 3)


def test_reshape_inference_keeps_unknown_dims() -> None:
    assert _symbolic("Reshape", "tensor", [-1, 4, 8], shape=[0, -1]) == [(-1, 32)]
    assert _symbolic("Reshape", "tensor", [-1, 4, 4, 128], shape=[-1, 2048]) == [(-1, 2048)]
    assert _symbolic("Reshape", "tensor", ["N", 4, 8], shape=[0, -1]) == [("N", 32)]
    assert _symbolic("Reshape", "tensor", ["N", 4, 8], shape=[-1, 32]) == [("N", 32)]
    assert _symbolic("Reshape", "tensor", [-1, 4, 8], shape=[2, -1]) == [(2, -1)]
    assert _symbolic("Reshape", "tensor", [-1, 6], shape=[0, 2, 3]) == [(-1, 2, 3)]
    x = _rand(3, 4, 8)
    inputs = {"tensor": x, "shape": np.array([0, -1])}
    assert _out_shape("Reshape", inputs, const=["shape"], dynamic=["tensor"]) == (-1, -1)
    assert _out_shape("Reshape", inputs) == (-1, -1)  # shape fed at run time: rank only
    assert _one("Reshape", inputs, const=["shape"], dynamic=["tensor"]).shape == (3, 32)


@pytest.mark.parametrize("spec, shape, message", [
    ([-1, -1], [2, 3, 4], "more than one -1"),
    ([5, -1], [2, 3, 4], "cannot be inferred"),
    ([5, 5], [2, 3, 4], "cannot reshape"),
    ([0, 0, 0, 0], [2, 3, 4], "rank 3"),
    ([-2, 12], [2, 3, 4], "negative"),
    (["N", 33], ["N", 4, 8], "cannot reshape"),
])
def test_reshape_errors(spec: list[Any], shape: list[Any], message: str) -> None:
    spec = [0 if v == "N" else v for v in spec]
    _fails(ShapeError, lambda: _symbolic("Reshape", "tensor", shape, shape=spec), message)


def test_reshape_error_cases_of_attributes_and_rank() -> None:
    _fails(ShapeError, lambda: _symbolic("Reshape", "tensor", [2, 3], {"allowzero": 1},
                                         shape=[0, -1]), "allowzero")
    inputs = {"tensor": _rand(2, 3), "shape": np.array([6])}
    _fails(ShapeError, lambda: build_op_graph("Reshape", inputs, dynamic=["shape"]),
           "unknown length")
    inputs = {"tensor": _rand(2, 3), "shape": np.array([[6]])}
    _fails(ShapeError, lambda: build_op_graph("Reshape", inputs, const=["shape"]), "1-D")


@FAST
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_property(dims: list[int], data: st.DataObject) -> None:
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    spec = list(data.draw(st.permutations(dims)))
    if len(spec) > 1 and data.draw(st.booleans()):
        spec = [spec[0] * spec[1]] + spec[2:]
    spec[data.draw(st.integers(0, len(spec) - 1))] = -1
    got = _one("Reshape", {"tensor": x, "shape": np.array(spec)}, const=["shape"])
    np.testing.assert_array_equal(got, _torch(torch.from_numpy(x).reshape(spec)))


# -- Transpose, Concat ------------------------------------------------------------------

def test_transpose_default_and_named_dims() -> None:
    x = _rand(2, 3, 4)
    np.testing.assert_array_equal(_one("Transpose", {"x": x}),
                                  _torch(torch.from_numpy(x).permute(2, 1, 0)))
    assert _symbolic("Transpose", "x", ["N", 3, -1], {"perm": [2, 0, 1]}) == [(-1, "N", 3)]
    _fails(ShapeError, lambda: build_op_graph("Transpose", {"x": x}, {"perm": [0, 1]}), "perm")
    _fails(ShapeError, lambda: build_op_graph("Transpose", {"x": x}, {"perm": [0, 1, 1]}),
           "repeat")
    _fails(ShapeError, lambda: build_op_graph("Transpose", {"x": x}, {"perm": [0, 1, 3]}),
           "out of range")


@FAST
@given(st.lists(st.integers(1, 3), min_size=1, max_size=5), st.data())
def test_transpose_property(dims: list[int], data: st.DataObject) -> None:
    x = _rand(*dims)
    perm = list(data.draw(st.permutations(range(len(dims)))))
    got = _one("Transpose", {"x": x}, {"perm": perm}, dynamic=["x"])
    np.testing.assert_array_equal(got, _torch(torch.from_numpy(x).permute(perm)))


def test_concat_matches_torch() -> None:
    parts = [_rand(2, 1, 4), _rand(2, 3, 4), _rand(2, 0, 4)]
    expected = _torch(torch.cat([torch.from_numpy(p) for p in parts], dim=1))
    np.testing.assert_array_equal(_one("Concat", {"x": parts}, {"axis": -2}), expected)
    np.testing.assert_array_equal(_one("Concat", {"x": [parts[1]]}, {"axis": 0}), parts[1])
    assert _out_shape("Concat", {"x": parts}, {"axis": 1}, dynamic=["x"]) == (-1, -1, -1)


def test_concat_resolves_unknown_dims() -> None:
    graph = ge.Graph("concat")
    left = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", "a")
                        .set_attr("shape", [-1, 3]).build())
    right = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", "b")
                         .set_attr("shape", [5, "C"]).build())
    node = graph.add_op(ge.OperatorFactory.create_op("Concat").set_input("x", [left, right])
                        .set_attr("axis", 1).set_attr("name", "op").build())
    assert node.shape == (5, -1)


def test_concat_errors() -> None:
    a, b = _rand(2, 3), _rand(2, 4)
    _fails(ShapeError, lambda: build_op_graph("Concat", {"x": [a, b]}, {"axis": 0}),
           "dimension 1")
    _fails(ShapeError, lambda: build_op_graph("Concat", {"x": [a, _rand(2, 3, 1)]}, {"axis": 0}),
           "rank")
    _fails(ShapeError, lambda: build_op_graph("Concat", {"x": [a, b]}, {"axis": 2}), "axis")
    _fails(DTypeError, lambda: build_op_graph("Concat", {"x": [a, a.astype(np.float16)]},
                                              {"axis": 0}))
    _fails(OpArgumentError, lambda: build_op_graph("Concat", {"x": [a, b]}), "axis")
    _fails(ShapeError, lambda: build_op_graph("Concat", {"x": [np.float32(1)] * 2},
                                              {"axis": 0}), "scalar")


# -- Split ------------------------------------------------------------------------------

def test_split_sizes_match_torch() -> None:
    x = _rand(4, 10)
    expected = [_torch(t) for t in torch.split(torch.from_numpy(x), [3, 0, 7], dim=1)]
    for const in (["split"], []):
        parts = run_op("Split", {"x": x, "split": np.array([3, 0, 7])}, {"axis": -1},
                       const=const)
        assert len(parts) == 3
        for got, want in zip(parts, expected):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dim, parts, sizes", [(10, 5, [2] * 5), (10, 3, [4, 4, 2]),
                                               (9, 4, [3, 3, 3, 0]), (7, 1, [7])])
def test_split_num_outputs(dim: int, parts: int, sizes: list[int]) -> None:
    x = _rand(dim, 2)
    results = run_op("Split", {"x": x}, {"num_outputs": parts})
    assert [r.shape[0] for r in results] == sizes
    expected = torch.split(torch.from_numpy(x), sizes)
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, _torch(want))


def test_split_dynamic_inference() -> None:
    assert _symbolic("Split", "x", ["N", 6], {"axis": 1, "num_outputs": 3}) \
        == [("N", 2)] * 3
    assert _symbolic("Split", "x", [-1, "C"], {"axis": 1}, split=[2, 4]) \
        == [(-1, 2), (-1, 4)]
    assert _symbolic("Split", "x", ["N", 6], {"num_outputs": 2}) == [(-1, 6)] * 2
    assert _symbolic("Split", "x", ["N", 6], {"num_outputs": 1}) == [("N", 6)]
    graph = build_op_graph("Split", {"x": _rand(3, 6), "split": np.array([1, 5])}, {"axis": 1})
    assert [v.shape for v in graph.outputs] == [(3, -1), (3, -1)]
    parts = run_op("Split", {"x": _rand(3, 6), "split": np.array([1, 5])}, {"axis": 1},
                   dynamic=["x"])
    assert [p.shape for p in parts] == [(3, 1), (3, 5)]


def test_split_errors() -> None:
    x = _rand(4, 6)
    _fails(OpArgumentError, lambda: build_op_graph("Split", {"x": x}), "num_outputs")
    _fails(OpArgumentError, lambda: build_op_graph("Split", {"x": x, "split": [2, 2]},
                                                   {"num_outputs": 2}), "exactly one")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": x, "split": [2, 3]},
                                              const=["split"]), "add up")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": x, "split": [5, -1]},
                                              const=["split"]), ">= 0")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": x, "split": np.zeros(0, np.int64)},
                                              const=["split"]), "one or more")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": _rand(5)}, {"num_outputs": 4}),
           "chunks")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": x}, {"axis": 2,
                                                                  "num_outputs": 2}), "axis")
    _fails(ShapeError, lambda: build_op_graph("Split", {"x": x, "split": np.array([3, 3])},
                                              dynamic=["split"]), "unknown length")
    with pytest.raises(ExecutionError, match="'op'"):
        run_op("Split", {"x": x, "split": np.array([3, 4])})


# -- Slice ------------------------------------------------------------------------------

def _slice_reference(x: np.ndarray, starts: list[int], ends: list[int], axes: list[int],
                     steps: list[int]) -> np.ndarray:
    """ONNX Slice written out: clamp each bound as the spec says, then take the indices."""
    for start, end, axis, step in zip(starts, ends, axes, steps):
        dim = x.shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            picked = range(min(max(start, 0), dim), min(max(end, 0), dim), step)
        else:
            picked = range(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step)
        x = np.take(x, np.array(list(picked), dtype=np.int64), axis=axis)
    return x


def test_slice_matches_torch_and_spec() -> None:
    x = _rand(4, 5, 6)
    t = torch.from_numpy(x)
    inputs = {"x": x, "starts": np.array([1, -4]), "ends": np.array([INT_MAX, -1]),
              "axes": np.array([0, 2]), "steps": np.array([2, 1])}
    for const in (["starts", "ends", "axes", "steps"], ["axes"], []):
        np.testing.assert_array_equal(_one("Slice", inputs, const=const), _torch(t[1::2, :, 2:5]))
    short = {"x": x, "starts": np.array([1, 0]), "ends": np.array([3, 100])}
    np.testing.assert_array_equal(_one("Slice", short, const=["starts", "ends"]),
                                  _torch(t[1:3, 0:100]))


@pytest.mark.parametrize("start, end, step", [(-1, INT_MIN, -1), (4, 1, -2), (INT_MAX, 0, -1),
                                              (-9, INT_MIN, -1), (2, 2, -1), (0, -9, -1)])
def test_slice_negative_steps(start: int, end: int, step: int) -> None:
    x = _rand(3, 6)
    inputs = {"x": x, "starts": [start], "ends": [end], "axes": [1], "steps": [step]}
    got = _one("Slice", inputs, const=["starts", "ends", "axes", "steps"])
    np.testing.assert_array_equal(got, _slice_reference(x, [start], [end], [1], [step]))


def test_slice_inference_with_unknown_dims() -> None:
    full = {"starts": [0], "ends": [INT_MAX]}
    assert _symbolic("Slice", "x", ["N", 8], **full) == [("N", 8)]
    assert _symbolic("Slice", "x", ["N", 8], starts=[-1], ends=[INT_MIN], steps=[-1]) \
        == [("N", 8)]
    assert _symbolic("Slice", "x", ["N", 8], starts=[1, 2], ends=[3, 9]) == [(-1, 6)]
    assert _symbolic("Slice", "x", ["N", 8], starts=[0], ends=[4], axes=[-1]) == [("N", 4)]
    x = _rand(5, 8)
    data_fed = {"x": x, "starts": np.array([1]), "ends": np.array([3]), "axes": np.array([1])}
    assert _out_shape("Slice", data_fed, const=["axes"]) == (5, -1)
    assert _out_shape("Slice", data_fed) == (-1, -1)
    assert _out_shape("Slice", data_fed, const=["starts", "ends", "axes"],
                      dynamic=["x"]) == (-1, -1)
    assert _one("Slice", data_fed, dynamic=["x"]).shape == (5, 2)


def test_slice_errors() -> None:
    x = _rand(4, 5)
    const = ["starts", "ends", "axes", "steps"]
    base = {"x": x, "starts": [0], "ends": [2], "axes": [0], "steps": [1]}
    _fails(ShapeError, lambda: build_op_graph("Slice", {**base, "steps": [0]}, const=const),
           "0")
    _fails(ShapeError, lambda: build_op_graph("Slice", {**base, "ends": [2, 3]}, const=const),
           "one length")
    _fails(ShapeError, lambda: build_op_graph("Slice", {**base, "starts": [0, 0], "ends": [1, 1],
                                                        "axes": [1, -1], "steps": [1, 1]},
                                              const=const), "repeat")
    _fails(ShapeError, lambda: build_op_graph("Slice", {**base, "axes": [2]}, const=const),
           "out of range")


BOUND = st.integers(-8, 8) | st.sampled_from([INT_MAX, INT_MIN])


@pytest.mark.filterwarnings("ignore:Truncating the start")  # torch on INT_MAX bounds
@FAST
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.data())
def test_slice_property(dims: list[int], data: st.DataObject) -> None:
    x = _rand(*dims)
    count = data.draw(st.integers(1, len(dims)))
    axes = data.draw(st.permutations(range(len(dims))))[:count]
    starts = data.draw(st.lists(BOUND, min_size=count, max_size=count))
    ends = data.draw(st.lists(BOUND, min_size=count, max_size=count))
    steps = data.draw(st.lists(st.sampled_from([-3, -1, 1, 2]), min_size=count, max_size=count))
    inputs = {"x": x, "starts": starts, "ends": ends, "axes": axes, "steps": steps}
    got = _one("Slice", inputs, const=["starts", "ends", "axes", "steps"])
    np.testing.assert_array_equal(got, _slice_reference(x, starts, ends, axes, steps))
    if all(s > 0 for s in steps):
        index = [slice(None)] * x.ndim
        for axis, start, end, step in zip(axes, starts, ends, steps):
            index[axis] = slice(start, end, step)
        np.testing.assert_array_equal(got, _torch(torch.from_numpy(x)[tuple(index)]))


# -- Gather -----------------------------------------------------------------------------

def test_gather_matches_torch() -> None:
    x = _rand(3, 5, 2)
    indices = np.array([4, -1, 0, 2])
    want = _torch(torch.index_select(torch.from_numpy(x), 1, torch.tensor([4, 4, 0, 2])))
    for const in (["indices"], []):
        got = _one("Gather", {"x": x, "indices": indices}, {"axis": -2}, const=const)
        np.testing.assert_array_equal(got, want)
    grid = np.array([[0, 2], [1, -3]], np.int32)
    got = _one("Gather", {"x": x, "indices": grid})
    np.testing.assert_array_equal(got, x[np.where(grid < 0, grid + 3, grid)])
    scalar = _one("Gather", {"x": x, "indices": np.array(1)}, {"axis": 2})
    np.testing.assert_array_equal(scalar, x[:, :, 1])


def test_gather_inference_and_errors() -> None:
    assert _symbolic("Gather", "x", ["N", 5, 2], {"axis": 1}, indices=[[0, 1, 2]]) \
        == [("N", 1, 3, 2)]
    assert _out_shape("Gather", {"x": _rand(3, 4), "indices": np.array([[0]])},
                      {"axis": 1}, dynamic=["indices"]) == (3, -1, -1)
    x = _rand(3, 4)
    _fails(ShapeError, lambda: build_op_graph("Gather", {"x": x, "indices": [3]},
                                              const=["indices"]), "out of range")
    _fails(ShapeError, lambda: build_op_graph("Gather", {"x": x, "indices": [0]}, {"axis": 2}),
           "out of range")
    with pytest.raises(ExecutionError, match="index -4 is out of range"):
        run_op("Gather", {"x": x, "indices": np.array([0, -4])})


# -- Squeeze, Unsqueeze, Flatten --------------------------------------------------------

def test_squeeze_unsqueeze_match_torch() -> None:
    x = _rand(1, 3, 1, 2)
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(_one("Squeeze", {"x": x}), _torch(t.squeeze()))
    for const in (["axes"], []):
        got = _one("Squeeze", {"x": x, "axes": np.array([-2])}, const=const)
        np.testing.assert_array_equal(got, _torch(t.squeeze(2)))
        got = _one("Unsqueeze", {"x": x, "axes": np.array([0, -1])}, const=const)
        np.testing.assert_array_equal(got, _torch(t.unsqueeze(0).unsqueeze(-1)))
    assert _one("Unsqueeze", {"x": np.float32(2), "axes": [0]}).shape == (1,)


def test_squeeze_unsqueeze_inference() -> None:
    assert _symbolic("Squeeze", "x", ["N", 1, -1], axes=[1]) == [("N", -1)]
    assert _symbolic("Squeeze", "x", [-1, 1, 3]) == [(-1, 3)]
    assert _symbolic("Unsqueeze", "x", ["N", 3], axes=[1, 3]) == [("N", 1, 3, 1)]
    x = _rand(2, 1)
    assert _out_shape("Squeeze", {"x": x, "axes": np.array([1])}) == (-1,)
    assert _out_shape("Unsqueeze", {"x": x, "axes": np.array([0])}) == (-1, -1, -1)
    assert _one("Squeeze", {"x": x, "axes": np.array([1])}, const=["axes"],
                dynamic=["x"]).shape == (2,)


def test_squeeze_unsqueeze_errors() -> None:
    x = _rand(2, 1)
    _fails(ShapeError, lambda: build_op_graph("Squeeze", {"x": x, "axes": [0]},
                                              const=["axes"]), "not 1")
    _fails(ShapeError, lambda: build_op_graph("Squeeze", {"x": x, "axes": [2]},
                                              const=["axes"]), "out of range")
    _fails(ShapeError, lambda: build_op_graph("Unsqueeze", {"x": x, "axes": [1, -3]},
                                              const=["axes"]), "repeat")
    _fails(ShapeError, lambda: build_op_graph("Unsqueeze", {"x": x, "axes": [4]}, const=["axes"]),
           "out of range")
    _fails(OpArgumentError, lambda: build_op_graph("Unsqueeze", {"x": x}), "axes")
    with pytest.raises(ExecutionError, match="'op'"):
        run_op("Squeeze", {"x": x, "axes": np.array([0])})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten_matches_torch(axis: int) -> None:
    x = _rand(2, 3, 4)
    got = _one("Flatten", {"x": x}, {"axis": axis})
    position = axis + 3 if axis < 0 else axis
    rows = int(np.prod(x.shape[:position]))
    np.testing.assert_array_equal(got, _torch(torch.from_numpy(x).reshape(rows, -1)))
    if position == 1:
        np.testing.assert_array_equal(got, _torch(torch.flatten(torch.from_numpy(x), 1)))


def test_flatten_inference_and_errors() -> None:
    assert _symbolic("Flatten", "x", ["N", 3, 4]) == [("N", 12)]
    assert _symbolic("Flatten", "x", ["N", -1, 4], {"axis": 2}) == [(-1, 4)]
    assert _symbolic("Flatten", "x", ["N", 0, -1], {"axis": 2}) == [(0, -1)]
    _fails(ShapeError, lambda: build_op_graph("Flatten", {"x": _rand(2, 3)}, {"axis": 3}),
           "out of range")


# -- Expand -----------------------------------------------------------------------------

def test_expand_matches_torch() -> None:
    x = _rand(3, 1)
    for const in (["shape"], []):
        got = _one("Expand", {"x": x, "shape": np.array([2, 3, 4])}, const=const)
        np.testing.assert_array_equal(got, _torch(torch.from_numpy(x).expand(2, 3, 4)))
        got = _one("Expand", {"x": x, "shape": np.array([1, 1])}, const=const)
        np.testing.assert_array_equal(got, x)  # bidirectional: 1 keeps x's dimension
    got = _one("Expand", {"x": x, "shape": np.array([4])})
    np.testing.assert_array_equal(got, np.broadcast_to(x, (3, 4)))
    got[0, 0] = 5.0  # a writable copy, not a broadcast view


def test_expand_inference_and_errors() -> None:
    assert _symbolic("Expand", "x", ["N", 1], shape=[1, 5]) == [("N", 5)]
    assert _out_shape("Expand", {"x": _rand(3, 1), "shape": np.array([2, 1, 1])}) == (-1, 3, -1)
    x = _rand(3, 2)
    _fails(ShapeError, lambda: build_op_graph("Expand", {"x": x, "shape": [4, 2]},
                                              const=["shape"]), "broadcast")
    _fails(ShapeError, lambda: build_op_graph("Expand", {"x": x, "shape": [-1, 2]},
                                              const=["shape"]), "negative")


# -- Pad --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, torch_mode", [("constant", "constant"), ("reflect", "reflect"),
                                              ("edge", "replicate"), ("wrap", "circular")])
def test_pad_modes_match_torch(mode: str, torch_mode: str) -> None:
    x = _rand(1, 2, 4, 5)
    top, left, bottom, right = 1, 2, 3, 0
    want = _torch(F.pad(torch.from_numpy(x), (left, right, top, bottom), mode=torch_mode))
    with_axes = {"x": x, "pads": np.array([top, left, bottom, right]), "axes": np.array([2, -1])}
    all_axes = {"x": x, "pads": np.array([0, 0, top, left, 0, 0, bottom, right])}
    for inputs in (with_axes, all_axes):
        for const in (["pads", "axes"], []):
            got = _one("Pad", inputs, {"mode": mode}, const=const)
            np.testing.assert_array_equal(got, want)


def test_pad_constant_value_and_negative_pads() -> None:
    x = _rand(3, 4)
    inputs = {"x": x, "pads": np.array([1, -1, -2, 2]), "constant_value": np.float32(9.5)}
    want = _torch(F.pad(torch.from_numpy(x), (-1, 2, 1, -2), value=9.5))
    assert_close(_one("Pad", inputs, const=["pads"]), want)
    empty = np.zeros((0, 2), np.float32)
    got = _one("Pad", {"x": empty, "pads": [0, 1, 0, 1]}, {"mode": "reflect"}, const=["pads"])
    assert got.shape == (0, 4)
    ints = np.arange(4, dtype=np.int32)
    got = _one("Pad", {"x": ints, "pads": [2, 1], "constant_value": np.int32(-7)})
    np.testing.assert_array_equal(got, np.array([-7, -7, 0, 1, 2, 3, -7], np.int32))


def test_pad_inference() -> None:
    assert _symbolic("Pad", "x", ["N", 4], pads=[0, 1, 0, 2]) == [("N", 7)]
    assert _symbolic("Pad", "x", ["N", 4], pads=[1, 1], axes=[0]) == [(-1, 4)]
    x = _rand(3, 4)
    assert _out_shape("Pad", {"x": x, "pads": np.array([1, 1]), "axes": np.array([1])},
                      const=["axes"]) == (3, -1)
    assert _out_shape("Pad", {"x": x, "pads": np.array([1, 1]), "axes": np.array([1])}) \
        == (-1, -1)


def test_pad_errors() -> None:
    x = _rand(3, 4)
    _fails(ShapeError, lambda: build_op_graph("Pad", {"x": x, "pads": [1, 1]}, const=["pads"]),
           "need 4")
    _fails(ShapeError, lambda: build_op_graph("Pad", {"x": x, "pads": [0, 4, 0, 0]},
                                              {"mode": "reflect"}, const=["pads"]), "reflect")
    _fails(ShapeError, lambda: build_op_graph("Pad", {"x": x, "pads": [-2, 0, -2, 0]},
                                              const=["pads"]), "crop")
    _fails(DTypeError, lambda: build_op_graph(
        "Pad", {"x": x, "pads": [0, 0, 0, 0], "constant_value": np.float64(1)}), "constant_value")
    _fails(ShapeError, lambda: build_op_graph(
        "Pad", {"x": x, "pads": [0, 0, 0, 0], "constant_value": np.zeros(2, np.float32)}),
        "scalar")
    with pytest.raises(ge.errors.AttrError, match="'op'"):
        build_op_graph("Pad", {"x": x, "pads": [0, 0, 0, 0]}, {"mode": "mirror"})
    with pytest.raises(ExecutionError, match="reflect"):
        run_op("Pad", {"x": x, "pads": np.array([0, 4, 0, 0])}, {"mode": "reflect"})
