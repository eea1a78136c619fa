"""`--to aisimulate-native`: the execution spec AISimulate's runtime (`run_replay_json`) accepts.

The shape is the one `aisimulate predict` hands its runtime (docs/reference-facts.md, "AISimulate's native
execution spec"): `{"spec": <native ReplaySpec v1>, "traffic": <the load generator's settings>}`, the spec
holding the topology, one engine descriptor per role (`rank`: the scheduler, G1, G2/G3, state cache and a
timing model) and the adapters.  Synthetic traffic travels as AISimulate's own generator settings (so its
runtime draws the same requests its predict would); a trace travels as explicit requests (`native_traffic`).
"""
from __future__ import annotations

import json

from ..compiler.geometry.kv_bytes import DTYPE_BYTES
from ..compiler.spec import role_pointer
from .carry import Carry
from .native_traffic import requests_of, traffic_block

NAME = "AISimulate's native execution spec"
# kvreplay knobs with no native field; the why is what a user needs to know
NO_FIELD = {
    "/kv_cache/host_offload/connector": "the native host offload has one transfer model (no vLLM connector profiles)",
    "/kv_cache/host_offload/latency_to_first_byte_ms": "the native host offload has no transfer latency",
    "/kv_cache/host_offload/shared_d2h_bandwidth_gbps": "the native cluster-shared pool has no shared link "
                                                       "(aisimulate predict drops it too)",
    "/kv_cache/host_offload/shared_h2d_bandwidth_gbps": "the native cluster-shared pool has no shared link "
                                                       "(aisimulate predict drops it too)",
    "/kv_cache/kvcr": "KVCR peer fetch is a kvreplay extension",
    "/kv_cache/groups": "grouped KV caches are not lowered to the native descriptor yet",
    "/scaling": "scaled workers are a kvreplay extension (aisimulate predict rejects `scaling`)",
    "/hardware": "a per-role hardware override has no native field (the timing model names one system)",
}


def _kv_bytes_for_offload(c: Carry, role: str) -> int:
    """AISimulate sizes G2/G3 blocks with the checkpoint's storage dtype unless KV precision is explicit
    (reference facts 2.2: Qwen3-32B-FP8 gives 262,144 B/token there, 131,072 in G1)."""
    rate = c.take(role_pointer(role, "kv_cache", "bytes_per_token"))
    if c.user_set(role_pointer(role, "kv_cache", "bytes_per_token")) or c.user_set("/engine/kvcache_quant_mode") \
            or c.user_set(role_pointer(role, "timing", "kvcache_quant_mode")):
        return rate
    kv_width = DTYPE_BYTES[c.spec.geometry[role]["kv_dtype"]]
    return rate * DTYPE_BYTES[c.spec.model.get("dtype", "bfloat16")] // kv_width


def _timing(c: Carry, role: str, worker_type: str) -> dict:
    timing = c.take(role_pointer(role, "timing"))
    if timing["type"] == "fixed":
        for pointer in ("/engine/model", "/engine/hardware", "/engine/backend_version"):
            c.drop(pointer, "with fixed timing the native spec names no model or system (G1 blocks and KV bytes "
                   "are already resolved from them)")
        return {"type": "fixed", "prefill_ms": timing["prefill_ms"], "decode_ms": timing["decode_ms"]}
    if timing["type"] != "default":
        c.drop(role_pointer(role, "timing"), f"the native runtime has no `{timing['type']}` timing model; "
               "AISimulate's default (AIC) timing is used instead", always=True)
    par = lambda name: c.take(role_pointer(role, "parallelism", name))  # noqa: E731
    version = c.take("/engine/backend_version")
    config = {"model": c.take("/engine/model"), "system": c.take("/engine/hardware"), "backend": c.take("/engine/backend"),
              "backend_version": version, "estimation_mode": "op_level" if version else "auto",
              "worker_type": worker_type, "tp": par("tensor"), "pp": par("pipeline"), "attention_dp": par("attention_data"),
              "kv_block_size": c.take(role_pointer(role, "kv_cache", "block_size")), "nextn": c.take("/engine/nextn", 0),
              "kvcache_quant_mode": _explicit(c, role_pointer(role, "timing", "kvcache_quant_mode"))
              or _explicit(c, "/engine/kvcache_quant_mode"), "database_mode": "SILICON"}
    for name, key in (("moe_tensor", "moe_tp_size"), ("moe_expert", "moe_ep_size")):
        pointer = role_pointer(role, "parallelism", name)
        if c.user_set(pointer) or c.user_set(role_pointer(role, "parallelism", "moe_expert")):
            config[key] = c.take(pointer)  # (AISimulate checks tp x dp = moe_tp x moe_ep only when one is given)
    return {"type": "external", "provider": "aic", "config": config}


