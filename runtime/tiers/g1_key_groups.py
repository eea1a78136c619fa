"""G1's cached-key map kept by ranges of keys in aligned groups (g1_extents.ExtentPool's `cached`).

A cached key maps to the block id holding it.  Trace keys run (block j of trace
id h is h * per + j, runtime/traffic/block_keys.py) and a request's output keys
are one descending range, and the pool hands a request's blocks consecutive ids,
so a registration's keys and ids are usually two ranges.  The map keeps, per
aligned group of keys (key >> GROUP_BITS: one 512-token trace block at block
16), a short list of parts [lo, hi, id, step]: keys lo..hi-1 are cached in
blocks id + (key - lo) * step (step +1 or -1).  Registering or evicting a run
costs one step per group it touches, not one per key; looking up a prefix
compares a slice of the caller's keys with a range in C, a group at a time.

It answers the readers of BlockPool's dict (`len`, `in`, `get`, `[]`, `items`);
keys that do not run (synthetic XXH3 keys) are still correct, one part a key.
"""
from __future__ import annotations

from bisect import bisect_right
from operator import eq

from ..traffic.block_keys import KeyRuns

GROUP_BITS = 5


def run_length(keys, i: int, n: int, first: int, d: int) -> int:
    """How many of keys[i:i + n] continue first, first + d, ... (keys[i] == first; n >= 1): read from a KeyRuns'
    runs (a few steps a run), else found in C (an int made a key)."""
    if n == 1:
        return n
    if type(keys) is KeyRuns:
        return _runs_length(keys, i, i + n, first, d)
    if keys[i:i + n] == list(range(first, first + d * n, d)):
        return n
    return list(map(eq, keys[i:i + n], range(first, first + d * n, d))).index(False)


def _runs_length(keys: KeyRuns, i: int, limit: int, expect: int, d: int) -> int:
    """run_length from the runs: each run inside keys[i:limit] continues the expected key whole (its step is d), in
    its first key only (its step is -d), or not at all."""
    starts, size, pos = keys.starts, len(keys), i
    j = bisect_right(starts, pos)
    while pos < limit:
        if keys[pos] != expect:
            break
        end = starts[j] if j < len(starts) else size
        if end - pos > 1 and keys[pos + 1] != expect + d:
            pos += 1  # (only its first key continues)
            break
        end = end if end < limit else limit
        expect += d * (end - pos)
        pos = end
        j += 1
    return pos - i


def _join(parts: list, lo: int, hi: int, x: int, step: int) -> None:
    """Add keys lo..hi-1 in blocks x + (key - lo) * step to a group's `parts`: continuing a part of the same blocks
    up or down when one meets them (a decode's keys join its run; a one-key part takes the new step), else as a
    part of their own."""
    for part in parts:
        p_lo, p_hi, p_at, p_step = part
        if p_step != step and p_hi - p_lo > 1:
            continue
        if p_hi == lo and p_at + (lo - p_lo) * step == x:
            part[1], part[3] = hi, step
            return
        if p_lo == hi and x + (hi - lo) * step == p_at:
            part[0], part[2], part[3] = lo, x, step
            return
    parts.append([lo, hi, x, step])


