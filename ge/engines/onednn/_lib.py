"""oneDNN's C API through ctypes: the library, its CPU engine and stream, and primitives
built once and run many times.

The library is the one the ``onednn-cpu-gomp`` wheel installs (``libdnnl.so.3``, oneDNN
3.x built on GNU OpenMP) under the interpreter's prefix; ``GE_ONEDNN_LIBRARY`` names
another file. Its OpenMP runtime is found by soname, so that with PyTorch loaded (which
brings a ``libgomp.so.1`` of its own) both run on one thread pool.

Why not PyTorch's oneDNN: torch reaches it through ideep, which builds the primitive
descriptor again on every call (about 25 us, measured: a convolution whose kernel takes
3 us costs 30 us a call). A primitive made here once per input shape runs for the cost
of the ctypes call (about 1 us) plus setting the data pointers that changed.

The numbers below are oneDNN 3's C API (``dnnl_types.h``, ``dnnl_common_types.h``):
its ABI is stable within the major version, which the loader checks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.errors import ExecutionError, UnsupportedOpError

__all__ = ["library", "unavailable_reason", "version", "Primitive", "Desc", "PostOps",
           "convolution", "pooling", "matmul", "recurrence", "resampling", "softmax", "eltwise",
           "layer_normalization",
           "reorder", "reorder_desc", "reorder_desc_md", "Packed", "ShapeCache", "made",
           "source_dest", "pointer", "openmp_runtime",
           "F32", "ELTWISE", "POOL_MAX", "POOL_AVG_INCLUDE", "POOL_AVG_EXCLUDE", "BINARY_ADD",
           "BINARY_MUL", "BINARY_DIV", "BINARY_SUB", "MAX_DIMS", "binary",
           "ARG_SRC", "ARG_SRC_1", "ARG_DST", "ARG_WEIGHTS", "ARG_BIAS", "ARG_SCRATCHPAD",
           "ARG_WORKSPACE", "ARG_SCALE", "ARG_SHIFT", "ARG_SRC_ITER", "ARG_SRC_ITER_C",
           "ARG_DST_ITER", "ARG_DST_ITER_C", "ARG_WEIGHTS_ITER", "LEFT_TO_RIGHT",
           "RIGHT_TO_LEFT", "post_op_arg"]

LIBRARY_VARIABLE = "GE_ONEDNN_LIBRARY"

# -- the C API's numbers (oneDNN 3) -------------------------------------------------------
F32 = 3                      # dnnl_f32
_FORMAT_ANY = 1              # dnnl_format_tag_any
_CPU = 1                     # dnnl_cpu
_IN_ORDER = 1                # dnnl_stream_in_order
_FORWARD_INFERENCE = 96      # dnnl_forward_inference
_CONVOLUTION_DIRECT = 1      # dnnl_convolution_direct
_DECONVOLUTION_DIRECT = 0xa  # dnnl_deconvolution_direct
_SOFTMAX_ACCURATE = 0x30000  # dnnl_softmax_accurate
_RESAMPLING_NEAREST, _RESAMPLING_LINEAR = 0x2fff0, 0x2fff1  # dnnl_resampling_*
_USE_SCALE = 0x2             # dnnl_use_scale
_USE_SHIFT = 0x4             # dnnl_use_shift
_SCRATCHPAD_USER = 1         # dnnl_scratchpad_mode_user
_DATA_TYPE_UNDEF = 0         # dnnl_data_type_undef: a sum reads the destination's own type
_QUERY_IMPL_INFO = 8         # dnnl_query_impl_info_str
_QUERY_SRC_MD = 129
_QUERY_WEIGHTS_MD = 131
_QUERY_DST_MD = 133
_QUERY_WORKSPACE_MD = 135
_QUERY_SCRATCHPAD_MD = 136
#: GE's activation names -> oneDNN's eltwise algorithms
ELTWISE = {"relu": 0x20, "tanh": 0x21, "elu": 0x22, "abs": 0x24, "sqrt": 0x25,
           "linear": 0x26, "soft_relu": 0x27, "hardsigmoid": 0x28, "logistic": 0x29,
           "exp": 0x2a, "gelu_tanh": 0x2b, "swish": 0x2c, "log": 0x2d, "clip": 0x2e,
           "gelu_erf": 0x31, "mish": 0x33, "hardswish": 0x34}
POOL_MAX = 0x1ff
POOL_AVG_INCLUDE = 0x2ff
POOL_AVG_EXCLUDE = 0x3ff
BINARY_ADD, BINARY_MUL, BINARY_DIV, BINARY_SUB = 0x1fff0, 0x1fff1, 0x1fff4, 0x1fff5
#: the most dims a memory descriptor has (DNNL_MAX_NDIMS)
MAX_DIMS = 12
ARG_SRC, ARG_SRC_1, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 2, 17, 33, 41
ARG_WORKSPACE, ARG_SCRATCHPAD = 64, 80
#: a recurrence's states (its layers are ARG_SRC, ARG_DST and ARG_WEIGHTS)
ARG_SRC_ITER, ARG_SRC_ITER_C, ARG_DST_ITER, ARG_DST_ITER_C, ARG_WEIGHTS_ITER = 2, 3, 18, 19, 34
#: dnnl_rnn_direction_t
LEFT_TO_RIGHT, RIGHT_TO_LEFT = 1, 2
ARG_SCALE, ARG_SHIFT = 51, 52


def post_op_arg(index: int, arg: int) -> int:
    """The execute argument of post-op ``index``'s operand ``arg``
    (``DNNL_ARG_ATTR_MULTIPLE_POST_OP``)."""
    return (32768 * (index + 1)) | arg


_P = ctypes.c_void_p
_Dims = ctypes.c_int64 * 12  # dnnl_dims_t


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _P)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "dnnl_version": (ctypes.POINTER(_Version), []),
    "dnnl_engine_create": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_size_t]),
    "dnnl_stream_create": (ctypes.c_int, [_P, _P, ctypes.c_uint]),
    "dnnl_memory_desc_create_with_strides": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_int,
                                                            _P]),
    "dnnl_memory_desc_create_with_tag": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_int,
                                                        ctypes.c_int]),
    "dnnl_memory_desc_destroy": (ctypes.c_int, [_P]),
    "dnnl_memory_desc_clone": (ctypes.c_int, [_P, _P]),
    "dnnl_memory_desc_equal": (ctypes.c_int, [_P, _P]),
    "dnnl_memory_desc_get_size": (ctypes.c_size_t, [_P]),
    "dnnl_primitive_attr_create": (ctypes.c_int, [_P]),
    "dnnl_primitive_attr_destroy": (ctypes.c_int, [_P]),
    "dnnl_primitive_attr_set_scratchpad_mode": (ctypes.c_int, [_P, ctypes.c_int]),
    "dnnl_primitive_attr_set_post_ops": (ctypes.c_int, [_P, _P]),
    "dnnl_post_ops_create": (ctypes.c_int, [_P]),
    "dnnl_post_ops_destroy": (ctypes.c_int, [_P]),
    "dnnl_post_ops_append_eltwise": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_float,
                                                    ctypes.c_float]),
    "dnnl_post_ops_append_binary": (ctypes.c_int, [_P, ctypes.c_int, _P]),
    "dnnl_post_ops_append_sum": (ctypes.c_int, [_P, ctypes.c_float, ctypes.c_int32,
                                                ctypes.c_int]),
    "dnnl_convolution_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P]),
    "dnnl_deconvolution_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P]),
    "dnnl_pooling_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P]),
    "dnnl_matmul_primitive_desc_create": (ctypes.c_int, [_P, _P, _P, _P, _P, _P, _P]),
    "dnnl_eltwise_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, ctypes.c_float,
                       ctypes.c_float, _P]),
    "dnnl_binary_primitive_desc_create": (ctypes.c_int, [_P, _P, ctypes.c_int, _P, _P, _P, _P]),
    "dnnl_layer_normalization_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, _P, _P, _P, ctypes.c_float, ctypes.c_uint, _P]),
    "dnnl_softmax_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, ctypes.c_int, _P]),
    "dnnl_reorder_primitive_desc_create": (ctypes.c_int, [_P, _P, _P, _P, _P, _P]),
    "dnnl_resampling_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P]),
    "dnnl_lstm_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int] + [_P] * 11 + [ctypes.c_uint, _P]),
    "dnnl_gru_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int] + [_P] * 7 + [ctypes.c_uint, _P]),
    "dnnl_lbr_gru_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int] + [_P] * 7 + [ctypes.c_uint, _P]),
    "dnnl_primitive_desc_query": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int, _P]),
    "dnnl_primitive_desc_query_md": (_P, [_P, ctypes.c_int, ctypes.c_int]),
    "dnnl_primitive_desc_next_impl": (ctypes.c_int, [_P]),
    "dnnl_primitive_desc_destroy": (ctypes.c_int, [_P]),
    "dnnl_primitive_create": (ctypes.c_int, [_P, _P]),
    "dnnl_primitive_destroy": (ctypes.c_int, [_P]),
    "dnnl_memory_create": (ctypes.c_int, [_P, _P, _P, _P]),
    "dnnl_memory_destroy": (ctypes.c_int, [_P]),
    "dnnl_memory_set_data_handle": (ctypes.c_int, [_P, _P]),
    "dnnl_primitive_execute": (ctypes.c_int, [_P, _P, ctypes.c_int, _P]),
    "dnnl_stream_wait": (ctypes.c_int, [_P]),
}

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _candidates() -> list[str]:
    chosen = os.environ.get(LIBRARY_VARIABLE, "").strip()
    if chosen:
        return [chosen]
    found = [os.path.join(prefix, "lib", "libdnnl.so.3")
             for prefix in dict.fromkeys((sys.prefix, sys.base_prefix))]
    by_search = ctypes.util.find_library("dnnl")
    return found + ([by_search] if by_search else [])


def _load() -> None:
    """Load the library once: ``_state`` gets it, its engine and stream, or why not."""
    with _lock:
        if _state:
            return
        errors: list[str] = []
        for path in _candidates():
            if not os.path.exists(path) and os.sep in path:
                errors.append(f"{path}: no such file")
                continue
            try:
                handle = ctypes.CDLL(path)
                for name, (restype, argtypes) in _SIGNATURES.items():
                    function = getattr(handle, name)
                    function.restype, function.argtypes = restype, argtypes
            except (OSError, AttributeError) as exc:
                errors.append(f"{path}: {exc}")
                continue
            found = handle.dnnl_version().contents
            if found.major != 3:
                errors.append(f"{path}: oneDNN {found.major}.{found.minor}, not 3.x")
                continue
            engine, stream = _P(), _P()
            if handle.dnnl_engine_create(ctypes.byref(engine), _CPU, 0) != 0 or \
                    handle.dnnl_stream_create(ctypes.byref(stream), engine, _IN_ORDER) != 0:
                errors.append(f"{path}: no CPU engine")
                continue
            _state.update(lib=handle, engine=engine, stream=stream, path=path,
                          version=f"{found.major}.{found.minor}.{found.patch}")
            return
        _state["error"] = ("oneDNN is not installed (pip install onednn-cpu-gomp)"
                           if not errors or all("no such file" in e for e in errors)
                           else "oneDNN could not be loaded: " + "; ".join(errors))


def unavailable_reason() -> Optional[str]:
    """Why the library cannot be used here, or None."""
    _load()
    return _state.get("error")


def library() -> Any:
    """The loaded library (raises when it is unavailable)."""
    _load()
    if "lib" not in _state:
        raise UnsupportedOpError(_state["error"])
    return _state["lib"]


def version() -> Optional[str]:
    """oneDNN's version, or None when it is unavailable."""
    _load()
    return _state.get("version")


