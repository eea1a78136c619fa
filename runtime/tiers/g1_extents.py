"""vLLM's G1 pool kept as extents: runs of block ids that share one reference count and one place in the free queue.

`ExtentPool` behaves as `g1.BlockPool` wherever that is observable: the same
keys are cached, hit, evicted (in the same order, with the same KV events) and
kept as copies, and the free counts agree after every call.  What differs is
the blocks' names.  A block's id only names it while it holds a key or a
request holds it; empty memory (never used, or freed without a key) is a count,
and every allocation hands out a new range of ids (`_new`), so that a
request's blocks are a few ranges and each transition costs one step per range
(an extent), not per block: at block 16 a 512-token trace block is 32 engine
blocks, moved together almost always (issue 20; facts §56, §64, §72).

Ids are named by slab and offset (g1_extent_ids.py).  An extent is split only
where behaviour splits it: a hit or a release covering part of it, a
registration's boundary, an eviction taking the top of a free extent (a release
queues a request's blocks last block first, so the queue's head is always an
extent's top).  The free queue holds the keyed free extents, oldest first, as a
linked list (a split keeps its parts' place).

Only the plain G1 path uses it (`for_rank`): the callers must hand back lists
built from the ids this pool gave out, concatenated or sliced, never reversed
(a reversed list is still correct, one extent per block).
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import repeat, takewhile

from .g1 import NOT_NONE, BlockPool, consume
from .g1_extent_ids import MASK, SLAB, Extent, find, runs

class ExtentPool:
    __slots__ = ("capacity", "caching", "cached", "copies", "events", "evictions", "copying", "awaited",
                 "_slabs", "_slab", "_single", "_empty", "_queued", "_head")
    proactive_evictions = 0
    ttl_skipped = 0
    on_evict = None
    at = None
    protected = BlockPool.protected
    advance = BlockPool.advance
    held_tokens = BlockPool.held_tokens
    can_allocate = BlockPool.can_allocate
    _last_copy = BlockPool._last_copy
    keep_copies = BlockPool.keep_copies

    def __init__(self, capacity: int, caching: bool = True):
        self.capacity = capacity
        self.caching = caching
        self.cached: dict[int, int] = {}  # key -> the id of the block holding it
        self.copies: dict[int, list[int]] | None = None  # as BlockPool's (keep_copies)
        self.events: list | None = None
        self.evictions = 0
        self.copying: set[int] = set()  # (no G2 copies on this path: always empty, read by the macro stepper)
        self.awaited: set[int] = set()
        self._slabs: dict[int, tuple[list[int], list[Extent]]] = {}  # slab -> (its extents' first ids, extents)
        self._slab = 0
        self._single = -1  # the next id of the slab of single blocks (-1: none yet)
        self._empty = capacity  # free blocks holding no key (BlockPool's never-used ones and keyless queue head)
        self._queued = 0  # free blocks holding a key, in the queue
        head = self._head = Extent(0, 0, 0, None)  # the queue's sentinel: head.next is evicted first
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
        if not self.caching:
            return []
        return list(takewhile(NOT_NONE, map(self.cached.get, keys[:limit])))

    def free_among(self, blocks: list[int]) -> int:
        return sum(m for extent, _, _, m in runs(self._slabs, blocks, 0, len(blocks)) if not extent.ref)

    # ------------------------------------------------------------------ extents
    def _split(self, extent: Extent, at: int) -> Extent:
        """Cut `extent` at id `at`; returns its upper part (queued just before it: a queued extent's top goes first)."""
        cut = at - extent.lo
        upper = Extent(at, extent.hi, extent.ref, extent.keys[cut:] if extent.keys is not None else None)
        if extent.keys is not None:
            del extent.keys[cut:]
        extent.hi = at
        starts, extents = self._slabs[at >> SLAB]
        i = bisect_right(starts, at)
        starts.insert(i, at)
        extents.insert(i, upper)
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
        slab = extent.lo >> SLAB
        starts, extents = self._slabs[slab]
        i = bisect_right(starts, extent.lo) - 1
        del starts[i], extents[i]
        if not starts:
            del self._slabs[slab]

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
        """`count` new ids, one extent held once, keyless (one block: the next id of the current slab of single
        blocks, a decode's, so that they cost no slab each)."""
        if count == 1:
            x = self._single
            if x & MASK < MASK and x >> SLAB in self._slabs:
                starts, extents = self._slabs[x >> SLAB]
                starts.append(x)
                extents.append(Extent(x, x + 1, 1, None))
                self._single = x + 1
                return [x]
            self._single = (self._slab << SLAB) + 1
        elif not count:
            return []
        base = self._slab << SLAB
        self._slabs[self._slab] = ([base], [Extent(base, base + count, 1, None)])
        self._slab += 1
        return list(range(base, base + count))

    # ------------------------------------------------------------------ transitions
    def touch(self, blocks: list[int]) -> None:
        for extent, x, _, m in runs(self._slabs, blocks, 0, len(blocks)):
            extent = self._exact(extent, x, m)
            if not extent.ref:
                self._unlink(extent)
                self._queued -= m
            extent.ref += 1

    def allocate(self, count: int) -> list[int]:
        """As BlockPool's: empty memory first, then the queue's head, evicting its keys."""
        rest = count - self._empty
        if rest <= 0:
            self._empty -= count
        else:
            self._empty = 0
            self._evict(rest)
        return self._new(count)

    def _evict(self, rest: int) -> None:
        head, cached, copies = self._head, self.cached, self.copies
        evicted = [] if self.events is not None or copies else None
        while rest:
            extent = head.next
            size = extent.hi - extent.lo
            m = size if size <= rest else rest
            gone = extent.keys[size - m:]
            if m == size:
                self._unlink(extent)
                self._drop(extent)
            else:
                del extent.keys[size - m:]
                extent.hi -= m
            rest -= m
            self._queued -= m
            gone.reverse()  # (the top block is taken first)
            if copies:
                first = extent.lo + size - 1
                for i, key in enumerate(gone):
                    if self._last_copy(key, first - i):
                        del cached[key]
                        evicted.append(key)
            else:
                consume(map(cached.__delitem__, gone))
                if evicted is not None:
                    evicted.extend(gone)
                else:
                    self.evictions += m
        if evicted is not None:
            self.evictions += len(evicted)
            if self.events is not None and evicted:
                self.events.append(("Removed", evicted))

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """As BlockPool's: blocks[start:stop] become discoverable by keys[start:stop]; a key cached already keeps
        its block (the new one becomes a copy when copies are kept)."""
        if not self.caching or start >= stop:
            return
        cached, copies = self.cached, self.copies
        if stop - start == 1 and self.events is None:  # (one block, a decode's: the usual call, no runs built)
            x, key = blocks[start], keys[start]
            extent = find(self._slabs, x)
            if extent.hi - extent.lo == 1 and extent.keys is None:
                if key not in cached:
                    cached[key] = x
                    extent.keys = [key]
                elif copies is not None:
                    copies.setdefault(key, []).append(x)
                    extent.keys = [key]
                return
        stored = [] if self.events is not None else None
        for extent, x, p, m in runs(self._slabs, blocks, start, stop):
            extent = self._exact(extent, x, m)
            run = keys[p:p + m]
            if extent.keys is None and cached.keys().isdisjoint(run):
                before = len(cached)
                cached.update(zip(run, range(x, x + m)))
                if len(cached) - before == m:  # (else the run repeats a key: undone, and stored key by key)
                    extent.keys = run
                    if stored is not None:
                        stored.extend(run)
                    continue
                consume(map(cached.pop, run, repeat(None)))
            held = extent.keys if extent.keys is not None else [None] * m
            for i, key in enumerate(run):
                if key not in cached:
                    cached[key] = x + i
                    held[i] = key
                    if stored is not None:
                        stored.append(key)
                elif copies is not None and held[i] is None:
                    copies.setdefault(key, []).append(x + i)
                    held[i] = key
            extent.keys = held if held.count(None) < m else None
        if stored:
            self.events.append(("Stored", stored))

    register_restored = register_run

    def release(self, blocks: list[int]) -> None:
        """As BlockPool's: freed blocks with a key join the queue's tail last block first; those without one
        become empty memory (BlockPool's queue head)."""
        caching = self.caching
        for extent, x, _, m in reversed(runs(self._slabs, blocks, 0, len(blocks))):
            extent = self._exact(extent, x, m)
            extent.ref -= 1
            if extent.ref:
                continue
            keys = extent.keys
            if not caching or keys is None:
                self._empty += m
                self._drop(extent)
            elif None not in keys:
                self._enqueue(extent)
            else:
                self._free_mixed(extent)

    def _free_mixed(self, extent: Extent) -> None:
        """Free an extent some of whose blocks hold no key: cut where keyedness changes, top part first."""
        keys, lo = extent.keys, extent.lo
        cuts = [lo + i for i in range(1, len(keys)) if (keys[i] is None) != (keys[i - 1] is None)]
        parts = [extent] + [self._split(extent, at) for at in reversed(cuts)][::-1]
        for part in reversed(parts):  # (highest ids first: the release order)
            if part.keys[0] is None:
                self._empty += part.hi - part.lo
                self._drop(part)
            else:
                self._enqueue(part)


def for_rank(rank) -> None:
    """Give `rank` an ExtentPool when nothing but the plain G1 path reads its pool: a vLLM RunPool with no tiers
    below it, no peer fetch, no P/D handoff, no state blocks or snapshots, no speculation (their callers name
    blocks one by one, reverse lists or read per-block state)."""
    from .g1_runs import RunPool
    from .state_snapshots import WHOLE_BLOCKS
    pool = rank.pool
    if type(pool) is not RunPool or rank.chain.tiers or rank.chain.kvcr is not None or rank.handoff is not None \
            or rank.state_blocks or rank.snapshots is not WHOLE_BLOCKS or rank.speculation is not None \
            or rank.role != "aggregated":
        return
    fast = ExtentPool(pool.capacity, pool.caching)
    if pool.copies is not None:
        fast.keep_copies()
    rank.pool = fast
