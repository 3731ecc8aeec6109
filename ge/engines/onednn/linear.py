"""Matrix products as oneDNN matmul primitives written into the memory plan's arena.

``MatMul``, ``MatMulBiasAdd`` and ``Gemm`` whose second operand is a constant matrix (a
layer's weight) are one product over the flattened rows of the first: ``[..., K] @ [K,
N]``. The weight is packed once per input shape into the blocked layout the chosen
kernel (oneDNN's BRGEMM) reads, the bias, ``MatMulBiasAdd``'s residual and the
activation (``relu``, ``gelu``, ``gelu_tanh``) run inside the kernel, and the rows are
written straight into the node's slot. Measured on a 2-core AVX-512 machine: 151 us
against 376 us for ``torch.addmm`` (MKL) on a transformer's [128, 256] x [256, 1024]
layer, 48 us against 58 us on a classifier's [1, 1280] x [1280, 1000]. The residual is
summed where the output's bytes hold it when the memory plan puts the output over it
(it dies there), else read where it lies by a binary post-op: the same additions either
way, and as fast as the product alone (0.59 against 0.61 ms for the product and an
``Add`` on a [1024, 256] x [256, 256] layer).

A single row (``[1, K]`` after the flattening: a decoding step, a classifier's head at
batch 1) runs on the fused engine's matrix-vector kernel instead (``ge.engines.fused.
gemv``: the weight copied once, transposed; bias, residual and activation in the same
pass; on oneDNN's OpenMP threads), where it is available: the product streams the
weight once, and oneDNN's BRGEMM streams it more slowly. Measured (2 cores, AVX-512),
chains of sixteen such layers in alternating blocks, against oneDNN's matmul and
onnxruntime: [1, 256] x [256, 1024] and back 0.28 against 0.36 and 0.25 ms; hidden 384
0.88 against 1.25 and 0.92; hidden 768 5.3 against 6.9 and 5.5. A GPT-style decoding
step with a KV cache (4 layers, hidden 384) went from 1.58x onnxruntime to 1.33x.

``MatMul`` of two computed operands (attention's ``Q @ K^T`` and ``P @ V``) is one
batched matmul primitive per shape pair, each operand read where it lies through its
strides: a transposed view costs no copy. Batch dims of size 1 broadcast.

Products under ``SMALL_PRODUCT_MACS`` multiply-adds stay with the next engine (NumPy's
call costs less than oneDNN's there). A configuration oneDNN refuses runs on the next
engine's kernel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from ge.engines.base import BoundNode
from ge.engines.fused import gemv
from ge.engines.onednn import _lib
from ge.engines.onednn.conv import _const, _Fallback, _float32, _is_const, _rank
from ge.errors import UnsupportedOpError
from ge.ir import Node
from ge.ir.tensor import is_static_dim

__all__ = ["check_linear", "bind_linear", "SMALL_PRODUCT_MACS"]

#: MatMulBiasAdd's activations as oneDNN eltwise post-ops
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu_erf", "gelu_tanh": "gelu_tanh"}

#: products of fewer multiply-adds stay with the next engine: oneDNN's call (about 3 us
#: through ctypes) is more than NumPy's whole product there
SMALL_PRODUCT_MACS = 1 << 15


def _transposes(node: Node) -> tuple[bool, bool]:
    if node.op_type == "Gemm":
        return bool(node.attrs["transA"]), bool(node.attrs["transB"])
    return bool(node.attrs.get("transpose_a")), bool(node.attrs.get("transpose_b"))


def _known_macs(node: Node) -> Optional[int]:
    """The product's multiply-adds when the shapes say, else None."""
    first = node.inputs[0]
    transpose_a, _ = _transposes(node)
    if first is None or not first.shape:
        return None
    reduced = first.shape[-2] if transpose_a and len(first.shape) >= 2 else first.shape[-1]
    dims = [*node.outputs[0].shape, reduced]
    known = [d for d in dims if isinstance(d, int) and is_static_dim(d)]
    return math.prod(known) if len(known) == len(dims) else None


