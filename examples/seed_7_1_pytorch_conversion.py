"""The seed article's section 7.1 program: a PyTorch model converted by walking its modules.

The converter as the article writes it, with the fixes marked FIX (docs/seed-api.md,
B13-B19). Walking ``named_children`` cannot see what ``forward`` does between modules:
the article's SimpleCNN flattens with ``x.view(x.size(0), -1)`` before ``fc``, so the
walk hands ``fc`` a 4-D input, and GE refuses the ``MatMul`` with a ``ShapeError``.
``convert_pytorch_cnn()`` shows that error, then the fix (a ``Flatten`` step before a
linear layer that gets more than 2-D input), and checks the result against PyTorch.
GE's own route for PyTorch models is ``ge.parse_pytorch`` (``torch.export``), which
sees the flatten: the last lines compare the two.

    python examples/seed_7_1_pytorch_conversion.py
"""

# FIX (B13): the program uses np.float32 but never imports NumPy.
import numpy as np
import torch
import torch.nn as nn

# the article's SimpleCNN, defined once for GE's examples and tests (examples/zoo.py)
from zoo import SimpleCNN

import ge


def _pair(value):
    # FIX (B18): MaxPool2d stores ints or tuples; Conv2d always tuples
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


class PyTorchToGEConverter:
    """PyTorch模型转GE图"""

    def __init__(self, flatten_before_linear=True):
        self.graph = ge.Graph("pytorch_model")
        self.flatten_before_linear = flatten_before_linear

    def convert_pytorch_model(self, pytorch_model, input_shape):
        """转换PyTorch模型"""
        # 创建输入占位符
        input_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Data")
            .set_attr("name", "input")
            .set_attr("shape", input_shape)
            .set_attr("dtype", ge.DataType.DT_FLOAT)
            .build()
        )

        # 转换PyTorch模型
        current_op = input_op
        layer_count = 0

        for name, module in pytorch_model.named_children():
            if isinstance(module, nn.Conv2d):
                current_op = self._convert_conv2d(name, current_op, module)
                layer_count += 1
            elif isinstance(module, nn.BatchNorm2d):
                current_op = self._convert_batchnorm(name, current_op, module)
                layer_count += 1
            elif isinstance(module, nn.ReLU):
                current_op = self._convert_relu(name, current_op)
                layer_count += 1
            elif isinstance(module, nn.MaxPool2d):
                current_op = self._convert_maxpool2d(name, current_op, module)
                layer_count += 1
            elif isinstance(module, nn.Linear):
                current_op = self._convert_linear(name, current_op, module)
                layer_count += 1

        # 设置输出
        self.graph.set_outputs([current_op])

        print(f"Converted {layer_count} layers from PyTorch to GE")
        return self.graph

    def _const(self, array):
        return self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(np.ascontiguousarray(array, dtype=np.float32)))
            .build()
        )

    def _convert_conv2d(self, name, input_op, module):
        """转换Conv2d层"""
        weight_op = self._const(module.weight.detach().numpy())
        builder = (
            ge.OperatorFactory.create_op("Conv2D")
            .set_input("input", input_op)
            .set_input("filter", weight_op)
            # FIX (B15): the data is NCHW and the filter PyTorch's OIHW: say so, strides in
            # NCHW order
            .set_attr("data_format", "NCHW")
            .set_attr("strides", [1, 1, module.stride[0], module.stride[1]])
            # FIX (B19): the padding as PyTorch gives it, not "SAME" for any padding
            .set_attr("padding", "EXPLICIT")
            .set_attr("pads", [module.padding[0], module.padding[0],
                               module.padding[1], module.padding[1]])
            .set_attr("name", name)
        )
        if module.bias is not None:  # FIX (B17): the convolution's bias was dropped
            builder = builder.set_input("bias", self._const(module.bias.detach().numpy()))
        return self.graph.add_op(builder.build())

    def _convert_batchnorm(self, name, input_op, module):
        """转换BatchNorm2d层"""
        return self.graph.add_op(
            ge.OperatorFactory.create_op("FusedBatchNorm")
            .set_input("x", input_op)
            .set_input("scale", self._const(module.weight.detach().numpy()))
            .set_input("offset", self._const(module.bias.detach().numpy()))
            .set_input("mean", self._const(module.running_mean.detach().numpy()))
            .set_input("variance", self._const(module.running_var.detach().numpy()))
            .set_attr("epsilon", module.eps)
            .set_attr("data_format", "NCHW")  # FIX (B15)
            .set_attr("name", name)
            .build()
        )

    def _convert_relu(self, name, input_op):
        """转换ReLU层"""
        return self.graph.add_op(
            ge.OperatorFactory.create_op("Relu")
            .set_input("x", input_op)
            .set_attr("name", name)
            .build()
        )

    def _convert_maxpool2d(self, name, input_op, module):
        """转换MaxPool2d层"""
        kernel, stride = _pair(module.kernel_size), _pair(module.stride or module.kernel_size)
        padding = _pair(module.padding)
        return self.graph.add_op(
            ge.OperatorFactory.create_op("MaxPool")
            .set_input("input", input_op)
            .set_attr("data_format", "NCHW")  # FIX (B15): NCHW windows and strides
            .set_attr("ksize", [1, 1, kernel[0], kernel[1]])
            .set_attr("strides", [1, 1, stride[0], stride[1]])
            .set_attr("padding", "EXPLICIT")  # FIX (B19)
            .set_attr("pads", [padding[0], padding[0], padding[1], padding[1]])
            .set_attr("name", name)
            .build()
        )

    def _convert_linear(self, name, input_op, module):
        """转换Linear层"""
        if self.flatten_before_linear and len(input_op.shape) > 2:
            # FIX (B16): forward's x.view(x.size(0), -1) is not a child module; with the
            # data kept NCHW (B15), Flatten gives view's element order
            input_op = self.graph.add_op(
                ge.OperatorFactory.create_op("Flatten")
                .set_input("x", input_op)
                .set_attr("axis", 1)
                .set_attr("name", f"{name}_flatten")
                .build()
            )
        weight_op = self._const(module.weight.detach().numpy().transpose(1, 0))

        # 创建MatMul + BiasAdd
        matmul_op = self.graph.add_op(
            ge.OperatorFactory.create_op("MatMul")
            .set_input("a", input_op)
            .set_input("b", weight_op)
            .set_attr("name", f"{name}_matmul")
            .build()
        )

        if module.bias is not None:
            output_op = self.graph.add_op(
                ge.OperatorFactory.create_op("BiasAdd")
                .set_input("value", matmul_op)
                .set_input("bias", self._const(module.bias.detach().numpy()))
                .set_attr("name", name)
                .build())  # FIX (B14): this add_op( was never closed
        else:
            output_op = matmul_op

        return output_op


