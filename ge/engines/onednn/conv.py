"""Convolutions and pooling as oneDNN primitives written into the memory plan's arena.

``Conv2D`` and ``FusedConv2D`` (dense, grouped, depthwise; NHWC or NCHW; any padding,
asymmetric included; dilation) are one convolution primitive per input shape: the filter
is packed once into the layout the chosen kernel reads, the bias, a residual add and
the activation (an eltwise post-op) run inside the kernel, and the result is written
straight into the node's slot of the arena. The memory plan may give the output the
residual's own bytes when the residual dies there (``OneDNNEngine.inplace_input``): a
sum post-op then adds what they hold; otherwise a binary post-op reads the residual
where it lies (30-40 % slower on ResNet-50's large 1x1 convolutions at batch 8).
``MaxPool`` and ``AvgPool`` on 2-D windows, and ``GlobalAveragePool`` and
``GlobalMaxPool`` over a 2-D plane (a window the plane's size), are pooling primitives.

An NCHW convolution runs oneDNN's channels-last kernels between two reorders: the input
(and a residual) copied into channels-last scratch, the result copied back. oneDNN's own
kernels for plain NCHW are GEMM-based, and measured on a 2-core AVX-512 machine they
take 2.1 ms on a ResNet-50 3x3 convolution at batch 1 (1.0 ms channels-last, 0.03 ms
for each reorder) and 3.2 ms on a 1x1 one adding a residual (0.5 ms). The scratch is
two buffers per thread, shared by every NCHW convolution the thread runs, the size of
the largest input and output among them; it lives outside the memory plan.

The primitive for an input shape is made at the first run with it (oneDNN's JIT
generates the kernel then: a few milliseconds) and kept; a later run costs a ctypes call
and the data pointers that changed. A convolution of ``tuning.MIN_FLOPS`` or more makes
oneDNN's candidate kernels for it and keeps the fastest on that first run's input
(``tuning``). A configuration oneDNN refuses runs on the next
engine that takes the node (torch, else NumPy), as does a residual whose shape is not
the output's.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.fused import activation as fast_activation
from ge.engines.onednn import _lib, tuning, winograd
from ge.errors import ExecutionError, UnsupportedOpError
from ge.ir import DataType, Format, Node
from ge.ops.nn import resolve_window
from ge.ops.nn_window import Window, plan_axis

__all__ = ["check_conv", "bind_conv", "check_pool", "bind_pool", "check_global_pool",
           "bind_global_pool", "ACTIVATIONS"]

#: FusedConv2D's activations as oneDNN eltwise post-ops: attrs -> (algorithm, alpha, beta)
ACTIVATIONS: dict[str, Callable[[dict[str, Any]], tuple[str, float, float]]] = {
    "Relu": lambda attrs: ("relu", 0.0, 0.0),
    "Relu6": lambda attrs: ("clip", 0.0, 6.0),
    "Clip": lambda attrs: ("clip", float(attrs["clip_min"]), float(attrs["clip_max"])),
    "LeakyRelu": lambda attrs: ("relu", float(attrs["alpha"]), 0.0),
    "Sigmoid": lambda attrs: ("logistic", 0.0, 0.0),
    "Tanh": lambda attrs: ("tanh", 0.0, 0.0),
    "HardSwish": lambda attrs: ("hardswish", 1.0 / 6.0, 0.5),
    "Swish": lambda attrs: ("swish", 1.0, 0.0),
}

#: FusedConv2D's activations run after the convolution by the fused engine's kernel
_AFTER = {"Sigmoid": "sigmoid", "Swish": "swish", "Tanh": "tanh"}

_F32 = DataType.DT_FLOAT


def _float32(node: Node, indices: Sequence[int]) -> bool:
    values = [node.inputs[i] for i in indices if i < len(node.inputs)]
    return all(v.dtype is _F32 for v in node.outputs) and all(
        v is None or v.dtype is _F32 for v in values)


def _const(node: Node, index: int) -> Optional[np.ndarray]:
    """Input ``index`` when a constant feeds it (its data unread until binding)."""
    value = node.inputs[index] if index < len(node.inputs) else None
    producer = None if value is None else value.producer
    if producer is None or producer.op_type != "Const" or producer.attrs.get("value") is None:
        return None
    return producer.attrs["value"].numpy()


def _is_const(node: Node, index: int) -> bool:
    value = node.inputs[index] if index < len(node.inputs) else None
    producer = None if value is None else value.producer
    return producer is not None and producer.op_type == "Const" \
        and producer.attrs.get("value") is not None


def _rank(node: Node, index: int) -> int:
    value = node.inputs[index] if index < len(node.inputs) else None
    return -1 if value is None else len(value.shape)


def check_conv(node: Node) -> bool:
    """True when the node is a 2-D float32 convolution with constant filter and bias and
    an activation oneDNN fuses."""
    if not _float32(node, (0, 2, 3)) or _rank(node, 0) != 4:
        return False
    if node.attrs["data_format"] not in (Format.NHWC, Format.NCHW):
        return False
    if not _is_const(node, 1) or _rank(node, 1) != 4:
        return False
    if len(node.inputs) > 2 and node.inputs[2] is not None and not _is_const(node, 2):
        return False
    activation = node.attrs.get("activation", "") or ""
    if activation and activation not in ACTIVATIONS:
        return False
    if activation == "Clip" and (node.attrs.get("clip_min") is None
                                 or node.attrs.get("clip_max") is None):
        return False
    try:
        resolve_window(node.attrs)
    except ValueError:
        return False
    return True


def _filter_oihw(node: Node) -> np.ndarray:
    weights = _const(node, 1)
    assert weights is not None
    chosen = node.attrs.get("filter_format") or (
        "OIHW" if node.attrs["data_format"] is Format.NCHW else "HWIO")
    oihw = weights if chosen == "OIHW" else weights.transpose(3, 2, 0, 1)
    return np.ascontiguousarray(oihw, dtype=np.float32)


def _padding(window: Window, height: int, width: int, kh: int, kw: int
             ) -> tuple[list[int], list[int]]:
    rows, cols = plan_axis(window, 0, height, kh), plan_axis(window, 1, width, kw)
    return [rows.pad_begin, cols.pad_begin], [rows.pad_end, cols.pad_end]


#: the axes of an NHWC array in oneDNN's logical order (N, C, H, W)
_NCHW_OF_NHWC = (0, 3, 1, 2)


class _Fallback:
    """The node's writer on the next engine that takes it, bound at first need. A node
    whose shapes are known only at run time may come here at every run (an elementwise
    op too small for oneDNN): after the first call, a call costs one indirection."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.bound: Optional[BoundNode] = None
        self._write: Optional[Callable[[Sequence[Optional[np.ndarray]],
                                        Sequence[np.ndarray]], None]] = None

    def _bound(self) -> BoundNode:
        if self.bound is None:
            from ge.engines import get_engine

            names = [n for n in ("torch", "numpy") if get_engine(n).supports(self.node)]
            self.bound = get_engine(names[0]).bind_node(self.node)
        return self.bound

    def __call__(self, inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]
                 ) -> None:
        write = self._write
        if write is None:
            bound = self._bound()
            write = self._write = bound.writer or functools.partial(_copy_out, bound.kernel)
        write(inputs, outs)

    def kernel(self, inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        """The next engine's kernel: fresh outputs of the shapes it finds."""
        return list(self._bound().kernel(inputs))

    def or_run(self, primitive: Optional[_lib.Primitive], x: np.ndarray, out: np.ndarray,
               inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        """Run ``primitive`` from ``x`` into ``out``; without one, the next engine's
        writer on the node's own inputs and outputs."""
        if primitive is None:
            self(inputs, outs)
        else:
            primitive.run_arrays((x, out))


def _copy_out(kernel: Callable[[Sequence[Optional[np.ndarray]]], Sequence[np.ndarray]],
              inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
    """A kernel that allocates its outputs, run as a writer into ``outs``."""
    for out, value in zip(outs, kernel(inputs)):
        np.copyto(out, value)


_scratch = threading.local()


def _channels_last(shape: Sequence[int], slot: int) -> np.ndarray:
    """A logical NCHW array of ``shape`` laid out NHWC, in the calling thread's scratch
    buffer ``slot`` (0: an input, 1: an output), grown as needed and shared by the NCHW
    convolutions the thread runs one after another."""
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = [np.empty(0, np.float32), np.empty(0, np.float32)]
    size = math.prod(shape)
    if buffers[slot].size < size:
        buffers[slot] = np.empty(size, np.float32)
    batch, channels, height, width = shape
    return buffers[slot][:size].reshape(batch, height, width, channels).transpose(0, 3, 1, 2)


def _reorder(source: np.ndarray, dest: np.ndarray, what: str) -> _lib.Primitive:
    """A copy of arrays like ``source`` into arrays like ``dest`` (same logical shape,
    any strides) as a oneDNN reorder."""
    source_desc, dest_desc = _lib.Desc.of(source), _lib.Desc.of(dest)
    return _lib.made(_lib.reorder_desc(source_desc, dest_desc),
                     _lib.source_dest(source_desc.handle, dest_desc.handle), what)


#: making a candidate's primitive from a descriptor: (primitive, what it made for it alone)
_Build = Callable[[Any], tuple[_lib.Primitive, Optional[np.ndarray]]]


def _same_bits_either_way(x: np.ndarray, residual: np.ndarray, in_place: bool,
                          other: tuple[Callable[[], Any], _Build]
                          ) -> Callable[[str, _lib.Primitive], bool]:
    """For a convolution that adds a residual: whether a candidate kernel computes the
    same bits with the residual summed in place and read where it lies (``other``
    makes the form the node does not run now). Some do not (oneDNN 3.2's
    ``jit:avx2`` rounds the two differently), and a partition or a memory plan that
    moves the residual must not change a result."""

    def agrees(name: str, primitive: _lib.Primitive) -> bool:
        twin = tuning.build_named(*other, name)[0]
        if twin.impl != name:
            return False
        outputs = []
        for kernel, summed in ((primitive, in_place), (twin, not in_place)):
            out = np.array(residual) if summed else np.empty_like(residual)
            kernel.run_arrays((x, out) if summed else (x, out, residual))
            outputs.append(out)
        return bool(np.array_equal(outputs[0], outputs[1], equal_nan=True))

    return agrees


def _dense_channels_last(a: np.ndarray) -> bool:
    """Whether logical NCHW array ``a`` lies in memory as a dense NHWC array."""
    return a.transpose(0, 2, 3, 1).flags.c_contiguous


def _own_kernels(oihw: np.ndarray, bias: Optional[np.ndarray], x: np.ndarray, out: np.ndarray,
                 residual: Optional[np.ndarray], in_place: bool, axes: Sequence[int],
                 window: Window, begin: Sequence[int], end: Sequence[int],
                 eltwise: Optional[tuple[str, float, float]], groups: int
                 ) -> tuple[tuning.Own, ...]:
    """GE's own kernels for a convolution, candidates beside oneDNN's (``tuning.Own``):
    the Winograd F(4x4, 3x3) kernel where it applies to the convolution and its arrays
    are dense channels-last (``x``, ``out`` and ``residual``, seen in NCHW order through
    ``axes``). ``in_place``: the residual is summed where ``out`` holds it."""
    if groups != 1 or not winograd.available():
        return ()
    shape = [out.shape[a] for a in axes]
    if not winograd.applies(oihw.shape, window.strides, window.dilations, begin, end, eltwise,
                            winograd.tiles(shape[0], shape[2], shape[3])):
        return ()
    arrays = [a for a in (x, out, None if in_place else residual) if a is not None]
    if not all(_dense_channels_last(a.transpose(axes)) for a in arrays):
        return ()
    batch, channels, height, width = (x.shape[a] for a in axes)
    form = "" if residual is None else "in place" if in_place else "apart"

    def make() -> winograd.Winograd:
        return winograd.Winograd(oihw, bias, (batch, height, width, channels), begin, end,
                                 eltwise, form)

    def fresh() -> tuple[np.ndarray, ...]:
        """The operands of one checking run: an output that starts as the residual when
        it is summed in place (the bytes the output has now)."""
        start = np.array(out) if in_place else np.empty_like(out)
        if form == "apart":
            assert residual is not None
            return x, start, residual
        return x, start

    def check(kernel: Any, reference: Any) -> bool:
        return winograd.agrees(kernel, reference, fresh)

    return (tuning.Own(winograd.NAME, make, check, winograd.forced()),)


def bind_conv(node: Node) -> BoundNode:
    oihw = _filter_oihw(node)
    bias_data = _const(node, 2)
    bias = None if bias_data is None else np.ascontiguousarray(bias_data, dtype=np.float32)
    window = resolve_window(node.attrs)
    groups = int(node.attrs["groups"])
    out_channels, in_per_group, kh, kw = (int(d) for d in oihw.shape)
    activation = node.attrs.get("activation", "") or ""
    eltwise = ACTIVATIONS[activation](node.attrs) if activation else None
    # a sigmoid, swish or tanh runs after the convolution, on the output in place, where
    # the fused engine's kernel is available: oneDNN's swish post-op is 3-4x slower (see
    # ``ge.engines.fused.activation``)
    after = _AFTER.get(activation) if fast_activation.available() else None
    if after is not None:
        eltwise = None
        fast_activation.record(f"{node.op_type} {node.name!r}: {after} after the convolution")
    has_residual = len(node.inputs) > 3 and node.inputs[3] is not None
    nhwc = node.attrs["data_format"] is Format.NHWC
    axes = _NCHW_OF_NHWC if nhwc else (0, 1, 2, 3)
    weight_dims = ([groups, out_channels // groups, in_per_group, kh, kw] if groups > 1
                   else [out_channels, in_per_group, kh, kw])
    weights = _lib.Packed(oihw.reshape(weight_dims))
    primitives = _lib.ShapeCache()
    reorders = _lib.ShapeCache()  # an NCHW convolution's, to and from channels-last scratch
    fallback = _Fallback(node)

    def make(x: np.ndarray, out: np.ndarray, residual: Optional[np.ndarray], in_place: bool
             ) -> Optional[_lib.Primitive]:
        logical = [x.shape[a] for a in axes]
        last = x.strides[axes[1]] == x.itemsize  # channels-last (an NHWC array, or scratch)
        begin, end = _padding(window, logical[2], logical[3], kh, kw)
        source, dest = _lib.Desc.of(x, axes=axes), _lib.Desc.of(out, axes=axes)
        bias_desc = None if bias is None else _lib.Desc([out_channels], [1])
        what = f"the convolution {node.name!r}"

        def form(summed: bool, added: bool) -> tuple[Callable[[], Any], _Build]:
            """Making the convolution whose residual is summed in place (a sum post-op)
            or ``added`` from where it lies (a binary one): a primitive descriptor at
            oneDNN's first pick, and the primitive of the one a descriptor stands at."""
            post = _lib.PostOps()
            operands = _lib.source_dest(source.handle, dest.handle)
            if summed:
                post.sum()
            elif added:  # the residual has the output's shape and (dense) strides
                other = _lib.Desc.of(out, axes=axes)
                index = post.binary_add(other)
                operands.append((_lib.post_op_arg(index, _lib.ARG_SRC_1), other.handle))
            if eltwise is not None:
                post.eltwise(*eltwise)

            def create() -> Any:
                return _lib.convolution(
                    source, _lib.Desc(weight_dims), bias_desc, dest, list(window.strides),
                    list(window.dilations), begin, end, post)[0]

            def build(pd: Any) -> tuple[_lib.Primitive, Optional[np.ndarray]]:
                weights_md = _lib.query_md(pd, "weights")
                layouts = weights.layouts
                packed = weights.like(weights_md)
                constants = [(_lib.ARG_WEIGHTS, weights_md, packed)]
                if bias is not None and bias_desc is not None:
                    constants.append((_lib.ARG_BIAS, bias_desc.handle, bias))
                made = _lib.Primitive(pd, operands, what, constants)
                return made, (packed if weights.layouts > layouts else None)

            return create, build

        create, build = form(in_place, residual is not None and not in_place)
        plane = out.shape[axes[2]] * out.shape[axes[3]]
        flops = 2.0 * x.shape[0] * plane * out_channels * in_per_group * kh * kw
        try:
            timing = flops >= tuning.MIN_FLOPS and tuning.enabled()
            # GE_WINOGRAD=1 takes the kernel wherever it applies, timed or not
            own = _own_kernels(oihw, bias, x, out, residual, in_place, axes, window,
                               begin, end, eltwise, groups) \
                if timing or winograd.forced() else ()
            if timing or any(kernel.forced for kernel in own):
                # timing writes a scratch output, made at the first timed run (a known
                # signature times nothing); a sum post-op's starts as the residual, which
                # the output's own bytes hold when in place and no timing run writes
                timed: list[tuple[np.ndarray, ...]] = []

                def run(candidate: _lib.Primitive) -> None:
                    if not timed:
                        scratch = np.array(out) if in_place else np.empty_like(out)
                        timed.append((x, scratch) if residual is None or in_place
                                     else (x, scratch, residual))
                    candidate.run_arrays(timed[0])

                agrees = None
                if residual is not None:
                    agrees = _same_bits_either_way(x, residual, in_place,
                                                   form(not in_place, in_place))
                # one kernel whether the residual is summed in place or read where it
                # lies: the memory plan's choice must not change the output's bits
                added = " +residual" if residual is not None else ""
                # GE's own candidates are part of the signature: a choice made without
                # one (for arrays it does not take) does not stand where it is offered
                key = (tuple(logical), last, tuple(weight_dims), window.strides,
                       window.dilations, tuple(begin), tuple(end), bias is None,
                       bool(added), eltwise, tuple(kernel.name for kernel in own))
                signature = (f"{'NHWC' if last else 'NCHW'} {logical} * {weight_dims} "
                             f"stride {list(window.strides)}{added}"
                             f"{' ' + eltwise[0] if eltwise else ''}")
                return tuning.fastest(create, build, run, key, signature, weights.forget,
                                      agrees, own)
            pd = create()
        except UnsupportedOpError:
            return None
        try:
            return build(pd)[0]
        finally:
            _lib.destroy(pd)

    def through_channels_last(x: np.ndarray, residual: Optional[np.ndarray], out: np.ndarray,
                              inputs: Sequence[Optional[np.ndarray]],
                              outs: Sequence[np.ndarray]) -> None:
        """The NCHW convolution as a channels-last one between reorders (the module's
        docstring); the residual, copied into the output's scratch, is summed there."""
        x_last, out_last = _channels_last(x.shape, 0), _channels_last(out.shape, 1)
        what = f"the convolution {node.name!r}'s reorder"
        # the copies first: a first run times its candidate kernels on them
        reorders.get_or_make(("in", x.shape, x.strides),
                             lambda: _reorder(x, x_last, what)).run_arrays((x, x_last))
        if residual is not None:  # read before the output, which may hold it, is written
            reorders.get_or_make(("residual", residual.shape, residual.strides),
                                 lambda: _reorder(residual, out_last, what)
                                 ).run_arrays((residual, out_last))
        key = ("channels-last", x.shape, residual is not None)
        primitive = primitives.get_or_make(key, lambda: make(
            x_last, out_last, None if residual is None else out_last, residual is not None))
        if primitive is None:
            fallback(inputs, outs)
            return
        primitive.run_arrays((x_last, out_last))
        reorders.get_or_make(("out", out.shape, out.strides),
                             lambda: _reorder(out_last, out, what)).run_arrays((out_last, out))
        if after is not None:
            fast_activation.apply(after, out, out)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        assert x is not None
        residual = inputs[3] if has_residual else None
        if residual is not None and residual.shape != out.shape:
            # the kernel would read past the residual
            raise ExecutionError(f"FusedConv2D node {node.name!r}: the residual has shape "
                                 f"{list(residual.shape)}, the output {list(out.shape)}")
        if not nhwc:
            through_channels_last(x, residual, out, inputs, outs)
            return
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        in_place = False
        if residual is not None:
            if not residual.flags.c_contiguous:
                residual = np.ascontiguousarray(residual)
            # the plan put the output over the residual: a sum post-op adds what the
            # output's bytes hold (oneDNN's binary add from elsewhere reads it 30-40 %
            # slower on large outputs)
            in_place = residual.ctypes.data == out.ctypes.data
        key: tuple[Any, ...] = (x.shape, in_place)
        primitive = primitives.get_or_make(key, lambda: make(x, out, residual, in_place))
        if primitive is None:
            if in_place:  # the next engine's writer must not read what it overwrites
                inputs = [*inputs[:3], np.array(residual), *inputs[4:]]
            fallback(inputs, outs)
            return
        if residual is None or in_place:
            primitive.run_arrays((x, out))
        else:
            primitive.run_arrays((x, out, residual))
        if after is not None:
            fast_activation.apply(after, out, out)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        shape = _output_shape(node, inputs)
        out = np.empty(shape, np.float32)
        writer(inputs, [out])
        return [out]

    def _output_shape(node: Node, inputs: Sequence[Optional[np.ndarray]]) -> tuple[int, ...]:
        x = inputs[0]
        assert x is not None
        logical = [x.shape[a] for a in axes]
        rows = plan_axis(window, 0, logical[2], kh)
        cols = plan_axis(window, 1, logical[3], kw)
        if nhwc:
            return (logical[0], rows.output, cols.output, out_channels)
        return (logical[0], out_channels, rows.output, cols.output)

    return BoundNode(kernel, writer)


# -- pooling ------------------------------------------------------------------------------

def _pool_kernel(node: Node) -> Optional[tuple[int, int]]:
    values = [int(k) for k in node.attrs.get("ksize") or ()]
    if len(values) == 4:  # [1, kh, kw, 1] or [1, 1, kh, kw]
        values = values[1:3] if node.attrs["data_format"] is Format.NHWC else values[2:4]
    return (values[0], values[1]) if len(values) == 2 else None


def check_pool(node: Node) -> bool:
    """True for a 2-D float32 max or average pool."""
    if not _float32(node, (0,)) or _rank(node, 0) != 4 or len(node.outputs) != 1:
        return False
    if node.attrs.get("data_format") not in (Format.NHWC, Format.NCHW):
        return False
    if _pool_kernel(node) is None:
        return False
    try:
        window = resolve_window(node.attrs, bool(node.attrs.get("ceil_mode", False)))
    except (ValueError, KeyError):
        return False
    return node.op_type == "MaxPool" or window.dilations == (1, 1)


def bind_pool(node: Node) -> BoundNode:
    kh, kw = _pool_kernel(node) or (1, 1)
    window = resolve_window(node.attrs, bool(node.attrs.get("ceil_mode", False)))
    if node.op_type == "MaxPool":
        algorithm = _lib.POOL_MAX
    else:
        algorithm = (_lib.POOL_AVG_INCLUDE if node.attrs.get("count_include_pad")
                     else _lib.POOL_AVG_EXCLUDE)

    def geometry(height: int, width: int) -> Optional[_PoolGeometry]:
        rows = plan_axis(window, 0, height, kh)
        cols = plan_axis(window, 1, width, kw)
        if (rows.overhang or cols.overhang) and algorithm == _lib.POOL_AVG_INCLUDE:
            return None  # the overhang of a ceil-mode window is never counted
        # a ceil-mode window's overhang is padding that max and exclude-padding averages
        # ignore as they ignore the declared padding
        return _PoolGeometry((rows.output, cols.output), list(window.strides), [kh, kw],
                             list(window.dilations), [rows.pad_begin, cols.pad_begin],
                             [rows.pad_end + rows.overhang, cols.pad_end + cols.overhang])

    return _pool_binding(node, algorithm, geometry)


class _PoolGeometry:
    """A pooling's output plane and oneDNN's window parameters for one input plane."""

    __slots__ = ("plane", "strides", "kernel", "dilations", "begin", "end")

    def __init__(self, plane: tuple[int, int], strides: list[int], kernel: list[int],
                 dilations: list[int], begin: list[int], end: list[int]) -> None:
        self.plane, self.strides, self.kernel = plane, strides, kernel
        self.dilations, self.begin, self.end = dilations, begin, end


def _pool_binding(node: Node, algorithm: int,
                  geometry: Callable[[int, int], Optional[_PoolGeometry]]) -> BoundNode:
    """A 2-D pooling node's binding (NHWC or NCHW): one primitive per input shape, the
    window from ``geometry(height, width)`` (None: the next engine runs that shape)."""
    nhwc = node.attrs["data_format"] is Format.NHWC
    axes = _NCHW_OF_NHWC if nhwc else (0, 1, 2, 3)
    primitives = _lib.ShapeCache()
    fallback = _Fallback(node)

    def make(x: np.ndarray, out: np.ndarray) -> Optional[_lib.Primitive]:
        found = geometry(*(x.shape[a] for a in axes[2:]))
        if found is None:
            return None
        source, dest = _lib.Desc.of(x, axes=axes), _lib.Desc.of(out, axes=axes)
        try:
            pd = _lib.pooling(algorithm, source, dest, found.strides, found.kernel,
                              found.dilations, found.begin, found.end)
        except UnsupportedOpError:
            return None
        what = f"the pooling {node.name!r}"
        return _lib.made(pd, _lib.source_dest(source.handle, dest.handle), what)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        assert x is not None
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        primitive = primitives.get_or_make(x.shape, lambda: make(x, out))
        fallback.or_run(primitive, x, out, inputs, outs)

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        batch, channels, height, width = (x.shape[a] for a in axes)
        found = geometry(height, width)
        if found is None:
            return fallback.kernel(inputs)
        rows, cols = found.plane
        shape = (batch, rows, cols, channels) if nhwc else (batch, channels, rows, cols)
        out = np.empty(shape, np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)


def check_global_pool(node: Node) -> bool:
    """True for a float32 ``GlobalAveragePool``/``GlobalMaxPool`` over 2-D (rank 4) input;
    the maximum only channels-last (oneDNN's NCHW one is half NumPy's speed on a large
    plane)."""
    layouts = (Format.NHWC,) if node.op_type == "GlobalMaxPool" else (Format.NHWC, Format.NCHW)
    return _float32(node, (0,)) and _rank(node, 0) == 4 and len(node.outputs) == 1 and \
        node.attrs.get("data_format") in layouts


def bind_global_pool(node: Node) -> BoundNode:
    """A pooling whose window is the whole plane."""
    algorithm = _lib.POOL_MAX if node.op_type == "GlobalMaxPool" else _lib.POOL_AVG_EXCLUDE

    def geometry(height: int, width: int) -> Optional[_PoolGeometry]:
        if height * width == 0:
            return None
        return _PoolGeometry((1, 1), [1, 1], [height, width], [1, 1], [0, 0], [0, 0])

    return _pool_binding(node, algorithm, geometry)
