"""Build every rank's chain of tiers from data: one `TierSpec` per tier, fastest first, no code per tier.

A spec says what the tier is (capacity, block bytes, links, scope, eviction
order, rules, store policy, summary section); `attach_chains` makes one pool
per scope member (a rank, a worker) or one for all of them, and gives each
rank a `TierChain` over its pools: the first tier stored into by the
connector its spec names, each deeper one written back from the one above
and read up into the first.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..links.transfers import Link
from .chain import TierChain
from .connectors import PROFILES
from .lru_order import ORDERS
from .promotion import ReadUp
from .run_order import RunOrder
from .tier import Tier, TierRules


@dataclass(frozen=True)
class TierSpec:
    label: str  # "g2", "g3", ...: pool names and `filled_from_<label>`
    scope: str  # the config's word for it ("dp_rank_local", "worker_local", "cluster_shared")
    shared: bool  # one pool for every member
    per: str  # "rank" | "worker": who gets a pool of its own (and a bandwidth limit of its own)
    capacity: int  # blocks
    block_bytes: int
    rules: TierRules
    order: str  # "runs" (offloading_v0_24: connectors.order_kind) | "lru" | "fifo" | "none"
    store_policy: str  # the connector storing G1 blocks into it (first tier) | "write_back" (deeper tiers)
    # each direction as the plan's link record says it: `bandwidth_gbps` per member (0 or None: unlimited),
    # `shared_bandwidth_gbps` over a shared pool's members, `latency_ns` to first byte, `slots` (I/O concurrency,
    # the others wait first come first served; None: no limit)
    write: object  # copies into the tier
    read: object  # copies out of it
    ttl_ns: int = 0  # with "lru" or "fifo": a key is immune this long after its last use
    section: str = ""  # the summary section it reports in ("g2_domains", "g3_offload") ...
    layout: str = ""  # ... laid out as "host" (an entry per pool) or "storage" (added up over the pools)
    kv_event_tier: str | None = None


def _new_order(spec: TierSpec, clock):
    return RunOrder() if spec.order == "runs" else ORDERS[spec.order](spec.ttl_ns, clock)


def _pool(spec: TierSpec, name: str, members: list, clock) -> Tier:
    group_by = "index" if spec.per == "rank" else "worker"
    groups = sorted({getattr(rank, group_by) for rank in members})
    workers = frozenset(rank.worker for rank in members)

    def link(way) -> Link:
        return Link({g: way.bandwidth_gbps for g in groups}, way.shared_bandwidth_gbps if spec.shared else None,
                    way.latency_ns, workers=workers, slots=way.slots)

    return Tier(name, spec.scope, spec.capacity, spec.block_bytes, spec.rules, link(spec.write), link(spec.read),
                _new_order(spec, clock), group_by=group_by, label=spec.label, kv_event_tier=spec.kv_event_tier,
                store_policy=spec.store_policy, section=spec.section, layout=spec.layout)


def pools(spec: TierSpec, ranks: list, clock=None) -> dict:
    """rank index -> its pool of this tier (one per member, or one shared)."""
    if spec.shared:
        shared = _pool(spec, f"{spec.label}.shared", ranks, clock)
        return {rank.index: shared for rank in ranks}
    out, by_member = {}, {}
    for rank in ranks:
        member = rank.name if spec.per == "rank" else f"worker{rank.worker}"
        by_member.setdefault(member, []).append(rank)
    for member, members in by_member.items():
        pool = _pool(spec, f"{spec.label}.{member}", members, clock)
        for rank in members:
            out[rank.index] = pool
    return out


def attach_chains(ranks: list, specs: list[TierSpec], clock=None) -> None:
    """Give each rank its chain of the tiers `specs` describes (fastest first); `clock`: the replay's
    (shell.clock.Clock), which tiers with a TTL read."""
    if not specs:
        return
    by_tier = [pools(spec, ranks, clock) for spec in specs]
    profile = PROFILES[specs[0].store_policy]
    for pool in {id(pool): pool for pool in by_tier[0].values()}.values():
        # the first tier's write link carries only stores out of G1, whose landing changes no pure decode batch
        # (a landing that frees held G1 blocks, or one a new owner waits for, stops fusing before it starts:
        # shell/macro.py), so its copies cut no fused decode passes (horizons.py)
        pool.write.workers = frozenset()
    for rank in ranks:
        tiers = tuple(pool_of[rank.index] for pool_of in by_tier)
        rank.chain = TierChain(tiers, profile, tuple(ReadUp(tier) for tier in tiers[1:]))
