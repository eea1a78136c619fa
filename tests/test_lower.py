"""`kvreplay compile --to replayspec`: a predict config and its lowering replay to byte-identical outputs."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main

from .support import EXAMPLES, output_bytes

CASES = {
    "host-offload-prediction": ["traffic.stop.sessions=6"],  # closed-loop sessions with G2
    "disaggregated-pd": ["traffic.stop.requests=30"],  # P/D, source-first
    "disaggregated-kimi-state": ["traffic.stop.requests=8"],  # P/D with state caches
    "mooncake-trace": ["engine.workers.aggregated.kv_cache.capacity.blocks=700"],  # trace with preemptions
    "g1-default-capacity": ["traffic.stop.requests=40"],  # poisson, roofline timing, two replicas
    "g3-storage": ["traffic.stop.sessions=8"],  # G3 shared by four workers
    "kvcr-kv-aware-trace": [],  # KVCR hints from the KV-aware router
    "scaled-workers": ["traffic.stop.requests=60"],  # workers added and removed
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_replayspec_replays_to_the_same_bytes(name, tmp_path, capsys):
    config = EXAMPLES / f"{name}.yaml"
    sets = [arg for override in CASES[name] for arg in ("--set", override)]
    lowered = tmp_path / "lowered.json"
    assert main(["compile", str(config), "--to", "replayspec", "-o", str(lowered), *sets]) == 0
    assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / "p"), "--capture-per-request",
                 "--no-progress", *sets]) == 0
    assert main(["replay", str(lowered), "--output-dir", str(tmp_path / "r"), "--capture-per-request",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert output_bytes(tmp_path / "p") == output_bytes(tmp_path / "r")
    spec = orjson.loads(lowered.read_bytes())
    assert spec["version"] == 1 and spec["requests"]
    assert all(len(r["input_token_ids"]) == r["input_tokens"] for r in spec["requests"])


def test_the_lowering_keeps_the_users_engine_and_expands_closed_loops(tmp_path, capsys):
    lowered = tmp_path / "lowered.json"
    assert main(["compile", str(EXAMPLES / "host-offload-prediction.yaml"), "--to", "replayspec", "-o",
                 str(lowered), "--set", "traffic.stop.sessions=2"]) == 0
    spec = orjson.loads(lowered.read_bytes())
    kv = spec["engine"]["workers"]["aggregated"]["kv_cache"]
    assert kv["block_size"] == 16 and "bytes_per_token" not in kv  # inferred values are derived again
    assert spec["topology"] == {"kind": "aggregated", "workers": {"initial_workers": 1}}
    turns = [(r["session_id"], r["turn_index"]) for r in spec["requests"]]
    assert sorted(turns) == [(f"session-00000{s}", t) for s in range(2) for t in range(4)]
    # a session's next turn arrives when its previous turn completed (closed loop, no think time)
    assert spec["requests"][0]["arrival_time_ms"] == 0.0 and spec["requests"][2]["arrival_time_ms"] > 0


def test_a_replayspec_is_not_lowered_again(tmp_path, capsys):
    lowered = tmp_path / "lowered.json"
    assert main(["compile", str(EXAMPLES / "host-offload-prediction.yaml"), "--to", "replayspec", "-o",
                 str(lowered), "--set", "traffic.stop.sessions=1"]) == 0
    assert main(["compile", str(lowered), "--to", "replayspec"]) == 2
