"""Rules of the state cache (hybrid-KV models) and `prefix_match_unit`."""
from __future__ import annotations

from ..spec import Spec, role_pointer
from .rule import Rule, architecture, backend, disaggregated, has_kv, kv, model_family, par, role_check, speculation, native_mtp

SECTION = "kv-cache-tiers.md: State cache"
FIELDS = "kv-cache-tiers.md: KV cache fields"
BLAME = ("kv_cache", "state_cache")
INFERRED_FAMILIES = ("kimi_k3", "deepseek_v4")


def _state(predicate):
    return lambda spec, role: has_kv(spec, role, "state_cache") and predicate(spec, role)


def _inferred(spec: Spec, role: str) -> bool:
    return not has_kv(spec, role, "state_cache", "bytes_per_request")


def _explicit_without_geometry(spec: Spec, role: str) -> bool:
    return (not _inferred(spec, role)
            and (not spec.user_set(role_pointer(role, "kv_cache", "block_size"))
                 or kv(spec, role, "bytes_per_token") == "auto"))


def _dtype_for_other_family(field: str, family: str):
    return _state(lambda s, r: kv(s, r, "state_cache", field, default="auto") != "auto"
                  and model_family(s) != family)


def _mxfp4_off_blackwell(spec: Spec, role: str) -> bool:
    return (kv(spec, role, "state_cache", "indexer_cache_dtype") == "mxfp4"
            and architecture(spec, role) != "blackwell")


def _pmu(predicate):
    return lambda spec, role: has_kv(spec, role, "prefix_match_unit") and predicate(spec, role)


def _pmu_not_divisor(spec: Spec, role: str) -> bool:
    return kv(spec, role, "block_size") % kv(spec, role, "prefix_match_unit") != 0


def _pd_one_sided(spec: Spec):
    if disaggregated(spec):
        having = [r for r in ("prefill", "decode") if r in spec.roles() and has_kv(spec, r, "state_cache")]
        if len(having) == 1:
            yield role_pointer(having[0], *BLAME)


def _capacity_too_small(spec: Spec, role: str) -> bool:
    geometry = spec.geometry.get(role, {})
    blocks, state = geometry.get("g1_blocks"), geometry.get("state_blocks_per_request")
    return blocks is not None and state is not None and blocks >= 1 and blocks < state + 1


