"""The replay's side of disaggregated prefill/decode: where a request goes first, and its KV's trip between roles.

Source-first (vLLM, TensorRT-LLM): a request is placed on a prefill rank; when
its prefill ends a decode rank is chosen and reserves its blocks at its next
pass, then the KV travels.  Destination-first (SGLang): the decode rank is
chosen on arrival and reserves first (`PrefillMove`), then the request goes to
a prefill rank.  The rank-level steps are in handoff.py.

An instant handoff (no `kv_transfer` bandwidth and no latency, or a
`destination_missing` one whose whole prompt the decode rank holds) lands in the
instant it is reserved, so its reservation is made when the mocker makes it, at
the event that triggers it (a prefill ending beside an idle decode worker, a
decode pass ending, an activation), not at the decode rank's next pass start:
AISimulate applies every completion and landing of an instant before any worker
starts a pass then (facts section 97), so the destination is activated and its
source let go before either worker's next pass.
"""
from __future__ import annotations

from ..shell.events import HANDOFF_DONE
from . import handoff


class Disaggregation:
    def __init__(self, config, router, push, next_seq, start_jobs=None):
        self.config = config  # handoff.Handoff, None when the deployment is aggregated
        self.router = router
        self.push = push
        self.start_jobs = start_jobs  # the replay's: start the jobs a worker's ranks asked for (worker, now)
        # the KV lands when it is reserved (see the docstring); destination-first reserves before the prefill
        self.instant = config is not None and not config.destination_first and not config.bandwidth_gbps \
            and not config.latency_ns
        # with a link, a destination_missing handoff whose prompt the decode rank holds whole moves nothing either
        self.may_move_nothing = config is not None and not config.destination_first \
            and config.timing_mode == "destination_missing" and not config.transfer_ns(0)
        self.next_seq = next_seq  # the replay's counter (orders landed handoffs on a decode rank)
        self.activating: dict[int, list] = {}  # decode worker index -> landed during its pass, activated at its end

    @property
    def first_role(self) -> str:
        if self.config is None:
            return "aggregated"
        return "decode" if self.config.destination_first else "prefill"

    def stop_after(self, spec) -> int:
        """Tokens a request samples where it is placed first: 1 on a prefill rank."""
        return 1 if self.first_role == "prefill" else spec.output_len

    def placed(self, request, rank) -> None:
        """An arriving request was placed on `rank` of the first role."""
        if self.config is not None:
            handoff.placed(request, rank, self.config.destination_first)

    def prefilled(self, source, request, now: int) -> None:
        """A prefill finished on `source`, which holds its blocks until the KV has gone to the decode rank that
        reserved it, or to the next one."""
        handoff.hold_source(source, request, now)
        if self.config.destination_first:
            handoff.to_decode(request, request.pd.decode_rank, self.next_seq())  # skipped while the KV travels
            self.start_transfer(None, handoff.HandoffTransfer(request), now)
            return
        rank = self.router.place("decode", now, request.spec.dp_rank, request.spec.worker_idx)
        handoff.to_decode(request, rank, self.next_seq())
        if not self._busy(rank.worker, now):  # (the mocker: a reservation command on an idle worker tries at once)
            handoff.add_try(rank)
            self._reserve_now(rank, now)

    def start_transfer(self, rank, job: handoff.HandoffTransfer, now: int, moved: dict | None = None) -> bool:
        request = job.request
        handoff.transferring(request)
        self.push(now + self.config.transfer_ns(request.pd.transfer_tokens), HANDOFF_DONE, request)
        return False

    def to_prefill(self, rank, job: handoff.PrefillMove, now: int, moved: dict | None = None) -> bool:
        """Destination-first: reserved on the decode rank, the request now goes to a prefill rank; True: a
        request moved to another worker."""
        spec = job.request.spec
        prefill = self.router.place("prefill", now, spec.prefill_dp_rank, spec.prefill_worker_idx)
        handoff.to_prefill(job.request, prefill)
        return True

    def landed(self, request, now: int) -> None:
        """Event handler: the KV arrived on the decode rank.  The decode worker activates the destination between
        its passes (at once when idle, else when its pass ends) and only then lets the source go (AISimulate's
        mocker: ReleaseSource follows ActivateDestination, each deferred while its worker is busy), source-first
        and destination-first (SGLang) alike (facts §53)."""
        decode = request.pd.decode_rank
        if self._busy(decode.worker, now):
            handoff.arrived(decode, request)
            self.activating.setdefault(decode.worker, []).append(request)
        else:
            handoff.landed(decode, request, now, self._source_free_at(request, now))
            handoff.add_try(decode)  # (an activation tries the reservations once more)
            self._reserve_now(decode, now)

    def worker_pass_ended(self, worker, now: int) -> None:
        """After-pass hook: a decode worker's pass ended; the destinations that landed during it are activated, and
        its ranks may try their pending reservations (handoff.reserve_pending)."""
        landed = self.activating.pop(worker.index, None) if self.activating else None
        for request in landed or ():
            handoff.activated(request, now, self._source_free_at(request, now))
            handoff.add_try(request.pd.decode_rank)  # (each activation tries the reservations once more)
        for rank in worker.ranks:
            if rank.role == "decode":
                handoff.add_try(rank)  # (the pass's completion tries them once)
                if self._lands_now(rank):  # (now, before its next pass: end_pass starts the transfers it asks for)
                    handoff.reserve_pending(rank, now)

    def _reserve_now(self, rank, now: int) -> None:
        """An instant handoff's trigger on an idle decode worker: its reservations are tried now and the KV of
        each that gets its blocks lands in this instant (HANDOFF_DONE now), before any worker's next pass."""
        if self.router.workers[rank.worker].batches is None and self._lands_now(rank):
            handoff.reserve_pending(rank, now)
            self.start_jobs(self.router.workers[rank.worker], now)

    def _lands_now(self, rank) -> bool:
        """Whether the rank's next reservation lands in the instant it is made: every one does without a link; with
        one, the first pending handoff's when it moves nothing (`holds_whole_prompt`)."""
        if self.instant:
            return True
        if not self.may_move_nothing:
            return False
        head = next((r for r in rank.waiting if r.pd is not None and r.pd.phase == "pending"), None)
        return head is not None and holds_whole_prompt(rank, head)

    def _source_free_at(self, request, now: int) -> int:
        """When the request's source can let go of its blocks: now, or when the pass its worker runs ends (the
        PASS_END of its passes, at which `pass_ended` applies the release)."""
        index = request.pd.source_rank.worker
        return self.router.workers[index].pass_ends[-1] if self._busy(index, now) else now

    def _busy(self, index: int, now: int) -> bool:
        worker = self.router.workers[index]
        return worker.batches is not None and bool(worker.pass_ends) and worker.pass_ends[0] > now

    @staticmethod
    def pass_ended(rank, now: int) -> None:
        """A prefill rank's pass ended: it lets go of the source blocks of handoffs activated during it."""
        for request in rank.releases:
            handoff.release_source(request, now)
        rank.releases = []


def holds_whole_prompt(rank, request) -> bool:
    """Whether `rank` (reusing a held prefix) caches every block of the request's whole-block prompt already: under a
    `destination_missing` handoff with no fixed cost (`may_move_nothing`) no token travels, so it lands at once."""
    if not rank.handoff_kv.reuse:
        return False
    prompt, size = request.spec.prompt_len, rank.block_size
    return not prompt % size and rank.pool.held_tokens(request.spec, size, prompt // size) == prompt
