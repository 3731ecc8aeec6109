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

__all__ = ["parse_pytorch", "torch_backend", "TRANSLATED"]

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
        node = create_node("Const", [], {"value": Tensor(np.ascontiguousarray(array))},
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
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    if len(weight.meta["val"].shape) != 4:
        raise UnsupportedOpError(f"{node.name}: only 2-D convolutions are translated")
    inputs = [ctx.value(x), ctx.value(weight), None if bias is None else ctx.value(bias)]
    pad_h, pad_w = _pair(padding)
    if transposed:
        return ctx.op("ConvTranspose", inputs, {
            "strides": _pair(stride), "dilations": _pair(dilation), "group": int(groups),
            "pads": [pad_h, pad_w, pad_h, pad_w], "output_padding": _pair(output_padding)},
            node.name)
    return ctx.op("Conv2D", inputs, {
        "strides": _pair(stride), "dilations": _pair(dilation), "groups": int(groups),
        "padding": "EXPLICIT", "pads": [pad_h, pad_h, pad_w, pad_w],
        "data_format": Format.NCHW, "filter_format": "OIHW"}, node.name)


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
    x, dims = node.args[0], node.args[1]
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
    def translate(ctx: _Context, node: Any) -> Value:
        a, b = node.args[:2]
        alpha = node.kwargs.get("alpha", 1)
        second = ctx.value(b)
        if alpha != 1:
            second = ctx.op("Mul", [second, ctx.value(float(alpha))])
        return ctx.op(op_type, [ctx.value(a), second], {}, node.name)

    return translate


def _unary(op_type: str) -> Translate:
    return lambda ctx, node: ctx.op(op_type, [ctx.value(node.args[0])], {}, node.name)


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


def _view(ctx: _Context, node: Any) -> Value:
    # a symbolic size (the dynamic batch, axis 0 of input and output alike) is 0: Reshape's
    # "keep the input's size on this axis"
    given = list(node.args[1])
    unknown = [i for i, s in enumerate(given) if not isinstance(s, int) or s == -1]
    if not unknown:
        sizes = [int(s) for s in given]
    elif len(unknown) == 1:  # the one size the element count decides
        sizes = [-1 if i == unknown[0] else int(s) for i, s in enumerate(given)]
    elif len(unknown) == 2 and unknown[0] == 0 and not isinstance(given[0], int):
        sizes = [0] + [int(s) for s in given[1:]]  # axis 0 is the input's batch
    else:
        raise UnsupportedOpError(f"{node.name}: a view with several symbolic sizes {given}")
    return ctx.op("Reshape", [ctx.value(node.args[0]), ctx.ints(sizes, "shape")], {},
                  node.name)


def _permute(ctx: _Context, node: Any) -> Value:
    return ctx.op("Transpose", [ctx.value(node.args[0])],
                  {"perm": [int(p) for p in node.args[1]]}, node.name)


def _unsqueeze(ctx: _Context, node: Any) -> Value:
    return ctx.op("Unsqueeze", [ctx.value(node.args[0]), ctx.ints([int(node.args[1])], "axes")],
                  {}, node.name)


def _expand(ctx: _Context, node: Any) -> Value:
    # ONNX's Expand broadcasts: a -1 (keep) or a symbolic size becomes 1, which keeps
    # the input's own size there
    sizes = [1 if s == -1 else s for s in _shape_list(node.args[1])]
    return ctx.op("Expand", [ctx.value(node.args[0]), ctx.ints(sizes, "shape")], {}, node.name)


def _same(ctx: _Context, node: Any) -> Value:
    return ctx.value(node.args[0])


def _slice(ctx: _Context, node: Any) -> Value:
    args = list(node.args) + [None] * (5 - len(node.args))
    x, dim, start, end, step = args[:5]
    start = 0 if start is None else start
    end = (1 << 62) if end is None or not isinstance(end, int) else min(end, 1 << 62)
    if not isinstance(start, int):
        raise UnsupportedOpError(f"{node.name}: a slice starting at a symbolic size")
    return ctx.op("Slice", [ctx.value(x), ctx.ints([start], "starts"), ctx.ints([end], "ends"),
                            ctx.ints([int(dim or 0)], "axes"), ctx.ints([int(step or 1)], "steps")],
                  {}, node.name)


def _symbolic_size(ctx: _Context, node: Any) -> Any:
    """A size torch.export left symbolic (the dynamic batch): only shape arguments read
    it, and they take it as -1."""
    return _SYMBOLIC


_SYMBOLIC = ("symbolic size",)


def _to_copy(ctx: _Context, node: Any) -> Value:
    dtype = node.kwargs.get("dtype")
    if dtype is None:
        return ctx.value(node.args[0])
    target = DataType.parse(str(dtype).replace("torch.", ""))
    return ctx.op("Cast", [ctx.value(node.args[0])], {"dtype": target}, node.name)


def _translations() -> dict[Any, Translate]:
    import torch

    aten = torch.ops.aten
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
        operator.mul: _symbolic_size,
        operator.add: _symbolic_size,
        operator.sub: _symbolic_size,
        operator.floordiv: _symbolic_size,
    }


