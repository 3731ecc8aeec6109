"""The ``ge`` command on TensorFlow models: frozen ``.pb`` files and SavedModel
directories, ``--framework`` and ``--input-shape``."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import ge
from ge.cli import main, parse_input_shapes
from ge.ops import create_node
from tests.frontends import tf_models
from tests.tolerance import rel_err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A frozen Keras dense network (.pb, dynamic batch), a two-input graph, a SavedModel."""
    root = tmp_path_factory.mktemp("cli_tf")
    model = tf_models.small_dense(seed=0)
    dense = root / "dense.pb"
    dense.write_bytes(tf_models.freeze_keras(model, [None, 20]).data)
    two = root / "two.pb"
    two.write_bytes(tf_models.freeze(lambda a, b: a * b + 1.0,
                                     [((None, 3), tf.float32), ((None, 3), tf.float32)]).data)

    class Doubler(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="values")])
        def __call__(self, values):
            return {"doubled": values * 2.0}

    saved = root / "doubler"
    module = Doubler()
    tf.saved_model.save(module, str(saved), signatures=module.__call__)
    return {"model": model, "dense": dense, "two": two, "saved": saved, "root": root}


def test_info_reads_a_pb(models, capsys):
    assert main(["info", str(models["dense"])]) == 0
    out = capsys.readouterr().out
    assert "input  x0: float32[?,20]" in out
    assert "output Identity: float32[?,10]" in out
    assert "TensorFlow ops: " in out and "MatMul x3" in out


def test_input_shape_fixes_unknown_sizes(models, capsys):
    assert main(["info", str(models["dense"]), "--input-shape", "x0:4,20"]) == 0
    out = capsys.readouterr().out
    assert "input  x0: float32[4,20]" in out and "output Identity: float32[4,10]" in out
    assert main(["info", str(models["two"]), "--input-shape", "x0:2,3;x1:2,3"]) == 0
    out = capsys.readouterr().out
    assert "input  x0: float32[2,3]" in out and "input  x1: float32[2,3]" in out
    assert main(["info", str(models["two"]), "--input-shape", "x0:5,3",
                 "--input-shape", "x1:?,3"]) == 0
    out = capsys.readouterr().out
    assert "input  x0: float32[5,3]" in out and "input  x1: float32[?,3]" in out


def test_input_shapes_parse_as_atc_writes_them():
    assert parse_input_shapes(["x:1,224,224,3;y:2", "z:0:-1,3"]) == {
        "x": [1, 224, 224, 3], "y": [2], "z:0": [-1, 3]}
    for bad in ("x=1,2", "x:", ":1,2", "x:1,a"):
        with pytest.raises(ge.errors.InputError, match="NAME:D1,D2"):
            parse_input_shapes([bad])


def test_bad_input_shapes_are_reported(models, capsys):
    assert main(["info", str(models["dense"]), "--input-shape", "x0=1,20"]) == 1
    assert "expected NAME:D1,D2" in capsys.readouterr().err
    assert main(["info", str(models["dense"]), "--input-shape", "x0:1,20;y:3"]) == 1
    assert "['y']" in capsys.readouterr().err


def test_run_a_pb_with_a_given_batch(models, capsys):
    assert main(["run", str(models["dense"]), "--input-shape", "x0:3,20"]) == 0
    assert "Identity: float32[3, 10]" in capsys.readouterr().out


def test_compile_a_pb_to_an_offline_model_that_matches_tensorflow(models, capsys):
    offline = models["root"] / "dense.gem"
    assert main(["compile", str(models["dense"]), "-o", str(offline)]) == 0
    assert "wrote the offline model" in capsys.readouterr().out
    session = ge.Session(ge.load(offline))
    x = np.random.default_rng(0).standard_normal((6, 20)).astype(np.float32)
    got = session.run({"x0": x})["Identity"]
    assert rel_err(got, np.asarray(models["model"](x, training=False))) < 1e-5
    inputs = models["root"] / "in.npz"
    np.savez(inputs, x0=x)
    assert main(["run", str(offline), "--inputs", str(inputs)]) == 0
    assert "Identity: float32[6, 10]" in capsys.readouterr().out


def test_run_a_saved_model_directory(models, capsys):
    assert main(["run", str(models["saved"]), "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "float32[2, 4]" in out


def test_framework_names_the_format_of_an_unnamed_file(models, capsys):
    unnamed = models["root"] / "model.bin"
    unnamed.write_bytes(models["dense"].read_bytes())
    assert main(["info", str(unnamed)]) == 1
    assert "--framework" in capsys.readouterr().err
    for framework in ("tensorflow", "3"):
        assert main(["info", str(unnamed), "--framework", framework]) == 0
        assert "input  x0: float32[?,20]" in capsys.readouterr().out
    assert main(["info", str(models["dense"]), "--framework", "onnx"]) == 1
    assert "ONNX model" in capsys.readouterr().err  # read as ONNX, as asked


def test_input_shape_is_refused_for_other_formats(tmp_path, capsys):
    graph = ge.Graph("g")
    x = create_node("Data", [], {"shape": [-1, 3]}, "x", graph)
    graph.set_outputs([create_node("Relu", [x], {}, "y", graph)])
    path = tmp_path / "g.json"
    path.write_text(graph.to_json())
    assert main(["info", str(path), "--input-shape", "x:2,3"]) == 1
    assert "applies to TensorFlow models" in capsys.readouterr().err
