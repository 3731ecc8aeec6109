"""Graphs the partition and pipeline tests share: the zoo models, compiled once per
process, and small hand-built graphs with the awkward shapes of dataflow."""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass

import numpy as np

import ge
from examples import zoo
from ge.ops import create_node

#: the model zoo: the seed's SimpleCNN, ResNet-18/50, MobileNetV2, the BERT-style encoder
ZOO = ("simple_cnn", "resnet18", "resnet50", "mobilenet_v2", "bert")

_FOLDER = tempfile.TemporaryDirectory(prefix="ge-partition-zoo-")


@dataclass(frozen=True)
class ZooCase:
    """A zoo model at batch 1: its parsed graph, its executable at the default level,
    a feed and the unpartitioned session's outputs for it."""

    name: str
    graph: ge.Graph
    executable: ge.Executable
    feed: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]


@functools.lru_cache(maxsize=None)
def zoo_case(name: str) -> ZooCase:
    path = zoo.export_onnx(name, os.path.join(_FOLDER.name, f"{name}.onnx"), batch=1,
                           dynamic_batch=False)
    graph = ge.parse_onnx(path)
    executable = ge.compile(graph)
    feed = zoo.example_feeds(name, batch=1, seed=1)
    expected = ge.Session(executable).run(feed)
    return ZooCase(name, graph, executable, feed, expected)


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """The same outputs, in the same order, bit for bit."""
    assert list(got) == list(want)
    for key in want:
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype, key
        assert np.array_equal(got[key], want[key]), key


def skip_graph() -> ge.Graph:
    """A diamond with a skip connection, a graph output made mid-graph, a constant read
    at both ends, and a graph input read at the end:

        x -> a = Relu(x)                    (a graph output)
        a -> b = Sigmoid(a),  a -> c = Tanh(a)
        d = Add(b, c) -> e = Mul(d, w)      (w: a constant)
        f = Add(e, a)                       (the skip connection)
        g = Mul(f, w) -> h = Add(g, x)      (the graph output)
    """
    graph = ge.Graph("skip")
    x = create_node("Data", [], {"shape": [2, 3]}, "x", graph)
    w = create_node("Const", [], {"value": ge.Tensor(np.full((2, 3), 0.5, np.float32))}, "w",
                    graph)
    a = create_node("Relu", [x], {}, "a", graph)
    b = create_node("Sigmoid", [a], {}, "b", graph)
    c = create_node("Tanh", [a], {}, "c", graph)
    d = create_node("Add", [b, c], {}, "d", graph)
    e = create_node("Mul", [d, w], {}, "e", graph)
    f = create_node("Add", [e, a], {}, "f", graph)
    g = create_node("Mul", [f, w], {}, "g", graph)
    h = create_node("Add", [g, x], {}, "h", graph)
    graph.set_outputs([h, a])
    return graph


def skip_feed() -> dict[str, np.ndarray]:
    return {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}
