"""SGLang's engine (runtime/engines/sglang*.py) and its radix-cache G1 (runtime/tiers/radix_cache.py).

One test per sentence of the spec's SGLang paragraph (kv-cache-tiers.md, G1) that the engine models, each a small
scenario with exact cached tokens, events and times (fixed timing 50 ms prefill / 10 ms decode); whole runs against
AISimulate are in test_sglang_parity.py.
"""
from __future__ import annotations

from array import array

import orjson
import xxhash

from kvreplay.cli import main
from kvreplay.runtime.engines.engine import VLLM
from kvreplay.runtime.engines.sglang import SGLANG
from kvreplay.runtime.engines.sglang_decode import decode_batch
from kvreplay.runtime.engines.sglang_prefill import lpm_order, record_admission
from kvreplay.runtime.engines.table import engine_for
from kvreplay.runtime.outputs.radix_events import RadixEvents
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.scheduler import Rank
from kvreplay.runtime.timing.fixed import fixed_timing
from kvreplay.runtime.tiers.radix_cache import RadixCache
from kvreplay.runtime.tiers.token_runs import OPEN_END, cut

from .golden import golden_extension
from .support import ROOT

MS = 1_000_000
TIMING = fixed_timing(50 * MS, 10 * MS)


def sg_rank(tokens: int, page: int = 1, budget: int = 8192, max_sequences: int = 8) -> Rank:
    rank = Rank(0, 0, RadixCache(tokens // page), page, budget, max_sequences, True, name="r0")
    SGLANG.equip(rank)
    return rank


def request(index: int, segments, output: int, output_source: int | None = None) -> Request:
    """A request whose prompt is `segments` ((source, start, stop), ...) and whose output is its own source."""
    prompt = sum(stop - start for _, start, stop in segments)
    out = ((1000 + index if output_source is None else output_source), 0, output)
    spec = RequestSpec(index, prompt, output, Content(segments=tuple(segments) + (out,)), arrival_ns=0)
    return Request(spec, 0, 0, 0)


def step(rank, now: int):
    batch = SGLANG.schedule(rank, now)
    assert batch is not None
    end = now + TIMING(batch.work)
    items = [(r.spec.index, new) for r, new in batch.items]
    return items, end, [r.spec.index for r in SGLANG.finish(rank, batch, end)]


def run(rank, now: int = 0) -> int:
    while rank.busy:
        _, now, _ = step(rank, now)
    return now


def test_the_table_gives_sglang_its_engine_on_every_role():
    assert engine_for("sglang") is SGLANG and SGLANG.fusable and not SGLANG.keyed
    assert engine_for("sglang", "prefill") is engine_for("sglang", "decode") is SGLANG
    assert engine_for("vllm", "decode") is VLLM


def test_complete_prompt_pages_enter_the_radix_cache_after_prefill():
    """Page 4, prompt 10: after the prefill pass the tree holds its 2 full pages (8 tokens), not the partial tail.
    A request of the same batch with the same prompt reuses nothing; one admitted a pass later reuses 8."""
    rank = sg_rank(400, page=4)
    a, b, c = (request(i, [(7, 0, 10)], 3) for i in range(3))
    rank.waiting.extend([a, b])
    assert step(rank, 0) == ([(0, 10), (1, 10)], 50 * MS, [])
    assert rank.pool.tree_tokens == 8  # b's copy of the same 2 pages was a duplicate: freed
    assert (a.admissions[0]["reused_input_tokens"], b.admissions[0]["reused_input_tokens"]) == (0, 0)
    rank.waiting.append(c)
    assert step(rank, 50 * MS) == ([(2, 2)], 100 * MS, [])
    assert c.admissions[0]["reused_input_tokens"] == 8


def test_decoded_pages_enter_when_a_request_finishes():
    """Page 4, prompt 10, output 6: while it decodes the tree keeps its 8 prompt tokens; when it finishes, prompt and
    all output (16 tokens: SGLang's overlap scheduler has committed the last token's KV) are cached, and a next
    turn (that prompt + output + 4 new) reuses all 16 of them."""
    rank = sg_rank(400, page=4)
    a = request(0, [(7, 0, 10)], 6, output_source=8)
    rank.waiting.append(a)
    step(rank, 0)
    for k in range(4):
        step(rank, (50 + 10 * k) * MS)
        assert rank.pool.tree_tokens == 8
    assert step(rank, 90 * MS) == ([(0, 1)], 100 * MS, [0])
    assert rank.pool.tree_tokens == 16 and rank.pool.evictable == 16 and rank.pool.private == 0
    turn = request(1, [(7, 0, 10), (8, 0, 6), (9, 0, 4)], 2)
    rank.waiting.append(turn)
    step(rank, 100 * MS)
    assert turn.admissions[0]["reused_input_tokens"] == 16


def test_a_four_turn_session_reuses_prompt_and_all_output_per_turn():
    """AISimulate's a1 run (sessions of 4 turns, 1,024 new tokens and 128 output each, page 1): every turn reuses
    1,152 tokens more than the last (vLLM's rule would reuse 1,151: the last output token's KV is never computed)."""
    rank = sg_rank(100_000)
    segments, reused = [], []
    for turn in range(4):
        segments.append((100 + turn, 0, 1024))
        r = request(turn, segments, 128, output_source=200 + turn)
        rank.waiting.append(r)
        run(rank)
        reused.append(r.admissions[0]["reused_input_tokens"])
        segments.append((200 + turn, 0, 128))
    assert reused == [0, 1152, 2304, 3456]


def test_a_request_of_one_output_token_leaves_its_prompt_cached_only():
    """AISimulate's a4 out1 run (4 turns of 1,000 new tokens and 1 output token, page 1): the token the extend pass
    samples ends the request before any forward computes its KV, so each turn reuses the prompt before it and
    the output token that followed (1,000, then 2,001 = 1,000 + 1 + 1,000, ...), never its own token's slot."""
    rank = sg_rank(100_000)
    segments, reused = [], []
    for turn in range(4):
        segments.append((100 + turn, 0, 1000))
        r = request(turn, segments, 1, output_source=200 + turn)
        rank.waiting.append(r)
        run(rank)
        reused.append(r.admissions[0]["reused_input_tokens"])
        assert rank.pool.tree_tokens == r.spec.prompt_len  # (the prompt, not its output token)
        segments.append((200 + turn, 0, 1))
    assert reused == [0, 1000, 2001, 3002]


def test_a_long_prompt_costs_runs_not_tokens():
    """A 10,000-token prompt at page 1 is one radix node of one run (its prefill), its output a child of one run (its
    finish), and no per-token block keys are made."""
    rank = sg_rank(100_000, budget=16_384)
    a = request(0, [(5, 0, 10_000)], 2)
    rank.waiting.append(a)
    run(rank)
    (node,) = rank.pool.root.children.values()
    (tail,) = node.children.values()
    assert (node.length, len(node.runs), tail.length, len(tail.runs)) == (10_000, 1, 2, 1)
    assert not [k for k in a.spec._keys if isinstance(k, int)]



def test_cutting_runs_walks_only_the_runs_it_needs():
    """`cut` of a 4-run sequence: from inside the second run to the end (the rest is sliced), inside one run, and
    across three; a match that steps down a path of many nodes cuts each run once (token_runs.py)."""
    runs = (("h", 0, 512), ("h2", 0, 512), ("h3", 0, 512), ("o", 0, 100))
    assert cut(runs, 600, OPEN_END) == (("h2", 88, 512), ("h3", 0, 512), ("o", 0, 100))
    assert cut(runs, 600, 700) == (("h2", 88, 188),)
    assert cut(runs, 100, 1100) == (("h", 100, 512), ("h2", 0, 512), ("h3", 0, 76))
    assert cut(runs, 1636, OPEN_END) == ()
    assert cut(runs, 1024, 1536) == (("h3", 0, 512),)

def test_retraction_order_and_the_20_token_reserve():
    """Three running requests, then G1 shrinks to what they hold: the decode cannot grow, so SGLang retracts.  The
    order is descending output, then ascending prompt, taken from the end: of b and c (same output) c, whose
    prompt is longer, goes first; a (more output) and b stay once the rest fits.  c's prompt stays in the tree,
    unlocked, until the reserve of 20 tokens per survivor (40 > the 2 free) evicts its 12 tokens."""
    rank = sg_rank(1000)
    a = request(0, [(1, 0, 10)], 50)
    rank.waiting.append(a)
    step(rank, 0)
    step(rank, 50 * MS)  # a decodes once: it has 2 output tokens
    b, c = request(1, [(2, 0, 10)], 50), request(2, [(3, 0, 12)], 50)
    rank.waiting.extend([b, c])
    step(rank, 60 * MS)
    assert [r.spec.index for r in rank.running] == [0, 1, 2] and rank.pool.tree_tokens == 10 + 10 + 12
    pool = rank.pool
    held = pool.total - pool.available
    pool.total = held + 1  # one free token: three decodes need three
    items = decode_batch(rank, pool.sglang)
    assert [r.spec.index for r, _ in items] == [0, 1]
    assert [r.spec.index for r in rank.waiting] == [2] and c.num_computed == 0 and rank.preemptions == 1
    assert pool.evictions == 12 and pool.tree_tokens == 20
    assert pool.available == 1 + 1 + 12 - 2  # free, c's output slot, its prompt; less the survivors' next slots
    # the new-token estimate: (decoded + 20 per survivor) / (their max output + 1)
    assert pool.sglang.ratio == (2 + 1 + 40) / (100 + 1)
    # readmitted (its prompt evicted), c recomputes its 12 prompt tokens and its 1 output token: committed prefill
    # counts both, as AISimulate does (12 at its first admission + 13 now)
    pool.total = 1000
    step(rank, 70 * MS)
    assert c.admissions[-1]["is_readmission"] and c.admissions[-1]["reused_input_tokens"] == 0
    assert c.committed_prefill == 12 + 13


def test_prefill_decode_interval_keeps_prefill_out_for_n_rounds():
    """AISimulate's c2 pdi2: after each extend pass, two decode rounds run before the next prefill."""
    rank = sg_rank(100_000)
    rank.pool.sglang.interval = 2
    a, b = request(0, [(1, 0, 100)], 10), request(1, [(2, 0, 100)], 10)
    rank.waiting.append(a)
    step(rank, 0)
    rank.waiting.append(b)
    assert step(rank, 50 * MS)[0] == [(0, 1)]
    assert step(rank, 60 * MS)[0] == [(0, 1)]
    assert step(rank, 70 * MS)[0] == [(1, 100)]


def test_chunked_prefill_chunks_by_the_rank_budget_and_caches_each_chunk():
    """Budget 8 per DP rank: a 20-token prompt runs as chunks 8, 8, 4; each chunk's pages enter the tree."""
    rank = sg_rank(1000, page=4, budget=8)
    rank.waiting.append(request(0, [(1, 0, 20)], 2))
    assert step(rank, 0)[0] == [(0, 8)] and rank.pool.tree_tokens == 8
    assert step(rank, 50 * MS)[0] == [(0, 8)] and rank.pool.tree_tokens == 16
    assert step(rank, 100 * MS)[0] == [(0, 4)] and rank.pool.tree_tokens == 20


def test_a_prompt_past_the_budget_left_is_chunked_to_fill_the_pass():
    """Budget 10 at page 1, two 6-token prompts: the first takes 6, the second the 4 left (not a pass of its own),
    and its last 2 tokens run in the next pass beside a third prompt (SGLang's PrefillAdder; AISimulate's default
    timing run of 3,000-token prompts at chunk 8,192 does the same: 3,000 + 3,000 + 2,192, then 808 + 3,000)."""
    rank = sg_rank(1000, budget=10)
    a, b, c = (request(i, [(i + 1, 0, 6)], 2) for i in range(3))
    rank.waiting.extend([a, b, c])
    assert step(rank, 0) == ([(0, 6), (1, 4)], 50 * MS, [])
    assert b.num_computed == 4 and rank.pool.tree_tokens == 6 + 4
    assert step(rank, 50 * MS)[0] == [(1, 2), (2, 6)]
    assert [r.spec.index for r in rank.running] == [0, 1, 2]


def test_longest_prefix_match_policy_orders_by_cached_prefix():
    rank = sg_rank(1000)
    rank.waiting.append(request(0, [(1, 0, 40)], 1))
    run(rank)
    short, long_ = request(1, [(1, 0, 10), (2, 0, 5)], 1), request(2, [(1, 0, 30), (3, 0, 5)], 1)
    rank.waiting.extend([short, long_])
    assert lpm_order(rank, rank.waiting) == [long_, short]


def test_longest_prefix_match_puts_a_duplicate_uncached_prefix_last():
    """SGLang's in-batch prefix caching under lpm: with nothing cached, C's first 32 tokens are A's (it shares A's
    40), so C goes after D (which shares 20 of A's tokens only) though it came first; with a 100-token chunk A, B and
    D fill the pass (40 + 10 + 50) and C's next pass (an extend pass alone: 50 ms) reuses A's 40 prompt tokens."""
    rank = sg_rank(1000, budget=100)
    rank.pool.sglang.policy = "lpm"
    a, b = request(0, [(1, 0, 40)], 2), request(1, [(2, 0, 10)], 2)
    c, d = request(2, [(1, 0, 40), (3, 0, 5)], 2), request(3, [(1, 0, 20), (4, 0, 30)], 2)
    rank.waiting.extend([a, b, c, d])
    assert lpm_order(rank, rank.waiting) == [a, b, d, c]
    assert step(rank, 0) == ([(0, 40), (1, 10), (3, 50)], 50 * MS, [])
    items, end, _ = step(rank, 50 * MS)
    assert items == [(2, 5)] and end == 100 * MS and c.admissions[0]["reused_input_tokens"] == 40
    # once A's prompt is cached, C's 40 cached tokens put it first (a cached prefix over 32 is not checked)
    e = request(4, [(1, 0, 40), (5, 0, 9)], 2)
    f = request(5, [(6, 0, 40)], 2)
    assert lpm_order(rank, [f, e]) == [e, f]


def test_admission_charges_extend_plus_output_against_the_ratio_estimate():
    """AISimulate's b2 run (3,000 one-token pages, prompt 100, output 2,000): the second request starts at 5,030 ms,
    when 3000 - 599 - 1501 x ratio first exceeds its 2,100 tokens (the ratio decays from 0.7 per decode pass)."""
    rank = sg_rank(3000)
    a, b = request(0, [(1, 0, 100)], 2000), request(1, [(2, 0, 100)], 2000)
    rank.waiting.extend([a, b])
    now = 0
    while not b.admissions:
        _, now, _ = step(rank, now)
    assert b.first_admit_ns == 5030 * MS



def test_an_admission_that_cannot_allocate_leaves_the_ratio_as_it_is():
    """100 one-token pages.  a (prompt 40, output 2) leaves 42 tokens cached; b (prompt 50, output 5) runs.  d's
    prompt is a's 42 tokens + 20 new: its charge (20 + 1) fits the budget (6 free + 42 evictable - b's 3 left x ratio), but
    its prefix, once locked, is not evictable, so its 20 pages cannot be allocated: it waits, nothing is evicted,
    and the new-token ratio keeps its decay (AISimulate's s05 run: a reset here refused a chunk continuation
    17,000 ms in, which AISimulate admits)."""
    rank = sg_rank(100)
    pool, state = rank.pool, rank.pool.sglang
    a = request(0, [(7, 0, 40)], 2)
    rank.waiting.append(a)
    assert run(rank) == 60 * MS and pool.tree_tokens == 42
    b = request(1, [(8, 0, 50)], 5)
    rank.waiting.append(b)
    step(rank, 60 * MS)  # b's extend pass (its first token)
    step(rank, 110 * MS)  # its first decode pass (a's one decode pass came before)
    d = request(2, [(7, 0, 40), (1000, 0, 2), (9, 0, 20)], 1)
    rank.waiting.append(d)
    ratio = state.ratio
    assert ratio == 0.7 - 2 * (0.7 - 0.098) / 600  # two decode passes so far
    # b's prompt is in the tree (locked) and its 2 output slots are private
    assert (pool.tree_tokens, pool.available, pool.evictable) == (42 + 50, 100 - 92 - 2, 42)
    assert step(rank, 120 * MS)[0] == [(1, 1)]  # a decode pass: d was not admitted
    assert list(rank.waiting) == [d] and not d.admissions
    assert pool.tree_tokens == 92 and pool.evictable == 42 and pool.evictions == 0
    assert state.ratio == ratio - (0.7 - 0.098) / 600  # decayed, not reset to 0.7

EVENTS = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: sglang
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache: {block_size: 16, capacity: {type: fixed, blocks: 12}}
traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 40, output_tokens_per_turn: 8, session: {turns: 3}}
  load: {type: concurrency, concurrency: 2}
  stop: {sessions: 2}
"""


def test_kv_events_follow_radix_insertions_batched_and_flushed(tmp_path, snapshot):
    """Two 3-turn sessions in 12 pages of 16: each extend pass stores the prompt's complete pages (parent link and
    session id kept), each finish its decoded pages; the evictions of one admission are one batched Removed event.
    Events leave at the end of an extend pass, of every 40th decode pass, or when the rank goes idle."""
    path = tmp_path / "events.yaml"
    path.write_text(EVENTS)
    out = tmp_path / "out"
    assert main(["predict", "--no-progress", "-c", str(path), "--output-dir", str(out), "--capture-kv-events",
                 "--format", "json"]) == 0
    events = [orjson.loads(line) for line in (out / "kv-events.jsonl").read_bytes().splitlines()]
    first = events[0]
    assert (first["type"], first["time_ms"], len(first["block_hashes"]), first["parent_hash"]) == ("Stored", 50.0, 2, None)
    # a session's next store continues its last one (its parent is that store's last page)
    assert events[2]["parent_hash"] == first["block_hashes"][-1] and events[2]["session_id"] == first["session_id"]
    assert [e["type"] for e in events].count("Removed") == 2
    assert events == snapshot.use_extension(golden_extension("replays"))(name="sglang-session.kv-events")


def test_the_kv_events_golden_is_valid_for_dynamos_router():
    """The golden of the run above, read as Dynamo's router index would: hashes are REFERENCE.md's (XXH3-64, seed
    1337, of each full page's token ids as little-endian u32, chained as XXH3-64 of (parent, block)), computed
    here from the synthetic tokens (token p of source s is s x 1,000,003 + p; request i's new input is source
    2**20 + 2i, its output the next); every store's parent is resident, no page is stored twice while resident,
    and every removal names resident pages."""
    events = orjson.loads((ROOT / "golden" / "replays" / "sglang-session.kv-events.json").read_bytes())

    def tokens(source, start, stop):
        return array("I", [(source * 1_000_003 + p) & 0xFFFFFFFF for p in range(start, stop)])

    def block(ids):
        return xxhash.xxh3_64_intdigest(ids.tobytes(), 1337)

    def chained(parent, ids):
        return xxhash.xxh3_64_intdigest(parent.to_bytes(8, "little") + block(ids).to_bytes(8, "little"), 1337)

    own = 1 << 20  # session 0's first turn is request 0
    prompt = tokens(own, 0, 40)
    first = block(prompt[:16])
    second = chained(first, prompt[16:32])
    third = chained(second, prompt[32:40] + tokens(own + 1, 0, 8))  # (its 8 prompt tokens left, its 8 output)
    assert events[0]["block_hashes"] == [first, second] and events[2]["block_hashes"] == [third]
    resident: set[int] = set()
    for event in events:
        hashes = event["block_hashes"]
        if event["type"] == "Stored":
            assert event["parent_hash"] is None or event["parent_hash"] in resident
            assert not resident & set(hashes) and len(set(hashes)) == len(hashes)
            resident |= set(hashes)
        else:
            assert event["type"] == "Removed" and set(hashes) <= resident
            resident -= set(hashes)
    assert [e["event_id"] for e in events] == list(range(len(events)))
    assert [e["time_ms"] for e in events] == sorted(e["time_ms"] for e in events)


def test_events_flush_every_40_decode_passes():
    """A request decoding 100 tokens stores nothing until it finishes; a request stored before waits in the
    buffer until the 40th decode pass flushes it."""
    rank = sg_rank(1000)
    rank.pool.events = []
    a = request(0, [(1, 0, 10)], 100)
    rank.waiting.append(a)
    step(rank, 0)
    assert [e[0] for e in rank.pool.events] == ["Stored"]
    rank.pool.events.clear()
    b = request(1, [(2, 0, 10)], 1)  # finishes in its own extend pass: stored and flushed at its end
    rank.waiting.append(b)
    now = step(rank, 50 * MS)[1]
    assert len(rank.pool.events) == 1
    rank.pool.events.clear()
    for k in range(39):
        now = step(rank, now)[1]
        assert not rank.pool.events
    rank.pool.recorder.pending.append(["Removed", [7], {}])  # a stand-in for an eviction since the last flush
    step(rank, now)
    assert rank.pool.events == [("Removed", [7], {})]


def test_consecutive_compatible_stores_and_removals_are_batched():
    """Page 4.  One session inserts 8 tokens, then the same run to 16: the second node continues the first (its
    parent link is the first's last page), so one Stored event carries all 4 pages with no parent.  Another
    session's continuation of the same path is not compatible: its own event, linked to the 4th page.  Evicting
    everything is one Removed event of all 6 pages: the leaf's, then each parent's in turn."""
    pool = RadixCache(100, page=4)
    pool.events = []
    pool.recorder = recorder = RadixEvents(pool, pool.events)
    one, two = request(0, [(7, 0, 24)], 1).spec, request(1, [(7, 0, 24)], 1).spec
    one = RequestSpec(0, 24, 1, one.content, session_id="s1")
    two = RequestSpec(1, 24, 1, two.content, session_id="s2")
    pool.insert(one, 8)
    pool.insert(one, 16)
    pool.insert(two, 24)
    assert pool.evict(24) == 24
    recorder.flush()
    (k1, h1, x1), (k2, h2, x2), (k3, h3, x3) = pool.events
    assert (k1, len(h1), x1) == ("Stored", 4, {"parent_hash": None, "session_id": "s1"})
    assert (k2, len(h2), x2) == ("Stored", 2, {"parent_hash": h1[-1], "session_id": "s2"})
    assert (k3, h3, x3) == ("Removed", h2 + h1[2:] + h1[:2], {})  # (the leaf, then its parents, node by node)


def test_events_flush_when_the_rank_goes_idle():
    """A request of 10 tokens and 3 output at page 1: its prompt is stored and flushed after its extend pass;
    its output is stored when it finishes in its second decode pass, and flushed at once because the rank is then
    idle (not after 40 decode passes)."""
    rank = sg_rank(1000)
    rank.pool.events = []
    a = request(0, [(1, 0, 10)], 3)
    rank.waiting.append(a)
    step(rank, 0)
    assert [(k, len(h)) for k, h, _ in rank.pool.events] == [("Stored", 10)]
    rank.pool.events.clear()
    now = step(rank, 50 * MS)[1]
    assert not rank.pool.events  # (decoding: nothing inserted)
    _, _, finished = step(rank, now)
    assert finished == [0] and not rank.busy
    assert [(k, len(h)) for k, h, _ in rank.pool.events] == [("Stored", 3)]


def test_a_retraction_leaves_the_survivors_in_its_order():
    """Running in admission order a (prompt 12), b (prompt 10), c (prompt 11), all with one output token, then d
    (prompt 13): with one free token for four decodes, SGLang sorts them by descending output, then ascending
    prompt (b, c, a, d), retracts from the end (d) and keeps the survivors in that order: the running batch is
    b, c, a, which is the order they decode and, finishing in one pass, enter the tree."""
    rank = sg_rank(1000)
    reqs = [request(i, [(i + 1, 0, n)], 50) for i, n in enumerate((12, 10, 11))]
    rank.waiting.extend(reqs)
    step(rank, 0)
    d = request(3, [(9, 0, 13)], 50)
    rank.waiting.append(d)
    step(rank, 50 * MS)
    assert [r.spec.index for r in rank.running] == [0, 1, 2, 3] and [r.generated for r in rank.running] == [1] * 4
    pool = rank.pool
    pool.total = pool.total - pool.available + 1
    items = decode_batch(rank, pool.sglang)
    assert [r.spec.index for r, _ in items] == [1, 2, 0]
    assert [r.spec.index for r in rank.running] == [1, 2, 0] and list(rank.waiting) == [d]


def test_weighing_a_waiting_request_does_not_refresh_its_cached_prefix():
    """Page 1.  x's 8 tokens are cached (a leaf), then y's 8.  z shares x's prompt but asks for 2,000 output
    tokens, more than the 1,000-token pool can promise, so every round weighs it and refuses it: those rounds
    leave x's last use as it was (only an admission's match refreshes a path, as in AISimulate), so when w's
    decode needs a page, x, the older leaf, loses its last token; y stays whole.  (Refreshed by z's weighing, x
    would have been the newer leaf and y would have lost one.)"""
    rank = sg_rank(1000)
    x, y = request(0, [(1, 0, 8)], 1), request(1, [(2, 0, 8)], 1)
    for r in (x, y):
        rank.waiting.append(r)
        run(rank)
    pool = rank.pool
    assert pool.tree_tokens == 16 and pool.evictable == 16
    w = request(2, [(3, 0, 4)], 5)
    z = request(3, [(1, 0, 8), (4, 0, 4)], 2000)
    rank.waiting.extend([w, z])
    now = step(rank, 0)[1]  # w's extend; z is weighed and refused
    assert [r.spec.index for r in rank.running] == [2] and list(rank.waiting) == [z]
    pool.total = pool.total - pool.available  # nothing free: w's next slot comes from an eviction
    assert step(rank, now)[0] == [(2, 1)]  # a decode round (z weighed and refused again)
    assert list(rank.waiting) == [z] and pool.evictions == 1
    assert (pool.held_tokens(x.spec, 1, 8), pool.held_tokens(y.spec, 1, 8)) == (7, 8)


def test_a_readmission_s_reuse_is_not_cut_at_the_prompt():
    """Prompt 8, page 4.  Admitted with 4 cached tokens it reuses 4 (the first admission counts prompt tokens);
    retracted after 5 output tokens, its readmission finds 12 of its 13 known tokens cached (its own output
    included, put in the tree by another request's insertion: SGLang's retraction inserts nothing) and reuses 12,
    its reused_input_tokens 12, as vLLM's readmissions (facts §43, §53).  On a decode rank (P/D) the same
    readmission is recorded but reused_input_tokens stays over prefill admissions only."""
    for role, largest in (("aggregated", 12), ("decode", 0)):
        rank = sg_rank(400, page=4)
        rank.role = role
        b = request(1, [(7, 0, 8)], 8, output_source=9)
        record_admission(rank, b, 4 if role != "decode" else 0, 0)
        b.generated = 5
        record_admission(rank, b, 12, 100 * MS)
        assert [(a["reused_input_tokens"], a["is_readmission"]) for a in b.admissions] == \
            [(4 if role != "decode" else 0, False), (12, True)]
        assert (b.reused_tokens, b.first_reused_tokens) == (largest, 4 if role != "decode" else 0)
