"""The PyTorch frontend: an ``nn.Module`` through ``torch.export`` into registry ops.

``parse_pytorch(module, example_inputs, dynamic_batch=False)`` exports the module with
``torch.export`` (in eval mode, under ``inference_mode``-free tracing), lowers it to core
ATen (``run_decompositions``), and translates each ATen call into registry ops:
parameters, buffers and lifted constants become ``Const`` nodes, user inputs ``Data``
nodes (with a dynamic batch dimension when ``dynamic_batch``). Data stays channels-first
(``NCHW``) as PyTorch holds it; the layout pass decides what runs NHWC.

An ATen op with no translation is reported together with every other such op of the
model, each with the source line ``torch.export`` recorded, in one
``UnsupportedOpError``.

``torch_backend`` makes GE a ``torch.compile`` backend (registered as ``"ge"`` through
the ``torch_dynamo_backends`` entry point).

Translated today (``TRANSLATED``): convolution (and transposed), batch norm in eval mode,
max and average pooling, mean over axes, addmm/mm/bmm, elementwise arithmetic,
relu/hardtanh/sigmoid/tanh/gelu, softmax, layer norm, embedding, view/reshape/permute/
unsqueeze/expand/clone/alias and dtype casts.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import ModelFormatError, UnsupportedOpError
from ge.ir import DataType, Format, Graph, Tensor, Value
from ge.ops import create_node

__all__ = ["parse_pytorch", "torch_backend", "TRANSLATED", "translated_ops"]

Translate = Callable[["_Context", Any], Any]


class _Context:
    """The graph being built and the GE value of each FX node."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.values: dict[str, Any] = {}  # FX node name -> Value, or a tuple of them

    def value(self, argument: Any) -> Value:
        """The GE value of an FX argument (a node, or a Python number as a constant)."""
        if hasattr(argument, "name") and hasattr(argument, "op"):
            found = self.values[argument.name]
            assert not isinstance(found, tuple), argument.name
            return found
        return self.constant(np.asarray(argument, dtype=np.float32))

    def constant(self, array: np.ndarray, name: Optional[str] = None) -> Value:
        # np.array, not np.ascontiguousarray: that makes a 0-d array 1-d
        node = create_node("Const", [], {"value": Tensor(np.array(array, order="C"))},
                           self.graph.unique_name(name or "const"), self.graph)
        return node.outputs[0]

    def ints(self, values: Sequence[int], name: str) -> Value:
        return self.constant(np.asarray(list(values), dtype=np.int64), name)

    def op(self, op_type: str, inputs: Sequence[Any], attrs: Optional[dict[str, Any]] = None,
           name: str = "") -> Value:
        node = create_node(op_type, list(inputs), attrs or {},
                           self.graph.unique_name(name or op_type.lower()), self.graph)
        return node.outputs[0]


def _shape_list(sizes: Sequence[Any]) -> list[int]:
    """Sizes as ints, a symbolic size (the dynamic batch) as -1."""
    return [int(s) if isinstance(s, int) else -1 for s in sizes]


def _pair(values: Sequence[int]) -> list[int]:
    values = list(values)
    return values * 2 if len(values) == 1 else values


def _convolution(ctx: _Context, node: Any) -> Value:
    """1-D (as 2-D with a unit height), 2-D and 3-D convolutions, transposed or not."""
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    rank = len(weight.meta["val"].shape) - 2
    if rank not in (1, 2, 3):
        raise UnsupportedOpError(f"{node.name}: a {rank}-D convolution (1-D to 3-D are "
                                 f"translated)")
    data, kernel = ctx.value(x), ctx.value(weight)
    stride, padding, dilation, output_padding = (
        [int(v) for v in values] for values in (stride, padding, dilation, output_padding))
    if rank == 1:  # N, C, W -> N, C, 1, W
        data = ctx.op("Unsqueeze", [data, ctx.ints([2], "axes")], {}, f"{node.name}_2d")
        kernel = ctx.op("Unsqueeze", [kernel, ctx.ints([2], "axes")], {},
                        f"{node.name}_filter_2d")
        stride, padding, dilation, output_padding = (
            [1, *stride], [0, *padding], [1, *dilation], [0, *output_padding])
    inputs = [data, kernel, None if bias is None else ctx.value(bias)]
    spatial = 3 if rank == 3 else 2

    def full(values: Sequence[int]) -> list[int]:
        values = [int(v) for v in values]
        return values * spatial if len(values) == 1 else values

    pads = full(padding)
    if transposed:
        out = ctx.op("ConvTranspose", inputs, {
            "strides": full(stride), "dilations": full(dilation), "group": int(groups),
            "pads": pads + pads, "output_padding": full(output_padding)}, node.name)
    elif rank == 3:
        out = ctx.op("Conv3D", inputs, {
            "strides": full(stride), "dilations": full(dilation), "groups": int(groups),
            "padding": "EXPLICIT", "pads": [p for p in pads for _ in (0, 1)],
            "data_format": "NCDHW", "filter_format": "OIDHW"}, node.name)
    else:
        out = ctx.op("Conv2D", inputs, {
            "strides": full(stride), "dilations": full(dilation), "groups": int(groups),
            "padding": "EXPLICIT", "pads": [p for p in pads for _ in (0, 1)],
            "data_format": Format.NCHW, "filter_format": "OIHW"}, node.name)
    if rank == 1:
        out = ctx.op("Squeeze", [out, ctx.ints([2], "axes")], {}, f"{node.name}_1d")
    return out


