"""SGLang's decode pass (update_running_batch), retraction under memory pressure (retract_decode), finishing and
cancelling (cancel_running: a cancelled request's decoded pages enter the tree too).

Before a decode pass every running request needs the slot of the token it
samples (a new page when it crosses a page boundary).  When what is free or
evictable does not cover that, SGLang retracts: requests are ordered stably by
descending output length, then ascending prompt length, and taken from the end
(the youngest output, the longest prompt among equals) until the rest fit; the
last running request is never retracted: one that still finds no page (a
decode rank's reservations for transfers hold the rest) sits the pass out,
unless a waiting request part way through a chunked prefill can give its pages
up and start over (else neither could ever go on).  A retracted request's private pages
are freed (its prompt pages already in the tree stay there, unlocked); the running batch keeps the
survivors in that order (retract_decode's filter_batch(keep_indices=sorted_indices)), which is the order
requests finishing in one pass enter the tree, so the order of their leaves' last use; and after
each retraction unused cache is evicted until 20 tokens per surviving request
are free.  A retracted request goes to the back of the waiting queue and starts
over: prompt and output so far are prefilled again.  The new-token ratio
becomes SGLang's new estimate, (output decoded + 20 per survivor) / (the
survivors' max output + 1), and does not decay on that pass (AISimulate's
retraction runs admit their next request at the same step only so).

Under speculation (ngram or MTP, serving/speculation.py) a decode pass emits
a burst per request, 1 + its accepted drafts, cut to what it has left (AISimulate's
`simulate_decode_step_with_sampler`): the retraction check and the eviction
count each request's largest burst (1 + drafts, cut so), the pass takes the
pages of the bursts drawn, and a request completing mid-burst stops there.
Its decoded pages enter the tree when it finishes or is cancelled, as without
speculation (the spec's rule; SGLang's EAGLE verify inserts nothing mid-decode;
the mocker's source calls `cache_materialized_prefix` per token, yet AISimulate's
retraction run readmits reusing the prompt only, as this rule does: facts §90).
A P/D prefill rank emits one token.
"""
from __future__ import annotations

from ..serving.pass_results import emit_drafts
from ..timing import PassWork
from .sglang_state import RETRACT_DECODE_STEPS, insert, release


def speculation_of(rank):
    """The rank's speculation for its decode passes (None: one token a pass)."""
    return rank.speculation if rank.role != "prefill" else None


def growth(pool, state, requests, speculation=None) -> int:
    """Tokens the requests' next decode step allocates at most (each request's largest burst)."""
    leases = state.leases
    ceil = pool.ceil
    if speculation is None:
        return sum(ceil(r.num_tokens + 1) - leases[id(r)].end for r in requests)
    burst = speculation.burst
    return sum(max(0, ceil(r.num_tokens + burst(r, 1)) - leases[id(r)].end) for r in requests)


def decode_work(rank, decodes: int, context: int) -> PassWork:
    """A decode pass's work: under speculation each request also verifies its drafts (`Speculation.work`)."""
    speculation = speculation_of(rank)
    if speculation is None:
        return PassWork((), decodes, context)
    return speculation.work((), decodes, context)


def accept(rank, request, speculation) -> None:
    """At the end of its decode pass the request emits its accepted drafts beside its base token (cut to what it has
    left: one completing mid-burst stops there).  Nothing enters the tree here: as without speculation, decoded
    pages enter when the request finishes or is cancelled (SGLang's verify and decode-result paths call no
    cache_unfinished_req; facts §90)."""
    drafts = speculation.kept(request)
    if drafts:
        emit_drafts(request, drafts)


