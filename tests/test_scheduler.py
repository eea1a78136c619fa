"""vLLM-like scheduler (runtime/scheduler.py) on hand-built ranks, and small end-to-end replays.

Rules checked (REFERENCE.md "Block hashing" and "vLLM G1 details worth matching", spec "GPU cache (G1)"):
running requests get the token budget first, then waiting ones in arrival order; chunked prefill; the last
prompt token is always recomputed; when blocks run out the newest running request is preempted, keeps its
cached hashes and returns to the front of the waiting queue; max_sequences; token times; per-rank caches;
a request that can never fit is rejected without stalling the run.

Block size 4 throughout.  Synthetic requests use segments (source, start, stop): two requests share a
prefix exactly when they share leading segments.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.pass_results import finish_pass
from kvreplay.runtime.serving.pass_work import work_of
from kvreplay.runtime.serving.scheduler import Rank, preempt, schedule
from kvreplay.runtime.serving.speculation import Speculation
from kvreplay.runtime.timing import PassWork
from kvreplay.runtime.timing.fixed import fixed_timing

BS = 4
MS = 1_000_000
TIMING = fixed_timing(10_000_000, 1_000_000)  # a pass with prefill costs 10 ms, with decodes 1 ms, with both 11 ms


def make_request(index: int, prompt: int, output: int, source: int | None = None, rank: int = 0) -> Request:
    """A request whose prompt is `prompt` tokens of `source` (default: its own) and whose output is its own."""
    source = 10 * (index + 1) if source is None else source
    segments = ((source, 0, prompt), (1000 + index, 0, output))
    spec = RequestSpec(index, prompt, output, Content(segments=segments), arrival_ns=0)
    return Request(spec, 0, rank, BS)


def make_rank(blocks: int, budget: int = 64, max_sequences: int = 8, chunked: bool = True,
              index: int = 0) -> Rank:
    return Rank(index, 0, BlockPool(blocks), BS, budget, max_sequences, chunked, name=f"r{index}")


def step(rank: Rank, now: int):
    """One pass starting at `now` with fixed timing: (batch items as (index, tokens), end time, finished)."""
    batch = schedule(rank, now)
    assert batch is not None, "expected work to schedule"
    end = now + TIMING(batch.work)
    items = [(request.spec.index, new) for request, new in batch.items]
    finished = finish_pass(rank, batch, end)
    return items, end, [r.spec.index for r in finished], batch.work


def run_all(rank: Rank, now: int = 0) -> int:
    while rank.busy:
        _, now, _, _ = step(rank, now)
    return now


# --- budget order ------------------------------------------------------------------

def test_running_requests_get_the_budget_first_then_waiting_in_arrival_order():
    """Budget 8: a decoding request takes 1 token, the oldest waiting request the next 7 (chunked); the
    next pass the decode takes 1, the unfinished prefill its last 3, the next waiting request the last 4."""
    rank = make_rank(16, budget=8)
    a = make_request(0, 3, 5)
    rank.waiting.append(a)
    assert step(rank, 0)[0] == [(0, 3)]
    b, c = make_request(1, 10, 2), make_request(2, 4, 2)
    rank.waiting.extend([b, c])
    assert step(rank, 10 * MS)[0] == [(0, 1), (1, 7)]
    assert list(rank.waiting) == [c]
    assert step(rank, 21 * MS)[0] == [(0, 1), (1, 3), (2, 4)]
    assert [r.spec.index for r in rank.running] == [0, 1, 2]


def test_waiting_requests_are_admitted_in_arrival_order():
    """The head of the waiting queue goes first even when a later request is smaller."""
    rank = make_rank(16, budget=8)
    rank.waiting.extend([make_request(0, 6, 1), make_request(1, 2, 1), make_request(2, 1, 1)])
    items, _, _, _ = step(rank, 0)
    assert items == [(0, 6), (1, 2)]
    assert [r.spec.index for r in rank.waiting] == [2]


# --- chunked prefill and token times -------------------------------------------------------

def test_chunked_prefill_8_8_4_then_one_token_per_decode_pass():
    """max_batched_tokens 8 and a 20-token prompt: chunks of 8, 8 and 4.  The first token comes at the end
    of the pass that computes the last prompt token (30 ms); each decode pass (1 ms) adds one token."""
    rank = make_rank(16, budget=8)
    r = make_request(0, 20, 3)
    rank.waiting.append(r)
    passes = []
    now = 0
    while rank.busy:
        items, now, finished, work = step(rank, now)
        passes.append((items, now, finished, work))
    assert [p[0] for p in passes] == [[(0, 8)], [(0, 8)], [(0, 4)], [(0, 1)], [(0, 1)]]
    assert [p[3].prefill_chunks for p in passes[:3]] == [((8, 0),), ((8, 8),), ((4, 16),)]
    assert [p[3] for p in passes[3:]] == [PassWork((), 1, 21), PassWork((), 1, 22)]
    assert [p[1] for p in passes] == [10 * MS, 20 * MS, 30 * MS, 31 * MS, 32 * MS]
    assert r.first_token_ns == 30 * MS
    assert r.second_token_ns == 31 * MS and r.last_token_ns == 32 * MS
    assert r.gaps == [[1 * MS, 2]]
    assert r.generated == 3 and r.status == "completed" and r.terminal_ns == 32 * MS
    assert passes[-1][2] == [0]


def test_no_token_before_the_prompt_is_complete():
    """Partial prefill chunks produce no token: after two of three chunks, nothing was generated."""
    rank = make_rank(16, budget=8)
    r = make_request(0, 20, 3)
    rank.waiting.append(r)
    step(rank, 0)
    step(rank, 10 * MS)
    assert (r.generated, r.first_token_ns, r.num_computed, r.num_tokens) == (0, None, 16, 20)


def test_without_chunking_a_prompt_larger_than_the_budget_waits():
    """enable_chunked_prefill false: a 20-token prompt never gets a budget of 8, and allocates nothing."""
    rank = make_rank(16, budget=8, chunked=False)
    r = make_request(0, 20, 1)
    rank.waiting.append(r)
    assert schedule(rank, 0) is None
    assert list(rank.waiting) == [r] and r.status == "waiting" and r.admissions == []
    assert rank.pool.free_count == 16 and rank.pool.created == 0


def test_without_chunking_a_prompt_is_never_split():
    """Budget 8, two 6-token prompts: without chunking the second waits for the next pass; with chunking it
    takes the 2 remaining tokens."""
    off = make_rank(16, budget=8, chunked=False)
    off.waiting.extend([make_request(0, 6, 2), make_request(1, 6, 2)])
    assert step(off, 0)[0] == [(0, 6)]
    assert step(off, 10 * MS)[0] == [(0, 1), (1, 6)]
    on = make_rank(16, budget=8, chunked=True)
    on.waiting.extend([make_request(0, 6, 2), make_request(1, 6, 2)])
    assert step(on, 0)[0] == [(0, 6), (1, 2)]


# --- the last prompt token is recomputed --------------------------------------------------------

def test_fully_cached_two_block_prompt_reuses_only_one_block():
    """A prompt of exactly 2 full blocks whose blocks are both cached reuses 1 block (4 tokens): the last
    prompt token is always recomputed, so the second block is recomputed."""
    rank = make_rank(8)
    rank.waiting.append(make_request(0, 8, 1, source=7))
    run_all(rank)
    assert rank.pool.match(make_request(9, 8, 1, source=7).keys, 2) == [0, 1]  # both blocks are cached
    b = make_request(1, 8, 1, source=7)
    rank.waiting.append(b)
    batch = schedule(rank, 100 * MS)
    assert batch.items == [(b, 4)]
    assert batch.work.prefill_chunks == ((4, 4),)
    assert b.blocks == [0, 2]  # the hit, then a never-used block for the recomputed second block
    assert b.admissions[0]["reused_input_tokens"] == 4
    assert b.committed_prefill == 4


@pytest.mark.parametrize("prompt, reused", [(5, 4), (8, 4), (9, 8), (12, 8), (13, 12), (16, 12)])
def test_reuse_is_at_most_floor_of_len_minus_one_over_block_size(prompt, reused):
    """With 16 cached tokens of the same source, a prompt of L tokens reuses floor((L - 1) / 4) blocks."""
    rank = make_rank(16)
    rank.waiting.append(make_request(0, 16, 1, source=7))
    run_all(rank)
    r = make_request(1, prompt, 1, source=7)
    rank.waiting.append(r)
    items, _, _, _ = step(rank, 100 * MS)
    assert items == [(1, prompt - reused)]
    assert r.admissions[0]["reused_input_tokens"] == reused == (prompt - 1) // BS * BS


def test_reuse_stops_at_the_first_uncached_block():
    """Prompt blocks after the first differing block are not reused, even though the tokens after it match."""
    rank = make_rank(16)
    rank.waiting.append(make_request(0, 12, 1, source=7))
    run_all(rank)
    segments = ((7, 0, 4), (8, 4, 8), (7, 8, 12), (2000, 0, 1))  # block 1 differs
    spec = RequestSpec(1, 12, 1, Content(segments=segments), arrival_ns=0)
    r = Request(spec, 0, 0, BS)
    rank.waiting.append(r)
    assert step(rank, 100 * MS)[0] == [(1, 8)]
    assert r.reused_tokens == 4


# --- preemption -------------------------------------------------------------------------------

def _preemption_rank():
    """5 blocks, max_sequences 3.  A: 4-token prompt, 6 out; B: 7 + 2; C: 7 + 6; D: 4 + 1; all waiting."""
    rank = make_rank(5, budget=64, max_sequences=3)
    reqs = [make_request(0, 4, 6), make_request(1, 7, 2), make_request(2, 7, 6), make_request(3, 4, 1)]
    rank.waiting.extend(reqs)
    return rank, reqs


def test_preemption_takes_the_newest_running_request():
    """Pass 1 admits A [0], B [1, 2], C [3, 4] (D is held back by max_sequences 3).  In pass 2, A's decode
    needs a 2nd block and none is free: the NEWEST running request, C, is preempted (not A or B), its blocks
    go back tail first and A takes the head (block 4); B still fits in its own 2 blocks."""
    rank, (a, b, c, d) = _preemption_rank()
    items, now, _, _ = step(rank, 0)
    assert items == [(0, 4), (1, 7), (2, 7)]
    assert (a.blocks, b.blocks, c.blocks) == ([0], [1, 2], [3, 4])
    assert list(rank.waiting) == [d]
    batch = schedule(rank, now)
    assert [(r.spec.index, n) for r, n in batch.items] == [(0, 1), (1, 1)]
    assert rank.preemptions == 1
    assert [r.spec.index for r in rank.running] == [0, 1]
    assert a.blocks == [0, 4] and c.blocks == []
    assert (c.status, c.num_computed, c.generated, c.num_tokens) == ("waiting", 0, 1, 8)
    assert list(rank.pool.free) == [3]


def test_preempted_request_goes_to_the_front_of_the_waiting_queue():
    """C, preempted, is placed before D, which had been waiting since the start."""
    rank, (a, b, c, d) = _preemption_rank()
    _, now, _, _ = step(rank, 0)
    schedule(rank, now)
    assert list(rank.waiting) == [c, d]


def test_no_admission_in_a_pass_that_preempted():
    """A pass that preempted admits nobody, even though the preemption made room under max_sequences."""
    rank, (a, b, c, d) = _preemption_rank()
    _, now, _, _ = step(rank, 0)
    batch = schedule(rank, now)
    assert d not in [r for r, _ in batch.items] and d.admissions == []


def test_preempted_request_keeps_its_cached_hashes_and_reuses_them_on_readmission():
    """C's full block (block 3) stays discoverable after preemption.  Once B finishes, C is readmitted first,
    reuses its own block 3 (4 tokens), recomputes 4 tokens (3 prompt + 1 generated), and its admission
    history records the readmission; D is admitted after it."""
    rank, (a, b, c, d) = _preemption_rank()
    _, now, _, _ = step(rank, 0)  # ends at 10 ms
    assert rank.pool.match(c.keys, 3) == [3]  # C's one full prompt block is keyed as soon as scheduled
    items, now, finished, _ = step(rank, now)  # preempts C; B finishes at 11 ms
    assert items == [(0, 1), (1, 1)] and finished == [1]
    assert rank.pool.match(c.keys, 3) == [3]  # still discoverable while C waits
    items, now, finished, work = step(rank, now)  # 11 ms -> 22 ms
    assert items == [(0, 1), (2, 4), (3, 4)]
    # C's recompute ends its known sequence and samples its next token: a decode of the pass too (facts §43)
    assert work.prefill_chunks == ((4, 4), (4, 0)) and work.decode_requests == 2
    assert c.blocks == [3, 2]
    assert finished == [3]
    assert [(h["admission_ordinal"], h["at_ns"], h["reused_input_tokens"], h["is_readmission"])
            for h in c.admissions] == [(0, 0, 0, False), (1, 11 * MS, 4, True)]
    assert (c.first_reused_tokens, c.reused_tokens, c.committed_prefill) == (0, 4, 7 + 3)
    assert c.generated == 2 and c.last_token_ns == 22 * MS
    assert c.first_admit_ns == 0  # the first admission time is kept


def test_readmission_after_decode_reuses_blocks_with_its_own_output():
    """Preempted after 2 tokens (9 known tokens), a request reuses both its full blocks (8 tokens, including a
    generated one) when readmitted and recomputes only the last known token.  The readmission reuses 8 tokens,
    more than the 7-token prompt: only the first admission counts prompt tokens (the spec's field table), and
    AISimulate's readmissions count what the request computed, output included (s01: 1,120 of a 1,000-token
    prompt; facts section 43), so `reused_input_tokens` is 8 too."""
    rank = make_rank(5, budget=100)
    a, b = make_request(0, 7, 3), make_request(1, 7, 6)
    rank.waiting.extend([a, b])
    assert step(rank, 0)[0] == [(0, 7), (1, 7)]  # A [0, 1], B [2, 3]
    assert step(rank, 10 * MS)[0] == [(0, 1), (1, 1)]  # both fill their second block
    items, now, finished, _ = step(rank, 11 * MS)  # A needs block 4; B needs one more: B (newest) preempted
    assert items == [(0, 1)] and finished == [0]
    assert rank.preemptions == 1 and b.blocks == [] and b.num_tokens == 9
    items, now, _, work = step(rank, now)
    assert items == [(1, 1)]
    assert b.blocks == [2, 3, 4]
    assert b.admissions[1]["reused_input_tokens"] == 8 and b.admissions[1]["is_readmission"]
    assert (b.reused_tokens, b.first_reused_tokens) == (8, 0)
    assert b.generated == 3


def test_a_readmission_that_samples_a_token_adds_a_decode_to_its_pass():
    """Dynamo's mocker times every request that samples a token in a pass (`emit_ready_tokens`), so a readmitted
    request whose recompute reaches the end of its known tokens is a decode of that pass as well as a prefill:
    alone, its pass costs prefill + decode (10 + 1 ms), where a fresh prompt's pass costs 10 ms.  AISimulate's
    s01 (facts §43): the passes that readmit take 60 ms at 50 / 10 ms, and every later instant agrees."""
    rank = make_rank(8, budget=100)
    a, b = make_request(0, 7, 6), make_request(1, 7, 3)
    rank.waiting.append(a)
    step(rank, 0)
    step(rank, 10 * MS)
    assert (a.generated, a.num_tokens) == (2, 9)
    rank.running.remove(a)
    preempt(rank, a)
    readmitted = work_of([(a, a.num_tokens)], vllm=True)  # all 9 known tokens recomputed (none reused)
    assert (readmitted.prefill_chunks, readmitted.decode_requests, readmitted.decode_context) == (((9, 0),), 1, 9)
    assert TIMING(readmitted) == 11 * MS
    fresh = work_of([(b, 7)], vllm=True)
    assert (fresh.decode_requests, TIMING(fresh)) == (0, 10 * MS)


def test_a_readmission_whose_hit_covers_its_prompt_recomputes_its_output_at_decode_cost():
    """vLLM's prefill batch counts a chunk's prompt tokens only (the mocker's `schedule_request` cuts the chunk to
    the prompt), so a readmission that finds its whole prompt cached recomputes its output tokens in a pass priced
    as a decode: an 8-token prompt (two full blocks) preempted with 10 known tokens is readmitted with 8 reused,
    recomputes tokens 8-10 and samples its next token in a 1 ms pass; a 7-token prompt with 4 reused still pays
    the prefill (11 ms, as in the test above).  AISimulate: `s01-vllm-pressure-b32` (readmissions reusing 1,056 and 1,120
    of 1,000-token prompts) agrees to the digit with this rule, 10 ms short without it (facts section 70)."""
    rank = make_rank(8, budget=100)
    a = make_request(0, 8, 6)
    rank.waiting.append(a)
    _, now, _, _ = step(rank, 0)
    _, now, _, _ = step(rank, now)
    assert (a.generated, a.num_tokens, now) == (2, 10, 11 * MS)
    rank.running.remove(a)
    preempt(rank, a)
    items, end, _, work = step(rank, now)
    assert items == [(0, 2)] and (a.num_computed, a.num_tokens, a.generated) == (10, 11, 3)
    assert (work.prefill_chunks, work.decode_requests, work.decode_context) == ((), 1, 10)
    assert end - now == 1 * MS
    b = make_request(1, 7, 6)  # preempted after its prefill with 8 known tokens: one block reused, the chunk
    rank = make_rank(8, budget=100)  # 4-8 holds prompt tokens 4-6, so the pass pays the prefill as well
    rank.waiting.append(b)
    _, now, _, _ = step(rank, 0)
    rank.running.remove(b)
    preempt(rank, b)
    items, end, _, work = step(rank, now)
    assert items == [(1, 4)] and work.prefill_chunks == ((4, 4),) and end - now == 11 * MS


def test_speculative_bursts_take_their_kv_after_admission_and_preempt_the_newest():
    """Under speculation a pass's tokens get their KV once the pass is scheduled (the mocker's
    `emit_speculative_ready_tokens`): each request whose pass reaches its known end needs blocks for those tokens
    plus its largest burst (a decode: 1 + 2 drafts, cut to what it has left; a prompt: 1), all together, or the
    newest running request is preempted.  5 blocks of 4; a: 7 + 10 tokens, rates [1, 1] (3 tokens a decode).
    Pass 3 (11 ms) admits b (4 tokens, 1 of the 2 free blocks); then a needs 14 tokens' blocks (4, one more) and
    b 5 tokens' (2, one more): one short, so b is preempted (its prefill still priced: 11 ms).  At 22 ms the same
    again (a: 17 tokens, 5 blocks); a finishes at 33 ms and b, admitted a third time, gets its first token at
    43 ms.  (Reserving the drafts as a decode is scheduled, b ran from 11 ms and was preempted at 22 ms as a
    decode.)  AISimulate: `q1` and `p07` of facts section 70 agree on every request with this rule."""
    rank = make_rank(5, budget=100)
    rank.speculation = Speculation(SimpleNamespace(kind="ngram", draft_tokens=2, rates=(1.0, 1.0), mean_accepted=0.0,
                                                   seed=42, draft_layers=0, drafts_read_kv=False))
    a, b = make_request(0, 7, 10), make_request(1, 4, 5)
    rank.waiting.append(a)
    ends = []
    for _ in range(2):
        _, now, _, _ = step(rank, ends[-1] if ends else 0)
        ends.append(now)
    assert ends == [10 * MS, 11 * MS] and (a.generated, a.num_tokens, len(a.blocks)) == (4, 11, 3)
    rank.waiting.append(b)
    items, now, _, work = step(rank, now)
    assert items == [(0, 1)] and work.prefill_chunks == ((4, 0),) and now == 22 * MS  # b's pass priced, then gone
    assert list(rank.waiting) == [b] and (a.generated, len(a.blocks)) == (7, 4)
    items, now, finished, _ = step(rank, now)
    assert items == [(0, 1)] and finished == [0] and now == 33 * MS
    items, now, _, _ = step(rank, now)
    assert items == [(1, 4)] and now == 43 * MS
    assert [x["at_ns"] for x in b.admissions] == [11 * MS, 22 * MS, 33 * MS] and b.first_token_ns == 43 * MS
    assert rank.preemptions == 2


def test_a_request_that_cannot_grow_preempts_itself_when_newest():
    """If the request needing a block is itself the newest, it is the one preempted and the pass goes on
    without it."""
    rank = make_rank(2, budget=64)
    a, b = make_request(0, 3, 3), make_request(1, 4, 2)
    rank.waiting.extend([a, b])
    assert step(rank, 0)[0] == [(0, 3), (1, 4)]  # a [0], b [1]
    batch = schedule(rank, 10 * MS)  # a decodes inside block 0; b needs a 2nd block: none free
    assert [(r.spec.index, n) for r, n in batch.items] == [(0, 1)]
    assert list(rank.waiting) == [b] and rank.running == [a]


# --- max_sequences and ranks ----------------------------------------------------------------------

def test_max_sequences_limits_running_requests():
    """max_sequences 2: of three waiting requests two run; the third is admitted once they finish."""
    rank = make_rank(16, budget=64, max_sequences=2)
    rank.waiting.extend([make_request(i, 4, 2) for i in range(3)])
    assert step(rank, 0)[0] == [(0, 4), (1, 4)]
    assert len(rank.running) == 2 and len(rank.waiting) == 1
    items, now, finished, _ = step(rank, 10 * MS)
    assert items == [(0, 1), (1, 1)] and finished == [0, 1]
    assert step(rank, now)[0] == [(2, 4)]


def test_ranks_do_not_share_cache():
    """Each attention-DP rank has its own G1: a prompt computed on rank 0 is reused on rank 0 only."""
    r0, r1 = make_rank(8, index=0), make_rank(8, index=1)
    r0.waiting.append(make_request(0, 8, 1, source=7))
    run_all(r0)
    other = make_request(1, 8, 1, source=7, rank=1)
    r1.waiting.append(other)
    assert step(r1, 100 * MS)[0] == [(1, 8)]
    assert other.reused_tokens == 0 and other.admissions[0]["pool"] == "r1"
    same = make_request(2, 8, 1, source=7)
    r0.waiting.append(same)
    assert step(r0, 100 * MS)[0] == [(2, 4)]
    assert same.reused_tokens == 4


# --- end to end: engine with fixed timing -----------------------------------------------------------

def _plan(tmp_path: Path, rows: list[dict], engine_extra: str = "", blocks: int = 6, budget: int = 64,
          attention_data: int = 1) -> dict:
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    text = f"""
engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
{engine_extra}  workers:
    aggregated:
      parallelism: {{attention_data: {attention_data}}}
      timing: {{type: fixed, prefill_ms: 10, decode_ms: 1}}
      scheduler: {{max_batched_tokens: {budget}, max_sequences: 4}}
      kv_cache:
        block_size: 4
        capacity: {{type: fixed, blocks: {blocks}}}
