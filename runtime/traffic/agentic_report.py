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
OUTCOME_TIMES = ("start_ms", "end_ms", "causal_terminal_ms", "settled_at_ms")  # (counted from a warm-up barrier)


def _profile(traffic) -> dict:
    """The profile's options and counts.  Its engines acknowledge a cancel at once (shell/arrivals.py cancels every
    open request at the response-grace deadline), so the cancel drain ends there, within its bound
    (`cancel_drain_deadline_ms`), never timed out: AISimulate's offline runtimes do the same (continuous-profiles.md,
    "the client drain ends immediately")."""
    profile = traffic.profile
    grace_end_ns = traffic.deadline_ns + profile.response_grace_ns
    return {"response_grace_deadline_ms": grace_end_ns / 1e6,
            "cancel_drain_deadline_ms": (grace_end_ns + profile.cancel_drain_ns) / 1e6,
            "cancel_drain_timed_out": False,
            "duration_seconds": profile.duration_ns / 1e9,
            "response_grace_seconds": profile.response_grace_ns / 1e9,
            "cancel_drain_seconds": profile.cancel_drain_ns / 1e9,
            "tree_idle_cap_seconds": profile.tree_idle_cap_ns / 1e9,
            "global_idle_cap_seconds": profile.global_idle_cap_ns / 1e9,
            "admission_start_ms": (traffic.barrier_ns or 0) / 1e6, "deadline_ms": traffic.deadline_ns / 1e6,
            "plays_started": traffic.plays_started, "recycled_plays": traffic.plays_started - len(traffic.snapshots),
            "never_issued_requests": traffic.never_issued, "canceled_requests": traffic.open_total,
            "idle_shifts": traffic.guards.shifts}


def settled_outcome(name: str, running, now_ns: int) -> dict:
    """A play that settled at `now_ns`: `failed` when a request of it was rejected (AISimulate's outcome, with
    `failure_status` and `failure_request_id`), else completed or (nodes never released) incomplete."""
    total = len(running.play.nodes)
    status = "failed" if running.failure else "completed" if running.ended == total else "incomplete"
    outcome = {"play_id": name, "status": status, "requests": total, "ended_requests": running.ended,
               "start_ms": running.start_ns / 1e6, "end_ms": now_ns / 1e6, "causal_terminal_ms": now_ns / 1e6,
               "settled_at_ms": now_ns / 1e6}
    if running.failure:
        outcome["failure_status"], outcome["failure_request_id"] = running.failure
    return outcome


def _unfinished(traffic) -> list[dict]:
    """The plays the run's stop cut short (requests still open) and those whose releases fell past the deadline,
    `incomplete`.  A profile cancels the open requests at its stop: as AISimulate's, such a play names its first
    open request, `failure_status` canceled, its causal terminal the cancel."""
    running: dict[int, tuple] = {}
    for index, (play, node) in sorted(traffic._node_of.items()):
        running.setdefault(id(play), (play, node))
    held = [(play, None) for play in traffic.holding() if id(play) not in running]
    out = []
    for play, node in [*running.values(), *held]:
        outcome = {"play_id": traffic.play_name(play), "status": "incomplete", "requests": len(play.play.nodes),
                   "ended_requests": play.ended, "start_ms": play.start_ns / 1e6, "end_ms": None}
        if node is not None and traffic.profile is not None:
            outcome.update(causal_terminal_ms=traffic.stop_ns / 1e6, failure_status="canceled",
                           failure_request_id=traffic.request_name(play, node))
        out.append(outcome)
    return out


def summary_section(traffic) -> dict:
    source = traffic.source
    if source.input_format not in AGENTIC_FORMATS:
        return {}
    outcomes = sorted(traffic.outcomes + _unfinished(traffic), key=lambda o: (o["start_ms"], o["play_id"]))
    if source.warmup and traffic.barrier_ns:
        outcomes = [{**o, **{key: from_origin(o[key], traffic.barrier_ns) for key in OUTCOME_TIMES if key in o}}
                    for o in outcomes]
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
    out["total_trajectories"] = max(planned, len(outcomes))
    out["incomplete_trajectories"] = out["total_trajectories"] - completed  # (failed ones too, as AISimulate's)
    return out
