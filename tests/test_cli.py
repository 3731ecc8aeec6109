"""The ``ge`` command on GE's own graph files."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import ge
import ge.passes
from ge.cli import main
from ge.ops import all_op_types, create_node, get_schema


@pytest.fixture()
def graph_file(tmp_path):
    graph = ge.Graph("cli")
    x = create_node("Data", [], {"shape": [-1, 3]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.ones((3, 2), np.float32))}, "w", graph)
    y = create_node("MatMul", [x, w], {}, "y", graph)
    graph.set_outputs([create_node("Relu", [y], {}, "out", graph)])
    path = tmp_path / "graph.json"
    path.write_text(graph.to_json())
    return path


def test_ops_lists_the_registry(capsys):
    assert main(["ops"]) == 0
    printed = capsys.readouterr()
    assert printed.out.split() == all_op_types()
    assert f"{len(all_op_types())} ops" in printed.err


def test_info_describes_the_graph(graph_file, capsys):
    assert main(["info", str(graph_file)]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[?,3]" in out and "output out: float32[?,2]" in out
    assert "parameters: 6 values, 24 bytes" in out
    assert "MatMul x1" in out
    assert "estimated FLOPs per run (unknown dims as 1): 14" in out  # 2*1*3*2 + 2


def test_run_uses_given_inputs(graph_file, tmp_path, capsys):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.full((2, 3), 2.0, np.float32))
    assert main(["run", str(graph_file), "--inputs", str(inputs)]) == 0
    assert "out: float32[2, 2] min 6 max 6 mean 6" in capsys.readouterr().out


def test_bad_files_fail_cleanly(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["info", str(broken)]) == 1
    assert "does not parse" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "missing.json")]) == 1
    assert main(["info", str(tmp_path / "model.onnx")]) == 1


def test_compile_refuses_what_is_not_a_graph():
    with pytest.raises(ge.errors.CompileError, match="expects a ge.Graph"):
        ge.compile("graph.json")


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    from examples.zoo import export_onnx

    return export_onnx("simple_cnn", tmp_path_factory.mktemp("cli") / "cnn.onnx")


def test_info_on_an_onnx_model(onnx_file, capsys):
    assert main(["info", str(onnx_file)]) == 0
    out = capsys.readouterr().out
    assert "input  input: float32[batch,3,32,32]" in out
    assert "output logits: float32[" in out
    assert "ONNX ops: " in out and "Conv x2" in out and "BatchNormalization x2" in out
    assert "parameters: " in out


def test_run_check_compares_with_onnxruntime(onnx_file, capsys):
    assert main(["run", str(onnx_file), "--batch", "3", "--check"]) == 0
    out = capsys.readouterr().out
    assert "logits: float32[3, 10]" in out
    error = float(out.split("check logits: max abs error ")[1].split()[0])
    assert error < 1e-4


def test_compile_prints_the_report(graph_file, tmp_path, capsys):
    assert main(["compile", str(graph_file), "--report", "--opt-level", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compiled 'cli' at opt_level 1: 4 -> ")
    assert "ShapeFoldingPass" in out and "DeadCodeEliminationPass" in out
    assert "BatchNormFoldingPass" not in out  # a level-2 pass
    lines = out.splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith("total"))
    engines = [line for line in lines[total + 1:] if line.startswith("engine ")]
    assert engines == ["engine onednn: 2 steps (MatMul 1, Relu 1)"]  # which engine runs what
    after = total + 1 + len(engines)
    assert lines[after].startswith("schedule: ") and lines[after + 1].startswith("streams: 1")
    assert lines[-1].startswith("memory")
    optimized = tmp_path / "optimized.json"
    assert main(["compile", str(graph_file), "--verify", "-o", str(optimized)]) == 0
    out = capsys.readouterr().out
    assert "compiled 'cli' at opt_level 3: 4 -> " in out and "verified: every pass" in out
    assert ge.Graph.from_json(optimized.read_text()).validate()
    with pytest.raises(SystemExit):
        main(["compile", str(graph_file), "--opt-level", "9"])


def test_info_optimized_shows_the_ops_after_the_optimizer(onnx_file, capsys):
    assert main(["info", str(onnx_file), "--optimized"]) == 0
    out = capsys.readouterr().out
    first, line = out.splitlines()[0], out.split("ops: ")[1].splitlines()[0]
    histogram = dict(item.split(" x") for item in line.split(", "))
    assert first.startswith("optimized at opt_level 3: 32 -> ")
    assert "FusedBatchNorm" not in histogram and "Conv2D" not in histogram
    assert "input  input: float32[batch,3,32,32]" in out
    assert main(["info", str(onnx_file), "--optimized", "--opt-level", "0"]) == 0
    assert "FusedBatchNorm x2" in capsys.readouterr().out


def test_verify_says_all_passes_keep_the_outputs(onnx_file, capsys):
    assert main(["verify", str(onnx_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: all ") and "passes of opt_level 3 keep the outputs" in out
    assert "BatchNormFoldingPass: " in out and " verified" in out


class _FlipAddPass(ge.passes.Pass):
    """A wrong pass: the last Add becomes a Sub under the same name."""

    def run(self, graph):
        add = [n for n in graph.topological_order() if n.op_type == "Add"][-1]
        name = add.name
        sub = create_node("Sub", list(add.inputs), {}, graph.unique_name("sub"), graph)
        add.outputs[0].replace_all_uses_with(sub.outputs[0])
        graph.remove_node(add)
        graph.rename_node(sub, name)
        result = ge.passes.PassResult()
        result.note("flipped an Add")
        return result


def test_verify_names_the_pass_that_broke_the_outputs(tmp_path, monkeypatch, capsys):
    graph = ge.Graph("broken")
    x = create_node("Data", [], {"shape": [2, 3]}, "x", graph)
    added = create_node("Add", [x, x], {}, "added", graph)
    graph.set_outputs([create_node("Tanh", [added], {}, "out", graph)])
    path = tmp_path / "broken.json"
    path.write_text(graph.to_json())
    compiling = importlib.import_module("ge.compiler.compile")
    original = compiling.passes_for_level
    monkeypatch.setattr(compiling, "passes_for_level",
                        lambda level: original(level)[:2] + [_FlipAddPass()] + original(level)[2:])
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED: pass _FlipAddPass changed the outputs (first differing node: "
                          "added)")
    assert "Passes run before it (verified): ShapeFoldingPass, ConstantFoldingPass" in out


def test_compile_and_info_show_what_failed_inside_a_pass(tmp_path, monkeypatch, capsys):
    graph = ge.Graph("planted")
    x = create_node("Data", [], {"shape": [3]}, "x", graph)
    c = create_node("Const", [], {"value": ge.Tensor(np.ones(3, np.float32))}, "c", graph)
    graph.set_outputs([create_node("Add", [x, create_node("Neg", [c], {}, "negate", graph)],
                                   {}, "y", graph)])
    path = tmp_path / "planted.json"
    path.write_text(graph.to_json())

    def broken(*inputs, **attrs):
        raise ValueError("planted bug")

    monkeypatch.setattr(get_schema("Neg"), "kernel", broken)
    line = "FAILED in ConstantFoldingPass on node 'negate': ValueError: planted bug"
    assert main(["compile", str(path), "--opt-level", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 pass failure(s)" in out and line in out
    assert main(["compile", str(path), "--opt-level", "1", "--report"]) == 0
    assert line in capsys.readouterr().out
    assert main(["info", str(path), "--optimized", "--opt-level", "1"]) == 0
    assert line in capsys.readouterr().out
