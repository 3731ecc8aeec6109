"""Every trait an op declares is a claim about its reference kernel: here each claim is
checked against the kernel on random data, so a wrong declaration fails.

The checks are functions of a schema that return what went wrong (or None), so the
last tests can show that a planted wrong declaration is caught. Integers are drawn
away from their type's limits: ``Abs`` of int8 -128 wraps to -128 in NumPy (and in
every engine), an overflow no trait speaks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import pytest

from ge.errors import GEError
from ge.ir import DataType, Format, Graph
from ge.ops import (
    LayoutRole,
    OpSchema,
    Trait,
    create_node,
    get_schema,
    normalize_attrs,
    ops_with,
    register_op,
)
from ge.ops.registry import run_kernel

RNG = np.random.default_rng(20261203)

#: the element types a unary or binary op is tried on (each one its inference accepts)
CANDIDATE_DTYPES = (np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.bool_)
SHAPE = (4, 7)


def declaring(trait: Trait) -> list[str]:
    """The op types that declare ``trait``."""
    return [schema.op_type for schema in ops_with(trait)]


def random_array(dtype: Any, shape: Sequence[int] = SHAPE) -> np.ndarray:
    """Random values of ``dtype``: floats with zeros, infinities and NaN among them,
    integers in [-100, 100] (unsigned: [0, 200]), bools of both values."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -100
        return RNG.integers(low, low + 201, size=shape).astype(dtype)
    values = (RNG.standard_normal(shape) * 4).astype(dtype)
    flat = values.reshape(-1)
    flat[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    return values


def accepted_dtypes(schema: OpSchema, arity: int) -> list[np.dtype]:
    """The candidate dtypes the op's inference accepts for ``arity`` inputs of one dtype."""
    accepted = []
    for candidate in CANDIDATE_DTYPES:
        graph = Graph("probe")
        dtype = DataType.parse(np.dtype(candidate))
        inputs = [create_node("Data", [], {"shape": list(SHAPE), "dtype": dtype},
                              f"x{i}", graph) for i in range(arity)]
        try:
            create_node(schema.op_type, inputs, {}, "probe", graph)
        except GEError:
            continue
        accepted.append(np.dtype(candidate))
    assert accepted, f"{schema.op_type} accepts none of {CANDIDATE_DTYPES}"
    return accepted


def call(schema: OpSchema, *inputs: np.ndarray, **attrs: Any) -> np.ndarray:
    """Output 0 of the op's reference kernel, its attributes completed with defaults."""
    full = normalize_attrs(schema, attrs, "probe")
    return run_kernel(schema, "probe", list(inputs), full)[0]


def same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values and dtype (NaN equal to NaN)."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    return bool(np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"))


# -- the checks: each returns what went wrong, or None ------------------------------------

Check = Callable[[OpSchema], Optional[str]]


def check_involution(schema: OpSchema) -> Optional[str]:
    """f(f(x)) = x."""
    for dtype in accepted_dtypes(schema, 1):
        x = random_array(dtype)
        if not same(call(schema, call(schema, x)), x):
            return f"f(f(x)) != x for {dtype}"
    return None


def check_idempotent(schema: OpSchema) -> Optional[str]:
    """f(f(x)) = f(x)."""
    for dtype in accepted_dtypes(schema, 1):
        once = call(schema, random_array(dtype))
        if not same(call(schema, once), once):
            return f"f(f(x)) != f(x) for {dtype}"
    return None


def check_self_idempotent(schema: OpSchema) -> Optional[str]:
    """f(x, x) = x."""
    for dtype in accepted_dtypes(schema, 2):
        x = random_array(dtype)
        if not same(call(schema, x, x), x):
            return f"f(x, x) != x for {dtype}"
    return None


