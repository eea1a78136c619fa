"""SGLang's radix cache in a P/D handoff (v0.5.20's disaggregation): the source's hold, the destination's reservation.

Source (prefill role): the extend pass that completes a prompt inserts its
complete pages in the tree, so the prompt is published before the transfer
hold and later prompts reuse it while the KV travels.  The request then ends
there with the token it sampled, and the hold keeps its lease: the lock on its
path and its private pages (the partial tail, the sampled token's slot).  When
the transfer ends the hold is let go: the private pages are freed and the path
unlocked; the sampled token's KV was never computed, so the tree keeps the
prompt alone (AISimulate: page-1 sessions reuse 1,024, not 1,025, on the source).

Destination (decode role; SGLang reserves before the prefill starts): the
reservation locks the prompt's cached prefix (whole pages) and allocates the
rest of the prompt's pages, the page-rounded prompt footprint, as AISimulate's
mocker does.  The transferred KV lands in those pages and stays private, found
by no match, until the request is admitted to the running batch; then its
complete prompt pages enter the tree.  A ready request cancelled before that
caches its full prompt pages (`cancel_ready`).
"""
from __future__ import annotations

from ..serving import handoff, pass_results
from .sglang_state import Lease, insert, release


def hold(rank, request):
    """The source's hold: the request's lease."""
    lease = rank.pool.sglang.leases.pop(id(request))
    pass_results.hand_over_blocks(request)
    return lease


def release_hold(rank, request, lease) -> None:
    release(rank.pool, lease)


def reserve(rank, request, config) -> bool:
    pool, spec = rank.pool, request.spec
    prompt = spec.prompt_len
    node, hit = pool.match(spec, prompt)
    need = pool.ceil(prompt) - hit
    pool.lock(node)
    if not pool.take(need):
        pool.unlock(node)
        return False
    pool.sglang.leases[id(request)] = Lease(node, hit, hit + need)
    handoff.reserved(request, config, hit // pool.page, pool.ceil(prompt) // pool.page, pool.page)
    return True


def land(rank, request) -> None:
    """The KV is in the reserved pages: the request waits for the running batch, where its first decode computes
    the prompt's last token and samples the first output token."""
    request.num_computed = request.spec.prompt_len - 1
    request.status = "waiting"


def admit_destinations(rank, now_ns: int) -> None:
    """A decode rank's handed-off requests, in queue order: an arrived one joins the running batch (its complete
    prompt pages enter the tree now), one to reserve reserves (the first that cannot stops the rest), one whose
    KV travels waits.  A request that arrives as a pass of a rank with running requests ends reserves only at
    the end of the next one: AISimulate's decode worker starts that pass before it takes the reservation (a
    session's next turn, due as its last token ends, reserves one decode pass later).  Each trigger (a pass end,
    an activation; always one on a rank that runs nothing) reserves one request at most, as vLLM's
    handoff.reserve_pending: two sessions arriving in one decode pass reserve a pass apart (facts section 61)."""
    pool, state = rank.pool, rank.pool.sglang
    kept = []
    blocked = False
    tries = handoff.take_tries(rank)  # (one reservation per trigger, as vLLM's)
    for request in rank.waiting:
        phase = request.pd.phase if request.pd is not None else None
        if phase in ("reserve", "pending") and not tries:
            blocked = True
        if phase == "arrived" and len(rank.running) < rank.max_sequences:
            handoff.admit_arrived(request, now_ns)
            request.status = "running"
            insert(pool, state.leases[id(request)], request.spec, request.spec.prompt_len)
            rank.running.append(request)
            continue
        if phase == "reserve" and request.arrival_ns == now_ns and rank.running:
            blocked = True  # (see below)
        if phase in ("reserve", "pending") and not blocked:
            if handoff.reserve(rank, request, rank.handoff, now_ns):
                tries -= 1
                if phase == "reserve":
                    rank.jobs.append(handoff.PrefillMove(request))
                    continue
                handoff.start_transfer(rank, request)
            else:
                blocked = True
        kept.append(request)
    if len(kept) != len(rank.waiting):
        rank.waiting = type(rank.waiting)(kept)


def cancel_ready(rank, request) -> None:
    """A ready (arrived, not yet running) request is cancelled: its full prompt pages enter the tree, the rest is
    freed."""
    pool = rank.pool
    lease = pool.sglang.leases.pop(id(request))
    insert(pool, lease, request.spec, request.spec.prompt_len)
    release(pool, lease)
    rank.waiting.remove(request)


class RadixHandoff:
    """The radix cache's part in a handoff (serving/handoff.py's `handoff_kv`)."""

    keyed = False  # (the radix cache matches token runs: a request moved here needs no block keys)
    hold = staticmethod(hold)
    release = staticmethod(release_hold)
    reserve = staticmethod(reserve)
    land = staticmethod(land)


PAGES = RadixHandoff()
