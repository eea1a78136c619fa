"""G3: a storage pool behind G2, one per worker (`worker_local`) or one for all workers (`cluster_shared`).

Blocks that land in G2 are also written here in the background; a restore
reads a prefix back into G2 (and from there into G1 like any G2 hit): G3 alone
never makes a block ready on the GPU.  A block is `writing` until its write
lands; blocks being written or read are never evicted, the rest go least
recently used first (a landing write and a lookup hit are uses), so eviction
scans only written blocks.  With `cluster_shared` a block is stored once and
any worker reads it, including blocks written by a worker that has since been
removed; `cross_worker_read_blocks` counts reads by another worker than the
writer.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..links.transfers import Link

READY, WRITING = 0, 1


@dataclass
class StoragePool:
    name: str
    scope: str
    capacity: int
    block_bytes: int
    read: Link
    write: Link
    ready: OrderedDict = field(default_factory=OrderedDict)  # written keys, least recently used first
    writing: dict = field(default_factory=dict)  # keys whose write is in flight (they hold room, never evicted)
    writer: dict = field(default_factory=dict)  # key -> worker that wrote it
    reading: dict = field(default_factory=dict)  # key -> reads in flight
    lookup_hits: int = 0
    read_jobs: int = 0
    write_jobs: int = 0
    read_blocks: int = 0
    write_blocks: int = 0
    evictions: int = 0
    dropped_writes: int = 0
    cross_worker_read_blocks: int = 0
    bypassed_restores: int = 0

    @property
    def entries(self) -> dict:
        """key -> READY | WRITING of every block held (a snapshot, eviction order first)."""
        return {**dict.fromkeys(self.ready, READY), **dict.fromkeys(self.writing, WRITING)}

    def lookup(self, keys: list, start: int, limit: int) -> int:
        """Consecutive ready blocks from `start`; hits become the most recently used."""
        ready = self.ready
        found = 0
        for index in range(start, limit):
            if keys[index] not in ready:
                break
            found += 1
        for key in reversed(keys[start:start + found]):
            ready.move_to_end(key)
        self.lookup_hits += found
        return found

    def reserve(self, keys: list, worker: int) -> list:
        """Admit keys for a background write, evicting idle blocks; returns those that got room."""
        ready, writing = self.ready, self.writing
        new = [k for k in dict.fromkeys(keys) if k not in ready and k not in writing]
        room = self.capacity - len(ready) - len(writing)
        if len(new) > room:
            room += self._evict(len(new) - room)
        if len(new) > room:
            self.dropped_writes += len(new) - max(room, 0)
            new = new[:max(room, 0)]
        for key in new:
            writing[key] = None
            self.writer[key] = worker
        if new:
            self.write_jobs += 1
            self.write_blocks += len(new)
        return new

    def _evict(self, wanted: int) -> int:
        """Evict up to `wanted` least recently used blocks no read is moving."""
        reading, victims = self.reading, []
        for key in self.ready:
            if key not in reading:
                victims.append(key)
                if len(victims) == wanted:
                    break
        for key in victims:
            del self.ready[key]
            self.writer.pop(key, None)
        self.evictions += len(victims)
        return len(victims)

    def written(self, keys: list) -> None:
        """Writes landed: the blocks are ready, the most recently used (a landing write is their latest use)."""
        for key in keys:
            del self.writing[key]
        self.ready.update(dict.fromkeys(keys))

    def start_read(self, keys: list, worker: int) -> None:
        self.read_jobs += 1
        self.read_blocks += len(keys)
        for key in keys:
            self.reading[key] = self.reading.get(key, 0) + 1
            if self.writer.get(key, worker) != worker:
                self.cross_worker_read_blocks += 1

    def read_done(self, keys: list) -> None:
        for key in keys:
            left = self.reading[key] - 1
            if left:
                self.reading[key] = left
            else:
                del self.reading[key]

    def counters(self) -> dict:
        """What the `g3_offload` summary adds up over stores."""
        return {"capacity_blocks": self.capacity, "resident_blocks": len(self.ready) + len(self.writing),
                "lookup_hits": self.lookup_hits, "read_jobs": self.read_jobs, "read_blocks": self.read_blocks,
                "read_bytes": self.read.bytes_moved, "write_jobs": self.write_jobs, "write_blocks": self.write_blocks,
                "write_bytes": self.write.bytes_moved, "evictions": self.evictions,
                "dropped_writes": self.dropped_writes, "cross_worker_read_blocks": self.cross_worker_read_blocks,
                "read_bandwidth_wait_ms": self.read.waited_ns / 1e6,
                "write_bandwidth_wait_ms": self.write.waited_ns / 1e6, "bypassed_restores": self.bypassed_restores}


def section(pools: list[StoragePool]) -> dict:
    """The summary's `g3_offload` section: counters added up over the stores (one per worker or one shared)."""
    total: dict = {}
    for pool in pools:
        for key, value in pool.counters().items():
            total[key] = total.get(key, 0) + value
    if not total["bypassed_restores"]:
        del total["bypassed_restores"]  # (reported only when it happened)
    return {"scope": pools[0].scope, "stores": len(pools), **total}
