"""A request's tier state (tiers/request_state.py): shared and read-only where no tier can concern it, its own
wherever a tier (or a P/D handoff to a rank with one) may write it."""
from __future__ import annotations

import pytest

from kvreplay.runtime.serving.requests import Request, RequestSpec, Content
from kvreplay.runtime.tiers.request_state import UNTIERED, TierState

from .scenarios import aggregated_config, compile_scenario, replay_both_ways, row

HOST = {"num_host_blocks": 8, "connector": "offloading_v0_24", "latency_to_first_byte_ms": 0.0,
        "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}
# two requests sharing their first two blocks, the second arriving after the first finished
ROWS = [row(0, 12, 2, [1, 2, 3]), row(40, 12, 2, [1, 2, 4])]


def _spec(index: int = 0) -> RequestSpec:
    return RequestSpec(index, 8, 2, Content(hash_ids=(1, 2), trace_block=4))


def test_an_untiered_request_shares_the_read_only_state():
    request = Request(_spec(), 0, 0, 4, tiered=False)
    assert request.tier is UNTIERED
    assert Request(_spec(1), 0, 0, 4, tiered=False).tier is UNTIERED
    # what the scheduler and G1's release read of it: nothing loading, preloaded or being stored
    assert (UNTIERED.loading, UNTIERED.preloaded, UNTIERED.store_jobs, UNTIERED.stored_upto) == (False, (), (), 0)
    assert UNTIERED.sources(8, 4) == {}
    with pytest.raises(AttributeError, match="read-only"):
        UNTIERED.loading = True
    with pytest.raises(AttributeError):
        UNTIERED.preloaded.append(3)  # (a tuple: a write through a container fails too)
    with pytest.raises(TypeError):
        UNTIERED.brought["k"] = "g3"


def test_a_tiered_request_has_its_own_state():
    first, second = Request(_spec(), 0, 0, 4), Request(_spec(1), 0, 0, 4)
    assert type(first.tier) is TierState and first.tier is not second.tier
    first.tier.loading = True
    assert not second.tier.loading


def test_replays_give_untiered_ranks_the_shared_state_and_tiered_ones_their_own(tmp_path):
    plain = compile_scenario(tmp_path, ROWS, aggregated_config({}, g1_blocks=8), "plain.yaml")
    fused, single, records = replay_both_ways(plain, tmp_path)
    assert all(r.tier is UNTIERED for r in fused.requests + single.requests)
    # the second request reused its two shared blocks of 4 tokens from G1 (nothing behind it)
    assert [r["reused_input_tokens"] for r in records] == [0, 8]
    tiered = compile_scenario(tmp_path, ROWS, aggregated_config({"host_offload": HOST}, g1_blocks=8), "g2.yaml")
    fused, single, _ = replay_both_ways(tiered, tmp_path)
    states = [r.tier for r in fused.requests]
    assert all(type(s) is TierState for s in states) and states[0] is not states[1]
