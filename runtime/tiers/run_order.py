"""The eviction order of a G2 host pool: which held key goes first, kept lazily in runs.

`RunOrder` records which keys a pool holds and in which order they are
evicted (first = evicted next), and moves them as the connector asks: a
refresh of a key list's first blocks, keys appended at the end, an eviction
scan from the front.  What may be evicted (storing, loading, pinned keys) and
every count stay with `tier.Tier`.

Contents and order live in one map, `_slot`: for a held key, the token of the
run placing it; for a key an owner claims but nobody holds, that owner's unheld claim.
(A reserve of the owner's unclaimed end leaves the unheld claims: the owner notes
which positions they hold, `lazy`, and whoever reads those claims settles them.)
The order is `_front` (held keys an eviction scan passed but could not evict),
then the runs of `_runs`, oldest first, each key in the run of its token (its
occurrences in other runs are stale).  So a refresh moves a whole run at once,
and one whose owner lost nothing since costs O(1) however long the prompt.
"""
from __future__ import annotations

from collections import deque
from itertools import compress, filterfalse, islice, repeat, takewhile
from operator import is_, is_not, not_

from .run_claims import UnheldClaim, Run, Placer, notify
from .run_eviction import EvictionScan

_COMPACT_FLOOR = 1 << 12
_is_token = Placer.__instancecheck__


def _lazy(claim) -> bool:
    """Is `claim` the unheld claim of an owner that holds some keys lazily (so it may stand for a held key)?"""
    return type(claim) is UnheldClaim and claim.token.lazy < claim.token.lazy_stop


