"""How g1_extents.ExtentPool records keys: a registration's runs of consecutive ids cut into runs of consecutive
keys, each held by its extent as a range (first key, step) and cached in g1_key_groups.KeyGroups a group at a time;
the per-block path where some keys are cached already or copies are kept (BlockPool's `keep_copies`)."""
from __future__ import annotations

from .g1_extent_ids import EXTENTS, SLAB, Extent, find, runs
from .g1_key_groups import run_length


class ExtentKeys:
    """ExtentPool's registrations and its evictions while copies are kept (a mixin: the pool owns the state)."""

    __slots__ = ()

    def _evict_copies(self, x: int, m: int, low: int, step: int, evicted: list) -> None:
        """Evict ids x..x+m-1 (keys low + step * i), top first, while copies are kept (BlockPool._last_copy): a
        key's last copy leaves the map, an evicted first copy hands the key to its oldest other one."""
        cached, copies = self.cached, self.copies
        for i in range(m - 1, -1, -1):
            key, block = low + step * i, x + i
            others = copies.get(key)
            if not others:
                cached.remove(key, key + 1)
                self.evictions += 1
                evicted.append(key)
                continue
            if cached.get(key) == block:
                cached.remove(key, key + 1)
                cached.add(key, key + 1, others.pop(0), 1)
            else:
                others.remove(block)
            if not others:
                del copies[key]

    def register_run(self, blocks: list[int], keys: list[int], start: int, stop: int, writer=None) -> None:
        """As BlockPool's: blocks[start:stop] become discoverable by keys[start:stop]; a key cached already keeps
        its block (the new one becomes a copy when copies are kept).  Each run of consecutive ids inside one extent
        is cut into runs of consecutive keys (ascending or descending), registered a range at a time."""
        if not self.caching or start >= stop:
            return
        if stop - start == 1 and self.events is None:  # (one block, a decode's: the usual call)
            x, key = blocks[start], keys[start]
            extent = self._slabs[x >> SLAB][EXTENTS][-1]  # (a request's last block is its slab's top, usually)
            if extent.lo > x:
                extent = find(self._slabs, x)
            keyed = extent.keyed
            if keyed and x == extent.lo + keyed:
                step = extent.step if keyed > 1 else key - extent.first
                if key == extent.first + step * keyed and (step == 1 or step == -1) and self.cached.add_one(key, x, step):
                    extent.step, extent.keyed = step, keyed + 1
                    return
        stored = [] if self.events is not None else None
        for extent, x, p, m in runs(self._slabs, blocks, start, stop):
            q, end = p, p + m
            while q < end:
                key, n, d = keys[q], end - q, 1
                if n > 1:
                    after = keys[q + 1]
                    if after == key - 1:
                        d = -1
                    elif after != key + 1:
                        n = 1
                    if n > 1:
                        n = run_length(keys, q, n, key, d)
                extent = self._register(extent, x + q - p, key, d, n, stored)
                q += n
        if stored:
            self.events.append(("Stored", stored))

    register_restored = register_run

    def _register(self, extent: Extent, x: int, key: int, d: int, n: int, stored) -> Extent:
        """Ids x..x+n-1 (keyless, inside `extent` or one split off it) get keys key, key + d, ...; returns the
        extent holding them."""
        if not extent.lo <= x < extent.hi:
            extent = find(self._slabs, x)
        a, b = (key, key + n) if d > 0 else (key - n + 1, key + 1)
        if x < extent.lo + extent.keyed or self.cached.overlaps(a, b):
            self._register_each(x, key, d, n, stored)
            return find(self._slabs, x)
        extent = self._hold_keys(extent, x, key, d, n)
        self.cached.add(a, b, x if d > 0 else x + n - 1, d)
        if stored is not None:
            stored.extend(range(key, key + d * n, d))
        return extent

    def _hold_keys(self, extent: Extent, x: int, key: int, d: int, n: int) -> Extent:
        """Record in the extents that ids x..x+n-1 (keyless, at or above `extent`'s keyed ids) hold key, key + d, ...:
        the extent's range of keys grows when they continue it, else they start their own extent at x."""
        keyed = extent.keyed
        if x == extent.lo + keyed:
            if not keyed:
                extent.first, extent.step, extent.keyed = key, d, n
                return extent
            if keyed == 1:
                step = key - extent.first
                if (step == 1 or step == -1) and (n == 1 or d == step):
                    extent.step, extent.keyed = step, 1 + n
                    return extent
            elif key == extent.first + extent.step * keyed and (n == 1 or d == extent.step):
                extent.keyed = keyed + n
                return extent
        if x > extent.lo:
            extent = self._split(extent, x)
        extent.first, extent.step, extent.keyed = key, d, n
        return extent

    def _register_each(self, x: int, key: int, d: int, n: int, stored) -> None:
        """The per-block registration where some of the keys are cached already (each keeps its block; a new
        block holding one is a copy when copies are kept, else keyless)."""
        cached, copies, slabs = self.cached, self.copies, self._slabs
        for i in range(n):
            k, block = key + d * i, x + i
            extent = find(slabs, block)
            if block < extent.lo + extent.keyed:
                continue  # (a block registered twice keeps its first key: the callers register each block once)
            if k not in cached:
                self._hold_keys(extent, block, k, 1, 1)
                cached.add(k, k + 1, block, 1)
                if stored is not None:
                    stored.append(k)
            elif copies is not None:
                self._hold_keys(extent, block, k, 1, 1)
                copies.setdefault(k, []).append(block)
