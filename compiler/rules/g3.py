"""Rules of the G3 storage tier."""
from __future__ import annotations

from ..spec import role_pointer
from .rule import Rule, disaggregated, has_kv, kv, native_mtp, par, role_check

SECTION = "kv-cache-tiers.md: G3 offload"
BLAME = ("kv_cache", "g3_offload")


def _g3(predicate):
    return lambda spec, role: has_kv(spec, role, "g3_offload") and predicate(spec, role)


def _shared_knob_on_local(field: str):
    return _g3(lambda s, r: kv(s, r, "g3_offload", "scope") != "cluster_shared"
               and s.has(role_pointer(r, *BLAME, field)))


RULES = (
    Rule("G3-REQUIRES-HOST", SECTION, "G3 offload sits behind G2 and needs `host_offload`",
         "add `host_offload: {num_host_blocks: ...}` next to `g3_offload`",
         role_check(_g3(lambda s, r: not has_kv(s, r, "host_offload")), *BLAME)),
    Rule("G3-DISAGGREGATED", SECTION, "G3 offload is supported on aggregated workers only",
         "remove `g3_offload` from the prefill/decode roles",
         role_check(_g3(lambda s, r: disaggregated(s)), *BLAME),
         related=(("`mode: {value}` is chosen here", "/engine/mode"),)),
    Rule("G3-MTP", SECTION, "G3 offload is rejected with native MTP (`nextn` > 0)",
         "set `engine.nextn: 0` or remove `g3_offload`",
         role_check(_g3(lambda s, r: native_mtp(s)), *BLAME), supersedes=("G2-MTP",),
         related=(("native MTP is set here (`nextn: {value}`)", "/engine/nextn"),)),
    Rule("G3-ATTENTION-DATA", SECTION, "G3 offload needs `parallelism.attention_data: 1`",
         "set `attention_data: 1` or remove `g3_offload`",
         role_check(_g3(lambda s, r: par(s, r, "attention_data") != 1), "parallelism", "attention_data"),
         related=(("G3 offload is configured here", "{role}/kv_cache/g3_offload"),)),
    Rule("G3-CONNECTOR", SECTION, "G3 offload needs `host_offload.connector: offloading_v0_24`",
         "use the default connector, or remove `g3_offload`",
         role_check(_g3(lambda s, r: kv(s, r, "host_offload", "connector", default="offloading_v0_24")
                        != "offloading_v0_24"), "kv_cache", "host_offload", "connector"),
         related=(("G3 offload is configured here", "{role}/kv_cache/g3_offload"),)),
    Rule("G3-SHARED-READ-SCOPE", SECTION, "`shared_read_bandwidth_gbps` applies to `scope: cluster_shared` only",
         "remove it, or set `g3_offload.scope: cluster_shared`",
         role_check(_shared_knob_on_local("shared_read_bandwidth_gbps"), *BLAME, "shared_read_bandwidth_gbps"),
         related=(("`scope: {value}` is chosen here", "{role}/kv_cache/g3_offload/scope"),)),
    Rule("G3-SHARED-WRITE-SCOPE", SECTION, "`shared_write_bandwidth_gbps` applies to `scope: cluster_shared` only",
         "remove it, or set `g3_offload.scope: cluster_shared`",
         role_check(_shared_knob_on_local("shared_write_bandwidth_gbps"), *BLAME, "shared_write_bandwidth_gbps"),
         related=(("`scope: {value}` is chosen here", "{role}/kv_cache/g3_offload/scope"),)),
)
