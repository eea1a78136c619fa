"""When a request that can never run is rejected, and what a session does after a rejected turn (AISimulate's rules).

A prompt past the context length is refused on arrival.  A prompt that fits the context but needs more G1
blocks than the rank holds waits in the queue: vLLM's scheduler (and TensorRT-LLM's) rejects it when admission
reaches it in arrival order, and the rejection is reported at the end of that pass (at once when no pass
runs), so in a closed loop its slot is freed then.  A session goes on after a rejected turn; the next turn's
prompt is the rejected one's plus its new tokens (no output was made).  Reference-facts section 22.
"""
from __future__ import annotations

import contextlib
import io

from kvreplay.cli import main

from .support import read_outputs

# synthetic sessions: turn k's prompt is k x (1,024 + 128) + 1,024 tokens (1,024, 2,176, 3,328, 4,480), 128 out
SESSIONS = """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: {backend}
  context_length: {context}
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache: {{block_size: 16, capacity: {{type: fixed, blocks: {blocks}}}}}
traffic:
  source: {{type: synthetic-session, session: {{turns: 4}}}}
  load: {{type: concurrency, concurrency: 2}}
  stop: {{sessions: 4}}
"""


def _records(tmp_path, backend="vllm", context=40000, blocks=200):
    config = tmp_path / "sessions.yaml"
    config.write_text(SESSIONS.format(backend=backend, context=context, blocks=blocks))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / "out"), "--no-progress",
                     "--capture-per-request"]) == 0
    summary, records = read_outputs(tmp_path / "out")
    turns = {(r["session_id"], r["turn_index"]): r for r in records}
    return summary, turns


def _times(record):
    return record["input_length"], record["arrival_time_ms"], record["terminal_time_ms"], record["terminal_status"]


def test_a_prompt_too_big_for_g1_is_rejected_when_admission_reaches_it(tmp_path):
    # 200 blocks of 16 = 3,200 tokens: turns 2 (3,328) and 3 never fit.  Turn 0 of both sessions: 0 -> 1,320
    # (50 ms prefill + 127 decodes of 10 ms).  Both turn 1s (136 blocks each) arrive at 1,320: session 0's runs,
    # session 1's waits for its blocks until 2,640.  Session 0's turn 2 arrives at 2,640 behind it: the pass
    # admitting session 1's turn 1 (a 50 ms prefill) reaches it, so it is rejected at 2,690, and its turn 3
    # (3,328 + 1,024) arrives then, is reached by the next pass (a 10 ms decode) and rejected at 2,700, when the
    # freed slot starts session 2.
    summary, turns = _records(tmp_path)
    s0, s2 = "session-000000", "session-000002"
    assert _times(turns[s0, 0])[1:] == (0.0, 1320.0, "completed")
    assert _times(turns[s0, 2]) == (3328, 2640.0, 2690.0, "rejected")
    assert _times(turns[s0, 3]) == (4352, 2690.0, 2700.0, "rejected")
    assert turns[s2, 0]["arrival_time_ms"] == 2700.0
    assert turns[s0, 2]["admission_history"] == [] and "G1 blocks" in turns[s0, 2]["terminal_reason"]
    # four sessions of four turns, half of them rejected
    assert (summary["num_requests"], summary["completed_requests"], summary["rejected_requests"]) == (16, 8, 8)


def test_with_nothing_running_the_rejection_is_at_once(tmp_path):
    # session 3 (started at 4,020 when session 1's turn 3 was rejected) is the last one running: its turn 1 ends
    # at 7,990 with nothing else in flight, so its turn 2 is reached by a schedule that runs no pass
    _, turns = _records(tmp_path)
    s3 = "session-000003"
    assert turns[s3, 0]["arrival_time_ms"] == 4020.0
    assert _times(turns[s3, 2])[1:] == (turns[s3, 1]["terminal_time_ms"], turns[s3, 1]["terminal_time_ms"],
                                        "rejected")
    assert _times(turns[s3, 3])[1:3] == (turns[s3, 1]["terminal_time_ms"],) * 2


