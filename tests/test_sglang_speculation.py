"""SGLang under speculation (native MTP; issue 15 item 6): a decode pass emits 1 + accepted drafts per request,
cut to what it has left; the retraction check and the pages count each request's largest burst; decoded pages
enter the radix tree when the request finishes (facts §90); TPOT / ITL under fixed timing; a P/D prefill rank emits one token;
byte identity across hash seeds and single stepping (AISimulate's `simulate_decode_step_with_sampler`)."""
from __future__ import annotations

from types import SimpleNamespace

import orjson

from kvreplay.runtime.engines.sglang_decode import decode_batch, decode_work, speculation_of
from kvreplay.runtime.serving.speculation import Speculation
from kvreplay.runtime.traffic.chacha_stream import UniformStream

from .support import distinct_outputs
from .test_replay import replay
from .test_sglang_engine import MS, request, sg_rank, step


def speculating(rank, kind="ngram", rates=(), mean=0.0, drafts=None, seed=42):
    rank.speculation = Speculation(SimpleNamespace(kind=kind, draft_tokens=drafts or len(rates), rates=tuple(rates),
                                                   mean_accepted=mean, seed=seed, draft_layers=0,
                                                   drafts_read_kv=False))
    return rank


def token_times(r) -> list:
    """The request's token times (ns) from its first token and its gap runs."""
    times = [r.first_token_ns]
    for gap, count in r.gaps:
        for _ in range(count):
            times.append(times[-1] + gap)
    return times


