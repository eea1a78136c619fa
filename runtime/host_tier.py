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
from itertools import compress, filterfalse, repeat
from operator import is_, is_not

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


class _Token:
    """Who placed a held key in the eviction order: `_slot[key] is` the token of the run holding it.

    An owner token stands for one key list on this pool: each refresh of keys[:covered] re-appends one run
    `keys[covered-1], ..., keys[0]` (first key newest).  It claims every key of that range: a held one maps
    to the token, one not held to the token's `ghost` (a key stored later is placed by a later run anyway,
    but the owner must hear of it).  Stores, pins and loads append explicit lists of held keys, each with a
    token of its own.  `stolen` lists keys of an owner's range claimed elsewhere since its last refresh, so
    that the next one claims back just those (after an eviction scan of its run dropped claims, `partial`,
    it claims the whole range again).  A run's scan drops the claims it passes and puts back those of keys
    other runs placed since, so a finished run leaves nothing behind."""

    __slots__ = ("keys", "covered", "stolen", "gen", "plain", "partial", "ghost")

    def __init__(self, keys=None, plain: bool = True, stolen: list | None = None):
        self.keys = keys
        self.covered = 0
        self.stolen = stolen
        self.gen = 0
        self.plain = plain
        self.partial = False
        self.ghost = _Ghost(self)


class _Ghost:
    """A claim on a key that is not held (see `_Token`)."""

    __slots__ = ("token",)

    def __init__(self, token: _Token):
        self.token = token


class _Run:
    """One run of the eviction order: `token`'s keys from index `pos`, downward for an owner's refresh or
    upward for an explicit list; dead once its owner has refreshed again (`gen` moved on)."""

    __slots__ = ("token", "gen", "keys", "pos", "down")

    def __init__(self, token: _Token, gen: int, keys: list, pos: int, down: bool):
        self.token, self.gen, self.keys, self.pos, self.down = token, gen, keys, pos, down


