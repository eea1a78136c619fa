"""Belady eviction for G1: evict the unused block whose next use in input order is farthest away.

Offline optimal (an upper bound on what any eviction policy could reuse): it
needs the whole request list up front, so it is available for open-loop
ReplaySpec lists only.  "Now" is the input position of the newest admitted
request; a block's next use is the first later request whose full-block chain
contains its key (never: infinitely far; an unkeyed block is never reused).

Free blocks sit in a max-heap by next use.  A next use only grows as the
position advances, so entries whose next use the position has reached are
refreshed (through a second, min-heap) before each choice; stale entries are
recognised by a per-block stamp.  Ties go to the block freed first.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right

from .g1 import BlockPool

NEVER = float("inf")


class BeladyPool(BlockPool):
    __slots__ = ("uses", "position", "stamp", "farthest", "due", "seq")

    def __init__(self, capacity: int, uses: dict[int, list[int]]):
        super().__init__(capacity, True)
        self.uses = uses  # key -> sorted input positions of the requests whose chain holds it
        self.position = -1
        self.stamp: dict[int, int] = {}
        self.farthest: list = []  # (-next use, seq, block, stamp)
        self.due: list = []  # (next use, seq, block, stamp): entries to refresh once the position reaches them
        self.seq = 0

    def advance(self, position: int) -> None:
        if position > self.position:
            self.position = position

    def next_use(self, block: int) -> float:
        key = self.key_of[block]
        if key is None:
            return NEVER
        uses = self.uses.get(key, ())
        i = bisect_right(uses, self.position)
        return uses[i] if i < len(uses) else NEVER

    def _enter(self, block: int) -> None:
        stamp = self.stamp.get(block, 0) + 1
        self.stamp[block] = stamp
        self.seq += 1
        nxt = self.next_use(block)
        heapq.heappush(self.farthest, (-nxt, self.seq, block, stamp))
        if nxt != NEVER:
            heapq.heappush(self.due, (nxt, self.seq, block, stamp))

    def _valid(self, block: int, stamp: int) -> bool:
        return block in self.free and self.stamp.get(block) == stamp

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                self.stamp[b] = self.stamp.get(b, 0) + 1  # its heap entries go stale
        super().touch(blocks)

    def release(self, blocks: list[int]) -> None:
        ref = self.ref
        freed = [b for b in reversed(blocks) if ref[b] == 1]
        super().release(blocks)
        for b in freed:
            self._enter(b)

    def _victim(self) -> int:
        due = self.due
        while due and due[0][0] <= self.position:
            _, _, block, stamp = heapq.heappop(due)
            if self._valid(block, stamp):
                self._enter(block)
        while True:
            _, _, block, stamp = heapq.heappop(self.farthest)
            if self._valid(block, stamp):
                return block

    def allocate(self, count: int) -> list[int]:
        fresh = min(count, self.capacity - self.created)
        out = super().allocate(fresh) if fresh else []
        key_of, cached = self.key_of, self.cached
        for _ in range(count - fresh):
            block = self._victim()
            del self.free[block]
            self.stamp[block] += 1
            key = key_of[block]
            if key is not None:
                del cached[key]
                key_of[block] = None
                self.evictions += 1
                if self.events is not None:
                    self.events.append(("Removed", [key]))
            self.ref[block] = 1
            out.append(block)
        return out


def future_uses(specs, block_size: int) -> dict[int, list[int]]:
    """key -> input positions (ascending) of the requests whose full-block chain holds it."""
    uses: dict[int, list[int]] = {}
    for spec in specs:
        for key in set(spec.keys(block_size)):
            uses.setdefault(key, []).append(spec.index)
    for positions in uses.values():
        positions.sort()
    return uses
