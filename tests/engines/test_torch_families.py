"""The torch engine's elementwise and nn families against the reference kernels: each
registered op type on random data (edge values, broadcasting, constant operands), the
kernel and the writer (into NaN garbage and, for INPLACE ops, into input 0's own
buffer); the cases each family declines; and a graph compiled for torch and NumPy
against the one compiled for NumPy alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pytest

pytest.importorskip("torch")

import ge  # noqa: E402
from ge.engines import get_engine  # noqa: E402
from ge.engines.torch import _base, elementwise, nn  # noqa: E402
from ge.ir import Graph, Node, Tensor  # noqa: E402
from ge.ops import create_node, get_schema  # noqa: E402
from ge.ops.registry import Trait, run_kernel  # noqa: E402
from tests.concurrency import run_on_threads  # noqa: E402
from tests.engines.test_writers import garbage, node_for, sample  # noqa: E402
from tests.tolerance import assert_close  # noqa: E402

ENGINE = get_engine("torch")

# torch warns when it resizes an output it was given or reads a read-only array: both
# are bugs here
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray], what: str,
            accumulate: bool, atol: Optional[float]) -> None:
    assert len(got) == len(want), what
    for result, expected in zip(got, want):
        assert result.dtype == expected.dtype, what
        assert result.shape == expected.shape, what
        if expected.dtype.kind in "biu":
            np.testing.assert_array_equal(result, expected, err_msg=what)
        else:
            assert_close(result, expected, accumulate=accumulate, what=what, atol=atol)


def check(op_type: str, arrays: Sequence[Optional[np.ndarray]],
          attrs: Optional[dict[str, Any]] = None, const: Sequence[int] = (),
          accumulate: bool = False, atol: Optional[float] = None,
          outputs: Optional[int] = None) -> Node:
    """The torch engine takes the node; its kernel and writer give what the reference
    kernel gives (the first ``outputs`` outputs, made graph outputs, so read), into
    garbage and, for INPLACE ops, into input 0's own buffer; the inputs are left alone."""
    node = node_for(op_type, arrays, attrs, const)
    if outputs is not None:
        assert node.graph is not None
        node.graph.set_outputs(list(node.outputs[:outputs]))
    assert ENGINE.supports(node), f"{op_type} {attrs} declined"
    bound = ENGINE.bind_node(node)
    assert bound.writer is not None and not bound.allocates
    schema = get_schema(op_type)
    expected = run_kernel(schema, "op", arrays, dict(node.attrs))
    count = len(expected) if outputs is None else outputs
    for value, array in zip(node.outputs, expected):
        assert value.dtype.np_dtype == array.dtype
    before = [None if a is None else a.copy() for a in arrays]
    what = f"{op_type} {attrs}"
    compare(bound.kernel(list(arrays))[:count], expected[:count], f"{what} kernel",
            accumulate, atol)
    outs = [garbage(e.shape, e.dtype, 0xFF) for e in expected]
    bound.writer(list(arrays), outs)
    compare(outs[:count], expected[:count], f"{what} writer", accumulate, atol)
    for out in outs:  # again into the same arrays (the writer remembers their tensors)
        scramble(out)
    bound.writer(list(arrays), outs)
    compare(outs[:count], expected[:count], f"{what} writer again", accumulate, atol)
    for original, array in zip(before, arrays):
        if original is not None:
            assert array is not None
            np.testing.assert_array_equal(array, original, err_msg=f"{what} changed an input")
    first = arrays[0]
    if schema.has_trait(Trait.INPLACE) and first is not None \
            and first.shape == expected[0].shape and first.dtype == expected[0].dtype:
        buffer = np.array(first, order="C", copy=True)
        in_place = [buffer] + [garbage(e.shape, e.dtype, 0xFF) for e in expected[1:]]
        bound.writer([buffer, *arrays[1:]], in_place)
        compare(in_place[:count], expected[:count], f"{what} in place", accumulate, atol)
        buffer[...] = first  # the same buffer again, refilled
        bound.writer([buffer, *arrays[1:]], in_place)
        compare(in_place[:count], expected[:count], f"{what} in place again", accumulate, atol)
    return node


def scramble(array: np.ndarray) -> None:
    """Overwrite every byte of ``array`` in place (NaN for floats)."""
    array.reshape(-1).view(np.uint8).fill(0xFF if array.dtype.kind != "b" else 1)


def test_a_writer_remembers_the_tensors_of_the_arrays_it_was_given() -> None:
    convert = elementwise.remembering()
    first, second = sample((3,)), sample((3,), seed=1)
    made = convert(first)
    assert convert(first) is made  # the same array: the same tensor
    other = convert(second)
    assert other is not made and convert(second) is other
    first[0] = 42.0
    assert float(convert(first)[0]) == 42.0  # over the array's memory, not a copy
    base = sample((3,), seed=2)
    frozen = base.view()
    frozen.flags.writeable = False  # torch gets a copy: never remembered
    assert float(convert(frozen)[0]) == float(base[0])
    base[0] = 7.0
    assert float(convert(frozen)[0]) == 7.0


def declines(op_type: str, arrays: Sequence[Optional[np.ndarray]],
             attrs: Optional[dict[str, Any]] = None, const: Sequence[int] = ()) -> bool:
    return not ENGINE.supports(node_for(op_type, arrays, attrs, const))


