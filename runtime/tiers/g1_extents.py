"""vLLM's G1 pool kept as extents: ranges of block ids with one reference count, one range of keys and one place in
the free queue, and a cached map of key ranges (g1_key_groups.KeyGroups).

`ExtentPool` behaves as `g1.BlockPool` wherever that is observable: the same
keys are cached, hit, evicted (in the same order, with the same KV events) and
kept as copies, and the free counts agree after every call.  What differs is
the blocks' names.  A block's id only names it while it holds a key or a
request holds it; empty memory (never used, or freed without a key) is a count.
Every allocation hands out a new range of ids (a slab, g1_extent_ids.py), and
`allocate_after` (a request's next block: a decode crossing a block boundary, a
prefill's next chunk) extends the request's last extent when the next id is
unused, so that a request's blocks are one range of ids whose keys are two
ranges (its prompt's trace keys ascending, its output keys descending).  Each
transition then costs one step per extent, and each registration or eviction
one step per aligned group of keys, not one per block: at block 16 a 512-token
trace block is 32 engine blocks, moved together almost always (issue 20;
facts §56, §64, §72, §83).

An extent holds keys first, first + step, ... in its lowest `keyed` ids and none
above them; it is split only where behaviour splits it: a hit or a release
covering part of it, a registration whose keys do not continue its range, an
eviction taking the top of a free extent (a release queues a request's blocks
last block first, so the queue's head is always an extent's top).  The free
queue holds the keyed free extents, oldest first, as a linked list.

Only the plain G1 path with trace keys uses it (`for_rank`): the callers must
hand back lists built from the ids this pool gave out, concatenated or sliced.
"""
from __future__ import annotations

from bisect import bisect_right

from .g1 import BlockPool
from .g1_extent_ids import EXTENTS, IDS, MASK, SLAB, STARTS, TOP, Extent, find, runs
from .g1_extent_keys import ExtentKeys
from .g1_key_groups import KeyGroups
from .g1_runs import RunPool
from .resume_policy import WHOLE_BLOCKS


