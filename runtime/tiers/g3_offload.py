"""How a rank's G2 pool works with the G3 store behind it: background writes, reads into G2, the bypass.

- Blocks that land in G2 from the GPU are also written to G3 in the background:
  one write job per G2 store, for the blocks G3 does not hold yet.
- A lookup that finds the prompt going on in G3 past G2's hits reads those
  blocks into G2.  They take G2 slots at once, `storing` until the read lands
  (so another request hitting them waits, as for any store in flight); the
  request waits and is looked up again, then loads G2 -> G1 like any G2 hit.
  G3 alone never makes a block ready on the GPU.
- A read may evict blocks an earlier read brought in (a prefix longer than G2
  holds keeps evicting itself).  After `jobs.BYPASS_ROUNDS` reads land on a rank
  without a G2 -> G1 load starting there, the next request that would read
  recomputes instead, and `bypassed_restores` counts it.
"""
from __future__ import annotations

from .jobs import Job, filled, out_of_rounds
from ..serving.requests import Request


def read(rank, request: Request, start: int, limit: int) -> bool:
    """Start a G3 -> G2 read of what follows keys[:start]; False if there is none (or the rank bypasses G3)."""
    storage = rank.storage
    found = storage.lookup(request.keys, start, limit)
    if not found:
        return False
    if out_of_rounds(rank):
        storage.bypassed_restores += 1
        return False
    slots = rank.host.reserve(request.keys[start:start + found], count_dropped=False)
    if not slots:
        return False  # G2 has no block it could give up: nothing to read into
    storage.start_read(slots, rank.worker)
    request.loading = True
    rank.jobs.append(Job("read", rank, request, slots, []))
    return True


def read_done(rank, job) -> None:
    """A read landed: its blocks are ready in G2 and the request is looked up again."""
    rank.storage.read_done(job.keys)
    filled(rank, job.request, job.keys, "g3")


def write_back(rank, keys: list) -> None:
    """Blocks a G2 store just landed: write those G3 lacks, in the background."""
    fresh = rank.storage.reserve(keys, rank.worker)
    if fresh:
        rank.jobs.append(Job("write", rank, None, fresh, []))


def written(rank, job) -> None:
    rank.storage.written(job.keys)

