"""The layered layout: layers, dummy nodes, crossings, coordinates, and the dot path."""

from __future__ import annotations

import os
import random
import stat
import sys
import time
from itertools import combinations

import pytest

from ge.errors import GEError
from ge.viz import dot
from ge.viz.layers import assign_layers, count_crossings, layered_graph, reduce_crossings
from ge.viz.layout import choose_method, layout, python_layout

SIZE = (80.0, 30.0)


def place(edges, nodes=None, sizes=None):
    ids = nodes or sorted({n for edge in edges for n in edge})
    return python_layout(ids, sizes or {n: SIZE for n in ids}, edges)


def assert_well_formed(placed, edges):
    """Every edge points down (target layer below, route descending), and no two boxes
    of a layer overlap."""
    for source, target in edges:
        assert placed.boxes[target].layer > placed.boxes[source].layer, (source, target)
    for route in placed.routes:
        ys = [y for _, y in route.points]
        assert ys == sorted(ys), route
        assert route.points[0][1] == pytest.approx(placed.boxes[route.source].bottom)
        assert route.points[-1][1] == pytest.approx(placed.boxes[route.target].top)
    for layer in placed.layers:
        boxes = sorted((placed.boxes[n] for n in layer), key=lambda b: b.x)
        for left, right in zip(boxes, boxes[1:]):
            assert left.right < right.left, (left, right)
    for box in placed.boxes.values():
        assert 0 <= box.left and box.right <= placed.width
        assert 0 <= box.top and box.bottom <= placed.height


def test_a_chain_is_one_straight_column():
    edges = [("a", "b"), ("b", "c"), ("c", "d")]
    placed = place(edges)
    assert_well_formed(placed, edges)
    assert [placed.boxes[n].layer for n in "abcd"] == [0, 1, 2, 3]
    assert len({placed.boxes[n].x for n in "abcd"}) == 1
    assert placed.dummy_count == 0 and placed.method == "python"


def test_a_diamond_has_no_crossings_and_its_ends_centred():
    edges = [("top", "left"), ("top", "right"), ("left", "bottom"), ("right", "bottom")]
    placed = place(edges)
    assert_well_formed(placed, edges)
    assert placed.crossings == 0
    middle = (placed.boxes["left"].x + placed.boxes["right"].x) / 2
    assert placed.boxes["top"].x == pytest.approx(middle)
    assert placed.boxes["bottom"].x == pytest.approx(middle)


def test_long_edges_pass_through_dummy_nodes_and_run_straight():
    # a residual block: the skip edge a -> add spans three layers
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "add"), ("a", "add")]
    graph = layered_graph(5, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)])
    assert graph.dummy_count == 3
    assert [len(chain) for chain in graph.chains] == [2, 2, 2, 2, 5]
    assert all(graph.layer_of[b] == graph.layer_of[a] + 1
               for chain in graph.chains for a, b in zip(chain, chain[1:]))
    placed = place(edges, ["a", "b", "c", "d", "add"])
    assert_well_formed(placed, edges)
    assert placed.dummy_count == 3
    skip = placed.routes[-1]
    inner = skip.points[2:-2]  # through the dummies: one vertical line
    assert len({x for x, _ in inner}) == 1
    assert len({placed.boxes[n].x for n in "bcd"}) == 1  # the main chain is straight


def test_sources_sink_toward_their_first_consumer():
    # an input read only by the last node sits just above it, not at the top
    layers = assign_layers(4, [(0, 1), (1, 2), (3, 2)])
    assert layers == [0, 1, 2, 1]


def test_a_cycle_is_drawn_with_one_edge_reversed():
    edges = [("a", "b"), ("b", "c"), ("c", "a")]
    placed = place(edges)
    back = [r for r in placed.routes if placed.boxes[r.target].layer < placed.boxes[r.source].layer]
    assert len(back) == 1
    assert back[0].points[0][1] > back[0].points[-1][1]  # drawn from its source, upward


def test_duplicate_edges_and_self_loops():
    placed = place([("a", "b"), ("a", "b"), ("b", "b")])
    assert placed.routes[0].points == placed.routes[1].points
    assert placed.routes[2].points == ()


def test_crossing_reduction_undoes_a_bad_order():
    # a zigzag a0 b0 a1 b1 ... in two layers: drawable without crossings, given with its
    # lower layer reversed (every pair of edges crossing that can)
    count = 6
    edges = [(i, count + i) for i in range(count)] + [(i, count + i + 1)
                                                      for i in range(count - 1)]
    graph = layered_graph(2 * count, edges)
    graph.layers[1].sort(key=lambda v: -v)
    before = count_crossings(graph)
    after = reduce_crossings(graph)
    assert before > 20
    assert after == 0 == count_crossings(graph)


