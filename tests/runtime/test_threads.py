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
    # 64 x 64 x 64: a product large enough for the torch engine to take
    x = create_node("Data", [], {"shape": [64, 64]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.eye(64, dtype=np.float32))}, "w", graph)
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
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    np.testing.assert_array_equal(session.run({"x": x})["seen"], x)
    assert SEEN == [(1, 1)]
    assert threads.blas_threads() == before and threads.current_limit() is None


def test_no_limit_leaves_blas_alone():
    before = threads.blas_threads()
    SEEN.clear()
    ge.Session(ge.compile(_graph(), engines=["numpy"])).run({"x": np.ones((64, 64), np.float32)})
    assert SEEN == [(before, None)]


def test_a_run_on_the_torch_engine_keeps_blas_to_one_thread_and_sets_torch_s_pool():
    import torch

    blas_before, torch_before = threads.blas_threads(), torch.get_num_threads()
    assert blas_before is not None and blas_before > 1  # two cores here
    executable = ge.compile(_graph(), engines=["torch", "numpy"])
    assert executable.report["engines"]["torch"] == 1  # the product
    SEEN.clear()
    ge.Session(executable).run({"x": np.ones((64, 64), np.float32)})
    assert SEEN == [(1, None)]  # no limit: torch keeps its pool, BLAS goes quiet
    pools: list[int] = []
    threads.register_pool("probe", lambda: 7, pools.append)
    try:
        SEEN.clear()
        ge.Session(executable, threads=1).run({"x": np.ones((64, 64), np.float32)})
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
