"""GPU APC's lookups (opal): what a lookup finds and refreshes, what is protected, when protection next ends.

A mixin of `apc.ApcPool` (it owns the state: the idle queue, the TTL, the
kept retry), split out of it as the pool's read side.  With a TTL a lookup is
an access: the idle hits it finds are refreshed (restamped, moved to the
queue's newest end), so a request waiting for memory keeps its own prefix
protected; the blocks a lookup refreshed at the current instant are
remembered (as lists, made a set only when asked for: a retry at every pass
need not build one) so that `next_expiry` can leave them out.
"""
from __future__ import annotations

from itertools import compress, islice, repeat, takewhile
from operator import and_, not_

from .apc_queue import gather, ids
from .apc_retry import Lookup
from .g1 import NOT_NONE, consume


class ApcLookups:
    __slots__ = ()

    def free_among(self, blocks: list[int]) -> int:
        """How many of `blocks` `free_count` counts (touching them takes them out of it)."""
        if not self.ttl_ns:  # every idle block counts: BlockPool's count of unreferenced ones
            return super().free_among(blocks)
        kept = self.retry
        if kept is not None and blocks is kept.found and not kept.dirty and kept.at == self.now():
            return 0  # just refreshed: its idle blocks are protected, the others held
        self.queue.expire(self.now())
        ref, boundary = self.ref, self.queue.boundary
        # (in C, as the match before it: a prefix may be thousands of blocks) unreferenced blocks that are free
        # memory (they hold no key: only a touch of a block found by other means can name one), or idle with an
        # expired entry (a number in [0, boundary): -1 is not queued)
        unheld = list(compress(blocks, map(not_, gather(ref, blocks))))
        if not unheld:
            return 0
        numbers = self.queue.entry[ids(unheld)]
        unqueued = numbers < 0
        free = sum(map(self.free.__contains__, compress(unheld, unqueued.tolist()))) if unqueued.any() else 0
        return free + int((numbers < boundary).sum()) - int(unqueued.sum())

    def protected(self, key) -> bool:
        """Is `key`'s block idle and kept by its TTL, not yet expired (the miss breakdown asks)?"""
        block = self.cached.get(key)
        if not self.ttl_ns or block is None or self.ref[block]:
            return False
        self.queue.expire(self.now())  # (bookkeeping only, as free_among does)
        return bool(self.queue.entry[block] >= self.queue.boundary)

    def match(self, keys, limit: int) -> list[int]:
        """The cached prefix (as BlockPool's); with a TTL a lookup is an access: matched idle blocks become the
        newest.  (Without one, only holds and releases order the queue, as in vLLM: a request that waits for
        memory looks its prefix up at every pass, which need not cost a pass over its blocks.)  With a TTL a
        waiting request's retry reuses its last answer while that holds (apc_retry.py)."""
        if not self.ttl_ns:
            return self._prefix(keys, limit)
        now, kept = self.now(), self.retry
        if kept is not None and kept.holds_for(keys, limit, self.cached, now, self.ttl_ns):
            found, idle = kept.found, kept.idle
        else:
            found = self._prefix(keys, limit)
            tail_first = found[::-1]  # as a release enters them
            idle = list(compress(tail_first, map(not_, map(self.ref.__getitem__, tail_first))))
            kept = self.retry = Lookup(keys, limit, found, idle, now) if found else None
        if found and self.queue.live:
            if self._looked_at != now:
                self._looked.clear()
                self._looking.clear()
                self._looked_at = now
            if idle:
                self.queue.refresh(idle, now)
                self._looking.append(idle)  # (a set only if asked for: a retry at each pass need not build one)
        if kept is not None:
            kept.at = now
        return found

    def _prefix(self, keys, limit: int) -> list[int]:
        """BlockPool.match without copying `keys[:limit]` first: a waiting request looks its whole prompt up at
        every admission attempt, and its cached prefix is usually a few blocks of thousands."""
        return list(takewhile(NOT_NONE, map(self.cached.get, islice(keys, limit) if limit >= 0 else keys[:limit])))

    def _looked_blocks(self) -> dict:
        """The idle blocks lookups at `_looked_at` refreshed without holding them (as a dict's keys)."""
        if self._looking:
            consume(map(self._looked.update, map(dict.fromkeys, self._looking)))
            self._looking.clear()
        return self._looked

    def _was_looked(self, block: int) -> bool:
        """Is `block` among `_looked_blocks()`?  Asked of the lists as they are (a scan in C), so that the usual
        answer, no, builds no dict of a whole prefix."""
        return block in self._looked or any(map(list.__contains__, self._looking, repeat(block)))

    def next_expiry(self, looked_too: bool = False) -> int | None:
        """When the oldest protected idle block expires, leaving out blocks only a lookup refreshed just now (a
        waiting request's own hits: their protection never keeps it waiting, and each retry refreshes them, so
        waking for them could repeat forever) unless `looked_too` (fused passes that look them up again only at
        their last pass, shell/macro.py, must not reach their expiry either); None: nothing expires."""
        now = self.now()
        queue = self.queue
        queue.expire(now)
        start = queue.first_protected()
        if start is None:
            return None
        first = queue.q[start - queue.base]
        if looked_too or self._looked_at != now or not self._was_looked(first):
            return queue.stamps[start - queue.base] + self.ttl_ns
        looked = self._looked_blocks()
        end, width = queue.base + len(queue.q), 64
        while start < end:  # (in C, in growing windows: the looked-up blocks may be a whole prefix, or none)
            stop = min(end, start + width)
            wanted = map(and_, queue._is_live(start, stop),
                         map(not_, map(looked.__contains__, queue.q[start - queue.base:stop - queue.base])))
            first = next(compress(range(start, stop), wanted), None)
            if first is not None:
                return queue.stamps[first - queue.base] + self.ttl_ns
            start, width = stop, 4 * width
        return None

    # ------------------------------------------------------------------ transitions
