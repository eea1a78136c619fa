"""Geometry pass: infer every size the replay needs, per worker role.

Resolves the model and hardware records, the KV precision, `bytes_per_token:
auto`, state-cache geometry (`state_cache: {}` for Kimi K3 / DeepSeek V4, or
explicit `bytes_per_request`), the G1 capacity in blocks (fixed blocks, fixed
bytes, or the backend's memory accounting), and the G2/G3 block bytes.
Inferred knobs are written back with ``inferred(...)`` provenance; numbers
without a knob of their own go to ``spec.geometry[role]``.
"""
from __future__ import annotations

from pyrsistent import thaw

from ..geometry.deepseek_v4 import deepseek_v4_state
from ..geometry.kimi_k3 import kimi_k3_state
from ..geometry.kv_bytes import describe_rate, kv_precision, native_bytes_per_token
from ..geometry.memory import g1_budget
from ..spec import Spec, role_pointer


def _par(spec: Spec, role: str, name: str) -> int:
    return spec.get(role_pointer(role, "parallelism", name), 1)


def _kv(spec: Spec, role: str, *parts: str, default=None):
    return spec.get(role_pointer(role, "kv_cache", *parts), default)


def _draft_tokens(spec: Spec) -> int:
    return spec.get("/engine/speculation/num_speculative_tokens") or spec.get("/engine/nextn") or 0


def _state_geometry(spec: Spec, role: str, model: dict, tensor: int, bytes_per_token: int | None):
    """Inferred state-cache geometry for `state_cache: {}`, or None."""
    if not spec.has(role_pointer(role, "kv_cache", "state_cache")) or _kv(spec, role, "state_cache",
                                                                            "bytes_per_request"):
        return None
    family = model.get("family")
    if family == "kimi_k3":
        return kimi_k3_state(model, tensor=tensor, block_size=_kv(spec, role, "block_size"),
                             bytes_per_token=bytes_per_token,
                             mamba_cache_dtype=_kv(spec, role, "state_cache", "mamba_cache_dtype", default="auto"))
    if family == "deepseek_v4":
        return deepseek_v4_state(model, draft_tokens=_draft_tokens(spec),
                                 indexer_cache_dtype=_kv(spec, role, "state_cache", "indexer_cache_dtype",
                                                         default="auto"))
    return None


