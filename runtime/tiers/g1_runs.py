"""vLLM's G1 pool with its free queue kept as runs of blocks: what a release frees enters as one run, an allocation
takes whole runs (or the front of one) from the head.

`RunPool` behaves exactly as `g1.BlockPool` (the same blocks handed out in the
same order, the same keys evicted); only the free queue's representation
differs.  BlockPool keeps one ordered-dict entry per free block, so a prompt of
thousands of blocks at block size 16 cost thousands of ordered-dict inserts at
its release and deletes at its reuse.  Here a release appends one run (a list
of the blocks it freed with a key, in queue order; those without one, empty
memory, enter the head as another) and an allocation slices runs off the
head.  A block taken out of the middle of the queue by a prefix hit is not
searched for: it is marked gone (`_run_of[block]` no longer names its run) and
its run counts one hole; runs with holes are filtered when they reach the head,
and the whole queue is compacted when holes outnumber the free blocks, so
memory stays bounded by the pool, not by the number of releases.
"""
from __future__ import annotations

from collections import Counter, deque
from itertools import compress, repeat
from operator import eq, is_, not_, sub

from .g1 import BlockPool, consume

GONE = -1  # `_run_of` of a block in no run of the queue (held, or never used)
SEQ, BLOCKS, START, HOLES = range(4)  # a run: [its number, its blocks, the first not yet taken, blocks gone]


class FreeView:
    """The free queue as BlockPool's `free` answers readers (the timeline, the macro stepper): its length, its
    blocks head first, whether a block is in it."""

    __slots__ = ("pool",)

    def __init__(self, pool: "RunPool"):
        self.pool = pool

    def __len__(self) -> int:
        return self.pool._queued

    def __iter__(self):
        return self.pool.queue_order()

    def __contains__(self, block: int) -> bool:
        return block < self.pool.created and not self.pool.ref[block]


class RunPool(BlockPool):
    __slots__ = ("_runs", "_by_seq", "_run_of", "_queued", "_holes", "_seq")

    def __init__(self, capacity: int, caching: bool = True):
        super().__init__(capacity, caching)
        self._runs: deque[list] = deque()  # head first: evicted next
        self._by_seq: dict[int, list] = {}
        self._run_of: list[int] = []  # block -> the number of the run it waits in (GONE: none)
        self._queued = 0  # free blocks in the queue (BlockPool's len(free))
        self._holes = 0  # blocks gone from runs still in the queue
        self._seq = 0
        self.free = FreeView(self)  # what BlockPool's readers ask of `free`: its length, order and members

    # ------------------------------------------------------------------ queries
    @property
    def free_count(self) -> int:
        return self._queued + self.capacity - self.created

    def queue_order(self):
        """The free queue's blocks, head first (BlockPool's iteration of `free`)."""
        run_of = self._run_of
        for run in self._runs:
            seq = run[SEQ]
            for block in run[BLOCKS][run[START]:]:
                if run_of[block] == seq:
                    yield block

    # ------------------------------------------------------------------ transitions
    def touch(self, blocks: list[int]) -> None:
        ref = self.ref
        held = list(map(ref.__getitem__, blocks))
        idle = list(compress(blocks, map(not_, held)))
        if idle:
            run_of, by_seq = self._run_of, self._by_seq
            for seq, gone in Counter(map(run_of.__getitem__, idle)).items():
                by_seq[seq][HOLES] += gone
            consume(map(run_of.__setitem__, idle, repeat(GONE)))
            self._queued -= len(idle)
            self._holes += len(idle)
        consume(map(ref.__setitem__, blocks, [count + 1 for count in held]))

    def _fresh(self, count: int) -> list[int]:
        out = super()._fresh(count)
        if out:
            self._run_of.extend([GONE] * len(out))
        return out

    def _take(self, count: int) -> list[int]:
        """The first `count` blocks of the free queue, taken out of it."""
        runs, by_seq, run_of = self._runs, self._by_seq, self._run_of
        taken: list[int] = []
        while count and runs:
            run = runs[0]
            seq, blocks, start, holes = run
            if holes:  # (filtered once: what is left of the run has no holes)
                blocks = list(compress(blocks[start:], map(eq, map(run_of.__getitem__, blocks[start:]), repeat(seq))))
                start = 0
                self._holes -= holes
                run[BLOCKS], run[START], run[HOLES] = blocks, 0, 0
            left = len(blocks) - start
            if left <= count:
                taken.extend(blocks[start:] if start else blocks)
                runs.popleft()
                del by_seq[seq]
                count -= left
            else:
                taken.extend(blocks[start:start + count])
                run[START] = start + count
                count = 0
        self._queued -= len(taken)
        return taken

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """As BlockPool's; when every key is new here (the usual case) the run is keyed without filtering it."""
        if not self.caching:
            return
        run_keys, run_blocks = keys[start:stop], blocks[start:stop]
        stored = list(map(eq, map(self.cached.setdefault, run_keys, run_blocks), run_blocks))
        if all(stored):
            consume(map(self.key_of.__setitem__, run_blocks, run_keys))
        else:
            run_blocks, run_keys = list(compress(run_blocks, stored)), list(compress(run_keys, stored))
            consume(map(self.key_of.__setitem__, run_blocks, run_keys))
        if self.events is not None and run_keys:
            self.events.append(("Stored", run_keys))

    def release(self, blocks: list[int]) -> None:
        """As BlockPool's: the freed blocks with a key join the queue's tail last block first, as one run; those
        without one (empty memory) go to its head, in their release order, as another."""
        ref, order = self.ref, blocks[::-1]
        held = list(map(ref.__getitem__, order))
        if held and max(held) == 1:  # (the common case: no other request shares a block, all are freed)
            consume(map(ref.__setitem__, order, repeat(0)))
            freed = order
        else:
            left = list(map(sub, held, repeat(1)))
            consume(map(ref.__setitem__, order, left))
            freed = list(compress(order, map(not_, left)))
        if not freed:
            return
        if self.caching:
            keys = list(map(self.key_of.__getitem__, freed))
            keyless = keys.count(None)
            if keyless == len(freed):
                self._enqueue(freed, head=True)
                return
            if keyless:
                flags = list(map(is_, keys, repeat(None)))
                self._enqueue(list(compress(freed, flags)), head=True)
                freed = list(compress(freed, map(not_, flags)))
        self._enqueue(freed)

    def _enqueue(self, freed: list[int], head: bool = False) -> None:
        self._seq += 1
        run = [self._seq, freed, 0, 0]
        if head:
            self._runs.appendleft(run)
        else:
            self._runs.append(run)
        self._by_seq[self._seq] = run
        consume(map(self._run_of.__setitem__, freed, repeat(self._seq)))
        self._queued += len(freed)
        if self._holes > self._queued + 4096:
            self._compact()

    def _compact(self) -> None:
        """Drop the gone blocks from every run (the queue's order is kept)."""
        order = list(self.queue_order())
        self._runs.clear()
        self._by_seq.clear()
        self._holes = 0
        self._queued = 0
        if order:
            self._enqueue(order)
