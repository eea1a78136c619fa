"""Belady's prefix hits on a stream of requests, one at a time: the bound beside the LRU curve, and the test
that tells a policy miss from a capacity miss.

Each request looks up its longest cached run of lookup keys, then holds its
blocks (at most `capacity` of them, its first ones) and releases them, as the
ideal LRU of mrc.py does; eviction is tiers/belady.py's BeladyPool (farthest
next use in this stream first), with "next use" the next request of the
stream whose keys hold the key.  Nothing else is resident, nothing is pinned:
an engine's running requests and preemptions are what set it apart.
"""
from __future__ import annotations

from ..tiers.belady import BeladyPool


def prefix_hits(items: list[tuple[list, int]], capacity: int) -> list[int]:
    """Blocks hit by each (keys, limit) of `items`, in order, with a Belady cache of `capacity` blocks."""
    uses: dict = {}
    for position, (keys, _) in enumerate(items):
        for key in dict.fromkeys(keys):
            uses.setdefault(key, []).append(position)
    pool = BeladyPool(capacity, uses)
    out = []
    for position, (keys, limit) in enumerate(items):
        pool.advance(position)
        hits = pool.match(keys, limit)
        pool.touch(hits)
        take = max(len(hits), min(len(keys), capacity))
        blocks = hits + pool.allocate(take - len(hits))
        pool.register_run(blocks, keys, len(hits), take)
        pool.release(blocks)
        out.append(len(hits))
    return out


def hit_tokens(items: list[tuple[list, int]], capacity: int, block_size: int) -> int:
    return sum(prefix_hits(items, capacity)) * block_size
