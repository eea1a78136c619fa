"""One tier behind G1: a pool of block copies by key, configured by data (G2 host memory, G3 storage, ...).

A `Tier` holds copies of full blocks by key, in the order its `order` object
keeps (first = evicted next: `RunOrder` for offloading_v0_24, `LruOrder` for the v0.32 connectors and G3, `FifoOrder`,
`KeepAll`).  A key is in flight while the copy into the tier still moves (it
holds its slot and cannot be evicted) and ready after; it may be being read
out (by loads into G1 or reads into the tier above) or pinned.  Only ready,
unread, unpinned keys are evicted.  How lookups treat keys in flight or being
read, and where a landing key goes in the order, are `TierRules` (data); what
is offered to the tier and when is its store policy's business, not the
tier's.  Its two links carry the copies in (`write`) and out (`read`) with the
limits of its scope (one rank, one worker, or the whole cluster).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import filterfalse

from ..links.transfers import Link
from .in_flight import InFlight

READY, IN_FLIGHT = 0, 1


@dataclass(frozen=True)
class TierRules:
    """How a tier answers lookups and orders what lands in it."""

    in_flight_hit: str  # "defer": a hit still being copied in makes the request wait | "miss": the hits end there
    reading_hit: str  # "defer": a hit being read out makes the request wait | "read": it is a hit like any
    touch_hits: bool  # a lookup makes its hits the most recently used (storage)
    landing_newest: bool  # a landing copy becomes the newest key (else it keeps the place its reserve gave it)
    read_done_newest: bool  # a key whose read out completes becomes the newest
    all_or_nothing: bool  # a reserve that cannot fit all its keys takes none (the store is offered again later)
    track_writers: bool = False  # count reads by another worker than the one that wrote the key


# a storage tier (G3): a block still being written is no hit, one being read is; hits and landings are uses
STORAGE_RULES = TierRules(in_flight_hit="miss", reading_hit="read", touch_hits=True, landing_newest=True,
                          read_done_newest=False, all_or_nothing=False, track_writers=True)


@dataclass
class Tier:
    name: str
    scope: str  # as the config says it ("dp_rank_local", "worker_local", "cluster_shared", ...)
    capacity: int  # blocks
    block_bytes: int
    rules: TierRules
    write: Link  # copies into the tier
    read: Link  # copies out of it
    order: object  # which keys are held, and their eviction order (run_order.RunOrder, lru_order.LruOrder, ...)
    group_by: str = "index"  # the rank attribute naming its group on the links ("index": per rank, "worker")
    label: str = ""  # what outputs call it ("g2", "g3"): `filled_from_<label>` of the tier a read fills
    kv_event_tier: str | None = None  # the `tier` of its KV events ("host_pinned"); None: it emits none
    store_policy: str = ""  # what copies into it: a connector's name (the first tier) or "write_back"
    section: str = ""  # the summary section it reports in ...
    layout: str = ""  # ... and that section's layout (see outputs/sections.py)
    resident: int = 0  # keys held (ready or in flight)
    reading: dict = field(default_factory=dict)  # key -> reads out in flight
    pinned: dict = field(default_factory=dict)  # key -> pins
    landed_blocks: int = 0  # blocks copied in from the tier above (or from G1)
    filled: dict = field(default_factory=dict)  # source -> blocks another source copied in ("g3", "peer")
    reserve_jobs: int = 0  # reserves that admitted something
    reserved_blocks: int = 0
    lookup_hits: int = 0
    read_jobs: int = 0
    read_blocks: int = 0  # blocks whose read out started
    read_done_blocks: int = 0  # ... and completed
    evictions: int = 0
    dropped: int = 0  # blocks offered that found no room
    cross_worker_read_blocks: int = 0  # with track_writers
    bypassed: int = 0  # fills from this tier given up by the no-progress rule (see copy_jobs.BYPASS_ROUNDS)
    events: list | None = None  # (kind, keys) for KV events, when captured
    last_reserve_short: bool = False  # the last `reserve` ran out of room
    version: int = 0  # bumped by every change of contents, states or order (lets a repeated lookup be skipped)
    writer: dict = field(default_factory=dict)  # key -> worker that wrote it (with track_writers)
    evicted: list | None = None  # keys evicted since the owner last took them (None: not kept; opal's demotion)
    _flight: InFlight = field(default_factory=InFlight, repr=False)

    # ------------------------------------------------------------------ contents
    @property
    def in_flight(self) -> set:
        """Held keys whose copy into the tier is in flight (a snapshot)."""
        return set(self._flight.keys())

    def holds(self, key) -> bool:
        return self.order.holds(key)

    def lacking(self, keys: list) -> list:
        """The keys of `keys` the tier does not hold, in order."""
        return self.order.lacking(keys)

    def ready(self, key) -> bool:
        """Held, and not still being copied in."""
        return key not in self._flight and self.order.holds(key)

    @property
    def entries(self) -> dict:
        """key -> READY | IN_FLIGHT of every held key (a snapshot, eviction order first)."""
        flight = self.in_flight
        return {key: IN_FLIGHT if key in flight else READY for key in self.order.held()}

    def unevictable_bound(self) -> int:
        """At least as many as the held keys an eviction must skip now (in flight, being read, pinned)."""
        return len(self._flight.keys()) + len(self.reading) + len(self.pinned)

    # ------------------------------------------------------------------ lookups
    def lookup(self, keys: list, start: int, limit: int) -> tuple[int, bool]:
        """(consecutive usable hits from `start`, deferred?) under this tier's rules."""
        held = self.order.held_run(keys, start, limit)
        if not held:
            return 0, False
        held = keys[start:start + held]
        flight, rules = self._flight.keys(), self.rules
        reading = self.reading if rules.reading_hit == "defer" else {}
        found, deferred = len(held), False
        if not (flight.isdisjoint(held) and reading.keys().isdisjoint(held)):
            for hits, key in enumerate(held):  # the first held key a copy in or a read out still uses
                if key in flight:
                    found, deferred = hits, rules.in_flight_hit == "defer"
                    break
                if key in reading:
                    found, deferred = hits, True
                    break
        self.lookup_hits += found
        if rules.touch_hits and found:
            self.refresh(held, found)
        return found, deferred

    def refresh(self, keys: list, upto: int | None = None) -> None:
        """Make the held keys of keys[:upto] the newest, its first key newest of all."""
        self.version += 1
        if upto is None:
            upto = len(keys)
        if upto > 0:
            self.order.refresh(keys, upto)

    def known_distinct(self, keys: list, upto: int) -> bool:
        """Is keys[:upto] known to list no key twice (a refresh of it found so)?"""
        return self.order.known_distinct(keys, upto)

    # ------------------------------------------------------------------ copies in
    def reserve(self, keys: list, place: bool = True, distinct: bool = False, refresh: tuple | None = None,
                count_dropped: bool = True, writer: int | None = None) -> list:
        """Admit new keys as in flight, evicting to make room; returns the keys that got a slot.

        With `all_or_nothing` nothing is admitted unless everything fits (the store is offered again later);
        otherwise what finds no room is dropped.  `place=False`: the caller refreshes `refresh` = (key list,
        upto), a range holding all of `keys`, right after, which places them.  `distinct`: no key is listed
        twice.  `count_dropped=False`: what finds no room is not a dropped copy (a fill takes what fits)."""
        if not distinct and len(keys) > 1:
            keys = list(dict.fromkeys(keys))
        order = self.order
        token, new, olds = order.unheld(keys, place, refresh)
        self.last_reserve_short = False
        count = len(new)
        room = self.capacity - self.resident
        if count > room:  # evict ready keys that no read uses and no pin holds, oldest first
            flight = self._flight
            victims = order.evict(count - room, flight, self.reading, self.pinned, flight.since)
            if victims:
                gone = len(victims)
                room += gone
                self.resident -= gone
                self.evictions += gone
                if self.writer:
                    for key in victims:
                        self.writer.pop(key, None)
                if self.events is not None:
                    self.events.append(("Removed", victims))
                if self.evicted is not None:
                    self.evicted.extend(victims)
            if count > room:
                self.last_reserve_short = True
                keep = 0 if self.rules.all_or_nothing else max(room, 0)
                if count_dropped and not self.rules.all_or_nothing:
                    self.dropped += count - room
                new, olds = new[:keep], olds and olds[:keep]
                count = len(new)
        if count:
            self._flight.add(new, order.hold(token, new, olds, place))
            self.resident += count
            self.reserve_jobs += 1
            self.reserved_blocks += count
            if self.rules.track_writers:
                self.writer.update(dict.fromkeys(new, writer))
        self.version += 1
        return new

    def landed(self, keys: list, source: str = "") -> None:
        """The copies of `keys` landed (keys in flight are never evicted, so all are still here); from the tier
        above unless `source` names another ("g3", "peer"), counted as filled from it."""
        self.version += 1
        newest = self.rules.landing_newest
        # all were in flight (so held), as the store policies' copies are; else a key not held joins as ready
        if self._flight.land(keys):  # (then `keys` lists no key twice)
            if newest:
                self.order.append(keys)
        else:
            missing = list(filterfalse(self.holds, dict.fromkeys(keys)))
            if missing:
                self.order.adopt(missing)
                self.resident += len(missing)
                if not newest:
                    self.order.append(missing)
            if newest:
                self.order.append(last_occurrences(keys))
        if source:
            self.filled[source] = self.filled.get(source, 0) + len(keys)
        else:
            self.landed_blocks += len(keys)
        if self.events is not None and keys:
            self.events.append(("Stored", list(keys)))

    # ------------------------------------------------------------------ pins
    def pin(self, keys: list) -> None:
        self.version += 1
        pinned = self.pinned
        for key in keys:
            pinned[key] = pinned.get(key, 0) + 1

    def unpin(self, keys: list, newest: bool = True) -> None:
        """Drop a pin; a lookup pin's keys become the newest (simple_cpu), a KVCR protection's (`newest=False`)
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

    # ------------------------------------------------------------------ copies out
    def start_read(self, keys: list, reader: int | None = None) -> None:
        """Reads of `keys` out of the tier start (by worker `reader`, for writer tracking)."""
        self.version += 1
        self.read_jobs += 1
        self.read_blocks += len(keys)
        reading = self.reading
        for key in keys:
            reading[key] = reading.get(key, 0) + 1
        if self.rules.track_writers:
            writer = self.writer
            self.cross_worker_read_blocks += sum(1 for key in keys if writer.get(key, reader) != reader)

    def read_done(self, keys: list) -> None:
        self.version += 1
        reading = self.reading
        for key in keys:
            left = reading[key] - 1
            if left:
                reading[key] = left
            else:
                del reading[key]
        if self.rules.read_done_newest:
            self.order.append(last_occurrences(list(filter(self.holds, keys))))
        self.read_done_blocks += len(keys)


def last_occurrences(keys: list) -> list:
    """`keys` in the order that moving each to the end in turn leaves them."""
    if len(set(keys)) == len(keys):
        return keys
    return list(dict.fromkeys(reversed(keys)))[::-1]
