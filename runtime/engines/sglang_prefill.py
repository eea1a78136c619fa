"""SGLang's prefill batch (get_new_batch_prefill with its PrefillAdder): which waiting requests extend this pass.

Waiting requests are taken in the policy's order while running slots last.
Each is charged its extend tokens (in whole pages) plus its remaining output,
clipped to 4,096 tokens, against what the pool has free or evictable less an
estimate of what running requests will still decode (their remaining output
times the new-token ratio); the first that does not fit strictly below that
stops the batch.  A prompt longer than what is left of the chunk budget is cut
to it in whole pages (chunked prefill, SGLang's PrefillAdder: so a pass fills its
budget, the last admission's prompt going on in the next pass; the chunk size is
`max_batched_tokens` divided by the worker's attention-DP ranks, as SGLang's server_args divides
chunked_prefill_size: sglang_state.py), and a chunk that
does not end the prompt is charged no output.  An admission reuses the longest cached prefix in whole pages, never
the last known token, and locks it.  Weighing a request reads its cached prefix without touching it; only
an admission refreshes the path's last use (AISimulate's mocker: a waiting request refreshed at every round
kept a remnant of its own history from eviction, so its session's next turn on s05 reused 1 token where
AISimulate's reused 0).  One whose pages cannot be allocated once its
prefix is locked (the budget counted that prefix as evictable) ends the batch.  Requests of one batch do not share their
prefixes: the tree learns a prompt only when its pass ends.
"""
from __future__ import annotations

from ..tiers.token_runs import page_key, spec_cut
from .sglang_state import CLIP_MAX_NEW_TOKENS, MAX_PREFILL_TOKENS, Lease

IN_BATCH_CHECK = 32  # SGLang's IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD: cached tokens at most this are checked
IN_BATCH_DEPRIORITIZE = 32  # SGLang's IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD: equal leading tokens


def prefill_batch(rank, state, now_ns: int) -> list:
    """The (request, tokens) items of this pass's extend batch, taken out of the waiting queue."""
    pool = rank.pool
    running = rank.running
    reserved = sum(min(r.stop_after - r.generated, CLIP_MAX_NEW_TOKENS) for r in running) * state.ratio
    rem_total = pool.available + pool.evictable - reserved
    rem_input = MAX_PREFILL_TOKENS
    rem_chunk = state.chunk
    items: list = []
    waiting = rank.waiting
    order = list(waiting) if state.policy == "fcfs" else lpm_order(rank, waiting)
    slots = rank.max_sequences - len(running)
    for request in order:
        if len(items) >= slots:
            break
        if request.pd is not None and request.pd.phase is not None:
            continue  # a decode rank's handed-off request (sglang_handoff.py)
        lease = state.leases.get(id(request))
        if lease is None:  # a fresh request (or a retracted one): its cached prefix, read without touching it
            node, prefix = None, pool.held_tokens(request.spec, pool.page, (request.num_tokens - 1) // pool.page)
            start = prefix
        else:  # the next chunk of a chunked prefill
            node, prefix, start = lease.node, lease.cached, request.num_computed
        extend = request.num_tokens - start
        if extend <= rem_chunk:
            chunk = extend
        else:
            chunk = min(pool.floor(int(rem_chunk)), extend)
            if chunk <= 0:
                break
        charged = pool.ceil(chunk)
        reserve = min(request.stop_after - request.generated, CLIP_MAX_NEW_TOKENS) if chunk == extend else 0
        if charged + reserve >= rem_total or charged > rem_input or charged > rem_chunk:
            break
        old_end = prefix if lease is None else lease.end
        grow = pool.ceil(start + chunk) - old_end
        if lease is None:  # admitted: now its match touches the path (LRU) and splits where the prefix ends
            node, _ = pool.match(request.spec, request.num_tokens - 1)
            pool.lock(node)
        if not pool.take(grow):
            if lease is None:
                pool.unlock(node)
            # the batch ends here and the new-token ratio is left as it is: AISimulate resets nothing (a reset to
            # 0.7 refused s05's chunk continuation at 17,000 ms, which AISimulate admits, and cost 9 retractions)
            break
        if lease is None:
            lease = Lease(node, prefix, prefix)
            state.leases[id(request)] = lease
            record_admission(rank, request, prefix, now_ns)
        lease.end = old_end + grow
        rem_total -= grow + reserve
        rem_input -= charged
        rem_chunk -= charged
        items.append((request, chunk))
        if rem_chunk <= 0:
            break
    if items:
        taken = set(map(id, (r for r, _ in items)))
        rank.waiting = type(waiting)(r for r in waiting if id(r) not in taken)
    return items


def lpm_order(rank, waiting) -> list:
    """Longest prefix match first (stable); SGLang falls back to arrival order past 128 waiting requests.

    SGLang's in-batch prefix caching (schedule_policy.py `_compute_prefix_matches`): a request with at most
    IN_BATCH_CHECK cached tokens whose first IN_BATCH_DEPRIORITIZE tokens equal those of an earlier such request
    in the queue goes last this round, so one of them computes the shared prefix and the others reuse it later
    (SGLang matches against a page-1 tree of the waiting prompts: 32 equal tokens, whatever the page size)."""
    if len(waiting) > 128:
        return list(waiting)
    pool = rank.pool
    held = {id(r): pool.held_tokens(r.spec, pool.page, (r.num_tokens - 1) // pool.page) for r in waiting}
    seen, later = set(), set()
    for r in waiting:
        if held[id(r)] > IN_BATCH_CHECK or r.num_tokens < IN_BATCH_DEPRIORITIZE:
            continue  # (a shorter sequence never matches 32 tokens of another, but SGLang still learns it)
        head = page_key(spec_cut(r.spec, 0, IN_BATCH_DEPRIORITIZE), IN_BATCH_DEPRIORITIZE)
        if head in seen:
            later.add(id(r))
        else:
            seen.add(head)
    return sorted(waiting, key=lambda r: (id(r) in later, -held[id(r)]))


def record_admission(rank, request, cached: int, now_ns: int) -> None:
    """The request's admission record (as serving/scheduler.py writes vLLM's): its reused tokens, the prompt's on a
    first admission; a readmission's are not cut at the prompt (the spec's field table: "prompt tokens" for the first
    admission only, and a readmission can reuse KV the request itself computed; vLLM's since facts §43).  With a
    prefill stage, reuse is counted over prefill admissions only (a decode rank's readmission is not one)."""
    readmission = bool(request.admissions)
    reused = cached if readmission else min(cached, request.spec.prompt_len)
    request.admissions.append({
        "admission_ordinal": len(request.admissions), "pool": rank.name, "at_ns": now_ns,
        "reused_input_tokens": reused, "g1_reused_input_tokens": reused, "host_reused_input_tokens": 0,
        "is_readmission": readmission})
    if not readmission:
        request.first_admit_ns = now_ns
        request.first_reused_tokens = reused
        request.first_host_tokens = 0
        request.first_g1_tokens = reused
    if rank.role != "decode":
        request.reused_tokens = max(request.reused_tokens, reused)
    request.committed_prefill += max(0, request.num_tokens - cached)  # (a readmission recomputes its output too)
    request.num_computed = cached
    request.status = "running"
