"""SGLang's engine end to end against AISimulate (aisimulate 0.13.0.dev, the same configs, fixed timing 50 ms
prefill / 10 ms decode): retraction under memory pressure, a retraction thrash, and macro steps that equal single
stepping.  The numbers are AISimulate's, from its per-request records."""
from __future__ import annotations

import orjson

from kvreplay.cli import main
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.build import build

from .scenarios import replay_both_ways

MS = 1_000_000


SESSION = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: sglang
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        capacity: {type: fixed, blocks: 3000}
traffic:
  source: {type: synthetic, input_tokens: 100, output_tokens: 2000}
  load: {type: concurrency, concurrency: 4}
  stop: {requests: 8}
"""


def _replayed(tmp_path, text: str, name: str):
    """`text` written to `tmp_path / name`, compiled and replayed to its end."""
    path = tmp_path / name
    path.write_text(text)
    result = compile_bytes(text.encode(), str(path), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    replay = build(finish_plan(result.plan.to_dict(), tmp_path))
    replay.run()
    return replay


def test_end_to_end_retraction_matches_aisimulate(tmp_path):
    """AISimulate's b2 run, whole: four retractions (each readmitted once with no reuse), the same admission and
    last-token times, and the same duration (105,910 ms)."""
    replay = _replayed(tmp_path, SESSION, "b2.yaml")
    requests = sorted(replay.requests, key=lambda r: r.spec.index)
    assert replay.now == 105_910 * MS
    assert [len(r.admissions) - 1 for r in requests] == [0, 1, 0, 1, 0, 1, 0, 1]
    assert [r.first_admit_ns // MS for r in requests] == [0, 5030, 20090, 21360, 48710, 55410, 68850, 72080]
    assert [r.last_token_ns // MS for r in requests] == [20090, 48710, 40180, 55410, 68850, 98280, 88940, 105910]
    # committed prefill: 8 prompts of 100, and each readmission recomputes prompt + the output it had (AISimulate: 6,001)
    assert sum(r.committed_prefill for r in requests) == 6001


def test_fused_decode_passes_equal_single_stepping(tmp_path):
    """The b2 run under memory pressure (retractions, readmissions), macro-stepped by sglang_macro.py and single
    stepped: the same records and end time."""
    path = tmp_path / "b2.yaml"
    path.write_text(SESSION)
    plan = compile_bytes(SESSION.encode(), str(path), ()).plan.to_dict()
    fused, _, records = replay_both_ways(plan, tmp_path)
    assert fused.now == 105_910 * MS and sum(r["readmission_count"] for r in records) == 4


PRESSURE = SESSION.replace("capacity: {type: fixed, blocks: 3000}", "block_size: 32\n        capacity: {type: fixed, blocks: 200}") \
    .replace("source: {type: synthetic, input_tokens: 100, output_tokens: 2000}",
             "source: {type: synthetic-session, new_input_tokens_per_turn: 1000, output_tokens_per_turn: 100, "
             "session: {turns: 4}}").replace("concurrency: 4}", "concurrency: 3}").replace("requests: 8", "sessions: 3")


def test_end_to_end_retraction_thrash_matches_aisimulate(tmp_path):
    """AISimulate's d4 run (3 four-turn sessions in 200 pages of 32): a second turn admitted beside two others runs
    short of a page for its first token, is retracted, and is readmitted every 60 ms (its own prompt pages, unlocked
    in the tree, count as room) 33 times before it fits; the same times as AISimulate, 9,930 ms in all."""
    path = tmp_path / "d4.yaml"
    path.write_text(PRESSURE)
    plan = compile_bytes(PRESSURE.encode(), str(path), ()).plan.to_dict()
    fused, _, records = replay_both_ways(plan, tmp_path)
    assert fused.now == 9930 * MS
    by_turn = sorted(records, key=lambda r: (r["arrival_time_ms"], r["session_id"]))
    assert [r["readmission_count"] for r in by_turn] == [0, 0, 0, 0, 0, 33, 0, 0, 1, 0, 0, 0]
    thrash = by_turn[5]["admission_history"]
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in thrash[:3]] == [(1040.0, 1088), (1210.0, 2080),
                                                                             (1270.0, 2048)]
    assert [r["last_token_ms"] for r in by_turn] == [1040.0, 1040.0, 1040.0, 3680.0, 3680.0, 4600.0, 4720.0, 5770.0,
                                                     7850.0, 6810.0, 8890.0, 9930.0]


def test_sglang_runs_take_the_timeline_and_refuse_explain_misses(tmp_path):
    """A timeline samples the radix cache's held and cached pages; --explain-misses (block keys) is refused."""
    path = tmp_path / "b2.yaml"
    path.write_text(SESSION.replace("requests: 8", "requests: 2"))
    assert main(["predict", "--no-progress", "-c", str(path), "--output-dir", str(tmp_path / "t"),
                 "--capture-timeline", "1000", "--format", "json"]) == 0
    first, second = [orjson.loads(line) for line in (tmp_path / "t" / "timeline.jsonl").read_bytes().splitlines()[:2]]
    rank = second["ranks"][0]
    # at 1 s the first request runs alone (the second starts at 5,030 ms), its 100 prompt tokens in the tree and
    # 96 output tokens in private pages
    assert (rank["g1_capacity_blocks"], rank["g1_cached_blocks"], rank["running"]) == (3000, 100, 1)
    assert rank["g1_held_blocks"] == 100 + 96 + 1
    assert main(["predict", "--no-progress", "-c", str(path), "--output-dir", str(tmp_path / "e"),
                 "--explain-misses"]) == 2


