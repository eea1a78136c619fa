"""Why each prompt token was not reused: every missed prompt block of each admission gets exactly one class.

The scheduler tells `admitted` of each admission (the blocks it reused, its
lookup limit); the missed blocks, from the first one not reused to the end of
the prompt, are classified at that moment, in this order:

- `last_block`: past the lookup limit: the block holding the last known token
  (and a partial last block), which every admission recomputes;
- `compulsory`: no admission anywhere ever had the block's key before
  (decided after the run, from the admissions' keys: no set of every key);
- `preempted_recompute`: any other missed block of a readmission (its
  preemption threw its blocks away);
- `bypass`: the no-progress rule made this request recompute (a tier's or a
  peer's copy given up, tiers/copy_jobs.py) and some rank held the block;
- `ttl`: another rank's pool held it idle only because its TTL had not
  expired (opal's APC) -- `placement`: another rank or worker held it;
- `in_flight`: no rank holds it, but a request still running has the key and
  has not computed that block yet (a concurrent request's prompt or output);
- `policy` / `capacity`: evicted everywhere; `policy` if a Belady cache of this
  rank's G1 size, fed this rank's admissions one by one (mrc.py),
  would have hit it, `capacity` if even that would not (decided after the run).

A block behind the first missed one that this rank still holds (G1 or its
tiers) misses only because the prefix broke before it: it gets the first
missed block's class.  So the classes of an admission add up to its missed
prompt tokens, prompt_len - reused (the summary's committed_prefill_tokens).
Only runs that ask (`predict --explain-misses`) pay for this: the running
requests' keys, and every admission kept until the end as arrays (their keys as uint64, a class byte per missed block), so
that Belady runs on arrays (belady_bound.py) and the first admissions' blocks
can be set beside the ideal LRU's (`first_admission_classes`).
"""
from __future__ import annotations

import numpy as np

from . import belady_bound, block_stream

CLASSES = ("compulsory", "capacity", "policy", "placement", "ttl", "bypass", "preempted_recompute", "last_block",
           "in_flight")
(COMPULSORY, CAPACITY, POLICY, PLACEMENT, TTL, BYPASS, PREEMPTED, LAST_BLOCK, IN_FLIGHT) = range(len(CLASSES))
EVICTED = len(CLASSES)  # compulsory, policy or capacity, decided by this block after the run
EVICTED_AS_FIRST = EVICTED + 1  # the same, decided by the admission's first missed block


class Admission:
    """What finish needs of one admission: its missed blocks' class codes, from its first missed block on."""

    __slots__ = ("rank", "index", "hits", "limit", "prompt", "codes", "first", "resumed")

    def __init__(self, rank: int, index: int, hits: int, limit: int, prompt: int, codes: bytearray, first: bool,
                 resumed: int = 0):
        self.rank, self.index, self.hits, self.limit, self.prompt = rank, index, hits, limit, prompt
        self.codes, self.first = codes, first
        self.resumed = resumed  # tokens reused inside the first missed block (a state snapshot's resume)


