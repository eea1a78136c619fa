"""The replay shell: one event queue, a virtual clock in integer nanoseconds, and workers.

Events are ordered by ``(time_ns, kind_rank, seq)``: at one instant, pass ends
are applied before arrivals, and arrivals before any pass starts, so a request
arriving exactly when a pass ends joins the next pass.  `seq` is a counter kept
here, never process-global state; it makes every key unique, so a binary heap
(heapq: cheaper per event than a sorted container) pops events in exactly that
order.  Everything else (scheduling, caching, timing) is delegated to the
pure-ish modules; this loop only moves time.

Macro steps: when every rank of a worker runs a pure decode pass (nothing
waiting, no prefill, no request about to finish), the passes until the next
event that could change its batch are applied at once; the state at the next
real pass start is exactly what single stepping would produce.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from heapq import heappop, heappush

from ..serving import handoff
from . import macro
from ..tiers import storage_pool as storage_tier
from ..links.copies import TRANSFER_DONE, TRANSFER_START, CopyEvents
from ..serving.never_fits import never_fits
from ..serving.handoff import Handoff
from .horizons import EVERYONE, Horizons
from ..outputs.kv_events import KvEventLog
from ..tiers.offload import blocked
from ..tiers.peer_fetch import PeerFetch
from ..serving.placement import Router
from ..serving.requests import Request, RequestSpec
from ..serving.scaling import LEAVE, Draining
from ..serving.scheduler import Rank, finish_pass, schedule
from ..timing import Timing
from ..traffic.generator import Traffic

PASS_END, HANDOFF_DONE, WAKE, ARRIVAL = 0, 3, 4, 5  # (TRANSFER_START = 1, TRANSFER_DONE = 2: copy_events.py;
# LEAVE = 6: scaling.py)


@dataclass
class Worker:
    index: int
    ranks: list[Rank]
    timing: Timing
    batches: list | None = None  # in-flight pass
    pass_ends: list = field(default_factory=list)  # end times of the passes it runs now (several: macro step)
    passes: int = 0
    blocked: bool = False  # a scheduled pass waits for GPU->host copies of blocks it reuses
    # (joined, ready, left) of each period the worker is part of its role (scaled workers); left None = to the end
    periods: list = field(default_factory=lambda: [(0, 0, None)])
    removed: list = field(default_factory=list)  # per period: when it was removed after leaving (see scaling.py)
    scaled: bool = False  # its role has a scaling schedule

    def placeable(self, now: int, ready: bool) -> bool:
        return any(start <= now and (end is None or now < end) and (not ready or up <= now)
                   for start, up, end in self.periods)


@dataclass
class Replay(CopyEvents, Draining):
    workers: list[Worker]
    traffic: Traffic
    block_size: int
    context_limit: int | None = None
    single_step: bool = False
    handoff: Handoff | None = None  # disaggregated prefill/decode
    requests: list[Request] = field(default_factory=list)
    queue: list = field(default_factory=list)  # a heap of (time_ns, kind, seq, payload); seq makes keys unique
    seq: int = 0
    now: int = 0
    router: Router | None = None  # placement and KVCR hints (built from the workers when not given)
    stopped_at: int | None = None
    on_progress: object = None
    kv_log: KvEventLog | None = None  # set by `capture_kv_events`
    stalled: int = 0  # requests left waiting when no event could move them
    handed_over: bool = False  # a pass start moved requests to another worker (see _start_idle_workers)
    initial: list | None = None  # the traffic's first arrivals, when building needed them already
    parked: list = field(default_factory=list)  # restores waiting for their G1 blocks' copies to land
    kvcr: PeerFetch | None = None
    draining: list = field(default_factory=list)  # (worker, period) of workers that left and are not removed yet
    horizons: Horizons | None = field(default=None, init=False)  # per-worker macro horizons (several workers)

    def __post_init__(self) -> None:
        if self.router is None:
            self.router = Router(self.workers)
        self.horizons = Horizons(self.workers) if len(self.workers) > 1 else None

    def capture_kv_events(self) -> KvEventLog:
        """Record Stored/Removed events; each event carries its own time, so passes run one at a time."""
        self.kv_log = KvEventLog(self.block_size)
        self.single_step = True
        for rank in self.ranks():
            rank.pool.events = []
            if rank.host is not None:
                rank.host.events = []
        return self.kv_log

    def _drain(self, rank: Rank, now: int) -> None:
        if self.kv_log is not None:
            self.kv_log.add(now, rank.index, rank.pool.events)
            if rank.host is not None:
                self.kv_log.add(now, rank.index, rank.host.events, tier="host_pinned")

    # ------------------------------------------------------------------ queue
    def push(self, time_ns: int, kind: int, payload) -> None:
        heappush(self.queue, (time_ns, kind, self.seq, payload))
        if self.horizons is not None:
            self.horizons.add(time_ns, self.seq, self._concerns(kind, payload))
        self.seq += 1

    def _concerns(self, kind: int, payload):
        """The workers an event may change the batches of (EVERYONE: all; see horizons.py)."""
        if kind == PASS_END:  # its completions bring arrivals, or its prefills hand requests over
            return () if self.traffic.open_loop and self.handoff is None else EVERYONE
        if kind == TRANSFER_START or kind == TRANSFER_DONE:
            return payload[0].workers
        return EVERYONE

    def _horizon(self, worker: Worker, now: int) -> int | None:
        if self.horizons is not None:
            return self.horizons.next(worker, now)
        return self.queue[0][0] if self.queue else None

    def ranks(self) -> list[Rank]:
        return [rank for worker in self.workers for rank in worker.ranks]

    def _distinct(self, tier: str) -> list:
        """The distinct pools of a tier (`host`: G2, `storage`: G3) the ranks use, in rank order."""
        return list({id(pool): pool for pool in (getattr(r, tier) for r in self.ranks()) if pool is not None}.values())

    def summary_sections(self) -> dict:
        """The summary's sections for the tiers behind G1 (`g2_domains`, `g3_offload`, `kvcr`) and, for scaled roles,
        `workers`."""
        out = {}
        hosts = self._distinct("host")
        if hosts:
            out["g2_domains"] = [{"name": pool.name, **pool.summary()} for pool in hosts]
        stores = self._distinct("storage")
        if stores:
            out["g3_offload"] = storage_tier.section(stores)
        if self.kvcr is not None:
            out["kvcr"] = self.kvcr.section()
        if any(worker.scaled for worker in self.workers):
            out["workers"] = self.workers_section()
        return out

    # ------------------------------------------------------------------ arrivals
    def _arrive(self, spec: RequestSpec, now: int) -> None:
        disaggregated = self.handoff is not None
        first = "decode" if disaggregated and self.handoff.destination_first else \
            "prefill" if disaggregated else "aggregated"
        rank = self.router.place(first, now, *((spec.prefill_dp_rank, spec.prefill_worker_idx) if first == "prefill" else
                                         (spec.dp_rank, spec.worker_idx)))
        request = Request(spec, now, rank.index, rank.block_size)
        self.requests.append(request)
        if self.kv_log is not None:
            self.kv_log.learn(request)
        if rank.kvcr is not None:
            request.hint = self.router.hint(rank, request, now, self.kvcr.busy_workers)
        reason = self._never_fits(rank, spec)
        if reason:
            request.status, request.reason, request.terminal_ns = "rejected", reason, now
            self._ended(request, now, completed=False)
            return
        if first == "decode":  # destination-first: the decode rank reserves before the prefill starts
            request.handoff, request.decode_rank = "reserve", rank
        elif first == "prefill":
            request.stop_after, request.prefill_rank = 1, rank
        rank.waiting.append(request)

    def _hand_off(self, request: Request, now: int) -> None:
        """A prefill finished: the KV goes to the decode rank that reserved it, or to the next one."""
        if self.handoff.destination_first:
            handoff.move_to(request, request.decode_rank, request.spec.output_len)
            self._join(request.decode_rank, request)  # skipped while the KV travels
            self._start_handoff_transfer(request, now)
            return
        rank = self.router.place("decode", now, request.spec.dp_rank, request.spec.worker_idx)
        handoff.move_to(request, rank, request.spec.output_len)
        request.decode_rank, request.handoff = rank, "pending"
        self._join(rank, request)

    def _join(self, rank: Rank, request: Request) -> None:
        """A handed-off request joins a decode rank's queue; its place there orders landed handoffs."""
        self.seq += 1
        request.joined = self.seq
        rank.waiting.append(request)

    def _start_handoff_transfer(self, request: Request, now: int) -> None:
        request.handoff, request.loading = "transferring", True
        self.push(now + self.handoff.transfer_ns(request.transfer_tokens), HANDOFF_DONE, request)

    def _never_fits(self, rank: Rank, spec: RequestSpec) -> str:
        ranks = (rank,) if self.handoff is None else \
            tuple(self.router.members(role)[0].ranks[0] for role in ("prefill", "decode"))  # P/D: each role's first
        return never_fits(spec, ranks, self.context_limit)

    def _ended(self, request: Request, now: int, completed: bool) -> None:
        for spec in self.traffic.after(request.spec, now, completed):
            self.push(spec.arrival_ns if spec.arrival_ns is not None else now, ARRIVAL, spec)

    # ------------------------------------------------------------------ passes
    def _start_pass(self, worker: Worker, now: int) -> None:
        batches = []
        for rank in worker.ranks:
            batches.append(schedule(rank, now))
            self._drain(rank, now)
        self._start_jobs(worker, now)
        if not any(batches):
            return
        if any(blocked(rank) for rank in worker.ranks):
            worker.batches, worker.blocked = batches, True  # runs when the copies it waits for are done
            return
        self._run_pass(worker, batches, now)

    def _run_pass(self, worker: Worker, batches: list, now: int) -> None:
        worker.blocked = False
        fused = None if self.single_step else macro.plan(
            worker, batches, now, self._horizon(worker, now), self.traffic.stop_ns, self.traffic.open_loop)
        if fused is not None:
            for request, end in macro.apply(fused):
                self._ended(request, end, completed=True)
            worker.batches = []
            worker.pass_ends = fused.ends
            worker.passes += len(fused.ends)
            self.push(fused.ends[-1], PASS_END, worker)
            return
        duration = max(worker.timing(b.work) for b in batches if b)
        worker.batches = batches
        worker.pass_ends = [now + duration]
        worker.passes += 1
        self.push(now + duration, PASS_END, worker)

    def _end_pass(self, worker: Worker, now: int) -> None:
        batches, worker.batches = worker.batches, None
        for rank, batch in zip(worker.ranks, batches):
            if batch is None:
                continue
            for request in finish_pass(rank, batch, now):
                if request.status == "transferring":
                    self._hand_off(request, now)
                else:
                    self._ended(request, now, completed=True)
            self._drain(rank, now)
        if self.kvcr is not None:
            self._take_landed_pulls(worker, now)
        self._start_jobs(worker, now)

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

    def _start_idle_workers(self, now: int) -> None:
        """Start a pass on every idle worker with work; again if a start handed requests to other workers."""
        self.handed_over = True
        while self.handed_over:
            self.handed_over = False
            for worker in self.workers:
                if worker.batches is None and any(rank.busy for rank in worker.ranks) \
                        and any(up <= now for _, up, _ in worker.periods):  # started up (scaled workers)
                    self._start_pass(worker, now)

    def _loop(self) -> None:
        self._schedule_leaves()
        for worker in self.workers:
            for _, ready, _ in worker.periods:
                if ready:
                    self.push(ready, WAKE, worker)
        for spec in self.initial if self.initial is not None else self.traffic.start():
            self.push(spec.arrival_ns or 0, ARRIVAL, spec)
        stop = self.traffic.stop_ns
        queue = self.queue
        while queue:
            now = queue[0][0]
            if stop is not None and now > stop:
                self.stopped_at = stop
                break
            self.now = now
            while queue and queue[0][0] == now:
                _, kind, seq, payload = heappop(queue)
                if self.horizons is not None:
                    self.horizons.handle(now, seq)
                if kind == PASS_END:
                    self._end_pass(payload, now)
                elif kind == TRANSFER_DONE:
                    self._transfer_done(*payload, now)
                elif kind == TRANSFER_START:
                    self._transfer_moves(*payload, now)
                elif kind == HANDOFF_DONE:
                    handoff.landed(payload.decode_rank, payload, now)
                elif kind == WAKE:
                    pass  # the worker is ready: the sweep below starts it if it has work
                elif kind == LEAVE:
                    self._leave(*payload)
                else:
                    self._arrive(payload, now)
            self._start_idle_workers(now)
            if self.kvcr is not None and self.kvcr.asked:
                self._start_pulls(now)
            if self.draining:
                self._remove_drained(now)
            if self.on_progress is not None:
                self.on_progress(self)
        if self.stopped_at is None and any(rank.busy for rank in self.ranks()):
            # no event can change anything any more, yet requests wait: report it, never loop
            self.stalled = sum(len(rank.waiting) + len(rank.running) for rank in self.ranks())

