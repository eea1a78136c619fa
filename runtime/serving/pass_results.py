"""What a rank's pass changes when it ends, and every other change of a request's scheduling state.

The scheduler (scheduler.py) and this module are the only writers of a
`Request`'s own fields: a pass's tokens and completions, the decode passes a
macro step applies at once, a request moving to another rank or handing its
blocks over in P/D, a rejection, and what the replay says of requests still
open when it ends.  Tiers and handoffs keep their own records
(`request.tier`, `request.pd`).
"""
from __future__ import annotations

from ..tiers import offload
from ..tiers.state_snapshots import WHOLE_BLOCKS
from .requests import Request


def finish_pass(rank, batch, end_ns: int) -> list[Request]:
    """Apply a pass's results at its end; returns the requests that finished."""
    finished = []
    rank.chain.after_pass(rank, batch)
    speculation = rank.speculation
    reached = None if rank.snapshots is WHOLE_BLOCKS else rank.snapshots.reached  # (whole blocks: nothing to tell)
    for request, new in batch.items:
        computed = request.num_computed + new
        if reached is not None:
            reached(rank, request, request.num_computed, computed)  # (after the pass's allocations)
        request.num_computed = computed
        if computed < request.num_tokens:
            continue  # a prefill chunk that does not reach the end of the known tokens
        last = request.last_token_ns
        if last is not None and request.second_token_ns is not None:  # the common decode case, inlined
            gaps, gap = request.gaps, end_ns - last
            run = gaps[-1] if gaps else None
            if run is not None and run[0] == gap:
                run[1] += 1
            else:
                gaps.append([gap, 1])
            request.last_token_ns = end_ns
            request.generated += 1
            request.num_tokens += 1
        else:
            request.add_token(end_ns)
        if speculation is not None and (new == 1 and request.generated > 1
                                        or speculation.prompt_end_decodes and request.generated == 1):
            _accept_drafts(rank, request, speculation.extra(request))  # (TensorRT-LLM's MTP: its first pass too)
        if request.generated >= request.stop_after:
            finished.append(request)
    if finished:
        release_finished(rank, finished, end_ns)
    return finished


def _accept_drafts(rank, request: Request, drafts: int) -> None:
    """A decode pass under speculation also emits its accepted drafts, at the same time as its base token (a gap
    of 0 each); their KV is computed, so full blocks they complete become discoverable."""
    if drafts <= 0:
        return
    rank.snapshots.reached(rank, request, request.num_computed, request.num_computed + drafts)
    emit_drafts(request, drafts)
    held = (len(request.blocks) - rank.state_blocks) * rank.block_size  # (a P/D arrival allocates at its next pass)
    register(rank, request, min(request.num_computed, held))


def emit_drafts(request: Request, drafts: int) -> None:
    """The request's accepted drafts, emitted with its base token (gaps of 0) and their KV computed."""
    if request.second_token_ns is None:  # drafts beside a first token (TensorRT-LLM's MTP): the second comes with it
        request.second_token_ns = request.last_token_ns
    request.num_computed += drafts
    request.add_gaps(0, drafts)
    request.generated += drafts
    request.num_tokens += drafts


def release_finished(rank, finished: list[Request], end_ns: int) -> None:
    if len(finished) == 1 and finished[0] in rank.running:  # (a fused run's finishes come one at a time: taken
        rank.running.remove(finished[0])  # out in C, in place; requests compare by identity, having no __eq__)
    else:
        done = set(map(id, finished))
        rank.running = [r for r in rank.running if id(r) not in done]
    for request in finished:
        rank.chain.on_finish(rank, request)
        if rank.role == "prefill":  # a prefill rank's part is done: the KV is handed off
            request.status = "transferring"
            continue
        offload.release_blocks(rank, request, request.blocks)
        request.blocks = []
        request.status = "completed"
        request.terminal_ns = end_ns


def cancel(rank, request: Request) -> None:
    """The request is cancelled wherever it is on `rank` (vLLM's abort: its blocks are freed as a finished
    request's are, so the full blocks it computed stay cached, evictable; a pass in flight for it is lost)."""
    rank.running = [r for r in rank.running if r is not request]
    if request in rank.waiting:
        rank.waiting.remove(request)
    if request.blocks:
        offload.release_blocks(rank, request, request.blocks)
        request.blocks = []
    request.status = "canceled"


def register(rank, request: Request, tokens: int) -> None:
    """Make the request's full blocks up to `tokens` discoverable by their keys."""
    upto = tokens // rank.block_size
    if upto > request.max_blocks:  # (else no block is new, whatever its keys: they are not looked at)
        keys = request.keys
        if upto > len(keys):
            upto = len(keys)
            if upto <= request.max_blocks:
                return
        rank.pool.register_run(request.blocks, keys, request.max_blocks, upto, request.spec)
        request.max_blocks = upto


def add_decode_block(rank, request: Request, block: int) -> None:
    """A fused decode pass crossed a block boundary: the new block goes before the state blocks."""
    request.blocks.insert(len(request.blocks) - rank.state_blocks, block)


