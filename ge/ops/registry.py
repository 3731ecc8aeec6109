"""The op registry: one definition per op type.

An ``OpSchema`` declares an op once: its inputs (optional, variadic), outputs,
attributes (type, default, allowed values), traits, shape and dtype inference,
a reference NumPy kernel that *is* the op's semantics, and a cost estimate.
Op families register themselves in the modules of this package with
``register_op``; passes ask the schema for traits rather than keeping lists of
op names, and engines key their kernel tables by op type.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from ge.errors import (
    AttrError,
    DTypeError,
    ExecutionError,
    GEError,
    OpArgumentError,
    ShapeError,
    UnsupportedOpError,
)
from ge.ir import DataType, Format, Graph, Node, Tensor, TensorDesc, Value, as_value
from ge.ir.tensor import Shape, normalize_shape, num_elements

__all__ = [
    "AttrType", "Attr", "Input", "Trait", "LayoutRole", "Cost", "OpSchema", "InferenceContext",
    "REQUIRED", "register_op", "get_schema", "has_op", "all_op_types", "ops_with", "op_has_trait",
    "create_node", "infer_outputs", "run_kernel", "normalize_attrs", "check_node", "node_cost",
]


class Trait(str, enum.Enum):
    """Properties passes and planners ask of an op.

    Each is a claim about the op's reference kernel, and ``tests/ops/test_traits.py``
    checks every declaration against it on random data. The traits marked "data" come
    with a typed field of ``OpSchema`` that ``register_op`` fills.
    """

    ELEMENTWISE = "elementwise"  # output[i] depends only on inputs[i] (after broadcasting)
    COMMUTATIVE = "commutative"  # the first two inputs may be swapped
    INPLACE = "inplace"  # the output may overwrite the first input's buffer
    PURE = "pure"  # no side effects; same inputs give the same outputs
    VIEW = "view"  # the output is a re-interpretation of input 0's data (no arithmetic)
    SOURCE = "source"  # takes no inputs (Data, Const)
    INVOLUTION = "involution"  # unary: f(f(x)) = x
    IDEMPOTENT = "idempotent"  # unary: f(f(x)) = f(x)
    SELF_IDEMPOTENT = "self-idempotent"  # binary: f(x, x) = x
    NON_NEGATIVE = "non-negative"  # every element of output 0 is >= 0 or NaN (no overflow)
    FIXES_NON_NEGATIVE = "fixes-non-negative"  # unary: f(x) = x wherever x >= 0
    IDENTITY_ELEMENT = "identity-element"  # data: f(x, e) = x for e = identity_element
    LAYOUT_SENSITIVE = "layout-sensitive"  # data: 4-D data in NCHW or NHWC, switchable; layout
    MOVES_ELEMENTS = "moves-elements"  # data: output[i] = moved_inputs' element p(i), cast


class AttrType(enum.Enum):
    """The type of an attribute value."""

    INT = "int"
    FLOAT = "float"
    STRING = "string"
    BOOL = "bool"
    INTS = "ints"
    FLOATS = "floats"
    STRINGS = "strings"
    SHAPE = "shape"  # ints, where -1 or a name marks an unknown dimension
    TENSOR = "tensor"
    DTYPE = "dtype"
    FORMAT = "format"
    GRAPH = "graph"
    ANY = "any"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Attr:
    """An attribute: name, type, default (``REQUIRED`` if none), allowed values, check."""

    name: str
    type: AttrType
    default: Any = None
    choices: Optional[tuple[Any, ...]] = None
    check: Optional[Callable[[Any], Optional[str]]] = None  # returns why a value is refused
    doc: str = ""

    @property
    def required(self) -> bool:
        """True when the attribute has no default."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class Input:
    """An input: its name, and whether it may be absent or repeated (last input only)."""

    name: str
    optional: bool = False
    variadic: bool = False
    doc: str = ""