@pytest.fixture(autouse=True)
def _silent_floating_point():
    """The runtime calls writers with floating-point warnings silenced; so do these tests."""
    with np.errstate(all="ignore"):
        yield


@pytest.fixture(autouse=True)
def _small_cheap_ops_on_torch(monkeypatch, request):
    """The cases are small: let the engine take cheap ops of any size here (but for the
    test of that very rule)."""
    if "cheap_ops" not in request.node.name:
        monkeypatch.setattr(elementwise, "CHEAP_MIN_ELEMENTS", 0)


def test_small_cheap_ops_stay_on_numpy_and_large_or_dynamic_ones_go_to_torch() -> None:
    assert "Relu" in elementwise.CHEAP and "Erf" not in elementwise.CHEAP
    small, large = sample((4, 16)), sample((128, 512))
    assert large.size >= elementwise.CHEAP_MIN_ELEMENTS > small.size
    assert declines("Relu", [small]) and declines("Add", [small, small])
    assert not declines("Relu", [large]) and not declines("Add", [large, large])
    assert not declines("Erf", [small])  # NumPy's erf is slow at every size
    graph = Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, 16]}, "x", graph)
    assert ENGINE.supports(create_node("Relu", [x], {}, "relu", graph))


def test_cheap_ops_numpy_keeps_up_with_stay_on_numpy_to_their_own_size() -> None:
    graph = Graph("sized")

    def node(op_type: str, size: int) -> Any:
        x = create_node("Data", [], {"shape": [size]}, f"x_{op_type}_{size}", graph)
        return create_node(op_type, [x], {}, f"{op_type}_{size}", graph)

    for op_type, scale in elementwise.NUMPY_RANGE.items():
        edge = elementwise.CHEAP_MIN_ELEMENTS * scale
        assert elementwise.numpy_below(op_type) == edge
        assert not ENGINE.supports(node(op_type, edge - 1)), op_type
        assert ENGINE.supports(node(op_type, edge)), op_type
    assert ENGINE.supports(node("Sigmoid", 16))  # torch's call is the faster one there


@pytest.mark.parametrize("op_type", ["Relu", "Add", "Cast", "Sqrt"])
def test_cheap_ops_of_a_dynamic_size_run_small_calls_on_numpy_and_large_on_torch(
        op_type: str, monkeypatch) -> None:
    from ge.engines import get_engine

    graph = Graph("dynamic")
    x = create_node("Data", [], {"shape": [-1, 1024]}, "x", graph)
    inputs = [x, x] if op_type == "Add" else [x]
    attrs = {"dtype": "DT_INT32"} if op_type == "Cast" else {}
    node = create_node(op_type, inputs, attrs, "op", graph)
    graph.set_outputs([node])
    calls: list[str] = []
    numpy_engine = get_engine("numpy")
    bind = numpy_engine.bind_node

    def spying(bound_node):
        bound = bind(bound_node)
        kernel, writer = bound.kernel, bound.writer

        def spied_kernel(inputs):
            calls.append("numpy")
            return kernel(inputs)

        def spied_writer(inputs, outs):
            calls.append("numpy")
            writer(inputs, outs)

        return type(bound)(spied_kernel, spied_writer, bound.allocates)

    monkeypatch.setattr(numpy_engine, "bind_node", spying)
    executable = ge.compile(graph, opt_level=0, engines=["torch", "numpy"])
    assert executable.report["engines_by_op"] == {"torch": {op_type: 1}}
    session = ge.Session(executable)
    for rows in (2, 128):  # 2k elements on NumPy, 128k on torch
        data = sample((rows, 1024), seed=rows) * 100
        if op_type == "Sqrt":
            data = np.abs(data)
            want = np.sqrt(data)
        elif op_type == "Relu":
            want = np.maximum(data, 0)
        elif op_type == "Add":
            want = data + data
        else:
            want = data.astype(np.int32)
        # torch's vectorized sqrt may be off by one unit in the last place
        np.testing.assert_allclose(session.run({"x": data})["op"], want, rtol=2.5e-7, atol=0)
    assert calls == ["numpy"]



# -- elementwise: unary ------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs",
         "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
         "Atanh", "Floor", "Ceil", "Round", "Sign", "Erf"]


@pytest.mark.parametrize("op_type", UNARY)
def test_unary(op_type: str) -> None:
    check(op_type, [sample((4, 5, 6), edges=True)])
    check(op_type, [sample((), seed=3)])


def test_round_takes_halves_to_even() -> None:
    halves = np.arange(-6, 6, dtype=np.float32) + np.float32(0.5)
    check("Round", [halves])


ACTIVATIONS: list[tuple[str, dict[str, Any]]] = [
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("LeakyRelu", {}),
    ("LeakyRelu", {"alpha": 0.3}), ("Elu", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
    ("Selu", {"alpha": 1.5, "gamma": 0.9}), ("Celu", {"alpha": 1.3}), ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 0.1, "beta": 0.4}), ("HardSwish", {}), ("Mish", {}),
    ("Softplus", {}), ("Swish", {}), ("Swish", {"alpha": 1.702}), ("Softsign", {}),
    ("ThresholdedRelu", {"alpha": 0.5})]


@pytest.mark.parametrize("op_type,attrs", ACTIVATIONS, ids=str)
def test_activations(op_type: str, attrs: dict[str, Any]) -> None:
    x = sample((5, 40), seed=1, low=-8, high=8, edges=True)
    # erf-based ops and the exp(x) - 1 of the ELUs: 1e-5 absolute
    atol = 1e-5 if op_type in ("Gelu", "Elu", "Selu", "Celu", "Mish") else None
    check(op_type, [x], attrs, atol=atol)


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (None, 0.5), (-0.5, None), (None, None),
                                    (2.0, -2.0)])
