"""Macro steps: apply a run of pure decode passes of one worker at once.

A pass is "pure decode" when every running request decodes one token and no
rank has a waiting request, or only one its admission stopped at for want of
blocks that no fused pass can admit (`_keeps_waiting`).  Such passes change nothing but token counts,
block allocations at block boundaries and (with open-loop traffic, where a
completion triggers no arrival) completions, so they can be computed without
the event queue, as long as the next real event (`horizon`) has not come:
a pass must start before the horizon to be fused.  The result is exactly what
single stepping gives: allocations happen at each pass start in running
order, releases at the end of the pass that finishes a request, and every
token gets the end time of its own pass.

Cost is O(passes + requests + allocations), not O(passes x requests).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import islice, repeat

from ..tiers.apc import ApcPool
from ..tiers.g1 import BlockPool
from ..tiers.g1_extents import ExtentPool
from ..tiers.g1_runs import RunPool
from ..serving.pass_results import advance_survivors, allocate_decode_block, finish_fused, gap_runs
from ..serving.pass_work import Batch
from ..serving.scheduler import Rank, admit_waiting, known_sequence
from .fused_passes import apply_in_bulk, constant_bound, constant_passes, timed_passes
from .fused_tail import Deferred


@dataclass
class Macro:
    ends: list[int]  # end time of each fused pass
    events: list  # per active rank: sorted [(pass, order, position, request)] allocations (order 0) / finishes (1)
    active: list  # [(rank, batch)]
    last_pass: dict  # id(request) -> last fused pass that gives it a token
    held: list = field(default_factory=list)  # ranks whose waiting requests the passes leave waiting
    stores: list = ()  # [(pass, [(rank, request, upto)])]: the offers to the first tier at fused passes' ends
    gaps: list | None = None  # the gaps between the ends as [gap, count] runs (None: `apply` finds them)
    defers: list = ()  # per active rank: are its completions applied at their own pass ends (fused_tail.py)?
    deferred: list = field(default_factory=list)  # fused_tail.Deferred of each such rank, made by `apply`


class _RankRun:
    """One active rank while fused passes are planned: its allocation and finish events in pass order, how far
    the plan has read them, the requests still decoding, the sum of their (computed + 1), its free blocks."""

    __slots__ = ("events", "cursor", "decoding", "context", "free")

    def __init__(self, events: list, decoding: int, context: int, free: int):
        self.events, self.cursor, self.decoding, self.context, self.free = events, 0, decoding, context, free


def eligible(ranks: list[Rank], batches: list[Batch | None]) -> bool:
    for rank, batch in zip(ranks, batches):
        if (rank.waiting and not _keeps_waiting(rank, batch)) or (batch is None and rank.running):
            return False
        if (rank.pool.copying or rank.transfers_in_flight) and not _copies_harmless(rank):
            return False
        if rank.speculation is not None:
            return False  # (speculation: each pass's tokens are drawn, so passes are stepped one at a time)
        if not rank.snapshots.fusable:
            return False  # (a pass that allocates a request's fresh state, or may store a snapshot, is stepped)
        if batch is not None and (batch.work.prefill_chunks or len(batch.items) != len(rank.running)):
            return False
        if batch is not None and rank.role == "prefill":
            return False  # (each pass there ends its requests' prefill: TensorRT-LLM's prompt cached whole samples its
            # first token in a decode-priced pass, which hands the request off; test_pd.py, TensorRT-LLM's decode rank)
        if batch is not None and not all(new == 1 for _, new in batch.items):
            return False  # a handed-off request's first pass computes no token, a readmission's recompute several
            # (a decode rank's, or one wholly past the prompt, is priced as a decode: `work_of`); fused passes
            # compute one each
    return any(batch is not None for batch in batches)


def _keeps_waiting(rank: Rank, batch: Batch | None) -> bool:
    """Do decode passes leave `rank`'s waiting requests waiting, until a completion, an event or a TTL expiry?

    Yes when this pass's admission stopped at a request for want of blocks (or no sequence slot was left) on an
    aggregated APC rank with vLLM's admission (`known_sequence`): a fused pass frees nothing before it completes
    a request, and each allocation takes one available block; if it evicts one of the request's hits, the
    request's prefix loses it and every hit after it, so it needs at least one block more than it gains: it
    fails again.  Only a TTL expiry frees blocks without a pass, which `plan` stops before.  `apply` still makes each pass's attempt
    (`_look_again`): a lookup refreshes the request's idle hits, and tiers touch and count what they hold."""
    return batch is not None and isinstance(rank.pool, ApcPool) and rank.role == "aggregated" \
        and rank.admission is known_sequence and not rank.rejecting \
        and (rank.held_back is rank.waiting[0] or len(rank.running) >= rank.max_sequences)


