"""Benchmark: a generated Mooncake-format trace of N requests (default 1,000,000), replayed end to end.

The trace tiles the vendored conversation trace: copy k keeps the shared first
block id (a system prompt every session reuses) and shifts every other hash id
past the previous copy's, and starts when the previous copy ends, so each copy
has the conversation trace's multi-turn prefixes and load.  One aggregated vLLM
worker, block 64, 8,000 G1 blocks, fixed timing; with and without
`--capture-per-request`.  Issue 20's target: under 2 minutes and under 2 GB
peak RSS each.  Prints wall time, peak RSS and simulated requests per second.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config


def write_tiled_trace(path: Path, requests: int) -> None:
    rows = [orjson.loads(line) for line in trace("conversation_trace.jsonl").read_bytes().splitlines() if line]
    span = max(r["timestamp"] for r in rows) + 1
    ids = max(h for r in rows for h in r["hash_ids"])
    with path.open("wb") as out:
        written, copy = 0, 0
        while written < requests:
            shift, start = copy * ids, copy * span
            for row in rows[:requests - written]:
                hashes = [h + shift if h else 0 for h in row["hash_ids"]]
                out.write(orjson.dumps({"timestamp": row["timestamp"] + start, "input_length": row["input_length"],
                                        "output_length": row["output_length"], "hash_ids": hashes}) + b"\n")
            written += min(len(rows), requests - written)
            copy += 1


def run(config: Path, output: Path, per_request: bool) -> tuple[float, float, dict]:
    command = [sys.executable, "-m", "kvreplay", "predict", "-c", str(config), "--output-dir", str(output),
               "--overwrite", "--format", "json"] + (["--capture-per-request"] if per_request else [])
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"kvreplay predict failed:\n{err.read().decode()}")
        return wall, usage.ru_maxrss / 1024, orjson.loads(out.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--g1-blocks", type=int, default=8000)
    parser.add_argument("--only", choices=("plain", "per-request"), help="run one of the two configurations")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiled.jsonl"
        write_tiled_trace(path, args.requests)
        config = Path(tmp) / "long.yaml"
        config.write_text(mooncake_trace_config(path, block_size=args.block_size, g1_blocks=args.g1_blocks))
        for label, per_request in (("plain", False), ("per-request", True)):
            if args.only and args.only != label:
                continue
            wall, peak, summary = run(config, Path(tmp) / "out", per_request)
            print(f"{args.requests:,} requests ({label}): {summary['completed_requests']:,} completed, reuse "
                  f"{summary['prefix_cache_reused_ratio']:.4f}; wall {wall:.1f} s, peak RSS {peak:,.0f} MB, "
                  f"{args.requests / wall:,.0f} simulated requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
