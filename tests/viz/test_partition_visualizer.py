"""``partition.PartitionVisualizer().draw_partitions``, as the seed's section 5.2 calls it."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

import ge
from ge.partition.visualizer import PartitionVisualizer
from ge.viz.scene import UNGROUPED_COLOR, graph_scene
from tests.viz.helpers import hex_rgb, read_png, residual_cnn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Part:
    """What the visualizer reads of a partition."""

    index: int
    node_names: tuple[str, ...]


def test_draw_partitions_writes_the_seeds_png_in_the_working_directory(tmp_path, monkeypatch):
    graph = residual_cnn()
    parts = [Part(0, ("x", "conv1", "w1", "bn1")), Part(1, ("relu1", "conv2")),
             Part(2, ("add", "relu2"))]
    monkeypatch.chdir(tmp_path)
    written = PartitionVisualizer().draw_partitions(graph, parts, output="partition_graph.png")
    assert written == "partition_graph.png"
    assert os.path.exists(tmp_path / "partition_graph.png")
    image = read_png((tmp_path / "partition_graph.png").read_bytes())
    assert image.width > 200 and image.height > 400
    colors = image.colors(every=2)
    groups = {name: f"partition {p.index}" for p in parts for name in p.node_names}
    scene = graph_scene(graph, color_by="partition", groups=groups, ungrouped="no partition")
    fills = {node.group: node.fill for node in scene.nodes}
    assert len({fills[f"partition {i}"] for i in range(3)}) == 3
    for group, fill in fills.items():
        assert hex_rgb(fill) in colors, group
    assert hex_rgb(UNGROUPED_COLOR) in colors  # flatten, fc: in no partition


def test_draw_partitions_takes_the_executable_and_other_formats(tmp_path):
    executable = ge.compile(residual_cnn())
    names = [n.name for n in executable.graph.nodes]
    parts = [Part(0, tuple(names[: len(names) // 2])), Part(1, tuple(names[len(names) // 2:]))]
    svg = PartitionVisualizer().draw_partitions(executable, parts, output=tmp_path / "p.svg")
    text = open(svg).read()
    assert "partition 0" in text and "partition 1" in text and "no partition" not in text
    assert "2 partitions" in text


def test_partitions_without_node_names_are_refused(tmp_path):
    with pytest.raises(ge.errors.GEError, match="node_names"):
        PartitionVisualizer().draw_partitions(residual_cnn(), [object()], tmp_path / "p.png")


def test_the_partitioners_partitions_are_drawn(tmp_path):
    from ge import partition

    graph = residual_cnn()
    partitioner = partition.DepthPartitioner()
    parts = partitioner.create_partitions(graph, partitioner.analyze_depth(graph),
                                          num_partitions=2)
    output = tmp_path / "partition_graph.png"
    partition.PartitionVisualizer().draw_partitions(graph, parts, output=str(output))
    scene_groups = {p.index for p in parts}
    assert read_png(output.read_bytes()).width > 0 and scene_groups == {0, 1}


def test_the_seed_s_section_5_2_picture(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("seed_4_2_cnn", EXAMPLES / "seed_4_2_cnn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = module.build_cnn_model()  # the article's section 4.2 CNN
    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("seed_5_2_partition",
                                                  EXAMPLES / "seed_5_2_partition.py")
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    partitioner = program.GraphPartitioner(graph)  # the article's class, as it wrote it
    partitions = partitioner.partition_by_depth()
    partitioner.visualize_partitions(partitions)
    assert "Partition graph saved to partition_graph.png" in capsys.readouterr().out
    image = read_png((tmp_path / "partition_graph.png").read_bytes())
    assert 300 <= image.width <= 8000 and 600 <= image.height <= 8000
    groups = {name: f"partition {p.index}" for p in partitions for name in p.node_names}
    scene = graph_scene(graph, color_by="partition", groups=groups)
    colors = image.colors(every=2)
    assert len({node.fill for node in scene.nodes}) == len(partitions) == 4
    assert all(hex_rgb(node.fill) in colors for node in scene.nodes)