def _batch_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    x, weight, bias, mean, var, _momentum, eps = node.args
    channels = int(node.args[0].meta["val"].shape[1])
    ones, zeros = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    scale = ctx.value(weight) if weight is not None else ctx.constant(ones)
    offset = ctx.value(bias) if bias is not None else ctx.constant(zeros)
    out = ctx.op("FusedBatchNorm", [ctx.value(x), scale, offset, ctx.value(mean),
                                    ctx.value(var)],
                 {"epsilon": float(eps), "data_format": Format.NCHW}, node.name)
    return (out,)  # the saved mean and invstd of training are never read in eval mode


def _max_pool(ctx: _Context, node: Any) -> tuple[Value, ...]:
    args = list(node.args) + [None] * (6 - len(node.args))
    x, kernel, stride, padding, dilation, ceil_mode = args[:6]
    pad_h, pad_w = _pair(padding or [0])
    out = ctx.op("MaxPool", [ctx.value(x)], {
        "ksize": _pair(kernel), "strides": _pair(stride or kernel),
        "padding": "EXPLICIT", "pads": [pad_h, pad_h, pad_w, pad_w],
        "dilations": _pair(dilation or [1]), "ceil_mode": bool(ceil_mode),
        "data_format": Format.NCHW}, node.name)
    return (out,)  # the indices are not translated: a consumer of them is refused


def _avg_pool(ctx: _Context, node: Any) -> Value:
    args = list(node.args) + [None] * (7 - len(node.args))
    x, kernel, stride, padding, ceil_mode, count_include_pad, divisor = args[:7]
    if divisor is not None:
        raise UnsupportedOpError(f"{node.name}: avg_pool2d with divisor_override")
    pad_h, pad_w = _pair(padding or [0])
    return ctx.op("AvgPool", [ctx.value(x)], {
        "ksize": _pair(kernel), "strides": _pair(stride or kernel), "padding": "EXPLICIT",
        "pads": [pad_h, pad_h, pad_w, pad_w], "ceil_mode": bool(ceil_mode),
        "count_include_pad": True if count_include_pad is None else bool(count_include_pad),
        "data_format": Format.NCHW}, node.name)


def _mean(ctx: _Context, node: Any) -> Value:
    x = node.args[0]
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if not dims:  # None or []: every axis
        dims = list(range(len(x.meta["val"].shape)))
    keepdim = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("keepdim"))
    return ctx.op("ReduceMean", [ctx.value(x), ctx.ints(dims, "axes")],
                  {"keepdims": int(keepdim)}, node.name)


def _addmm(ctx: _Context, node: Any) -> Value:
    bias, a, b = node.args[:3]
    beta, alpha = float(node.kwargs.get("beta", 1.0)), float(node.kwargs.get("alpha", 1.0))
    return ctx.op("Gemm", [ctx.value(a), ctx.value(b), ctx.value(bias)],
                  {"alpha": alpha, "beta": beta}, node.name)


def _matmul(ctx: _Context, node: Any) -> Value:
    return ctx.op("MatMul", [ctx.value(node.args[0]), ctx.value(node.args[1])], {}, node.name)


