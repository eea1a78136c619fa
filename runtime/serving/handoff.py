"""Disaggregated prefill/decode: the handoff of a prefilled request's KV to a decode rank.

A request is prefilled on a prefill rank, which samples its first token; the
prompt's KV then travels to a decode rank, which continues from the second
token.  The prefill rank (the source) holds the request's blocks until the
transfer ends.  A decode rank needs blocks for the prompt (and one state,
with a state cache) before the KV can land:

- source-first (vLLM, TensorRT-LLM): the decode rank is chosen when prefill
  ends, and reserves its blocks at its next scheduling pass;
- destination-first (SGLang): the decode rank reserves its blocks before the
  prefill starts.

Transfer time = (tokens x bytes_per_token + state bytes) / bandwidth, where
`tokens` is the whole prompt (`full_prompt`) or only what the decode rank does
not hold as a prefix (`destination_missing`); no bandwidth means no delay.
A decode rank admits requests whose KV has arrived before other waiting ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..tiers import offload
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


def hold_source(rank, request: Request, now_ns: int) -> None:
    """Prefill is done: keep the source blocks until the transfer ends."""
    request.source_rank = rank
    request.source_blocks, request.blocks = request.blocks, []
    request.prefill_done_ns = now_ns
    request.status = "transferring"


def move_to(request: Request, rank, stop_after: int) -> None:
    """The request now lives on `rank` (its keys follow the rank's block size)."""
    request.rank = rank.index
    request.keys = request.spec.keys(rank.block_size)
    request.max_blocks = 0
    request.num_computed = 0
    request.stop_after = stop_after


def reserve(rank, request: Request, handoff: Handoff) -> bool:
    """A decode rank reserves blocks for the prompt and the next token, less the prefix it already holds.

    Blocks are kept aside in `decode_blocks` (with destination-first the request is still to be
    prefilled elsewhere); False when the rank is short of blocks."""
    prompt, size = request.spec.prompt_len, rank.block_size
    keys = request.spec.keys(size)
    hits = rank.pool.match(keys, prompt // size)
    need = rank.blocks_for(prompt + 1) - len(hits) + rank.state_blocks
    if not rank.pool.can_allocate(need, hits):
        return False
    rank.pool.touch(hits)
    request.decode_blocks = hits + rank.pool.allocate(need)
    request.decode_hits = len(hits)
    request.decode_reused_tokens = len(hits) * size
    request.transfer_tokens = prompt if handoff.timing_mode == "full_prompt" else prompt - len(hits) * size
    return True


def start_transfer(rank, request: Request) -> None:
    request.handoff = "transferring"
    request.loading = True
    rank.jobs.append(HandoffTransfer(request))


def landed(rank, request: Request, now_ns: int) -> None:
    """The KV arrived: the source lets go of its blocks, the decode rank knows the prompt."""
    source = request.source_rank
    offload.release_blocks(source, request, request.source_blocks)
    request.source_blocks = []
    request.source_released_ns = now_ns
    request.loading = False
    request.blocks, request.decode_blocks = request.decode_blocks, []
    request.max_blocks = request.decode_hits
    request.num_computed = request.spec.prompt_len
    upto = min(request.spec.prompt_len // rank.block_size, len(request.keys))
    rank.pool.register_run(request.blocks, request.keys, request.max_blocks, upto)
    request.max_blocks = max(request.max_blocks, upto)
    request.handoff = "arrived"
    request.status = "waiting"
    waiting = rank.waiting
    waiting.remove(request)
    # handed-off requests are admitted before other waiting ones, in the order they joined this queue
    ahead = 0
    while ahead < len(waiting) and waiting[ahead].handoff == "arrived" and waiting[ahead].joined < request.joined:
        ahead += 1
    waiting.insert(ahead, request)


def admit_arrived(rank, request: Request, now_ns: int) -> int:
    request.handoff = None
    request.decode_admit_ns = now_ns
    request.status = "running"
    return 1
