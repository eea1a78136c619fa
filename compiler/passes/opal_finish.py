"""Finish pass, opal part: the `OpalPlan` record and the stage traffic of an opal config's plan.

Reads only the plan's data (`plan["opal"]`: the opal document with every default, its `derived` numbers
and `config_json`) and the stage payloads the traces pass parsed (`opal_stages.read_stages`), so a plan
written to JSON and read back finishes to the same records.  Units: `apc_lru_ttl`,
`apc_eviction_check_interval_sec`, `scale_latency` and `simulation_time` are seconds; `latency_nsec` ns;
`capacity_GB` x 2^30 bytes; `bandwidth_GBps` x 10^9 B/s, which is the runtime links' `bandwidth_gbps`
(bytes per ns) as it is.
"""
from __future__ import annotations

import math
from fractions import Fraction

from ..durations import seconds_to_ns, to_ns
from ..frontends.opal.names import RATE_STAGES, SHARED_TIERS, policy_name
from ..opal_records import (ApcPlan, KvcPlan, KvcTierPlan, OpalPlan, OtelStage, RateStage, RouterPlan, Stage,
                            TraceStage)
from ..plan_records import LinkPlan, TrafficPlan

GIB = 2 ** 30
CHECK_INTERVAL_NS = 1_000_000_000  # the router looks at outstanding requests once a second


def _link(tier: dict) -> LinkPlan:
    return LinkPlan(bandwidth_gbps=float(tier["bandwidth_GBps"]), shared_bandwidth_gbps=None,
                    latency_ns=to_ns(tier["latency_nsec"], 1), slots=tier["concurrency"])


def _tier(name: str, tier: dict, chunk_bytes: int) -> KvcTierPlan:
    chunks = math.floor(Fraction(tier["capacity_GB"]) * GIB / chunk_bytes)
    return KvcTierPlan(name=name, shared=name in SHARED_TIERS, chunks=chunks, chunk_bytes=chunk_bytes,
                       link=_link(tier), eviction=tier.get("eviction_policy", "none"))


def kvc_plan(kvc: dict, kv_bytes_per_token: int) -> KvcPlan:
    chunk_bytes = kvc["chunk_size"] * kv_bytes_per_token
    tiers = tuple(_tier(name, kvc[name], chunk_bytes) for name in kvc["kvc_tiers"])
    gpu_link = None
    if tiers:  # tier -> GPU copies use the CPUMemory settings, listed or not; else the first tier's
        gpu_link = _link(kvc["CPUMemory"]) if "CPUMemory" in kvc else tiers[0].link
    return KvcPlan(chunk_size=kvc["chunk_size"], save_unfull_chunk=kvc["save_unfull_chunk"], tiers=tiers,
                   gpu_link=gpu_link)


def apc_plan(vllm: dict) -> ApcPlan | None:
    if not vllm["enable_gpu_apc"]:
        return None
    return ApcPlan(ttl_ns=seconds_to_ns(vllm["apc_lru_ttl"]), eviction_threshold=vllm["hbm_eviction_threshold"],
                   check_interval_ns=seconds_to_ns(vllm["apc_eviction_check_interval_sec"]))


def router_plan(router: dict) -> RouterPlan:
    return RouterPlan(policy=policy_name(router["policy"]), scaling=router["enable_scaling"],
                      max_queue_threshold=router["max_queue_threshold"],
                      scale_latency_ns=seconds_to_ns(router["scale_latency"]), max_workers=router["max_workers"],
                      check_interval_ns=CHECK_INTERVAL_NS)


def _all(count: int) -> int | None:
    return None if count == -1 else count


def stage_plan(stage: dict, payload) -> Stage:
    params, kind = stage["workload_params"], stage["type"]
    if kind in RATE_STAGES:
        return RateStage(kind=RATE_STAGES[kind], request_rate=params["request_rate"],
                         total_requests=params["total_requests"], prompt_min=params["prompt_size_min"],
                         prompt_max=params["prompt_size_max"], output_min=params["output_tokens_min"],
                         output_max=params["output_tokens_max"])
    if kind == "trace":
        return TraceStage(chunk_size=params["chunk_size"], rows=tuple(payload))
    if kind == "otel":
        return OtelStage(sessions=tuple(payload), max_concurrent_sessions=_all(params["max_concurrent_sessions"]),
                         inter_turn_multiplier=params["inter_turn_multiplier"],
                         total_requests=_all(params["total_requests"]))
    raise ValueError(f"unknown opal stage type {kind!r}")


def simulation_time_ns(opal: dict) -> int | None:
    seconds = opal["simulation"]["simulation_time"]
    return None if seconds == -1 else seconds_to_ns(seconds)


def opal_plan(opal: dict, payloads: tuple) -> OpalPlan:
    """The `OpalPlan` of a plan's `opal` section, with the stage payloads in stage order."""
    stages = opal["workload"]["stages"]
    if len(payloads) != len(stages):
        raise ValueError("the opal stage files were not read (finish the plan with finish_plan)")
    derived, worker = opal["derived"], opal["worker"]
    return OpalPlan(
        stages=tuple(stage_plan(stage, payload) for stage, payload in zip(stages, payloads)),
        apc=apc_plan(worker["vllm_params"]), kvc=kvc_plan(opal["kvc"], derived["kv_bytes_per_token"]),
        router=router_plan(opal["router"]["router_params"]), seed=opal["simulation"]["seed"],
        simulation_time_ns=simulation_time_ns(opal), kv_bytes_per_token=derived["kv_bytes_per_token"],
        model_name=opal["model"]["model_params"]["name"], memory_gb=float(worker["hw"]["memory_gb"]),
        tp=worker["hw"]["tp"], model_bytes=derived["model_bytes"], config_json=opal["config_json"])


def traffic_plan(opal: dict) -> TrafficPlan:
    """The traffic of an opal plan: its stages, one after another (the records are in `OpalPlan.stages`)."""
    return TrafficPlan(kind="opal-stages", source=None, load="stages", concurrency=0, rate=None,
                       seed=opal["simulation"]["seed"], max_in_flight=None, request_limit=None, session_limit=None,
                       stop_ns=simulation_time_ns(opal))
