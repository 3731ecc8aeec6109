"""Picking, among oneDNN's kernels for one convolution, the fastest on this machine.

oneDNN lists every implementation that can run a primitive, in its own order of
preference, and takes the first. That order is a heuristic over instruction sets, not a
measurement: on an AMD Zen 4 (AVX-512 on 256-bit units) its first pick for ResNet-50's
1x1 convolutions that widen 64 channels to 256 (``brgconv_1x1:avx512_core``) is 10-25 %
slower than its AVX2 1x1 kernel, while on the 3x3 convolutions the first pick is the
fastest. So a heavy convolution (``MIN_FLOPS`` and more) has its candidates timed on
its first run, on that run's own input, and keeps the fastest:

- candidates are oneDNN's implementations in its order, one per name, leaving out the
  reference, the im2col-GEMM and the SSE4.1 kernels (never the fastest where a JIT
  kernel of a wider instruction set runs), at most ``MAX_CANDIDATES``;
- each runs once untimed (a first run touches fresh pages: the scratch output's and the
  kernel's scratchpad's), then in four alternating rounds, one over 1.5 times the
  round's fastest dropped after the second and one over 1.1 times after the third (the
  first drops none: another pool's threads still spinning may slow a whole round); a
  candidate's time is its fastest run;
- the runs write a scratch output (a sum post-op's starts as a copy of the residual), so
  the node's own output and the residual it may hold are untouched;
- for a convolution that adds a residual, a candidate that computes other bits with the
  residual summed in place than read where it lies is left out (oneDNN 3.2's
  ``jit:avx2`` is one);
- kernels of GE's own for the operation (``Own``: the Winograd convolution of
  ``winograd``) are candidates too, each kept only where its own check of its result
  against oneDNN's first candidate, on the first run's input, holds.

Different kernels round differently, so a choice is one per convolution signature
(shapes, window, bias, activation, whether a residual is added), whatever else differs:
the thread count, or whether the memory plan put the output over the residual. It is
kept for the process, and in a file for the machine (a JSON object from signature, CPU
and oneDNN version to the kernel's name), so that every later process, a pipeline's
stage actors among them, runs the same kernels and computes the same bits without
timing anything. A choice holds for a CPU (model name, family, model, stepping), a
oneDNN version and this procedure's version (``PROCEDURE``). The file is
``$GE_TUNING_CACHE``, else ``$XDG_CACHE_HOME/ge/onednn-kernels.json``, else
``~/.cache/ge/onednn-kernels.json``;
``GE_TUNING_CACHE=""`` keeps choices in the process only, and a file that cannot be
read or written is as good as none. Every choice, with the times behind it, is in
``choices()`` (``ge run --profile`` prints them). ``GE_ONEDNN_TUNE=0`` turns timing off:
oneDNN's first pick then runs everywhere.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ge.engines.onednn import _lib
from ge.errors import GEError
from ge.runtime.threads import cpu_model

__all__ = ["Choice", "Own", "choices", "enabled", "fastest", "build_named", "forget_choices",
           "cache_file", "table", "VARIABLE", "CACHE_VARIABLE"]

#: the environment variable that turns timing off ("0")
VARIABLE = "GE_ONEDNN_TUNE"
#: the environment variable naming the machine's file of choices ("": none)
CACHE_VARIABLE = "GE_TUNING_CACHE"
#: a convolution below this many floating-point operations runs oneDNN's first pick:
#: timing it would cost more than it could save
MIN_FLOPS = 50e6
MAX_CANDIDATES = 6
_LEFT_OUT = ("ref", "gemm", "sse41")
#: the timing procedure's version, part of a choice's key in the machine's file: a choice
#: made by an earlier procedure is timed again (3: GE's own kernels are candidates too)
PROCEDURE = 3


@dataclass(frozen=True)
class Choice:
    """The kernel chosen for one convolution signature, and each candidate's time."""

    what: str                                # the signature, readable
    chosen: str                              # oneDNN's implementation name
    first: str                               # oneDNN's own first pick
    times_ms: tuple[tuple[str, float], ...]  # (candidate, fastest run) in oneDNN's order
    #: True when timed in this process; False when read from the machine's file or
    #: taken untimed (``forced``)
    timed: bool = True
    #: why a kernel of GE's own was taken untimed ("" when it was not)
    forced: str = ""

    @property
    def gain(self) -> float:
        """The first pick's time over the chosen kernel's (1.0: the first pick kept)."""
        times = dict(self.times_ms)
        chosen, first = times.get(self.chosen), times.get(self.first)
        return first / chosen if chosen and first else 1.0