def _explicit(c: Carry, pointer: str):
    value = c.take(pointer)
    return value if c.user_set(pointer) and value not in (None, "auto", "none") else None


def _host_offload(c: Carry, role: str, kv_bytes: int) -> dict:
    host = c.take(role_pointer(role, "kv_cache", "host_offload"))
    out = {k: host[k] for k in ("d2h_bandwidth_gbps", "h2d_bandwidth_gbps", "num_host_blocks")}
    if host["scope"] == "cluster_shared":  # every rank names the same pool by its KV layout
        layout = {"backend": c.take("/engine/backend"), "backend_version": c.take("/engine/backend_version"),
                  "block_size": c.take(role_pointer(role, "kv_cache", "block_size")), "bytes_per_token": kv_bytes,
                  "model": c.take("/engine/model"), "pp": c.take(role_pointer(role, "parallelism", "pipeline")),
                  "tp": c.take(role_pointer(role, "parallelism", "tensor"))}
        out |= {"scope": "cluster_shared", "kv_layout_id": json.dumps(layout, sort_keys=True, separators=(",", ":"))}
    return out


def _rank(c: Carry, role: str, worker_type: str) -> dict:
    kv = lambda *parts: c.take(role_pointer(role, "kv_cache", *parts))  # noqa: E731
    sched = lambda name: c.take(role_pointer(role, "scheduler", name))  # noqa: E731
    c.drop_each(NO_FIELD, under=role_pointer(role))
    rank = {"backend": c.take("/engine/backend"), "block_size": kv("block_size"), "enable_prefix_caching": kv("prefix_caching"),
            "max_num_batched_tokens": sched("max_batched_tokens"), "max_num_seqs": sched("max_sequences"),
            "num_gpu_blocks": c.spec.geometry[role]["g1_blocks"], "prefill_decode_interval": sched("prefill_decode_interval"),
            "prefill_schedule_interval": sched("prefill_schedule_interval"), "timing_model": _timing(c, role, worker_type)}
    c.take(role_pointer(role, "kv_cache", "capacity"))
    if c.has(role_pointer(role, "host_loop")):  # (SGLang's overlap scheduler: the native `rank.sglang.host_loop`)
        rank["sglang"] = {"host_loop": c.take(role_pointer(role, "host_loop"))}
    context = c.take("/engine/context_length")
    rank["max_model_len"] = c.spec.model["max_context"] if context in (None, "max") else context
    offload = c.has(role_pointer(role, "kv_cache", "host_offload")) or c.has(role_pointer(role, "kv_cache", "g3_offload"))
    if offload or c.has(role_pointer(role, "kv_cache", "state_cache")):
        rank["kv_cache_bytes_per_token"] = _kv_bytes_for_offload(c, role) if offload else kv("bytes_per_token")
    if c.has(role_pointer(role, "kv_cache", "host_offload")):
        rank["native_host_offload"] = _host_offload(c, role, rank["kv_cache_bytes_per_token"])
    if c.has(role_pointer(role, "kv_cache", "g3_offload")):
        rank["g3_offload"] = kv("g3_offload")
    if c.has(role_pointer(role, "kv_cache", "state_cache")):
        rank["state_cache"] = {"bytes_per_request": kv("state_cache", "bytes_per_request")}
        c.take(role_pointer(role, "kv_cache", "state_cache"))  # (its dtypes only sized bytes_per_request)
    unit = kv("prefix_match_unit")
    if unit is not None and unit != rank["block_size"]:
        rank["prefix_match_unit"] = unit
    if c.has("/engine/kv_transfer"):
        transfer = c.take("/engine/kv_transfer")
        rank |= {"kv_transfer_bandwidth": transfer["bandwidth_gb_per_second"],
                 "kv_transfer_bytes_per_token": transfer["bytes_per_token"],
                 "kv_transfer_timing_mode": transfer["timing_mode"]}
    return rank