@dataclass(frozen=True)
class LayoutRole:
    """How a layout-sensitive op reads 4-D data, so the layout pass can switch its
    ``data_format`` between NCHW and NHWC: which input slots carry activations in that
    layout, which one (if any) is a convolution filter (OIHW for NCHW, HWIO for NHWC
    unless ``filter_format`` says otherwise), which attributes hold 4 values in
    ``data_format`` order, and whether the op convolves (a region worth converting)."""

    activations: tuple[int, ...] = (0,)
    filter: Optional[int] = None
    window_attrs: tuple[str, ...] = ()
    convolution: bool = False


#: an identity element: a bool, int or float constant
Scalar = Union[bool, int, float]


class Cost(NamedTuple):
    """Estimated work of one node: floating-point operations and bytes moved."""

    flops: int
    bytes: int


class InferenceContext:
    """What shape inference sees of one node: input descriptors, attributes, constants."""

    def __init__(self, schema: OpSchema, node_name: str, inputs: Sequence[Optional[TensorDesc]],
                 attrs: dict[str, Any],
                 consts: Sequence[Union[np.ndarray, Tensor, None]]) -> None:
        self.schema = schema
        self.node_name = node_name
        self.inputs = list(inputs)
        self.attrs = attrs
        self.consts: list[Union[np.ndarray, Tensor, None]] = list(consts)

    @property
    def num_inputs(self) -> int:
        """Number of input slots, absent optional ones included."""
        return len(self.inputs)

    def has_input(self, index: int) -> bool:
        """True when input ``index`` is present."""
        return index < len(self.inputs) and self.inputs[index] is not None

    def input(self, index: int) -> TensorDesc:
        """The descriptor of input ``index``; it must be present."""
        if not self.has_input(index):
            raise self.fail(f"input {self.schema.input_name(index)!r} is required")
        desc = self.inputs[index]
        assert desc is not None
        return desc

    def shape(self, index: int) -> Shape:
        """The shape of input ``index``."""
        return self.input(index).shape

    def dtype(self, index: int) -> DataType:
        """The dtype of input ``index``."""
        return self.input(index).dtype

    def const(self, index: int) -> Optional[np.ndarray]:
        """The constant value of input ``index`` when it is known at compile time."""
        found = self.consts[index] if index < len(self.consts) else None
        return found.numpy() if isinstance(found, Tensor) else found

    def const_ints(self, index: int) -> Optional[list[int]]:
        """A known constant integer input as a flat list of ints."""
        value = self.const(index)
        if value is None:
            return None
        if value.dtype.kind not in "iu":
            raise self.fail_dtype(f"input {self.schema.input_name(index)!r} must hold integers, "
                                  f"got {value.dtype}")
        return [int(v) for v in value.reshape(-1)]

    def attr(self, name: str) -> Any:
        """An attribute value (defaults already filled)."""
        return self.attrs[name]

    def fail(self, message: str) -> ShapeError:
        """A ``ShapeError`` naming this node, to raise."""
        return ShapeError(f"{self.schema.op_type} node {self.node_name!r}: {message}")

    def fail_dtype(self, message: str) -> DTypeError:
        """A ``DTypeError`` naming this node, to raise."""
        return DTypeError(f"{self.schema.op_type} node {self.node_name!r}: {message}")

    def require_dtypes(self, index: int, allowed: Sequence[DataType], what: str = "") -> None:
        """Raise unless input ``index`` has one of ``allowed`` dtypes."""
        dtype = self.dtype(index)
        if dtype not in allowed:
            names = ", ".join(d.short_name for d in allowed)
            raise self.fail_dtype(f"input {self.schema.input_name(index)!r} has dtype "
                                  f"{dtype.short_name}; {what or 'expected one of'} {names}")

    def require_same_dtype(self, *indices: int) -> DataType:
        """Raise unless the present inputs among ``indices`` share one dtype; return it."""
        present = [i for i in indices if self.has_input(i)]
        dtypes = {self.dtype(i) for i in present}
        if len(dtypes) > 1:
            listing = ", ".join(f"{self.schema.input_name(i)}={self.dtype(i).short_name}"
                                for i in present)
            raise self.fail_dtype(f"inputs must share one dtype, got {listing}")
        return self.dtype(present[0])

    def require_rank(self, index: int, ranks: Union[int, Sequence[int]]) -> None:
        """Raise unless input ``index`` has one of the given ranks."""
        allowed = [ranks] if isinstance(ranks, int) else list(ranks)
        rank = len(self.shape(index))
        if rank not in allowed:
            want = " or ".join(str(r) for r in allowed)
            raise self.fail(f"input {self.schema.input_name(index)!r} must have rank {want}, "
                            f"got shape {list(self.shape(index))}")


