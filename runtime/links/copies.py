"""Copies in flight over shared-bandwidth links: when each starts moving bytes, when each lands.

A tier asks for a copy (`copy_jobs.Copy`, or a KVCR pull) by leaving it on
its rank; the replay starts it here after the latency of its link.  Each link
keeps one pending completion event, recomputed (and the old one made stale by
the link's version) whenever a transfer starts or ends.  A load into G1 whose
blocks are still being copied out waits (parked) until those copies land.
"""
from __future__ import annotations

from ..shell.events import COPY_DONE, COPY_MOVING


class Copies:
    def __init__(self, push, then):
        self.push = push  # the replay's queue
        self.then = then  # (rank, now): the replay drains the rank's events, starts its new copies, unblocks it
        self.parked: list = []  # loads into G1 waiting for their G1 blocks' copies out to land

    def ask(self, rank, copy, now: int, moved: dict) -> bool:
        """A rank asked for `copy`: it is in flight from now (False: it moves no request to another worker)."""
        rank.transfers_in_flight += 1
        self.start(rank, copy, now, moved)
        return False

    def start(self, rank, copy, now: int, moved: dict) -> None:
        """Start `copy`: parked if its G1 blocks are still being copied out, else after its link's latency (or
        now: then `moved` gets its link, last)."""
        if copy.into_g1 and rank.pool.copying.intersection(copy.blocks):
            self.parked.append(copy)
            return
        tier = copy.tier
        link = getattr(tier, copy.way)
        transfer = link.new(getattr(rank, tier.group_by), len(copy.keys) * tier.block_bytes, copy)
        if link.latency_ns:
            self.push(now + link.latency_ns, COPY_MOVING, (link, transfer))
        else:
            link.start_moving(transfer, now)
            moved.pop(id(link), None)  # (links compare by value: keyed by identity)
            moved[id(link)] = link

    def start_transfer(self, link, group, size: int, payload, start_ns: int, moved: dict | None) -> None:
        transfer = link.new(group, size, payload)
        if link.latency_ns or moved is None:
            self.push(start_ns + link.latency_ns, COPY_MOVING, (link, transfer))
        else:
            link.start_moving(transfer, start_ns)
            moved.pop(id(link), None)  # (links compare by value: keyed by identity)
            moved[id(link)] = link

    def schedule(self, moved: dict) -> None:
        """Schedule the next completion of each link whose transfers changed, in the order they last did (one
        event per link however many transfers started at this instant)."""
        for link in moved.values():
            self._schedule_next_done(link)

    def unpark(self, now: int) -> None:
        """Start the loads whose G1 blocks are no longer being copied out."""
        ready = [copy for copy in self.parked if not copy.rank.pool.copying.intersection(copy.blocks)]
        if ready:
            self.parked = [copy for copy in self.parked if copy not in ready]
            moved = {}
            for copy in ready:
                self.start(copy.rank, copy, now, moved)
            self.schedule(moved)

    # ---------------------------------------------------------------- event handlers (see events.py)
    def moving(self, payload, now: int) -> None:
        link, transfer = payload
        link.start_moving(transfer, now)
        self._schedule_next_done(link)

    def done(self, payload, now: int) -> None:
        link, version = payload
        if version != link.version:
            return  # rates changed since this completion time was computed
        _, transfer = link.next_done()
        link.finish(transfer, now)
        copy = transfer.payload
        copy.rank.transfers_in_flight -= 1
        copy.landed(copy.rank, copy, now)  # the owner of what landed applies it
        if self.parked and copy.way == "write" and copy.blocks:  # a store out of G1 landed: loads may start
            self.unpark(now)
        self.then(copy.rank, now)
        self._schedule_next_done(link)

    def _schedule_next_done(self, link) -> None:
        link.version += 1
        upcoming = link.next_done()
        if upcoming is not None:
            self.push(upcoming[0], COPY_DONE, (link, link.version))