traffic:
  source: {{type: trace, paths: [trace.jsonl], block_size: 4}}
  load: {{type: trace_timestamps}}
"""
    result = compile_bytes(text.encode(), str(tmp_path / "t.yaml"), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan.to_dict()


def _replay(plan: dict, tmp_path: Path, single_step: bool = False):
    replay = build(finish_plan(plan, tmp_path), single_step=single_step)
    replay.run()
    return replay, [request_record(r) for r in replay.requests]


ROWS = [
    {"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]},
    {"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": list(range(3, 13))},  # 11 blocks > 6
    {"timestamp": 5, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]},
]


def test_engine_rejects_a_request_that_never_fits_and_completes_the_run(tmp_path):
    """6 G1 blocks: a 40 + 2 token request (11 blocks) is rejected with a reason; the others run.  It arrives
    with A at 0, behind it: the first pass (A's prefill, 0-10) reaches it, so it is rejected at 10.

    Timeline (prefill 10 ms, decode 1 ms): 0-10 A prefills 8 tokens (first token 10); C arrives at 5 and
    joins at 10: A decode + C prefill of 4 tokens (one block reused) take 11 ms -> A's 2nd token and C's
    first at 21; C's decode ends at 22."""
    replay, records = _replay(_plan(tmp_path, ROWS), tmp_path)
    a, b, c = records
    assert b["terminal_status"] == "rejected"
    assert b["terminal_reason"] == "the prompt needs 10 G1 blocks but worker0.dp0 holds 6"
    assert b["terminal_time_ms"] == 10.0 and b["admission_history"] == [] and b["output_length"] == 0
    assert [a["terminal_status"], c["terminal_status"]] == ["completed", "completed"]
    assert (a["first_token_ms"], a["last_token_ms"], a["ttft_ms"], a["e2e_latency_ms"]) == (10.0, 21.0, 10.0, 21.0)
    assert (c["first_admit_ms"], c["first_token_ms"], c["last_token_ms"]) == (10.0, 21.0, 22.0)
    assert (c["ttft_ms"], c["ttst_ms"], c["e2e_latency_ms"]) == (16.0, 1.0, 17.0)
    assert (a["reused_input_tokens"], c["reused_input_tokens"]) == (0, 4)
    assert replay.now == 22 * MS


def test_engine_macro_steps_match_single_stepping(tmp_path):
    """Fused decode passes give exactly the records single stepping gives."""
    rows = [{"timestamp": 0, "input_length": 6, "output_length": 9, "hash_ids": [1, 2]},
            {"timestamp": 0, "input_length": 7, "output_length": 12, "hash_ids": [1, 3]},
            {"timestamp": 30, "input_length": 9, "output_length": 5, "hash_ids": [1, 3, 4]}]
    plan = _plan(tmp_path, rows, blocks=9)
    _, fused = _replay(plan, tmp_path)
    _, single = _replay(plan, tmp_path, single_step=True)
    assert fused == single
    assert [r["terminal_status"] for r in fused] == ["completed"] * 3


def test_engine_places_requests_round_robin_on_isolated_ranks(tmp_path):
    """attention_data 2: requests alternate ranks; the same prompt on the other rank reuses nothing, on the
    same rank (third request, arriving after the first finished) reuses one block."""
    rows = [{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]},
            {"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]},
            {"timestamp": 50, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}]
    _, records = _replay(_plan(tmp_path, rows, attention_data=2), tmp_path)
    assert [r["dp_rank"] for r in records] == [0, 1, 0]
    assert [r["reused_input_tokens"] for r in records] == [0, 0, 4]
    assert [r["first_token_ms"] for r in records] == [10.0, 10.0, 60.0]


def test_engine_rejects_a_prompt_that_can_never_be_scheduled_without_chunking(tmp_path):
    """Chunking off, budget 8: a 20-token prompt can never run.  It must end `rejected` (with a reason) and
    must not block the 4-token request behind it, which completes (prefill 10 ms + decode 1 ms)."""
    rows = [{"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5]},
            {"timestamp": 1, "input_length": 4, "output_length": 2, "hash_ids": [9]}]
    plan = _plan(tmp_path, rows, engine_extra="  enable_chunked_prefill: false\n", blocks=60, budget=8)
    _, (big, small) = _replay(plan, tmp_path)
    assert big["terminal_status"] == "rejected" and big["terminal_reason"]
    assert small["terminal_status"] == "completed"
    assert (small["first_token_ms"], small["last_token_ms"]) == (11.0, 12.0)
