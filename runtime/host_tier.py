"""G2: a host-memory block pool that follows one of vLLM's CPU-offload connectors.

A `HostPool` holds copies of full G1 blocks by key, in eviction order (first =
evicted next).  An entry is `storing` while its GPU->host copy is in flight
and `ready` after; it may be being loaded (host->GPU) by requests, or pinned.
Only ready, unloaded, unpinned entries can be evicted.  What the connector
stores, how lookups treat in-flight copies and how eviction ranks entries
differ per connector: `ConnectorProfile` records those choices as data, and
the few behaviours that are not a plain flag live in the functions below.

A pool is either private to one DP rank (`dp_rank_local`) or shared by every
rank of the deployment (`cluster_shared`); its two `Link`s carry the copies
with per-rank and pool bandwidth limits.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import filterfalse

from .transfers import Link

READY, STORING = 0, 1


@dataclass(frozen=True)
class ConnectorProfile:
    name: str
    store_decode_blocks: bool  # decode blocks are stored too (else prompt blocks only)
    store_delay_passes: int  # 0: stored at the end of the pass that computed them; 1: one pass later
    store_rest_on_finish: bool  # a finishing request offers blocks it could not store earlier
    eviction: str  # "lru" | "lru_by_store_start" | "fifo"
    refresh_on_lookup: bool  # lookups (and stores) make the prompt's resident blocks the newest
    refresh_on_load_done: bool  # a completed load makes its blocks the newest
    in_flight_store_hit: str  # "defer" | "miss"
    loading_hit: str  # "defer" | "load"
    own_store_defers: bool  # a request whose own store is in flight is not looked up
    pin_before_load: bool
    g1_copy: str  # "new_owner_waits" | "hold_until_copied"
    preemption_waits_for: str  # "own_stores" | "all_transfers"


PROFILES = {
    "offloading_v0_24": ConnectorProfile(
        "offloading_v0_24", store_decode_blocks=False, store_delay_passes=0, store_rest_on_finish=False,
        eviction="lru", refresh_on_lookup=True, refresh_on_load_done=False, in_flight_store_hit="defer",
        loading_hit="defer", own_store_defers=True, pin_before_load=False, g1_copy="new_owner_waits",
        preemption_waits_for="own_stores"),
    "offloading_v0_32": ConnectorProfile(
        "offloading_v0_32", store_decode_blocks=False, store_delay_passes=0, store_rest_on_finish=True,
        eviction="lru_by_store_start", refresh_on_lookup=False, refresh_on_load_done=False,
        in_flight_store_hit="defer", loading_hit="defer", own_store_defers=True, pin_before_load=False,
        g1_copy="new_owner_waits", preemption_waits_for="own_stores"),
    "simple_cpu_v0_32": ConnectorProfile(
        "simple_cpu_v0_32", store_decode_blocks=True, store_delay_passes=1, store_rest_on_finish=True,
        eviction="fifo", refresh_on_lookup=False, refresh_on_load_done=True, in_flight_store_hit="miss",
        loading_hit="load", own_store_defers=False, pin_before_load=True, g1_copy="hold_until_copied",
        preemption_waits_for="all_transfers"),
}


class _Token:
    """Who placed a resident key in the eviction order: `entries[key] is` the run holding it.

    The token of a refresh `owner` (one key list on this pool) places `keys[covered-1], ..., keys[0]` (first
    key newest); each refresh of that list re-appends one run for it.  `lost` is set when a resident key of
    its range gets another token, so a refresh of an owner that lost none re-stamps nothing.  Stores, pins
    and loads append explicit key lists, each with a token of its own."""

    __slots__ = ("keys", "covered", "lost", "gen", "plain")

    def __init__(self, keys=None):
        self.keys = keys
        self.covered = 0
        self.lost = False
        self.gen = 0
        self.plain = True


class _Run:
    """One run of the eviction order: `token`'s keys from index `pos`, downward for an owner's refresh or
    upward for an explicit list; dead once its owner has refreshed again (`gen` moved on)."""

    __slots__ = ("token", "gen", "keys", "pos", "down")

    def __init__(self, token: _Token, gen: int, keys: list, pos: int, down: bool):
        self.token, self.gen, self.keys, self.pos, self.down = token, gen, keys, pos, down


_UNPLACED = _Token()  # reserved keys a refresh is about to place (`reserve(place=False)`)


@dataclass
class HostPool:
    name: str
    scope: str
    capacity: int
    block_bytes: int
    profile: ConnectorProfile
    d2h: Link
    h2d: Link
    # key -> the token of the run placing it in the eviction order (see below); the key is `storing` while
    # in `storing`, `ready` otherwise
    entries: dict = field(default_factory=dict)
    storing: set = field(default_factory=set)
    loading: dict = field(default_factory=dict)  # key -> restores in flight reading it
    pinned: dict = field(default_factory=dict)  # key -> lookup pins
    stores: int = 0  # blocks whose store completed
    restores: int = 0  # blocks loaded to G1
    evictions: int = 0
    dropped_stores: int = 0  # blocks that found no room
    events: list | None = None  # (kind, keys) for KV events, when captured
    last_reserve_short: bool = False  # the last `reserve` ran out of room
    version: int = 0  # bumped by every change of contents, states or order (lets a repeated lookup be skipped)
    # The eviction order (first = evicted next) is kept lazily: `_front` (entries an eviction scan passed but
    # could not evict, in order), then the runs of `_runs`, oldest first.  A key sits in the run whose token
    # `entries[key]` is; its occurrences in other runs are stale.  So a refresh moves a whole run at once, and
    # one that finds nothing of its owner's taken costs O(1) however long the prompt.
    _front: list = field(default_factory=list)
    _runs: deque = field(default_factory=deque)
    _owners: dict = field(default_factory=dict)  # id(key list) -> its owner token
    _kept: _Token = field(default_factory=_Token)  # the token of `_front`

    # ------------------------------------------------------------------ lookups
    def lookup(self, keys: list, start: int, limit: int) -> tuple[int, bool]:
        """(consecutive usable hits from `start`, deferred?) under this connector's rules."""
        entries, storing, loading, profile = self.entries, self.storing, self.loading, self.profile
        hits = 0
        for index in range(start, limit):
            key = keys[index]
            if key not in entries:
                break
            if key in storing:
                if profile.in_flight_store_hit == "defer":
                    return hits, True
                break
            if key in loading and profile.loading_hit == "defer":
                return hits, True
            hits += 1
        return hits, False

    def refresh(self, keys: list, upto: int | None = None, fresh: list = ()) -> None:
        """Make the resident blocks of keys[:upto] the newest, its first block newest of all.

        `fresh`: keys just reserved unplaced (`reserve(place=False)`), all among keys[:upto]."""
        self.version += 1
        if upto is None:
            upto = len(keys)
        entries = self.entries
        if upto <= 0:
            return
        owner = self._owners.get(id(keys))
        if owner is None or upto < owner.covered:  # (a shorter refresh: a new owner; the old run keeps the rest)
            owner = _Token(keys)
            owner.plain = len(set(keys)) == len(keys)
            self._owners[id(keys)] = owner
        if not owner.plain:  # a key listed twice takes the place of its first occurrence
            order = list(dict.fromkeys(keys[:upto]))
            order.reverse()
            self._append(list(filter(entries.__contains__, order)))
            return
        if fresh:
            entries.update(dict.fromkeys(fresh, owner))
        if owner.lost:  # take back what other runs took
            self._take(keys[:upto], owner)
            owner.lost = False
        elif upto > owner.covered:
            self._take(keys[owner.covered:upto], owner)
        elif self._runs:  # nothing taken, nothing new: a no-op if its run is still the newest, untouched
            last = self._runs[-1]
            if last.token is owner and last.gen == owner.gen and last.pos == upto - 1:
                return
        owner.covered = upto
        owner.gen += 1
        self._runs.append(_Run(owner, owner.gen, keys, upto - 1, True))

    def _take(self, keys, token: _Token) -> None:
        """Give the resident keys among `keys` to `token` (their old tokens learn they lost some)."""
        entries = self.entries
        resident = entries.keys() & keys
        if not resident:
            return
        old = set(map(entries.__getitem__, resident))
        old.discard(token)
        if old:
            for other in old:
                other.lost = True
            entries.update(dict.fromkeys(resident, token))

    def _append(self, keys: list) -> None:
        """Move resident, distinct `keys` to the end of the eviction order, in this order."""
        if keys:
            token = _Token()
            self._take(keys, token)
            self._runs.append(_Run(token, 0, keys, 0, False))

    # ------------------------------------------------------------------ stores
    def reserve(self, keys: list, place: bool = True) -> list:
        """Admit new keys as `storing`, evicting to make room; returns the keys that got a slot.

        A connector that stores one pass late stops at the first key without room (it retries next pass);
        the others drop what finds no room.  `place=False`: the caller passes the keys to a `refresh` right
        after, which places them."""
        entries = self.entries
        new = list(filterfalse(entries.__contains__, dict.fromkeys(keys)))
        self.last_reserve_short = False
        room = self.capacity - len(entries)
        if len(new) > room:
            room += self._evict(len(new) - room)
            if len(new) > room:
                self.last_reserve_short = True
                if not self.profile.store_delay_passes:
                    self.dropped_stores += len(new) - room
                new = new[:max(room, 0)]
        if new:
            self.storing.update(new)
            if place:
                token = _Token()
                entries.update(dict.fromkeys(new, token))
                self._runs.append(_Run(token, 0, new, 0, False))
            else:
                entries.update(dict.fromkeys(new, _UNPLACED))
        self.version += 1
        return new

    def _evict(self, wanted: int) -> int:
        """Evict up to `wanted` ready blocks that no restore reads and no lookup pins, oldest first."""
        storing, loading, pinned, entries = self.storing, self.loading, self.pinned, self.entries
        get = entries.get
        victims = []
        kept_token = self._kept
        front, kept = self._front, []
        for index, key in enumerate(front):
            if len(victims) >= wanted:
                kept.extend(front[index:])
                break
            if get(key) is not kept_token:
                continue  # moved since
            if key in storing or key in loading or key in pinned:
                kept.append(key)
            else:
                del entries[key]
                victims.append(key)
        runs, owners = self._runs, self._owners
        while len(victims) < wanted and runs:
            run = runs[0]
            token = run.token
            if run.gen != token.gen:
                runs.popleft()
                continue
            keys, pos = run.keys, run.pos
            done = True
            for index in (range(pos, -1, -1) if run.down else range(pos, len(keys))):
                key = keys[index]
                if get(key) is not token:
                    continue  # gone or placed by a later run
                if key in storing or key in loading or key in pinned:
                    entries[key] = kept_token
                    token.lost = True
                    kept.append(key)
                else:
                    del entries[key]
                    victims.append(key)
                    if len(victims) >= wanted:
                        run.pos = index - 1 if run.down else index + 1
                        done = False
                        break
            if done:
                runs.popleft()
                if token.keys is not None and owners.get(id(token.keys)) is token:
                    del owners[id(token.keys)]
        self._front = kept
        self.version += 1
        self.evictions += len(victims)
        if self.events is not None and victims:
            self.events.append(("Removed", victims))
        return len(victims)

    def pin(self, keys: list) -> None:
        self.version += 1
        pinned = self.pinned
        for key in keys:
            pinned[key] = pinned.get(key, 0) + 1

    def unpin(self, keys: list) -> None:
        """Drop a lookup pin; the blocks become the newest (simple_cpu)."""
        self.version += 1
        pinned, entries = self.pinned, self.entries
        for key in keys:
            left = pinned.get(key, 0) - 1
            if left > 0:
                pinned[key] = left
            else:
                pinned.pop(key, None)
        self._append(_last_occurrences(list(filter(entries.__contains__, keys))))

    def stored(self, keys: list) -> None:
        """The copies of `keys` landed (storing entries are never evicted, so all are still here)."""
        self.version += 1
        self.storing.difference_update(keys)
        if self.profile.eviction == "fifo":  # first in, first out by store completion
            self._append(_last_occurrences(keys))
        self.stores += len(keys)
        if self.events is not None and keys:
            self.events.append(("Stored", list(keys)))

    # ------------------------------------------------------------------ loads
    def start_load(self, keys: list) -> None:
        self.version += 1
        loading = self.loading
        for key in keys:
            loading[key] = loading.get(key, 0) + 1

    def loaded(self, keys: list) -> None:
        self.version += 1
        loading, entries = self.loading, self.entries
        for key in keys:
            left = loading[key] - 1
            if left:
                loading[key] = left
            else:
                del loading[key]
        if self.profile.refresh_on_load_done:
            self._append(_last_occurrences(list(filter(entries.__contains__, keys))))
        self.restores += len(keys)

    def summary(self) -> dict:
        return {"scope": self.scope, "capacity_blocks": self.capacity, "block_bytes": self.block_bytes,
                "resident_blocks": len(self.entries), "stores": self.stores, "restores": self.restores,
                "evictions": self.evictions, "dropped_stores": self.dropped_stores,
                "d2h_bytes": self.d2h.bytes_moved, "h2d_bytes": self.h2d.bytes_moved,
                "d2h_bandwidth_wait_ms": self.d2h.waited_ns / 1e6,
                "h2d_bandwidth_wait_ms": self.h2d.waited_ns / 1e6, "connector": self.profile.name}


def _last_occurrences(keys: list) -> list:
    """`keys` in the order that moving each to the end in turn leaves them."""
    if len(set(keys)) == len(keys):
        return keys
    return list(dict.fromkeys(reversed(keys)))[::-1]