class RunOrder(EvictionScan):
    """Held keys and their eviction order (see the module docstring)."""

    __slots__ = ("_slot", "_front", "_runs", "_compact_at", "_owners", "_kept", "_pushed")

    def __init__(self):
        self._slot: dict = {}
        self._front: list = []
        self._runs: deque = deque()
        self._compact_at = _COMPACT_FLOOR  # drop superseded runs when `_runs` grows past this
        self._owners: dict = {}  # id(key list) -> its owner token
        self._kept = Placer()  # the token of `_front`
        self._pushed = 0  # runs pushed so far

    def lacking(self, keys: list) -> list:
        """The keys of `keys` not held, in order."""
        return list(filterfalse(self.holds, keys))

    def holds(self, key) -> bool:
        claim = self._slot.get(key)
        if _lazy(claim):
            self._settle(claim.token)
            claim = self._slot.get(key)
        return type(claim) is Placer

    def held_run(self, keys: list, start: int, limit: int) -> int:
        """How many keys of keys[start:limit], from the first on, are held."""
        slot = self._slot
        at = start
        while at < limit:
            claim = slot.get(keys[at])
            if _lazy(claim):
                self._settle(claim.token)  # (maybe held lazily: look again)
            elif type(claim) is not Placer:
                break  # (the usual answer, at once: none)
            at += len(list(takewhile(_is_token, map(slot.get, islice(keys, at, limit)))))
        return at - start

    def held(self) -> list:
        """Every held key (in no particular order)."""
        for owner in list(self._owners.values()):
            self._settle(owner)
        return [key for key, claim in self._slot.items() if type(claim) is Placer]

    def _settle(self, token: Placer) -> None:
        """Map the keys `token` holds lazily to it."""
        if token.lazy < token.lazy_stop:
            slot = self._slot
            for key in token.keys[token.lazy:token.lazy_stop]:
                slot[key] = token
            token.lazy = token.lazy_stop

    def _settled(self, claims: list, token: Placer | None = None) -> bool:
        """Settle the owners (but `token`) whose unheld claims among `claims` may stand for keys held lazily; any?"""
        lazy = [claim.token for claim in set(claims) if _lazy(claim) and claim.token is not token]
        for owner in lazy:
            self._settle(owner)
        return bool(lazy)

    # ------------------------------------------------------------------ refreshes
    def refresh(self, keys: list, upto: int) -> None:
        """Make the held keys of keys[:upto] (upto > 0) the newest, its first key newest of all."""
        owner = self._owners.get(id(keys))
        if owner is None or upto < owner.covered or not owner.covered:
            # a new owner (a shorter refresh gets one too: the old run keeps the rest), or one a reserve made
            if owner is None or owner.covered:
                if owner is not None:
                    self._settle(owner)  # (`held` finds lazy holders among `_owners`)
                owner = self._owners[id(keys)] = Placer(keys, True, [])
            part = keys[:upto]
            if len(part) == upto:
                owner.unheld_from = self._claim(part, owner, True)
                if owner.unheld_from >= 0:
                    owner.covered, owner.gen, owner.taken = upto, owner.gen + 1, 0
                    return self._push(Run(owner, owner.gen, keys, upto - 1, True))
            owner.plain = False
        elif owner.plain and upto > owner.covered and len(set(keys[:upto])) < upto:
            owner.plain, owner.unheld_from = False, -1
        if not owner.plain:  # a key listed twice takes the place of its first occurrence
            order = list(dict.fromkeys(keys[:upto]))
            order.reverse()
            self.append(list(filter(self.holds, order)))
            return
        claimed_elsewhere = owner.claimed_elsewhere
        if owner.partial:  # its run's scan dropped claims: claim the whole range again
            owner.claimed_elsewhere, owner.partial = [], False
            self._settle(owner)
            owner.unheld_from = self._claim(keys[:upto], owner)
        else:
            if claimed_elsewhere:  # claim back what other runs took
                owner.claimed_elsewhere = []
                self._claim(claimed_elsewhere, owner)
            if upto > owner.covered:
                unheld_from = self._claim(keys[owner.covered:upto], owner)
                if unheld_from or owner.unheld_from < 0:
                    owner.unheld_from = owner.covered + unheld_from
            # nothing lost or new: a no-op if its run is the newest, untouched
            elif not claimed_elsewhere and self._runs:
                last = self._runs[-1]
                if last.token is owner and last.gen == owner.gen and last.pos == upto - 1:
                    return
        owner.covered, owner.gen, owner.taken = upto, owner.gen + 1, 0
        self._push(Run(owner, owner.gen, keys, upto - 1, True))

    def known_distinct(self, keys: list, upto: int) -> bool:
        """Is keys[:upto] known to list no key twice (a refresh of it found so)?"""
        owner = self._owners.get(id(keys))
        return owner is not None and owner.keys is keys and owner.plain and owner.covered >= upto

    def _claim(self, keys: list, token: Placer, check_distinct: bool = False) -> int:
        """Claim `keys` for owner `token`: held ones go to it, the others get its unheld claim; owners that claimed
        some learn which.  With `check_distinct` (`token`'s unheld claim stands for nothing yet) a list naming a
        key twice
        is left unclaimed and -1 returned; else a key listed twice is claimed twice, to the same effect.
        Returns where the run of keys that got its unheld claim and ends `keys` starts (len(keys) if none is known)."""
        slot, unheld = self._slot, token.unheld
        before = len(slot)
        # one probe per key (memory latency is the cost here): keys nobody held or claimed are claimed already
        olds = list(map(slot.setdefault, keys, repeat(unheld)))
        added = len(slot) - before
        first = len(olds) - added
        if not first:
            return 0
        # the others are held, or claimed by another owner (or by `token`): usually a prefix of `keys` that one
        # other run holds (a shared prefix, or what a claim takes back)
        # (if the first `first` returned one token, those are the keys not added, so the rest were; comparing
        # claims that are not the same object costs a lot more than finding it, hence the slice)
        held = olds[0]
        known = keys[:first]
        if type(held) is Placer and held is not token and olds[:first].count(held) == first and (
                not check_distinct or len(set(known)) == first):
            for key in known:  # (a loop stores faster than `update` from pairs)
                slot[key] = token
            if held.claimed_elsewhere is not None and held.keys is not None:
                held.claimed_elsewhere += known
                if first > held.taken and held.keys[:first] == known:
                    held.taken = first
            return first
        if self._settled(olds, token):
            olds = list(map(slot.get, keys))
        mine = olds.count(unheld)
        first = olds.index(unheld) if mine else len(olds)
        if len(olds) - first == mine:
            known, olds = keys[:first], olds[:first]
        else:
            first = len(olds)
            found = list(map(is_not, olds, repeat(unheld)))
            known, olds = list(compress(keys, found)), list(compress(olds, found))
        # (when checking, a key that returned the unheld claim without being added is a repeat)
        if check_distinct and (len(keys) - len(known) > added or len(set(known)) < len(known)):
            for key in keys:  # undo the claims this call made
                if slot.get(key) is unheld:
                    del slot[key]
            return -1
        if olds.count(token):  # (keys it claimed already stay as they are)
            others = list(map(is_not, olds, repeat(token)))
            known, olds = list(compress(known, others)), list(compress(olds, others))
        if known:
            held = list(map(is_, map(type, olds), repeat(Placer)))
            if all(held):
                slot.update(zip(known, repeat(token)))
            else:
                slot.update(zip(compress(known, held), repeat(token)))
                slot.update(zip(compress(known, map(not_, held)), repeat(unheld)))
            notify(olds, known, token)
        return first

    def _push(self, run: Run) -> None:
        run.seq = run.token.seq = self._pushed
        self._pushed += 1
        runs = self._runs
        runs.append(run)
        if len(runs) > self._compact_at:  # (a pool that rarely evicts would keep every superseded run)
            self._runs = runs = deque(run for run in runs if run.gen == run.token.gen)
            self._compact_at = max(2 * len(runs), _COMPACT_FLOOR)

    def append(self, keys: list) -> None:
        """Move held, distinct `keys` to the end of the eviction order, in this order."""
        if keys:
            token = Placer()
            slot = self._slot
            olds = list(map(slot.__getitem__, keys))
            if self._settled(olds):  # (lazy holders are told as holders, before their keys go)
                olds = list(map(slot.__getitem__, keys))
            notify(olds, keys, token)
            slot.update(dict.fromkeys(keys, token))
            self._push(Run(token, 0, keys, 0, False))

    # ------------------------------------------------------------------ new keys
    def unheld(self, keys: list, place: bool, refresh: tuple | None) -> tuple:
        """(token, new, olds) for admitting distinct `keys`: `new` lists those not held, `olds` their claims
        (None: all `token`'s unheld claims).

        `place`: they will be appended at the end under a token of their own; else under the owner of the
        range `refresh` = (key list, upto) holding them all, which the caller refreshes right after."""
        if place:
            token = Placer()
        else:
            token = self._owners.get(id(refresh[0]))
            if token is None or refresh[1] < token.covered:
                token = self._owner(*refresh)
            start = token.unheld_from
            if 0 <= start <= token.covered - len(keys) and keys == token.keys[start:start + len(keys)]:
                return token, keys, None  # (none held, all its unheld claims: no probe needed)
        olds = list(map(self._slot.get, keys))
        if self._settled(olds):
            olds = list(map(self._slot.get, keys))
        if olds.count(token.unheld) == len(olds):  # all claimed by the refreshing owner, none held (the usual)
            return token, keys, olds
        unheld_from = list(map(is_not, map(type, olds), repeat(Placer)))
        return token, list(compress(keys, unheld_from)), list(compress(olds, unheld_from))

    def _owner(self, keys: list, upto: int) -> Placer:
        """A new owner for the coming refresh of keys[:upto] (one that claims nothing yet)."""
        owner = self._owners.get(id(keys))
        if owner is not None:
            self._settle(owner)
        owner = self._owners[id(keys)] = Placer(keys, len(set(keys[:upto])) == upto, [])
        return owner

    def hold(self, token: Placer, new: list, olds: list, place: bool) -> int:
        """Hold `new` (a prefix of `unheld`'s answer) under `token`, appended at the end if `place`; returns the
        `seq` of the oldest run that can place them, until they move (to a newer run)."""
        token.taken = 0
        # keys[unheld_from:unheld_from + len(new)]: held lazily, claims left as they are
        if olds is None and token.unheld_from >= 0:
            if token.lazy_stop != token.unheld_from:
                self._settle(token)
                token.lazy = token.unheld_from
            token.unheld_from = token.lazy_stop = token.unheld_from + len(new)
        else:  # (or an eviction scan of its run dropped claims since `unheld`)
            token.unheld_from = -1  # (some of its unheld claims may be among them)
            if olds is not None and olds.count(token.unheld) < len(olds):
                notify(olds, new, token)  # (claims the scan dropped meanwhile only make an owner claim more)
            self._slot.update(zip(new, repeat(token)))
        if place:
            self._push(Run(token, 0, new, 0, False))
        return token.seq if token.seq >= 0 else self._pushed

    def adopt(self, keys: list) -> None:
        """Hold distinct keys not held, placed nowhere yet (the caller appends them)."""
        slot, placeholder = self._slot, Placer()
        olds = list(map(slot.get, keys))
        if self._settled(olds):
            olds = list(map(slot.get, keys))
        notify(olds, keys, placeholder)
        slot.update(dict.fromkeys(keys, placeholder))
