"""A least-recently-used tier order kept per trace block: `LruOrder`'s answers, one map entry per trace block.

A Mooncake trace's engine blocks inside trace block h have keys h * per + j
(`traffic/block_keys.trace_keys`; a request's output blocks run down from a
negative key, which the same arithmetic splits as well), and a prompt's
blocks are stored, landed, refreshed and evicted together.  `LruOrder` pays an
ordered-map node per key (a random place of a 32,000-key table: facts §73);
here membership is one entry per trace block (h -> the segment holding each
of its `per` keys, and how many it holds) and the order is a queue of
segments, a segment being the keys of one trace block that moved together,
in their order.  Moving keys makes a new segment and points their slots at
it; the old segment's slot no longer names it, so it is skipped (or dropped)
when the eviction reaches it.  Slot runs are read and written with list
slices and `count`, in C, so a trace block costs a few operations, not `per`.

Exact for any integer keys (the answers and the order are `LruOrder`'s, key
for key: tests/test_lru_blocks.py); fast only when keys run, so the builder
picks it for trace traffic (chain_build).  No TTL (that is `LruOrder`'s).
"""
from __future__ import annotations

from collections import deque
from itertools import groupby

_SLACK = 1024  # unnamed keys the queue may list beyond twice the held ones before it is compacted


class _Segment:
    """Keys of one trace block that moved together, oldest first; `lo:hi` spans their slots."""

    __slots__ = ("keys", "h", "lo", "hi")  # (compared by identity only: a slot names its segment)

    def __init__(self, keys: list, h: int, lo: int, hi: int):
        self.keys, self.h, self.lo, self.hi = keys, h, lo, hi


