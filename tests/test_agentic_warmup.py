"""Agentic warm-up (`traffic.load.agentic_warmup: true`): the measured plays start from the caches warm-up left.

The lane first sends its play's first request 10 times (1 output token, 2 ms each with the fixture's fixed
timing): the barrier is at 20 ms.  The measured first request then finds its 8-token prefix in G1 (cold: 0),
warm-up requests are in no output, and the summary's `agentic_phases` says how many ran and when the
measured run started.  As in AISimulate's warmed runs, the measured requests' times (and the plays' outcome
times) count from the barrier: with fixed timing they are the cold run's, to the nanosecond.
"""
from __future__ import annotations

from kvreplay.cli import main

from .support import EXAMPLES, read_outputs

AGENTIC = EXAMPLES / "agentic"


def run(tmp_path, name: str, warm: bool):
    text = (AGENTIC / "agentx-g2-local.yaml").read_text()
    if warm:
        text = text.replace("agentic_lanes: 1}", "agentic_lanes: 1, agentic_warmup: true}")
    (tmp_path / "weka-g2-restore.jsonl").write_bytes((AGENTIC / "weka-g2-restore.jsonl").read_bytes())
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / name), "--capture-per-request",
                 "--no-progress"]) == 0
    summary, records = read_outputs(tmp_path / name)
    return summary, sorted(records, key=lambda r: r["arrival_time_ms"])


def test_the_measured_run_starts_warm(tmp_path):
    cold, cold_records = run(tmp_path, "cold", warm=False)
    warm, records = run(tmp_path, "warm", warm=True)
    assert cold_records[0]["first_admission_reused_input_tokens"] == 0
    first = records[0]
    assert first["admission_history"][0]["g1_reused_input_tokens"] == 8
    # the barrier: 10 warm-up requests of 2 ms; the measured times count from it
    assert warm["agentic_phases"] == {"preparation_requests": 10, "profile_start_ms": 20.0}
    assert [r["arrival_time_ms"] for r in records] == [r["arrival_time_ms"] for r in cold_records] \
        == [0.0, 100.0, 200.0, 300.0]
    times = ("first_admit_ms", "first_token_ms", "last_token_ms", "terminal_time_ms")
    assert [[r[t] for t in times] for r in records] == [[r[t] for t in times] for r in cold_records]
    assert [a["at_ms"] for r in records for a in r["admission_history"]] == [0.0, 100.0, 202.0, 300.0]
    assert [(o["start_ms"], o["end_ms"]) for o in warm["agentic_play_outcomes"]] == [(0.0, 302.0)]
    assert warm["agentic_play_outcomes"] == cold["agentic_play_outcomes"]
    assert "agentic_phases" not in cold
    # reuse: the warm first request's 8 tokens on top of the parent's restore (8 of 36 cold, 16 of 36 warm)
    assert round(cold["first_admission_prefix_cache_reused_ratio"], 4) == 0.2222
    assert round(warm["first_admission_prefix_cache_reused_ratio"], 4) == 0.4444
    # the parent still loses its prefix to its child and restores it from G2 (8 tokens, 2 ms at 1 GB/s)
    assert records[2]["first_admit_ms"] == cold_records[2]["first_admit_ms"] == 202.0
    assert records[2]["first_admission_host_reused_input_tokens"] == 8


def test_warm_up_requests_are_in_no_output(tmp_path):
    warm, records = run(tmp_path, "warm", warm=True)
    assert warm["num_requests"] == warm["completed_requests"] == len(records) == 4
    assert not any(r["id"].startswith("warmup") or r["session_id"] == "warmup" for r in records)
    assert [r["index"] for r in sorted(records, key=lambda r: r["index"])] == [0, 1, 2, 3]
    assert warm["total_input_tokens"] == 36 and warm["total_output_tokens"] == 4
    assert warm["duration_ms"] == 304.0  # from the first measured arrival, as the cold run's from 0
