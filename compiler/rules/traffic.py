"""Rules of the traffic block: which stop conditions and loads fit which sources."""
from __future__ import annotations

from ..agentic_records import AGENTIC_FORMATS
from ..spec import Spec
from .rule import Rule

SECTION = "REFERENCE.md: traffic.stop / traffic.load"
SESSION_SOURCES = ("synthetic-session", "agentx")


def _source(spec: Spec) -> str:
    return spec.get("/traffic/source/type", "synthetic")


def _stop_keys(spec: Spec) -> set[str]:
    return set(spec.get("/traffic/stop", {}) or {})


def _exactly_one(source_types: tuple[str, ...], keys: tuple[str, ...]):
    def check(spec: Spec):
        if _source(spec) in source_types and len(_stop_keys(spec) & set(keys)) != 1:
            yield "/traffic/stop"
    return check


def _foreign_stops(spec: Spec):
    allowed = {"synthetic": {"requests", "requests_per_load_unit"},
               "trace": {"max_virtual_time_seconds"}}.get(_source(spec), {"sessions", "sessions_per_load_unit"})
    for key in sorted(_stop_keys(spec) - allowed):
        yield f"/traffic/stop/{key}"


def _rate_keys(spec: Spec):
    load = spec.get("/traffic/load", {}) or {}
    if load.get("type") not in ("poisson", "constant_rate"):
        return
    wanted = "sessions_per_second" if _source(spec) in SESSION_SOURCES else "requests_per_second"
    given = [k for k in ("requests_per_second", "sessions_per_second") if k in load]
    if given != [wanted]:
        yield "/traffic/load"


def _trace_timestamps(spec: Spec):
    is_trace = _source(spec) == "trace"
    uses_timestamps = spec.get("/traffic/load/type") == "trace_timestamps"
    if uses_timestamps and not is_trace:
        yield "/traffic/load/type"


def _trace_load(spec: Spec):
    if _source(spec) == "trace" and spec.get("/traffic/load/type") not in ("trace_timestamps", "concurrency"):
        yield "/traffic/load/type"


def _one_trace_file(spec: Spec):
    if _source(spec) == "trace" and len(spec.get("/traffic/source/paths") or ()) > 1:
        yield "/traffic/source/paths"


def _weka(spec: Spec) -> bool:
    """An agentic trace (AISimulate's agentic formats: `weka`, `agentic_mooncake`)."""
    return _source(spec) == "trace" and spec.get("/traffic/source/format") in AGENTIC_FORMATS


def _agentic_load(spec: Spec):
    if _weka(spec) and spec.get("/traffic/load/type") != "trace_timestamps":
        yield "/traffic/load/type"


def _agentic_stop(spec: Spec):
    if _weka(spec) and "max_virtual_time_seconds" in _stop_keys(spec):
        yield "/traffic/stop/max_virtual_time_seconds"


def _agentic_fields(spec: Spec):
    pointers = () if _weka(spec) else ("/traffic/load/agentic_lanes", "/traffic/load/agentic_warmup",
                                       "/traffic/load/agentic_snapshot", "/traffic/load/agentic_profile")
    if spec.get("/traffic/source/format") != "weka" or _source(spec) != "trace":
        pointers += ("/traffic/source/nested_timestamp_basis",)
    for pointer in pointers:
        if spec.user_set(pointer):
            yield pointer


def _agentic_warmup(spec: Spec):
    if _weka(spec) and spec.get("/traffic/load/agentic_warmup") and not spec.get("/traffic/load/agentic_lanes"):
        yield "/traffic/load/agentic_warmup"


def _agentic_snapshot(spec: Spec):
    if _weka(spec) and spec.has("/traffic/load/agentic_snapshot") and not spec.get("/traffic/load/agentic_lanes"):
        yield "/traffic/load/agentic_snapshot"


def _agentic_profile(spec: Spec):
    load = spec.get("/traffic/load", {}) or {}
    if _weka(spec) and "agentic_profile" in load and not (load.get("agentic_lanes") and "agentic_snapshot" in load):
        yield "/traffic/load/agentic_profile"


def _delta_aggregated(spec: Spec):
    if _source(spec) == "trace" and spec.get("/traffic/source/format") == "mooncake-delta" \
            and spec.get("/engine/mode") == "disaggregated":
        yield "/traffic/source/format"


def _shared_prefix(spec: Spec):
    pointer = "/traffic/source/shared_prefix_tokens"
    if spec.user_set(pointer) and not (_source(spec) == "trace" and spec.get("/traffic/source/format") == "azure"):
        yield pointer


def _prefix_groups(spec: Spec):
    session = spec.get("/traffic/source/session") or {}
    if _source(spec) == "synthetic-session" and session.get("shared_prefix_ratio", 0) > 0 \
            and session.get("prefix_groups", 0) < 1:
        pointer = "/traffic/source/session/prefix_groups"
        yield pointer if spec.user_set(pointer) else "/traffic/source/session"


