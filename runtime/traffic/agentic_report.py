"""The summary's agentic sections: qualification, play outcomes, snapshots, phases and the profile.

Names are AISimulate's where it has them (docs/replay/workloads.md, "Agentic results"):
`agentic_qualification`, `agentic_play_outcomes`, `agentic_snapshots`, `agentic_phases` and
`agentic_profile`.  A `mooncake-delta` trace is session traffic, not agentic: it adds nothing.  After warm-up
the play outcomes' times count from the barrier, as the measured requests' (agentic_measured.py); the profile's
stay absolute, as AISimulate's.
"""
from __future__ import annotations

from .agentic_measured import from_origin

AGENTIC_FORMATS = ("weka", "agentic_mooncake")


def _profile(traffic) -> dict:
    profile = traffic.profile
    return {"duration_seconds": profile.duration_ns / 1e9,
            "response_grace_seconds": profile.response_grace_ns / 1e9,
            "cancel_drain_seconds": profile.cancel_drain_ns / 1e9,
            "tree_idle_cap_seconds": profile.tree_idle_cap_ns / 1e9,
            "global_idle_cap_seconds": profile.global_idle_cap_ns / 1e9,
            "admission_start_ms": (traffic.barrier_ns or 0) / 1e6, "deadline_ms": traffic.deadline_ns / 1e6,
            "plays_started": traffic.plays_started, "recycled_plays": traffic.plays_started - len(traffic.snapshots),
            "never_issued_requests": traffic.never_issued, "canceled_requests": traffic.open_total,
            "idle_shifts": traffic.guards.shifts}


def summary_section(traffic) -> dict:
    source = traffic.source
    if source.input_format not in AGENTIC_FORMATS:
        return {}
    running = {id(r): r for r, _ in traffic._node_of.values()}  # plays the run's stop cut short
    running.update((id(r), r) for r in traffic.holding())  # and plays whose releases fell past the deadline
    unfinished = [{"play_id": traffic.play_name(r), "status": "incomplete", "requests": len(r.play.nodes),
                   "ended_requests": r.ended, "start_ms": r.start_ns / 1e6, "end_ms": None} for r in running.values()]
    outcomes = sorted(traffic.outcomes + unfinished, key=lambda o: (o["start_ms"], o["play_id"]))
    if source.warmup and traffic.barrier_ns:
        outcomes = [{**o, "start_ms": from_origin(o["start_ms"], traffic.barrier_ns),
                     "end_ms": from_origin(o["end_ms"], traffic.barrier_ns)} for o in outcomes]
    completed = sum(o["status"] == "completed" for o in outcomes)
    planned = len(traffic.snapshots) if traffic.snapshots else len(source.plays)
    out = {"agentic_qualification": "functional_only", "agentic_input_format": source.input_format,
           "agentic_lanes": source.lanes}
    if source.input_format == "weka":
        out["weka_nested_timestamp_basis"] = source.basis
    out["agentic_play_outcomes"] = outcomes
    if traffic.snapshots:
        out["agentic_snapshots"] = traffic.snapshots
    if source.warmup:
        phases = {"preparation_requests": traffic.warm_sent,
                  "profile_start_ms": None if traffic.barrier_ns is None else traffic.barrier_ns / 1e6}
        if traffic.snapshots:
            phases["primer_requests"] = traffic.primers_sent
        out["agentic_phases"] = phases
    if traffic.profile is not None:
        out["agentic_profile"] = _profile(traffic)
        planned = max(planned, len(outcomes))
    out["completed_trajectories"] = completed
    out["incomplete_trajectories"] = max(planned, len(outcomes)) - completed
    return out
