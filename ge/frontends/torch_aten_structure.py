"""Core ATen translations of the PyTorch frontend: reductions, joining, splitting and
selecting, tensors made from nothing, resampling and normalization (``torch_aten``
holds the operand helpers, the elementwise ops and the table that merges both).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ge.frontends.torch import _Context, _shape_list
from ge.frontends.torch_aten import (
    _FAR,
    Translate,
    _arguments,
    _constant,
    _declined,
    _dims,
    _fake,
    _ge_dtype,
    _is_node,
    _operand,
    _out_dtype,
    _outputs,
    _rank,
    _scalar,
    _static_shape,
)
from ge.ir import Value

__all__ = ["structural_entries"]


# -- reductions -------------------------------------------------------------------------

def _reduce(op_type: str, as_bool: bool = False) -> Translate:
    """sum/prod/amax/amin/mean/any/max/min over ``dim`` (none or empty: every axis), the
    input first cast to the output dtype (a sum of bools or ints is int64)."""

    def translate(ctx: _Context, node: Any) -> Value:
        import torch

        args = _arguments(node)
        out = torch.bool if as_bool else _out_dtype(node)
        x = _operand(ctx, args["self"], out)
        if as_bool and isinstance(args.get("dim"), (list, tuple)) and not args["dim"]:
            return x  # any.dims over no axes reduces nothing
        dims = _dims(args.get("dim"), _rank(args["self"]))
        inputs = [x, ctx.ints(dims, "axes")] if dims else [x]
        return ctx.op(op_type, inputs, {"keepdims": int(bool(args.get("keepdim")))}, node.name)

    return translate


def _arg_reduce(op_type: str) -> Translate:
    """argmax/argmin: int64 positions, the first on ties; no dim: over the flattened input."""

    def translate(ctx: _Context, node: Any) -> Value:
        args = _arguments(node)
        x, dim, keepdim = ctx.value(args["self"]), args.get("dim"), bool(args.get("keepdim"))
        if dim is not None:
            return ctx.op(op_type, [x], {"axis": int(dim), "keepdims": int(keepdim)}, node.name)
        flat = ctx.op("Reshape", [x, ctx.ints([-1], "shape")])
        position = ctx.op(op_type, [flat], {"axis": 0, "keepdims": 0},
                          "" if keepdim else node.name)
        if not keepdim:
            return position
        return ctx.op("Reshape", [position, ctx.ints([1] * _rank(args["self"]), "shape")], {},
                      node.name)

    return translate


def _extreme_with_index(reduce_type: str, arg_type: str) -> Translate:
    """max.dim/min.dim: (values, int64 indices of the first extreme)."""

    def translate(ctx: _Context, node: Any) -> tuple[Value, ...]:
        args = _arguments(node)
        x, dim, keepdim = ctx.value(args["self"]), int(args["dim"]), int(bool(args["keepdim"]))
        values = ctx.op(reduce_type, [x, ctx.ints([dim], "axes")], {"keepdims": keepdim},
                        node.name)
        indices = ctx.op(arg_type, [x], {"axis": dim, "keepdims": keepdim}, node.name + "_indices")
        return values, indices

    return translate


def _variance(ctx: _Context, node: Any, with_mean: bool = False) -> Any:
    """var.correction (and var_mean): sum((x - mean)^2) / max(N - correction, 0)."""
    args = _arguments(node)
    x = ctx.value(args["self"])
    dims = _dims(args.get("dim"), _rank(args["self"]))
    shape = _shape_list(_fake(args["self"]).shape)
    if any(shape[d] == -1 for d in dims):
        raise _declined(node, "a variance over a symbolic size")
    correction = 1.0 if args.get("correction") is None else float(args["correction"])
    count = max(float(np.prod([shape[d] for d in dims])) - correction, 0.0)
    keepdim = int(bool(args.get("keepdim")))
    axes = ctx.ints(dims, "axes")
    mean = ctx.op("ReduceMean", [x, axes], {"keepdims": 1})
    centered = ctx.op("Sub", [x, mean])
    total = ctx.op("ReduceSum", [ctx.op("Mul", [centered, centered]), axes], {"keepdims": keepdim})
    variance = ctx.op("Div", [total, _scalar(ctx, count, x)], {}, node.name)
    if not with_mean:
        return variance
    if not keepdim:
        mean = ctx.op("Squeeze", [mean, axes], {}, node.name + "_mean")
    return variance, mean


def _vector_norm(ctx: _Context, node: Any) -> Value:
    args = _arguments(node)
    order = float(args["ord"])
    if args.get("dtype") is not None:
        raise _declined(node, "linalg_vector_norm with a dtype")
    x = ctx.value(args["self"])
    dims = _dims(args.get("dim"), _rank(args["self"]))
    attrs = {"keepdims": int(bool(args.get("keepdim")))}
    axes = ctx.ints(dims, "axes")
    if order in (1.0, 2.0):
        return ctx.op("ReduceL1" if order == 1.0 else "ReduceL2", [x, axes], attrs, node.name)
    if order in (math.inf, -math.inf):
        return ctx.op("ReduceMax" if order > 0 else "ReduceMin", [ctx.op("Abs", [x]), axes],
                      attrs, node.name)
    raise _declined(node, f"a vector norm of order {order} (1, 2 and inf are translated)")


def _cumsum(ctx: _Context, node: Any) -> Value:
    x = _operand(ctx, node.args[0], _out_dtype(node))
    axis = _constant(ctx, np.asarray(int(node.args[1]), np.int64), "axis")
    return ctx.op("CumSum", [x, axis], {}, node.name)


def _topk(ctx: _Context, node: Any) -> tuple[Value, ...]:
    args = _arguments(node)
    if not isinstance(args["k"], int):
        raise _declined(node, "topk with a symbolic k")
    return _outputs(ctx, "TopK", [ctx.value(args["self"]), ctx.ints([args["k"]], "k")],
                    {"axis": int(args["dim"]), "largest": int(bool(args["largest"]))}, node.name)


def _sort(ctx: _Context, node: Any) -> tuple[Value, ...]:
    """sort: TopK of every element (stable: equal values keep their order; NaN largest)."""
    args = _arguments(node)
    dim = int(args["dim"])
    size = _shape_list(_fake(args["self"]).shape)[dim]
    if size == -1:
        raise _declined(node, "a sort along a symbolic size")
    return _outputs(ctx, "TopK", [ctx.value(args["self"]), ctx.ints([size], "k")],
                    {"axis": dim, "largest": int(bool(args["descending"]))}, node.name)


# -- joining, splitting, selecting ------------------------------------------------------

def _cat(ctx: _Context, node: Any) -> Value:
    """cat: Concat of the inputs cast to the output dtype (legacy empty 1-D inputs, which
    ATen skips, are skipped)."""
    tensors, out = node.args[0], _out_dtype(node)
    dim = int(node.args[1]) if len(node.args) > 1 else int(node.kwargs.get("dim", 0))
    rank = _rank(node)
    kept = [t for t in tensors if not (_rank(t) == 1 != rank and _static_shape(t) == [0])]
    return ctx.op("Concat", [_operand(ctx, t, out) for t in kept], {"axis": dim}, node.name)


def _split_with_sizes(ctx: _Context, node: Any) -> tuple[Value, ...]:
    args = _arguments(node)
    sizes = list(args["split_sizes"])
    if not all(isinstance(s, int) for s in sizes):
        raise _declined(node, "a split into symbolic sizes")
    return _outputs(ctx, "Split", [ctx.value(args["self"]), ctx.ints(sizes, "split")],
                    {"axis": int(args["dim"])}, node.name)


def _squeeze(ctx: _Context, node: Any) -> Value:
    """squeeze.dims/dim/default: the listed (default: every) axes whose size is 1; ATen
    skips the others, so a symbolic size among them is refused."""
    args = _arguments(node)
    chosen = args.get("dims", args.get("dim"))
    rank = _rank(args["self"])
    if isinstance(chosen, (list, tuple)) and not chosen:
        return ctx.value(args["self"])  # squeeze.dims of no axes
    shape = _shape_list(_fake(args["self"]).shape)
    axes = sorted({d % rank for d in _dims(chosen, rank)}) if rank else []
    if any(shape[a] == -1 for a in axes):
        raise _declined(node, "a squeeze of a symbolic size (1 or not only at run time)")
    ones = [a for a in axes if shape[a] == 1]
    if not ones:
        return ctx.value(args["self"])
    return ctx.op("Squeeze", [ctx.value(args["self"]), ctx.ints(ones, "axes")], {}, node.name)


def _select(ctx: _Context, node: Any) -> Value:
    x, dim, index = node.args[:3]
    if not isinstance(index, int):
        raise _declined(node, "a select at a symbolic index")
    position = _constant(ctx, np.asarray(index, np.int64), "index")
    return ctx.op("Gather", [ctx.value(x), position], {"axis": int(dim)}, node.name)


def _index_select(ctx: _Context, node: Any) -> Value:
    x, dim, index = node.args[:3]
    indices = ctx.value(index)
    if _rank(index) == 0:
        indices = ctx.op("Reshape", [indices, ctx.ints([1], "shape")])
    return ctx.op("Gather", [ctx.value(x), indices], {"axis": int(dim)}, node.name)


def _gather(ctx: _Context, node: Any) -> Value:
    """gather: GatherElements; ATen lets the index be smaller than the input on the other
    axes, so the input is first cut to the index's sizes there."""
    x, dim, index = node.args[:3]
    data = ctx.value(x)
    data_shape, index_shape = _shape_list(_fake(x).shape), _shape_list(_fake(index).shape)
    dim = int(dim) % max(len(data_shape), 1)
    cut = [a for a, (d, i) in enumerate(zip(data_shape, index_shape)) if a != dim and d != i]
    if any(data_shape[a] == -1 or index_shape[a] == -1 for a in cut):
        raise _declined(node, "a gather whose index may be smaller than the input on a "
                        "symbolic axis")
    if cut:
        data = ctx.op("Slice", [data, ctx.ints([0] * len(cut), "starts"),
                                ctx.ints([index_shape[a] for a in cut], "ends"),
                                ctx.ints(cut, "axes")])
    return ctx.op("GatherElements", [data, ctx.value(index)], {"axis": dim}, node.name)


