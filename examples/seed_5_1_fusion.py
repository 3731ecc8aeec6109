"""The seed article's section 5.1 program: operator fusion and other graph optimizations.

Verbatim from the article except for the lines marked FIX and CHANGE below (numbers
refer to docs/seed-api.md). ``GraphOptimizer`` uses ``ge.graphpass`` (``gp``): every
``run(graph)`` returns a new graph and leaves its argument untouched (D10), so the
summary's "Reduction" is real. ``gp.MemoryPass`` only records its two switches on the
graph: GE has no memory planner that reads them (D12), so that step changes nothing.

Run as a script it optimizes two graphs built with the seed's API:

* the section 4.2 CNN (``examples/seed_4_2_cnn.py``): Conv2D -> Relu blocks (no
  BatchNorm, so Conv+BN+ReLU matches nothing) and two MatMul -> BiasAdd (fc1, fc2);
* a section 7.1 SimpleCNN-like graph (``build_simple_cnn_graph``): two
  Conv2D -> FusedBatchNorm -> Relu blocks in NCHW and one MatMul -> BiasAdd.
"""

import importlib.util
from pathlib import Path

import numpy as np

import ge
from ge import graphpass as gp


class GraphOptimizer:
    """图优化器"""

    def __init__(self, graph):
        self.graph = graph

    def fuse_conv_bn_relu(self):
        """融合Conv+BN+ReLU"""
        fusion_pass = gp.GraphPass()

        # 定义融合规则
        pattern = gp.Pattern([
            gp.Node("Conv2D"),
            gp.Node("FusedBatchNorm"),
            gp.Node("Relu")
        ])

        # 定义融合后的算子
        fused_node = gp.Node("ConvBNReLU")

        # 应用融合规则
        fusion_pass.apply_pattern(
            pattern=pattern,
            replacement=fused_node,
            name="conv_bn_relu_fusion"
        )

        # 执行优化
        # FIX (docs/seed-api.md, B3): the result was returned but never kept, so every later
        # step ran on the original graph; each method now stores its result in self.graph.
        self.graph = fusion_pass.run(self.graph)

        print("Applied Conv+BN+ReLU fusion")
        return self.graph

    def fuse_matmul_biasadd(self):
        """融合MatMul+BiasAdd"""
        fusion_pass = gp.GraphPass()

        pattern = gp.Pattern([
            gp.Node("MatMul"),
            gp.Node("BiasAdd")
        ])

        fused_node = gp.Node("MatMulBiasAdd")

        fusion_pass.apply_pattern(
            pattern=pattern,
            replacement=fused_node,
            name="matmul_biasadd_fusion"
        )

        # FIX (docs/seed-api.md, B3): keep the result in self.graph.
        self.graph = fusion_pass.run(self.graph)

        print("Applied MatMul+BiasAdd fusion")
        return self.graph

    def constant_folding(self):
        """常量折叠优化"""
        optimization_pass = gp.OptimizationPass()

        # 查找常量表达式并预计算
        optimization_pass.add_pass(gp.ConstantFoldingPass())

        # FIX (docs/seed-api.md, B3): keep the result in self.graph.
        self.graph = optimization_pass.run(self.graph)

        print("Applied constant folding optimization")
        return self.graph

    def dead_code_elimination(self):
        """死代码消除"""
        optimization_pass = gp.OptimizationPass()

        # 移除未使用的节点
        optimization_pass.add_pass(gp.DeadCodeEliminationPass())

        # FIX (docs/seed-api.md, B3): keep the result in self.graph.
        self.graph = optimization_pass.run(self.graph)

        print("Applied dead code elimination")
        return self.graph

    def memory_optimize(self):
        """内存优化"""
        memory_pass = gp.MemoryPass()

        # 启用内存复用
        memory_pass.enable_memory_reuse(True)

        # 启用in-place优化
        memory_pass.enable_inplace(True)

        # FIX (docs/seed-api.md, B3): keep the result in self.graph. The settings are only
        # recorded in its metadata["memory"]; nothing in GE reads them (D12).
        self.graph = memory_pass.run(self.graph)

        # CHANGE (docs/seed-api.md, D12): the article prints "Applied memory optimization",
        # but no memory optimization is applied; the line says what happened.
        print("Recorded memory options (reuse, in-place); GE does not apply them")
        return self.graph

    def run_all_optimizations(self):
        """运行所有优化"""
        graph = self.graph

        # 1. 算子融合
        graph = self.fuse_conv_bn_relu()
        graph = self.fuse_matmul_biasadd()

        # 2. 常量折叠
        graph = self.constant_folding()

        # 3. 死代码消除
        graph = self.dead_code_elimination()

        # 4. 内存优化
        graph = self.memory_optimize()

        return graph

# 使用示例
def optimize_graph(graph):
    """优化计算图"""
    optimizer = GraphOptimizer(graph)

    # 运行所有优化
    optimized_graph = optimizer.run_all_optimizations()

    # 打印优化信息
    print("\n=== Graph Optimization Summary ===")
    print(f"Original graph nodes: {len(graph.get_ops())}")
    print(f"Optimized graph nodes: {len(optimized_graph.get_ops())}")
    print(f"Reduction: {len(graph.get_ops()) - len(optimized_graph.get_ops())} nodes")

    return optimized_graph