InferFn = Callable[[InferenceContext], Sequence[TensorDesc]]
CostFn = Callable[[InferenceContext, Sequence[TensorDesc]], Cost]
Kernel = Callable[..., Any]


def default_cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    """No arithmetic; bytes are everything read and written."""
    return Cost(0, _bytes(ctx.inputs) + _bytes(outputs))


def _bytes(descs: Sequence[Optional[TensorDesc]]) -> int:
    return sum(num_elements(d.shape) * d.dtype.itemsize for d in descs if d is not None)


def flops_per_output(per_element: int) -> CostFn:
    """A cost function: ``per_element`` operations per output element."""

    def cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
        flops = sum(num_elements(d.shape) for d in outputs) * per_element
        return Cost(flops, _bytes(ctx.inputs) + _bytes(outputs))

    return cost


@dataclass
class OpSchema:
    """The single definition of one op type."""

    op_type: str
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Attr]
    infer: InferFn
    kernel: Kernel
    cost: CostFn = default_cost
    traits: frozenset[Trait] = frozenset()
    doc: str = ""
    variadic_outputs: bool = False
    num_outputs: Optional[Callable[[InferenceContext], int]] = field(default=None, repr=False)
    #: ``Trait.IDENTITY_ELEMENT``: e with f(x, e) = x (and f(e, x) = x when commutative)
    identity_element: Optional[Scalar] = None
    #: ``Trait.LAYOUT_SENSITIVE``: how the op reads its 4-D data
    layout: Optional[LayoutRole] = None
    #: ``Trait.MOVES_ELEMENTS``: the input specs (by index; a variadic spec covers every
    #: slot from it on) whose elements the op copies, selects or reorders: output element
    #: i is element p(i) of their concatenation, converted to the output's dtype, where p
    #: depends only on shapes, attributes and the other inputs (so the kernel run on
    #: element positions gives p)
    moved_inputs: tuple[int, ...] = ()

    def has_trait(self, trait: Trait) -> bool:
        """True when the op has ``trait``."""
        return trait in self.traits

    def input_index(self, name: str) -> int:
        """The position of the input called ``name``."""
        for index, spec in enumerate(self.inputs):
            if spec.name == name:
                return index
        valid = ", ".join(repr(s.name) for s in self.inputs) or "none"
        raise OpArgumentError(f"{self.op_type} has no input {name!r}; valid inputs: {valid}")

    def input_name(self, index: int) -> str:
        """The name of input slot ``index`` (variadic slots share the last name)."""
        if index < len(self.inputs):
            return self.inputs[index].name
        if self.inputs and self.inputs[-1].variadic:
            return f"{self.inputs[-1].name}[{index - len(self.inputs) + 1}]"
        return f"#{index}"

    @property
    def min_inputs(self) -> int:
        """How many leading inputs are required."""
        required = [i for i, s in enumerate(self.inputs) if not s.optional]
        return required[-1] + 1 if required else 0

    @property
    def is_variadic(self) -> bool:
        """True when the last input may repeat."""
        return bool(self.inputs) and self.inputs[-1].variadic

    def moved_slots(self, num_inputs: int) -> tuple[int, ...]:
        """The input slots, out of ``num_inputs``, whose elements the op moves."""
        last = len(self.inputs) - 1
        return tuple(slot for slot in range(num_inputs)
                     if (slot if slot < last or not self.is_variadic else last)
                     in self.moved_inputs)


_REGISTRY: dict[str, OpSchema] = {}