def test_clip(bounds: tuple[Optional[float], Optional[float]]) -> None:
    arrays: list[Optional[np.ndarray]] = [sample((4, 9), low=-6, high=6, edges=True)]
    arrays += [None if b is None else np.array(b, np.float32) for b in bounds]
    while arrays[-1] is None:
        arrays.pop()
    check("Clip", arrays, const=[1, 2])


EXPONENTS = [np.array(2.0, np.float32), np.array([3.0], np.float32), np.array(0.5, np.float32),
             np.array(-0.5, np.float32), np.array(-1.0, np.float32), np.array(1.5, np.float32),
             np.array(-2.0, np.float32), np.array(2, np.int64), np.array(0.5, np.float64),
             np.array([[0.5]], np.float32), np.linspace(-2, 2, 6).astype(np.float32),
             np.array([1, 2, 3, 4, 5, 6], np.int32)]


@pytest.mark.parametrize("exponent", EXPONENTS, ids=lambda e: f"{e.dtype}{e.tolist()}")
def test_pow_by_a_constant(exponent: np.ndarray) -> None:
    check("Pow", [sample((4, 6), low=-4, high=4, edges=True), exponent], const=[1])


@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((4, 6), (6,)), ((4, 1), (1, 6)),
                                    ((4, 6), (1,)), ((6,), (1, 1))], ids=str)
def test_pow_by_a_given_exponent(shapes: tuple[tuple[int, ...], ...]) -> None:
    base = sample(shapes[0], low=-4, high=4, edges=True)
    exponent = sample(shapes[1], seed=2, low=-3, high=3)
    check("Pow", [base, exponent])
    check("Pow", [base, np.full(shapes[1], 0.5, np.float32)])  # NumPy's square root


# -- elementwise: binary and Where -------------------------------------------------------

BROADCASTS = [((3, 4, 5), (3, 4, 5)), ((3, 4, 5), (5,)), ((3, 1, 5), (4, 1)), ((2, 3), (1,)),
              ((1,), (2, 3)), ((6,), ()), ((), ())]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary(op_type: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    x = sample(shapes[0], seed=2, low=-9, high=9, edges=True)
    y = sample(shapes[1], seed=3, low=-3, high=3)
    check(op_type, [x, y])
    check(op_type, [x, y], const=[1])
    check(op_type, [x, y], const=[0])


def test_binary_reading_one_array_twice() -> None:
    x = sample((3, 4), seed=1)
    node = check("Add", [x, x])
    writer = ENGINE.bind_node(node).writer
    assert writer is not None
    buffer = x.copy()
    writer([buffer, buffer], [buffer])
    np.testing.assert_array_equal(buffer, x + x)


@pytest.mark.parametrize("const", [(), (1,), (2,), (0, 2)])
def test_where(const: tuple[int, ...]) -> None:
    check("Where", [sample((3, 1, 5), "bool"), sample((4, 5), seed=1, edges=True),
                    sample((3, 4, 1), seed=2)], const=const)


# -- elementwise: declined ---------------------------------------------------------------

def test_elementwise_declines() -> None:
    wide = sample((3, 4), "float64")
    narrow = sample((3, 4))
    assert declines("Sigmoid", [wide])
    assert declines("Gelu", [wide])
    assert declines("Relu", [sample((3, 4), "int32")])
    assert declines("Add", [wide, wide])
    assert declines("Add", [sample((3,), "int32"), sample((3,), "int32")])
    assert declines("Where", [sample((3,), "bool"), wide[0, :3], wide[1, :3]])
    assert declines("Clip", [narrow, np.array(-1.0, np.float32)])  # a bound given at run time
    assert declines("Clip", [narrow, np.array(np.nan, np.float32)], const=[1])
    assert declines("Pow", [narrow, sample((3, 4), "int32")])  # a run-time integer exponent
    assert declines("Pow", [narrow, sample((4,), "float64")], const=[1])
    assert declines("Celu", [narrow], {"alpha": 0.0})
    assert declines("LeakyRelu", [narrow], {"alpha": float("nan")})


# -- nn: softmax and normalizations -----------------------------------------------------

@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(op_type: str, axis: int) -> None:
    check(op_type, [sample((3, 5, 6), low=-20, high=20)], {"axis": axis}, accumulate=True)


@pytest.mark.parametrize("axis,scale_shape", [(-1, (6,)), (1, (5, 6)), (1, (1, 6)), (0, (6,)),
                                              (1, (6,))])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("const", [(), (1, 2)])
def test_layer_normalization(axis: int, scale_shape: tuple[int, ...], with_bias: bool,
                             const: tuple[int, ...]) -> None:
    arrays = [sample((3, 5, 6)), sample(scale_shape, seed=1)]
    if with_bias:
        arrays.append(sample(scale_shape, seed=2))
    check("LayerNormalization", arrays, {"axis": axis, "epsilon": 1e-5}, const=const,
          accumulate=True)


@pytest.mark.parametrize("axis,scale_shape", [(-1, (6,)), (1, (5, 6)), (1, (6,)),
                                              (-1, (3, 1, 6)), (0, (1,))])
def test_rms_normalization(axis: int, scale_shape: tuple[int, ...]) -> None:
    check("RMSNormalization", [sample((3, 5, 6)), sample(scale_shape, seed=1)],
          {"axis": axis, "epsilon": 1e-3}, accumulate=True)
    check("RMSNormalization", [sample((3, 5, 6)), sample(scale_shape, seed=1)],
          {"axis": axis}, const=[1], accumulate=True)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("const", [(), (1, 2)])
def test_instance_normalization(shape: tuple[int, ...], const: tuple[int, ...]) -> None:
    channels = shape[1]
    check("InstanceNormalization", [sample(shape), sample((channels,), seed=1),
                                    sample((channels,), seed=2)], {"epsilon": 1e-4},
          const=const, accumulate=True)


@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 5), 3), ((2, 6, 7), 2), ((3, 4), 4),
                                          ((2, 6, 4, 5), 1)])
