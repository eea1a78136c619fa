"""timeline.jsonl: the replay's state sampled on a fixed grid of virtual time, for the HTML report's plots.

`--capture-timeline` attaches a `Timeline` as an after-instant hook.  At the
first event instant at or after each grid point (every `interval_ns` from 0)
it records, per rank, G1's blocks held by requests and blocks holding a
prefix key, the batch (running requests), the queue (waiting requests) and
the preemptions so far; per tier label, the blocks resident and the
capacity (a tier shared by several ranks counted once); and the requests
finished so far.  Sampling only reads state, so the summary does not change;
the capture runs passes one at a time (as --capture-kv-events does), so no
sample falls inside fused decode passes whose effects are applied early.
A long run keeps at most MAX_SAMPLES: when there would be more, the interval
doubles and only the samples the doubled grid would have taken are kept (the
first of each doubled cell), so the file is what sampling at that interval
from the start gives.
With the timeline the summary also gets `itl_gap_counts_ns` (`itl_histogram`): every
gap between consecutive tokens of completed requests, as [gap in integer ns,
how many], the exact aggregate the ITL percentiles are taken from, so the
report draws the ITL CDF exactly (its size is the distinct gaps, not the tokens).
"""
from __future__ import annotations

MS = 1e6
DEFAULT_INTERVAL_MS = 100.0
MAX_SAMPLES = 2000


def _rank_state(rank) -> dict:
    pool = rank.pool
    return {"rank": rank.name, "worker": rank.worker, "g1_capacity_blocks": pool.capacity,
            # blocks taken out of the free list: held by requests (for opal's APC: pinned or idle cached)
            "g1_held_blocks": pool.created - len(pool.free) if hasattr(pool, "free") else pool.held_blocks,
            "g1_cached_blocks": len(pool.cached) if hasattr(pool, "cached") else pool.cached_blocks,
            "running": len(rank.running), "waiting": len(rank.waiting), "preemptions": rank.preemptions}


def _tier_state(ranks: list) -> dict:
    found: dict = {}
    for rank in ranks:
        for tier in rank.chain.tiers:
            found.setdefault(tier.label or tier.section, {})[id(tier)] = tier
    return {label: {"resident_blocks": sum(t.resident for t in tiers.values()),
                    "capacity_blocks": sum(t.capacity for t in tiers.values())}
            for label, tiers in sorted(found.items())}


def itl_histogram(log) -> list[list[int]]:
    """The log's ITL sample as [gap ns, count] pairs, shortest gap first (RequestLog keeps it so: exact)."""
    return [[int(gap), int(count)] for gap, count in sorted(log.latencies.counts["itl"].items())]


class Timeline:
    """Samples of the replay's state on a virtual-time grid (`records`: one dict per sample, in time order)."""

    def __init__(self, replay, interval_ms: float = DEFAULT_INTERVAL_MS):
        if not interval_ms > 0:
            raise ValueError("the timeline's interval must be positive")
        self.replay = replay
        self.interval_ns = max(1, round(interval_ms * MS))
        self.next_ns = 0
        self.records: list[dict] = []
        self.times: list[int] = []  # each record's instant (ns)

    @classmethod
    def attach(cls, replay, interval_ms: float = DEFAULT_INTERVAL_MS) -> "Timeline":
        """Before `run`: sample after every instant that reaches the next grid point; passes run one at a time."""
        timeline = cls(replay, interval_ms)
        replay.single_step = True
        replay.after_instant.append(timeline.after_instant)
        return timeline

    def after_instant(self, now: int) -> None:
        if now < self.next_ns:
            return
        self.sample(now)
        if len(self.records) > MAX_SAMPLES:
            self._coarsen()
        self.next_ns = (now // self.interval_ns + 1) * self.interval_ns

    def _coarsen(self) -> None:
        """Double the interval, keeping the first sample of each doubled cell."""
        self.interval_ns *= 2
        keep, last = [], -1
        for k, at in enumerate(self.times):
            cell = at // self.interval_ns
            if cell > last:
                keep.append(k)
                last = cell
        self.records = [self.records[k] for k in keep]
        self.times = [self.times[k] for k in keep]

    def sample(self, now: int) -> None:
        replay = self.replay
        ranks = replay.ranks()
        self.times.append(now)
        self.records.append({"t_ms": now / MS, "finished_requests": replay.log.total,
                             "ranks": [_rank_state(rank) for rank in ranks], "tiers": _tier_state(ranks)})

    def close(self, end_ns: int) -> list[dict]:
        """After `close`: a last sample at the end of the replay (unless one was taken then), and the records."""
        if not self.records or self.records[-1]["t_ms"] != end_ns / MS:
            self.sample(end_ns)
        return self.records
