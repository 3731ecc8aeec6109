"""The seed article's section 6.2 program: asynchronous execution on several streams.

Verbatim from the article except for the line marked FIX below. Each batch's input is
copied to the device with ``acl.rt.memcpy_async`` and run with ``session.run_async`` on
one of four streams (worker threads); ``wait_all`` synchronizes each batch's event and
reads its outputs back as flat float32 arrays, as section 6.1 does.

Known bugs of the article left as they are (docs/seed-api.md, B8-B12): the input device
buffers are never freed (``acl.rt.reset_device`` frees them and warns), the events are
never destroyed, and a batch must already be float32 (a float64 batch would be read as
twice as many float32 values).
"""

from queue import Queue

# FIX (docs/seed-api.md, B5): the program uses np.zeros but never imports NumPy.
import numpy as np

import acl
import ge


class AsyncGraphExecutor:
    """异步图执行器"""

    def __init__(self, graph, device_id=0, num_streams=4):
        self.graph = graph
        self.device_id = device_id
        self.num_streams = num_streams
        self.streams = []
        self.events = []
        self.session = None

    def init(self):
        """初始化"""
        acl.init()
        acl.rt.set_device(self.device_id)

        # 编译图
        compiled_graph = ge.compile(self.graph)

        # 创建Session
        self.session = ge.Session(compiled_graph)

        # 创建执行流
        for i in range(self.num_streams):
            stream = acl.rt.create_stream(acl.rt.stream_id + i)
            self.streams.append(stream)

        print(f"Initialized with {self.num_streams} streams")

    def async_run(self, stream_id, inputs, callback=None):
        """异步执行图"""
        if stream_id >= len(self.streams):
            raise ValueError(f"Invalid stream_id: {stream_id}")

        stream = self.streams[stream_id]

        # 异步拷贝输入数据
        feed_dict = {}
        for name, data in inputs.items():
            size = data.nbytes
            device_ptr, _ = acl.rt.malloc(size)

            acl.rt.memcpy_async(
                device_ptr,
                data,
                size,
                acl.rt.MEMCPY_HOST_TO_DEVICE,
                stream
            )

            feed_dict[name] = (device_ptr, size)

        # 在Stream上执行图
        outputs = self.session.run_async(feed_dict, stream)

        # 创建完成事件
        event = acl.rt.create_event(acl.rt.event_id)
        acl.rt.record_event(event, stream)
        self.events.append((event, outputs, callback))

        return event

    def wait_all(self):
        """等待所有执行完成"""
        for event, outputs, callback in self.events:
            acl.rt.synchronize_event(event)

            # 处理输出
            results = {}
            for name, (device_ptr, size) in outputs.items():
                host_data = np.zeros(size // 4, dtype=np.float32)
                acl.rt.memcpy(
                    host_data,
                    device_ptr,
                    size,
                    acl.rt.MEMCPY_DEVICE_TO_HOST
                )
                results[name] = host_data
                acl.rt.free(device_ptr)

            # 调用回调
            if callback:
                callback(results)

        self.events.clear()

    def finalize(self):
        """释放资源"""
        # 清理事件
        for event, _, _ in self.events:
            acl.rt.destroy_event(event)

        # 清理流
        for stream in self.streams:
            acl.rt.destroy_stream(stream)

        # 清理Session
        if self.session is not None:
            self.session.finalize()

        acl.rt.reset_device(self.device_id)
        acl.finalize()

# 使用示例
def execute_graph_async(graph, data_batches):
    """异步执行计算图"""
    executor = AsyncGraphExecutor(graph, num_streams=4)
    executor.init()

    results_queue = Queue()

    def process_output(results):
        """处理输出结果"""
        results_queue.put(results)
        print(f"Processed batch, output shape: {list(results.values())[0].shape}")

    # 异步执行多个batch
    events = []
    for i, data in enumerate(data_batches):
        inputs = {"input": data}
        event = executor.async_run(i % 4, inputs, process_output)
        events.append(event)

    # 等待所有执行完成
    executor.wait_all()

    # 收集结果
    all_results = []
    while not results_queue.empty():
        all_results.append(results_queue.get())

    print(f"Processed {len(all_results)} batches")

    executor.finalize()

    return all_results