_COMPACT_FLOOR = 1 << 12


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
    storing: set = field(default_factory=set)  # held keys whose GPU->host copy is in flight
    loading: dict = field(default_factory=dict)  # key -> restores in flight reading it
    pinned: dict = field(default_factory=dict)  # key -> lookup pins
    stores: int = 0  # blocks whose store completed
    restores: int = 0  # blocks loaded to G1
    evictions: int = 0
    dropped_stores: int = 0  # blocks that found no room
    events: list | None = None  # (kind, keys) for KV events, when captured
    last_reserve_short: bool = False  # the last `reserve` ran out of room
    version: int = 0  # bumped by every change of contents, states or order (lets a repeated lookup be skipped)
    # Contents and eviction order (first = evicted next) in one map, kept lazily: `_slot[key]` is the token
    # of the run placing a held key, or the ghost of an owner claiming a key not held.  The order is `_front`
    # (held keys an eviction scan passed but could not evict, in order), then the runs of `_runs`, oldest
    # first, each key in the run of its token (its occurrences in other runs are stale).  So a refresh moves
    # a whole run at once, and one whose owner lost nothing since costs O(1) however long the prompt.
    _slot: dict = field(default_factory=dict)
    _front: list = field(default_factory=list)
    _runs: deque = field(default_factory=deque)
    _compact_at: int = _COMPACT_FLOOR  # drop superseded runs when `_runs` grows past this
    _owners: dict = field(default_factory=dict)  # id(key list) -> its owner token
    _kept: _Token = field(default_factory=_Token)  # the token of `_front`

    # ------------------------------------------------------------------ contents
    def holds(self, key) -> bool:
        return type(self._slot.get(key)) is _Token

    @property
    def entries(self) -> dict:
        """key -> READY | STORING of every held key (a snapshot)."""
        storing = self.storing
        return {key: STORING if key in storing else READY for key, claim in self._slot.items()
                if type(claim) is _Token}

    # ------------------------------------------------------------------ lookups
    def lookup(self, keys: list, start: int, limit: int) -> tuple[int, bool]:
        """(consecutive usable hits from `start`, deferred?) under this connector's rules."""
        get, storing, loading, profile = self._slot.get, self.storing, self.loading, self.profile
        hits = 0
        for index in range(start, limit):
            key = keys[index]
            if type(get(key)) is not _Token:
                break
            if key in storing:
                if profile.in_flight_store_hit == "defer":
                    return hits, True
                break
            if key in loading and profile.loading_hit == "defer":
                return hits, True
            hits += 1
        return hits, False

    def refresh(self, keys: list, upto: int | None = None) -> None:
        """Make the resident blocks of keys[:upto] the newest, its first block newest of all."""
        self.version += 1
        if upto is None:
            upto = len(keys)
        if upto <= 0:
            return
        owner = self._owners.get(id(keys))
        if owner is None or upto < owner.covered or not owner.covered:
            # a new owner (a shorter refresh gets one too: the old run keeps the rest), or one a reserve made
            if owner is None or owner.covered:
                owner = self._owners[id(keys)] = _Token(keys, True, [])
            part = keys[:upto]
            if len(part) == upto and self._claim(part, owner, True):
                return self._place(owner, upto)
            owner.plain = False
        elif owner.plain and upto > owner.covered and len(set(keys[:upto])) < upto:
            owner.plain = False
        if not owner.plain:  # a key listed twice takes the place of its first occurrence
            order = list(dict.fromkeys(keys[:upto]))
            order.reverse()
            self._append(list(filter(self.holds, order)))
            return
        stolen = owner.stolen
        if owner.partial:  # its run's scan dropped claims: claim the whole range again
            owner.stolen, owner.partial = [], False
            self._claim(keys[:upto], owner)
        else:
            if stolen:  # claim back what other runs took
                owner.stolen = []
                self._claim(list(dict.fromkeys(stolen)), owner)
            if upto > owner.covered:
                self._claim(keys[owner.covered:upto], owner)
            elif not stolen and self._runs:  # nothing lost or new: a no-op if its run is the newest, untouched
                last = self._runs[-1]
                if last.token is owner and last.gen == owner.gen and last.pos == upto - 1:
                    return
        self._place(owner, upto)

    def _place(self, owner: _Token, upto: int) -> None:
        owner.covered = upto
        owner.gen += 1
        self._push(_Run(owner, owner.gen, owner.keys, upto - 1, True))

    def known_distinct(self, keys: list, upto: int) -> bool:
        """Is keys[:upto] known to list no key twice (a refresh of it found so)?"""
        owner = self._owners.get(id(keys))
        return owner is not None and owner.keys is keys and owner.plain and owner.covered >= upto

    def _claim(self, keys: list, token: _Token, check_distinct: bool = False) -> bool:
        """Claim `keys` for owner `token`: held ones go to it, the others get its ghost; owners that claimed
        some learn which.  `keys` must be distinct, unless `check_distinct` (`token`'s ghost claims nothing
        yet): then a list naming a key twice is left unclaimed and False returned."""
        slot = self._slot
        ghost = token.ghost
        before = len(slot)
        # one probe per key: the keys nobody held or claimed are claimed by this call already
        olds = list(map(slot.setdefault, keys, repeat(ghost)))
        if len(slot) - before == len(olds):
            return True
        added = len(slot) - before
        found = list(map(is_not, olds, repeat(ghost)))  # held or claimed by others or by `token` itself
        known, olds = list(compress(keys, found)), list(compress(olds, found))
        # (with `check_distinct`, a key returning the ghost but not added to `_slot` is a repeat)
        if check_distinct and (len(keys) - len(known) > added or len(set(known)) < len(known)):
            for key in keys:  # undo the claims this call made
                if slot.get(key) is ghost:
                    del slot[key]
            return False
        taken, lost = [], []
        for key, old in zip(known, olds):
            if old is not token:
                slot[key] = token if type(old) is _Token else ghost
                taken.append(key)
                lost.append(old)
        if taken:
            _notify(lost, taken, token)
        return True

    def _push(self, run: _Run) -> None:
        runs = self._runs
        runs.append(run)
        if len(runs) > self._compact_at:  # (a pool that rarely evicts would keep every superseded run)
            self._runs = runs = deque(run for run in runs if run.gen == run.token.gen)
            self._compact_at = max(2 * len(runs), _COMPACT_FLOOR)

    def _append(self, keys: list) -> None:
        """Move held, distinct `keys` to the end of the eviction order, in this order."""
        if keys:
            token = _Token()
            slot = self._slot
            _notify(list(map(slot.__getitem__, keys)), keys, token)
            slot.update(dict.fromkeys(keys, token))
            self._push(_Run(token, 0, keys, 0, False))

    # ------------------------------------------------------------------ stores
    def reserve(self, keys: list, place: bool = True, distinct: bool = False, refresh: tuple | None = None) -> list:
        """Admit new keys as `storing`, evicting to make room; returns the keys that got a slot.

        A connector that stores one pass late stores nothing unless everything fits (it retries next pass);
        the others drop what finds no room.  `place=False`: the caller refreshes `refresh` = (key list, upto),
        a range holding all of `keys`, right after, which places them.  `distinct`: no key is listed twice."""
        if not distinct:
            keys = list(dict.fromkeys(keys))
        slot = self._slot
        token = _Token() if place else self._owner(*refresh)
        olds = list(map(slot.get, keys))
        if olds.count(token.ghost) == len(olds):  # all claimed by the refreshing owner, none held (the usual)
            new = keys
        else:
            fresh = list(map(is_not, map(type, olds), repeat(_Token)))
            new, olds = list(compress(keys, fresh)), list(compress(olds, fresh))
        self.last_reserve_short = False
        room = self.capacity - self.resident
        if len(new) > room:
            room += self._evict(len(new) - room)
            if len(new) > room:
                self.last_reserve_short = True
                # a connector that stores one pass late stores all of it next pass (vLLM stores what fits)
                keep = 0 if self.profile.store_delay_passes else max(room, 0)
                if not self.profile.store_delay_passes:
                    self.dropped_stores += len(new) - room
                new, olds = new[:keep], olds[:keep]
        if new:
            if olds.count(token.ghost) < len(olds):
                _notify(olds, new, token)  # (claims the scan dropped meanwhile only make an owner claim more)
            placed = dict.fromkeys(new, token)
            slot.update(placed)
            self.storing.update(placed)  # (from a dict: its hashes are reused)
            self.resident += len(new)
            if place:
                self._push(_Run(token, 0, new, 0, False))
        self.version += 1
        return new

    def _owner(self, keys: list, upto: int) -> _Token:
        """The owner the coming refresh of keys[:upto] uses (made now if need be, with nothing claimed)."""
        owner = self._owners.get(id(keys))
        if owner is None or upto < owner.covered:
            owner = self._owners[id(keys)] = _Token(keys, len(set(keys[:upto])) == upto, [])
        return owner

    def _evict(self, wanted: int) -> int:
        """Evict up to `wanted` ready blocks that no restore reads and no lookup pins, oldest first."""
        slot, storing, loading, pinned = self._slot, self.storing, self.loading, self.pinned
        pop = slot.pop
        busy = loading or pinned
        victims = []
        kept_token = self._kept
        front, kept = self._front, []
        for index, key in enumerate(front):
            if len(victims) >= wanted:
                kept.extend(front[index:])
                break
            if slot.get(key) is not kept_token:
                continue  # moved since
            if key in storing or key in loading or key in pinned:
                kept.append(key)
            else:
                del slot[key]
                victims.append(key)
        runs, owners = self._runs, self._owners
        while len(victims) < wanted and runs:
            run = runs[0]
            token = run.token
            if run.gen != token.gen:
                runs.popleft()
                continue
            keys, pos = run.keys, run.pos
            need = wanted - len(victims)  # a chunk of `need` keys cannot hold more victims than wanted
            if run.down:
                low = pos - need + 1 if pos >= need else 0
                chunk = keys[low:pos + 1]
                chunk.reverse()
                run.pos = low - 1
                done = not low
            else:
                high = pos + need
                chunk = keys[pos:high]
                run.pos = high
                done = high >= len(keys)
            # take the chunk's claims out: the keys this run holds go (or stay, in front, if they cannot), its
            # claims on keys not held are dropped, and keys another run placed since are put back
            token.partial = True
            claims = list(map(pop, chunk, repeat(None)))
            # (restores read and pins hold keys that are held: one of those in the chunk is out of `_slot` now)
            if claims.count(token) == len(chunk) and storing.isdisjoint(chunk) and not (busy and (
                    not all(map(slot.__contains__, loading)) or not all(map(slot.__contains__, pinned)))):
                victims += chunk
            else:
                ghost = token.ghost
                for key, claim in zip(chunk, claims):
                    if claim is token:
                        if key in storing or key in loading or key in pinned:
                            slot[key] = kept_token
                            kept.append(key)
                            if token.stolen is not None:
                                token.stolen.append(key)
                        else:
                            victims.append(key)
                    elif claim is not None and claim is not ghost:
                        slot[key] = claim
            if done:  # its current run is over, and its claims with it: the token is dead
                runs.popleft()
                token.stolen = None
                if token.keys is not None and owners.get(id(keys)) is token:
                    del owners[id(keys)]
        self._front = kept
        self.resident -= len(victims)
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
        pinned = self.pinned
        for key in keys:
            left = pinned.get(key, 0) - 1
            if left > 0:
                pinned[key] = left
            else:
                pinned.pop(key, None)
        self._append(_last_occurrences(list(filter(self.holds, keys))))

    def stored(self, keys: list) -> None:
        """The copies of `keys` landed (storing entries are never evicted, so all are still here)."""
        self.version += 1
        storing = self.storing
        before = len(storing)
        storing.difference_update(keys)
        fifo = self.profile.eviction == "fifo"
        # all were storing (so held), as offload's stores are; else a key not held joins as ready, newest
        missing = [] if before - len(storing) == len(keys) else list(filterfalse(self.holds, dict.fromkeys(keys)))
        if missing:
            slot, placeholder = self._slot, _Token()
            _notify(list(map(slot.get, missing)), missing, placeholder)
            slot.update(dict.fromkeys(missing, placeholder))
            self.resident += len(missing)
            if not fifo:
                self._append(missing)
        if fifo:  # first in, first out by store completion
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
        loading = self.loading
        for key in keys:
            left = loading[key] - 1
            if left:
                loading[key] = left
            else:
                del loading[key]
        if self.profile.refresh_on_load_done:
            self._append(_last_occurrences(list(filter(self.holds, keys))))
        self.restores += len(keys)

    def summary(self) -> dict:
        return {"scope": self.scope, "capacity_blocks": self.capacity, "block_bytes": self.block_bytes,
                "resident_blocks": self.resident, "stores": self.stores, "restores": self.restores,
                "evictions": self.evictions, "dropped_stores": self.dropped_stores,
                "d2h_bytes": self.d2h.bytes_moved, "h2d_bytes": self.h2d.bytes_moved,
                "d2h_bandwidth_wait_ms": self.d2h.waited_ns / 1e6,
                "h2d_bandwidth_wait_ms": self.h2d.waited_ns / 1e6, "connector": self.profile.name}


def _notify(olds: list, keys: list, token: _Token) -> None:
    """Owners whose claims (`olds`, on `keys`) go to `token` add those keys to `stolen`."""
    for other in set(olds):
        if other is None or other is token or other is token.ghost:
            continue
        owner = other.token if type(other) is _Ghost else other
        if owner.stolen is not None and owner.keys is not None:
            owner.stolen.extend(compress(keys, map(is_, olds, repeat(other))))


def _last_occurrences(keys: list) -> list:
    """`keys` in the order that moving each to the end in turn leaves them."""
    if len(set(keys)) == len(keys):
        return keys
    return list(dict.fromkeys(reversed(keys)))[::-1]
