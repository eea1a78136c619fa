"""One-pass miss-ratio curve: the prefix hit tokens of an ideal LRU prefix cache at every capacity.

The ideal cache holds blocks, `capacity` of them, and nothing is pinned.  A
request looks up its first `limit` keys (block_stream.py) and hits the
longest run of them that is resident; then it accesses all its keys, last
block first, so its first block is the most recent (vLLM frees a request's
blocks tail first for the same reason: a prefix is lost from its end).  Which
keys are accessed does not depend on the capacity, so LRU's stack property
holds: at capacity C the cache holds exactly the C most recently accessed
keys, and key k is resident iff its stack distance (distinct keys accessed
since k's last access, k included) is at most C.  A run of lookups hits up to
block j iff every one of blocks 0..j is resident, so block j hits iff
C >= max(distance of blocks 0..j); the distance is decreasing in the last
access stamp, so that max is the distance of the prefix's oldest stamp
(np.minimum.accumulate), and one pass gives every block's threshold.

Stack distance at a request's start, for a key last accessed at stamp s:
the stamps in [s, now) still live (the last access of their key).  Stamps
are issued in order, so that is (now - s) minus the dead ones >= s; dead
stamps (superseded by a later access) are kept as sorted runs merged like a
binary counter, so each request costs a few vectorised searchsorted calls
and all merges together O(n log n).

Belady's bound beside it is belady_bound.py's, on the same stream (the miss
breakdown uses it too, on each rank's admissions, to tell a policy miss from
a capacity miss).  Nothing else is resident and nothing is pinned: an
engine's running requests and preemptions are what set a replay apart.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .block_stream import BlockStream


class DeadStamps:
    """Distinct stamps as sorted runs: how many are >= each of many values, at once."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def add(self, stamps: np.ndarray) -> None:
        if not stamps.size:
            return
        runs = self.runs
        runs.append(np.sort(stamps))
        while len(runs) > 1 and len(runs[-1]) * 2 >= len(runs[-2]):
            top = runs.pop()
            runs[-1] = np.sort(np.concatenate([runs[-1], top]), kind="stable")  # (two sorted runs: linear)

    def at_or_after(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(values), dtype=np.int64)
        for run in self.runs:
            out += len(run) - np.searchsorted(run, values)
        return out


def thresholds(stream: BlockStream) -> np.ndarray:
    """Per lookup block (request after request, block 0 first): the smallest capacity at which the ideal LRU
    prefix cache hits it; 0 where no capacity does (its key, or an earlier one's, was never accessed before)."""
    ids, starts, limits = stream.ids, stream.starts, stream.limits
    last = np.full(stream.distinct, -1, dtype=np.int64)
    dead = DeadStamps()
    out = np.zeros(int(limits.sum()), dtype=np.int32)
    at, now = 0, 0
    for i in range(stream.requests):
        keys = ids[starts[i]:starts[i + 1]]
        n, limit = len(keys), int(limits[i])
        old = last[keys]
        if limit:
            oldest = np.minimum.accumulate(old[:limit])
            known = int(np.count_nonzero(oldest >= 0))  # (a prefix: once -1, the min stays -1)
            if known:
                s = oldest[known - 1::-1]  # ascending, so each search starts where the last one ended
                out[at:at + known] = ((now - s) - dead.at_or_after(s))[::-1]
            at += limit
        order = keys[::-1]  # access order: last block first
        stamps = np.arange(now, now + n, dtype=np.int64)
        last[order] = stamps
        superseded = old[old >= 0]
        again = last[order] != stamps  # a key twice in one request: its earlier access is dead at once
        if again.any():
            superseded = np.concatenate([np.unique(superseded), stamps[again]])
        dead.add(superseded)
        now += n
    return out


@dataclass(frozen=True)
class MissRatioCurve:
    block_size: int
    prompt_tokens: int
    lookup_tokens: int  # tokens any cache could serve: the blocks before each prompt's last token
    hit_blocks: np.ndarray  # hit_blocks[c]: blocks hit at capacity c, for c in 0..saturation

    @property
    def saturation(self) -> int:
        """The smallest capacity at which the curve is flat (it hits all an unbounded cache hits)."""
        return len(self.hit_blocks) - 1

    def hit_tokens(self, capacity: int) -> int:
        return int(self.hit_blocks[max(0, min(int(capacity), self.saturation))]) * self.block_size

    def hit_ratio(self, capacity: int) -> float:
        return self.hit_tokens(capacity) / self.prompt_tokens if self.prompt_tokens else 0.0

    def steps(self) -> np.ndarray:
        """Every capacity at which the curve rises."""
        return np.flatnonzero(np.diff(self.hit_blocks)) + 1

    def sample(self, per_decade: int = 24, extra=()) -> list[int]:
        """Capacities for a plot: log-spaced (`per_decade` a decade), every step when there are few, `extra`."""
        steps = self.steps()
        if len(steps) <= 4 * per_decade:
            chosen = set(steps.tolist())
        else:
            top = max(1, self.saturation)
            chosen = set(np.unique(np.round(np.logspace(0, np.log10(top), 1 + int(np.ceil(np.log10(top) * per_decade))
                                                        if top > 1 else 1)).astype(np.int64)).tolist())
            chosen.add(top)
        chosen.update(int(c) for c in extra)
        return sorted(c for c in chosen if c >= 1)

    def summary(self, extra=(), per_decade: int = 24) -> dict:
        """The curve for prediction.json: sampled points as [capacity_blocks, hit_tokens, hit_ratio]."""
        return {"block_size": self.block_size, "prompt_tokens": self.prompt_tokens,
                "lookup_tokens": self.lookup_tokens, "saturation_blocks": self.saturation,
                "unbounded_hit_tokens": self.hit_tokens(self.saturation),
                "points": [[c, self.hit_tokens(c), round(self.hit_ratio(c), 6)]
                           for c in self.sample(per_decade, extra)]}


def curve(stream: BlockStream) -> MissRatioCurve:
    return curve_of(stream, thresholds(stream))


def curve_of(stream: BlockStream, found: np.ndarray) -> MissRatioCurve:
    """The curve from `stream`'s thresholds (each lookup block's smallest hitting capacity)."""
    counts = np.bincount(found, minlength=1)
    counts[0] = 0  # never hit
    return MissRatioCurve(stream.block_size, stream.prompt_tokens, int(stream.limits.sum()) * stream.block_size,
                          np.cumsum(counts))
