"""Timing GE against its peers so that the figures survive a stranger re-measuring them.

Each contender (GE, onnxruntime with default options, PyTorch eager under
``torch.inference_mode``) runs on the same inputs. In one process, each is warmed up on
its own, then timed in blocks of runs; the blocks alternate between contenders over
several rounds; each block starts after a pause and a few untimed runs, so that the
previous contender's worker threads, still spinning, are not charged to it. The median
per-run time of each contender is reported with the ratio GE / peer (of the medians),
beside the lowest and highest of the rounds' own ratios (a round's two blocks run seconds
apart, so a slow drift of the machine moves both): how much one measurement may differ
from the next. Every contender is also timed alone, in a fresh process that loads
nothing else, and a contender whose in-harness figure is more than ``FLAG_OFF`` away
from its solo figure is flagged: then neither figure is to be trusted until the cause
is found.

``ge bench MODEL.onnx`` runs GE and onnxruntime; ``bench/speed.py`` runs the model zoo
with PyTorch eager as well.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ge.runtime.threads import cpu_model

__all__ = ["Spec", "Result", "machine", "matmul_peaks", "matmul_peak_gflops", "feeds_for", "runner",
           "compare", "solo", "estimated_flops", "table", "FLAG_OFF"]

#: the largest relative difference between in-harness and solo figures left unflagged
FLAG_OFF = 0.10


@dataclass(frozen=True)
class Spec:
    """One contender on one model, enough to rebuild it in a fresh process."""

    contender: str  # "ge", "onnxruntime" or "torch"
    model: str  # an ONNX file
    batch: int = 1
    zoo: Optional[str] = None  # for "torch": the name of an ``examples.zoo`` model
    opt_level: int = 3
    feeds: Optional[str] = None  # an .npz of the inputs; default ``feeds_for(model, batch)``

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


@dataclass
class Result:
    """Per-run seconds of each contender, in the harness and alone."""

    times: dict[str, list[float]] = field(default_factory=dict)
    solo: dict[str, float] = field(default_factory=dict)

    def median(self, contender: str) -> float:
        return statistics.median(self.times[contender])

    def ratio(self, contender: str, peer: str) -> float:
        return self.median(contender) / self.median(peer)

    def round_ratios(self, contender: str, peer: str) -> list[float]:
        """Each round's ratio: ``contender``'s block against ``peer``'s block of the same
        round (a slow drift of the machine moves both)."""
        return [mine / theirs for mine, theirs in zip(self.times[contender], self.times[peer])]

    def spread(self, contender: str, peer: str) -> str:
        """The ratio with the lowest and highest of the rounds' ratios, ``"0.98
        (0.95-1.01)"``: how far one round's measurement could be from another's."""
        rounds = self.round_ratios(contender, peer)
        return f"{self.ratio(contender, peer):.2f} ({min(rounds):.2f}-{max(rounds):.2f})"

    def solo_ratio(self, contender: str, peer: str) -> Optional[float]:
        """The ratio of the two figures measured alone, or None without both."""
        mine, theirs = self.solo.get(contender), self.solo.get(peer)
        return None if mine is None or theirs is None else mine / theirs

    def flagged(self, contender: str) -> bool:
        alone = self.solo.get(contender)
        return alone is not None and abs(self.median(contender) / alone - 1) > FLAG_OFF


def machine() -> dict[str, Any]:
    """CPU model, cores, NumPy's BLAS and the environment variables that steer it, and
    the versions of PyTorch and oneDNN the torch and onednn engines run on (None where
    missing)."""
    model = cpu_model()
    blas = "unknown"
    try:
        config = np.show_config(mode="dicts")
        found = config["Build Dependencies"]["blas"]
        blas = f"{found.get('name', '?')} {found.get('version', '')}".strip()
    except (TypeError, KeyError, AttributeError):
        pass
    settings = {name: os.environ[name] for name in (
        "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
        "GE_NUM_THREADS") if name in os.environ}
    try:  # the torch engine's library, named without importing it
        from importlib.metadata import PackageNotFoundError, version

        torch_version: Optional[str] = version("torch")
    except PackageNotFoundError:
        torch_version = None
    from ge.engines.onednn import _lib as onednn

    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "blas": blas, "blas_settings": settings,
            "torch": torch_version, "onednn": onednn.version()}


