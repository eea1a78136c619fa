"""SGLang's P/D rules and cancellation on its radix cache (runtime/engines/sglang_handoff.py, sglang_decode.py).

One test per sentence of the spec's SGLang paragraph (kv-cache-tiers.md, G1) about disaggregated sources and
destinations and about cancelled requests, each with exact cached tokens: a source rank and a destination rank
of page 4, driven step by step through the handoff (serving/handoff.py) as the replay drives it.  Whole P/D
runs against AISimulate are in test_pd.py.
"""
from __future__ import annotations

from kvreplay.runtime.engines.sglang import SGLANG
from kvreplay.runtime.engines.sglang_decode import cancel_running
from kvreplay.runtime.engines.sglang_handoff import cancel_ready
from kvreplay.runtime.serving import handoff
from kvreplay.runtime.serving.handoff import Handoff, PrefillMove

from .test_sglang_engine import MS, TIMING, request, sg_rank

NO_DELAY = Handoff(bytes_per_token=1, bandwidth_gbps=None, timing_mode="destination_missing", state_bytes=0,
                   destination_first=True)


def ranks():
    source, destination = sg_rank(400, page=4), sg_rank(400, page=4)
    source.role, destination.role = "prefill", "decode"
    destination.handoff = NO_DELAY
    return source, destination


def pass_on(rank, now: int) -> tuple[list, int]:
    """Run one pass of `rank` at `now`: (requests it finished, its end)."""
    batch = SGLANG.schedule(rank, now)
    assert batch is not None
    end = now + TIMING(batch.work)
    return SGLANG.finish(rank, batch, end), end


def reserve_and_prefill(source, destination, r) -> int:
    """The destination reserves, the source prefills `r` and holds it: returns the prefill's end."""
    handoff.placed(r, destination, True)
    destination.waiting.append(r)
    assert SGLANG.schedule(destination, 0) is None  # (a reservation computes nothing)
    (job,) = destination.jobs
    assert isinstance(job, PrefillMove) and not destination.waiting
    destination.jobs.clear()
    handoff.to_prefill(r, source)
    finished, end = pass_on(source, 0)
    assert finished == [r] and r.status == "transferring"
    handoff.hold_source(source, r, end)
    handoff.to_decode(r, destination, 1)
    handoff.transferring(r)
    return end


def test_a_completed_source_publishes_its_prompt_before_the_transfer_hold():
    """Prompt 11 at page 4: the prefill pass that completes it inserts its 2 full pages (8 tokens) in the source's
    tree, so a request with the same prompt admitted while the KV still travels reuses 8 tokens there."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 3)
    reserve_and_prefill(source, destination, a)
    assert source.pool.tree_tokens == 8 and a.pd.phase == "transferring"
    b = request(1, [(7, 0, 11)], 3)
    source.waiting.append(b)
    pass_on(source, 50 * MS)
    assert b.admissions[0]["reused_input_tokens"] == 8


def test_the_hold_keeps_its_path_lock_and_partial_tail():
    """During the transfer the source's 8 published tokens stay locked (nothing evictable) and A keeps its
    partial tail privately: 3 tokens of prompt and the sampled token, one page (4 tokens).  When the transfer
    lands the hold lets go: the tail page is freed and the 8 prompt tokens unlocked; the sampled token, whose KV
    no forward computed, is not cached (AISimulate's page-1 P/D sessions: the next turn reuses the prompt
    alone on the source)."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 3)
    end = reserve_and_prefill(source, destination, a)
    pool = source.pool
    assert (pool.tree_tokens, pool.evictable, pool.private) == (8, 0, 4)
    assert pool.evict(400) == 0  # a locked path is never evicted
    handoff.landed(destination, a, end + 5 * MS)
    assert a.pd.source_released_ns == end + 5 * MS
    assert (pool.tree_tokens, pool.evictable, pool.private) == (8, 8, 0)


