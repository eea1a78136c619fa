"""SGLang's engine (v0.5.20): a radix-cache G1 and SGLang's event loop, one pass per scheduler round.

A round runs an extend (prefill) batch whenever one can form (sglang_prefill.py),
and only otherwise a decode pass over every running request (sglang_decode.py):
prefill does not mix with decode, so running requests wait out each prefill
pass.  An extend pass samples the first token of each request whose prompt it
completes; the request then joins the running batch.  With
`prefill_decode_interval` N, each extend pass is followed by N rounds without
prefill (chunk continuations included).  The new-token ratio decays by one step
after every decode pass.

Cache (tiers/radix_cache.py, page size = the role's block_size): after a pass
the complete pages a request has computed enter the radix tree (its prompt
after prefill, each chunk of a chunked prefill), so a later pass's admissions
reuse them; a finished request leaves prompt + all output cached in whole
pages (sglang_state.py says why), then unlocks its path.

With P/D, a prefill rank's finished request is handed off with its lease held
and a decode rank takes handed-off requests first (sglang_handoff.py).

Pure decode passes are fused into macro steps by SGLang's own planner
(sglang_macro.py: shell/macro.py assumes vLLM's block allocation).
"""
from __future__ import annotations

from ..outputs.radix_events import DECODE_FLUSH_EVERY, RadixEvents
from ..serving.pass_work import Batch, work_of
from ..timing import PassWork
from ..tiers.radix_cache import RadixCache
from . import sglang_macro, sglang_overlap
from .engine import Engine
from .sglang_decode import accept, cancel_running, complete, decode_batch, decode_work, drop, speculation_of
from .sglang_handoff import PAGES, admit_destinations, cancel_ready
from .sglang_prefill import prefill_batch
from .sglang_state import SglangState, insert, observed


class SglangEngine(Engine):
    name = "sglang"
    fusable = True  # (by sglang_macro.py)
    keyed = False  # requests need no per-block keys: the radix cache compares token runs

    def plan_fused(self, worker, batches, now, horizon, stop, can_finish):
        return sglang_macro.plan(worker, batches, now, horizon, stop, can_finish)

    def apply_fused(self, fused) -> list:
        return sglang_macro.apply(fused)

    def g1(self, blocks: int, prefix_caching: bool):
        return RadixCache(blocks, prefix_caching)

    def equip(self, rank, role=None) -> None:
        pool = rank.pool
        pool.set_page(rank.block_size)  # (the rank knows its block size; g1() is called before it exists)
        pool.sglang = SglangState(getattr(role, "prefill_decode_interval", 0) if role is not None else 0,
                                  getattr(role, "schedule_policy", "fcfs") if role is not None else "fcfs",
                                  getattr(role, "host_loop", False) and rank.role != "decode",
                                  rank.max_batched, getattr(role, "attention_data", 1) if role is not None else 1)
        rank.handoff_kv = PAGES  # (P/D: sglang_handoff.py)

    def schedule(self, rank, now_ns: int):
        state = rank.pool.sglang
        if rank.pool.events is not None and rank.pool.recorder is None:  # the replay captures KV events
            rank.pool.recorder = RadixEvents(rank.pool, rank.pool.events)
        batch = sglang_overlap.schedule(rank, state, now_ns, scheduler_round) if state.overlap else \
            scheduler_round(rank, now_ns)
        state.started = now_ns
        return batch

    def cancel(self, rank, requests: list) -> None:
        """The traffic cancels `requests`, open on this rank: a running one caches prompt + output in whole pages
        (cancel_running), a transferred one ready on a decode rank its full prompt pages (cancel_ready), any other
        frees its pages (the chunks of a chunked prefill stay in the tree, unlocked); then the events flush."""
        state = rank.pool.sglang
        sglang_overlap.observe(state)  # (the pass results the next decision would have seen come first)
        running = set(map(id, rank.running))
        for request in requests:
            if id(request) in running:
                cancel_running(rank, request)
                continue
            pd = request.pd
            if pd is not None and pd.phase == "arrived" and id(request) in state.leases:
                cancel_ready(rank, request)
            else:
                drop(rank, request)
            request.status = "canceled"
        flush(rank.pool)

    def finish(self, rank, batch, end_ns: int) -> list:
        pool, state = rank.pool, rank.pool.sglang
        sglang_overlap.ended(state, state.started, end_ns)
        finished, joined, unfinished = [], [], []
        prefill = state.extend  # (a pass is all extend or all decode)
        speculation = speculation_of(rank)
        for request, new in batch.items:
            request.num_computed += new
            lease = state.leases[id(request)]
            if request.num_computed < request.num_tokens:  # a chunk: its pages enter the tree, it waits again
                observed(state, insert, pool, lease, request.spec, request.num_computed)
                unfinished.append(request)
                continue
            if prefill:
                # the extend pass also takes the slot of the token it samples (so a finished request's every
                # token has its KV: sglang_state.py); with no page left for it, the request samples nothing now
                # and the next decode pass finds it short (AISimulate's mocker: it is retracted there)
                extra = pool.ceil(request.num_tokens + 1) - lease.end
                if extra > 0 and not pool.take(extra):
                    request.num_computed -= 1  # (its last prompt token is computed again by its first decode)
                    joined.append(request)
                    continue
                lease.end += max(extra, 0)
                observed(state, insert, pool, lease, request.spec, request.num_computed)
                joined.append(request)
            request.add_token(end_ns)
            if speculation is not None and not prefill and request.generated > 1:
                accept(rank, request, speculation)  # (a completing request stops mid-burst: extra's cut)
            if request.generated >= request.stop_after:
                finished.append(request)
        if unfinished:
            rank.waiting.extendleft(reversed(unfinished))
        if joined:
            rank.running.extend(joined)
        if not prefill and not state.retracted:
            state.ratio = max(state.ratio - state.decay, state.min_ratio)
        if not prefill:
            state.decodes += 1
        if finished:
            complete(rank, finished, end_ns)
        if prefill or not state.decodes % DECODE_FLUSH_EVERY or not rank.busy:
            flush(pool)
        return finished


def scheduler_round(rank, now_ns: int):
    """One round of SGLang's scheduler: an extend batch if one forms, else a decode pass (None: idle)."""
    state = rank.pool.sglang
    items = []
    if rank.role == "decode":
        admit_destinations(rank, now_ns)
    if rank.waiting and (not state.blocked or not rank.running):
        items = prefill_batch(rank, state, now_ns)
    state.extend = bool(items)
    state.retracted = False
    if items:
        state.blocked = state.interval
    else:
        if state.blocked:
            state.blocked -= 1
        items = decode_batch(rank, state)
    if not items:
        flush(rank.pool)  # idle
        return None
    if state.extend:
        # a decode rank's extend pass (a retracted request prefilled again) takes no time: AISimulate's mocker
        # gives a decode worker's prefill none, and its running requests lose no pass to it
        return Batch(items, work_of(items) if rank.role != "decode" else PassWork())
    # a decode pass is all decodes, a request whose extend pass could not sample included
    return Batch(items, decode_work(rank, len(items), sum(r.num_computed + 1 for r, _ in items)))


def flush(pool) -> None:
    """SGLang's KV events leave after an extend pass, every 40 decode passes and when the rank is idle."""
    if pool.recorder is not None:
        pool.recorder.flush()


SGLANG = SglangEngine()
