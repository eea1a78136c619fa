"""Rules of the native ReplaySpec v1 front-end, and the Belady constraints that need its request list.

Two kinds of rules live here:

* ``frontend`` rules read the ReplaySpec document itself (`/version`, `/topology`,
  `/requests/<i>/...`) after it passed its schema; the front-end runs them before
  lowering, so they blame exactly what the user wrote.  REPLAYSPEC-VERSION runs
  first and alone: a document of another version is not checked any further.
* ``spec`` rules read the lowered Spec (requests under `/traffic/source/requests`)
  after defaults, and blame the ReplaySpec's own pointers (`/requests/<i>/dp_rank`,
  `/max_in_flight`), which the span table of the source document locates.

Every rule here is silent for predict YAML (its front-end never produces a
`requests` source).
"""
from __future__ import annotations

import math
from typing import Iterator

from ..spec import Spec, role_pointer
from .rule import Rule, par, role_check

SECTION = "REFERENCE.md: Native ReplaySpec v1"
BELADY = "kv-cache-tiers.md: Other cache modes / Belady eviction"
FRONTEND = "frontend"

LOWERED_REQUESTS = "/traffic/source/requests"
POOLS = {"aggregated": {"workers": "aggregated"}, "disaggregated": {"prefill": "prefill", "decode": "decode"}}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bad_time(value, positive: bool = False) -> bool:
    """Not a finite number of milliseconds (>= 0, or > 0 when `positive`; > 0 must survive ms -> s)."""
    if not _number(value) or not math.isfinite(value):
        return True
    return value / 1000 <= 0 if positive else value < 0


# A year of virtual time: past it no replay is meant, and ms -> ns would leave 64 bits for 1e300
MAX_TIME_MS = 365 * 24 * 3600 * 1000


def _time_fields(spec: Spec) -> Iterator[tuple[str, object]]:
    """(pointer, value) of every time the ReplaySpec document gives, in ms."""
    for i, request in enumerate(_requests(spec)):
        yield f"/requests/{i}/arrival_time_ms", request["arrival_time_ms"]
    for pointer in ("/max_sim_time_ms", *(f"/topology/{pool}/startup_delay_ms" for pool in ("workers", "prefill",
                    "decode")), "/topology/handoff_latency_ms"):
        if spec.has(pointer):
            yield pointer, spec.get(pointer)


# ------------------------------------------------------------------ frontend stage (the ReplaySpec document)

def _requests(spec: Spec):
    return spec.get("/requests") or ()


def _version(spec: Spec) -> Iterator[str]:
    version = spec.get("/version")
    if isinstance(version, int) and not isinstance(version, bool) and version != 1:
        yield "/version"


def _times(spec: Spec) -> Iterator[str]:
    for pointer, value in _time_fields(spec):
        if _bad_time(value, positive=pointer == "/max_sim_time_ms"):
            yield pointer


def _times_too_long(spec: Spec) -> Iterator[str]:
    for pointer, value in _time_fields(spec):
        if not _bad_time(value) and value > MAX_TIME_MS:
            yield pointer


def _max_in_flight(spec: Spec) -> Iterator[str]:
    if spec.has("/max_in_flight") and spec.get("/max_in_flight") <= 0:
        yield "/max_in_flight"


def _duplicate_ids(spec: Spec) -> Iterator[str]:
    seen: set[str] = set()
    for i, request in enumerate(_requests(spec)):
        if request["id"] in seen:
            yield f"/requests/{i}/id"
        seen.add(request["id"])


def _prefill_dp_rank(spec: Spec) -> Iterator[str]:
    if spec.get("/topology/kind") == "aggregated":
        for i, request in enumerate(_requests(spec)):
            if "prefill_dp_rank" in request:
                yield f"/requests/{i}/prefill_dp_rank"


def _token_ids(spec: Spec) -> Iterator[str]:
    for i, request in enumerate(_requests(spec)):
        ids = request.get("input_token_ids")
        if ids is not None and len(ids) != request["input_tokens"]:
            yield f"/requests/{i}/input_token_ids"