def register_op(op_type: str, *, inputs: Sequence[Union[str, Input]] = (),
                outputs: Sequence[str] = ("y",), attrs: Sequence[Attr] = (),
                infer: InferFn, cost: CostFn = default_cost,
                traits: Sequence[Trait] = (Trait.PURE,), variadic_outputs: bool = False,
                num_outputs: Optional[Callable[[InferenceContext], int]] = None,
                identity_element: Optional[Scalar] = None, layout: Optional[LayoutRole] = None,
                moved_inputs: Optional[Sequence[int]] = None,
                ) -> Callable[[Kernel], Kernel]:
    """Decorator: register the decorated reference kernel as op ``op_type``.

    The kernel is called as ``kernel(*input_arrays, **attrs)`` and returns one
    array or a tuple of arrays. Its docstring becomes the op's documentation.
    ``identity_element``, ``layout`` and ``moved_inputs`` declare the data of their
    traits (which they add); a view op moves input 0 unless told otherwise.
    """

    def decorate(kernel: Kernel) -> Kernel:
        if op_type in _REGISTRY:
            raise ValueError(f"op {op_type!r} is registered twice")
        specs = tuple(Input(i) if isinstance(i, str) else i for i in inputs)
        for spec in specs[:-1]:
            if spec.variadic:
                raise ValueError(f"{op_type}: only the last input may be variadic")
        moved = tuple(moved_inputs) if moved_inputs is not None else \
            (0,) if Trait.VIEW in traits else ()
        if any(not 0 <= index < len(specs) for index in moved):
            raise ValueError(f"{op_type}: moved_inputs {moved} name inputs it does not have")
        declared = set(traits)
        declared |= {Trait.IDENTITY_ELEMENT} if identity_element is not None else set()
        declared |= {Trait.LAYOUT_SENSITIVE} if layout is not None else set()
        declared |= {Trait.MOVES_ELEMENTS} if moved else set()
        _REGISTRY[op_type] = OpSchema(
            op_type=op_type, inputs=specs, outputs=tuple(outputs),
            attrs={a.name: a for a in attrs}, infer=infer, kernel=kernel, cost=cost,
            traits=frozenset(declared), doc=(kernel.__doc__ or "").strip(),
            variadic_outputs=variadic_outputs, num_outputs=num_outputs,
            identity_element=identity_element, layout=layout, moved_inputs=moved)
        return kernel

    return decorate


