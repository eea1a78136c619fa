"""GPU APC (opal): G1's block pool with an idle-block LRU queue, a TTL, explicit eviction and an eviction hook.

Same interface as `g1.BlockPool` (the scheduler cannot tell them apart), with opal's
reading of memory: available = free + idle.  *Free* blocks hold nothing: never-used
ones (handed out first, in id order), then blocks freed without a key or evicted
(first freed first).  *Idle* blocks are unpinned and still keyed: they sit in an
eviction queue in last-access order, least recent first; a request's blocks enter
it tail first, so its last blocks leave first (as in vLLM).  An access is a request
matching, holding or releasing a block; a matched idle block moves to the queue's
newest end.  Eviction takes idle blocks from the oldest end in O(victims), never
looking at pinned ones.

TTL (`ttl_ns` > 0): an idle block is immune until ``last access + ttl_ns``.  The
queue is in access order, so the protected blocks are its newest end: eviction
stops at the first one, and `free_count` (what can be handed out now) counts
free + unprotected idle only.  The queue (apc_queue.py) costs O(1) amortised per
query and change.

ttl_skipped: when an eviction stops short of what was asked because the rest of the
queue is protected, the number of protected idle blocks it left in place (what opal's
full scan would have skipped); 0 for an eviction that got all it asked for.  Inline evictions
(for an admission) never stop short: `can_allocate` is asked first, so a request waits instead.

`on_evict(pool, keys, runs)` per batch: the victims' keys (one per victim), and the
victims as runs of one writer's consecutive victims, `[(writer, chain indices)]`:
the RequestSpec whose content wrote them (`register_run`'s `writer`) and each
block's index in that chain (a batch is up to thousands of blocks and a few runs:
apc_writers.py); `pool.now()` is the eviction's instant: fused decode passes apply
later passes early and `at` tells the pool each one's instant, so stamps and
evictions are single stepping's.
"""
from __future__ import annotations

from itertools import compress, repeat
from operator import eq, is_not, not_, sub

from .apc_free import FreeBlocks
from .apc_log import EvictStats
from .apc_queue import IdleQueue, gather, ids
from .apc_lookup import ApcLookups
from .apc_retry import Lookup
from .apc_writers import Writers
from .g1 import BlockPool, consume