def _index(ctx: _Context, node: Any) -> Value:
    """index.Tensor with integer index tensors (None: a whole axis). One index: Gather.
    Several: GatherND over the indexed axes moved first, their broadcast shape put back
    where the first indexed axis was when they are adjacent (else first), as NumPy does."""
    x, indices = node.args[0], list(node.args[1])
    positions = [axis for axis, index in enumerate(indices) if index is not None]
    for axis in positions:
        if str(_fake(indices[axis]).dtype) in ("torch.bool", "torch.uint8"):
            raise _declined(node, "a boolean mask index (its result's shape depends on data)")
    if len(positions) == 1:
        return ctx.op("Gather", [ctx.value(x), ctx.value(indices[positions[0]])],
                      {"axis": positions[0]}, node.name)
    return _index_several(ctx, node, x, [indices[a] for a in positions], positions)


def _index_several(ctx: _Context, node: Any, x: Any, tensors: list[Any],
                   positions: list[int]) -> Value:
    import torch

    shapes = [_static_shape(t) for t in tensors]
    if any(s is None for s in shapes):
        raise _declined(node, "index tensors of symbolic shape")
    broadcast = list(np.broadcast_shapes(*[tuple(s) for s in shapes if s is not None]))
    columns = []
    for tensor in tensors:
        column = ctx.op("Expand", [_operand(ctx, tensor, torch.int64),
                                   ctx.ints(broadcast, "shape")])
        columns.append(ctx.op("Unsqueeze", [column, ctx.ints([-1], "axes")]))
    rank = _rank(x)
    others = [a for a in range(rank) if a not in positions]
    data = ctx.value(x)
    if positions + others != list(range(rank)):
        data = ctx.op("Transpose", [data], {"perm": positions + others})
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    front, count = positions[0] if adjacent else 0, len(broadcast)
    gathered = ctx.op("GatherND", [data, ctx.op("Concat", columns, {"axis": -1})], {},
                      "" if front else node.name)
    if not front:
        return gathered
    perm = list(range(count, count + front)) + list(range(count)) + \
        list(range(count + front, count + len(others)))
    return ctx.op("Transpose", [gathered], {"perm": perm}, node.name)


