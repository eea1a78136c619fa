"""Rules of KVCR peer fetch."""
from __future__ import annotations

from ..spec import Spec
from .rule import Rule, engine_check, has_kv, kv, par, role_check

SECTION = "kv-cache-tiers.md: KVCR peer fetch / Supported"
BLAME = ("kv_cache", "kvcr")


def _hints_unused(spec: Spec) -> bool:
    return spec.get("/engine/placement") == "kv_aware" and not any(has_kv(spec, r, "kvcr") for r in spec.roles())


def _kvcr(predicate):
    return lambda spec, role: has_kv(spec, role, "kvcr") and predicate(spec, role)


RULES = (
    Rule("KVCR-REQUIRES-HOST", SECTION, "KVCR pulls into the rank's private G2 and needs `host_offload`",
         "add `host_offload: {num_host_blocks: ...}` with the default `scope: dp_rank_local`",
         role_check(_kvcr(lambda s, r: not has_kv(s, r, "host_offload")), *BLAME)),
    Rule("KVCR-SHARED-HOST", SECTION, "KVCR needs a private G2 (`host_offload.scope: dp_rank_local`)",
         "set `host_offload.scope: dp_rank_local` or remove `kvcr`",
         role_check(_kvcr(lambda s, r: kv(s, r, "host_offload", "scope") == "cluster_shared"),
                    "kv_cache", "host_offload", "scope"),
         related=(("KVCR is configured here", "{role}/kv_cache/kvcr"),)),
    Rule("KVCR-CONNECTOR", SECTION, "KVCR needs `host_offload.connector: offloading_v0_24`",
         "use the default connector, or remove `kvcr`",
         role_check(_kvcr(lambda s, r: kv(s, r, "host_offload", "connector", default="offloading_v0_24")
                          != "offloading_v0_24"), "kv_cache", "host_offload", "connector"),
         related=(("KVCR is configured here", "{role}/kv_cache/kvcr"),)),
    Rule("KVCR-G3", SECTION, "KVCR cannot be combined with `g3_offload`",
         "keep either `kvcr` or `g3_offload`",
         role_check(_kvcr(lambda s, r: has_kv(s, r, "g3_offload")), *BLAME),
         related=(("G3 offload is configured here", "{role}/kv_cache/g3_offload"),)),
    Rule("KVCR-DECODE", SECTION, "KVCR is not supported on the decode role (it pulls between prefill ranks)",
         "remove `kvcr` from `workers.decode`",
         role_check(_kvcr(lambda s, r: True), *BLAME, roles=("decode",))),
    Rule("KVCR-PIPELINE", SECTION, "KVCR needs `parallelism.pipeline: 1`",
         "set `pipeline: 1` or remove `kvcr`",
         role_check(_kvcr(lambda s, r: par(s, r, "pipeline") > 1), "parallelism", "pipeline"),
         related=(("KVCR is configured here", "{role}/kv_cache/kvcr"),)),
    Rule("KVCR-PREFILL-CONTEXT", SECTION, "KVCR needs `parallelism.prefill_context: 1`",
         "set `prefill_context: 1` or remove `kvcr`",
         role_check(_kvcr(lambda s, r: par(s, r, "prefill_context") > 1), "parallelism", "prefill_context"),
         related=(("KVCR is configured here", "{role}/kv_cache/kvcr"),)),
    Rule("PLACEMENT-KV-AWARE", SECTION, "`placement: kv_aware` only names a peer for KVCR, and no role has `kvcr`",
         "add `kvcr: {}` next to `host_offload`, or use `placement: round_robin`",
         engine_check(_hints_unused, "/engine/placement")),
)