class ExtentPool(ExtentKeys):
    __slots__ = ("capacity", "caching", "cached", "copies", "events", "evictions", "copying", "awaited",
                 "_slabs", "_slab", "_single", "_empty", "_queued", "_head")
    proactive_evictions = 0
    ttl_skipped = 0
    on_evict = None
    at = None
    extends = True
    protected = BlockPool.protected
    advance = BlockPool.advance
    held_tokens = BlockPool.held_tokens
    can_allocate = BlockPool.can_allocate
    keep_copies = BlockPool.keep_copies
    freeing_while_copied = BlockPool.freeing_while_copied
    end_copy = BlockPool.end_copy

    def __init__(self, capacity: int, caching: bool = True):
        self.capacity = capacity
        self.caching = caching
        self.cached = KeyGroups()  # key -> the id of the block holding it
        self.copies: dict[int, list[int]] | None = None  # as BlockPool's (keep_copies): key -> other copies' ids
        self.events: list | None = None
        self.evictions = 0
        self.copying: set[int] = set()  # (no G2 copies on this path: always empty, read by the macro stepper)
        self.awaited: set[int] = set()
        self._slabs: dict[int, list] = {}  # slab -> [its extents' first ids, its extents, its next unused id]
        self._slab = 0  # the next slab's number
        self._single = -1  # the slab single-block allocations share (-1: none yet)
        self._empty = capacity  # free blocks holding no key (BlockPool's never-used ones and keyless queue head)
        self._queued = 0  # free blocks holding a key, in the queue
        head = self._head = Extent(0, 0, 0)  # the queue's sentinel: head.next is evicted first
        head.prev = head.next = head

    # ------------------------------------------------------------------ queries
    @property
    def free_count(self) -> int:
        return self._empty + self._queued

    @property
    def used_count(self) -> int:
        return self.capacity - self.free_count

    held_blocks = used_count

    @property
    def cached_blocks(self) -> int:
        return len(self.cached)

    def match(self, keys, limit: int) -> list[int]:
        return self.cached.match(keys, limit) if self.caching else []

    def free_among(self, blocks: list[int]) -> int:
        return sum(m for extent, _, _, m in runs(self._slabs, blocks, 0, len(blocks)) if not extent.ref)

    # ------------------------------------------------------------------ extents
    def _split(self, extent: Extent, at: int) -> Extent:
        """Cut `extent` at id `at`; returns its upper part (queued just before it: a queued extent's top goes first)."""
        cut = at - extent.lo
        upper = Extent(at, extent.hi, extent.ref)
        if extent.keyed > cut:
            upper.first, upper.step, upper.keyed = extent.first + extent.step * cut, extent.step, extent.keyed - cut
            extent.keyed = cut
        extent.hi = at
        slab = self._slabs[at >> SLAB]
        i = bisect_right(slab[STARTS], at)
        slab[STARTS].insert(i, at)
        slab[EXTENTS].insert(i, upper)
        before = extent.prev
        if before is not None:
            before.next = upper
            upper.prev, upper.next = before, extent
            extent.prev = upper
        return upper

    def _exact(self, extent: Extent, x: int, m: int) -> Extent:
        """The extent of exactly ids x..x+m-1, split out of `extent` (found again if an earlier split moved it)."""
        if not extent.lo <= x < extent.hi:
            extent = find(self._slabs, x)
        if extent.lo < x:
            extent = self._split(extent, x)
        if x + m < extent.hi:
            self._split(extent, x + m)
        return extent

    def _drop(self, extent: Extent) -> None:
        """Forget an extent whose blocks became empty memory (their ids are never named again)."""
        number = extent.lo >> SLAB
        slab = self._slabs[number]
        i = bisect_right(slab[STARTS], extent.lo) - 1
        del slab[STARTS][i], slab[EXTENTS][i]
        if not slab[STARTS]:
            del self._slabs[number]

    def _unlink(self, extent: Extent) -> None:
        extent.prev.next = extent.next
        extent.next.prev = extent.prev
        extent.prev = extent.next = None

    def _enqueue(self, extent: Extent) -> None:
        head = self._head
        last = head.prev
        last.next = extent
        extent.prev, extent.next = last, head
        head.prev = extent
        self._queued += extent.hi - extent.lo

    def _new(self, count: int) -> list[int]:
        """`count` new ids, one extent held once, keyless (one block: the next id of the slab single blocks share,
        so that they cost no slab each)."""
        if count == 1:
            slab = self._slabs.get(self._single)
            if slab is not None and slab[TOP] & MASK < MASK:
                x = slab[TOP]
                slab[STARTS].append(x)
                slab[EXTENTS].append(Extent(x, x + 1, 1))
                slab[TOP] = x + 1
                slab[IDS].append(x)
                return [x]
            self._single = self._slab
        elif not count:
            return []
        base = self._slab << SLAB
        ids = list(range(base, base + count))
        self._slabs[self._slab] = [[base], [Extent(base, base + count, 1)], base + count, ids]
        self._slab += 1
        return ids[:]

    # ------------------------------------------------------------------ transitions
    def touch(self, blocks: list[int]) -> None:
        for extent, x, _, m in runs(self._slabs, blocks, 0, len(blocks)):
            extent = self._exact(extent, x, m)
            if not extent.ref:
                self._unlink(extent)
                self._queued -= m
            extent.ref += 1

    def _make_room(self, count: int) -> None:
        """Take `count` free blocks: empty memory first, then the queue's head (evicting its keys)."""
        rest = count - self._empty
        if rest <= 0:
            self._empty -= count
        else:
            self._empty = 0
            self._evict(rest)

    def allocate(self, count: int) -> list[int]:
        """As BlockPool's: empty memory first, then the queue's head, evicting its keys."""
        self._make_room(count)
        return self._new(count)

    def allocate_after(self, block: int, count: int = 1) -> list[int]:
        """As `allocate(count)`, for the request whose last block is `block`: the ids after it when no one else
        holds it and they were never handed out, so that the request's blocks stay one range."""
        if count == 1 and not self._empty and self.events is None and not self.copies:
            extent = self._head.next  # (a decode's block evicts one key, the head extent's top: inline)
            size = extent.hi - extent.lo
            if size == 1:
                self._unlink(extent)
                self._drop(extent)
            else:
                extent.hi -= 1
                extent.keyed -= 1
            self._queued -= 1
            self.evictions += 1
            self.cached.remove_one(extent.first + extent.step * (size - 1))
        else:
            self._make_room(count)
        slab = self._slabs[block >> SLAB]
        if slab[TOP] == block + 1 and (block + count) >> SLAB == block >> SLAB:
            extent = slab[EXTENTS][-1]  # (the slab's highest extent holds its last id handed out)
            if extent.ref == 1:
                extent.hi += count
                slab[TOP] += count
                ids = slab[IDS]
                if count == 1:
                    ids.append(block + 1)
                    return [ids[-1]]
                ids.extend(range(block + 1, block + 1 + count))
                return ids[-count:]
        return self._new(count)

    def _evict(self, rest: int) -> None:
        """Evict `rest` blocks off the queue's head, each extent's top first (every queued block holds a key)."""
        head, cached, copies, events = self._head, self.cached, self.copies, self.events
        evicted = [] if events is not None or copies else None
        while rest:
            extent = head.next
            size = extent.hi - extent.lo
            m = size if size <= rest else rest
            keep = size - m
            step = extent.step
            low = extent.first + step * keep  # the key of the lowest block evicted
            top = low + step * (m - 1)  # the key of the top one, evicted first
            if m == size:
                self._unlink(extent)
                self._drop(extent)
            else:
                extent.hi -= m
                extent.keyed = keep
            rest -= m
            self._queued -= m
            if copies:
                self._evict_copies(extent.lo + keep, m, low, step, evicted)
                continue
            if step > 0:
                cached.remove(low, top + 1)
            else:
                cached.remove(top, low + 1)
            self.evictions += m
            if evicted is not None:
                evicted.extend(range(top, low - step, -step))
        if events is not None and evicted:
            events.append(("Removed", evicted))

    def release(self, blocks: list[int]) -> None:
        """As BlockPool's: freed blocks with a key join the queue's tail last block first; those without one
        become empty memory (BlockPool's queue head)."""
        caching = self.caching
        for extent, x, _, m in reversed(runs(self._slabs, blocks, 0, len(blocks))):
            extent = self._exact(extent, x, m)
            extent.ref -= 1
            if extent.ref:
                continue
            keyed = extent.keyed if caching else 0
            if not keyed:
                self._empty += m
                self._drop(extent)
                continue
            if keyed < m:  # (its keyless top ids are empty memory)
                self._empty += m - keyed
                self._drop(self._split(extent, extent.lo + keyed))
            self._enqueue(extent)


MIN_PER = 32  # fewest engine blocks a trace block for which extents pay (facts §83: block 16 -14 %, 64 +10 %, 512 +20 %)


def for_rank(rank, per: int) -> None:
    """Give `rank` an ExtentPool when nothing but the plain G1 path reads its pool and its keys run long: `per` (a
    trace whose blocks hold `per` whole engine blocks each, so block j of trace id h has key h * per + j; 0: other
    keys) at least MIN_PER.  The rank is a vLLM RunPool with no tiers below it, no peer fetch, no P/D handoff, no
    state blocks or snapshots, no speculation (their callers name blocks one by one, reverse lists or read per-block
    state)."""
    pool = rank.pool
    if per < MIN_PER or type(pool) is not RunPool or rank.chain.tiers or rank.chain.kvcr is not None \
            or rank.handoff is not None or rank.state_blocks or rank.snapshots is not WHOLE_BLOCKS \
            or rank.speculation is not None or rank.role != "aggregated":
        return
    fast = ExtentPool(pool.capacity, pool.caching)
    if pool.copies is not None:
        fast.keep_copies()
    rank.pool = fast