def plan(worker, batches: list[Batch | None], now: int, horizon: int | None, stop: int | None,
         can_finish: bool) -> Macro | None:
    """The longest run of fusable passes starting now (pass 0 is already scheduled), or None."""
    if not eligible(worker.ranks, batches):
        return None
    active = [(rank, batch) for rank, batch in zip(worker.ranks, batches) if batch is not None]
    constant = getattr(worker.timing, "decode_only_ns", None)
    first = constant if constant is not None else max(worker.timing(b.work) for _, b in active)
    if horizon is not None and now + first >= horizon:
        return None  # the second pass would start at or after the next event: nothing to fuse
    finish_at = {id(r): r.spec.output_len - r.generated - 1 for _, b in active for r, _ in b.items}
    limit = (max(finish_at.values()) + 1) if can_finish else min(finish_at.values())
    defers = [can_finish and rank.chain.finishes_at_instants(rank) for rank, _ in active]
    if can_finish:  # a completion that has more to do than a fused pass can: the run stops before it, unless its
        # rank applies it at its own pass end (fused_tail.py)
        limit = min([limit] + [finish_at[id(r)] for (rank, b), later in zip(active, defers) if not later
                               and rank.chain.stores_on_finish for r, _ in b.items if rank.chain.finish_may_store(r)])
    storing = []  # (rank, [(request, [(pass, upto)])]) of the ranks whose fused passes store decode blocks
    for rank, b in active:  # a connector that stores decode blocks: the run makes the stores (or ends before one)
        if rank.chain.stores_while_decoding:
            if rank.chain.fuses_stores(rank):
                # (a request's stores end with the pass that finishes it: its completion offers the rest)
                storing.append((rank, [(r, rank.chain.decode_stores(r, rank.block_size,
                                                                    min(limit, finish_at[id(r)] + 1)),
                                        finish_at[id(r)] if can_finish else None) for r, _ in b.items]))
                continue
            quiet = [rank.chain.quiet_passes(r, rank.block_size) for r, _ in b.items]
            limit = min([limit] + [q for q in quiet if q is not None])
    held = [rank for rank, _ in active if rank.waiting]
    if held:  # a completion frees blocks and a sequence slot, and the oldest protected block's expiry frees one
        limit = min(limit, min(finish_at.values()))
        for rank in held:
            expiry = rank.pool.next_expiry(looked_too=True)
            if expiry is not None and (horizon is None or expiry < horizon):
                horizon = expiry
    if limit <= 1:
        return None  # (at most pass 0, which is the scheduler's)

    if constant is not None:  # no pass past the horizon's or the stop's is planned (nor its events made)
        limit = min(limit, constant_bound(now, constant, horizon, stop))
    states = []
    for rank, batch in active:
        events, size = [], rank.block_size
        for position, (request, _) in enumerate(batch.items):
            done = finish_at[id(request)]
            crossings = range(size - request.num_computed % size, min(done, limit - 1) + 1, size)
            events.extend([(j, 0, position, request) for j in crossings])
            if can_finish and done < limit:
                events.append((done, 1, position, request))
        events.sort()  # (by pass, kind, position: unique per event, so requests are never compared)
        states.append(_RankRun(events, len(batch.items), batch.work.decode_context, _fusable_free(rank.pool)))
    if constant is not None:
        passes = constant_passes(states, limit)
        ends = list(range(now + constant, now + constant * (passes + 1), constant))
    else:
        ends, passes = timed_passes(worker, states, now, horizon, stop, limit)
    last = _unshort(storing, passes - 1)
    if last < 1:
        return None
    del ends[last + 1:]
    events = [s.events[:bisect_left(s.events, (last + 1,))] for s in states]  # (the events of passes 0..last)
    for (rank, _), kept in zip(active, events):
        if rank.pool.copying and not _allocations_clear(rank, sum(1 for e in kept if not e[1])):
            return None
    return Macro(ends, events, active,
                 {id(r): min(finish_at[id(r)], last) for _, b in active for r, _ in b.items}, held,
                 _stores(storing, last), [[constant, last]] if constant is not None else None, defers)


