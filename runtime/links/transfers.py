"""Transfers that share bandwidth: one `Link` per pool and direction.

A transfer waits `latency` and then moves its bytes at the rate the link
grants it; rates come from `bandwidth.fair_rates` and are recomputed whenever
a transfer starts moving bytes or ends.  The link only does arithmetic: the
replay asks it for the next completion time and tells it the time when it
advances, so it holds no clock of its own.  Times are integer nanoseconds;
rates are bytes per nanosecond (decimal GB/s).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from .bandwidth import fair_rates


@dataclass(slots=True)
class Transfer:
    seq: int
    group: object  # the rank whose limit applies
    size: int  # bytes
    payload: object = None
    remaining: float = 0.0
    rate: float = 0.0
    moving_since: int = 0  # when bytes started moving (after the latency)
    solo_ns: int = 0  # what it would take alone at its group's limit


@dataclass
class Link:
    """Transfers of one direction of one pool."""

    group_limits: dict  # group -> GB/s (None/0 = unlimited)
    pool_limit: float | None = None  # GB/s
    latency_ns: int = 0
    moving: list = field(default_factory=list)
    clock: int = 0  # time up to which `remaining` is accounted
    seq: int = 0
    waited_ns: int = 0  # total time transfers spent beyond their solo time (bandwidth contention)
    bytes_moved: int = 0
    version: int = 0  # bumped whenever rates change, so stale completion events can be recognised
    _next: object = field(default=None, repr=False, compare=False)  # next_done(), or None: not known
    workers: frozenset | None = None  # the workers whose transfers it carries (None: any), for macro horizons
    slots: int | None = None  # I/O concurrency: at most this many transfers move at once (None: no limit) ...
    queued: deque = field(default_factory=deque)  # ... the others wait for a slot, first come first served
    slot_wait_ns: int = 0  # total time transfers waited for a slot

    def new(self, group, size: int, payload=None) -> Transfer:
        self.seq += 1
        limit = self.group_limits.get(group)
        solo = 0 if not limit else math.ceil(size / limit)  # GB/s == bytes/ns
        return Transfer(self.seq, group, size, payload, float(size), solo_ns=solo)

    def start_moving(self, transfer: Transfer, now: int) -> None:
        """The transfer's latency is over: it moves its bytes from now, or waits for a slot."""
        if self.slots is not None and len(self.moving) >= self.slots:
            transfer.moving_since = now  # (until it gets a slot: when it started waiting)
            self.queued.append(transfer)
            return
        self._next = None
        self._advance(now)
        transfer.moving_since = now
        moving = self.moving
        moving.append(transfer)
        if len(moving) == 1 and not self.pool_limit:  # alone: what `_rebalance` gives, without its checks
            limit = self.group_limits.get(transfer.group)
            transfer.rate = float(limit) if limit else math.inf
            return
        self._rebalance()

    def _advance(self, now: int) -> None:
        elapsed = now - self.clock
        if elapsed > 0:
            for t in self.moving:
                left = t.remaining - t.rate * elapsed
                t.remaining = left if left > 0.0 else 0.0
            self.clock = now

    def _rebalance(self) -> None:
        moving = self.moving
        if not moving:
            return
        group = moving[0].group
        if not self.pool_limit and all(t.group == group for t in moving):
            # one group and no pool limit: what `fair_rates` gives, the group's limit shared evenly
            limit = self.group_limits.get(group)
            rate = float(limit) / len(moving) if limit else math.inf
            for t in moving:
                t.rate = rate
            return
        rates = fair_rates([t.group for t in moving], self.group_limits, self.pool_limit)
        for t, rate in zip(moving, rates):
            t.rate = rate

    def next_done(self) -> tuple[int, Transfer] | None:
        """(time, transfer) of the next completion, ties broken by start order."""
        if self._next is not None:  # nothing moved since it was found
            return self._next[0]
        best = None
        clock = self.clock
        for t in self.moving:
            rate = t.rate
            when = clock if t.remaining <= 0 or rate == math.inf else clock + math.ceil(t.remaining / rate)
            if best is None or when < best[0] or (when == best[0] and t.seq < best[1].seq):
                best = (when, t)
        self._next = (best,)
        return best

    def finish(self, transfer: Transfer, now: int) -> None:
        self._next = None
        self._advance(now)
        moving = self.moving
        moving.remove(transfer)
        self.bytes_moved += transfer.size
        waited = (now - transfer.moving_since) - transfer.solo_ns
        if waited > 0:
            self.waited_ns += waited
        if self.queued:  # the slot goes to the transfer that has waited longest
            waiting = self.queued.popleft()
            self.slot_wait_ns += now - waiting.moving_since
            waiting.moving_since = now
            moving.append(waiting)
        if moving:
            self._rebalance()
