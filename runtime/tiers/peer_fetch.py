"""KVCR peer fetch: a rank pulls the part of a hinted prompt it lacks from another rank's private G2.

- Hints come from the router (placement.py): the request's `hint` names the
  source rank.
- Lookup (after G1 and the rank's own G2): the blocks in neither are looked up
  in the source's G2 in prompt order, stopping at the first one it lacks.  The
  rank reserves G2 slots for them in one reservation, which may not evict a
  block of this prompt that G1 lacks (it stops at the first block without
  room), and pins them in the source's G2 until the pull is taken.  The
  request waits (it is not looked up again) until then.
- Timing: a pull starts when the source's worker ends its current pass (one
  starting at this instant counts), waits the latency, then moves
  `G2 block bytes x tensor` per block over the source rank's link, shared
  equally by its concurrent pulls.  A landed pull is taken at once if the
  receiving worker is idle, else when its current pass ends; only then are the
  blocks usable in G2 (as blocks filled from "peer") and counted.
- Other requests that need the same blocks hit them in G2 while they are
  `storing` and wait, as for any store in flight: one pull serves them all.
- Pulls that keep evicting each other fall back to recompute after
  `copy_jobs.BYPASS_ROUNDS` rounds (`bypassed`).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from ..links.transfers import Link
from .copy_jobs import filled, out_of_rounds


class Pull:
    """One pull of `keys` from `source`'s G2 into `rank`'s, asked for by `request` (a copy job, see jobs.py)."""

    __slots__ = ("rank", "request", "keys", "source", "partial", "submit_ns", "start_ns", "landed_ns", "landed")
    way, blocks = "pull", ()  # (what copies.Copies asks of a landed copy)

    def __init__(self, rank, request, keys: list, source, partial: bool):
        self.rank, self.request, self.keys = rank, request, keys
        self.landed = rank.chain.kvcr.pull_landed  # (rank, pull, now), as a tier copy's
        self.source, self.partial = source, partial
        self.submit_ns = self.start_ns = self.landed_ns = 0


@dataclass
class PeerFetch:
    """KVCR of one role: its links (one per source rank), pulls between steps, and the `kvcr` counters."""

    latency_ns: int
    bandwidth: float  # GB/s per source rank, 0 = unlimited
    block_bytes: int  # what one pulled block moves: G2 block bytes x tensor
    links: dict = field(default_factory=dict)  # source rank index -> Link
    asked: list = field(default_factory=list)  # pulls asked for at this instant, not started yet
    landed: dict = field(default_factory=dict)  # rank index -> pulls landed during its worker's pass
    unloaded: dict = field(default_factory=dict)  # rank index -> {key: pulled copies not loaded into G1 yet}
    busy_workers: dict = field(default_factory=dict)  # worker index -> pulls from or into it not taken yet
    success: int = 0
    partial: int = 0
    blocks: int = 0
    bytes: int = 0
    deliver_ns: int = 0
    source_wait_ns: int = 0
    loaded_blocks: int = 0
    bypassed: int = 0
    workers: list = field(default_factory=list)  # the replay's (set by `attach`)
    copies: object = None  # the replay's links.copies.Copies (set by `attach`)

    def link(self, source) -> Link:
        link = self.links.get(source.index)
        if link is None:
            link = self.links[source.index] = Link({source.index: self.bandwidth}, None, self.latency_ns)
        return link

    # ---------------------------------------------------------------- pulls in time
    def ask(self, pull: Pull, now: int) -> None:
        """A pull asked for at this instant: it starts once this instant's passes are known (`start_asked`)."""
        pull.submit_ns = now
        self.asked.append(pull)
        for worker in {pull.rank.worker, pull.source.worker}:
            self.busy_workers[worker] = self.busy_workers.get(worker, 0) + 1

    def start_asked(self, now: int, workers: list, copies) -> None:
        """Pulls asked for at this instant start when their source's current pass ends (one that started at
        this instant included, so this runs after every pass start of the instant)."""
        if not self.asked:
            return
        for pull in self.asked:
            pull.start_ns = start_time(workers[pull.source.worker], now)
            link = self.link(pull.source)
            copies.start_transfer(link, pull.source.index, len(pull.keys) * self.block_bytes, pull, pull.start_ns,
                                  None)
        self.asked = []

    def arrived(self, pull: Pull, now: int, worker) -> None:
        """A pull's bytes landed: taken at once if the receiving worker is idle, else when its pass ends."""
        pull.landed_ns = now
        if worker.batches is not None and not worker.blocked:
            self.landed.setdefault(pull.rank.index, []).append(pull)
        else:
            take(pull, now)

    def take_landed(self, worker, now: int) -> None:
        """The worker's pass ended: its ranks take the pulls that landed meanwhile."""
        landed = self.landed
        for rank in worker.ranks:
            for pull in landed.pop(rank.index, ()):
                take(pull, now)

    def attach(self, replay) -> None:
        """Join the replay: start the pulls ranks ask for, take landed ones at pass ends, keep a worker with
        pulls left from being removed."""
        self.workers, self.copies = replay.workers, replay.copies
        replay.starters[Pull] = self._start
        replay.after_pass.append(self.take_landed)
        replay.after_instant.insert(0, self._start_asked)  # (before draining: a pull keeps its source)
        replay.draining.busy += (self.busy,)

    def _start(self, rank, pull: Pull, now: int, moved: dict) -> bool:
        rank.transfers_in_flight += 1
        self.ask(pull, now)
        return False

    def pull_landed(self, rank, pull: Pull, now: int) -> None:
        self.arrived(pull, now, self.workers[rank.worker])

    def _start_asked(self, now: int) -> None:
        self.start_asked(now, self.workers, self.copies)

    def busy(self, worker) -> bool:
        """Does a pull from or into `worker` wait to be taken (it cannot be removed yet)?"""
        return self.busy_workers.get(worker.index, 0) > 0

    def section(self) -> dict:
        out = {"pulls": {"success": self.success, "partial": self.partial}, "blocks": self.blocks,
               "bytes": self.bytes, "remote_deliver_ms": self.deliver_ns / 1e6,
               "source_wait_ms": self.source_wait_ns / 1e6, "loaded_blocks": self.loaded_blocks,
               "unused_blocks": sum(sum(keys.values()) for keys in self.unloaded.values())}
        if self.bypassed:
            out["bypassed"] = self.bypassed
        return out