# 使用示例
def convert_pytorch_cnn():
    """转换PyTorch CNN模型: the walk as written fails at fc's MatMul; with the Flatten
    fix it matches PyTorch. Returns (graph, max abs error against PyTorch)."""
    torch.manual_seed(0)
    pytorch_model = SimpleCNN().eval()

    # the article's walk, without the flatten: GE refuses fc's 4-D MatMul input
    try:
        PyTorchToGEConverter(flatten_before_linear=False).convert_pytorch_model(
            pytorch_model, input_shape=[-1, 3, 32, 32])
    except ge.errors.ShapeError as error:
        print(f"as written: {type(error).__name__}: {error}")

    converter = PyTorchToGEConverter()
    ge_graph = converter.convert_pytorch_model(pytorch_model, input_shape=[-1, 3, 32, 32])
    print("PyTorch model converted to GE graph successfully")

    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    got = list(ge.Session(ge.compile(ge_graph)).run({"input": x}).values())[0]
    with torch.no_grad():
        want = pytorch_model(torch.from_numpy(x)).numpy()
    error = float(np.abs(got - want).max())
    print(f"max abs error against PyTorch: {error:.2e}")

    exported = ge.parse_pytorch(pytorch_model, [torch.from_numpy(x)], dynamic_batch=True)
    through_export = list(ge.Session(ge.compile(exported)).run({"x": x}).values())[0]
    print(f"ge.parse_pytorch (torch.export) max abs error: "
          f"{float(np.abs(through_export - want).max()):.2e}")
    return ge_graph, error


if __name__ == "__main__":
    convert_pytorch_cnn()
