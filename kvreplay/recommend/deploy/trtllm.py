"""`trtllm-serve` arguments and its `kv_cache_config` YAML for one role of a plan.

TensorRT-LLM takes the KV cache settings from the extra LLM API options file: `tokens_per_block`,
`free_gpu_memory_fraction`, `max_tokens` (a token capacity, so a fixed block count needs the user's
block size), `enable_block_reuse` (prefix caching) and `host_cache_size` (bytes of host offload).
With attention DP its `--tp_size` counts every rank and `enable_attention_dp` splits them.
"""
from __future__ import annotations

from .fields import RoleView
from .launch import Launch, yaml_text


def kv_cache_config(view: RoleView) -> dict:
    kv = view.kv
    config = {"enable_block_reuse": bool(kv.get("prefix_caching", True))}
    if view.explicit_block_size is not None:
        config["tokens_per_block"] = view.explicit_block_size
    if view.fixed_blocks is not None:
        config["max_tokens"] = view.tokens(view.fixed_blocks, "capacity.blocks", "trtllm")
    elif view.memory_fraction is not None:
        config["free_gpu_memory_fraction"] = view.memory_fraction
    if view.host_offload:
        config["host_cache_size"] = view.host_bytes("trtllm")
    if view.kv_dtype in ("fp8", "int8"):
        config["dtype"] = "fp8"
    return config


def options(view: RoleView) -> dict:
    """The whole extra-options document of the role."""
    doc = {"kv_cache_config": kv_cache_config(view)}
    if view.parallelism.get("attention_data", 1) > 1:
        doc["enable_attention_dp"] = True
    if view.disaggregated:
        doc["cache_transceiver_config"] = {"backend": "DEFAULT"}
    return doc


def launch(view: RoleView) -> Launch:
    p, s = view.parallelism, view.scheduler
    name = f"{view.role}-extra-llm-api-options.yaml"
    argv = ["trtllm-serve", view.model, "--tp_size", str(p.get("tensor", 1) * p.get("attention_data", 1)),
            "--pp_size", str(p.get("pipeline", 1))]
    if p.get("moe_expert", 1) > 1:
        argv += ["--ep_size", str(p["moe_expert"])]
    if "max_sequences" in s:
        argv += ["--max_batch_size", str(s["max_sequences"])]
    if "max_batched_tokens" in s:
        argv += ["--max_num_tokens", str(s["max_batched_tokens"])]
    if view.context_length is not None:
        argv += ["--max_seq_len", str(view.context_length)]
    argv += ["--extra_llm_api_options", name]
    return Launch(view.role, argv, {name: yaml_text(options(view))}, p.get("replicas", 1))
