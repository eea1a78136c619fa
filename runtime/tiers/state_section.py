"""The summary's `state_cache` section: each role's state geometry and its ranks' snapshot counters added up.

The counters are kept per rank by `state_snapshots.StateSnapshots` (`section`); this module only lays them out.
"""
from __future__ import annotations

COUNTERS = ("snapshots_stored", "snapshots_resident", "snapshots_evicted", "snapshots_skipped", "resumes",
            "tokens_resumed")


def state_cache_section(ranks: list) -> dict:
    """`state_cache` per role: the state's geometry, then its snapshots' counters added up over the role's
    ranks (`resumed_from`: admissions per resume position, in tokens)."""
    out: dict = {}
    for rank in ranks:
        counters = rank.snapshots.section(rank)
        if counters is None:
            continue
        plan = rank.snapshots.plan
        role = out.setdefault(rank.role, {
            "block_size": rank.block_size, "prefix_match_unit": plan.prefix_match_unit,
            "bytes_per_request": plan.bytes_per_request, "state_blocks_per_request": plan.blocks_per_request,
            "allocated_bytes_per_request": plan.blocks_per_request * plan.block_bytes,
            "snapshot_rule": plan.snapshot_rule, **dict.fromkeys(COUNTERS, 0), "resumed_from": {}})
        for name in COUNTERS:
            role[name] += counters[name]
        for position, count in counters["resumed_from"].items():
            role["resumed_from"][position] = role["resumed_from"].get(position, 0) + count
    for role in out.values():
        role["resumed_from"] = {str(p): n for p, n in sorted(role["resumed_from"].items())}
    return out
