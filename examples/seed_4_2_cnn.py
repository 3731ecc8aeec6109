"""The seed article's section 4.2 program: a small CNN built op by op (NHWC, HWIO filters).

Verbatim from the article except for the fix marked FIX below. The article passes a
Python list as Reshape's shape; GE turns it into an int64 Const (docs/seed-api.md, D4),
so that line is unchanged.
"""

import numpy as np

import ge


class CNNGraphBuilder:
    """CNN图构建器"""

    def __init__(self, name="cnn_graph"):
        self.graph = ge.Graph(name)
        self.ops = {}

    def add_conv2d(self, name, input, filters, kernel_size,
                   strides=(1, 1), padding="SAME", activation=None):
        """添加2D卷积层"""
        # 创建卷积权重
        weight_shape = [kernel_size[0], kernel_size[1],
                       input.shape[-1], filters]
        weight_data = np.random.randn(*weight_shape).astype(np.float32) * 0.01
        weight = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(weight_data))
            .build()
        )

        # 创建卷积算子
        conv_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Conv2D")
            .set_input("input", input)
            .set_input("filter", weight)
            .set_attr("strides", [1, strides[0], strides[1], 1])
            .set_attr("padding", padding)
            .set_attr("name", name)
            .build()
        )

        # 添加激活函数
        if activation == "relu":
            conv_op = self.graph.add_op(
                ge.OperatorFactory.create_op("Relu")
                .set_input("x", conv_op)
                .set_attr("name", f"{name}_relu")
                .build()
            )
        elif activation == "sigmoid":
            conv_op = self.graph.add_op(
                ge.OperatorFactory.create_op("Sigmoid")
                .set_input("x", conv_op)
                .set_attr("name", f"{name}_sigmoid")
                .build()
            )

        self.ops[name] = conv_op
        return conv_op

    def add_max_pool2d(self, name, input, ksize, strides,
                      padding="SAME"):
        """添加最大池化层"""
        pool_op = self.graph.add_op(
            ge.OperatorFactory.create_op("MaxPool")
            .set_input("input", input)
            .set_attr("ksize", [1, ksize[0], ksize[1], 1])
            .set_attr("strides", [1, strides[0], strides[1], 1])
            .set_attr("padding", padding)
            .set_attr("name", name)
            .build()
        )

        self.ops[name] = pool_op
        return pool_op

    def add_batch_norm(self, name, input, epsilon=1e-5):
        """添加批归一化层"""
        # 创建BN参数
        channels = input.shape[-1]
        gamma_data = np.ones(channels, dtype=np.float32)
        beta_data = np.zeros(channels, dtype=np.float32)
        mean_data = np.zeros(channels, dtype=np.float32)
        var_data = np.ones(channels, dtype=np.float32)

        gamma = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(gamma_data))
            .build()
        )

        beta = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(beta_data))
            .build()
        )

        mean = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(mean_data))
            .build()
        )

        var = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(var_data))
            .build()
        )

        # 创建FusedBatchNorm算子
        bn_op = self.graph.add_op(
            ge.OperatorFactory.create_op("FusedBatchNorm")
            .set_input("x", input)
            .set_input("scale", gamma)
            .set_input("offset", beta)
            .set_input("mean", mean)
            .set_input("variance", var)
            .set_attr("epsilon", epsilon)
            .set_attr("name", name)
            .build()
        )

        self.ops[name] = bn_op
        return bn_op

    def add_dense(self, name, input, units, activation=None):
        """添加全连接层"""
        input_shape = input.shape
        # FIX (docs/seed-api.md, B2): flatten_size was assigned only inside the `if`, so the
        # second dense layer (2-D input) raised UnboundLocalError; it is now computed for
        # every input.
        flatten_size = int(np.prod(input_shape[1:]))
        if len(input_shape) > 2:
            # 展平输入
            input = self.graph.add_op(
                ge.OperatorFactory.create_op("Reshape")
                .set_input("tensor", input)
                .set_input("shape", [-1, flatten_size])
                .set_attr("name", f"{name}_flatten")
                .build()
            )

        # 创建权重
        weight_data = np.random.randn(flatten_size, units).astype(np.float32) * 0.01
        weight = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(weight_data))
            .build()
        )

        bias_data = np.zeros(units, dtype=np.float32)
        bias = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("value", ge.Tensor(bias_data))
            .build()
        )

        # 创建MatMul算子
        matmul_op = self.graph.add_op(
            ge.OperatorFactory.create_op("MatMul")
            .set_input("a", input)
            .set_input("b", weight)
            .set_attr("name", f"{name}_matmul")
            .build()
        )

        # 添加偏置
        bias_add_op = self.graph.add_op(
            ge.OperatorFactory.create_op("BiasAdd")
            .set_input("value", matmul_op)
            .set_input("bias", bias)
            .set_attr("name", f"{name}_biasadd")
            .build()
        )

        # 添加激活函数
        if activation == "relu":
            bias_add_op = self.graph.add_op(
                ge.OperatorFactory.create_op("Relu")
                .set_input("x", bias_add_op)
                .set_attr("name", f"{name}_relu")
                .build()
            )
        elif activation == "softmax":
            bias_add_op = self.graph.add_op(
                ge.OperatorFactory.create_op("Softmax")
                .set_input("logits", bias_add_op)
                .set_attr("name", f"{name}_softmax")
                .build()
            )

        self.ops[name] = bias_add_op
        return bias_add_op

    def build(self, input_shape, num_classes):
        """构建完整的CNN模型"""
        # 输入层
        input_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Data")
            .set_attr("name", "input")
            .set_attr("shape", input_shape)
            .set_attr("dtype", ge.DataType.DT_FLOAT)
            .build()
        )

        # 第一卷积块
        x = self.add_conv2d("conv1", input_op, filters=32,
                           kernel_size=(3, 3), activation="relu")
        x = self.add_max_pool2d("pool1", x, ksize=(2, 2), strides=(2, 2))

        # 第二卷积块
        x = self.add_conv2d("conv2", x, filters=64,
                           kernel_size=(3, 3), activation="relu")
        x = self.add_max_pool2d("pool2", x, ksize=(2, 2), strides=(2, 2))

        # 第三卷积块
        x = self.add_conv2d("conv3", x, filters=128,
                           kernel_size=(3, 3), activation="relu")
        x = self.add_max_pool2d("pool3", x, ksize=(2, 2), strides=(2, 2))

        # 全连接层
        x = self.add_dense("fc1", x, units=256, activation="relu")
        output = self.add_dense("fc2", x, units=num_classes, activation="softmax")

        # 设置输出
        self.graph.set_outputs([output])

        return self.graph

# 使用示例
def build_cnn_model():
    """构建CNN模型"""
    builder = CNNGraphBuilder("simple_cnn")

    # 构建模型: 输入[32, 32, 3] -> 10类分类
    graph = builder.build(input_shape=[-1, 32, 32, 3], num_classes=10)

    print("CNN graph built successfully!")
    print(f"Number of layers: {len(builder.ops)}")

    return graph

if __name__ == "__main__":
    graph = build_cnn_model()
