"""The opal parts of the finished plan: APC, the KVC tier chain, the router and the workload stages.

An opal JSON config compiles to the same `ReplayPlan` as a predict YAML (one
aggregated vLLM role: G1 is the worker's GPU block pool, sized by opal's
`total_gpu_blocks`; roofline timing of `worker.hw`), plus one `OpalPlan` with
what only opal configs have.  Like every plan record: frozen, every default
applied, durations in integer ns, sizes in bytes or chunks, files already parsed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .plan_records import LinkPlan, TraceRow


@dataclass(frozen=True, slots=True)
class ApcPlan:
    """GPU APC (G1's prefix cache with opal's extras); absent when `enable_gpu_apc` is false."""

    ttl_ns: int  # apc_lru_ttl: an idle block is immune this long after its last access (0: none)
    eviction_threshold: float  # hbm_eviction_threshold, in (0, 1]
    check_interval_ns: int  # apc_eviction_check_interval_sec: the monitor's base interval


@dataclass(frozen=True, slots=True)
class KvcTierPlan:
    """One KVC tier (CPUMemory, LocalNVMe or DistributedFS): a device with a capacity in chunks."""

    name: str  # CPUMemory | LocalNVMe | DistributedFS
    shared: bool  # one store for every worker (DistributedFS), else one per worker
    chunks: int  # capacity: floor(capacity_GB * 2**30 / chunk_bytes)
    chunk_bytes: int  # chunk_size * KV bytes per token
    link: LinkPlan  # the device: bandwidth_GBps (as GB/s), latency_nsec, concurrency (I/O slots)
    eviction: str  # "none" (opal: a full tier only serves hits) | "lru" (kvreplay extension)


@dataclass(frozen=True, slots=True)
class KvcPlan:
    chunk_size: int  # tokens per tier key
    save_unfull_chunk: bool  # a prompt's trailing partial chunk is stored too
    tiers: tuple[KvcTierPlan, ...]  # fastest first, as `kvc_tiers` lists them (may be empty)
    gpu_link: LinkPlan | None  # tier -> GPU copies, with the CPUMemory section's settings (None: no tiers)


@dataclass(frozen=True, slots=True)
class RouterPlan:
    policy: str  # round_robin | least_loaded | random | max_prefix
    scaling: bool  # enable_scaling
    max_queue_threshold: int  # a worker with more outstanding requests asks for another worker ...
    scale_latency_ns: int  # ... which joins this much later ...
    max_workers: int  # ... up to this many
    check_interval_ns: int  # how often the outstanding requests are checked (1 s)


# ------------------------------------------------------------------ workload stages
@dataclass(frozen=True, slots=True)
class RateStage:
    """UniformReqRate (evenly spaced) or ExponentialReqRate (exponential gaps): prompts 0..n-1."""

    kind: str  # "uniform" | "exponential"
    request_rate: float  # requests per second
    total_requests: int
    prompt_min: int
    prompt_max: int
    output_min: int
    output_max: int


@dataclass(frozen=True, slots=True)
class TraceStage:
    """Mooncake rows; each hash id stands for `chunk_size` tokens (the last may be shorter)."""

    chunk_size: int
    rows: tuple[TraceRow, ...]  # timestamp_ns = timestamp * multiplier_to_sec, already cut to total_requests


@dataclass(frozen=True, slots=True)
class OtelTurn:
    start_ns: int  # the span's start and end, relative to the file's earliest start, times multiplier_to_sec
    end_ns: int
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OtelSession:
    id: str  # trace_id
    turns: tuple[OtelTurn, ...]


@dataclass(frozen=True, slots=True)
class OtelStage:
    """Pretokenized sessions: turns of a session serial, at most `max_concurrent_sessions` sessions at once."""

    sessions: tuple[OtelSession, ...]
    max_concurrent_sessions: int | None  # None: all at once
    inter_turn_multiplier: float
    total_requests: int | None  # None: every turn


Stage = Union[RateStage, TraceStage, OtelStage]


@dataclass(frozen=True, slots=True)
class OpalPlan:
    stages: tuple[Stage, ...]  # run one after another; a stage ends when all its requests finished
    apc: ApcPlan | None  # None: APC off (G1 keeps no prefix cache)
    kvc: KvcPlan
    router: RouterPlan
    seed: int  # simulation.seed: every draw
    simulation_time_ns: int | None  # None: until done (simulation_time -1)
    kv_bytes_per_token: int
    model_name: str
    memory_gb: float  # worker.hw, for opal's startup log line
    tp: int
    model_bytes: int  # params * bytes per parameter
    config_json: str  # the config as loaded, for sim_config.json
