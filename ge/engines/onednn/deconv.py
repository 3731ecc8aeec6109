"""ONNX's 2-D ``ConvTranspose`` as oneDNN's deconvolution, one set of primitives per
input shape.

The filter (ONNX's ``[C, M/group, kH, kW]``) is packed once per layout the kernel asks
for, read through a transposed view as oneDNN's ``[group, M/group, C/group, kH, kW]``;
a constant bias is added inside the kernel. oneDNN's deconvolution on NCHW data is a
slow GEMM path, so the kernel reads and writes the layouts it picks (channels-last
blocks), with a reorder from the input and one into the node's slot. ONNX's geometry
(``pads``, ``auto_pad``, ``output_shape``, ``output_padding``) becomes oneDNN's begin
and end padding: output padding is a negative end padding. Measured, reorders included:
over [1, 64, 40, 40] with a 2x2 stride-2 filter to 32 channels (a text detector's
upsampling) 0.21 ms where torch's product and strided copy took 0.28; 3x3 and 4x4
stride-2 filters 1.2-1.8x torch's speed.

A kernel that tiles its output (stride equal to its size, no padding, one group: the
2x2 stride-2 upsampling of detector heads) is a matrix product instead, [pixels, C] @
[C, M*kh*kw] read straight from the NCHW input, then one reorder of the tiles into the
output: 0.15 -> 0.11 ms over the case above (onnxruntime 0.10).

Taken: float32, 2-D (rank 4), a constant filter and bias (or none). A geometry oneDNN
refuses (an ``output_shape`` beyond the full output, which pads it), or a kernel that
would be oneDNN's slow reference code, runs on the next engine.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _const, _Fallback, _float32, _is_const, _rank
from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ops.nn_transpose import transpose_geometry

__all__ = ["check_conv_transpose", "bind_conv_transpose"]


def _reorder(source_md: Any, dest_md: Any, what: str) -> _lib.Primitive:
    pd = _lib.reorder_desc_md(source_md, dest_md)
    return _lib.made(pd, _lib.source_dest(source_md, dest_md), what)


class _Steps:
    """One input shape's three primitives: the input into the layout the kernel reads,
    the kernel, and its output back to NCHW in the node's slot."""

    __slots__ = ("out_shape", "main", "into", "out_of", "source_size", "dest_size")

    def __init__(self, out_shape: tuple[int, ...]) -> None:
        self.out_shape = out_shape
        self.main: Any = None
        self.into: Any = None
        self.out_of: Any = None
        self.source_size = self.dest_size = 0

    def buffers(self, scratch: threading.local) -> tuple[np.ndarray, np.ndarray]:
        """This thread's buffers for the blocked input and output (kept between runs)."""
        held = getattr(scratch, "held", None)
        if held is None or held[0].size < self.source_size or held[1].size < self.dest_size:
            held = scratch.held = (np.empty(self.source_size, np.float32),
                                   np.empty(self.dest_size, np.float32))
        return held


def check_conv_transpose(node: Node) -> bool:
    """True for a float32 2-D transposed convolution with constant filter and bias."""
    if not _float32(node, (0, 1, 2)) or len(node.outputs) != 1:
        return False
    if _rank(node, 0) != 4 or not _is_const(node, 1) or _rank(node, 1) != 4:
        return False
    has_bias = len(node.inputs) > 2 and node.inputs[2] is not None
    return not has_bias or _is_const(node, 2)