def test_group_normalization(shape: tuple[int, ...], groups: int) -> None:
    channels = shape[1]
    check("GroupNormalization", [sample(shape), sample((channels,), seed=1),
                                 sample((channels,), seed=2)],
          {"num_groups": groups, "epsilon": 1e-5}, const=[1, 2], accumulate=True)


def test_normalizations_decline() -> None:
    wide = sample((3, 5, 6), "float64")
    assert declines("Softmax", [wide])
    assert declines("LogSoftmax", [sample((3, 5, 6), "float16")])
    assert declines("LayerNormalization", [wide, sample((6,), "float64")])
    assert declines("RMSNormalization", [wide, sample((6,), "float64")])
    assert declines("InstanceNormalization", [wide, sample((5,), "float64"),
                                              sample((5,), "float64")])
    assert declines("GroupNormalization", [wide, sample((5,), "float64"),
                                           sample((5,), "float64")], {"num_groups": 5})


# -- nn: Attention ----------------------------------------------------------------------

def attention_inputs(batch: int = 2, q_heads: int = 4, kv_heads: int = 2, q_len: int = 5,
                     kv_len: int = 7, head: int = 8, v_head: int = 6, flat: bool = False,
                     seed: int = 0) -> list[np.ndarray]:
    q = sample((batch, q_heads, q_len, head), seed=seed)
    k = sample((batch, kv_heads, kv_len, head), seed=seed + 1)
    v = sample((batch, kv_heads, kv_len, v_head), seed=seed + 2)
    if flat:
        q, k, v = (a.transpose(0, 2, 1, 3).reshape(a.shape[0], a.shape[2], -1).copy()
                   for a in (q, k, v))
    return [q, k, v]


def random_mask(shape: tuple[int, ...], boolean: bool, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keep = rng.random(shape) > 0.4
    keep.reshape(-1, shape[-1])[0] = False  # a query row that sees no key: zeros
    if boolean:
        return keep
    return np.where(keep, rng.standard_normal(shape), -np.inf).astype(np.float32)


ATTENTION_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("plain", {}, {}),
    ("scaled", {}, {"scale": 0.3}),
    ("same heads", {"kv_heads": 4}, {}),
    ("one kv head", {"kv_heads": 1}, {}),
    ("causal", {}, {"is_causal": 1}),
    ("causal square", {"q_len": 7}, {"is_causal": 1}),
    ("causal tall", {"q_len": 9}, {"is_causal": 1}),
    ("long", {"q_len": 70, "kv_len": 90, "head": 16, "v_head": 16}, {}),
    ("long causal", {"q_len": 90, "kv_len": 90, "head": 16, "v_head": 16}, {"is_causal": 1}),
    ("precision", {}, {"softmax_precision": "float32"}),
]


@pytest.mark.parametrize("name,shape,attrs", ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
def test_attention(name: str, shape: dict[str, Any], attrs: dict[str, Any]) -> None:
    check("Attention", attention_inputs(**shape), attrs, accumulate=True, outputs=3)


@pytest.mark.parametrize("boolean", [True, False])
@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7), (7,), (5, 4)])
@pytest.mark.parametrize("const", [(), (3,)])
def test_attention_with_a_mask(boolean: bool, mask_shape: tuple[int, ...],
                               const: tuple[int, ...]) -> None:
    arrays = attention_inputs() + [random_mask(mask_shape, boolean)]
    check("Attention", arrays, {}, const=const, accumulate=True, outputs=3)


def test_attention_leaves_the_present_key_and_value_unwritten_when_nobody_reads_them(
        ) -> None:
    arrays = attention_inputs()
    node = node_for("Attention", arrays, {})  # no output is read
    expected = run_kernel(get_schema("Attention"), "op", arrays, dict(node.attrs))
    outs = [garbage(e.shape, e.dtype, 0xFF) for e in expected]
    bound = ENGINE.bind_node(node)
    assert bound.writer is not None
    bound.writer(list(arrays), outs)
    assert_close(outs[0], expected[0], accumulate=True)
    assert np.isnan(outs[1]).all() and np.isnan(outs[2]).all()  # not copied: unread


@pytest.mark.parametrize("masked", [False, True])
def test_attention_in_3d_form(masked: bool) -> None:
    arrays = attention_inputs(flat=True)
    if masked:
        arrays.append(random_mask((5, 7), True))
    check("Attention", arrays, {"q_num_heads": 4, "kv_num_heads": 2}, accumulate=True,
          outputs=3)


