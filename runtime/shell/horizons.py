"""How far a worker's macro step may reach: the next event that could change its batch.

With one worker that is the next event of the queue.  With several, an event
that concerns only other workers does not end this worker's fused decode
passes: another worker's pass end when completions bring no arrivals and hand
nothing over (open-loop aggregated traffic), and copies on links this worker
does not use.  Arrivals, wakes, leaves, handoffs, closed-loop or P/D pass ends
and copies on its own links do.  Each event is filed, at push time, under the
workers it concerns (or all of them); entries already handled are dropped
lazily.
"""
from __future__ import annotations

from heapq import heappop, heappush

EVERYONE = None


def scope(concerns: str, payload, local_pass_ends: bool):
    """The workers an event (its kind's `concerns`, events.py) may change the batches of: EVERYONE, or their
    indices.  `local_pass_ends`: a pass end concerns nobody else (open-loop traffic without P/D)."""
    if concerns == "pass_end":  # its completions bring arrivals, or its prefills hand requests over
        return () if local_pass_ends else EVERYONE
    if concerns == "link":
        return payload[0].workers
    return () if concerns == "none" else EVERYONE


class Horizons:
    def __init__(self, workers: list):
        self.shared: list = []  # heap of (time_ns, seq) of events that concern every worker
        self.own = {worker.index: [] for worker in workers}  # worker -> heap of the events that concern it
        self.handled: set = set()  # seqs of the events handled at `handled_at`
        self.handled_at = -1

    def add(self, time_ns: int, seq: int, scope) -> None:
        """File an event under `scope`: EVERYONE, or the indices of the workers it concerns."""
        if scope is EVERYONE:
            heappush(self.shared, (time_ns, seq))
        else:
            for worker in scope:
                heappush(self.own[worker], (time_ns, seq))

    def handle(self, time_ns: int, seq: int) -> None:
        if time_ns != self.handled_at:
            self.handled.clear()
            self.handled_at = time_ns
        self.handled.add(seq)

    def next(self, worker, now: int) -> int | None:
        """When the next event that concerns `worker` comes (None: none is queued)."""
        times = [t for t in (self._first(self.shared, now), self._first(self.own[worker.index], now)) if t is not None]
        return min(times) if times else None

    def _first(self, heap: list, now: int) -> int | None:
        handled = self.handled if self.handled_at == now else ()
        while heap and (heap[0][0] < now or heap[0][1] in handled):
            heappop(heap)
        return heap[0][0] if heap else None
