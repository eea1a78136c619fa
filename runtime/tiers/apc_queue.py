"""APC's eviction queue: the idle blocks of one pool in last-access order, with the TTL boundary.

A list of (stamp, block) entries read from `head` on; entry i has the absolute
number `base + i`.  Below `boundary` every entry is expired (outside its TTL
window: stamp + ttl <= now); time only grows, so the boundary only moves
forward.  A block leaving early (a hit) leaves a dead entry behind, skipped
when met and compacted away when dead entries outnumber live ones, so every
operation costs O(1) amortised.  `apc.ApcPool` owns one and is its only user.
"""
from __future__ import annotations

from itertools import repeat


class IdleQueue:
    __slots__ = ("ttl_ns", "q", "base", "head", "boundary", "expired", "live", "entry")

    def __init__(self, ttl_ns: int = 0):
        self.ttl_ns = ttl_ns
        self.q: list = []  # (stamp, block) in access order
        self.base = self.head = self.boundary = 0  # absolute numbers: first kept, first unread, first unexpired
        self.expired = 0  # live entries in [head, boundary)
        self.live = 0  # idle blocks
        self.entry: dict[int, int] = {}  # idle block -> the absolute number of its live entry

    def enqueue(self, block: int, now: int) -> None:
        self.entry[block] = self.base + len(self.q)
        self.q.append((now, block))
        self.live += 1

    def enqueue_all(self, blocks: list[int], now: int) -> None:
        """`enqueue` of each of `blocks`, in this order (in C: a request frees its whole prefix at once)."""
        first = self.base + len(self.q)
        self.entry.update(zip(blocks, range(first, first + len(blocks))))
        self.q.extend(zip(repeat(now), blocks))
        self.live += len(blocks)

    def dequeue(self, block: int) -> None:
        """`block` leaves the queue from anywhere (a hit): its entry goes dead."""
        number = self.entry.pop(block)
        self.live -= 1
        if number < self.boundary:
            self.expired -= 1
        if len(self.q) - (self.head - self.base) > 2 * self.live + 64:
            self.compact()

    def expire(self, now: int) -> None:
        q, entry, base, limit = self.q, self.entry, self.base, now - self.ttl_ns
        boundary, end = self.boundary, self.base + len(self.q)
        while boundary < end:
            stamp, block = q[boundary - base]
            if stamp > limit:  # immune until stamp + ttl: this one and every newer one are protected
                break
            if entry.get(block) == boundary:
                self.expired += 1
            boundary += 1
        self.boundary = boundary

    def compact(self) -> None:
        """Keep only live entries, renumbered after every number used so far (old numbers never match again)."""
        entry, first = self.entry, self.base + len(self.q)
        start = self.head - self.base
        live = [(stamp, block) for offset, (stamp, block) in enumerate(self.q[start:], self.head)
                if entry.get(block) == offset]
        for i, (_, block) in enumerate(live):
            entry[block] = first + i
        self.q, self.base, self.head = live, first, first
        self.boundary = first + self.expired  # the expired live entries are the oldest ones

    def pop_expired(self, count: int, now: int) -> list[int]:
        """Up to `count` unprotected idle blocks from the oldest end, out of the queue."""
        self.expire(now)
        q, entry, out = self.q, self.entry, []
        while len(out) < count and self.expired:
            number = self.head
            block = q[number - self.base][1]
            self.head = number + 1
            if entry.get(block) == number:
                del entry[block]
                self.live -= 1
                self.expired -= 1
                out.append(block)
        if self.head - self.base > 64 and 2 * (self.head - self.base) > len(q):
            del q[:self.head - self.base]
            self.base = self.head
        return out

    def refresh(self, blocks: list[int], now: int) -> None:
        """Idle `blocks` move to the queue's newest end, in this order, stamped `now` (`dequeue` then `enqueue`
        of each, in C: a waiting request looks its whole prefix up at every pass)."""
        entry, q = self.entry, self.q
        end = self.base + len(q)
        first = end - len(blocks)
        if entry.get(blocks[0]) == first and first >= self.boundary and \
                list(map(entry.get, blocks)) == list(range(first, end)):
            # they are the newest entries already, in this order (the same request looked them up last time):
            # restamped in place, no dead entry left behind (stamps stay in order: `now` is the latest)
            q[first - self.base:] = zip(repeat(now), blocks)
            return
        numbers = list(map(entry.pop, blocks))
        self.expired -= sum(map(self.boundary.__gt__, numbers))
        first = self.base + len(self.q)
        self.q.extend(zip(repeat(now), blocks))
        entry.update(zip(blocks, range(first, first + len(blocks))))
        if len(self.q) - (self.head - self.base) > 2 * self.live + 64:
            self.compact()
