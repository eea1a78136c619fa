"""Scaled workers: a schedule of replica counts; added workers take requests, removed ones drain."""
from __future__ import annotations

import orjson

from kvreplay.cli import main
from kvreplay.runtime.serving.scaling import periods

from .support import EXAMPLES


def test_periods_of_each_worker_follow_the_schedule():
    s = 1_000_000_000
    role = ((0, 1), (20 * s, 3), (60 * s, 1), (90 * s, 2))  # replicas: 1, then 3 at 20 s, 1 at 60 s, 2 at 90 s
    assert periods(role, 0, 0) == [(0, 0, None)]
    assert periods(role, 1, 5) == [(20 * s, 20 * s + 5, 60 * s), (90 * s, 90 * s + 5, None)]
    assert periods(role, 2, 0) == [(20 * s, 20 * s, 60 * s)]


def test_added_workers_take_requests_and_removed_ones_drain(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["predict", "-c", str(EXAMPLES / "scaled-workers.yaml"), "--output-dir", str(out),
                 "--capture-per-request", "--no-progress"]) == 0
    capsys.readouterr()
    records = [orjson.loads(line) for line in (out / "requests.jsonl").read_bytes().splitlines()]
    assert all(r["terminal_status"] == "completed" for r in records)
    for r in records:
        arrival = r["arrival_time_ms"]
        if arrival < 20_000 or arrival >= 60_000:
            assert r["dp_rank"] == 0  # one worker before the burst and after it
        else:
            assert r["dp_rank"] in (0, 1, 2)
    burst = [r["dp_rank"] for r in records if 20_000 <= r["arrival_time_ms"] < 60_000]
    assert set(burst) == {0, 1, 2}
    # work placed on workers 1 and 2 before 60 s still completes after they are removed (they drain)
    late = [r for r in records if r["dp_rank"] in (1, 2)]
    assert max(r["terminal_time_ms"] for r in late) > 60_000 or max(r["arrival_time_ms"] for r in late) < 60_000
    # ... and each is removed when its last request ends, after its period
    workers = orjson.loads((out / "prediction.json").read_bytes())["workers"]
    assert [w["periods"][0]["left_ms"] for w in workers] == [None, 60_000.0, 60_000.0]
    for w in workers[1:]:
        last = max(r["terminal_time_ms"] for r in records if r["dp_rank"] == w["worker"])
        assert w["periods"][0]["removed_ms"] == last > 60_000
    assert workers[0]["periods"][0]["removed_ms"] is None  # never left


def test_a_replayspec_schedule_with_startup_delay(tmp_path, capsys):
    spec = {"version": 1,
            "topology": {"kind": "aggregated",
                         "workers": {"initial_workers": 1, "startup_delay_ms": 500.0,
                                     "schedule": [{"at_ms": 1000.0, "workers": 2}]}},
            "engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm",
                       "workers": {"aggregated": {"timing": {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 1.0},
                                                  "kv_cache": {"capacity": {"type": "fixed", "blocks": 500}}}}},
            "requests": [{"id": f"r{i}", "arrival_time_ms": t, "input_tokens": 64, "output_tokens": 4}
                         for i, t in enumerate([0.0, 1200.0, 1300.0, 1600.0, 1700.0])]}
    path = tmp_path / "spec.json"
    path.write_bytes(orjson.dumps(spec))
    assert main(["replay", str(path), "--output-dir", str(tmp_path / "out"), "--capture-per-request",
                 "--no-progress"]) == 0
    capsys.readouterr()
    records = [orjson.loads(line) for line in (tmp_path / "out" / "requests.jsonl").read_bytes().splitlines()]
    # the first worker starts up for 500 ms; the second joins at 1 s and is ready at 1.5 s
    assert records[0]["first_admit_ms"] == 500.0
    assert [r["dp_rank"] for r in records[1:]] == [0, 0, 1, 0]
