"""The seed's programs (examples/) run and give the numbers of independent references."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ge
from tests.tolerance import assert_close

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """Import examples/<name>.py as a module (examples/ on the path for their own imports)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


def quietly(function, *args):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        result = function(*args)
    return result, printed.getvalue()


def test_section_4_1_simple_graph():
    module = load_example("seed_4_1_simple_graph")
    graph, printed = quietly(module.build_simple_graph)
    assert "Number of operators: 6" in printed
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    outputs = ge.Session(ge.compile(graph)).run({"a": a, "b": b})
    assert list(outputs) == ["relu"]
    assert_close(outputs["relu"], np.maximum(a * b + np.ones((1024, 1024), np.float32), 0))


def const_input(graph: ge.Graph, node_name: str, index: int) -> torch.Tensor:
    """The constant feeding input ``index`` of node ``node_name``, as a torch tensor."""
    producer = graph.node(node_name).inputs[index].producer
    assert producer.op_type == "Const"
    return torch.from_numpy(np.array(producer.attrs["value"].numpy()))


def cnn_with_torch(graph: ge.Graph, images: np.ndarray) -> np.ndarray:
    """Section 4.2's network written independently with torch.nn.functional (NCHW inside)."""
    x = torch.from_numpy(images).permute(0, 3, 1, 2)
    for layer in ("conv1", "conv2", "conv3"):
        weight = const_input(graph, layer, 1).permute(3, 2, 0, 1)  # HWIO -> OIHW
        x = F.relu(F.conv2d(x, weight, padding=1))  # SAME for a 3x3 stride-1 kernel
        x = F.max_pool2d(x, 2, 2)  # SAME on even sizes needs no padding
    x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # flatten in NHWC order
    x = F.relu(x @ const_input(graph, "fc1_matmul", 1) + const_input(graph, "fc1_biasadd", 1))
    x = x @ const_input(graph, "fc2_matmul", 1) + const_input(graph, "fc2_biasadd", 1)
    return F.softmax(x, dim=-1).numpy()


@pytest.fixture(scope="module")
def cnn_graph() -> ge.Graph:
    module = load_example("seed_4_2_cnn")
    np.random.seed(42)
    graph, printed = quietly(module.build_cnn_model)
    assert "Number of layers: 8" in printed
    return graph


def test_section_4_2_cnn_shapes(cnn_graph):
    assert cnn_graph.validate()
    shapes = {name: cnn_graph.node(name).shape for name in
              ("conv1", "pool1", "pool3", "fc1_flatten", "fc1_relu", "fc2_softmax")}
    assert shapes == {"conv1": (-1, 32, 32, 32), "pool1": (-1, 16, 16, 32),
                      "pool3": (-1, 4, 4, 128), "fc1_flatten": (-1, 2048),
                      "fc1_relu": (-1, 256), "fc2_softmax": (-1, 10)}
    assert len(cnn_graph.get_ops()) == 25  # 24 ops and Reshape's shape Const


@pytest.mark.parametrize("batch", [1, 5])
def test_section_4_2_cnn_matches_torch(cnn_graph, batch):
    images = np.random.default_rng(batch).standard_normal((batch, 32, 32, 3), dtype=np.float32)
    outputs = ge.Session(ge.compile(cnn_graph)).run({"input": images})
    assert list(outputs) == ["fc2_softmax"]
    assert_close(outputs["fc2_softmax"], cnn_with_torch(cnn_graph, images), accumulate=True)


def test_section_6_1_executor_through_device_buffers(cnn_graph):
    from ge.runtime import device as devices

    module = load_example("seed_6_1_sync_execution")
    images = np.random.default_rng(7).standard_normal((3, 32, 32, 3))  # float64, as a user might
    live_before = len(devices.get_device(0).live())
    outputs, printed = quietly(module.execute_graph_simple, cnn_graph, images)
    assert "Outputs: ['fc2_softmax']" in printed
    flat = outputs["fc2_softmax"]
    assert flat.dtype == np.float32 and flat.shape == (30,)  # flat, as the article reads it
    expected = cnn_with_torch(cnn_graph, images.astype(np.float32))
    assert_close(flat.reshape(3, 10), expected, accumulate=True)
    assert len(devices.get_device(0).live()) == live_before  # every buffer was freed


def test_demo_runs_and_prints_timings():
    completed = subprocess.run([sys.executable, str(EXAMPLES / "demo.py")], capture_output=True,
                               text=True, timeout=300, check=True)
    assert completed.stdout.count("time per run:") == 2
    assert "output fc2_softmax: shape [8, 10]" in completed.stdout
    assert "output relu: shape [1024, 1024]" in completed.stdout


