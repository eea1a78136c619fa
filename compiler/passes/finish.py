"""Finish pass: the plan's data as the typed, frozen records the replay runtime reads.

Input is the plan's plain data (what `Plan.to_dict()` gives) and the parsed trace rows; output
a `ReplayPlan` in which every knob the runtime needs is present, every duration is integer
nanoseconds (`durations`), tier sizes are blocks and bytes, and the roofline's model and hardware
inputs are resolved (`timing_inputs`).  The fallbacks below are those the runtime used to apply
itself, so a plan written before a default existed still replays the same.  A
valid plan that lacks what a replay reads (an inline model without its
architecture, traffic without a source) has no records; `predict` says why.
"""
from __future__ import annotations

from pathlib import Path

from ..agentic_records import PLAY_FORMATS
from ..durations import ms_to_ns, seconds_to_ns
from ..plan_records import (HandoffPlan, LinkPlan, ListedRequest, PeerFetchPlan, ReplayPlan, RequestListSource,
                            RolePlan, SessionSource, SpeculationPlan, StateCachePlan,
                            SyntheticSource, TierPlan, TraceRow, TraceSource, TrafficPlan)
from ..timing_inputs import timing_record
from . import opal_finish
from .opal_stages import read_stages
from .traces import DEFAULT_BLOCK_SIZE, read_traces

ROLE_ORDER = ("aggregated", "prefill", "decode")
DESTINATION_FIRST_BACKENDS = ("sglang",)  # the decode rank reserves its blocks before the prefill starts


def _link(offload: dict, way: str, shared: bool) -> LinkPlan:
    return LinkPlan(offload[f"{way}_bandwidth_gbps"], offload.get(f"shared_{way}_bandwidth_gbps") if shared else None,
                    ms_to_ns(offload["latency_to_first_byte_ms"]))


def _tier(offload: dict, blocks_key: str, block_bytes: int, write: str, read: str, connector: str | None) -> TierPlan:
    shared = offload["scope"] == "cluster_shared"
    return TierPlan(offload["scope"], shared, offload[blocks_key], block_bytes, _link(offload, write, shared),
                    _link(offload, read, shared), connector)


def _role(plan: dict, name: str) -> RolePlan:
    engine, role = plan["engine"], plan["engine"]["workers"][name]
    kv, parallel, scheduler = role["kv_cache"], role["parallelism"], role["scheduler"]
    geometry = plan["geometry"][name]
    catalog = plan["catalog"]
    delays = plan["traffic"].get("replay", {}).get("startup_delay_ms", {})
    steps = ((0, parallel["replicas"]),) + tuple((seconds_to_ns(step["at_seconds"]), step["replicas"])
                                                 for step in role.get("scaling", ()))
    host = storage = peer_fetch = None
    if "host_offload" in kv:
        offload = kv["host_offload"]
        host = _tier(offload, "num_host_blocks", geometry["g2_block_bytes"], "d2h", "h2d", offload["connector"])
    if "g3_offload" in kv:
        storage = _tier(kv["g3_offload"], "num_g3_blocks", geometry["g3_block_bytes"], "write", "read", None)
    if "kvcr" in kv:
        kvcr = kv["kvcr"]
        peer_fetch = PeerFetchPlan(ms_to_ns(kvcr["latency_to_first_byte_ms"]), kvcr["bandwidth_gbps"],
                                   geometry["g2_block_bytes"] * parallel["tensor"])
    return RolePlan(
        name=name, backend=engine["backend"], replica_steps=steps, scaled=bool(role.get("scaling")), startup_delay_ns=ms_to_ns(delays.get(name, 0.0)),
        attention_data=parallel["attention_data"], g1_blocks=kv["capacity"]["blocks"], block_size=kv["block_size"],
        prefix_caching=kv["prefix_caching"], max_batched_tokens=scheduler["max_batched_tokens"],
        max_sequences=scheduler["max_sequences"], state_blocks_per_request=geometry.get("state_blocks_per_request", 0),
        timing=timing_record(role, catalog["model"], catalog["hardware"][name], engine["backend"], geometry["kv_dtype"]),
        host=host, storage=storage, peer_fetch=peer_fetch,
        prefill_decode_interval=scheduler.get("prefill_decode_interval", 0),
        schedule_policy=scheduler.get("schedule_policy", "fcfs"), host_loop=role.get("host_loop", False),
        speculation=_speculation(engine, catalog["model"]),
        state_cache=_state_cache(kv, geometry, catalog["model"].get("family"),
                                 plan["provenance"].get(f"/engine/workers/{name}/kv_cache/prefix_match_unit", "")))


