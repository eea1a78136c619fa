"""How a rank's scheduler talks to its G2 pool: lookups and restores, stores, and their waits.

Everything here depends on the connector profile (`connectors.PROFILES`); the
scheduler reaches these functions through the rank's chain (`chain.py`), only
when it has tiers.

- Admission: after the G1 prefix, the rest of the prompt is looked up in G2.
  A usable hit starts a restore into freshly allocated G1 blocks and the
  request waits for it (restore time adds to TTFT); the connector may instead
  defer the request (a hit still being stored, a hit another request is
  loading, the request's own store in flight).
- Stores: blocks are offered to G2 as they are computed (or one pass later),
  G1 blocks stay "copying" until the copy lands, and a new owner of such a
  block waits for it (or, for simple_cpu, the block is held until copied).
- Preemption waits for the victim's stores (or, for simple_cpu, for every
  transfer of the rank).
"""
from __future__ import annotations

from itertools import compress
from operator import attrgetter

from . import peer_fetch
from .copy_jobs import Copy
from .promotion import write_down

PRELOADED = attrgetter("tier.preloaded")

DEFER, LOAD, READ = -1, -2, -3  # `restore` outcomes besides 0 (nothing to restore); READ: into G2 first


# ---------------------------------------------------------------------------------------------- restores

