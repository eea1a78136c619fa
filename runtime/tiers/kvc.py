"""opal's KV-cache manager as a store policy: lookups across the tiers, reads onto the GPU, and stores.

- Lookup, fastest first: after APC's prefix (G1 hits), each tier continues
  the prompt where the one above stopped (chunk keys, `KvcChain.keys`) and is
  never revisited.  APC's prefix and the tiers' continuation are served
  together: the G1 blocks the continuation covers are allocated at once
  (evicting idle APC blocks like any admission), each serving tier reads its
  chunks over its device, a tier other than CPUMemory then copies them onto
  the GPU over the CPUMemory-shaped link, and the request waits until every
  read has landed; its blocks are then G1 blocks like any hit.  Only whole G1
  blocks are served, and never the prompt's last token.
- Stores walk the tiers in order: each tier takes the chunks it lacks while it
  has room (an LRU tier evicts its oldest chunks and demotes them to the next
  tier); what found no room goes on to the next tier, and is dropped after
  the last.  Nothing waits for a store.  A finished request stores its prompt
  (retirement); an APC eviction stores the prefix its writer had up to the
  largest chunk-aligned end among the evicted blocks (write-through).
- With an LRU tier, a hit in a deeper tier is also copied into the LRU tiers
  above it (promotion).
"""
from __future__ import annotations

from functools import partial
from itertools import filterfalse

from .closed_tier import closed
from .copy_jobs import Copy
from .offload import LOAD, PRELOADED, admitting as offload_admitting, drop_restore_holds as offload_drop_holds

ONE_HOP = "CPUMemory"  # what CPUMemory serves is already on the GPU's link


# ---------------------------------------------------------------------------------------------- lookups

