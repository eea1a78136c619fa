"""Speculative decoding: how many tokens one decode pass of one request emits, and the KV it reserves.

A decode pass under speculation verifies the request's last token plus `draft_tokens` drafts and emits
1 + the accepted drafts (never more than the request still has to generate).  Acceptance is conditional
per position, as Dynamo's mocker samples it (`SpeculativeDecodeSampler`): draft i is accepted with
`rates[i]` only if every draft before it was, so the first rejection ends the run.  ngram's rates are
padded with 0 (or cut) to the drafts; native MTP's mean (`nextn_accepted`) is lowered as AISimulate
lowers it: floor(mean) positions of rate 1, then frac(mean), then 0.

The draws are the mocker's, bit for bit: one stream per rank, Rust `rand`'s `StdRng::seed_from_u64(seed
+ offset)` (traffic/chacha_stream.py), the offset the rank's place among its role's ranks, read in the
order the mocker samples: a rate of 1 accepts without a draw, any other rate reads one u64 and accepts
below `rate * 2**64` (`Rng::random_bool`).  Each decode pass of a request whose first token is out draws
once, at its end on vLLM (the pass's requests in running order) and at its start on SGLang
(`draw_bursts`, the running batch's order), also when the request has a single token left (the burst is
cut after the draw); the pass that samples a request's first token draws nothing.  So a request's bursts
depend on every request drawn before it on its rank, as in AISimulate (facts section 89), and the
stream's position lives here, in the rank's `Speculation`.

The KV of a pass's tokens (`reserve_bursts`) is taken as the mocker takes it, once the pass is scheduled
and its admissions made: each request reaching its known end needs room for its largest burst, all
together (on a state rank also the fresh state of a decode that leaves a block boundary with drafts to
verify: `StateSnapshots.drafts_state`), or the newest running request is preempted.
"""
from __future__ import annotations

from ..timing import PassWork
from ..traffic.chacha_stream import U64, UniformStream

SCALE = 2.0 ** 64  # `Bernoulli::new(p)` compares a u64 with p * 2**64 (exact: a power of two)


def conditional_rates(plan) -> tuple[float, ...]:
    """The per-position conditional acceptance the mocker's sampler reads: ngram's rates padded with 0 or cut to
    the drafts (`normalize_conditional_accept_rates`); native MTP's mean lowered as AISimulate lowers it
    (`_accept_rates_for_expected`: whole drafts at 1, the fraction next, 0 after)."""
    drafts = plan.draft_tokens
    if plan.kind == "ngram":
        return tuple(plan.rates[:drafts]) + (0.0,) * max(0, drafts - len(plan.rates))
    whole = int(plan.mean_accepted)
    if whole >= drafts:
        return (1.0,) * drafts
    return (1.0,) * whole + (plan.mean_accepted - whole,) + (0.0,) * (drafts - whole - 1)