def _binary(op_type: str) -> Translate:
    """add/sub/mul/div.Tensor: both operands (and ``alpha``) in the dtype ATen computes in,
    so that ``int_tensor / 2`` divides exactly and ``mask * x`` multiplies floats."""

    def translate(ctx: _Context, node: Any) -> Value:
        from ge.frontends.torch_aten import _operand, _out_dtype

        out = _out_dtype(node)
        a, b = node.args[:2]
        alpha = node.kwargs.get("alpha", 1)
        second = _operand(ctx, b, out)
        if alpha != 1:
            second = ctx.op("Mul", [second, _operand(ctx, alpha, out)])
        return ctx.op(op_type, [_operand(ctx, a, out), second], {}, node.name)

    return translate


def _unary(op_type: str) -> Translate:
    """The op on its input cast to the output dtype (the sigmoid of an int64 is float)."""

    def translate(ctx: _Context, node: Any) -> Value:
        from ge.frontends.torch_aten import _operand, _out_dtype

        return ctx.op(op_type, [_operand(ctx, node.args[0], _out_dtype(node))], {}, node.name)

    return translate


def _hardtanh(ctx: _Context, node: Any) -> Value:
    low = float(node.args[1]) if len(node.args) > 1 else -1.0
    high = float(node.args[2]) if len(node.args) > 2 else 1.0
    return ctx.op("Clip", [ctx.value(node.args[0]), ctx.value(low), ctx.value(high)], {},
                  node.name)


def _gelu(ctx: _Context, node: Any) -> Value:
    return ctx.op("Gelu", [ctx.value(node.args[0])],
                  {"approximate": str(node.kwargs.get("approximate", "none"))}, node.name)


def _softmax(ctx: _Context, node: Any) -> Value:
    return ctx.op("Softmax", [ctx.value(node.args[0])], {"axis": int(node.args[1])}, node.name)


def _layer_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    x, shape, weight, bias, eps = node.args
    axis = len(node.args[0].meta["val"].shape) - len(shape)
    size = int(np.prod(shape))
    scale = ctx.value(weight) if weight is not None else ctx.constant(
        np.ones(shape, np.float32))
    offset = ctx.value(bias) if bias is not None else ctx.constant(np.zeros(size, np.float32))
    out = ctx.op("LayerNormalization", [ctx.value(x), scale, offset],
                 {"axis": axis, "epsilon": float(eps)}, node.name)
    return (out,)


def _embedding(ctx: _Context, node: Any) -> Value:
    weight, indices = node.args[:2]
    return ctx.op("Gather", [ctx.value(weight), ctx.value(indices)], {"axis": 0}, node.name)


def _input_shape(node: Any) -> tuple[Any, ...]:
    """The (fake) shape torch.export recorded for a node's first argument."""
    value = node.args[0].meta.get("val")
    return tuple(getattr(value, "shape", ()))