def _role(spec: Spec, role: str, model: dict, hardware: dict) -> Spec:
    tensor = _par(spec, role, "tensor")
    role_quant = spec.get(role_pointer(role, "timing", "kvcache_quant_mode"))
    dtype, dtype_source = kv_precision(model, spec.get("/engine/kvcache_quant_mode"), role_quant)
    if model.get("family") == "deepseek_v4":
        dtype, dtype_source = "fp8", "DeepSeek V4 stores fp8_ds_mla KV"
    geometry = {"kv_dtype": dtype, "kv_dtype_source": dtype_source, "hardware": hardware["name"],
                "gpus": _par(spec, role, "replicas") * _par(spec, role, "pipeline") * tensor
                * _par(spec, role, "attention_data") * _par(spec, role, "prefill_context"),
                "dp_ranks": _par(spec, role, "replicas") * _par(spec, role, "attention_data")}

    bpt_pointer = role_pointer(role, "kv_cache", "bytes_per_token")
    if spec.get(bpt_pointer) == "auto":
        spec = spec.infer(bpt_pointer, native_bytes_per_token(model, dtype, tensor),
                          describe_rate(model, dtype, tensor))
    state = _state_geometry(spec, role, model, tensor, spec.get(bpt_pointer)
                            if isinstance(spec.get(bpt_pointer), int) else None)
    if state is not None:
        spec = spec.infer(role_pointer(role, "kv_cache", "block_size"), state["block_size"], state["source"])
        spec = spec.infer(bpt_pointer, state["bytes_per_token"], state["source"])
        spec = spec.infer(role_pointer(role, "kv_cache", "state_cache", "bytes_per_request"),
                          state["bytes_per_request"], state["source"])
        geometry.update({k: v for k, v in state.items() if k in ("row_bytes", "state_rows", "groups",
                                                                  "raw_bytes_per_request", "block_multiplier")})
    block_size = _kv(spec, role, "block_size")
    bytes_per_token = spec.get(bpt_pointer)
    block_bytes = block_size * bytes_per_token
    geometry["block_bytes"] = block_bytes

    if spec.has(role_pointer(role, "kv_cache", "state_cache")):
        pmu_pointer = role_pointer(role, "kv_cache", "prefix_match_unit")
        spec = spec.infer(pmu_pointer, block_size, "block_size") if not spec.has(pmu_pointer) else spec
        state_bytes = _kv(spec, role, "state_cache", "bytes_per_request")
        geometry["state_blocks_per_request"] = -(-state_bytes // block_bytes)
        geometry["state_allocated_bytes_per_request"] = geometry["state_blocks_per_request"] * block_bytes

    capacity = _kv(spec, role, "capacity")
    if capacity["type"] == "fixed":
        blocks = capacity.get("blocks")
        if blocks is None:
            blocks = capacity["bytes"] // block_bytes
            spec = spec.infer(role_pointer(role, "kv_cache", "capacity", "blocks"), blocks,
                              f"capacity.bytes {capacity['bytes']} // {block_bytes}-byte blocks")
    else:
        budget = g1_budget(model, hardware, spec.get("/engine/backend"), tensor=tensor,
                           pipeline=_par(spec, role, "pipeline"),
                           max_batched_tokens=spec.get(role_pointer(role, "scheduler", "max_batched_tokens")),
                           fraction=capacity["memory_fraction"], cuda_graph=capacity["cuda_graph_reserved_bytes"])
        # tokens first, then blocks, as the engines size their pools
        blocks = max(budget["kv_bytes"], 0) // bytes_per_token // block_size
        geometry["memory"] = budget
        spec = spec.infer(role_pointer(role, "kv_cache", "capacity", "blocks"), blocks,
                          f"{spec.get('/engine/backend')} memory accounting: {budget['kv_bytes']} KV bytes per GPU")
    geometry["g1_blocks"] = blocks
    geometry["g1_bytes"] = blocks * block_bytes
    if spec.has(role_pointer(role, "kv_cache", "host_offload")):
        geometry["g2_block_bytes"] = block_bytes  # no TP multiplier: same per-shard unit as the bandwidths
    if spec.has(role_pointer(role, "kv_cache", "g3_offload")):
        geometry["g3_block_bytes"] = block_bytes
    return spec.with_geometry(role, geometry)


def _transfer_rate(spec: Spec, model: dict) -> Spec:
    """`kv_transfer.bytes_per_token: auto`: one token's KV on one TP rank of the source (prefill) role.  Each
    prefill GPU sends its own shard over its own link at once, so a request's transfer takes one shard's bytes over
    the bandwidth (AISimulate: 6.04 ms for 4,096 Qwen3-8B tokens from a TP2 prefill at 50 GB/s; facts §46)."""
    pointer = "/engine/kv_transfer/bytes_per_token"
    if spec.get(pointer) != "auto":
        return spec
    dtype = spec.geometry["prefill"]["kv_dtype"]
    tensor = spec.get(role_pointer("prefill", "parallelism", "tensor"), 1)
    rate = native_bytes_per_token(model, dtype, tensor)  # (an MLA latent: whole on every rank)
    return spec.infer(pointer, rate, f"prefill role KV per token on one of {tensor} TP shard(s), sent in "
                      f"parallel, {dtype}")


def run(spec: Spec) -> Spec:
    model = thaw(spec.model)
    for role in spec.roles():
        spec = _role(spec, role, model, thaw(spec.hardware[role]))
    if spec.get("/engine/mode") == "disaggregated" and "prefill" in spec.geometry:
        spec = _transfer_rate(spec, model)
    return spec