def check_non_negative(schema: OpSchema) -> Optional[str]:
    """Every element of output 0 is >= 0 (or NaN)."""
    for dtype in accepted_dtypes(schema, 1):
        y = call(schema, random_array(dtype))
        negative = ~(y >= 0) & ~np.isnan(y) if y.dtype.kind == "f" else ~(y >= 0)
        if np.any(negative):
            return f"negative output {y[negative][:3]} for {dtype}"
    return None


def check_fixes_non_negative(schema: OpSchema) -> Optional[str]:
    """f(x) = x wherever x >= 0 (NaN stays NaN)."""
    for dtype in accepted_dtypes(schema, 1):
        x = random_array(dtype)
        x = np.where(x >= 0, x, -x) if dtype.kind != "u" else x
        if not same(call(schema, x), x):
            return f"f(x) != x on non-negative x for {dtype}"
    return None


def check_identity_element(schema: OpSchema) -> Optional[str]:
    """f(x, e) = x for the declared e, and f(e, x) = x when the op commutes."""
    if schema.identity_element is None:
        return "declares an identity element trait without the element"
    for dtype in accepted_dtypes(schema, 2):
        x = random_array(dtype)
        element = np.full(x.shape, schema.identity_element, dtype)
        if not same(call(schema, x, element), x):
            return f"f(x, {schema.identity_element!r}) != x for {dtype}"
        if schema.has_trait(Trait.COMMUTATIVE) and not same(call(schema, element, x), x):
            return f"f({schema.identity_element!r}, x) != x for {dtype}"
    return None


def check_commutative(schema: OpSchema) -> Optional[str]:
    """f(x, y) = f(y, x)."""
    for dtype in accepted_dtypes(schema, 2):
        x, y = random_array(dtype), random_array(dtype)
        if not same(call(schema, x, y), call(schema, y, x)):
            return f"f(x, y) != f(y, x) for {dtype}"
    return None


CHECKS: dict[Trait, Check] = {
    Trait.INVOLUTION: check_involution,
    Trait.IDEMPOTENT: check_idempotent,
    Trait.SELF_IDEMPOTENT: check_self_idempotent,
    Trait.NON_NEGATIVE: check_non_negative,
    Trait.FIXES_NON_NEGATIVE: check_fixes_non_negative,
    Trait.IDENTITY_ELEMENT: check_identity_element,
    Trait.COMMUTATIVE: check_commutative,
}

DECLARED = [(trait, op) for trait in CHECKS for op in declaring(trait)]


@pytest.mark.parametrize(("trait", "op_type"), DECLARED,
                         ids=[f"{t.value}-{op}" for t, op in DECLARED])
def test_a_declared_algebraic_trait_holds_on_the_reference_kernel(trait, op_type):
    assert CHECKS[trait](get_schema(op_type)) is None


def test_the_algebraic_traits_the_cleanup_relies_on_are_declared():
    """The ops the simplifier used to list by name now say so themselves."""
    assert {"Neg", "Not", "BitwiseNot"} <= set(declaring(Trait.INVOLUTION))
    assert {"Relu", "Abs", "Floor", "Ceil", "Round", "Sign"} <= set(declaring(Trait.IDEMPOTENT))
    assert {"Relu", "Abs", "Exp", "Sigmoid", "Softmax"} <= set(declaring(Trait.NON_NEGATIVE))
    assert {"Relu", "Abs"} <= set(declaring(Trait.FIXES_NON_NEGATIVE))
    assert {"Max", "Min", "And", "Or"} <= set(declaring(Trait.SELF_IDEMPOTENT))
    identities = {s.op_type: s.identity_element for s in ops_with(Trait.IDENTITY_ELEMENT)}
    assert {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1, "Pow": 1, "And": True,
            "Or": False}.items() <= identities.items()


# -- elements moved: the kernel run on element positions says where each one goes ---------

