"""Plain eviction orders of a tier: least recently used first (`LruOrder`), first in first out (`FifoOrder`), or
nothing ever evicted (`KeepAll`).

They answer the same questions as `run_order.RunOrder` (which keys are held,
which go first, what moves to the end), over one ordered map: a storage tier
sees few distinct lists and no refresh of whole prompts, so it needs none of
RunOrder's runs.  Keys in flight, being read or pinned are passed over by an
eviction and keep their place.  With a TTL a key is immune for `ttl_ns` after
its last use (a hold, a hit, a landing): the oldest keys go first, so an
eviction stops at the first key still inside its window.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from itertools import compress, filterfalse


class LruOrder:
    __slots__ = ("_keys", "ttl_ns", "clock", "_used")

    def __init__(self, ttl_ns: int = 0, clock=None):
        self._keys: OrderedDict = OrderedDict()  # held keys, oldest first
        self.ttl_ns = ttl_ns  # 0: no TTL
        self.clock = clock  # what tells the current virtual time (`.now`), with a TTL
        self._used: dict = {}  # key -> its last use, with a TTL

    def _use(self, keys) -> None:
        if self.ttl_ns:
            self._used.update(dict.fromkeys(keys, self.clock.now))

    def holds(self, key) -> bool:
        return key in self._keys

    def held_run(self, keys: list, start: int, limit: int) -> int:
        """How many keys of keys[start:limit], from the first on, are held."""
        held, found = self._keys, 0
        for index in range(start, limit):
            if keys[index] not in held:
                break
            found += 1
        return found

    def lacking(self, keys: list) -> list:
        """The keys of `keys` not held, in order."""
        return list(filterfalse(self._keys.__contains__, keys))

    def held(self) -> list:
        return list(self._keys)

    def held_positions(self, keys: list) -> list[int]:
        """The indices of the held keys of `keys`, ascending."""
        return list(compress(range(len(keys)), map(self._keys.__contains__, keys)))

    def refresh(self, keys: list, upto: int) -> None:
        """The held keys of keys[:upto] become the newest, the first newest of all."""
        held = self._keys
        deque(map(held.move_to_end, filter(held.__contains__, reversed(keys[:upto]))), 0)  # (in C: once a key)
        if self.ttl_ns:
            self._use(key for key in keys[:upto] if key in held)

    def known_distinct(self, keys: list, upto: int) -> bool:
        return False

    def unheld(self, keys: list, place: bool, refresh: tuple | None) -> tuple:
        """(no token, the distinct `keys` not held, nothing they displace): what a reserve would add."""
        held = self._keys
        if len(keys) == 1:  # (a decode block's store, the usual: no iterator to set up)
            return None, [] if keys[0] in held else [keys[0]], None
        return None, list(filterfalse(held.__contains__, keys)), None

    def hold(self, token, new: list, olds, place: bool) -> int:
        """Hold `new` as the newest keys; returns where in-flight keys may sit (anywhere: 0)."""
        held = self._keys
        for key in new:  # (OrderedDict.update goes through the generic mapping protocol: twice as slow)
            held[key] = None
        if self.ttl_ns:
            self._use(new)
        return 0

    def adopt(self, keys: list) -> None:
        self._keys.update(dict.fromkeys(keys))
        self._use(keys)

    def append(self, keys: list) -> None:
        """Move held `keys` to the end, in this order."""
        if len(keys) < 16:  # (a short list: a plain loop is cheaper than setting up the map)
            move = self._keys.move_to_end
            for key in keys:
                move(key)
        else:
            deque(map(self._keys.move_to_end, keys), 0)
        if self.ttl_ns:
            self._use(keys)

    def evict(self, wanted: int, in_flight, reading: dict, pinned: dict, since: int = 0) -> list:
        """Drop up to `wanted` keys, oldest first, passing over those in flight, being read or pinned."""
        victims, ttl = [], self.ttl_ns
        if not ttl:  # the oldest `wanted` keys, when none is busy (the usual: busy keys are the newest)
            held = self._keys
            if wanted == 1 and held:  # (one decode block's room, the usual: one pop, no list to build)
                key = held.popitem(False)[0]
                if key not in in_flight and key not in reading and key not in pinned:
                    return [key]
                held[key] = None
                held.move_to_end(key, False)
            # popped first and checked after: walking an OrderedDict finds each key's node by a hash lookup, which
            # costs about as much as the pop itself; a busy key among them (rare) puts them all back in place
            popitem = held.popitem
            head = [popitem(False)[0] for _ in range(min(wanted, len(held)))]
            if in_flight.isdisjoint(head) and (not reading or reading.keys().isdisjoint(head)) and (
                    not pinned or pinned.keys().isdisjoint(head)):
                return head
            move = held.move_to_end
            for key in reversed(head):  # (back at the front, oldest first again)
                held[key] = None
                move(key, False)
        protected_from = self.clock.now - ttl if ttl else None
        for key in self._keys:
            if key in in_flight or key in reading or key in pinned:
                continue
            if ttl and self._used[key] > protected_from:
                break  # inside its TTL window, and every key after it is newer
            victims.append(key)
            if len(victims) == wanted:
                break
        for key in victims:
            del self._keys[key]
            if ttl:
                del self._used[key]
        return victims


class FifoOrder(LruOrder):
    """First in, first out: a key keeps the place its reserve gave it, whatever uses it later."""

    __slots__ = ()

    def refresh(self, keys: list, upto: int) -> None:
        pass  # (a use does not move a key, nor renew its TTL)

    def append(self, keys: list) -> None:
        pass


class KeepAll(LruOrder):
    """A tier that never evicts: a copy that finds it full is dropped (opal's tiers)."""

    __slots__ = ()

    def evict(self, wanted: int, in_flight, reading: dict, pinned: dict, since: int = 0) -> list:
        return []


ORDERS = {"lru": LruOrder, "fifo": FifoOrder, "none": KeepAll}
