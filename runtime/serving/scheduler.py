"""vLLM's continuous-batching scheduler for one attention-DP rank.

One pass: running requests get the token budget first, in admission order
(a decode needs one token, an unfinished prefill the rest of its prompt, cut
to the budget with chunked prefill).  When blocks run out the newest running
request is preempted (recompute): it frees its blocks, which keep their
hashes, and goes back to the front of the waiting queue.  Then, if nothing was
preempted, waiting requests are admitted in arrival order while budget,
`max_sequences` and free blocks last (a waiting request needs blocks for its
whole known sequence, not only this pass's chunk: `known_sequence`, the
engine's `rank.admission`); an admission reuses the longest cached
prefix of whole blocks, never the last known token.  Full blocks become
discoverable as soon as they are scheduled, as in vLLM v1.  A waiting request
whose prompt can never fit G1 is dropped when admission reaches it
(`rank.rejecting`: the shell rejects it when the pass ends, as AISimulate does).
"""
from __future__ import annotations

from collections import deque

from ..tiers import offload
from ..tiers.chain import NO_TIERS
from ..tiers.g1 import BlockPool
from ..tiers.state_snapshots import WHOLE_BLOCKS
from . import handoff, pass_results
from .pass_work import Batch, work_of
from .requests import Request


class Rank:
    __slots__ = ("index", "worker", "pool", "waiting", "running", "block_size", "max_batched", "max_sequences",
                 "chunked", "state_blocks", "preemptions", "name", "chain", "jobs", "waits", "transfers_in_flight",
                 "role", "handoff", "admission", "reservation", "reuse_limit", "misses", "releases", "speculation",
                 "handoff_kv", "snapshots", "rejecting", "held_back", "pass_owed", "reserve_tries")

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
        self.chain = NO_TIERS  # its tiers behind G1 (tiers.chain.TierChain)
        self.jobs: list = []  # copies and handoff steps requested since the replay last looked
        self.waits: list = []  # what its next pass waits for after a preemption (see offload.preemption_wait)
        self.transfers_in_flight = 0
        self.role = "aggregated"
        self.handoff = None  # handoff.Handoff on decode ranks
        self.releases: list = []  # handed-off requests whose source blocks this prefill rank lets go at its pass end
        self.admission = known_sequence  # free blocks a waiting request needs (an engine's capacity policy may differ)
        self.reservation = handoff.as_needed  # free blocks a decode rank needs to take a handoff (likewise)
        self.reuse_limit = all_but_last  # how many blocks of a request's known tokens an admission may reuse
        self.misses = None  # analysis.miss_classes.MissExplainer, told of each admission when a run asks why
        self.speculation = None  # speculation.Speculation: decode passes emit accepted drafts too
        self.handoff_kv = handoff.BLOCKS  # what its G1 does for a P/D handoff (an engine's cache may differ)
        self.snapshots = WHOLE_BLOCKS  # where reuse resumes (tiers.state_snapshots: a state cache's snapshots)
        # waiting requests whose prompt can never fit G1, which admission reached in this pass: they are rejected
        # when the pass ends (AISimulate's mocker), or at once when no pass runs (shell/replay.py)
        self.rejecting: list[Request] = []
        # the waiting request this pass's admission stopped at for want of blocks, while others run (None: it did
        # not stop so); shell/macro.py may then fuse decode passes that leave it waiting
        self.held_back: Request | None = None
        # a pass the engine runs although nothing waits or runs (SGLang's overlap loop: the decode it decided
        # for requests that have since finished, sglang_overlap.py)
        self.pass_owed = False
        self.reserve_tries = 0  # decode ranks: attempts at the handoff reservations due now (handoff.reserve_pending)

    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting or self.pass_owed)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)


def all_but_last(rank: "Rank", request: Request) -> int:
    """vLLM's reuse limit: whole blocks before the last known token, which is always recomputed (its logits
    sample the next token)."""
    return (request.num_tokens - 1) // rank.block_size


def known_sequence(rank: "Rank", request: Request, hits: list[int], need: int) -> int:
    """vLLM's admission (AISimulate's mocker): a waiting request starts only when the blocks of its whole known
    sequence (prompt, and the output a preempted one already made), less its cached prefix, are free, even if
    chunked prefill computes only part of it this pass.  Admitting on the chunk alone let a long prompt start,
    run out of blocks at its next chunk and be preempted again and again."""
    return max(need, rank.blocks_for(request.num_tokens) - len(hits) + rank.state_blocks)


def preempt(rank: Rank, request: Request) -> None:
    rank.chain.preemption_wait(rank, request)
    offload.release_blocks(rank, request, request.blocks)
    request.blocks = []
    request.max_blocks = 0
    request.num_computed = 0
    request.status = "waiting"
    rank.waiting.appendleft(request)
    rank.preemptions += 1