# ---------------------------------------------------------------------------------------
# Not in the article: the graphs the script optimizes.
# ---------------------------------------------------------------------------------------

def _const(graph, array):
    return graph.add_op(
        ge.OperatorFactory.create_op("Const")
        .set_attr("value", ge.Tensor(np.ascontiguousarray(array, dtype=np.float32)))
        .build()
    )


def _conv_bn_relu(graph, rng, name, x, cin, cout):
    """Conv2D (NCHW, OIHW filter, with bias) -> FusedBatchNorm -> Relu -> MaxPool, as section
    7.1 converts nn.Conv2d / nn.BatchNorm2d / nn.ReLU / nn.MaxPool2d with the layout fix
    (docs/seed-api.md, B15) and the bias fix (B17: Conv2D's optional third input, so the
    fusion pattern still matches)."""
    weight = _const(graph, rng.standard_normal((cout, cin, 3, 3)) * (2.0 / (9 * cin)) ** 0.5)
    bias = _const(graph, rng.standard_normal(cout) * 0.1)
    conv = graph.add_op(
        ge.OperatorFactory.create_op("Conv2D")
        .set_input("input", x)
        .set_input("filter", weight)
        .set_input("bias", bias)
        .set_attr("strides", [1, 1, 1, 1])
        .set_attr("padding", "SAME")
        .set_attr("data_format", "NCHW")
        .set_attr("name", f"conv{name}")
        .build()
    )
    stats = [rng.uniform(0.5, 1.5, cout), rng.standard_normal(cout) * 0.1,
             rng.standard_normal(cout) * 0.1, rng.uniform(0.5, 1.5, cout)]
    gamma, beta, mean, var = (_const(graph, s) for s in stats)
    bn = graph.add_op(
        ge.OperatorFactory.create_op("FusedBatchNorm")
        .set_input("x", conv).set_input("scale", gamma).set_input("offset", beta)
        .set_input("mean", mean).set_input("variance", var)
        .set_attr("epsilon", 1e-5)
        .set_attr("data_format", "NCHW")
        .set_attr("name", f"bn{name}")
        .build()
    )
    relu = graph.add_op(
        ge.OperatorFactory.create_op("Relu").set_input("x", bn).set_attr("name", f"relu{name}")
        .build()
    )
    return graph.add_op(
        ge.OperatorFactory.create_op("MaxPool")
        .set_input("input", relu)
        .set_attr("ksize", [1, 1, 2, 2])
        .set_attr("strides", [1, 1, 2, 2])
        .set_attr("padding", "VALID")
        .set_attr("data_format", "NCHW")
        .set_attr("name", f"pool{name}")
        .build()
    )


def build_simple_cnn_graph(seed=0):
    """Section 7.1's SimpleCNN as GE ops (input [-1, 3, 32, 32], 10 classes), with seeded
    random weights and non-trivial BatchNorm statistics."""
    rng = np.random.default_rng(seed)
    graph = ge.Graph("pytorch_model")
    x = graph.add_op(
        ge.OperatorFactory.create_op("Data")
        .set_attr("name", "input")
        .set_attr("shape", [-1, 3, 32, 32])
        .set_attr("dtype", ge.DataType.DT_FLOAT)
        .build()
    )
    x = _conv_bn_relu(graph, rng, 1, x, 3, 32)
    x = _conv_bn_relu(graph, rng, 2, x, 32, 64)
    flat = graph.add_op(
        ge.OperatorFactory.create_op("Reshape")
        .set_input("tensor", x).set_input("shape", [-1, 64 * 8 * 8])
        .set_attr("name", "fc_flatten").build()
    )
    weight = _const(graph, rng.standard_normal((64 * 8 * 8, 10)) * 0.02)
    matmul = graph.add_op(
        ge.OperatorFactory.create_op("MatMul")
        .set_input("a", flat).set_input("b", weight).set_attr("name", "fc_matmul").build()
    )
    output = graph.add_op(
        ge.OperatorFactory.create_op("BiasAdd")
        .set_input("value", matmul).set_input("bias", _const(graph, rng.standard_normal(10)))
        .set_attr("name", "fc").build()
    )
    graph.set_outputs([output])
    return graph


def _section_4_2():
    """examples/seed_4_2_cnn.py as a module, wherever this file is run from."""
    path = Path(__file__).with_name("seed_4_2_cnn.py")
    spec = importlib.util.spec_from_file_location("seed_4_2_cnn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    """Optimize the section 4.2 CNN and the section 7.1 SimpleCNN graph; print each summary."""
    np.random.seed(0)  # the section 4.2 builder draws its weights from np.random, unseeded
    results = {}
    for title, graph in (("section 4.2 CNN", _section_4_2().build_cnn_model()),
                         ("section 7.1 SimpleCNN", build_simple_cnn_graph())):
        print(f"\n##### {title} #####")
        results[title] = (graph, optimize_graph(graph))
        ops = sorted({op.op_type for op in results[title][1].get_ops()})
        print(f"Optimized graph op types: {', '.join(ops)}")
    return results


if __name__ == "__main__":
    main()
