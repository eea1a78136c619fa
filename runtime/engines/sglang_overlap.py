"""SGLang's overlap scheduler (`host_loop: true`, v0.5.20's event_loop_overlap): a pass is decided while the one
before it runs.

The scheduler launches a batch, then waits for the previous batch's result, so
the batch that starts when pass i-1 ends was formed when pass i-1 started.
That decision sees the requests that had arrived by then and the results of
the passes that had ended by then; pass i-1's results (its prompts entering
the radix tree, its finished requests' prompt + output entering it and their
pages freed) are observed only after it.  A request that finished in pass i-1
is still in that decision's running batch: with nothing else to run, the next
pass is its wasted decode, and a decode pass computes its last token's KV, so
it leaves prompt and all its output cached (one output token: prompt + 1;
AISimulate: 4 turns of 1,000 new tokens and 1 output reuse 1,001 / 2,002 /
3,003 with `host_loop`, 1,000 / 2,001 / 3,002 without).  When the decision finds nothing at all, the loop
observes pass i-1 and decides again at once (the GPU would be idle).  A pass
started from idle is decided when it starts.

A request that decision retracts loses the token pass i-1 gave it (SGLang skips
a retracted request's pending result): it starts over one token shorter.

The replay decides pass i when pass i-1 ends, so this module replays the older
decision: requests that arrived after pass i-1 started are held back, pass
i-1's cache results wait in the state's `pending` list until the batch is
formed, and its finished requests count in a decode pass's work.  Admissions
are recorded at the decision time, as AISimulate's `host_loop` records them
(AISimulate: a turn due as the previous one's last token ends at 1,320 ms is
admitted at 1,320, runs its extend from 1,330 after the wasted pass and has
its first token at 1,380, where it has it at 1,370 without the overlap).
"""
from __future__ import annotations

from ..serving.pass_work import Batch
from .sglang_decode import decode_work, drop_unseen_tokens


def observe(state) -> None:
    """Apply the cache results that waited for the next decision, in order."""
    pending, state.pending = state.pending, []
    for apply, args in pending:
        apply(*args)


def schedule(rank, state, now: int, decide):
    """The batch the overlap scheduler runs from `now`; `decide(rank, at)` is the ordinary scheduler round."""
    ghosts, state.ghosts = state.ghosts, []
    rank.pass_owed = False
    if state.last_end != now:  # started from idle: decided now, with everything observed
        decoded(ghosts)  # (the decision before the idle time decoded them: nothing else was running)
        observe(state)
        return decide(rank, now)
    cutoff = state.last_start
    waiting = rank.waiting
    late = [r for r in waiting if r.arrival_ns > cutoff]
    if late:
        held = set(map(id, late))
        rank.waiting = type(waiting)(r for r in waiting if id(r) not in held)
    batch = decide(rank, cutoff)
    if state.retracted:
        drop_unseen_tokens(state, now)
    if late:
        rank.waiting.extend(late)  # (after any request this decision retracted: they arrive later)
    if batch is None or not state.extend:
        decoded(ghosts)
    observe(state)
    if batch is not None and not state.extend and ghosts:
        work = batch.work
        batch.work = decode_work(rank, work.decode_requests + len(ghosts),
                                 work.decode_context + sum(g.request.num_tokens for g in ghosts))
    elif batch is None and ghosts:  # the wasted decode
        batch = Batch([], decode_work(rank, len(ghosts), sum(g.request.num_tokens for g in ghosts)))
    if batch is None:
        return decide(rank, now)
    return batch


def decoded(ghosts) -> None:
    """The finished requests get one more decode: the KV of their last token is computed and cached with them."""
    for ghost in ghosts:
        ghost.cached = ghost.request.num_tokens


def ended(state, start: int, end: int) -> None:
    """A pass from `start` to `end` ran (the next decision is replayed as of `start`)."""
    state.last_start, state.last_end = start, end