def _same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are the same: equal ints, or the same symbolic expression (an FX
    node computing a size stands for the value torch.export recorded for it)."""
    a, b = (getattr(x, "meta", {}).get("val", x) for x in (a, b))
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return str(a) == str(b)


def _view(ctx: _Context, node: Any) -> Value:
    # a symbolic size equal to the input's own size on the same axis is Reshape's 0
    # ("keep the input's size"); one other unknown size is the one the element count decides
    given = list(node.args[1])
    source = _input_shape(node)
    sizes: list[int] = []
    unknown = 0
    for axis, size in enumerate(given):
        if isinstance(size, int) and size != -1:
            sizes.append(size)
        elif not isinstance(size, int) and axis < len(source) and _same_size(size, source[axis]):
            sizes.append(0)
        else:
            sizes.append(-1)
            unknown += 1
    if unknown <= 1:
        shape = ctx.ints(sizes, "shape")
    else:  # several sizes only known at run time: the shape is computed then
        parts = [_size_value(ctx, size) for size in given]
        shape = ctx.op("Concat", parts, {"axis": 0}, f"{node.name}_shape")
    return ctx.op("Reshape", [ctx.value(node.args[0]), shape], {}, node.name)


def _permute(ctx: _Context, node: Any) -> Value:
    return ctx.op("Transpose", [ctx.value(node.args[0])],
                  {"perm": [int(p) for p in node.args[1]]}, node.name)


def _unsqueeze(ctx: _Context, node: Any) -> Value:
    return ctx.op("Unsqueeze", [ctx.value(node.args[0]), ctx.ints([int(node.args[1])], "axes")],
                  {}, node.name)


def _expand(ctx: _Context, node: Any) -> Value:
    # ONNX's Expand broadcasts: a -1 (keep) becomes 1, which keeps the input's own size
    # there; so does a symbolic size the input already has on that axis (counted from the
    # right, as broadcasting aligns them)
    given = list(node.args[1])
    source = _input_shape(node)
    offset = len(given) - len(source)
    sizes = []
    for axis, size in enumerate(given):
        if isinstance(size, int):
            sizes.append(1 if size == -1 else size)
        elif axis >= offset and _same_size(size, source[axis - offset]):
            sizes.append(1)
        else:
            raise UnsupportedOpError(f"{node.name}: an expand to the symbolic size {size}")
    return ctx.op("Expand", [ctx.value(node.args[0]), ctx.ints(sizes, "shape")], {}, node.name)


def _same(ctx: _Context, node: Any) -> Value:
    return ctx.value(node.args[0])


def _slice(ctx: _Context, node: Any) -> Value:
    args = list(node.args) + [None] * (5 - len(node.args))
    x, dim, start, end, step = args[:5]
    start = 0 if start is None else start
    source = _input_shape(node)
    if not isinstance(start, int):
        raise UnsupportedOpError(f"{node.name}: a slice starting at a symbolic size")
    axis = int(dim or 0) % max(len(source), 1)
    if end is None or (not isinstance(end, int) and axis < len(source)
                       and _same_size(end, source[axis])):
        ends = ctx.ints([1 << 62], "ends")  # to the end of the axis
    elif isinstance(end, int):
        ends = ctx.ints([min(end, 1 << 62)], "ends")
    else:  # a symbolic end, computed at run time
        ends = _size_value(ctx, end)
    return ctx.op("Slice", [ctx.value(x), ctx.ints([start], "starts"), ends,
                            ctx.ints([int(dim or 0)], "axes"), ctx.ints([int(step or 1)], "steps")],
                  {}, node.name)


class _Size:
    """A size torch.export left symbolic, with the GE value that computes it at run time (a
    1-element int64 tensor). Shape arguments mostly take it as unknown (Reshape's 0 or
    -1); an op that needs its value (a slice ending at it) reads ``value``. Values no op
    reads are removed by the compiler's dead-code elimination."""

    def __init__(self, value: Value) -> None:
        self.value = value


def _size_value(ctx: _Context, size: Any) -> Value:
    """A size (an int, or an FX node of a symbolic size) as a 1-element int64 value."""
    if isinstance(size, int):
        return ctx.ints([size], "size")
    found = ctx.values.get(getattr(size, "name", ""))
    if not isinstance(found, _Size):
        raise UnsupportedOpError(f"the size {size} is not one GE can compute")
    return found.value


def _symbolic_size(ctx: _Context, node: Any) -> Any:
    """``sym_size(x, axis)``: the axis' size, read off x's shape at run time."""
    shape = ctx.op("Shape", [ctx.value(node.args[0])], {}, f"{node.name}_shape")
    axis = int(node.args[1])
    return _Size(ctx.op("Slice", [shape, ctx.ints([axis], "starts"), ctx.ints([axis + 1], "ends"),
                                  ctx.ints([0], "axes")], {}, node.name))


def _size_arithmetic(op_type: str) -> Translate:
    """Arithmetic on sizes (the batch times a length, a length halved): sizes are never
    negative, so floor division is Div's truncation."""

    def translate(ctx: _Context, node: Any) -> Any:
        left, right = (_size_value(ctx, argument) for argument in node.args[:2])
        return _Size(ctx.op(op_type, [left, right], {}, node.name))

    return translate


def _to_copy(ctx: _Context, node: Any) -> Value:
    dtype = node.kwargs.get("dtype")
    if dtype is None:
        return ctx.value(node.args[0])
    target = DataType.parse(str(dtype).replace("torch.", ""))
    return ctx.op("Cast", [ctx.value(node.args[0])], {"dtype": target}, node.name)


def _translations() -> dict[Any, Translate]:
    """Every ATen overload translated: the zoo's here, the rest in ``torch_aten``."""
    import torch

    from ge.frontends import torch_aten

    aten = torch.ops.aten
    return {**torch_aten.translations(), **_own_translations(aten)}


