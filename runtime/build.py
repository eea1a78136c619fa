"""Build a replay from a finished plan and run it: the runtime's one entry point.

The plan is the compiler's typed, frozen `ReplayPlan` (every default applied, durations in
integer nanoseconds, trace rows parsed); this module reads its attributes only.
Aggregated mode: `replicas` workers of `attention_data` ranks each, every rank
with its own G1 pool sized by the plan's geometry; a worker's ranks step in
lockstep with the worker's timing provider.
"""
from __future__ import annotations

from .engines.table import engine_for
from .serving.handoff import Handoff
from .serving.opal_scaling import attach_scaling, reserved_workers
from .serving.placement import Router
from .serving.scaling import periods
from .serving import speculation
from .serving.scheduler import Rank
from .serving.worker import Worker
from .shell.clock import Clock
from .shell.replay import Replay
from .tiers import peer_fetch
from .tiers.apc_monitor import use_apc
from .tiers.belady import BeladyPool, future_uses
from .tiers.chain_build import TierSpec, attach_chains
from .tiers.connectors import PROFILES, order_kind, tier_rules
from .tiers.g1 import RestoredOnlyPool
from .tiers.g1_extents import for_rank as plain_g1
from .tiers import kvc
from .tiers.kvc_chain import attach_kvc
from .tiers.peer_fetch import PeerFetch
from .tiers.state_snapshots import snapshots_for
from .tiers.tier import STORAGE_RULES
from .timing.factory import make_timing
from .traffic.agentx import AgenticTraffic
from .traffic.generator import Traffic
from .traffic.opal_stages import StagedTraffic



class ReplayUnsupported(ValueError):
    """The plan asks for something this runtime does not replay yet."""


def host_tier_spec(host) -> TierSpec:
    """G2 (the plan's `TierPlan`): one pool per DP rank (`dp_rank_local`) or one for all of them
    (`cluster_shared`), stored into by a vLLM connector, in the order it keeps."""
    profile = PROFILES[host.connector]
    return TierSpec("g2", host.scope, host.shared, "rank", host.blocks, host.block_bytes, tier_rules(profile), order_kind(profile),
                    profile.name, write=host.write, read=host.read, section="g2_domains",
                    layout="host", kv_event_tier="host_pinned")


def storage_tier_spec(storage) -> TierSpec:
    """G3: one store per worker (`worker_local`) or one for all of them (`cluster_shared`), written back from G2,
    least recently used first; G3 runs one rank per worker, so a worker's limits are its rank's."""
    return TierSpec("g3", storage.scope, storage.shared, "worker", storage.blocks, storage.block_bytes,
                    STORAGE_RULES, "lru", "write_back", write=storage.write, read=storage.read,
                    section="g3_offload", layout="storage")


TIER_SPECS = (("host", host_tier_spec), ("storage", storage_tier_spec))  # a role's tiers, fastest first


def _g1_pool(plan, role, engine):
    """A rank's G1: its engine's cache; with opal's tiers and APC off, one whose restored blocks serve only their
    own request."""
    if plan.opal is not None and not role.prefix_caching:
        return RestoredOnlyPool(role.g1_blocks)
    return engine.g1(role.g1_blocks, role.prefix_caching)


def _role_workers(plan, role, first_worker: int, first_rank: int, clock: Clock) -> list[Worker]:
    """`replicas` workers of `attention_data` ranks for one role, each rank with its own G1 (and G2)."""
    most = max(max(replicas for _, replicas in role.replica_steps), reserved_workers(plan))
    prefix = "" if role.name == "aggregated" else f"{role.name}."
    workers, rank_index = [], first_rank
    engine = engine_for(role.backend, role.name)
    for w in range(most):
        ranks = []
        for d in range(role.attention_data):
            pool = _g1_pool(plan, role, engine)
            rank = Rank(rank_index, first_worker + w, pool, role.block_size, role.max_batched_tokens,
                        role.max_sequences, plan.enable_chunked_prefill,
                        role.state_blocks_per_request, name=f"{prefix}worker{w}.dp{d}")
            rank.role = role.name
            rank.speculation = speculation.of(role, rank_index - first_rank)  # (SGLang's in sglang_decode.py)
            rank.snapshots = snapshots_for(role)
            engine.equip(rank, role)
            ranks.append(rank)
            rank_index += 1
        timing = make_timing(role.timing)
        workers.append(Worker(first_worker + w, ranks, timing, engine=engine))
    ranks = [rank for worker in workers for rank in worker.ranks]
    if plan.opal is not None:  # opal's KV-cache tiers take the place of G2 and G3
        attach_kvc(ranks, plan.opal.kvc, clock)
        return workers
    specs = [spec(getattr(role, name)) for name, spec in TIER_SPECS if getattr(role, name)]
    attach_chains(ranks, specs, clock)
    return workers