def _engine_mode(spec: Spec) -> Iterator[str]:
    if spec.has("/engine/mode") and spec.get("/engine/mode") != spec.get("/topology/kind"):
        yield "/engine/mode"


def _initial_workers(spec: Spec) -> Iterator[str]:
    for pool, role in POOLS.get(spec.get("/topology/kind"), {}).items():
        workers = spec.get(f"/topology/{pool}/initial_workers")
        replicas = spec.get(role_pointer(role, "parallelism", "replicas"))
        if workers is not None and replicas is not None and workers != replicas:
            yield f"/topology/{pool}/initial_workers"


# ------------------------------------------------------------------ spec stage (the lowered Spec)

def _replay(spec: Spec) -> bool:
    return spec.frontend == "replayspec" and spec.get("/traffic/source/type") == "requests"


def _lowered_requests(spec: Spec):
    return spec.get(LOWERED_REQUESTS) or () if _replay(spec) else ()


def _pinned_beyond(field: str, prefill_field: str, limit):
    """Blame each request whose pinned `field` (the aggregated or decode role; `prefill_field`: the prefill role)
    is not below `limit(spec, role)`."""
    def check(spec: Spec) -> Iterator[str]:
        if not _replay(spec):
            return
        if spec.get("/engine/mode") == "disaggregated":
            fields = ((field, "decode"), (prefill_field, "prefill"))
        else:
            fields = ((field, "aggregated"),)
        limits = [(name, limit(spec, role)) for name, role in fields]
        for i, request in enumerate(_lowered_requests(spec)):
            for name, most in limits:
                value = request.get(name)
                if value is not None and value >= most:
                    yield f"/requests/{i}/{name}"
    return check


def _most_workers(spec: Spec, role: str) -> int:
    """The role's largest worker count: its replicas, or a scaling step's."""
    steps = spec.get(role_pointer(role, "scaling")) or ()
    return max([spec.get(role_pointer(role, "parallelism", "replicas"), 1)] + [step["replicas"] for step in steps])


def _unknown_hint_ranks(spec: Spec) -> Iterator[str]:
    """kv_hints name a rank of the role KVCR pulls within (prefill in P/D): `rank` over all its DP ranks, or
    `worker_idx` and `rank` within that worker."""
    if not _replay(spec):
        return
    role = "prefill" if spec.get("/engine/mode") == "disaggregated" else "aggregated"
    workers, ranks = _most_workers(spec, role), par(spec, role, "attention_data")
    for i, request in enumerate(_lowered_requests(spec)):
        for j, hint in enumerate(request.get("kv_hints") or ()):
            worker = hint.get("worker_idx")
            if worker is not None and worker >= workers:
                yield f"/requests/{i}/kv_hints/{j}/worker_idx"
            elif hint["rank"] >= (ranks if worker is not None else workers * ranks):
                yield f"/requests/{i}/kv_hints/{j}/rank"


def _belady(spec: Spec) -> bool:
    return _replay(spec) and spec.get("/engine/kv_eviction_policy") == "belady"


def _belady_closed_loop(spec: Spec) -> Iterator[str]:
    if _belady(spec) and spec.has("/traffic/load/max_in_flight"):
        yield "/max_in_flight"


def _belady_token_ids(spec: Spec) -> Iterator[str]:
    if _belady(spec):
        for i, request in enumerate(_lowered_requests(spec)):
            if "input_token_ids" not in request:
                yield f"/requests/{i}"


