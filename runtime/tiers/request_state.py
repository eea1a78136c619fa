"""What the tiers keep per request: its restores and stores in flight, what it pinned, where a peer may serve it.

Written only by the modules of runtime/tiers/ (the scheduler reads it: a
request whose restore is in flight waits).  A request on a rank with no tiers
behind G1 (and no P/D handoff to take it to one) shares `UNTIERED`: nothing
writes a tier state there, and a million-request trace then makes no object
per request (the shared one refuses writes, so a path that did write would
fail loudly instead of leaking state between requests).
"""
from __future__ import annotations

from types import MappingProxyType


class TierState:
    __slots__ = ("loading", "restoring", "preloaded", "restored_tokens", "stored_upto", "stores_in_flight",
                 "store_jobs", "pins", "unstored", "deferred_at", "hint",
                 "served", "reads_in_flight", "io_started", "io_ns", "bypassed", "brought", "restored_labels",
                 "admitted_labels")

    def __init__(self, hint=None):
        self.loading = False  # waiting for a copy into G1 (or into the first tier, which it then loads from)
        self.restoring: list[int] = []  # G1 blocks (its G1 hits, then those a restore in flight fills)
        self.preloaded: list[int] = []  # ... once the restore has landed: held until admission
        self.restored_tokens = 0  # tokens of the current admission restored from the first tier
        self.stored_upto = 0  # blocks before this index were offered to the first tier
        self.stores_in_flight = 0
        self.store_jobs: list = []  # its stores in flight
        self.pins: list = []  # first-tier keys pinned by a lookup that could not load yet (simple_cpu)
        self.unstored: list = []  # prompt keys that found no room (offered again on finish by v0.32)
        self.deferred_at = -1  # the first tier's version at its last deferred lookup
        self.hint = hint  # the peer rank KVCR may pull its prefix from (see peer_fetch.py)
        self.served: tuple = ()  # opal's tiers: (tier, tokens) each served into G1 at its first admission
        self.reads_in_flight = 0  # opal's tiers: the restore's reads not yet on the GPU
        self.io_started = 0  # ... when they started
        self.io_ns = 0  # opal's tiers: how long the first admission's reads took to reach the GPU
        self.bypassed = False  # the no-progress rule made it recompute what a tier or a peer held (the miss breakdown)
        self.brought: dict = {}  # first-tier key -> where a copy for this request came from ("g3", "peer")
        self.restored_labels: tuple | list = ()  # per block of the current restore: the source it came from
        self.admitted_labels: tuple | list = ()  # ... those of the restore the last admission took over

    def sources(self, tokens: int, block_size: int) -> dict:
        """The last admission's `tokens` restored from the tiers, by the source each block came from (the first
        tier's own stores, or "g3" and "peer" copies into it for this request): {} when none were restored."""
        if not tokens or not self.admitted_labels:
            return {}
        out: dict = {}
        for label in self.admitted_labels:
            take = min(block_size, tokens)
            if take <= 0:
                break
            out[label] = out.get(label, 0) + take
            tokens -= take
        return {"host_reused_by_source": out}


class _Untiered(TierState):
    """The tier state every request on a rank without tiers shares: read-only."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"the shared tier state of a rank without tiers is read-only ({name})")


def _untiered() -> TierState:
    state = TierState()
    for name in ("restoring", "preloaded", "store_jobs", "pins", "unstored"):  # (immutable: no append either)
        setattr(state, name, ())
    state.brought = MappingProxyType({})
    state.__class__ = _Untiered
    return state


UNTIERED = _untiered()