# ---------------------------------------------------------------------------------------------- lookups

def pull(rank, request, start: int, limit: int) -> bool:
    """Ask for the blocks of keys[start:limit] the rank lacks from the hinted source; True: the request waits."""
    source = request.tier.hint
    if source is None:
        return False
    keys, cached, host = request.keys, rank.pool.cached, rank.chain.top
    ready = source.chain.top.ready
    wanted, lacked = [], False
    for key in keys[start:limit]:
        if key in cached or host.holds(key):
            continue
        if not ready(key):
            lacked = True
            break
        wanted.append(key)
    if not wanted:
        return False
    if out_of_rounds(rank.chain):
        rank.chain.kvcr.bypassed += 1
        request.tier.bypassed = True
        return False
    guard = [key for key in keys[:limit] if key not in cached and host.holds(key)]
    if guard:  # the prompt's blocks G1 lacks stay: the reservation stops where it would need them
        host.pin(guard)
    slots = host.reserve(wanted, count_dropped=False)
    if guard:
        host.unpin(guard, newest=False)
    if not slots:
        return False
    source.chain.top.pin(slots)
    request.tier.loading = True
    rank.jobs.append(Pull(rank, request, slots, source, lacked or len(slots) < len(wanted)))
    return True


def loading(rank, keys: list) -> None:
    """A G2 -> G1 load starts: pulled blocks among `keys` count as loaded (once per pulled copy)."""
    unloaded = rank.chain.kvcr.unloaded.get(rank.index)
    if not unloaded:
        return
    for key in keys:
        copies = unloaded.get(key)
        if copies:
            rank.chain.kvcr.loaded_blocks += 1
            if copies == 1:
                del unloaded[key]
            else:
                unloaded[key] = copies - 1


# ---------------------------------------------------------------------------------------------- timing

def start_time(worker, now: int) -> int:
    """When `worker`'s current pass ends (now if it runs none)."""
    if worker.batches is None or worker.blocked:
        return now
    ends = worker.pass_ends
    position = bisect_right(ends, now)
    return ends[position] if position < len(ends) else now


def take(pull: Pull, now: int) -> None:
    """The rank takes a landed pull: the blocks become usable in its G2 and the source's are released."""
    rank, fetch = pull.rank, pull.rank.chain.kvcr
    filled(rank.chain, pull.request, pull.keys, "peer")
    pull.source.chain.top.unpin(pull.keys, newest=False)
    if pull.partial:
        fetch.partial += 1
    else:
        fetch.success += 1
    fetch.blocks += len(pull.keys)
    fetch.bytes += len(pull.keys) * fetch.block_bytes
    fetch.deliver_ns += pull.landed_ns - pull.submit_ns
    fetch.source_wait_ns += pull.start_ns - pull.submit_ns
    unloaded = fetch.unloaded.setdefault(rank.index, {})
    for key in pull.keys:
        unloaded[key] = unloaded.get(key, 0) + 1
    for worker in {rank.worker, pull.source.worker}:
        fetch.busy_workers[worker] -= 1
