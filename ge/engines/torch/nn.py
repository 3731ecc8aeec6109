"""Normalization, softmax, attention, resampling and reductions on torch.

- ``Softmax`` and ``LogSoftmax``: torch's ``out=`` forms along the node's axis.
- ``LayerNormalization`` (over axes [axis, rank), a scale and bias that broadcast to
  the normalized shape expanded to it), ``RMSNormalization`` (normalized by torch,
  then multiplied by the scale into the output: correct in place),
  ``InstanceNormalization`` and ``GroupNormalization`` (both torch's group norm, an
  instance norm being one group per channel): torch's kernels, copied into the slot.
- ``Attention`` (ONNX's scaled dot-product attention) as
  ``scaled_dot_product_attention``: 3-D or 4-D Q, K, V, grouped K/V heads, no mask or a
  bool or float32 mask (padded along the keys when shorter, as the reference does),
  ``is_causal`` without a mask or cache (then both align top-left), a K/V cache
  concatenated straight into ``present_key``/``present_value``. Declined: ``softcap``,
  sliding windows, ``nonpad_kv_seqlen``, a float64 ``softmax_precision``, and any node
  whose ``qk_matmul_output`` is read: that output is never computed (its slot is left
  as it is; the allocating kernel gives zeros), which is what makes the fused kernel
  worth it.
- ``Resize`` in nearest (every coordinate mapping but ``tf_crop_and_resize``, every
  rounding) and linear mode (the same mappings; no antialias, no
  ``exclude_outside``), with constant scales or sizes and the ``stretch`` policy. The
  source positions are computed as the reference does, in float64, once per input
  shape; nearest gathers with ``index_select`` along each resized axis (or, when it
  repeats every cell a whole number of times, as a 2x upsampling does, is one
  broadcasting copy); linear gathers
  the two taps and sums them with the reference's float32 weights, which gives its
  results exactly. A 4-D linear resize of two neighbouring axes (the spatial axes of
  NCHW or NHWC data) in the half-pixel or align-corners mappings runs as one
  ``upsample_bilinear2d`` instead: torch computes the source positions in float32
  where the reference uses float64, so it agrees within float32's tolerance (exactly
  where the source step is a power of two).
- ``Cast`` between float32 and float16, int32, int64 and bool (and into float32 from
  the narrower integers): one ``copy_``, which truncates floats toward zero as
  ``Cast`` does (NaN, infinities and out-of-range values into an integer type are
  undefined in both).
- ``TopK``: a stable sort (ties keep index order, NaN counts as the largest, as the
  reference), the first k copied out.
- ``GatherElements`` (``torch.gather``; negative indices counted from the end, an index
  out of range an error, as the reference) over float32, int64 or int32 data.
- ``Split`` into pieces of constant sizes (or equal pieces, the last smaller): one
  ``copy_`` of each piece's view into its output (the NumPy engine keeps the small
  ones, under ``elementwise.CHEAP_MIN_ELEMENTS``).
- ``CumSum`` (exclusive, reverse) over a constant axis; ``ReduceSum``, ``ReduceMean``,
  ``ReduceMax`` and ``ReduceMin`` over constant axes (``keepdims``,
  ``noop_with_empty_axes``; an empty max or min gives -inf or +inf).

Only float32 data runs here (``Cast`` apart). As in ``elementwise``, each writer
converts the arrays it is handed through converters that remember the last array's
tensor (the arena's views come back run after run); constant inputs (scales, biases,
masks) become tensors once, at bind time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.torch import elementwise
from ge.engines.torch._base import (
    FLOAT32,
    Binding,
    const_array,
    float32_node,
    known_size,
    register,
    tensor,
)
from ge.engines.torch.elementwise import Fresh, make_binding, remembering
from ge.ir import DataType, Node, Value
from ge.ops.image import nearest_index, source_positions
from ge.ops.registry import has_op
from ge.ops.shape_utils import normalize_axes, normalize_axis
from ge.ops.tensor_ops import chunk_sizes

__all__: list[str] = []

Arrays = Sequence[Optional[np.ndarray]]
Writer = Callable[[Arrays, Sequence[np.ndarray]], None]

_F32 = np.dtype(np.float32)


def _like_input(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
    first = inputs[0]
    assert first is not None
    return [(first.shape, _F32)]


def _present(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def _value(node: Node, index: int) -> Value:
    """Input ``index`` of ``node``, which must be present."""
    value = node.inputs[index]
    assert value is not None
    return value


def _rank(node: Node) -> int:
    return len(_value(node, 0).shape)


def _operand(node: Node, index: int) -> Callable[[Fresh], Callable[[Arrays], Any]]:
    """``operand(fresh)(inputs)``: input ``index`` as a torch tensor, made once at bind
    time when constant (a writable copy: a constant's array is read-only), else
    converted by a converter from ``fresh()``."""
    import torch

    value = const_array(node, index)
    if value is not None:
        constant = torch.from_numpy(np.array(value, order="C", copy=True))  # 0-d kept
        return lambda fresh: lambda _inputs: constant

    def given(fresh: Fresh) -> Callable[[Arrays], Any]:
        convert = fresh()
        return lambda inputs: convert(inputs[index])

    return given


def _used(node: Node, index: int) -> bool:
    """True when output ``index`` of ``node`` is read (by a node or as a graph output)."""
    value = node.outputs[index]
    return value.num_users > 0 or value.is_graph_output()


# -- Softmax and LogSoftmax -------------------------------------------------------------

def _check_softmax(node: Node) -> bool:
    return float32_node(node) and _rank(node) >= 1


def _bind_softmax(node: Node) -> Binding:
    import torch

    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    function = torch.softmax if node.op_type == "Softmax" else torch.log_softmax

    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            function(source(inputs[0]), axis, out=target(outs[0]))

        return writer

    return make_binding(make, _like_input)


# -- LayerNormalization and RMSNormalization --------------------------------------------

def _check_layer_norm(node: Node) -> bool:
    return float32_node(node) and _rank(node) >= 1


def _expanded(value: Any, shape: Any) -> Any:
    return value if value.shape == shape else value.expand(shape)


def _bind_layer_norm(node: Node) -> Binding:
    import torch

    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    epsilon = float(node.attrs["epsilon"])
    scale_of = _operand(node, 1)
    bias_of = _operand(node, 2) if _present(node, 2) else None
    layer_norm = torch.layer_norm

    def make(fresh: Fresh) -> Writer:
        source, target, scale = fresh(), fresh(), scale_of(fresh)
        bias = None if bias_of is None else bias_of(fresh)

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x = source(inputs[0])
            shape = x.shape[axis:]
            weight = _expanded(scale(inputs), shape)
            offset = None if bias is None else _expanded(bias(inputs), shape)
            target(outs[0]).copy_(layer_norm(x, shape, weight, offset, epsilon))

        return writer

    return make_binding(make, _like_input)


def _check_rms_norm(node: Node) -> bool:
    return float32_node(node) and _rank(node) >= 1


def _bind_rms_norm(node: Node) -> Binding:
    import torch

    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    epsilon = float(node.attrs["epsilon"])
    scale_of = _operand(node, 1)
    rms_norm, mul = torch.rms_norm, torch.mul

    def make(fresh: Fresh) -> Writer:
        source, target, scale = fresh(), fresh(), scale_of(fresh)

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x = source(inputs[0])
            # the scale broadcasts against all of x (not only the normalized axes)
            mul(rms_norm(x, x.shape[axis:], None, epsilon), scale(inputs), out=target(outs[0]))

        return writer

    return make_binding(make, _like_input)


# -- InstanceNormalization and GroupNormalization ---------------------------------------

def _check_instance_norm(node: Node) -> bool:
    return float32_node(node) and _rank(node) >= 3


def _check_group_norm(node: Node) -> bool:
    return float32_node(node) and _rank(node) >= 2 and int(node.attrs.get("stash_type", 1)) == 1


def _bind_channel_norm(node: Node) -> Binding:
    import torch

    epsilon = float(node.attrs["epsilon"])
    groups = int(node.attrs["num_groups"]) if node.op_type == "GroupNormalization" else None
    scale_of, bias_of = _operand(node, 1), _operand(node, 2)
    group_norm = torch.group_norm

    def make(fresh: Fresh) -> Writer:
        source, target, scale, bias = fresh(), fresh(), scale_of(fresh), bias_of(fresh)

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x = source(inputs[0])
            count = groups if groups is not None else x.shape[1]  # instance: one per channel
            target(outs[0]).copy_(group_norm(x, count, scale(inputs), bias(inputs), epsilon))

        return writer

    return make_binding(make, _like_input)


# -- Attention --------------------------------------------------------------------------

def _check_attention(node: Node) -> bool:
    attrs = node.attrs
    q, k, v = (_value(node, i) for i in range(3))
    if any(v.dtype is not FLOAT32 for v in (q, k, v)) or \
            any(v.dtype is not FLOAT32 for v in node.outputs):
        return False
    rank = len(q.shape)
    if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
        return False
    if _present(node, 6) or float(attrs.get("softcap") or 0.0) > 0:
        return False
    if int(attrs.get("left_window_size", -1)) >= 0 or int(attrs.get("right_window_size", -1)) >= 0:
        return False
    precision = attrs.get("softmax_precision")
    if precision is not None and precision is DataType.DT_DOUBLE:
        return False
    causal = bool(attrs.get("is_causal", 0))
    cached = _present(node, 4) or _present(node, 5)
    if cached and (causal or not (_present(node, 4) and _present(node, 5))
                   or any(_value(node, i).dtype is not FLOAT32 for i in (4, 5))):
        return False
    if _present(node, 3):
        mask = _value(node, 3)
        if causal or mask.dtype not in (FLOAT32, DataType.DT_BOOL) or not 1 <= len(mask.shape) <= 4:
            return False
    if rank == 3 and (attrs.get("q_num_heads") is None or attrs.get("kv_num_heads") is None):
        return False
    return not (len(node.outputs) > 3 and _used(node, 3))


def _bind_attention(node: Node) -> Binding:
    import torch

    attrs = node.attrs
    flat = _rank(node) == 3
    q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    given_scale = attrs.get("scale")
    causal = bool(attrs.get("is_causal", 0))
    cached = _present(node, 4)
    mask_of = _operand(node, 3) if _present(node, 3) else None
    boolean_mask = _present(node, 3) and _value(node, 3).dtype is DataType.DT_BOOL
    attention = torch.nn.functional.scaled_dot_product_attention
    pad, cat = torch.nn.functional.pad, torch.cat
    # the writer may leave an output nobody reads unwritten (a kernel's fresh arrays too)
    keys_read = len(node.outputs) > 1 and _used(node, 1)
    values_read = len(node.outputs) > 2 and _used(node, 2)

    def heads_first(x: Any, heads: Any) -> Any:
        return x.unflatten(2, (heads, -1)).transpose(1, 2) if flat else x

    def make(fresh: Fresh) -> Writer:
        q_of, k_of, v_of, past_k_of, past_v_of = (fresh() for _ in range(5))
        y_of, key_of, value_of = fresh(), fresh(), fresh()
        mask_from = None if mask_of is None else mask_of(fresh)

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            q = heads_first(q_of(inputs[0]), q_heads)
            k = heads_first(k_of(inputs[1]), kv_heads)
            v = heads_first(v_of(inputs[2]), kv_heads)
            if cached:
                present_key, present_value = key_of(outs[1]), value_of(outs[2])
                cat([past_k_of(inputs[4]), k], 2, out=present_key)
                cat([past_v_of(inputs[5]), v], 2, out=present_value)
                k, v = present_key, present_value
            else:  # the present key and value are the inputs: copied only when read
                if keys_read:
                    key_of(outs[1]).copy_(k)
                if values_read:
                    value_of(outs[2]).copy_(v)
            mask = None
            if mask_from is not None:
                mask = mask_from(inputs)
                if mask.dim() == 1:  # torch wants the query axis too
                    mask = mask.unsqueeze(0)
                missing = k.shape[2] - mask.shape[-1]
                if missing > 0:  # keys past the mask's end are not attended
                    mask = pad(mask, (0, missing), value=False if boolean_mask else -math.inf)
            scale = float(given_scale) if given_scale is not None \
                else 1.0 / math.sqrt(q.shape[3])
            y = attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
                          scale=scale, enable_gqa=q.shape[1] != k.shape[1])
            out = y_of(outs[0])
            if flat:
                out = out.unflatten(2, (q.shape[1], -1)).transpose(1, 2)
            out.copy_(y)
            # outs[3], qk_matmul_output, is read by no one (see _check_attention)

        return writer

    plain = make(lambda: tensor)

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        q, k, v = inputs[0], inputs[1], inputs[2]
        assert q is not None and k is not None and v is not None
        past = inputs[4].shape[2] if cached else 0  # type: ignore[union-attr]
        if flat:
            batch, q_len, kv_len = q.shape[0], q.shape[1], k.shape[1]
            hq, hkv = int(q_heads or 0), int(kv_heads or 0)
            head, v_head = q.shape[2] // hq, v.shape[2] // hkv
            y_shape: tuple[int, ...] = (batch, q_len, hq * v_head)
        else:
            batch, hq, q_len, head = q.shape
            hkv, kv_len, v_head = k.shape[1], k.shape[2], v.shape[3]
            y_shape = (batch, hq, q_len, v_head)
        total = past + kv_len
        return [(y_shape, _F32), ((batch, hkv, total, head), _F32),
                ((batch, hkv, total, v_head), _F32), ((batch, hq, q_len, total), _F32)]

    def kernel(inputs: Arrays) -> list[np.ndarray]:
        wanted = shapes(inputs)
        outs = [np.empty(shape, dtype) for shape, dtype in wanted[:3]]
        outs.append(np.zeros(wanted[3][0], np.float32))  # not computed: no one reads it
        plain(inputs, outs)
        return outs

    return Binding(kernel, make(remembering))


# -- Resize -----------------------------------------------------------------------------

_NEAREST_MAPPINGS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                     "align_corners", "asymmetric", "tf_half_pixel_for_nn")
_LINEAR_MAPPINGS = _NEAREST_MAPPINGS


def _nonempty_const(node: Node, index: int) -> tuple[bool, Optional[np.ndarray]]:
    """(known, value): input ``index`` as a non-empty constant, or None when absent or
    empty; ``known`` is False when it is given but not constant."""
    if not _present(node, index):
        return True, None
    value = const_array(node, index)
    if value is None:
        return False, None
    return True, (value if value.size else None)


def _check_resize(node: Node) -> bool:
    attrs = node.attrs
    if not float32_node(node, (0,)) or _rank(node) < 1:
        return False
    mode, mapping = attrs["mode"], attrs["coordinate_transformation_mode"]
    if mode not in ("nearest", "linear") or attrs["antialias"] or \
            attrs["keep_aspect_ratio_policy"] != "stretch":
        return False
    if mode == "nearest" and mapping not in _NEAREST_MAPPINGS:
        return False
    if mode == "linear" and (mapping not in _LINEAR_MAPPINGS or attrs["exclude_outside"]):
        return False
    known_roi, roi = _nonempty_const(node, 1)
    if not known_roi:
        return False
    known_scales, scales = _nonempty_const(node, 2)
    known_sizes, sizes = _nonempty_const(node, 3)
    if not (known_scales and known_sizes) or (scales is None and sizes is None):
        return False
    try:
        chosen = _resized_axes(node)
    except ValueError:
        return False
    if roi is not None:  # only the default region (which the mappings here ignore anyway)
        flat = roi.reshape(-1)
        if flat.size != 2 * len(chosen) or not (np.all(flat[:len(chosen)] == 0)
                                                and np.all(flat[len(chosen):] == 1)):
            return False
    values = sizes if sizes is not None else scales
    assert values is not None
    if values.size != len(chosen):
        return False
    return sizes is not None or bool(np.all(np.isfinite(values)) and np.all(values > 0))


def _resized_axes(node: Node) -> list[int]:
    axes = node.attrs.get("axes")
    rank = _rank(node)
    return normalize_axes(list(axes), rank) if axes is not None else list(range(rank))


def _nearest(position: np.ndarray, rounding: str, in_size: int) -> np.ndarray:
    """The gather indices of a nearest resize along one axis (the reference's)."""
    return np.clip(nearest_index(position, rounding), 0, in_size - 1).astype(np.int64)


def _source_positions(mapping: str, out_size: int, in_size: int, scale: float) -> np.ndarray:
    """The reference's source positions (no region of interest: ``tf_crop_and_resize``
    is declined)."""
    return source_positions(mapping, out_size, in_size, scale, (0.0, 1.0))


class _ResizePlan:
    """How one input shape is resized: the output shape, and either one bilinear
    upsampling call (``fast``), one broadcasting copy for a nearest resize that repeats
    every cell a whole number of times (``repeat``: the output's view with each resized
    axis split in two, and the input's view with a unit axis after each), or the gathers
    per resized axis (``steps``)."""

    __slots__ = ("shape", "steps", "fast", "repeat")

    def __init__(self, shape: tuple[int, ...], steps: list[tuple[Any, ...]],
                 fast: Optional[tuple[Any, ...]],
                 repeat: Optional[tuple[tuple[int, ...], tuple[int, ...]]] = None) -> None:
        self.shape = shape
        self.steps = steps
        self.fast = fast
        self.repeat = repeat


def _repeat_views(shape: tuple[int, ...], out_shape: list[int], resized: list[int],
                  indices: dict[int, np.ndarray]
                  ) -> Optional[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The views of a nearest resize that is a whole-number repeat of every cell (each
    axis's gather indices are ``arange(out) // r``), or None."""
    target: list[int] = []
    source: list[int] = []
    for axis, size in enumerate(shape):
        if axis not in indices:
            target.append(size)
            source.append(size)
            continue
        out_size = out_shape[axis]
        if size == 0 or out_size % size:
            return None
        ratio = out_size // size
        if not np.array_equal(indices[axis], np.arange(out_size) // ratio):
            return None
        target += [size, ratio]
        source += [size, 1]
    return tuple(target), tuple(source)


def _bilinear_fast_path(node: Node, in_shape: tuple[int, ...], out_shape: list[int],
                        factors: list[float], resized: list[int]) -> Optional[tuple[Any, ...]]:
    """(nhwc, output size, align_corners, scales) when torch's bilinear kernel computes
    the reference's positions for this shape (in float32 where the reference uses
    float64: within float32's tolerance, not bit for bit), else None."""
    if len(in_shape) != 4:
        return None
    if set(resized) <= {2, 3}:
        nhwc, spatial = False, (2, 3)
    elif set(resized) <= {1, 2}:
        nhwc, spatial = True, (1, 2)
    else:
        return None
    mapping = node.attrs["coordinate_transformation_mode"]
    if mapping not in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        return None
    scales: list[Optional[float]] = []
    for axis in spatial:
        in_size, out_size, factor = in_shape[axis], out_shape[axis], factors[axis]
        if axis not in resized:
            scales.append(1.0)
            continue
        if out_size < 2 or in_size < 1:  # pytorch_half_pixel maps a single cell to 0
            return None
        if mapping == "align_corners" and factor * in_size != out_size:
            return None  # ONNX's align_corners divides by the fractional output length
        scales.append(None if mapping == "align_corners" else factor)
    size = [out_shape[axis] for axis in spatial]
    return nhwc, size, mapping == "align_corners", scales


def _bind_resize(node: Node) -> Binding:
    import torch

    attrs = node.attrs
    linear = attrs["mode"] == "linear"
    mapping, rounding = attrs["coordinate_transformation_mode"], attrs["nearest_mode"]
    _, scales = _nonempty_const(node, 2)
    _, sizes = _nonempty_const(node, 3)
    chosen = _resized_axes(node)
    plans: dict[tuple[int, ...], _ResizePlan] = {}
    index_select, add = torch.index_select, torch.add
    bilinear = torch.ops.aten.upsample_bilinear2d.out

    def plan(shape: tuple[int, ...]) -> _ResizePlan:
        out_shape, factors = list(shape), [1.0] * len(shape)
        if sizes is not None:
            for axis, size in zip(chosen, sizes.reshape(-1).tolist()):
                factors[axis] = int(size) / shape[axis] if shape[axis] else 1.0
                out_shape[axis] = int(size)
        else:
            assert scales is not None
            for axis, scale in zip(chosen, scales.reshape(-1).tolist()):
                factors[axis] = float(scale)
                out_shape[axis] = int(math.floor(float(scale) * shape[axis]))
        resized = [axis for axis in chosen
                   if not (out_shape[axis] == shape[axis] and factors[axis] == 1.0)]
        fast = _bilinear_fast_path(node, shape, out_shape, factors, resized) \
            if linear and resized else None
        steps: list[tuple[Any, ...]] = []
        gathers: dict[int, np.ndarray] = {}
        for axis in resized if fast is None else []:
            in_size, out_size = shape[axis], out_shape[axis]
            position = _source_positions(mapping, out_size, in_size, factors[axis])
            if not linear:
                gathers[axis] = _nearest(position, rounding, in_size)
                steps.append((axis, torch.from_numpy(gathers[axis])))
                continue
            base = np.floor(position)
            taps = []
            for offset in (0, 1):
                where = base + offset
                weight = np.clip(1.0 - np.abs(where - position), 0.0, 1.0).astype(np.float32)
                weight = weight.reshape((out_size,) + (1,) * (len(shape) - axis - 1))
                index = np.clip(where, 0, in_size - 1).astype(np.int64)
                taps.append((torch.from_numpy(index), torch.from_numpy(weight)))
            steps.append((axis, *taps[0], *taps[1]))
        repeat = _repeat_views(shape, out_shape, resized, gathers) \
            if gathers and len(gathers) == len(resized) else None
        entry = _ResizePlan(tuple(out_shape), steps, fast, repeat)
        plans[shape] = entry
        return entry

    def make(fresh: Fresh) -> Writer:
        source_of, target_of = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            source = inputs[0]
            assert source is not None
            entry = plans.get(source.shape) or plan(source.shape)
            x, out = source_of(source), target_of(outs[0])
            if entry.repeat is not None:
                split, spread = entry.repeat
                out.view(split).copy_(x.view(spread).expand(split))
                return
            if entry.fast is not None:
                nhwc, size, align, (scale_h, scale_w) = entry.fast
                if nhwc:
                    x, out = x.permute(0, 3, 1, 2), out.permute(0, 3, 1, 2)
                bilinear(x, size, align, scale_h, scale_w, out=out)
                return
            if not entry.steps:
                out.copy_(x)
                return
            last = len(entry.steps) - 1
            for number, step in enumerate(entry.steps):
                target = out if number == last else None
                if not linear:
                    axis, index = step
                    if target is None:
                        x = index_select(x, axis, index)
                    else:
                        index_select(x, axis, index, out=target)
                    continue
                axis, low, low_weight, high, high_weight = step
                first = index_select(x, axis, low)
                first.mul_(low_weight)
                second = index_select(x, axis, high)
                second.mul_(high_weight)
                if target is None:
                    x = first.add_(second)
                else:
                    add(first, second, out=target)

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        source = inputs[0]
        assert source is not None
        entry = plans.get(source.shape) or plan(source.shape)
        return [(entry.shape, _F32)]

    return make_binding(make, shapes)


# -- Cast -------------------------------------------------------------------------------

_CAST_FROM_FLOAT32 = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT32,
                      DataType.DT_INT64, DataType.DT_BOOL)
_CAST_TO_FLOAT32 = _CAST_FROM_FLOAT32 + (DataType.DT_INT8, DataType.DT_INT16,
                                         DataType.DT_UINT8)


def _check_cast(node: Node) -> bool:
    source, target = _value(node, 0).dtype, node.outputs[0].dtype
    if source is FLOAT32:
        return target in _CAST_FROM_FLOAT32
    return target is FLOAT32 and source in _CAST_TO_FLOAT32


def _bind_cast(node: Node) -> Binding:
    import torch

    dtype = node.outputs[0].dtype.np_dtype
    # torch converts bool slowly (0.12 ms for 409,600 values) and uint8 fast (0.02): a
    # bool is one byte, 0 or 1, so its bytes are read as uint8
    from_bool = _value(node, 0).dtype is DataType.DT_BOOL

    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            given = source(inputs[0])
            target(outs[0]).copy_(given.view(torch.uint8) if from_bool else given)

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        return [(_like_input(inputs)[0][0], dtype)]

    return make_binding(make, shapes)


# -- TopK -------------------------------------------------------------------------------

def _check_top_k(node: Node) -> bool:
    return (_value(node, 0).dtype is FLOAT32 and node.outputs[0].dtype is FLOAT32
            and node.outputs[1].dtype is DataType.DT_INT64 and _rank(node) >= 1
            and _value(node, 1).dtype in (DataType.DT_INT64, DataType.DT_INT32))


#: at most this many elements, one stable sort costs less than the selection and the
#: calls that put it in order (k=5 of 1,000: 0.05 against 0.09 ms; torch's stable sort
#: of 8,400 took 0.5 ms, the selection 0.12)
SMALL_TOP_K_ELEMENTS = 1 << 11


def _exact_top_k(x: Any, k: int, axis: int, largest: bool) -> Optional[tuple[Any, Any]]:
    """The k best along ``axis`` by torch's selection (linear in the axis, where a full
    sort of 30,000 logits per row took 16 ms against 0.4), in the reference's order
    (equal values by index), or None when the selection may differ from the stable
    sort's: a NaN k-th, or a value equal to the k-th left out of the selection (which
    equal values a selection keeps is unspecified)."""
    import torch

    if k == 0 or k >= x.shape[axis] or x.numel() <= SMALL_TOP_K_ELEMENTS:
        return None
    # one more than asked: when the (k+1)-th differs from the k-th, every value equal to
    # the k-th is inside (torch ranks NaN as the largest, as the sort does; a NaN k-th
    # could be any of the NaNs)
    values, indices = torch.topk(x, k + 1, dim=axis, largest=largest, sorted=True)
    edge = values.narrow(axis, k - 1, 1)
    if bool(torch.isnan(edge).any()) or bool((edge == values.narrow(axis, k, 1)).any()):
        return None
    values, indices = values.narrow(axis, 0, k), indices.narrow(axis, 0, k)
    # equal values inside the selection in index order: by index, then a stable sort
    indices, by_index = torch.sort(indices, dim=axis)
    values, by_value = torch.sort(values.gather(axis, by_index), dim=axis,
                                  descending=largest, stable=True)
    return values, indices.gather(axis, by_value)


def _bind_top_k(node: Node) -> Binding:
    import torch

    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    descending = bool(node.attrs["largest"])
    sort = torch.sort

    def count(inputs: Arrays) -> int:
        given = inputs[1]
        assert given is not None
        return int(given.reshape(-1)[0])

    def make(fresh: Fresh) -> Writer:
        source, values_of, indices_of = fresh(), fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            k = count(inputs)
            x = source(inputs[0])
            if not 0 <= k <= x.shape[axis]:
                raise ValueError(f"k={k} is out of range for axis {axis} of size {x.shape[axis]}")
            picked = _exact_top_k(x, k, axis, descending)
            if picked is None:
                # a stable sort: equal values keep their index order; NaN sorts as the
                # largest
                values, indices = sort(x, dim=axis, descending=descending, stable=True)
                picked = values.narrow(axis, 0, k), indices.narrow(axis, 0, k)
            values_of(outs[0]).copy_(picked[0])
            indices_of(outs[1]).copy_(picked[1])

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        shape = list(_like_input(inputs)[0][0])
        shape[axis] = count(inputs)
        return [(tuple(shape), _F32), (tuple(shape), np.dtype(np.int64))]

    return make_binding(make, shapes)


# -- GatherElements ---------------------------------------------------------------------

_GATHER_DATA = (FLOAT32, DataType.DT_INT64, DataType.DT_INT32)


def _check_gather_elements(node: Node) -> bool:
    return (_value(node, 0).dtype in _GATHER_DATA and _rank(node) >= 1
            and _value(node, 1).dtype in (DataType.DT_INT64, DataType.DT_INT32))


def _bind_gather_elements(node: Node) -> Binding:
    import torch

    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    gather, where = torch.gather, torch.where
    dtype = _value(node, 0).dtype.np_dtype

    def make(fresh: Fresh) -> Writer:
        source, positions_of, target = fresh(), fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            data, positions = source(inputs[0]), positions_of(inputs[1])
            size = data.shape[axis]
            given = inputs[1]
            assert given is not None
            if given.size:
                low, high = int(given.min()), int(given.max())  # NumPy's: quicker calls
                if low < -size or high >= size:
                    bad = low if low < -size else high
                    raise IndexError(f"GatherElements: index {bad} is out of range for a "
                                     f"dimension of size {size}")
                if low < 0:  # counted from the end
                    positions = where(positions < 0, positions + size, positions)
            gather(data, axis, positions.long(), out=target(outs[0]))

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        positions = inputs[1]
        assert positions is not None
        return [(positions.shape, dtype)]

    return make_binding(make, shapes)


# -- Split ------------------------------------------------------------------------------

#: the element types Split copies here (torch has them all)
_SPLIT_DATA = (FLOAT32, DataType.DT_FLOAT16, DataType.DT_INT64, DataType.DT_INT32,
               DataType.DT_BOOL)


def _split_sizes(node: Node) -> Optional[Callable[[int], list[int]]]:
    """The sizes of the pieces for a given length of the axis, or None when the sizes
    are an input known only at run time."""
    if _present(node, 1):
        given = const_array(node, 1)
        if given is None:
            return None
        sizes = [int(v) for v in given.reshape(-1)]
        return lambda length: sizes
    parts = int(node.attrs["num_outputs"])
    return lambda length: chunk_sizes(length, parts)


def _check_split(node: Node) -> bool:
    # a small split is a few NumPy copies, cheaper than torch's calls
    size = known_size(_value(node, 0).shape)
    return (_value(node, 0).dtype in _SPLIT_DATA and _rank(node) >= 1
            and _split_sizes(node) is not None
            and (size is None or size >= elementwise.CHEAP_MIN_ELEMENTS))


def _bind_split(node: Node) -> Binding:
    axis = normalize_axis(int(node.attrs["axis"]), _rank(node))
    sizes_for = _split_sizes(node)
    assert sizes_for is not None
    dtype = _value(node, 0).dtype.np_dtype

    def sizes(x: np.ndarray) -> list[int]:
        found = sizes_for(x.shape[axis])
        if sum(found) != x.shape[axis] or any(v < 0 for v in found):
            raise ValueError(f"split sizes {found} do not add up to dimension {axis} of "
                             f"{list(x.shape)}")
        return found

    def make(fresh: Fresh) -> Writer:
        source = fresh()
        targets = [fresh() for _ in node.outputs]

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x = inputs[0]
            assert x is not None
            data = source(x)
            start = 0
            for size, target, out in zip(sizes(x), targets, outs):
                target(out).copy_(data.narrow(axis, start, size))
                start += size

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        x = inputs[0]
        assert x is not None
        found = []
        for size in sizes(x):
            shape = list(x.shape)
            shape[axis] = size
            found.append((tuple(shape), dtype))
        return found

    return make_binding(make, shapes)


# -- CumSum -----------------------------------------------------------------------------

def _check_cumsum(node: Node) -> bool:
    axis = const_array(node, 1)
    return float32_node(node, (0,)) and _rank(node) >= 1 and axis is not None and axis.size == 1


def _bind_cumsum(node: Node) -> Binding:
    import torch

    given = const_array(node, 1)
    assert given is not None
    axis = normalize_axis(int(given.reshape(-1)[0]), _rank(node))
    exclusive, reverse = bool(node.attrs["exclusive"]), bool(node.attrs["reverse"])
    cumsum = torch.cumsum

    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x, out = source(inputs[0]), target(outs[0])
            if not (exclusive or reverse):
                cumsum(x, axis, out=out)
                return
            length = x.shape[axis]
            if length == 0:
                return
            if reverse:
                x = x.flip(axis)
            if exclusive:
                result = torch.zeros_like(x)
                head = cumsum(x.narrow(axis, 0, length - 1), axis)
                result.narrow(axis, 1, length - 1).copy_(head)
            else:
                result = cumsum(x, axis)
            out.copy_(result.flip(axis) if reverse else result)

        return writer

    return make_binding(make, _like_input)


# -- reductions -------------------------------------------------------------------------

def _reduce_axes(node: Node) -> tuple[bool, Optional[list[int]]]:
    """(known, axes): the normalized axes to reduce, None for 'return x unchanged';
    ``known`` is False when the axes are not constant."""
    rank = _rank(node)
    if _present(node, 1):
        given = const_array(node, 1)
        if given is None:
            return False, None
        listed = [int(a) for a in given.reshape(-1)]
    else:
        listed = []
    if not listed:
        return True, None if node.attrs["noop_with_empty_axes"] else list(range(rank))
    return True, normalize_axes(listed, rank)


def _check_reduce(node: Node) -> bool:
    if not float32_node(node, (0,)):
        return False
    try:
        known, _ = _reduce_axes(node)
    except ValueError:
        return False
    return known


_EMPTY_REDUCTION = {"ReduceMax": -math.inf, "ReduceMin": math.inf}


def _bind_reduce(node: Node) -> Binding:
    import torch

    _, axes = _reduce_axes(node)
    keepdims = bool(node.attrs["keepdims"])
    functions: dict[str, Callable[..., Any]] = {
        "ReduceSum": torch.sum, "ReduceMean": torch.mean, "ReduceMax": torch.amax,
        "ReduceMin": torch.amin}
    function = functions[node.op_type]
    empty = _EMPTY_REDUCTION.get(node.op_type)

    def make(fresh: Fresh) -> Writer:
        source, target = fresh(), fresh()

        def writer(inputs: Arrays, outs: Sequence[np.ndarray]) -> None:
            x, out = source(inputs[0]), target(outs[0])
            if axes is None:
                out.copy_(x)
            elif empty is not None and x.numel() == 0:
                out.fill_(empty)  # torch refuses an empty max; ONNX gives the identity
            else:
                function(x, axes, keepdims, out=out)

        return writer

    def shapes(inputs: Arrays) -> list[tuple[tuple[int, ...], np.dtype]]:
        shape = _like_input(inputs)[0][0]
        if axes is None:
            return [(shape, _F32)]
        kept = tuple(1 if axis in axes else size for axis, size in enumerate(shape)
                     if keepdims or axis not in axes)
        return [(kept, _F32)]

    return make_binding(make, shapes)


# -- registration -----------------------------------------------------------------------

_BINDS: dict[str, tuple[Callable[[Node], bool], Callable[[Node], Binding]]] = {
    "Softmax": (_check_softmax, _bind_softmax),
    "LogSoftmax": (_check_softmax, _bind_softmax),
    "LayerNormalization": (_check_layer_norm, _bind_layer_norm),
    "RMSNormalization": (_check_rms_norm, _bind_rms_norm),
    "InstanceNormalization": (_check_instance_norm, _bind_channel_norm),
    "GroupNormalization": (_check_group_norm, _bind_channel_norm),
    "Attention": (_check_attention, _bind_attention),
    "Resize": (_check_resize, _bind_resize),
    "Cast": (_check_cast, _bind_cast),
    "TopK": (_check_top_k, _bind_top_k),
    "GatherElements": (_check_gather_elements, _bind_gather_elements),
    "Split": (_check_split, _bind_split),
    "CumSum": (_check_cumsum, _bind_cumsum),
    "ReduceSum": (_check_reduce, _bind_reduce),
    "ReduceMean": (_check_reduce, _bind_reduce),
    "ReduceMax": (_check_reduce, _bind_reduce),
    "ReduceMin": (_check_reduce, _bind_reduce),
}

for _op_type, (_check, _bind) in _BINDS.items():
    if has_op(_op_type):
        register((_op_type,), _check, _bind)
