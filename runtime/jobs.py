"""A copy the scheduler asks of the replay: what moves (keys, G1 blocks), for whom, and over which tier link.

Kinds: "store" (G1 -> G2), "load" (G2 -> G1), "read" (G3 -> G2), "write"
(G2 -> G3), and the P/D kinds "handoff" and "to_prefill" (see handoff.py).
"""
from __future__ import annotations

# Rounds of copies into G2 (G3 reads, KVCR pulls) a rank may land without a G2 -> G1 load starting before the
# next request that would copy recomputes instead: copies of a prefix longer than G2 can evict each other forever.
BYPASS_ROUNDS = 1024


class Job:
    __slots__ = ("kind", "rank", "request", "keys", "blocks", "hold")

    def __init__(self, kind: str, rank, request, keys: list, blocks: list[int], hold: bool = False):
        self.kind, self.rank, self.request, self.keys, self.blocks, self.hold = kind, rank, request, keys, blocks, hold
