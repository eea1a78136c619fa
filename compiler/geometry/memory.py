"""G1 byte budget for `capacity.type: default`, the way each backend applies its fraction.

Per GPU: C = memory, W = weights, A = activations for one `max_batched_tokens`
pass, O = runtime overhead, N = NCCL buffers, G = `cuda_graph_reserved_bytes`.

- vLLM (fraction of total):         KV = C*f - (W + A + O + N + G)
- TensorRT-LLM (fraction of free):  KV = (C - (W + A + O + N + G)) * f
- SGLang (after runtime init, activations not charged): KV = (C - O - N)*f - (W + G)

A = 2 * max_batched_tokens * (heads * head_dim) * coefficient[min(tp, 8)],
floored at 70 MiB (SGLang: x1.15 and floored at 90 MiB); the coefficient
depends on the backend and on whether the model is dense (llama-like) or MoE.
O = 3.5 GiB (SGLang x1.2); N by TP degree.  These constants follow
AISimulate's memory model (docs/reference-facts.md section 3).
"""
from __future__ import annotations

import math

GIB = 1024 ** 3
MIB = 1024 ** 2
RUNTIME_OVERHEAD = int(3.5 * GIB)
NCCL_BYTES = {1: 0, 2: 358_612_992, 4: 411_041_792, 8: 411_041_792}
ACTIVATION_COEFFICIENT = {
    "default": {"llama": {1: 11, 2: 6.5, 4: 5, 8: 5}, "moe": {1: 22, 2: 13, 4: 10, 8: 10},
                "default": {1: 10, 2: 6, 4: 5, 8: 5}},
    "sglang": {"llama": {1: 14, 2: 8.5, 4: 6.5, 8: 6.5}, "moe": {1: 28, 2: 17, 4: 13, 8: 13},
               "default": {1: 13, 2: 8, 4: 6.5, 8: 6.5}},
}
WEIGHT_BYTES = {"bfloat16": 2, "fp8": 1, "fp4": 0.5}


def _tp_key(tp: int) -> int:
    capped = min(tp, 8)
    return max(k for k in (1, 2, 4, 8) if k <= capped)


def dense_linear_params(model: dict) -> int:
    hidden, head_dim = model["hidden_size"], model["head_dim"]
    attention = hidden * model["num_attention_heads"] * head_dim * 2 + hidden * model["num_kv_heads"] * head_dim * 2
    return model["num_layers"] * (attention + 3 * hidden * model["intermediate_size"])


def embedding_params(model: dict) -> int:
    one = model.get("vocab_size", 0) * model.get("hidden_size", 0)
    return one if model.get("tie_word_embeddings") else 2 * one


def weights_per_gpu(model: dict, tensor: int, pipeline: int) -> int:
    wbytes = WEIGHT_BYTES[model.get("weight_dtype", "bfloat16")]
    embeddings = embedding_params(model)
    if model.get("num_experts") or "hidden_size" not in model or "intermediate_size" not in model:
        # MoE and inline models without a full architecture: spread the parameter count evenly
        return int((model["params"] - embeddings) * wbytes / tensor / pipeline + embeddings * 2 / tensor)
    return int(dense_linear_params(model) * wbytes / tensor / pipeline + embeddings * 2 / tensor)


def activations(model: dict, backend: str, tensor: int, max_batched_tokens: int) -> float:
    family = model.get("activation_family", "moe" if model.get("num_experts") else "llama")
    table = ACTIVATION_COEFFICIENT["sglang" if backend == "sglang" else "default"][family]
    width = model.get("num_attention_heads", 0) * model.get("head_dim", 0)
    value = 2 * max_batched_tokens * width * table[_tp_key(tensor)]
    if backend == "sglang":
        return max(value, 90 * MIB) * 1.15
    return max(value, 70 * MIB)


def g1_budget(model: dict, hardware: dict, backend: str, *, tensor: int, pipeline: int,
              max_batched_tokens: int, fraction: float, cuda_graph: int) -> dict:
    """Memory breakdown (bytes per GPU) and the KV budget; `kv_bytes` <= 0 means no room."""
    c = hardware["memory_bytes"]
    w = weights_per_gpu(model, tensor, pipeline)
    a = activations(model, backend, tensor, max_batched_tokens)
    o = RUNTIME_OVERHEAD * (1.2 if backend == "sglang" else 1.0)
    n = NCCL_BYTES[_tp_key(tensor)]
    if backend == "vllm":
        kv = c * fraction - (w + a + o + n + cuda_graph)
    elif backend == "trtllm":
        kv = (c - (w + a + o + n + cuda_graph)) * fraction
    else:
        kv = (c - o - n) * fraction - (w + cuda_graph)
    return {
        "total_gpu_bytes": c, "weights_bytes": w, "activations_bytes": math.floor(a),
        "runtime_overhead_bytes": math.floor(o), "comm_overhead_bytes": n, "cuda_graph_reserved_bytes": cuda_graph,
        "memory_fraction": fraction, "kv_bytes": math.floor(kv),
    }
