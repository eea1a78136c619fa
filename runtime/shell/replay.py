"""The replay shell: one event queue, a virtual clock in integer nanoseconds, and the workers' passes.

Events are ordered by ``(time_ns, kind, seq)`` (the kinds and their handlers:
events.py).  `seq` is a counter kept here, never process-global state; it
makes every key unique, so a binary heap (heapq: cheaper per event than a
sorted container) pops events in exactly that order.  Scheduling, caching,
copies, handoffs and draining belong to the modules that own their state;
this loop only moves time and starts passes.

Macro steps: when every rank of a worker runs a pure decode pass (nothing
waiting that a pass could admit, no prefill, no request about to finish), the passes until the next
event that could change its batch are applied at once; the state at the next
real pass start is exactly what single stepping would produce.  When events
read the workers' state (a router policy reading queues or caches, scaling
checks: `fuse_to_events`), fused passes also end by the next event, so that
state is exact at every event too.  Periodic events (`push_periodic`: scaling
checks) keep nothing alive: the loop ends when only they are left.
"""
from __future__ import annotations

import gc
from heapq import heappop, heappush

from ..links.copies import Copies
from ..outputs.kv_events import KvEventLog
from ..outputs.request_log import RequestLog
from ..serving.disaggregation import Disaggregation
from ..serving.handoff import HandoffTransfer, PrefillMove
from ..serving.placement import Router
from ..serving.requests import Request
from ..serving.scaling import Draining
from ..tiers.copy_jobs import Copy
from ..tiers.offload import blocked
from .arrivals import Arrivals
from .clock import Clock
from .events import EVENTS, PASS_END, WAKE, handlers
from .fused_tail import FusedEvents
from .horizons import Horizons, scope