def _unshort(storing: list, last: int) -> int:
    """The last fused pass, such that no store of passes 0..last comes up short of room in its tier: all its keys
    could be in flight at once beside what cannot be evicted now (a short store would be offered again the next
    pass, which the plan does not know).  Past that, the run ends before the tier's first store."""
    if not storing:
        return last
    offered: dict = {}
    for rank, requests in storing:
        tier = rank.chain.top
        first, count = offered.get(id(tier), (last + 1, 0))
        for request, stores, finish in requests:
            if finish is not None and finish <= last:  # its completion offers up to its last full block
                first = min(first, stores[0][0] if stores else finish)
                count += min((request.num_computed + finish + 1) // rank.block_size, len(request.keys)) \
                    - request.tier.stored_upto
                continue
            done = [upto for j, upto in stores if j <= last]
            if done:
                first = min(first, stores[0][0])
                count += done[-1] - request.tier.stored_upto
        offered[id(tier)] = (first, count)
    for rank, _ in storing:
        tier = rank.chain.top
        first, count = offered[id(tier)]
        if count + tier.unevictable_bound() > tier.capacity:
            last = min(last, first - 1)
    return last


def _stores(storing: list, last: int) -> list:
    """[(pass, [(rank, request, upto)])] of passes 0..last, in pass order, each pass's in rank and batch order
    (as `offer_after_pass` makes them after a stepped pass)."""
    by_pass: dict = {}
    for rank, requests in storing:
        for request, stores, _ in requests:
            for j, upto in stores:
                if j > last:
                    break
                by_pass.setdefault(j, []).append((rank, request, upto))
    return sorted(by_pass.items(), key=lambda item: item[0])


def _fusable_free(pool) -> int:
    """Blocks fused passes may allocate: all free ones, but none an eviction would free when someone is told of
    evictions (APC's `on_evict` starts a write-through, which must start at its own pass, not at the run's)."""
    return pool.free_count if pool.on_evict is None else pool.plain_free


def _copies_harmless(rank: Rank) -> bool:
    """Can decode passes be fused while this rank's copies are in flight?  Restores in flight belong to
    waiting requests (so nothing is fused anyway); a store landing changes nothing a pure decode pass reads,
    as long as the chain says so and no block the passes allocate is still being copied out
    (`_allocations_clear`: a pass doing so would wait for the copy)."""
    return type(rank.pool) in (BlockPool, RunPool, ExtentPool) and rank.chain.copies_harmless(rank)


def _allocations_clear(rank: Rank, count: int) -> bool:
    """Are the next `count` blocks `allocate` hands out (never-used ones, then the free queue's head; blocks
    freed meanwhile join its tail) free of blocks still being copied out?"""
    pool = rank.pool
    rest = count - (pool.capacity - pool.created)
    return rest <= 0 or pool.copying.isdisjoint(islice(pool.free, rest))


def apply(macro: Macro) -> list[tuple[object, int]]:
    """Apply the fused passes; returns (request, end time) of every request that finished."""
    ends = macro.ends
    gaps = macro.gaps if macro.gaps is not None else gap_runs(ends)
    finished = []
    held, last = macro.held, len(ends) - 1
    for (rank, batch), events, later in zip(macro.active, macro.events, macro.defers or repeat(False)):
        if later:  # completions at their pass ends, allocations before them while that is exact (fused_tail.py)
            macro.deferred.append(Deferred(rank, batch, events, ends, gaps, macro.last_pass))  # (the replay runs it)
            continue
        at = rank.pool.at  # a pool that stamps changes with their time (APC's TTL) is told it (None: it does not)
        if at is None and rank not in held and rank.pool.events is None:
            apply_in_bulk(rank, events, ends, gaps, finished)
            advance_survivors(rank, batch.items, macro.last_pass, ends, gaps)
            continue
        looks = 1 if rank in held else last + 1  # the next pass whose admission attempt is due (held ranks)
        for j, kind, _, request in events:
            while looks < j:  # (after pass `looks`'s allocations; a held run completes nothing)
                _look_again(rank, ends[looks - 1])
                looks += 1
            if kind == 0:
                if at is not None:
                    at(ends[j - 1])  # (j >= 1: pass 0's allocations were the scheduler's)
                allocate_decode_block(rank, request)
            else:
                if at is not None:
                    at(ends[j])
                finished.append(finish_fused(rank, request, j, ends, gaps))
        while looks <= last:
            _look_again(rank, ends[looks - 1])
            looks += 1
        advance_survivors(rank, batch.items, macro.last_pass, ends, gaps)
    return finished


def _look_again(rank: Rank, start: int) -> None:
    """A fused pass's admission attempt, at its `start` (after its allocations): it fails as the first did
    (`_keeps_waiting`) and leaves what single stepping's leaves (refreshed hits, tier touches and counts)."""
    if rank.pool.at is not None:
        rank.pool.at(start)
    admitted: list = []
    admit_waiting(rank, rank.max_batched - len(rank.running), admitted, start)
    if admitted or rank.rejecting:
        raise RuntimeError("macro: a fused pass admitted a request that its first pass could not")