def test_a_prompt_past_the_context_is_refused_on_arrival_and_the_session_goes_on(tmp_path):
    # context 3,000: turn 2 (3,328) is refused when turn 1 ends (2,640: nothing runs then), turn 3 follows with
    # 3,328 + 1,024 tokens and is refused too; the G1 (2,000 blocks) holds everything else
    summary, turns = _records(tmp_path, context=3000, blocks=2000)
    s0 = "session-000000"
    assert _times(turns[s0, 1])[1:] == (1320.0, 2640.0, "completed")
    assert _times(turns[s0, 2]) == (3328, 2640.0, 2640.0, "rejected")
    assert _times(turns[s0, 3]) == (4352, 2640.0, 2640.0, "rejected")
    assert "context_length 3000" in turns[s0, 2]["terminal_reason"]
    assert (summary["num_requests"], summary["rejected_requests"]) == (16, 8)


def test_a_prompt_that_reaches_the_context_is_rejected_when_reached_on_both_backends(tmp_path):
    # context 4,096, fixed 50 / 10 ms.  A (1,000 tokens, 20 out) prefills 0-50.  B (5,000) arrives at 15, C (4,096:
    # no room for one output token) at 17, D (300, 5 out) at 18.  The pass from 50 reaches B and C (rejected when
    # it ends) and admits D: A's decode and D's prefill in one pass, 50 + 10 ms, ending at 110.  D's tokens:
    # 110, then 4 decodes to 150; A's: 50, 110, then 18 decodes to 290.
    rows = [(0, 1000, 20, [1, 2]), (15, 5000, 10, list(range(3, 13))), (17, 4096, 10, list(range(13, 21))),
            (18, 300, 5, [21])]
    (tmp_path / "trace.jsonl").write_text("".join(
        f'{{"timestamp": {t}, "input_length": {i}, "output_length": {o}, "hash_ids": {h}}}\n' for t, i, o, h in rows))
    for backend in ("vllm", "trtllm"):
        config = tmp_path / f"{backend}.yaml"
        config.write_text(SESSIONS.format(backend=backend, context=4096, blocks=2000).split("traffic:")[0] + """traffic:
  source: {type: trace, paths: [trace.jsonl], format: mooncake, block_size: 512}
  load: {type: trace_timestamps}
""")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / backend), "--no-progress",
                         "--capture-per-request"]) == 0
        _, records = read_outputs(tmp_path / backend)
        assert [_times(r) for r in records] == [(1000, 0.0, 290.0, "completed"), (5000, 15.0, 110.0, "rejected"),
                                                (4096, 17.0, 110.0, "rejected"), (300, 18.0, 150.0, "completed")]
        assert records[3]["first_admit_ms"] == 50.0 and records[2]["output_length"] == 0


def test_a_prompt_that_fits_is_generated_up_to_the_context(tmp_path):
    # issue 13 item 5: context 4,096, block 16, fixed 50 / 10 ms.  A (4,000 tokens, 200 asked) fits, its whole
    # sequence does not: vLLM stops at max_model_len, so A makes 4,096 - 4,000 = 96 tokens.  B (1,000, 20 out,
    # A's first 1,024 tokens) arrives at 5 and reuses floor(999 / 16) x 16 = 992.  A's first token at 50; the pass
    # from 50 runs B's 8 tokens and A's decode (50 + 10 ms, to 110); A's 94 more decodes end at 110 + 940 = 1,050,
    # B's 19 at 110 + 190 = 300.  Reuse 992 / 5,000.  AISimulate on the same file: the same four instants, 96
    # tokens, 0.1984 (facts section 62).
    (tmp_path / "trace.jsonl").write_text(
        '{"timestamp": 0, "input_length": 4000, "output_length": 200, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]}\n'
        '{"timestamp": 5, "input_length": 1000, "output_length": 20, "hash_ids": [1, 2]}\n')
    config = tmp_path / "c.yaml"
    config.write_text(SESSIONS.format(backend="vllm", context=4096, blocks=2000).split("traffic:")[0] + """traffic:
  source: {type: trace, paths: [trace.jsonl], format: mooncake, block_size: 512}
  load: {type: trace_timestamps}
""")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / "out"), "--no-progress",
                     "--capture-per-request"]) == 0
    summary, (a, b) = read_outputs(tmp_path / "out")
    assert [(r["output_length"], r["requested_output_length"], r["first_token_ms"], r["last_token_ms"],
             r["reused_input_tokens"], r["terminal_status"]) for r in (a, b)] == \
        [(96, 200, 50.0, 1050.0, 0, "completed"), (20, 20, 110.0, 300.0, 992, "completed")]
    assert summary["prefix_cache_reused_ratio"] == 992 / 5000
    assert (summary["rejected_requests"], summary["duration_ms"]) == (0, 1050.0)