class Replay:
    def __init__(self, workers: list, traffic, block_size: int, context_limit: int | None = None,
                 single_step: bool = False, handoff=None, router: Router | None = None, clock: Clock | None = None):
        self.workers = workers
        self.traffic = traffic
        self.block_size = block_size
        self.context_limit = context_limit
        self.single_step = single_step
        self.handoff = handoff  # serving.handoff.Handoff when prefill and decode are disaggregated
        self.router = router or Router(workers)  # placement and KVCR hints
        self.log = RequestLog()  # told of each request when it ends (the summary and requests.jsonl read it)
        self.arrivals = Arrivals(self)
        self.queue: list = []  # a heap of (time_ns, kind, seq, payload); seq makes keys unique
        self.seq = 0
        self.clock = clock or Clock()  # the instant being handled (tiers with a TTL read it too)
        self.stopped_at: int | None = None
        self.on_progress = None
        self.kv_log: KvEventLog | None = None  # set by `capture_kv_events`
        self.stalled = 0  # requests left waiting when no event could move them
        self.idle_pass: tuple | None = None  # (start, end) of the last pass that ran no request (Arrivals.close)
        self.handed_over = False  # a pass start moved requests to another worker (see _start_idle_workers)
        self.initial: list | None = None  # the traffic's first arrivals, when building needed them already
        self.horizons = Horizons(workers) if len(workers) > 1 or any(  # (one with tiers: stores concern nobody)
            rank.chain.tiers for worker in workers for rank in worker.ranks) else None  # per-worker macro horizons
        self.copies = Copies(self.push, self._after_landing)
        self.fused = FusedEvents(self.push, self.arrivals.ended, self._start_jobs)  # fused passes' own events
        self.handoffs = Disaggregation(handoff, self.router, self.push, self._next_seq, self._start_jobs)
        self.draining = Draining(workers)
        # what else happens at the end of a pass and of an instant (KVCR pulls, see peer_fetch.attach; draining)
        self.after_pass: list = [self.handoffs.worker_pass_ended] if handoff is not None else []
        self.after_instant: list = [self.draining.remove_drained] if self.draining.any_leave else []
        # each kind of job a rank may ask for -> who starts it (True: it moved a request to another worker)
        self.starters = {Copy: self.copies.ask, HandoffTransfer: self.handoffs.start_transfer,
                         PrefillMove: self.handoffs.to_prefill}
        self.concerns = [kind.concerns for kind in EVENTS]
        self.apc = None  # opal's APC eviction monitor (tiers/apc_monitor.py), with APC on
        self.background = 0  # periodic events queued: the loop ends when only they are left
        # callables(worker) -> the latest instant its fused passes may end at, for events that read what they change
        self.pass_limits: list = []
        self.fuse_to_events = self.router.reads_state  # fused passes end by the next event (see the docstring)
        if hasattr(traffic, "bind"):  # (a traffic with timers of its own: an agentic profile's idle guards)
            traffic.bind(self)

    @property
    def requests(self) -> list[Request]:
        """Every request, in arrival order (only when the log keeps them: `RequestLog(keep=True)`)."""
        return self.log.requests

    @property
    def now(self) -> int:
        return self.clock.now

    def ranks(self) -> list:
        return [rank for worker in self.workers for rank in worker.ranks]

    def capture_kv_events(self) -> KvEventLog:
        """Record Stored/Removed events; each event carries its own time, so passes run one at a time."""
        self.kv_log = KvEventLog(self.block_size)
        self.single_step = True
        for rank in self.ranks():
            rank.pool.events = []
            rank.chain.capture_events()
        return self.kv_log

    def drain(self, rank, now: int) -> None:
        if self.kv_log is not None:
            self.kv_log.drain(now, rank)

    # ------------------------------------------------------------------ queue
    def push(self, time_ns: int, kind: int, payload, seq: int | None = None) -> None:
        """Queue an event; `seq`: its own sequence number (the first arrivals', arrivals.py), else the next one."""
        if seq is None:
            seq = self.seq
            self.seq += 1
        heappush(self.queue, (time_ns, kind, seq, payload))
        if self.horizons is not None:
            self.horizons.add(time_ns, seq, scope(self.concerns[kind], payload,
                                                  self.traffic.open_loop and self.handoff is None))

    def push_periodic(self, time_ns: int, kind: int, check) -> None:
        """Queue a periodic event: `check(now)` is called then; it keeps nothing alive (see the docstring)."""
        self.background += 1
        self.push(time_ns, kind, check)

    def periodic(self, check, now: int) -> None:
        """Event handler: a periodic check is due."""
        self.background -= 1
        check(now)

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _horizon(self, worker, now: int) -> int | None:
        horizons, queue = self.horizons, self.queue
        return horizons.next(worker, now) if horizons is not None else queue[0][0] if queue else None

    # ------------------------------------------------------------------ arrivals and ends (arrivals.py)
    def never_fits(self, rank, spec) -> str:
        return self.arrivals.never_fits(rank, spec)

    def wake(self, worker, now: int) -> None:
        """Event handler: the worker is ready; the sweep after this instant's events starts it if it has work."""

    # ------------------------------------------------------------------ jobs the ranks asked for
    def _start_jobs(self, worker, now: int) -> None:
        ranks = worker.ranks
        if not (ranks[0].jobs if len(ranks) == 1 else any(rank.jobs for rank in ranks)):
            return  # (most passes ask for none: nothing to start, no link moved)
        moved = {}
        for rank in ranks:
            if not rank.jobs:
                continue
            for job in rank.jobs:
                if self.starters[type(job)](rank, job, now, moved):
                    self.handed_over = True
            rank.jobs = []
        self.copies.schedule(moved)

    def _after_landing(self, rank, now: int) -> None:
        worker = self.workers[rank.worker]
        self.drain(rank, now)
        if rank.jobs:  # a landed copy asked for the next one (a background write down the chain)
            self._start_jobs(worker, now)
        if worker.blocked and not any(blocked(rank) for rank in worker.ranks):
            self._run_pass(worker, worker.batches, now)

    # ------------------------------------------------------------------ passes
    def _start_pass(self, worker, now: int) -> None:
        ranks, schedule, kv_log, batches = worker.ranks, worker.engine.schedule, self.kv_log, []
        for rank in ranks:
            batches.append(schedule(rank, now))
            if kv_log is not None:  # (`drain`, inline: once per pass)
                kv_log.drain(now, rank)
        self._start_jobs(worker, now)
        if not any(batches):
            for rank in ranks:  # no pass: the requests admission reached that can never fit end now
                if rank.rejecting:
                    self.arrivals.reject_reached(rank, now)
            return
        if blocked(ranks[0]) if len(ranks) == 1 else any(blocked(rank) for rank in ranks):
            worker.batches, worker.blocked = batches, True  # runs when the copies it waits for are done
            return
        self._run_pass(worker, batches, now)

    def _run_pass(self, worker, batches: list, now: int) -> None:
        worker.blocked, ranks = False, worker.ranks  # (a rank's rejected requests end with this one pass: not fused)
        rejecting = ranks[0].rejecting if len(ranks) == 1 else any(rank.rejecting for rank in ranks)
        fused = None if self.single_step or not worker.engine.fusable or rejecting else worker.engine.plan_fused(
            worker, batches, now, horizon := self._horizon(worker, now), self._pass_stop(worker, horizon),
            self.traffic.open_loop)
        if fused is not None:
            for request, end in worker.engine.apply_fused(fused):
                self.arrivals.ended(request, end, completed=True)
            self.fused.queue(worker, fused)  # (its stores, and completions that wait for their instants)
            batches, ends = [], fused.ends
        else:
            one = len(batches) == 1  # (one rank: its batch is the pass; `_start_pass` saw that it has one)
            duration = worker.timing(batches[0].work) if one else max(worker.timing(b.work) for b in batches if b)
            if not (batches[0].items if one else any(b.items for b in batches if b)):
                self.idle_pass = (now, now + duration)
            ends = [now + duration]
        worker.batches, worker.pass_ends = batches, ends
        worker.passes += len(ends)
        if worker.busy_spans is not None:
            worker.busy_spans.append((now, ends[-1]))
        self.push(ends[-1], PASS_END, worker)

    def _pass_stop(self, worker, horizon: int | None) -> int | None:
        """When fused passes must have ended: the traffic's stop, the next event when events read the workers'
        state (`fuse_to_events`), or an earlier event that reads the pool (`pass_limits`)."""
        stop = self.traffic.stop_ns
        if self.fuse_to_events and horizon is not None:
            stop = horizon if stop is None else min(stop, horizon)
        for limit in self.pass_limits:
            until = limit(worker)
            if until is not None and (stop is None or until < stop):
                stop = until
        return stop

    def end_pass(self, worker, now: int) -> None:
        """Event handler: the worker's pass (or fused passes) ended."""
        batches, worker.batches = worker.batches, None
        finish, ended, kv_log = worker.engine.finish, self.arrivals.ended, self.kv_log
        for rank, batch in zip(worker.ranks, batches):
            if batch is None:
                continue
            for request in finish(rank, batch, now):
                if request.status == "transferring":
                    self.handoffs.prefilled(rank, request, now)
                else:
                    ended(request, now, completed=True)
            if rank.releases:
                self.handoffs.pass_ended(rank, now)
            if kv_log is not None:
                kv_log.drain(now, rank)
        for rank in worker.ranks:
            if rank.rejecting:
                self.arrivals.reject_reached(rank, now)
        for hook in self.after_pass:
            hook(worker, now)
        self._start_jobs(worker, now)

    def _start_idle_workers(self, now: int) -> None:
        """Start a pass on every idle worker with work; again if a start handed requests to other workers."""
        self.handed_over = True
        while self.handed_over:
            self.handed_over = False
            for worker in self.workers:
                ranks, periods = worker.ranks, worker.periods  # (one rank and one period read directly: each instant)
                if worker.batches is None and (ranks[0].busy if len(ranks) == 1 else any(r.busy for r in ranks)) \
                        and (periods[0][1] <= now if len(periods) == 1 else any(up <= now for _, up, _ in periods)):
                    self._start_pass(worker, now)  # (it has work, and has started up: scaled workers)

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        # the replay allocates millions of small objects and frees few: the cycle collector only costs time here
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._loop()
        finally:
            gc.freeze()  # the replay's objects live on: later collections need not scan them again
            if collecting:
                gc.enable()

    def close(self) -> int:
        """After `run`: when the replay ended (Arrivals.close); requests still open are incomplete then."""
        return self.arrivals.close(self.stopped_at, self.now, self.idle_pass, bool(self.stalled))

    def _loop(self) -> None:
        self.draining.schedule_leaves(self.push)
        for worker in self.workers:
            for _, ready, _ in worker.periods:
                if ready:
                    self.push(ready, WAKE, worker)
        self.arrivals.start(self.initial if self.initial is not None else self.traffic.start())
        traffic = self.traffic
        queue, handle, horizons, clock = self.queue, handlers(self), self.horizons, self.clock
        after_instant, on_progress = self.after_instant, self.on_progress
        while len(queue) > self.background:
            now = queue[0][0]
            stop = traffic.stop_ns  # (read each instant: an agentic profile's stop is set at its warm-up barrier)
            if stop is not None and now > stop:
                self.stopped_at = stop
                break
            clock.now = now
            while queue and queue[0][0] == now:
                _, kind, seq, payload = heappop(queue)
                if horizons is not None:
                    horizons.handle(now, seq)
                handle[kind](payload, now)
            self._start_idle_workers(now)
            for hook in after_instant:
                hook(now)
            if on_progress is not None:
                on_progress(self)
        if self.stopped_at is None and any(rank.busy for rank in self.ranks()):
            # no event can change anything any more, yet requests wait: report it, never loop
            self.stalled = sum(len(rank.waiting) + len(rank.running) for rank in self.ranks())