PD_PRESSURE = """engine:
  mode: disaggregated
  model: Qwen/Qwen3-32B
  hardware: b200_sxm
  backend: sglang
  kv_transfer:
    bandwidth_gb_per_second: 25.0
    timing_mode: destination_missing
  workers:
    prefill:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        block_size: 32
        capacity: {type: fixed, blocks: 300}
    decode:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        block_size: 32
        capacity: {type: fixed, blocks: 200}
traffic:
  source: {type: synthetic, input_tokens: 1000, output_tokens: 500}
  load: {type: concurrency, concurrency: 8}
  stop: {requests: 40}
"""


def test_pd_under_decode_pressure_matches_aisimulate(tmp_path):
    """AISimulate's SGLang P/D run of docs/reference-runs/sglang/pd-trace-small.yaml (8 x 1,500-token sequences into
    200 decode pages of 32): 19 retractions on the decode rank, each prefilled again there in a pass that takes
    no time (the mocker's decode worker has no prefill time), so the four requests that are never retracted end
    exactly 499 decode passes after their first token; every request's readmissions and last token as AISimulate's,
    committed prefill 61,143 tokens, 45,140.74 ms in all."""
    path = tmp_path / "pd.yaml"
    path.write_text(PD_PRESSURE)
    plan = compile_bytes(PD_PRESSURE.encode(), str(path), ()).plan.to_dict()
    fused, _, records = replay_both_ways(plan, tmp_path)
    by_start = sorted(records, key=lambda r: (r["arrival_time_ms"], r["prefill_admit_ms"]))
    assert [round(r["last_token_ms"], 1) for r in by_start[:10]] == [5060.7, 5110.7, 5160.7, 5210.7, 9640.7, 9640.7,
                                                                     12470.7, 14540.7, 10180.7, 10230.7]
    assert [r["readmission_count"] for r in by_start] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 2, 1, 0, 0, 1, 1, 0, 0, 0,
                                                          1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert sum(r.committed_prefill for r in fused.requests) == 61143
    assert round(fused.now / MS, 2) == 45140.74


SESSIONS_9000 = """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: sglang
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        block_size: 1
        capacity: {type: fixed, blocks: 9000}
traffic:
  source: {type: synthetic-session, session: {turns: 4}}
  load: {type: concurrency, concurrency: 4}
  stop: {sessions: 24}
"""


