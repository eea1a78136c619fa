"""Build a replay from a compiled plan and run it: the runtime's one entry point.

Aggregated mode: `replicas` workers of `attention_data` ranks each, every rank
with its own G1 pool sized by the plan's geometry; a worker's ranks step in
lockstep with the worker's timing provider.
"""
from __future__ import annotations

from pathlib import Path

from .tiers import g3_offload, peer_fetch
from .shell.replay import Replay, Worker
from .tiers.belady import BeladyPool, future_uses
from .tiers.g1 import BlockPool
from .serving.handoff import DESTINATION_FIRST_BACKENDS, Handoff
from .tiers.host_pool import PROFILES, HostPool
from .traffic.mooncake import read_trace
from .tiers.peer_fetch import PeerFetch
from .serving.placement import Router
from .serving.scaling import periods, replica_steps
from .serving.scheduler import Rank
from .tiers.storage_pool import StoragePool
from .timing.factory import make_timing
from .traffic.generator import Traffic
from .links.transfers import Link



class ReplayUnsupported(ValueError):
    """The plan asks for something this runtime does not replay yet."""


def _trace_rows(traffic: dict, base_dir: Path) -> list:
    source = traffic["source"]
    if source["type"] != "trace":
        return []
    rows = []
    for path in source["paths"]:
        full = Path(path) if Path(path).is_absolute() else base_dir / path
        rows.extend(read_trace(full, source.get("block_size", 512)))
    return rows


def _ms_to_ns(ms: float) -> int:
    return int(round(ms * 1e6))


def _links(offload: dict, ways: tuple[str, str], groups: list, workers: list, shared: bool) -> list[Link]:
    """A tier's two links (`ways`, e.g. d2h/h2d or read/write): each group (a rank, or a worker) is capped by
    `<way>_bandwidth_gbps`, and a shared pool by `shared_<way>_bandwidth_gbps` too."""
    latency = _ms_to_ns(offload["latency_to_first_byte_ms"])
    return [Link({g: offload[f"{way}_bandwidth_gbps"] for g in groups},
                 offload.get(f"shared_{way}_bandwidth_gbps") if shared else None, latency, workers=frozenset(workers))
            for way in ways]


def attach_host_pools(ranks: list[Rank], offload: dict, block_bytes: int) -> list[HostPool]:
    """One G2 pool per DP rank (`dp_rank_local`) or one for all of them (`cluster_shared`)."""
    profile = PROFILES[offload["connector"]]
    shared = offload["scope"] == "cluster_shared"
    pools = []
    for name, members in [("g2.shared", ranks)] if shared else [(f"g2.{r.name}", [r]) for r in ranks]:
        d2h, h2d = _links(offload, ("d2h", "h2d"), [r.index for r in members], [r.worker for r in members], shared)
        pools.append(HostPool(name, offload["scope"], offload["num_host_blocks"], block_bytes, profile, d2h, h2d))
        for rank in members:
            rank.host = pools[-1]
    return pools


def attach_storage_pools(workers: list[Worker], offload: dict, block_bytes: int) -> list[StoragePool]:
    """One G3 store per worker (`worker_local`) or one for all of them (`cluster_shared`); G3 runs one rank
    per worker, so a worker's limits are its rank's."""
    shared = offload["scope"] == "cluster_shared"
    pools = []
    for name, members in [("g3.shared", workers)] if shared else [(f"g3.worker{w.index}", [w]) for w in workers]:
        indexes = [w.index for w in members]
        read, write = _links(offload, ("read", "write"), indexes, indexes, shared)
        pools.append(StoragePool(name, offload["scope"], offload["num_g3_blocks"], block_bytes, read, write))
        for worker in members:
            for rank in worker.ranks:
                rank.storage = pools[-1]
                rank.fills += (g3_offload.read,)
    return pools


