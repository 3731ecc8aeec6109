"""The arena planner: placements never overlap live buffers, and the bound is a bound."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ge.memory import ALIGNMENT, Buffer, StepUse, live_peak, memory_aware_order, place, plan_memory
from ge.memory.planner import best_fit_in_order, greedy_by_size, lower_bound


@st.composite
def buffer_sets(draw):
    count = draw(st.integers(1, 40))
    horizon = draw(st.integers(1, 30))
    buffers = []
    for key in range(count):
        first = draw(st.integers(0, horizon - 1))
        last = draw(st.integers(first, horizon - 1))
        size = ALIGNMENT * draw(st.integers(1, 64))
        buffers.append(Buffer(key, size, first, last))
    return buffers


def brute_force_peak(buffers):
    horizon = max(b.last for b in buffers) + 1
    return max(sum(b.size for b in buffers if b.first <= t <= b.last) for t in range(horizon))


def assert_valid(buffers, offsets):
    for buffer in buffers:
        assert offsets[buffer.key] % ALIGNMENT == 0
    for a in buffers:
        for b in buffers:
            if a.key < b.key and a.overlaps(b):
                a_end, b_end = offsets[a.key] + a.size, offsets[b.key] + b.size
                assert a_end <= offsets[b.key] or b_end <= offsets[a.key], (a, b, offsets)


@settings(max_examples=150, deadline=None)
@given(buffer_sets())
def test_every_strategy_keeps_live_buffers_apart_and_the_bound_holds(buffers):
    bound = lower_bound(buffers)
    assert bound == brute_force_peak(buffers)
    for strategy in (greedy_by_size, best_fit_in_order):
        offsets = strategy(buffers)
        assert_valid(buffers, offsets)
        assert max(offsets[b.key] + b.size for b in buffers) >= bound
    chosen = place(buffers)
    assert_valid(buffers, chosen.offsets)
    assert chosen.arena_bytes == min(chosen.tried.values()) and len(chosen.tried) == 2


def test_without_reuse_no_two_buffers_share_a_byte():
    buffers = [Buffer(0, 128, 0, 0), Buffer(1, 64, 1, 1), Buffer(2, 64, 2, 2)]
    chosen = place(buffers, reuse=False)
    assert chosen.arena_bytes == 256
    assert_valid([Buffer(b.key, b.size, 0, 9) for b in buffers], chosen.offsets)
    assert place(buffers).arena_bytes == 128  # with reuse: one buffer's room serves all


def test_a_chain_reuses_two_buffers():
    # x -> a -> b -> c -> d: each value dies when the next is made
    steps = [StepUse((0,), (1,)), StepUse((1,), (2,)), StepUse((2,), (3,)), StepUse((3,), (4,))]
    descs = {s: ((256,), np.dtype(np.float32)) for s in range(5)}
    plan = plan_memory(steps, descs, pinned={0, 4})
    assert plan.arena_bytes == 2 * 1024 == plan.lower_bound_bytes
    assert plan.naive_bytes == 3 * 1024
    assert plan.offsets[1] != plan.offsets[2] and plan.offsets[1] == plan.offsets[3]


def test_in_place_takes_the_dying_input_only():
    f32 = np.dtype(np.float32)
    steps = [StepUse((0,), (1,)),                 # a = f(x)
             StepUse((1,), (2,), inplace=True),   # b = relu(a): a dies here -> in place
             StepUse((2,), (3,), inplace=True),   # c = relu(b): b is read again below -> not
             StepUse((2, 3), (4,), inplace=True)]  # d = b + c: b dies, c is input 1
    descs = {s: ((64,), f32) for s in range(5)}
    plan = plan_memory(steps, descs, pinned={0, 4})
    assert plan.inplace == {1}
    assert plan.offsets[2] == plan.offsets[1]
    assert plan.offsets[3] != plan.offsets[2]
    off = plan_memory(steps, descs, pinned={0, 4}, inplace=False)
    assert off.inplace_count == 0


def test_in_place_over_another_input_takes_it_only_when_nothing_else_reads_it():
    f32 = np.dtype(np.float32)
    descs = {s: ((64,), f32) for s in range(8)}
    # r = f(x); a = g(x); y = conv(a, w, -, r): r dies at y, so y goes over it
    over_residual = StepUse((2, -1, -1, 1), (3,), inplace=True, inplace_input=3,
                            exclusive=True)
    plan = plan_memory([StepUse((0,), (1,)), StepUse((0,), (2,)), over_residual,
                        StepUse((3,), (4,))], descs, pinned={0, 4})
    assert plan.inplace == {2} and plan.offsets[3] == plan.offsets[1]
    # the residual is also the image the convolution reads: never over it
    same_image = StepUse((1, -1, -1, 1), (3,), inplace=True, inplace_input=3,
                         exclusive=True)
    plan = plan_memory([StepUse((0,), (1,)), same_image, StepUse((3,), (4,))], descs,
                       pinned={0, 4})
    assert plan.inplace_count == 0 and plan.offsets[3] != plan.offsets[1]
    # an elementwise op (not exclusive) may write over x in x + x
    doubled = StepUse((1, 1), (3,), inplace=True)
    plan = plan_memory([StepUse((0,), (1,)), doubled, StepUse((3,), (4,))], descs,
                       pinned={0, 4})
    assert plan.inplace == {1}
    # the residual read later: not in place
    plan = plan_memory([StepUse((0,), (1,)), StepUse((0,), (2,)), over_residual,
                        StepUse((1, 3), (4,))], descs, pinned={0, 4})
    assert plan.inplace_count == 0


def test_never_in_place_over_a_graph_input_or_into_a_graph_output():
    f32 = np.dtype(np.float32)
    descs = {s: ((8,), f32) for s in range(3)}
    over_input = plan_memory([StepUse((0,), (1,), inplace=True), StepUse((1,), (2,))],
                             descs, pinned={0, 2})
    assert over_input.inplace_count == 0
    into_output = plan_memory([StepUse((0,), (1,)), StepUse((1,), (2,), inplace=True)],
                              descs, pinned={0, 2})
    assert into_output.inplace_count == 0


def test_a_view_shares_its_input_and_keeps_it_alive():
    f32 = np.dtype(np.float32)
    steps = [StepUse((0,), (1,)),             # a
             StepUse((1,), (2,), view=True),  # v = reshape(a): no storage
             StepUse((0,), (3,)),             # e: a is still alive through v
             StepUse((2, 3), (4,))]
    descs = {0: ((4, 4), f32), 1: ((4, 4), f32), 2: ((16,), f32), 3: ((4, 4), f32),
             4: ((16,), f32)}
    plan = plan_memory(steps, descs, pinned={0, 4})
    assert plan.views == {1} and plan.offsets[2] == plan.offsets[1]
    assert plan.offsets[3] != plan.offsets[1]  # a (through v) is live when e is made
    assert plan.naive_bytes == 2 * 64


def test_a_value_of_unknown_size_stays_out_of_the_arena():
    f32 = np.dtype(np.float32)
    steps = [StepUse((0,), (1,)), StepUse((1,), (2,)), StepUse((2,), (3,))]
    plan = plan_memory(steps, {0: ((4,), f32), 1: ((4,), f32), 3: ((4,), f32)}, pinned={0, 3})
    assert plan.dynamic == {2} and 2 not in plan.offsets and 1 in plan.offsets


def test_the_memory_aware_order_finishes_a_branch_before_starting_the_next():
    # two chains from x, each a big value then a small one; the graph order starts both
    # big values before either small one (peak: both big ones), the memory-aware order
    # finishes one chain first (peak: one big and one small)
    steps = [StepUse((0,), (1,)),      # a1: 1000 bytes
             StepUse((0,), (2,)),      # c1: 1000 bytes
             StepUse((1,), (3,)),      # a2: 10 bytes, a1 dies
             StepUse((2,), (4,)),      # c2: 10 bytes, c1 dies
             StepUse((3, 4), (5,))]
    sizes = {1: 1000, 2: 1000, 3: 10, 4: 10, 5: 10}
    order = memory_aware_order(steps, sizes, pinned={0, 5})
    assert order == [0, 2, 1, 3, 4]
    given, reordered = live_peak(steps, sizes, {0, 5}), live_peak(steps, sizes, {0, 5}, order)
    assert given == 1024 + 1024 + 64 and reordered == 1024 + 64 + 64  # inputs and outputs
    # of a step are live together
