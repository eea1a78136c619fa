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

from collections import deque

from .g1 import BlockPool

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
    # (each transition is one plain loop over its blocks: CPython 3.11 runs those faster than maps of bound
    # methods, and one loop reads each block's state once where a map per field read it several times)
    def touch(self, blocks: list[int]) -> None:
        ref, run_of, by_seq = self.ref, self._run_of, self._by_seq
        idle = 0
        for block in blocks:
            count = ref[block]
            if not count:
                by_seq[run_of[block]][HOLES] += 1
                run_of[block] = GONE
                idle += 1
            ref[block] = count + 1
        if idle:
            self._queued -= idle
            self._holes += idle

    def _fresh(self, count: int) -> list[int]:
        out = super()._fresh(count)
        if out:
            self._run_of.extend([GONE] * len(out))
        return out

    def _take(self, count: int) -> list[int]:
        """The first `count` blocks of the free queue, taken out of it."""
        runs, by_seq, run_of = self._runs, self._by_seq, self._run_of
        if count == 1 and runs and not runs[0][HOLES]:  # (one block off a head run without holes: a decode's)
            run = runs[0]
            start = run[START]
            blocks = run[BLOCKS]
            if start + 1 < len(blocks):
                run[START] = start + 1
            else:
                runs.popleft()
                del by_seq[run[SEQ]]
            self._queued -= 1
            return [blocks[start]]
        taken: list[int] = []
        while count and runs:
            run = runs[0]
            seq, blocks, start, holes = run
            if holes:  # (filtered once: what is left of the run has no holes)
                blocks = [block for block in blocks[start:] if run_of[block] == seq]
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
        """As BlockPool's: blocks[start:stop] become discoverable by keys[start:stop]; a key cached already keeps
        its block."""
        if not self.caching:
            return
        cached, key_of, copies = self.cached, self.key_of, self.copies
        if self.events is None:  # (no list of the stored keys built)
            for key, block in zip(keys[start:stop], blocks[start:stop]):
                if key not in cached:
                    cached[key] = block
                    key_of[block] = key
                elif copies is not None and key_of[block] is None:
                    self._add_copy(key, block)
            return
        stored = []
        for key, block in zip(keys[start:stop], blocks[start:stop]):
            if key not in cached:
                cached[key] = block
                key_of[block] = key
                stored.append(key)
            elif copies is not None and key_of[block] is None:
                self._add_copy(key, block)
        if self.events is not None and stored:
            self.events.append(("Stored", stored))

    def release(self, blocks: list[int]) -> None:
        """As BlockPool's: the freed blocks with a key join the queue's tail last block first, as one run; those
        without one (empty memory) go to its head, in their release order, as another."""
        ref, key_of, run_of = self.ref, self.key_of, self._run_of
        caching = self.caching
        keyed, keyless = [], []
        tail, head = self._seq + 1, self._seq + 2  # the numbers of the two runs (`_enqueue` gives them)
        for block in reversed(blocks):
            count = ref[block] - 1
            ref[block] = count
            if count:
                continue
            if caching and key_of[block] is None:
                keyless.append(block)
                run_of[block] = head
            else:
                keyed.append(block)
                run_of[block] = tail
        self._seq += 2
        if keyed:
            self._enqueue(keyed, tail)
        if keyless:
            self._enqueue(keyless, head, head=True)

    def _enqueue(self, freed: list[int], seq: int, head: bool = False) -> None:
        """Queue `freed` (whose `_run_of` already names `seq`) as one run, at the tail or the head."""
        run = [seq, freed, 0, 0]
        if head:
            self._runs.appendleft(run)
        else:
            self._runs.append(run)
        self._by_seq[seq] = run
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
            self._seq += 1
            run_of, seq = self._run_of, self._seq
            for block in order:
                run_of[block] = seq
            self._enqueue(order, seq)