def _admit(rank: Rank, request: Request, budget: int, now_ns: int) -> int:
    """Try to admit a waiting request: tokens scheduled, 0 if it must wait for blocks, DEFER or LOAD."""
    rank.pool.advance(request.spec.index)
    limit = rank.reuse_limit(rank, request)
    hits = rank.pool.match(request.keys, limit)
    if rank.speculation is not None and hits and rank.snapshots.drafts_drop_last_hit \
            and rank.reuse_limit is all_but_last:  # as vLLM with EAGLE/MTP drafts (AISimulate: any kind, not align
        hits = hits[:-1]  # mode, not TensorRT-LLM's whole-sequence reuse): the drafter needs the last hit's states
    if not request.tier.preloaded:
        outcome = rank.chain.restore(rank, request, hits, limit)
        if outcome:
            return outcome
    hits, cached, source = rank.snapshots.resume(rank, request, hits)
    computed = min(cached, request.num_tokens - 1)  # (a wholly cached sequence still runs its last token)
    new = request.num_tokens - computed
    if not rank.chunked and new > budget:
        return 0
    new = rank.snapshots.chunk(rank, request, computed, min(new, budget))
    if not new:  # (align mode: the budget left makes no whole block; vLLM's waiting loop stops there, `break`)
        return 0
    need = rank.blocks_for(computed + new) - len(hits) + rank.state_blocks
    if not rank.pool.can_allocate(rank.admission(rank, request, hits, need), hits + source if source else hits):
        return 0
    rank.pool.touch(hits)
    rank.snapshots.hold(rank, request, source)  # (the state it resumes from: read by its first pass)
    restored = rank.chain.admitting(rank, request, len(hits))
    new_blocks = rank.pool.allocate(need)
    rank.snapshots.allocated(rank, request)  # (DeepSeek V4 lets the snapshot's blocks go once its state is taken)
    token_blocks = rank.blocks_for(computed + new) - len(hits)
    request.blocks = hits + new_blocks[:token_blocks] + new_blocks[token_blocks:]
    request.max_blocks = len(hits)
    request.num_computed = computed
    readmission = bool(request.admissions)
    # a readmission reuses what the request itself computed, its output included: the spec's field table counts
    # "prompt tokens" for the first admission only, and AISimulate's entries and reused_input_tokens are not cut
    prompt_reused = cached if readmission else min(cached, request.spec.prompt_len)
    host_reused = min(restored, prompt_reused)
    request.admissions.append({
        "admission_ordinal": len(request.admissions), "pool": rank.chain.name if host_reused else rank.name,
        "at_ns": now_ns, "reused_input_tokens": prompt_reused, "g1_reused_input_tokens": prompt_reused - host_reused,
        "host_reused_input_tokens": host_reused, "is_readmission": readmission,
        **request.tier.sources(host_reused, rank.block_size)} | rank.snapshots.admitted(request, computed))
    if not readmission:
        request.first_admit_ns = now_ns
        request.first_reused_tokens = prompt_reused
        request.first_host_tokens = host_reused
        request.first_g1_tokens = prompt_reused - host_reused
    if rank.role != "decode":  # with a prefill stage, reuse is counted over prefill admissions only
        request.reused_tokens = max(request.reused_tokens, prompt_reused)
    request.committed_prefill += max(0, request.spec.prompt_len - cached)
    if rank.misses is not None:
        rank.misses.admitted(rank, request, len(hits), limit, cached)
    request.status = "running"
    return new


