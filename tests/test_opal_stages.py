"""opal's workload stages as traffic (runtime/traffic/opal_stages.py, opal_stage_runs.py): each stage kind's
requests by hand, stages chained at the last request's end, determinism, and a small replay of two stages."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from array import array

import pytest

from kvreplay.compiler.opal_records import (KvcPlan, OpalPlan, OtelSession, OtelStage, OtelTurn, RateStage,
                                            RouterPlan, TraceStage)
from kvreplay.compiler.plan_records import TraceRow
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.runtime.serving.requests import Content, RequestSpec
from kvreplay.runtime.traffic import block_keys as blocks
from kvreplay.runtime.traffic.opal_stages import StagedTraffic

from .support import ROOT, compile_yaml

S = 1_000_000_000  # ns
MS = 1_000_000


def opal_plan(*stages, seed: int = 42, stop_ns: int | None = None) -> OpalPlan:
    return OpalPlan(stages, None, KvcPlan(16, False, (), None), RouterPlan("round_robin", False, 1, 0, 1, S),
                    seed, stop_ns, 100, "test-model", 80.0, 1, 10**9, "{}")


def tokens(spec: RequestSpec) -> list[int]:
    """Every token id of prompt + output, as the keys are computed over them (non-trace content)."""
    content = spec.content
    return list(array("I", content.token_ids) + blocks.segment_tokens(content.segments))


def rate(kind="uniform", request_rate=2.0, total=5, prompt=(32, 16384), output=(32, 128)) -> RateStage:
    return RateStage(kind, request_rate, total, *prompt, *output)


def turn(start_s: float, end_s: float, prompt, output) -> OtelTurn:
    return OtelTurn(int(start_s * S), int(end_s * S), tuple(prompt), tuple(output))


# ------------------------------------------------------------------ rate stages
def test_uniform_stage_spacing_lengths_and_tokens():
    specs = StagedTraffic(opal_plan(rate())).start()
    assert [s.arrival_ns for s in specs] == [0, S // 2, S, 3 * S // 2, 2 * S]  # i / rate, i from 0
    assert [s.index for s in specs] == [0, 1, 2, 3, 4] and {s.stage for s in specs} == {0}
    # opal's draws (numpy's PCG64 seeded 42; prompt then output per request): pinned, so a change shows
    assert [s.prompt_len for s in specs] == [1491, 10736, 7113, 1437, 3326]
    assert [s.output_len for s in specs] == [107, 74, 115, 99, 41]
    for spec in specs:  # the prompt is token ids 0..n-1, the output the request's own
        ids = tokens(spec)
        assert len(ids) == spec.prompt_len + spec.output_len
        assert ids[:spec.prompt_len] == list(range(spec.prompt_len))
    outputs = [set(tokens(s)[s.prompt_len:]) for s in specs]
    assert all(not (a & b) for i, a in enumerate(outputs) for b in outputs[i + 1:])
    # any two prompts share min(n, m) tokens: the full blocks of the shorter one have equal keys
    a, b = specs[0], specs[1]
    shared = min(a.prompt_len, b.prompt_len) // 16
    assert a.keys(16)[:shared] == b.keys(16)[:shared]
    assert a.keys(16)[shared] != b.keys(16)[shared]  # block 93 holds a's last 3 prompt tokens and its output


def test_uniform_lengths_are_inclusive_and_exact():
    specs = StagedTraffic(opal_plan(rate(total=400, prompt=(5, 7), output=(1, 2)))).start()
    assert {s.prompt_len for s in specs} == {5, 6, 7}
    assert {s.output_len for s in specs} == {1, 2}
    one = StagedTraffic(opal_plan(rate(total=3, prompt=(3, 3), output=(9, 9)))).start()
    assert [(s.prompt_len, s.output_len) for s in one] == [(3, 9)] * 3  # a one-value range


def test_exponential_stage_first_at_start_then_seeded_gaps():
    stage = rate("exponential", request_rate=4.0, prompt=(10, 20), output=(1, 3))
    specs = StagedTraffic(opal_plan(stage)).start()
    # per request: its prompt, its output, then the gap to the next (mean 1 / rate), from one PCG64 seeded 42
    assert [s.arrival_ns for s in specs] == [0, 584047414, 653995986, 1017161115, 1798235104]
    assert [s.prompt_len for s in specs] == [10, 14, 12, 18, 15]
    assert [s.output_len for s in specs] == [3, 3, 1, 3, 1]


def test_each_stage_draws_from_a_fresh_generator_of_the_seed():
    traffic = StagedTraffic(opal_plan(rate(total=3), rate(total=3)))
    first = traffic.start()
    for spec in first:
        second = traffic.after(spec, 10 * S, True)
    # as in opal, every stage draws from a fresh generator of the simulation's seed: the same lengths again
    assert [s.prompt_len for s in second] == [s.prompt_len for s in first] == [1491, 10736, 7113]


# ------------------------------------------------------------------ trace stages
ROWS = (TraceRow(0, 10, 3, (7, 8, 9), None), TraceRow(2 * MS, 9, 2, (7, 8, 5), "s1"),
        TraceRow(5 * MS, 4, 1, (7,), None))


def test_trace_stage_arrivals_are_timestamps_and_ids_are_chunks():
    specs = StagedTraffic(opal_plan(TraceStage(4, ROWS))).start()
    assert [(s.arrival_ns, s.prompt_len, s.output_len, s.session_id) for s in specs] == \
        [(0, 10, 3, None), (2 * MS, 9, 2, "s1"), (5 * MS, 4, 1, None)]
    assert specs[0].content == Content(hash_ids=(7, 8, 9), trace_block=4)
    # block size 4 = the chunk: one key per full block; the shorter last chunk (2 of 4 tokens, then output) is the
    # request's own block; a shared id is a shared key
    a, b, c = (s.keys(4) for s in specs)
    assert a[:2] == b[:2] == [7, 8] and c == [7]
    assert len(a) == 3 and a[2] < 0  # tokens 8..11: 2 prompt tokens of id 9, then a's output
    assert len(b) == 2  # 9 + 2 tokens: the block of tokens 8..11 is not full
    # block size 2 divides the chunk: two keys per id, the last id's full blocks only
    assert specs[0].keys(2)[:5] == [14, 15, 16, 17, 18]
    # block size 3 does not divide it: a block is named by the id holding its last token and its offset
    k3 = [s.keys(3) for s in specs]
    assert k3[0][:2] == k3[1][:2] and k3[0][2] != k3[1][2]  # block 2 (tokens 6..8) ends in id 9 vs id 5
    assert k3[2] == [7 * 8 + 4]  # id 7, offset 0, shifted by the chunk; span 2 * chunk


def test_trace_blocks_larger_than_the_chunk_never_get_negative_keys():
    # engine blocks of 16 over chunks of 4: block 0 ends in the fourth id, 12 tokens before its start
    keys = blocks.trace_keys([0, 1, 0, 2], 16, 4, 16)
    assert keys == [2 * 8 + (0 - 12 + 15)]
    assert min(blocks.trace_keys([0, 0, 0, 0, 0, 0, 0, 0], 32, 4, 16)) >= 0


def test_trace_stages_of_another_chunk_size_never_share_blocks_with_the_first():
    rows8 = (TraceRow(0, 12, 1, (7, 8), None), TraceRow(0, 16, 1, (7, 9), None))
    traffic = StagedTraffic(opal_plan(TraceStage(4, ROWS), TraceStage(8, rows8), TraceStage(4, ROWS[:1])))
    assert (traffic.trace_namespace(4), traffic.trace_namespace(8), traffic.trace_namespaces) == (0, 1, 2)
    stages = [traffic.start()]
    for _ in range(2):
        for spec in stages[-1]:
            follow = traffic.after(spec, S, True)
        stages.append(follow)
    first, second, third = stages
    # chunk 8: id h is the run of tokens of source 2**31 + 2 * h + 1, its last run cut to the prompt
    a, b = second
    assert a.content.segments[:2] == ((2**31 + 15, 0, 8), (2**31 + 17, 0, 4))
    assert tokens(a)[:12] == list(blocks.token_ids(2**31 + 15, 0, 8)) + list(blocks.token_ids(2**31 + 17, 0, 4))
    assert a.keys(4)[:2] == b.keys(4)[:2] and a.keys(4)[2] != b.keys(4)[2]  # id 7 shared, then 8 vs 9
    ids_keys = {k for spec in first + third for k in spec.keys(4)}
    assert not ids_keys & {k for spec in second for k in spec.keys(4)}
    assert third[0].keys(4)[:2] == first[0].keys(4)[:2]  # the first chunk size again: the same ids, the same keys


def test_trace_with_chunk_size_one_gives_token_ids():
    rows = (TraceRow(MS, 3, 2, (11, 12, 13), None), TraceRow(3 * MS, 4, 1, (11, 12, 13, 14), None))
    traffic = StagedTraffic(opal_plan(rate(total=1), TraceStage(1, rows)))
    (first,) = traffic.start()
    a, b = traffic.after(first, 7 * S, True)
    assert (a.arrival_ns, b.arrival_ns) == (7 * S + MS, 7 * S + 3 * MS)  # offsets from the stage's start
    assert (a.index, b.index, a.stage, b.stage) == (1, 2, 1, 1)
    assert tokens(a)[:3] == [11, 12, 13] and tokens(b)[:4] == [11, 12, 13, 14]
    assert len(tokens(a)) == 5 and not set(tokens(a)[3:]) & set(tokens(b)[4:])  # outputs are their own
    assert a.keys(3) == b.keys(3)[:1]  # a's second block holds its output; b's holds 14


# ------------------------------------------------------------------ otel stages
SESSIONS = (
    OtelSession("A", (turn(1.0, 2.0, [1, 2, 3, 4], [5, 6]), turn(5.0, 6.0, [1, 2, 3, 4, 5, 6, 7, 8], [9]))),
    OtelSession("B", (turn(0.5, 0.7, [1, 2, 3], [4]),)),
    OtelSession("C", (turn(3.0, 4.0, [9, 9], []), turn(3.5, 4.5, [9, 9, 0, 7], [8]))),  # overlapping spans: gap 0
)


def run_ends(traffic: StagedTraffic, first: list, durations: dict, completed=lambda spec: True) -> list:
    """Drive `traffic` as the replay would: request i ends `durations.get(i, 1 s)` after it arrives; returns
    [(spec, end_ns)] in end order."""
    import heapq
    queue = [(s.arrival_ns + durations.get(s.index, S), s.index, s) for s in first]
    heapq.heapify(queue)
    done = []
    while queue:
        end, _, spec = heapq.heappop(queue)
        done.append((spec, end))
        for follow in traffic.after(spec, end, completed(spec)):
            heapq.heappush(queue, (follow.arrival_ns + durations.get(follow.index, S), follow.index, follow))
    return done


def test_otel_all_sessions_at_once_turn_gaps_and_tokens():
    traffic = StagedTraffic(opal_plan(OtelStage(SESSIONS, None, 2.0, None)))
    first = traffic.start()
    # no cap: every session has a slot at t0 = 0, so every first turn arrives then (not at 1, 0.5 and 3 s)
    assert [(s.session_id, s.turn_index, s.index, s.arrival_ns) for s in first] == [("A", 0, 0, 0), ("B", 0, 1, 0),
                                                                                    ("C", 0, 2, 0)]
    done = run_ends(traffic, first, {})
    got = [(s.session_id, s.turn_index, s.arrival_ns, s.think_ns, end) for s, end in done]
    # each turn takes 1 s; equal ends go in index order (A0, B0, C0 all end at 1 s)
    assert got == [
        ("A", 0, 0, 0, S),
        ("B", 0, 0, 0, S),  # B's only turn: its session ends, and none is waiting
        ("C", 0, 0, 0, S),
        ("C", 1, S, 0, 2 * S),  # 3.5 - 4.0 < 0 (turn 1 starts before turn 0 ended): the gap clamps at 0
        ("A", 1, S + 6 * S, 6 * S, 8 * S),  # (5 - 2) s * 2 after turn 0 ended at 1 s
    ]
    a0, a1 = done[0][0], done[4][0]
    assert tokens(a0) == [1, 2, 3, 4, 5, 6] and (a0.prompt_len, a0.output_len) == (4, 2)
    assert tokens(a1) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert a1.keys(2)[:3] == a0.keys(2)  # turn 0's prompt and output blocks are turn 1's prefix
    c0 = done[2][0]
    assert (c0.prompt_len, c0.output_len) == (2, 1) and tokens(c0)[:2] == [9, 9]  # an empty output: one own token
    assert traffic.stage_bounds == [[0, 8 * S]]


def test_otel_concurrency_cap_starts_sessions_in_file_order_when_one_ends():
    traffic = StagedTraffic(opal_plan(OtelStage(SESSIONS, 1, 1.0, None)))
    first = traffic.start()
    assert [(s.session_id, s.arrival_ns) for s in first] == [("A", 0)]  # one slot: the file's first session only
    done = run_ends(traffic, first, {})
    got = [(s.session_id, s.turn_index, s.arrival_ns) for s, _ in done]
    # A: turn 0 at 0, ends 1 s; turn 1 at 1 + (5 - 2) = 4 s, ends 5 s.  Then B (next in the file, though its turn
    # starts at 0.5 s, before A's) at the instant A ended, 5 s, ends 6 s; C when B ended, 6 s, ends 7 s; C's
    # turn 1 at once (gap clamped at 0), 7 s
    assert got == [("A", 0, 0), ("A", 1, 4 * S), ("B", 0, 5 * S), ("C", 0, 6 * S), ("C", 1, 7 * S)]
    assert [s.index for s, _ in done] == [0, 1, 2, 3, 4]
    assert [end for _, end in done] == [S, 5 * S, 6 * S, 7 * S, 8 * S]
    assert traffic.stage_bounds == [[0, 8 * S]]


def test_otel_total_requests_caps_turns_and_a_rejected_turn_ends_its_session():
    traffic = StagedTraffic(opal_plan(OtelStage(SESSIONS, 2, 1.0, 3)))
    done = run_ends(traffic, traffic.start(), {})
    # two slots: A0 and B0 at 0 (2 issued), both end at 1 s; A1 is the third and last, at 1 + 3 = 4 s, ends 5 s.
    # B's end frees a slot, but the cap is reached: C never starts
    assert [(s.session_id, s.turn_index, s.arrival_ns) for s, _ in done] == [("A", 0, 0), ("B", 0, 0),
                                                                              ("A", 1, 4 * S)]
    assert traffic.stage_bounds == [[0, 5 * S]]
    traffic = StagedTraffic(opal_plan(OtelStage(SESSIONS, None, 1.0, None)))
    done = run_ends(traffic, traffic.start(), {}, completed=lambda spec: spec.session_id != "A")
    # A0, B0, C0 at 0, ending at 1 s; A0 is rejected, so A1 is never issued; C1 follows C0 at once, ends 2 s
    assert [(s.session_id, s.turn_index, s.arrival_ns) for s, _ in done] == [("A", 0, 0), ("B", 0, 0),
                                                                              ("C", 0, 0), ("C", 1, S)]
    assert [s.index for s, _ in done] == [0, 1, 2, 3] and traffic.stage_bounds == [[0, 2 * S]]


def test_otel_spacing_between_sessions_in_the_file_is_not_replayed():
    day = 86_400.0
    x = OtelSession("X", (turn(0.0, 1.0, [1, 2], [3]),))
    y = OtelSession("Y", (turn(day, day + 1.0, [4, 5], [6]), turn(day + 3.0, day + 4.0, [4, 5, 6, 7], [8])))
    traffic = StagedTraffic(opal_plan(rate(total=1), OtelStage((x, y), None, 1.0, None)))
    (first,) = traffic.start()
    # the otel stage starts at t0 = 7 s: X's and Y's first turns both arrive then, though a day apart in the file
    x0, y0 = traffic.after(first, 7 * S, True)
    assert [(s.session_id, s.turn_index, s.stage, s.arrival_ns) for s in (x0, y0)] == [("X", 0, 1, 7 * S),
                                                                                        ("Y", 0, 1, 7 * S)]
    assert traffic.after(x0, 8 * S, True) == []
    # within a session the spacing is kept: Y1 comes (day + 3) - (day + 1) = 2 s after Y0 ended at 9 s
    (y1,) = traffic.after(y0, 9 * S, True)
    assert (y1.session_id, y1.turn_index, y1.arrival_ns, y1.think_ns) == ("Y", 1, 11 * S, 2 * S)
    # one slot: Y starts when X ends (at 1 s), not a day after X started
    traffic = StagedTraffic(opal_plan(OtelStage((x, y), 1, 1.0, None)))
    (x0,) = traffic.start()
    assert (x0.session_id, x0.arrival_ns) == ("X", 0)
    (y0,) = traffic.after(x0, S, True)
    assert (y0.session_id, y0.turn_index, y0.arrival_ns) == ("Y", 0, S)


# ------------------------------------------------------------------ stages one after another
def test_the_next_stage_starts_when_the_last_request_of_this_one_ends():
    traffic = StagedTraffic(opal_plan(rate(total=3), TraceStage(4, ROWS[:2]), rate(total=0),
                                      OtelStage(SESSIONS[1:2], None, 1.0, None)))
    assert traffic.open_loop is False and traffic.stop_ns is None and traffic.request_limit == 6
    first = traffic.start()
    # the stage's requests end in any order, one rejected: only the last end starts stage 1
    assert traffic.after(first[2], 4 * S, True) == []
    assert traffic.after(first[0], 9 * S, False) == []
    second = traffic.after(first[1], 7 * S, True)
    assert [(s.index, s.stage, s.arrival_ns) for s in second] == [(3, 1, 7 * S), (4, 1, 7 * S + 2 * MS)]
    assert traffic.after(second[0], 8 * S, True) == []
    # stage 2 has no requests: it ends as it starts, and stage 3 starts at the same instant; its session's first
    # turn arrives right then (not 0.5 s later, where B's turn starts in the file)
    (third,) = traffic.after(second[1], 10 * S, True)
    assert (third.index, third.stage, third.arrival_ns) == (5, 3, 10 * S)
    assert traffic.after(third, 11 * S, True) == []
    assert traffic.stage_bounds == [[0, 7 * S], [7 * S, 10 * S], [10 * S, 10 * S], [10 * S, 11 * S]]


def test_a_stage_cut_by_the_stop_time_never_ends():
    traffic = StagedTraffic(opal_plan(rate(total=10), rate(total=2), stop_ns=S))
    first = traffic.start()
    assert [s.arrival_ns for s in first] == [0, S // 2, S]  # the rest would arrive after the stop
    assert [traffic.after(s, S, True) for s in first] == [[], [], []]


def _specs(plan: OpalPlan) -> list:
    traffic = StagedTraffic(plan)
    out = []
    pending = traffic.start()
    while pending:
        spec = pending.pop(0)
        out.append((spec, spec.keys(16), spec.keys(3)))
        pending += traffic.after(spec, (spec.arrival_ns or 0) + S, True)
    return out


MIXED = opal_plan(rate(total=4), rate("exponential", total=4), TraceStage(4, ROWS),
                  OtelStage(SESSIONS, 2, 1.5, None), seed=7)


def test_same_records_same_requests():
    assert _specs(MIXED) == _specs(MIXED)
    assert _specs(dataclasses.replace(MIXED, seed=8)) != _specs(MIXED)


def test_requests_do_not_depend_on_the_hash_seed():
    code = ("from tests.test_opal_stages import _specs, MIXED; "
            "print(repr([(s.index, s.stage, s.arrival_ns, s.prompt_len, s.output_len, k, j) for s, k, j in _specs(MIXED)]))")
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outputs.add(subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                                   check=True).stdout)
    assert len(outputs) == 1


# ------------------------------------------------------------------ a replay of two stages
CONFIG = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 10.0, decode_ms: 2.0}
      kv_cache: {block_size: 16, capacity: {type: fixed, blocks: 1000}}
traffic:
  source: {type: synthetic, input_tokens: 128, output_tokens: 5}
  load: {type: concurrency, concurrency: 1}
  stop: {requests: 1}
"""


