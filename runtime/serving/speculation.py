"""Speculative decoding: how many tokens one decode pass of one request emits, and the KV it reserves.

A decode pass under speculation verifies the request's last token plus `draft_tokens` drafts and emits
1 + the accepted drafts (never more than the request still has to generate).  ngram acceptance is
conditional per position, as Dynamo's mocker samples it: draft i is accepted with `rates[i]` only if
every draft before it was, so the first rejection ends the run.  Native MTP (`nextn`) is given as a
mean (`nextn_accepted`): a pass accepts floor(mean) drafts, plus one with probability frac(mean).

Every draw comes from the counter-based generator (traffic/rng.py), keyed by the seed, the request's
index and the pass: a request's decode passes are told apart by its `generated` count at the pass's
start, which grows by at least one per pass, so the draws depend on neither scheduling order nor
Python's hash seed.  vLLM reserves KV for the drafts (`num_lookahead_tokens`) at every decode:
`lookahead` is that many extra slots.
"""
from __future__ import annotations

from ..timing import PassWork
from ..traffic.rng import uniform

STREAM = 0x5BEC << 40  # keeps these draws apart from the traffic's streams (request indexes are < 2**40)
POSITIONS = 8  # counters per pass: one per draft position (at most 5), padded so passes never overlap


class Speculation:
    """One role's speculative decoding, built from its plan record (`plan_records.SpeculationPlan`)."""

    __slots__ = ("kind", "lookahead", "rates", "mean", "seed", "draft_layers", "drafts_read_kv")

    def __init__(self, plan):
        self.kind = plan.kind  # ngram | mtp
        self.lookahead = plan.draft_tokens
        self.rates = plan.rates
        self.mean = plan.mean_accepted
        self.seed = plan.seed
        self.draft_layers = plan.draft_layers
        self.drafts_read_kv = plan.drafts_read_kv

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

def of(role) -> Speculation | None:
    """The role's speculation, or None without it."""
    plan = getattr(role, "speculation", None)
    return None if plan is None else Speculation(plan)
