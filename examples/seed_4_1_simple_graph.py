"""The seed article's section 4.1 program: a simple graph, y = relu(a * b + c).

Verbatim from the article except for the fix marked FIX below; docs/seed-api.md
lists the article's bugs (B1, ...) and GE's decisions (D1, ...).
"""

import numpy as np

import ge


class SimpleGraphBuilder:
    """简单图构建器"""

    def __init__(self):
        self.graph = ge.Graph("simple_graph")
        self.ops = {}

    def add_input(self, name, shape, dtype=ge.DataType.DT_FLOAT):
        """添加输入节点"""
        input_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Data")
            .set_attr("name", name)
            .set_attr("shape", shape)
            .set_attr("dtype", dtype)
            .build()
        )
        self.ops[name] = input_op
        return input_op

    def add_const(self, name, data):
        """添加常量节点"""
        const_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Const")
            .set_attr("name", name)
            .set_attr("value", ge.Tensor(data))
            .build()
        )
        self.ops[name] = const_op
        return const_op

    def add_add(self, name, input1, input2):
        """添加加法节点"""
        add_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Add")
            .set_input("x", input1)
            .set_input("y", input2)
            .set_attr("name", name)
            .build()
        )
        self.ops[name] = add_op
        return add_op

    def add_mul(self, name, input1, input2):
        """添加乘法节点"""
        mul_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Mul")
            .set_input("x", input1)
            .set_input("y", input2)
            .set_attr("name", name)
            .build()
        )
        self.ops[name] = mul_op
        return mul_op

    def add_relu(self, name, input):
        """添加ReLU激活节点"""
        relu_op = self.graph.add_op(
            ge.OperatorFactory.create_op("Relu")
            .set_input("x", input)
            .set_attr("name", name)
            .build()
        )
        self.ops[name] = relu_op
        return relu_op

    def build(self):
        """构建计算图"""
        # 设置图输出
        # FIX (docs/seed-api.md, B1): the article made every op an output; the intent is
        # y = relu(...), the last op added.
        self.graph.set_outputs([list(self.ops.values())[-1]])

        # 验证图
        if not self.graph.validate():
            raise RuntimeError("Graph validation failed")

        return self.graph

# 使用示例
def build_simple_graph():
    """构建简单计算图: y = relu(a * b + c)"""
    builder = SimpleGraphBuilder()

    # 添加输入
    a = builder.add_input("a", [1024, 1024])
    b = builder.add_input("b", [1024, 1024])

    # 添加常量
    c_data = np.ones((1024, 1024), dtype=np.float32)
    c = builder.add_const("c", c_data)

    # 构建计算图: a * b + c
    mul = builder.add_mul("mul", a, b)
    add = builder.add_add("add", mul, c)

    # 添加ReLU
    relu = builder.add_relu("relu", add)

    # 构建图
    graph = builder.build()

    print("Graph built successfully!")
    print(f"Number of operators: {len(builder.ops)}")

    return graph

if __name__ == "__main__":
    graph = build_simple_graph()
