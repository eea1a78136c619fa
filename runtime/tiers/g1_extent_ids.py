"""How g1_extents.ExtentPool names blocks: an id is (its slab << SLAB) + its offset, a slab being a range of ids
handed out by one allocation and grown by the request's later ones (`allocate_after`); a slab's live extents are
kept sorted by their first id, so the extent of any id is one dict lookup and one bisect, and a caller's list of
ids is read as runs inside extents."""
from __future__ import annotations

from bisect import bisect_right
from operator import eq

SLAB = 32  # bits of an id's offset inside its slab (a slab never reaches 2**32 blocks)
MASK = (1 << SLAB) - 1
# a slab: [its extents' first ids, its extents, the next id never handed out, the ids handed out (the int objects
# given to the callers: their lists are checked against these by identity, a few instructions an id)]
STARTS, EXTENTS, TOP, IDS = range(4)


class Extent:
    """Ids lo..hi-1 of one slab, with `ref` holders each.  The first `keyed` of them hold keys first,
    first + step, ... (step +1 or -1), the rest none; `prev`/`next` are its neighbours in the free queue while it
    is queued (else None)."""

    __slots__ = ("lo", "hi", "ref", "first", "step", "keyed", "prev", "next")

    def __init__(self, lo: int, hi: int, ref: int):
        self.lo, self.hi, self.ref = lo, hi, ref
        self.first = self.keyed = 0
        self.step = 1
        self.prev = self.next = None


def find(slabs, block: int) -> Extent:
    slab = slabs[block >> SLAB]
    return slab[EXTENTS][bisect_right(slab[STARTS], block) - 1]


def runs(slabs, blocks: list[int], i: int, j: int) -> list[tuple]:
    """blocks[i:j] as (extent, first id, position, length) runs, each inside one extent."""
    out = []
    while i < j:
        x = blocks[i]
        slab = slabs[x >> SLAB]
        extent = slab[EXTENTS][bisect_right(slab[STARTS], x) - 1]
        m = min(j - i, extent.hi - x)
        if m > 1:
            at = x & MASK
            ids = slab[IDS][at:at + m]
            if blocks[i + m - 1] != x + m - 1 or blocks[i:i + m] != ids:
                m = list(map(eq, blocks[i:i + m], ids)).index(False)  # (the consecutive ids' prefix, in C)
        out.append((extent, x, i, m))
        i += m
    return out
