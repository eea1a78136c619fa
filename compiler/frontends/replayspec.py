"""Native ReplaySpec v1 front-end: check the JSON document, then lower it to the canonical Spec.

    ReplaySpec document
      -> REPLAYSPEC-VERSION (a document of another version is not read further)
      -> schema/replayspec.schema.json (its `engine` is the predict schema's, by `$ref`)
      -> the `frontend` rules of compiler/rules/replayspec.py (ids, times, token counts, ...)
      -> lowering: the canonical Spec in the predict shape, `frontend = "replayspec"`

Lowering maps `topology.kind` to `engine.mode`, each pool's `initial_workers`
to its role's `parallelism.replicas` (unless written there), and the request
list to a traffic block the predict shape does not have:

    traffic:
      source: {type: requests, requests: [...]}       # the requests as written
      load:   {type: replay, max_in_flight?: N}       # max_in_flight present = closed loop
      replay: {max_virtual_time_seconds?, record_per_request?, handoff_latency_ms?,
               startup_delay_ms?: {<role>: ms}}      # only the keys the spec gives

(The soft cutoff is kept under `traffic.replay`, not `traffic.stop`: the traffic
rules allow `stop` keys per source type and know no `requests` source.)
These variants exist only in the schema the validate pass uses for this
front-end (`lowered_schema`, the predict schema extended in code), so predict
YAML still rejects them.  Values the lowering moved or made record their
provenance (``inferred(topology.kind)``).  Rules of this front-end blame the
ReplaySpec's own pointers (`/requests/3/id`), which the source span table
locates; for rules that blame a lowered-only pointer (a role made from a
topology pool) the lowered Spec carries `LoweredSpans`, which maps it back to
where it was written (the pipeline still locates with the source table, which
falls back to the nearest written ancestor).

Speed: a plan must stay fast for long request lists.  Requests are checked
first by a predicate compiled from the request schema (`schema_fast`); only
the ones it cannot vouch for (and one more, for the shape) go through jsonschema,
for its diagnostics.  The request
list is lowered as immutable JSON records (`FrozenList` / `FrozenDict`), which
pyrsistent's freeze/thaw pass through untouched and orjson writes natively; read
them by item (`spec.get("/traffic/source/requests")[i]["id"]`): `Spec.get`
pointers stop at a record.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from functools import lru_cache
from typing import Any, Iterable

from pyrsistent import PMap, freeze, pmap, thaw

from ...schema import PREDICT, REPLAYSPEC, load_schema
from ..diagnostics import CompileError, Diagnostic
from ..load import Loaded
from ..schema_check import documents, errors_of, strict_validator, validator
from ..schema_fast import Check, compile_check
from ..rules.replayspec import FRONTEND_RULES, VERSION
from ..spans import Span, SpanTable
from ..spec import Spec
from .fast_json import FrozenList, frozen_json

KIND = "replayspec"
POOLS = {"aggregated": (("workers", "aggregated"),), "disaggregated": (("prefill", "prefill"), ("decode", "decode"))}


@lru_cache(maxsize=None)
def request_check() -> Check | None:
    schema = load_schema(REPLAYSPEC)
    return compile_check(schema["$defs"]["request"], schema, documents())


def _all_certainly_valid(requests: Iterable) -> bool:
    check = request_check()
    return check is not None and all(map(check, requests))


# ------------------------------------------------------------------ schemas

def source_schema_errors(document: dict) -> list[Diagnostic]:
    """The ReplaySpec document against schema/replayspec.schema.json, all errors at once.

    jsonschema sees the document with only the requests the fast check could not
    vouch for (or the first one, for the shape), and its pointers are mapped back
    to the requests' own indices.
    """
    requests, check = document.get("requests"), request_check()
    if not isinstance(requests, list) or not requests or check is None:
        return errors_of(validator(REPLAYSPEC), document)
    shown = [i for i, request in enumerate(requests) if not check(request)] or [0]
    diagnostics = errors_of(validator(REPLAYSPEC), {**document, "requests": [requests[i] for i in shown]})
    return [_renumber(d, shown) for d in diagnostics]


def _renumber(diagnostic: Diagnostic, shown: list[int]) -> Diagnostic:
    parts = diagnostic.pointer.split("/")
    if len(parts) > 2 and parts[1] == "requests" and parts[2].isdigit():
        parts[2] = str(shown[int(parts[2])])
        return replace(diagnostic, pointer="/".join(parts))
    return diagnostic


@lru_cache(maxsize=None)
def lowered_schema() -> dict:
    """The predict schema with the `requests` source, the `replay` load and `traffic.replay` (built once, in code)."""
    schema = copy.deepcopy(load_schema(PREDICT))
    schema["$id"] = schema["$id"].replace(PREDICT, "replayspec-lowered.schema.json")
    schema["title"] = "kvreplay canonical Spec lowered from a native ReplaySpec"
    schema["description"] = "The predict shape plus the request-list traffic only the ReplaySpec front-end writes."
    schema["required"] = ["engine", "traffic"]
    schema["properties"].pop("recommend", None)
    defs = schema["$defs"]
    ms = {"type": "number", "minimum": 0, "x-unit": "ms"}
    defs["source_requests"] = {
        "type": "object", "additionalProperties": False, "required": ["type", "requests"],
        "properties": {"type": {"const": "requests"},
                       "requests": {"type": "array", "minItems": 1,
                                    "items": {"$ref": REPLAYSPEC + "#/$defs/request"}}}}
    defs["load_replay"] = {
        "type": "object", "additionalProperties": False, "required": ["type"],
        "properties": {"type": {"const": "replay"}, "max_in_flight": {"type": "integer", "minimum": 1}}}
    defs["replay"] = {
        "type": "object", "additionalProperties": False,
        "description": "ReplaySpec settings with no predict counterpart.",
        "properties": {
            "max_virtual_time_seconds": {"type": "number", "exclusiveMinimum": 0, "x-unit": "s"},
            "record_per_request": {"type": "boolean"},
            "handoff_latency_ms": ms,
            "startup_delay_ms": {"type": "object", "additionalProperties": False,
                                 "properties": {role: ms for role in ("aggregated", "prefill", "decode")}}}}
    for variant, name, key in (("source", "source_requests", "requests"), ("load", "load_replay", "replay")):
        defs[variant]["properties"]["type"]["enum"].append(key)
        defs[variant]["allOf"].append({"if": {"properties": {"type": {"const": key}}, "required": ["type"]},
                                       "then": {"$ref": f"#/$defs/{name}"}})
    defs["traffic"]["properties"]["replay"] = {"$ref": "#/$defs/replay"}
    defs["traffic"]["required"] = ["source", "load"]
    return schema


@lru_cache(maxsize=None)
def lowered_validator():
    return strict_validator(lowered_schema())


def lowered_schema_errors(spec: Spec) -> list[Diagnostic]:
    """The validate pass for this front-end: the lowered document against `lowered_schema`."""
    doc = spec.doc
    requests = spec.get("/traffic/source/requests")
    if isinstance(requests, list) and len(requests) > 1 and _all_certainly_valid(requests):
        doc = doc.transform(["traffic", "source", "requests"], requests[:1])
    return errors_of(lowered_validator(), thaw(doc))


# ------------------------------------------------------------------ positions

class LoweredSpans(SpanTable):
    """The source document's span table, read through lowered -> source pointer aliases."""

    def __init__(self, base: SpanTable, aliases: dict[str, str]):
        super().__init__()
        self._base = base
        self.aliases = dict(aliases)
        self._ordered = sorted(self.aliases.items(), key=lambda item: -len(item[0]))

    def source_pointer(self, pointer: str) -> str:
        for lowered, written in self._ordered:
            if pointer == lowered or pointer.startswith(lowered + "/"):
                return written + pointer[len(lowered):]
        return pointer

    def value(self, pointer: str) -> Span | None:
        return self._base.value(self.source_pointer(pointer))

    def key(self, pointer: str) -> Span | None:
        return self._base.key(self.source_pointer(pointer))

    def find(self, pointer: str, key: bool = False) -> Span:
        return self._base.find(self.source_pointer(pointer), key)

    def with_overrides(self, extra) -> "LoweredSpans":
        return LoweredSpans(self._base.with_overrides({self.source_pointer(k): v for k, v in extra.items()}),
                            self.aliases)


