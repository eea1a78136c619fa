"""Defaults pass: every default of the spec's tables, backend-dependent ones included, with provenance."""
from __future__ import annotations

import pytest

from .support import TRAFFIC, compile_yaml


def role(result, name="aggregated"):
    assert result.ok, result.diagnostics
    return result.plan.to_dict()["engine"]["workers"][name]


@pytest.mark.parametrize("backend,block_size,fraction", [("vllm", 64, 0.9), ("sglang", 1, 0.88), ("trtllm", 32, 0.9)])
def test_backend_dependent_defaults(backend, block_size, fraction):
    result = compile_yaml(f"engine: {{model: Qwen/Qwen3-8B, hardware: h200_sxm, backend: {backend}}}\n" + TRAFFIC)
    kv = role(result)["kv_cache"]
    assert kv["block_size"] == block_size
    assert kv["capacity"] == {"type": "default", "memory_fraction": fraction, "cuda_graph_reserved_bytes": 0,
                              "blocks": kv["capacity"]["blocks"]}
    assert kv["prefix_caching"] is True
    provenance = result.spec.provenance("/engine/workers/aggregated/kv_cache/block_size")
    assert provenance.startswith("default(backend block size")


def test_null_block_size_means_the_backend_default():
    result = compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, backend: trtllm, workers: "
                          "{aggregated: {kv_cache: {block_size: null}}}}\n" + TRAFFIC)
    assert role(result)["kv_cache"]["block_size"] == 32


def test_host_offload_defaults_and_shared_only_knobs():
    local = role(compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, workers: {aggregated: {kv_cache: "
                              "{host_offload: {num_host_blocks: 8}}}}}\n" + TRAFFIC))["kv_cache"]["host_offload"]
    assert local == {"num_host_blocks": 8, "scope": "dp_rank_local", "d2h_bandwidth_gbps": 32.0,
                     "h2d_bandwidth_gbps": 32.0, "latency_to_first_byte_ms": 0.0, "connector": "offloading_v0_24"}
    shared = role(compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, workers: {aggregated: {kv_cache: "
                               "{host_offload: {num_host_blocks: 8, scope: cluster_shared}}}}}\n" + TRAFFIC))
    offload = shared["kv_cache"]["host_offload"]
    assert (offload["shared_d2h_bandwidth_gbps"], offload["shared_h2d_bandwidth_gbps"]) == (80.0, 80.0)


def test_g3_and_kvcr_defaults():
    kv = role(compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, workers: {aggregated: {kv_cache: "
                           "{host_offload: {num_host_blocks: 8}, g3_offload: {scope: worker_local, num_g3_blocks: 9}}}}}"
                           "\n" + TRAFFIC))["kv_cache"]
    assert kv["g3_offload"] == {"scope": "worker_local", "num_g3_blocks": 9, "latency_to_first_byte_ms": 0.1,
                                "read_bandwidth_gbps": 10.0, "write_bandwidth_gbps": 10.0}
    kv = role(compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, workers: {aggregated: {kv_cache: "
                           "{host_offload: {num_host_blocks: 8}, kvcr: {}}}}}\n" + TRAFFIC))["kv_cache"]
    assert kv["kvcr"] == {"latency_to_first_byte_ms": 1.0, "bandwidth_gbps": 50.0}


def test_scheduler_and_parallelism_defaults_per_role():
    result = compile_yaml("""
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    prefill: {kv_cache: {capacity: {type: fixed, blocks: 10}}}
    decode: {kv_cache: {capacity: {type: fixed, blocks: 10}}}
""" + TRAFFIC)
    prefill, decode = role(result, "prefill"), role(result, "decode")
    assert prefill["scheduler"]["max_sequences"] == 1 and decode["scheduler"]["max_sequences"] == 256
    assert prefill["scheduler"]["max_batched_tokens"] == 8192
    assert set(prefill["parallelism"].values()) == {1}
    # auto transfer rate: Qwen3-8B KV per token over the prefill role's shard(s), 36 x 8 x 128 x 2 x 2 bytes
    assert result.plan.to_dict()["engine"]["kv_transfer"] == {"bytes_per_token": 147456,
                                                               "bandwidth_gb_per_second": None,
                                                               "timing_mode": "destination_missing"}


def test_user_values_are_never_overwritten_and_have_user_provenance():
    result = compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm, workers: {aggregated: {kv_cache: "
                          "{block_size: 16, capacity: {type: default, memory_fraction: 0.5}}}}}\n" + TRAFFIC)
    kv = role(result)["kv_cache"]
    assert (kv["block_size"], kv["capacity"]["memory_fraction"]) == (16, 0.5)
    assert result.spec.provenance("/engine/workers/aggregated/kv_cache/block_size") == "user"


def test_session_traffic_defaults():
    result = compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm}\ntraffic: {source: {type: "
                          "synthetic-session}, load: {type: poisson, sessions_per_second: 1.0}, stop: {sessions: 2}}\n")
    traffic = result.plan.to_dict()["traffic"]
    assert traffic["source"] == {"type": "synthetic-session", "new_input_tokens_per_turn": 1024,
                                 "output_tokens_per_turn": 128,
                                 "session": {"turns": 4, "shared_prefix_ratio": 0.0, "prefix_groups": 0,
                                             "inter_turn_delay_ms": 0.0}}
    assert traffic["load"]["seed"] == 42


ENGINE = "engine: {model: Qwen/Qwen3-8B, hardware: h200_sxm}\n"


@pytest.mark.parametrize("traffic, source, load", [
    ("traffic: {load: {type: concurrency, concurrency: 2}, stop: {requests: 4}}\n",
     {"type": "synthetic", "input_tokens": 1024, "output_tokens": 128, "cached_prefix_tokens": 0},
     {"type": "concurrency", "concurrency": 2}),
    ("traffic: {source: {type: synthetic, input_tokens: 64}, stop: {requests: 4}}\n",
     {"type": "synthetic", "input_tokens": 64, "output_tokens": 128, "cached_prefix_tokens": 0},
     {"type": "concurrency", "concurrency": 10}),
])
def test_a_traffic_missing_its_source_or_load_is_completed(traffic, source, load):
    """(Issue 19, item 2) the plan is always complete: a missing source is synthetic, a missing load concurrency
    10, as the spec says of a missing traffic; the finished plan can be replayed."""
    result = compile_yaml(ENGINE + traffic)
    assert result.ok, result.diagnostics
    plan = result.plan.to_dict()["traffic"]
    assert (plan["source"], plan["load"]) == (source, load)
    assert result.plan.records is not None
    missing = "/traffic/source/type" if "source" not in traffic else "/traffic/load/type"
    assert result.spec.provenance(missing).startswith("default(spec: a traffic without")