_lock = threading.Lock()
_choices: dict[Hashable, Choice] = {}


def enabled() -> bool:
    return os.environ.get(VARIABLE, "1").strip() != "0"


def choices() -> list[Choice]:
    """Every choice made in this process, in the order it was made."""
    with _lock:
        return list(_choices.values())


def forget_choices() -> None:
    """Forget this process's choices: the next primitive made for a signature takes the
    machine's file's choice, else times its kernels again."""
    with _lock:
        _choices.clear()


def _candidate(name: str) -> bool:
    return not any(part in name for part in _LEFT_OUT)


def cache_file() -> Optional[Path]:
    """The machine's file of choices (None: choices are kept in the process only)."""
    value = os.environ.get(CACHE_VARIABLE)
    if value is not None:
        return Path(value).expanduser() if value.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ge" / "onednn-kernels.json"


@functools.cache
def _machine() -> str:
    """The CPU, the oneDNN build and the timing procedure: what a choice holds for."""
    return f"{cpu_model()} | oneDNN {_lib.version()} | timing {PROCEDURE}"


def _file_key(key: Hashable) -> str:
    return f"{_machine()} | {key!r}"


def _read(path: Optional[Path]) -> dict[str, str]:
    """The file's choices; nothing for a missing, unreadable or malformed file."""
    if path is None:
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _store(key: Hashable, name: str) -> None:
    """Add a choice to the machine's file (merged with what other processes wrote;
    written whole and renamed over the old one, so no reader sees half a file)."""
    path = cache_file()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = _read(path)
        entries[_file_key(key)] = name
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps(entries, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


@dataclass(frozen=True)
class Own:
    """A kernel of GE's own for the operation, a candidate beside oneDNN's: ``make()``
    returns it (an object with ``impl``, its name, and ``run_arrays`` like a primitive's),
    or raises ``GEError`` where it cannot; ``check(kernel, reference)`` says whether it
    computes what oneDNN's first candidate does (on the first run's input), and a
    kernel for which it is False is left out. ``forced``, when not "", is why the kernel
    is taken untimed wherever it is made and agrees (a user's setting): no choice is
    read from or written to the machine's file for it."""

    name: str
    make: Callable[[], Any]
    check: Callable[[Any, Any], bool]
    forced: str = ""


def fastest(create: Callable[[], Any], build: Callable[[Any], tuple[_lib.Primitive, Any]],
            run: Callable[[Any], None], key: Hashable, what: str,
            discard: Callable[[Any], None],
            agrees: Optional[Callable[[str, _lib.Primitive], bool]] = None,
            own: tuple[Own, ...] = ()) -> Any:
    """The primitive of the fastest implementation of an operation.

    ``create()`` makes a primitive descriptor of the operation (at oneDNN's first pick);
    ``build(pd)`` makes the primitive of the implementation ``pd`` stands at, with a token
    for what it made for it alone (a packed filter) or None; ``run(primitive)`` runs it
    once on scratch outputs; ``discard(token)`` frees a candidate's token when it is not
    kept; ``agrees(name, primitive)``, when given, leaves out a candidate for which it
    is False; ``own`` are GE's kernels for the operation, timed beside oneDNN's. A
    signature (``key``) chosen before, in this process or in the machine's file, builds
    its kernel untimed."""
    mine = {kernel.name: kernel for kernel in own}
    forced = any(kernel.forced for kernel in own)
    with _lock:
        known = _choices.get(key)
    if known is not None and (not forced or known.forced):
        if known.chosen in mine:
            return mine[known.chosen].make()
        return build_named(create, build, known.chosen)[0]
    stored = None if forced else _read(cache_file()).get(_file_key(key))
    if stored is not None and stored in mine:
        try:
            kernel = mine[stored].make()
        except GEError:
            kernel = None
        if kernel is not None:
            pd = create()
            first = _lib.impl_name(pd)
            _lib.destroy(pd)
            with _lock:
                _choices.setdefault(key, Choice(what, stored, first, (), timed=False))
            return kernel
    elif stored is not None:
        primitive, first = build_named(create, build, stored)
        if primitive.impl == stored:
            with _lock:
                _choices.setdefault(key, Choice(what, stored, first, (), timed=False))
            return primitive
    pd = create()
    candidates: list[tuple[str, Any, Any]] = []
    try:
        first = _lib.impl_name(pd)
        seen: set[str] = set()
        while len(candidates) < MAX_CANDIDATES:
            name = _lib.impl_name(pd)
            if name not in seen and _candidate(name):
                seen.add(name)
                try:
                    primitive, token = build(pd)
                except GEError:  # oneDNN could not make it: not a candidate
                    pass
                else:
                    if agrees is None or agrees(name, primitive):
                        candidates.append((name, primitive, token))
                    elif token is not None:
                        discard(token)
            if not _lib.next_impl(pd):
                break
    finally:
        _lib.destroy(pd)
    if not candidates:  # only kernels left out: oneDNN's first pick, untimed
        return build_named(create, build, first)[0]
    reference = candidates[0][1]
    for kernel in own:
        try:
            made = kernel.make()
        except GEError:  # not for this operation after all
            continue
        if not kernel.check(made, reference):
            continue
        if kernel.forced:
            with _lock:
                _choices[key] = Choice(what, kernel.name, first, (), timed=False,
                                       forced=kernel.forced)
            for _name, _primitive, token in candidates:
                if token is not None:
                    discard(token)
            return made
        candidates.append((kernel.name, made, None))
    for _name, primitive, _token in candidates:
        # untimed: a first run pays what none after it does (the scratch output's and
        # the kernel's scratchpad's pages touched for the first time)
        run(primitive)
    best: dict[str, float] = {}
    live = candidates
    # rounds that drop the slow ones, but not the first: threads of another library
    # still spinning on the cores (onnxruntime's, after a run of its own in the same
    # process) slow a round's later candidates several-fold, and a kernel dropped for
    # that round never came back (a Winograd convolution, 2x the fastest of oneDNN's,
    # was timed at 5.8 ms against oneDNN's 2.1 in such a round)
    for bound in (None, 1.5, 1.1, None):
        times = {}
        for name, primitive, _token in live:
            start = time.perf_counter()
            run(primitive)
            times[name] = time.perf_counter() - start
        floor = min(times.values())
        if bound is not None:
            live = [entry for entry in live if times[entry[0]] <= bound * floor]
        for name, elapsed in times.items():
            best[name] = min(best.get(name, elapsed), elapsed)
    chosen = min(best, key=lambda name: best[name])
    with _lock:
        known = _choices.setdefault(key, Choice(
            what, chosen, first, tuple((name, best[name] * 1e3) for name, _p, _t in candidates)))
    if known.chosen == chosen:
        _store(key, chosen)
    # another thread's choice when it chose first (and this thread could make it)
    kept = known.chosen if any(name == known.chosen for name, _p, _t in candidates) \
        else chosen
    winner = None
    for name, primitive, token in candidates:
        if name == kept:
            winner = primitive
        elif token is not None:
            discard(token)
    assert winner is not None
    return winner


def build_named(create: Callable[[], Any], build: Callable[[Any], tuple[_lib.Primitive, Any]],
                name: str) -> tuple[_lib.Primitive, str]:
    """The primitive of the implementation called ``name`` (oneDNN's first pick when it
    no longer lists one of that name), and the name of oneDNN's first pick."""
    pd = create()
    first = _lib.impl_name(pd)
    while _lib.impl_name(pd) != name:
        if not _lib.next_impl(pd):
            _lib.destroy(pd)
            pd = create()
            break
    try:
        return build(pd)[0], first
    finally:
        _lib.destroy(pd)


def table() -> str:
    """The choices made so far, one line each: the convolution, the kernel kept, how much
    faster than oneDNN's first pick it ran, and every candidate's time ("" for none)."""
    made = choices()
    if not made:
        return ""
    lines = [f"oneDNN kernels timed at the first run ({len(made)} convolutions; "
             f"{VARIABLE}=0 keeps oneDNN's first pick):"]
    for choice in made:
        if choice.forced:
            lines.append(f"  {choice.what}: {choice.chosen} untimed ({choice.forced}; "
                         f"oneDNN's first pick {choice.first})")
            continue
        if not choice.timed:
            lines.append(f"  {choice.what}: {choice.chosen} (oneDNN's first pick "
                         f"{choice.first}; timed by an earlier process: {cache_file()})")
            continue
        times = "  ".join(f"{name} {ms:.3f}" for name, ms in choice.times_ms)
        lines.append(f"  {choice.what}: {choice.chosen} ({choice.gain:.2f}x oneDNN's first "
                     f"pick)  [ms: {times}]")
    return "\n".join(lines)
