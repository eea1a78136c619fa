"""`--to predict`: an opal JSON config as a predict YAML (one aggregated vLLM role).

What opal knobs become: `num_workers`/`tp` the role's replicas/tensor; `vllm_params` the scheduler, block
size and prefix caching; G1 a fixed capacity of opal's `total_gpu_blocks`; the model and `worker.hw` the
catalog entries they match (else inline records); the `CPUMemory` tier G2 and a `LocalNVMe`
(`DistributedFS`) tier behind it G3, in blocks of the G1 block; one `trace` stage the same file (a hash id
per `chunk_size` tokens, `speedup` from `multiplier_to_sec`); any other workload the requests kvreplay's
replay of the stages made, written as a Mooncake trace next to the YAML.
"""
from __future__ import annotations

import io
import math
import os
from fractions import Fraction
from pathlib import Path

from ruamel.yaml import YAML

from ..compiler import catalog
from ..compiler.frontends.opal.formulas import GIB
from ..compiler.passes.opal_stages import stage_path
from . import mooncake_rows
from .carry import Carry, Refusal

NAME = "a predict config"
FRONTENDS = ("opal",)
IGNORE = ("/engine", "/traffic")  # (the lowering of the opal knobs; the knobs themselves are under /opal)
V = "/opal/worker/vllm_params/"
NO_FIELD = {
    V + "max_kvc_ready_requests": "kvreplay's vLLM scheduler has no cap on requests waiting for KVC reads",
    V + "lookahead_reqs": "kvreplay's vLLM scheduler looks at every waiting request",
    "/opal/worker/worker_params": "predict workers have no local queue or infra update periods",
    "/opal/simulation/save_simulation_data": "predict writes prediction.json, not opal's folder",
    "/opal/simulation/show_progress": "use `kvreplay predict --no-progress`",
    "/opal/router/router_params/periodic_infra_update_collection_time": "a predict router has no infra updates",
    "/opal/router/router_params/max_event_batch_size": "a predict router has no event batches",
}
UNLIMITED_SLOTS = 1000000  # what opal's own configs write for a tier without an I/O limit


def _model(c: Carry):
    """The catalog name when a catalog model has the opal model's folder name and shape, else the inline record."""
    inline = c.take("/engine/model")
    c.take("/opal/model")
    for name, record in catalog.models().items():
        same = all(record.get(k) == inline.get(k) for k in ("num_layers", "hidden_size", "num_attention_heads",
                                                              "num_kv_heads", "head_dim", "vocab_size"))
        if same and name.replace("/", "--").lower() == inline["name"].lower().replace("/", "--"):
            return name
    return inline


def _hardware(c: Carry, weight_dtype: str):
    from ..compiler.timing_inputs import peak_flops

    inline, hw = c.take("/engine/hardware"), c.take("/opal/worker/hw")
    record, _ = catalog.resolve_hardware(hw["gpu"])
    if record and record["memory_bandwidth_gbps"] == inline["memory_bandwidth_gbps"] \
            and peak_flops(record, weight_dtype) == hw["tflops"] * 1e12:
        return record["name"]  # (its memory does not matter: G1 is given in blocks)
    return inline


def _blocks(c: Carry, capacity_gb: float) -> int:
    block_bytes = c.take("/opal/worker/vllm_params/block_size") * c.take("/opal/derived/kv_bytes_per_token")
    return math.floor(Fraction(capacity_gb) * GIB / block_bytes)


def _tiers(c: Carry) -> dict:
    kvc = c.take("/opal/kvc")
    c.take("/opal/kvc/kvc_tiers")  # (each tier is reported by its section)
    names, out = kvc["kvc_tiers"], {}
    if not names:
        return out
    if kvc["chunk_size"] != c.take(V + "block_size"):
        c.drop("/opal/kvc/chunk_size", "predict's tiers are keyed by G1 blocks; they hold blocks of "
               f"{c.take(V + 'block_size')} tokens", always=True)
    if kvc["save_unfull_chunk"]:
        c.drop("/opal/kvc/save_unfull_chunk", "predict's tiers store full blocks only", always=True)
    kept = []
    for index, name in enumerate(names):
        tier = kvc[name]
        at = f"/opal/kvc/{name}"
        if (index == 0) != (name == "CPUMemory") or len(kept) == 2:
            c.drop(at, "predict's chain is G1 -> G2 (CPUMemory) -> one G3 (LocalNVMe or DistributedFS)", always=True)
            continue
        kept.append(name)
        if tier["concurrency"] < UNLIMITED_SLOTS:
            c.drop(at + "/concurrency", "predict's tier links have no I/O slots", always=True)
        if tier.get("eviction_policy", "none") != "lru":
            c.drop(at + "/eviction_policy", "predict's tiers evict LRU; opal's `none` keeps what a tier stored",
                   always=True)
        blocks, latency = _blocks(c, tier["capacity_GB"]), tier["latency_nsec"] / 1e6
        if name == "CPUMemory":
            out["host_offload"] = {"num_host_blocks": blocks, "d2h_bandwidth_gbps": tier["bandwidth_GBps"],
                                   "h2d_bandwidth_gbps": tier["bandwidth_GBps"], "latency_to_first_byte_ms": latency}
        else:
            shared = name == "DistributedFS"
            out["g3_offload"] = {"scope": "cluster_shared" if shared else "worker_local", "num_g3_blocks": blocks,
                                 "read_bandwidth_gbps": tier["bandwidth_GBps"],
                                 "write_bandwidth_gbps": tier["bandwidth_GBps"], "latency_to_first_byte_ms": latency}
            if shared:
                out["g3_offload"] |= {"shared_read_bandwidth_gbps": tier["bandwidth_GBps"],
                                      "shared_write_bandwidth_gbps": tier["bandwidth_GBps"]}
    return out


