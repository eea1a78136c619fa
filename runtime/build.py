"""Build a replay from a finished plan and run it: the runtime's one entry point.

The plan is the compiler's typed, frozen `ReplayPlan` (every default applied, durations in
integer nanoseconds, trace rows parsed); this module reads its attributes only.
Aggregated mode: `replicas` workers of `attention_data` ranks each, every rank
with its own G1 pool sized by the plan's geometry; a worker's ranks step in
lockstep with the worker's timing provider.
"""
from __future__ import annotations

from .tiers import g3_offload, peer_fetch
from .shell.replay import Replay, Worker
from .tiers.belady import BeladyPool, future_uses
from .tiers.g1 import BlockPool
from .serving.handoff import Handoff
from .tiers.host_pool import PROFILES, HostPool
from .tiers.peer_fetch import PeerFetch
from .serving.placement import Router
from .serving.scaling import periods
from .serving.scheduler import Rank
from .tiers.storage_pool import StoragePool
from .timing.factory import make_timing
from .traffic.generator import Traffic
from .links.transfers import Link



class ReplayUnsupported(ValueError):
    """The plan asks for something this runtime does not replay yet."""


def _links(offload, ways: tuple[str, str], groups: list, workers: list, shared: bool) -> list[Link]:
    """A tier's two links (`ways`: its `read` and `write` link plans, in the order asked): each group (a rank,
    or a worker) is capped by the link's bandwidth, and a shared pool by its shared bandwidth too."""
    return [Link({g: link.bandwidth_gbps for g in groups}, link.shared_bandwidth_gbps if shared else None,
                 link.latency_ns, workers=frozenset(workers))
            for link in (getattr(offload, way) for way in ways)]


def attach_host_pools(ranks: list[Rank], offload, block_bytes: int) -> list[HostPool]:
    """One G2 pool per DP rank (`dp_rank_local`) or one for all of them (`cluster_shared`)."""
    profile = PROFILES[offload.connector]
    shared = offload.shared
    pools = []
    for name, members in [("g2.shared", ranks)] if shared else [(f"g2.{r.name}", [r]) for r in ranks]:
        d2h, h2d = _links(offload, ("write", "read"), [r.index for r in members], [r.worker for r in members], shared)
        pools.append(HostPool(name, offload.scope, offload.blocks, block_bytes, profile, d2h, h2d))
        for rank in members:
            rank.host = pools[-1]
    return pools


def attach_storage_pools(workers: list[Worker], offload, block_bytes: int) -> list[StoragePool]:
    """One G3 store per worker (`worker_local`) or one for all of them (`cluster_shared`); G3 runs one rank
    per worker, so a worker's limits are its rank's."""
    shared = offload.shared
    pools = []
    for name, members in [("g3.shared", workers)] if shared else [(f"g3.worker{w.index}", [w]) for w in workers]:
        indexes = [w.index for w in members]
        read, write = _links(offload, ("read", "write"), indexes, indexes, shared)
        pools.append(StoragePool(name, offload.scope, offload.blocks, block_bytes, read, write))
        for worker in members:
            for rank in worker.ranks:
                rank.storage = pools[-1]
                rank.fills += (g3_offload.read,)
    return pools


def _role_workers(plan, role, first_worker: int, first_rank: int) -> list[Worker]:
    """`replicas` workers of `attention_data` ranks for one role, each rank with its own G1 (and G2)."""
    most = max(replicas for _, replicas in role.replica_steps)
    prefix = "" if role.name == "aggregated" else f"{role.name}."
    workers, rank_index = [], first_rank
    for w in range(most):
        ranks = []
        for d in range(role.attention_data):
            pool = BlockPool(role.g1_blocks, role.prefix_caching)
            rank = Rank(rank_index, first_worker + w, pool, role.block_size, role.max_batched_tokens,
                        role.max_sequences, plan.enable_chunked_prefill,
                        role.state_blocks_per_request, name=f"{prefix}worker{w}.dp{d}")
            rank.role = role.name
            ranks.append(rank)
            rank_index += 1
        timing = make_timing(role.timing)
        workers.append(Worker(first_worker + w, ranks, timing))
    if role.host is not None:
        attach_host_pools([rank for worker in workers for rank in worker.ranks], role.host, role.host.block_bytes)
    if role.storage is not None:
        attach_storage_pools(workers, role.storage, role.storage.block_bytes)
    return workers


def _handoff(plan) -> Handoff:
    handoff = plan.handoff
    return Handoff(handoff.bytes_per_token, handoff.bandwidth_gbps, handoff.timing_mode, handoff.state_bytes,
                   handoff.destination_first, handoff.latency_ns)


def build(plan, single_step: bool = False) -> Replay:
    """The replay of a finished plan (`ReplayPlan`)."""
    if plan.traffic.kind == "agentx":
        raise ReplayUnsupported("agentx traffic replay is not available yet")
    workers: list[Worker] = []
    for role in plan.roles:
        first_rank = sum(len(w.ranks) for w in workers)
        workers += _role_workers(plan, role, len(workers), first_rank)
    for role in plan.roles:
        members = [w for w in workers if w.ranks[0].role == role.name]
        for position, worker in enumerate(members):
            worker.periods = periods(role.replica_steps, position, role.startup_delay_ns)
            worker.scaled = role.scaled
    handoff = _handoff(plan) if plan.handoff is not None else None
    if handoff is not None:
        for worker in workers:
            for rank in worker.ranks:
                rank.handoff = handoff
    traffic = Traffic(plan.traffic)
    block_size = workers[0].ranks[0].block_size
    router = Router(workers, plan.placement)
    replay = Replay(workers, traffic, block_size, plan.context_length,
                    single_step=single_step, handoff=handoff, router=router)
    for role in plan.roles:
        if role.peer_fetch is not None:
            attach_peer_fetch(replay, role)
    if plan.eviction_policy == "belady":
        use_belady(replay)
    return replay


def attach_peer_fetch(replay: Replay, role) -> None:
    """KVCR for one role (aggregated, or prefill in P/D): a pulled block moves the G2 block of every TP GPU."""
    kvcr = role.peer_fetch
    replay.kvcr = PeerFetch(kvcr.latency_ns, kvcr.bandwidth_gbps, kvcr.block_bytes)
    for rank in replay.ranks():
        if rank.role == role.name:
            rank.kvcr = replay.kvcr
            rank.fills += (peer_fetch.pull,)


def use_belady(replay: Replay) -> None:
    """Give every rank a Belady pool that knows the whole (open-loop) request list."""
    replay.initial = replay.traffic.start()
    rank = replay.ranks()[0]  # Belady runs one fixed aggregated worker with one rank
    admitted = [spec for spec in replay.initial if not replay._never_fits(rank, spec)]  # rejected ones use nothing
    uses = future_uses(admitted, replay.block_size)
    for rank in replay.ranks():
        rank.pool = BeladyPool(rank.pool.capacity, uses)