def _own_translations(aten: Any) -> dict[Any, Translate]:
    return {
        aten.convolution.default: _convolution,
        aten._native_batch_norm_legit_no_training.default: _batch_norm,
        aten.max_pool2d_with_indices.default: _max_pool,
        aten.avg_pool2d.default: _avg_pool,
        aten.mean.dim: _mean,
        aten.addmm.default: _addmm,
        aten.mm.default: _matmul,
        aten.bmm.default: _matmul,
        aten.add.Tensor: _binary("Add"),
        aten.sub.Tensor: _binary("Sub"),
        aten.mul.Tensor: _binary("Mul"),
        aten.div.Tensor: _binary("Div"),
        aten.relu.default: _unary("Relu"),
        aten.sigmoid.default: _unary("Sigmoid"),
        aten.tanh.default: _unary("Tanh"),
        aten.hardtanh.default: _hardtanh,
        aten.gelu.default: _gelu,
        aten._softmax.default: _softmax,
        aten.native_layer_norm.default: _layer_norm,
        aten.embedding.default: _embedding,
        aten.view.default: _view,
        aten.reshape.default: _view,
        aten._unsafe_view.default: _view,
        aten.permute.default: _permute,
        aten.unsqueeze.default: _unsqueeze,
        aten.expand.default: _expand,
        aten.clone.default: _same,
        aten.alias.default: _same,
        aten._to_copy.default: _to_copy,
        aten.sym_size.int: _symbolic_size,
        aten.slice.Tensor: _slice,
        # arithmetic on sizes (the dynamic batch times a length): symbolic too
        operator.mul: _size_arithmetic("Mul"),
        operator.add: _size_arithmetic("Add"),
        operator.sub: _size_arithmetic("Sub"),
        operator.floordiv: _size_arithmetic("Div"),
    }


#: the core ATen overloads translated in this module (the zoo's); ``translated_ops()``
#: lists them with ``torch_aten``'s
TRANSLATED = ("convolution.default", "_native_batch_norm_legit_no_training.default",
              "max_pool2d_with_indices.default", "avg_pool2d.default", "mean.dim",
              "addmm.default", "mm.default", "bmm.default", "add.Tensor", "sub.Tensor",
              "mul.Tensor", "div.Tensor", "relu.default", "sigmoid.default", "tanh.default",
              "hardtanh.default", "gelu.default", "_softmax.default",
              "native_layer_norm.default", "embedding.default", "view.default",
              "reshape.default", "_unsafe_view.default", "permute.default",
              "unsqueeze.default", "expand.default", "clone.default", "alias.default",
              "_to_copy.default", "sym_size.int", "slice.Tensor")


def translated_ops() -> list[str]:
    """Every ATen overload the PyTorch frontend translates, by name."""
    from ge.frontends import torch_aten

    return sorted(set(TRANSLATED) | set(torch_aten.TRANSLATED))


#: calls that compute nothing GE needs (shape and metadata checks of torch.export)
_IGNORED = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size")


def parse_pytorch(module: Any, example_inputs: Sequence[Any], dynamic_batch: bool = False,
                  name: Optional[str] = None) -> Graph:
    """Translate ``module`` (an ``nn.Module``), traced on ``example_inputs`` (tensors or
    arrays), into a ``ge.Graph``; the first axis of every input is dynamic when
    ``dynamic_batch``."""
    try:
        import torch
    except ImportError:
        raise ModelFormatError("parse_pytorch needs PyTorch (pip install torch)") from None
    if not isinstance(module, torch.nn.Module):
        raise ModelFormatError(f"parse_pytorch takes an nn.Module, got {type(module).__name__}")
    tensors = tuple(torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
                    for x in example_inputs)
    dynamic = None
    if dynamic_batch:
        batch = torch.export.Dim("batch", min=1)
        dynamic = tuple({0: batch} for _ in tensors)
        # torch.export takes a size of 1 for a constant (it specializes 0 and 1): trace
        # an example of batch 1 at batch 2, each sample twice
        tensors = tuple(torch.cat([x, x]) if x.dim() and x.shape[0] == 1 else x
                        for x in tensors)
    return _export_and_translate(module.eval(), tensors, dynamic, name or type(module).__name__)


