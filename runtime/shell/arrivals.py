"""Requests coming and going: the traffic's arrivals queued as the replay reaches them, and each request's end.

The traffic's first arrivals (all of an open-loop trace: perhaps a million)
are queued one at a time, each when the one before it arrives, so that a spec
exists only from its predecessor's arrival on.  They take sequence numbers of
their own, below every other event's and in arrival order: the order they
had when all were queued first, so the replay handles the same events in the
same order.  A request that arrived is `open` until it ends (completed,
rejected, or incomplete when the replay closes); then the request log
(outputs/request_log.py) is told, and the replay holds it no more.
"""
from __future__ import annotations

from heapq import heapify

from ..serving.never_fits import never_fits, waits_to_be_rejected, within_context
from ..serving.pass_results import close, ended_canceled, refuse_when_reached, reject
from ..serving.requests import Request
from ..tiers.chain import NO_TIERS
from .events import ARRIVAL, TRAFFIC_TIMER

FIRST_SEQ = -(1 << 62)  # the first arrival's sequence number (every other event's is >= 0)
# A session turn that a request's end releases is numbered by (session, turn), below every ordinary event:
# turns due at the same instant are placed in session order, as AISimulate's workload driver releases them
# (ready time, then session index), not in the order the ranks happened to finish their previous turns.
# Round robin then gives a session the same rank or another exactly as it does there.
TURN_SEQ = -(1 << 61)


