"""Belady's bound on a block stream: the prefix hits of a cache that evicts the block needed farthest ahead.

The cache, its order and its ties are tiers/belady.py's BeladyPool fed one
request at a time (a request looks up its longest cached run of its first
`limit` keys, holds those blocks and its first `capacity` blocks, then frees
them all, last block first; a free block's next use is the next request whose
keys hold its key; ties go to the block freed first, "freed" counting the
refreshes that happen when a stale next use is looked at).  The pool does that
with a dict per key and two heaps, a Python step per block: 80 s and 1.8 GB on
the conversation trace at block 16.  Here the state is arrays of the
capacity's size (key, next use, freeing stamp per block; block per dense key)
and every step of a request is a few numpy calls over its blocks, or over the
pool when it must choose victims (one argpartition picks them all: nothing
changes between a request's evictions).  Next uses come from one sorted array
of (key, request) pairs, searched for many keys at once.
"""
from __future__ import annotations

import numpy as np

from .block_stream import BlockStream

STAMP_BITS = 40  # packed order: freeing stamps (two per block access at most) below 2**40, requests below 2**22


class NextUses:
    """The requests of a stream that hold each key: the first one after a position, for many keys at once."""

    def __init__(self, stream: BlockStream):
        self.span = stream.requests + 1
        self.never = stream.requests  # (after every request: the largest next use)
        pairs = stream.ids.astype(np.int64)  # (in place from here: 9 M pairs are 72 MB each copy)
        pairs *= self.span
        pairs += np.repeat(np.arange(stream.requests, dtype=np.int32), np.diff(stream.starts))
        pairs.sort()  # by key, then request (a sort and a mask: numpy's hashing unique took 60 s on 9 M pairs)
        self.pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])] if len(pairs) else pairs

    def after(self, keys: np.ndarray, position: int) -> np.ndarray:
        """Per key (-1: none), the first request after `position` that holds it; `never` where none does."""
        out = np.full(len(keys), self.never, dtype=np.int64)
        known = keys >= 0
        if known.any():
            probe = keys[known].astype(np.int64) * self.span + position
            at = np.searchsorted(self.pairs, probe, side="right")
            found = np.minimum(at, len(self.pairs) - 1)
            pair = self.pairs[found]
            same = (at < len(self.pairs)) & (pair // self.span == keys[known])
            out[known] = np.where(same, pair % self.span, self.never)
        return out


def prefix_hits(stream: BlockStream, capacity: int) -> np.ndarray:
    """Blocks hit by each request of `stream`, in order, with a Belady cache of `capacity` blocks."""
    capacity = int(capacity)
    hits_out = np.zeros(stream.requests, dtype=np.int64)
    if capacity <= 0 or not stream.requests:
        return hits_out
    # (a stream too long for the packed order takes a lexsort per choice instead: slower, the same victims)
    packed = stream.requests < 1 << (62 - STAMP_BITS) and 2 * len(stream.ids) + capacity < 1 << STAMP_BITS
    uses = NextUses(stream)
    ids, starts, limits = stream.ids, stream.starts, stream.limits
    block_of = np.full(max(1, stream.distinct), -1, dtype=np.int64)  # dense key -> its block, -1 if not cached
    key_of = np.full(capacity, -1, dtype=np.int64)
    next_use = np.full(capacity, uses.never, dtype=np.int64)
    stamp = np.zeros(capacity, dtype=np.int64)  # when the block was last freed (or refreshed): ties go to the oldest
    created, clock = 0, 0
    for position in range(stream.requests):
        keys = ids[starts[position]:starts[position + 1]].astype(np.int64)
        looked = block_of[keys[:int(limits[position])]]
        broken = np.flatnonzero(looked < 0)
        hits = int(broken[0]) if len(broken) else len(looked)
        held = looked[:hits]
        count = max(hits, min(len(keys), capacity)) - hits
        fresh = min(count, capacity - created)
        new = np.arange(created, created + fresh, dtype=np.int64)
        victims = count - fresh
        if victims:
            free = np.ones(created, dtype=bool)
            free[held] = False
            due = np.flatnonzero(free & (next_use[:created] <= position))
            if len(due):  # stale next uses are renewed in (next use, stamp) order, each a new stamp
                due = due[np.lexsort((stamp[due], next_use[due]))]
                stamp[due] = np.arange(clock + 1, clock + 1 + len(due))
                clock += len(due)
                next_use[due] = uses.after(key_of[due], position)
            candidates = np.flatnonzero(free)
            if packed:
                score = (next_use[candidates] << STAMP_BITS) - stamp[candidates]  # farthest first, then freed first
                if victims < len(candidates):
                    top = np.argpartition(score, len(candidates) - victims)[len(candidates) - victims:]
                    candidates, score = candidates[top], score[top]
                chosen = candidates[np.argsort(-score, kind="stable")]
            else:
                chosen = candidates[np.lexsort((stamp[candidates], -next_use[candidates]))][:victims]
            lost = key_of[chosen]
            block_of[lost[lost >= 0]] = -1
            key_of[chosen] = -1
            new = np.concatenate([new, chosen])
        created += fresh
        if count:
            run = keys[hits:hits + count]
            open_ = np.flatnonzero(block_of[run] < 0)  # a key cached already keeps its block
            if len(open_):
                # (a key twice in the run: written last to first, so its first block is the one that stays)
                block_of[run[open_[::-1]]] = new[open_[::-1]]
                stored = open_[block_of[run[open_]] == new[open_]]
                key_of[new[stored]] = run[stored]
        freed = np.concatenate([held, new])[::-1]
        stamp[freed] = np.arange(clock + 1, clock + 1 + len(freed))
        clock += len(freed)
        next_use[freed] = uses.after(key_of[freed], position)
        hits_out[position] = hits
    return hits_out
