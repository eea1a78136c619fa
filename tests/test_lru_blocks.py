"""Property: `lru_blocks.LruBlocks` (one entry per trace block) answers and evicts exactly as `LruOrder` and the
plain ordered map of test_host_order do, for keys that run within trace blocks of 2 or 3 keys, negative keys
(output blocks) included, on the same random programs of stores, landings, refreshes, loads and pins."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.runtime.tiers import lru_blocks
from kvreplay.runtime.tiers.connectors import PROFILES
from kvreplay.runtime.tiers.lru_blocks import LruBlocks
from kvreplay.runtime.tiers.lru_order import LruOrder

from .test_host_order import _run_program, key_lists, operations


@settings(max_examples=800, deadline=None)
@given(profile=st.sampled_from(["offloading_v0_32", "simple_cpu_v0_32"]), capacity=st.integers(1, 6),
       lists=key_lists, program=operations, per=st.sampled_from([2, 3]), shift=st.sampled_from([0, -7]))
def test_trace_block_order_evicts_like_the_reference(profile, capacity, lists, program, per, shift):
    lists = [[key + shift for key in keys] for keys in lists]
    _run_program(PROFILES[profile], capacity, lists, program, lambda: LruBlocks(per))


@settings(max_examples=300, deadline=None)
@given(lists=key_lists, program=operations, per=st.sampled_from([2, 3]))
def test_compaction_changes_no_answer(lists, program, per):
    """The same with the queue compacted as soon as it lists more than three times the held keys (`_compact`
    drops the segments no slot names)."""
    slack, lru_blocks._SLACK = lru_blocks._SLACK, 0
    try:
        _run_program(PROFILES["simple_cpu_v0_32"], 4, lists, program, lambda: LruBlocks(per))
    finally:
        lru_blocks._SLACK = slack


def test_queries_match_lru_order_on_runs():
    """Runs of a prompt (ascending, across trace blocks) and of output blocks (descending, negative)."""
    prompt, output = list(range(13, 40)), list(range(-9, -30, -1))
    blocks, plain = LruBlocks(8), LruOrder()
    for order in (blocks, plain):
        order.hold(None, prompt, None, True)
        order.hold(None, output, None, True)
        order.refresh(prompt, 20)
        order.append(output[5:9])
    probe = list(range(0, 50)) + list(range(-40, 0))
    assert blocks.lacking(probe) == plain.lacking(probe)
    assert blocks.held_run(probe, 13, 60) == plain.held_run(probe, 13, 60) == 27
    assert blocks.held_positions(probe) == plain.held_positions(probe)
    assert blocks.held() == plain.held()
    assert blocks.evict(30, set(), {}, {prompt[19]: 1}) == plain.evict(30, set(), {}, {prompt[19]: 1})
    assert blocks.held() == plain.held()
    assert lru_blocks.LruBlocks(8).evict(3, set(), {}, {}) == []