def decode_batch(rank, state) -> list:
    """The (request, 1) items of a decode pass over every running request, after any retraction."""
    pool = rank.pool
    running = rank.running
    if not running:
        return []
    speculation = speculation_of(rank)
    if speculation is not None:
        return burst_batch(rank, state, speculation)
    leases, ceil = state.leases, pool.ceil
    if pool.page == 1:  # (ceil is the identity)
        needs = [r.num_tokens + 1 - leases[id(r)].end for r in running]
    else:
        needs = [ceil(r.num_tokens + 1) - leases[id(r)].end for r in running]
    total = sum(needs)
    if pool.available + pool.evictable < total and len(running) > 1:
        retract(rank, state)
        total = growth(pool, state, rank.running)
    if pool.recorder is None:  # one eviction for the pass frees the same pages, in the same LRU order, as one per
        short = total - pool.available  # request (without KV events to record)
        if short > 0:
            pool.evict(short)
        if rank.running is running and pool.take(total):  # every request's page at once (no take evicts more)
            for request, need in zip(running, needs):
                if need > 0:
                    leases[id(request)].end += need
            return [(request, 1) for request in running]
    return _grown(rank, state)


def burst_batch(rank, state, speculation) -> list:
    """A decode pass's items under speculation: the check and the eviction count the largest bursts, the pages taken
    are those of the bursts drawn (the mocker reserves the largest and gives back what the burst left unused)."""
    pool = rank.pool
    total = growth(pool, state, rank.running, speculation)
    if pool.available + pool.evictable < total and len(rank.running) > 1:
        retract(rank, state)
        total = growth(pool, state, rank.running, speculation)
    short = total - pool.available
    if short > 0:
        pool.evict(short)
    return _grown(rank, state, speculation)


def _grown(rank, state, speculation=None) -> list:
    """The decode pass's items: each running request whose lease grows by its next token (under `speculation`: the
    burst drawn for it), the pages taken from the pool; a lone request short of a page (P/D reservations hold the
    rest) waits."""
    pool, leases, items = rank.pool, state.leases, []
    if speculation is not None:
        speculation.draw_bursts(rank.running)  # (at the pass's start, in the running batch's order)
    for request in rank.running:
        lease = leases[id(request)]
        need = pool.ceil(request.num_tokens + (speculation.drawn(request) if speculation is not None else 1)) - lease.end
        if need > 0:
            if not pool.take(need) and not (drop_partial_prefill(rank, state) and pool.take(need)):
                continue
            lease.end += need
        items.append((request, 1))
    return items


def drop_partial_prefill(rank, state) -> bool:
    """A waiting request part way through a chunked prefill gives its pages up and starts over (its chunks stay in
    the tree, unlocked), so that the lone running request can go on; False if there is none."""
    for request in reversed(rank.waiting):
        lease = state.leases.get(id(request))
        if lease is not None and request.num_computed and (request.pd is None or request.pd.phase is None):
            release(rank.pool, state.leases.pop(id(request)))
            request.num_computed = 0
            request.status = "waiting"
            return True
    return False


def retract(rank, state) -> None:
    pool = rank.pool
    speculation = speculation_of(rank)
    order = sorted(rank.running, key=lambda r: (-r.generated, r.spec.prompt_len))
    retracted = []
    while len(order) > 1 and pool.available + pool.evictable < growth(pool, state, order, speculation):
        request = order.pop()
        retracted.append(request)
        release(pool, state.leases.pop(id(request)))
        keep = len(order) * RETRACT_DECODE_STEPS
        if pool.available < keep:
            pool.evict(keep - pool.available)
    if not retracted:
        return
    rank.running = order  # (SGLang's filter_batch keeps the survivors in the retraction order)
    for request in retracted:
        request.num_computed = 0
        request.status = "waiting"
        rank.waiting.append(request)
    rank.preemptions += len(retracted)
    state.retractions += len(retracted)
    survivors = rank.running
    decoded = sum(r.generated for r in survivors)
    state.retracted = retracted  # (this pass's ratio is the new estimate: no decay after it)
    state.ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(survivors)) / (sum(r.stop_after for r in survivors) + 1))
    short = growth(pool, state, rank.running, speculation) - pool.available
    if short > 0:
        pool.evict(short)


