"""Rules of host offload (G2): support matrix, connector profiles, scopes, shared pools."""
from __future__ import annotations

from ..spec import Spec, role_pointer
from .rule import Rule, backend, disaggregated, has_kv, kv, native_mtp, par, recommend, role_check, speculation

SUPPORTED = "kv-cache-tiers.md: Host offload (G2) / Supported"
CONNECTORS = "kv-cache-tiers.md: Host offload (G2) / Connector profiles"
SCOPE = "kv-cache-tiers.md: Host offload (G2) / Scope"
BLAME = ("kv_cache", "host_offload")


def _g2(spec: Spec, role: str) -> bool:
    return has_kv(spec, role, "host_offload")


def _g2_and(predicate):
    return lambda spec, role: _g2(spec, role) and predicate(spec, role)


def _newer_connector(spec: Spec, role: str) -> bool:
    return kv(spec, role, "host_offload", "connector", default="offloading_v0_24") != "offloading_v0_24"


def _scope(spec: Spec, role: str) -> str:
    return kv(spec, role, "host_offload", "scope", default="dp_rank_local")


def _shared_roles(spec: Spec) -> list[str]:
    return [r for r in spec.roles() if _g2(spec, r) and _scope(spec, r) == "cluster_shared"]


POOL_KEYS = (
    ("parallel shape", lambda s, r: (par(s, r, "tensor"), par(s, r, "pipeline"))),
    ("timing model", lambda s, r: s.get(role_pointer(r, "timing", "type")) == "default"),
    ("KV precision", lambda s, r: s.geometry.get(r, {}).get("kv_dtype")),
    ("block geometry", lambda s, r: (kv(s, r, "block_size"), kv(s, r, "bytes_per_token"))),
    ("pool capacity", lambda s, r: kv(s, r, "host_offload", "num_host_blocks")),
    ("shared bandwidths", lambda s, r: (kv(s, r, "host_offload", "shared_d2h_bandwidth_gbps"),
                                        kv(s, r, "host_offload", "shared_h2d_bandwidth_gbps"))),
)


def _pool_mismatch(spec: Spec):
    roles = _shared_roles(spec)
    if len(roles) < 2:
        return
    first, *others = roles
    for role in others:
        if any(value(spec, first) != value(spec, role) for _, value in POOL_KEYS):
            yield role_pointer(role, *BLAME, "scope")


def _shared_knob_on_local(field: str):
    return lambda s, r: (_g2(s, r) and _scope(s, r) != "cluster_shared"
                         and s.has(role_pointer(r, *BLAME, field)))


def _shared_preset(spec: Spec):
    roles = _shared_roles(spec)
    if recommend(spec) and disaggregated(spec) and set(roles) >= {"prefill", "decode"}:
        for role in roles:
            if spec.get(role_pointer(role, "parallelism", "preset")) is not False:
                yield role_pointer(role, "parallelism")


RULES = (
    Rule("G2-BACKEND", SUPPORTED, "host offload (G2) follows vLLM's CPU offload and is rejected with SGLang and "
         "TensorRT-LLM", "use `backend: vllm` or remove `host_offload`",
         role_check(_g2_and(lambda s, r: backend(s) != "vllm"), *BLAME),
         related=(("`backend: {value}` is chosen here", "/engine/backend"),)),
    Rule("G2-MTP", SUPPORTED, "host offload (G2) is rejected with native MTP (`nextn` > 0)",
         "set `engine.nextn: 0` or remove `host_offload`",
         role_check(_g2_and(lambda s, r: native_mtp(s)), *BLAME),
         related=(("native MTP is set here (`nextn: {value}`)", "/engine/nextn"),)),
    Rule("G2-SPECULATION", SUPPORTED, "host offload (G2) is rejected with ngram speculation",
         "remove `engine.speculation` or `host_offload`",
         role_check(_g2_and(lambda s, r: speculation(s)), *BLAME),
         related=(("speculation is configured here", "/engine/speculation"),)),
    Rule("G2-PREFIX-CACHING", SUPPORTED, "host offload (G2) needs prefix caching",
         "set `prefix_caching: true` or remove `host_offload`",
         role_check(_g2_and(lambda s, r: kv(s, r, "prefix_caching") is False), *BLAME),
         related=(("prefix caching is turned off here", "{role}/kv_cache/prefix_caching"),)),
    Rule("G2-CONNECTOR-MODE", CONNECTORS, "the `offloading_v0_32` and `simple_cpu_v0_32` connectors need the "
         "aggregated worker", "use `connector: offloading_v0_24` for disaggregated workers",
         role_check(_g2_and(lambda s, r: _newer_connector(s, r) and disaggregated(s)), *BLAME, "connector"),
         related=(("`mode: {value}` is chosen here", "/engine/mode"),)),
    Rule("G2-CONNECTOR-SCOPE", CONNECTORS, "the `offloading_v0_32` and `simple_cpu_v0_32` connectors need "
         "`scope: dp_rank_local`", "use `scope: dp_rank_local` or `connector: offloading_v0_24`",
         role_check(_g2_and(lambda s, r: _newer_connector(s, r) and _scope(s, r) != "dp_rank_local"),
                    *BLAME, "connector"),
         related=(("`scope: {value}` is chosen here", "{role}/kv_cache/host_offload/scope"),)),
    Rule("G2-SHARED-D2H-SCOPE", SCOPE, "`shared_d2h_bandwidth_gbps` applies to `scope: cluster_shared` only",
         "remove it, or set `scope: cluster_shared`",
         role_check(_shared_knob_on_local("shared_d2h_bandwidth_gbps"), *BLAME, "shared_d2h_bandwidth_gbps"),
         related=(("`scope: {value}` is chosen here", "{role}/kv_cache/host_offload/scope"),)),
    Rule("G2-SHARED-H2D-SCOPE", SCOPE, "`shared_h2d_bandwidth_gbps` applies to `scope: cluster_shared` only",
         "remove it, or set `scope: cluster_shared`",
         role_check(_shared_knob_on_local("shared_h2d_bandwidth_gbps"), *BLAME, "shared_h2d_bandwidth_gbps"),
         related=(("`scope: {value}` is chosen here", "{role}/kv_cache/host_offload/scope"),)),
    Rule("G2-SHARED-POOL-MISMATCH", SCOPE, "all roles in one `cluster_shared` pool must share the model, backend, "
         "parallel shape, KV precision, block geometry, pool capacity and shared bandwidths",
         "make the roles' parallelism, block geometry, `num_host_blocks` and shared bandwidths equal, or give "
         "each role `scope: dp_rank_local`", _pool_mismatch, stage="geometry"),
    Rule("G2-SHARED-RECOMMEND-PRESET", SCOPE, "recommend with a `cluster_shared` pool on both P/D roles must pin "
         "each role's `tensor` and `pipeline`", "set `parallelism.preset: false` on both roles",
         _shared_preset),
)