def matmul_peaks(size: int = 1024, seconds: float = 0.5) -> dict[str, float]:
    """The best float32 matrix-product rates measured here (GFLOP/s, size^3), by library:
    NumPy's BLAS and, when installed, oneDNN's matmul (the onednn engine's)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty((size, size), np.float32)
    products: dict[str, Callable[[], Any]] = {"numpy": lambda: np.matmul(a, b, out=out)}
    onednn = _onednn_product(a, b, out)
    if onednn is not None:
        products["onednn"] = onednn
    rates = {}
    for name, product in products.items():
        product()
        best = float("inf")
        deadline = time.perf_counter() + seconds / len(products)
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - started)
        rates[name] = 2 * size ** 3 / best / 1e9
    return rates


def _onednn_product(a: np.ndarray, b: np.ndarray, out: np.ndarray
                    ) -> Optional[Callable[[], Any]]:
    from ge.engines.onednn import _lib

    if _lib.unavailable_reason() is not None:
        return None
    source, weights, dest = _lib.Desc.of(a), _lib.Desc.of(b), _lib.Desc.of(out)
    pd, _ = _lib.matmul(source, weights, None, dest, None)
    try:
        primitive = _lib.Primitive(pd, [(_lib.ARG_SRC, source.handle),
                                        (_lib.ARG_WEIGHTS, weights.handle),
                                        (_lib.ARG_DST, dest.handle)], "the peak's product")
    finally:
        _lib.destroy(pd)
    pointers = (_lib.pointer(a), _lib.pointer(b), _lib.pointer(out))
    return lambda: primitive.run(pointers)


def matmul_peak_gflops(size: int = 1024, seconds: float = 0.5) -> float:
    """The best float32 matrix-product rate measured here (GFLOP/s): the faster of
    ``matmul_peaks``' libraries."""
    return max(matmul_peaks(size, seconds).values())