RULES = (
    Rule("STATE-BACKEND", SECTION, "the state cache is modelled for vLLM only",
         "use `backend: vllm` or remove `state_cache`",
         role_check(_state(lambda s, r: backend(s) != "vllm"), *BLAME),
         related=(("`backend: {value}` is chosen here", "/engine/backend"),)),
    Rule("STATE-FIXED-CAPACITY", SECTION, "the state cache needs `capacity.type: fixed`",
         "set `capacity: {type: fixed, blocks: ...}` (or `bytes`)",
         role_check(_state(lambda s, r: kv(s, r, "capacity", "type") != "fixed"), "kv_cache", "capacity")),
    Rule("STATE-OFFLOAD", SECTION, "the state cache is rejected with G2/G3 offload",
         "remove `host_offload` (and `g3_offload`) or `state_cache`",
         role_check(_state(lambda s, r: has_kv(s, r, "host_offload") or has_kv(s, r, "g3_offload")),
                    "kv_cache", "host_offload")),
    Rule("STATE-BYTES-GEOMETRY", SECTION, "an explicit `state_cache.bytes_per_request` needs an explicit "
         "`block_size` and a numeric `bytes_per_token`", "set both, or use `state_cache: {}` to infer them",
         role_check(_state(_explicit_without_geometry), *BLAME, "bytes_per_request")),
    Rule("STATE-INFER-MODEL", SECTION, "`state_cache: {}` infers geometry only for Kimi K3 and DeepSeek V4",
         "give `state_cache.bytes_per_request`, `block_size` and `bytes_per_token` for this model",
         role_check(_state(lambda s, r: _inferred(s, r) and model_family(s) not in INFERRED_FAMILIES), *BLAME)),
    Rule("STATE-INFER-PIPELINE", SECTION, "inferred state geometry needs `parallelism.pipeline: 1`",
         "set `pipeline: 1` or give the geometry explicitly",
         role_check(_state(lambda s, r: _inferred(s, r) and par(s, r, "pipeline") > 1), "parallelism", "pipeline")),
    Rule("STATE-DEEPSEEK-V4-GEOMETRY", SECTION, "DeepSeek V4 state geometry follows vLLM's allocation: leave "
         "`block_size` and `bytes_per_token` unset", "remove `block_size` and `bytes_per_token`",
         role_check(_state(lambda s, r: _inferred(s, r) and model_family(s) == "deepseek_v4"
                           and (s.user_set(role_pointer(r, "kv_cache", "block_size"))
                                or s.user_set(role_pointer(r, "kv_cache", "bytes_per_token")))),
                    "kv_cache", "block_size")),
    Rule("STATE-KIMI-BLOCK-MULTIPLE", SECTION, "Kimi K3 inferred geometry needs a `block_size` that is a "
         "multiple of 16", "use 64, 128, 256, ...",
         role_check(_state(lambda s, r: _inferred(s, r) and model_family(s) == "kimi_k3"
                           and kv(s, r, "block_size") % 16 != 0), "kv_cache", "block_size")),
    Rule("STATE-MAMBA-DTYPE-MODEL", SECTION, "`mamba_cache_dtype` applies to Kimi K3 only",
         "remove `mamba_cache_dtype`",
         role_check(_dtype_for_other_family("mamba_cache_dtype", "kimi_k3"), *BLAME, "mamba_cache_dtype")),
    Rule("STATE-INDEXER-DTYPE-MODEL", SECTION, "`indexer_cache_dtype` applies to DeepSeek V4 only",
         "remove `indexer_cache_dtype`",
         role_check(_dtype_for_other_family("indexer_cache_dtype", "deepseek_v4"), *BLAME, "indexer_cache_dtype")),
    Rule("STATE-INDEXER-MXFP4-HARDWARE", SECTION, "vLLM supports an `mxfp4` indexer cache only on Blackwell "
         "datacenter GPUs", "use `indexer_cache_dtype: fp8`, or `b200_sxm` / `gb200` hardware (inline hardware: "
         "`architecture: blackwell`)",
         role_check(_state(_mxfp4_off_blackwell), *BLAME, "indexer_cache_dtype")),
    Rule("STATE-PD-BOTH-ROLES", SECTION, "in disaggregated mode `state_cache` must be set on both `prefill` and "
         "`decode`", "add `state_cache` to the other role", _pd_one_sided),
    Rule("STATE-SPECULATION-SUB-BLOCK", SECTION, "speculative decoding needs `prefix_match_unit` equal to "
         "`block_size`", "remove `prefix_match_unit` or speculative decoding",
         role_check(_pmu(lambda s, r: (speculation(s) or native_mtp(s))
                         and kv(s, r, "prefix_match_unit") != kv(s, r, "block_size")),
                    "kv_cache", "prefix_match_unit"), stage="geometry"),
    Rule("PREFIX-MATCH-UNIT-STATE", FIELDS, "`prefix_match_unit` applies with `state_cache` only",
         "remove `prefix_match_unit` or add `state_cache`",
         role_check(_pmu(lambda s, r: not has_kv(s, r, "state_cache")), "kv_cache", "prefix_match_unit")),
    Rule("PREFIX-MATCH-UNIT-DIVISOR", FIELDS, "`prefix_match_unit` must divide the (resolved) `block_size`",
         "pick a divisor of block_size, e.g. 128 for 1536-token blocks",
         role_check(_pmu(lambda s, r: has_kv(s, r, "state_cache") and _pmu_not_divisor(s, r)),
                    "kv_cache", "prefix_match_unit"), stage="geometry"),
    Rule("STATE-CAPACITY-FIT", SECTION, "G1 must hold at least one token block plus one request state",
         "raise `capacity.blocks` / `capacity.bytes`",
         role_check(_state(_capacity_too_small), "kv_cache", "capacity"), stage="geometry"),
)