def openmp_runtime() -> Optional[Any]:
    """The OpenMP runtime oneDNN runs on (loaded by soname: PyTorch's when PyTorch is
    loaded), with ``omp_get_max_threads`` and ``omp_set_num_threads`` typed; None when it
    cannot be reached."""
    library()
    try:
        runtime = ctypes.CDLL("libgomp.so.1")
        runtime.omp_get_max_threads.restype, runtime.omp_get_max_threads.argtypes = \
            ctypes.c_int, []
        runtime.omp_set_num_threads.restype, runtime.omp_set_num_threads.argtypes = \
            None, [ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return runtime


def _check(status: int, what: str) -> None:
    if status != 0:
        raise UnsupportedOpError(f"oneDNN refused {what} (status {status})")


def pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element."""
    return int(a.ctypes.data)


class Desc:
    """A memory descriptor (dims and element strides, or "any" for the library to pick),
    destroyed with the object."""

    __slots__ = ("handle", "_lib")

    def __init__(self, dims: Sequence[int], strides: Optional[Sequence[int]] = None) -> None:
        lib = library()
        self._lib = lib
        self.handle = _P()
        if strides is None:
            status = lib.dnnl_memory_desc_create_with_tag(
                ctypes.byref(self.handle), len(dims), _Dims(*dims), F32, _FORMAT_ANY)
        else:
            status = lib.dnnl_memory_desc_create_with_strides(
                ctypes.byref(self.handle), len(dims), _Dims(*dims), F32, _Dims(*strides))
        _check(status, f"a memory descriptor of dims {list(dims)}")

    @staticmethod
    def of(a: np.ndarray, dims: Optional[Sequence[int]] = None,
           axes: Optional[Sequence[int]] = None) -> "Desc":
        """The descriptor of float32 array ``a`` seen with its axes in the order ``axes``
        (its own order by default)."""
        order = list(range(a.ndim)) if axes is None else list(axes)
        strides = [a.strides[axis] // a.itemsize for axis in order]
        return Desc([a.shape[axis] for axis in order] if dims is None else dims, strides)

    @staticmethod
    def dense(dims: Sequence[int]) -> "Desc":
        """The descriptor of a C-contiguous float32 array of shape ``dims``."""
        strides, step = [], 1
        for dim in reversed(dims):
            strides.append(step)
            step *= max(int(dim), 1)
        return Desc(list(dims), strides[::-1])

    def __del__(self) -> None:
        if self.handle:
            self._lib.dnnl_memory_desc_destroy(self.handle)


class PostOps:
    """Post-ops for a primitive's attribute: eltwise and binary steps in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []

    def eltwise(self, name: str, alpha: float = 0.0, beta: float = 0.0) -> "PostOps":
        self.steps.append(("eltwise", (ELTWISE[name], alpha, beta)))
        return self

    def sum(self) -> "PostOps":
        """Add what the destination holds before the primitive writes it (the residual
        already in the output's bytes: an in-place residual add)."""
        self.steps.append(("sum", None))
        return self

    def binary_add(self, operand: Desc) -> int:
        """Add a tensor described by ``operand``; answers the post-op's index."""
        self.steps.append(("binary", operand))
        return len(self.steps) - 1


def _attribute(post_ops: Optional[PostOps]) -> tuple[Any, list[Any]]:
    """A primitive attribute with a user scratchpad and ``post_ops``; and what must live
    until the primitive descriptor is made."""
    lib = library()
    attr = _P()
    _check(lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "an attribute")
    keep: list[Any] = []
    _check(lib.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER), "scratchpad")
    if post_ops is not None and post_ops.steps:
        ops = _P()
        _check(lib.dnnl_post_ops_create(ctypes.byref(ops)), "post-ops")
        try:
            for kind, data in post_ops.steps:
                if kind == "eltwise":
                    _check(lib.dnnl_post_ops_append_eltwise(ops, *data), "an eltwise post-op")
                elif kind == "sum":
                    _check(lib.dnnl_post_ops_append_sum(ops, 1.0, 0, _DATA_TYPE_UNDEF),
                           "a sum post-op")
                else:
                    _check(lib.dnnl_post_ops_append_binary(ops, BINARY_ADD, data.handle),
                           "a binary post-op")
                    keep.append(data)
            _check(lib.dnnl_primitive_attr_set_post_ops(attr, ops), "post-ops")
        finally:
            lib.dnnl_post_ops_destroy(ops)
    return attr, keep