RULES = (
    Rule("REPLAYSPEC-VERSION", SECTION, "this kvreplay reads ReplaySpec version 1 only",
         "set `version: 1` (the fields of version 1 are listed by the ReplaySpec schema)", _version, stage=FRONTEND),
    Rule("REPLAYSPEC-TIME", SECTION, "times must be finite numbers of milliseconds, at least 0 "
         "(`max_sim_time_ms` greater than 0)",
         "write a finite number such as 1500.0 (arrival and delay times >= 0, `max_sim_time_ms` > 0)", _times,
         stage=FRONTEND),
    Rule("REPLAYSPEC-TIME-LIMIT", SECTION, f"times are at most {MAX_TIME_MS} ms (a year of virtual time)",
         f"write a time of at most {MAX_TIME_MS} ms", _times_too_long, stage=FRONTEND),
    Rule("REPLAYSPEC-MAX-IN-FLIGHT", SECTION, "`max_in_flight` must be greater than 0",
         "give a positive cap on in-flight requests, or remove `max_in_flight` for an open-loop replay",
         _max_in_flight, stage=FRONTEND),
    Rule("REPLAYSPEC-DUPLICATE-ID", SECTION, "this request id is already used by an earlier request",
         "give every request a unique `id`", _duplicate_ids, stage=FRONTEND),
    Rule("REPLAYSPEC-PREFILL-DP-RANK", SECTION, "`prefill_dp_rank` applies to disaggregated topologies only",
         "remove `prefill_dp_rank` (use `dp_rank`), or use `topology.kind: disaggregated`", _prefill_dp_rank,
         stage=FRONTEND),
    Rule("REPLAYSPEC-TOKEN-IDS", SECTION, "`input_token_ids` must hold exactly `input_tokens` token ids",
         "make `input_tokens` the number of ids in `input_token_ids`", _token_ids, stage=FRONTEND),
    Rule("REPLAYSPEC-ENGINE-MODE", SECTION, "`engine.mode` contradicts `topology.kind`",
         "remove `engine.mode`: `topology.kind` sets the mode", _engine_mode, stage=FRONTEND),
    Rule("REPLAYSPEC-INITIAL-WORKERS", SECTION, "`initial_workers` contradicts the role's `parallelism.replicas`",
         "give the number of workers once, as `initial_workers`", _initial_workers, stage=FRONTEND),
    Rule("REPLAYSPEC-DP-RANK", SECTION, "a request's DP rank must be less than its role's "
         "`parallelism.attention_data` (`dp_rank`: the aggregated or decode role; `prefill_dp_rank`: the prefill role)",
         "use a rank from 0 to attention_data - 1, or raise `attention_data`",
         _pinned_beyond("dp_rank", "prefill_dp_rank", lambda spec, role: par(spec, role, "attention_data"))),
    Rule("REPLAYSPEC-WORKER-IDX", SECTION, "a request's worker index must be less than its role's largest worker "
         "count (`worker_idx`: the aggregated or decode role; `prefill_worker_idx`: the prefill role)",
         "use a worker from 0 to the role's workers - 1, or add workers",
         _pinned_beyond("worker_idx", "prefill_worker_idx", _most_workers)),
    Rule("REPLAYSPEC-KV-HINT", SECTION, "a kv_hint must name a rank that exists: `rank` below the role's DP ranks "
         "(workers x attention_data), or with `worker_idx` a worker of the role and `rank` below attention_data "
         "(the role is prefill in P/D, else aggregated)",
         "name an existing rank, or drop the hint", _unknown_hint_ranks),
    Rule("BELADY-OPEN-LOOP", BELADY, "Belady eviction needs an open-loop trace (no `max_in_flight`)",
         "remove `max_in_flight`", _belady_closed_loop),
    Rule("BELADY-TOKEN-IDS", BELADY, "Belady eviction needs `input_token_ids` on every request (it looks ahead at "
         "the blocks each request will use)", "give this request its prompt token ids", _belady_token_ids),
    Rule("BELADY-PREFIX-MATCH-UNIT", BELADY, "Belady eviction cannot be combined with `prefix_match_unit`",
         "remove `prefix_match_unit`",
         role_check(lambda s, r: _belady(s) and s.user_set(role_pointer(r, "kv_cache", "prefix_match_unit")),
                    "kv_cache", "prefix_match_unit")),
)

VERSION = RULES[0]
FRONTEND_RULES = tuple(rule for rule in RULES[1:] if rule.stage == FRONTEND)