class ApcPool(ApcLookups, BlockPool):
    __slots__ = ("clock", "ttl_ns", "advanced_to", "queue", "_looked", "_looking", "_looked_at", "writers", "on_evict", "evict_log",
                 "inline_evictions", "proactive_evictions", "ttl_skipped", "retry")

    def __init__(self, capacity: int, clock=None, ttl_ns: int = 0):
        super().__init__(capacity, True)
        self.clock = clock  # the replay's Clock (`.now`); None: time stays 0
        self.ttl_ns = ttl_ns
        self.advanced_to = 0  # a macro step applies later passes early: the latest instant it applied (see `at`)
        self.free = FreeBlocks()  # (blocks holding nothing leave from the front only: apc_free.py)
        self.queue = IdleQueue(ttl_ns, capacity)  # the idle blocks, in last-access order
        self._looked: dict[int, None] = {}  # idle blocks a lookup at `_looked_at` refreshed without holding them
        self._looking: list = []  # idle-block lists of lookups at `_looked_at` not yet put into `_looked`
        self._looked_at = -1
        # per block id, set whenever the block is keyed (so never stale while it is): the RequestSpec that wrote
        # it (None: a restore) and its index in that chain, read back per run of one writer (apc_writers.py)
        self.writers = Writers(capacity)
        self.on_evict = None  # None or callable(pool, keys, runs) per eviction batch
        self.evict_log: list | None = None  # set to a list to collect an EvictStats per eviction batch
        self.inline_evictions = self.proactive_evictions = self.ttl_skipped = 0
        self.retry: Lookup | None = None  # the last lookup with a TTL, while it still holds (apc_retry.py)

    # ------------------------------------------------------------------ time and the queue
    def now(self) -> int:
        return max(self.clock.now if self.clock is not None else 0, self.advanced_to)

    def at(self, time_ns: int) -> None:
        """A macro step is applying a pass's changes of `time_ns` (later than the clock): stamp them then."""
        if time_ns > self.advanced_to:
            self.advanced_to = time_ns

    # ------------------------------------------------------------------ queries
    @property
    def free_count(self) -> int:
        """Blocks that can be handed out now: free ones and idle ones outside their TTL window."""
        self.queue.expire(self.now())
        return self.capacity - self.created + len(self.free) + self.queue.expired

    @property
    def idle_count(self) -> int:
        return self.queue.live

    @property
    def plain_free(self) -> int:
        """Blocks holding nothing (never used, or freed without a key, or evicted)."""
        return self.capacity - self.created + len(self.free)

    @property
    def pinned_count(self) -> int:
        return self.created - len(self.free) - self.queue.live

    def idle_blocks(self) -> list[int]:
        """The eviction queue, oldest first."""
        queue = self.queue
        start, stop = queue.head, queue.base + len(queue.q)
        return list(compress(queue.q[start - queue.base:], queue._is_live(start, stop)))

    @property
    def protected_count(self) -> int:
        self.queue.expire(self.now())
        return self.queue.live - self.queue.expired

    def touch(self, blocks: list[int]) -> None:
        if self.retry is not None:
            self.retry.touched(blocks)
        ref = self.ref
        held = gather(ref, blocks)
        unheld = list(compress(blocks, map(not_, held)))
        if unheld:
            queued = (self.queue.entry[ids(unheld)] >= 0).tolist()
            idle = list(compress(unheld, queued))
            if idle:
                self.queue.dequeue_all(idle)
                looked = self._looked_blocks()
                if looked:
                    consume(map(looked.pop, idle, repeat(None)))
            if len(idle) < len(unheld):
                self.free.remove(compress(unheld, map(not_, queued)))
        for block, count in zip(blocks, held):
            ref[block] = count + 1

    def allocate(self, count: int) -> list[int]:
        """`count` blocks: never-used ones, then free ones (first freed first), then unprotected idle ones."""
        if count == 1:  # a decode crossing a block boundary: most calls, so no lists of runs are built for it
            return [self._one()]
        out = self._fresh(count)
        rest = count - len(out)
        if rest:
            taken = self.free.take(rest)
            if rest > len(taken):
                victims = self.queue.pop_expired(rest - len(taken), self.now())
                if len(victims) < rest - len(taken):
                    raise RuntimeError("ApcPool.allocate: fewer blocks than free_count promised")
                self._drop(victims, rest - len(taken), proactive=False)
                taken += victims
            ref = self.ref
            for block in taken:
                ref[block] = 1
            if self.copying and not self.copying.isdisjoint(taken):
                self.awaited |= self.copying.intersection(taken)
            out.extend(taken)
        return out

    def _one(self) -> int:
        """`allocate(1)`'s block, by the same rule."""
        if self.created < self.capacity:
            block = self.created
            self.created += 1
            self.ref.append(1)
            self.key_of.append(None)
            return block
        if self.free:
            block = self.free.take(1)[0]
        else:
            victims = self.queue.pop_expired(1, self.now())
            if not victims:
                raise RuntimeError("ApcPool.allocate: fewer blocks than free_count promised")
            self._drop(victims, 1, proactive=False)
            block = victims[0]
        self.ref[block] = 1
        if self.copying and block in self.copying:
            self.awaited.add(block)
        return block

    def evict(self, count: int, now: int | None = None) -> int:
        """Evict up to `count` unprotected idle blocks (the monitor's way in): they become free; returns how many."""
        now = self.now() if now is None else now
        victims = self.queue.pop_expired(count, now)
        skipped = self.queue.live - self.queue.expired if len(victims) < count else 0
        self.ttl_skipped += skipped
        self.free.extend(victims)
        self._drop(victims, count, proactive=True, skipped=skipped, now=now)
        return len(victims)

    def _drop(self, victims: list[int], requested: int, proactive: bool, skipped: int = 0,
              now: int | None = None) -> None:
        """Forget the victims' keys; count them, record KV events, tell the hook and the log."""
        if not victims and not proactive:
            return
        key_of, cached = self.key_of, self.cached
        keys = gather(key_of, victims)
        if len(victims) == 1:  # (a decode's block, most calls)
            del cached[keys[0]]
            key_of[victims[0]] = None
        else:
            for key in keys:
                del cached[key]
            for block in victims:
                key_of[block] = None
        taken = self.queue.taken
        index = taken[1] if taken[0] is victims else None  # (the victims as an index array, when the queue has it)
        if proactive:
            self.proactive_evictions += len(victims)
        else:
            self.inline_evictions += len(victims)
        self.evictions += len(victims)
        if self.events is not None and victims:
            self.events.append(("Removed", list(keys)))
        if self.evict_log is not None and (victims or requested):
            scanned = len(victims) + (1 if skipped else 0)
            pinned = self.pinned_count
            self.evict_log.append(EvictStats(self.now() if now is None else now, proactive, requested,
                                             len(victims), scanned, skipped, self.queue.live, pinned,
                                             pinned + self.queue.live))
        if self.on_evict is not None and victims:
            self.on_evict(self, keys, self.writers.runs(victims, index))
        if victims:  # (after the hook has read who wrote them)
            self.writers.forget(victims, index)

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """BlockPool's, recording for each newly keyed block which request wrote it and at which chain index."""
        if self.copies is not None:  # (a copy is keyed without being stored: BlockPool's way, then who keyed what)
            self._register_copies(blocks, keys, start, stop, writer)
            return
        cached, key_of = self.cached, self.key_of
        if stop - start == 1:  # a decode filling a block: most calls
            block, key = blocks[start], keys[start]
            if cached.setdefault(key, block) == block:
                key_of[block] = key
                self.writers.one(block, start, writer)
                if self.events is not None:
                    self.events.append(("Stored", [key]))
            return
        # the run's blocks are new to G1 (they hold no key), so a key that got its block is stored here (a key
        # cached already keeps its block, and one repeated inside the run keys its first block only)
        run_keys, run_blocks = keys[start:stop], blocks[start:stop]
        stored = list(map(eq, map(cached.setdefault, run_keys, run_blocks), run_blocks))
        if stored.count(True) == len(stored):  # (usually: nothing of a prompt past its hits is cached)
            for block, key in zip(run_blocks, run_keys):  # (a loop: a map of `__setitem__` costs several times more)
                key_of[block] = key
            self.writers.run(run_blocks, start, writer)
            if self.events is not None and run_keys:
                self.events.append(("Stored", run_keys))
            return
        written, written_keys = list(compress(run_blocks, stored)), list(compress(run_keys, stored))
        consume(map(key_of.__setitem__, written, written_keys))
        self.writers.some(written, compress(range(start, stop), stored), writer)
        if self.events is not None and written_keys:
            self.events.append(("Stored", written_keys))

    def _register_copies(self, blocks: list[int], keys: list[int], start: int, stop: int, writer) -> None:
        super().register_run(blocks, keys, start, stop)
        run_blocks = blocks[start:stop]
        keyed = list(map(eq, map(self.key_of.__getitem__, run_blocks), keys[start:stop]))
        written = list(compress(run_blocks, keyed))
        self.writers.some(written, compress(range(start, stop), keyed), writer)

    def release(self, blocks: list[int]) -> None:
        """Drop one reference each; a freed keyed block joins the queue's newest end (tail first), stamped now;
        a freed unkeyed one is free memory.

        A release is cut into runs only where behaviour differs: in the order the blocks enter (tail first), the
        freed blocks come first and the ones another request still holds (a shared prefix) last, and of the freed
        ones only the request's last block (a partial one) holds no key; each run is one step (a slice, a loop
        with no test), any other layout takes the general path."""
        if self.retry is not None:
            self.retry.touched(blocks)
        ref, order = self.ref, blocks[::-1]
        held = gather(ref, order)
        freeing = held.count(1)
        if freeing == len(held) or (freeing and held[freeing - 1] == 1 and held[:freeing].count(1) == freeing):
            freed = order[:freeing] if freeing < len(order) else order  # (the first `freeing` are the ones)
            for block in freed:
                ref[block] = 0
            if freeing < len(order):  # the shared prefix: still held elsewhere, one reference fewer
                for block, count in zip(order[freeing:], held[freeing:]):
                    ref[block] = count - 1
            if not freed:
                return
            index = ids(freed)  # (which hold no key, from the writers' column; the queue's numbers with it)
            unkeyed = self.writers.unkeyed(index)
            if not unkeyed:
                self.queue.enqueue_all(freed, self.now(), index)
                return
            if unkeyed == 1 and self.key_of[freed[0]] is None:  # (usually: the partial last block, entering first)
                self.free.extend(freed[:1])
                if len(freed) > 1:
                    self.queue.enqueue_all(freed[1:], self.now(), index[1:])
                return
            keys = gather(self.key_of, freed)
        else:
            left = list(map(sub, held, repeat(1)))
            for block, count in zip(order, left):
                ref[block] = count
            freed = list(compress(order, map(not_, left)))
            keys = gather(self.key_of, freed)
        if not freed:
            return
        if keys.count(None):
            keyed = list(map(is_not, keys, repeat(None)))
            self.free.extend(compress(freed, map(not_, keyed)))
            idle = list(compress(freed, keyed))
        else:
            idle = freed
        if idle:
            self.queue.enqueue_all(idle, self.now())
