"""Build a replay from a compiled plan and run it: the runtime's one entry point.

Aggregated mode: `replicas` workers of `attention_data` ranks each, every rank
with its own G1 pool sized by the plan's geometry; a worker's ranks step in
lockstep with the worker's timing provider.
"""
from __future__ import annotations

from pathlib import Path

from .serving.handoff import DESTINATION_FIRST_BACKENDS, Handoff
from .serving.placement import Router
from .serving.scaling import periods, replica_steps
from .serving.scheduler import Rank
from .serving.worker import Worker
from .shell.replay import Replay
from .tiers import peer_fetch
from .tiers.belady import BeladyPool, future_uses
from .tiers.chain_build import LinkSpec, TierSpec, attach_chains
from .tiers.connectors import PROFILES, tier_rules
from .tiers.g1 import BlockPool
from .tiers.peer_fetch import PeerFetch
from .tiers.tier import STORAGE_RULES
from .timing.factory import make_timing
from .traffic.generator import Traffic
from .traffic.mooncake import read_trace



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


def _link_spec(offload: dict, way: str) -> LinkSpec:
    """One direction of a tier's copies: each member (a rank, or a worker) is capped by `<way>_bandwidth_gbps`,
    and a shared pool by `shared_<way>_bandwidth_gbps` too."""
    return LinkSpec(offload[f"{way}_bandwidth_gbps"], offload.get(f"shared_{way}_bandwidth_gbps"))


def host_tier_spec(offload: dict, block_bytes: int) -> TierSpec:
    """G2: one pool per DP rank (`dp_rank_local`) or one for all of them (`cluster_shared`), stored into by a
    vLLM connector, in the order it keeps."""
    profile = PROFILES[offload["connector"]]
    return TierSpec("g2", offload["scope"], offload["scope"] == "cluster_shared", "rank", offload["num_host_blocks"],
                    block_bytes, tier_rules(profile), "runs", profile.name, write=_link_spec(offload, "d2h"),
                    read=_link_spec(offload, "h2d"), latency_ns=_ms_to_ns(offload["latency_to_first_byte_ms"]),
                    section="g2_domains", layout="host", kv_event_tier="host_pinned")


def storage_tier_spec(offload: dict, block_bytes: int) -> TierSpec:
    """G3: one store per worker (`worker_local`) or one for all of them (`cluster_shared`), written back from G2,
    least recently used first; G3 runs one rank per worker, so a worker's limits are its rank's."""
    return TierSpec("g3", offload["scope"], offload["scope"] == "cluster_shared", "worker", offload["num_g3_blocks"],
                    block_bytes, STORAGE_RULES, "lru", "write_back", write=_link_spec(offload, "write"),
                    read=_link_spec(offload, "read"), latency_ns=_ms_to_ns(offload["latency_to_first_byte_ms"]),
                    section="g3_offload", layout="storage")


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
    specs = []
    if "host_offload" in kv:
        specs.append(host_tier_spec(kv["host_offload"], geometry["g2_block_bytes"]))
    if "g3_offload" in kv:
        specs.append(storage_tier_spec(kv["g3_offload"], geometry["g3_block_bytes"]))
    attach_chains([rank for worker in workers for rank in worker.ranks], specs)
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
    fetch = PeerFetch(_ms_to_ns(kvcr["latency_to_first_byte_ms"]), kvcr["bandwidth_gbps"], block_bytes)
    fetch.attach(replay)
    for rank in replay.ranks():
        if rank.role == role_name:
            rank.chain.kvcr = fetch
            rank.chain.fills += (peer_fetch.pull,)


def use_belady(replay: Replay) -> None:
    """Give every rank a Belady pool that knows the whole (open-loop) request list."""
    replay.initial = replay.traffic.start()
    rank = replay.ranks()[0]  # Belady runs one fixed aggregated worker with one rank
    admitted = [spec for spec in replay.initial if not replay.never_fits(rank, spec)]  # rejected ones use nothing
    uses = future_uses(admitted, replay.block_size)
    for rank in replay.ranks():
        rank.pool = BeladyPool(rank.pool.capacity, uses)
