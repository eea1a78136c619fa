"""Rules of the GPU cache (G1): block size and capacity fields."""
from __future__ import annotations

from ..catalog import backends
from ..spec import Spec, role_pointer
from .rule import Rule, backend, has_kv, kv, role_check

SECTION = "kv-cache-tiers.md: KV cache fields"
# Blocks (< 2^40) times a state model's ~21 MB blocks pass both field limits and still leave 64 bits
# behind; 4 EiB is far past any GPU yet leaves room for the suite's "unbounded" pools (10^8 big blocks)
MAX_G1_BYTES = 2**62


def _capacity_type(spec: Spec, role: str) -> str:
    return kv(spec, role, "capacity", "type", default="default")


def _user(spec: Spec, role: str, *parts: str) -> bool:
    return spec.user_set(role_pointer(role, "kv_cache", *parts))


def _bytes_without_geometry(spec: Spec, role: str) -> bool:
    if not has_kv(spec, role, "capacity", "bytes") or has_kv(spec, role, "state_cache"):
        return False  # `state_cache` infers (or, with bytes_per_request, demands) the geometry itself
    return not _user(spec, role, "block_size") or kv(spec, role, "bytes_per_token") == "auto"


def _g1_capacity_empty(spec: Spec, role: str) -> bool:
    blocks = spec.geometry.get(role, {}).get("g1_blocks")
    return blocks is not None and blocks < 1


def _g1_too_large(spec: Spec, role: str) -> bool:
    return spec.geometry.get(role, {}).get("g1_bytes", 0) > MAX_G1_BYTES


RULES = (
    Rule("G1-BLOCK-SIZE-MIN", SECTION,
         "vLLM and TensorRT-LLM need at least 2 tokens per block",
         "set `block_size` to 2 or more (vLLM default 64, TensorRT-LLM 32)",
         role_check(lambda s, r: kv(s, r, "block_size", default=2) < backends()[backend(s)]["min_block_size"],
                    "kv_cache", "block_size")),
    Rule("G1-MEMORY-FRACTION-SCOPE", SECTION,
         "`memory_fraction` applies to `capacity.type: default` only",
         "remove `memory_fraction`, or size G1 from memory with `type: default`",
         role_check(lambda s, r: _capacity_type(s, r) != "default" and _user(s, r, "capacity", "memory_fraction"),
                    "kv_cache", "capacity", "memory_fraction")),
    Rule("G1-CUDA-GRAPH-SCOPE", SECTION,
         "a non-zero `cuda_graph_reserved_bytes` applies to `capacity.type: default` only",
         "remove `cuda_graph_reserved_bytes`, or use `type: default`",
         role_check(lambda s, r: _capacity_type(s, r) != "default"
                    and kv(s, r, "capacity", "cuda_graph_reserved_bytes", default=0) != 0,
                    "kv_cache", "capacity", "cuda_graph_reserved_bytes")),
    Rule("G1-BLOCKS-SCOPE", SECTION,
         "`capacity.blocks` and `capacity.bytes` apply to `capacity.type: fixed` only",
         "set `capacity.type: fixed`, or remove the explicit size",
         role_check(lambda s, r: _capacity_type(s, r) == "default"
                    and (has_kv(s, r, "capacity", "blocks") or has_kv(s, r, "capacity", "bytes")),
                    "kv_cache", "capacity", "type")),
    Rule("G1-FIXED-SIZE", SECTION,
         "`capacity.type: fixed` needs exactly one of `blocks` and `bytes`",
         "give `blocks` (G1 blocks per attention-DP rank) or `bytes`, not both",
         role_check(lambda s, r: _capacity_type(s, r) == "fixed"
                    and has_kv(s, r, "capacity", "blocks") == has_kv(s, r, "capacity", "bytes"),
                    "kv_cache", "capacity")),
    Rule("G1-BYTES-GEOMETRY", SECTION,
         "`capacity.bytes` needs an explicit `block_size` and a numeric `bytes_per_token` "
         "(unless `state_cache: {}` infers them)",
         "set `block_size` and `bytes_per_token`, or give `capacity.blocks` instead",
         role_check(_bytes_without_geometry, "kv_cache", "capacity", "bytes")),
    Rule("G1-CAPACITY-EMPTY", "kv-cache-tiers.md: GPU cache (G1)",
         "G1 has no room for a single block on this role (the weights or the byte budget leave nothing for KV)",
         "raise `memory_fraction` or `capacity.bytes`, use more tensor parallelism, or bigger GPUs",
         role_check(_g1_capacity_empty, "kv_cache", "capacity"), stage="geometry"),
    Rule("G1-POOL-BYTES", SECTION,
         f"G1 blocks times bytes per block are more than {MAX_G1_BYTES} bytes (2^62, 4 EiB) per rank",
         "give fewer `capacity.blocks`, or size G1 by `capacity.bytes`",
         role_check(_g1_too_large, "kv_cache", "capacity", "blocks"), stage="geometry"),
)