def _handoff(plan) -> Handoff:
    handoff = plan.handoff
    return Handoff(handoff.bytes_per_token, handoff.bandwidth_gbps, handoff.timing_mode, handoff.state_bytes,
                   handoff.destination_first, handoff.latency_ns)


def make_traffic(plan):
    """What arrives: an opal config's workload stages one after another, else the plan's traffic record (a test may
    give a plan with opal's parts other traffic)."""
    if plan.traffic.kind == "opal-stages":
        return StagedTraffic(plan.opal)
    if plan.traffic.kind == "agentic":
        return AgenticTraffic(plan.traffic)
    return Traffic(plan.traffic)


def build(plan, single_step: bool = False) -> Replay:
    """The replay of a finished plan (`ReplayPlan`)."""
    if plan.opal is None and plan.traffic.kind == "agentx":
        raise ReplayUnsupported("agentx traffic replay (its snapshot, warmup and continuous profiles) is not available "
                                "yet; an AgentX trace replays as `source: {type: trace, format: weka}` with "
                                "`load: {type: trace_timestamps, agentic_lanes: N, agentic_warmup: true}`")
    clock = Clock()
    workers: list[Worker] = []
    for role in plan.roles:
        first_rank = sum(len(w.ranks) for w in workers)
        workers += _role_workers(plan, role, len(workers), first_rank, clock)
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
    traffic = make_traffic(plan)
    block_size = workers[0].ranks[0].block_size
    router = Router(workers, plan.placement) if plan.opal is None else \
        Router(workers, plan.opal.router.policy, seed=plan.opal.seed)  # opal: its router's policy
    replay = Replay(workers, traffic, block_size, plan.context_length,
                    single_step=single_step, handoff=handoff, router=router, clock=clock)
    for role in plan.roles:
        if role.peer_fetch:  # (a PeerFetchPlan, or None)
            attach_peer_fetch(replay, role)
    if plan.opal is None:
        trace = plan.traffic.kind == "trace" and plan.traffic.source.block_size % block_size == 0
        per = plan.traffic.source.block_size // block_size if trace else 0  # (engine blocks a trace block holds)
        for rank in replay.ranks():
            plain_g1(rank, per)  # (the plain vLLM G1 path with many blocks a trace key keeps its pool as extents)
    if plan.eviction_policy == "belady":
        use_belady(replay)
    if plan.opal is not None:
        attach_opal(replay, plan.opal)
    return replay


def attach_opal(replay: Replay, opal) -> None:
    """What only an opal config has: dynamic scaling (when enabled), GPU APC with its eviction monitor, and APC's
    evictions written through to the KVC tiers."""
    attach_scaling(replay, opal.router)
    if opal.apc is None:
        return
    use_apc(replay, opal.apc)
    for rank in replay.ranks():
        if rank.chain.tiers:
            rank.pool.on_evict = lambda pool, *columns, rank=rank: kvc.write_through(rank, *columns)


def attach_peer_fetch(replay: Replay, role) -> None:
    """KVCR for one role (aggregated, or prefill in P/D): a pulled block moves the G2 block of every TP GPU."""
    kvcr = role.peer_fetch
    fetch = PeerFetch(kvcr.latency_ns, kvcr.bandwidth_gbps, kvcr.block_bytes)
    fetch.attach(replay)
    for rank in replay.ranks():
        if rank.role == role.name:
            rank.chain.kvcr = fetch
            rank.chain.prefix_sources += (peer_fetch.pull,)


def use_belady(replay: Replay) -> None:
    """Give every rank a Belady pool that knows the whole (open-loop) request list."""
    replay.initial = list(replay.traffic.start())
    rank = replay.ranks()[0]  # Belady runs one fixed aggregated worker with one rank
    admitted = [spec for spec in replay.initial if not replay.never_fits(rank, spec)]  # rejected ones use nothing
    uses = future_uses(admitted, replay.block_size)
    for rank in replay.ranks():
        rank.pool = BeladyPool(rank.pool.capacity, uses)