class Speculation:
    """One rank's speculative decoding and its draw stream, built from its plan record
    (`plan_records.SpeculationPlan`)."""

    __slots__ = ("kind", "lookahead", "seed", "draft_layers", "drafts_read_kv", "prompt_end_decodes", "thresholds",
                 "offset", "_stream", "_bursts")

    def __init__(self, plan, offset: int = 0):
        self.kind = plan.kind  # ngram | mtp
        self.lookahead = plan.draft_tokens
        self.seed = plan.seed
        self.draft_layers = plan.draft_layers
        self.drafts_read_kv = plan.drafts_read_kv
        # the pass that ends a prompt is also a decode of its request, drafts and all: priced so (pass_work.work_of)
        # and emitting its accepted drafts with the first token (TensorRT-LLM's MTP: its engine sets it)
        self.prompt_end_decodes = False
        # per position: None for a rate of 1 (accepted without a draw), else the u64 a draw must stay below
        self.thresholds = tuple(None if rate >= 1.0 else int(rate * SCALE) for rate in conditional_rates(plan))
        # the rank's place among its role's ranks (worker x attention_data + dp rank): AISimulate's seed offset,
        # 0 for a P/D decode role's first rank whatever the prefill role holds (facts section 89's probes)
        self.offset = offset
        self._stream = None  # the rank's draws, opened at its first (`_open`)
        self._bursts = {}  # SGLang: id(request) -> the burst drawn at the start of its decode pass in flight

    def work(self, chunks: tuple, decodes: int, context: int) -> PassWork:
        """A pass's work when each of its `decodes` decoding requests (contexts summing to `context`) verifies
        `lookahead` drafts: the drafts, the KV they read besides their requests' own read, the MTP layers."""
        drafts = self.lookahead * decodes
        return PassWork(chunks, decodes, context, drafts, self.lookahead * context if self.drafts_read_kv else 0,
                        self.draft_layers if drafts else 0)

    def sample(self, remaining: int) -> int:
        """Tokens one decode pass emits with `remaining` tokens left to generate: the mocker's
        `sample_output_tokens`, drawn from the rank's stream (0, without a draw, when nothing is left)."""
        if remaining <= 0:
            return 0
        stream = self._stream if self._stream is not None else self._open()
        tokens = 1
        for threshold in self.thresholds:
            if threshold is not None and stream.next_u64() >= threshold:
                break
            tokens += 1
        return min(tokens, remaining)

    def _open(self) -> UniformStream:
        """The rank's stream: `StdRng::seed_from_u64(seed + offset)`, wrapping (the mocker adds its seed offset to
        `aic_mtp_seed`)."""
        self._stream = UniformStream((self.seed + self.offset) & U64)
        return self._stream

    def extra(self, request) -> int:
        """vLLM: accepted drafts the request keeps from the decode pass that just gave it its base token, drawn now
        (the pass started with `generated - 1` tokens; the burst is cut to what it had left)."""
        return self.sample(request.stop_after - request.generated + 1) - 1

    def reserve_bursts(self, rank, items: list, preempt, fits) -> None:
        """The KV of the tokens this pass emits, taken once the pass is scheduled (the mocker's
        `emit_speculative_ready_tokens`, after admission): every request whose pass reaches the end of its known
        tokens needs the blocks of those tokens plus its largest burst (1 + `lookahead`, cut to what it has left),
        all of them together, and on a state rank the fresh state of a decode leaving a block boundary with drafts
        (`drafts_state`); while they do not fit, the newest running request is preempted (its pass was scheduled,
        so what it computed stays cached, but it emits nothing) and leaves the pass."""
        while True:
            ready = [(request, request.num_tokens + self.burst(request, new)) for request, new in items
                     if request.num_computed + new == request.num_tokens]
            state = rank.snapshots.drafts_state
            need = sum(max(0, rank.blocks_for(tokens) - (len(r.blocks) - rank.state_blocks))
                       + state(rank, r.num_tokens, tokens) for r, tokens in ready)
            if need <= rank.pool.free_count or not rank.running:
                break
            victim = rank.running.pop()
            preempt(rank, victim)
            items[:] = [item for item in items if item[0] is not victim]
        for request, tokens in ready:
            fits(rank, request, tokens)
            if state(rank, request.num_tokens, tokens):
                rank.snapshots.drafts_read(request)

    def burst(self, request, new: int) -> int:
        """The most tokens the request's pass may emit: 1 + `lookahead` for a decode, 1 for a pass that computes
        a prompt or a recompute (its first token is sampled alone, as the replay's own draws are; with
        `prompt_end_decodes` a prompt's too), cut to what it has left."""
        most = self.lookahead + 1 if new == 1 and request.generated or self.prompt_end_decodes and not request.generated \
            else 1
        return min(most, request.stop_after - request.generated)

    def draw_bursts(self, requests) -> None:
        """SGLang: draw the bursts of a decode pass over `requests` at its start, in their order (the mocker's
        running batch); a request before its first token emits 1 without a draw.  `drawn` and `kept` read them."""
        sample = self.sample
        self._bursts = {id(r): sample(r.stop_after - r.generated) if r.generated else 1 for r in requests}

    def drawn(self, request) -> int:
        """SGLang: the tokens the decode pass of `request` now starting emits (drawn by `draw_bursts`)."""
        return self._bursts[id(request)]

    def kept(self, request) -> int:
        """SGLang: the accepted drafts the request emits at its decode pass's end beside its base token."""
        return self._bursts.pop(id(request)) - 1


def of(role, offset: int = 0) -> Speculation | None:
    """The speculation of the role's rank `offset` (its place among the role's ranks), or None without it."""
    plan = getattr(role, "speculation", None)
    return None if plan is None else Speculation(plan, offset)
