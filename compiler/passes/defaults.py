"""Defaults pass: fill every unset knob from the spec's tables, recording why.

The table below is the whole pass: each row is a pointer (absolute, or relative
to a worker role), the value (a constant or a function of the spec, for
backend-dependent defaults), the reason shown by `kvreplay explain`, and an
optional condition (e.g. shared-bandwidth knobs exist only for
``cluster_shared`` pools).  Rows apply in order, so later rows may read earlier ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..catalog import backends
from ..spec import Spec, role_pointer

Value = Any | Callable[[Spec, str], Any]
Cond = Callable[[Spec, str], bool]


def _always(spec: Spec, role: str) -> bool:
    return True


def _backend(spec: Spec) -> str:
    return spec.get("/engine/backend", "vllm")


def _backend_value(key: str) -> Callable[[Spec, str], Any]:
    return lambda spec, role: backends()[_backend(spec)][key]


def _has(*parts: str) -> Cond:
    return lambda spec, role: spec.has(role_pointer(role, *parts))


def _equals(value: Any, *parts: str) -> Cond:
    return lambda spec, role: spec.get(role_pointer(role, *parts)) == value


def _both(a: Cond, b: Cond) -> Cond:
    return lambda spec, role: a(spec, role) and b(spec, role)


@dataclass(frozen=True)
class Default:
    path: tuple[str, ...]
    value: Value
    why: str
    when: Cond = _always


ENGINE_DEFAULTS = (
    Default(("engine", "mode"), "aggregated", "spec: engine.mode"),
    Default(("engine", "backend"), "vllm", "spec: engine.backend"),
    Default(("engine", "kvcache_quant_mode"), "auto", "KV precision follows the checkpoint"),
    Default(("engine", "context_length"), "max", "the model's maximum context"),
    Default(("engine", "nextn"), 0, "no native MTP"),
    Default(("engine", "enable_chunked_prefill"), True, "vLLM chunked prefill is on by default"),
    Default(("engine", "kv_eviction_policy"), "lru", "spec: least recently used"),
    Default(("engine", "placement"), "round_robin", "round robin over workers, then DP ranks"),
    Default(("engine", "kv_transfer", "bytes_per_token"), "auto", "spec: engine.kv_transfer",
            lambda s, r: s.get("/engine/mode") == "disaggregated"),
    Default(("engine", "kv_transfer", "bandwidth_gb_per_second"), None, "spec: null means no transfer delay",
            lambda s, r: s.get("/engine/mode") == "disaggregated"),
    Default(("engine", "kv_transfer", "timing_mode"), "destination_missing", "spec: engine.kv_transfer",
            lambda s, r: s.get("/engine/mode") == "disaggregated"),
)

_host = _has("kv_cache", "host_offload")
_g3 = _has("kv_cache", "g3_offload")
_kvcr = _has("kv_cache", "kvcr")
_default_capacity = _equals("default", "kv_cache", "capacity", "type")

ROLE_DEFAULTS = tuple(
    [Default(("parallelism", k), 1, "spec: parallelism defaults to 1")
     for k in ("replicas", "tensor", "pipeline", "attention_data", "moe_tensor", "moe_expert",
               "prefill_context", "decode_context")]
    + [
        Default(("scheduler", "max_batched_tokens"), 8192, "spec: scheduler default"),
        Default(("scheduler", "max_sequences"), lambda s, r: 1 if r == "prefill" else 256,
                "spec: 256, 1 on the prefill role"),
        Default(("scheduler", "prefill_schedule_interval"), 1, "vLLM knob: prefill may join every pass"),
        Default(("scheduler", "prefill_decode_interval"), 0, "SGLang knob: no forced decode interleave"),
        Default(("scheduler", "schedule_policy"), "fcfs", "SGLang knob: waiting requests in arrival order"),
        Default(("timing", "type"), "default", "spec: roofline model from the catalogs"),
        Default(("kv_cache", "block_size"), _backend_value("block_size"), "backend block size (vLLM 64, SGLang 1, "
                "TensorRT-LLM 32)", lambda s, r: s.get(role_pointer(r, "kv_cache", "block_size")) is None),
        Default(("kv_cache", "prefix_caching"), True, "spec: kv_cache.prefix_caching"),
        Default(("kv_cache", "bytes_per_token"), "auto", "spec: derived from model, KV precision and parallelism"),
        Default(("kv_cache", "capacity", "type"), "default", "spec: sized from GPU memory"),
        Default(("kv_cache", "capacity", "memory_fraction"), _backend_value("memory_fraction"),
                "backend memory fraction (vLLM/TensorRT-LLM 0.9, SGLang 0.88)", _default_capacity),
        Default(("kv_cache", "capacity", "cuda_graph_reserved_bytes"), 0, "spec: nothing held back",
                _default_capacity),
        Default(("kv_cache", "host_offload", "scope"), "dp_rank_local", "spec: one pool per DP rank", _host),
        Default(("kv_cache", "host_offload", "d2h_bandwidth_gbps"), 32.0, "spec: per DP rank", _host),
        Default(("kv_cache", "host_offload", "h2d_bandwidth_gbps"), 32.0, "spec: per DP rank", _host),
        Default(("kv_cache", "host_offload", "latency_to_first_byte_ms"), 0.0, "spec: no transfer latency", _host),
        Default(("kv_cache", "host_offload", "shared_d2h_bandwidth_gbps"), 80.0, "spec: shared pool limit",
                _both(_host, _equals("cluster_shared", "kv_cache", "host_offload", "scope"))),
        Default(("kv_cache", "host_offload", "shared_h2d_bandwidth_gbps"), 80.0, "spec: shared pool limit",
                _both(_host, _equals("cluster_shared", "kv_cache", "host_offload", "scope"))),
        Default(("kv_cache", "host_offload", "connector"), "offloading_v0_24", "spec: vLLM 0.24 OffloadingConnector",
                _host),
        Default(("kv_cache", "g3_offload", "latency_to_first_byte_ms"), 0.1, "spec: modeling assumption", _g3),
        Default(("kv_cache", "g3_offload", "read_bandwidth_gbps"), 10.0, "spec: per worker", _g3),
        Default(("kv_cache", "g3_offload", "write_bandwidth_gbps"), 10.0, "spec: per worker", _g3),
        Default(("kv_cache", "g3_offload", "shared_read_bandwidth_gbps"), 80.0, "spec: shared store limit",
                _both(_g3, _equals("cluster_shared", "kv_cache", "g3_offload", "scope"))),
        Default(("kv_cache", "g3_offload", "shared_write_bandwidth_gbps"), 80.0, "spec: shared store limit",
                _both(_g3, _equals("cluster_shared", "kv_cache", "g3_offload", "scope"))),
        Default(("kv_cache", "kvcr", "latency_to_first_byte_ms"), 1.0, "spec: control round trip", _kvcr),
        Default(("kv_cache", "kvcr", "bandwidth_gbps"), 50.0, "spec: a 400 Gb/s NIC per source rank", _kvcr),
    ]
)

TRAFFIC_DEFAULTS = {
    "synthetic": (("input_tokens", 1024), ("output_tokens", 128), ("cached_prefix_tokens", 0)),
    "synthetic-session": (("new_input_tokens_per_turn", 1024), ("output_tokens_per_turn", 128),
                          ("session", "turns", 4), ("session", "shared_prefix_ratio", 0.0),
                          ("session", "prefix_groups", 0), ("session", "inter_turn_delay_ms", 0.0)),
    "trace": (("format", "mooncake"), ("block_size", 512)),
}
LOAD_DEFAULTS = {
    "concurrency": (("concurrency", 10),),
    "poisson": (("seed", 42),),
    "trace_timestamps": (("speedup", 1.0),),
}


def _apply(spec: Spec, pointer: str, default: Default, role: str) -> Spec:
    if not default.when(spec, role):
        return spec
    value = default.value(spec, role) if callable(default.value) else default.value
    if pointer.endswith("/block_size") and spec.get(pointer, "unset") is None:
        return spec.set(pointer, value, f"default({default.why})")  # explicit null = backend default
    return spec.default(pointer, value, default.why)


def _traffic(spec: Spec) -> Spec:
    if not spec.has("/traffic"):
        spec = spec.default("/traffic/source", {"type": "synthetic"}, "spec: no traffic means synthetic")
        spec = spec.default("/traffic/load", {"type": "concurrency"}, "spec: no traffic means concurrency 10")
        spec = spec.default("/traffic/stop", {"requests": 100}, "spec: no traffic means 100 requests")
    elif not spec.has("/traffic/source"):  # (the plan is always complete: what the spec says of no traffic)
        spec = spec.default("/traffic/source", {"type": "synthetic"}, "spec: a traffic without a source is synthetic")
    source = spec.get("/traffic/source/type")
    for *parts, value in TRAFFIC_DEFAULTS.get(source, ()):
        spec = spec.default("/traffic/source/" + "/".join(parts), value, f"spec: {source} source")
    if source == "trace" and not spec.has("/traffic/load"):
        spec = spec.default("/traffic/load", {"type": "trace_timestamps"}, "traces replay their own timestamps")
    elif not spec.has("/traffic/load"):
        spec = spec.default("/traffic/load", {"type": "concurrency"}, "spec: a traffic without a load runs "
                            "concurrency 10")
    for *parts, value in LOAD_DEFAULTS.get(spec.get("/traffic/load/type"), ()):
        spec = spec.default("/traffic/load/" + "/".join(parts), value, "spec: load default")
    return spec


def run(spec: Spec) -> Spec:
    for default in ENGINE_DEFAULTS:
        spec = _apply(spec, "/" + "/".join(default.path), default, "")
    if not spec.roles() and spec.get("/engine/mode") == "aggregated":
        spec = spec.default("/engine/workers/aggregated", {}, "aggregated mode has one aggregated role")
    for role in spec.roles():
        for default in ROLE_DEFAULTS:
            spec = _apply(spec, role_pointer(role, *default.path), default, role)
    return _traffic(spec)