def test_every_pass_emits_its_burst_and_a_completing_request_stops_mid_burst():
    """Two drafts always accepted: 3 tokens a pass.  Output 9: the prefill gives token 1 at 50 ms, passes at 60 /
    70 / 80 ms give 3 / 3 / 2 (the last burst cut to the 2 left), so TPOT is 30 ms / 8 and the ITL 10, 0, 0, ..."""
    rank = speculating(sg_rank(1000), rates=(1.0, 1.0))
    a = request(0, [(1, 0, 10)], 9)
    rank.waiting.append(a)
    now, emitted = 0, []
    while rank.busy:
        before = a.generated
        _, now, _ = step(rank, now)
        emitted.append(a.generated - before)
    assert emitted == [1, 3, 3, 2] and a.generated == 9 and a.status == "completed"
    assert [t // MS for t in token_times(a)] == [50, 60, 60, 60, 70, 70, 70, 80, 80]
    assert (a.last_token_ns - a.first_token_ns) / (a.generated - 1) == 30 * MS / 8


def test_mtp_bursts_follow_the_rank_s_stream():
    """nextn 2, 1.5 accepted on average: rates (1, 0.5), so each pass reads one u64 of the rank's stream (seed 9,
    worker 0) and emits 3 tokens below 2**63, else 2 (cut to what is left).  Seed 9's first u64s over 2**64: 0.647,
    0.036, 0.751, 0.631, 0.644, 0.618, 0.993, 0.008: bursts 2, 3, 2, 2, 2, 2, 2, 3."""
    rank = speculating(sg_rank(1000), kind="mtp", mean=1.5, drafts=2, seed=9)
    a = request(3, [(1, 0, 10)], 40)
    rank.waiting.append(a)
    now = step(rank, 0)[1]
    stream, bursts = UniformStream(9), []
    while rank.busy:
        start = a.generated
        expected = min(3 if stream.next_u64() < 2 ** 63 else 2, a.stop_after - start)
        _, now, _ = step(rank, now)
        assert a.generated - start == expected
        bursts.append(expected)
    assert a.generated == 40 and bursts[:8] == [2, 3, 2, 2, 2, 2, 2, 3]


def test_pass_cost_counts_the_verified_drafts_and_a_prefill_rank_emits_one_token():
    rank = speculating(sg_rank(1000), rates=(0.5, 0.5))
    work = decode_work(rank, 3, 300)
    assert (work.decode_requests, work.draft_tokens) == (3, 6)  # every decode verifies its 2 drafts
    rank.role = "prefill"
    assert speculation_of(rank) is None and decode_work(rank, 3, 300).draft_tokens == 0


def test_the_retraction_check_counts_the_largest_burst_and_the_pass_takes_the_drawn_one():
    """Page 1, two running requests, 4 free tokens: one token each would fit (2), but the largest bursts
    (1 + 2 drafts = 3 each: 6) do not, so the youngest output is retracted; the survivor's burst (rates [1, 0]:
    2 tokens drawn) takes 2 slots, not 3."""
    rank = speculating(sg_rank(1000), rates=(1.0, 0.0))
    a, b = request(0, [(1, 0, 10)], 50), request(1, [(2, 0, 10)], 50)
    rank.waiting.append(a)
    step(rank, 0)
    step(rank, 50 * MS)  # a: 1 + 2 tokens
    rank.waiting.append(b)
    step(rank, 60 * MS)  # b's prefill: 1 token
    assert (a.generated, b.generated) == (3, 1)
    pool, state = rank.pool, rank.pool.sglang
    pool.total = pool.total - pool.available + 4
    pool_free = pool.available + pool.evictable
    assert 2 <= pool_free < 6  # (one token each fits, the largest bursts do not)
    items = decode_batch(rank, state)
    assert [r.spec.index for r, _ in items] == [0] and [r.spec.index for r in rank.waiting] == [1]
    assert rank.preemptions == 1
    assert state.leases[id(a)].end == a.num_tokens + 2


def test_a_burst_s_pages_enter_the_tree_when_the_request_finishes():
    """Page 4, prompt 8, output 20, three tokens a pass: the prefill puts the prompt's 8 in the tree (9 tokens
    known); the passes reach 12, 15, 18, 21, 24, 27 tokens and the tree keeps the prompt's 8 (SGLang's verify caches
    nothing mid-decode: facts §90); the last pass (1 token left: 28) finishes it and its 28 enter (7 pages)."""
    rank = speculating(sg_rank(400, page=4), rates=(1.0, 1.0))
    a = request(0, [(1, 0, 8)], 20)
    rank.waiting.append(a)
    now = step(rank, 0)[1]
    assert a.num_tokens == 9 and rank.pool.tree_tokens == 8
    known, trees = [], []
    while a.status != "completed":
        now = step(rank, now)[1]
        known.append(a.num_tokens)
        trees.append(rank.pool.tree_tokens)
    assert known == [12, 15, 18, 21, 24, 27, 28]
    assert trees == [8, 8, 8, 8, 8, 8, 28]


def _mtp_config(tmp_path, blocks: int = 120, traffic: str = """  source: {type: synthetic, input_tokens: 300, output_tokens: 60, cached_prefix_tokens: 128}
  load: {type: concurrency, concurrency: 6}
  stop: {requests: 18}
""", name: str = "sgl-mtp.yaml"):
    """Qwen3-8B on SGLang with MTP (2 drafts, 1.3 accepted), default timing, pages of 16, `blocks` of them."""
    path = tmp_path / name
    path.write_text(f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: sglang
  nextn: 2
  nextn_accepted: 1.3
  workers:
    aggregated:
      kv_cache: {{block_size: 16, capacity: {{type: fixed, blocks: {blocks}}}}}
traffic:
{traffic}""")
    return path


def test_an_sglang_mtp_config_replays_with_bursts(tmp_path):
    """The compiled plan gives the SGLang rank its speculation (it was validated, then ignored): 60 output
    tokens take fewer than 59 decode passes, so some token gaps are 0."""
    out = tmp_path / "out"
    replay(_mtp_config(tmp_path), out)
    prediction = orjson.loads((out / "prediction.json").read_bytes())
    assert prediction["completed_requests"] == 18 and prediction["total_output_tokens"] == 18 * 60
    # a burst's drafts arrive with its base token: gaps of 0, more than half of them at 1.3 accepted a pass
    assert prediction["min_itl_ms"] == 0.0 and prediction["median_itl_ms"] == 0.0


def test_byte_identical_across_hash_seeds_and_single_stepping(tmp_path):
    config = _mtp_config(tmp_path)
    assert len(distinct_outputs(config, tmp_path)) == 1


def test_a_retracted_request_readmits_reusing_its_prompt_pages_only():
    """Page 4, prompts 8 (two sessions), three tokens a pass.  After the prefill and 5 decode passes each has 16
    output tokens (24 known, lease 24) and the tree holds the two prompts' 16 tokens only.  With 7 tokens free the
    largest bursts (27 -> 28: 4 each, 8) do not fit: b (last in the stable order) is retracted; its 16 private
    tokens are freed (23 free, above the survivor's 20) and its prompt's 8 stay.  Readmitted, it reuses those 8 and
    prefills its other 16 again (the old rule, pages entering as bursts reach them, reused 24: facts §90)."""
    rank = speculating(sg_rank(1000, page=4), rates=(1.0, 1.0))
    a, b = request(0, [(1, 0, 8)], 40), request(1, [(2, 0, 8)], 40)
    rank.waiting.extend([a, b])
    now = step(rank, 0)[1]
    for _ in range(5):
        now = step(rank, now)[1]
    state, pool = rank.pool.sglang, rank.pool
    assert (a.generated, b.generated, a.num_tokens, state.leases[id(b)].end) == (16, 16, 24, 24)
    assert pool.tree_tokens == 16
    pool.total = pool.total - pool.available + 7
    items, now, _ = step(rank, now)
    assert items == [(0, 1)] and list(rank.waiting) == [b] and rank.preemptions == 1
    assert pool.tree_tokens == 16 and pool.available == 7 + 16 - 4  # (a's burst took its 4 for 27 tokens)
    pool.total += 1000
    items, now, _ = step(rank, now)
    assert (1, 16) in items and pool.tree_tokens == 8 + 24  # (its prefill computes the 16 and caches all 24)
    assert [x["reused_input_tokens"] for x in b.admissions] == [0, 8]


def test_mtp_kv_events_store_decoded_pages_only_once_the_request_finishes(tmp_path):
    """Two requests of 160 + 600 in 16-token pages, MTP at default timing, G1 large (no eviction): the prompt's 10
    pages are stored when the prefill ends (the first token), and the decoded pages nowhere before the request
    finishes: floor(760 / 16) - 10 = 37 pages each, linked to the prompt's last page, in the flush that follows the
    finish (here the idle one after the last request: the first to finish ends fewer than 40 decode passes from the
    last flush).  The old rule stored a burst's pages as it reached them, at every 40th decode pass."""
    path = _mtp_config(tmp_path, 400, """  source: {type: synthetic, input_tokens: 160, output_tokens: 600}
  load: {type: concurrency, concurrency: 2}
  stop: {requests: 2}
""", "ev.yaml")
    out = tmp_path / "out"
    _, records = replay(path, out, "--capture-kv-events")
    events = [orjson.loads(line) for line in (out / "kv-events.jsonl").read_bytes().splitlines()]
    first_tokens = {r["first_token_ms"] for r in records}
    finishes = sorted(r["terminal_time_ms"] for r in records)
    assert [(e["type"], len(e["block_hashes"])) for e in events] == [("Stored", 10)] * 2 + [("Stored", 37)] * 2
    assert {e["time_ms"] for e in events[:2]} == first_tokens and len(first_tokens) == 1
    assert all(e["parent_hash"] is None for e in events[:2])
    prompt_ends = {e["block_hashes"][-1] for e in events[:2]}
    assert {e["parent_hash"] for e in events[2:]} == prompt_ends
    assert finishes[0] < finishes[1] and [e["time_ms"] for e in events[2:]] == [finishes[1]] * 2
