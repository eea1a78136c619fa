"""How the tiers of a chain work together: background writes down the chain, reads up into the first tier.

- Blocks that land in a tier are also written to the next one in the
  background when that one's store policy is `write_back`: one write copy per
  landing, for the blocks the next tier does not hold yet.
- A lookup that finds the prompt going on in a deeper tier past the first
  tier's hits reads those blocks into the first tier (promotion).  They take
  slots there at once, in flight until the read lands (so another request
  hitting them waits, as for any store in flight); the request waits and is
  looked up again, then loads into G1 like any hit of the first tier.  A
  deeper tier alone never makes a block ready on the GPU.
- A read may evict blocks an earlier read brought in (a prefix longer than the
  first tier holds keeps evicting itself).  After `copy_jobs.BYPASS_ROUNDS`
  reads land on a rank without a load into G1 starting there, the next request
  that would read recomputes instead, and the deeper tier's `bypassed` counts it.
"""
from __future__ import annotations

from .copy_jobs import Copy, filled, out_of_rounds


class ReadUp:
    """A fill source of a rank's first tier: reads from the deeper tier `tier` (see the module docstring)."""

    __slots__ = ("tier",)

    def __init__(self, tier):
        self.tier = tier

    def __call__(self, rank, request, start: int, limit: int) -> bool:
        """Start a read of what follows keys[:start]; False if there is none (or the rank bypasses the tier)."""
        tier, chain = self.tier, rank.chain
        found, _ = tier.lookup(request.keys, start, limit)
        if not found:
            return False
        if out_of_rounds(chain):
            tier.bypassed += 1
            request.tier.bypassed = True
            return False
        slots = chain.top.reserve(request.keys[start:start + found], count_dropped=False)
        if not slots:
            return False  # the first tier has no block it could give up: nothing to read into
        tier.start_read(slots, rank.worker)
        request.tier.loading = True
        rank.jobs.append(Copy(tier, "read", read_landed, rank, request, slots))
        return True


def read_landed(rank, copy: Copy, now: int) -> None:
    """A read landed: its blocks are ready in the first tier and the request is looked up again."""
    copy.tier.read_done(copy.keys)
    filled(rank.chain, copy.request, copy.keys, copy.tier.label)


def write_down(rank, tier, keys: list) -> None:
    """Blocks that just landed in `tier`: write those the next tier lacks, in the background."""
    below = rank.chain.below(tier)
    if below is None:
        return
    admitted = below.reserve(keys, writer=rank.worker)
    if admitted:
        rank.jobs.append(Copy(below, "write", written, rank, None, admitted))


def written(rank, copy: Copy, now: int) -> None:
    copy.tier.landed(copy.keys)
    write_down(rank, copy.tier, copy.keys)