class Primitive:
    """A primitive made from its descriptor, with its memory objects: ``run(pointers)``
    points each at the given address (only those that changed since the last call) and
    executes; ``run_arrays(arrays)`` does the same for arrays, asking an array for its
    address only when it is not the one given last time (the memory plan hands a kernel
    the same arena views run after run; an address costs about 0.7 us to ask for).
    Calls on one primitive are serialized: its memory objects and scratchpad are shared
    state."""

    __slots__ = ("handle", "impl", "args", "_memories", "_arg_count", "_lib", "_stream",
                 "_last", "_held", "_keep", "_lock", "_names", "scratchpad")

    def __init__(self, pd: Any, operands: Sequence[tuple[int, Any]], what: str,
                 constants: Sequence[tuple[int, Any, np.ndarray]] = ()) -> None:
        """``operands``: (execute argument, memory descriptor handle) of the arguments
        given at each run, in ``run``'s order; ``constants``: (argument, descriptor
        handle, array) of those fixed for the primitive's life (weights, bias)."""
        lib = library()
        self._lib, self._stream = lib, _state["stream"]
        self.impl = impl_name(pd)
        scratch_md = lib.dnnl_primitive_desc_query_md(pd, _QUERY_SCRATCHPAD_MD, 0)
        size = int(lib.dnnl_memory_desc_get_size(scratch_md)) if scratch_md else 0
        self.scratchpad = np.empty(max(size, 1), np.uint8)
        self.handle = _P()
        _check(lib.dnnl_primitive_create(ctypes.byref(self.handle), pd), what)
        self._keep: list[Any] = [self.scratchpad]
        self._memories: list[Any] = []
        entries: list[tuple[int, Any]] = []
        for arg, md in operands:
            entries.append((arg, self._memory(md, None)))
        for arg, md, data in constants:
            self._keep.append(data)
            entries.append((arg, self._memory(md, data.ctypes.data)))
        if size:
            entries.append((ARG_SCRATCHPAD,
                            self._memory(scratch_md, self.scratchpad.ctypes.data)))
        self._arg_count = len(entries)
        self.args = (_Arg * len(entries))(*[_Arg(arg, memory) for arg, memory in entries])
        self._names = [memory for _, memory in entries[:len(operands)]]
        self._last = [0] * len(operands)
        # the arrays of the last run_arrays call (kept alive, so none other takes its id)
        self._held: list[Optional[np.ndarray]] = [None] * len(operands)
        self._lock = threading.Lock()

    def _memory(self, md: Any, address: Optional[int]) -> Any:
        memory = _P()
        _check(self._lib.dnnl_memory_create(ctypes.byref(memory), md, _state["engine"],
                                            _P(address) if address else None), "memory")
        self._memories.append(memory)
        return memory

    def run(self, addresses: Sequence[int]) -> None:
        with self._lock:
            last, names, held = self._last, self._names, self._held
            set_handle = self._lib.dnnl_memory_set_data_handle
            for i, address in enumerate(addresses):
                held[i] = None
                if last[i] != address:
                    set_handle(names[i], address)
                    last[i] = address
            status = self._lib.dnnl_primitive_execute(self.handle, self._stream,
                                                      self._arg_count, self.args)
        if status != 0:
            raise ExecutionError(f"oneDNN's {self.impl} primitive failed (status {status})")

    def run_arrays(self, arrays: Sequence[np.ndarray]) -> None:
        with self._lock:
            last, names, held = self._last, self._names, self._held
            for i, array in enumerate(arrays):
                if held[i] is not array:
                    address = array.ctypes.data
                    held[i] = array
                    if last[i] != address:
                        self._lib.dnnl_memory_set_data_handle(names[i], address)
                        last[i] = address
            status = self._lib.dnnl_primitive_execute(self.handle, self._stream,
                                                      self._arg_count, self.args)
        if status != 0:
            raise ExecutionError(f"oneDNN's {self.impl} primitive failed (status {status})")

    def __del__(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        for memory in getattr(self, "_memories", ()):
            lib.dnnl_memory_destroy(memory)
        if getattr(self, "handle", None):
            lib.dnnl_primitive_destroy(self.handle)


def destroy(pd: Any) -> None:
    """Free a primitive descriptor once its primitive is made."""
    library().dnnl_primitive_desc_destroy(pd)


def impl_name(pd: Any) -> str:
    """The name of the implementation ``pd`` stands at (``brgconv_1x1:avx512_core``)."""
    info = ctypes.c_char_p()
    library().dnnl_primitive_desc_query(pd, _QUERY_IMPL_INFO, 0, ctypes.byref(info))
    return (info.value or b"?").decode()


def next_impl(pd: Any) -> bool:
    """Move ``pd`` to the next implementation oneDNN has for its operation (in oneDNN's
    order of preference); False, ``pd`` unchanged, past the last one."""
    return library().dnnl_primitive_desc_next_impl(pd) == 0


def query_md(pd: Any, what: str) -> Any:
    code = {"src": _QUERY_SRC_MD, "weights": _QUERY_WEIGHTS_MD, "dst": _QUERY_DST_MD,
            "workspace": _QUERY_WORKSPACE_MD}[what]
    return library().dnnl_primitive_desc_query_md(pd, code, 0)


def md_size(md: Any) -> int:
    return int(library().dnnl_memory_desc_get_size(md)) if md else 0


def _reorder_pd(source_md: Any, target_md: Any) -> Any:
    lib = library()
    pd = _P()
    engine = _state["engine"]
    _check(lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), source_md, engine,
                                                  target_md, engine, None), "a reorder")
    return pd


