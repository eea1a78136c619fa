"""The agentic source a plays trace and its `traffic.load` make: the plays, and how the load replays them.

`weka`, `agentic_mooncake` and `mooncake-delta` traces are read into plays by their readers; this module
picks the reader and adds the load's controls: `agentic_lanes` (with `concurrency` load, a session trace's
concurrency is its lanes: one session per slot), `agentic_warmup`, `agentic_snapshot` and `agentic_profile`
(defaults as AISimulate documents them: 3600 s admission, 30 s grace, 10 s cancel drain, 300 s and 10 s idle
caps).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .agentic_records import AgenticProfile, AgenticSource
from .durations import seconds_to_ns
from .mooncake_graph import read_agentic_mooncake, read_delta
from .weka_trace import read_weka

PROFILE_DEFAULTS = {"duration_seconds": 3600.0, "response_grace_seconds": 30.0, "cancel_drain_seconds": 10.0,
                    "tree_idle_cap_seconds": 300.0, "global_idle_cap_seconds": 10.0}


def profile_of(options: dict | None) -> AgenticProfile | None:
    if options is None:
        return None
    given = {**PROFILE_DEFAULTS, **options}
    return AgenticProfile(*(seconds_to_ns(given[key]) for key in PROFILE_DEFAULTS))


def agentic_source(source: dict, load: dict, base_dir: Path, speedup: float) -> AgenticSource:
    lanes = load.get("agentic_lanes")
    if load.get("type") == "concurrency":
        lanes, speedup = load.get("concurrency", 10), 1.0
    if source["format"] == "weka":
        found = read_weka(source, base_dir, speedup, lanes)
    elif source["format"] == "agentic_mooncake":
        found = read_agentic_mooncake(source, base_dir, speedup)
    else:
        found = read_delta(source, base_dir, speedup)
    snapshot = load.get("agentic_snapshot")
    return replace(found, lanes=lanes, warmup=bool(load.get("agentic_warmup", False)),
                   snapshot_seed=None if snapshot is None else snapshot["seed"],
                   profile=profile_of(load.get("agentic_profile")))
