"""opal's KV-cache tiers behind APC: CPUMemory -> LocalNVMe -> DistributedFS as configurations of the one tier shape.

Each `KvcTierPlan` becomes a `TierSpec` (capacity in chunks, the device as
both links: bandwidth, latency to first byte, I/O slots; keep-all or LRU
order) and `chain_build.pools` makes its pools: one per worker, or one for
all workers (DistributedFS).  Every rank gets a `KvcChain`: the `TierChain`
whose store policy is opal's KV-cache manager (`kvc.py`) instead of a vLLM
connector, keyed by chunks of `chunk_size` tokens rather than G1 blocks, plus
the link over which what a tier serves reaches the GPU (CPUMemory's settings).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..links.transfers import Link
from . import kvc, offload
from .chain import TierChain
from .chain_build import TierSpec, pools
from .closed_tier import ClosedCounts
from .connectors import ConnectorProfile
from .tier import TierRules

# a tier key still being written is no hit; one being read is; hits and landings count as uses (LRU order)
KVC_RULES = TierRules(in_flight_hit="miss", reading_hit="read", touch_hits=True, landing_newest=True,
                      read_done_newest=False, all_or_nothing=False)

# what the macro stepper and the chain's generic questions read of a store policy: opal stores nothing during
# passes, and each completion stores its prompt (so fused passes end at completions)
KVC_PROFILE = ConnectorProfile(
    "opal_kvc", store_decode_blocks=False, store_delay_passes=0, store_rest_on_finish=True, eviction="lru",
    refresh_on_lookup=False, refresh_on_load_done=False, in_flight_store_hit="miss", loading_hit="load",
    own_store_defers=False, pin_before_load=False, g1_copy="new_owner_waits", preemption_waits_for="own_stores")


@dataclass
class GpuPath:
    """The copy of what a tier served onto the GPU: one link per worker with CPUMemory's settings (a `Copy`
    reads `read`, `group_by` and `block_bytes` of what it copies out of)."""

    read: Link
    block_bytes: int
    name: str = "gpu"
    label: str = "gpu"
    group_by: str = "worker"


@dataclass
class KvcCounters:
    """What one worker's KV-cache manager did (the summary adds them up per stage)."""

    write_through_stores: int = 0  # stores fired by APC evictions
    retirement_stores: int = 0  # stores of a finished request's prompt
    demotions: int = 0  # chunks an LRU tier evicted and wrote to the next tier
    promotions: int = 0  # chunks a hit in a deeper tier copied into the tiers above it
    dropped_chunks: int = 0  # chunks no tier had room for
    served: dict = field(default_factory=dict)  # tier name -> tokens it served into G1


class KvcChain(TierChain):
    __slots__ = ("chunk_size", "partial", "gpu", "counters", "lru", "clock", "closed", "holding")

    def __init__(self, tiers: tuple, chunk_size: int, partial: bool, gpu: GpuPath, counters: KvcCounters,
                 lru: tuple = (), clock=None):
        super().__init__(tiers, KVC_PROFILE)
        self.restore, self.admitting = kvc.restore, offload.admitting
        self.drop_restore_holds, self.preemption_wait = kvc.drop_restore_holds, kvc.no_wait
        self.after_pass, self.on_finish = kvc.no_store, kvc.retire
        self.chunk_size = chunk_size
        self.partial = partial  # save_unfull_chunk
        self.gpu = gpu
        self.counters = counters
        self.lru = lru or (False,) * len(tiers)  # per tier: it evicts (demoting to the next) and promotes hits
        self.clock = clock  # the replay's (when a restore's reads start)
        self.closed = ClosedCounts(chunk_size)  # what stores into a full tier that never evicts would lack
        self.holding: list = []  # requests whose restore landed (they hold its blocks until admitted), and some
        # that no longer hold them: kvc.drop_restore_holds prunes it

    def first_offer(self, hits: int) -> int:
        return 0

    def finish_may_store(self, request) -> bool:
        return True  # every completion stores its prompt

    def keys(self, spec) -> list:
        """The tier keys of a request's prompt: its chunks, and its trailing partial chunk if opal saves those."""
        return spec.prompt_chunks(self.chunk_size, self.partial)

    def held_beyond(self, rank, spec, g1_tokens: int) -> int:
        """Prompt tokens past `g1_tokens` the tiers hold in a row, each continuing where the one above stopped
        (what MaxPrefix routing counts; no tier's order or counters change)."""
        keys, size = self.keys(spec), self.chunk_size
        position = start = g1_tokens // size
        for tier in self.tiers:
            position += tier.order.held_run(keys, position, len(keys))
        if position == start:
            return 0
        return max(0, min(position * size, spec.prompt_len) - g1_tokens)


def tier_spec(tier) -> TierSpec:
    """A `KvcTierPlan` as the one tier shape: the device is both links; a shared tier's bandwidth is the pool's."""
    link = tier.link
    if tier.shared:
        link = type(link)(None, link.bandwidth_gbps, link.latency_ns, link.slots)
    return TierSpec(tier.name, "cluster_shared" if tier.shared else "worker_local", tier.shared, "worker",
                    tier.chunks, tier.chunk_bytes, KVC_RULES, tier.eviction, "opal_kvc", write=link, read=link,
                    section="kvc_tiers", layout="tiers")


def attach_kvc(ranks: list, kvc_plan, clock) -> dict:
    """Give each rank its KVC chain; returns worker -> its counters (none without tiers)."""
    if not kvc_plan.tiers:
        return {}
    by_tier = [pools(tier_spec(tier), ranks, clock) for tier in kvc_plan.tiers]
    gpu_link, chunk_bytes = kvc_plan.gpu_link, kvc_plan.tiers[0].chunk_bytes
    paths, counters = {}, {}
    for rank in ranks:
        if rank.worker not in paths:
            link = Link({rank.worker: gpu_link.bandwidth_gbps}, None, gpu_link.latency_ns,
                        workers=frozenset((rank.worker,)), slots=gpu_link.slots)
            paths[rank.worker] = GpuPath(link, chunk_bytes)
            counters[rank.worker] = KvcCounters()
        tiers = tuple(pool_of[rank.index] for pool_of in by_tier)
        rank.chain = KvcChain(tiers, kvc_plan.chunk_size, kvc_plan.save_unfull_chunk, paths[rank.worker],
                              counters[rank.worker], tuple(tier.eviction == "lru" for tier in kvc_plan.tiers), clock)
    return counters