def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _ints(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


#: an op that declares MOVES_ELEMENTS -> (inputs, attributes) to try it on
MOVE_SAMPLES: dict[str, tuple[list[np.ndarray], dict[str, Any]]] = {
    "Gather": ([_floats(3, 4), _ints(2, 0, 2, 1)], {"axis": 0}),
    "Slice": ([_floats(4, 5), _ints(1), _ints(5), _ints(1), _ints(2)], {}),
    "Concat": ([_floats(2, 3), _floats(1, 3), _floats(3, 3)], {"axis": 0}),
    "Expand": ([_floats(3, 1), _ints(2, 3, 4)], {}),
    "Tile": ([_floats(2, 3), _ints(2, 1)], {}),
    "Transpose": ([_floats(2, 3, 4)], {"perm": [2, 0, 1]}),
    "Cast": ([_floats(2, 5)], {"dtype": DataType.DT_DOUBLE}),
    "Where": ([RNG.random((3, 4)) < 0.5, _floats(3, 4), _floats(1, 4)], {}),
    "Reshape": ([_floats(2, 6), _ints(3, 4)], {}),
    "Squeeze": ([_floats(1, 3, 1), _ints(0)], {}),
    "Unsqueeze": ([_floats(3), _ints(0)], {}),
    "Flatten": ([_floats(2, 3, 4)], {"axis": 1}),
    "Identity": ([_floats(3, 2)], {}),
}


def check_moves_elements(schema: OpSchema, inputs: list[np.ndarray],
                         attrs: dict[str, Any]) -> Optional[str]:
    """Output 0 is the moved inputs' elements at the positions the kernel gives when it
    runs on positions instead of values."""
    real = call(schema, *inputs, **attrs)
    slots = schema.moved_slots(len(inputs))
    if not slots:
        return "moves no input"
    pool = np.concatenate([inputs[slot].reshape(-1) for slot in slots])
    positions, offset = list(inputs), 0
    for slot in slots:
        size = inputs[slot].size
        positions[slot] = np.arange(offset, offset + size, dtype=np.int64).reshape(
            inputs[slot].shape)
        offset += size
    where = call(schema, *positions, **attrs)
    if where.shape != real.shape:
        return f"positions give shape {where.shape}, values {real.shape}"
    index = where.astype(np.int64)
    if where.size and (index.min() < 0 or index.max() >= pool.size or np.any(index != where)):
        return "the kernel run on positions gives something that is not a position"
    if not same(real, pool[index].astype(real.dtype)):
        return "the output is not the moved elements at the kernel's positions"
    return None


def test_every_op_that_moves_elements_has_a_sample():
    assert set(declaring(Trait.MOVES_ELEMENTS)) == set(MOVE_SAMPLES)


@pytest.mark.parametrize("op_type", sorted(MOVE_SAMPLES))
def test_an_op_that_moves_elements_moves_them(op_type):
    inputs, attrs = MOVE_SAMPLES[op_type]
    assert check_moves_elements(get_schema(op_type), inputs, attrs) is None


# -- layout: the same op in the other layout gives the transposed result -------------------

_TO_NHWC = (0, 2, 3, 1)
_OIHW_TO_HWIO = (2, 3, 1, 0)
_CONV = {"data_format": Format.NCHW, "strides": [1, 1, 2, 1], "dilations": [1, 1, 1, 2],
         "padding": "SAME"}
_POOL = {"data_format": Format.NCHW, "ksize": [1, 1, 2, 3], "strides": [1, 1, 2, 1],
         "padding": "VALID"}


def _positive(*shape: int) -> np.ndarray:
    return (RNG.random(shape) + 0.5).astype(np.float32)


#: a layout-sensitive op -> (NCHW inputs, attributes)
LAYOUT_SAMPLES: dict[str, tuple[list[Optional[np.ndarray]], dict[str, Any]]] = {
    "Conv2D": ([_floats(2, 3, 6, 7), _floats(4, 3, 3, 3), _floats(4)], _CONV),
    "FusedConv2D": ([_floats(2, 3, 6, 7), _floats(4, 3, 3, 3), _floats(4), _floats(2, 4, 3, 7)],
                    {**_CONV, "activation": "Relu"}),
    "ConvBNReLU": ([_floats(2, 3, 6, 7), _floats(4, 3, 3, 3), _positive(4), _floats(4),
                    _floats(4), _positive(4)], _CONV),
    "MaxPool": ([_floats(2, 3, 6, 7)], _POOL),
    "AvgPool": ([_floats(2, 3, 6, 7)], _POOL),
    "GlobalAveragePool": ([_floats(2, 3, 6, 7)], {"data_format": Format.NCHW}),
    "GlobalMaxPool": ([_floats(2, 3, 6, 7)], {"data_format": Format.NCHW}),
    "FusedBatchNorm": ([_floats(2, 3, 6, 7), _positive(3), _floats(3), _floats(3), _positive(3)],
                       {"data_format": Format.NCHW}),
    "BiasAdd": ([_floats(2, 3, 6, 7), _floats(3)], {"data_format": Format.NCHW}),
}


def in_nhwc(role: LayoutRole, inputs: list[Optional[np.ndarray]], attrs: dict[str, Any]
            ) -> tuple[list[Optional[np.ndarray]], dict[str, Any]]:
    """The op's NCHW inputs and attributes as the role says they read in NHWC."""
    moved = list(inputs)
    for slot in role.activations:
        if slot < len(moved) and moved[slot] is not None:
            moved[slot] = np.ascontiguousarray(moved[slot].transpose(_TO_NHWC))
    changed = {**attrs, "data_format": Format.NHWC}
    if role.filter is not None:
        moved[role.filter] = np.ascontiguousarray(moved[role.filter].transpose(_OIHW_TO_HWIO))
        changed["filter_format"] = "HWIO"
    for name in role.window_attrs:
        values = attrs.get(name)
        if values is not None and len(values) == 4:
            changed[name] = [values[axis] for axis in _TO_NHWC]
    return moved, changed


def check_layout(schema: OpSchema, inputs: list[Optional[np.ndarray]],
                 attrs: dict[str, Any]) -> Optional[str]:
    """Run in NCHW, then in NHWC as the role says: the results agree after a transpose."""
    if schema.layout is None:
        return "declares a layout trait without a LayoutRole"
    expected = call(schema, *inputs, **attrs).transpose(_TO_NHWC)
    moved, changed = in_nhwc(schema.layout, inputs, attrs)
    try:
        got = call(schema, *moved, **changed)
    except GEError as error:
        return f"the op refuses its NHWC form: {error}"
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-5, atol=1e-5):
        return f"NHWC result {got.shape} differs from the transposed NCHW one {expected.shape}"
    return None


