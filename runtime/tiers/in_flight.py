"""The keys a G2 pool is still storing (their GPU->host copies in flight), kept by the batch `reserve` admitted.

A store usually lands as the very list `reserve` returned, so landing it
costs O(1); `since` tells an eviction scan which runs can place a storing key
at all (the oldest batch's), so that older runs need not ask.  The set of all
storing keys is kept as batches come and go (a batch's keys are held by no
other batch: `reserve` admits only keys the tier does not hold), so that an
eviction's "is this key storing?" costs O(1) however many keys are storing.
"""
from __future__ import annotations

from operator import itemgetter

_NEVER = 1 << 62
_since = itemgetter(2)


class InFlight:
    """The keys whose store is in flight, by the batch `reserve` admitted them in: a store that lands as that same
    list (offload's do) costs O(1), and `since` is the `seq` of the oldest run that can place one of them (an
    eviction scan of older runs need not ask)."""

    __slots__ = ("batches", "since", "_keys")

    def __init__(self):
        self.batches: dict = {}  # id(list reserve returned) -> (that list, its keys then, the `seq` they are placed from)
        self.since = _NEVER
        self._keys: set = set()  # all of them (batches never share a key)

    def add(self, keys: list, since: int) -> None:
        batches = self.batches
        if id(keys) in batches:  # (a caller's list again, changed since: the batch it was goes on as its copy)
            old = batches.pop(id(keys))
            batches[id(old[1])] = (old[1], old[1], old[2])
        batches[id(keys)] = (keys, keys[:], since)
        if since < self.since:
            self.since = since
        self._keys.update(keys)

    def land(self, keys: list) -> bool:
        """`keys` stop storing; were they all storing, and distinct?"""
        batches = self.batches
        batch = batches.pop(id(keys), None)  # (batches keep their list: this is it)
        if batch is not None:
            if keys == batch[1]:
                self._keys.difference_update(keys)
                if batch[2] == self.since:
                    self.since = min(map(_since, batches.values()), default=_NEVER)
                return True
            batches[id(keys)] = batch
        landed = self._keys.intersection(keys)
        self._keys.difference_update(landed)
        for ident, (_, left, since) in list(batches.items()):
            if not landed.isdisjoint(left):
                del batches[ident]
                left = [key for key in left if key not in landed]
                if left:
                    batches[id(left)] = (left, left, since)
        self.since = min(map(_since, batches.values()), default=_NEVER)
        return len(landed) == len(keys)

    def keys(self) -> set:
        return self._keys

    def __contains__(self, key) -> bool:
        return key in self._keys

    def isdisjoint(self, keys) -> bool:
        return self._keys.isdisjoint(keys)
