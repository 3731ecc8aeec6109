"""Matrix products and transposes on torch: MKL's GEMM written straight into the arena.

``MatMul``, ``Gemm`` and ``MatMulBiasAdd`` call torch's ``out=`` forms (``mm``,
``addmm``, ``matmul``), so the product lands in the slot the memory plan gave it.
``Einsum`` of one or two float32 operands is ``torch.einsum`` (a batched product). A
constant operand (a layer's weight) is laid out once at bind time as the contiguous
``[K, N]`` matrix the GEMM reads fastest; a product over a transposed view of it would
be up to 2x slower. ``MatMulBiasAdd``'s activation runs in place on the product.
``Transpose`` is one strided copy into the output slot, or, when it transposes a batch
of matrices (NCHW <-> NHWC, say), OpenBLAS's matrix transpose (``ge.engines.transpose``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from ge.engines.torch._base import (
    Binding,
    array,
    const_array,
    const_tensor,
    float32_node,
    known_size,
    rank,
    register,
    tensor,
)
from ge.engines.transpose import Transposer
from ge.errors import ExecutionError
from ge.ir import Node

__all__: list[str] = []

Writer = Callable[[Sequence[Optional[np.ndarray]], Sequence[np.ndarray]], None]


def _with_kernel(writer: Writer, node: Node) -> Binding:
    """A binding whose kernel runs ``writer`` into fresh arrays of the output's dtype."""
    dtype = node.outputs[0].dtype.np_dtype

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        shape = _output_shape(node, inputs)
        out = np.empty(shape, dtype)
        writer(inputs, [out])
        return [out]

    return Binding(kernel, writer)


def _output_shape(node: Node, inputs: Sequence[Optional[np.ndarray]]) -> tuple[int, ...]:
    a, b = inputs[0], inputs[1]
    assert a is not None and b is not None
    if node.op_type == "Gemm":
        rows = a.shape[1] if node.attrs["transA"] else a.shape[0]
        cols = b.shape[0] if node.attrs["transB"] else b.shape[1]
        return (rows, cols)
    a_shape, b_shape = list(a.shape), list(b.shape)
    if node.attrs.get("transpose_a") and len(a_shape) >= 2:
        a_shape[-2:] = a_shape[-1], a_shape[-2]
    if node.attrs.get("transpose_b") and len(b_shape) >= 2:
        b_shape[-2:] = b_shape[-1], b_shape[-2]
    return _broadcast_matmul_shape(a_shape, b_shape)


def _broadcast_matmul_shape(a: list[int], b: list[int]) -> tuple[int, ...]:
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 1:
        return tuple(b[:-2]) + (b[-1],)
    if len(b) == 1:
        return tuple(a[:-1])
    batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    return tuple(batch) + (a[-2], b[-1])


def _operand(node: Node, index: int, transpose: bool) -> Optional[Any]:
    """A constant operand as a torch tensor laid out for the product, or None."""

    value = const_array(node, index)
    if value is None:
        return None
    if transpose and value.ndim >= 2:
        value = np.swapaxes(value, -1, -2)
    return const_tensor(value)


#: products of fewer multiply-adds than this go to NumPy: MKL threads even a
#: [1, 4096] x [4096, 10] product, and its fork and join (about 20 us on two cores) is
#: most of the call, where OpenBLAS, kept to one thread in runs that use this engine,
#: takes 8 us. Shapes known when compiling leave the node to the NumPy engine (the
#: report shows it); sizes known only at run time are checked by the kernel each call
SMALL_PRODUCT_MACS = 1 << 18


def _small_product(node: Node, reduced_axis: int) -> bool:
    """Whether the product's output size times its reduced length (input 0's
    ``reduced_axis``) is known and under ``SMALL_PRODUCT_MACS``."""
    first = node.inputs[0]
    macs = known_size([*node.outputs[0].shape,
                       first.shape[reduced_axis] if first is not None else -1])
    return macs is not None and macs < SMALL_PRODUCT_MACS


def _check_matmul(node: Node) -> bool:
    if not float32_node(node):
        return False
    # a 1-D operand drops an axis torch's ``out=`` form would resize the output for
    if min(rank(node, 0), rank(node, 1)) < 2:
        return False
    return not _small_product(node, -2 if node.attrs.get("transpose_a") else -1)


def _side(node: Node, index: int, transpose: bool) -> Callable[[np.ndarray], Any]:
    """A function giving operand ``index`` as a torch tensor for the product."""
    constant = _operand(node, index, transpose)
    if constant is not None:
        return lambda _array: constant
    if transpose:
        return lambda given: tensor(given).transpose(-1, -2)
    return tensor