def restore(rank, request, hits: list[int], limit: int) -> int:
    """Serve what the tiers hold past APC's prefix: LOAD (the request waits for its reads) or 0."""
    chain, spec, size = rank.chain, request.spec, rank.block_size
    keys, chunk = chain.keys(spec), chain.chunk_size
    start_tokens = len(hits) * size
    position = start = start_tokens // chunk
    found = []
    for tier in chain.tiers:
        count, _ = tier.lookup(keys, position, len(keys))
        if count:
            found.append((tier, position, position + count))
            position += count
    if position == start:
        return 0
    end_blocks = min(min(position * chunk, spec.prompt_len) // size, limit)
    new = end_blocks - len(hits)
    if new <= 0 or not rank.pool.can_allocate(new, hits):
        return 0
    rank.pool.touch(hits)
    fresh = rank.pool.allocate(new)
    state = request.tier
    state.restoring = hits + fresh
    state.loading = True
    state.restored_tokens = new * size
    end_tokens, served, reads = end_blocks * size, [], 0
    for tier, first, stop in found:
        low, high = max(first * chunk, start_tokens), min(stop * chunk, end_tokens)
        if high <= low:
            continue
        read = keys[low // chunk:-(-high // chunk)]
        served.append((tier.label, high - low))
        tier.start_read(read, rank.worker)
        rank.jobs.append(Copy(tier, "read", _read_landed, rank, request, read))
        reads += 1
    if not request.admissions:  # a request's tier hits are those of its first admission, as its reuse is
        state.served = tuple(served)
        state.io_started = chain.clock.now
    state.reads_in_flight = reads
    counters = chain.counters.served
    for name, tokens in served:
        counters[name] = counters.get(name, 0) + tokens
    return LOAD


def _read_landed(rank, copy: Copy, now: int) -> None:
    """A tier's read landed: CPUMemory's is on the GPU; a deeper tier's goes on over the GPU link."""
    copy.tier.read_done(copy.keys)
    chain = rank.chain
    index = chain.tiers.index(copy.tier)
    if index and any(chain.lru[:index]):
        _promote(rank, copy.keys, index)
    if copy.tier.label == ONE_HOP:
        _on_gpu(rank, copy, now)
    else:
        rank.jobs.append(Copy(chain.gpu, "read", _on_gpu, rank, copy.request, copy.keys))


def _on_gpu(rank, copy: Copy, now: int) -> None:
    """One serving tier's chunks reached the GPU; with the last, the restored blocks are G1 blocks."""
    request = copy.request
    state = request.tier
    state.reads_in_flight -= 1
    if state.reads_in_flight:
        return
    if not request.admissions:
        state.io_ns = now - state.io_started
    blocks, state.restoring = state.restoring, []
    restored = state.restored_tokens // rank.block_size
    rank.pool.register_restored(blocks, request.keys, len(blocks) - restored, len(blocks))
    state.loading = False
    state.preloaded = blocks
    rank.chain.holding.append(request)


def drop_restore_holds(rank) -> bool:
    """offload.drop_restore_holds, without its pass over every waiting request while none holds a restore (an
    overloaded run has thousands waiting, and nothing runs at each pass that waits for a TTL expiry)."""
    chain = rank.chain
    chain.holding = list(filter(PRELOADED, chain.holding))
    if not chain.holding:
        return False
    dropped = offload_drop_holds(rank)  # (in waiting order, as they are released)
    chain.holding = list(filter(PRELOADED, chain.holding))  # (those not waiting keep their blocks)
    return dropped


def admitting(rank, request, hits: int) -> int:
    """An admission takes over its restored blocks; one without a restore has no tier hits."""
    restored = offload_admitting(rank, request, hits)
    if not restored and not request.admissions:
        request.tier.served = ()
    return restored


# ---------------------------------------------------------------------------------------------- stores

def store(rank, keys: list | None, first: int = 0, stop: int | None = None, source: tuple | None = None) -> None:
    """Walk tiers[first:stop] with `keys` (see the module docstring); copies start in the background.  `source` =
    (spec, kind, count) says `keys` are the first `count` of a request's key list (`kind`: "prompt", its tier
    keys, or a chunk size, its `keys` at that size), made only if a tier needs them (None: make them now)."""
    chain = rank.chain
    tiers = chain.tiers[first:stop]
    if source is not None and len(tiers) == 1 and closed(tiers[0]):
        tier, (spec, kind, count) = tiers[0], source
        lacking = chain.closed.lacking(tier, spec, kind, partial(_source_keys, chain, spec, kind), count)
        if lacking is not None:  # what the reserve below would do: it is short of room for every lacking key
            if lacking:
                tier.last_reserve_short = True
                tier.version += 1
                chain.counters.dropped_chunks += lacking
            return
    if keys is None:
        keys = _source_keys(chain, source[0], source[1])[:source[2]]
    offered = list(dict.fromkeys(keys))
    for offset, tier in enumerate(tiers):
        lacking = tier.lacking(offered)
        if not lacking:
            return
        lru = chain.lru[first + offset]
        if lru:
            tier.evicted = []
        accepted = tier.reserve(lacking, distinct=True, count_dropped=False)
        if accepted:
            rank.jobs.append(Copy(tier, "write", _stored, rank, None, accepted))
        if lru:
            victims, tier.evicted = tier.evicted, None
            if victims:
                chain.counters.demotions += len(victims)
                store(rank, victims, first + offset + 1)
        if len(accepted) == len(lacking):
            return
        offered = list(filterfalse(set(accepted).__contains__, lacking))
    chain.counters.dropped_chunks += len(offered)


def _source_keys(chain, spec, kind) -> list:
    return chain.keys(spec) if kind == "prompt" else spec.fresh_keys(kind)  # (a finished writer's are forgotten)


def _stored(rank, copy: Copy, now: int) -> None:
    copy.tier.landed(copy.keys)


def _promote(rank, keys: list, index: int) -> None:
    """A hit in tiers[index]: the LRU tiers above it take a copy (what they evict is demoted as usual)."""
    chain = rank.chain
    chain.counters.promotions += len(keys)
    for above in range(index):
        if chain.lru[above]:
            store(rank, keys, above, above + 1)


def retire(rank, request) -> None:
    """A finished request stores its prompt into the tiers, and forgets its keys: opal's outputs keep every request,
    and a request's keys at block 16 are most of a long trace's memory (a write-through of its blocks evicted
    later makes the few it needs again)."""
    chain = rank.chain
    chain.counters.retirement_stores += 1
    keys = chain.keys(request.spec)
    store(rank, keys, source=(request.spec, "prompt", len(keys)))
    request.forget_keys()


def write_through(rank, keys, runs) -> None:
    """APC evicted blocks (their keys, and runs of one writer's blocks: [(writer spec, block indices)]): every
    writer whose evicted blocks include one ending on a chunk boundary stores its prefix up to the largest such
    end (the first writer to ask first)."""
    chain = rank.chain
    size, chunk = rank.block_size, chain.chunk_size
    if len(runs) == 1:  # (a decode's block, or one writer's blocks: most batches)
        (writer, positions), = runs
        last = _last_aligned(positions, size, chunk) if writer is not None else None
        if last is not None:
            chain.counters.write_through_stores += 1
            store(rank, None, source=(writer, chunk, (last + 1) * size // chunk))
        return
    ends: dict = {}  # id(writer) -> (writer, largest aligned end): specs hash by value, which is slow
    for writer, positions in runs:  # (one step per run of one writer's blocks, apc_writers.py, not per block)
        if writer is None:
            continue
        last = _last_aligned(positions, size, chunk)
        number = id(writer)
        if last is not None and (last + 1) * size > ends.get(number, (None, 0))[1]:
            ends[number] = (writer, (last + 1) * size)
    for writer, end in ends.values():
        chain.counters.write_through_stores += 1
        store(rank, None, source=(writer, chunk, end // chunk))


def _last_aligned(positions, size: int, chunk: int) -> int | None:
    """The largest block index of `positions` (a list, or a numpy array: APC's runs of many blocks) whose block
    ends on a chunk boundary (None: none does)."""
    if type(positions) is not list:  # (in C, no int object per block)
        if chunk != size:
            positions = positions[(positions + 1) * size % chunk == 0]
        return int(positions.max()) if len(positions) else None
    if chunk == size:
        return max(positions)
    return next((p for p in sorted(positions, reverse=True) if (p + 1) * size % chunk == 0), None)


def no_store(rank, batch) -> None:
    """opal stores nothing while a request runs."""


def no_wait(rank, victim) -> None:
    """A preemption waits for nothing: no copy reads a running request's blocks."""
