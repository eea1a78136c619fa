"""SGLang's `python -m sglang.launch_server` arguments for one role of a plan.

SGLang sizes its KV pool in tokens (`--max-total-tokens`) and pages (`--page-size`), so a fixed block
count, or a host pool in blocks, is written only when the user's block size says what a block holds.
With attention DP SGLang's `--tp-size` counts every rank of the worker and `--dp-size` splits them.
"""
from __future__ import annotations

from .fields import RoleView
from .launch import Launch


def launch(view: RoleView) -> Launch:
    p, s, kv = view.parallelism, view.scheduler, view.kv
    dp = p.get("attention_data", 1)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", view.model,
            "--tp-size", str(p.get("tensor", 1) * dp)]
    if dp > 1:
        argv += ["--dp-size", str(dp), "--enable-dp-attention"]
    if p.get("pipeline", 1) > 1:
        argv += ["--pp-size", str(p["pipeline"])]
    if p.get("moe_expert", 1) > 1:
        argv += ["--ep-size", str(p["moe_expert"])]
    if view.context_length is not None:
        argv += ["--context-length", str(view.context_length)]
    if "max_batched_tokens" in s:
        argv += ["--chunked-prefill-size", str(s["max_batched_tokens"])]
    if "max_sequences" in s:
        argv += ["--max-running-requests", str(s["max_sequences"])]
    if view.explicit_block_size is not None:
        argv += ["--page-size", str(view.explicit_block_size)]
    if view.fixed_blocks is not None:
        argv += ["--max-total-tokens", str(view.tokens(view.fixed_blocks, "capacity.blocks", "sglang"))]
    elif view.memory_fraction is not None:
        argv += ["--mem-fraction-static", f"{view.memory_fraction:g}"]
    if not kv.get("prefix_caching", True):
        argv += ["--disable-radix-cache"]
    if view.kv_dtype in ("fp8", "int8"):
        argv += ["--kv-cache-dtype", "fp8_e4m3"]
    if view.host_offload:
        argv += ["--enable-hierarchical-cache", "--hicache-size", str(view.host_gigabytes("sglang"))]
    if view.disaggregated:
        argv += ["--disaggregation-mode", view.role, "--disaggregation-transfer-backend", "nixl"]
    return Launch(view.role, argv, {}, p.get("replicas", 1))
