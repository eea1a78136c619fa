"""vLLM's CPU-offload connectors as data: what each stores and when, and the G2 tier rules each implies.

`ConnectorProfile` records one connector's choices (what it offers to G2, how
its lookups treat copies in flight, how it orders G2); `tier_rules` turns the
part that is G2's own behaviour into the tier's `TierRules`.  The store policy
that reads the rest lives in `offload.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .tier import TierRules


@dataclass(frozen=True)
class ConnectorProfile:
    name: str
    store_decode_blocks: bool  # decode blocks are stored too (else prompt blocks only)
    store_delay_passes: int  # 0: stored at the end of the pass that computed them; 1: one pass later
    store_rest_on_finish: bool  # a finishing request offers blocks it could not store earlier
    eviction: str  # "lru" | "lru_by_store_start" | "fifo"
    refresh_on_lookup: bool  # lookups (and stores) make the prompt's resident blocks the newest
    refresh_on_load_done: bool  # a completed load makes its blocks the newest
    in_flight_store_hit: str  # "defer" | "miss"
    loading_hit: str  # "defer" | "load"
    own_store_defers: bool  # a request whose own store is in flight is not looked up
    pin_before_load: bool
    g1_copy: str  # "new_owner_waits" | "hold_until_copied"
    preemption_waits_for: str  # "own_stores" | "all_transfers"
    scan_from_block_zero: bool = False  # each admission offers from block 0 (blocks already in G2 are skipped)


PROFILES = {
    "offloading_v0_24": ConnectorProfile(
        "offloading_v0_24", store_decode_blocks=False, store_delay_passes=0, store_rest_on_finish=False,
        eviction="lru", refresh_on_lookup=True, refresh_on_load_done=False, in_flight_store_hit="defer",
        loading_hit="defer", own_store_defers=True, pin_before_load=False, g1_copy="new_owner_waits",
        preemption_waits_for="own_stores"),
    "offloading_v0_32": ConnectorProfile(
        "offloading_v0_32", store_decode_blocks=False, store_delay_passes=0, store_rest_on_finish=True,
        eviction="lru_by_store_start", refresh_on_lookup=False, refresh_on_load_done=False,
        in_flight_store_hit="defer", loading_hit="defer", own_store_defers=True, pin_before_load=False,
        g1_copy="new_owner_waits", preemption_waits_for="own_stores"),
    "simple_cpu_v0_32": ConnectorProfile(
        "simple_cpu_v0_32", store_decode_blocks=True, store_delay_passes=1, store_rest_on_finish=True,
        eviction="fifo", refresh_on_lookup=False, refresh_on_load_done=True, in_flight_store_hit="miss",
        loading_hit="load", own_store_defers=False, pin_before_load=True, g1_copy="hold_until_copied",
        preemption_waits_for="all_transfers", scan_from_block_zero=True),
}


def tier_rules(profile: ConnectorProfile) -> TierRules:
    """How a G2 tier behind this connector answers lookups and orders what lands in it."""
    return TierRules(in_flight_hit=profile.in_flight_store_hit, reading_hit="defer" if profile.loading_hit == "defer"
                     else "read", touch_hits=False, landing_newest=profile.eviction == "fifo",
                     read_done_newest=profile.refresh_on_load_done, all_or_nothing=bool(profile.store_delay_passes))


def order_kind(profile: ConnectorProfile) -> str:
    """The G2 order this connector needs (chain_build.TierSpec.order).  One that refreshes a prompt at every lookup
    (offloading_v0_24: a waiting request looks up each pass) needs `run_order.RunOrder`, which moves a refreshed
    prompt as one run; the others move keys to the end once per store, landing, load or completion, which one
    insertion-ordered map ("lru": `lru_order.LruOrder`) does at a lower cost per key."""
    return "runs" if profile.refresh_on_lookup else "lru"
