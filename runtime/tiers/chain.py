"""What one rank has behind G1: its chain of tiers, fastest first, and everything the rest of the replay asks of it.

The scheduler, the macro stepper, the router and the shell talk to a rank's
tiers only through its chain: restore a prefix, offer what a pass computed,
what a preemption waits for, whether fused decode passes are safe, how much of
a prompt a peer could serve, how much the tiers hold beyond G1 (the router).
`NoTiers` answers for a rank with nothing behind G1, so no caller asks whether
a tier exists.

A chain's first tier is filled from G1 by its connector's store policy
(`offload.py`, `connectors.py`); each deeper tier is written in the background
from the one above and read back up into the first (`promotion.py`); `prefix_sources`
are the sources that may copy into the first tier a prefix it lacks (reads
from deeper tiers, then KVCR pulls from peers).
"""
from __future__ import annotations

from . import offload


class TierChain:
    counters = None  # what opal's KV-cache manager counts (kvc_chain.KvcCounters), on its chains only
    # a decode rank with G2 admits the P/D handoffs whose KV has landed before other waiting requests (the spec's
    # G2 rules: vLLM's KV connector re-prepends the requests whose loads finished)
    handoffs_first = True
    __slots__ = ("tiers", "top", "profile", "prefix_sources", "copies_in_since_load", "kvcr", "name", "_below",
                 "restore", "admitting", "drop_restore_holds", "after_pass", "on_finish", "preemption_wait",
                 "holding", "holding_keyless")

    def __init__(self, tiers: tuple, profile, prefix_sources: tuple = (), kvcr=None):
        self.tiers = tiers
        self._below = {id(tier): below for tier, below in zip(tiers, tiers[1:])}
        # what the scheduler asks of a chain, as the store policy's own functions (called once a pass or more:
        # no wrapper call in between); each takes (rank, ...) as NoTiers' methods of the same names do
        self.restore, self.admitting = offload.restore, offload.admitting
        self.drop_restore_holds, self.preemption_wait = offload.drop_restore_holds, offload.preemption_wait
        self.after_pass, self.on_finish = offload.offer_after_pass, offload.offer_on_finish
        self.top = tiers[0]
        self.name = self.top.name
        self.profile = profile  # the connector that stores G1 blocks into the first tier
        # what may copy into the first tier a prefix it lacks: promotion.ReadUp of each deeper tier, then KVCR
        self.prefix_sources = prefix_sources
        # copies into the first tier landed since the last load into G1 (see copy_jobs.BYPASS_ROUNDS)
        self.copies_in_since_load = 0
        self.kvcr = kvcr  # peer_fetch.PeerFetch when the rank's role pulls from peers
        # simple_cpu: stores in flight that hold their G1 blocks until they land, and those holding a block
        # without a key (offload._hold)
        self.holding = self.holding_keyless = 0

    def below(self, tier):
        """The tier written in the background from `tier` (None: the last)."""
        return self._below.get(id(tier))

    # ---------------------------------------------------------------- the scheduler's questions
    def first_offer(self, hits: int) -> int:
        """The first block an admission offers to the first tier (G1 hits and restored blocks are not offered
        again, unless the connector scans from block 0)."""
        return 0 if self.profile.scan_from_block_zero else hits

    # ---------------------------------------------------------------- the macro stepper's questions
    @property
    def stores_while_decoding(self) -> bool:
        """Can a pure decode pass end with a store (so fused passes must stop before it: `quiet_passes`)?"""
        return bool(self.profile.store_delay_passes or self.profile.store_decode_blocks)

    def quiet_passes(self, request, block_size: int) -> int | None:
        """With `stores_while_decoding`: how many pure decode passes, the one scheduled now first, end without
        offering a block of `request` to the first tier (None: none ever does).  A pass offers the blocks its
        request has computed by its end, or, one pass late, by its start (offer_after_pass)."""
        stores = self.decode_stores(request, block_size, 1 << 62, 1)
        return stores[0][0] if stores else None

    def decode_stores(self, request, block_size: int, limit: int, most: int = -1) -> list[tuple[int, int]]:
        """With `stores_while_decoding`: (pass, upto) of the offers pure decode passes 0..limit-1 (the one scheduled
        now first) make of `request` at their ends, each of keys[..:upto] (offer_after_pass; `most`: at most so
        many).  Pass j offers the blocks computed by its end, (num_computed + j + 1) // block_size, or one pass
        late, by its start."""
        stored, keys = request.tier.stored_upto, len(request.keys)
        base = request.num_computed + (0 if self.profile.store_delay_passes else 1)
        stores = []
        j = (stored + 1) * block_size - base
        if j < 0:
            j = 0
        while j < limit and stored < keys and most:
            stored = min((base + j) // block_size, keys)
            stores.append((j, stored))
            most -= 1
            j = (stored + 1) * block_size - base
        return stores

    def fuses_stores(self, rank) -> bool:
        """Can fused decode passes make the offers of their ends (`decode_stores`, as events at those instants:
        shell/macro.py) rather than stop before the first?  Not when a KVCR peer pulls (its pass-end hook runs
        between a stepped pass's offers and their copies) or the first tier is shared by other workers (whose pass
        ends at the same instant come in queue order)."""
        return self.kvcr is None and not self.top.scope == "cluster_shared"

    def copies_harmless(self, rank) -> bool:
        """Can pure decode passes be fused while this rank's copies are in flight?  Yes unless the connector stores
        decode blocks: a landing store changes nothing a pure decode pass reads.  One that does (simple_cpu) holds
        a finished request's blocks until its copy lands, and the landing frees them: yes when every copy in
        flight is a store, and those that hold blocks hold only blocks with keys, which join the tail of G1's
        free queue (fused passes allocate no more than the queue held when they were planned, from its head), or
        the run's allocations wait for their pass starts while one does not (`finishes_at_instants`)."""
        if not self.profile.store_decode_blocks:
            return True
        if self.holding_keyless and not self.finishes_at_instants(rank):
            return False
        jobs = sum(1 for request in rank.running for job in request.tier.store_jobs if job.rank is rank and not job.hold)
        return jobs + self.holding == rank.transfers_in_flight

    def finishes_at_instants(self, rank) -> bool:
        """Are this rank's completions inside fused decode passes applied at their own pass ends, its allocations
        after them (shell/fused_tail.py), rather than ending the run?  For a connector storing decode blocks whose
        stores fused passes make (`fuses_stores`), on an aggregated rank (a prefill or decode rank's completion hands
        over or ends more than a pass end does)."""
        return self.profile.store_decode_blocks and rank.role == "aggregated" and self.fuses_stores(rank)

    @property
    def stores_on_finish(self) -> bool:
        """Does a completion offer the first tier what it could not store before (v0.32 connectors)?"""
        return self.profile.store_rest_on_finish

    def finish_may_store(self, request) -> bool:
        """With `stores_on_finish`: does this request's completion copy into the first tier (blocks left to store,
        or any with a KVCR peer that might pull from it)?  One with nothing left only refreshes the tier's order,
        which may come early: nothing else reads or changes the tier during fused passes.  A connector storing
        decode blocks may have one more to store: its completions always end a fused run."""
        return bool(request.tier.unstored or self.kvcr is not None or self.profile.store_decode_blocks)

    # ---------------------------------------------------------------- the router's and the shell's questions
    @property
    def peer_fetch(self) -> tuple:
        """The KVCR this rank pulls with (for its summary section), if any."""
        return () if self.kvcr is None else (self.kvcr,)

    @property
    def wants_hint(self) -> bool:
        """Does the rank pull prefixes from peers (so the router should name one)?"""
        return self.kvcr is not None

    def peer_prefix(self, keys: list) -> int:
        """How many of `keys`, from the first, a peer could pull from this rank's first tier."""
        ready, held = self.top.ready, 0
        for key in keys:
            if not ready(key):
                break
            held += 1
        return held

    def holds(self, key) -> bool:
        """Does a tier behind G1 hold `key`, ready (the miss breakdown asks; it changes nothing)?"""
        return any(tier.ready(key) for tier in self.tiers)

    def held_beyond(self, rank, spec, g1_tokens: int) -> int:
        """Tokens of `spec`'s prompt past the first `g1_tokens` (what G1 holds) that the tiers could serve now,
        for the max_prefix router (0 here: opal's KVC tiers answer for themselves)."""
        return 0

    def capture_events(self) -> None:
        for tier in self.tiers:
            if tier.kv_event_tier is not None:
                tier.events = []

    def events(self) -> list:
        """(KV-event tier, events) of each tier that emits them."""
        return [(tier.kv_event_tier, tier.events) for tier in self.tiers if tier.events is not None]


class NoTiers:
    """The chain of a rank with nothing behind G1."""

    __slots__ = ()
    counters = None
    tiers = ()
    prefix_sources = ()
    kvcr = None
    peer_fetch = ()
    stores_while_decoding = False
    stores_on_finish = False
    wants_hint = False
    handoffs_first = False  # a landed P/D handoff joins the back of the decode rank's queue (Dynamo's mocker)

    def holds(self, key) -> bool:
        return False

    def copies_harmless(self, rank) -> bool:
        return False

    def finishes_at_instants(self, rank) -> bool:
        return False

    def restore(self, rank, request, hits: list, limit: int) -> int:
        return 0

    def admitting(self, rank, request, hits: int) -> int:
        return 0

    def drop_restore_holds(self, rank) -> bool:
        return False

    def after_pass(self, rank, batch) -> None:
        pass

    def on_finish(self, rank, request) -> None:
        pass

    def preemption_wait(self, rank, victim) -> None:
        pass

    def peer_prefix(self, keys: list) -> int:
        return 0

    def held_beyond(self, rank, spec, g1_tokens: int) -> int:
        return 0

    def capture_events(self) -> None:
        pass

    def events(self) -> list:
        return []


NO_TIERS = NoTiers()