def _export_and_translate(module: Any, tensors: Sequence[Any], dynamic: Any,
                          name: str) -> Graph:
    """``torch.export`` (``dynamic``: its ``dynamic_shapes``), lowered to core ATen and
    translated."""
    import torch

    try:
        exported = torch.export.export(module, tuple(tensors), dynamic_shapes=dynamic)
    except Exception as error:  # noqa: BLE001 - torch.export's errors are many
        raise ModelFormatError(f"torch.export could not trace the module: {error}") from error
    _drop_dynamo_guards(exported)
    from ge.frontends import torch_aten

    exported = exported.run_decompositions(torch_aten.decomposition_table())
    return _translate(exported, name)


def _drop_dynamo_guards(exported: Any) -> None:
    """Drop the input guards torch.export kept in terms of a dynamo frame (``L[...]``),
    which it records when the exported module calls a graph dynamo traced: decomposing
    re-traces the program with its guards as code, and that code cannot name the frame.
    They check sizes the example inputs already have."""
    guards = getattr(exported, "_guards_code", None)
    if guards:
        exported._guards_code = [code for code in guards if "L[" not in code]


def _translate(exported: Any, name: str) -> Graph:
    import torch

    graph = Graph(name)
    ctx = _Context(graph)
    translations = _translations()
    fx_graph = exported.graph_module.graph
    missing: dict[str, str] = {}
    for node in fx_graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            target = node.target
            if target not in translations and not any(
                    getattr(target, "__name__", str(target)).startswith(skip)
                    for skip in _IGNORED):
                where = node.meta.get("stack_trace", "").strip().splitlines()
                missing.setdefault(str(target), where[-1].strip() if where else "")
    if missing:
        listed = "; ".join(f"{op} (at {line})" if line else op for op, line in missing.items())
        raise UnsupportedOpError(f"model {name!r} uses ATen ops GE does not translate: "
                                 f"{listed}")
    lifted = _lifted_values(exported)
    user_inputs = [spec.arg.name for spec in exported.graph_signature.input_specs
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    outputs: list[Value] = []
    for node in fx_graph.nodes:
        if node.op == "placeholder":
            if node.name in lifted:
                ctx.values[node.name] = ctx.constant(lifted[node.name], node.name)
            elif node.name in user_inputs:
                fake = node.meta["val"]
                ctx.values[node.name] = create_node(
                    "Data", [], {"shape": _shape_list(fake.shape),
                                 "dtype": DataType.parse(str(fake.dtype).replace("torch.", ""))},
                    node.name, graph).outputs[0]
        elif node.op == "call_function":
            if node.target is operator.getitem:
                source = ctx.values[node.args[0].name]
                index = int(node.args[1])
                if not isinstance(source, tuple) or index >= len(source):
                    raise UnsupportedOpError(f"{node.name}: output {index} of "
                                             f"{node.args[0].name} is not translated")
                ctx.values[node.name] = source[index]
            elif node.target in translations:
                ctx.values[node.name] = translations[node.target](ctx, node)
        elif node.op == "output":
            for item in node.args[0]:
                if not (hasattr(item, "name") and hasattr(item, "op")):
                    raise ModelFormatError(f"model {name!r} returns {item!r}, not a tensor: "
                                           f"GE graphs output tensors only")
                outputs.append(ctx.value(item))
    if not outputs:
        raise ModelFormatError(f"model {name!r} returns no tensors")
    graph.set_outputs(outputs)
    return graph


def _lifted_values(exported: Any) -> dict[str, np.ndarray]:
    """Parameters, buffers and lifted constants by placeholder name, as arrays."""
    import torch

    kinds = torch.export.graph_signature.InputKind
    found = {}
    for spec in exported.graph_signature.input_specs:
        if spec.kind in (kinds.PARAMETER, kinds.BUFFER):
            tensor = exported.state_dict.get(spec.target)
            if tensor is None:
                tensor = exported.constants[spec.target]
        elif spec.kind == kinds.CONSTANT_TENSOR:
            tensor = exported.constants[spec.target]
        else:
            continue
        found[spec.arg.name] = tensor.detach().cpu().contiguous().numpy().copy()
    return found


#: what ``torch_backend`` has been handed: FX graphs (and their ATen-level call nodes) that
#: GE translated and ran, and those it handed back to PyTorch to run as traced
backend_stats = {"graphs_ge": 0, "graphs_fallback": 0, "nodes_ge": 0, "nodes_fallback": 0}


def _count(graph_module: Any, by_ge: bool) -> None:
    calls = sum(1 for node in graph_module.graph.nodes
                if node.op in ("call_function", "call_method", "call_module"))
    key = "ge" if by_ge else "fallback"
    backend_stats[f"graphs_{key}"] += 1
    backend_stats[f"nodes_{key}"] += calls


def torch_backend(graph_module: Any, example_inputs: Sequence[Any], **options: Any) -> Any:
    """GE as a ``torch.compile`` backend: the FX graph dynamo hands over, exported and
    translated as ``parse_pytorch`` does, compiled by GE (``options``: ``opt_level``,
    ``engines``, ``threads``) and run by a GE session; returns the callable dynamo runs
    in the graph's place.

    The parameters dynamo passes as inputs become constants of the GE graph (so that
    engines pack them once); a call whose parameters are other tensors, or were changed
    in place since (their version counter moved), runs as PyTorch traced it. So does a
    graph GE cannot translate.

    Dynamic shapes (``torch.compile(..., dynamic=True)``, or dynamo marking a size
    dynamic after it changed): the sizes dynamo left symbolic stay unknown (-1) in the GE
    graph, which GE plans per concrete shape at run time, so one dynamo graph serves every
    batch size. The symbolic sizes dynamo passes as integer inputs are read off the
    tensors. Where a symbolic size reaches an op GE cannot keep general (a view mixing two
    unknown sizes, say), GE compiles one graph per concrete input shape instead, still
    without a recompile in dynamo. ``backend_stats`` counts the graphs and nodes GE ran
    and those it handed back."""
    import torch

    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    tensors = {i for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)}
    found = _symbolic_inputs(placeholders, example_inputs, tensors)
    if found is None:
        _count(graph_module, False)
        return graph_module.forward
    sizes: dict[int, tuple[int, int]] = found
    frozen = {i: x for i, x in enumerate(example_inputs)
              if i in tensors and _is_module_state(placeholders[i], x)}
    versions = {i: x._version for i, x in frozen.items()}
    scalars = {i: x.detach().clone() for i, x in frozen.items() if x.dim() == 0}
    fed = [i for i in sorted(tensors) if i not in frozen]
    traced = _prepared(graph_module, {placeholders[i].name: x for i, x in scalars.items()})

    class _WithParameters(torch.nn.Module):
        """The graph with its parameters held as buffers (what torch.export lifts into
        constants), the other tensors given and the symbolic sizes read off them."""

        def __init__(self) -> None:
            super().__init__()
            for index, tensor in frozen.items():
                self.register_buffer(f"parameter_{index}", tensor.detach())

        def forward(self, *given: Any) -> Any:
            full: list[Any] = [None] * len(example_inputs)
            for position, tensor in zip(fed, given):
                full[position] = tensor
            for index in frozen:
                full[index] = getattr(self, f"parameter_{index}")
            for index, (source, axis) in sizes.items():
                full[index] = full[source].size(axis)
            return traced(*full)

    dynamic = _dynamic_axes(placeholders, fed)
    compile_options = {key: options[key] for key in ("opt_level", "engines", "threads")
                       if key in options}
    import ge  # the backend compiles and runs through the public API, as a user would

    def session_for(tensors: Sequence[Any], axes: Optional[list[dict[int, Any]]]) -> Any:
        with torch.no_grad():
            # the wrapper takes its tensors as one varargs tuple, and so do their shapes
            graph = _export_and_translate(_WithParameters(), tensors,
                                          (tuple(axes),) if axes else None, "dynamo_graph")
        session = ge.Session(ge.compile(graph, **compile_options))
        names = [value.producer.name for value in graph.inputs]
        return session, names, [spec.name for spec in session.executable.outputs]

    # Translation waits for the first call: torch.export run inside dynamo's compile
    # would leave its own guards in the frame dynamo is compiling.
    state: dict[str, Any] = {}
    by_shape: dict[tuple[tuple[int, ...], ...], Any] = {}

    def prepare(given: Sequence[Any]) -> None:
        try:
            state["general"] = session_for(given, dynamic if any(dynamic) else None)
        except (UnsupportedOpError, ModelFormatError):
            state["general"] = None
            if not any(dynamic):
                state["fallback"] = True
        if state.get("general") is None and not state.get("fallback"):
            try:  # one GE graph per concrete shape
                by_shape[tuple(tuple(x.shape) for x in given)] = session_for(given, None)
            except (UnsupportedOpError, ModelFormatError):
                state["fallback"] = True
        _count(graph_module, not state.get("fallback"))

    def executables() -> int:
        """How many GE executables serve this graph (one when its shapes stay general)."""
        return int(state.get("general") is not None) + len(by_shape)

    def run(*args: Any) -> Any:
        if any(args[i] is not tensor or tensor._version != versions[i]
               for i, tensor in frozen.items() if i not in scalars) or \
                any(not torch.equal(args[i], value) for i, value in scalars.items()):
            return graph_module.forward(*args)
        given = [args[i] for i in fed]
        if not state:
            prepare(given)
        if state.get("fallback"):
            return graph_module.forward(*args)
        session = state["general"]
        if session is None:
            key = tuple(tuple(x.shape) for x in given)
            session = by_shape.get(key)
            if session is None:
                session = by_shape[key] = session_for(given, None)
        runner, names, outputs = session
        results = runner.run({name: x.detach().cpu().numpy() for name, x in zip(names, given)})
        return tuple(torch.from_numpy(np.ascontiguousarray(results[name])) for name in outputs)

    run.ge_executables = executables  # type: ignore[attr-defined]
    return run


