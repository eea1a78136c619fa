"""vLLM's continuous-batching scheduler for one attention-DP rank.

One pass: running requests get the token budget first, in admission order
(a decode needs one token, an unfinished prefill the rest of its prompt, cut
to the budget with chunked prefill).  When blocks run out the newest running
request is preempted (recompute): it frees its blocks, which keep their
hashes, and goes back to the front of the waiting queue.  Then, if nothing was
preempted, waiting requests are admitted in arrival order while budget,
`max_sequences` and free blocks last; an admission reuses the longest cached
prefix of whole blocks, never the last known token.  Full blocks become
discoverable as soon as they are scheduled, as in vLLM v1.
"""
from __future__ import annotations

from collections import deque

from .g1 import BlockPool
from .requests import Request
from .timing import PassWork


DEFER, LOAD = -1, -2  # `_admit` outcomes besides "tokens scheduled" and 0 ("must wait for blocks")


class Job:
    """A copy the scheduler asks for: a G2 store (GPU->host) or restore (host->GPU) of one request's blocks."""

    __slots__ = ("kind", "rank", "request", "keys", "blocks")

    def __init__(self, kind: str, rank: "Rank", request: Request, keys: list, blocks: list[int]):
        self.kind, self.rank, self.request, self.keys, self.blocks = kind, rank, request, keys, blocks


class Rank:
    __slots__ = ("index", "worker", "pool", "waiting", "running", "block_size", "max_batched", "max_sequences",
                 "chunked", "state_blocks", "preemptions", "name", "host", "jobs")

    def __init__(self, index: int, worker: int, pool: BlockPool, block_size: int, max_batched: int,
                 max_sequences: int, chunked: bool, state_blocks: int = 0, name: str = ""):
        self.index = index
        self.worker = worker
        self.pool = pool
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.block_size = block_size
        self.max_batched = max_batched
        self.max_sequences = max_sequences
        self.chunked = chunked
        self.state_blocks = state_blocks
        self.preemptions = 0
        self.name = name
        self.host = None  # HostPool when G2 is configured
        self.jobs: list[Job] = []  # copies requested since the engine last looked

    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)


class Batch:
    """What one rank runs in one pass."""

    __slots__ = ("items", "work")

    def __init__(self, items: list[tuple[Request, int]], work: PassWork):
        self.items = items
        self.work = work


