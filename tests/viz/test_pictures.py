"""Pictures of graphs: PNG (read back by an independent decoder), SVG, HTML, errors."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import ge
import ge.viz as viz
from ge.compiler.loader import static_plan
from ge.viz import font
from ge.viz.png import MAX_SIDE, Canvas, png_bytes
from ge.viz.scene import UNGROUPED_COLOR, fused_contents, graph_scene
from ge.viz.timeline import timeline_buffers
from tests.viz.helpers import PNG_SIGNATURE, hex_rgb, read_png, residual_cnn

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def graph():
    return residual_cnn()


@pytest.fixture(scope="module")
def executable(graph):
    return ge.compile(graph, engines=["numpy"])


def drawn_nodes(graph):
    return [n for n in graph.nodes if n.op_type != "Const"]


def test_png_is_a_real_image_of_plausible_size(graph, tmp_path):
    path = viz.draw(graph, tmp_path / "graph.png")
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    image = read_png(data)  # checks every CRC on the way
    assert image.chunks[0] == b"IHDR" and image.chunks[-1] == b"IEND" and b"IDAT" in image.chunks
    assert 200 <= image.width <= MAX_SIDE and 400 <= image.height <= MAX_SIDE
    colors = image.colors(every=3)
    assert len(colors) >= 8  # not blank: background, ink, fills, edge labels
    scene = graph_scene(graph)
    for node in scene.nodes:  # every op type's fill is painted
        assert hex_rgb(node.fill) in colors, node


def test_png_writer_primitives_and_encoding():
    canvas = Canvas(20, 10)
    canvas.fill_rect(2, 2, 5, 5, b"\x10\x20\x30")
    canvas.line((0, 9), (19, 0), b"\x00\x00\xff", 1)
    canvas.text(8, 1, "Hi", b"\xff\x00\x00", 1, False)
    image = read_png(canvas.encode())
    assert (image.width, image.height) == (20, 10)
    assert image.rows[3][3 * 3:3 * 4] == b"\x10\x20\x30"
    assert image.rows[9][0:3] == b"\x00\x00\xff" and image.rows[0][57:60] == b"\x00\x00\xff"
    assert b"\xff\x00\x00" in image.colors()
    assert image.rows[0][0:3] == b"\xff\xff\xff"


def test_large_drawings_are_scaled_down():
    drawing = viz.Drawing(20000.0, 500.0, [])
    image = read_png(png_bytes(drawing))
    assert image.width == MAX_SIDE and image.height == 200
    small = read_png(png_bytes(viz.Drawing(100.0, 50.0, [])))
    assert (small.width, small.height) == (200, 100)  # small ones are drawn at twice the size


def test_the_font_covers_printable_ascii():
    for code in range(32, 127):
        rows = font.glyph_rows(chr(code))
        assert len(rows) == font.GLYPH_HEIGHT and all(0 <= r < 32 for r in rows), chr(code)
        assert any(rows) or chr(code) == " "
    glyphs = {font.glyph_rows(chr(c)) for c in range(33, 127)}
    assert len(glyphs) == 94  # every visible character distinct
    assert font.glyph_rows("\u00e9") == font.glyph_rows("?")


def test_svg_has_one_box_per_node_and_edges(graph, tmp_path):
    path = viz.draw(graph, tmp_path / "graph.svg", title="residual")
    root = ET.parse(path).getroot()
    boxes = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "node"]
    assert sorted(r.get("data-node") for r in boxes) == sorted(n.name for n in
                                                              drawn_nodes(graph))
    edges = [p for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]
    assert len(edges) == sum(1 for n in drawn_nodes(graph) for v in n.inputs
                             if v is not None and v.producer.op_type != "Const")
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "1x8x8x4" in texts  # the shape on the input's edges
    constants = sum(1 for n in graph.nodes if n.op_type == "Const")
    assert f"{constants} constants not drawn" in texts


def test_fused_nodes_show_what_they_contain(executable, tmp_path):
    contents = {n.name: fused_contents(n) for n in executable.graph.nodes}
    assert contents["relu1"] == ["Conv2D", "BiasAdd", "Relu"]
    assert contents["relu2"] == ["Conv2D", "Add", "Relu"]  # conv2 has no bias to fold
    assert contents["logits"] == ["MatMul", "BiasAdd"]
    root = ET.parse(viz.draw(executable, tmp_path / "after.svg")).getroot()
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "Conv2D+BiasAdd+Relu" in texts and "Conv2D+Add+Relu" in texts
    assert "MatMul+BiasAdd" in texts


def test_engine_and_stream_colours_come_from_the_executable(graph, executable, tmp_path):
    scene = viz.scene_of(executable, color_by="engine")
    assert {label for label, _, _ in scene.legend} == {"numpy", "input"}
    scene = viz.scene_of(executable, color_by="stream")
    assert {label for label, _, _ in scene.legend} == {"stream 0", "input"}
    with pytest.raises(ge.errors.GEError, match="needs the executable"):
        viz.draw(graph, tmp_path / "x.svg", color_by="engine")
    with pytest.raises(ge.errors.GEError, match="color_by"):
        viz.draw(graph, tmp_path / "x.svg", color_by="colour")


def test_unknown_formats_are_refused(graph, tmp_path):
    with pytest.raises(ge.errors.ModelFormatError, match=r"\.svg, \.png or \.html"):
        viz.draw(graph, tmp_path / "graph.jpg")
    with pytest.raises(ge.errors.GEError, match="draws a ge.Graph"):
        viz.draw("graph.json", tmp_path / "graph.svg")
    assert not (tmp_path / "graph.jpg").exists()


def test_html_report_is_self_contained_with_pictures_and_memory_timeline(graph, executable,
                                                                           tmp_path):
    plan = static_plan(executable)[1].memory
    path = viz.report_html(graph, executable, tmp_path / "report.html", plan=plan)
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<script" not in text and "<link" not in text
    pictures = re.findall(r"<svg .*?</svg>", text, flags=re.S)
    assert len(pictures) == 3  # before, after, memory
    for picture in pictures:
        ET.fromstring(picture)  # each well-formed
    before, after, memory = (ET.fromstring(p) for p in pictures)
    assert len([r for r in before.iter(f"{SVG}rect") if r.get("class") == "node"]) == \
        len(drawn_nodes(graph))
    assert len([r for r in after.iter(f"{SVG}rect") if r.get("class") == "node"]) == \
        len(drawn_nodes(executable.graph))
    buffers = [r for r in memory.iter(f"{SVG}rect") if r.get("class") == "buffer"]
    planned = {plan.owner(slot) for slot in plan.offsets}
    assert len(buffers) == len(planned) == len(timeline_buffers(executable.steps, plan)) > 0
    assert {int(r.get("data-key")) for r in buffers} == planned
    assert "compiled 'residual' at opt_level 3" in text and "engine numpy" in text
    assert "Memory plan" in text


def test_timeline_buffers_follow_the_plan(executable):
    plan = static_plan(executable)[1].memory
    buffers = timeline_buffers(executable.steps, plan)
    for first, second in ((a, b) for a in buffers for b in buffers if a.slot < b.slot):
        overlap_time = first.first <= second.last and second.first <= first.last
        overlap_bytes = (first.offset < second.offset + second.size
                         and second.offset < first.offset + first.size)
        assert not (overlap_time and overlap_bytes), (first, second)
    assert all(b.offset + b.size <= plan.arena_bytes for b in buffers)


def test_html_report_without_a_plan_says_how_to_get_one(graph, tmp_path):
    fresh = ge.compile(graph, engines=["numpy"])
    text = viz.report_html(graph, fresh, tmp_path / "r.html").read_text()
    assert "No memory plan yet" in text
    with ge.Session(fresh) as session:
        session.run({"x": np.ones((1, 8, 8, 4), np.float32)})
    text = viz.report_html(graph, fresh, tmp_path / "r.html").read_text()
    assert 'class="buffer"' in text


def test_side_by_side_shares_colours(graph, executable, tmp_path):
    path = viz.draw_side_by_side([(graph, "before"), (executable, "after")],
                                 tmp_path / "both.svg")
    root = ET.parse(path).getroot()
    fills = {}
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("class") == "node" and rect.get("data-node") == "x":
            fills.setdefault("x", set()).add(rect.get("fill"))
    assert len(fills["x"]) == 1  # the input is drawn twice in one colour
    assert float(root.get("width")) > 2 * 150


def test_partition_colours_and_grey_for_the_rest(graph, tmp_path):
    groups = {"conv1": "partition 0", "bn1": "partition 0", "relu1": "partition 1"}
    scene = viz.scene_of(graph, color_by="partition", groups=groups)
    fills = {node.id: node.fill for node in scene.nodes}
    assert fills["conv1"] == fills["bn1"] != fills["relu1"]
    assert fills["logits"] == UNGROUPED_COLOR
    assert [label for label, _, _ in scene.legend][-1] == "no partition"


def test_fused_elementwise_and_conv_bn_relu_contents():
    from ge.ops import create_node

    graph = ge.Graph("fused")
    x = create_node("Data", [], {"shape": [2, 3]}, "x", graph)
    y = create_node("Data", [], {"shape": [2, 3]}, "y", graph)
    chain = create_node("FusedElementwise", [x, y],
                        {"steps": ["Mul in0 in1", "Add s0 in1", "Relu s1"]}, "chain", graph)
    assert fused_contents(chain) == ["Mul", "Add", "Relu"]
    image = create_node("Data", [], {"shape": [1, 4, 4, 2]}, "image", graph)
    channel = [create_node("Const", [], {"value": ge.Tensor(np.ones(shape, np.float32))}, name,
                           graph)
               for name, shape in (("w", (1, 1, 2, 2)), ("scale", (2,)), ("offset", (2,)),
                                   ("mean", (2,)), ("variance", (2,)))]
    fused = create_node("ConvBNReLU", [image, *channel], {"padding": "SAME"}, "cbr", graph)
    assert fused_contents(fused) == ["Conv2D", "FusedBatchNorm", "Relu"]
    graph.set_outputs([chain, fused])
    lines = {node.id: node.lines for node in graph_scene(graph).nodes}
    assert lines["chain"][:2] == ("FusedElementwise", "Mul+Add+Relu")
    assert lines["cbr"][:2] == ("ConvBNReLU", "Conv2D+FusedBatchNorm+Relu")
    assert {node.kind for node in graph_scene(graph).nodes} == {"input", "fused"}