def test_a_transferred_destination_keeps_its_prompt_private_until_running_admission():
    """The destination reserves the page-rounded prompt footprint (11 -> 12 tokens) before the prefill; the landed
    KV is in those pages but in no tree node (a match finds nothing); the pass that admits A to the running
    batch inserts its 2 full prompt pages (8 tokens) and decodes A's first token."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 3)
    end = reserve_and_prefill(source, destination, a)
    pool = destination.pool
    assert (pool.tree_tokens, pool.private) == (0, 12)
    handoff.landed(destination, a, end)
    assert pool.tree_tokens == 0 and pool.held_tokens(a.spec, 4, 100) == 0
    batch = SGLANG.schedule(destination, end)
    assert [(r.spec.index, new) for r, new in batch.items] == [(0, 1)] and destination.running == [a]
    assert pool.tree_tokens == 8 and pool.held_tokens(a.spec, 4, 100) == 8
    SGLANG.finish(destination, batch, end + 10 * MS)
    assert a.generated == 1 and a.first_token_ns == end + 10 * MS


def test_a_destination_reuses_its_cached_prefix_and_transfers_the_rest():
    """A destination that already caches 8 tokens of the prompt locks them and reserves only the last page; with
    destination_missing the KV of 1 page (4 tokens) travels."""
    source, destination = ranks()
    pool = destination.pool
    pool.insert(request(9, [(7, 0, 8)], 1).spec, 8)
    a = request(0, [(7, 0, 11)], 3)
    reserve_and_prefill(source, destination, a)
    assert (a.pd.decode_reused_tokens, a.pd.transfer_tokens, pool.private, pool.evictable) == (8, 4, 4, 0)


def test_a_ready_request_cancelled_caches_its_full_pages():
    """Landed but not yet running, A is cancelled: its 2 full prompt pages (8 of its 11 tokens) enter the
    destination's tree, unlocked; the partial page is freed."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 3)
    end = reserve_and_prefill(source, destination, a)
    handoff.landed(destination, a, end)
    cancel_ready(destination, a)
    pool = destination.pool
    assert (pool.tree_tokens, pool.evictable, pool.private) == (8, 8, 0) and not destination.waiting


def test_a_cancelled_running_request_caches_its_decoded_pages():
    """Aggregated, prompt 10, after its prefill and 5 decodes (6 output tokens): cancelled, prompt + output = 16
    tokens, 4 whole pages, are cached (its 8 prompt tokens were already), nothing stays private or locked."""
    rank = sg_rank(400, page=4)
    a = request(0, [(7, 0, 10)], 20, output_source=8)
    rank.waiting.append(a)
    now = 0
    for _ in range(6):
        _, now = pass_on(rank, now)
    assert a.generated == 6 and rank.pool.tree_tokens == 8
    cancel_running(rank, a)
    pool = rank.pool
    assert (pool.tree_tokens, pool.evictable, pool.private, a.status) == (16, 16, 0, "canceled")
    assert not rank.running


def test_a_request_arriving_as_a_decode_pass_ends_reserves_after_the_next_one():
    """A decode rank decoding A: B arrives at 80 ms, the instant A's pass ends; the pass starting then decodes A
    alone and B reserves when it ends (90 ms), as AISimulate's decode worker takes the reservation after starting
    that pass (its pd-sessions run: each next turn reserves 10 ms, one decode pass, after it arrives)."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 20)
    end = reserve_and_prefill(source, destination, a)
    handoff.landed(destination, a, end)
    _, now = pass_on(destination, end)
    assert now == 60 * MS
    _, now = pass_on(destination, now)
    _, now = pass_on(destination, now)
    b = request(1, [(9, 0, 11)], 3)
    b.arrival_ns = now
    handoff.placed(b, destination, True)
    destination.waiting.append(b)
    batch = SGLANG.schedule(destination, now)
    assert [r.spec.index for r, _ in batch.items] == [0] and not destination.jobs and b.pd.phase == "reserve"
    SGLANG.finish(destination, batch, now + 10 * MS)
    handoff.add_try(destination)  # (the pass end's trigger: Disaggregation.worker_pass_ended)
    SGLANG.schedule(destination, now + 10 * MS)
    (job,) = destination.jobs
    assert job.request is b and not destination.waiting


def test_a_decode_pass_end_takes_one_reservation():
    """A decode rank decoding A; B and C both wait to reserve.  Each pass end is one trigger and reserves one (the
    mocker's retry_pending_destinations_at, as vLLM's reserve_pending): B when the first pass ends (70 ms), C when
    the next ends (80 ms).  AISimulate's e07 (facts section 61: two prefill workers, one decode worker) reserves two
    sessions arriving in one decode pass at 283.93 and 293.93 ms; kvreplay reserved both at 283.93 before."""
    source, destination = ranks()
    a = request(0, [(7, 0, 11)], 20)
    end = reserve_and_prefill(source, destination, a)
    handoff.landed(destination, a, end)
    _, now = pass_on(destination, end)
    batch = SGLANG.schedule(destination, now)  # (A's decode, 60-70 ms; B and C arrive during it)
    b, c = request(1, [(9, 0, 11)], 3), request(2, [(8, 0, 11)], 3)
    for r in (b, c):
        r.arrival_ns = now + 5 * MS
        handoff.placed(r, destination, True)
        destination.waiting.append(r)
    SGLANG.finish(destination, batch, now + 10 * MS)
    now += 10 * MS
    handoff.add_try(destination)
    batch = SGLANG.schedule(destination, now)
    assert [job.request for job in destination.jobs] == [b] and c.pd.phase == "reserve"
    assert list(destination.waiting) == [c] and now == 70 * MS
    destination.jobs.clear()
    SGLANG.finish(destination, batch, now + 10 * MS)
    handoff.add_try(destination)
    SGLANG.schedule(destination, now + 10 * MS)
    assert [job.request for job in destination.jobs] == [c] and not destination.waiting