def ops_with(trait: Trait) -> list[OpSchema]:
    """The schemas of every registered op with ``trait``, sorted by op type."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY) if trait in _REGISTRY[name].traits]


def op_has_trait(op_type: str, trait: Trait) -> bool:
    """True when ``op_type`` is registered and has ``trait`` (False for an unknown op)."""
    schema = _REGISTRY.get(op_type)
    return schema is not None and trait in schema.traits


def get_schema(op_type: str) -> OpSchema:
    """The schema of ``op_type``; ``UnsupportedOpError`` if no such op is registered."""
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise UnsupportedOpError(f"op type {op_type!r} is not in the registry") from None


def has_op(op_type: str) -> bool:
    """True when ``op_type`` is registered."""
    return op_type in _REGISTRY


def all_op_types() -> list[str]:
    """Every registered op type, sorted."""
    return sorted(_REGISTRY)


# -- attributes -------------------------------------------------------------------------

def normalize_attrs(schema: OpSchema, given: dict[str, Any], node_name: str) -> dict[str, Any]:
    """Check names and types of ``given``, fill defaults; return the full attribute dict."""
    where = f"{schema.op_type} node {node_name!r}"
    result: dict[str, Any] = {}
    for key in given:
        if key not in schema.attrs:
            valid = ", ".join(repr(k) for k in schema.attrs) or "none"
            raise OpArgumentError(f"{where}: unknown attribute {key!r}; valid attributes: {valid}")
    for key, spec in schema.attrs.items():
        if key in given and given[key] is not None:
            value = _coerce(spec, given[key], where)
        elif spec.required:
            raise OpArgumentError(f"{where}: attribute {key!r} ({spec.type.value}) is required")
        else:
            value = spec.default
        if value is not None:
            if spec.choices is not None and value not in spec.choices:
                raise AttrError(f"{where}: attribute {key!r} is {value!r}; "
                                f"expected one of {list(spec.choices)}")
            if spec.check is not None:
                reason = spec.check(value)
                if reason:
                    raise AttrError(f"{where}: attribute {key!r} = {value!r}: {reason}")
        result[key] = value
    return result


def _coerce(spec: Attr, value: Any, where: str) -> Any:
    try:
        return _COERCE[spec.type](value)
    except (TypeError, ValueError) as error:
        raise AttrError(f"{where}: attribute {spec.name!r} expects {spec.type.value}, "
                        f"got {value!r} ({error})") from None


def _to_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise ValueError("not a whole number")
    if isinstance(value, (str, bytes)):
        raise TypeError("a string is not an int")
    return int(value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_, int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    raise TypeError("not a bool")


def _to_float(value: Any) -> float:
    if isinstance(value, (str, bytes)):
        raise TypeError("a string is not a float")
    return float(value)


def _to_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _to_list(convert: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    def coerce(value: Any) -> list[Any]:
        if isinstance(value, np.ndarray):
            value = value.reshape(-1).tolist()
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError("not a list")
        return [convert(v) for v in value]

    return coerce


def _to_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else Tensor(value)


def _to_graph(value: Any) -> Graph:
    if not isinstance(value, Graph):
        raise TypeError("not a graph")
    return value


_COERCE: dict[AttrType, Callable[[Any], Any]] = {
    AttrType.INT: _to_int,
    AttrType.FLOAT: _to_float,
    AttrType.STRING: _to_str,
    AttrType.BOOL: _to_bool,
    AttrType.INTS: _to_list(_to_int),
    AttrType.FLOATS: _to_list(_to_float),
    AttrType.STRINGS: _to_list(_to_str),
    AttrType.SHAPE: lambda v: list(normalize_shape(v.reshape(-1).tolist()
                                                   if isinstance(v, np.ndarray) else v)),
    AttrType.TENSOR: _to_tensor,
    AttrType.DTYPE: DataType.parse,
    AttrType.FORMAT: Format.parse,
    AttrType.GRAPH: _to_graph,
    AttrType.ANY: lambda v: v,
}


# -- nodes ------------------------------------------------------------------------------

def const_value(value: Optional[Value]) -> Optional[np.ndarray]:
    """The data of a value produced by a ``Const`` node, else None."""
    if value is None or value.producer.op_type != "Const":
        return None
    tensor = value.producer.attrs.get("value")
    return tensor.numpy() if isinstance(tensor, Tensor) else None


def _context(schema: OpSchema, name: str, inputs: Sequence[Optional[Value]],
             attrs: dict[str, Any]) -> InferenceContext:
    return InferenceContext(schema, name, [None if v is None else v.desc for v in inputs],
                            attrs, [_const_tensor(v) for v in inputs])


def _const_tensor(value: Optional[Value]) -> Optional[Tensor]:
    """The tensor of a ``Const`` producer, not yet read: inference reads only what it needs."""
    if value is None or value.producer.op_type != "Const":
        return None
    tensor = value.producer.attrs.get("value")
    return tensor if isinstance(tensor, Tensor) else None


def _check_arity(schema: OpSchema, name: str, inputs: Sequence[Optional[Value]]) -> None:
    where = f"{schema.op_type} node {name!r}"
    if len(inputs) > len(schema.inputs) and not schema.is_variadic:
        raise OpArgumentError(f"{where} takes at most {len(schema.inputs)} inputs, "
                              f"got {len(inputs)}")
    for index, spec in enumerate(schema.inputs):
        if spec.optional:
            continue
        if spec.variadic:
            if len(inputs) <= index or any(v is None for v in inputs[index:]):
                raise OpArgumentError(f"{where}: input {spec.name!r} needs at least one value")
        elif index >= len(inputs) or inputs[index] is None:
            raise OpArgumentError(f"{where}: input {spec.name!r} is required")


def infer_outputs(schema: OpSchema, name: str, inputs: Sequence[Optional[Value]],
                  attrs: dict[str, Any]) -> list[TensorDesc]:
    """Run the op's shape and dtype inference for the given inputs and attributes."""
    _check_arity(schema, name, inputs)
    ctx = _context(schema, name, inputs, attrs)
    try:
        outputs = list(schema.infer(ctx))
    except (ShapeError, OpArgumentError, UnsupportedOpError):
        raise
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as error:
        raise ShapeError(f"{schema.op_type} node {name!r}: shape inference failed: "
                         f"{error}") from error
    return outputs


