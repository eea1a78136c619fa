"""Where a hybrid model's prefix reuse resumes: the state snapshots a rank keeps in its G1.

A model with a per-request state (Kimi K3's recurrent KDA state, DeepSeek V4's sliding-window state) cannot
resume at any matching token: its state must be restored as it was at the resume point, so reuse resumes
only where a snapshot of the state was stored.  The plan's `snapshot_rule` says where (facts §24):
`prompt_ends` (vLLM v0.29 align mode, the spec's; `prefix_match_unit` set, or Kimi K3 without it, the unit
then being the block, as the spec's "Unset (`block_size`)" says): a prompt keeps a snapshot at its
last full block boundary before its last token and at its last `prefix_match_unit` boundary, its prefill
chunks end there, and positions reached by a request's output are never snapshot, so the next turn of a
session resumes inside the previous turn's prompt; `pass_ends` (DeepSeek V4): a snapshot wherever a pass
leaves the request's computed tokens on a block boundary, a prefill chunk's end or any boundary its decode
passes cross; `whole_blocks` (an explicit `bytes_per_request` without it: the state is only
a reservation, reuse resumes after the last matching whole block).

A snapshot is the request's own state blocks, as vLLM's align mode keeps its state (facts §36): when a pass
leaves a request on a snapshot position, its state blocks are registered under keys of their own and become the
snapshot, and the request's next pass allocates fresh state blocks to compute into (with its token blocks; no
room: a preemption, as any allocation).  In align mode the snapshot's blocks stay held through that pass, which
reads them, until the request is scheduled again (vLLM's `remove_skipped_blocks`), and are then free cached
blocks, evicted in LRU order; `pass_ends` frees them when the fresh ones are taken.  A resume holds the
snapshot's blocks through the request's first pass in the same way (most recently used afterwards; `pass_ends`:
only while its admission allocates) and allocates the request's own state.  A snapshot inside a block at the
prompt's end needs one more block (that block's first tokens, which no full-block key keeps), taken when it is
stored (none free: skipped); one short of the prompt's end takes none, as AISimulate counts (facts §62): the
writer's partial token block keeps those tokens (resumable once the writer computed its prompt) and joins the
snapshot, cached, when the writer lets it go (§77).
A snapshot is its keys' content, whole while every key is cached.  Ranks without a state cache use `WHOLE_BLOCKS`.
"""
from __future__ import annotations

from ..traffic.block_keys import sequence_hash
from .resume_policy import WHOLE_BLOCKS, WholeBlocks


