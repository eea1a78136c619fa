"""Why each prompt token was not reused: every missed prompt block of each admission gets exactly one class.

The scheduler tells `admitted` of each admission (the blocks it reused, its
lookup limit); the missed blocks, from the first one not reused to the end of
the prompt, are classified at that moment, in this order:

- `last_block`: past the lookup limit: the block holding the last known token
  (and a partial last block), which every admission recomputes;
- `compulsory`: no admission anywhere ever had the block's key before (an
  admission "has" all its keys, though a concurrent request may not have
  computed them yet: such a block counts as evicted below);
- `preempted_recompute`: any other missed block of a readmission (its
  preemption threw its blocks away);
- `bypass`: the no-progress rule made this request recompute (a tier's or a
  peer's copy given up, tiers/copy_jobs.py) and some rank held the block;
- `ttl`: another rank's pool held it idle only because its TTL had not
  expired (opal's APC) -- `placement`: another rank or worker held it;
- `policy` / `capacity`: evicted everywhere; `policy` if a Belady cache of this
  rank's G1 size, fed this rank's admissions one by one (mrc.py),
  would have hit it, `capacity` if even that would not (decided after the run).

A block behind the first missed one that this rank still holds (G1 or its
tiers) misses only because the prefix broke before it: it gets the first
missed block's class.  So the classes of an admission add up to its missed
prompt tokens, prompt_len - reused (the summary's committed_prefill_tokens).
Only runs that ask (`predict --explain-misses`) pay for this: a set of every
key seen, and each rank's admissions kept until the end.
"""
from __future__ import annotations

from .mrc import belady_prefix_hits

CLASSES = ("compulsory", "capacity", "policy", "placement", "ttl", "bypass", "preempted_recompute", "last_block")
(COMPULSORY, CAPACITY, POLICY, PLACEMENT, TTL, BYPASS, PREEMPTED, LAST_BLOCK) = range(len(CLASSES))
EVICTED = -1  # policy or capacity: Belady decides after the run


class MissExplainer:
    def __init__(self, ranks: list):
        self.ranks = list(ranks)
        self.seen: set = set()
        self.streams: dict = {rank: [] for rank in self.ranks}  # rank -> (keys, limit) of each admission
        self.pending: dict = {rank: [] for rank in self.ranks}  # rank -> (admission, request index, block, tokens)
        self.counts: dict[int, list[int]] = {}  # request index -> tokens per class
        for rank in self.ranks:
            rank.misses = self

    def admitted(self, rank, request, hits: int, limit: int, reused: int | None = None) -> None:
        """`hits` whole blocks reused, `reused` tokens (more inside the next block: a state snapshot's resume)."""
        spec, keys, size = request.spec, request.keys, rank.block_size
        prompt = spec.prompt_len
        reused = hits * size if reused is None else reused
        stream = self.streams[rank]
        admission = len(stream)
        stream.append((keys, limit))
        counts = self.counts.setdefault(spec.index, [0] * len(CLASSES))
        if reused < prompt:
            cut = max(hits, min(limit, -(-prompt // size), len(keys)))
            counts[LAST_BLOCK] += max(0, prompt - cut * size)
            readmission = len(request.admissions) > 1
            first = first_block = None  # the first missed block's class, and that block
            for j in range(hits, cut):
                key = keys[j]
                if first is not None and self._here(rank, key):
                    cls, block = first, first_block
                else:
                    cls, block = self._classify(rank, request, key, readmission), j
                    if first is None:
                        first, first_block = cls, j
                tokens = min(size, prompt - j * size) - (reused - hits * size if j == hits else 0)
                if cls == EVICTED:  # (Belady tests the block that broke the prefix)
                    self.pending[rank].append((admission, spec.index, block, tokens))
                else:
                    counts[cls] += tokens
        self.seen.update(keys)

    def _here(self, rank, key) -> bool:
        return key in rank.pool.cached or rank.chain.holds(key)

    def _classify(self, rank, request, key, readmission: bool):
        if key not in self.seen:
            return COMPULSORY
        if readmission:
            return PREEMPTED
        holders = [other for other in self.ranks if other is not rank and self._here(other, key)]
        if request.tier.bypassed and (holders or rank.chain.holds(key)):
            return BYPASS
        if holders:
            return TTL if all(other.pool.protected(key) for other in holders) else PLACEMENT
        return EVICTED

    def finish(self) -> None:
        """Split the evicted blocks into policy and capacity misses (Belady on each rank's admissions)."""
        for rank in self.ranks:
            pending = self.pending[rank]
            if not pending:
                continue
            hits = belady_prefix_hits(self.streams[rank], rank.pool.capacity)
            for admission, index, block, tokens in pending:
                self.counts[index][POLICY if hits[admission] > block else CAPACITY] += tokens
            pending.clear()
        for rank in self.ranks:
            rank.misses = None

    def of(self, index: int) -> dict | None:
        """A request's tokens per class (None: never admitted)."""
        counts = self.counts.get(index)
        return None if counts is None else dict(zip(CLASSES, counts))

    def totals(self) -> dict:
        out = [0] * len(CLASSES)
        for counts in self.counts.values():
            for i, tokens in enumerate(counts):
                out[i] += tokens
        return dict(zip(CLASSES, out))