def _bias_ok(node: Node) -> bool:
    """The additive operand, if any, is one the kernel adds per column."""
    if node.op_type == "MatMul":
        return True
    if len(node.inputs) < 3 or node.inputs[2] is None:
        return node.op_type == "Gemm"
    if node.op_type == "MatMulBiasAdd":
        return _rank(node, 2) == 1
    # Gemm's C: a constant row ([N], [1, N] or a single value); beta folds into it
    if not _is_const(node, 2):
        return False
    shape = node.inputs[2].shape
    return len(shape) <= 1 or (len(shape) == 2 and shape[0] == 1)


def _has_residual(node: Node) -> bool:
    return node.op_type == "MatMulBiasAdd" and len(node.inputs) > 3 \
        and node.inputs[3] is not None


def check_linear(node: Node) -> bool:
    """True for a float32 product the kernel takes: see the module's docstring."""
    if not _float32(node, (0, 1, 2, 3)) or len(node.outputs) != 1:
        return False
    transpose_a, _ = _transposes(node)
    if transpose_a or _rank(node, 0) < 2 or _rank(node, 1) < 2:
        return False
    if node.op_type == "Gemm" and float(node.attrs["alpha"]) != 1.0:
        return False
    if node.op_type == "MatMulBiasAdd" and \
            node.attrs.get("activation", "none") not in ("none", *_ACTIVATIONS):
        return False
    if not _bias_ok(node):
        return False
    if node.op_type != "MatMul" and not _is_const(node, 1):
        return False
    if _is_const(node, 1) and _rank(node, 1) != 2:
        return False
    macs = _known_macs(node)
    return macs is None or macs >= SMALL_PRODUCT_MACS


def _constant_bias(node: Node, columns: int) -> Optional[np.ndarray]:
    """The constant bias as a [columns] float32 row (Gemm's beta applied), or None."""
    if node.op_type == "MatMul" or len(node.inputs) < 3 or node.inputs[2] is None:
        return None
    value = _const(node, 2)
    if value is None:
        return None
    if node.op_type == "Gemm":
        if float(node.attrs["beta"]) == 0.0:
            return None
        value = value * np.float32(node.attrs["beta"])
    return np.ascontiguousarray(np.broadcast_to(value.reshape(-1), (columns,)),
                                dtype=np.float32)


def bind_linear(node: Node) -> BoundNode:
    if _is_const(node, 1):
        return _bind_weighted(node)
    return _bind_batched(node)


def _post_ops(node: Node, residual: Optional[_lib.Desc] = None, summed: bool = False
              ) -> tuple[_lib.PostOps, Optional[int]]:
    """The node's post-ops: the residual's add, a sum of what the output holds when
    ``summed`` or else a binary add of ``residual`` (its index answered), then the
    activation."""
    post = _lib.PostOps()
    index = None
    if summed:
        post.sum()
    elif residual is not None:
        index = post.binary_add(residual)
    activation = node.attrs.get("activation", "none") if node.op_type == "MatMulBiasAdd" \
        else "none"
    if activation != "none":
        post.eltwise(_ACTIVATIONS[activation])
    return post, index