def _numpy_side(node: Node, index: int, transpose: bool) -> Callable[[Any], np.ndarray]:
    """A function giving operand ``index`` as a NumPy array for a small product. A small
    constant (only one under ``SMALL_PRODUCT_MACS`` elements can be in a small product)
    is kept column-major, the layout OpenBLAS's small products read fastest (3 us against
    8 us for a [1, 4096] x [4096, 10] product)."""
    value = const_array(node, index)
    if value is not None:
        if transpose and value.ndim >= 2:
            value = np.swapaxes(value, -1, -2)
        if value.ndim == 2 and value.size < SMALL_PRODUCT_MACS:
            laid_out = np.asfortranarray(value)
            return lambda _given: laid_out
        tensor_side = _side(node, index, transpose)
        return lambda given: tensor_side(given).numpy()
    if transpose:
        return lambda given: np.swapaxes(given, -1, -2)
    return lambda given: given


def _bind_matmul(node: Node) -> Binding:
    import torch

    left = _side(node, 0, bool(node.attrs.get("transpose_a")))
    right = _side(node, 1, bool(node.attrs.get("transpose_b")))
    small_left = _numpy_side(node, 0, bool(node.attrs.get("transpose_a")))
    small_right = _numpy_side(node, 1, bool(node.attrs.get("transpose_b")))
    activation = node.attrs.get("activation", "none") if node.op_type == "MatMulBiasAdd" \
        else "none"
    bias = _operand(node, 2, False) if node.op_type == "MatMulBiasAdd" else None
    bias_given = node.op_type == "MatMulBiasAdd" and bias is None
    has_residual = node.op_type == "MatMulBiasAdd" and len(node.inputs) > 3 \
        and node.inputs[3] is not None
    finish = _in_place_activation(activation)
    matmul, addmm = torch.matmul, torch.addmm

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        a_array, b_array = inputs[0], inputs[1]
        assert a_array is not None and b_array is not None
        a, b = left(a_array), right(b_array)
        out = tensor(outs[0])
        row_bias = tensor(inputs[2]) if bias_given else bias  # type: ignore[arg-type]
        if outs[0].size * a.shape[-1] < SMALL_PRODUCT_MACS:  # a small product (see there)
            np.matmul(small_left(a_array), small_right(b_array), out=outs[0])
            if row_bias is not None:
                np.add(outs[0], row_bias.numpy(), out=outs[0])
        elif row_bias is not None and b.dim() == 2 and a.dim() >= 2 \
                and out.shape[:-1] == a.shape[:-1]:
            # [..., K] @ [K, N] + bias as one GEMM over the flattened rows (a strided input,
            # such as attention's heads put back side by side, is gathered first: the GEMM
            # reads it many times)
            rows = a.reshape(-1, a.shape[-1]) if a.is_contiguous() \
                else a.contiguous().view(-1, a.shape[-1])
            addmm(row_bias, rows, b, out=out.view(-1, out.shape[-1]))
        else:
            matmul(a, b, out=out)
            if row_bias is not None:
                out += row_bias
        if has_residual:
            residual = inputs[3]
            assert residual is not None
            if residual.shape != outs[0].shape:
                raise ExecutionError(f"MatMulBiasAdd node {node.name!r}: the residual has "
                                     f"shape {list(residual.shape)}, the product "
                                     f"{list(outs[0].shape)}")
            out += tensor(residual)
        if finish is not None:
            finish(out)

    return _with_kernel(writer, node)


def _in_place_activation(name: str) -> Optional[Callable[[Any], Any]]:
    import torch

    if name == "relu":
        return torch.relu_
    if name == "gelu":
        return lambda t: torch.ops.aten.gelu_(t, approximate="none")
    if name == "gelu_tanh":
        from ge.engines.torch.elementwise import tanh_gelu

        return lambda t: tanh_gelu(t, t)
    return None


def _check_matmul_bias_add(node: Node) -> bool:
    return _check_matmul(node) and node.attrs.get("activation", "none") in (
        "none", "relu", "gelu", "gelu_tanh") and len(node.inputs) > 2 \
        and node.inputs[2] is not None and rank(node, 2) == 1


register(("MatMul",), _check_matmul, _bind_matmul)
register(("MatMulBiasAdd",), _check_matmul_bias_add, _bind_matmul)


def _check_gemm(node: Node) -> bool:
    return float32_node(node) and rank(node, 0) == 2 and rank(node, 1) == 2 and \
        not _small_product(node, 0 if node.attrs.get("transA") else 1)


