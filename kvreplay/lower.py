"""`kvreplay compile FILE --to replayspec`: lower a predict config into a native ReplaySpec v1.

The engine block is the one the user wrote (after --set): defaults and inferred
values are left for the ReplaySpec's compile to derive again.  The traffic is expanded into an
explicit request list by replaying it once: every request keeps its index
(so its uuid), its prompt's token ids (synthetic tokens, or tokens standing for
a Mooncake row's hash ids) and the arrival time it had - for closed loops and
session turns that is the time the loop produced.  Replaying the ReplaySpec
therefore gives the same results, byte for byte.

Agentic plays (`weka`, `agentic_mooncake`) are refused (`refusal`): a ReplaySpec's request list has no field
for a request that waits for others, for lanes or for warm-up, snapshot and profile phases, so the lowered
file would replay a different workload as soon as anything changes the requests' end times (and a warm-up's
preparation requests would count as measured ones).  `kvreplay predict` replays the config itself.
"""
from __future__ import annotations

import copy

from .runtime.traffic import block_keys as blocks
from .runtime.outputs.kv_events import TRACE_SOURCE
from .compiler.agentic_records import AGENTIC_FORMATS
from .compiler.diagnostics import Diagnostic
from .runtime.build import build

MS = 1e6


def _prune(node):
    """Drop empty mappings (but keep `state_cache: {}` and `kvcr: {}`, which switch features on)."""
    if isinstance(node, dict):
        pruned = {k: _prune(v) for k, v in node.items()}
        return {k: v for k, v in pruned.items() if v != {} or k in ("state_cache", "kvcr")}
    return node


def prompt_tokens(spec) -> list[int]:
    content = spec.content
    if content.token_ids:
        return list(content.token_ids)
    if content.hash_ids:
        tokens = []
        for h in content.hash_ids:
            tokens.extend(blocks.token_ids(TRACE_SOURCE + h, 0, content.trace_block))
        return tokens[:spec.prompt_len]
    return list(blocks.segment_tokens(content.segments)[:spec.prompt_len])


def _topology(plan_engine: dict) -> dict:
    roles = plan_engine["workers"]
    if plan_engine["mode"] == "disaggregated":
        return {"kind": "disaggregated",
                "prefill": {"initial_workers": roles["prefill"]["parallelism"]["replicas"]},
                "decode": {"initial_workers": roles["decode"]["parallelism"]["replicas"]}}
    return {"kind": "aggregated", "workers": {"initial_workers": roles["aggregated"]["parallelism"]["replicas"]}}


REFUSED = "REPLAYSPEC-AGENTIC"
PHASES = ("agentic_warmup", "agentic_snapshot", "agentic_profile")


def refusal(result) -> Diagnostic | None:
    """Why an agentic config cannot become a ReplaySpec (at its `traffic.source.format`), or None."""
    spec = result.spec
    if spec.get("/traffic/source/type") != "trace" or spec.get("/traffic/source/format") not in AGENTIC_FORMATS:
        return None
    plays = result.plan.records.traffic.source.plays
    waiting = sum(1 for play in plays for node in play.nodes if node.waits_for)
    total = sum(len(play.nodes) for play in plays)
    lost = [f"the dependencies of {waiting} of its {total} requests ({len(plays)} play{'s' * (len(plays) != 1)})"]
    load = spec.get("/traffic/load", {}) or {}
    if load.get("agentic_lanes") is not None:
        lost.append(f"`agentic_lanes: {load['agentic_lanes']}`")
    lost += [f"`{key}`" for key in PHASES if load.get(key) not in (None, False)]
    return Diagnostic(REFUSED, "/traffic/source/format",
                      f"a ReplaySpec is a list of requests with fixed arrivals; lowering this agentic trace would "
                      f"lose {', '.join(lost)}",
                      "replay the config with `kvreplay predict`, which keeps the plays' dependencies")


def lower(result) -> dict:
    """The ReplaySpec (as a dict) of a compiled predict config."""
    plan = result.plan.to_dict()
    replay = build(result.plan.records)
    replay.run()
    engine = copy.deepcopy(result.document.get("engine", {}))
    for role in engine.get("workers", {}).values():  # replicas travel as the topology's initial_workers
        role.get("parallelism", {}).pop("replicas", None)
    requests = []
    for request in sorted(replay.requests, key=lambda r: r.spec.index):
        spec = request.spec
        item = {"id": spec.uuid, "arrival_time_ms": request.arrival_ns / MS, "input_tokens": spec.prompt_len,
                "input_token_ids": prompt_tokens(spec), "output_tokens": spec.output_len}
        if spec.session_id is not None:
            item["session_id"] = spec.session_id
        if spec.turn_index is not None:
            item["turn_index"] = spec.turn_index
        requests.append(item)
    document = {"version": 1, "description": f"lowered from {result.source}",
                "topology": _topology(plan["engine"]), "engine": _prune(engine), "requests": requests}
    if replay.traffic.stop_ns is not None:
        document["max_sim_time_ms"] = replay.traffic.stop_ns / MS
    return document