def _register(rank: Rank, request: Request, tokens: int) -> None:
    """Make the request's full blocks up to `tokens` discoverable by their keys."""
    upto = min(tokens // rank.block_size, len(request.keys))
    if upto > request.max_blocks:
        rank.pool.register_run(request.blocks, request.keys, request.max_blocks, upto)
        request.max_blocks = upto


def preempt(rank: Rank, request: Request) -> None:
    rank.pool.release(request.blocks)
    request.blocks = []
    request.max_blocks = 0
    request.num_computed = 0
    request.status = "waiting"
    rank.waiting.appendleft(request)
    rank.preemptions += 1


def _restore(rank: Rank, request: Request, hits: list[int], limit: int) -> int:
    """Look the rest of the prefix up in G2; DEFER, LOAD (a restore started) or 0 (nothing to restore)."""
    host, profile = rank.host, rank.host.profile
    if profile.own_store_defers and request.stores_in_flight:
        return DEFER
    found, deferred = host.lookup(request.keys, len(hits), limit)
    if profile.refresh_on_lookup:
        host.refresh(request.keys[:request.spec.prompt_len // rank.block_size])
    if deferred:
        return DEFER
    if not found:
        return 0
    if not rank.pool.can_allocate(found, hits):
        return 0
    rank.pool.touch(hits)
    fresh = rank.pool.allocate(found)
    keys = request.keys[len(hits):len(hits) + found]
    host.start_load(keys)
    request.blocks = hits + fresh
    request.loading = True
    request.host_tokens = found * rank.block_size
    rank.jobs.append(Job("load", rank, request, keys, fresh))
    return LOAD


def restored(rank: Rank, job: Job) -> None:
    """A restore finished: its blocks are G1 blocks now, held by the request until it is admitted."""
    request = job.request
    rank.host.loaded(job.keys)
    first = len(request.blocks) - len(job.blocks)
    rank.pool.register_run(request.blocks, request.keys, first, len(request.blocks))
    request.loading = False
    request.preloaded = request.blocks
    request.blocks = []


def _admit(rank: Rank, request: Request, budget: int, now_ns: int) -> int:
    """Try to admit a waiting request: tokens scheduled, 0 if it must wait for blocks, DEFER or LOAD."""
    block_size = rank.block_size
    limit = (request.num_tokens - 1) // block_size  # the last known token is always recomputed
    hits = rank.pool.match(request.keys, limit)
    if rank.host is not None and not request.preloaded:
        outcome = _restore(rank, request, hits, limit)
        if outcome:
            return outcome
        request.host_tokens = 0
    cached = len(hits) * block_size
    new = request.num_tokens - cached
    if not rank.chunked and new > budget:
        return 0
    new = min(new, budget)
    need = rank.blocks_for(cached + new) - len(hits) + rank.state_blocks
    if not rank.pool.can_allocate(need, hits):
        return 0
    rank.pool.touch(hits)
    if request.preloaded:  # the restore's hold passes to the admission's own reference
        rank.pool.release(request.preloaded)
        request.preloaded = []
    fresh = rank.pool.allocate(need)
    token_blocks = rank.blocks_for(cached + new) - len(hits)
    request.blocks = hits + fresh[:token_blocks] + fresh[token_blocks:]
    request.max_blocks = len(hits)
    request.num_computed = cached
    request.stored_upto = len(hits)  # G1 hits and restored blocks are not offered to G2 again
    readmission = bool(request.admissions)
    prompt_reused = min(cached, request.spec.prompt_len)
    host_reused = min(request.host_tokens, prompt_reused)
    request.admissions.append({
        "admission_ordinal": len(request.admissions), "pool": rank.host.name if host_reused else rank.name,
        "at_ns": now_ns, "reused_input_tokens": prompt_reused, "g1_reused_input_tokens": prompt_reused - host_reused,
        "host_reused_input_tokens": host_reused, "is_readmission": readmission})
    request.host_tokens = 0
    if not readmission:
        request.first_admit_ns = now_ns
        request.first_reused_tokens = prompt_reused
        request.first_host_tokens = host_reused
        request.first_g1_tokens = prompt_reused - host_reused
    request.reused_tokens = max(request.reused_tokens, prompt_reused)
    request.committed_prefill += max(0, request.spec.prompt_len - cached)
    request.status = "running"
    return new


def schedule(rank: Rank, now_ns: int) -> Batch | None:
    budget = rank.max_batched
    items: list[tuple[Request, int]] = []
    preempted = False
    running = rank.running
    i = 0
    block_size = rank.block_size
    append = items.append
    while i < len(running) and budget > 0:
        request = running[i]
        computed = request.num_computed
        new = request.num_tokens - computed
        if new == 1 and computed % block_size and (computed + 1) // block_size <= request.max_blocks:
            append((request, 1))  # a decode inside its last block: nothing to allocate or register
            budget -= 1
            i += 1
            continue
        if new > budget:
            new = budget
        if not rank.chunked and new < request.num_tokens - request.num_computed:
            i += 1
            continue
        while not _fits(rank, request, request.num_computed + new):
            victim = running.pop()
            preempt(rank, victim)
            preempted = True
            if victim is request:
                request = None
                break
        if request is None:
            break
        _register(rank, request, request.num_computed + new)
        items.append((request, new))
        budget -= new
        i += 1
    if not preempted:
        waiting = rank.waiting
        position = 0
        while position < len(waiting) and budget > 0 and len(running) < rank.max_sequences:
            request = waiting[position]
            if request.loading:
                position += 1  # waits for its restore from G2, as vLLM skips requests awaiting remote KV
                continue
            new = _admit(rank, request, budget, now_ns)
            if new < 0:  # deferred by the G2 connector, or a restore started: look at the next one
                position += 1
                continue
            if not new:
                break
            del waiting[position]
            running.append(request)
            _register(rank, request, request.num_computed + new)
            items.append((request, new))
            budget -= new
    if not items:
        return None
    return Batch(items, work_of(items))


def _fits(rank: Rank, request: Request, tokens: int) -> bool:
    token_blocks = len(request.blocks) - rank.state_blocks
    needed = rank.blocks_for(tokens) - token_blocks
    if needed <= 0:
        return True
    if rank.pool.free_count < needed:
        return False
    fresh = rank.pool.allocate(needed)
    request.blocks[token_blocks:token_blocks] = fresh  # state blocks stay at the end
    return True


def work_of(items: list[tuple[Request, int]]) -> PassWork:
    chunks, decodes, context = [], 0, 0
    for request, new in items:
        if new == 1 and request.generated and request.num_computed == request.num_tokens - 1:
            decodes += 1
            context += request.num_computed + 1
        else:
            chunks.append((new, request.num_computed))
    return PassWork(tuple(chunks), decodes, context)


def finish_pass(rank: Rank, batch: Batch, end_ns: int) -> list[Request]:
    """Apply a pass's results at its end; returns the requests that finished."""
    finished = []
    if rank.host is not None:
        _offer_stores(rank, batch)
    for request, new in batch.items:
        computed = request.num_computed + new
        request.num_computed = computed
        if computed < request.num_tokens:
            continue  # a prefill chunk that does not reach the end of the known tokens
        last = request.last_token_ns
        if last is not None and request.second_token_ns is not None:  # the common decode case, inlined
            gaps, gap = request.gaps, end_ns - last
            if gaps and gaps[-1][0] == gap:
                gaps[-1][1] += 1
            else:
                gaps.append([gap, 1])
            request.last_token_ns = end_ns
            request.generated += 1
            request.num_tokens += 1
        else:
            request.add_token(end_ns)
        if request.generated >= request.spec.output_len:
            finished.append(request)
    if finished:
        release_finished(rank, finished, end_ns)
    return finished


def _offer_stores(rank: Rank, batch: Batch) -> None:
    """Offer the blocks this pass completes to G2 (prompt blocks only, unless the connector stores decodes)."""
    host, size = rank.host, rank.block_size
    for request, new in batch.items:
        computed = request.num_computed + new
        end = computed if host.profile.store_decode_blocks else min(computed, request.spec.prompt_len)
        upto = min(end // size, len(request.keys))
        if upto <= request.stored_upto:
            continue
        keys = host.reserve(request.keys[request.stored_upto:upto])
        if host.profile.refresh_on_lookup:
            host.refresh(request.keys[:request.spec.prompt_len // size])
        if keys:
            index = {key: i for i, key in enumerate(request.keys[request.stored_upto:upto], request.stored_upto)}
            blocks = [request.blocks[index[key]] for key in keys]
            rank.pool.start_copy(blocks)
            request.stores_in_flight += 1
            rank.jobs.append(Job("store", rank, request, keys, blocks))
        request.stored_upto = upto


def stored(rank: Rank, job: Job) -> None:
    rank.host.stored(job.keys)
    rank.pool.end_copy(job.blocks)
    job.request.stores_in_flight -= 1


def release_finished(rank: Rank, finished: list[Request], end_ns: int) -> None:
    done = set(map(id, finished))
    rank.running = [r for r in rank.running if id(r) not in done]
    for request in finished:
        rank.pool.release(request.blocks)
        request.blocks = []
        request.status = "completed"
        request.terminal_ns = end_ns