def test_every_layout_sensitive_op_has_a_sample():
    assert set(declaring(Trait.LAYOUT_SENSITIVE)) == set(LAYOUT_SAMPLES)


@pytest.mark.parametrize("op_type", sorted(LAYOUT_SAMPLES))
def test_a_layout_sensitive_op_gives_the_same_result_in_the_other_layout(op_type):
    inputs, attrs = LAYOUT_SAMPLES[op_type]
    assert check_layout(get_schema(op_type), inputs, attrs) is None


# -- the checks catch wrong declarations -------------------------------------------------

def _impostor(op_type: str, **changes: Any) -> OpSchema:
    """A copy of ``op_type``'s schema with a wrong declaration (never registered)."""
    return dataclasses.replace(get_schema(op_type), **changes)


@pytest.mark.parametrize(("trait", "schema"), [
    (Trait.INVOLUTION, _impostor("Exp")),
    (Trait.IDEMPOTENT, _impostor("Neg")),
    (Trait.SELF_IDEMPOTENT, _impostor("Add")),
    (Trait.NON_NEGATIVE, _impostor("Tanh")),
    (Trait.FIXES_NON_NEGATIVE, _impostor("Sqrt")),
    (Trait.IDENTITY_ELEMENT, _impostor("Sub", identity_element=1)),
    (Trait.IDENTITY_ELEMENT, _impostor("Pow", traits=frozenset(
        {Trait.COMMUTATIVE, Trait.IDENTITY_ELEMENT}))),  # 1 ** x is not x
    (Trait.COMMUTATIVE, _impostor("Sub")),
], ids=["exp-involution", "neg-idempotent", "add-self-idempotent", "tanh-non-negative",
        "sqrt-fixes", "sub-identity-1", "pow-commutes", "sub-commutes"])
