"""Speculative decoding: how many tokens one decode pass of one request emits, and the KV it reserves.

A decode pass under speculation verifies the request's last token plus `draft_tokens` drafts and emits
1 + the accepted drafts (never more than the request still has to generate).  ngram acceptance is
conditional per position, as Dynamo's mocker samples it: draft i is accepted with `rates[i]` only if
every draft before it was, so the first rejection ends the run.  Native MTP (`nextn`) is given as a
mean (`nextn_accepted`): a pass accepts floor(mean) drafts, plus one with probability frac(mean).

Every draw comes from the counter-based generator (traffic/rng.py), keyed by the seed, the request's
index and the pass: a request's decode passes are told apart by its `generated` count at the pass's
start, which grows by at least one per pass, so the draws depend on neither scheduling order nor
Python's hash seed.  The KV of a pass's tokens (`reserve_bursts`) is taken as the mocker takes it, once the
pass is scheduled and its admissions made: each request reaching its known end needs room for its largest burst,
all together, or the newest running request is preempted; a state rank reserves its drafts' slots
(`drafts_kv`, vLLM's `num_lookahead_tokens`) as it schedules each decode instead.
"""
from __future__ import annotations

from ..timing import PassWork
from ..traffic.rng import uniform

STREAM = 0x5BEC << 40  # keeps these draws apart from the traffic's streams (request indexes are < 2**40)
POSITIONS = 8  # counters per pass: one per draft position (at most 5), padded so passes never overlap


class Speculation:
    """One role's speculative decoding, built from its plan record (`plan_records.SpeculationPlan`)."""

    __slots__ = ("kind", "lookahead", "rates", "mean", "seed", "draft_layers", "drafts_read_kv", "prompt_end_decodes")

    def __init__(self, plan):
        self.kind = plan.kind  # ngram | mtp
        self.lookahead = plan.draft_tokens
        self.rates = plan.rates
        self.mean = plan.mean_accepted
        self.seed = plan.seed
        self.draft_layers = plan.draft_layers
        self.drafts_read_kv = plan.drafts_read_kv
        # the pass that ends a prompt is also a decode of its request, drafts and all: priced so (pass_work.work_of)
        # and emitting its accepted drafts with the first token (TensorRT-LLM's MTP: its engine sets it)
        self.prompt_end_decodes = False

    def work(self, chunks: tuple, decodes: int, context: int) -> PassWork:
        """A pass's work when each of its `decodes` decoding requests (contexts summing to `context`) verifies
        `lookahead` drafts: the drafts, the KV they read besides their requests' own read, the MTP layers."""
        drafts = self.lookahead * decodes
        return PassWork(chunks, decodes, context, drafts, self.lookahead * context if self.drafts_read_kv else 0,
                        self.draft_layers if drafts else 0)

    def accepted(self, index: int, generated: int) -> int:
        """Drafts accepted in the pass of request `index` that starts with `generated` tokens."""
        stream, base = STREAM + index, generated * POSITIONS
        if self.kind == "ngram":
            count = 0
            for position, rate in enumerate(self.rates):
                if uniform(self.seed, stream, base + position) >= rate:
                    break
                count += 1
            return count
        whole = int(self.mean)
        extra = self.mean - whole
        return whole + (1 if extra > 0 and uniform(self.seed, stream, base) < extra else 0)

    def extra(self, request) -> int:
        """Accepted drafts the request keeps from the decode pass that just gave it its base token (so the pass
        started with `generated - 1` tokens), cut to what it still has to generate."""
        left = request.stop_after - request.generated
        if left <= 0:
            return 0
        return min(left, self.accepted(request.spec.index, request.generated - 1))

    def drafts_kv(self, request, new: int) -> int:
        """Slots a decode of a state rank reserves for its drafts as it is scheduled (vLLM's lookahead), no more
        than the tokens it has left (the state runs, facts sections 45 and 54, agree so)."""
        return min(self.lookahead, request.stop_after - request.generated - 1) if new == 1 and request.generated else 0

    def reserve_bursts(self, rank, items: list, preempt, fits) -> None:
        """The KV of the tokens this pass emits, taken once the pass is scheduled (the mocker's
        `emit_speculative_ready_tokens`, after admission): every request whose pass reaches the end of its known
        tokens needs the blocks of those tokens plus its largest burst (1 + `lookahead`, cut to what it has left),
        all of them together; while they do not fit, the newest running request is preempted (its pass was
        scheduled, so what it computed stays cached, but it emits nothing) and leaves the pass."""
        while True:
            ready = [(request, request.num_tokens + self.burst(request, new)) for request, new in items
                     if request.num_computed + new == request.num_tokens]
            need = sum(max(0, rank.blocks_for(tokens) - (len(r.blocks) - rank.state_blocks)) for r, tokens in ready)
            if need <= rank.pool.free_count or not rank.running:
                break
            victim = rank.running.pop()
            preempt(rank, victim)
            items[:] = [item for item in items if item[0] is not victim]
        for request, tokens in ready:
            fits(rank, request, tokens)

    def burst(self, request, new: int) -> int:
        """The most tokens the request's pass may emit: 1 + `lookahead` for a decode, 1 for a pass that computes
        a prompt or a recompute (its first token is sampled alone, as the replay's own draws are; with
        `prompt_end_decodes` a prompt's too), cut to what it has left."""
        most = self.lookahead + 1 if new == 1 and request.generated or self.prompt_end_decodes and not request.generated \
            else 1
        return min(most, request.stop_after - request.generated)


    def drawn(self, request) -> int:
        """The tokens the decode pass of `request` starting now emits: its base token and the drafts `extra` will
        give it at the pass's end (the same draw), cut to what it has left; 1 before its first token."""
        if not request.generated:
            return 1
        return min(1 + self.accepted(request.spec.index, request.generated), request.stop_after - request.generated)


def of(role) -> Speculation | None:
    """The role's speculation, or None without it."""
    plan = getattr(role, "speculation", None)
    return None if plan is None else Speculation(plan)