def test_attention_with_a_cache() -> None:
    arrays: list[Optional[np.ndarray]] = list(attention_inputs(q_len=1, kv_len=1))
    arrays += [random_mask((1, 6), False), sample((2, 2, 5, 8), seed=7),
               sample((2, 2, 5, 6), seed=8)]
    check("Attention", arrays, {}, accumulate=True, outputs=3)
    arrays[3] = None
    check("Attention", arrays, {"scale": 0.5}, accumulate=True, outputs=3)


def test_attention_declines() -> None:
    arrays = attention_inputs()
    assert declines("Attention", arrays, {"softcap": 5.0})
    assert declines("Attention", arrays, {"left_window_size": 2})
    assert declines("Attention", arrays, {"softmax_precision": "float64"})
    assert declines("Attention", arrays + [random_mask((5, 7), True)], {"is_causal": 1})
    assert declines("Attention", arrays + [np.zeros((5, 7), np.int32)])
    assert declines("Attention", [a.astype(np.float64) for a in arrays])
    cached = list(arrays) + [None, sample((2, 2, 3, 8)), sample((2, 2, 3, 6))]
    assert declines("Attention", cached, {"is_causal": 1})
    with_lengths = list(arrays) + [None, None, None, np.array([7, 6], np.int64)]
    assert declines("Attention", with_lengths)
    # a node whose qk_matmul_output is read
    node = node_for("Attention", arrays)
    assert ENGINE.supports(node)
    graph = node.graph
    assert graph is not None
    graph.set_outputs([node.outputs[0], node.outputs[3]])
    assert not ENGINE.supports(node)


# -- nn: Resize -------------------------------------------------------------------------

RESIZES: list[tuple[dict[str, Any], str, list[float]]] = [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, "scales", [1, 1, 2, 2]),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, "scales", [1, 1, 1.5, 0.6]),
    ({"mode": "nearest"}, "sizes", [2, 3, 11, 4]),
    ({"mode": "nearest", "coordinate_transformation_mode": "align_corners",
      "nearest_mode": "round_prefer_ceil"}, "scales", [1, 1, 3, 2.5]),
    ({"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn",
      "nearest_mode": "ceil"}, "sizes", [2, 3, 5, 13]),
    ({"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric"},
     "scales", [1, 1, 1.7, 0.5]),
    ({"mode": "linear"}, "scales", [1, 1, 2, 2]),
    ({"mode": "linear"}, "scales", [1, 1, 0.5, 4]),
    ({"mode": "linear"}, "sizes", [2, 3, 11, 3]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
     "sizes", [2, 3, 1, 12]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
     "scales", [1, 1, 2, 2]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "sizes",
     [2, 3, 9, 11]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "scales",
     [1, 1, 1.5, 2.2]),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, "scales",
     [1, 1, 1.5, 2]),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, "scales",
     [1, 1, 1.5, 2]),
    ({"mode": "linear"}, "scales", [1, 2, 1, 1]),  # a channel axis: the separable path
]


@pytest.mark.parametrize("attrs,kind,values", RESIZES, ids=str)
def test_resize_nchw(attrs: dict[str, Any], kind: str, values: list[float]) -> None:
    x = sample((2, 3, 5, 6))
    if kind == "scales":
        arrays = [x, None, np.array(values, np.float32)]
    else:
        arrays = [x, None, None, np.array(values, np.int64)]
    check("Resize", arrays, attrs, const=[1, 2, 3])


@pytest.mark.parametrize("mapping", ["half_pixel", "align_corners", "pytorch_half_pixel"])
@pytest.mark.parametrize("scales", [[1, 2, 2, 1], [1, 0.5, 2, 1], [1, 1.3, 2, 1]], ids=str)
def test_resize_nhwc(mapping: str, scales: list[float]) -> None:
    x = sample((2, 5, 6, 3))
    check("Resize", [x, None, np.array(scales, np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": mapping}, const=[1, 2])


@pytest.mark.parametrize("attrs,scales", [
    ({"mode": "nearest"}, [1, 1, 1.7, 0.6]),
    ({"mode": "nearest", "coordinate_transformation_mode": "align_corners",
      "nearest_mode": "floor"}, [1, 1, 2.5, 1.5]),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 1.5, 2]),
    ({"mode": "linear"}, [1.5, 1.3, 2.7, 1]),  # three axes: off the bilinear kernel
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"},
     [1, 1.5, 1, 2.2])], ids=str)  # axes 1 and 3: not neighbours
def test_resize_by_gathers_is_exact(attrs: dict[str, Any], scales: list[float]) -> None:
    """Off the bilinear kernel, the taps and weights are the reference's: equal bits."""
    arrays = [sample((2, 3, 5, 6)), None, np.array(scales, np.float32)]
    node = node_for("Resize", arrays, attrs, const=[2])
    expected = run_kernel(get_schema("Resize"), "op", arrays, dict(node.attrs))[0]
    np.testing.assert_array_equal(ENGINE.bind_node(node).kernel(arrays)[0], expected)