def replay_stages(opal: OpalPlan, single_step: bool, config: str = CONFIG):
    result = compile_yaml(config)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    records = result.plan.records
    traffic = dataclasses.replace(records.traffic, kind="opal-stages")  # what an opal config compiles to
    replay = build(dataclasses.replace(records, opal=opal, traffic=traffic), single_step=single_step)
    replay.run()
    return replay, sorted(replay.requests, key=lambda r: r.spec.index)


TWO_STAGES = opal_plan(rate(total=2, prompt=(100, 100), output=(5, 5)),
                       TraceStage(16, (TraceRow(0, 64, 3, (1, 2, 3, 4), None), TraceRow(MS, 64, 3, (1, 2, 3, 5), None))))


@pytest.mark.parametrize("single_step", [False, True])
def test_two_stages_replay_one_after_another(single_step):
    replay, requests = replay_stages(TWO_STAGES, single_step)
    # stage 0: prompts at 0 and 500 ms; prefill 10 ms, then 4 decodes of 2 ms: each ends 18 ms after it arrives
    assert [(r.spec.stage, r.arrival_ns, r.terminal_ns) for r in requests[:2]] == \
        [(0, 0, 18 * MS), (0, 500 * MS, 518 * MS)]
    # the second request reuses the first's 6 full blocks of tokens 0..95 (both prompts are 0..99)
    assert requests[1].reused_tokens == 96
    # stage 1 starts when stage 0's last request ended: its rows at 518 ms + 0 and + 1 ms
    assert [(r.spec.stage, r.arrival_ns) for r in requests[2:]] == [(1, 518 * MS), (1, 519 * MS)]
    assert requests[3].reused_tokens == 48  # ids 1, 2, 3 shared
    assert all(r.status == "completed" for r in requests)
    assert replay.traffic.stage_bounds[0] == [0, 518 * MS]


