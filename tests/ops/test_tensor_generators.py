"""Tensor generators, rearrangements and indexing ops (tensor_generators,
tensor_rearrange, tensor_index): what ONNX's node suite does not cover — inference with
unknown or named dimensions, error messages naming the node, and kernels checked against
PyTorch on cases the suite lacks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import ml_dtypes
import numpy as np
import pytest
import torch

import ge
from ge.errors import DTypeError, ExecutionError, ShapeError
from ge.ops import get_schema
from tests.op_harness import build_op_graph, run_op

RNG = np.random.default_rng(11)
OPS = ["ConstantOfShape", "Range", "Size", "Tile", "EyeLike", "Trilu", "OneHot", "DepthToSpace",
       "SpaceToDepth", "CenterCropPad", "ReverseSequence", "GatherElements", "GatherND",
       "ScatterElements", "ScatterND", "TensorScatter", "TopK", "ArgMax", "ArgMin", "NonZero",
       "Compress", "Unique"]


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _shapes(op_type: str, first: str, dims: Sequence[Any], attrs: Optional[dict] = None,
            **consts: Any) -> list[tuple[Any, ...]]:
    """Output shapes of ``op_type`` fed by a float Data of ``dims`` (names allowed) and Consts."""
    graph = ge.Graph(f"shapes_{op_type}")
    data = graph.add_op(ge.OperatorFactory.create_op("Data").set_attr("name", first)
                        .set_attr("shape", list(dims)).build())
    builder = ge.OperatorFactory.create_op(op_type).set_input(first, data)
    for name, value in consts.items():
        builder.set_input(name, np.asarray(value))
    for key, value in (attrs or {}).items():
        builder.set_attr(key, value)
    node = graph.add_op(builder.set_attr("name", "op").build())
    return [value.shape for value in node.outputs]


def _fails(error: type, build: Callable[[], Any], match: str) -> None:
    """``build`` raises exactly ``error`` with a message naming node 'op' and holding ``match``."""
    with pytest.raises(error) as caught:
        build()
    assert caught.type is error, f"raised {caught.type.__name__}, expected {error.__name__}"
    assert "'op'" in str(caught.value) and match in str(caught.value), str(caught.value)


def test_every_op_is_documented() -> None:
    for op_type in OPS:
        assert get_schema(op_type).doc, op_type


# -- inference with unknown and named dimensions -----------------------------------------

def test_generators_keep_rank_when_sizes_are_computed() -> None:
    shape = {"shape": np.array([2, 3, 4])}
    assert build_op_graph("ConstantOfShape", shape).outputs[0].shape == (-1, -1, -1)
    assert build_op_graph("ConstantOfShape", shape, const=["shape"]).outputs[0].shape == (2, 3, 4)
    bounds = {"start": np.array(1), "limit": np.array(10), "delta": np.array(4)}
    assert build_op_graph("Range", bounds).outputs[0].shape == (-1,)
    const = build_op_graph("Range", bounds, const=list(bounds))
    assert const.outputs[0].shape == (3,) and const.outputs[0].dtype is ge.DataType.DT_INT64
    tile = {"input": _rand(2, 3), "repeats": np.array([2, 1])}
    assert build_op_graph("Tile", tile).outputs[0].shape == (-1, -1)
    assert build_op_graph("Tile", tile, const=["repeats"]).outputs[0].shape == (4, 3)


def test_named_dimensions_survive() -> None:
    assert _shapes("Tile", "input", ["N", 3], repeats=[1, 2]) == [("N", 6)]
    assert _shapes("Size", "data", ["N", 3]) == [()]
    assert _shapes("Trilu", "input", ["N", 4, 4]) == [("N", 4, 4)]
    assert _shapes("DepthToSpace", "input", ["N", 8, "H", 3], {"blocksize": 2}) == \
        [("N", 2, -1, 6)]
    assert _shapes("SpaceToDepth", "input", ["N", 2, 4, "W"], {"blocksize": 2}) == \
        [("N", 8, 2, -1)]
    assert _shapes("CenterCropPad", "input_data", ["N", 9, 9], {"axes": [1, 2]},
                   shape=[4, 12]) == [("N", 4, 12)]
    assert _shapes("ArgMax", "data", ["N", 5, 6], {"axis": 1, "keepdims": 0}) == [("N", 6)]
    assert _shapes("TopK", "x", ["N", 7], {"axis": -1}, k=[3]) == [("N", 3), ("N", 3)]
    assert _shapes("NonZero", "x", ["N", 7]) == [(2, -1)]
    assert _shapes("Compress", "input", ["N", 7], {"axis": 1},
                   condition=np.array([True, False])) == [("N", -1)]
    assert _shapes("Unique", "x", ["N", 3], {"axis": 0}) == [(-1, 3), (-1,), ("N",), (-1,)]
    assert _shapes("Unique", "x", [2, 3]) == [(-1,), (-1,), (6,), (-1,)]
    assert _shapes("OneHot", "indices", ["N", 3], {"axis": 1}, depth=np.array(5),
                   values=np.array([0.0, 1.0], np.float32)) == [("N", 5, 3)]
    assert _shapes("GatherND", "data", ["N", 4, 5], {"batch_dims": 1},
                   indices=np.zeros((2, 6, 1), np.int64)) == [(2, 6, 5)]
    assert _shapes("GatherElements", "data", ["N", 4], {"axis": 1},
                   indices=np.zeros((2, 6), np.int64)) == [(2, 6)]


def test_data_dependent_sizes_run() -> None:
    x = np.array([[0, 2, 0], [1, 0, 3]], np.float32)
    np.testing.assert_array_equal(run_op("NonZero", {"x": x})[0], np.stack(np.nonzero(x)))
    values, indices = run_op("TopK", {"x": x, "k": np.array([2])}, {"axis": 1})
    np.testing.assert_array_equal(values, [[2, 0], [3, 1]])
    np.testing.assert_array_equal(indices, [[1, 0], [2, 0]])
    got = run_op("OneHot", {"indices": np.array([1, -1, 7]), "depth": np.array(3.0, np.float32),
                            "values": np.array([0, 5], np.int32)})[0]
    np.testing.assert_array_equal(got, [[0, 5, 0], [0, 0, 5], [0, 0, 0]])


# -- errors name the node ---------------------------------------------------------------

@pytest.mark.parametrize("op_type, inputs, attrs, match", [
    ("Tile", {"input": _rand(2, 3), "repeats": np.array([2])}, {}, "rank 2"),
    ("DepthToSpace", {"input": _rand(1, 6, 2, 2)}, {"blocksize": 2}, "multiple"),
    ("SpaceToDepth", {"input": _rand(1, 6, 3, 2)}, {"blocksize": 2}, "multiple"),
    ("TopK", {"x": _rand(2, 3), "k": np.array([4])}, {}, "exceeds"),
    ("TensorScatter", {"past_cache": _rand(2, 4), "update": _rand(1, 4)}, {"axis": 0},
     "batch axis"),
    ("ReverseSequence", {"input": _rand(3, 2), "sequence_lens": np.array([1, 2])},
     {"batch_axis": 0, "time_axis": 0}, "differ"),
    ("OneHot", {"indices": np.array([1]), "depth": np.array(2),
                "values": np.array([0, 1, 2], np.float32)}, {}, "off_value"),
    ("Range", {"start": np.array(1), "limit": np.array(2), "delta": np.array(0)}, {}, "delta"),
    ("ConstantOfShape", {"shape": np.array([2, -3])}, {}, "negative"),
    ("GatherElements", {"data": _rand(2, 3), "indices": np.array([[3]])}, {"axis": 1},
     "out of range"),
    ("ScatterND", {"data": _rand(2, 3), "indices": np.array([[0]]), "updates": _rand(1, 4)},
     {}, "updates"),
    ("EyeLike", {"input": _rand(2, 3, 4)}, {}, "rank 2"),
])
def test_shape_errors(op_type: str, inputs: dict, attrs: dict, match: str) -> None:
    constants = [name for name in inputs if name not in ("input", "x", "data", "past_cache")]
    _fails(ShapeError, lambda: build_op_graph(op_type, inputs, attrs, const=constants), match)


def test_gather_nd_needs_the_index_depth() -> None:
    _fails(ShapeError, lambda: build_op_graph(
        "GatherND", {"data": _rand(2, 3), "indices": np.zeros((2, 1), np.int64)},
        dynamic=["indices"]), "last dimension")


def test_dtype_errors() -> None:
    _fails(DTypeError, lambda: build_op_graph(
        "Compress", {"input": _rand(3), "condition": np.array([1, 0, 1])}), "condition")
    _fails(DTypeError, lambda: build_op_graph(
        "ScatterElements", {"data": _rand(3), "indices": np.array([0]),
                            "updates": np.array([1.0])}), "share one dtype")
    _fails(DTypeError, lambda: build_op_graph(
        "Range", {"start": np.array(0), "limit": np.array(3.0), "delta": np.array(1)}),
        "share one dtype")


def test_out_of_range_indices_fail_at_run_time() -> None:
    with pytest.raises(ExecutionError, match="out of range"):
        run_op("GatherElements", {"data": _rand(2, 3), "indices": np.array([[0, 3]])},
               {"axis": 1})
    with pytest.raises(ExecutionError, match="cache of length"):
        run_op("TensorScatter", {"past_cache": _rand(2, 4, 3), "update": _rand(2, 2, 3),
                                 "write_indices": np.array([0, 3])}, {"axis": 1})


# -- kernels against PyTorch ------------------------------------------------------------

@pytest.mark.parametrize("reduction, torch_name", [("add", "sum"), ("mul", "prod"),
                                                   ("max", "amax"), ("min", "amin")])
def test_scatter_elements_reductions_match_torch(reduction: str, torch_name: str) -> None:
    data, updates = _rand(4, 5), _rand(3, 5)
    indices = RNG.integers(0, 4, (3, 5))  # repeated indices combine
    got = run_op("ScatterElements", {"data": data, "indices": indices, "updates": updates},
                 {"axis": 0, "reduction": reduction})[0]
    want = torch.from_numpy(data).scatter_reduce(0, torch.from_numpy(indices),
                                                 torch.from_numpy(updates), torch_name)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_matches_torch(largest: int) -> None:
    x = RNG.integers(0, 5, (4, 9)).astype(np.float32)  # many ties
    values, indices = run_op("TopK", {"x": x, "k": np.array([4])},
                             {"axis": 0, "largest": largest}, const=["k"])
    want = torch.topk(torch.from_numpy(x), 4, dim=0, largest=bool(largest), sorted=True)
    np.testing.assert_array_equal(values, want.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, indices, 0), want.values.numpy())
    ties = values[1:] == values[:-1]
    assert np.all(indices[1:][ties] > indices[:-1][ties])  # equal values in index order


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-2, 0, 3])
def test_trilu_matches_torch(upper: int, k: int) -> None:
    x = _rand(2, 4, 5)
    got = run_op("Trilu", {"input": x, "k": np.array(k)}, {"upper": upper})[0]
    want = torch.triu(torch.from_numpy(x), k) if upper else torch.tril(torch.from_numpy(x), k)
    np.testing.assert_array_equal(got, want.numpy())


def test_depth_to_space_matches_torch_pixel_shuffle() -> None:
    x = _rand(2, 12, 3, 4)
    got = run_op("DepthToSpace", {"input": x}, {"blocksize": 2, "mode": "CRD"})[0]
    np.testing.assert_array_equal(got, torch.nn.functional.pixel_shuffle(
        torch.from_numpy(x), 2).numpy())
    back = run_op("SpaceToDepth", {"input": got}, {"blocksize": 2, "mode": "CRD"})[0]
    np.testing.assert_array_equal(back, x)


def test_unique_in_order_of_appearance_along_an_axis() -> None:
    x = np.array([[3, 1, 3, 2], [0, 5, 0, 4]], np.int32)
    y, first, inverse, counts = run_op("Unique", {"x": x}, {"axis": 1, "sorted": 0})
    np.testing.assert_array_equal(y, [[3, 1, 2], [0, 5, 4]])
    np.testing.assert_array_equal(first, [0, 1, 3])
    np.testing.assert_array_equal(inverse, [0, 1, 0, 2])
    np.testing.assert_array_equal(counts, [2, 1, 1])


def test_tensor_scatter_circular_wraps() -> None:
    cache = np.zeros((2, 4, 1), np.float32)
    update = np.array([[[1], [2], [3]], [[4], [5], [6]]], np.float32)
    got = run_op("TensorScatter", {"past_cache": cache, "update": update,
                                   "write_indices": np.array([0, 2])},
                 {"axis": 1, "mode": "circular"})[0]
    np.testing.assert_array_equal(got[..., 0], [[1, 2, 3, 0], [6, 0, 4, 5]])


def test_range_half_precision_stash_type() -> None:
    bounds = {"start": np.array(2000, np.float16), "limit": np.array(2010, np.float16),
              "delta": np.array(2.5, np.float16)}
    for stash in (1, 11):
        got = run_op("Range", bounds, {"stash_type": stash})[0]
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, (2000 + 2.5 * np.arange(4)).astype(np.float16))
    bf16 = {k: v.astype(ml_dtypes.bfloat16) for k, v in bounds.items()}
    assert run_op("Range", bf16)[0].dtype == ml_dtypes.bfloat16


def test_eye_like_dtype_and_offset() -> None:
    got = run_op("EyeLike", {"input": np.zeros((3, 4), np.int32)},
                 {"dtype": ge.DataType.DT_BOOL, "k": 1})[0]
    np.testing.assert_array_equal(got, np.eye(3, 4, 1, dtype=bool))


def test_reverse_sequence_batch_major() -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)  # [batch, time, feature]
    got = run_op("ReverseSequence", {"input": x, "sequence_lens": np.array([3, 2])},
                 {"batch_axis": 0, "time_axis": 1})[0]
    np.testing.assert_array_equal(got[0], x[0, ::-1])
    np.testing.assert_array_equal(got[1], x[1, [1, 0, 2]])


# -- ONNX import: shape inputs computed from static shapes become constants -------------

def _shape_chain_model(batch: Any) -> Any:
    """X -> Shape -> Gather(0) -> Concat([b, -1]) -> Reshape(X): an exporter's flatten;
    and ConstantOfShape(Shape(X)): zeros like X."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"])]
    initializers = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                    helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "zeros")],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_onnx_shape_chains_are_evaluated_at_import() -> None:
    from ge.frontends.onnx import parse_onnx

    static = parse_onnx(_shape_chain_model(2))
    assert [v.shape for v in static.outputs] == [(2, 12), (2, 3, 4)]
    dynamic = parse_onnx(_shape_chain_model("N"))
    assert [v.shape for v in dynamic.outputs] == [(-1, -1), (-1, -1, -1)]
    x = _rand(5, 3, 4)
    flat, zeros = ge.Session(ge.compile(dynamic)).run({"x": x}).values()
    np.testing.assert_array_equal(flat, x.reshape(5, 12))
    np.testing.assert_array_equal(zeros, np.zeros_like(x))