def test_a_wrong_algebraic_declaration_is_caught(trait, schema):
    assert CHECKS[trait](schema) is not None


def test_a_wrong_move_or_layout_declaration_is_caught():
    where = _impostor("Where", moved_inputs=(1,))  # y's elements are moved too
    assert check_moves_elements(where, *MOVE_SAMPLES["Where"]) is not None
    fused = _impostor("FusedConv2D", layout=LayoutRole((0,), 1, ("strides", "dilations"), True))
    assert check_layout(fused, *LAYOUT_SAMPLES["FusedConv2D"]) is not None  # residual unmoved
    pool = _impostor("MaxPool", layout=LayoutRole((0,), None, ("strides",)))  # ksize unmoved
    assert check_layout(pool, *LAYOUT_SAMPLES["MaxPool"]) is not None


def test_register_op_fills_the_data_traits_and_checks_moved_inputs():
    def kernel(x: np.ndarray) -> np.ndarray:
        """y = x."""
        return x

    with pytest.raises(ValueError, match="moved_inputs"):
        register_op("TraitTestBadMove", inputs=["x"], infer=lambda ctx: [ctx.input(0)],
                    moved_inputs=(1,))(kernel)
    add = get_schema("Add")
    assert add.has_trait(Trait.IDENTITY_ELEMENT) and add.identity_element == 0
    assert get_schema("Reshape").moved_inputs == (0,)  # a view moves input 0
    assert get_schema("Concat").moved_slots(3) == (0, 1, 2)  # a variadic input: every slot
    assert get_schema("Where").moved_slots(3) == (1, 2)


# -- elementwise, in place, view, source ----------------------------------------------------

#: elementwise ops that need more than "as many same-dtype arrays as required inputs"
SPECIAL_ELEMENTWISE: dict[str, Callable[[], tuple[list[np.ndarray], dict[str, Any]]]] = {
    "Where": lambda: ([RNG.random(SHAPE) < 0.5, _floats(*SHAPE), _floats(*SHAPE)], {}),
    "BiasAdd": lambda: ([_floats(*SHAPE), _floats(SHAPE[-1])], {}),
    "Cast": lambda: ([_floats(*SHAPE)], {"dtype": DataType.DT_DOUBLE}),
    "BitCast": lambda: ([_floats(*SHAPE)], {"to": DataType.DT_INT32}),
    "BitShift": lambda: ([random_array(np.int32), RNG.integers(0, 8, SHAPE).astype(np.int32)],
                         {"direction": "LEFT"}),
    "FusedElementwise": lambda: ([_floats(*SHAPE), _floats(1, SHAPE[-1])], {"steps": [
        "Mul in0 0.5:float32", "Add s0 in1", "LeakyRelu s1 alpha=0.1"]}),
}


