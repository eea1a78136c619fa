"""`vllm serve` arguments for one role of a plan.

vLLM takes a block count directly (`--num-gpu-blocks-override`), so a fixed capacity needs no block size.
Host offload (G2) follows vLLM's native CPU offload connector the profile names; P/D uses the NIXL
connector on both roles, combined with the offload connector through vLLM's MultiConnector.
"""
from __future__ import annotations

import orjson

from .fields import RoleView
from .launch import Launch

# host_offload.connector -> vLLM's connector class (compiler/rules/host_offload.py lists the profiles)
CONNECTORS = {"offloading_v0_24": "OffloadingConnector", "offloading_v0_32": "OffloadingConnector",
              "simple_cpu_v0_32": "SimpleCPUOffloadConnector"}


def _kv_transfer(view: RoleView) -> dict | None:
    """vLLM's `--kv-transfer-config`: the P/D connector, the offload connector, or both."""
    connectors = []
    if view.disaggregated:
        connectors.append({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    host = view.host_offload
    if host:
        connector = CONNECTORS[host.get("connector", "offloading_v0_24")]
        connectors.append({"kv_connector": connector, "kv_role": "kv_both",
                           "kv_connector_extra_config": {"num_cpu_blocks": host["num_host_blocks"]}})
    if not connectors:
        return None
    if len(connectors) == 1:
        return connectors[0]
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": connectors}}


def launch(view: RoleView) -> Launch:
    p, s, kv = view.parallelism, view.scheduler, view.kv
    argv = ["vllm", "serve", view.model, "--tensor-parallel-size", str(p.get("tensor", 1))]
    if p.get("pipeline", 1) > 1:
        argv += ["--pipeline-parallel-size", str(p["pipeline"])]
    if p.get("attention_data", 1) > 1:
        argv += ["--data-parallel-size", str(p["attention_data"])]
    if p.get("moe_expert", 1) > 1:
        argv += ["--enable-expert-parallel"]
    if view.context_length is not None:
        argv += ["--max-model-len", str(view.context_length)]
    if "max_batched_tokens" in s:
        argv += ["--max-num-batched-tokens", str(s["max_batched_tokens"])]
    if "max_sequences" in s:
        argv += ["--max-num-seqs", str(s["max_sequences"])]
    if view.explicit_block_size is not None:
        argv += ["--block-size", str(view.explicit_block_size)]
    if view.fixed_blocks is not None:
        argv += ["--num-gpu-blocks-override", str(view.fixed_blocks)]
    elif view.memory_fraction is not None:
        argv += ["--gpu-memory-utilization", f"{view.memory_fraction:g}"]
    argv += ["--enable-prefix-caching" if kv.get("prefix_caching", True) else "--no-enable-prefix-caching"]
    if view.kv_dtype in ("fp8", "int8"):
        argv += ["--kv-cache-dtype", "fp8"]  # (vLLM's only 8-bit KV cache type family)
    transfer = _kv_transfer(view)
    if transfer is not None:
        argv += ["--kv-transfer-config", orjson.dumps(transfer, option=orjson.OPT_SORT_KEYS).decode()]
    return Launch(view.role, argv, {}, p.get("replicas", 1))