def reorder_desc(source: Desc, dest: Desc) -> Any:
    """A reorder's primitive descriptor: a copy from one layout (any strides, zero for a
    broadcast axis) to another."""
    return _reorder_pd(source.handle, dest.handle)


def reorder_desc_md(source_md: Any, dest_md: Any) -> Any:
    """``reorder_desc`` between memory descriptor handles (a primitive's chosen layouts)."""
    return _reorder_pd(source_md, dest_md)


def reorder(source: np.ndarray, source_desc: Desc, target_md: Any) -> np.ndarray:
    """``source`` (described by ``source_desc``, read through its strides) laid out as
    ``target_md`` says, in a new buffer: how a weight is packed once for the kernel that
    reads it."""
    pd = _reorder_pd(source_desc.handle, target_md)
    try:
        target = np.zeros(max(md_size(target_md) // 4, 1), np.float32)
        primitive = Primitive(pd, (), "a reorder",
                              [(ARG_SRC, source_desc.handle, source),
                               (ARG_DST, target_md, target)])
        primitive.run(())
    finally:
        destroy(pd)
    return target


class Packed:
    """A constant operand (a filter, a weight matrix) packed for the kernels that read it:
    one copy per distinct layout they ask for, shared by all the node's primitives, so
    that a node run at many input shapes packs its weight once per layout, not per shape."""

    def __init__(self, source: np.ndarray) -> None:
        self.source = source
        self.desc = Desc.of(source)
        self._lib = library()
        self._copies: list[tuple[Any, np.ndarray]] = []
        self._lock = threading.Lock()

    def like(self, target_md: Any) -> np.ndarray:
        """The source laid out as ``target_md`` says (made at the first request)."""
        with self._lock:
            for known, data in self._copies:
                if self._lib.dnnl_memory_desc_equal(known, target_md):
                    return data
            data = reorder(self.source, self.desc, target_md)
            clone = _P()
            _check(self._lib.dnnl_memory_desc_clone(ctypes.byref(clone), target_md),
                   "a memory descriptor's copy")
            self._copies.append((clone, data))
            return data

    @property
    def layouts(self) -> int:
        return len(self._copies)

    def forget(self, data: np.ndarray) -> None:
        """Drop the copy ``data`` (one made for a kernel that was tried and not kept)."""
        with self._lock:
            for i, (known, copy) in enumerate(self._copies):
                if copy is data:
                    self._lib.dnnl_memory_desc_destroy(known)
                    del self._copies[i]
                    return

    def __del__(self) -> None:
        for known, _ in getattr(self, "_copies", ()):
            self._lib.dnnl_memory_desc_destroy(known)


class ShapeCache(dict):
    """A node's primitives by input shape, the oldest dropped past ``capacity``: a model
    fed ever new shapes (a sequence length per request) keeps a bounded set of kernels,
    their scratchpads and JIT code."""

    capacity = 16

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def __setitem__(self, key: Any, value: Any) -> None:
        with self._lock:
            super().__setitem__(key, value)
            while len(self) > self.capacity:
                super().pop(next(iter(self)))

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        """The entry for ``key``, made (and kept) at the first request."""
        try:
            return self[key]
        except KeyError:
            value = self[key] = make()
            return value


def made(pd: Any, operands: Sequence[tuple[int, Any]], what: str,
         constants: Sequence[tuple[int, Any, np.ndarray]] = ()) -> "Primitive":
    """The primitive of descriptor ``pd``, which is then freed (see ``Primitive``)."""
    try:
        return Primitive(pd, operands, what, constants)
    finally:
        destroy(pd)


def source_dest(source: Any, dest: Any) -> list[tuple[int, Any]]:
    """The operands of a primitive that reads ``source`` and writes ``dest`` (handles)."""
    return [(ARG_SRC, source), (ARG_DST, dest)]


def convolution(source: Desc, weights: Desc, bias: Optional[Desc], dest: Desc,
                strides: Sequence[int], dilations: Sequence[int], pad_begin: Sequence[int],
                pad_end: Sequence[int], post_ops: Optional[PostOps],
                transposed: bool = False) -> tuple[Any, Any]:
    """A forward-inference convolution's primitive descriptor (a transposed convolution,
    oneDNN's deconvolution, when ``transposed``), and the weights' memory descriptor the
    chosen kernel reads (owned by the descriptor: ``destroy`` frees both)."""
    lib = library()
    attr, keep = _attribute(post_ops)
    pd = _P()
    create = lib.dnnl_deconvolution_forward_primitive_desc_create if transposed \
        else lib.dnnl_convolution_forward_primitive_desc_create
    try:
        status = create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE,
            _DECONVOLUTION_DIRECT if transposed else _CONVOLUTION_DIRECT,
            source.handle, weights.handle, None if bias is None else bias.handle, dest.handle,
            _Dims(*strides), _Dims(*(d - 1 for d in dilations)), _Dims(*pad_begin),
            _Dims(*pad_end), attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
        del keep
    _check(status, "the transposed convolution" if transposed else "the convolution")
    return pd, query_md(pd, "weights")


def pooling(algorithm: int, source: Desc, dest: Desc, strides: Sequence[int],
            kernel: Sequence[int], dilations: Sequence[int], pad_begin: Sequence[int],
            pad_end: Sequence[int]) -> Any:
    """A forward-inference pooling's primitive descriptor."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    try:
        status = lib.dnnl_pooling_forward_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, algorithm, source.handle,
            dest.handle, _Dims(*strides), _Dims(*kernel), _Dims(*(d - 1 for d in dilations)),
            _Dims(*pad_begin), _Dims(*pad_end), attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, "the pooling")
    return pd


def matmul(source: Desc, weights: Desc, bias: Optional[Desc], dest: Desc,
           post_ops: Optional[PostOps]) -> tuple[Any, Any]:
    """A matrix product's primitive descriptor (``dest = source @ weights + bias``, with
    broadcast batch dims), and the weights' memory descriptor its kernel reads."""
    lib = library()
    attr, keep = _attribute(post_ops)
    pd = _P()
    try:
        status = lib.dnnl_matmul_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], source.handle, weights.handle,
            None if bias is None else bias.handle, dest.handle, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
        del keep
    _check(status, "the matrix product")
    return pd, query_md(pd, "weights")