def _state_cache(kv: dict, geometry: dict, family: str | None, unit_source: str) -> StateCachePlan | None:
    """The role's state cache and its snapshot rule (facts §24): vLLM's align mode when `prefix_match_unit` is
    set, and for Kimi K3 when it is not (the spec: unset means `block_size`; AISimulate reuses nothing there, from
    vLLM's default mamba cache mode, and the spec wins), else DeepSeek V4's pass ends and an explicit
    `bytes_per_request` as a plain reservation (whole-block reuse), both as AISimulate."""
    if "state_cache" not in kv:
        return None
    if not unit_source.startswith("inferred") or family == "kimi_k3":
        rule = "prompt_ends"
    else:
        rule = {"deepseek_v4": "pass_ends"}.get(family, "whole_blocks")
    return StateCachePlan(kv["state_cache"]["bytes_per_request"], geometry["state_blocks_per_request"],
                          geometry["block_bytes"], kv["prefix_match_unit"], rule)


# ngram without `acceptance_rates`: the conditional rates Dynamo's mocker (AISimulate's engine) assumes
DEFAULT_NGRAM_RATES = (0.85, 0.3, 0.0, 0.0, 0.0)


def _speculation(engine: dict, model: dict) -> SpeculationPlan | None:
    """Speculative decoding as AISimulate's default timing prices it (facts §36): a verify pass is a decode pass
    whose batch holds every draft besides its request's token; native MTP also runs its `nextn` layers, and only
    a dense (GQA) model's verify kernel reads a request's KV once for all its drafts (ngram; MLA reads it per
    draft)."""
    ngram, nextn = engine.get("speculation"), engine.get("nextn") or 0
    per_draft_kv = model.get("attention") != "gqa"
    if ngram is not None:
        drafts = ngram["num_speculative_tokens"]
        rates = tuple(ngram.get("acceptance_rates", DEFAULT_NGRAM_RATES[:drafts]))
        return SpeculationPlan("ngram", drafts, tuple(float(r) for r in rates), 0.0, ngram.get("seed", 42),
                               0, per_draft_kv)
    if nextn:
        return SpeculationPlan("mtp", nextn, (), float(engine["nextn_accepted"]), 42, nextn, True)
    return None


def _handoff(plan: dict) -> HandoffPlan:
    engine = plan["engine"]
    transfer = engine.get("kv_transfer", {})
    prefill_kv = engine["workers"]["prefill"]["kv_cache"]
    return HandoffPlan(transfer["bytes_per_token"], transfer.get("bandwidth_gb_per_second"),
                       transfer.get("timing_mode", "destination_missing"),
                       prefill_kv.get("state_cache", {}).get("bytes_per_request", 0),
                       engine["backend"] in DESTINATION_FIRST_BACKENDS,
                       ms_to_ns(plan["traffic"].get("replay", {}).get("handoff_latency_ms", 0.0)))


def _listed(item: dict) -> ListedRequest:
    return ListedRequest(
        id=item["id"], input_tokens=item["input_tokens"], output_tokens=item["output_tokens"],
        input_token_ids=tuple(item.get("input_token_ids") or ()), arrival_ns=ms_to_ns(item["arrival_time_ms"]),
        session_id=item.get("session_id"), turn_index=item.get("turn_index"), dp_rank=item.get("dp_rank"),
        prefill_dp_rank=item.get("prefill_dp_rank"), worker_idx=item.get("worker_idx"),
        prefill_worker_idx=item.get("prefill_worker_idx"),
        kv_hints=tuple((h["rank"], h.get("worker_idx"), h.get("cached_tokens", 0)) for h in item.get("kv_hints", ())))