def _is_module_state(placeholder: Any, tensor: Any) -> bool:
    """Whether a graph input is the module's own state (a parameter, a buffer, or an
    attribute such as batch norm's momentum that dynamo passes as a 0-d tensor under
    dynamic shapes) rather than an input of the call."""
    import torch

    if isinstance(tensor, torch.nn.Parameter):
        return True
    source = getattr(placeholder.meta.get("grapharg"), "source", None)
    named = getattr(source, "name", "")
    named = named() if callable(named) else named
    return isinstance(named, str) and named.startswith("L['self']")


def _prepared(graph_module: Any, scalars: dict[str, Any]) -> Any:
    """The graph module made exportable; dynamo's own module stays as it is.

    Under dynamic shapes dynamo passes module attributes such as batch norm's ``eps`` as
    0-d tensors and reads them with ``.item()``, which ``torch.export`` cannot trace (a
    data-dependent value): each such read becomes the number itself (``scalars``, by
    placeholder name; a changed value hands the call back to PyTorch). Calls nothing uses
    are removed."""
    import copy
    import warnings

    import torch

    with warnings.catch_warnings():  # torch's own pytree deprecation, raised while copying
        warnings.simplefilter("ignore", FutureWarning)
        graph = copy.deepcopy(graph_module.graph)
    for node in list(graph.nodes):
        if node.op == "call_method" and node.target == "item" and \
                getattr(node.args[0], "name", None) in scalars:
            number = scalars[node.args[0].name].item()

            def swap(arg: Any, read: Any = node, value: Any = number) -> Any:
                return value if arg is read else arg

            for user in list(node.users):
                user.args = torch.fx.node.map_arg(user.args, swap)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, swap)
    for node in reversed(list(graph.nodes)):
        if node.op in ("call_function", "call_method") and not node.users:
            graph.erase_node(node)
    return torch.fx.GraphModule(graph_module, graph)


