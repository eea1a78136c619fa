"""opal's INFO log lines about APC, formatted from the pool's and the monitor's records (nothing is written here).

The numbers come from `EvictStats` (`ApcPool.evict_log`, one per eviction
batch, inline or proactive) and `apc_monitor.CheckRecord` (`ApcMonitor.log`, one
per check that evicted): `collect` turns both on before a run, `eviction_lines`
gives every line after it, with its instant.  Whoever writes simulation.log adds
opal's ``LEVEL [  12.3 s](file:line): `` prefix.  Percentages and megabytes print with
one decimal, as opal's do; a megabyte is 2**20 bytes (opal: 292 blocks of
2560 KB = 730.0 MB).
"""
from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

# what opal's migration line calls the first KVC tier: CPUMemory as measured, the others by their own name
# ("nowhere" without a tier)
DESTINATIONS = {"CPUMemory": "CPU DRAM"}


class EvictStats(NamedTuple):
    """One eviction batch (ApcPool.evict_log), for `format_lru_evict`; counts are after the batch."""

    time_ns: int
    proactive: bool  # the monitor's (else inline, for an allocation)
    requested: int
    evicted: int
    scanned: int  # live queue entries looked at: the victims, plus the protected one it stopped at
    ttl_skipped: int
    queue: int  # idle blocks left in the eviction queue
    pinned: int
    resident: int  # pinned + idle


def _percent(value: Fraction) -> str:
    return f"{float(value * 100):.1f}%"


def _seconds(ns: int) -> str:
    """opal prints its seconds knobs as written: 0, 20, 0.5."""
    return repr(ns / 10 ** 9) if ns % 10 ** 9 else str(ns // 10 ** 9)


def format_apc_enabled(block_size: int, kvc_chunk: int, ttl_ns: int) -> str:
    """The startup line of a worker with APC on."""
    return (f"GPU APC enabled: policy=LRUPolicy, block_size={block_size}, kvc_chunk={kvc_chunk}, "
            f"blocks_per_victim=1, ttl={_seconds(ttl_ns)}")


def format_lru_evict(stats) -> str:
    """One eviction batch (`EvictStats`): what was asked, done and looked at, and the queue after it."""
    return (f"[LRU.evict] requested={stats.requested} evicted={stats.evicted} | scanned={stats.scanned} "
            f"ttl_skipped={stats.ttl_skipped} | eviction_queue={stats.queue} pinned={stats.pinned} "
            f"resident={stats.resident} (pinned NOT scanned)")


def format_proactive(record, block_bytes: int, first_tier: str | None) -> str:
    """One check that evicted (`CheckRecord`); `block_bytes` = block_size x KV bytes per token, `first_tier` the
    first of `kvc_tiers` (None: no tier, the blocks are dropped)."""
    destination = DESTINATIONS.get(first_tier, first_tier) if first_tier is not None else "nowhere"
    megabytes = record.evicted * block_bytes / 2 ** 20
    return (f"[APC] [Evict] Memory util={_percent(record.util)} (of non-active GPU) > eviction threshold="
            f"{_percent(Fraction(record.threshold))}. Proactively migrated {record.evicted} block(s) "
            f"({megabytes:.1f} MB) to {destination} [free={record.free} resident={record.resident}/"
            f"{record.capacity}]")


def collect(replay) -> None:
    """Before `run`: make the APC pools and the monitor keep the records the lines below need."""
    for rank in replay.apc.ranks:
        rank.pool.evict_log = []
    replay.apc.log = []


def eviction_lines(replay, block_bytes: int, first_tier: str | None) -> list[tuple[int, int, str]]:
    """After `run` (with `collect` before it): (time ns, rank index, message) of every `[LRU.evict]` and
    `[APC] [Evict]` line, in time order, a rank's lines in the order they happened (a check's `[LRU.evict]` line
    before its `[APC] [Evict]` line, as opal prints them); ranks at one instant in rank order."""
    checks: dict[int, list] = {}
    for record in replay.apc.log:
        checks.setdefault(record.rank, []).append(record)
    out = []
    for rank in replay.apc.ranks:
        own = iter(checks.get(rank.index, ()))
        for stats in rank.pool.evict_log:
            out.append((stats.time_ns, rank.index, format_lru_evict(stats)))
            if stats.proactive:  # every check that asked for victims made one batch and one record
                out.append((stats.time_ns, rank.index, format_proactive(next(own), block_bytes, first_tier)))
    out.sort(key=lambda line: (line[0], line[1]))  # (stable: a rank's own order is kept)
    return out
