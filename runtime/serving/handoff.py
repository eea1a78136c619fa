"""Disaggregated prefill/decode: the handoff of a prefilled request's KV to a decode rank.

A request is prefilled on a prefill rank; the prompt's KV then travels to a
decode rank, which samples every output token, the first in the pass that
admits the request there (the prefill's own sampled token is not counted, as
in AISimulate).  The prefill rank (the source) holds the request's blocks until the
transfer ends.  A decode rank needs blocks for the prompt (and one state,
with a state cache) before the KV can land:

- source-first (vLLM, TensorRT-LLM): the decode rank is chosen when prefill
  ends, and reserves its blocks at its next scheduling pass;
- destination-first (SGLang): the decode rank reserves its blocks before the
  prefill starts.

Transfer time = (tokens x bytes_per_token + state bytes) / bandwidth, where
`tokens` is the whole prompt (`full_prompt`) or only what the decode rank does
not hold as a prefix (`destination_missing`), in whole blocks; no bandwidth
means no delay.
A decode rank admits requests whose KV has arrived before other waiting ones.

What a rank's G1 does for a handoff (hold and release the source's KV, reserve
and land the destination's) is its `handoff_kv`: vLLM's block pool here
(`BLOCKS`), SGLang's radix cache in engines/sglang_handoff.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from itertools import islice

from ..tiers import offload
from . import pass_results
from .requests import Request

DESTINATION_FIRST_BACKENDS = ("sglang",)


class PrefillMove:
    """Destination-first: the decode rank reserved its blocks, so the request may now go to a prefill rank."""

    __slots__ = ("request",)

    def __init__(self, request):
        self.request = request


class HandoffTransfer:
    """The decode rank reserved its blocks: the prefilled KV may travel now."""

    __slots__ = ("request",)

    def __init__(self, request):
        self.request = request


@dataclass(frozen=True)
class Handoff:
    bytes_per_token: int
    bandwidth_gbps: float | None  # decimal GB/s; None = no delay
    timing_mode: str  # "destination_missing" | "full_prompt"
    state_bytes: int  # the prefill role's state per request (state cache), charged once
    destination_first: bool

    latency_ns: int = 0  # ReplaySpec `handoff_latency_ms`

    def transfer_ns(self, tokens: int) -> int:
        if not self.bandwidth_gbps:
            return self.latency_ns
        return self.latency_ns + math.ceil((tokens * self.bytes_per_token + self.state_bytes) / self.bandwidth_gbps)


class HandoffState:
    """A request's P/D handoff: its phase, both ends, the blocks each holds for it and when things happened.
    Written only by this module."""

    __slots__ = ("phase", "prefill_rank", "decode_rank", "source_rank", "source_blocks", "decode_blocks",
                 "decode_hits", "decode_reused_tokens", "transfer_tokens", "prefill_done_ns", "reserved_ns",
                 "activated_ns", "decode_admit_ns", "source_released_ns", "joined")

    def __init__(self):
        self.phase = None  # None | "reserve" | "pending" | "transferring" | "arrived"
        self.prefill_rank = None
        self.decode_rank = None
        self.source_rank = None
        self.source_blocks: list[int] = []
        self.decode_blocks: list[int] = []
        self.decode_hits = 0
        self.decode_reused_tokens = None
        self.transfer_tokens = 0
        self.prefill_done_ns = None
        self.reserved_ns = None  # the decode rank reserved its room (AISimulate's destination_reserved_ms)
        self.activated_ns = None  # the landed KV became the decode rank's (destination_activated_ms)
        self.decode_admit_ns = None
        self.source_released_ns = None
        self.joined = 0  # order in which it joined its decode rank's queue


def placed(request: Request, rank, destination_first: bool) -> None:
    """The request arrived on `rank`: a decode rank that reserves first (destination-first), or its prefill rank."""
    request.pd = state = HandoffState()
    if destination_first:
        state.phase, state.decode_rank = "reserve", rank
    else:
        state.prefill_rank = rank


def to_prefill(request: Request, rank) -> None:
    """Destination-first: the decode rank reserved; the request is prefilled on `rank` now."""
    pass_results.move_to(request, rank, 1)
    request.pd.prefill_rank, request.pd.phase = rank, None
    rank.waiting.append(request)


def to_decode(request: Request, rank, joined: int) -> None:
    """Prefill is done: the request joins the decode rank's queue (source-first: that rank reserves at its next
    pass; destination-first: it reserved already and the KV travels now); `joined` orders landed handoffs."""
    pass_results.move_to(request, rank, request.spec.output_len)
    state = request.pd
    if state.decode_rank is None:
        state.decode_rank, state.phase = rank, "pending"
    state.joined = joined
    rank.waiting.append(request)


def hold_source(rank, request: Request, now_ns: int) -> None:
    """Prefill is done: keep the source blocks until the transfer ends."""
    state = request.pd
    state.source_rank = rank
    state.source_blocks = rank.handoff_kv.hold(rank, request)
    state.prefill_done_ns = now_ns


def as_needed(rank, request: Request, hits: list[int], need: int) -> int:
    """vLLM's reservation for a handoff: free blocks for what the KV brings, nothing more (an engine's capacity
    policy, `rank.reservation`, may ask for more)."""
    return need


def reserve(rank, request: Request, handoff: Handoff, now_ns: int) -> bool:
    """A decode rank reserves its G1's room for the handed-off prompt at `now_ns` (False: it is short of room)."""
    if not rank.handoff_kv.reserve(rank, request, handoff):
        return False
    request.pd.reserved_ns = now_ns
    return True


