"""APC's free memory: blocks that hold nothing (freed without a key, or evicted), first freed first.

G1's `BlockPool.free` is an OrderedDict, since vLLM's free queue also holds
cached blocks that hits take out of its middle.  APC's free blocks hold no key,
so nothing finds them: they leave from the front only (an allocation), a run
at a time, and join at the back a run at a time (an eviction batch).  A list
read from `head` on does both as a slice, with no per-block hashing (an
OrderedDict insert and delete cost about 150 ns per block, and the monitor's
victims all pass through here).  A block is never here twice.  `apc.ApcPool`
owns one; macro.py and the timeline read it as G1's (`len`, iteration).
"""
from __future__ import annotations

from itertools import islice


class FreeBlocks:
    __slots__ = ("q", "head")

    def __init__(self):
        self.q: list[int] = []
        self.head = 0  # q[:head] has left

    def __len__(self) -> int:
        return len(self.q) - self.head

    def __bool__(self) -> bool:
        return len(self.q) > self.head

    def __iter__(self):
        return islice(self.q, self.head, None)

    def __contains__(self, block: int) -> bool:
        try:  # (not on a hot path: a free block holds no key, so no hit finds it)
            self.q.index(block, self.head)
        except ValueError:
            return False
        return True

    def extend(self, blocks) -> None:
        self.q.extend(blocks)

    def take(self, count: int) -> list[int]:
        """The first `count` free blocks (at most as many as there are), out of the queue."""
        head = self.head
        out = self.q[head:head + count]
        self.head = head = head + len(out)
        if head > 64 and 2 * head > len(self.q):
            del self.q[:head]
            self.head = 0
        return out

    def remove(self, blocks) -> None:
        """`blocks` (free, distinct) leave from anywhere (rare: a touch of a block that holds nothing)."""
        gone = set(blocks)
        if gone:
            self.q = [block for block in islice(self.q, self.head, None) if block not in gone]
            self.head = 0