def _constant_pad(ctx: _Context, node: Any) -> Value:
    """constant_pad_nd: Pad; ``pad`` lists (begin, end) pairs from the last axis back;
    negative amounts crop."""
    args = _arguments(node)
    amounts = list(args["pad"])
    if not all(isinstance(p, int) for p in amounts):
        raise _declined(node, "padding by a symbolic amount")
    x = ctx.value(args["self"])
    fill = _scalar(ctx, args.get("value") or 0, x)
    return ctx.op("Pad", [x, _pads(amounts, _rank(args["self"]), ctx), fill],
                  {"mode": "constant"}, node.name)


def _pads(amounts: list[int], rank: int, ctx: _Context) -> Value:
    begins, ends = [0] * rank, [0] * rank
    for pair in range(len(amounts) // 2):
        axis = rank - 1 - pair
        begins[axis], ends[axis] = amounts[2 * pair], amounts[2 * pair + 1]
    return ctx.ints(begins + ends, "pads")


def _mode_pad(mode: str) -> Translate:
    """reflection_pad / replication_pad: Pad in ``reflect`` / ``edge`` mode."""

    def translate(ctx: _Context, node: Any) -> Value:
        x, amounts = node.args[0], list(node.args[1])
        if not all(isinstance(p, int) and p >= 0 for p in amounts):
            raise _declined(node, "padding by a symbolic or negative amount")
        return ctx.op("Pad", [ctx.value(x), _pads(amounts, _rank(x), ctx)], {"mode": mode},
                      node.name)

    return translate


def _repeat(ctx: _Context, node: Any) -> Value:
    x, repeats = node.args[0], [int(r) for r in node.args[1]]
    value = ctx.value(x)
    extra = len(repeats) - _rank(x)
    if extra:
        value = ctx.op("Unsqueeze", [value, ctx.ints(list(range(extra)), "axes")])
    return ctx.op("Tile", [value, ctx.ints(repeats, "repeats")], {}, node.name)


def _flip(ctx: _Context, node: Any) -> Value:
    x, dims = node.args[0], [int(d) for d in node.args[1]]
    if not dims:
        return ctx.value(x)
    count = len(dims)
    return ctx.op("Slice", [ctx.value(x), ctx.ints([-1] * count, "starts"),
                            ctx.ints([-_FAR] * count, "ends"), ctx.ints(dims, "axes"),
                            ctx.ints([-1] * count, "steps")], {}, node.name)


def _copy(ctx: _Context, node: Any) -> Value:
    """copy(dst, src): src cast to dst's dtype and broadcast to dst's shape."""
    destination, source = node.args[:2]
    value = _operand(ctx, source, _fake(destination).dtype)
    if _shape_list(_fake(source).shape) == _shape_list(_fake(destination).shape):
        return value
    shape = _static_shape(destination)
    if shape is None:
        raise _declined(node, "a broadcasting copy into a symbolic shape")
    return ctx.op("Expand", [value, ctx.ints(shape, "shape")], {}, node.name)


def _same(ctx: _Context, node: Any) -> Value:
    return ctx.value(node.args[0])


# -- tensors made from nothing ----------------------------------------------------------

def _created(ctx: _Context, node: Any) -> Value:
    """full/arange/scalar_tensor/empty...: evaluated by ATen now, a Const (empty ones hold
    zeros: their contents are unspecified)."""
    values = list(node.args) + list(node.kwargs.values())
    flat = [v for value in values for v in (value if isinstance(value, (list, tuple))
                                            else [value])]
    if any(_is_node(v) or type(v).__name__.startswith("Sym") for v in flat):
        raise _declined(node, "a tensor created with symbolic or computed arguments")
    kwargs = dict(node.kwargs)
    if "device" in kwargs:
        kwargs["device"] = "cpu"
    tensor = node.target(*node.args, **kwargs)
    if str(tensor.dtype) == "torch.bfloat16":
        raise _declined(node, "a bfloat16 constant")
    array = tensor.numpy()
    if "empty" in str(node.target):
        array = np.zeros_like(array)
    return _constant(ctx, array, node.name)


def _full_like(ctx: _Context, node: Any) -> Value:
    """full_like (zeros_like, ones_like, fill): a Const when the shape is static, else the
    fill value expanded to the input's run-time shape."""
    args = _arguments(node)
    dtype = _ge_dtype(_out_dtype(node))
    fill = np.asarray(args["fill_value"], dtype=dtype.np_dtype)
    shape = _static_shape(args["self"])
    if shape is not None:
        return _constant(ctx, np.full(shape, fill, dtype=dtype.np_dtype), node.name)
    return ctx.op("Expand", [_constant(ctx, fill), ctx.op("Shape", [ctx.value(args["self"])])],
                  {}, node.name)


# -- resampling -------------------------------------------------------------------------

def _resample_sizes(node: Any) -> tuple[Any, list[int], list[int], list[Optional[float]]]:
    """(input node, input and output spatial sizes, ATen's scales or None) of an
    upsample_*2d.vec or .default node; static sizes only."""
    args = _arguments(node)
    x = args.get("input", args.get("self"))
    shape = _shape_list(_fake(x).shape)
    if len(shape) != 4 or -1 in shape[2:]:
        raise _declined(node, "a resize of symbolic spatial sizes or of a non-4-D shape")
    sizes = shape[2:]
    factors = args.get("scale_factors")
    if "scales_h" in args:
        scales: list[Optional[float]] = [args["scales_h"], args["scales_w"]]
        out = [int(s) for s in args["output_size"]]
    elif args.get("output_size") is not None:
        scales, out = [None, None], [int(s) for s in args["output_size"]]
    elif factors is not None:
        given = [float(f) for f in factors]
        scales = list(given)
        out = [int(math.floor(size * f)) for size, f in zip(sizes, given)]
    else:
        raise _declined(node, "a resize with neither sizes nor scales")
    return x, sizes, out, scales


def _aten_nearest(out: int, size: int, scale: Optional[float]) -> np.ndarray:
    """The source index ATen's nearest upsampling reads for each output index (float32)."""
    positions = np.arange(out, dtype=np.int64)
    if out == size:
        return positions
    if out == 2 * size:
        return positions >> 1
    step = np.float32(1.0 / scale) if scale else np.float32(size) / np.float32(out)
    chosen = np.floor(positions.astype(np.float32) * step).astype(np.int64)
    return np.minimum(chosen, size - 1)


def _upsample_nearest(ctx: _Context, node: Any) -> Value:
    """Resize (asymmetric, floor) when it reads the very pixels ATen's float32 index
    arithmetic reads; else two Gathers of those indices."""
    x, sizes, out, scales = _resample_sizes(node)
    wanted = [_aten_nearest(o, s, f) for o, s, f in zip(out, sizes, scales)]
    resized = [np.minimum(np.floor(np.arange(o) / (o / s)), s - 1).astype(np.int64)
               for o, s in zip(out, sizes)]
    if all(np.array_equal(a, b) for a, b in zip(wanted, resized)):
        return ctx.op("Resize", [ctx.value(x), None, None, ctx.ints(out, "sizes")],
                      {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                       "nearest_mode": "floor", "axes": [2, 3]}, node.name)
    rows = ctx.op("Gather", [ctx.value(x), ctx.ints(list(wanted[0]), "rows")], {"axis": 2})
    return ctx.op("Gather", [rows, ctx.ints(list(wanted[1]), "columns")], {"axis": 3},
                  node.name)


def _upsample_bilinear(ctx: _Context, node: Any) -> Value:
    """Resize, linear: align_corners maps corner to corner over the output sizes; else
    half-pixel centers with ATen's scale (1 / the given factor, or in / out). Sampling
    positions clamp at the borders in both."""
    x, sizes, out, scales = _resample_sizes(node)
    align = bool(_arguments(node)["align_corners"])
    attrs = {"mode": "linear", "axes": [2, 3],
             "coordinate_transformation_mode": "align_corners" if align else "half_pixel"}
    exact = all(f is None or s * f == o for s, o, f in zip(sizes, out, scales))
    if align or exact:
        return ctx.op("Resize", [ctx.value(x), None, None, ctx.ints(out, "sizes")], attrs,
                      node.name)
    factors = np.asarray(scales, np.float32)
    if [int(math.floor(float(f) * s)) for f, s in zip(factors, sizes)] != out:
        raise _declined(node, f"scales {scales} give other sizes in float32 than ATen's {out}")
    return ctx.op("Resize", [ctx.value(x), None, _constant(ctx, factors, "scales")], attrs,
                  node.name)


def _adaptive_avg_pool(ctx: _Context, node: Any) -> Value:
    """_adaptive_avg_pool2d whose output sizes divide the input's: AvgPool with the
    quotient as window and stride (ATen's windows are then exactly those)."""
    from ge.ir import Format

    x, out = node.args[0], [int(s) for s in node.args[1]]
    shape = _shape_list(_fake(x).shape)
    if len(shape) != 4 or any(i == -1 or i % o for i, o in zip(shape[2:], out)):
        raise _declined(node, f"adaptive average pooling of {shape} to {out} (only sizes "
                        "that divide the input's, on static 4-D input)")
    window = [i // o for i, o in zip(shape[2:], out)]
    return ctx.op("AvgPool", [ctx.value(x)], {
        "ksize": window, "strides": window, "padding": "EXPLICIT", "pads": [0, 0, 0, 0],
        "data_format": Format.NCHW}, node.name)


def _pixel_shuffle(op_type: str) -> Translate:
    """pixel_shuffle / pixel_unshuffle of 4-D input: DepthToSpace / SpaceToDepth, CRD."""

    def translate(ctx: _Context, node: Any) -> Value:
        x, factor = node.args[:2]
        if _rank(x) != 4:
            raise _declined(node, "a pixel shuffle of a non-4-D input")
        return ctx.op(op_type, [ctx.value(x)], {"blocksize": int(factor), "mode": "CRD"},
                      node.name)

    return translate


# -- normalization ----------------------------------------------------------------------

def _channel_vector(ctx: _Context, argument: Any, channels: int, fill: float) -> Value:
    if argument is not None:
        return ctx.value(argument)
    return _constant(ctx, np.full(channels, fill, np.float32))


def _group_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    x, weight, bias, _batch, channels, _pixels, groups, eps = node.args
    if not isinstance(channels, int):
        raise _declined(node, "a group norm over a symbolic number of channels")
    out = ctx.op("GroupNormalization", [
        ctx.value(x), _channel_vector(ctx, weight, channels, 1.0),
        _channel_vector(ctx, bias, channels, 0.0)],
        {"epsilon": float(eps), "num_groups": int(groups)}, node.name)
    return (out,)  # the saved mean and rstd are not translated: a consumer is refused


def _batch_statistics_norm(ctx: _Context, node: Any) -> tuple[Value, ...]:
    """_native_batch_norm_legit.no_stats (instance norm's form): normalize by the mean and
    biased variance over every axis but 1: (x - mean) * rsqrt(var + eps) * w + b."""
    x, weight, bias, training, _momentum, eps = node.args
    if not training:
        raise _declined(node, "batch norm without statistics outside training mode")
    rank = _rank(x)
    axes = ctx.ints([0] + list(range(2, rank)), "axes")
    value = ctx.value(x)
    centered = ctx.op("Sub", [value, ctx.op("ReduceMean", [value, axes], {"keepdims": 1})])
    variance = ctx.op("ReduceMean", [ctx.op("Mul", [centered, centered]), axes], {"keepdims": 1})
    spread = ctx.op("Sqrt", [ctx.op("Add", [variance, _scalar(ctx, float(eps), variance)])])
    steps = [(op_type, argument) for op_type, argument in (("Mul", weight), ("Add", bias))
             if argument is not None]
    out = ctx.op("Mul", [centered, ctx.op("Reciprocal", [spread])], {},
                 "" if steps else node.name)
    along = ctx.ints([-1] + [1] * (rank - 2), "shape")
    for index, (op_type, argument) in enumerate(steps):
        vector = ctx.op("Reshape", [ctx.value(argument), along])
        out = ctx.op(op_type, [out, vector], {}, node.name if index == len(steps) - 1 else "")
    return (out,)


def structural_entries(aten: Any) -> dict[Any, Translate]:
    """Reductions, joining and selecting, creation, resampling, normalization."""
    return {
        aten.sum.dim_IntList: _reduce("ReduceSum"), aten.sum.default: _reduce("ReduceSum"),
        aten.mean.default: _reduce("ReduceMean"), aten.prod.dim_int: _reduce("ReduceProd"),
        aten.prod.default: _reduce("ReduceProd"), aten.amax.default: _reduce("ReduceMax"),
        aten.amin.default: _reduce("ReduceMin"), aten.max.default: _reduce("ReduceMax"),
        aten.min.default: _reduce("ReduceMin"), aten.any.default: _reduce("ReduceMax", True),
        aten.any.dim: _reduce("ReduceMax", True), aten.any.dims: _reduce("ReduceMax", True),
        aten.argmax.default: _arg_reduce("ArgMax"), aten.argmin.default: _arg_reduce("ArgMin"),
        aten.max.dim: _extreme_with_index("ReduceMax", "ArgMax"),
        aten.min.dim: _extreme_with_index("ReduceMin", "ArgMin"),
        aten.var.correction: _variance,
        aten.var_mean.correction: lambda ctx, node: _variance(ctx, node, with_mean=True),
        aten.linalg_vector_norm.default: _vector_norm, aten.cumsum.default: _cumsum,
        aten.topk.default: _topk, aten.sort.default: _sort, aten.sort.stable: _sort,
        aten.cat.default: _cat, aten.split_with_sizes.default: _split_with_sizes,
        aten.squeeze.dims: _squeeze, aten.squeeze.dim: _squeeze,
        aten.squeeze.default: _squeeze, aten.select.int: _select,
        aten.index_select.default: _index_select, aten.gather.default: _gather,
        aten.index.Tensor: _index, aten.constant_pad_nd.default: _constant_pad,
        aten.reflection_pad1d.default: _mode_pad("reflect"),
        aten.reflection_pad2d.default: _mode_pad("reflect"),
        aten.replication_pad1d.default: _mode_pad("edge"),
        aten.replication_pad2d.default: _mode_pad("edge"),
        aten.repeat.default: _repeat, aten.flip.default: _flip, aten.copy.default: _copy,
        aten.lift_fresh_copy.default: _same, aten.detach.default: _same,
        aten.full.default: _created, aten.scalar_tensor.default: _created,
        aten.arange.default: _created, aten.arange.start: _created,
        aten.arange.start_step: _created, aten.empty_permuted.default: _created,
        aten.empty.memory_format: _created, aten.full_like.default: _full_like,
        aten.upsample_nearest2d.vec: _upsample_nearest,
        aten.upsample_nearest2d.default: _upsample_nearest,
        aten.upsample_bilinear2d.vec: _upsample_bilinear,
        aten.upsample_bilinear2d.default: _upsample_bilinear,
        aten._adaptive_avg_pool2d.default: _adaptive_avg_pool,
        aten.pixel_shuffle.default: _pixel_shuffle("DepthToSpace"),
        aten.pixel_unshuffle.default: _pixel_shuffle("SpaceToDepth"),
        aten.native_group_norm.default: _group_norm,
        aten._native_batch_norm_legit.no_stats: _batch_statistics_norm,
    }
