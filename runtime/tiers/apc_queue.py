"""APC's eviction queue: the idle blocks of one pool in last-access order, with the TTL boundary.

Three parallel columns, `q` (blocks), `stamps` (their last access) and `alive`
(a bytearray: 1 while the entry is its block's live one), read from `head` on;
entry i has the absolute number `base + i`.  Below `boundary` every
entry is expired (outside its TTL window: stamp + ttl <= now); time only grows,
so stamps are in order and the boundary only moves forward (a bisection).  A
block leaving early (a hit) leaves a dead entry behind (its `alive` byte
cleared), skipped when met and compacted away when dead entries outnumber live
ones, so every operation costs O(1) amortised.  Liveness over a range of
entries is a slice of `alive` (counted, searched and used as a mask in C), not
a look-up per entry: with a TTL, refreshed prefixes leave dead entries all the
time.  Every step over entries is a map over a whole run of them (in
C): a prompt at block 16 is thousands of blocks, entering, leaving and being
refreshed together.  Which entry is a block's live one is a numpy column by
block id (`entry`, -1: not queued), set and read a whole run at a time: a
dict, or a list of ints, allocates and frees an int object per block and
misses the cache on each.  `apc.ApcPool` owns one and is its only user.
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import compress, repeat
from operator import itemgetter


ONES = b"\x01"  # (an entry's `alive` byte while it is live)


def gather(column, indices) -> list:
    """`[column[i] for i in indices]` in C (`itemgetter` over the whole run: half a map's cost per item)."""
    if len(indices) > 1:
        return list(itemgetter(*indices)(column))
    return [column[indices[0]]] if indices else []


def picker(indices):
    """`gather` of `indices` from any column, made once for several columns (the itemgetter's argument tuple is a
    third of a gather's cost); it returns a tuple."""
    if len(indices) == 1:
        index = indices[0]
        return lambda column: (column[index],)
    return itemgetter(*indices) if indices else (lambda column: ())


np = None  # numpy, loaded by the first queue: a run without APC (most) does not import it (tests/test_startup.py)


def load_numpy():
    global np
    if np is None:
        import numpy
        np = numpy
    return np


def ids(blocks: list[int]):
    """A run of block ids as an index array (one conversion serves every column the run touches)."""
    return np.fromiter(blocks, np.int64, len(blocks))


def column(size: int):
    """A numpy int64 column of `size` zeros (by block id)."""
    return load_numpy().zeros(size, np.int64)


class IdleQueue:
    __slots__ = ("ttl_ns", "q", "stamps", "alive", "base", "head", "boundary", "expired", "live", "entry", "probe", "newest", "taken")

    def __init__(self, ttl_ns: int, capacity: int):
        self.ttl_ns = ttl_ns
        self.q: list = []  # blocks in access order
        self.stamps: list = []  # q's last accesses (non-decreasing)
        self.alive = bytearray()  # per entry of q: 1 while it is its block's live entry
        self.base = self.head = self.boundary = 0  # absolute numbers: first kept, first unread, first unexpired
        self.expired = 0  # live entries in [head, boundary)
        self.live = 0  # idle blocks
        self.entry = column(capacity) - 1  # per block id: the number of its live entry (-1: none)
        # every entry in [boundary, probe) is dead: an entry never comes back to life and new ones are appended,
        # so the search for the oldest protected live entry resumes here instead of rescanning the dead ones
        self.probe = 0
        # (the block list `refresh` last put at the newest end, and the queue's (end, head, live) then: while these
        # are unchanged nothing entered or left it since, so that list's blocks are still its newest entries; the
        # end only grows, and grows with every entry added, so no series of changes brings the three back)
        self.newest: tuple = (None, 0, 0, 0)
        self.taken: tuple = (None, None)  # (pop_expired's last list of several blocks, it as an index array)

    def _all_live(self) -> bool:
        """Is every unread entry live (no block left the queue early since the last compaction)?  Then the
        liveness of each needs no look-up: without hits, the usual case, the queue is a plain FIFO of blocks."""
        return self.base + len(self.q) - self.head == self.live

    def _is_live(self, start: int, stop: int) -> bytearray:
        """Per entry of [start, stop) (absolute numbers, from `head` on): is it its block's live entry (1 or 0)?"""
        base = self.base
        return self.alive[start - base:stop - base]

    def _kill(self, numbers) -> None:
        """The entries with these absolute numbers go dead."""
        view = np.frombuffer(self.alive, np.uint8)  # (writable, and gone before `alive` next changes size)
        view[numbers - self.base] = 0
        del view

    def enqueue(self, block: int, now: int) -> None:
        self.enqueue_all([block], now)

    def enqueue_all(self, blocks: list[int], now: int, index=None) -> None:
        """`enqueue` of each of `blocks`, in this order (a request frees its whole prefix at once); `index`: the
        blocks as an index array, when the caller made one already."""
        first = self.base + len(self.q)
        self.entry[ids(blocks) if index is None else index] = np.arange(first, first + len(blocks))
        self.q.extend(blocks)
        self.stamps.extend(repeat(now, len(blocks)))
        self.alive += ONES * len(blocks)
        self.live += len(blocks)

    def dequeue(self, block: int) -> None:
        """`block` leaves the queue from anywhere (a hit): its entry goes dead."""
        self.dequeue_all([block])

    def dequeue_all(self, blocks: list[int]) -> None:
        """Each of `blocks` (idle, distinct) leaves the queue: their entries go dead."""
        index = ids(blocks)
        numbers = self.entry[index]
        self.entry[index] = -1
        self._kill(numbers)
        self.live -= len(numbers)
        self.expired -= int(np.count_nonzero(numbers < self.boundary))
        self._maybe_compact()

    def first_protected(self) -> int | None:
        """The absolute number of the oldest live entry at or after the boundary (None: there is none), found
        by a search of `alive` in C from `probe` on (the entries before it are dead already)."""
        base = self.base
        found = self.alive.find(1, max(self.boundary, self.probe) - base)
        if found < 0:
            self.probe = base + len(self.q)
            return None
        self.probe = base + found
        return self.probe

    def _maybe_compact(self) -> None:
        if len(self.q) - (self.head - self.base) > 2 * self.live + 64:
            self.compact()

    def expire(self, now: int) -> None:
        end = self.base + len(self.q)
        if self.boundary == end:
            return
        if not self.ttl_ns:  # nothing is ever protected: every live entry is expired
            self.boundary, self.expired = end, self.live
            return
        base = self.base
        # immune until stamp + ttl: the first entry stamped after now - ttl and every newer one are protected
        boundary = base + bisect_right(self.stamps, now - self.ttl_ns, self.boundary - base)
        if boundary > self.boundary:
            self.expired += boundary - self.boundary if self._all_live() else \
                self.alive.count(1, self.boundary - base, boundary - base)
            self.boundary = boundary

    def compact(self) -> None:
        """Keep only live entries, renumbered after every number used so far (old numbers never match again)."""
        first, start = self.base + len(self.q), self.head - self.base
        live = self._is_live(self.head, first)
        blocks = list(compress(self.q[start:], live))
        self.stamps = list(compress(self.stamps[start:], live))
        self.alive = bytearray(ONES * len(blocks))
        self.entry[ids(blocks)] = np.arange(first, first + len(blocks))
        self.q, self.base, self.head = blocks, first, first
        self.boundary = self.probe = first + self.expired  # the expired live entries are the oldest ones

    def pop_expired(self, count: int, now: int) -> list[int]:
        """Up to `count` unprotected idle blocks from the oldest end, out of the queue."""
        self.expire(now)
        out: list[int] = []
        want = min(count, self.expired)
        if want and self._all_live():  # the next `want` entries are the oldest live ones
            start = self.head - self.base
            out = self.q[start:start + want]
            self.head += want
        while len(out) < want:
            # the next (want - taken) entries hold at most that many live ones: all of them are taken
            stop = min(self.head + want - len(out), self.boundary)
            start = self.head
            out.extend(compress(self.q[start - self.base:stop - self.base], self._is_live(start, stop)))
            self.head = stop
        if out:
            if len(out) == 1:  # (a decode's block, most calls: no index array for one block)
                self.entry[out[0]] = -1
            else:
                index = ids(out)
                self.entry[index] = -1
                self.taken = (out, index)  # (the pool's eviction reads its columns with it: apc_writers.py)
            self.live -= len(out)
            self.expired -= len(out)
        cut = self.head - self.base
        if cut > 64 and 2 * cut > len(self.q):
            del self.q[:cut]
            del self.stamps[:cut]
            del self.alive[:cut]
            self.base = self.head
        return out

    def refresh(self, blocks: list[int], now: int) -> None:
        """Idle `blocks` move to the queue's newest end, in this order, stamped `now` (`dequeue` then `enqueue`
        of each: a waiting request looks its whole prefix up at every pass)."""
        entry, q = self.entry, self.q
        end = self.base + len(q)
        first = end - len(blocks)
        unchanged = self.newest[0] is blocks and self.newest[1:] == (end, self.head, self.live)
        index = None if unchanged else ids(blocks)
        if first >= self.boundary and (unchanged or entry[blocks[0]] == first and
                                       bool((entry[index] == np.arange(first, end)).all())):
            # they are the newest entries already, in this order (the same request looked them up last time):
            # restamped in place, no dead entry left behind (stamps stay in order: `now` is the latest)
            self.stamps[first - self.base:] = repeat(now, len(blocks))
            self.newest = (blocks, end, self.head, self.live)
            return
        if index is None:
            index = ids(blocks)
        numbers = entry[index]
        self._kill(numbers)
        self.expired -= int(np.count_nonzero(numbers < self.boundary))
        first = self.base + len(q)
        entry[index] = np.arange(first, first + len(blocks))  # (the same blocks: their old numbers go)
        q.extend(blocks)
        self.stamps.extend(repeat(now, len(blocks)))
        self.alive += ONES * len(blocks)
        self._maybe_compact()
        self.newest = (blocks, self.base + len(self.q), self.head, self.live)
