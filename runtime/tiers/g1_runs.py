"""vLLM's G1 pool with its per-block state in numpy arrays and its free queue kept as runs of blocks: what a release
frees enters as one run, an allocation takes whole runs (or the front of one) from the head.

`RunPool` behaves exactly as `g1.BlockPool` (the same blocks handed out in the
same order, the same keys evicted, the same KV events); only the
representation differs.  At block size 16 a prompt is hundreds or thousands of
blocks, and a Python step per block in release, allocate and register_run was
most of a replay (facts §56, §64).  Here each block's reference count, key and
run are array entries, and a transition over a request's blocks is a few
fancy-indexed gathers and stores: a release appends one run (an array of the
blocks it freed with a key, in queue order; those without one, empty memory,
enter the head as another), an allocation slices runs off the head and evicts
the keys of the taken blocks at once.  A block taken out of the middle of the
queue by a prefix hit is not searched for: it is marked gone (`_run_of[block]`
no longer names its run) and its run counts one hole; runs with holes are
filtered when they reach the head, and the whole queue is compacted when holes
outnumber the free blocks, so memory stays bounded by the pool, not by the
number of releases.  Calls over a few blocks (a decode's one block) take
scalar paths: numpy's cost per call is a microsecond or two.
"""
from __future__ import annotations

from collections import Counter, deque

import numpy as np

from .g1 import BlockPool

GONE = -1  # `_run_of` of a block in no run of the queue (held, or never used)
SEQ, BLOCKS, START, HOLES = range(4)  # a run: [its number, its blocks (an array), the first not yet taken, gone]
NO_BLOCKS = np.zeros(0, np.intp)


