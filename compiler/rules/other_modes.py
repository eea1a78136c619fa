"""Rules of the other cache modes: grouped caches, Belady eviction, agentic traffic with G2."""
from __future__ import annotations

from ..agentic_records import AGENTIC_FORMATS
from ..spec import Spec, role_pointer
from .rule import Rule, backend, disaggregated, has_kv, kv, par, role_check

GROUPED = "kv-cache-tiers.md: Other cache modes / Grouped caches"
BELADY = "kv-cache-tiers.md: Other cache modes / Belady eviction"
AGENTIC = "kv-cache-tiers.md: Agentic traffic with G2"


def _groups(predicate):
    return lambda spec, role: has_kv(spec, role, "groups") and predicate(spec, role)


def _offload(spec: Spec, role: str) -> bool:
    return any(has_kv(spec, role, k) for k in ("host_offload", "g3_offload", "kvcr"))


def _belady(spec: Spec) -> bool:
    return spec.get("/engine/kv_eviction_policy") == "belady"


def _belady_in_predict(spec: Spec):
    if _belady(spec) and spec.frontend == "predict":
        yield "/engine/kv_eviction_policy"


def _belady_role(predicate):
    """Belady constraints are checked where Belady is available (ReplaySpec), so a predict
    file reports only BELADY-PREDICT."""
    return lambda spec, role: _belady(spec) and spec.frontend != "predict" and predicate(spec, role)


def agentic(spec: Spec) -> bool:
    """AgentX traffic: the `agentx` source, or an agentic trace (`weka`, `agentic_mooncake`)."""
    return spec.get("/traffic/source/type") == "agentx" or (
        spec.get("/traffic/source/type") == "trace" and spec.get("/traffic/source/format") in AGENTIC_FORMATS)


def _agentx(predicate):
    return lambda spec, role: agentic(spec) and has_kv(spec, role, "host_offload") and predicate(spec, role)


def _agentx_topology(spec: Spec, role: str) -> bool:
    """One aggregated worker, one prefill + one decode worker, or several aggregated workers with private G2."""
    replicas = par(spec, role, "replicas")
    if disaggregated(spec):
        return replicas != 1
    return replicas > 1 and kv(spec, role, "host_offload", "scope") == "cluster_shared"


def _agentic_backend(spec: Spec):
    if agentic(spec) and backend(spec) == "trtllm":
        yield "/engine/backend" if spec.user_set("/engine/backend") else "/traffic/source/type"


RULES = (
    Rule("GROUPS-PREFIX-CACHING", GROUPED, "grouped caches need `prefix_caching: false` (cold cache)",
         "set `prefix_caching: false`", role_check(_groups(lambda s, r: kv(s, r, "prefix_caching") is not False),
                                                     "kv_cache", "prefix_caching")),
    Rule("GROUPS-OFFLOAD", GROUPED, "grouped caches cannot be combined with offload tiers",
         "remove `host_offload`, `g3_offload` and `kvcr`", role_check(_groups(_offload), "kv_cache", "groups"),
         supersedes=("G2-PREFIX-CACHING",)),
    Rule("GROUPS-DISAGGREGATED", GROUPED, "grouped caches need aggregated workers",
         "use `engine.mode: aggregated`", role_check(_groups(lambda s, r: disaggregated(s)), "kv_cache", "groups")),
    Rule("GROUPS-CAPACITY", GROUPED, "grouped caches need `capacity.type: default`",
         "size G1 from memory with `capacity: {type: default}`",
         role_check(_groups(lambda s, r: kv(s, r, "capacity", "type") != "default"), "kv_cache", "capacity")),
    Rule("GROUPS-BACKEND", GROUPED, "grouped caches are modelled for vLLM only", "use `backend: vllm`",
         role_check(_groups(lambda s, r: backend(s) != "vllm"), "kv_cache", "groups")),
    Rule("BELADY-PREDICT", BELADY, "Belady eviction is not available in predict YAML",
         "use `kv_eviction_policy: lru`, or write a native ReplaySpec with a request list", _belady_in_predict),
    Rule("BELADY-ATTENTION-DATA", BELADY, "Belady eviction needs `parallelism.attention_data: 1`",
         "set `attention_data: 1`", role_check(_belady_role(lambda s, r: par(s, r, "attention_data") != 1),
                                               "parallelism", "attention_data")),
    Rule("BELADY-OFFLOAD", BELADY, "Belady eviction cannot be combined with G2, G3 or KVCR",
         "remove the offload tiers", role_check(_belady_role(_offload), "kv_cache", "host_offload")),
    Rule("BELADY-PREFIX-CACHING", BELADY, "Belady eviction needs prefix caching",
         "set `prefix_caching: true`", role_check(_belady_role(lambda s, r: kv(s, r, "prefix_caching") is False),
                                                  "kv_cache", "prefix_caching")),
    Rule("BELADY-AGGREGATED", BELADY, "Belady eviction needs fixed aggregated workers",
         "use `topology.kind: aggregated` without a worker schedule",
         role_check(_belady_role(lambda s, r: disaggregated(s) or s.has(role_pointer(r, "scaling"))))),
    Rule("AGENTIC-G2-TOPOLOGY", AGENTIC, "agentic traffic with G2 needs one aggregated worker, one prefill and one "
         "decode worker, or several aggregated workers that each own a `dp_rank_local` G2",
         "set `replicas: 1`, or `host_offload.scope: dp_rank_local`",
         role_check(_agentx(_agentx_topology), "parallelism", "replicas")),
    Rule("AGENTIC-G2-ATTENTION-DATA", AGENTIC, "agentic traffic with G2 needs `attention_data: 1`",
         "set `attention_data: 1`",
         role_check(_agentx(lambda s, r: par(s, r, "attention_data") != 1), "parallelism", "attention_data")),
    Rule("AGENTIC-G3", AGENTIC, "agentic traffic does not support G3 offload", "remove `g3_offload`",
         role_check(_agentx(lambda s, r: has_kv(s, r, "g3_offload")), "kv_cache", "g3_offload")),
    Rule("AGENTIC-G2-STATIC", AGENTIC, "agentic traffic with G2 needs static workers (no `scaling` schedule)",
         "remove `scaling` and give the role fixed `replicas`",
         role_check(_agentx(lambda s, r: s.has(role_pointer(r, "scaling"))), "scaling")),
    Rule("AGENTIC-BACKEND", AGENTIC, "agentic traffic is replayed on vLLM and SGLang workers, not TensorRT-LLM",
         "use `backend: vllm` (or `sglang` without G2)", _agentic_backend),
)