def admit_waiting(rank: Rank, budget: int, items: list, now_ns: int) -> int:
    """Admit waiting requests in order while budget, `max_sequences` and blocks last; returns the budget left.
    On a decode rank whose handoffs are not all reserved, only the landed ones are admitted: a prompt to
    compute (a readmission) waits until every handoff has its blocks (the mocker's `PendingDestinationHead`)."""
    waiting, running = rank.waiting, rank.running
    short = rank.role == "decode" and handoff.reserve_pending(rank, now_ns)
    position = 0
    while position < len(waiting) and len(running) < rank.max_sequences:
        request = waiting[position]
        if request.reason and not short:  # its prompt can never fit (arrivals.py let it wait): reached, so dropped
            del waiting[position]  # (even with no budget left: the mocker checks before it schedules; a scan past
            rank.rejecting.append(request)  # a head that waits, or past unreserved handoffs, does not reach it)
            continue
        if budget <= 0:
            break
        pd = request.pd
        phase = pd.phase if pd is not None else None
        if phase == "arrived":  # its pass computes nothing and samples its first token (the mocker's activation
            del waiting[position]  # pass: a decode, with no token of the budget)
            handoff.admit_arrived(request, now_ns)
            request.status = "running"
            running.append(request)
            items.append((request, 0))
            continue
        if phase == "reserve" and not short:  # destination-first: reserve, then the prefill starts elsewhere
            if not handoff.reserve_first(rank, request, now_ns):
                break
            del waiting[position]
            continue
        if short or request.tier.loading or phase is not None:
            position += 1  # waits for its restore from G2, its handoff, or (short) every handoff's reservation
            continue
        new = _admit(rank, request, budget, now_ns)
        if new < 0:  # offload.DEFER, LOAD or READ: this one waits for G2, look at the next one
            position += 1
            continue
        if not new:
            if running or items:
                rank.held_back = request
                break
            # nothing runs here to free blocks: a landed handoff behind goes first, or the rank would wait forever
            # (Dynamo's mocker does wait: AISimulate stops with "an effect-free zero-duration pass", facts §21)
            if rank.role != "decode":  # only a decode rank has landed handoffs: nothing behind can go, and
                break  # skipping thousands of waiting requests one by one was a pass's main cost (facts §39)
            short = True
            position += 1
            continue
        del waiting[position]
        running.append(request)
        pass_results.register(rank, request, request.num_computed + new)
        items.append((request, new))
        budget -= new
    return budget


def schedule(rank: Rank, now_ns: int) -> Batch | None:
    budget = rank.max_batched
    items: list[tuple[Request, int]] = []
    preempted = False
    rank.held_back = None
    running = rank.running
    i = 0
    block_size = rank.block_size
    append = items.append
    lookahead = rank.speculation.lookahead if rank.speculation is not None else 0
    hybrid = rank.snapshots is not WHOLE_BLOCKS
    # requests whose state became a snapshot (their next pass allocates fresh state) or that hold a snapshot's
    # blocks (released at their next schedule) take the full path below, not the in-block decode shortcut
    owed, sources = rank.snapshots.owed, rank.snapshots.sources
    watched = bool(owed or sources)  # (empty on most passes: the shortcut then needs no lookup)
    rest, decodes, context = [], 0, 0  # what work_of prices, but the shortcut's decodes: counted here (most items)
    while i < len(running) and budget > 0:
        request = running[i]
        computed = request.num_computed
        new = request.num_tokens - computed
        if new == 1 and not lookahead and computed % block_size and (computed + 1) // block_size <= request.max_blocks \
                and request.generated and not (watched and (id(request) in owed or id(request) in sources)):
            append((request, 1))  # a decode inside its last block: nothing to allocate or register
            decodes, context = decodes + 1, context + computed + 1  # (work_of's decode: a token after the first)
            budget -= 1
            i += 1
            continue
        new = rank.snapshots.chunk(rank, request, computed, min(new, budget))  # (0: align mode's whole blocks)
        if not new or not rank.chunked and new < request.num_tokens - computed:
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
        pass_results.register(rank, request, request.num_computed + new)
        items.append((request, new))
        rest.append((request, new))
        budget -= new
        i += 1
    scheduled = len(items)
    if not preempted or not items:  # (a pass that preempted everything is empty: the next one admits)
        budget = admit_waiting(rank, budget, items, now_ns)
        if not running and not items and rank.chain.drop_restore_holds(rank):
            budget = admit_waiting(rank, budget, items, now_ns)
    if not items:
        return None
    rest += items[scheduled:]
    work = work_of(rest, rank.speculation, rank.role == "decode", True, hybrid, decodes, context)
    if lookahead:
        rank.speculation.reserve_bursts(rank, items, preempt, _fits)  # (a victim's pass is still priced)
    return Batch(items, work)


def _fits(rank: Rank, request: Request, tokens: int) -> bool:
    token_blocks = len(request.blocks) - rank.state_blocks
    needed = max(0, rank.blocks_for(tokens) - token_blocks)
    snapshots = rank.snapshots
    fresh = snapshots.prepare(rank, request) if snapshots.owed or snapshots.sources else 0
    if not needed + fresh:
        return True
    if rank.pool.free_count < needed + fresh:
        return False
    if fresh or not token_blocks:
        new_blocks = rank.pool.allocate(needed + fresh)
    else:  # (the request's next blocks after its last one: g1_extents.py keeps a request's blocks one range)
        new_blocks = rank.pool.allocate_after(request.blocks[token_blocks - 1], needed)
    request.blocks[token_blocks:token_blocks] = new_blocks[:needed]  # state blocks stay at the end
    if fresh:
        rank.snapshots.swap(rank, request, new_blocks[needed:])
    return True