def as_array(blocks) -> np.ndarray:
    return np.fromiter(blocks, np.intp, len(blocks))


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
    """BlockPool's interface; `ref` and `_run_of` are arrays grown with `created` (an unbounded pool costs only what
    it used).  `key_of` stays BlockPool's list: a key is any int (64-bit hashes, negative output keys), and the
    cached map's per-key work is dict work either way, which a plain loop reaches with the fewest steps."""

    __slots__ = ("has_key", "_keyed", "_runs", "_by_seq", "_run_of", "_queued", "_holes", "_seq")
    small = 64  # calls over at most this many blocks take the scalar paths (measured crossover: facts §64)

    def __init__(self, capacity: int, caching: bool = True):
        super().__init__(capacity, caching)
        self.ref = np.zeros(0, np.int64)
        # key_of[block] is not None, a byte per block: stored by the registering loop as cheaply as a list item,
        # read by a release through `_keyed`, a numpy view of the same bytes (renewed when the pool grows)
        self.has_key = bytearray()
        self._keyed = np.frombuffer(self.has_key, bool)
        self._run_of = np.zeros(0, np.int64)  # block -> the number of the run it waits in (GONE: none)
        self._runs: deque[list] = deque()  # head first: evicted next
        self._by_seq: dict[int, list] = {}
        self._queued = 0  # free blocks in the queue (BlockPool's len(free))
        self._holes = 0  # blocks gone from runs still in the queue
        self._seq = 0
        self.free = FreeView(self)  # what BlockPool's readers ask of `free`: its length, order and members

    # ------------------------------------------------------------------ queries
    @property
    def free_count(self) -> int:
        return self._queued + self.capacity - self.created

    def free_among(self, blocks: list[int]) -> int:
        if len(blocks) <= self.small:
            ref = self.ref
            return sum(1 for block in blocks if not ref[block])
        return int(np.count_nonzero(self.ref[as_array(blocks)] == 0))

    def queue_order(self):
        """The free queue's blocks, head first (BlockPool's iteration of `free`)."""
        run_of = self._run_of
        for run in self._runs:
            rest = run[BLOCKS][run[START]:]
            yield from rest[run_of[rest] == run[SEQ]].tolist()

    # ------------------------------------------------------------------ transitions
    def touch(self, blocks: list[int]) -> None:
        ref, run_of, by_seq = self.ref, self._run_of, self._by_seq
        if len(blocks) <= self.small:
            idle = 0
            for block in blocks:
                count = ref[block]
                if not count:
                    by_seq[int(run_of[block])][HOLES] += 1
                    run_of[block] = GONE
                    idle += 1
                ref[block] = count + 1
        else:
            held = as_array(blocks)
            counts = ref[held]
            gone = held[counts == 0]
            idle = len(gone)
            if idle:
                for seq, holes in Counter(run_of[gone].tolist()).items():
                    by_seq[seq][HOLES] += holes
                run_of[gone] = GONE
            ref[held] = counts + 1
        if idle:
            self._queued -= idle
            self._holes += idle

    def _fresh(self, count: int) -> list[int]:
        """Up to `count` never-used blocks, in id order, held once each (the arrays grow by doubling)."""
        fresh = min(count, self.capacity - self.created)
        if not fresh:
            return []
        first = self.created
        self.created = end = first + fresh
        if end > len(self.ref):
            size = min(self.capacity, max(end, 2 * len(self.ref), 1024))
            grown = size - len(self.ref)
            self.ref = np.concatenate((self.ref, np.zeros(grown, np.int64)))
            self.has_key = self.has_key + bytes(grown)
            self._keyed = np.frombuffer(self.has_key, bool)
            self._run_of = np.concatenate((self._run_of, np.full(grown, GONE, np.int64)))
        self.ref[first:end] = 1
        self.key_of.extend([None] * fresh)
        return list(range(first, end))

    def _take(self, count: int) -> np.ndarray:
        """The first `count` blocks of the free queue, taken out of it."""
        runs, by_seq, run_of = self._runs, self._by_seq, self._run_of
        pieces = []
        while count and runs:
            run = runs[0]
            seq, blocks, start, holes = run
            if holes:  # (filtered once: what is left of the run has no holes)
                blocks = blocks[start:]
                blocks = blocks[run_of[blocks] == seq]
                start = 0
                self._holes -= holes
                run[BLOCKS], run[START], run[HOLES] = blocks, 0, 0
            left = len(blocks) - start
            if left <= count:
                pieces.append(blocks[start:])
                runs.popleft()
                del by_seq[seq]
                count -= left
            else:
                pieces.append(blocks[start:start + count])
                run[START] = start + count
                count = 0
        taken = pieces[0] if len(pieces) == 1 else np.concatenate(pieces) if pieces else NO_BLOCKS
        self._queued -= len(taken)
        return taken

    def allocate(self, count: int) -> list[int]:
        """`count` blocks for new KV: never-used blocks first, then the queue's head (evicting its keys)."""
        out = self._fresh(count) if self.created < self.capacity else []
        rest = count - len(out)
        if rest:
            taken = self._take(rest)
            self.ref[taken] = 1
            self._keyed[taken] = False  # (what _evict_keys leaves: no taken block keeps a key)
            taken = taken.tolist()
            self._evict_keys(taken)
            if self.copying and not self.copying.isdisjoint(taken):  # (rarely: no set built otherwise)
                self.awaited |= self.copying.intersection(taken)
            out += taken
        return out

    def _add_copy(self, key: int, block: int) -> None:
        super()._add_copy(key, block)
        self.has_key[block] = 1

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """As BlockPool's: blocks[start:stop] become discoverable by keys[start:stop]; a key cached already keeps
        its block (one plain loop: it reads each key's entry once, and numpy's conversions of the lists would
        cost more than it saves)."""
        if not self.caching:
            return
        cached, key_of, copies = self.cached, self.key_of, self.copies
        has_key = self.has_key
        if self.events is None:  # (no list of the stored keys built)
            for key, block in zip(keys[start:stop], blocks[start:stop]):
                if key not in cached:
                    cached[key] = block
                    key_of[block] = key
                    has_key[block] = 1
                elif copies is not None and key_of[block] is None:
                    self._add_copy(key, block)
            return
        stored = []
        for key, block in zip(keys[start:stop], blocks[start:stop]):
            if key not in cached:
                cached[key] = block
                key_of[block] = key
                has_key[block] = 1
                stored.append(key)
            elif copies is not None and key_of[block] is None:
                self._add_copy(key, block)
        if stored:
            self.events.append(("Stored", stored))

    def release(self, blocks: list[int]) -> None:
        """As BlockPool's: the freed blocks with a key join the queue's tail last block first, as one run; those
        without one (empty memory) go to its head, in their release order, as another."""
        tail, head = self._seq + 1, self._seq + 2  # the numbers of the two runs
        self._seq += 2
        ref, run_of = self.ref, self._run_of
        if len(blocks) <= self.small:
            keyed, keyless = [], []
            has_key = self.has_key
            for block in reversed(blocks):
                count = ref[block] - 1
                ref[block] = count
                if not count:
                    if self.caching and not has_key[block]:
                        keyless.append(block)
                    else:
                        keyed.append(block)
            keyed = np.array(keyed, np.intp) if keyed else NO_BLOCKS
            keyless = np.array(keyless, np.intp) if keyless else NO_BLOCKS
        else:
            order = np.fromiter(reversed(blocks), np.intp, len(blocks))
            left = ref[order] - 1
            ref[order] = left
            freed = order[left == 0]
            keyed, keyless = freed, NO_BLOCKS
            if self.caching and len(freed):
                with_key = self._keyed[freed]
                if not with_key.all():
                    keyed, keyless = freed[with_key], freed[~with_key]
        if len(keyed):
            run_of[keyed] = tail
            self._enqueue(keyed, tail)
        if len(keyless):
            run_of[keyless] = head
            self._enqueue(keyless, head, head=True)

    def _enqueue(self, freed: np.ndarray, seq: int, head: bool = False) -> None:
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
        order = np.array(list(self.queue_order()), np.intp)
        self._runs.clear()
        self._by_seq.clear()
        self._holes = 0
        self._queued = 0
        if len(order):
            self._seq += 1
            self._run_of[order] = self._seq
            self._enqueue(order, self._seq)
