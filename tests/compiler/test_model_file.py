"""The offline model file: ge.save / ge.load give back an executable that runs like the one
saved, without recompiling; anything else than an intact file this GE wrote is refused."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

import ge
from examples import synthetic, zoo
from ge.compiler import model_file
from ge.errors import ModelFormatError


@pytest.fixture(scope="module")
def resnet(exported):
    _, path = exported("resnet18", False)
    return path, ge.compile(ge.parse_onnx(path))


def test_a_saved_and_loaded_model_runs_like_the_compiled_one(resnet, tmp_path, monkeypatch):
    path, executable = resnet
    target = tmp_path / "resnet18.gem"
    ge.save(executable, target)

    def no_compiling(*args, **kwargs):
        raise AssertionError("ge.load must not compile")

    monkeypatch.setattr(sys.modules["ge.compiler.compile"], "_compile", no_compiling)
    loaded = ge.load(target)
    assert [s.op_type for s in loaded.steps] == [s.op_type for s in executable.steps]
    assert [s.engine for s in loaded.steps] == [s.engine for s in executable.steps]
    assert loaded.report["passes"] == executable.report["passes"]
    feeds = zoo.example_feeds("resnet18", batch=2, seed=4)
    expected = ge.Session(executable).run(feeds)
    got = ge.Session(loaded).run(feeds)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
    for node in loaded.graph.nodes:  # constants are read-only views of the file's bytes
        if node.op_type == "Const":
            assert not node.attrs["value"].numpy().flags.writeable


def test_a_model_whose_dimension_names_are_hints_keeps_its_source(tmp_path):
    executable = ge.compile(ge.parse_onnx(synthetic.transformer_stack(3)))
    bert_like = ge.compile(ge.parse_onnx(zoo.export_onnx(
        "bert", tmp_path / "bert.onnx", batch=1, dynamic_batch=True)))
    for compiled in (executable, bert_like):
        ge.save(compiled, tmp_path / "m.gem")
        loaded = ge.load(tmp_path / "m.gem")
        assert (loaded.source is None) == (compiled.source is None)
    assert bert_like.source is not None  # input_ids and attention_mask share "batch"
    weights = sum(n.attrs["value"].nbytes for n in bert_like.graph.nodes if n.op_type == "Const")
    source = sum(n.attrs["value"].nbytes for n in bert_like.source.nodes if n.op_type == "Const")
    # the source's unchanged weights are the optimized graph's own arrays: stored once
    assert (tmp_path / "m.gem").stat().st_size < weights + source
    feeds = zoo.example_feeds("bert", batch=3, seed=1)
    feeds["attention_mask"] = zoo.example_feeds("bert", batch=1, seed=2)["attention_mask"]
    session = ge.Session(loaded)
    got = session.run(feeds)
    want = ge.Session(bert_like).run(feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert session.specialized == [frozenset({"batch"})]


def _saved(tmp_path) -> bytes:
    graph = ge.parse_onnx(synthetic.elementwise_chain(12))
    ge.save(ge.compile(graph), tmp_path / "chain.gem")
    return (tmp_path / "chain.gem").read_bytes()


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[: len(data) // 2], "truncated"),
    (lambda data: data[:-1], "truncated"),
    (lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:], "checksum mismatch"),
    (lambda data: data[:-40] + bytes([data[-40] ^ 0xFF]) + data[-39:], "checksum mismatch"),
    (lambda data: data[:8] + struct.pack("<I", model_file.VERSION + 1) + data[12:],
     "newer than this GE reads"),
    (lambda data: b"PK\x03\x04" + data[4:], "not a GE model file"),
    (lambda data: b"", "not a GE model file"),
])
def test_damaged_truncated_or_newer_files_are_model_format_errors(tmp_path, damage, message):
    target = tmp_path / "broken.gem"
    target.write_bytes(damage(_saved(tmp_path)))
    with pytest.raises(ModelFormatError, match=message):
        ge.load(target)


def test_a_file_with_a_right_checksum_but_bad_metadata_is_refused(tmp_path):
    import hashlib

    data = bytearray(_saved(tmp_path))
    start = struct.calcsize("<8sIIQQ")
    data[start:start + 1] = b"["  # the JSON no longer parses
    data[-32:] = hashlib.sha256(bytes(data[:-32])).digest()
    target = tmp_path / "bad.gem"
    target.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="malformed model metadata"):
        ge.load(target)


def test_the_ge_command_compiles_to_a_model_file_and_runs_it(resnet, tmp_path):
    path, _ = resnet
    target = tmp_path / "r18.gem"
    command = [sys.executable, "-m", "ge.cli"]
    compiled = subprocess.run([*command, "compile", str(path), "-o", str(target)],
                              capture_output=True, text=True, check=True)
    assert "wrote the offline model" in compiled.stdout and target.stat().st_size > 40_000_000
    ran = subprocess.run([*command, "run", str(target)], capture_output=True, text=True,
                         check=True)
    assert "loaded" in ran.stdout and "logits: float32[1, 1000]" in ran.stdout


def test_streams_and_memory_switches_survive_the_file(tmp_path):
    import ge.graphpass as gp
    from tests.compiler.test_streams import towers

    switches = gp.MemoryPass()
    switches.enable_inplace(False)
    executable = ge.compile(switches.run(towers()), streams=2)
    ge.save(executable, tmp_path / "towers.gem")
    loaded = ge.load(tmp_path / "towers.gem")
    assert loaded.streams == executable.streams and loaded.stream_count == 2
    assert loaded.stream_waits == executable.stream_waits
    assert loaded.memory_options == {"memory_reuse": True, "inplace": False}
    assert loaded.memory == executable.memory  # the same static plan, planned again
    feed = {"x": np.random.default_rng(4).standard_normal((32, 128)).astype(np.float32)}
    np.testing.assert_array_equal(ge.Session(loaded).run(feed)["y"],
                                  ge.Session(executable).run(feed)["y"])
    assert loaded.memory["inplace_count"] == 0