def _bind_weighted(node: Node) -> BoundNode:
    weight = _const(node, 1)
    assert weight is not None
    _, transpose_b = _transposes(node)
    matrix = np.asarray(weight, np.float32)
    if transpose_b:
        matrix = matrix.T  # a view: the packing reorder reads it through its strides
    depth, columns = (int(d) for d in matrix.shape)
    bias = _constant_bias(node, columns)
    bias_given = node.op_type == "MatMulBiasAdd" and bias is None
    bias_desc = _lib.Desc([1, columns], [columns, 1]) \
        if bias is not None or bias_given else None
    has_residual = _has_residual(node)
    primitives = _lib.ShapeCache()
    packer = _lib.Packed(matrix)
    fallback = _Fallback(node)

    def make(rows: np.ndarray, out: np.ndarray, residual: Optional[np.ndarray],
             in_place: bool) -> Optional[_lib.Primitive]:
        source, dest = _lib.Desc.of(rows), _lib.Desc.of(out)
        operands = _lib.source_dest(source.handle, dest.handle)
        if bias_given and bias_desc is not None:
            operands.append((_lib.ARG_BIAS, bias_desc.handle))
        added = None if residual is None or in_place else _lib.Desc.of(residual)
        post, index = _post_ops(node, added, in_place)
        if added is not None and index is not None:
            operands.append((_lib.post_op_arg(index, _lib.ARG_SRC_1), added.handle))
        try:
            pd, weights_md = _lib.matmul(source, _lib.Desc([depth, columns]), bias_desc, dest,
                                         post)
        except UnsupportedOpError:
            return None
        try:
            packed = packer.like(weights_md)
            constants = [(_lib.ARG_WEIGHTS, weights_md, packed)]
            if bias is not None and bias_desc is not None:
                constants.append((_lib.ARG_BIAS, bias_desc.handle, bias))
            return _lib.Primitive(pd, operands, f"the product {node.name!r}", constants)
        finally:
            _lib.destroy(pd)

    activation = node.attrs.get("activation", "none") if node.op_type == "MatMulBiasAdd" \
        else "none"
    vector: list[Optional[gemv.MatrixVector]] = []  # made at the first single row

    def matrix_vector() -> Optional[gemv.MatrixVector]:
        if not vector:
            vector.append(gemv.MatrixVector(matrix, bias, activation, f"{node.op_type} "
                                            f"{node.name!r}") if gemv.available() else None)
        return vector[0]

    # the arrays of the last call and what they gave: (x, out, residual, bias, the call
    # on their reshaped forms); the memory plan hands a node the same arena views run
    # after run, and for views (not copies) of those the kernel then runs on the same
    # reshaped arrays, whose addresses it knows (a fresh reshape costs its address query)
    last: list[Optional[tuple[Any, ...]]] = [None]

    def remember(x: np.ndarray, out: np.ndarray, inputs: Sequence[Optional[np.ndarray]],
                 arrays: Sequence[Any], sources: Sequence[Any], call: Callable[[], None]
                 ) -> None:
        if all(a is None or np.may_share_memory(a, b) for a, b in zip(arrays, sources)):
            last[0] = (x, out, inputs[3] if has_residual else None,
                       inputs[2] if bias_given else None, call)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outs[0]
        seen = last[0]
        if seen is not None and x is seen[0] and out is seen[1] \
                and (not has_residual or inputs[3] is seen[2]) \
                and (not bias_given or inputs[2] is seen[3]):
            seen[4]()
            return
        assert x is not None
        rows = x.reshape(-1, x.shape[-1])  # a copy only when the input's strides demand it
        flat = out.reshape(-1, columns)
        added: Optional[np.ndarray] = None
        in_place = False
        if has_residual:
            residual = inputs[3]
            assert residual is not None
            if residual.shape != out.shape:  # the reference says what is wrong
                fallback(inputs, outs)
                return
            added = residual.reshape(flat.shape)  # a copy only when its strides demand it
            # the plan put the output over the residual (``OneDNNEngine.inplace_input``): a
            # sum post-op adds what the output's bytes hold, the same sum as a binary add
            in_place = added.ctypes.data == flat.ctypes.data and added.strides == flat.strides
        if rows.shape[0] == 1 and rows.flags.c_contiguous and flat.flags.c_contiguous:
            product = matrix_vector()
            given = inputs[2] if bias_given else None
            if product is not None and _single_row(product, x, out, inputs, given, rows, flat,
                                                   added, remember):
                return
        key = (rows.shape, rows.strides, None if added is None else added.strides, in_place)
        primitive = primitives.get_or_make(key, lambda: make(rows, flat, added, in_place))
        if primitive is None:
            if in_place:  # the next engine's writer must not read what it overwrites
                inputs = [*inputs[:3], np.array(inputs[3])]
            fallback(inputs, outs)
            return
        arrays = [rows, flat]
        if bias_given:
            given = inputs[2]
            assert given is not None
            if given.size != columns:  # a single value, broadcast: the reference's way
                fallback(inputs, outs)
                return
            arrays.append(np.ascontiguousarray(given, dtype=np.float32))
        if added is not None and not in_place:
            arrays.append(added)
        primitive.run_arrays(arrays)
        sources: list[Optional[np.ndarray]] = [x, out]
        if bias_given:
            sources.append(inputs[2])
        if added is not None and not in_place:
            sources.append(inputs[3])
        remember(x, out, inputs, arrays, sources, functools.partial(primitive.run_arrays, arrays))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        x = inputs[0]
        assert x is not None
        out = np.empty((*x.shape[:-1], columns), np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)


