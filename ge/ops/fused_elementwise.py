"""``FusedElementwise``: a region of elementwise ops as one op.

The op's attribute ``steps`` is its program, plain data in a small language of
our own: one string per step, the last step giving the output. A step is a
registry op type followed by its operands and its non-default attributes::

    ["Mul in0 0.5:float32",     # s0 = in0 * 0.5 (a float32 literal)
     "Add s0 in1",              # s1 = s0 + in1
     "LeakyRelu s1 alpha=0.1"]  # s2 = LeakyRelu(s1), the output

An operand is ``inN`` (the op's input N), ``sN`` (the result of step N, an
earlier one), ``VALUE:DTYPE`` (a scalar literal, e.g. ``-inf:float32``,
``2:int64``) or ``_`` (an absent optional input). Attribute values are JSON.

Every step is a registry op with its own semantics: shape and dtype inference
chain through the steps' own inference, and the reference kernel calls the
steps' reference kernels in order, so a fused region gives bit for bit what the
unfused ops gave. The op types a step may be (``STEP_OPS``) are those a
generated single-pass kernel can express; ``step_refusal`` says why a node
cannot be a step. ``decompose`` and ``expand_fused_elementwise`` turn the op
back into its steps as ordinary registry nodes (what the ONNX exporter writes).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from ge.errors import AttrError
from ge.ir import DataType, Format, Graph, Node, Tensor, TensorDesc, Value
from ge.ir.tensor import num_elements
from ge.ops.core import channel_axis
from ge.ops.registry import (
    REQUIRED,
    Attr,
    AttrType,
    Cost,
    InferenceContext,
    Input,
    OpSchema,
    Trait,
    const_value,
    create_node,
    get_schema,
    normalize_attrs,
    register_op,
)

__all__ = ["FUSED_ELEMENTWISE", "STEP_OPS", "Operand", "Step", "parse_steps", "format_steps",
           "step_refusal", "compute_dtype", "literal_input", "literal_operand", "step_for_node",
           "decompose",
           "expand_fused_elementwise"]

FUSED_ELEMENTWISE = "FusedElementwise"

_UNARY = ("Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Reciprocal",
          "Floor", "Ceil", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
          "Cosh", "Asinh", "Acosh", "Atanh", "LeakyRelu", "HardSigmoid", "Elu", "Selu", "Celu",
          "ThresholdedRelu", "Softplus", "Softsign", "HardSwish", "Mish", "Gelu", "Swish",
          "IsNaN", "IsInf", "Not")
_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Equal", "Less", "Greater",
           "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")

#: the op types a step may be: what a generated single-pass kernel can express
STEP_OPS: frozenset[str] = frozenset(_UNARY + _BINARY + ("Clip", "Where"))


# -- the language -----------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """One operand of a step: an op input, an earlier step, a scalar literal, or absent."""

    kind: str  # "input", "step", "literal", "absent"
    index: int = 0
    value: Union[float, int] = 0
    dtype: str = ""

    def text(self) -> str:
        """The operand in the language (``in0``, ``s1``, ``0.5:float32``, ``_``)."""
        if self.kind == "input":
            return f"in{self.index}"
        if self.kind == "step":
            return f"s{self.index}"
        if self.kind == "literal":
            return f"{self.value!r}:{self.dtype}"
        return "_"

    def literal_array(self) -> np.ndarray:
        """A literal's value as a 0-d array of its dtype."""
        return np.asarray(self.value, dtype=DataType.parse(self.dtype).np_dtype)