def run_kernel(schema: OpSchema, node_name: str, inputs: Sequence[Optional[np.ndarray]],
               attrs: dict[str, Any]) -> list[np.ndarray]:
    """The outputs of ``schema``'s reference kernel on ``inputs``, as a list of arrays.

    Kernels are NumPy code: whatever NumPy (or the kernel) raises becomes an
    ``ExecutionError`` naming the node, chained to the original; a GE error passes
    through. This is the one place where a kernel's errors are translated.
    """
    try:
        produced = schema.kernel(*inputs, **attrs)
    except GEError:
        raise
    except Exception as error:  # noqa: BLE001 - NumPy's errors become GE's, naming the node
        raise ExecutionError(f"{schema.op_type} node {node_name!r}: {error}") from error
    return [np.asarray(a) for a in (produced if isinstance(produced, tuple) else [produced])]


def create_node(op_type: str, inputs: Sequence[Any], attrs: Optional[dict[str, Any]] = None,
                name: Optional[str] = None, graph: Optional[Graph] = None) -> Node:
    """Make a node with its output descriptors inferred; add it to ``graph`` if given.

    Inputs are values, nodes (their first output) or ``None`` for an absent
    optional input. Attributes are checked and completed with their defaults.
    """
    schema = get_schema(op_type)
    label = name or (graph.unique_name(op_type.lower()) if graph is not None else op_type.lower())
    values = [None if item is None else as_value(item) for item in inputs]
    full_attrs = normalize_attrs(schema, attrs or {}, label)
    descs = infer_outputs(schema, label, values, full_attrs)
    node = Node(op_type, values, full_attrs, descs, name)
    return graph.add_op(node) if graph is not None else node


def _compatible(declared: Shape, inferred: Shape) -> bool:
    if len(declared) != len(inferred):
        return False
    return all(a == b or -1 in (a, b) or isinstance(a, str) or isinstance(b, str)
               for a, b in zip(declared, inferred))


def check_node(node: Node) -> None:
    """Raise a ``GraphError`` kin if ``node`` does not fit its op's definition."""
    schema = get_schema(node.op_type)
    attrs = normalize_attrs(schema, node.attrs, node.name or "?")
    inferred = infer_outputs(schema, node.name or "?", node.inputs, attrs)
    if len(inferred) != len(node.outputs):
        raise ShapeError(f"{node.op_type} node {node.name!r} has {len(node.outputs)} outputs; "
                         f"its op gives {len(inferred)}")
    for value, desc in zip(node.outputs, inferred):
        if value.dtype is not desc.dtype:
            raise DTypeError(f"{node.op_type} node {node.name!r}: output {value.name!r} "
                             f"is declared {value.dtype.short_name}, "
                             f"the op gives {desc.dtype.short_name}")
        if not _compatible(value.shape, desc.shape):
            raise ShapeError(f"{node.op_type} node {node.name!r}: output {value.name!r} "
                             f"is declared {list(value.shape)}, the op gives {list(desc.shape)}")


def node_cost(node: Node) -> Cost:
    """The estimated cost of one node of a graph."""
    schema = get_schema(node.op_type)
    ctx = _context(schema, node.name or "?", node.inputs, node.attrs)
    return schema.cost(ctx, [v.desc for v in node.outputs])
