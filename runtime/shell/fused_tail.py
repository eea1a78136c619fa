"""The part of a fused decode run that happens at its own instants: completions whose stores hold blocks.

A connector that holds a finishing request's blocks until their stores land
(simple_cpu_v0_32: `offload.release_blocks`) frees, at the completion, only
what no store in flight still copies out, and the landings free the rest
later; blocks without a key go to the head of G1's free queue, where the next
allocation takes them.  Which stores are in flight at a completion, and when a
held block comes back, are only known when the replay gets there, so such a
rank's completions are applied at their pass ends (the `fused_stores` event of
that instant, after the pass's stores, as a stepped pass finishes requests
after its offers), and the run's later allocations wait for them.

An allocation may still be made before its pass starts, as the rest of a fused
run is, while no store in flight holds a block without a key
(`chain.holding_keyless`): only a completion or such a landing puts a block at
the head of the free queue, and blocks freed to its tail are never reached by
the run (macro.plan counts no freed block).  Otherwise it waits for its pass
start, after that instant's landings (`fused_allocations` events, queued after
`copy_done`), as a stepped pass allocates after every event of the instant.
Events are applied in the run's order (by pass, allocations before
completions, then batch position), and the requests left running get the
run's tokens after the last one, as `macro.apply` does for every other rank.
"""
from __future__ import annotations

from ..serving.pass_results import advance_survivors, allocate_decode_block, finish_fused
from ..tiers.offload import offer
from .events import FUSED_ALLOCATIONS, FUSED_STORES


class Deferred:
    """One rank's events of a fused run from its first completion on (or from its first allocation that has to
    wait), applied as the replay reaches them."""

    __slots__ = ("rank", "batch", "events", "cursor", "ends", "gaps", "last_pass", "push", "waits_at")

    def __init__(self, rank, batch, events: list, ends: list[int], gaps: list, last_pass: dict):
        self.rank, self.batch, self.events, self.cursor = rank, batch, events, 0
        self.ends, self.gaps, self.last_pass = ends, gaps, last_pass
        self.push = None  # the replay's queue (it sets it, then runs the events due at the run's start)
        self.waits_at = -1  # the pass whose allocations a queued `fused_allocations` event makes

    def run(self, pass_end: int = -1, allocations: int = -1) -> list:
        """Apply the events that may be applied now: completions of pass `pass_end` (its end is now), allocations
        of pass `allocations` (its start is now, after the instant's landings), and earlier allocations while no
        held block lacks a key.  Returns (request, end time) of the requests it finished."""
        finished = []
        rank, events, ends = self.rank, self.events, self.ends
        chain, pool = rank.chain, rank.pool
        at = pool.at
        cursor = self.cursor
        while cursor < len(events):
            j, kind, _, request = events[cursor]
            if kind:  # a completion: at its own pass end
                if j != pass_end:
                    break
                if at is not None:
                    at(ends[j])
                finished.append(finish_fused(rank, request, j, ends, self.gaps))
            else:
                if j != allocations and chain.holding_keyless:  # a landing may free a block to the queue's head
                    if self.waits_at != j:
                        self.waits_at = j
                        self.push(ends[j - 1], FUSED_ALLOCATIONS, (self, j))
                    break
                if at is not None:
                    at(ends[j - 1])
                allocate_decode_block(rank, request)
            cursor += 1
        self.cursor = cursor
        if cursor == len(events):
            self.cursor += 1  # (done: the survivors get their tokens once)
            advance_survivors(rank, self.batch.items, self.last_pass, ends, self.gaps)
        return finished


class FusedEvents:
    """The replay's events of fused decode passes (events.py): the stores and deferred completions of a pass end,
    and allocations that waited for a pass start."""

    def __init__(self, push, ended, start_jobs):
        self.push = push  # the replay's queue
        self.ended = ended  # (request, now, completed): the arrivals are told of a completion
        self.start_jobs = start_jobs  # (worker, now): the copies the ranks asked for start

    def queue(self, worker, macro) -> None:
        """A fused run was applied up front: run its deferred ranks' events due now and queue its pass ends' events
        (stores, completions; in pass order)."""
        for entry in macro.deferred:
            entry.push = self.push
            entry.run()
        later = {j for entry in macro.deferred for j, kind, _, _ in entry.events[entry.cursor:] if kind}
        events = macro.stores
        if later:
            events = dict(events)
            for j in later:
                events.setdefault(j, [])  # (a pass that completes a request but stores nothing)
            events = sorted(events.items(), key=lambda item: item[0])
        for j, offers in events:
            self.push(macro.ends[j], FUSED_STORES, (worker, offers, j, macro.deferred))

    def stores(self, payload, now: int) -> None:
        """Event handler: a fused decode pass ends with stores (what `end_pass` offers after a stepped one), then
        the completions its deferred ranks apply at that instant, as a stepped pass's follow its offers."""
        worker, offers, j, deferred = payload
        for rank, request, upto in offers:
            offer(rank, request, upto)  # (what offer_after_pass offers after a stepped pass; macro.py planned it)
        for entry in deferred:
            for request, end in entry.run(pass_end=j):
                self.ended(request, end, completed=True)
        self.start_jobs(worker, now)

    def allocations(self, payload, now: int) -> None:
        """Event handler: a fused pass starts whose allocations waited for this instant's landings."""
        entry, j = payload
        entry.run(allocations=j)
