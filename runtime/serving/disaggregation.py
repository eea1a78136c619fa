"""The replay's side of disaggregated prefill/decode: where a request goes first, and its KV's trip between roles.

Source-first (vLLM, TensorRT-LLM): a request is placed on a prefill rank; when
its prefill ends a decode rank is chosen and reserves its blocks at its next
pass, then the KV travels.  Destination-first (SGLang): the decode rank is
chosen on arrival and reserves first (`PrefillMove`), then the request goes to
a prefill rank.  The rank-level steps are in handoff.py.
"""
from __future__ import annotations

from ..shell.events import HANDOFF_DONE
from . import handoff


class Disaggregation:
    def __init__(self, config, router, push, next_seq):
        self.config = config  # handoff.Handoff, None when the deployment is aggregated
        self.router = router
        self.push = push
        self.next_seq = next_seq  # the replay's counter (orders landed handoffs on a decode rank)

    @property
    def first_role(self) -> str:
        if self.config is None:
            return "aggregated"
        return "decode" if self.config.destination_first else "prefill"

    def placed(self, request, rank) -> None:
        """An arriving request was placed on `rank` of the first role."""
        if self.config is None:
            return
        if self.config.destination_first:  # the decode rank reserves before the prefill starts
            request.handoff, request.decode_rank = "reserve", rank
        else:
            request.stop_after, request.prefill_rank = 1, rank

    def prefilled(self, request, now: int) -> None:
        """A prefill finished: the KV goes to the decode rank that reserved it, or to the next one."""
        if self.config.destination_first:
            handoff.move_to(request, request.decode_rank, request.spec.output_len)
            self._join(request.decode_rank, request)  # skipped while the KV travels
            self.start_transfer(None, handoff.HandoffTransfer(request), now)
            return
        rank = self.router.place("decode", now, request.spec.dp_rank, request.spec.worker_idx)
        handoff.move_to(request, rank, request.spec.output_len)
        request.decode_rank, request.handoff = rank, "pending"
        self._join(rank, request)

    def _join(self, rank, request) -> None:
        """A handed-off request joins a decode rank's queue; its place there orders landed handoffs."""
        request.joined = self.next_seq()
        rank.waiting.append(request)

    def start_transfer(self, rank, job: handoff.HandoffTransfer, now: int, moved: dict | None = None) -> bool:
        request = job.request
        request.handoff, request.loading = "transferring", True
        self.push(now + self.config.transfer_ns(request.transfer_tokens), HANDOFF_DONE, request)
        return False

    def to_prefill(self, rank, job: handoff.PrefillMove, now: int, moved: dict | None = None) -> bool:
        """Destination-first: reserved on the decode rank, the request now goes to a prefill rank; True: a
        request moved to another worker."""
        request, spec = job.request, job.request.spec
        prefill = self.router.place("prefill", now, spec.prefill_dp_rank, spec.prefill_worker_idx)
        handoff.move_to(request, prefill, 1)
        request.prefill_rank, request.handoff = prefill, None
        prefill.waiting.append(request)
        return True

    def landed(self, request, now: int) -> None:
        """Event handler: the KV arrived on the decode rank."""
        handoff.landed(request.decode_rank, request, now)