def _cached_prefix(spec: Spec):
    if _source(spec) == "synthetic" and (spec.get("/traffic/source/cached_prefix_tokens") or 0) > \
            (spec.get("/traffic/source/input_tokens") or 0):
        yield "/traffic/source/cached_prefix_tokens"


RULES = (
    Rule("TRAFFIC-STOP-REQUESTS", SECTION,
         "synthetic traffic needs exactly one of `stop.requests` and `stop.requests_per_load_unit`",
         "add `stop: {requests: 100}` (or `requests_per_load_unit`), not both",
         _exactly_one(("synthetic",), ("requests", "requests_per_load_unit"))),
    Rule("TRAFFIC-STOP-SESSIONS", SECTION,
         "session traffic needs exactly one of `stop.sessions` and `stop.sessions_per_load_unit`",
         "add `stop: {sessions: 16}` (or `sessions_per_load_unit`), not both",
         _exactly_one(SESSION_SOURCES, ("sessions", "sessions_per_load_unit"))),
    Rule("TRAFFIC-STOP-KIND", SECTION,
         "this stop condition does not apply to this traffic source (traces stop only on "
         "`max_virtual_time_seconds`, synthetic traffic on a request count, sessions on a session count)",
         "remove this key from `traffic.stop`",
         _foreign_stops),
    Rule("TRAFFIC-LOAD-RATE", SECTION,
         "a rate load needs exactly one rate: `sessions_per_second` for session traffic, "
         "`requests_per_second` otherwise",
         "keep the one rate that matches `traffic.source.type`",
         _rate_keys),
    Rule("TRAFFIC-LOAD-TIMESTAMPS", SECTION,
         "`trace_timestamps` load needs a `trace` source (synthetic requests carry no timestamps)",
         "use `concurrency`, `poisson` or `constant_rate` load",
         _trace_timestamps),
    Rule("TRAFFIC-TRACE-LOAD", SECTION, "a trace source replays with `trace_timestamps` or `concurrency` load only",
         "use `load: {type: trace_timestamps}` (or `concurrency`)", _trace_load),
    Rule("TRAFFIC-TRACE-PATHS", SECTION, "a Mooncake trace source reads exactly one file",
         "give one path (concatenate the traces first)", _one_trace_file),
    Rule("TRAFFIC-AGENTIC-LOAD", SECTION, "an agentic trace (`weka`, `agentic_mooncake`) replays with `trace_timestamps` load only: its "
         "requests start from their dependencies", "use `load: {type: trace_timestamps}` (`agentic_lanes` caps plays)",
         _agentic_load),
    Rule("TRAFFIC-AGENTIC-STOP", SECTION, "an agentic trace (`weka`, `agentic_mooncake`) runs its plays to their end: "
         "`max_virtual_time_seconds` does not apply", "remove `traffic.stop.max_virtual_time_seconds`", _agentic_stop),
    Rule("TRAFFIC-AGENTIC-WARMUP", SECTION, "`agentic_warmup` prepares each lane: it needs `agentic_lanes`",
         "add `agentic_lanes: N` to `traffic.load`", _agentic_warmup),
    Rule("TRAFFIC-AGENTIC-SNAPSHOT", SECTION, "`agentic_snapshot` cuts each lane's play: it needs `agentic_lanes`",
         "add `agentic_lanes: N` to `traffic.load`", _agentic_snapshot),
    Rule("TRAFFIC-AGENTIC-PROFILE", SECTION, "`agentic_profile` recycles the snapshot lanes: it needs `agentic_lanes` "
         "and `agentic_snapshot`", "add `agentic_lanes: N` and `agentic_snapshot: {seed: 42}`", _agentic_profile),
    Rule("TRAFFIC-AGENTIC-FIELDS", SECTION, "`agentic_lanes`, `agentic_warmup`, `agentic_snapshot` and "
         "`agentic_profile` apply to an agentic trace (`weka`, `agentic_mooncake`), `nested_timestamp_basis` to `weka`",
         "remove the field, or use an agentic trace format", _agentic_fields),
    Rule("TRAFFIC-DELTA-AGGREGATED", SECTION, "a `mooncake-delta` trace replays on aggregated workers only (as "
         "AISimulate)", "use `engine.mode: aggregated`, or write the trace's full prompts (`format: mooncake`)",
         _delta_aggregated),
    Rule("TRAFFIC-SHARED-PREFIX", SECTION, "`shared_prefix_tokens` declares the shared prefix of an Azure CSV trace "
         "(it names no prefix ids); other traces carry their own", "remove it, or use `format: azure`", _shared_prefix),
    Rule("TRAFFIC-PREFIX-GROUPS", SECTION, "a shared prefix (`shared_prefix_ratio` > 0) needs `prefix_groups` >= 1",
         "set `prefix_groups` to the number of distinct shared prefixes", _prefix_groups),
    Rule("TRAFFIC-CACHED-PREFIX", SECTION, "`cached_prefix_tokens` cannot exceed `input_tokens`",
         "lower `cached_prefix_tokens`", _cached_prefix),
)
