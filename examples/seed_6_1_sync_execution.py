"""The seed article's section 6.1 program: synchronous execution through the ACL runtime.

Verbatim from the article except for the fix marked FIX below. Outputs come back as
flat float32 arrays, as the article reads them (docs/seed-api.md, D16); reshape them
with the shapes ``session.get_outputs()`` gives when the shape matters.

The "device" here is GE's CPU device: ``acl.rt.malloc`` memory is host memory behind
checked integer pointers, and ``session.run`` computes on the host.
"""

import numpy as np

import acl
import ge


class GraphExecutor:
    """图执行器"""

    def __init__(self, graph, device_id=0):
        self.graph = graph
        self.device_id = device_id
        self.session = None
        self.is_initialized = False

    def init(self):
        """初始化执行环境"""
        # 初始化ACL
        acl.init()
        acl.rt.set_device(self.device_id)

        # 编译图
        compiled_graph = ge.compile(self.graph)

        # 创建执行Session
        self.session = ge.Session(compiled_graph)

        self.is_initialized = True
        print("Graph executor initialized")

    def run(self, inputs):
        """同步执行图"""
        if not self.is_initialized:
            raise RuntimeError("Executor not initialized")

        # 准备输入数据
        feed_dict = {}
        for i, (name, data) in enumerate(inputs.items()):
            # 分配Device内存
            size = data.nbytes
            device_ptr, _ = acl.rt.malloc(size)

            # 拷贝数据到Device
            acl.rt.memcpy(
                device_ptr,
                data,
                size,
                acl.rt.MEMCPY_HOST_TO_DEVICE
            )

            feed_dict[name] = (device_ptr, size)

        # FIX (docs/seed-api.md, B4): if run raised, the input buffers leaked; free them in
        # `finally`.
        try:
            # 执行图
            outputs = self.session.run(feed_dict)

            # 获取输出结果
            results = {}
            for name, (device_ptr, size) in outputs.items():
                # 分配Host内存
                host_data = np.zeros(size // 4, dtype=np.float32)

                # 拷贝数据到Host
                acl.rt.memcpy(
                    host_data,
                    device_ptr,
                    size,
                    acl.rt.MEMCPY_DEVICE_TO_HOST
                )

                results[name] = host_data

                # 释放Device内存
                acl.rt.free(device_ptr)
        finally:
            # 释放输入内存
            for device_ptr, size in feed_dict.values():
                acl.rt.free(device_ptr)

        return results

    def finalize(self):
        """释放资源"""
        if self.session is not None:
            self.session.finalize()
            self.session = None

        acl.rt.reset_device(self.device_id)
        acl.finalize()

        self.is_initialized = False

# 使用示例
def execute_graph_simple(graph, input_data):
    """简单执行计算图"""
    executor = GraphExecutor(graph)
    executor.init()

    # 准备输入
    inputs = {
        "input": input_data.astype(np.float32)
    }

    # 执行图
    outputs = executor.run(inputs)

    print("Graph execution completed")
    print(f"Outputs: {list(outputs.keys())}")

    # 释放资源
    executor.finalize()

    return outputs


if __name__ == "__main__":
    # Not in the article: run the section 4.2 CNN through the executor.
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from seed_4_2_cnn import build_cnn_model

    np.random.seed(0)
    cnn = build_cnn_model()
    results = execute_graph_simple(cnn, np.random.rand(4, 32, 32, 3))
    for name, values in results.items():
        print(f"{name}: {values.size} values, each row sums to",
              np.round(values.reshape(4, -1).sum(axis=1), 6))