def _apc_and_router(c: Carry) -> None:
    for pointer, value, ok, why in (
            (V + "apc_lru_ttl", c.take(V + "apc_lru_ttl"), 0, "vLLM's prefix cache has no TTL"),
            (V + "hbm_eviction_threshold", c.take(V + "hbm_eviction_threshold"), 1.0,
             "vLLM evicts on demand, with no proactive eviction monitor"),
            ("/opal/router/router_params/policy", c.take("/opal/router/router_params/policy"), "RoundRobin",
             "predict places requests round robin"),
            ("/opal/router/router_params/enable_scaling", c.take("/opal/router/router_params/enable_scaling"), False,
             "predict scales workers on a schedule (`scaling`), not by queue length")):
        if value != ok:
            c.drop(pointer, why, always=True)
    for knob in ("apc_eviction_policy", "apc_eviction_check_interval_sec", "gpu_memory_utilization"):
        c.take(V + knob)  # (LRU is G1's order; the interval only times the monitor; opal ignores the last too)
    for knob in ("max_queue_threshold", "scale_latency", "max_workers"):
        c.take("/opal/router/router_params/" + knob)  # (inert without enable_scaling, dropped with it)
    c.take("/opal/worker/inference_params")  # (roofline: predict's default timing over the same hardware)
    c.take("/opal/simulation/seed")  # (it only draws rate-stage lengths, which the trace written holds)


def _traffic(result, c: Carry, output) -> tuple[dict, dict]:
    """(the traffic section, {path: bytes} of a trace to write beside the YAML)."""
    stages = c.take("/opal/workload/stages")
    simulation_time = c.take("/opal/simulation/simulation_time")
    stop = {} if simulation_time <= 0 else {"max_virtual_time_seconds": simulation_time}
    if len(stages) == 1 and stages[0]["type"] == "trace":
        params = stages[0]["workload_params"]
        found = stage_path(params["trace_file"], Path(result.source).resolve().parent)  # (where the compile read it)
        path = os.path.relpath(found.resolve(), output.resolve().parent)
        if params["total_requests"] != -1:
            stop["requests"] = params["total_requests"]
        source = {"type": "trace", "paths": [path], "format": "mooncake", "block_size": params["chunk_size"]}
        load = {"type": "trace_timestamps", "speedup": 1 / (1000 * params["multiplier_to_sec"])}
        return {"source": source, "load": load, **({"stop": stop} if stop else {})}, {}
    c.drop("/opal/workload/stages", "predict has one traffic source: the stages are written as one Mooncake trace "
           "of the requests kvreplay's replay of them made (closed-loop sessions at the times they got)", always=True)
    rows, chunk = mooncake_rows.rows(result, c.take(V + "block_size"))
    trace = output.with_suffix(".trace.jsonl")
    source = {"type": "trace", "paths": [trace.name], "format": "mooncake", "block_size": chunk}
    traffic = {"source": source, "load": {"type": "trace_timestamps", "speedup": 1.0}}
    return (traffic | ({"stop": stop} if stop else {})), {trace: mooncake_rows.jsonl(rows)}


def predict_document(result, c: Carry, output) -> tuple[dict, dict]:
    c.drop_each(NO_FIELD)
    model = _model(c)
    weight_dtype = c.spec.model.get("weight_dtype", "bfloat16")
    tiers = _tiers(c)
    apc = c.take(V + "enable_gpu_apc")
    if tiers and not apc:
        c.drop(V + "enable_gpu_apc", "predict's host offload needs G1 prefix caching: written as true", always=True)
    kv_cache = {"block_size": c.take(V + "block_size"), "prefix_caching": apc or bool(tiers),
                "capacity": {"type": "fixed", "blocks": c.take("/opal/derived/total_gpu_blocks")}, **tiers}
    c.take("/opal/worker/hw")  # (memory_gb only sized G1, given in blocks; gpu, tflops, mem_bw are the hardware)
    _apc_and_router(c)
    role = {"parallelism": {"replicas": c.take("/opal/simulation/num_workers"), "tensor": c.take("/opal/worker/hw/tp")},
            "scheduler": {"max_batched_tokens": c.take(V + "max_num_batched_tokens"),
                          "max_sequences": c.take(V + "max_num_seqs")},
            "kv_cache": kv_cache}
    engine = {"mode": "aggregated", "backend": "vllm", "model": model, "hardware": _hardware(c, weight_dtype)}
    context = c.take("/opal/derived/max_position_embeddings")
    if context is not None and (not isinstance(model, str) or context != catalog.models()[model].get("max_context")):
        engine["context_length"] = context  # (the catalog model's own context is predict's `max`)
    engine |= {"enable_chunked_prefill": c.take(V + "chunked_prefill"), "workers": {"aggregated": role}}
    traffic, files = _traffic(result, c, output)
    return {"engine": engine, "traffic": traffic}, files


def emit(result, c: Carry, output) -> dict:
    if output is None:
        raise Refusal("--to predict writes a YAML that names its trace by a relative path: give -o CONFIG.yaml")
    document, files = predict_document(result, c, output)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    text = io.StringIO()
    text.write(f"# compiled by kvreplay from {os.path.basename(result.source)}\n")
    description = c.take("/opal/description")
    if description:  # (a predict YAML has no description field: it travels as a comment)
        text.write("".join(f"# {line}\n" for line in description.splitlines()))
    yaml.dump(document, text)
    return {output: text.getvalue().encode(), **files}
