"""KV precision and per-token KV bytes on one tensor-parallel shard.

GQA/MHA models split KV heads across TP ranks but never below one head per
rank (a rank holds ``ceil(kv_heads / tp)`` heads, replicating when there are
fewer heads than ranks).  MLA models keep one latent (``kv_lora_rank +
qk_rope_head_dim``) per layer that every rank replicates, so TP does not
shrink it.  Only layers that hold per-token KV count (`kv_layers`: Kimi K3's
24 MLA layers of 93).  Pipeline parallelism does not divide the rate.
"""
from __future__ import annotations

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1, "float32": 4}


def kv_precision(model: dict, engine_value: str | None, role_value: str | None) -> tuple[str, str]:
    """(dtype, provenance). A role's timing value wins over the engine's; `auto` follows the checkpoint."""
    for value, where in ((role_value, "timing.kvcache_quant_mode"), (engine_value, "engine.kvcache_quant_mode")):
        if value not in (None, "auto"):
            return value, f"user ({where})"
    if model.get("kv_dtype"):
        return model["kv_dtype"], "checkpoint"
    if model.get("weight_dtype") == "fp8":
        return "fp8", "policy: FP8 weights give FP8 KV"
    return "bfloat16", "policy: model dtype"


def kv_heads_per_rank(model: dict, tensor: int) -> int:
    return -(-model["num_kv_heads"] // tensor)


def native_bytes_per_token(model: dict, dtype: str, tensor: int) -> int:
    if model.get("family") == "deepseek_v4":
        from .deepseek_v4 import deepseek_v4_state  # its KV rate is one pool row per 256 tokens

        return deepseek_v4_state(model)["bytes_per_token"]
    layers = model.get("kv_layers", model["num_layers"])
    width = DTYPE_BYTES[dtype]
    if model.get("attention") == "mla":
        return layers * (model["kv_lora_rank"] + model["qk_rope_head_dim"]) * width
    return layers * kv_heads_per_rank(model, tensor) * model["head_dim"] * 2 * width


def describe_rate(model: dict, dtype: str, tensor: int) -> str:
    if model.get("family") == "deepseek_v4":
        return "DeepSeek V4 pool row (fp8_ds_mla, compressed KV and indexer) per 256 tokens"
    layers = model.get("kv_layers", model["num_layers"])
    if model.get("attention") == "mla":
        return (f"{layers} layers x ({model['kv_lora_rank']} + {model['qk_rope_head_dim']}) MLA latent x "
                f"{DTYPE_BYTES[dtype]} B ({dtype}), replicated on every TP rank")
    return (f"{layers} layers x {kv_heads_per_rank(model, tensor)} KV heads/rank (TP{tensor}) x "
            f"{model['head_dim']} x 2 (K,V) x {DTYPE_BYTES[dtype]} B ({dtype})")