def test_macro_steps_and_single_steps_agree_over_every_stage_kind():
    session = OtelSession("s", (turn(0.0, 1.0, range(1000, 1040), range(1040, 1050)),
                                turn(1.5, 2.0, range(1000, 1060), range(1060, 1064))))
    opal = dataclasses.replace(TWO_STAGES, stages=TWO_STAGES.stages + (
        OtelStage((session,), None, 1.0, None), rate("exponential", 50.0, 6, (20, 200), (3, 9))))
    (fused, fused_requests), (single, single_requests) = (replay_stages(opal, step) for step in (False, True))
    assert [request_record(r) for r in fused_requests] == [request_record(r) for r in single_requests]
    assert fused.traffic.stage_bounds == single.traffic.stage_bounds
    assert [r.spec.stage for r in single_requests] == [0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3]
    turn0, turn1 = single_requests[4:6]
    assert turn1.arrival_ns == turn0.terminal_ns + S // 2  # 1.5 s - 1.0 s after turn 0 ended
    # turn 0's 40 prompt tokens and its output (KV for 9 of its 10 tokens): 3 full blocks, the third with output
    assert turn0.reused_tokens == 0 and turn1.reused_tokens == 48
    bounds = single.traffic.stage_bounds
    assert all(bounds[k][1] == bounds[k + 1][0] for k in range(3))
    assert min(r.arrival_ns for r in single_requests[6:]) == bounds[3][0]


