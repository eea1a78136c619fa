"""A copy the scheduler asks of the replay: what moves (keys, G1 blocks), for whom, and over which tier link.

Kinds: "store" (G1 -> G2), "load" (G2 -> G1), "read" (G3 -> G2), "write"
(G2 -> G3), "pull" (a peer's G2 -> G2, see peer_fetch.py), and the P/D kinds
"handoff" and "to_prefill" (see handoff.py).  Copies into G2 that a request
waits for (G3 reads, KVCR pulls) share the landing and the no-progress rule
below.
"""
from __future__ import annotations

# Rounds of copies into G2 (G3 reads, KVCR pulls) a rank may land without a G2 -> G1 load starting before the
# next request that would copy recomputes instead: copies of a prefix longer than G2 can evict each other forever.
BYPASS_ROUNDS = 1024


class Job:
    __slots__ = ("kind", "rank", "request", "keys", "blocks", "hold")

    def __init__(self, kind: str, rank, request, keys: list, blocks: list[int], hold: bool = False):
        self.kind, self.rank, self.request, self.keys, self.blocks, self.hold = kind, rank, request, keys, blocks, hold


def out_of_rounds(rank) -> bool:
    """Has the rank landed BYPASS_ROUNDS copies into G2 since its last G2 -> G1 load?  Then the request at hand
    recomputes instead of copying, and the count starts again."""
    if rank.fill_rounds < BYPASS_ROUNDS:
        return False
    rank.fill_rounds = 0
    return True


def filled(rank, request, keys: list, source: str) -> None:
    """A copy into G2 from `source` ("g3", "peer") landed: its blocks are ready there, and the request that
    waited for it is looked up again."""
    rank.host.stored(keys, source=source)
    request.loading = False
    rank.fill_rounds += 1