def bind_conv_transpose(node: Node) -> BoundNode:
    attrs = dict(node.attrs)
    filters = _const(node, 1)
    assert filters is not None
    filters = np.asarray(filters, np.float32)
    group = int(attrs["group"])
    in_channels, out_per_group, kh, kw = (int(d) for d in filters.shape)
    in_per_group = in_channels // group
    # [G*Cg, Mg, kh, kw] -> [G, Mg, Cg, kh, kw]: a view, read through its strides
    view = filters.reshape(group, in_per_group, out_per_group, kh, kw).transpose(0, 2, 1, 3, 4)
    weight_dims = [group, out_per_group, in_per_group, kh, kw] if group > 1 \
        else [out_per_group, in_per_group, kh, kw]
    weights = _lib.Packed(view if group > 1 else view[0])
    bias_data = _const(node, 2) if len(node.inputs) > 2 and node.inputs[2] is not None else None
    bias = None if bias_data is None else np.ascontiguousarray(bias_data, dtype=np.float32)
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    primitives = _lib.ShapeCache()
    scratch = threading.local()
    fallback = _Fallback(node)

    def geometry(shape: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
        """(output sizes, begin padding, end padding) in oneDNN's terms."""
        outputs, begins = transpose_geometry(attrs, list(shape[2:]), [kh, kw])
        natural = [s * (n - 1) + (k - 1) * d + 1
                   for n, k, s, d in zip(shape[2:], (kh, kw), strides, dilations)]
        ends = [f - o - b for f, o, b in zip(natural, outputs, begins)]
        return outputs, begins, ends

    tiles = group == 1 and strides == [kh, kw] and dilations == [1, 1]
    # [C, M, kh, kw] as one [C, M*kh*kw] matrix: every input pixel's tile of outputs
    tile_weights = _lib.Packed(filters.reshape(1, in_channels, -1)) if tiles else None
    tile_bias = None if bias is None else np.repeat(bias, kh * kw).reshape(1, 1, -1)

    def make_tiles(x: np.ndarray, out_shape: tuple[int, ...]) -> Any:
        """A kernel that tiles the output (its stride is its size, no padding): one
        matmul, [pixels, C] @ [C, M*kh*kw] read straight from the NCHW input, then one
        reorder of the tiles into the NCHW output."""
        assert tile_weights is not None
        batch, channels, height, width = x.shape
        pixels, columns = height * width, out_per_group * kh * kw
        source = _lib.Desc([batch, pixels, channels], [channels * pixels, 1, pixels])
        products = _lib.Desc.dense([batch, pixels, columns])
        bias_desc = None if tile_bias is None else _lib.Desc.dense([1, 1, columns])
        what = f"the transposed convolution {node.name!r}"
        try:
            pd, weights_md = _lib.matmul(source, _lib.Desc([1, channels, columns]), bias_desc,
                                         products, None)
        except UnsupportedOpError:
            return None
        steps = _Steps(out_shape)
        try:
            constants = [(_lib.ARG_WEIGHTS, weights_md, tile_weights.like(weights_md))]
            if tile_bias is not None and bias_desc is not None:
                constants.append((_lib.ARG_BIAS, bias_desc.handle, tile_bias))
            steps.main = _lib.Primitive(pd, _lib.source_dest(source.handle, products.handle),
                                        what, constants)
        finally:
            _lib.destroy(pd)
        # the products [N, H, W, M, kh, kw] read as the output's [N, M, H, kh, W, kw]
        dims = [batch, out_per_group, height, kh, width, kw]
        tiled = _lib.Desc(dims, [pixels * columns, kh * kw, width * columns, kw, columns, 1])
        placed = _lib.Desc.dense(dims)
        steps.out_of = _lib.made(_lib.reorder_desc(tiled, placed),
                                 _lib.source_dest(tiled.handle, placed.handle), what)
        steps.dest_size = batch * pixels * columns
        if steps.main.impl.startswith("ref") or steps.out_of.impl.startswith("ref"):
            return None
        return steps

    def make(x: np.ndarray) -> Any:
        """(the steps, output shape) for this input shape, or None for the next engine."""
        outputs, begins, ends = geometry(x.shape)
        if min(begins) < 0:
            return None
        out_shape = (x.shape[0], out_per_group * group, *outputs)
        if tiles and begins == [0, 0] and ends == [0, 0]:
            return make_tiles(x, out_shape)
        plain_in = _lib.Desc.of(x)
        plain_out = _lib.Desc.dense(out_shape)
        bias_desc = None if bias is None else _lib.Desc([len(bias)], [1])
        what = f"the transposed convolution {node.name!r}"
        try:  # the layouts left to oneDNN: its NCHW deconvolution is a slow GEMM path
            pd, weights_md = _lib.convolution(_lib.Desc(list(x.shape)), _lib.Desc(weight_dims),
                                              bias_desc, _lib.Desc(list(out_shape)), strides,
                                              dilations, begins, ends, None, transposed=True)
        except UnsupportedOpError:
            return None
        steps = _Steps(out_shape)
        try:
            source_md, dest_md = _lib.query_md(pd, "src"), _lib.query_md(pd, "dst")
            constants = [(_lib.ARG_WEIGHTS, weights_md, weights.like(weights_md))]
            if bias is not None and bias_desc is not None:
                constants.append((_lib.ARG_BIAS, bias_desc.handle, bias))
            steps.main = _lib.Primitive(pd, _lib.source_dest(source_md, dest_md),
                                        what, constants)
            steps.source_size = _lib.md_size(source_md) // 4
            steps.dest_size = _lib.md_size(dest_md) // 4
            steps.into = _reorder(plain_in.handle, source_md, what)
            steps.out_of = _reorder(dest_md, plain_out.handle, what)
        except UnsupportedOpError:
            return None
        finally:
            _lib.destroy(pd)
        if steps.main.impl.startswith("ref"):  # oneDNN's scalar reference: slower than torch
            return None
        return steps

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        assert x is not None
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        steps = primitives.get_or_make(x.shape, lambda: make(x))
        if steps is None or steps.out_shape != out.shape or not out.flags.c_contiguous:
            fallback(inputs, outs)
            return
        source, dest = steps.buffers(scratch)
        if steps.into is None:  # the tiling kernel reads the input where it lies
            steps.main.run_arrays((x, dest))
        else:
            steps.into.run_arrays((x, source))
            steps.main.run_arrays((source, dest))
        steps.out_of.run_arrays((dest, out))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        try:
            outputs, _, _ = geometry(x.shape)
        except ValueError:
            return fallback.kernel(inputs)  # the reference reports the bad geometry
        out = np.empty((x.shape[0], out_per_group * group, *outputs), np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)
