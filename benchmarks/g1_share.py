"""Benchmark: how much of a run G1's pool takes, and how contiguous the block ids it handles are.

The conversation trace at equal G1 tokens (block_sizes.py's configurations),
each block size in its own process.  The process's CPU time is split into the
part spent in the vLLM pool's transitions (`RunPool.allocate`, `release`,
`register_run`, `touch`, `match`, `can_allocate`) and the rest; issue 20's
block-16 target (at most 1.5x block 512) needs both parts near block 512's.
With `--ids` the run counts instead (slower; no timing) how many runs of
consecutive block ids (step +1 or -1) the released, the queue-allocated and the
registered block lists hold, beside the runs of consecutive keys the
registrations hold: the quantity a pool of id ranges would pay per range.  It
counts the same for labels: what the lists would hold if each allocation were
given the first free labels that are contiguous (first fit over twice the
pool's ids, a label freed when its block's key is evicted), the renaming a pool
isomorphic to vLLM's could do, since no output shows a block id.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config

CACHE_TOKENS = 512_000
TIMED = ("allocate", "release", "register_run", "touch", "match", "can_allocate")


def id_runs(values: list[int]) -> int:
    """Maximal runs of `values` whose neighbours differ by one, all in the same direction."""
    if not values:
        return 0
    runs, step = 1, 0  # (step: the current run's direction, 0 while it has one value)
    for before, after in zip(values, values[1:]):
        diff = after - before
        if step and diff == step:
            continue
        if not step and diff in (1, -1):
            step = diff
            continue
        runs, step = runs + 1, 0
    return runs


class Labels:
    """Contiguous labels for each allocation (first fit over 2 x capacity, from a roving start), renaming ids."""

    def __init__(self, capacity: int):
        self.free = bytearray(2 * capacity)  # 0: a free label
        self.of: dict[int, int] = {}  # block id -> its label
        self.at = 0

    def allocate(self, blocks: list[int]) -> None:
        for block in blocks:  # (their old contents are gone: evicted, or never used)
            if block in self.of:
                self.free[self.of.pop(block)] = 0
        want, size = len(blocks), len(self.free)
        start = self.free.find(bytes(want), self.at)
        if start < 0:
            start = self.free.find(bytes(want))
        if start >= 0:
            labels = range(start, start + want)
        else:  # no free stretch that long: free labels one by one from the roving start
            labels, cursor = [], self.at
            while len(labels) < want:
                cursor = self.free.find(0, cursor)
                if cursor < 0:
                    cursor = self.free.find(0)
                labels.append(cursor)
                cursor = (cursor + 1) % size
        for block, label in zip(blocks, labels):
            self.of[block] = label
            self.free[label] = 1
        self.at = (labels[-1] + 1) % size if want else self.at

    def named(self, blocks: list[int]) -> list[int]:
        return [self.of[block] for block in blocks]


def timed(cls, name: str, spent: Counter) -> None:
    """Time `cls.name`, outer calls only (a transition calling another is counted once)."""
    method, busy = getattr(cls, name), [False]

    def wrapper(self, *args):
        if busy[0]:
            return method(self, *args)
        busy[0], start = True, time.process_time()
        try:
            return method(self, *args)
        finally:
            spent[name] += time.process_time() - start
            busy[0] = False
    setattr(cls, name, wrapper)


def counted(cls, seen: Counter) -> None:
    """Count blocks and runs of ids of released, queue-allocated and registered block lists."""
    release, allocate, register = cls.release, cls.allocate, cls.register_run
    labels: dict[int, Labels] = {}  # id(pool) -> its labels

    def on_release(self, blocks):
        seen["released blocks"] += len(blocks)
        seen["released id runs"] += id_runs(blocks)
        seen["released label runs"] += id_runs(labels[id(self)].named(blocks))
        release(self, blocks)

    def on_allocate(self, count):
        queued = self.created == self.capacity and count > 1  # (fresh ids are one range)
        out = allocate(self, count)
        labels.setdefault(id(self), Labels(self.capacity)).allocate(out)
        if queued:
            seen["queue-allocated blocks"] += len(out)
            seen["queue-allocated id runs"] += id_runs(out)
        return out

    def on_register(self, blocks, keys, start, stop, writer=None):
        seen["registered blocks"] += stop - start
        seen["registered id runs"] += id_runs(blocks[start:stop])
        seen["registered label runs"] += id_runs(labels[id(self)].named(blocks[start:stop]))
        seen["registered key runs"] += id_runs(keys[start:stop])
        register(self, blocks, keys, start, stop, writer)
    cls.release, cls.allocate, cls.register_run = on_release, on_allocate, on_register


def child(config: str, ids: bool) -> int:
    """One instrumented `kvreplay predict` in this process; prints its figures."""
    from kvreplay.cli import main as kvreplay
    from kvreplay.runtime.tiers.g1_runs import RunPool
    spent: Counter = Counter()
    if ids:
        counted(RunPool, spent)
    else:
        for name in TIMED:
            timed(RunPool, name, spent)
    with tempfile.TemporaryDirectory() as out:
        sys.argv = ["kvreplay", "predict", "-c", config, "--output-dir", out, "--overwrite", "--format", "json"]
        start = time.process_time()
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet
            try:
                kvreplay()
            except SystemExit:
                pass
            finally:
                sys.stdout = stdout
        total = time.process_time() - start
    if ids:
        print(", ".join(f"{name} {count:,}" for name, count in spent.items()))
    else:
        pool = sum(spent.values())
        print(f"CPU {total:.2f} s: G1 pool {pool:.2f} s ("
              + ", ".join(f"{name} {spent[name]:.2f}" for name in TIMED) + f"), the rest {total - pool:.2f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[16, 512])
    parser.add_argument("--ids", action="store_true", help="count runs of consecutive block ids instead of timing")
    parser.add_argument("--child", metavar="CONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.ids)
    with tempfile.TemporaryDirectory() as tmp:
        for block_size in args.block_sizes:
            config = Path(tmp) / f"block{block_size}.yaml"
            config.write_text(mooncake_trace_config(trace("conversation_trace.jsonl"), block_size=block_size,
                                                    g1_blocks=CACHE_TOKENS // block_size))
            print(f"block {block_size} ({CACHE_TOKENS // block_size:,} blocks): ", end="", flush=True)
            subprocess.run([sys.executable, __file__, "--child", str(config), *(["--ids"] if args.ids else [])],
                           check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
