"""G2: a host-memory block pool that follows one of vLLM's CPU-offload connectors.

A `HostPool` holds copies of full G1 blocks by key, in eviction order (first =
evicted next; `host_order.RunOrder` keeps that order).  An entry is `storing`
while its GPU->host copy is in flight and `ready` after; it may be being
loaded (host->GPU) by requests, or pinned.  Only ready, unloaded, unpinned
entries can be evicted.  What the connector
stores, how lookups treat in-flight copies and how eviction ranks entries
differ per connector: `ConnectorProfile` records those choices as data, and
the few behaviours that are not a plain flag live in the functions below.

A pool is either private to one DP rank (`dp_rank_local`) or shared by every
rank of the deployment (`cluster_shared`); its two `Link`s carry the copies
with per-rank and pool bandwidth limits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import filterfalse

from .run_order import RunOrder
from .in_flight import InFlight
from ..links.transfers import Link

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
    scan_from_block_zero: bool = False  # each admission offers from block 0 (blocks already in G2 are skipped)


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
        preemption_waits_for="all_transfers", scan_from_block_zero=True),
}


@dataclass
class HostPool:
    name: str
    scope: str
    capacity: int
    block_bytes: int
    profile: ConnectorProfile
    d2h: Link
    h2d: Link
    resident: int = 0  # keys held (ready or storing)
    loading: dict = field(default_factory=dict)  # key -> restores in flight reading it
    pinned: dict = field(default_factory=dict)  # key -> lookup pins
    stores: int = 0  # blocks whose store completed
    filled: dict = field(default_factory=dict)  # source tier -> blocks it brought in (not stores from the GPU)
    restores: int = 0  # blocks loaded to G1
    evictions: int = 0
    dropped_stores: int = 0  # blocks that found no room
    events: list | None = None  # (kind, keys) for KV events, when captured
    last_reserve_short: bool = False  # the last `reserve` ran out of room
    version: int = 0  # bumped by every change of contents, states or order (lets a repeated lookup be skipped)
    order: RunOrder = field(default_factory=RunOrder)  # which keys are held, and their eviction order
    _flight: InFlight = field(default_factory=InFlight, repr=False)

    @property
    def storing(self) -> set:
        """Held keys whose GPU->host copy is in flight (a snapshot)."""
        return set(self._flight.keys())

    # ------------------------------------------------------------------ contents
    def holds(self, key) -> bool:
        return self.order.holds(key)

    @property
    def entries(self) -> dict:
        """key -> READY | STORING of every held key (a snapshot)."""
        storing = self.storing
        return {key: STORING if key in storing else READY for key in self.order.held()}

    # ------------------------------------------------------------------ lookups
    def lookup(self, keys: list, start: int, limit: int) -> tuple[int, bool]:
        """(consecutive usable hits from `start`, deferred?) under this connector's rules."""
        held = self.order.held_run(keys, start, limit)
        if not held:
            return 0, False
        held = keys[start:start + held]
        storing, profile = self._flight.keys(), self.profile
        loading = self.loading if profile.loading_hit == "defer" else {}
        if not (storing.isdisjoint(held) and loading.keys().isdisjoint(held)):
            for hits, key in enumerate(held):  # the first held key a store or a load still uses
                if key in storing:
                    return hits, profile.in_flight_store_hit == "defer"
                if key in loading:
                    return hits, True
        return len(held), False

    def refresh(self, keys: list, upto: int | None = None) -> None:
        """Make the resident blocks of keys[:upto] the newest, its first block newest of all."""
        self.version += 1
        if upto is None:
            upto = len(keys)
        if upto > 0:
            self.order.refresh(keys, upto)

    def known_distinct(self, keys: list, upto: int) -> bool:
        """Is keys[:upto] known to list no key twice (a refresh of it found so)?"""
        return self.order.known_distinct(keys, upto)

    # ------------------------------------------------------------------ stores
    def reserve(self, keys: list, place: bool = True, distinct: bool = False, refresh: tuple | None = None,
                count_dropped: bool = True) -> list:
        """Admit new keys as `storing`, evicting to make room; returns the keys that got a slot.

        A connector that stores one pass late stores nothing unless everything fits (it retries next pass);
        the others drop what finds no room.  `place=False`: the caller refreshes `refresh` = (key list, upto),
        a range holding all of `keys`, right after, which places them.  `distinct`: no key is listed twice.
        `count_dropped=False`: what finds no room is not a dropped store (a G3 read takes what fits)."""
        if not distinct:
            keys = list(dict.fromkeys(keys))
        order = self.order
        token, new, olds = order.unheld(keys, place, refresh)
        self.last_reserve_short = False
        room = self.capacity - self.resident
        if len(new) > room:  # evict ready blocks that no restore reads and no lookup pins, oldest first
            flight = self._flight
            victims = order.evict(len(new) - room, flight, self.loading, self.pinned, flight.since)
            if victims:
                room += len(victims)
                self.resident -= len(victims)
                self.evictions += len(victims)
                if self.events is not None:
                    self.events.append(("Removed", victims))
            if len(new) > room:
                self.last_reserve_short = True
                # a connector that stores one pass late stores all of it next pass (vLLM stores what fits)
                keep = 0 if self.profile.store_delay_passes else max(room, 0)
                if count_dropped and not self.profile.store_delay_passes:
                    self.dropped_stores += len(new) - room
                new, olds = new[:keep], olds and olds[:keep]
        if new:
            self._flight.add(new, order.hold(token, new, olds, place))
            self.resident += len(new)
        self.version += 1
        return new

    def pin(self, keys: list) -> None:
        self.version += 1
        pinned = self.pinned
        for key in keys:
            pinned[key] = pinned.get(key, 0) + 1

    def unpin(self, keys: list, newest: bool = True) -> None:
        """Drop a pin; a lookup pin's blocks become the newest (simple_cpu), a KVCR protection's (`newest=False`)
        keep their place."""
        self.version += 1
        pinned = self.pinned
        for key in keys:
            left = pinned.get(key, 0) - 1
            if left > 0:
                pinned[key] = left
            else:
                pinned.pop(key, None)
        if newest:
            self.order.append(last_occurrences(list(filter(self.holds, keys))))

    def ready(self, key) -> bool:
        """Held, and not still being stored."""
        return key not in self._flight and self.order.holds(key)

    def stored(self, keys: list, source: str = "") -> None:
        """The copies of `keys` landed (storing entries are never evicted, so all are still here); from the GPU
        unless `source` names another tier ("g3", "peer"), which counts them as `filled_from_<source>`."""
        self.version += 1
        fifo = self.profile.eviction == "fifo"
        # all were storing (so held), as offload's stores are; else a key not held joins as ready, newest
        if not self._flight.land(keys):
            missing = list(filterfalse(self.holds, dict.fromkeys(keys)))
            if missing:
                self.order.adopt(missing)
                self.resident += len(missing)
                if not fifo:
                    self.order.append(missing)
        if fifo:  # first in, first out by store completion
            self.order.append(last_occurrences(keys))
        if source:
            self.filled[source] = self.filled.get(source, 0) + len(keys)
        else:
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
        loading = self.loading
        for key in keys:
            left = loading[key] - 1
            if left:
                loading[key] = left
            else:
                del loading[key]
        if self.profile.refresh_on_load_done:
            self.order.append(last_occurrences(list(filter(self.holds, keys))))
        self.restores += len(keys)

    def summary(self) -> dict:
        return {"scope": self.scope, "capacity_blocks": self.capacity, "block_bytes": self.block_bytes,
                "resident_blocks": self.resident, "stores": self.stores, "restores": self.restores,
                "evictions": self.evictions, "dropped_stores": self.dropped_stores,
                "d2h_bytes": self.d2h.bytes_moved, "h2d_bytes": self.h2d.bytes_moved,
                "d2h_bandwidth_wait_ms": self.d2h.waited_ns / 1e6,
                "h2d_bandwidth_wait_ms": self.h2d.waited_ns / 1e6, "connector": self.profile.name,
                **{f"filled_from_{source}": blocks for source, blocks in sorted(self.filled.items())}}


def last_occurrences(keys: list) -> list:
    """`keys` in the order that moving each to the end in turn leaves them."""
    if len(set(keys)) == len(keys):
        return keys
    return list(dict.fromkeys(reversed(keys)))[::-1]