def _engine(c: Carry, role: str, worker_type: str) -> dict:
    par = lambda name: c.take(role_pointer(role, "parallelism", name))  # noqa: E731
    return {"dp_size": par("attention_data"), "tensor_parallel_size": par("tensor"),
            "prefill_context_parallel_size": par("prefill_context"),
            "num_gpu_blocks_is_explicit": c.take(role_pointer(role, "kv_cache", "capacity", "type")) == "fixed",
            "rank": _rank(c, role, worker_type)}


def _pool(c: Carry, role: str) -> dict:
    delay = c.take(f"/traffic/replay/startup_delay_ms/{role}", 0.0)  # (a ReplaySpec's pool; predict: none)
    return {"initial_workers": c.take(role_pointer(role, "parallelism", "replicas")), "startup_delay_ms": delay}


def native_spec(result, c: Carry) -> dict:
    """The execution spec (as a dict) of a compiled predict config or native ReplaySpec."""
    if not c.take("/engine/enable_chunked_prefill"):
        c.drop("/engine/enable_chunked_prefill", "the native rank descriptor has no chunked-prefill switch "
               "(aisimulate predict writes none either)", always=True)
    placement = c.take("/engine/placement")
    if placement != "round_robin":
        c.drop("/engine/placement", f"`{placement}` placement is a kvreplay extension; round robin is used")
    if c.take("/engine/mode") == "disaggregated":
        topology = {"kind": "disaggregated", "prefill": _pool(c, "prefill"), "decode": _pool(c, "decode"),
                    "handoff_latency_ms": c.take("/traffic/replay/handoff_latency_ms", 0.0)}
        engine = {"prefill": _engine(c, "prefill", "prefill"), "decode": _engine(c, "decode", "decode")}
    else:
        topology = {"kind": "aggregated", "workers": _pool(c, "aggregated")}
        engine = _engine(c, "aggregated", "aggregated")
    if c.take("/engine/kv_eviction_policy") != "lru":  # (LRU is the runtime's default; predict writes none)
        engine = {**engine, "kv_eviction_policy": c.take("/engine/kv_eviction_policy")}
    spec = {"version": 1, "topology": topology, "engine": engine,
            "adapters": {"placement": {"provider": "round_robin", "config": None},
                         "scaling": {"provider": "none", "config": None}},
            "max_in_flight": c.take("/traffic/load/max_in_flight"), "max_sim_time_ms": None,
            "record_per_request": c.take("/traffic/replay/record_per_request", False), "requests": [], "sla": {}}
    traffic = traffic_block(c)
    if traffic is None:  # a trace: the requests themselves
        spec["requests"] = requests_of(result, c)
    else:
        spec["max_in_flight"] = traffic.get("concurrency")
    stop = c.take("/traffic/stop/max_virtual_time_seconds", c.take("/traffic/replay/max_virtual_time_seconds"))
    if stop is not None:
        spec["max_sim_time_ms"] = stop * 1000.0
    return {"spec": spec, "traffic": traffic} if traffic is not None else {"spec": spec}


FRONTENDS = ("predict", "replayspec")


def emit(result, c: Carry, output) -> dict:
    from ..compiler.passes.plan import canonical_json

    return {output: canonical_json(native_spec(result, c))}