def resampling(linear: bool, source: Desc, dest: Desc,
               factors: Optional[Sequence[float]] = None) -> Any:
    """A forward-inference resampling's primitive descriptor (linear or nearest) over the
    spatial axes of ``[N, C, spatial...]`` descriptors; ``factors`` (output over input
    size, per spatial axis) by default from the sizes."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    given = None if factors is None else (ctypes.c_float * len(factors))(*factors)
    try:
        status = lib.dnnl_resampling_forward_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE,
            _RESAMPLING_LINEAR if linear else _RESAMPLING_NEAREST, given, source.handle,
            dest.handle, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, "the resampling")
    return pd


def recurrence(kind: str, direction: int, source: Desc, state: Optional[Desc],
               cell: Optional[Desc], weights: Desc, recurrent_weights: Desc, bias: Desc,
               dest: Desc, state_out: Optional[Desc], cell_out: Optional[Desc]
               ) -> tuple[Any, Any, Any]:
    """A forward-inference recurrence's primitive descriptor over one layer and direction
    (``kind`` "lstm", "gru" or "lbr_gru"; ``direction`` LEFT_TO_RIGHT or RIGHT_TO_LEFT),
    and the memory descriptors of its input and recurrent weights as its kernel reads
    them. The ``cell`` states are an LSTM's; a state given in or out comes with its cell
    state."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    handle = (lambda d: None if d is None else d.handle)
    try:
        if kind == "lstm":
            status = lib.dnnl_lstm_forward_primitive_desc_create(
                ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, direction,
                source.handle, handle(state), handle(cell), weights.handle,
                recurrent_weights.handle, None, None, bias.handle, dest.handle,
                handle(state_out), handle(cell_out), 0, attr)
        else:
            create = lib.dnnl_gru_forward_primitive_desc_create if kind == "gru" \
                else lib.dnnl_lbr_gru_forward_primitive_desc_create
            status = create(ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, direction,
                            source.handle, handle(state), weights.handle,
                            recurrent_weights.handle, bias.handle, dest.handle,
                            handle(state_out), 0, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, f"the {kind.upper()} recurrence")
    query = lib.dnnl_primitive_desc_query_md
    return pd, query(pd, _QUERY_WEIGHTS_MD, 0), query(pd, _QUERY_WEIGHTS_MD, 1)