#: the core ATen ops translated (by name), for the README and error messages
TRANSLATED = ("convolution", "_native_batch_norm_legit_no_training", "max_pool2d_with_indices",
              "avg_pool2d", "mean.dim", "addmm", "mm", "bmm", "add.Tensor", "sub.Tensor",
              "mul.Tensor", "div.Tensor", "relu", "sigmoid", "tanh", "hardtanh", "gelu",
              "_softmax", "native_layer_norm", "embedding", "view", "reshape", "_unsafe_view",
              "permute", "unsqueeze", "expand", "clone", "alias", "_to_copy", "sym_size", "slice")

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
    module = module.eval()
    try:
        exported = torch.export.export(module, tensors, dynamic_shapes=dynamic)
    except Exception as error:  # noqa: BLE001 - torch.export's errors are many
        raise ModelFormatError(f"torch.export could not trace the module: {error}") from error
    exported = exported.run_decompositions()
    return _translate(exported, name or type(module).__name__)


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
                outputs.append(ctx.value(item))
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


#: how many graphs ``torch_backend`` has taken (the others it handed back to PyTorch)
graphs_run_by_ge = 0


def torch_backend(graph_module: Any, example_inputs: Sequence[Any], **options: Any) -> Any:
    """GE as a ``torch.compile`` backend: the FX graph dynamo hands over, exported and
    translated as ``parse_pytorch`` does, compiled by GE (``options``: ``opt_level``,
    ``engines``, ``threads``) and run by a GE session; returns the callable dynamo runs
    in the graph's place.

    The parameters dynamo passes as inputs become constants of the GE graph (so that
    engines pack them once); a call whose parameters are other tensors, or were changed
    in place since (their version counter moved), runs as PyTorch traced it. So does a
    graph GE cannot translate, or one with symbolic sizes among its inputs."""
    import torch

    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        return graph_module.forward
    frozen = {i: x for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter)}
    versions = {i: x._version for i, x in frozen.items()}
    fed = [i for i in range(len(example_inputs)) if i not in frozen]

    class _WithParameters(torch.nn.Module):
        """The graph with its parameters held as buffers (what torch.export lifts into
        constants), the other inputs given."""

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
            return graph_module(*full)

    try:
        with torch.no_grad():
            graph = parse_pytorch(_WithParameters(), [example_inputs[i] for i in fed],
                                  name="dynamo_graph")
    except (UnsupportedOpError, ModelFormatError):
        return graph_module.forward
    import ge  # the backend compiles and runs through the public API, as a user would

    global graphs_run_by_ge
    compile_options = {key: options[key] for key in ("opt_level", "engines", "threads")
                       if key in options}
    session = ge.Session(ge.compile(graph, **compile_options))
    names = [value.producer.name for value in graph.inputs]
    outputs = [spec.name for spec in session.executable.outputs]
    graphs_run_by_ge += 1

    def run(*args: Any) -> Any:
        if any(args[i] is not tensor or tensor._version != versions[i]
               for i, tensor in frozen.items()):
            return graph_module.forward(*args)
        feeds = {name: args[i].detach().cpu().numpy() for name, i in zip(names, fed)}
        results = session.run(feeds)
        return tuple(torch.from_numpy(np.ascontiguousarray(results[name])) for name in outputs)

    return run