def test_macro_steps_and_single_steps_agree_on_four_ranks():
    config = CONFIG.replace("    aggregated:\n", "    aggregated:\n      parallelism: {replicas: 2, attention_data: 2}\n")
    opal = opal_plan(rate(request_rate=50.0, total=30, prompt=(32, 2000), output=(5, 60)),
                     OtelStage(SESSIONS, 2, 0.5, None), rate("exponential", 30.0, 20, (32, 3000), (5, 40)),
                     TraceStage(4, ROWS))
    (fused, fused_requests), (single, single_requests) = (replay_stages(opal, step, config) for step in (False, True))
    assert len({r.rank for r in single_requests}) == 4
    assert [request_record(r) for r in fused_requests] == [request_record(r) for r in single_requests]
    assert fused.traffic.stage_bounds == single.traffic.stage_bounds and len(single.traffic.stage_bounds) == 4

def test_the_stop_time_ends_the_replay_inside_a_stage():
    replay, requests = replay_stages(dataclasses.replace(TWO_STAGES, simulation_time_ns=300 * MS), False)
    # the second prompt would arrive at 500 ms, after the stop: stage 0 never ends, stage 1 never starts
    assert replay.traffic.stop_ns == 300 * MS and replay.stopped_at is None
    assert [(r.spec.index, r.status, r.terminal_ns) for r in requests] == [(0, "completed", 18 * MS)]
    assert replay.traffic.stage_bounds == [[0, None]]
    replay, requests = replay_stages(dataclasses.replace(TWO_STAGES, simulation_time_ns=519 * MS), True)
    assert replay.stopped_at == 519 * MS and [r.spec.stage for r in requests] == [0, 0, 1, 1]
    assert replay.close() == 519 * MS
    assert [r.status for r in requests] == ["completed", "completed", "incomplete", "incomplete"]