@dataclass(frozen=True)
class Step:
    """One step: a registry op type, its operands, and its non-default attributes."""

    op_type: str
    operands: tuple[Operand, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    def text(self) -> str:
        """The step in the language."""
        words = [self.op_type] + [o.text() for o in self.operands]
        words += [f"{key}={json.dumps(value)}" for key, value in self.attrs]
        return " ".join(words)


def _parse_operand(token: str) -> Operand:
    if token == "_":
        return Operand("absent")
    if token[:2] == "in" and token[2:].isdigit():
        return Operand("input", int(token[2:]))
    if token[:1] == "s" and token[1:].isdigit():
        return Operand("step", int(token[1:]))
    text, _, dtype_name = token.rpartition(":")
    dtype = DataType.parse(dtype_name)
    value: Union[float, int] = float(text) if dtype.is_float else int(text)
    return Operand("literal", value=value, dtype=dtype.value)


def _parse_step(text: str, position: int) -> Step:
    words = text.split()
    if not words:
        raise ValueError(f"step {position} is empty")
    op_type, operands, attrs = words[0], [], []
    if op_type not in STEP_OPS:
        raise ValueError(f"step {position}: {op_type} is not in FusedElementwise's language")
    for word in words[1:]:
        if "=" in word:
            key, _, encoded = word.partition("=")
            attrs.append((key, json.loads(encoded)))
            continue
        operand = _parse_operand(word)
        if operand.kind == "step" and operand.index >= position:
            raise ValueError(f"step {position} reads s{operand.index}, not an earlier step")
        operands.append(operand)
    return Step(op_type, tuple(operands), tuple(attrs))


@functools.lru_cache(maxsize=1024)
def _parse_cached(texts: tuple[str, ...]) -> tuple[Step, ...]:
    if not texts:
        raise ValueError("a FusedElementwise needs at least one step")
    return tuple(_parse_step(text, position) for position, text in enumerate(texts))


def parse_steps(texts: Sequence[str]) -> tuple[Step, ...]:
    """The steps of a ``steps`` attribute; ``AttrError`` when it is not in the language."""
    try:
        return _parse_cached(tuple(texts))
    except (ValueError, TypeError) as error:  # json and number errors are ValueErrors too
        raise AttrError(f"FusedElementwise steps {list(texts)!r}: {error}") from None


def format_steps(steps: Sequence[Step]) -> list[str]:
    """The ``steps`` attribute for ``steps``."""
    return [step.text() for step in steps]


def _steps_refusal(texts: Any) -> Optional[str]:
    try:
        _parse_cached(tuple(texts))
    except (ValueError, TypeError) as error:
        return str(error)
    return None


# -- inference, kernel, cost ------------------------------------------------------------

@dataclass(frozen=True)
class _Prepared:
    schema: OpSchema
    step: Step
    attrs: dict[str, Any]


@functools.lru_cache(maxsize=1024)
def _prepare(texts: tuple[str, ...]) -> tuple[_Prepared, ...]:
    prepared = []
    for position, step in enumerate(parse_steps(texts)):
        schema = get_schema(step.op_type)
        attrs = normalize_attrs(schema, dict(step.attrs), f"step {position}")
        prepared.append(_Prepared(schema, step, attrs))
    return tuple(prepared)


def _step_contexts(ctx: InferenceContext) -> list[tuple[_Prepared, InferenceContext,
                                                      list[TensorDesc]]]:
    """Each step with its inference context and inferred outputs, in order."""
    done: list[tuple[_Prepared, InferenceContext, list[TensorDesc]]] = []
    for position, prepared in enumerate(_prepare(tuple(ctx.attr("steps")))):
        descs: list[Optional[TensorDesc]] = []
        consts: list[Optional[np.ndarray]] = []
        for operand in prepared.step.operands:
            if operand.kind == "input":
                if operand.index >= ctx.num_inputs:
                    raise ctx.fail(f"step {position} reads in{operand.index}; the op has "
                                   f"{ctx.num_inputs} inputs")
                descs.append(ctx.input(operand.index))
                consts.append(ctx.const(operand.index))
            elif operand.kind == "step":
                descs.append(done[operand.index][2][0])
                consts.append(None)
            elif operand.kind == "literal":
                array = operand.literal_array()
                descs.append(TensorDesc((), DataType.parse(array.dtype)))
                consts.append(array)
            else:
                descs.append(None)
                consts.append(None)
        step_ctx = InferenceContext(prepared.schema, f"{ctx.node_name}/s{position}", descs,
                                    prepared.attrs, consts)
        done.append((prepared, step_ctx, list(prepared.schema.infer(step_ctx))))
    return done


def _infer(ctx: InferenceContext) -> Sequence[TensorDesc]:
    return [_step_contexts(ctx)[-1][2][0]]


def _cost(ctx: InferenceContext, outputs: Sequence[TensorDesc]) -> Cost:
    flops = sum(prepared.schema.cost(step_ctx, descs).flops
                for prepared, step_ctx, descs in _step_contexts(ctx))
    moved = sum(num_elements(desc.shape) * desc.dtype.itemsize
                for desc in [*ctx.inputs, *outputs] if desc is not None)
    return Cost(flops, moved)


def _last_uses(steps: Sequence[_Prepared]) -> list[list[int]]:
    """For each step, the earlier steps whose results nothing after it reads."""
    last: dict[int, int] = {}
    for position, prepared in enumerate(steps):
        for operand in prepared.step.operands:
            if operand.kind == "step":
                last[operand.index] = position
    freed: list[list[int]] = [[] for _ in steps]
    for producer, position in last.items():
        freed[position].append(producer)
    return freed


@register_op(FUSED_ELEMENTWISE, inputs=[Input("inputs", variadic=True)],
             attrs=[Attr("steps", AttrType.STRINGS, REQUIRED, check=_steps_refusal,
                         doc="the program: one step per string (see ge.ops.fused_elementwise)")],
             infer=_infer, cost=_cost, traits=(Trait.PURE, Trait.ELEMENTWISE))
def fused_elementwise_kernel(*inputs: np.ndarray, steps: Sequence[str]) -> np.ndarray:
    """y = the last step of ``steps``, each step an elementwise registry op on the op's
    inputs, earlier steps' results and scalar literals (broadcasting as its op does).

    The reference evaluates the steps one by one through their ops' reference
    kernels; an engine may instead generate one kernel that reads each input
    once and writes y once.
    """
    program = _prepare(tuple(steps))
    results: list[Optional[np.ndarray]] = [None] * len(program)
    for position, (prepared, freed) in enumerate(zip(program, _last_uses(program))):
        arguments: list[Optional[np.ndarray]] = []
        for operand in prepared.step.operands:
            if operand.kind == "input":
                arguments.append(inputs[operand.index])
            elif operand.kind == "step":
                arguments.append(results[operand.index])
            elif operand.kind == "literal":
                arguments.append(operand.literal_array())
            else:
                arguments.append(None)
        results[position] = np.asarray(prepared.schema.kernel(*arguments, **prepared.attrs))
        for index in freed:
            results[index] = None
    answer = results[-1]
    assert answer is not None
    return answer


# -- which nodes may become steps -------------------------------------------------------

def _bias_on_last_axis(node: Node) -> bool:
    value = node.inputs[0]
    return value is not None and \
        channel_axis(node.attrs.get("data_format", Format.NHWC), value.rank) == value.rank - 1


def literal_input(node: Node, index: int) -> Optional[np.ndarray]:
    """The scalar constant at input ``index`` of ``node`` when it can be written as a
    literal: a one-element ``Const`` no longer in rank than some other array input of
    the node (so dropping its unit dimensions changes no shape)."""
    value = node.inputs[index]
    data = const_value(value)
    if data is None or data.size != 1 or not isinstance(data.reshape(-1)[0].item(),
                                                        (float, int)):
        return None
    others = [v.rank for i, v in enumerate(node.inputs)
              if i != index and v is not None and const_value(v) is None]
    if not others or data.ndim > max(others):
        return None
    return data


def compute_dtype(node: Node) -> Optional[DataType]:
    """The one float dtype among a node's tensor inputs and outputs (literals aside);
    None when there is none (bool only) or several."""
    found: set[DataType] = set()
    for index, value in enumerate(node.inputs):
        if value is not None and value.dtype.is_float and literal_input(node, index) is None:
            found.add(value.dtype)
    found.update(v.dtype for v in node.outputs if v.dtype.is_float)
    return found.pop() if len(found) == 1 else None


def _dtype_refusal(node: Node) -> Optional[str]:
    floats: set[str] = set()
    for index, value in enumerate([*node.inputs, *node.outputs]):
        if value is None or value.dtype is DataType.DT_BOOL:
            continue
        if value.dtype.is_float:
            floats.add(value.dtype.short_name)
        elif index >= len(node.inputs) or literal_input(node, index) is None:
            return f"{node.op_type} on {value.dtype.short_name} (steps take float and bool tensors)"
    if len(floats) > 1:
        return f"{node.op_type} mixes dtypes {', '.join(sorted(floats))}"
    return None


def _attrs_refusal(node: Node) -> Optional[str]:
    for key, value in node.attrs.items():
        if value is not None and not isinstance(value, (bool, int, float, str, Format)):
            return f"{node.op_type} has attribute {key} of a kind steps cannot hold"
        if isinstance(value, str) and (not value or any(c.isspace() for c in value)):
            return f"{node.op_type} has attribute {key}={value!r}"
        if isinstance(value, float) and math.isnan(value):
            return f"{node.op_type} has attribute {key}=nan"
    return None


def step_refusal(node: Node) -> Optional[str]:
    """Why ``node`` cannot become a step of a FusedElementwise (None: it can)."""
    op_type = node.op_type
    if op_type == FUSED_ELEMENTWISE:
        return None
    if op_type == "BiasAdd":
        if not _bias_on_last_axis(node):
            return "BiasAdd adds along a channel axis that is not the last"
    elif op_type not in STEP_OPS:
        return f"{op_type} is not in FusedElementwise's language"
    elif op_type == "Clip" and any(v is not None and literal_input(node, i) is None
                                   for i, v in enumerate(node.inputs) if i > 0):
        return "Clip has bounds that are not constant"
    elif op_type == "IsInf" and not (node.attrs.get("detect_negative", True)
                                     and node.attrs.get("detect_positive", True)):
        return "IsInf detects one sign only"
    if len(node.outputs) != 1:
        return f"{op_type} has {len(node.outputs)} outputs"
    return _dtype_refusal(node) or _attrs_refusal(node)


def step_for_node(node: Node, operands: Sequence[Operand]) -> Step:
    """The step computing ``node`` from ``operands`` (``BiasAdd`` on the last axis is an
    ``Add``); only attributes that differ from their defaults are kept."""
    op_type = "Add" if node.op_type == "BiasAdd" else node.op_type
    schema = get_schema(op_type)
    attrs = tuple((key, value) for key, value in sorted(node.attrs.items())
                  if key in schema.attrs and value is not None
                  and value != schema.attrs[key].default)
    return Step(op_type, tuple(operands), attrs)


def literal_operand(data: np.ndarray) -> Operand:
    """A one-element array as a literal operand."""
    item = data.reshape(-1)[0].item()
    dtype = DataType.parse(data.dtype)
    value: Union[float, int] = float(item) if dtype.is_float else int(item)
    return Operand("literal", value=value, dtype=dtype.value)


# -- back to ordinary ops ---------------------------------------------------------------

def decompose(node: Node, graph: Graph) -> Value:
    """Add ``node``'s steps to ``graph`` as ordinary registry nodes (literals as ``Const``
    nodes); return the value that equals ``node``'s output. ``node`` is left in place."""
    results: list[Value] = []
    for position, step in enumerate(parse_steps(node.attrs["steps"])):
        inputs: list[Optional[Value]] = []
        for number, operand in enumerate(step.operands):
            if operand.kind == "input":
                inputs.append(node.inputs[operand.index])
            elif operand.kind == "step":
                inputs.append(results[operand.index])
            elif operand.kind == "literal":
                name = graph.unique_name(f"{node.name}/s{position}/literal{number}")
                inputs.append(create_node("Const", [], {"value": Tensor(
                    operand.literal_array())}, name, graph).outputs[0])
            else:
                inputs.append(None)
        name = graph.unique_name(f"{node.name}/s{position}_{step.op_type.lower()}")
        results.append(create_node(step.op_type, inputs, dict(step.attrs), name,
                                   graph).outputs[0])
    return results[-1]


def expand_fused_elementwise(graph: Graph) -> int:
    """Replace every FusedElementwise node of ``graph`` by its steps; return how many."""
    count = 0
    for node in graph.topological_order():
        if node.op_type != FUSED_ELEMENTWISE:
            continue
        old, name = node.outputs[0], node.name
        new = decompose(node, graph)
        new.desc = old.desc
        if old.has_explicit_name:
            new.name = old.name
        old.replace_all_uses_with(new)
        graph.remove_node(node)
        graph.rename_node(new.producer, name)  # the output keeps its name
        count += 1
    return count