def elementwise_sample(schema: OpSchema) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Inputs and attributes to try an elementwise op on."""
    if schema.op_type in SPECIAL_ELEMENTWISE:
        return SPECIAL_ELEMENTWISE[schema.op_type]()
    dtype = accepted_dtypes(schema, schema.min_inputs)[0]
    return [random_array(dtype) for _ in range(schema.min_inputs)], {}


def _changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    if before.dtype.kind in "fc":
        return ~((before == after) | (np.isnan(before) & np.isnan(after)))
    return before != after


def _perturbed(array: np.ndarray, position: tuple[int, ...]) -> np.ndarray:
    result = array.copy()
    if result.dtype == np.bool_:
        result[position] = not result[position]
    elif result.dtype.kind in "iu":
        result[position] = result[position] + 1 if result[position] < 50 else 3
    else:
        result[position] = result[position] + 1.5 if np.isfinite(result[position]) else 0.25
    return result


def check_elementwise(schema: OpSchema, inputs: list[np.ndarray],
                      attrs: dict[str, Any]) -> Optional[str]:
    """Changing one element of an input changes only the outputs it broadcasts to."""
    base = call(schema, *inputs, **attrs)
    for index, array in enumerate(inputs):
        for flat in RNG.choice(array.size, size=min(4, array.size), replace=False):
            position = np.unravel_index(flat, array.shape)
            changed = list(inputs)
            changed[index] = _perturbed(array, position)
            marker = np.zeros(array.shape, np.bool_)
            marker[position] = True
            allowed = np.broadcast_to(marker, base.shape)
            if np.any(_changed(base, call(schema, *changed, **attrs)) & ~allowed):
                return f"input {index} at {position} changes other output elements"
    return None


#: in-place ops that are not elementwise -> (inputs, attributes)
SPECIAL_INPLACE: dict[str, Callable[[], tuple[list[Optional[np.ndarray]], dict[str, Any]]]] = {
    "FusedBatchNorm": lambda: LAYOUT_SAMPLES["FusedBatchNorm"],
    "RMSNormalization": lambda: ([_floats(*SHAPE), _positive(SHAPE[-1])], {}),
}


def check_inplace(schema: OpSchema, inputs: list[Optional[np.ndarray]],
                  attrs: dict[str, Any]) -> Optional[str]:
    """The output fits input 0's buffer: same shape and dtype."""
    first = inputs[0]
    assert first is not None
    output = call(schema, *inputs, **attrs)
    if output.shape != first.shape or output.dtype != first.dtype:
        return f"output {output.dtype}{list(output.shape)} does not fit input 0 " \
               f"{first.dtype}{list(first.shape)}"
    return None


@pytest.mark.parametrize("op_type", declaring(Trait.ELEMENTWISE))
def test_an_elementwise_op_reads_each_element_alone(op_type):
    schema = get_schema(op_type)
    assert check_elementwise(schema, *elementwise_sample(schema)) is None


@pytest.mark.parametrize("op_type", declaring(Trait.INPLACE))
def test_an_inplace_op_writes_what_fits_its_first_input(op_type):
    schema = get_schema(op_type)
    sample = (SPECIAL_INPLACE[op_type]() if op_type in SPECIAL_INPLACE
              else elementwise_sample(schema))
    assert check_inplace(schema, *sample) is None


def test_every_inplace_op_has_a_sample():
    missing = set(declaring(Trait.INPLACE)) - set(declaring(Trait.ELEMENTWISE)) \
        - set(SPECIAL_INPLACE)
    assert not missing


@pytest.mark.parametrize("op_type", declaring(Trait.VIEW))
def test_a_view_keeps_its_input_elements_in_order(op_type):
    inputs, attrs = MOVE_SAMPLES[op_type]
    output = call(get_schema(op_type), *inputs, **attrs)
    assert same(output.reshape(-1), inputs[0].reshape(-1))


@pytest.mark.parametrize("op_type", declaring(Trait.SOURCE))
def test_a_source_takes_no_inputs(op_type):
    assert get_schema(op_type).inputs == ()


def test_a_wrong_elementwise_or_inplace_declaration_is_caught():
    softmax = get_schema("Softmax")  # each output reads the whole row
    assert check_elementwise(softmax, [_floats(*SHAPE)], {}) is not None
    equal = get_schema("Equal")  # gives bool: cannot overwrite a float input
    assert check_inplace(equal, [_floats(*SHAPE), _floats(*SHAPE)], {}) is not None
