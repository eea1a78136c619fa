"""Requests: the immutable spec the traffic makes, and the per-request replay record.

A `RequestSpec` says what arrives: lengths, session position, when (or after
how much think time) it arrives, and what its tokens are, as `Content`, from
which block keys are derived per block size (and memoised).  A `Request` is
the replay's record of one request: scheduler progress and everything the
outputs report.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import chain

from ..traffic import block_keys as blocks
from ..tiers.request_state import UNTIERED, TierState
from ..traffic.request_uuids import uuid_of


@dataclass(frozen=True)
class Content:
    """Tokens of prompt + output: synthetic segments, a Mooncake row, or explicit prompt token ids."""

    segments: tuple[tuple[int, int, int], ...] = ()  # (source, start, stop): output, or prompt then output
    hash_ids: tuple[int, ...] = ()
    trace_block: int = 0
    token_ids: tuple[int, ...] = ()  # real token ids: the prompt's (ReplaySpec), or prompt + output (opal otel)


@dataclass(frozen=True)
class RequestSpec:
    index: int
    prompt_len: int
    output_len: int
    content: Content
    arrival_ns: int | None = None  # None: the load decides (closed loop, session turns)
    session_id: str | None = None
    turn_index: int | None = None
    think_ns: int = 0  # for a session turn: delay after the previous turn completes
    name: str | None = None  # the ReplaySpec request id
    dp_rank: int | None = None  # placement pinned by a ReplaySpec (the decode rank in P/D)
    prefill_dp_rank: int | None = None
    worker_idx: int | None = None  # the worker a ReplaySpec pins it to (the decode worker in P/D)
    prefill_worker_idx: int | None = None
    kv_hints: tuple = ()  # ((rank, worker_idx | None, cached_tokens), ...): peers a router says hold its prefix
    stage: int = 0  # an opal workload stage's index (outputs report per stage); 0 for every other traffic
    requested_output_len: int | None = None  # what the traffic asked for, where the context length cut it short
    _keys: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @classmethod
    def of_trace_row(cls, index: int, prompt_len: int, output_len: int, hash_ids: tuple, trace_block: int,
                     arrival_ns: int | None, session_id: str | None) -> RequestSpec:
        """The spec of a Mooncake row: equal to the one the constructor makes, only the fields a row sets written,
        at once (a frozen dataclass's __init__ sets each of its 20 fields through object.__setattr__: about 3x the
        time, per row of a million-row trace).  The others read their defaults from the class, where the dataclass
        left them (each is immutable: None, 0 or ())."""
        content = _new(Content)
        content.__dict__.update(hash_ids=hash_ids, trace_block=trace_block)
        spec = _new(cls)
        spec.__dict__.update(index=index, prompt_len=prompt_len, output_len=output_len, content=content,
                             arrival_ns=arrival_ns, session_id=session_id, _keys={})
        return spec

    @property
    def uuid(self) -> str:
        return uuid_of(self.index)  # (traffic/request_uuids.py)

    def keys(self, block_size: int) -> list[int]:
        """Keys of every full block of prompt + output tokens, for this block size."""
        found = self._keys.get(block_size)
        if found is None:
            found = self._compute_keys(block_size)
            self._keys[block_size] = found
        return found

    def fresh_keys(self, block_size: int) -> list[int]:
        """The keys of `keys`, memoised or not, without memoising them (an analysis reading a whole trace keeps
        one array, not a list per request)."""
        found = self._keys.get(block_size)
        return found if found is not None else self._compute_keys(block_size)

    def forget_keys(self) -> None:
        """Drop the memoised keys (a finished request's: `fresh_keys` makes them again if anything still asks)."""
        self._keys.clear()

    def prompt_chunks(self, chunk_size: int, partial: bool) -> list:
        """Keys of the prompt's full chunks of `chunk_size` tokens, then (with `partial`) one for its trailing
        partial chunk, which only the same prompt shares (opal's KV-cache tiers)."""
        memo = ("chunks", chunk_size, partial)
        found = self._keys.get(memo)
        if found is None:
            full = self.prompt_len // chunk_size
            found = self.keys(chunk_size)[:full]
            if partial and self.prompt_len % chunk_size:
                found = found + [self._prefix_key(self.prompt_len)]
            self._keys[memo] = found
        return found

    def _prefix_key(self, tokens: int) -> tuple:
        """A key naming the prompt's first `tokens` tokens (not a chain key: a tuple, so it never meets one)."""
        content = self.content
        if content.hash_ids:  # prefix-chained ids: the id holding the last token and its offset name the prefix
            last = (tokens - 1) // content.trace_block
            return ("prefix", content.hash_ids[last], tokens - last * content.trace_block)
        ids = blocks.segment_tokens(self.content.segments)
        if content.token_ids:
            ids = array("I", content.token_ids) + ids
        return ("prefix", tokens, blocks.block_hash(ids[:tokens]))

    def _compute_keys(self, block_size: int) -> list[int]:
        total = self.prompt_len + self.output_len
        if self.content.hash_ids:
            keys = blocks.trace_keys(self.content.hash_ids, self.prompt_len, self.content.trace_block, block_size)
            first_output_block = len(keys)
            # blocks holding the request's own output are never shared: negative keys, unique per request
            first = -(self.index << 24) - 1  # (key -((index << 24) + i) - 1 of output block i, as one range)
            output = range(first - first_output_block, first - total // block_size, -1)
            if type(keys) is blocks.KeyRuns:
                keys.add(output)
            else:
                keys.extend(output)
            return keys
        tokens = blocks.segment_tokens(self.content.segments)
        if self.content.token_ids:
            tokens = array("I", self.content.token_ids) + tokens
        return blocks.chain_keys(tokens, block_size)


_new = object.__new__


class Request:
    """The replay's scheduling record of one request: where it runs, its progress, its tokens' times and its
    admissions.  Written only by serving/scheduler.py and serving/pass_results.py (and its own methods); the tiers
    keep theirs in `tier` (tiers/request_state.py), a P/D handoff in `pd` (handoff.py)."""

    __slots__ = ("spec", "_keys", "key_size", "arrival_ns", "rank", "num_tokens", "num_computed", "generated",
                 "blocks", "status", "reason", "first_admit_ns", "first_token_ns", "second_token_ns", "last_token_ns",
                 "terminal_ns", "gaps", "admissions", "reused_tokens", "first_reused_tokens", "committed_prefill",
                 "max_blocks", "first_g1_tokens", "first_host_tokens", "stop_after", "tier", "pd")

    def __init__(self, spec: RequestSpec, arrival_ns: int, rank: int, block_size: int, hint=None,
                 stop_after: int | None = None, tiered: bool = True):
        self.spec = spec
        # its keys are made when first asked for (its first admission attempt, usually): thousands of requests may
        # wait at once, and a prompt's keys at block 16 are hundreds of ints
        self._keys = None if block_size else []  # (0: its engine matches no block keys)
        self.key_size = block_size
        self.arrival_ns = arrival_ns
        self.rank = rank
        self.num_tokens = spec.prompt_len  # known tokens: prompt + sampled output
        self.num_computed = 0
        self.generated = 0
        self.blocks: list[int] = []
        self.status = "waiting"
        self.reason = ""
        self.first_admit_ns = None
        self.first_token_ns = None
        self.second_token_ns = None
        self.last_token_ns = None
        self.terminal_ns = None
        self.gaps: list[list[int]] = []  # runs of [gap_ns, count] between consecutive tokens
        self.admissions: list[dict] = []
        self.reused_tokens = 0
        self.first_reused_tokens = None
        self.committed_prefill = 0  # prompt/recompute tokens computed (not reused), over all admissions
        self.max_blocks = 0  # leading blocks already registered in G1
        self.first_g1_tokens = None
        self.first_host_tokens = None
        # tokens to sample on this rank (1 on a prefill rank)
        self.stop_after = spec.output_len if stop_after is None else stop_after
        self.tier = TierState(hint) if tiered else UNTIERED  # (False: no tiers where it can run, nor a hint)
        self.pd = None  # handoff.HandoffState with disaggregated prefill/decode

    @property
    def keys(self) -> list[int]:
        """The block keys of its prompt and output (its spec's, memoised there) at its rank's block size."""
        keys = self._keys
        if keys is None:
            keys = self._keys = self.spec.keys(self.key_size)
        return keys

    @keys.setter
    def keys(self, keys: list[int]) -> None:
        self._keys = keys

    def forget_keys(self) -> None:
        """It is done with its keys (finished, its prompt stored): they and its spec's memoised ones go."""
        self._keys = []
        self.spec.forget_keys()

    def pack_gaps(self) -> None:
        """It ended and its record is written: its [gap, count] runs become one flat array, gap, count, ... (16
        bytes a run instead of a list and its ints: kept requests' runs, one per distinct pass time, are most of
        what an opal run holds; outputs.request_log.gap_runs reads either form).  (The ints listed first: an array
        built from a list sizes itself once, from an iterator it grows as it goes, about 30 % slower.)"""
        self.gaps = array("q", list(chain.from_iterable(self.gaps)))

    def add_token(self, at_ns: int) -> None:
        if self.first_token_ns is None:
            self.first_token_ns = at_ns
        else:
            if self.second_token_ns is None:
                self.second_token_ns = at_ns
            self.add_gaps(at_ns - self.last_token_ns, 1)
        self.last_token_ns = at_ns
        self.generated += 1
        self.num_tokens += 1

    def add_gaps(self, gap: int, count: int) -> None:
        if self.gaps and self.gaps[-1][0] == gap:
            self.gaps[-1][1] += count
        else:
            self.gaps.append([gap, count])

    @property
    def done(self) -> bool:
        return self.generated >= self.stop_after