def _source(source: dict, rows: tuple[TraceRow, ...]):
    kind = source["type"]
    if kind == "synthetic":
        return SyntheticSource(source["input_tokens"], source["output_tokens"], source.get("cached_prefix_tokens", 0))
    if kind == "synthetic-session":
        session = source.get("session", {})
        return SessionSource(source["new_input_tokens_per_turn"], source["output_tokens_per_turn"],
                             session.get("turns", 4), session.get("prefix_groups", 0),
                             session.get("shared_prefix_ratio", 0.0), ms_to_ns(session.get("inter_turn_delay_ms", 0.0)))
    if kind == "trace" and source.get("format") in PLAY_FORMATS:
        return rows  # (the traces pass's AgenticSource)
    if kind == "trace":
        return TraceSource(source.get("block_size", DEFAULT_BLOCK_SIZE), rows)
    if kind == "requests":
        return RequestListSource(tuple(_listed(item) for item in source["requests"]))
    return None  # agentx: not replayed


def _count_limit(stop: dict, unit: str, load_units: float) -> int | None:
    if unit in stop:
        return stop[unit]
    per = stop.get(f"{unit}_per_load_unit")
    return None if per is None else max(1, round(per * load_units))


def _traffic(traffic: dict, rows: tuple[TraceRow, ...]) -> TrafficPlan:
    source, load = traffic["source"], traffic["load"]
    stop = traffic.get("stop", {}) or {}
    replay = traffic.get("replay", {}) or {}
    sessions = source["type"] == "synthetic-session"
    load_units = load.get("concurrency") or load.get("requests_per_second") or load.get("sessions_per_second") or 1
    seconds = stop.get("max_virtual_time_seconds", replay.get("max_virtual_time_seconds"))
    return TrafficPlan(
        kind="agentic" if source.get("format") in PLAY_FORMATS else source["type"], source=_source(source, rows), load=load["type"], concurrency=load.get("concurrency", 10),
        rate=load.get("sessions_per_second" if sessions else "requests_per_second"), seed=load.get("seed", 42),
        max_in_flight=load.get("max_in_flight"), request_limit=_count_limit(stop, "requests", load_units),
        session_limit=_count_limit(stop, "sessions", load_units),
        stop_ns=None if seconds is None else seconds_to_ns(seconds))


class NotReplayable(ValueError):
    """The plan is valid but lacks what a replay needs (e.g. an inline model without its architecture)."""


def run(plan: dict, rows: tuple[TraceRow, ...] = ()) -> ReplayPlan:
    """The finished plan; NotReplayable when the plan lacks something the replay reads."""
    try:
        return _finish(plan, rows)
    except KeyError as error:
        raise NotReplayable(f"the plan has no `{error.args[0]}`") from None
    except (TypeError, ValueError) as error:
        raise NotReplayable(str(error)) from None


def _finish(plan: dict, rows: tuple) -> ReplayPlan:
    """`rows`: a predict trace's rows; for an opal plan (`plan["opal"]`), the payload of each stage."""
    engine = plan["engine"]
    roles = engine["workers"]
    context = engine.get("context_length")
    opal = plan.get("opal")
    # `max`: the model's own, for vLLM only (its max_model_len; AISimulate bounds SGLang and TensorRT-LLM
    # sequences by their KV pool alone, facts §13); opal sets none
    if not isinstance(context, int) and not opal and engine.get("backend", "vllm") == "vllm":
        context = plan.get("catalog", {}).get("model", {}).get("max_context")
    traffic = opal_finish.traffic_plan(opal) if opal else _traffic(plan["traffic"], rows)
    return ReplayPlan(
        plan_version=plan["kvreplay_plan"], roles=tuple(_role(plan, name) for name in ROLE_ORDER if name in roles),
        handoff=_handoff(plan) if "prefill" in roles else None, traffic=traffic,
        context_length=context if isinstance(context, int) else None,
        enable_chunked_prefill=engine.get("enable_chunked_prefill", True),
        placement=engine.get("placement", "round_robin"), eviction_policy=engine.get("kv_eviction_policy", "lru"),
        record_per_request=plan["traffic"].get("replay", {}).get("record_per_request", False),
        opal=opal_finish.opal_plan(opal, rows) if opal else None)


def finish_plan(plan: dict, base_dir: Path = Path(".")) -> ReplayPlan:
    """The records of a plan given as data (e.g. a plan JSON read back), its traces read from `base_dir`."""
    if "opal" in plan:
        return run(plan, read_stages(plan["opal"], base_dir))
    return run(plan, read_traces(plan["traffic"], base_dir))