class MissExplainer:
    def __init__(self, ranks: list):
        self.ranks = list(ranks)
        self.key_arrays: dict[int, np.ndarray] = {}  # request index -> its keys as uint64 (shared with the curve)
        self.admissions: list[Admission] = []  # every rank's, in admission order
        self.live: dict = {}  # key -> (request, block, block size) of the newest running admission that has it
        self.running: list = []  # (request, its admissions then) of admissions that may still be running
        self.counts: dict[int, list[int]] = {}  # request index -> tokens per class
        self.first_codes: dict[int, tuple[int, np.ndarray]] = {}  # index -> first admission's hits, resolved codes
        for rank in self.ranks:
            rank.misses = self

    def keys_of(self, request) -> np.ndarray:
        found = self.key_arrays.get(request.spec.index)
        if found is None or len(found) != len(request.keys):
            found = self.key_arrays[request.spec.index] = block_stream.key_array(request.keys)
        return found

    def admitted(self, rank, request, hits: int, limit: int, reused: int | None = None) -> None:
        """`hits` whole blocks reused, `reused` tokens (more inside the next block: a state snapshot's resume)."""
        spec, keys, size = request.spec, request.keys, rank.block_size
        prompt = spec.prompt_len
        reused = hits * size if reused is None else reused
        self._forget_finished()
        self.keys_of(request)
        counts = self.counts.setdefault(spec.index, [0] * len(CLASSES))
        readmission = len(request.admissions) > 1
        codes = bytearray()
        if reused < prompt:
            cut = max(hits, min(limit, -(-prompt // size), len(keys)))
            counts[LAST_BLOCK] += max(0, prompt - cut * size)
            first = None  # the first missed block's class
            for j in range(hits, cut):
                key = keys[j]
                if first is not None and self._here(rank, key):
                    codes.append(EVICTED_AS_FIRST if first == EVICTED else first)
                else:
                    cls = self._classify(rank, request, key, readmission)
                    codes.append(cls)
                    if first is None:
                        first = cls
        self.admissions.append(Admission(self.ranks.index(rank), spec.index, hits, limit, prompt, codes,
                                         not readmission, reused - hits * size if codes else 0))
        live = self.live
        for j, key in enumerate(keys):
            live[key] = (request, j, size)
        self.running.append((request, len(request.admissions)))

    def _forget_finished(self) -> None:
        """Drop the keys of admissions that stopped running (finished, preempted, handed off)."""
        still = []
        for request, admissions in self.running:
            if request.status == "running" and len(request.admissions) == admissions:
                still.append((request, admissions))
                continue
            live = self.live
            for key in request.keys:
                if live.get(key, (None,))[0] is request:
                    del live[key]
        self.running = still

    def _here(self, rank, key) -> bool:
        return key in rank.pool.cached or rank.chain.holds(key)

    def _classify(self, rank, request, key, readmission: bool):
        if readmission:
            return PREEMPTED
        holders = [other for other in self.ranks if other is not rank and self._here(other, key)]
        if request.tier.bypassed and (holders or rank.chain.holds(key)):
            return BYPASS
        if holders:
            return TTL if all(other.pool.protected(key) for other in holders) else PLACEMENT
        owner = self.live.get(key)
        if owner is not None and owner[0] is not request and owner[0].num_computed < (owner[1] + 1) * owner[2]:
            return IN_FLIGHT
        return EVICTED  # (a key no admission had before is held nowhere and by no running request)

    def finish(self) -> None:
        """Decide the evicted blocks: compulsory if no earlier admission had the key, else policy or capacity
        (Belady on each rank's admissions)."""
        admissions = self.admissions
        arrays = [self.key_arrays[a.index] for a in admissions]
        stream = block_stream.from_key_arrays(arrays, [a.limit for a in admissions], 0)
        del arrays
        ids, starts = stream.ids, stream.starts
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        firsts = order[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ids) else order
        del order, ordered
        first_admission = np.empty(max(1, stream.distinct), dtype=np.int64)  # key id -> first admission having it
        first_admission[ids[firsts]] = np.searchsorted(starts, firsts, side="right") - 1
        del firsts
        ranks = np.array([a.rank for a in admissions], dtype=np.int64)
        belady = np.zeros(len(admissions), dtype=np.int64)
        for number, rank in enumerate(self.ranks):
            mine = np.flatnonzero(ranks == number)
            if len(mine) and any(EVICTED in admissions[k].codes or EVICTED_AS_FIRST in admissions[k].codes
                                 for k in mine):
                belady[mine] = belady_bound.prefix_hits(subset(stream, mine), rank.pool.capacity)
        for number, a in enumerate(admissions):
            keys = ids[starts[number] + a.hits:starts[number] + a.hits + len(a.codes)]
            self._resolve(a, number, int(belady[number]), first_admission[keys], self.ranks[a.rank].block_size)
        self.admissions = []
        for rank in self.ranks:
            rank.misses = None
        self.live.clear()
        self.running.clear()

    def _resolve(self, a: Admission, number: int, belady_hits: int, first_admission: np.ndarray, size: int) -> None:
        codes = np.frombuffer(bytes(a.codes), dtype=np.uint8).astype(np.int64)
        blocks = np.arange(a.hits, a.hits + len(codes))
        own = codes == EVICTED
        if len(codes) and codes[0] >= EVICTED:  # (the first missed block's class decides the blocks that follow it)
            first = COMPULSORY if first_admission[0] == number else POLICY if a.hits < belady_hits else CAPACITY
            codes = np.where(codes == EVICTED_AS_FIRST, first, codes)
        kept = blocks < belady_hits  # Belady would have hit the block
        codes = np.where(own, np.where(first_admission == number, COMPULSORY, np.where(kept, POLICY, CAPACITY)),
                         codes)
        counts = self.counts[a.index]
        tokens = np.minimum(size, a.prompt - blocks * size)
        if len(tokens):
            tokens[0] -= a.resumed  # (its first tokens were resumed from a snapshot, not missed)
        for cls, total in enumerate(np.bincount(codes, weights=tokens, minlength=len(CLASSES)).astype(np.int64)):
            counts[cls] += int(total)
        if a.first:
            self.first_codes[a.index] = (a.hits, codes.astype(np.uint8))

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


def subset(stream: block_stream.BlockStream, rows: np.ndarray) -> block_stream.BlockStream:
    """The stream of `rows` (ascending) of `stream`, key ids unchanged."""
    if len(rows) == stream.requests:
        return stream
    lengths = np.diff(stream.starts)[rows]
    starts = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    ids = np.concatenate([stream.ids[stream.starts[r]:stream.starts[r + 1]] for r in rows]) if len(rows) else \
        stream.ids[:0]
    return block_stream.BlockStream(stream.block_size, ids, starts, stream.limits[rows], 0, stream.distinct)
