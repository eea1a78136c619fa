"""Where prefix reuse resumes on a rank without state snapshots: after the last matching whole block.

`WholeBlocks` is also the interface a rank's resume policy offers the scheduler (its hooks are no-ops here);
`state_snapshots.StateSnapshots` implements it for a hybrid model's state cache.
"""
from __future__ import annotations


class WholeBlocks:
    """Reuse resumes after the last cached whole block (every model without a state cache)."""

    owed: dict = {}  # (never written: no request of such a rank owes state blocks or holds a snapshot's)
    sources: dict = {}
    fusable = True  # fused decode passes (shell/macro.py) need nothing of this policy
    # under speculation the last matched block is recomputed (its drafter needs the hidden states)
    drafts_drop_last_hit = True

    def resume(self, rank, request, hits: list[int]) -> tuple[list[int], int, list[int]]:
        """The blocks reused, the tokens they cover, and the snapshot's blocks the admission holds."""
        return hits, len(hits) * rank.block_size, []

    def hold(self, rank, request, blocks: list[int]) -> None:
        """The admission resumes from a snapshot made of `blocks`: it holds them through its first pass."""

    def allocated(self, rank, request) -> None:
        """The admission that `hold` saw has allocated its blocks."""

    def prepare(self, rank, request) -> int:
        """The request is scheduled for a pass: the state blocks it must allocate for it (`swap` takes them)."""
        return 0

    def swap(self, rank, request, fresh: list[int]) -> None:
        """The request's pass allocated `fresh` state blocks for the state it owed."""

    def chunk(self, rank, request, computed: int, new: int) -> int:
        """The tokens a pass computes for the request from `computed`, at most `new`."""
        return new

    def drafts_state(self, rank, known: int, tokens: int) -> int:
        """State blocks a decode's drafts need when its pass emits (from `known` tokens to at most `tokens`)."""
        return 0

    def drafts_read(self, request) -> None:
        """The request's pass, emitting, counted `drafts_state`'s blocks for it."""

    def reached(self, rank, request, computed: int, tokens: int) -> None:
        """A pass ended that took the request from `computed` to `tokens` computed tokens."""

    def released(self, rank, request) -> None:
        """The request lets go of its blocks on `rank` (the snapshot blocks it holds go back to the pool)."""

    def admitted(self, request, resumed: int) -> dict:
        """The request was admitted resuming at `resumed` tokens: what its admission record adds."""
        return {}

    def section(self, rank) -> dict | None:
        return None


WHOLE_BLOCKS = WholeBlocks()