def test_sessions_under_pressure_match_aisimulate(tmp_path):
    """AISimulate's run of docs/reference-runs/fidelity/s05-sglang-sessions.yaml (24 four-turn sessions, page 1,
    9,000 tokens): the same 11 retracted turns, every request's first and last token, 54,390 ms in all and a mean
    TTFT of 774.58 ms (with the ratio reset on a failed allocation: 2 retractions, 56,550 ms, 984.6 ms), and
    every request's reuse: 76,356 of 264,192 prompt tokens (0.28902).  Before the running batch kept the
    retraction order and before weighing a waiting request stopped refreshing its path, 7 turns differed (76,039,
    0.28782): three turns finishing in one pass entered the tree in another order, and a waiting turn kept a
    remnant of its own history alive."""
    path = tmp_path / "s05.yaml"
    path.write_text(SESSIONS_9000)
    plan = compile_bytes(SESSIONS_9000.encode(), str(path), ()).plan.to_dict()
    fused, _, records = replay_both_ways(plan, tmp_path)
    assert fused.now == 54_390 * MS
    retracted = sorted((int(r["session_id"].split("-")[-1]), r["turn_index"]) for r in records
                       if r["readmission_count"])
    assert retracted == [(1, 2), (3, 1), (6, 3), (7, 3), (8, 2), (10, 3), (11, 3), (15, 3), (16, 2), (18, 3), (19, 3)]
    assert all(r["readmission_count"] == 1 for r in records if r["readmission_count"])
    assert round(sum(r["ttft_ms"] for r in records) / len(records), 4) == 774.5833
    assert (sum(r["reused_input_tokens"] for r in records), sum(r["input_length"] for r in records)) == \
        (76_356, 264_192)


DP = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: sglang
  workers:
    aggregated:
      parallelism: {{attention_data: {dp}}}
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache:
        block_size: 1
        capacity: {{type: fixed, blocks: {blocks}}}
traffic:
  source: {{type: synthetic, input_tokens: {prompt}, output_tokens: {output}}}
  load: {{type: concurrency, concurrency: {n}}}
  stop: {{requests: {n}}}
