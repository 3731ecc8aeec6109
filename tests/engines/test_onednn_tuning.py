"""Timing oneDNN's candidate kernels for a convolution and keeping the fastest."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import numpy as np
import pytest

import ge
import ge.graphpass as gp
from ge.cli import main
from ge.engines.onednn import _lib, tuning, winograd
from ge.ops import create_node
from tests.engines.test_onednn_engine import _f32, _reference, _residual_block
from tests.tolerance import assert_close


@pytest.fixture
def tune_every_conv(monkeypatch, tmp_path):
    """Every convolution timed, however small; no choice left from another test. Only
    oneDNN's kernels: these tests hold them to element-wise tolerances and equal bits,
    and GE's Winograd kernel, whose rounding error is relative to the output's scale, has
    tests of its own (``test_onednn_winograd``)."""
    monkeypatch.setattr(tuning, "MIN_FLOPS", 0.0)
    monkeypatch.delenv(tuning.VARIABLE, raising=False)
    monkeypatch.setenv(winograd.VARIABLE, "0")
    monkeypatch.setenv(tuning.CACHE_VARIABLE, str(tmp_path / "kernels.json"))
    tuning.forget_choices()
    yield
    tuning.forget_choices()


def _run(graph: ge.Graph, feed: dict[str, Any]) -> np.ndarray:
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    return session.run(feed)["op"]


def test_a_tuned_residual_block_adds_in_place_and_matches_numpy(tune_every_conv):
    """The candidates run on a scratch output: the residual the plan put in the output's
    bytes is added once, by the kept kernel, whatever the timing runs did."""
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    got = session.run(feed)["op"]
    assert_close(got, _reference(graph, feed), accumulate=True)
    np.testing.assert_array_equal(session.run(feed)["op"], got)
    made = tuning.choices()
    # three convolutions (a plain one, one with an activation, one adding the residual)
    assert len(made) == 3 and sum("+residual" in choice.what for choice in made) == 1, made
    for choice in made:
        names = [name for name, _ in choice.times_ms]
        assert choice.chosen in names and choice.first == names[0]
        assert len(set(names)) == len(names)
        assert not any(part in name for name in names for part in ("ref", "gemm", "sse41"))
        assert all(ms > 0 for _, ms in choice.times_ms)
        assert choice.gain >= 1.0


def test_an_nchw_block_runs_channels_last_kernels_and_matches_numpy(tune_every_conv):
    """oneDNN's plain-NCHW kernels are GEMM-based: an NCHW convolution is timed and run
    as the channels-last one of its shape, between reorders."""
    graph, feed = _residual_block("NCHW"), {"x": _f32(2, 8, 7, 7)}
    session = ge.Session(ge.compile(graph, opt_level=0, engines=["onednn", "numpy"]))
    got = session.run(feed)["op"]
    assert_close(got, _reference(graph, feed), accumulate=True)
    np.testing.assert_array_equal(session.run(feed)["op"], got)
    made = tuning.choices()
    assert len(made) == 3 and all(choice.what.startswith("NHWC [2, 8, 7, 7]")
                                  for choice in made), made


def test_the_residual_added_in_place_or_read_where_it_lies_runs_one_kernel(tune_every_conv):
    """Whether the memory plan puts the output over the residual changes no bit: both
    forms of the convolution share one choice."""
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    apart = gp.MemoryPass()
    apart.enable_inplace(False)
    separate = ge.compile(apart.run(graph), opt_level=0, engines=["onednn", "numpy"])
    assert not separate.memory["inplace_count"]
    want = ge.Session(separate).run(feed)["op"]
    shared = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert shared.memory["inplace_count"]
    np.testing.assert_array_equal(ge.Session(shared).run(feed)["op"], want)
    assert len(tuning.choices()) == 3


def test_every_candidate_for_a_residual_computes_the_same_bits_in_place_or_not(
        tune_every_conv):
    """Candidates that round a summed and a read residual differently are never timed,
    so whichever wins, moving the residual changes no bit."""
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    _run(graph, feed)
    (key, choice), = [(k, c) for k, c in tuning._choices.items() if "+residual" in c.what]
    apart = gp.MemoryPass()
    apart.enable_inplace(False)
    for name, _ in choice.times_ms:
        tuning._choices[key] = dataclasses.replace(choice, chosen=name)
        in_place = _run(graph, feed)
        np.testing.assert_array_equal(_run(apart.run(graph), feed), in_place, err_msg=name)


def test_every_candidate_kernel_computes_the_same_convolution(tune_every_conv):
    """Each kernel tried, kept in its turn, agrees with NumPy: the filter is packed for
    the layout each one reads."""
    graph = ge.Graph("conv")
    x = create_node("Data", [], {"shape": [2, 9, 9, 16]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(_f32(1, 1, 16, 32) * 0.3)}, "w", graph)
    b = create_node("Const", [], {"value": ge.Tensor(_f32(32))}, "b", graph)
    graph.set_outputs([create_node("FusedConv2D", [x, w, b],
                                   {"data_format": "NHWC", "padding": "VALID",
                                    "activation": "Relu"}, "op", graph)])
    feed = {"x": _f32(2, 9, 9, 16)}
    expected = _reference(graph, feed)
    assert_close(_run(graph, feed), expected, accumulate=True)
    (key, choice), = tuning._choices.items()
    assert len(choice.times_ms) >= 2, choice  # a 1x1 convolution has several kernels
    for name, _ in choice.times_ms:
        tuning._choices[key] = dataclasses.replace(choice, chosen=name)
        assert_close(_run(graph, feed), expected, accumulate=True, what=name)


def test_a_known_signature_builds_its_kernel_untimed(tune_every_conv, monkeypatch):
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    first = _run(graph, feed)
    before = tuning.choices()

    monkeypatch.setattr(tuning, "time", _Untimed)
    np.testing.assert_array_equal(_run(graph, feed), first)
    assert tuning.choices() == before


class _Untimed:
    @staticmethod
    def perf_counter() -> float:
        raise AssertionError("a known signature was timed again")


def test_a_later_process_reads_the_choices_from_the_file(tune_every_conv, monkeypatch):
    """What one process chose, the next builds without timing: the same kernels, the
    same bits."""
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    first = _run(graph, feed)
    timed = {choice.what: choice.chosen for choice in tuning.choices()}
    path = tuning.cache_file()
    assert path is not None
    stored = json.loads(path.read_text())
    assert sorted(stored.values()) == sorted(timed.values())
    tuning.forget_choices()  # as a new process
    monkeypatch.setattr(tuning, "time", _Untimed)
    np.testing.assert_array_equal(_run(graph, feed), first)
    read = tuning.choices()
    assert {choice.what: choice.chosen for choice in read} == timed
    assert not any(choice.timed for choice in read)
    assert "timed by an earlier process" in tuning.table()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"a": 3}', ""])
def test_a_malformed_file_is_timed_over(tune_every_conv, content):
    path = tuning.cache_file()
    assert path is not None
    path.write_text(content)
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    assert_close(_run(graph, feed), _reference(graph, feed), accumulate=True)
    assert all(choice.timed for choice in tuning.choices())
    assert len(json.loads(path.read_text())) == 3  # what it held that was no choice: gone


def test_an_unwritable_file_keeps_the_choices_in_the_process(tune_every_conv, monkeypatch,
                                                            tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv(tuning.CACHE_VARIABLE, str(blocker / "kernels.json"))
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    assert_close(_run(graph, feed), _reference(graph, feed), accumulate=True)
    assert len(tuning.choices()) == 3


def test_the_variable_turns_timing_off(tune_every_conv, monkeypatch):
    monkeypatch.setenv(tuning.VARIABLE, "0")
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    assert_close(_run(graph, feed), _reference(graph, feed), accumulate=True)
    assert tuning.choices() == [] and tuning.table() == ""


def test_a_refused_candidate_is_left_out(tune_every_conv, monkeypatch):
    """A candidate oneDNN fails to make is skipped; the others still run."""
    made = _lib.Primitive
    refused: list[str] = []

    def refuse_the_first(pd: Any, *args: Any, **kwargs: Any) -> Any:
        name = _lib.impl_name(pd)
        if not refused:
            refused.append(name)
            raise ge.errors.ExecutionError("refused (test)")
        return made(pd, *args, **kwargs)

    monkeypatch.setattr(_lib, "Primitive", refuse_the_first)
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    assert_close(_run(graph, feed), _reference(graph, feed), accumulate=True)
    assert refused and all(refused[0] not in dict(choice.times_ms)
                           for choice in tuning.choices()[:1])


def test_ge_run_profile_lists_the_kernels_it_chose(tune_every_conv, tmp_path, capsys):
    from examples.zoo import export_onnx

    model = export_onnx("simple_cnn", tmp_path / "cnn.onnx")
    assert main(["run", str(model), "--profile", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "oneDNN kernels timed at the first run" in out
    assert "single rows on GE's matrix-vector kernel" in out  # the classifier at batch 1
    for choice in tuning.choices():
        assert f"{choice.what}: {choice.chosen}" in out


def _plain_conv_pieces() -> tuple[Any, Any]:
    """``create`` and ``build`` for a 1x1 NHWC convolution with several oneDNN kernels."""
    source = _lib.Desc([2, 32, 8, 8], [8 * 8 * 32, 1, 8 * 32, 32])
    dest = _lib.Desc([2, 32, 8, 8], [8 * 8 * 32, 1, 8 * 32, 32])

    def create() -> Any:
        return _lib.convolution(source, _lib.Desc([32, 32, 1, 1]), None, dest, [1, 1], [1, 1],
                                [0, 0], [0, 0], None)[0]

    def build(pd: Any) -> tuple[_lib.Primitive, None]:
        weights_md = _lib.query_md(pd, "weights")
        packed = np.zeros(_lib.md_size(weights_md) // 4, np.float32)
        return _lib.Primitive(pd, _lib.source_dest(source.handle, dest.handle), "test",
                              [(_lib.ARG_WEIGHTS, weights_md, packed)]), None

    return create, build


def test_a_slow_first_run_does_not_cost_a_candidate_its_place(tune_every_conv):
    """The first run of a kernel pays for fresh pages; the kernel oneDNN lists first,
    fastest after that, is kept however slow its first run was."""
    create, build = _plain_conv_pieces()
    runs: dict[str, int] = {}
    first = _lib.impl_name(pd := create())
    _lib.destroy(pd)

    def run(candidate: _lib.Primitive) -> None:
        runs[candidate.impl] = runs.get(candidate.impl, 0) + 1
        if candidate.impl == first:
            if runs[first] == 1:
                time.sleep(0.05)
        else:
            time.sleep(0.004)

    kept = tuning.fastest(create, build, run, "key", "a 1x1 convolution", lambda _t: None)
    assert len(runs) >= 2, runs  # there were candidates to choose among
    assert kept.impl == first, tuning.table()
    assert all(count >= 2 for count in runs.values()), runs  # every one timed after a run


def test_a_choice_timed_by_another_procedure_is_timed_again(tune_every_conv, monkeypatch,
                                                             request):
    graph, feed = _residual_block(), {"x": _f32(2, 7, 7, 8)}
    _run(graph, feed)
    path = tuning.cache_file()
    assert path is not None
    keys = list(json.loads(path.read_text()))
    assert keys and all(f"timing {tuning.PROCEDURE} |" in key for key in keys), keys
    tuning.forget_choices()  # a new process, with a later procedure
    monkeypatch.setattr(tuning, "PROCEDURE", tuning.PROCEDURE + 1)
    tuning._machine.cache_clear()
    request.addfinalizer(tuning._machine.cache_clear)  # no later test sees this key
    _run(graph, feed)
    assert tuning.choices() and all(choice.timed for choice in tuning.choices())
    assert len(json.loads(path.read_text())) == 2 * len(keys)