class StateSnapshots(WholeBlocks):
    """One rank's stored snapshots: their positions, pool keys and counters, and the snapshot blocks its requests
    hold."""

    __slots__ = ("plan", "unit", "state_blocks", "rule", "stored", "owed", "sources", "written", "pending", "stores",
                 "evicted", "skipped", "resumes", "resumed_tokens", "resumed_at", "drafts_drop_last_hit", "fusable",
                 "drafts_ahead")

    def __init__(self, plan):
        self.plan = plan  # plan_records.StateCachePlan
        self.unit = plan.prefix_match_unit
        self.rule = plan.snapshot_rule
        self.state_blocks = plan.blocks_per_request
        self.stored: dict[int, tuple[int, list[int], list[int]]] = {}  # prefix key -> (position, keys, blocks)
        # id(request) -> the extra block of the snapshot its state became (or []): its next pass owes fresh state
        self.owed: dict[int, list[int]] = {}
        self.sources: dict[int, list[int]] = {}  # id(request) -> snapshot blocks held until its pass ends
        # id(request) -> prefix keys of the snapshots it stored inside one of its partial token blocks, with no block
        # of their own: that block keeps their first tokens' KV and joins them when the request lets it go
        self.written: dict[int, list[int]] = {}
        self.pending: set[int] = set()  # ... those whose writer has not computed its whole prompt yet: not resumable
        # id(request) of those whose pass that reached a block boundary also verified drafts in the next block, so
        # that pass read the old state: the fresh state's swap lets the old go at once (`drafts_read`)
        self.drafts_ahead: set[int] = set()
        self.stores = 0  # snapshots written (a rewrite of an evicted one counts again)
        self.evicted = 0  # stored snapshots that lost a block to eviction (counted when seen)
        self.skipped = 0  # positions not snapshot: no free block for the KV of a block's first tokens
        self.resumes = 0  # admissions that resumed from a snapshot
        self.resumed_tokens = 0  # prompt tokens those admissions did not compute
        self.resumed_at: dict[int, int] = {}  # position -> admissions resumed there
        # align mode resumes at a snapshot, before the last matched block anyway: AISimulate drops no block there under
        # speculation (Kimi K3 with `nextn` resumes as without; facts §45); `pass_ends` drops it as a stateless model
        self.drafts_drop_last_hit = self.rule != "prompt_ends"
        # fused decode passes allocate no state, but a decode ending on a block boundary makes the next one allocate
        # fresh state: only a plain reservation's passes fuse
        self.fusable = self.rule == "whole_blocks"

    @staticmethod
    def positions(prompt_len: int, block_size: int, unit: int) -> tuple[int, ...]:
        """Where a prompt of `prompt_len` tokens keeps snapshots: its last full block boundary before its last
        token and its last `unit` boundary (one position when they coincide, none before the first unit).  (A
        prompt of whole blocks keeps both its end and the boundary one block before: AISimulate's chunks.)"""
        block_end, unit_end = (prompt_len - 1) // block_size * block_size, prompt_len // unit * unit
        return tuple(p for p in dict.fromkeys((block_end, unit_end)) if p)

    def _find(self, pool, key: int):
        """The stored snapshot of prefix `key` as (position, keys, blocks) if every one of its keys is cached, its
        blocks those the pool finds now: stored again over an older copy that lost some blocks, it is whole (the
        survivors are copies of the same state, the oldest copy is found; facts §77)."""
        entry = self.stored.get(key)
        if entry is None:
            return None
        keys = entry[1]
        blocks = pool.match(keys, len(keys))
        if len(blocks) == len(keys):
            return entry[0], keys, blocks
        del self.stored[key]  # one of its blocks was evicted (and maybe reused): the snapshot is gone
        self.evicted += 1
        return None

    def resume(self, rank, request, hits: list[int]) -> tuple[list[int], int, list[int]]:
        """The latest stored snapshot at or before the request's cached prefix (and before its last known
        token): the whole blocks before it, its position and its blocks; ([], 0, []) when none is stored."""
        if self.rule == "whole_blocks":
            return hits, len(hits) * rank.block_size, []
        size, unit, pool = rank.block_size, self.unit, rank.pool
        unit_keys = request.spec.keys(unit)
        # a snapshot inside block len(hits) keeps that block's first tokens itself (its own block, its writer's
        # partial block, or that block once its writer let it go: `released`); past it the KV is missing
        top = min((request.num_tokens - 1) // unit, ((len(hits) + 1) * size - 1) // unit, len(unit_keys))
        for units in range(top, 0, -1):
            entry = self._find(pool, unit_keys[units - 1]) if unit_keys[units - 1] not in self.pending else None
            if entry is not None:
                position = units * unit
                return hits[:position // size], position, entry[2]
        return [], 0, []

    def hold(self, rank, request, blocks: list[int]) -> None:
        if blocks:
            rank.pool.touch(blocks)
            self.sources[id(request)] = blocks

    def allocated(self, rank, request) -> None:
        """`pass_ends` holds a resumed snapshot's blocks only while its admission allocates, as `swap` (§54)."""
        source = self.sources.pop(id(request), None) if self.rule == "pass_ends" else None
        if source:
            rank.pool.release(source)

    def prepare(self, rank, request) -> int:
        """vLLM's `remove_skipped_blocks` at the request's next schedule: the snapshot blocks its last pass read
        are free cached blocks now (before its allocation, after those of requests scheduled before it)."""
        source = self.sources.pop(id(request), None)
        if source:
            rank.pool.release(source)
        return self.state_blocks if id(request) in self.owed else 0

    def swap(self, rank, request, fresh: list[int]) -> None:
        """`fresh` take the place of the request's state blocks (its snapshot now).  Align mode (`prompt_ends`)
        holds the old ones through this pass, which reads them; DeepSeek V4's window state (`pass_ends`) lets them
        go at once, free cached blocks for the admissions of this same schedule (AISimulate; facts §54)."""
        blocks = request.blocks
        old = blocks[-self.state_blocks:]
        blocks[-self.state_blocks:] = fresh
        held = old + self.owed.pop(id(request))
        if self.rule == "pass_ends" or id(request) in self.drafts_ahead:
            self.drafts_ahead.discard(id(request))
            rank.pool.release(held)
        else:
            self.sources[id(request)] = held

    def chunk(self, rank, request, computed: int, new: int) -> int:
        """`prompt_ends` (vLLM align mode, AISimulate with `prefix_match_unit`): a prefill chunk ends at the next
        block boundary (from a resume inside a block), at the prompt's last full block boundary and at its last
        unit boundary, so the state is computed exactly where its snapshots are kept; a chunk the budget cuts
        short of its stop ends on a block boundary (vLLM's `_mamba_block_aligned_split`: 0 tokens, the request
        waits for the next pass, when that boundary is not past `computed`), unless the pass's whole budget is
        shorter than that.  A preempted request is recomputed as one prompt of every token it knows, its output
        so far included: its chunks stop at that sequence's two positions and then run to its end (its
        snapshots stay the prompt's, `reached`; facts §45)."""
        known = request.num_tokens
        if self.rule != "prompt_ends" or computed >= known - 1 or not rank.chunked:
            return new
        size = rank.block_size
        stops = (-(-computed // size) * size, *self.positions(known, size, self.unit))
        end = min(min((stop for stop in stops if stop > computed), default=known), known)
        if new >= end - computed:
            return end - computed
        if new >= rank.max_batched < size:
            return new  # (a whole budget shorter than a block: cut anywhere, or it would never run; §77)
        return max(0, (computed + new) // size * size - computed)

    def drafts_state(self, rank, known: int, tokens: int) -> int:
        """A decode pass that leaves its request on a block boundary (`known` tokens) owes fresh state for the next
        block (`reached`); when it has drafts to verify (its largest burst, to `tokens`, is more than one token)
        AISimulate counts that state with the burst's KV as the pass emits, and preempts for it then (facts section
        89).  Drafts that cross a boundary inside the burst need none then, nor a prompt's or recompute's pass."""
        if self.rule == "whole_blocks" or tokens - known < 2:
            return 0
        return self.state_blocks if known % rank.block_size == 0 else 0

    def drafts_read(self, request) -> None:
        """That pass's drafts computed into the next block and read the old state then (AISimulate takes the fresh
        state as the pass emits): its old state is not held through the next pass (`swap`; facts section 89)."""
        self.drafts_ahead.add(id(request))

    @staticmethod
    def pass_end_positions(prompt_len: int, block_size: int, computed: int, tokens: int) -> range:
        """`pass_ends`: the block boundaries a pass from `computed` to `tokens` leaves snapshots at: its end if
        a prefill chunk ends on one (a recompute's chunk too, past the prompt), every one decode passes cross."""
        if computed < prompt_len:
            return range(tokens, tokens + 1) if tokens % block_size == 0 and tokens > computed else range(0)
        first = max(computed, prompt_len) // block_size * block_size + block_size
        return range(first, tokens + 1, block_size)

    def reached(self, rank, request, computed: int, tokens: int) -> None:
        """The pass that took the request from `computed` to `tokens` ended: its state becomes the snapshot of the
        last position it computed, if any; ending on a block boundary, its next pass computes into a new block and
        needs fresh state blocks whether or not this one is a snapshot (vLLM's align mode keeps one state per
        block: AISimulate preempts a decode that crosses one when G1 is full)."""
        prompt, size = request.spec.prompt_len, rank.block_size
        if self.rule == "whole_blocks" or tokens <= computed:
            return
        if self.rule == "pass_ends":
            positions = self.pass_end_positions(prompt, size, computed, tokens)
        elif computed >= prompt:
            positions = ()
        else:
            positions = [p for p in self.positions(prompt, size, self.unit) if computed < p <= tokens]
        if positions:  # (one state per pass: a pass that crosses two positions had no state at the first)
            self._store(rank.pool, request, positions[-1], size)
        if tokens >= prompt and self.pending:
            self.pending.difference_update(self.written.get(id(request), ()))
        if tokens % size == 0 and id(request) not in self.owed:
            self.owed[id(request)] = []

    def _store(self, pool, request, position: int, size: int) -> None:
        unit_keys = request.spec.keys(self.unit)
        if position // self.unit > len(unit_keys):
            return  # (the request's last tokens: no later request can share past them)
        key = unit_keys[position // self.unit - 1]
        if id(request) in self.owed or self._find(pool, key) is not None:
            return  # its state is a snapshot still to be replaced, or another request stored this one already
        extra = []
        if position % size and position == request.spec.prompt_len:  # (short of the prompt's end: no block, §62)
            if pool.free_count < 1:
                self.skipped += 1
                return
            extra = pool.allocate(1)
        blocks = request.blocks[-self.state_blocks:] + extra
        keys = [sequence_hash(key, 0x5747 + i) for i in range(len(blocks))]  # (keys no block chain produces)
        pool.register_run(blocks, keys, 0, len(blocks))
        self.owed[id(request)] = extra
        self.stored[key] = (position, keys, blocks)
        self.stores += 1
        if position % size and not extra:
            self.written.setdefault(id(request), []).append(key)
            self.pending.add(key)

    def released(self, rank, request) -> None:
        """The request lets go of its blocks: the snapshot blocks it holds go back first, and a partial token block
        that holds the first tokens of a snapshot it stored becomes part of that snapshot (a cached block, freed in
        the request's order, not empty memory: AISimulate resumes a later request there after a completion, and a
        preempted request's snapshot is gone once that block is evicted; facts §77)."""
        held = self.sources.pop(id(request), []) + self.owed.pop(id(request), [])
        self.drafts_ahead.discard(id(request))
        if held:
            rank.pool.release(held)
        written = self.written.pop(id(request), None)
        if written:
            self.pending.difference_update(written)
            self._keep_partial(rank, request, written)

    def _keep_partial(self, rank, request, written: list[int]) -> None:
        pool, size, token_blocks = rank.pool, rank.block_size, len(request.blocks) - self.state_blocks
        for key in written:
            entry = self._find(pool, key)
            index = entry[0] // size if entry is not None else token_blocks
            if index >= token_blocks or pool.key_of[request.blocks[index]] is not None:
                continue  # (evicted already, or the block filled up and is cached under its own key)
            position, keys, blocks = entry
            extra = sequence_hash(key, 0x5747 + len(keys))
            pool.register_run([request.blocks[index]], [extra], 0, 1)
            self.stored[key] = (position, keys + [extra], blocks + [request.blocks[index]])

    def admitted(self, request, resumed: int) -> dict:
        if resumed:
            self.resumes += 1
            self.resumed_tokens += min(resumed, request.spec.prompt_len)
            self.resumed_at[resumed] = self.resumed_at.get(resumed, 0) + 1
        return {"state_resumed_from_tokens": resumed}

    def section(self, rank) -> dict:
        """This rank's `state_cache` counters (stored snapshots still resident are checked now)."""
        resident = sum(1 for key in list(self.stored) if self._find(rank.pool, key) is not None)
        return {"snapshots_stored": self.stores, "snapshots_resident": resident, "snapshots_evicted": self.evicted,
                "snapshots_skipped": self.skipped, "resumes": self.resumes, "tokens_resumed": self.resumed_tokens,
                "resumed_from": dict(self.resumed_at)}


def snapshots_for(role) -> WholeBlocks:
    """A rank's resume policy: its own snapshots when its role has a state cache and a prefix cache."""
    state = role.state_cache
    if state is None or not role.prefix_caching:
        return WHOLE_BLOCKS
    return StateSnapshots(state)