@pytest.mark.parametrize("attrs,shape,scales,repeats", [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (2, 3, 5, 6), [1, 1, 2, 2], True),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (2, 5, 6, 3), [1, 3, 2, 1], True),  # NHWC, mixed ratios
    ({"mode": "nearest"}, (2, 3, 5, 6), [1, 1, 2, 2], True),  # half_pixel, round down
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "ceil"}, (2, 3, 5, 6), [1, 1, 2, 2], False),  # shifted: not a repeat
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (2, 3, 5, 6), [1, 1, 1.5, 2], False)], ids=str)
def test_a_nearest_resize_that_repeats_cells_is_one_copy(attrs, shape, scales, repeats):
    arrays = [sample(shape), None, np.array(scales, np.float32)]
    node = node_for("Resize", arrays, attrs, const=[2])
    expected = run_kernel(get_schema("Resize"), "op", arrays, dict(node.attrs))[0]
    bound = ENGINE.bind_node(node)
    np.testing.assert_array_equal(bound.kernel(arrays)[0], expected)
    out = garbage(expected.shape, expected.dtype, 0xFF)
    assert bound.writer is not None
    bound.writer(arrays, [out])
    np.testing.assert_array_equal(out, expected)
    x = arrays[0]
    out_shape = tuple(int(np.floor(s * n)) for s, n in zip(scales, x.shape))
    plan = nn._repeat_views(x.shape, list(out_shape), [a for a in range(4) if scales[a] != 1],
                            {a: nn._nearest(nn._source_positions(
                                attrs.get("coordinate_transformation_mode", "half_pixel"),
                                out_shape[a], x.shape[a], float(scales[a])),
                                attrs.get("nearest_mode", "round_prefer_floor"), x.shape[a])
                             for a in range(4) if scales[a] != 1})
    assert (plan is not None) == repeats


@pytest.mark.parametrize("mapping,out_shape,fast", [
    ("half_pixel", [2, 3, 10, 12], True), ("half_pixel", [2, 3, 10, 24], True),
    ("half_pixel", [2, 3, 2, 24], True),
    ("half_pixel", [2, 3, 15, 12], True), ("pytorch_half_pixel", [2, 3, 1, 12], False),
    ("align_corners", [2, 3, 9, 11], True), ("align_corners", [2, 3, 7, 11], True),
    ("asymmetric", [2, 3, 10, 12], False)])
def test_which_resizes_run_as_one_bilinear_call(mapping: str, out_shape: list[int],
                                                fast: bool) -> None:
    """Two neighbouring axes in a mapping torch's kernel knows (pytorch_half_pixel maps
    an output of one cell to position 0, which torch does not)."""
    arrays = [sample((2, 3, 5, 6)), None, None, np.array(out_shape, np.int64)]
    node = node_for("Resize", arrays, {"mode": "linear",
                                       "coordinate_transformation_mode": mapping}, const=[3])
    factors = [o / i for o, i in zip(out_shape, (2, 3, 5, 6))]
    found = nn._bilinear_fast_path(node, (2, 3, 5, 6), out_shape, factors, [2, 3])
    assert (found is not None) == fast