def test_section_6_2_async_executor_on_four_streams(cnn_graph):
    module = load_example("seed_6_2_async_execution")
    rng = np.random.default_rng(11)
    batches = [rng.standard_normal((n, 32, 32, 3), dtype=np.float32) for n in (1, 2, 3, 2, 1, 4)]
    before = {t.name for t in threading.enumerate()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # B8: the inputs leak until reset
        results, printed = quietly(module.execute_graph_async, cnn_graph, batches)
    assert "Initialized with 4 streams" in printed and "Processed 6 batches" in printed
    assert len(results) == len(batches)
    synchronous = ge.Session(ge.compile(cnn_graph))
    for got, batch in zip(results, batches):  # wait_all handles the events in order
        flat = got["fc2_softmax"]
        assert flat.dtype == np.float32 and flat.shape == (batch.shape[0] * 10,)
        want = synchronous.run({"input": batch})["fc2_softmax"]
        np.testing.assert_array_equal(flat.reshape(-1, 10), want)  # bit for bit
    after = {t.name for t in threading.enumerate() if t.is_alive()}
    assert not {name for name in after - before if name.startswith("ge-stream")}


def test_run_async_returns_before_the_stream_reaches_it(cnn_graph):
    import acl

    session = ge.Session(ge.compile(cnn_graph))
    batch = np.random.default_rng(2).standard_normal((2, 32, 32, 3), dtype=np.float32)
    acl.init()
    stream = acl.rt.create_stream()
    gate = threading.Event()
    try:
        acl.rt.stream_of(stream).submit(gate.wait, 5.0)  # hold the stream
        pointer, _ = acl.rt.malloc(batch.nbytes)
        acl.rt.memcpy_async(pointer, batch, batch.nbytes, acl.rt.MEMCPY_HOST_TO_DEVICE, stream)
        handle = session.run_async({"input": (pointer, batch.nbytes)}, stream)
        assert not handle.done()
        (name, (out_pointer, size)), = handle.items()  # buffers known before the run
        assert name == "fc2_softmax" and size == 2 * 10 * 4
        gate.set()
        acl.rt.synchronize_stream(stream)
        assert handle.done()
        host = np.zeros(20, np.float32)
        acl.rt.memcpy(host, out_pointer, size, acl.rt.MEMCPY_DEVICE_TO_HOST)
        np.testing.assert_array_equal(host.reshape(2, 10),
                                      session.run({"input": batch})["fc2_softmax"])
        assert handle.wait()["fc2_softmax"] == (out_pointer, size)
        acl.rt.free(out_pointer)
        acl.rt.free(pointer)
        host_run = session.run_async({"input": batch})  # the session's own stream
        np.testing.assert_array_equal(host_run.wait(timeout=30)["fc2_softmax"],
                                      session.run({"input": batch})["fc2_softmax"])
        with pytest.raises(ge.errors.InputError):  # a bad feed raises in the caller
            session.run_async({"input": batch[..., :2].copy()}, stream)
    finally:
        gate.set()
        acl.rt.destroy_stream(stream)
        session.finalize()
        acl.finalize()


def test_section_7_1_pytorch_conversion_fails_as_written_and_matches_torch_when_fixed():
    program = load_example("seed_7_1_pytorch_conversion")
    (graph, error), printed = quietly(program.convert_pytorch_cnn)
    lines = printed.splitlines()
    # the walk as written hands fc a 4-D input: GE names the MatMul and both shapes
    assert lines[0].startswith("as written: ShapeError: MatMul node 'fc_matmul'")
    assert "[?,64,8,8]" in lines[0] and "[4096,10]" in lines[0]
    assert "Converted 9 layers from PyTorch to GE" in lines
    computing = [n.name for n in graph.topological_order() if n.op_type != "Const"]
    assert computing == ["input", "conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2",
                         "pool2", "fc_flatten", "fc_matmul", "fc"]
    assert list(graph.outputs[0].shape) == [-1, 10]
    assert error < 1e-4  # against PyTorch eager on the same weights and inputs
    exported = float(lines[-1].rsplit(":", 1)[1])
    assert exported < 1e-4  # ge.parse_pytorch agrees too


def test_section_5_2_partitions_run_bit_exact_and_the_picture_is_a_real_png(tmp_path,
                                                                           monkeypatch):
    import struct
    import zlib

    module = load_example("seed_5_2_partition")
    monkeypatch.chdir(tmp_path)
    sys.path.insert(0, str(EXAMPLES))
    try:
        (plan, difference), printed = quietly(module.main)
    finally:
        sys.path.remove(str(EXAMPLES))
    assert plan.num_stages == 4 and "Pipeline stages: 4" in printed
    assert difference == 0.0  # the partitions, run in turn, are the unpartitioned session
    data = (tmp_path / "partition_graph.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert 200 <= width <= 8000 and 400 <= height <= 8000  # a tall chain of 16 nodes
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]