def _single_row(product: gemv.MatrixVector, x: np.ndarray, out: np.ndarray,
                inputs: Sequence[Optional[np.ndarray]], given: Optional[np.ndarray],
                rows: np.ndarray, flat: np.ndarray, added: Optional[np.ndarray],
                remember: Callable[..., None]) -> bool:
    """One row on the matrix-vector kernel (``gemv``), remembered for the next call;
    False when a bias ``given`` at run time is not one per column (the caller's path
    then deals with it)."""
    bias: Optional[np.ndarray] = None
    if given is not None:
        if given.size != product.columns:
            return False
        bias = np.ascontiguousarray(given, dtype=np.float32).reshape(-1)
    operands = (rows.reshape(-1), flat.reshape(-1), bias,
                None if added is None else added.reshape(-1))
    call = functools.partial(product.run, *operands)
    call()
    remember(x, out, inputs, operands, (x, out, given, None if added is None else inputs[3]),
             call)
    return True


def _bind_batched(node: Node) -> BoundNode:
    """``MatMul`` of two computed operands of rank >= 2: one batched matmul primitive per
    pair of shapes and strides; the operand of lower rank gains leading axes of 1."""
    _, transpose_b = _transposes(node)
    primitives = _lib.ShapeCache()
    fallback = _Fallback(node)

    def make(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> Optional[_lib.Primitive]:
        source, weights, dest = _lib.Desc.of(a), _lib.Desc.of(b), _lib.Desc.of(out)
        operands = [(_lib.ARG_SRC, source.handle), (_lib.ARG_WEIGHTS, weights.handle),
                    (_lib.ARG_DST, dest.handle)]
        try:
            pd, _ = _lib.matmul(source, weights, None, dest, None)
        except UnsupportedOpError:
            return None
        return _lib.made(pd, operands, f"the product {node.name!r}")

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        a, b, out = inputs[0], inputs[1], outs[0]
        assert a is not None and b is not None
        if transpose_b:
            b = np.swapaxes(b, -1, -2)
        if out.size * a.shape[-1] < SMALL_PRODUCT_MACS:
            fallback(inputs, outs)
            return
        a = a.reshape((1,) * (out.ndim - a.ndim) + a.shape)  # views: leading axes of 1
        b = b.reshape((1,) * (out.ndim - b.ndim) + b.shape)
        key = (a.shape, a.strides, b.shape, b.strides)
        primitive = primitives.get_or_make(key, lambda: make(a, b, out))
        if primitive is None:
            fallback(inputs, outs)
            return
        primitive.run_arrays((a, b, out))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        a, b = inputs[0], inputs[1]
        assert a is not None and b is not None
        if transpose_b:
            b = np.swapaxes(b, -1, -2)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.empty((*batch, a.shape[-2], b.shape[-1]), np.float32)
        writer(inputs, [out])
        return [out]

    return BoundNode(kernel, writer)
