"""The summary's sections beside the AISimulate fields: one per kind of tier, KVCR, and scaled workers.

Every tier reports through the same table: its spec names its section and
the section's layout (`host`: one entry per pool, as `g2_domains`; `storage`:
counters added up over the pools, as `g3_offload`; `tiers`: the storage
counters added up per tier, one entry per tier label, as opal's `kvc_tiers`),
and the layout's fields are read off the tier shape.
"""
from __future__ import annotations

from ..serving.scaling import workers_section
from ..tiers.state_section import state_cache_section

MS = 1e6
# layout -> (one entry per pool?, (output field, what of the tier), ...)
LAYOUTS = {
    "host": (True, (
        ("name", lambda t: t.name), ("scope", lambda t: t.scope), ("capacity_blocks", lambda t: t.capacity),
        ("block_bytes", lambda t: t.block_bytes), ("resident_blocks", lambda t: t.resident),
        ("stores", lambda t: t.landed_blocks), ("restores", lambda t: t.read_done_blocks),
        ("evictions", lambda t: t.evictions), ("dropped_stores", lambda t: t.dropped),
        ("d2h_bytes", lambda t: t.write.bytes_moved), ("h2d_bytes", lambda t: t.read.bytes_moved),
        ("d2h_bandwidth_wait_ms", lambda t: t.write.waited_ns / MS),
        ("h2d_bandwidth_wait_ms", lambda t: t.read.waited_ns / MS), ("connector", lambda t: t.store_policy))),
    "storage": (False, (
        ("capacity_blocks", lambda t: t.capacity), ("resident_blocks", lambda t: t.resident),
        ("lookup_hits", lambda t: t.lookup_hits), ("read_jobs", lambda t: t.read_jobs),
        ("read_blocks", lambda t: t.read_blocks), ("read_bytes", lambda t: t.read.bytes_moved),
        ("write_jobs", lambda t: t.reserve_jobs), ("write_blocks", lambda t: t.reserved_blocks),
        ("write_bytes", lambda t: t.write.bytes_moved), ("evictions", lambda t: t.evictions),
        ("dropped_writes", lambda t: t.dropped), ("cross_worker_read_blocks", lambda t: t.cross_worker_read_blocks),
        ("read_bandwidth_wait_ms", lambda t: t.read.waited_ns / MS),
        ("write_bandwidth_wait_ms", lambda t: t.write.waited_ns / MS), ("bypassed_restores", lambda t: t.bypassed))),
}
LAYOUTS["tiers"] = (False, LAYOUTS["storage"][1])
ONLY_IF_NONZERO = ("bypassed_restores",)


def tier_sections(ranks: list) -> dict:
    """Each section of the tiers the ranks use (distinct pools, in rank order)."""
    by_section: dict = {}
    for rank in ranks:
        for tier in rank.chain.tiers:
            by_section.setdefault((tier.section, tier.layout), {})[id(tier)] = tier
    out = {}
    for (section, layout), found in by_section.items():
        each, fields = LAYOUTS[layout]
        tiers = list(found.values())
        if layout == "tiers":
            labels = dict.fromkeys(tier.label for tier in tiers)
            out[section] = {label: _summed([t for t in tiers if t.label == label], fields) for label in labels}
        elif each:
            out[section] = [_entry(tier, fields) for tier in tiers]
        else:
            out[section] = _summed(tiers, fields)
    return out


def _entry(tier, fields) -> dict:
    entry = {name: value(tier) for name, value in fields}
    entry.update({f"filled_from_{source}": blocks for source, blocks in sorted(tier.filled.items())})
    return entry


def _summed(tiers: list, fields) -> dict:
    total = {name: sum(value(tier) for tier in tiers) for name, value in fields}
    for name in ONLY_IF_NONZERO:
        if name in total and not total[name]:
            del total[name]
    return {"scope": tiers[0].scope, "stores": len(tiers), **total}


def summary_sections(replay) -> dict:
    """The summary's sections for the tiers behind G1, KVCR and, for scaled roles, `workers`."""
    ranks = replay.ranks()
    out = tier_sections(ranks)
    fetches = {id(fetch): fetch for rank in ranks for fetch in rank.chain.peer_fetch}
    for fetch in fetches.values():  # (one role at most pulls from peers)
        out["kvcr"] = fetch.section()
    agentic = getattr(replay.traffic, "summary_section", None)  # (agentic traffic: plays and qualification)
    if agentic is not None:
        out.update(agentic())
    if any(worker.scaled for worker in replay.workers):
        out["workers"] = workers_section(replay.workers)
    state = state_cache_section(ranks)
    if state:
        out["state_cache"] = state
    return out
