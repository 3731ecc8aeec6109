"""The oneDNN engine's Attention against the reference kernel: plain, scaled, grouped,
causal, masked (float and boolean, broadcast), 3-D; the kernel and the writer (into NaN
garbage, then again); what it declines; and the runs it hands to the next engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pytest

import ge
from ge.engines import get_engine
from ge.engines.onednn import attention
from ge.ops import create_node, get_schema
from ge.ops.registry import run_kernel
from tests.engines.test_torch_families import (
    ATTENTION_CASES,
    attention_inputs,
    compare,
    random_mask,
    scramble,
)
from tests.engines.test_writers import garbage, node_for
from tests.tolerance import assert_close

ENGINE = get_engine("onednn")


class _Refused:
    """Stands in for the fallback where a run must stay on oneDNN."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def __call__(self, inputs: Any, outs: Any) -> None:
        raise AssertionError(f"{self.node.name} fell back")


def check(arrays: Sequence[Optional[np.ndarray]], attrs: dict[str, Any], monkeypatch: Any,
          const: Sequence[int] = (), outputs: int = 3, on_onednn: bool = True) -> None:
    node = node_for("Attention", arrays, attrs, const)
    assert node.graph is not None
    node.graph.set_outputs(list(node.outputs[:outputs]))
    assert ENGINE.supports(node), f"Attention {attrs} declined"
    if on_onednn:
        monkeypatch.setattr(attention, "_Fallback", _Refused)
    bound = ENGINE.bind_node(node)
    assert bound.writer is not None
    expected = run_kernel(get_schema("Attention"), "op", arrays, dict(node.attrs))
    before = [None if a is None else a.copy() for a in arrays]
    what = f"Attention {attrs}"
    compare(bound.kernel(list(arrays))[:outputs], expected[:outputs], f"{what} kernel", True,
            None)
    outs = [garbage(e.shape, e.dtype, 0xFF) for e in expected]
    bound.writer(list(arrays), outs)
    compare(outs[:outputs], expected[:outputs], f"{what} writer", True, None)
    for out in outs:
        scramble(out)
    bound.writer(list(arrays), outs)  # the cached primitives, the same addresses
    compare(outs[:outputs], expected[:outputs], f"{what} writer again", True, None)
    for original, array in zip(before, arrays):
        if original is not None:
            np.testing.assert_array_equal(array, original, err_msg=f"{what} changed an input")


@pytest.mark.parametrize("name,shape,attrs", ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
def test_attention(name: str, shape: dict[str, Any], attrs: dict[str, Any],
                   monkeypatch: Any) -> None:
    check(attention_inputs(**shape), attrs, monkeypatch)


def _visible_mask(shape: tuple[int, ...], boolean: bool) -> np.ndarray:
    """A random mask in which every query sees at least one key."""
    mask = random_mask(shape, boolean)
    rows = mask.reshape(-1, shape[-1])
    rows[:, 0] = True if boolean else 0.5
    return mask


@pytest.mark.parametrize("boolean", [True, False])
@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7), (7,), (1, 7)])
def test_attention_with_a_mask(boolean: bool, mask_shape: tuple[int, ...],
                               monkeypatch: Any) -> None:
    arrays = attention_inputs() + [_visible_mask(mask_shape, boolean)]
    check(arrays, {}, monkeypatch)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 4, 5, 7)])
def test_a_query_that_sees_no_key_runs_on_the_next_engine(mask_shape: tuple[int, ...],
                                                          monkeypatch: Any) -> None:
    arrays = attention_inputs() + [random_mask(mask_shape, True)]  # row 0 sees nothing
    check(arrays, {}, monkeypatch, on_onednn=False)


@pytest.mark.parametrize("kv_heads", [2, 4])
@pytest.mark.parametrize("masked", [False, True])
def test_attention_in_3d_form(kv_heads: int, masked: bool, monkeypatch: Any) -> None:
    arrays = attention_inputs(flat=True, kv_heads=kv_heads, q_len=16, kv_len=16)
    if masked:
        arrays.append(_visible_mask((16, 16), False))
    check(arrays, {"q_num_heads": 4, "kv_num_heads": kv_heads}, monkeypatch)


def test_attention_the_engine_declines() -> None:
    q, k, v = attention_inputs()
    past = [np.zeros((2, 2, 3, 8), np.float32), np.zeros((2, 2, 3, 6), np.float32)]
    assert not ENGINE.supports(node_for("Attention", [q, k, v, None, *past], {}))
    assert not ENGINE.supports(node_for("Attention", [q, k, v], {"softcap": 5.0}))
    assert not ENGINE.supports(node_for("Attention", [q, k, v], {"left_window_size": 2}))
    assert not ENGINE.supports(node_for("Attention", [q.astype(np.float64),
                                                      k.astype(np.float64),
                                                      v.astype(np.float64)], {}))
    assert not ENGINE.supports(node_for("Attention", [q, k, v, random_mask((5, 7), True)],
                                        {"is_causal": 1}))
    read_scores = node_for("Attention", [q, k, v], {})
    assert read_scores.graph is not None
    read_scores.graph.set_outputs(list(read_scores.outputs))
    assert not ENGINE.supports(read_scores)
    assert ENGINE.supports(node_for("Attention", [q, k, v], {}))


def test_an_encoder_layer_on_onednn_agrees_with_numpy() -> None:
    """Attention between computed projections, in a compiled graph, from the arena."""
    rng = np.random.default_rng(3)
    graph = ge.Graph("encoder")
    x = create_node("Data", [], {"shape": [2, 32, 64]}, "x", graph)
    projections = []
    for name in "qkv":
        weight = create_node("Const", [], {"value": ge.Tensor(
            rng.standard_normal((64, 64)).astype(np.float32) / 8)}, f"w{name}", graph)
        projections.append(create_node("MatMul", [x, weight], {}, name, graph))
    mask = create_node("Data", [], {"shape": [2, 1, 1, 32], "dtype": "bool"}, "mask", graph)
    node = create_node("Attention", [*projections, mask],
                       {"q_num_heads": 4, "kv_num_heads": 4}, "attention", graph)
    graph.set_outputs([node.outputs[0]])
    feeds = {"x": rng.standard_normal((2, 32, 64)).astype(np.float32),
             "mask": rng.random((2, 1, 1, 32)) > 0.3}
    feeds["mask"][..., 0] = True
    fast = ge.compile(graph, opt_level=0, engines=["onednn", "numpy"])
    assert fast.report["engines_by_op"]["onednn"] == {"MatMul": 3, "Attention": 1}
    got = ge.Session(fast).run(feeds)
    want = ge.Session(ge.compile(graph, opt_level=0, engines=["numpy"])).run(feeds)
    name = next(iter(want))
    assert_close(got[name], want[name], accumulate=True)
    assert not fast.memory["outside_arena"]
