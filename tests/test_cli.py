"""The ``ge`` command on GE's own graph files."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.cli import main
from ge.ops import all_op_types, create_node


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
