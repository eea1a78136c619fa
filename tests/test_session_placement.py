"""Session turns due at the same instant are placed in session order (runtime/shell/arrivals.py `TURN_SEQ`).

AISimulate's workload driver releases the turns that are ready at one instant ordered by (ready time, session
index, turn index), after every pass that ended then; round robin then places them in that order.  kvreplay used
to place them in the order the ranks finished the previous turns (worker 0's sessions first), which put a
session's next turn on another rank than AISimulate does.  Scenario: 2 workers, block 4, 3 concurrent sessions of
4 turns (100 new tokens and 10 output tokens per turn), 6 sessions, fixed timing: every turn of the 3 running
sessions ends in the same pass, so each follow-up turn goes to the other worker (counts 3, 4, 5 -> workers 1, 0,
1 for sessions 0, 1, 2) and a session meets its own blocks only two turns later.
"""
from __future__ import annotations

from kvreplay.compiler.pipeline import compile_bytes

from .scenarios import replay_both_ways

CONFIG = """
engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      parallelism: {replicas: 2}
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        block_size: 4
        capacity: {type: fixed, blocks: 2000}
traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 100, output_tokens_per_turn: 10, session: {turns: 4}}
  load: {type: concurrency, concurrency: 3}
  stop: {sessions: 6}
"""


def _records(tmp_path):
    result = compile_bytes(CONFIG.encode(), str(tmp_path / "sessions.yaml"), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    _, _, records = replay_both_ways(result.plan.to_dict(), tmp_path)
    return records


def test_same_instant_turns_are_placed_in_session_order(tmp_path):
    records = _records(tmp_path)
    placed = {}
    for record in records:
        placed.setdefault(record["session_id"], []).append(
            (record["turn_index"], record["admission_history"][0]["pool"]))
    turns = {session: [pool for _, pool in sorted(rows)] for session, rows in placed.items()}
    w0, w1 = "worker0.dp0", "worker1.dp0"
    assert turns == {"session-000000": [w0, w1, w0, w1], "session-000001": [w1, w0, w1, w0],
                     "session-000002": [w0, w1, w0, w1], "session-000003": [w0, w1, w0, w1],
                     "session-000004": [w1, w0, w1, w0], "session-000005": [w0, w1, w0, w1]}


def test_reuse_comes_from_two_turns_back(tmp_path):
    """Turn 2 (prompt 320) finds turn 0's computed 109 tokens (its prompt and 9 of its outputs: the last output is
    never computed): 27 blocks, 108 tokens; turn 3 (430) finds turn 1's 219: 216.  Per session 324 of
    100 + 210 + 320 + 430 = 1,060 prompt tokens, as AISimulate reports (0.30566)."""
    records = _records(tmp_path)
    reused = {}
    for record in records:
        reused[record["turn_index"]] = reused.get(record["turn_index"], set()) | {record["reused_input_tokens"]}
    assert reused == {0: {0}, 1: {0}, 2: {108}, 3: {216}}
    total = sum(r["reused_input_tokens"] for r in records) / sum(r["input_length"] for r in records)
    assert round(total, 5) == 0.30566