def _reserve_blocks(rank, request: Request, handoff: Handoff, reuse: bool = True) -> bool:
    """vLLM's block pool: a decode rank reserves blocks for the prompt (destination-first: and the next token), less the prefix it
    already holds (none without `reuse`: the whole prompt then travels).

    Blocks are kept aside in `decode_blocks` (with destination-first the request is still to be
    prefilled elsewhere); False when the rank is short of blocks."""
    prompt, size = request.spec.prompt_len, rank.block_size
    keys = request.spec.keys(size)
    hits = rank.pool.match(keys, prompt // size) if reuse else []
    # source-first (vLLM's mocker): the prompt's blocks, the first output token's block comes when a pass computes
    # it; destination-first (SGLang) keeps one token more, its rule not checked against AISimulate yet
    need = rank.blocks_for(prompt + handoff.destination_first) - len(hits) + rank.state_blocks
    if not rank.pool.can_allocate(rank.reservation(rank, request, hits, need), hits):  # (the engine's policy)
        return False
    rank.pool.touch(hits)
    request.pd.decode_blocks = hits + rank.pool.allocate(need)
    reserved(request, handoff, len(hits), rank.blocks_for(prompt), size)
    return True


def reserved(request: Request, handoff: Handoff, hits: int, prompt_blocks: int, size: int) -> None:
    """A decode rank reserved for the request, `hits` of the prompt's `prompt_blocks` blocks cached there."""
    state = request.pd
    state.decode_hits = hits
    state.decode_reused_tokens = hits * size
    # AISimulate's mocker: full_prompt moves the prompt's tokens (`full_prompt_tokens`: its input length),
    # destination_missing the reservation's transferable blocks (whole blocks x block size)
    state.transfer_tokens = request.spec.prompt_len if handoff.timing_mode == "full_prompt" \
        else (prompt_blocks - hits) * size


def reserve_pending(rank, now_ns: int) -> bool:
    """A decode rank's source-first handoffs still to reserve try to, in the order they joined, and the KV of each
    that gets its blocks starts to travel; the first one short of blocks stops the others.  True when one is left
    without its reservation (Dynamo's mocker keeps them in a queue of their own, retried as blocks free up).

    The mocker tries the queue's head once per trigger (`retry_pending_destinations_at` reserves at most one):
    when the decode worker's pass completes, when a handoff joins an idle worker, when a destination is
    activated.  `rank.reserve_tries` counts the triggers due now (`add_try`); unused ones lapse.  A rank that runs
    nothing always tries (else nothing would try again)."""
    waiting = rank.waiting
    tries = take_tries(rank)
    position = 0
    while position < len(waiting) and len(rank.running) < rank.max_sequences:
        request = waiting[position]
        position += 1
        if request.pd is not None and request.pd.phase == "pending":
            if not tries or not reserve(rank, request, rank.handoff, now_ns):
                return True
            tries -= 1
            start_transfer(rank, request)
    return any(r.pd is not None and r.pd.phase == "pending" for r in islice(waiting, position, None))


def take_tries(rank) -> int:
    """The reservation attempts due now on `rank` (its triggers; at least one on a rank that runs nothing, else
    nothing would try again), which it uses up: unused ones lapse."""
    tries, rank.reserve_tries = rank.reserve_tries, 0
    return tries if rank.running else max(tries, 1)


def add_try(rank, count: int = 1) -> None:
    """`count` more triggers for the rank's next reservation attempts (see reserve_pending)."""
    rank.reserve_tries += count


def reserve_first(rank, request: Request, now_ns: int) -> bool:
    """Destination-first: the decode rank reserves for `request`, whose prefill may then start (False: short)."""
    if not reserve(rank, request, rank.handoff, now_ns):
        return False
    rank.jobs.append(PrefillMove(request))
    return True


def start_transfer(rank, request: Request) -> None:
    transferring(request)
    rank.jobs.append(HandoffTransfer(request))


def transferring(request: Request) -> None:
    request.pd.phase = "transferring"


def release_source(request: Request, now_ns: int) -> None:
    """The source lets go of the blocks it held for the handoff."""
    state = request.pd
    state.source_rank.handoff_kv.release(state.source_rank, request, state.source_blocks)
    state.source_blocks = []
    state.source_released_ns = now_ns


def landed(rank, request: Request, now_ns: int, release_ns: int | None = None) -> None:
    """The KV arrived on an idle decode worker and the destination is active at once: see `activated` (without
    `release_ns`, the source lets go now)."""
    activated(request, now_ns, now_ns if release_ns is None else release_ns)
    arrived(rank, request)


def activated(request: Request, now_ns: int, release_ns: int) -> None:
    """The destination is active: the source lets go of its blocks now, or at the end of the pass it runs
    (`release_ns` later than now: AISimulate's mocker applies the release between the source's passes).  The
    release's time is known now, so a request that ends before it still has its source_released_ms in its record,
    as AISimulate's (t21: 111 requests)."""
    request.pd.activated_ns = now_ns
    if release_ns > now_ns:
        request.pd.source_rank.releases.append(request)
        request.pd.source_released_ns = release_ns
    else:
        release_source(request, now_ns)


def arrived(rank, request: Request) -> None:
    """The KV arrived: the decode rank knows the prompt and queues the request for its first decode pass."""
    state = request.pd
    rank.handoff_kv.land(rank, request)
    state.phase = "arrived"
    waiting = rank.waiting
    waiting.remove(request)
    if not (rank.chain.handoffs_first or rank.handoff.destination_first):
        waiting.append(request)  # (Dynamo's mocker: an activated vLLM destination joins the back of the queue)
        return
    # with G2 (or destination-first), handed-off requests are admitted before other waiting ones, in the order
    # they joined this queue
    ahead = 0
    while ahead < len(waiting) and waiting[ahead].pd.phase == "arrived" and waiting[ahead].pd.joined < state.joined:
        ahead += 1
    waiting.insert(ahead, request)


def admit_arrived(request: Request, now_ns: int) -> None:
    request.pd.phase = None
    request.pd.decode_admit_ns = now_ns


def _land_blocks(rank, request: Request) -> None:
    state = request.pd
    blocks, state.decode_blocks = state.decode_blocks, []
    pass_results.resume_decode(rank, request, blocks, state.decode_hits)


class BlockHandoff:
    """vLLM's block pool's part in a handoff: the source's blocks, the destination's (no `reuse`: trtllm.py's)."""

    keyed = True  # a request moved to the rank carries block keys (its G1 matches by them)
    hold = staticmethod(lambda rank, request: pass_results.hand_over_blocks(request))
    release = staticmethod(offload.release_blocks)
    land = staticmethod(_land_blocks)

    def __init__(self, reuse: bool = True):
        self.reuse, self.reserve = reuse, partial(_reserve_blocks, reuse=reuse)  # reuse: a held prefix stays


BLOCKS = BlockHandoff()
