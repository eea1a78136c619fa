"""G1: one rank's GPU block pool with vLLM's prefix cache.

Blocks are ids 0..capacity-1.  A block is either held (reference count > 0)
or free; free blocks form an LRU queue whose head is evicted first (a freed
block without a key goes to the head: it is empty memory).  A free
block may still carry the key (sequence hash) of the full block it held, so a
later request whose prefix chain reaches that key reuses it and takes it out of
the free queue.  Never-used blocks are handed out first, in id order, exactly
as vLLM's initial free queue would; they are created lazily so that an
"unbounded" G1 costs memory only for the blocks actually used.

The pool is a linear value: the simulation owns exactly one reference to it and
each transition consumes and returns it, so updating it in place is
observationally pure (the old state is never read again).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from functools import partial
from itertools import compress, islice, repeat, takewhile
from operator import add, eq, is_, is_not, not_, sub

NOT_NONE = partial(is_not, None)


def consume(iterator) -> None:
    """Run `iterator` to its end in C, keeping nothing: the pool's per-block steps are maps over whole runs of
    blocks, since a prompt at block 16 is thousands of blocks and a Python loop over them dominated the replay."""
    deque(iterator, maxlen=0)


class BlockPool:
    __slots__ = ("capacity", "caching", "cached", "free", "ref", "key_of", "created", "events", "evictions",
                 "copying", "awaited", "copies")
    # what opal's GPU APC (apc.py) has besides: vLLM's pool has no eviction monitor and no TTL, tells no one of its
    # evictions, and stamps nothing with a time (fused passes need not say when each change happens: `at`)
    proactive_evictions = 0
    ttl_skipped = 0
    on_evict = None
    at = None
    extends = False  # (g1_extents.ExtentPool: `allocate_after` gives a request the ids after its last block)

    def __init__(self, capacity: int, caching: bool = True):
        self.capacity = capacity
        self.caching = caching
        self.cached: dict[int, int] = {}  # key -> block id
        self.free: OrderedDict[int, None] = OrderedDict()  # LRU order: first = evicted next
        self.ref: list[int] = []
        self.key_of: list[int | None] = []
        self.created = 0
        self.events: list | None = None  # set to a list to record ("Stored" | "Removed", keys) for KV events
        self.evictions = 0
        # blocks freed while a GPU->host copy still reads them (one copy per block at a time); a block its request
        # still holds cannot be handed out, so copies of held blocks are not tracked here
        self.copying: set[int] = set()
        self.awaited: set[int] = set()  # copying blocks handed to a new owner, who must wait for the copy
        # key -> its other cached copies, oldest first (None: a key keeps one block, a recomputed copy holds none);
        # see keep_copies
        self.copies: dict[int, list[int]] | None = None

    # ------------------------------------------------------------------ queries
    @property
    def free_count(self) -> int:
        return len(self.free) + self.capacity - self.created

    @property
    def used_count(self) -> int:
        return self.capacity - self.free_count

    def match(self, keys, limit: int) -> list[int]:
        """Blocks holding the longest cached prefix of `keys`, at most `limit` blocks; stops at the first miss."""
        if not self.caching:
            return []
        # (the blocks of the keys up to the first miss, in C: a prompt's prefix may be thousands of blocks)
        return list(takewhile(NOT_NONE, map(self.cached.get, keys[:limit])))

    def held_tokens(self, spec, block_size: int, limit: int) -> int:
        """Tokens of `spec`'s prompt cached here in whole blocks, at most `limit` blocks (a router's question)."""
        return len(self.match(spec.keys(block_size), limit)) * block_size

    def protected(self, key) -> bool:
        """Is `key`'s block kept only by a TTL (idle, not yet expired)?  Never in vLLM's pool (apc.py has TTLs)."""
        return False

    def advance(self, position: int) -> None:
        """The newest admitted request's input position (only Belady eviction looks at it)."""

    def free_among(self, blocks: list[int]) -> int:
        """How many of `blocks` sit in the free queue (touching them takes them out of it)."""
        return list(map(self.ref.__getitem__, blocks)).count(0) if blocks else 0

    def can_allocate(self, new_blocks: int, touched: list[int] = ()) -> bool:
        return self.free_count - self.free_among(touched) >= new_blocks

    # ------------------------------------------------------------------ transitions
    def touch(self, blocks: list[int]) -> None:
        """Hold each of `blocks` (distinct) once more; idle ones leave the free queue."""
        ref = self.ref
        held = list(map(ref.__getitem__, blocks))
        consume(map(self.free.__delitem__, compress(blocks, map(not_, held))))
        consume(map(ref.__setitem__, blocks, map(add, held, repeat(1))))

    def _fresh(self, count: int) -> list[int]:
        """Up to `count` never-used blocks, in id order, held once each."""
        fresh = min(count, self.capacity - self.created)
        out = list(range(self.created, self.created + fresh))
        if fresh:
            self.created += fresh
            self.ref.extend([1] * fresh)
            self.key_of.extend([None] * fresh)
        return out

    def allocate(self, count: int) -> list[int]:
        """`count` blocks for new KV: never-used blocks first, then the LRU head (evicting its key)."""
        if count == 1 and self.created == self.capacity:  # a decode crossing a block boundary: the usual call
            taken = self._take(1)
            if taken:
                block = taken[0]
                key = self.key_of[block]
                if key is not None:
                    self.key_of[block] = None
                    if not self.copies or self._last_copy(key, block):  # (no copy kept yet: the last)
                        del self.cached[key]
                        self.evictions += 1
                        if self.events is not None:
                            self.events.append(("Removed", [key]))
                self.ref[block] = 1
                if self.copying and block in self.copying:
                    self.awaited.add(block)
            return taken
        out = self._fresh(count) if self.created < self.capacity else []
        rest = count - len(out)
        if rest:
            taken = self._take(rest)
            cached, key_of, ref, copies = self.cached, self.key_of, self.ref, self.copies
            # one plain loop per block (CPython 3.11 runs it faster than maps of bound methods over the list)
            if self.events is None and not copies:  # (no list of the evicted keys, no copies: counted from the map)
                before = len(cached)
                for block in taken:
                    key = key_of[block]
                    if key is not None:  # only the block a key maps to has it
                        del cached[key]
                        key_of[block] = None
                    ref[block] = 1
                self.evictions += before - len(cached)
            else:
                evicted = []
                for block in taken:
                    key = key_of[block]
                    if key is not None:  # only the blocks a key maps to have it
                        key_of[block] = None
                        if copies is None or self._last_copy(key, block):
                            del cached[key]
                            evicted.append(key)
                    ref[block] = 1
                self.evictions += len(evicted)
                if self.events is not None and evicted:
                    self.events.append(("Removed", evicted))
            if self.copying and not self.copying.isdisjoint(taken):  # (rarely: no set built otherwise)
                self.awaited |= self.copying.intersection(taken)
            out.extend(taken)
        return out

    def allocate_after(self, block: int, count: int = 1) -> list[int]:
        """`allocate(count)` for the request whose last block is `block` (g1_extents.ExtentPool gives it the ids
        after that block; a pool naming blocks by position has nothing to do with it)."""
        return self.allocate(count)

    def keep_copies(self) -> None:
        """Keep every computed copy of a key cached, as the mocker's vLLM pool does ("a cached hash may have several
        physical copies"): a block recomputed while its key is cached (a state cache resumes only at a snapshot, so
        the token blocks past it are computed again) is found once the older copy is evicted, and waits in the LRU
        queue as a cached block, not as empty memory.  Every vLLM rank keeps copies (`Engine.equip`; facts §45, §54)."""
        self.copies = {}

    def _add_copy(self, key: int, block: int) -> None:
        """`block` holds another copy of `key`, whose first copy is cached elsewhere."""
        self.key_of[block] = key
        self.copies.setdefault(key, []).append(block)

    def _last_copy(self, key: int, block: int) -> bool:
        """`block`, a copy of `key`, is evicted: was it the last one (else the oldest left is the one found)?"""
        others = self.copies.get(key)
        if not others:
            return True
        if self.cached[key] == block:
            self.cached[key] = others.pop(0)
        else:
            others.remove(block)
        if not others:
            del self.copies[key]
        return False

    def _take(self, count: int) -> list[int]:
        """The first `count` blocks of the free queue, taken out of it (g1_runs.RunPool keeps the queue otherwise)."""
        free = self.free
        taken = list(islice(free, count))
        consume(map(free.__delitem__, taken))
        return taken

    def freeing_while_copied(self, blocks: list[int]) -> None:
        """`blocks` are about to be freed while a copy still reads them: a new owner of one waits for `end_copy`."""
        self.copying.update(blocks)

    def end_copy(self, blocks: list[int]) -> None:
        if self.copying:
            self.copying.difference_update(blocks)
            if self.awaited:
                self.awaited.difference_update(blocks)

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """Make blocks[start:stop] discoverable by keys[start:stop]; a key already cached keeps its block.
        `writer` (the request's spec) is for pools that remember who wrote a block (apc.ApcPool)."""
        if not self.caching:
            return
        run_keys, run_blocks = keys[start:stop], blocks[start:stop]
        # a key cached already keeps its block; the run's blocks are new here, so "got my block" means "stored"
        stored = list(map(eq, map(self.cached.setdefault, run_keys, run_blocks), run_blocks))
        consume(map(self.key_of.__setitem__, compress(run_blocks, stored), compress(run_keys, stored)))
        if self.copies is not None and not all(stored):
            consume(map(self._add_copy, compress(run_keys, map(not_, stored)), compress(run_blocks, map(not_, stored))))
        if self.events is not None and any(stored):
            self.events.append(("Stored", list(compress(run_keys, stored))))

    def release(self, blocks: list[int]) -> None:
        """Drop one reference from each block; freed ones join the queue tail last block first,
        so a request's last blocks are evicted before its first ones.  A freed block that holds no key (a
        partial block, or one computed past the prompt's cached part) goes to the head instead: it is empty
        memory, handed out before any cached block is evicted (AISimulate's mocker keeps only cached blocks in
        its LRU; an uncached one returns to plain free capacity)."""
        ref, order = self.ref, blocks[::-1]
        left = list(map(sub, map(ref.__getitem__, order), repeat(1)))
        consume(map(ref.__setitem__, order, left))
        freed = list(compress(order, map(not_, left)))
        free = self.free
        free.update(dict.fromkeys(freed))
        if self.caching and freed:
            keyless = list(compress(freed, map(is_, map(self.key_of.__getitem__, freed), repeat(None))))
            consume(map(partial(free.move_to_end, last=False), reversed(keyless)))  # (in their release order)

    def register_restored(self, blocks: list[int], keys: list[int], start: int, stop: int) -> None:
        """Blocks a tier restored for the request with `keys`: discoverable like any computed block."""
        self.register_run(blocks, keys, start, stop)


class RestoredOnlyPool(BlockPool):
    """G1 without a prefix cache behind tiers that restore (an opal worker with APC off): nothing is shared, but
    the blocks restored for a request are found by that request's own admission, until it frees them."""

    __slots__ = ("own", "owner")

    def __init__(self, capacity: int):
        super().__init__(capacity, caching=False)
        self.own: dict[int, list[int]] = {}  # id(the request's key list) -> the blocks restored for it
        self.owner: dict[int, int] = {}  # block -> id(key list) of the request it was restored for

    def match(self, keys, limit: int) -> list[int]:
        return self.own.get(id(keys), [])[:limit]

    def register_restored(self, blocks: list[int], keys: list[int], start: int, stop: int) -> None:
        self.own[id(keys)] = blocks[:stop]
        self.owner.update(dict.fromkeys(blocks[:stop], id(keys)))

    def release(self, blocks: list[int]) -> None:
        super().release(blocks)
        owner, ref = self.owner, self.ref
        for block in blocks:
            if not ref[block] and block in owner:
                self.own.pop(owner.pop(block), None)