def test_resize_with_axes_and_other_ranks() -> None:
    check("Resize", [sample((2, 3, 5, 6)), None, np.array([2.0, 3.0], np.float32)],
          {"mode": "linear", "axes": [3, 2]}, const=[2])
    check("Resize", [sample((3, 7)), None, None, np.array([5, 3], np.int64)],
          {"mode": "nearest"}, const=[3])
    check("Resize", [sample((2, 3, 7)), None, np.array([1, 1, 1.75], np.float32)],
          {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, const=[2])
    check("Resize", [sample((2, 3, 4, 5)), None, np.array([1, 1, 1, 1], np.float32)],
          {"mode": "linear"}, const=[2])  # no axis changes: a copy


def test_resize_declines() -> None:
    x = sample((2, 3, 5, 6))
    scales = np.array([1, 1, 2, 2], np.float32)
    assert declines("Resize", [x, None, scales], {"mode": "cubic"}, const=[2])
    assert declines("Resize", [x, None, scales], {"mode": "linear", "antialias": 1}, const=[2])
    assert declines("Resize", [x, None, scales], {"mode": "linear", "exclude_outside": 1},
                    const=[2])
    assert declines("Resize", [x, None, scales],
                    {"coordinate_transformation_mode": "tf_crop_and_resize"}, const=[2])
    assert declines("Resize", [x, None, scales])  # scales given at run time
    assert declines("Resize", [x.astype(np.float64), None, scales], const=[2])
    sizes = np.array([2, 3, 10, 10], np.int64)
    assert declines("Resize", [x, None, None, sizes],
                    {"keep_aspect_ratio_policy": "not_larger"}, const=[3])


# -- nn: Cast, TopK, CumSum, reductions -------------------------------------------------

@pytest.mark.parametrize("source,target", [
    ("float32", "float16"), ("float16", "float32"), ("float32", "int32"), ("float32", "int64"),
    ("int64", "float32"), ("int32", "float32"), ("uint8", "float32"), ("float32", "bool"),
    ("bool", "float32"), ("int8", "float32"), ("float32", "float32")])
def test_cast(source: str, target: str) -> None:
    x = sample((6, 7), source, low=-200, high=200)
    if source == "float32":
        x[0, :4] = [0.5, -0.5, 1e-3, 7e4]  # truncation toward zero; float16's overflow
        if target == "float16":
            x[1, :3] = [np.inf, -np.inf, np.nan]
    check("Cast", [x], {"dtype": target})


def test_cast_declines() -> None:
    assert declines("Cast", [sample((3,), "float64")], {"dtype": "float32"})
    assert declines("Cast", [sample((3,))], {"dtype": "uint8"})
    assert declines("Cast", [sample((3,), "int32")], {"dtype": "int64"})


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("const", [(), (1,)])
def test_top_k(axis: int, largest: int, const: tuple[int, ...]) -> None:
    x = sample((6, 9, 5), low=-3, high=3)
    x = np.round(x).astype(np.float32)  # many ties: equal values keep their index order
    x[0, 0, :2] = np.nan
    x[1, :2, 0] = [0.0, -0.0]
    k = np.array([3], np.int64)
    check("TopK", [x, k], {"axis": axis, "largest": largest}, const=const)
    check("TopK", [x, np.array([0], np.int64)], {"axis": axis, "largest": largest}, const=const)


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_by_selection(axis: int, largest: int) -> None:
    """Distinct values, and ties only inside the k best or only past them: torch's
    selection, put in the reference's order; a tie across the k-th place: the sort."""
    x = sample((4, 40, 30))
    check("TopK", [x, np.array([7], np.int64)], {"axis": axis, "largest": largest})
    inside = x.copy()  # the three best equal, the k-th unique: selection, reordered
    best = np.max(x) + 1 if largest else np.min(x) - 1
    np.moveaxis(inside, axis, 0)[[4, 11, 20]] = best
    check("TopK", [inside, np.array([5], np.int64)], {"axis": axis, "largest": largest})
    tied = np.round(sample((4, 40, 30), low=-3, high=3) * 4).astype(np.float32)
    for k in (1, 5, 29):  # ties across the k-th place: the stable sort
        check("TopK", [tied, np.array([k], np.int64)], {"axis": axis, "largest": largest})


def test_top_k_declines() -> None:
    assert declines("TopK", [sample((4, 5), "float64"), np.array([2], np.int64)])
    assert declines("TopK", [sample((4, 5), "int32"), np.array([2], np.int64)])


@pytest.mark.parametrize("axis", [0, -1, 1])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_cumsum(axis: int, exclusive: bool, reverse: bool) -> None:
    check("CumSum", [sample((4, 6, 5)), np.array(axis, np.int64)],
          {"exclusive": exclusive, "reverse": reverse}, const=[1], accumulate=True)


def test_cumsum_declines() -> None:
    x = sample((4, 6))
    assert declines("CumSum", [x, np.array(0, np.int64)])  # the axis given at run time
    assert declines("CumSum", [x.astype(np.float64), np.array(0, np.int64)], const=[1])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
@pytest.mark.parametrize("axis,sizes", [(-1, [2, 3, 4]), (0, [1, 0, 3]), (1, [6])])
def test_split_by_sizes(dtype: str, axis: int, sizes: list[int]) -> None:
    x = sample((4, 6, 9), dtype, low=-9, high=9)
    if sum(sizes) != x.shape[axis]:
        sizes = sizes[:-1] + [x.shape[axis] - sum(sizes[:-1])]
    check("Split", [x, np.array(sizes, np.int64)], {"axis": axis}, const=[1])


@pytest.mark.parametrize("parts", [1, 3, 4])
def test_split_into_equal_parts_the_last_smaller(parts: int) -> None:
    check("Split", [sample((2, 10, 3))], {"axis": 1, "num_outputs": parts})


def test_split_declines_sizes_given_at_run_time_and_small_cheap_ops() -> None:
    assert declines("Split", [sample((4, 6)), np.array([2, 4], np.int64)], {"axis": 1})
    # the name holds "cheap_ops": the size rule is on here
    assert declines("Split", [sample((4, 6))], {"axis": 1, "num_outputs": 2})
    assert not declines("Split", [sample((128, 512))], {"axis": 1, "num_outputs": 2})
    assert declines("Split", [sample((4, 6), "float64")], {"axis": 1, "num_outputs": 2})


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0),
                                           ([], 1)])
def test_reduce(op_type: str, axes: Optional[list[int]], keepdims: int) -> None:
    x = sample((3, 4, 5), low=-9, high=9, edges=op_type in ("ReduceMax", "ReduceMin"))
    arrays = [x] if axes is None else [x, np.array(axes, np.int64)]
    check(op_type, arrays, {"keepdims": keepdims}, const=[1], accumulate=True)
    if axes == []:
        check(op_type, arrays, {"keepdims": keepdims, "noop_with_empty_axes": 1}, const=[1])


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
def test_reduce_of_nothing(op_type: str) -> None:
    check(op_type, [np.zeros((3, 0, 2), np.float32), np.array([1], np.int64)],
          {"keepdims": 0}, const=[1])


def test_reduce_declines() -> None:
    x = sample((3, 4))
    assert declines("ReduceSum", [x, np.array([1], np.int64)])  # axes given at run time
    assert declines("ReduceMean", [x.astype(np.float64), np.array([1], np.int64)], const=[1])
    assert declines("ReduceMax", [sample((3, 4), "int32"), np.array([1], np.int64)], const=[1])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_gather_elements(axis: int, dtype: str, index_dtype: Any) -> None:
    data = sample((5, 6, 7), dtype)
    size = data.shape[axis]
    shape = list(data.shape)
    shape[axis] = 4
    positions = np.random.default_rng(2).integers(-size, size, shape).astype(index_dtype)
    check("GatherElements", [data, positions], {"axis": axis})


def test_gather_elements_out_of_range_is_an_error() -> None:
    node = node_for("GatherElements", [sample((3, 4)), np.array([[0, 4]], np.int64)],
                    {"axis": 1}, ())
    bound = ENGINE.bind_node(node)
    with pytest.raises(IndexError, match="index 4 is out of range for a dimension of size 4"):
        bound.kernel([sample((3, 4)), np.array([[0, 4]], np.int64)])