def complete(rank, finished: list, end_ns: int) -> None:
    """Requests that sampled their last token: prompt and all output enter the tree (whole pages), the rest of
    their pages are freed and their path unlocked."""
    pool, state = rank.pool, rank.pool.sglang
    done = set(map(id, finished))
    rank.running = [r for r in rank.running if id(r) not in done]
    for request in finished:
        if rank.role == "prefill":  # its KV is handed off: the hold keeps its lease (sglang_handoff.py)
            request.status = "transferring"
            continue
        lease = state.leases.pop(id(request))
        lease.end = pool.ceil(request.num_tokens)
        # one that ends with the token its first forward sampled never computes that token's KV: prompt only
        # (AISimulate: 4 turns of 1,000 new tokens and 1 output reuse 1,000 / 2,001 / 3,002)
        cached = request.num_tokens if request.generated > 1 else request.num_tokens - 1
        if state.overlap:  # the next pass was decided with it still running (sglang_overlap.py)
            ghost = Ghost(request, lease, cached)
            state.ghosts.append(ghost)
            rank.pass_owed = True  # (that pass runs even when nothing is left to run: AISimulate's does)
            state.pending.append((cache_ghost, (pool, ghost)))
        else:
            cache_finished(pool, lease, request.spec, cached)
        request.status = "completed"
        request.terminal_ns = end_ns


class Ghost:
    """A request that finished in the pass before an overlapped decision, and the tokens it leaves cached (all of
    them when that decision's pass decodes it once more, computing its last token's KV)."""

    __slots__ = ("request", "lease", "cached")

    def __init__(self, request, lease, cached: int):
        self.request, self.lease, self.cached = request, lease, cached


def cache_ghost(pool, ghost: Ghost) -> None:
    cache_finished(pool, ghost.lease, ghost.request.spec, ghost.cached)


def cache_finished(pool, lease, spec, cached: int) -> None:
    """A finished request's first `cached` tokens enter the tree (whole pages); the rest is freed, its path
    unlocked."""
    insert(pool, lease, spec, cached)
    release(pool, lease)


def cancel_running(rank, request) -> None:
    """A running request is cancelled (SGLang's abort goes through cache_finished_req): prompt and decoded output
    enter the tree in whole pages as a finished request's do; the rest are freed and its path unlocked."""
    pool = rank.pool
    rank.running = [r for r in rank.running if r is not request]
    lease = pool.sglang.leases.pop(id(request))
    insert(pool, lease, request.spec, request.num_tokens)
    release(pool, lease)
    request.status = "canceled"


def drop(rank, request) -> None:
    """A request cancelled before it runs (waiting, part way through a chunked prefill, or in an extend pass in
    flight): its private pages are freed and its path unlocked; what its chunks put in the tree stays there."""
    lease = rank.pool.sglang.leases.pop(id(request), None)
    if lease is not None:
        release(rank.pool, lease)
    if request in rank.waiting:
        rank.waiting.remove(request)
    request.status = "canceled"


def drop_unseen_tokens(state, end_ns: int) -> None:
    """The overlap scheduler's decision that retracted `state.retracted` was made while the pass ending at `end_ns`
    ran, so it never saw that pass's token for them: SGLang skips a retracted request's pending result, and the
    request starts over one token shorter (s05-sglang-sessions with host_loop: turn 3/1's last token at 3,250 ms,
    as AISimulate's, not 3,240)."""
    for request in state.retracted:
        if request.last_token_ns == end_ns and request.generated > 1:
            gaps = request.gaps
            gap = gaps[-1][0]
            gaps[-1][1] -= 1
            if not gaps[-1][1]:
                gaps.pop()
            request.last_token_ns -= gap
            request.generated -= 1
            request.num_tokens -= 1
            if request.generated == 1:
                request.second_token_ns = None
