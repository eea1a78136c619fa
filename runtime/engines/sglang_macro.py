"""Macro steps for SGLang: a run of pure decode passes applied at once, exactly as single stepping would.

A run starts from a scheduled decode pass (pass 0) on every rank that has
running requests, each with a token already (a P/D arrival samples its first
in a pass of its own), nothing waiting (a waiting request would be weighed for an
extend batch every round), and no reservation held for a request a prefill rank
computes (its prefill's end and its landing are not queued yet when the run is
planned, so nothing would cut the run where it must join: facts section 61, e07).
During pure decode passes nothing enters the radix
tree and nothing is matched, so the pool changes only by each pass's new pages:
pass p needs the pages its requests cross into, and the run stops before the
first pass whose need would exceed what is free or evictable (SGLang would
retract there).  Evicting the passes' pages one pass at a time or all at once
frees the same pages (eviction frees exactly what is asked, from the same
least recently used leaves), so the run's pages are taken at once.  Requests
finish only in the run's last pass (open-loop traffic; closed-loop runs stop
before any finish), so no release interleaves with the allocations.  Ranks
under speculation are not fused (each pass's bursts are drawn).  The
new-token ratio decays once per pass, with the same float steps.

Cost: O(passes + requests) per run, and O(requests x log passes) to size it
with pages larger than one token.
"""
from __future__ import annotations

from ..serving.pass_results import advance_decodes, gap_runs
from ..timing import PassWork
from .sglang_decode import complete
from .sglang_overlap import ended


class Fused:
    __slots__ = ("ends", "active", "passes")
    stores = deferred = ()  # (the radix cache has no G2 behind it: fused passes offer nothing and defer no
    # completion, unlike shell/macro.py's runs)

    def __init__(self, ends: list, active: list, passes: int):
        self.ends, self.active, self.passes = ends, active, passes


def _eligible(ranks, batches) -> bool:
    for rank, batch in zip(ranks, batches):
        if rank.waiting or (batch is None and rank.running) or rank.speculation is not None:
            return False  # (speculation: each pass's bursts are drawn, so passes are stepped one at a time)
        if len(rank.pool.sglang.leases) > len(rank.running):
            return False  # a reservation whose request is being prefilled elsewhere: its landing is not queued yet
        if batch is not None and (not batch.items or batch.work.prefill_chunks or rank.pool.recorder is not None
                                  or rank.pool.sglang.extend or rank.pool.sglang.retracted
                                  or not all(r.generated for r, _ in batch.items)):  # (a P/D arrival's first token)
            return False
    return any(batch is not None for batch in batches)


def _pages_through(rank, requests, p: int) -> int:
    """Tokens the requests allocate for passes 1..p (pass 0's were taken when it was scheduled)."""
    page = rank.pool.page
    if page == 1:
        return p * len(requests)
    ceil = rank.pool.ceil
    return sum(ceil(r.num_tokens + p + 1) - ceil(r.num_tokens + 1) for r in requests)


def _room(rank, requests, limit: int) -> int:
    """How many passes (from 1, at most `limit`) fit without a retraction: the most p whose pages fit."""
    pool = rank.pool
    budget = pool.available + pool.evictable
    if pool.page == 1:
        return min(limit, budget // len(requests)) if requests else limit
    lo, hi = 0, limit
    while lo < hi:  # (a pass's need never shrinks, so the fitting prefix of passes is found by bisection)
        mid = (lo + hi + 1) // 2
        if _pages_through(rank, requests, mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan(worker, batches, now: int, horizon, stop, can_finish: bool):
    if not _eligible(worker.ranks, batches):
        return None
    active = [(rank, batch) for rank, batch in zip(worker.ranks, batches) if batch is not None]
    left = [r.stop_after - r.generated for _, b in active for r, _ in b.items]
    limit = min(left) if can_finish else min(left) - 1  # passes in the run (finishing only in its last)
    for rank, batch in active:
        limit = min(limit, 1 + _room(rank, [r for r, _ in batch.items], limit - 1))
    if limit <= 1:
        return None
    constant = getattr(worker.timing, "decode_only_ns", None)
    ends, start = [], now
    decoding = [(len(b.items), b.work.decode_context) for _, b in active]
    for p in range(limit):
        if p and horizon is not None and start >= horizon:
            break
        if constant is not None:
            duration = constant
        else:
            duration = max(worker.timing(PassWork((), n, context + n * p)) for n, context in decoding)
        if stop is not None and start + duration > stop:
            break
        start += duration
        ends.append(start)
    if len(ends) <= 1:
        return None
    return Fused(ends, active, len(ends))


def apply(fused: Fused) -> list:
    ends, passes = fused.ends, fused.passes
    gaps = gap_runs(ends)
    finished = []
    for rank, batch in fused.active:
        pool, state = rank.pool, rank.pool.sglang
        requests = [r for r, _ in batch.items]
        pool.take(_pages_through(rank, requests, passes - 1))
        ratio, floor = state.ratio, state.min_ratio
        for _ in range(passes):
            if ratio == floor:  # (at the floor every further step is a no-op; one below it rises to it)
                break
            ratio = max(ratio - state.decay, floor)
        state.ratio = ratio
        state.decodes += passes
        ended(state, ends[-2] if passes > 1 else state.started, ends[-1])
        state.blocked = max(0, state.blocked - (passes - 1))
        leases = state.leases
        done = []
        for request in requests:
            advance_decodes(rank, request, passes, ends, gaps)
            leases[id(request)].end = pool.ceil(request.num_tokens)
            if request.generated >= request.stop_after:
                done.append(request)
        if done:
            complete(rank, done, ends[-1])
            finished.extend((request, ends[-1]) for request in done)
    return finished

