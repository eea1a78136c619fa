"""Agentic snapshot and continuous-profile loads (`agentic_snapshot`, `agentic_profile`) on the AgentX fixture.

The fixture's play (examples/agentic/weka-g2-restore.jsonl) has requests recorded at 0, 100, 200 and 300 ms:
the parent (conversation root), its subagent's child (waits for the parent), the parent's resume (waits for
the child, + 98 ms) and a side request (a root at 300 ms).  A snapshot cuts the play between 25% and 75% of
that 300 ms span; the requests before the cut are history, the rest keep their timers from the cut.  Fixed
timing: 2 ms a prefill, each output 1 token, so a request ends 2 ms after it arrives on an idle worker.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvreplay.cli import main
from kvreplay.runtime.traffic.agentic_snapshot import SNAPSHOT_STREAM
from kvreplay.runtime.traffic.rng import uniform

from .support import EXAMPLES, output_bytes, read_outputs

AGENTIC = EXAMPLES / "agentic"
RECORDED_MS = [0.0, 100.0, 200.0, 300.0]


def run(tmp_path, load: str, name: str = "o"):
    text = (AGENTIC / "agentx-g2-local.yaml").read_text().replace("{type: trace_timestamps, agentic_lanes: 1}", load)
    (tmp_path / "weka-g2-restore.jsonl").write_bytes((AGENTIC / "weka-g2-restore.jsonl").read_bytes())
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / name), "--capture-per-request",
                 "--no-progress"]) == 0
    summary, records = read_outputs(tmp_path / name)
    return summary, sorted(records, key=lambda r: r["arrival_time_ms"])


def cut_ms(seed: int, lane: int) -> float:
    """The documented draw: uniform between 25% and 75% of the recorded span (kvreplay's generator)."""
    return (0.25 + 0.5 * uniform(seed, SNAPSHOT_STREAM + lane, 0)) * (RECORDED_MS[-1] - RECORDED_MS[0])


def test_a_snapshot_replays_the_requests_after_its_cut_with_their_timers(tmp_path):
    summary, records = run(tmp_path, "{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}}")
    cut = cut_ms(42, 0)
    assert 75.0 <= cut <= 225.0
    history = [t for t in RECORDED_MS if t < cut]
    snapshot, = summary["agentic_snapshots"]
    assert snapshot["cut_ms"] == pytest.approx(cut, abs=1e-6) and snapshot["seed"] == 42
    assert snapshot["history_requests"] == len(history) and snapshot["remaining_requests"] == 4 - len(history)
    assert len(records) == summary["completed_requests"] == 4 - len(history)
    assert len(history) == 1  # (seed 42 cuts between the parent and the child: the child is the frontier)
    child, resume, side = records
    assert child["arrival_time_ms"] == pytest.approx(100.0 - cut)  # its recorded start, from the cut
    assert resume["arrival_time_ms"] == pytest.approx(child["arrival_time_ms"] + 2 + 98)  # waits for the child
    assert side["arrival_time_ms"] == pytest.approx(300.0 - cut)
    # without warm-up the caches start empty: the resume finds nothing of the parent's (history) prefix
    assert resume["first_admission_reused_input_tokens"] == 0
    again, _ = run(tmp_path, "{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}}", "again")
    assert again["agentic_snapshots"] == summary["agentic_snapshots"]


def test_every_seed_cuts_inside_the_middle_half(tmp_path):
    cuts = [cut_ms(seed, lane) for seed in range(200) for lane in range(4)]
    assert all(75.0 <= c <= 225.0 for c in cuts)
    assert min(cuts) < 90.0 and max(cuts) > 210.0  # (uniform: the whole range is drawn)


def test_warm_up_after_a_snapshot_primes_the_history_prefix(tmp_path):
    load = "{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}, agentic_warmup: true}"
    summary, records = run(tmp_path, load)
    # one primer (conversation root has history, the parent, and a remaining request, the resume) and 10
    # warm-up requests repeating it, one after another: 11 x 2 ms
    assert summary["agentic_phases"] == {"preparation_requests": 11, "primer_requests": 1, "profile_start_ms": 22.0}
    child, resume, _ = records
    # the measured times count from the barrier (at 22 ms), as AISimulate's: the cold snapshot's times
    assert child["arrival_time_ms"] == pytest.approx(100.0 - cut_ms(42, 0), abs=1e-6)
    # the primed prefix (8 of the parent's 9 tokens) survives the child in G1 or comes back from G2
    assert resume["first_admission_reused_input_tokens"] == 8
    assert len(records) == summary["completed_requests"] == 3


def test_a_profile_recycles_plays_until_its_deadline(tmp_path):
    load = ("{type: trace_timestamps, agentic_lanes: 2, agentic_snapshot: {seed: 7}, "
            "agentic_profile: {duration_seconds: 1}}")
    summary, records = run(tmp_path, load)
    profile = summary["agentic_profile"]
    assert profile["deadline_ms"] == 1000.0 and profile["duration_seconds"] == 1.0
    assert (profile["response_grace_seconds"], profile["tree_idle_cap_seconds"]) == (30.0, 300.0)  # defaults
    assert all(r["arrival_time_ms"] <= 1000.0 for r in records)  # nothing released past the deadline
    assert profile["plays_started"] == 2 + profile["recycled_plays"] and profile["recycled_plays"] >= 2
    recycled = [r for r in records if r["id"].partition("#")[0].endswith(":request:0") and "#" in r["id"]]
    assert recycled  # a recycled play starts at turn zero ...
    assert all(r["first_admission_reused_input_tokens"] == 0 for r in recycled)  # ... with blocks of its own
    outcomes = summary["agentic_play_outcomes"]
    assert summary["completed_trajectories"] == sum(o["status"] == "completed" for o in outcomes)
    assert len(outcomes) == profile["plays_started"]
    # a play still waiting on a timer at the deadline holds its lane: no play starts after 1 s
    assert max(o["start_ms"] for o in outcomes) < 1000.0 and profile["never_issued_requests"] >= 1


def test_a_profile_without_grace_cancels_what_runs_at_the_deadline(tmp_path):
    # seed 42 cuts at ~96.4 ms: the child arrives at ~3.6 and ends 2 ms later, the resume 98 ms after that
    # (~103.6) and runs 2 ms; a deadline at 104.5 ms with no grace cancels it, and the side request (~203.6)
    # is never issued.
    load = ("{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}, "
            "agentic_profile: {duration_seconds: 0.1045, response_grace_seconds: 0}}")
    summary, records = run(tmp_path, load)
    resume_at = 100.0 - cut_ms(42, 0) + 2 + 98
    assert resume_at < 104.5 < resume_at + 2
    profile = summary["agentic_profile"]
    assert (profile["canceled_requests"], profile["never_issued_requests"]) == (1, 1)
    assert summary["completed_requests"] == 1 and summary["num_requests"] == 2
    play, = summary["agentic_play_outcomes"]
    assert play["status"] == "incomplete" and play["end_ms"] is None


def test_snapshot_warm_up_and_profile_are_byte_stable_across_hash_seeds(tmp_path):
    load = ("traffic.load={type: trace_timestamps, agentic_lanes: 2, agentic_snapshot: {seed: 9}, "
            "agentic_warmup: true, agentic_profile: {duration_seconds: 0.5}}")
    runs = []
    for seed in ("0", "4242"):
        argv = [sys.executable, "-m", "kvreplay", "predict", "-c", str(AGENTIC / "agentx-g2-local.yaml"),
                "--output-dir", str(tmp_path / seed), "--capture-per-request", "--no-progress", "--set", load]
        done = subprocess.run(argv, env=dict(os.environ, PYTHONHASHSEED=seed), capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        runs.append(output_bytes(tmp_path / seed))
    assert runs[0] == runs[1]
    assert b'"agentic_profile"' in runs[0][0] and b'"primer_requests"' in runs[0][0]


def test_idle_guards_advance_every_pending_timer_of_an_idle_play(tmp_path):
    """AISimulate's tree idle guard (docs/replay/agentic/continuous-profiles.md): when a play has had no outstanding
    request for `tree_idle_cap` (50 ms here), its pending timers move together so that the earliest is due then.
    Seed 42 cuts at c (~96.4 ms): the child arrives at 100 - c and ends 2 ms later; the resume is then due 98 ms
    after (200 - c) and the side request, scheduled when the play started, at 300 - c.  At 102 - c + 50 both move
    by 48 ms (the side request too, though the play's start scheduled it); after the resume ends the side request
    moves again.  The recycled play's child falls past the 200 ms deadline until the guard brings it back."""
    load = ("{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}, "
            "agentic_profile: {duration_seconds: 0.2, tree_idle_cap_seconds: 0.05}}")
    summary, records = run(tmp_path, load)
    c = cut_ms(42, 0)
    child, resume, side, parent2, child2 = records
    assert [r["id"] for r in records] == ["g2-parent-resume:request:1:0", "g2-parent-resume:request:2",
                                          "g2-parent-resume:request:3", "g2-parent-resume:request:0#1",
                                          "g2-parent-resume:request:1:0#1"]
    assert child["arrival_time_ms"] == pytest.approx(100 - c, abs=1e-6)
    assert resume["arrival_time_ms"] == pytest.approx(102 - c + 50, abs=1e-6)  # due 200 - c, moved by 48
    assert side["arrival_time_ms"] == pytest.approx(resume["last_token_ms"] + 50, abs=1e-6)  # 204 - c, was 300 - c
    assert parent2["arrival_time_ms"] == side["last_token_ms"]  # the lane takes the play again, from turn zero
    # its child is due 98 ms after the parent ends, past the deadline: held, then moved to the parent's end + 50
    assert child2["arrival_time_ms"] == pytest.approx(parent2["last_token_ms"] + 50, abs=1e-6)
    assert child2["arrival_time_ms"] < 200.0 < parent2["last_token_ms"] + 98
    shifts = summary["agentic_profile"]["idle_shifts"]
    assert [(s["play_id"], s["shifted_by_ms"], s["timer_count"]) for s in shifts] == [
        ("g2-parent-resume", 48.0, 2), ("g2-parent-resume", 48.0, 1), ("g2-parent-resume#1", 48.0, 2)]
    assert [s["at_ms"] for s in shifts] == [resume["arrival_time_ms"], side["arrival_time_ms"],
                                            child2["arrival_time_ms"]]
    # the resume (due child2's end + 98) and the side request (parent2 + 300, moved by 48) stay past the deadline
    assert summary["agentic_profile"]["never_issued_requests"] == 2
    assert [o["status"] for o in summary["agentic_play_outcomes"]] == ["completed", "incomplete"]


def test_the_global_idle_guard_moves_every_play_when_nothing_is_outstanding(tmp_path):
    """With a tree cap longer than the global one, the global guard acts first: after the child ends (102 - c)
    nothing of the workload is outstanding, and 10 ms later every pending timer moves by 88 ms (the resume, due
    200 - c, then arrives at 112 - c; the side request, 300 - c, keeps its 100 ms gap to it until the next
    idle 10 ms)."""
    load = ("{type: trace_timestamps, agentic_lanes: 1, agentic_snapshot: {seed: 42}, "
            "agentic_profile: {duration_seconds: 1, tree_idle_cap_seconds: 300, global_idle_cap_seconds: 0.01}}")
    summary, records = run(tmp_path, load)
    c = cut_ms(42, 0)
    child, resume, side = records[:3]
    assert resume["arrival_time_ms"] == pytest.approx(112 - c, abs=1e-6)
    assert side["arrival_time_ms"] == pytest.approx(resume["last_token_ms"] + 10, abs=1e-6)
    first, second = summary["agentic_profile"]["idle_shifts"][:2]
    assert (first["play_id"], first["shifted_by_ms"], first["timer_count"]) == (None, 88.0, 2)
    # the side request, now due 212 - c, moves again 10 ms after the resume ends (114 - c): by 88 ms
    assert (second["play_id"], second["shifted_by_ms"], second["timer_count"]) == (None, 88.0, 1)
