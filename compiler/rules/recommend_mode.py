"""Recommend-only restrictions, generated from the spec's KV-cache knob table.

The "Recommend" column of the table says, per knob, whether `recommend` may
search it, keeps it fixed, or rejects it (``predict only`` / ``Rejected``).
A config is in recommend mode when it has a top-level `recommend` block.
"""
from __future__ import annotations

from ..spec import Spec, role_pointer
from .rule import Rule, recommend

SECTION = "kv-cache-tiers.md: KV cache fields (Recommend column)"

# knob path under kv_cache -> recommend policy, as in the spec's table
KNOB_POLICY = {
    "block_size": "searchable",
    "prefix_caching": "fixed",
    "bytes_per_token": "fixed",
    "capacity.type": "fixed",
    "capacity.memory_fraction": "searchable",
    "capacity.cuda_graph_reserved_bytes": "predict only",
    "capacity.blocks": "fixed",
    "capacity.bytes": "predict only",
    "host_offload": "fixed",
    "g3_offload": "rejected",
    "kvcr": "rejected",
    "state_cache": "rejected",
    "prefix_match_unit": "rejected",
}
ROLE_PREFIX = "engine.workers."


def _knob_pointer(role: str, knob: str) -> str:
    return role_pointer(role, "kv_cache", *knob.split("."))


def _knobs_with(policy: str):
    knobs = tuple(k for k, p in KNOB_POLICY.items() if p == policy)

    def check(spec: Spec):
        if recommend(spec):
            for role in spec.roles():
                for knob in knobs:
                    pointer = _knob_pointer(role, knob)
                    if spec.user_set(pointer):
                        yield pointer
    return check


def _knob_of(path: str) -> str | None:
    """`engine.workers.<role>.kv_cache.<knob>` -> knob, else None."""
    parts = path.split(".")
    if path.startswith(ROLE_PREFIX) and len(parts) > 4 and parts[3] == "kv_cache":
        return ".".join(parts[4:])
    return None


def _searched_fixed(spec: Spec):
    for path in sorted(spec.get("/recommend/search", {}) or {}):
        knob = _knob_of(path)
        if knob is not None and _policy(knob) != "searchable":
            yield "/recommend/search/" + path.replace("~", "~0").replace("/", "~1")


def _policy(knob: str) -> str:
    """A knob's own row, else its block's row (`host_offload.num_host_blocks` -> `host_offload`)."""
    return KNOB_POLICY.get(knob) or KNOB_POLICY.get(knob.split(".")[0], "fixed")


RULES = (
    Rule("RECOMMEND-PREDICT-ONLY", SECTION, "this knob is for predict only (`cuda_graph_reserved_bytes`, "
         "`capacity.bytes`)", "remove it, or drop the `recommend` block to run predict", _knobs_with("predict only")),
    Rule("RECOMMEND-REJECTED", SECTION, "recommend rejects `g3_offload`, `kvcr`, `state_cache` and "
         "`prefix_match_unit`", "remove it, or drop the `recommend` block to run predict", _knobs_with("rejected")),
    Rule("RECOMMEND-SEARCH-FIXED", SECTION, "recommend can search only `kv_cache.block_size` and "
         "`kv_cache.capacity.memory_fraction`; this knob is fixed or rejected",
         "remove this path from `recommend.search` and set the knob directly", _searched_fixed),
)