class LruBlocks:
    __slots__ = ("per", "_where", "_order", "_held", "_queued")

    def __init__(self, per: int):
        self.per = per  # engine blocks per trace block
        self._where: dict = {}  # h -> [segment of key h * per + j (None: not held) for j] + [keys held]
        self._order: deque = deque()  # segments, oldest first (some no longer named by their slots)
        self._held = 0  # keys held
        self._queued = 0  # keys listed by the queue's segments, named or not

    # ------------------------------------------------------------------ reading
    def holds(self, key) -> bool:
        h = key // self.per
        slots = self._where.get(h)
        return slots is not None and slots[key - h * self.per] is not None

    def held_run(self, keys: list, start: int, limit: int) -> int:
        """How many keys of keys[start:limit], from the first on, are held."""
        found, held = 0, self._held_flags(keys[start:limit])
        for flag in held:
            if not flag:
                break
            found += 1
        return found

    def lacking(self, keys: list) -> list:
        """The keys of `keys` not held, in order."""
        return [key for key, flag in zip(keys, self._held_flags(keys)) if not flag]

    def held(self) -> list:
        out = []
        for segment in self._order:
            out.extend(self._named(segment))
        return out

    def held_positions(self, keys: list) -> list[int]:
        """The indices of the held keys of `keys`, ascending."""
        return [index for index, flag in enumerate(self._held_flags(keys)) if flag]

    def known_distinct(self, keys: list, upto: int) -> bool:
        return False

    def _groups(self, keys: list) -> list:
        """(h, the keys) of each run of `keys` in one trace block."""
        per = self.per
        if not keys:
            return []
        h = keys[0] // per
        if len(keys) <= per and keys[-1] // per == h and (len(keys) < 3 or min(keys) // per == max(keys) // per):
            return [(h, list(keys))]  # (one trace block's keys: the usual store, landing or decode block)
        return [(h, list(group)) for h, group in groupby(keys, per.__rfloordiv__)]

    def _held_flags(self, keys: list) -> list:
        """Is each key of `keys` held?"""
        where, per, flags = self._where, self.per, []
        for h, group in self._groups(keys):
            slots = where.get(h)
            if slots is None:
                flags.extend([False] * len(group))
                continue
            base = h * per
            if None not in slots[min(group) - base:max(group) - base + 1]:  # (every slot the group spans is held)
                flags.extend([True] * len(group))
            else:
                flags.extend([slots[key - base] is not None for key in group])
        return flags

    def _named(self, segment: _Segment) -> list:
        """The keys of `segment` whose slots still name it, in its order."""
        slots = self._where.get(segment.h)
        if slots is None:
            return []
        keys = segment.keys
        if slots[segment.lo:segment.hi].count(segment) == len(keys):  # (its keys are distinct: all still named)
            return keys
        base = segment.h * self.per
        return [key for key in keys if slots[key - base] is segment]

    # ------------------------------------------------------------------ changes
    def unheld(self, keys: list, place: bool, refresh: tuple | None) -> tuple:
        """(no token, the distinct `keys` not held, nothing they displace): what a reserve would add."""
        return None, self.lacking(keys), None

    def hold(self, token, new: list, olds, place: bool) -> int:
        """Hold `new` (distinct, none held) as the newest keys; returns where in-flight keys may sit (anywhere: 0)."""
        self._place(new, True)
        return 0

    def adopt(self, keys: list) -> None:
        self._place(keys, True)

    def append(self, keys: list) -> None:
        """Move held `keys` to the end, in this order."""
        if len(set(keys)) != len(keys):  # (moving each in turn leaves them in the order of their last occurrences)
            keys = list(dict.fromkeys(reversed(keys)))[::-1]
        if not self._at_end(keys):
            self._place(keys, False)

    def _at_end(self, keys: list) -> bool:
        """Are `keys` the newest keys already, in this order (a landing right after its reserve)?"""
        order, count, tail = self._order, len(keys), []
        for segment in reversed(order):
            named = self._named(segment)
            if len(named) != len(segment.keys):
                return False
            tail.append(named)
            count -= len(named)
            if count <= 0:
                break
        return count == 0 and [key for named in reversed(tail) for key in named] == keys

    def refresh(self, keys: list, upto: int) -> None:
        """The held keys of keys[:upto] become the newest, the first newest of all."""
        head = keys[:upto]
        moved = [key for key, flag in zip(head, self._held_flags(head)) if flag]
        moved.reverse()
        self.append(moved)

    def _place(self, keys: list, new: bool, front: bool = False) -> None:
        """Queue `keys` (distinct) at the end (or the front) as segments their slots name; `new`: none was held."""
        where, per, order = self._where, self.per, self._order
        segments = []
        for h, group in self._groups(keys):
            slots = where.get(h)
            if slots is None:
                slots = where[h] = [None] * per + [0]
            base = h * per
            lo, hi = min(group) - base, max(group) - base + 1
            segment = _Segment(group, h, lo, hi)
            if hi - lo == len(group):
                slots[lo:hi] = [segment] * len(group)
            else:
                for key in group:
                    slots[key - base] = segment
            if new:
                slots[per] += len(group)
            segments.append(segment)
        if front:
            order.extendleft(reversed(segments))
        else:
            order.extend(segments)
        if new:
            self._held += len(keys)
        self._queued += len(keys)
        if self._queued > 3 * self._held + _SLACK:
            self._compact()

    def _compact(self) -> None:
        """Drop the segments no slot names any more (the queue lists each held key once again)."""
        keys = self.held()
        self._where, self._order, self._held, self._queued = {}, deque(), 0, 0
        self._place(keys, True)

    def evict(self, wanted: int, in_flight, reading: dict, pinned: dict, since: int = 0) -> list:
        """Drop up to `wanted` keys, oldest first, passing over those in flight, being read or pinned (they keep
        their place)."""
        victims, back = [], []  # `back`: keys taken off the queue's front that stay, in order
        where, per, order = self._where, self.per, self._order
        busy = (in_flight, reading.keys(), pinned.keys())
        while order and len(victims) < wanted:
            segment = order.popleft()
            self._queued -= len(segment.keys)
            named = self._named(segment)
            if not named:
                continue
            need = wanted - len(victims)
            if all(keys.isdisjoint(named) for keys in busy):
                if len(named) > need and not back:  # (the rest of a segment stays at the front, named as it is)
                    taken, segment.keys = named[:need], named[need:]
                    order.appendleft(segment)
                    self._queued += len(segment.keys)
                else:
                    taken = named[:need]
                    back.extend(named[need:])
            else:
                taken = []
                for key in named:
                    if len(taken) < need and not any(key in keys for keys in busy):
                        taken.append(key)
                    else:
                        back.append(key)
            if not taken:
                continue
            slots = where[segment.h]
            slots[per] -= len(taken)
            if not slots[per]:
                del where[segment.h]
            else:
                base = segment.h * per
                for key in taken:
                    slots[key - base] = None
            victims.extend(taken)
        self._held -= len(victims)
        if back:
            self._place(back, False, front=True)
        return victims
