"""`--to opal`: a predict config (or ReplaySpec) as an IBM opal JSON config, plus the files it names.

Written next to `-o CONFIG.json`: the config; `traces/<stem>.jsonl`, the traffic as one Mooncake `trace`
stage (`mooncake_rows`: arrival times in ms, `multiplier_to_sec` 0.001); `model-configs/<model>/config.json`,
the model as a Hugging Face config (opal reads nothing else).  What opal can express is vLLM aggregated: the
workers (`num_workers`, `tp`), the scheduler, G1 (its size through `memory_gb`: opal sizes the pool from GPU
memory, so `memory_gb` is the one value whose `total_gpu_blocks` is G1's block count), prefix caching as GPU
APC with no TTL and no proactive eviction (`hbm_eviction_threshold` 1.0), G2 as the `CPUMemory` tier and G3
as `LocalNVMe` (or `DistributedFS` when shared), keyed by G1 blocks and evicting LRU.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import orjson

from ..compiler.catalog import resolve_hardware
from ..compiler.frontends.opal.formulas import GIB, kv_bytes_per_token, model_bytes, total_gpu_blocks
from ..compiler.geometry.kv_bytes import DTYPE_BYTES
from ..compiler.spec import role_pointer
from ..compiler.timing_inputs import peak_flops
from . import mooncake_rows
from .carry import Carry, Refusal

NAME = "opal"
FRONTENDS = ("predict", "replayspec")
ROLE = "aggregated"
QUANT_METHODS = {"fp8": "fp8", "fp4": "nvfp4"}
NO_FIELD = {  # role fields opal has no knob for, and why
    "/kv_cache/host_offload/connector": "opal's CPUMemory tier has one transfer model (no vLLM connector profiles)",
    "/kv_cache/host_offload/scope": "opal's CPUMemory tier is one per worker",
    "/kv_cache/host_offload/shared_d2h_bandwidth_gbps": "opal's CPUMemory tier has no shared link",
    "/kv_cache/host_offload/shared_h2d_bandwidth_gbps": "opal's CPUMemory tier has no shared link",
    "/kv_cache/kvcr": "opal has no peer fetch between workers' CPU memories",
    "/kv_cache/state_cache": "opal has no per-request state cache",
    "/kv_cache/groups": "opal has one KV cache group",
    "/kv_cache/prefix_match_unit": "opal's APC matches whole blocks",
    "/scaling": "opal scales by queue length (`enable_scaling`), not on a schedule",
    "/hardware": "opal has one `worker.hw` for every worker",
}
ONE_RANK = ("attention_data", "pipeline", "prefill_context", "decode_context", "moe_expert", "moe_tensor")


def _hf_config(c: Carry, context: int) -> dict:
    """The model as the Hugging Face config opal reads (its formulas take these fields)."""
    model = c.spec.model
    config = {"hidden_size": model["hidden_size"], "num_hidden_layers": model["num_layers"],
              "num_attention_heads": model["num_attention_heads"], "num_key_value_heads": model["num_kv_heads"],
              "head_dim": model["head_dim"], "intermediate_size": model["intermediate_size"],
              "vocab_size": model["vocab_size"], "max_position_embeddings": context,
              "tie_word_embeddings": bool(model.get("tie_word_embeddings")), "torch_dtype": "bfloat16"}
    if model.get("attention") == "mla":
        config |= {"kv_lora_rank": model["kv_lora_rank"], "qk_rope_head_dim": model["qk_rope_head_dim"]}
    quant = {}
    if model.get("weight_dtype") in QUANT_METHODS:
        quant["quant_method"] = QUANT_METHODS[model["weight_dtype"]]
    weight_width = {"fp8": 1, "fp4": 0.5}.get(model.get("weight_dtype"), 2)
    kv_width = DTYPE_BYTES[c.spec.geometry[ROLE]["kv_dtype"]]
    if kv_width != weight_width:
        quant["kv_cache_scheme"] = {"num_bits": 8 * kv_width}
    if quant:
        config["quantization_config"] = quant
    return config


def _memory_gb(blocks: int, tp: int, config: dict, block_size: int) -> float:
    """The `memory_gb` whose `total_gpu_blocks` is `blocks`: half a block above the exact memory they need."""
    block_bytes = block_size * kv_bytes_per_token(config)
    memory = float(Fraction(blocks * block_bytes + model_bytes(config) + block_bytes // 2, tp * GIB))
    assert total_gpu_blocks(memory, tp, model_bytes(config), block_size, kv_bytes_per_token(config)) == blocks
    return memory


def _context(c: Carry, blocks: int, block_size: int) -> int:
    """`max_position_embeddings`: the context length, at most what G1 holds (opal's GPU check needs one
    full-length request to fit)."""
    written = c.take("/engine/context_length")
    context = c.spec.model.get("max_context", 2 ** 31 - 1) if written in (None, "max") else written
    if context > blocks * block_size:
        c.drop("/engine/context_length", f"opal needs one `max_position_embeddings`-long request to fit G1; "
               f"written as {blocks * block_size} ({blocks} blocks of {block_size})", always=True)
        return blocks * block_size
    if written not in (None, "max"):
        c.drop("/engine/context_length", "written as `max_position_embeddings`, which sizes opal's GPU check "
               "only: opal rejects no request for its length")
    return context


def _tier(bandwidth: float, latency_ms: float, blocks: int, block_bytes: int) -> dict:
    return {"bandwidth_GBps": bandwidth, "latency_nsec": latency_ms * 1e6, "concurrency": 1000000,
            "capacity_GB": blocks * block_bytes / GIB, "eviction_policy": "lru"}


def _kvc(c: Carry, block_size: int, chunk_bytes: int) -> dict:
    kv = lambda *parts: c.take(role_pointer(ROLE, "kv_cache", *parts))  # noqa: E731
    tiers, out = [], {"chunk_size": block_size, "save_unfull_chunk": False}
    host = kv("host_offload")
    if host:
        if host["d2h_bandwidth_gbps"] != host["h2d_bandwidth_gbps"]:
            c.drop(role_pointer(ROLE, "kv_cache", "host_offload", "d2h_bandwidth_gbps"),
                   "an opal tier has one bandwidth; `h2d_bandwidth_gbps` is written", always=True)
        out["CPUMemory"] = _tier(host["h2d_bandwidth_gbps"], host["latency_to_first_byte_ms"],
                                 host["num_host_blocks"], chunk_bytes)
        tiers.append("CPUMemory")
    g3 = kv("g3_offload")
    if g3:
        if g3["write_bandwidth_gbps"] != g3["read_bandwidth_gbps"]:
            c.drop(role_pointer(ROLE, "kv_cache", "g3_offload", "write_bandwidth_gbps"),
                   "an opal tier has one bandwidth; `read_bandwidth_gbps` is written", always=True)
        name = "DistributedFS" if g3["scope"] == "cluster_shared" else "LocalNVMe"
        for link in ("shared_read_bandwidth_gbps", "shared_write_bandwidth_gbps"):
            if g3.get(link, g3["read_bandwidth_gbps"]) != g3["read_bandwidth_gbps"]:
                c.drop(role_pointer(ROLE, "kv_cache", "g3_offload", link), "opal's DistributedFS is one device "
                       "with one bandwidth: the per-worker `read_bandwidth_gbps` is written", always=True)
        out[name] = _tier(g3["read_bandwidth_gbps"], g3["latency_to_first_byte_ms"], g3["num_g3_blocks"], chunk_bytes)
        tiers.append(name)
    return {"kvc_tiers": tiers, **out}


def _check_expressible(c: Carry) -> None:
    if c.take("/engine/mode") != "aggregated":
        raise Refusal("opal has aggregated workers only; a disaggregated (P/D) config has no opal form")
    if c.take("/engine/backend") != "vllm":
        raise Refusal(f"opal's workers are vLLM's; a {c.spec.get('/engine/backend')} config has no opal form")
    c.drop_each(NO_FIELD, under=role_pointer(ROLE))
    for name in ONE_RANK:
        if c.take(role_pointer(ROLE, "parallelism", name)) != 1:
            c.drop(role_pointer(ROLE, "parallelism", name), "an opal worker is one TP group", always=True)
    timing = c.take(role_pointer(ROLE, "timing"))
    if timing["type"] != "default":
        c.drop(role_pointer(ROLE, "timing"), "opal's timing is its roofline of `worker.hw`", always=True)
    for pointer, why in (("/engine/backend_version", "opal has no engine versions"),
                         ("/engine/nextn", "opal has no speculative decoding"),
                         ("/engine/speculation", "opal has no speculative decoding"),
                         (role_pointer(ROLE, "kv_cache", "bytes_per_token"),
                          "opal derives KV bytes from the model config")):
        c.drop(pointer, why)
    if c.take("/engine/kv_eviction_policy") != "lru":
        c.drop("/engine/kv_eviction_policy", "opal's APC evicts LRU", always=True)
    placement = c.take("/engine/placement")
    if placement != "round_robin":
        c.drop("/engine/placement", f"opal's routers do not name KVCR peers; `{placement}` is written as "
               "RoundRobin", always=True)


def opal_config(result, c: Carry, trace_file: str, chunk: int) -> tuple[dict, dict]:
    """(the opal config, the model's Hugging Face config); `_check_expressible` has run."""
    kv = lambda *parts: c.take(role_pointer(ROLE, "kv_cache", *parts))  # noqa: E731
    par = lambda name: c.take(role_pointer(ROLE, "parallelism", name))  # noqa: E731
    sched = lambda name: c.take(role_pointer(ROLE, "scheduler", name))  # noqa: E731
    blocks, block_size = c.spec.geometry[ROLE]["g1_blocks"], kv("block_size")
    kv("capacity")
    hf = _hf_config(c, _context(c, blocks, block_size))
    hardware = c.spec.hardware.get(ROLE) or resolve_hardware(c.take("/engine/hardware"))[0]
    c.take("/engine/hardware")
    c.take("/engine/model")
    c.take("/engine/kvcache_quant_mode")
    hw = {"gpu": hardware["name"], "memory_gb": _memory_gb(blocks, par("tensor"), hf, block_size),
          "tflops": peak_flops(hardware, c.spec.model.get("weight_dtype", "bfloat16")) / 1e12,
          "mem_bw_TBps": hardware["memory_bandwidth_gbps"] / 1000, "tp": par("tensor")}
    vllm = {"max_num_seqs": sched("max_sequences"), "max_num_batched_tokens": sched("max_batched_tokens"),
            "chunked_prefill": c.take("/engine/enable_chunked_prefill"), "block_size": block_size,
            "enable_gpu_apc": kv("prefix_caching"), "apc_eviction_policy": "lru", "apc_lru_ttl": 0,
            "hbm_eviction_threshold": 1.0}
    c.take(role_pointer(ROLE, "scheduler"))  # (the interval knobs are SGLang's and vLLM's defaults in opal too)
    stop = c.take("/traffic/stop/max_virtual_time_seconds")
    c.take("/traffic")
    config = {
        "description": f"compiled by kvreplay from {Path(result.source).name}",
        "simulation": {"simulation_time": -1.0 if stop is None else float(stop), "num_workers": par("replicas")},
        "model": {"model_params": {"name": _model_folder(c), "config_dir": "./model-configs/"}},
        "router": {"router_params": {"policy": "RoundRobin", "enable_scaling": False}},
        "workload": {"stages": [{"type": "trace", "workload_params": {
            "total_requests": -1, "chunk_size": chunk, "multiplier_to_sec": 0.001, "trace_file": trace_file}}]},
        "worker": {"hw": hw, "vllm_params": vllm, "inference_params": {"model": "roofline"}},
        "kvc": _kvc(c, block_size, block_size * kv_bytes_per_token(hf)),
    }
    return config, hf


def _model_folder(c: Carry) -> str:
    return c.spec.model["name"].replace("/", "--")


def emit(result, c: Carry, output) -> dict:
    if output is None:
        raise Refusal("--to opal writes a config and the files it names: give -o CONFIG.json")
    block_size = c.spec.get(role_pointer(ROLE, "kv_cache", "block_size"))
    _check_expressible(c)  # (before the replay: a config opal cannot express is refused at once)
    trace, chunk = mooncake_rows.rows(result, block_size, c)
    trace_file = f"traces/{output.stem}.jsonl"
    config, hf = opal_config(result, c, trace_file, chunk)
    dump = lambda data: orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"  # noqa: E731
    return {output: dump(config), output.parent / trace_file: mooncake_rows.jsonl(trace),
            output.parent / "model-configs" / _model_folder(c) / "config.json": dump(hf)}


