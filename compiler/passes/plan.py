"""Plan pass: the resolved Spec as an immutable plan with one canonical JSON form.

The plan is what later stages (the replay runtime, other tools) consume: the
resolved engine and traffic settings, per-role geometry, and the provenance of
every value kvreplay filled in.  Canonical JSON = sorted keys, two-space
indent, shortest float repr, trailing newline; byte-identical across runs.
Beside the JSON form the pass emits `records`, the finished plan the replay
runtime reads (`finish`), which carries the parsed trace rows the JSON does not.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from pyrsistent import PMap, freeze, thaw

from ..plan_records import ReplayPlan, TraceRow
from ..spec import Spec
from . import finish

PLAN_VERSION = 1


@dataclass(frozen=True)
class Plan:
    data: PMap
    records: ReplayPlan | None = field(default=None, compare=False, repr=False)
    not_replayable: str = field(default="", compare=False)  # why `records` is None

    def to_dict(self) -> dict:
        return thaw(self.data)

    def canonical_json(self) -> bytes:
        return canonical_json(self.to_dict())


def canonical_json(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def run(spec: Spec, trace_rows: tuple[TraceRow, ...] = ()) -> Plan:
    data = {
        "kvreplay_plan": PLAN_VERSION,
        "frontend": spec.frontend,
        "engine": thaw(spec.doc.get("engine")),
        "traffic": thaw(spec.doc.get("traffic")),
        "geometry": thaw(spec.geometry),
        "catalog": {"model": thaw(spec.model), "hardware": thaw(spec.hardware)},
        "provenance": thaw(spec.origin),
    }
    for section in ("recommend", "opal"):  # (`opal`: an opal config's own settings, see compiler/frontends/opal/)
        if section in spec.doc:
            data[section] = thaw(spec.doc[section])
    try:
        return Plan(freeze(data), finish.run(data, trace_rows))
    except finish.NotReplayable as error:
        return Plan(freeze(data), None, str(error))
