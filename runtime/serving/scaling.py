"""Scaled workers: when each worker is part of its role, and when a removed worker is really gone.

A role's `scaling` steps (Planner-style replica counts at given times) give
every worker a list of periods `(joined, ready, left)`: it takes requests
from `joined` (ready ones first; `ready` adds the startup delay) until `left`
(None: to the end).  A worker that leaves drains: it finishes its own work,
and it is removed only once nothing runs on it, none of its copies is in
flight and every KVCR pull from or into it has landed and been taken.  The
summary's `workers` section reports those times for scaled roles.
"""
from __future__ import annotations

from ..shell.events import LEAVE


def periods(replica_steps, position: int, delay_ns: int) -> list[tuple[int, int, int | None]]:
    """(joined, ready, left) of each period in which worker `position` of the role is part of it.

    `replica_steps` is the role's (from ns, replicas) schedule from the plan: its replicas at 0, then its
    `scaling` steps."""
    out, joined = [], None
    for at, replicas in replica_steps:
        if replicas > position and joined is None:
            joined = at
        elif replicas <= position and joined is not None:
            out.append((joined, joined + delay_ns, at))
            joined = None
    if joined is not None:
        out.append((joined, joined + delay_ns, None))
    return out or [(0, 0, 0)]


class Draining:
    """Workers that left their role, until they are removed."""

    def __init__(self, workers: list, busy: tuple = ()):
        self.workers = workers
        self.busy = busy  # more reasons a worker cannot be removed yet (KVCR: pulls from or into it)
        self.draining: list = []  # (worker, period) of workers that left and are not removed yet

    def schedule_leaves(self, push) -> None:
        for worker in self.workers:
            worker.removed = [None] * len(worker.periods)
            for period, (_, _, left) in enumerate(worker.periods):
                if left is not None:
                    push(left, LEAVE, (worker, period))

    @property
    def any_leave(self) -> bool:
        return any(left is not None for worker in self.workers for _, _, left in worker.periods)

    def leave(self, payload, now: int) -> None:
        """Event handler: a worker leaves its role; it drains first."""
        self.draining.append(payload)

    def remove_drained(self, now: int) -> None:
        """Remove the draining workers that have nothing left to do (a worker back in its role stays)."""
        if not self.draining:
            return
        still = []
        for worker, period in self.draining:
            if worker.placeable(now, False):
                continue
            if worker.batches is not None or any(r.busy or r.transfers_in_flight for r in worker.ranks) or \
                    any(busy(worker) for busy in self.busy):
                still.append((worker, period))
            else:
                worker.removed[period] = now
        self.draining = still


def workers_section(workers: list) -> list[dict]:
    """Per worker of a scaled role: its periods, with the time it was removed after each (None: not yet)."""
    return [{"worker": worker.index, "role": worker.ranks[0].role,
             "periods": [{"joined_ms": joined / 1e6, "ready_ms": ready / 1e6,
                          "left_ms": None if left is None else left / 1e6,
                          "removed_ms": None if removed is None else removed / 1e6}
                         for (joined, ready, left), removed in zip(worker.periods, worker.removed)]}
            for worker in workers if worker.scaled]