def softmax(source: Desc, dest: Desc, axis: int) -> Any:
    """A forward-inference softmax's primitive descriptor (the max-subtracting form) over
    ``axis``; source and dest may be one buffer."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    try:
        status = lib.dnnl_softmax_forward_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, _SOFTMAX_ACCURATE,
            source.handle, dest.handle, axis, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, "the softmax")
    return pd


def eltwise(algorithm: str, source: Desc, dest: Desc, alpha: float = 0.0,
            beta: float = 0.0) -> Any:
    """A forward-inference elementwise function's primitive descriptor (``algorithm`` a
    name of ``ELTWISE``); source and dest may be one buffer."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    try:
        status = lib.dnnl_eltwise_forward_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, ELTWISE[algorithm],
            source.handle, dest.handle, alpha, beta, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, f"the elementwise {algorithm}")
    return pd


def layer_normalization(source: Desc, dest: Desc, epsilon: float, shift: bool) -> Any:
    """A forward-inference layer normalization's primitive descriptor over the last axis
    of ``source``, with a scale (``ARG_SCALE``) and, when ``shift``, a bias
    (``ARG_SHIFT``), each one float32 per column; source and dest may be one buffer."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    flags = _USE_SCALE | (_USE_SHIFT if shift else 0)
    try:
        status = lib.dnnl_layer_normalization_forward_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], _FORWARD_INFERENCE, source.handle,
            dest.handle, None, epsilon, flags, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, "the layer normalization")
    return pd


def binary(algorithm: int, source: Desc, other: Desc, dest: Desc) -> Any:
    """A binary primitive's descriptor: ``dest = source (op) other``, ``other``
    broadcasting along its dims of size 1; dest may be source's buffer."""
    lib = library()
    attr, _ = _attribute(None)
    pd = _P()
    try:
        status = lib.dnnl_binary_primitive_desc_create(
            ctypes.byref(pd), _state["engine"], algorithm, source.handle, other.handle,
            dest.handle, attr)
    finally:
        lib.dnnl_primitive_attr_destroy(attr)
    _check(status, "the binary operation")
    return pd