def feeds_for(model: str, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for an ONNX model: unknown dimensions become ``batch``; floats are normal
    samples, integers zeros, booleans true (an id 0 and an all-ones mask are valid
    inputs of every language model)."""
    import ge

    rng = np.random.default_rng(seed)
    feeds = {}
    for value in ge.parse_onnx(model).inputs:
        shape = [d if isinstance(d, int) and d >= 0 else batch for d in value.shape]
        dtype = value.dtype.np_dtype
        if dtype.kind == "f":
            feeds[value.producer.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value.producer.name] = np.ones(shape, dtype)
        else:
            feeds[value.producer.name] = np.zeros(shape, dtype)
    return feeds


def runner(spec: Spec, feeds: dict[str, np.ndarray]) -> Callable[[], Any]:
    """A function that runs ``spec``'s contender once on ``feeds``."""
    if spec.contender == "ge":
        import ge

        session = ge.Session(ge.compile(ge.parse_onnx(spec.model), opt_level=spec.opt_level))
        return lambda: session.run(feeds)
    if spec.contender == "onnxruntime":
        import onnxruntime

        ort = onnxruntime.InferenceSession(spec.model, providers=["CPUExecutionProvider"])
        return lambda: ort.run(None, feeds)
    if spec.contender == "torch":
        import torch

        from examples import zoo  # the zoo's PyTorch definitions (a checkout of GE)

        assert spec.zoo is not None, "PyTorch runs a zoo model"
        module = zoo.MODELS[spec.zoo].factory(seed=0).eval()
        names = zoo.MODELS[spec.zoo].input_names
        tensors = [torch.from_numpy(np.ascontiguousarray(feeds[name])) for name in names]

        def run_torch() -> Any:
            with torch.inference_mode():
                return module(*tensors)

        return run_torch
    raise ValueError(f"unknown contender {spec.contender!r}")


def estimated_flops(model: str, batch: int) -> float:
    """FLOPs of one run by GE's cost model on the parsed graph, unknown dimensions taken
    as 1 and the total scaled by ``batch`` (the zoo's models are linear in it)."""
    import ge
    from ge.ops.registry import node_cost

    graph = ge.parse_onnx(model)
    return batch * float(sum(node_cost(n).flops for n in graph.nodes
                             if n.op_type not in ("Data", "Const")))


def table(result: Result, flops: float, peak: float, reference: str = "ge") -> list[str]:
    """Markdown rows: per contender its median, solo figure, flag, the ratio with the
    spread of the rounds' ratios, the ratio of the solo figures, and GFLOP/s."""
    rows = ["| contender | ms/run (harness) | ms/run (alone) | GE / contender (rounds) "
            "| GE / contender alone | GFLOP/s | % of matmul peak |",
            "|---|---|---|---|---|---|---|"]
    for name in result.times:
        median = result.median(name)
        alone = result.solo.get(name)
        shown_alone = "-" if alone is None else f"{alone * 1e3:.2f}"
        flag = " (!)" if result.flagged(name) else ""
        rate = flops / median / 1e9
        solo_ratio = result.solo_ratio(reference, name)
        rows.append(f"| {name} | {median * 1e3:.2f} | {shown_alone}{flag} | "
                    f"{result.spread(reference, name)} | "
                    f"{'-' if solo_ratio is None else f'{solo_ratio:.2f}'} | {rate:.1f} | "
                    f"{100 * rate / peak:.0f} % |")
    return rows


def _block_size(run: Callable[[], Any], target: float) -> int:
    started = time.perf_counter()
    run()
    once = max(time.perf_counter() - started, 1e-6)
    return max(3, min(1000, int(target / once)))


def _timed_block(run: Callable[[], Any], size: int, untimed: int, settle: float) -> float:
    time.sleep(settle)  # the previous contender's spinning threads go idle
    for _ in range(untimed):
        run()
    started = time.perf_counter()
    for _ in range(size):
        run()
    return (time.perf_counter() - started) / size


def compare(runs: dict[str, Callable[[], Any]], rounds: int = 5, block_seconds: float = 0.5,
            warmup: int = 3, untimed: int = 2, settle: float = 0.2) -> Result:
    """Time each contender in blocks that alternate over ``rounds`` (see the module)."""
    sizes = {}
    for name, run in runs.items():
        for _ in range(warmup):
            run()
        sizes[name] = _block_size(run, block_seconds)
    result = Result({name: [] for name in runs})
    for _ in range(rounds):
        for name, run in runs.items():
            result.times[name].append(_timed_block(run, sizes[name], untimed, settle))
    return result


def solo(spec: Spec, rounds: int = 5, block_seconds: float = 0.5,
         extra_path: Optional[str] = None) -> float:
    """``spec``'s median per-run seconds, measured alone in a fresh process."""
    environment = dict(os.environ)
    if extra_path:
        environment["PYTHONPATH"] = os.pathsep.join(
            [extra_path, environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, "-m", "ge.benchmark", spec.to_json(), str(rounds),
               str(block_seconds)]
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            env=environment).stdout
    return float(json.loads(output.strip().splitlines()[-1])["seconds"])


def _solo_main(argv: list[str]) -> int:
    spec = Spec(**json.loads(argv[0]))
    if spec.feeds is None:
        feeds = feeds_for(spec.model, spec.batch)
    else:
        with np.load(spec.feeds, allow_pickle=False) as archive:
            feeds = {name: archive[name] for name in archive.files}
    run = runner(spec, feeds)
    result = compare({spec.contender: run}, rounds=int(argv[1]), block_seconds=float(argv[2]))
    print(json.dumps({"seconds": result.median(spec.contender)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_solo_main(sys.argv[1:]))