# ------------------------------------------------------------------ lowering

def freeze_requests(requests: list) -> FrozenList:
    """The request list as immutable records (read them by item, not with `Spec.get` pointers)."""
    return frozen_json(requests)


def lower_document(document: dict, requests: FrozenList) -> tuple[PMap, dict, dict]:
    """(lowered document, provenance, lowered -> source pointer aliases) of a checked ReplaySpec."""
    topology = document["topology"]
    kind = topology["kind"]
    engine = copy.deepcopy(document["engine"])
    origin: dict[str, str] = {}
    aliases = {"/traffic": "", "/traffic/source": "/requests", "/traffic/source/requests": "/requests"}
    origin["/traffic/source/type"] = "inferred(ReplaySpec: the requests as written)"
    origin["/traffic/load/type"] = "inferred(ReplaySpec: arrivals at arrival_time_ms" + \
        (", at most max_in_flight in flight)" if "max_in_flight" in document else ", open loop)")
    if "mode" not in engine:
        engine["mode"] = kind
        origin["/engine/mode"] = "inferred(topology.kind)"
        aliases["/engine/mode"] = "/topology/kind"
    startup: dict[str, Any] = {}
    for pool, role in POOLS[kind]:
        written = topology.get(pool)
        if written is None:
            continue
        where, role_at = f"/topology/{pool}", f"/engine/workers/{role}"
        if "workers" not in engine:
            aliases["/engine/workers"] = "/topology"
        workers = engine.setdefault("workers", {})
        if role not in workers:
            aliases[role_at] = where
        settings = workers.setdefault(role, {})
        if "initial_workers" in written and "replicas" not in settings.get("parallelism", {}):
            settings.setdefault("parallelism", {})["replicas"] = written["initial_workers"]
            origin[role_at + "/parallelism/replicas"] = f"inferred(topology.{pool}.initial_workers)"
            aliases[role_at + "/parallelism/replicas"] = where + "/initial_workers"
        if "schedule" in written and "scaling" not in settings:
            settings["scaling"] = [{"at_seconds": step["at_ms"] / 1000, "replicas": step["workers"]}
                                   for step in written["schedule"]]
            origin[role_at + "/scaling"] = f"inferred(topology.{pool}.schedule)"
            aliases[role_at + "/scaling"] = where + "/schedule"
        if "startup_delay_ms" in written:
            startup[role] = written["startup_delay_ms"]
            aliases[f"/traffic/replay/startup_delay_ms/{role}"] = where + "/startup_delay_ms"

    load: dict[str, Any] = {"type": "replay"}
    if "max_in_flight" in document:
        load["max_in_flight"] = document["max_in_flight"]
        aliases["/traffic/load/max_in_flight"] = "/max_in_flight"
    replay: dict[str, Any] = {}
    if "max_sim_time_ms" in document:
        replay["max_virtual_time_seconds"] = document["max_sim_time_ms"] / 1000
        origin["/traffic/replay/max_virtual_time_seconds"] = "inferred(max_sim_time_ms / 1000)"
        aliases["/traffic/replay/max_virtual_time_seconds"] = "/max_sim_time_ms"
    if "record_per_request" in document:
        replay["record_per_request"] = document["record_per_request"]
        aliases["/traffic/replay/record_per_request"] = "/record_per_request"
    if "handoff_latency_ms" in topology:
        replay["handoff_latency_ms"] = topology["handoff_latency_ms"]
        aliases["/traffic/replay/handoff_latency_ms"] = "/topology/handoff_latency_ms"
    if startup:
        replay["startup_delay_ms"] = startup

    traffic = pmap({"source": pmap({"type": "requests", "requests": requests}), "load": freeze(load),
                    **({"replay": freeze(replay)} if replay else {})})
    return pmap({"engine": freeze(engine), "traffic": traffic}), origin, aliases


def _stop(diagnostics) -> None:
    diagnostics = list(diagnostics)
    if diagnostics:
        raise CompileError(diagnostics)


def lower(loaded: Loaded, source: str, base_dir=None) -> Spec:
    """The checked, lowered Spec (a ReplaySpec names no files: `base_dir` is unused)."""
    document = loaded.document
    written = Spec(doc=pmap({k: v for k, v in document.items() if k == "version"}), source=source,
                   frontend=KIND, spans=loaded.spans)
    _stop(VERSION.diagnostics(written))
    _stop(source_schema_errors(document))
    requests = freeze_requests(document["requests"])
    written = Spec(doc=pmap({k: requests if k == "requests" else freeze(v) for k, v in document.items()}),
                   source=source, frontend=KIND, spans=loaded.spans)
    _stop(d for rule in FRONTEND_RULES for d in rule.diagnostics(written))
    doc, origin, aliases = lower_document(document, requests)
    return Spec(doc=doc, source=source, frontend=KIND, origin=pmap(origin), spans=LoweredSpans(loaded.spans, aliases))
