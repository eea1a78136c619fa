"""Lower a checked opal document (defaults applied, model read) to the canonical Spec's document.

    engine:  backend vllm, mode aggregated, the model inline (from config.json), the hardware inline (worker.hw),
             one aggregated role: replicas = num_workers, tensor = tp, block_size, prefix_caching = enable_gpu_apc,
             capacity fixed at opal's total_gpu_blocks, KV bytes per token, max_batched_tokens / max_sequences,
             roofline timing; enable_chunked_prefill = chunked_prefill
    traffic: {source: {type: opal-stages}, load: {type: stages}}   (the stages themselves are in `opal`)
    opal:    the opal document with every default (`opal.worker.vllm_params...`), `derived` (opal's model and
             pool numbers) and `config_json` (the config as loaded, for sim_config.json)

Every lowered value records where it came from, by its opal path (`user(opal: worker.hw.tp)`,
``default(...)``, ``inferred(...)``); `aliases` map lowered pointers back to the opal ones for positions.
"""
from __future__ import annotations

import json
import math

from pyrsistent import freeze

from ...diagnostics import pointer_to_dotted
from .formulas import total_gpu_blocks

ROLE = "/engine/workers/aggregated"
UNUSED = "; not used: total_gpu_blocks leaves gpu_memory_utilization out (opal ignores it too)"
NOTES = {"/worker/vllm_params/gpu_memory_utilization": UNUSED}


class Lowering:
    """Collects the lowered values with their provenance and source aliases."""

    def __init__(self, document: dict, origin: dict):
        self.document, self.source_origin = document, origin
        self.origin: dict[str, str] = {}
        self.aliases: dict[str, str] = {"/opal": "", "/engine": "/worker", "/traffic": "/workload",
                                        "/engine/model": "/model/model_params/name"}

    def opal(self, pointer: str):
        node = self.document
        for part in pointer.split("/")[1:]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def knob(self, lowered: str, pointer: str):
        """The opal value at `pointer`, recorded as the source of `lowered`."""
        why = self.source_origin.get(pointer)
        self.origin[lowered] = why if why else f"user(opal: {pointer_to_dotted(pointer)})"
        self.aliases[lowered] = pointer
        return self.opal(pointer)

    def inferred(self, lowered: str, why: str, alias: str | None = None) -> None:
        self.origin[lowered] = f"inferred({why})"
        if alias:
            self.aliases[lowered] = alias


def pool_formula(document: dict, model: dict, blocks: int) -> str:
    hw, vllm = document["worker"]["hw"], document["worker"]["vllm_params"]
    return (f"opal: floor((memory_gb {hw['memory_gb']:g} x tp {hw['tp']} x 2^30 - {model['params']} params x "
            f"{model['bytes_per_param']:g} B) / (block_size {vllm['block_size']} x {model['kv_bytes_per_token']} B)) "
            f"= {blocks}; gpu_memory_utilization does not enter it")


def derived(document: dict, model: dict) -> dict:
    hw, vllm = document["worker"]["hw"], document["worker"]["vllm_params"]
    blocks = total_gpu_blocks(hw["memory_gb"], hw["tp"], model["model_bytes"], vllm["block_size"],
                                       model["kv_bytes_per_token"])
    return {"model_config": model["config"], "params": model["params"], "bytes_per_param": model["bytes_per_param"],
            "kv_bytes_per_token": model["kv_bytes_per_token"], "model_bytes": model["model_bytes"],
            "max_position_embeddings": model["max_position_embeddings"], "total_gpu_blocks": blocks}


