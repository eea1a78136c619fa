"""G1's cached-key map kept per aligned group of keys: one dict entry per trace block, not per engine block.

A Mooncake request's keys are runs (`trace_keys`: engine block j of trace id h
is h * (T / bs) + j), so the 32 keys of one 512-token trace block at block
size 16 are one aligned group of 2**SHIFT keys, registered together and
evicted mostly together.  `KeyMap` keeps, for each group, a list of its slots
(the block a key maps to, or None): a registration of a run of consecutive
keys assigns one slice per group, where a dict of keys paid an insertion per
engine block (and, at eviction, a deletion per engine block: 6.5 M of each at
block 16, facts §47).  It answers `BlockPool.cached`'s readers exactly as the
dict did: `len`, `in`, `get`, `[]`, items.

Groups emptied by evictions are not deleted one by one (that would put a
count per group on every eviction): they are swept when the groups outnumber
twice those a full map could need, so memory stays bounded by the pool.
"""
from __future__ import annotations

SHIFT = 5  # 2**SHIFT keys a group: a 512-token trace block at block 16 (smaller blocks: several groups)
WIDTH = 1 << SHIFT
MASK = WIDTH - 1
EMPTY = [None] * WIDTH  # (compared and copied, never changed)


class KeyMap:
    """key -> block, as groups of WIDTH aligned keys (`groups[key >> SHIFT][key & MASK]`); `size` keys mapped."""

    __slots__ = ("groups", "size", "sweep_at")

    def __init__(self):
        self.groups: dict[int, list] = {}
        self.size = 0
        self.sweep_at = 4096  # (groups past which empty ones are swept: reset after each sweep)

    # ------------------------------------------------------------------ dict's reading interface
    def __len__(self) -> int:
        return self.size

    def get(self, key: int, default=None):
        slots = self.groups.get(key >> SHIFT)
        if slots is None:
            return default
        block = slots[key & MASK]
        return default if block is None else block

    def __contains__(self, key: int) -> bool:
        slots = self.groups.get(key >> SHIFT)
        return slots is not None and slots[key & MASK] is not None

    def __getitem__(self, key: int) -> int:
        block = self.get(key)
        if block is None:
            raise KeyError(key)
        return block

    def items(self):
        """(key, block) pairs, in key order."""
        for group in sorted(self.groups):
            base = group << SHIFT
            for offset, block in enumerate(self.groups[group]):
                if block is not None:
                    yield base + offset, block

    def keys(self):
        return (key for key, _ in self.items())

    __iter__ = keys

    def __eq__(self, other) -> bool:
        return dict(self.items()) == (dict(other.items()) if isinstance(other, KeyMap) else other)

    __hash__ = None

    # ------------------------------------------------------------------ writes
    def __setitem__(self, key: int, block: int) -> None:
        slots = self.slots(key >> SHIFT)
        if slots[key & MASK] is None:
            self.size += 1
        slots[key & MASK] = block

    def __delitem__(self, key: int) -> None:
        slots = self.groups.get(key >> SHIFT)
        if slots is None or slots[key & MASK] is None:
            raise KeyError(key)
        slots[key & MASK] = None
        self.size -= 1

    def slots(self, group: int) -> list:
        """`group`'s slots, made empty if it has none (sweeping empty groups when they pile up)."""
        slots = self.groups.get(group)
        if slots is None:
            if len(self.groups) >= self.sweep_at:
                self.sweep()
            slots = self.groups[group] = list(EMPTY)
        return slots

    def sweep(self) -> None:
        """Drop the groups whose keys were all evicted (their order in the dict does not matter: lookups only)."""
        groups = self.groups
        for group in [group for group, slots in groups.items() if slots == EMPTY]:  # (stops at a block)
            del groups[group]
        self.sweep_at = max(4096, 2 * len(groups))
