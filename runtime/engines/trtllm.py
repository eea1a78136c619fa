"""TensorRT-LLM's engine: vLLM's pass structure under the guaranteed-no-evict capacity scheduler.

TensorRT-LLM's default capacity scheduler (`GUARANTEED_NO_EVICT`) starts a
request only when the KV blocks of its whole sequence, prompt and every output
token, fit beside the blocks every running request still needs to reach its
own end. A started request therefore never runs out of blocks and is never
preempted. Waiting requests are weighed in arrival order and the first that
does not fit stops admission for the pass (no request overtakes it). A decode
rank (P/D) reserves a handed-off request's prompt only when the whole
footprints of the requests it holds and of this one fit in G1, a shared prefix
counted in each (AISimulate's decode worker; facts section 67), and reuses none
of its own cache for it: the whole prompt travels, as TensorRT-LLM's cache
transceiver sends every block (facts section 78). Reused blocks
(`tokens_per_block`, full blocks only, as in vLLM) held by a running request
need no new block; an idle cached block found again takes one from the free
ones, as a new block would (AISimulate's mocker: only active cached blocks are
discounted).

A request is normalised on arrival as AISimulate does: its output is cut to
the room G1 leaves after its prompt (so a request asking for more than fits
still runs, shorter), and a prompt that leaves no room for one output token
is rejected.
"""
from __future__ import annotations

from ..serving.handoff import BlockHandoff
from .engine import Engine


def to_completion(rank, request) -> int:
    """Blocks the request holds at its end: its prompt and all its output, and its state blocks."""
    return rank.blocks_for(request.spec.prompt_len + request.stop_after) + rank.state_blocks


def whole_sequence(rank, request) -> int:
    """TensorRT-LLM's reuse limit: every whole block of the known tokens, the last one's included (a prompt
    cached whole is reused whole, and its first token costs one decode step: AISimulate's a5 run)."""
    return request.num_tokens // rank.block_size


def held(request) -> int:
    """Blocks the request holds on its rank: its own, or those a decode rank set aside for its KV (P/D)."""
    pd = request.pd
    return len(request.blocks) + (len(pd.decode_blocks) if pd is not None else 0)


def holders(rank, request) -> list:
    """The requests holding blocks here besides `request`: the running ones, and in P/D the handed-off ones
    waiting for their KV or their first decode pass."""
    if rank.handoff is None:
        return rank.running
    return rank.running + [r for r in rank.waiting if r is not request and held(r)]


def no_evict(rank, request, hits: list[int], need: int) -> int:
    """Free blocks a waiting request needs to start: its whole sequence less its cached prefix, plus what the
    requests holding blocks here have yet to allocate."""
    outstanding = sum(to_completion(rank, r) - held(r) for r in holders(rank, request))
    return max(need, to_completion(rank, request) - len(hits)) + outstanding


def whole_footprints(rank, request, hits: list[int], need: int) -> int:
    """A decode rank's reservation for a handed-off request: its prompt's `need` blocks, when the whole footprint
    of every holder and its own (prompt and every output token, a prefix shared with another request counted in
    each) fits in G1; otherwise more than G1 has.  AISimulate's decode worker reserves so: on e08 (facts section
    67) a 7,324 / 14 request whose 8 prefix blocks a running request holds waits with 136 blocks free for its 115
    less 8 plus 27 outstanding, until the footprints (1,923 + 115 > 2,000 blocks) fit at 7,069.9 ms."""
    total = sum(to_completion(rank, r) for r in holders(rank, request)) + to_completion(rank, request)
    return need if total <= rank.pool.capacity else rank.pool.capacity + 1


WHOLE_PROMPT = BlockHandoff(reuse=False)  # (a decode rank's handoff: the whole prompt travels)


class TrtllmEngine(Engine):
    name = "trtllm"

    def sequence_limit(self, rank) -> int:
        return (rank.pool.capacity - rank.state_blocks) * rank.block_size

    def equip(self, rank, role=None) -> None:
        rank.admission = no_evict
        rank.reservation = whole_footprints
        rank.reuse_limit = whole_sequence
        rank.handoff_kv = WHOLE_PROMPT
        if rank.speculation is not None and rank.speculation.kind == "mtp" and rank.role != "prefill":
            # its MTP verifies drafts in the pass that ends a prompt (facts §88: aggregated runs; a P/D prefill rank,
            # which samples one token, is left as it was)
            rank.speculation.prompt_end_decodes = True


TRTLLM = TrtllmEngine()