def rank_kv_bytes(record: dict, tp: int, total: int) -> int:
    """KV bytes per token on one TP rank: KV heads split over the ranks (never below one), an MLA latent replicated."""
    if record.get("attention") == "mla":
        return total
    heads = record["num_kv_heads"]
    return total * -(-heads // tp) // heads


def hardware(hw: dict) -> dict:
    rate = hw["tflops"]
    return {"name": hw["gpu"], "memory_bytes": max(1, math.floor(hw["memory_gb"] * 2 ** 30)),
            "memory_bandwidth_gbps": hw["mem_bw_TBps"] * 1000, "tflops": {k: rate for k in ("bf16", "fp16", "fp8", "fp4")}}


def lower_document(document: dict, origin: dict, model: dict, loaded: dict):
    """(lowered document, provenance, lowered -> opal pointer aliases)."""
    low = Lowering(document, origin)
    numbers = derived(document, model)
    role = {
        "parallelism": {"replicas": low.knob(ROLE + "/parallelism/replicas", "/simulation/num_workers"),
                        "tensor": low.knob(ROLE + "/parallelism/tensor", "/worker/hw/tp")},
        "scheduler": {"max_batched_tokens": low.knob(ROLE + "/scheduler/max_batched_tokens",
                                                     "/worker/vllm_params/max_num_batched_tokens"),
                      "max_sequences": low.knob(ROLE + "/scheduler/max_sequences", "/worker/vllm_params/max_num_seqs")},
        "kv_cache": {"block_size": low.knob(ROLE + "/kv_cache/block_size", "/worker/vllm_params/block_size"),
                     "prefix_caching": low.knob(ROLE + "/kv_cache/prefix_caching", "/worker/vllm_params/enable_gpu_apc"),
                     "bytes_per_token": rank_kv_bytes(model["catalog_record"], document["worker"]["hw"]["tp"],
                                                      model["kv_bytes_per_token"]),
                     "capacity": {"type": "fixed", "blocks": numbers["total_gpu_blocks"]}},
        "timing": {"type": "default"},
    }
    low.inferred(ROLE + "/kv_cache/bytes_per_token", f"{model['config']}: opal's KV bytes per token "
                 f"{model['kv_bytes_per_token']}, per TP rank")
    low.inferred(ROLE + "/kv_cache/capacity", pool_formula(document, model, numbers["total_gpu_blocks"]),
                 "/worker/hw/memory_gb")
    low.inferred(ROLE + "/timing", "opal: inference_params.model roofline, of worker.hw", "/worker/inference_params")
    engine = {"backend": "vllm", "mode": "aggregated", "model": model["catalog_record"],
              "hardware": hardware(document["worker"]["hw"]),
              "enable_chunked_prefill": low.knob("/engine/enable_chunked_prefill", "/worker/vllm_params/chunked_prefill"),
              "workers": {"aggregated": role}}
    low.inferred("/engine/backend", "opal: workers are vLLM-like")
    low.inferred("/engine/mode", "opal: one pool of aggregated workers")
    low.inferred("/engine/model", f"opal: {model['config']}")
    low.inferred("/engine/hardware", "opal: worker.hw (tflops -> peak FLOP/s, mem_bw_TBps x 1000 -> GB/s)", "/worker/hw")
    traffic = {"source": {"type": "opal-stages"}, "load": {"type": "stages"}}
    low.inferred("/traffic", "opal: workload.stages, one after another")
    opal_origin = {"/opal" + pointer: why for pointer, why in origin.items()}
    for pointer, note in NOTES.items():
        opal_origin["/opal" + pointer] = opal_origin.get("/opal" + pointer, "user") + note
    for key in numbers:
        opal_origin[f"/opal/derived/{key}"] = f"inferred(opal's formulas over {model['config']})"
    opal_origin["/opal/derived/total_gpu_blocks"] = "inferred(" + pool_formula(document, model,
                                                                                numbers["total_gpu_blocks"]) + ")"
    opal_origin["/opal/config_json"] = "inferred(the config as loaded, for sim_config.json)"
    opal = {**document, "derived": numbers, "config_json": json.dumps(loaded, indent=4)}
    doc = freeze({"engine": engine, "traffic": traffic, "opal": opal})
    return doc, {**low.origin, **opal_origin}, low.aliases
