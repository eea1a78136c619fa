"""A copy a tier asks of the replay: what moves (keys, G1 blocks), for whom, over which link of which tier.

A `Copy` moves keys into a tier (`way="write"`: G1 -> G2 stores, background
writes to the next tier) or out of one (`way="read"`: loads into G1, reads
into the tier above); `landed(rank, copy, now)` is the function of the
tier's owner that applies it when its bytes have moved.  Copies into the first tier that a
request waits for (reads from a deeper tier, KVCR pulls) share the landing
(`filled`) and the no-progress rule below.
"""
from __future__ import annotations

# Rounds of copies into the first tier (reads from deeper tiers, KVCR pulls) a rank may land without a load into
# G1 starting before the next request that would copy recomputes instead: copies of a prefix longer than the tier
# can evict each other forever.
BYPASS_ROUNDS = 1024


class Copy:
    __slots__ = ("tier", "way", "landed", "rank", "request", "keys", "blocks", "hold", "into_g1")

    def __init__(self, tier, way: str, landed, rank, request, keys: list, blocks: list[int] = (),
                 hold: bool = False, into_g1: bool = False):
        self.tier, self.way, self.landed = tier, way, landed
        self.rank, self.request, self.keys, self.blocks = rank, request, keys, blocks
        self.hold = hold  # simple_cpu: the G1 blocks are freed when the copy lands
        self.into_g1 = into_g1  # a load into G1 blocks, which waits for their own copies out to land


def out_of_rounds(chain) -> bool:
    """Has the rank landed BYPASS_ROUNDS copies into its first tier since its last load into G1?  Then the
    request at hand recomputes instead of copying, and the count starts again."""
    if chain.copies_in_since_load < BYPASS_ROUNDS:
        return False
    chain.copies_in_since_load = 0
    return True


def filled(chain, request, keys: list, source: str) -> None:
    """A copy into the first tier from `source` ("g3", "peer") landed: its blocks are ready there, and the
    request that waited for it is looked up again."""
    chain.top.landed(keys, source=source)
    request.tier.brought.update(dict.fromkeys(keys, source))  # (where its restore's blocks came from: the report)
    request.tier.loading = False
    chain.copies_in_since_load += 1
