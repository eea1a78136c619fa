"""The eviction scan of a G2 pool's order: the oldest held keys go, the busy ones stay in front.

A mixin of `run_order.RunOrder` (it reads and updates the order's `_slot`,
`_front`, `_runs` and `_owners`): the scan walks `_front`, then the runs oldest first in
chunks, drops the claims each chunk's run holds, puts back those other runs
placed since, and keeps in front the keys a store, a load or a pin still uses.
"""
from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from operator import is_

from .run_claims import Placer


class EvictionScan:
    """`RunOrder.evict` and its helper (see the module docstring)."""

    def evict(self, wanted: int, storing, loading: dict, pinned: dict, since: int = 0) -> list:
        """Drop up to `wanted` held keys, oldest first, skipping (and keeping in front) those that are storing,
        loading or pinned; returns the keys dropped.  `storing` (a set, or what supports `in` and `isdisjoint`)
        is asked only about `_front` and runs from `seq` `since` on (no storing key sits in an older one)."""
        slot = self._slot
        pop = slot.pop
        victims, kept = [], []
        kept_token = self._kept
        for index, key in enumerate(self._front):
            if len(victims) >= wanted:
                kept.extend(self._front[index:])
                break
            if slot.get(key) is not kept_token:
                continue  # moved since
            if key in storing or key in loading or key in pinned:
                kept.append(key)
            else:
                del slot[key]
                victims.append(key)
        busy = loading or pinned
        runs, owners = self._runs, self._owners
        need = wanted - len(victims)  # (a chunk of `need` keys cannot hold more victims than wanted)
        while need > 0 and runs:
            run = runs[0]
            token = run.token
            if run.gen != token.gen:
                runs.popleft()
                continue
            keys, pos = run.keys, run.pos
            # take the chunk's claims out: the keys this run holds go (or stay, in front, if they cannot), its
            # claims on keys not held are dropped, and keys another run placed since are put back
            token.partial, token.unheld_from = True, -1
            if run.down:
                taken = token.taken
                low = pos - need + 1 if pos - need >= taken else taken
                chunk = keys[low:pos + 1]
                chunk.reverse()
                run.pos = low - 1
                done = low == taken
                lazy, lazy_stop = token.lazy, token.lazy_stop
                if not chunk:  # (what is left was claimed elsewhere)
                    held = chunk
                elif lazy <= low and pos < lazy_stop:  # all held lazily (claims are its unheld claim): the usual
                    token.lazy_stop = low
                    deque(map(pop, chunk), 0)
                    held = chunk
                else:
                    claims = list(map(pop, chunk, repeat(None)))
                    if lazy < lazy_stop:  # (some held lazily)
                        token.lazy_stop = min(lazy_stop, max(low, lazy))  # (what is left below the chunk)
                        if lazy < low:
                            lazy = low
                        if lazy_stop > pos:
                            lazy_stop = pos + 1
                        if lazy < lazy_stop:
                            claims[pos + 1 - lazy_stop:pos + 1 - lazy] = [token] * (lazy_stop - lazy)
                    held = self._held(chunk, claims, token)
            else:
                high = pos + need
                chunk = keys[pos:high]
                run.pos = high
                done = high >= len(keys)
                held = self._held(chunk, list(map(pop, chunk, repeat(None))), token)
            if (run.seq < since or storing.isdisjoint(held)) and not (busy and (
                    not loading.keys().isdisjoint(held) or not pinned.keys().isdisjoint(held))):
                victims += held
            else:
                for key in held:
                    if key in storing or key in loading or key in pinned:
                        slot[key] = kept_token  # (its owner claims it back: the scan made the owner `partial`)
                        kept.append(key)
                    else:
                        victims.append(key)
            need = wanted - len(victims)
            if done:  # its current run is over, and its claims with it: the token is dead
                runs.popleft()
                token.claimed_elsewhere = None
                if token.keys is not None and owners.get(id(keys)) is token:
                    del owners[id(keys)]
        self._front = kept
        return victims

    def _held(self, chunk: list, claims: list, token: Placer) -> list:
        """The keys of an eviction chunk `token` holds, given the `claims` taken out (others' go back)."""
        mine = claims.count(token)
        if mine == len(chunk):
            return chunk
        rest = claims[mine:]
        other = rest[0]
        slot = self._slot
        if other is not token and type(other) is Placer and rest.count(other) == len(rest):
            # usually a shared prefix, last in the chunk, that one later run claimed since: it goes back
            for key, claim in zip(chunk[mine:], rest):
                slot[key] = claim
            return chunk[:mine]
        unheld = token.unheld
        slot.update([(key, claim) for key, claim in zip(chunk, claims)
                     if claim is not token and claim is not unheld and claim is not None])
        return list(compress(chunk, map(is_, claims, repeat(token))))