def _symbolic_inputs(placeholders: Sequence[Any], example_inputs: Sequence[Any],
                     tensors: set[int]) -> Optional[dict[int, tuple[int, int]]]:
    """For each integer input dynamo passes (a symbolic size), a tensor input and axis it
    can be read from; None when one cannot be found (or an input is neither)."""
    import torch

    found: dict[int, tuple[int, int]] = {}
    for index, example in enumerate(example_inputs):
        if index in tensors:
            continue
        if not isinstance(example, (int, torch.SymInt)):
            return None
        symbol = str(placeholders[index].meta.get("example_value", example))
        for source in sorted(tensors):
            value = placeholders[source].meta.get("example_value")
            shape = getattr(value, "shape", ())
            axis = next((a for a, size in enumerate(shape) if str(size) == symbol), None)
            if axis is not None:
                found[index] = (source, axis)
                break
        else:
            return None
    return found


def _dynamic_axes(placeholders: Sequence[Any], fed: Sequence[int]) -> list[dict[int, Any]]:
    """The axes of each fed tensor dynamo left symbolic, as torch.export's dynamic shapes."""
    import torch

    axes = []
    for index in fed:
        value = placeholders[index].meta.get("example_value")
        shape = getattr(value, "shape", ())
        axes.append({axis: torch.export.Dim.AUTO for axis, size in enumerate(shape)
                     if not isinstance(size, int)})
    return axes