@pytest.mark.parametrize("slope_shape", [(), (1,), (4, 1, 1), (1, 4, 1, 1)])
@pytest.mark.parametrize("const", [(), (1,)])
def test_prelu(slope_shape: tuple[int, ...], const: tuple[int, ...]) -> None:
    x = sample((2, 4, 5, 6))
    x[0, 0, 0, :3] = [np.nan, -np.inf, -0.0]
    check("PRelu", [x, sample(slope_shape)], const=const)


def test_prelu_declines_a_slope_along_other_axes() -> None:
    assert declines("PRelu", [sample((2, 4, 5, 6)), sample((6,))])
    assert declines("PRelu", [sample((2, 4, 5, 6)), sample((1, 4, 5, 6))])


# -- coverage and the compiled graph ----------------------------------------------------

def test_every_registered_op_type_is_tested() -> None:
    families = {entry: _base.entry_of(entry) for entry in _base.registered_op_types()}
    mine = {op_type for op_type, entry in families.items()
            if entry is not None and entry.check.__module__ in (elementwise.__name__,
                                                               nn.__name__)}
    tested = set(UNARY) | {name for name, _ in ACTIVATIONS} | {
        "Clip", "Pow", "Add", "Sub", "Mul", "Div", "Max", "Min", "Where", "Softmax",
        "LogSoftmax", "LayerNormalization", "RMSNormalization", "InstanceNormalization",
        "GroupNormalization", "Attention", "Resize", "Cast", "TopK", "CumSum", "ReduceSum",
        "ReduceMean", "ReduceMax", "ReduceMin", "GatherElements", "PRelu", "Split"}
    assert mine == tested


def test_importing_the_families_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, ge; from ge.engines.torch import elementwise, nn; "
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def small_model() -> Graph:
    """Data -> LayerNorm -> Gelu -> Add -> Softmax -> Resize -> Mul -> Clip -> ReduceMean."""
    rng = np.random.default_rng(0)
    graph = Graph("small")
    x = create_node("Data", [], {"shape": [2, 3, 8, 8], "dtype": "float32"}, "x", graph)

    def const(name: str, value: np.ndarray) -> Node:
        return create_node("Const", [], {"value": Tensor(value)}, name, graph)

    scale = const("scale", rng.uniform(0.5, 1.5, 8).astype(np.float32))
    bias = const("bias", rng.uniform(-0.5, 0.5, 8).astype(np.float32))
    norm = create_node("LayerNormalization", [x, scale, bias], {"axis": -1}, "norm", graph)
    gelu = create_node("Gelu", [norm], {}, "gelu", graph)
    added = create_node("Add", [gelu, x], {}, "add", graph)
    soft = create_node("Softmax", [added], {"axis": 1}, "softmax", graph)
    scales = const("scales", np.array([1, 1, 2, 2], np.float32))
    resized = create_node("Resize", [soft, None, scales], {"mode": "linear"}, "resize", graph)
    factor = const("factor", np.array(3.0, np.float32))
    scaled = create_node("Mul", [resized, factor], {}, "mul", graph)
    low, high = const("low", np.array(0.1, np.float32)), const("high", np.array(2.0, np.float32))
    clipped = create_node("Clip", [scaled, low, high], {}, "clip", graph)
    axes = const("axes", np.array([-1], np.int64))
    mean = create_node("ReduceMean", [clipped, axes], {"keepdims": 0}, "mean", graph)
    graph.set_outputs([mean, clipped])
    return graph


@pytest.mark.parametrize("opt_level,on_torch", [
    (1, {"LayerNormalization", "Gelu", "Add", "Softmax", "Resize", "Mul", "Clip",
         "ReduceMean"}),
    (3, {"LayerNormalization", "Softmax", "Resize", "ReduceMean"})])  # the rest fused
def test_a_compiled_graph_on_torch_matches_numpy(opt_level: int, on_torch: set[str]) -> None:
    feed = {"x": sample((2, 3, 8, 8), seed=4)}
    with_torch = ge.compile(small_model(), engines=["torch", "numpy"], opt_level=opt_level)
    numpy_only = ge.compile(small_model(), engines=["numpy"], opt_level=opt_level)
    ops = with_torch.engine_ops().get("torch", {})
    assert on_torch <= set(ops), ops
    session = ge.Session(with_torch)
    want = ge.Session(numpy_only).run(feed)
    for _ in range(2):  # the second run reuses the arena
        got = session.run(feed)
        assert list(got) == list(want)
        for name in want:
            assert_close(got[name], want[name], accumulate=True, atol=1e-5, what=name)


def test_one_session_on_several_threads() -> None:
    """The writers' remembered tensors never pair one run's array with another's."""
    session = ge.Session(ge.compile(small_model(), engines=["torch", "numpy"], opt_level=1))
    reference = ge.Session(ge.compile(small_model(), engines=["numpy"], opt_level=1))
    feeds = [{"x": sample((2, 3, 8, 8), seed=10 + i)} for i in range(4)]
    wanted = [reference.run(feed) for feed in feeds]

    def work(index: int) -> None:
        for _ in range(20):
            got = session.run(feeds[index])
            for name, want in wanted[index].items():
                assert_close(got[name], want, accumulate=True, atol=1e-5, what=name)

    run_on_threads(work, 4)
