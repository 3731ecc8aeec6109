"""Intra-op threads: the session's limit reaches BLAS and the engines, then is undone."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ge
from ge.ops import create_node, register_op
from ge.ops.registry import has_op
from ge.runtime import threads


def _seen_threads_kernel(x):
    """Records what a kernel sees: BLAS's thread count and the run's limit."""
    SEEN.append((threads.blas_threads(), threads.current_limit()))
    return x.copy()


SEEN: list[tuple[int | None, int | None]] = []
N = 128


@pytest.fixture(autouse=True)
def _seen_threads_op():
    """A test-only op, in the registry for this module's tests alone."""
    from ge.ops import registry

    assert not has_op("TestSeenThreads")
    register_op("TestSeenThreads", inputs=["x"], infer=lambda ctx: [ctx.input(0)],
                traits=())(_seen_threads_kernel)
    yield
    del registry._REGISTRY["TestSeenThreads"]


def _graph():
    graph = ge.Graph("threads")
    # 128 x 128 x 128: a product large enough for the torch engine to take, and for a
    # session to use every core when told no thread count (ge.compiler.SERIAL_STEP_FLOPS)
    x = create_node("Data", [], {"shape": [N, N]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.eye(N, dtype=np.float32))}, "w", graph)
    product = create_node("MatMul", [x, w], {}, "mm", graph)
    graph.set_outputs([create_node("TestSeenThreads", [product], {}, "seen", graph)])
    return graph


def test_numpy_s_blas_is_reached():
    before = threads.blas_threads()
    assert before is not None and before >= 1  # NumPy's wheels bundle OpenBLAS
    assert threads.set_blas_threads(1) and threads.blas_threads() == 1
    threads.set_blas_threads(before)
    assert threads.blas_threads() == before


@pytest.mark.parametrize("where", ["session", "compile", "environment"])
def test_a_run_holds_the_limit_and_gives_blas_back(where, monkeypatch):
    before = threads.blas_threads()
    if where == "environment":
        monkeypatch.setenv("GE_NUM_THREADS", "1")
    executable = ge.compile(_graph(), threads=1 if where == "compile" else None)
    session = ge.Session(executable, threads=1 if where == "session" else None)
    assert session.threads == 1
    SEEN.clear()
    x = np.arange(N * N, dtype=np.float32).reshape(N, N)
    np.testing.assert_array_equal(session.run({"x": x})["seen"], x)
    assert SEEN == [(1, 1)]
    assert threads.blas_threads() == before and threads.current_limit() is None


def test_no_limit_leaves_blas_alone():
    before = threads.blas_threads()
    SEEN.clear()
    ge.Session(ge.compile(_graph(), engines=["numpy"])).run({"x": np.ones((N, N), np.float32)})
    assert SEEN == [(before, None)]


def test_a_run_on_the_torch_engine_keeps_blas_to_one_thread_and_sets_torch_s_pool():
    import torch

    blas_before, torch_before = threads.blas_threads(), torch.get_num_threads()
    assert blas_before is not None and blas_before > 1  # two cores here
    executable = ge.compile(_graph(), engines=["torch", "numpy"])
    assert executable.report["engines"]["torch"] == 1  # the product
    SEEN.clear()
    ge.Session(executable).run({"x": np.ones((N, N), np.float32)})
    assert SEEN == [(1, None)]  # no limit: torch keeps its pool, BLAS goes quiet
    pools: list[int] = []
    threads.register_pool("probe", lambda: 7, pools.append)
    try:
        SEEN.clear()
        ge.Session(executable, threads=1).run({"x": np.ones((N, N), np.float32)})
    finally:
        del threads._POOLS["probe"]
    assert SEEN == [(1, 1)] and pools == [1, 7]  # every pool set to the limit, then back
    assert threads.blas_threads() == blas_before and torch.get_num_threads() == torch_before


def test_a_bad_thread_count_is_refused(monkeypatch):
    with pytest.raises(ge.errors.CompileError, match="threads"):
        ge.compile(_graph(), threads=0)
    monkeypatch.setenv("GE_NUM_THREADS", "zero")
    with pytest.raises(ValueError):
        threads.resolve_threads()