class KeyGroups:
    __slots__ = ("groups", "count")

    def __init__(self):
        self.groups: dict[int, list[list[int]]] = {}  # group -> its parts [lo, hi, id of lo, id step per key]
        self.count = 0  # cached keys

    # ------------------------------------------------------------------ a dict's readers
    def __len__(self) -> int:
        return self.count

    def get(self, key: int, default=None):
        parts = self.groups.get(key >> GROUP_BITS)
        if parts:
            for lo, hi, at, step in parts:
                if lo <= key < hi:
                    return at + (key - lo) * step
        return default

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key: int) -> int:
        block = self.get(key)
        if block is None:
            raise KeyError(key)
        return block

    def items(self):
        for parts in self.groups.values():
            for lo, hi, at, step in parts:
                for key in range(lo, hi):
                    yield key, at + (key - lo) * step

    def overlaps(self, a: int, b: int) -> bool:
        """Is any key of a..b-1 cached?"""
        groups = self.groups
        for g in range(a >> GROUP_BITS, ((b - 1) >> GROUP_BITS) + 1):
            parts = groups.get(g)
            if parts:
                for part in parts:
                    if part[0] < b and part[1] > a:
                        return True
        return False

    # ------------------------------------------------------------------ changes
    def add(self, a: int, b: int, at: int, step: int) -> None:
        """Cache keys a..b-1 (none cached yet) in blocks at + (key - a) * step."""
        groups = self.groups
        self.count += b - a
        last = (b - 1) >> GROUP_BITS
        g = a >> GROUP_BITS
        while g <= last:
            lo = a if a > g << GROUP_BITS else g << GROUP_BITS
            hi = (g + 1) << GROUP_BITS
            if hi > b:
                hi = b
            x = at + (lo - a) * step
            parts = groups.get(g)
            if parts is None:
                groups[g] = [[lo, hi, x, step]]
            else:
                _join(parts, lo, hi, x, step)
            g += 1

    def add_one(self, key: int, block: int, step: int) -> bool:
        """Cache `key` in `block` unless it is cached (False), continuing the part of the blocks below it (a decode's
        key, `step` its id step per key) when there is one."""
        g = key >> GROUP_BITS
        parts = self.groups.get(g)
        if parts is None:
            self.groups[g] = [[key, key + 1, block, step]]
            self.count += 1
            return True
        for lo, hi, at, _ in parts:
            if lo <= key < hi:
                return False
        _join(parts, key, key + 1, block, step)
        self.count += 1
        return True

    def remove_one(self, key: int) -> None:
        """Forget `key` (cached)."""
        g = key >> GROUP_BITS
        parts = self.groups[g]
        self.count -= 1
        for i, part in enumerate(parts):
            lo, hi, at, step = part
            if lo <= key < hi:
                if hi - lo == 1:
                    del parts[i]
                    if not parts:
                        del self.groups[g]
                elif key == lo:
                    part[0], part[2] = key + 1, at + step
                elif key == hi - 1:
                    part[1] = key
                else:
                    part[1] = key
                    parts.append([key + 1, hi, at + (key + 1 - lo) * step, step])
                return

    def remove(self, a: int, b: int) -> None:
        """Forget keys a..b-1 (all cached)."""
        groups = self.groups
        self.count -= b - a
        for g in range(a >> GROUP_BITS, ((b - 1) >> GROUP_BITS) + 1):
            parts = groups[g]
            for i in range(len(parts) - 1, -1, -1):
                part = parts[i]
                lo, hi, at, step = part
                if lo >= b or hi <= a:
                    continue
                if a <= lo:
                    if hi <= b:
                        del parts[i]
                    else:
                        part[0], part[2] = b, at + (b - lo) * step
                elif hi <= b:
                    part[1] = a
                else:  # (a hole inside the part: kept as two)
                    part[1] = a
                    parts.append([b, hi, at + (b - lo) * step, step])
            if not parts:
                del groups[g]

    # ------------------------------------------------------------------ lookups
    def match(self, keys, limit: int) -> list[int]:
        """The blocks of the longest cached prefix of `keys`, at most `limit` (BlockPool.match)."""
        groups, out = self.groups, []
        n = len(keys) if len(keys) < limit else limit
        i = 0
        while i < n:
            key = keys[i]
            parts = groups.get(key >> GROUP_BITS)
            if parts is None:
                break
            for lo, hi, at, step in parts:
                if lo <= key < hi:
                    break
            else:
                break
            block = at + (key - lo) * step
            if i + 1 < n and keys[i + 1] == key - 1:
                room = key - lo + 1
                d = -1
            else:
                room = hi - key
                d = 1
            r = run_length(keys, i, room if room < n - i else n - i, key, d)
            out.extend(range(block, block + step * d * r, step * d))
            i += r
        return out