def allocate_decode_block(rank, request: Request, count: int = 1) -> None:
    """Fused decode passes crossed `count` block boundaries of `request`: its next blocks, allocated after its last
    token block (a pool naming blocks by ranges, g1_extents.py, keeps a request's blocks one range), go before its
    state blocks."""
    blocks = request.blocks
    at = len(blocks) - rank.state_blocks
    blocks[at:at] = rank.pool.allocate_after(blocks[at - 1], count) if at else rank.pool.allocate(count)


def gap_runs(ends: list[int]) -> list[list[int]]:
    """The gaps between consecutive fused pass ends as [gap, count] runs (a request's `gaps` keep that form)."""
    runs: list[list[int]] = []
    for gap in (b - a for a, b in zip(ends, ends[1:])):
        if runs and runs[-1][0] == gap:
            runs[-1][1] += 1
        else:
            runs.append([gap, 1])
    return runs


def advance_decodes(rank, request: Request, passes: int, ends: list[int], gaps: list[list[int]]) -> None:
    """Give the request the tokens of fused passes 0..passes-1 (it already has its first token)."""
    rank.snapshots.reached(rank, request, request.num_computed, request.num_computed + passes)
    request.num_computed += passes
    register(rank, request, request.num_computed)
    request.add_token(ends[0])
    left = passes - 1
    for gap, count in gaps:
        if left <= 0:
            break
        request.add_gaps(gap, min(count, left))
        left -= count
    request.generated += passes - 1
    request.num_tokens += passes - 1
    request.last_token_ns = ends[passes - 1]


def finish_fused(rank, request: Request, j: int, ends: list[int], gaps: list[list[int]]) -> tuple[Request, int]:
    """The request finishes in fused pass `j`: its tokens of passes 0..j, then its release at that pass's end.
    Returns (request, end time)."""
    advance_decodes(rank, request, j + 1, ends, gaps)
    release_finished(rank, [request], ends[j])
    return request, ends[j]


def advance_survivors(rank, items, last_pass: dict, ends: list[int], gaps: list[list[int]]) -> None:
    """The tokens of a fused run for the batch's requests that did not finish in it (`last_pass`: id(request) ->
    its last pass of the run)."""
    for request, _ in items:
        if request.status != "completed":
            advance_decodes(rank, request, last_pass[id(request)] + 1, ends, gaps)


def move_to(request: Request, rank, stop_after: int) -> None:
    """The request now lives on `rank` (its keys follow the rank's block size, if its G1 matches by keys), to sample
    `stop_after` tokens."""
    request.rank = rank.index
    request.keys = request.spec.keys(rank.block_size) if rank.handoff_kv.keyed else []
    request.max_blocks = 0
    request.num_computed = 0
    request.stop_after = stop_after


def hand_over_blocks(request: Request) -> list[int]:
    """Prefill is done on the source: its blocks go to the handoff, which holds them until the KV has landed.

    The token the prefill sampled is not the request's first output token: as AISimulate counts it, the decode
    rank samples every output token, the first in the pass that activates the handed-off request, so TTFT
    includes the KV transfer and any wait for a decode slot.  The request goes on with its prompt alone."""
    blocks, request.blocks = request.blocks, []
    request.generated = 0
    request.num_tokens = request.spec.prompt_len
    request.first_token_ns = request.second_token_ns = request.last_token_ns = None
    request.gaps = []
    return blocks


def resume_decode(rank, request: Request, blocks: list[int], hits: int) -> None:
    """The KV landed on the decode rank: the request holds `blocks` (the first `hits` were cached there) and
    knows its whole prompt; it waits to be admitted."""
    request.blocks = blocks
    request.max_blocks = hits
    request.num_computed = request.spec.prompt_len
    upto = min(request.spec.prompt_len // rank.block_size, len(request.keys))
    rank.pool.register_run(request.blocks, request.keys, request.max_blocks, upto, request.spec)
    request.max_blocks = max(request.max_blocks, upto)
    request.status = "waiting"


def ended_canceled(request: Request, now_ns: int) -> None:
    """The traffic cancelled the request at `now_ns` (after its engine let go of it: `cancel`)."""
    request.status, request.terminal_ns = "canceled", now_ns


def reject(request: Request, reason: str, now_ns: int) -> None:
    request.status, request.reason, request.terminal_ns = "rejected", reason, now_ns


def refuse_when_reached(request: Request, reason: str) -> None:
    """`request` can never run: it waits until admission reaches it (scheduler.py), then is rejected for `reason`."""
    request.reason = reason


def close(requests: list[Request], end_ns: int, stalled: bool) -> None:
    """The replay ended: requests still open are incomplete at `end_ns` (stalled: no event could move them)."""
    for request in requests:
        if request.terminal_ns is None:
            request.status, request.terminal_ns = "incomplete", end_ns
            if stalled:
                request.reason = "stalled: no event could let it progress"
