"""A waiting request's lookup, kept while nothing it read has changed: with a TTL, a retry costs no pass over its prefix.

A request that waits for memory looks its prefix up again at every pass.  With
a TTL the lookup refreshes its idle hits, so they stay protected: until
`at + ttl` no eviction can take one, and only three things can change its
answer: a touch or a release of one of its blocks (which changes which of them
are idle), or the key after the prefix becoming cached (which lengthens it).
`ApcPool.match` reuses the kept answer when none of these happened, and
`ApcPool.free_among` knows that right after the refresh none of its blocks is
free (the idle ones are protected, the others held).
"""
from __future__ import annotations


class Lookup:
    """One lookup's answer: `found` for (keys, limit), its idle blocks tail first, and when it refreshed them."""

    __slots__ = ("keys", "limit", "found", "idle", "watched", "at", "dirty")

    def __init__(self, keys, limit: int, found: list[int], idle: list[int], at: int):
        self.keys, self.limit, self.found, self.idle, self.at = keys, limit, found, idle, at
        self.watched = frozenset(found)
        self.dirty = False  # a touch or a release reached one of its blocks

    def holds_for(self, keys, limit: int, cached: dict, now: int, ttl_ns: int) -> bool:
        """Is this still the answer for (keys, limit) at `now`?"""
        if self.dirty or self.keys is not keys or self.limit != limit or now >= self.at + ttl_ns:
            return False
        return len(self.found) >= min(limit, len(keys)) or keys[len(self.found)] not in cached

    def touched(self, blocks) -> None:
        if not self.dirty and not self.watched.isdisjoint(blocks):
            self.dirty = True