def test_crossings_of_a_ring_in_two_layers_stay_at_their_least():
    # a 12-cycle split over two layers cannot do better than 5 crossings
    count = 6
    edges = [(i, count + i) for i in range(count)] + [(i, count + (i + 1) % count)
                                                      for i in range(count)]
    graph = layered_graph(2 * count, edges)
    graph.layers[1].sort(key=lambda v: -v)
    assert count_crossings(graph) > reduce_crossings(graph) == count - 1


def test_count_crossings_on_a_known_graph():
    graph = layered_graph(4, [(0, 3), (1, 2)])
    graph.layers = [[0, 1], [2, 3]]
    assert count_crossings(graph) == 1
    graph.layers = [[0, 1], [3, 2]]
    assert count_crossings(graph) == 0


def test_random_dags_keep_every_rule():
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(2, 30)
        edges = sorted({(f"n{a}", f"n{b}") for a, b in
                        ((rng.randrange(n), rng.randrange(n)) for _ in range(2 * n)) if a < b})
        if not edges:
            continue
        sizes = {f"n{i}": (rng.uniform(30, 200), rng.uniform(20, 60)) for i in range(n)}
        placed = python_layout([f"n{i}" for i in range(n)], sizes, edges)
        assert_well_formed(placed, edges)


def test_a_thousand_nodes_take_seconds_not_minutes():
    rng = random.Random(1)
    ids = [f"n{i}" for i in range(1000)]
    edges = [(ids[i - 1], ids[i]) for i in range(1, 1000)]
    edges += [(ids[i - rng.randint(2, 8)], ids[i]) for i in range(10, 1000, 3)]
    started = time.perf_counter()
    placed = python_layout(ids, {n: SIZE for n in ids}, edges)
    elapsed = time.perf_counter() - started
    assert len(placed.boxes) == 1000 and placed.dummy_count > 0
    assert elapsed < 10.0, f"{elapsed:.1f} s"  # about half a second alone on one core


def test_no_two_boxes_overlap_anywhere():
    edges = [("in", f"b{i}") for i in range(6)] + [(f"b{i}", "out") for i in range(6)]
    placed = place(edges)
    for first, second in combinations(placed.boxes.values(), 2):
        apart_x = first.right <= second.left or second.right <= first.left
        apart_y = first.bottom <= second.top or second.bottom <= first.top
        assert apart_x or apart_y


# -- choosing the method, and the dot path ----------------------------------------------------

PLAIN = """graph 1 2.5 3
node n0 1.25 2.5 1.1111 0.4167 "" solid box black lightgrey
node n1 1.25 0.5 1.1111 0.4167 "" solid box black lightgrey
edge n0 n1 4 1.25 2.29 1.25 1.9 1.25 1.1 1.25 0.71 solid black
stop
"""


@pytest.fixture()
def fake_dot(tmp_path, monkeypatch):
    """A ``dot`` on PATH that prints a fixed plain layout of a -> b."""
    program = tmp_path / "dot"
    program.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"
                       f"sys.stdout.write({PLAIN!r})\n")
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    return program


def test_the_method_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    monkeypatch.delenv("GE_VIZ_LAYOUT", raising=False)
    assert choose_method() == "python"
    monkeypatch.setenv("GE_VIZ_LAYOUT", "dot")
    assert choose_method() == "dot"
    with pytest.raises(GEError, match="not on PATH"):
        layout(["a", "b"], {"a": SIZE, "b": SIZE}, [("a", "b")])
    monkeypatch.setenv("GE_VIZ_LAYOUT", "neato")
    with pytest.raises(GEError, match="expected 'python' or 'dot'"):
        choose_method()


def test_dot_output_becomes_the_same_layout_structure(fake_dot, monkeypatch):
    monkeypatch.delenv("GE_VIZ_LAYOUT", raising=False)
    assert choose_method() == "dot"
    placed = layout(["a", "b"], {"a": SIZE, "b": SIZE}, [("a", "b")])
    assert placed.method == "dot"
    a, b = placed.boxes["a"], placed.boxes["b"]
    assert (a.layer, b.layer) == (0, 1) and a.y < b.y
    assert a.width == SIZE[0] and a.x == pytest.approx(1.25 * 72 + 16)
    (route,) = placed.routes
    assert route.spline and len(route.points) == 4
    assert route.points[0][1] < route.points[-1][1]  # y grows downward
    assert placed.layers == [["a"], ["b"]]
    forced = layout(["a", "b"], {"a": SIZE, "b": SIZE}, [("a", "b")], method="python")
    assert forced.method == "python" and set(forced.boxes) == set(placed.boxes)


def test_dot_source_sizes_the_boxes():
    text = dot.dot_source(["a", "b"], {"a": (144.0, 36.0), "b": SIZE}, [("a", "b")])
    assert "n0 [width=2.0000, height=0.5000];" in text and "n0 -> n1;" in text