"""


def _dp_run(tmp_path, **shape) -> list:
    replay = _replayed(tmp_path, DP.format(**shape), "dp.yaml")
    return sorted((r.first_admit_ns // MS, len(r.admissions) - 1) for r in replay.requests)


def test_attention_dp_divides_the_chunk_and_the_ratio(tmp_path):
    """SGLang with attention-DP (server_args' _handle_data_parallelism) divides chunked_prefill_size by the DP size and
    schedule_conservativeness by 0.3 (facts section 61; AISimulate's admissions, every row).  Six 2,048-token prompts
    at t = 0: 8,192 tokens extend four at DP 1, but 4,096 per rank extend two per rank at DP 2, the other two a pass
    later.  200 / 1,000 requests into 3,000 tokens per rank: at DP 1 the third is admitted at 60 ms and retracted,
    the fourth waits to 10,090 ms (ratio 0.7); at DP 2 the ratio starts at 0.21, so each rank's third is admitted
    right after the first extend (50 ms) and its fourth at 100 ms, each retracted once."""
    chunk = dict(blocks=60000, prompt=2048, output=20, n=6)
    assert _dp_run(tmp_path, dp=1, **chunk) == [(0, 0)] * 4 + [(50, 0)] * 2
    assert _dp_run(tmp_path, dp=2, **chunk) == [(0, 0)] * 4 + [(50, 0)] * 2  # (4 = two per rank)
    ratio = dict(blocks=3000, prompt=200, output=1000)
    assert _dp_run(tmp_path, dp=1, n=4, **ratio) == [(0, 0), (0, 0), (60, 1), (10090, 0)]
    assert _dp_run(tmp_path, dp=2, n=8, **ratio) == [(0, 0)] * 4 + [(50, 1)] * 2 + [(100, 1)] * 2


def test_attention_dp_keeps_max_sequences_per_rank(tmp_path):
    """`scheduler.max_sequences` bounds each attention-DP rank's running batch, not the worker's: SGLang divides its
    own `--max-running-requests` by the DP size (per_dp_max_running_requests), so max_sequences stands for that
    quotient, and AISimulate runs max_sequences per rank too (facts section 67: 480 / 720 ms, both tools).  Sixteen
    100 / 20 requests at t = 0 on two ranks, 50 / 10 ms: three per rank run six at a time, in waves of 50 + 19 x 10
    = 240 ms (admitted at 0, 240, 480; the last wave four), mean TTFT (6 x 50 + 6 x 290 + 4 x 530) / 16 = 260 ms;
    four per rank, two waves of eight."""
    text = DP.format(dp=2, blocks=100_000, prompt=100, output=20, n=16)
    for per_rank, admitted, ttft in ((3, [0] * 6 + [240] * 6 + [480] * 4, 260), (4, [0] * 8 + [240] * 8, 170)):
        config = text.replace("      kv_cache:", f"      scheduler: {{max_sequences: {per_rank}}}\n      kv_cache:")
        replay = _replayed(tmp_path, config, f"maxseq{per_rank}.yaml")
        requests = replay.requests
        assert sorted(r.first_admit_ns // MS for r in requests) == admitted
        assert sum(r.first_token_ns - r.spec.arrival_ns for r in requests) == ttft * MS * 16
        assert sorted({r.rank for r in requests}) == [0, 1]


LPM = """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: sglang
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      scheduler: {{max_batched_tokens: 112, schedule_policy: {policy}}}
      kv_cache: {{block_size: 16, capacity: {{type: fixed, blocks: 1000}}}}
traffic:
  source: {{type: trace, paths: [{trace}], block_size: 16}}
  load: {{type: trace_timestamps}}
"""
# four trace rows at t = 0 (blocks of 16): A 48 tokens, B 16, C = A's 48 + 16, D = A's first 16 + 32 of its own
LPM_ROWS = ('{"timestamp":0,"input_length":48,"output_length":2,"hash_ids":[1,2,3]}\n'
            '{"timestamp":0,"input_length":16,"output_length":2,"hash_ids":[10]}\n'
            '{"timestamp":0,"input_length":64,"output_length":2,"hash_ids":[1,2,3,4]}\n'
            '{"timestamp":0,"input_length":48,"output_length":2,"hash_ids":[1,20,21]}\n')


def test_longest_prefix_match_defers_a_duplicate_head_as_aisimulate_s_runtime_does(tmp_path):
    """AISimulate's predict refuses `schedule_policy`; its runtime takes `rank.sglang.schedule_policy` (fifo | lpm)
    and `chunked_prefill_size` (facts section 78).  A 112-token chunk at t = 0, page 16: fcfs extends A, B and C's
    first 48 tokens (48 + 16 + 48), so C's rest and D wait for the next pass (first tokens 50, 50, 100, 100; C reuses
    nothing, D 16 of A's tokens): reuse 16 / 176, mean TTFT 75 ms.  lpm finds nothing cached, so C (A's first 32
    tokens again) goes last: A, B and D fill the chunk (48 + 16 + 48) and C reuses A's 48 a pass later: first tokens
    50, 50, 100, 50, reuse 48 / 176, mean TTFT 62.5 ms; both runs end at 110 ms, in both tools."""
    trace = tmp_path / "lpm.jsonl"
    trace.write_text(LPM_ROWS)
    for policy, firsts, reused in (("fcfs", [50, 50, 100, 100], [0, 0, 0, 16]), ("lpm", [50, 50, 100, 50], [0, 0, 48, 0])):
        replay = _replayed(tmp_path, LPM.format(policy=policy, trace=trace), f"{policy}.yaml")
        requests = sorted(replay.requests, key=lambda r: r.spec.index)
        assert [r.first_token_ns // MS for r in requests] == firsts and replay.now == 110 * MS
        assert [r.reused_tokens for r in requests] == reused
