"""Who claims a key in a G2 pool's eviction order (`run_order.RunOrder`): tokens, their unheld claims, their runs.

A `Placer` places held keys: an owner token stands for one request's key list
(its refreshes), others for one explicit list (a store, a pin, a load).  A
`UnheldClaim` is an owner's claim on a key of its range that nobody holds yet.  A
`Run` is one placement of a token's keys in the order.  `notify` tells owners
which keys of their range others claimed since.
"""
from __future__ import annotations

from itertools import compress, repeat
from operator import is_


class Placer:
    """Who placed a held key in the eviction order: `_slot[key] is` the token of the run holding it.

    An owner token stands for one key list on this pool: each refresh of keys[:covered] re-appends one run
    `keys[covered-1], ..., keys[0]` (first key newest).  It claims every key of that range: a held one maps
    to the token, one not held to the token's unheld claim `unheld` (a key stored later is placed by a later
    run anyway,
    but the owner must hear of it).  Stores, pins and loads append explicit lists of held keys, each with a
    token of its own.  `claimed_elsewhere` lists keys of an owner's range claimed elsewhere since its last refresh, so
    that the next one claims back just those (after an eviction scan of its run dropped claims, `partial`,
    it claims the whole range again).  A run's scan drops the claims it passes and puts back those of keys
    other runs placed since, so a finished run leaves nothing behind."""

    __slots__ = ("keys", "covered", "claimed_elsewhere", "gen", "plain", "partial", "unheld", "seq", "unheld_from",
                 "lazy", "lazy_stop", "taken")

    def __init__(self, keys=None, plain: bool = True, claimed_elsewhere: list | None = None):
        self.keys = keys
        self.covered = 0
        self.claimed_elsewhere = claimed_elsewhere
        self.gen = 0
        self.plain = plain
        self.partial = False
        self.unheld = UnheldClaim(self)
        self.seq = -1  # `seq` of its latest run
        self.unheld_from = -1  # keys[unheld_from:covered] are all its unheld claims (-1: not known)
        self.lazy = self.lazy_stop = 0  # keys[lazy:lazy_stop] are held though they map to its unheld claim still
        self.taken = 0  # keys[:taken] are known claimed elsewhere since its latest run (a scan stops there)


class UnheldClaim:
    """A claim on a key that is not held (see `Placer`)."""

    __slots__ = ("token",)

    def __init__(self, token: Placer):
        self.token = token


class Run:
    """One run of the eviction order: `token`'s keys from index `pos`, downward for an owner's refresh or
    upward for an explicit list; dead once its owner has refreshed again (`gen` moved on).  `seq` counts the
    runs pushed before it."""

    __slots__ = ("token", "gen", "keys", "pos", "down", "seq")

    def __init__(self, token: Placer, gen: int, keys: list, pos: int, down: bool):
        self.token, self.gen, self.keys, self.pos, self.down = token, gen, keys, pos, down


def notify(olds: list, keys: list, token: Placer) -> None:
    """Owners whose claims (`olds`, on `keys`) go to `token` add those keys to `claimed_elsewhere`."""
    if olds and olds.count(olds[0]) == len(olds):  # (one owner loses them all)
        other = olds[0]
        if type(other) is Placer and other is not token and other.claimed_elsewhere is not None \
                and other.keys is not None:
            other.claimed_elsewhere += keys
            return
    for other in set(olds):
        if other is None or other is token or other is token.unheld:
            continue
        if type(other) is UnheldClaim:
            owner = other.token
            owner.unheld_from = -1
        else:
            owner = other
        if owner.claimed_elsewhere is not None and owner.keys is not None:
            owner.claimed_elsewhere.extend(compress(keys, map(is_, olds, repeat(other))))