def _bind_gemm(node: Node) -> Binding:
    import torch

    alpha, beta = float(node.attrs["alpha"]), float(node.attrs["beta"])
    left = _side(node, 0, bool(node.attrs["transA"]))
    right = _side(node, 1, bool(node.attrs["transB"]))
    small_left = _numpy_side(node, 0, bool(node.attrs["transA"]))
    small_right = _numpy_side(node, 1, bool(node.attrs["transB"]))
    has_c = len(node.inputs) > 2 and node.inputs[2] is not None
    c_constant = _operand(node, 2, False) if has_c else None

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        a_array, b_array = inputs[0], inputs[1]
        assert a_array is not None and b_array is not None
        a, b = left(a_array), right(b_array)
        out = tensor(outs[0])
        if outs[0].size * a.shape[-1] < SMALL_PRODUCT_MACS:  # a small product (see there)
            np.matmul(small_left(a_array), small_right(b_array), out=outs[0])
            if alpha != 1.0:
                outs[0] *= alpha
            if has_c and beta != 0.0:
                c_array = c_constant.numpy() if c_constant is not None else inputs[2]
                np.add(outs[0], c_array if beta == 1.0 else beta * c_array,  # type: ignore
                       out=outs[0])
        elif has_c and beta != 0.0:
            c = c_constant if c_constant is not None else tensor(inputs[2])  # type: ignore
            torch.addmm(c, a, b, beta=beta, alpha=alpha, out=out)
        else:
            torch.mm(a, b, out=out)
            if alpha != 1.0:
                out *= alpha

    return _with_kernel(writer, node)


register(("Gemm",), _check_gemm, _bind_gemm)


def _check_einsum(node: Node) -> bool:
    """Float32 Einstein sums of one or two operands: torch contracts a pair through a
    batched product where NumPy's ``einsum`` loops (8x onnxruntime on attention's
    ``bhqk,bhkd->bhqd``)."""
    if not float32_node(node) or not 1 <= len(node.inputs) <= 2:
        return False
    from ge.ops.linalg import split_equation

    try:
        split_equation(str(node.attrs["equation"]), len(node.inputs))
    except ValueError:
        return False
    return True


def _bind_einsum(node: Node) -> Binding:
    import torch

    from ge.ops.linalg import split_equation

    terms, output = split_equation(str(node.attrs["equation"]), len(node.inputs))
    explicit = f"{','.join(terms)}->{output}"  # ONNX's implicit output spelled out
    values = [const_array(node, i) for i in range(len(node.inputs))]
    constants = [None if value is None else const_tensor(value) for value in values]

    def operands(inputs: Sequence[Optional[np.ndarray]]) -> list[Any]:
        found = []
        for given, constant in zip(inputs, constants):
            if constant is not None:
                found.append(constant)
            else:
                assert given is not None
                found.append(tensor(given))
        return found

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        tensor(outs[0]).copy_(torch.einsum(explicit, *operands(inputs)))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        return [array(torch.einsum(explicit, *operands(inputs)).contiguous())]

    return Binding(kernel, writer)


register(("Einsum",), _check_einsum, _bind_einsum)


#: a transpose under this many elements is NumPy's strided copy, which costs less than
#: torch's call at that size (a known size leaves the node to the NumPy engine)
SMALL_TRANSPOSE_ELEMENTS = 1 << 14


def _check_transpose(node: Node) -> bool:
    if node.outputs[0].dtype.np_dtype not in (np.float32, np.float64, np.int64, np.int32) \
            or node.attrs.get("perm") is None:
        return False
    size = known_size(node.outputs[0].shape)
    return size is None or size >= SMALL_TRANSPOSE_ELEMENTS  # the data decides: take it


def _bind_transpose(node: Node) -> Binding:
    import torch

    perm = [int(p) for p in node.attrs["perm"]]
    as_matrices = Transposer(perm)

    def writer(inputs: Sequence[Optional[np.ndarray]], outs: Sequence[np.ndarray]) -> None:
        source = inputs[0]
        assert source is not None
        if as_matrices(source, outs[0]):  # a batch of matrix transposes (see there)
            return
        if source.size < SMALL_TRANSPOSE_ELEMENTS:  # NumPy's strided copy is quicker
            np.copyto(outs[0], source.transpose(perm))
        else:
            tensor(outs[0]).copy_(tensor(source).permute(perm))

    def kernel(inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
        source = inputs[0]
        assert source is not None
        return [array(tensor(source).permute(perm).clone(memory_format=torch.contiguous_format))]

    return Binding(kernel, writer)


register(("Transpose",), _check_transpose, _bind_transpose)
