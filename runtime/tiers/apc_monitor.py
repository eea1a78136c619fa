"""opal's proactive APC eviction monitor in virtual time, and `use_apc`, which puts APC on a built replay.

`step` is the rule (opal-reference.md, "APC"): with available = free + idle and
util = idle / available taken before the eviction, util > threshold evicts
max(1, floor((util - threshold) * available)) idle blocks, and the next check comes
max(0.1 s, base * (1 - dev)) later with dev = max(0, (util - threshold) /
max(0.01, 1 - threshold)); otherwise (or with idle = 0 or available = 0) nothing is
evicted and the next check comes after the base interval.  The arithmetic is exact
(integers over the threshold's denominator; the threshold is read as the decimal it
prints as), the interval is rounded down to whole nanoseconds.

The events: every APC rank has one queued periodic check (events.py's `check`,
`Replay.push_periodic`) at a time, which evicts through `ApcPool.evict` (TTL
respected, `on_evict` told: write-through stores start at the check's instant)
and queues the next.  The first check of a rank is due one base interval after
the start.  Periodic events keep nothing alive: the replay ends at its last
real instant, however many checks are queued.

Fused decode passes (shell/macro.py) read and change the pool, so they must not
reach past a check of their worker's ranks: `pass_limit` makes them end by it (a
pass ending at the check's instant is fine: pass ends come first in an instant).

TTL waits: a request that waits while only protected blocks are idle needs no other
event to move, so at the end of an instant an idle worker with a waiting request on
an APC rank gets a `wake` at the earliest expiry that could free a block for it
(`ApcPool.next_expiry`).  Each such wake is for a different block's expiry and none
is replenished without real work, so this never loops; when no expiry can help the
replay ends and reports the request stalled.
"""
from __future__ import annotations

from fractions import Fraction
from functools import partial
from typing import NamedTuple

from ..shell.events import CHECK, WAKE
from .apc import ApcPool

MIN_INTERVAL_NS = 100_000_000  # 0.1 s: the monitor never checks more often


def exact(value) -> Fraction:
    """A threshold as the decimal it prints as (0.9 -> 9/10, not the binary float's 0.90000000000000002...)."""
    return value if isinstance(value, Fraction) else Fraction(str(value))


def step(free: int, idle: int, threshold, base_interval_ns: int) -> tuple[int, int]:
    """(victims, next interval in ns) for one check of a pool with `free` and `idle` blocks.

    In integers (the rule's fractions cleared of their denominators: a check runs every 0.1-1 s of simulated time,
    tens of thousands of times a run): with threshold = n/d, excess = (util - threshold) * available * d."""
    available = free + idle
    if idle == 0 or available == 0:
        return 0, base_interval_ns
    threshold = exact(threshold)
    n, d = threshold.numerator, threshold.denominator
    excess = idle * d - n * available
    if excess <= 0:  # util <= threshold
        return 0, base_interval_ns
    victims = max(1, excess // d)  # floor((util - threshold) * available)
    # dev = (util - threshold) / max(1/100, 1 - threshold) as dev_num / dev_den (>= 0 here)
    if 100 * (d - n) >= d:
        dev_num, dev_den = excess, available * (d - n)
    else:
        dev_num, dev_den = 100 * excess, available * d
    return victims, max(MIN_INTERVAL_NS, base_interval_ns * (dev_den - dev_num) // dev_den)


class CheckRecord(NamedTuple):
    """One check that evicted, for opal's `[APC] [Evict]` line (apc_log.py)."""

    time_ns: int
    rank: int
    util: Fraction  # idle / available before the eviction
    threshold: Fraction
    victims: int  # asked for
    evicted: int  # done (fewer when the rest of the queue was inside its TTL)
    free: int  # after the eviction
    resident: int  # pinned + idle, after
    capacity: int
    next_interval_ns: int


class ApcMonitor:
    """The replay's `apc`: each APC rank's next check and the TTL wakes."""

    def __init__(self, replay, threshold, base_interval_ns: int):
        self.replay = replay
        self.threshold = exact(threshold)
        self.base_ns = base_interval_ns
        self.ranks = [rank for rank in replay.ranks() if isinstance(rank.pool, ApcPool)]
        self.due = {rank.index: base_interval_ns for rank in self.ranks}  # when its next check is (or would be)
        self.woken: dict[int, int] = {}  # worker -> the expiry its last TTL wake was queued for
        self.log: list | None = None  # set to a list to collect a CheckRecord per check that evicted
        self.checks = 0

    def start(self) -> None:
        """Queue each APC rank's first check, one base interval after the start."""
        for rank in self.ranks:
            self._queue(rank, self.base_ns)

    def check(self, rank, now: int) -> None:
        """A periodic check (events.py's `check`) of `rank`'s pool; queues the next."""
        self.checks += 1
        pool = rank.pool
        free, idle = pool.plain_free, pool.idle_count
        victims, interval = step(free, idle, self.threshold, self.base_ns)
        if victims:
            evicted = pool.evict(victims, now)
            self.replay.drain(rank, now)  # (its KV "Removed" events, when they are captured, carry this instant)
            if self.log is not None:
                self.log.append(CheckRecord(now, rank.index, Fraction(idle, free + idle), self.threshold, victims,
                                            evicted, pool.plain_free, pool.pinned_count + pool.idle_count,
                                            pool.capacity, interval))
            if rank.jobs:  # write-through stores of the victims start now
                self.replay._start_jobs(self.replay.workers[rank.worker], now)
        self._queue(rank, now + interval)

    def _queue(self, rank, time_ns: int) -> None:
        self.due[rank.index] = time_ns
        self.replay.push_periodic(time_ns, CHECK, partial(self.check, rank))

    def after_instant(self, now: int) -> None:
        """End of an instant: wake idle workers whose waiting request a TTL expiry may admit."""
        if self.ranks and self.ranks[0].pool.ttl_ns:
            self._wake_waiting(now)

    def _wake_waiting(self, now: int) -> None:
        workers = self.replay.workers
        for rank in self.ranks:
            worker = workers[rank.worker]
            if rank.waiting and worker.batches is None:
                expiry = rank.pool.next_expiry()
                if expiry is not None and expiry > now and self.woken.get(worker.index) != expiry:
                    self.woken[worker.index] = expiry
                    self.replay.push(expiry, WAKE, worker)

    def pass_limit(self, worker) -> int | None:
        """The latest instant `worker`'s fused passes may end at: its ranks' next check (None: no limit)."""
        dues = [self.due[rank.index] for rank in worker.ranks if rank.index in self.due]
        return min(dues) if dues else None


def use_apc(replay, apc_plan) -> ApcMonitor:
    """Give every rank an ApcPool (TTL from the plan, reading the replay's clock) and the replay its monitor."""
    for rank in replay.ranks():
        rank.pool = ApcPool(rank.pool.capacity, replay.clock, apc_plan.ttl_ns)
    monitor = ApcMonitor(replay, apc_plan.eviction_threshold, apc_plan.check_interval_ns)
    replay.apc = monitor
    replay.after_instant.append(monitor.after_instant)
    replay.pass_limits.append(monitor.pass_limit)
    monitor.start()
    return monitor
