"""Plan pass: the resolved Spec as an immutable plan with one canonical JSON form.

The plan is what later stages (the replay runtime, other tools) consume: the
resolved engine and traffic settings, per-role geometry, and the provenance of
every value kvreplay filled in.  Canonical JSON = sorted keys, two-space
indent, shortest float repr, trailing newline; byte-identical across runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import orjson
from pyrsistent import PMap, freeze, thaw

from ..spec import Spec

PLAN_VERSION = 1


@dataclass(frozen=True)
class Plan:
    data: PMap

    def to_dict(self) -> dict:
        return thaw(self.data)

    def canonical_json(self) -> bytes:
        return canonical_json(self.to_dict())


def canonical_json(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def run(spec: Spec) -> Plan:
    data = {
        "kvreplay_plan": PLAN_VERSION,
        "frontend": spec.frontend,
        "engine": thaw(spec.doc.get("engine")),
        "traffic": thaw(spec.doc.get("traffic")),
        "geometry": thaw(spec.geometry),
        "catalog": {"model": thaw(spec.model), "hardware": thaw(spec.hardware)},
        "provenance": thaw(spec.origin),
    }
    if "recommend" in spec.doc:
        data["recommend"] = thaw(spec.doc["recommend"])
    return Plan(freeze(data))