def restore(rank, request, hits: list[int], limit: int) -> int:
    chain, state = rank.chain, request.tier
    host, profile = chain.top, chain.profile
    if profile.own_store_defers and state.stores_in_flight:
        return DEFER
    if state.deferred_at == host.version:
        return DEFER  # nothing in G2 changed since this request's last deferred lookup: same answer, no-op refresh
    if state.pins:  # simple_cpu: a new lookup drops the old pin, which makes those blocks the newest
        host.unpin(state.pins)
        state.pins = []
    if profile.name == "simple_cpu_v0_32" and request.admissions:
        limit = min(limit, request.spec.prompt_len // rank.block_size)  # after preemption: prompt blocks only
    found, deferred = host.lookup(request.keys, len(hits), limit)
    if profile.refresh_on_lookup:
        host.refresh(request.keys, request.spec.prompt_len // rank.block_size)
    if deferred:
        state.deferred_at = host.version
        return DEFER
    # a load (or a read from a deeper tier) starts only for a request that admission would take on its G1 hits
    # alone, its whole known sequence (`rank.admission`): Dynamo's mocker parks a swap-in only after
    # `decide_waiting_admission` admits.  One that does not fit waits at the head of the queue, so no request behind
    # it starts a load either (facts §33); its own load's blocks then count against the next one's admission
    keys = request.keys[len(hits):len(hits) + found]
    if not rank.pool.can_allocate(rank.admission(rank, request, hits, 0), hits):
        if found and profile.pin_before_load:
            host.pin(keys)
            state.pins = keys
        state.restored_tokens = 0
        return 0
    for source in chain.prefix_sources:  # reads from deeper tiers, KVCR pulls: copies into G2 of what follows its hits
        if source(rank, request, len(hits) + found, limit):
            return READ
    if not found:
        state.restored_tokens = 0
        return 0
    rank.pool.touch(hits)
    new_blocks = rank.pool.allocate(found)
    host.start_read(keys)
    chain.copies_in_since_load = 0  # a load is progress (see copy_jobs.BYPASS_ROUNDS)
    if chain.kvcr is not None:
        peer_fetch.loading(rank, keys)
    state.restoring = hits + new_blocks
    state.loading = True
    state.restored_tokens = found * rank.block_size
    brought = state.brought
    state.restored_labels = [brought.get(key, host.label) for key in keys] if brought else [host.label] * found
    rank.jobs.append(Copy(host, "read", restored, rank, request, keys, new_blocks, into_g1=True))
    return LOAD


def restored(rank, job: Copy, now: int) -> None:
    """A restore finished: its blocks are G1 blocks now, held by the request until it is admitted."""
    request = job.request
    state = request.tier
    job.tier.read_done(job.keys)
    blocks, state.restoring = state.restoring, []
    rank.pool.register_run(blocks, request.keys, len(blocks) - len(job.blocks), len(blocks), request.spec)
    state.loading = False
    state.preloaded = blocks


# ---------------------------------------------------------------------------------------------- stores

def offer(rank, request, upto: int, hold: bool = False) -> None:
    """Offer keys[stored_upto:upto] to G2 and start one store for those that get a slot."""
    host, profile, state = rank.chain.top, rank.chain.profile, request.tier
    start = state.stored_upto
    if upto <= start:
        return
    keys = request.keys
    offered = keys[start:upto]
    refresh = profile.refresh_on_lookup
    prompt_blocks = request.spec.prompt_len // rank.block_size
    place = not refresh or upto > prompt_blocks
    distinct = upto - start == 1 or host.known_distinct(keys, upto)  # (one key is distinct: no question to ask)
    accepted = host.reserve(offered, place, distinct, None if place else (keys, prompt_blocks))
    if refresh:  # a store makes the prompt's resident blocks the newest (and places what it reserved)
        host.refresh(keys, prompt_blocks)
    waits_for_room = profile.store_delay_passes and host.last_reserve_short
    everything = len(accepted) == len(offered)  # then `accepted` is `offered`
    if accepted:
        if everything:
            blocks = request.blocks[start:upto]
        else:
            position = dict(zip(offered, range(start, upto)))
            blocks = [request.blocks[position[key]] for key in accepted]
        _start_store(rank, host, request, accepted, blocks, hold)
    if waits_for_room:  # simple_cpu: what did not fit is offered again next pass
        state.stored_upto = start + next(i for i, key in enumerate(offered) if not host.holds(key))
    else:
        if not everything:
            state.unstored.extend(host.lacking(offered))
        state.stored_upto = upto


def offer_after_pass(rank, batch) -> None:
    """Stores at the end of a pass (`batch` before its tokens are counted)."""
    size = rank.block_size
    profile = rank.chain.profile
    if profile.store_delay_passes:  # what was computed before this pass: one pass after it was computed
        for request, new in batch.items:
            upto = request.num_computed // size
            if upto > request.tier.stored_upto:
                offer(rank, request, min(upto, len(request.keys)))
    elif profile.store_decode_blocks:
        for request, new in batch.items:
            upto = (request.num_computed + new) // size
            if upto > request.tier.stored_upto:
                offer(rank, request, min(upto, len(request.keys)))
    # prompt blocks only: a pass of decodes alone computes none (a decode rank's recompute is timed as a decode,
    # scheduler.work_of, but computes its blocks all the same)
    elif batch.work.prefill_chunks or rank.role == "decode":
        for request, new in batch.items:
            computed, prompt = request.num_computed, request.spec.prompt_len
            if computed >= prompt:
                continue  # decoding: nothing new to store
            end = computed + new
            upto = (end if end < prompt else prompt) // size
            if upto > request.tier.stored_upto:
                offer(rank, request, min(upto, len(request.keys)))


def offer_on_finish(rank, request) -> None:
    """A finishing request offers what it could not store earlier (v0.32 connectors)."""
    host, profile, size = rank.chain.top, rank.chain.profile, rank.block_size
    if not profile.store_rest_on_finish:
        return
    if profile.store_decode_blocks:
        offer(rank, request, min(request.num_computed // size, len(request.keys)), hold=True)
        return
    state = request.tier
    unstored, state.unstored = state.unstored, []
    retry = host.lacking(unstored) if unstored else unstored
    # (nothing to retry: no reserve; the refresh below changes the tier's version all the same)
    accepted = host.reserve(retry) if retry else retry
    if accepted:
        position = {key: i for i, key in enumerate(request.keys)}
        blocks = [request.blocks[position[key]] for key in accepted]
        _start_store(rank, host, request, accepted, blocks)
    # re-rank every block it stored, offered or loaded, its first block newest
    host.refresh(request.keys, min(state.stored_upto, request.spec.prompt_len // size))


def _start_store(rank, host, request, keys: list, blocks: list[int], hold: bool = False) -> None:
    state = request.tier
    state.stores_in_flight += 1
    job = Copy(host, "write", stored, rank, request, keys, blocks)
    if hold:
        _hold(rank, job)
    state.store_jobs.append(job)
    rank.jobs.append(job)


def _hold(rank, job: Copy) -> None:
    """simple_cpu: the store's G1 blocks stay held until it lands.  The chain counts such stores in flight, and those
    holding a block without a key, which the landing frees to the head of G1's free queue (see
    `TierChain.copies_harmless`; a held block keeps its key, or lack of one, until it is freed)."""
    job.hold = True
    chain = rank.chain
    chain.holding += 1
    chain.holding_keyless += _keyless(rank.pool, job.blocks)


def _keyless(pool, blocks: list[int]) -> bool:
    """Would freeing `blocks` put one at the head of the pool's free queue (a block without a key)?"""
    key_of = getattr(pool, "key_of", None)
    return key_of is None or (pool.caching and None in map(key_of.__getitem__, blocks))


def stored(rank, job: Copy, now: int) -> None:
    job.tier.landed(job.keys)
    write_down(rank, job.tier, job.keys)
    rank.pool.end_copy(job.blocks)
    state = job.request.tier
    state.stores_in_flight -= 1
    state.store_jobs.remove(job)
    if job.hold:  # simple_cpu: blocks held for the copy are freed now, first block first
        chain = rank.chain
        chain.holding -= 1
        chain.holding_keyless -= _keyless(rank.pool, job.blocks)
        rank.pool.release(job.blocks[::-1])


def release_blocks(rank, request, blocks: list[int]) -> None:
    """Free `blocks` of `request` on `rank`: simple_cpu holds those its stores still copy out until they land,
    the other connectors free them and a new owner waits for the copy."""
    jobs = request.tier.store_jobs
    copying = [job for job in jobs if job.rank is rank] if jobs else None
    if copying:
        if rank.chain.profile.g1_copy == "hold_until_copied":
            held = set()
            for job in copying:
                if not job.hold:
                    _hold(rank, job)
                held.update(job.blocks)
            blocks = [b for b in blocks if b not in held]
        else:
            for job in copying:
                rank.pool.freeing_while_copied(job.blocks)
    rank.snapshots.released(rank, request)
    rank.pool.release(blocks)


def admitting(rank, request, hits: int) -> int:
    """An admission takes over the blocks its restore filled (their hold passes to its own reference): returns
    the tokens restored from the first tier; after a restore, blocks before `hits` are not offered to it again unless
    the connector scans from block 0."""
    state = request.tier
    if state.preloaded:
        rank.pool.release(state.preloaded)
        state.preloaded = []
    restored, state.restored_tokens = state.restored_tokens, 0
    # vLLM's OffloadingConnector starts a request's stores after the blocks it loaded; without a load from block 0
    # (`_next_stored_block_idx` defaults to 0), so G1 hits that G2 lacks, such as a previous turn's output, are stored
    state.stored_upto = rank.chain.first_offer(hits) if restored else 0
    state.admitted_labels, state.restored_labels = (state.restored_labels if restored else ()), ()
    return restored


def drop_restore_holds(rank) -> bool:
    """Nothing runs and the head cannot start while requests behind it hold restored blocks: let those go (they
    stay cached in G1 and will be found again), so the rank cannot stall on its own holds."""
    holders = list(compress(rank.waiting, map(PRELOADED, rank.waiting)))  # (in C: thousands may wait)
    for request in holders:
        rank.pool.release(request.tier.preloaded)
        request.tier.preloaded = []
        request.tier.restored_tokens = 0
    return bool(holders)


def preemption_wait(rank, victim) -> None:
    """The next pass waits for the victim's stores (or, for simple_cpu, every transfer of the rank)."""
    if rank.chain.profile.preemption_waits_for == "all_transfers":
        rank.waits.append(("rank", rank))
    elif victim.tier.stores_in_flight:
        rank.waits.append(("stores", victim))


def blocked(rank) -> bool:
    """Does a pass of this rank have to wait for copies?"""
    if rank.pool.awaited:
        return True
    if not rank.waits:
        return False
    rank.waits = [w for w in rank.waits if (w[1].transfers_in_flight if w[0] == "rank" else
                                             w[1].tier.stores_in_flight)]
    return bool(rank.waits)
