"""SGLang's overlap scheduler (`host_loop: true`, runtime/engines/sglang_overlap.py): a pass is decided while the
one before it runs, so it sees the arrivals and the pass results (prompts cached, requests finished) of the passes
that ended by then.  Every number here is AISimulate's (0.13.0.dev, the same configs, fixed timing 50 ms prefill /
10 ms decode), from its per-request records."""
from __future__ import annotations

import orjson

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_bytes

from .scenarios import replay_both_ways

TRACE_CONFIG = """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: sglang
  workers:
    aggregated:
      host_loop: {host_loop}
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache:
        block_size: 16
        capacity: {{type: fixed, blocks: 10000}}
traffic:
  source: {{type: trace, paths: [trace.jsonl], block_size: 16}}
  load: {{type: trace_timestamps}}
"""


def trace_run(tmp_path, rows, host_loop: bool = True, config: str = TRACE_CONFIG) -> list[tuple]:
    """(arrival, first admission, first token, last token, reused) of each request, in arrival order."""
    (tmp_path / "trace.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    text = config.format(host_loop="true" if host_loop else "false")
    path = tmp_path / "overlap.yaml"
    path.write_text(text)
    result = compile_bytes(text.encode(), str(path), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    _, _, records = replay_both_ways(result.plan.to_dict(), tmp_path)
    return sorted((r["arrival_time_ms"], r["first_admit_ms"], r["first_token_ms"], r["last_token_ms"],
                   r["reused_input_tokens"]) for r in records)


def three(b_arrives: float) -> list[dict]:
    """C (one page, 100 out) at 0; A (63 pages, 20 out) at 55; B (A's 63 pages + 10, 20 out) at `b_arrives`."""
    return [{"timestamp": 0, "input_length": 16, "output_length": 100, "hash_ids": [5000]},
            {"timestamp": 55, "input_length": 1008, "output_length": 20, "hash_ids": list(range(63))},
            {"timestamp": b_arrives, "input_length": 1168, "output_length": 20,
             "hash_ids": list(range(63)) + list(range(1000, 1010))}]


def test_a_pass_is_decided_when_the_one_before_it_starts(tmp_path):
    """C's extend runs 0-50, then C decodes.  A arrives at 55: the pass from 60 was decided at 50, so A is admitted
    by the decision at 60 and its extend runs 70-120 (first token 120; without the overlap 60-110)."""
    assert trace_run(tmp_path, three(75))[1] == (55.0, 60.0, 120.0, 360.0, 0)
    assert trace_run(tmp_path, three(75), host_loop=False)[1] == (55.0, 60.0, 110.0, 350.0, 0)


def test_prefill_reuse_is_visible_when_the_forward_result_is_observed(tmp_path):
    """B arrives at 65, during the pass (60-70) before A's extend (70-120): the decision at 70 admits it while A's
    extend runs, before A's prompt is observed, so B reuses nothing (extend 120-170).  Arriving at 75, B is
    admitted by the decision at 120, which observed A's prompt: it reuses A's 1,008 tokens.  Without the overlap
    B arriving at 65 is admitted at 110, after A's extend, and reuses them."""
    assert trace_run(tmp_path, three(65))[2] == (65.0, 70.0, 170.0, 360.0, 0)
    assert trace_run(tmp_path, three(75))[2] == (75.0, 120.0, 180.0, 370.0, 1008)
    assert trace_run(tmp_path, three(65), host_loop=False)[2] == (65.0, 110.0, 160.0, 350.0, 1008)


def test_a_finished_request_takes_one_more_decode(tmp_path):
    """A 4-turn session (page 1, concurrency 1): each turn arrives as the previous one's last token ends, but the
    pass from then (a decode of the finished turn, decided while it still ran) takes 10 ms, so each next turn's
    extend starts 10 ms later: first tokens 50, 1,380, 2,710, 4,040 ms (1,370, 2,690, 4,010 without the
    overlap), admissions at the arrival, reuse unchanged (1,152 / 2,304 / 3,456)."""
    turns = _one_session_turns(tmp_path, "session: {{turns: 4}}")
    assert [(r["arrival_time_ms"], r["first_admit_ms"], r["first_token_ms"], r["last_token_ms"],
             r["reused_input_tokens"]) for r in turns] == [
        (0.0, 0.0, 50.0, 1320.0, 0), (1320.0, 1320.0, 1380.0, 2650.0, 1152),
        (2650.0, 2650.0, 2710.0, 3980.0, 2304), (3980.0, 3980.0, 4040.0, 5310.0, 3456)]


def test_host_loop_reaches_the_role_plan(tmp_path):
    text = TRACE_CONFIG.format(host_loop="true")
    path = tmp_path / "overlap.yaml"
    (tmp_path / "trace.jsonl").write_bytes(orjson.dumps(three(75)[0]) + b"\n")
    path.write_text(text)
    plan = finish_plan(compile_bytes(text.encode(), str(path), ()).plan.to_dict(), tmp_path)
    assert [role.host_loop for role in plan.roles] == [True]


def test_the_extra_decode_caches_a_one_token_output(tmp_path):
    """4 turns of 1,000 new tokens and 1 output token: without the overlap no forward computes the sampled token's
    KV and a turn reuses the prompt before it only (1,000 / 2,001 / 3,002, test_sglang_engine.py); with it the
    finished turn is decoded once more, so the next turn also reuses that token: 1,001 / 2,002 / 3,003, the same
    first tokens (50, 110, 170, 230 ms)."""
    turns = _one_session_turns(tmp_path, "new_input_tokens_per_turn: 1000, output_tokens_per_turn: 1, "
                                         "session: {{turns: 4}}")
    assert [(r["first_token_ms"], r["reused_input_tokens"]) for r in turns] == [
        (50.0, 0), (110.0, 1001), (170.0, 2002), (230.0, 3003)]


def _one_session_turns(tmp_path, session: str) -> list:
    """The records, in turn order, of one synthetic session (`session`: its source's keys) at concurrency 1,
    page 1, with `host_loop`, replayed fused and single-stepped (replay_both_ways checks they agree)."""
    text = TRACE_CONFIG.replace("source: {{type: trace, paths: [trace.jsonl], block_size: 16}}",
                                "source: {{type: synthetic-session, " + session + "}}") \
        .replace("load: {{type: trace_timestamps}}", "load: {{type: concurrency, concurrency: 1}}\n  stop: {{sessions: 1}}") \
        .replace("block_size: 16\n", "block_size: 1\n").format(host_loop="true")
    path = tmp_path / "session.yaml"
    path.write_text(text)
    result = compile_bytes(text.encode(), str(path), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    _, _, records = replay_both_ways(result.plan.to_dict(), tmp_path)
    return sorted(records, key=lambda r: r["turn_index"])


def test_a_rank_left_idle_still_runs_the_decode_it_decided(tmp_path):
    """A (one page, 3 out) has its tokens at 50 / 60 / 70; the pass from 70 was decided at 60 with A running, so
    it is A's decode although A has finished: it runs 70-80 with nothing left to run.  B (A's page + one, 3 out)
    arriving at 70 is admitted by the decision at 70, arriving at 72 or 75 by the one at 80 (the wasted pass ends
    there), at 80 at once, at 85 from idle; its extend ends 50 ms later.  The run ends at B's last token (the
    wasted pass after it counts for nothing)."""
    def b_at(arrives):
        rows = [{"timestamp": 0, "input_length": 16, "output_length": 3, "hash_ids": [1]},
                {"timestamp": arrives, "input_length": 32, "output_length": 3, "hash_ids": [1, 2]}]
        first, second = trace_run(tmp_path, rows)
        assert first == (0.0, 0.0, 50.0, 70.0, 0)
        return second
    assert b_at(70) == (70.0, 70.0, 130.0, 150.0, 16)
    assert b_at(72) == (72.0, 80.0, 130.0, 150.0, 16)
    assert b_at(75) == (75.0, 80.0, 130.0, 150.0, 16)
    assert b_at(80) == (80.0, 80.0, 130.0, 150.0, 16)
    assert b_at(85) == (85.0, 85.0, 135.0, 155.0, 16)


def test_the_run_ends_at_its_last_completion(tmp_path):
    """One request (one page, 3 out): its last token at 70, then the overlap loop's decode of it 70-80; the
    run ends at 70 ms (AISimulate's duration)."""
    (tmp_path / "trace.jsonl").write_bytes(
        orjson.dumps({"timestamp": 0, "input_length": 16, "output_length": 3, "hash_ids": [1]}) + b"\n")
    text = TRACE_CONFIG.format(host_loop="true")
    path = tmp_path / "overlap.yaml"
    path.write_text(text)
    result = compile_bytes(text.encode(), str(path), ())
    fused, single, _ = replay_both_ways(result.plan.to_dict(), tmp_path)
    assert fused.now == single.now == 80_000_000  # (the wasted pass ran)
    assert fused.close() == single.close() == 70_000_000


def test_a_request_retracted_by_an_older_decision_loses_that_pass_s_token(tmp_path):
    """150 pages of 16.  A (16 tokens, 2,000 out) from 0; B (160 tokens, 1,000 out) at 6,100 ms.  Both grow until
    the pool is short and B (less output) is retracted, readmitted when A ends at 20,090 (reusing its 160 prompt
    tokens) and ends at 22,130 with the overlap (22,100 without).  The decision that retracts B was made while the
    pass that ended then ran, so B never gets that pass's token (SGLang skips a retracted request's pending
    result): it starts over one token shorter and needs one more decode (22,120 if the token were kept)."""
    rows = [{"timestamp": 0, "input_length": 16, "output_length": 2000, "hash_ids": [1]},
            {"timestamp": 6100, "input_length": 160, "output_length": 1000, "hash_ids": list(range(10, 20))}]
    small = TRACE_CONFIG.replace("blocks: 10000", "blocks: 150")
    assert trace_run(tmp_path, rows, config=small) == [(0.0, 0.0, 50.0, 20090.0, 0),
                                                       (6100.0, 6100.0, 6160.0, 22130.0, 160)]
    assert trace_run(tmp_path, rows, host_loop=False, config=small)[1] == (6100.0, 6100.0, 6150.0, 22100.0, 160)