class Arrivals:
    def __init__(self, replay):
        self.replay = replay
        self.open: dict[int, Request] = {}  # id -> every request that arrived and has not ended, in arrival order
        self.specs = iter(())  # the first arrivals not queued yet
        self.queued = None  # the one queued
        self.seq = FIRST_SEQ

    def start(self, specs) -> None:
        self.specs = iter(specs)
        self._queue_next()

    def _queue_next(self) -> None:
        spec = self.queued = next(self.specs, None)
        if spec is not None:
            self.replay.push(spec.arrival_ns or 0, ARRIVAL, spec, self.seq)
            self.seq += 1

    def arrive(self, spec, now: int) -> None:
        """Event handler: `spec` arrives; it is placed, or rejected when it can never fit (a prompt too big for
        G1 waits for the scheduler to reject it)."""
        if spec is self.queued:
            self._queue_next()
        replay = self.replay
        context_limit = replay.context_limit
        if context_limit is not None:
            spec = within_context(spec, context_limit)
        handoffs, router = replay.handoffs, replay.router
        first = handoffs.first_role
        if first == "prefill":
            rank = router.place(first, now, spec.prefill_dp_rank, spec.prefill_worker_idx, spec)
        else:
            rank = router.place(first, now, spec.dp_rank, spec.worker_idx, spec)
        engine = replay.workers[rank.worker].engine
        holder = rank if replay.handoff is None else self.holder(rank)  # (it holds the whole sequence: in P/D the
        limit = (engine if holder is rank else replay.workers[holder.worker].engine).sequence_limit(holder)  # decode)
        if limit is not None:
            spec = within_context(spec, limit)
        chain = rank.chain
        hint = router.hint(rank, spec, spec.keys(rank.block_size), now, chain.kvcr.busy_workers) \
            if chain.wants_hint else None
        # (SGLang's radix cache needs no per-token keys; a request that no tier can concern shares one tier state)
        request = Request(spec, now, rank.index, rank.block_size if engine.keyed else 0, hint,
                          handoffs.stop_after(spec), chain is not NO_TIERS or replay.handoff is not None)
        self.open[id(request)] = request
        replay.log.arrived(request)
        if replay.kv_log is not None:
            replay.kv_log.learn(request)
        reason = self.never_fits(rank, spec)
        if reason and replay.workers[rank.worker].engine.rejects_when_reached \
                and waits_to_be_rejected(spec, rank, replay.context_limit):
            refuse_when_reached(request, reason)
            rank.waiting.append(request)
            return
        if reason:
            reject(request, reason, now)
            self.ended(request, now, completed=False)
            return
        handoffs.placed(request, rank)
        rank.waiting.append(request)

    def _ranks(self, rank) -> tuple:
        """The ranks whose G1 a request placed on `rank` needs: it, or in P/D each role's first."""
        replay = self.replay
        return (rank,) if replay.handoff is None else \
            tuple(replay.router.members(role)[0].ranks[0] for role in ("prefill", "decode"))

    def holder(self, rank):
        return rank if self.replay.handoff is None else self._ranks(rank)[-1]

    def never_fits(self, rank, spec) -> str:
        return never_fits(spec, self._ranks(rank), self.replay.context_limit)

    def reject_reached(self, rank, now: int) -> None:
        """Reject the requests admission reached on `rank` whose prompt can never fit (at the end of their pass)."""
        rejecting, rank.rejecting = rank.rejecting, []
        for request in rejecting:
            reject(request, request.reason, now)
            self.ended(request, now, completed=False)

    def ended(self, request: Request, now: int, completed: bool) -> None:
        """`request` completed or was rejected at `now`: the log is told, and the traffic says who follows."""
        del self.open[id(request)]
        replay = self.replay
        replay.log.ended(request)
        follow = replay.traffic.after(request.spec, now, completed)
        if follow:  # (an open-loop trace's: none)
            self.release(follow, now)

    def release(self, specs, now: int) -> None:
        """Queue the arrivals the traffic released at `now`."""
        replay = self.replay
        for spec in specs:
            session = replay.traffic.session_number(spec)
            seq = None if session is None else TURN_SEQ + (session << 24) + spec.turn_index
            replay.push(spec.arrival_ns if spec.arrival_ns is not None else now, ARRIVAL, spec, seq)

    def push_timer(self, time_ns: int, callback) -> None:
        """Queue a traffic timer: `callback(now)` is called then and returns the specs it releases."""
        self.replay.push(time_ns, TRAFFIC_TIMER, callback)

    def timer(self, callback, now: int) -> None:
        """Event handler: a traffic timer is due; it may release requests."""
        self.release(callback(now), now)

    def withdraw(self, payload) -> bool:
        """Take a queued event (an arrival's spec, a traffic timer's callback) off the queue before it is due: the
        traffic moved it.  Rare (an idle guard's shift), so the heap is rebuilt; a worker's horizon may still name
        its time, which only ends a fused decode run there (exact either way, macro.py)."""
        queue = self.replay.queue
        for position, entry in enumerate(queue):
            if entry[3] is payload:
                queue[position] = queue[-1]
                queue.pop()
                heapify(queue)
                return True
        return False

    def cancel_open(self, now_ns: int) -> None:
        """The traffic cancels every request still open at its stop (an agentic profile's response grace): each
        leaves its rank by its engine's rule, in arrival order, and ends `canceled` at `now_ns` with a record (its
        tokens so far; a pass in flight then is lost).  The traffic is not told: a cancelled node releases
        nothing, and its play stays incomplete."""
        replay, by_rank = self.replay, {}
        cancelled = [r for r in self.open.values() if r.terminal_ns is None]
        for request in cancelled:
            by_rank.setdefault(request.rank, []).append(request)
        for worker in replay.workers:
            for rank in worker.ranks:
                if rank.index in by_rank:
                    worker.engine.cancel(rank, by_rank[rank.index])
                    replay.drain(rank, now_ns)
        for request in cancelled:
            ended_canceled(request, now_ns)
            del self.open[id(request)]
            replay.log.ended(request)

    def close(self, stopped_at: int | None, last_ns: int, idle_pass: tuple | None, stalled: bool) -> int:
        """The replay ended: at the traffic's stop (`stopped_at`) or its last event (`last_ns`); returns when.  A
        last event that ends a pass running no request (`idle_pass`: the decode SGLang's overlap loop decided for
        requests that finished meanwhile) does not count: the run ended at its last completion, as AISimulate's.
        A traffic that cancels at its stop (an agentic profile) cancels what is open then (`cancel_open`); any other
        request still open is incomplete.  Those a time limit cut short have no record (AISimulate's requests.jsonl
        holds the requests that ended); stalled ones keep theirs, with why."""
        end_ns = stopped_at if stopped_at is not None else last_ns
        if stopped_at is None and idle_pass is not None and idle_pass[1] == end_ns:
            end_ns = max(idle_pass[0], self.replay.log.last_end_ns or 0)
        if stopped_at is not None and self.replay.traffic.cancels_at_stop:
            self.cancel_open(end_ns)
        still_open = list(self.open.values())
        self.open.clear()
        close(still_open, end_ns, stalled)
        for request in still_open:
            self.replay.log.ended(request, record=stalled)
        return end_ns