def test_blas_threads_go_idle_after_a_run():
    # a process that imports GE before NumPy: OpenBLAS's workers stop spinning soon
    script = (
        "import ge, numpy as np, time\n"
        "a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)\n"
        "for _ in range(5): a @ a\n"
        "started = time.process_time()\n"
        "time.sleep(0.5)\n"
        "print(time.process_time() - started)\n")
    spent = float(subprocess.run([sys.executable, "-c", script], capture_output=True,
                                 text=True, check=True).stdout)
    assert spent < 0.05  # without GE's setting, OpenBLAS spins about 0.1 s here


def _product_graph(size: int) -> ge.Graph:
    graph = ge.Graph("product")
    x = create_node("Data", [], {"shape": [size, size]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.eye(size, dtype=np.float32) * 2)},
                    "w", graph)
    graph.set_outputs([create_node("TestSeenThreads", [create_node(
        "Relu", [create_node("MatMul", [x, w], {}, "mm", graph)], {}, "relu", graph)], {},
        "seen", graph)])
    return graph


def test_a_graph_of_tiny_steps_runs_on_one_thread_unless_told(monkeypatch):
    from ge.compiler.compile import SERIAL_STEP_BYTES, SERIAL_STEP_FLOPS
    from ge.ops.registry import node_cost

    compiling = sys.modules["ge.compiler.compile"]

    # the test op has no cost estimate: give it none, so the product decides
    def estimate(node):
        return tuple(float(v) for v in node_cost(node))

    monkeypatch.setattr(compiling, "_cost", lambda node: None if node.op_type ==
                        "TestSeenThreads" else estimate(node))
    tiny, large = ge.compile(_product_graph(16)), ge.compile(_product_graph(256))
    assert tiny.report["threads"]["serial"] is False  # a step of unknown cost
    monkeypatch.setattr(compiling, "_cost", lambda node: (
        0.0, 0.0) if node.op_type == "TestSeenThreads" else estimate(node))
    tiny, large = ge.compile(_product_graph(16)), ge.compile(_product_graph(256))
    assert tiny.report["threads"]["largest_step_flops"] == 2 * 16 ** 3
    assert 0 < tiny.report["threads"]["largest_step_bytes"] < SERIAL_STEP_BYTES
    assert tiny.report["threads"]["serial"] is True
    assert large.report["threads"]["largest_step_flops"] > SERIAL_STEP_FLOPS
    assert not large.report["threads"]["serial"]
    # few flops but much data (an elementwise op over 512K values): every core
    wide = ge.Graph("wide")
    x_wide = create_node("Data", [], {"shape": [512, 1024]}, "x", wide)
    wide.set_outputs([create_node("TestSeenThreads", [create_node(
        "Relu", [x_wide], {}, "relu", wide)], {}, "seen", wide)])
    report = ge.compile(wide).report["threads"]
    assert report["largest_step_flops"] < SERIAL_STEP_FLOPS
    assert report["largest_step_bytes"] > SERIAL_STEP_BYTES and not report["serial"]
    assert "one thread unless told" in tiny.plan_text()
    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16) - 100
    for given, limit in ((None, 1), (2, 2)):
        session = ge.Session(tiny, threads=given)
        assert session.run_threads == limit
        SEEN.clear()
        np.testing.assert_array_equal(session.run({"x": x})["seen"], np.maximum(2 * x, 0))
        assert SEEN[0][1] == limit
    monkeypatch.setenv("GE_NUM_THREADS", "2")
    assert ge.Session(tiny).run_threads == 2
    monkeypatch.delenv("GE_NUM_THREADS")
    assert ge.Session(large).run_threads is None


def test_the_cpu_model_names_its_generation(monkeypatch, tmp_path):
    """Two processors a virtual machine names alike ("AMD EPYC") differ by family, model
    and stepping, which the CPU's description holds (the kernel-choice file's key)."""
    import builtins

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                    "model\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n\n"
                    "processor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: other\n")
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        return real_open(info if path == "/proc/cpuinfo" else path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert threads.cpu_model() == "AMD EPYC (cpu family 25, model 17, stepping 1)"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    assert threads.cpu_model() == "Some CPU"