def _role_workers(plan: dict, role_name: str, first_worker: int, first_rank: int) -> list[Worker]:
    """`replicas` workers of `attention_data` ranks for one role, each rank with its own G1 (and G2)."""
    engine, role = plan["engine"], plan["engine"]["workers"][role_name]
    kv, parallel, scheduler = role["kv_cache"], role["parallelism"], role["scheduler"]
    most = max(replicas for _, replicas in replica_steps(role))
    geometry = plan["geometry"][role_name]
    model, hardware = plan["catalog"]["model"], plan["catalog"]["hardware"][role_name]
    prefix = "" if role_name == "aggregated" else f"{role_name}."
    workers, rank_index = [], first_rank
    for w in range(most):
        ranks = []
        for d in range(parallel["attention_data"]):
            pool = BlockPool(kv["capacity"]["blocks"], kv["prefix_caching"])
            rank = Rank(rank_index, first_worker + w, pool, kv["block_size"], scheduler["max_batched_tokens"],
                        scheduler["max_sequences"], engine.get("enable_chunked_prefill", True),
                        geometry.get("state_blocks_per_request", 0), name=f"{prefix}worker{w}.dp{d}")
            rank.role = role_name
            ranks.append(rank)
            rank_index += 1
        timing = make_timing(role, model, hardware, engine["backend"], geometry["kv_dtype"])
        workers.append(Worker(first_worker + w, ranks, timing))
    if "host_offload" in kv:
        attach_host_pools([rank for worker in workers for rank in worker.ranks], kv["host_offload"],
                          geometry["g2_block_bytes"])
    if "g3_offload" in kv:
        attach_storage_pools(workers, kv["g3_offload"], geometry["g3_block_bytes"])
    return workers


def _handoff(plan: dict) -> Handoff:
    engine = plan["engine"]
    transfer = engine.get("kv_transfer", {})
    prefill_kv = engine["workers"]["prefill"]["kv_cache"]
    latency = plan["traffic"].get("replay", {}).get("handoff_latency_ms", 0.0)
    return Handoff(transfer["bytes_per_token"], transfer.get("bandwidth_gb_per_second"),
                   transfer.get("timing_mode", "destination_missing"),
                   prefill_kv.get("state_cache", {}).get("bytes_per_request", 0),
                   engine["backend"] in DESTINATION_FIRST_BACKENDS, _ms_to_ns(latency))


def build(plan: dict, base_dir: Path = Path("."), single_step: bool = False) -> Replay:
    engine = plan["engine"]
    roles = engine["workers"]
    source = plan["traffic"]["source"]["type"]
    if source == "agentx":
        raise ReplayUnsupported("agentx traffic replay is not available yet")
    workers: list[Worker] = []
    for name in [r for r in ("aggregated", "prefill", "decode") if r in roles]:
        first_rank = sum(len(w.ranks) for w in workers)
        workers += _role_workers(plan, name, len(workers), first_rank)
    delays = plan["traffic"].get("replay", {}).get("startup_delay_ms", {})
    for name, role in roles.items():
        members = [w for w in workers if w.ranks[0].role == name]
        delay = _ms_to_ns(delays.get(name, 0.0))
        for position, worker in enumerate(members):
            worker.periods = periods(role, position, delay)
            worker.scaled = bool(role.get("scaling"))
    handoff = _handoff(plan) if "prefill" in roles else None
    if handoff is not None:
        for worker in workers:
            for rank in worker.ranks:
                rank.handoff = handoff
    traffic = Traffic(plan["traffic"], _trace_rows(plan["traffic"], base_dir))
    context = engine.get("context_length")
    block_size = workers[0].ranks[0].block_size
    router = Router(workers, engine.get("placement", "round_robin"))
    replay = Replay(workers, traffic, block_size, context if isinstance(context, int) else None,
                    single_step=single_step, handoff=handoff, router=router)
    for name, role in roles.items():
        if "kvcr" in role["kv_cache"]:
            attach_peer_fetch(replay, plan, name)
    if engine.get("kv_eviction_policy") == "belady":
        use_belady(replay)
    return replay


def attach_peer_fetch(replay: Replay, plan: dict, role_name: str) -> None:
    """KVCR for one role (aggregated, or prefill in P/D): a pulled block moves the G2 block of every TP GPU."""
    role = plan["engine"]["workers"][role_name]
    kvcr = role["kv_cache"]["kvcr"]
    block_bytes = plan["geometry"][role_name]["g2_block_bytes"] * role["parallelism"]["tensor"]
    replay.kvcr = PeerFetch(_ms_to_ns(kvcr["latency_to_first_byte_ms"]), kvcr["bandwidth_gbps"], block_bytes)
    for rank in replay.ranks():
        if rank.role == role_name:
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
