"""``ge viz MODEL -o FILE.{svg,png,html}`` on the zoo's SimpleCNN."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from ge.cli import main
from tests.viz.helpers import read_png

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    from examples.zoo import export_onnx

    return export_onnx("simple_cnn", tmp_path_factory.mktemp("viz") / "cnn.onnx")


def test_svg_shows_before_and_after(onnx_file, tmp_path, capsys):
    output = tmp_path / "cnn.svg"
    assert main(["viz", onnx_file, "-o", str(output)]) == 0
    assert "before optimization (32 nodes) and after optimization" in capsys.readouterr().out
    root = ET.parse(output).getroot()
    names = [r.get("data-node") for r in root.iter(f"{SVG}rect") if r.get("class") == "node"]
    assert names.count("input") == 2  # the input in both pictures
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "FusedBatchNorm" in texts and "FusedConv2D" in texts
    assert "Conv2D+BiasAdd+Relu" in texts


def test_png_of_the_optimized_graph_coloured_by_engine(onnx_file, tmp_path, capsys):
    output = tmp_path / "cnn.png"
    assert main(["viz", onnx_file, "-o", str(output), "--after", "--color-by", "engine"]) == 0
    assert "coloured by engine" in capsys.readouterr().out
    image = read_png(output.read_bytes())
    assert image.width > 300 and image.height > 600 and len(image.colors(every=4)) > 5


def test_html_report(onnx_file, tmp_path, capsys):
    output = tmp_path / "cnn.html"
    assert main(["viz", onnx_file, "-o", str(output), "--opt-level", "2"]) == 0
    text = output.read_text()
    assert "compiled 'main_graph' at opt_level 2" in text
    assert len(re.findall(r"<svg ", text)) == 3
    assert "Memory plan" in text and "No memory plan yet" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)


def test_before_only_and_bad_outputs(onnx_file, tmp_path, capsys):
    output = tmp_path / "before.svg"
    assert main(["viz", onnx_file, "-o", str(output), "--before", "--color-by", "stream"]) == 0
    assert "after optimization" not in capsys.readouterr().out
    assert main(["viz", onnx_file, "-o", str(tmp_path / "cnn.gif")]) == 1
    assert ".svg, .png or .html" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["viz", onnx_file, "-o", str(output), "--before", "--after"])


def test_the_optimized_graph_coloured_by_partition(onnx_file, tmp_path, capsys):
    import ge
    from ge import partition

    output = tmp_path / "parts.svg"
    assert main(["viz", onnx_file, "-o", str(output), "--color-by", "partition",
                 "--partitions", "3"]) == 0
    assert "3 stages of balanced cost" in capsys.readouterr().out
    # each node's box has its partition's colour: as many fills as stages, each node
    # filled as the partitioner placed it
    parts = partition.CostPartitioner().create_partitions(
        ge.compile(ge.parse_onnx(onnx_file)), num_partitions=3)
    stage_of = {name: part.index for part in parts for name in part.node_names}
    root = ET.parse(output).getroot()
    fills: dict[int, set[str]] = {}
    for rect in root.iter(f"{SVG}rect"):
        name = rect.get("data-node")
        if rect.get("class") == "node" and name in stage_of:
            fills.setdefault(stage_of[name], set()).add(rect.get("fill"))
    assert len(fills) == 3 and all(len(f) == 1 for f in fills.values())
    assert len(set.union(*fills.values())) == 3
    assert main(["viz", onnx_file, "-o", str(tmp_path / "p.html"), "--color-by",
                 "partition"]) == 1
