"""How g1_extents.ExtentPool names blocks: an id is (its slab << SLAB) + its offset, a slab being the range of ids
one allocation handed out; a slab's live extents are kept sorted by their first id, so the extent of any id is one
dict lookup and one bisect, and a caller's list of ids is read as runs inside extents."""
from __future__ import annotations

from bisect import bisect_right

SLAB = 32  # bits of an id's offset inside its slab (an allocation never reaches 2**32 blocks)
MASK = (1 << SLAB) - 1


class Extent:
    """Ids lo..hi-1 of one slab: `ref` holders each, `keys` each block's key (None: all keyless; an entry None:
    that block keyless); `prev`/`next` its neighbours in the free queue while it is queued (else None)."""

    __slots__ = ("lo", "hi", "ref", "keys", "prev", "next")

    def __init__(self, lo: int, hi: int, ref: int, keys):
        self.lo, self.hi, self.ref, self.keys = lo, hi, ref, keys
        self.prev = self.next = None


def find(slabs, block: int) -> Extent:
    starts, extents = slabs[block >> SLAB]
    return extents[bisect_right(starts, block) - 1]

def runs(slabs, blocks: list[int], i: int, j: int) -> list[tuple]:
    """blocks[i:j] as (extent, first id, position, length) runs, each inside one extent."""
    out = []
    while i < j:
        x = blocks[i]
        starts, extents = slabs[x >> SLAB]
        extent = extents[bisect_right(starts, x) - 1]
        m = min(j - i, extent.hi - x)
        if m > 1 and (blocks[i + m - 1] != x + m - 1 or blocks[i:i + m] != list(range(x, x + m))):
            good, bad = 1, m  # (the longest prefix that is consecutive ids: rare, so bisected in C compares)
            while bad - good > 1:
                mid = (good + bad) // 2
                if blocks[i:i + mid] == list(range(x, x + mid)):
                    good = mid
                else:
                    bad = mid
            m = good
        out.append((extent, x, i, m))
        i += m
    return out
