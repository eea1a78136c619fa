"""The replay's copy events: tier copies (G2 stores and loads, G3 reads and writes) over shared-bandwidth links,
and handoff jobs.

A mixin of `engine.Replay`: the scheduler leaves `Job`s on a rank; at the end
of a scheduling step (or when a copy lands and asks for another) the replay
starts them here; KVCR pulls start once the source's current pass ends, and a
landed pull is taken when the receiving worker is idle or ends its pass.  A restore whose G1 blocks
are still being copied out is parked until those copies land.  Each link
keeps one pending completion event, recomputed (and the old one made stale by
the link's version) whenever a transfer starts or ends.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..tiers import g3_offload, peer_fetch
from ..serving import handoff
from ..tiers.offload import blocked, restored, stored

if TYPE_CHECKING:
    from ..shell.replay import Worker
    from ..serving.scheduler import Rank

TRANSFER_START, TRANSFER_DONE = 1, 2  # event kinds (see engine.py for the order of all kinds)
# job kind -> (the rank's tier, that tier's link, the rank attribute naming its group on the link): G2 links are
# shared per rank, G3 links per worker (G3 runs one rank per worker)
LINKS = {"load": ("host", "h2d", "index"), "store": ("host", "d2h", "index"),
         "read": ("storage", "read", "worker"), "write": ("storage", "write", "worker")}
LANDED = {"load": restored, "store": stored, "read": g3_offload.read_done, "write": g3_offload.written}


class CopyEvents:
    def _start_jobs(self, worker: Worker, now: int) -> None:
        moved = {}
        for rank in worker.ranks:
            if not rank.jobs:
                continue
            for job in rank.jobs:
                if job.kind == "to_prefill":  # destination-first: reserved on the decode rank, now prefill
                    spec = job.request.spec
                    prefill = self.router.place("prefill", now, spec.prefill_dp_rank, spec.prefill_worker_idx)
                    handoff.move_to(job.request, prefill, 1)
                    job.request.prefill_rank, job.request.handoff = prefill, None
                    prefill.waiting.append(job.request)
                    self.handed_over = True
                    continue
                if job.kind == "handoff":
                    self._start_handoff_transfer(job.request, now)
                    continue
                rank.transfers_in_flight += 1
                if job.kind == "pull":  # starts once this instant's passes are known (see _start_pulls)
                    peer_fetch.asked(job, now)
                    continue
                if job.kind == "load" and rank.pool.copying.intersection(job.blocks):
                    self.parked.append(job)  # its G1 blocks are still being copied out: it waits for them
                    continue
                self._start_copy(rank, job, now, moved)
            rank.jobs = []
        self._schedule(moved)

    def _start_copy(self, rank: Rank, job, now: int, moved: dict) -> None:
        """Start `job`'s transfer: after the link's latency, or now (then `moved` gets its link, last)."""
        tier, link, group = LINKS[job.kind]
        tier = getattr(rank, tier)
        link = getattr(tier, link)
        transfer = link.new(getattr(rank, group), len(job.keys) * tier.block_bytes, job)
        if link.latency_ns:
            self.push(now + link.latency_ns, TRANSFER_START, (link, transfer))
        else:
            link.start_moving(transfer, now)
            moved.pop(id(link), None)  # (links compare by value: keyed by identity)
            moved[id(link)] = link

    def _schedule(self, moved: dict) -> None:
        """Schedule the next completion of each link whose transfers changed, in the order they last did (one
        event per link however many transfers started at this instant)."""
        for link in moved.values():
            self._schedule_next_done(link)

    def _unpark(self, now: int) -> None:
        """Start the restores whose G1 blocks are no longer being copied out."""
        ready = [job for job in self.parked if not job.rank.pool.copying.intersection(job.blocks)]
        if ready:
            self.parked = [job for job in self.parked if job not in ready]
            moved = {}
            for job in ready:
                self._start_copy(job.rank, job, now, moved)
            self._schedule(moved)

    def _transfer_moves(self, link, transfer, now: int) -> None:
        link.start_moving(transfer, now)
        self._schedule_next_done(link)

    def _schedule_next_done(self, link) -> None:
        link.version += 1
        upcoming = link.next_done()
        if upcoming is not None:
            self.push(upcoming[0], TRANSFER_DONE, (link, link.version))

    def _transfer_done(self, link, version: int, now: int) -> None:
        if version != link.version:
            return  # rates changed since this completion time was computed
        _, transfer = link.next_done()
        link.finish(transfer, now)
        job = transfer.payload
        rank = job.rank
        rank.transfers_in_flight -= 1
        worker = self.workers[rank.worker]
        if job.kind == "pull":
            job.landed_ns = now
            if worker.batches is not None and not worker.blocked:  # taken when the worker's pass ends
                rank.kvcr.landed.setdefault(rank.index, []).append(job)
            else:
                peer_fetch.take(job, now)
        else:
            LANDED[job.kind](rank, job)
        if job.kind == "store" and self.parked:
            self._unpark(now)
        self._drain(rank, now)
        if rank.jobs:  # a landed store starts its G3 write
            self._start_jobs(worker, now)
        if worker.blocked and not any(blocked(rank) for rank in worker.ranks):
            self._run_pass(worker, worker.batches, now)
        self._schedule_next_done(link)

    def _start_pulls(self, now: int) -> None:
        """Pulls asked for at this instant start when their source's current pass ends (one that started at
        this instant included, so this runs after every pass start of the instant)."""
        fetch = self.kvcr
        for pull in fetch.asked:
            pull.start_ns = peer_fetch.start_time(self.workers[pull.source.worker], now)
            link = fetch.link(pull.source)
            transfer = link.new(pull.source.index, len(pull.keys) * fetch.block_bytes, pull)
            self.push(pull.start_ns + link.latency_ns, TRANSFER_START, (link, transfer))
        fetch.asked = []

    def _take_landed_pulls(self, worker: Worker, now: int) -> None:
        landed = self.kvcr.landed
        for rank in worker.ranks:
            for pull in landed.pop(rank.index, ()):
                peer_fetch.take(pull, now)
