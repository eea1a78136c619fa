"""Benchmark: a 16-candidate `kvreplay recommend` sweep over the Mooncake synthetic trace, `--jobs 1` vs `--jobs 2`.

One aggregated vLLM worker (Qwen3-8B on an H200, fixed timing 50/10 ms) replays the first `--requests`
requests of the synthetic trace at its timestamps; the sweep searches block size (16, 32, 64, 128) and
memory fraction (0.80..0.95 step 0.05). Each run is a whole process with a fresh output folder,
alternating jobs 1 and jobs 2 `--runs` times; the script prints the median wall of each and their
ratio (issue 18's target: jobs 2 at most 0.6x jobs 1), and checks that both wrote the same ledger.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _traces import trace


def config(path: Path, requests: int) -> str:
    rows = trace("synthetic_trace.jsonl").read_text().splitlines()[:requests]
    (path / "trace.jsonl").write_text("\n".join(rows) + "\n")
    return """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache:
        block_size: {search: [16, 32, 64, 128]}
        capacity: {type: default, memory_fraction: {search: "0.80..0.95 step 0.05"}}
traffic:
  source: {type: trace, paths: [trace.jsonl], format: mooncake, block_size: 512}
  load: {type: trace_timestamps}
recommend:
  sla: {ttft_ms: {p90: 2000}}
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(folder: Path, jobs: int, index: int) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds of the run and its workers, the ledger)."""
    out = folder / f"out-{jobs}-{index}"
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kvreplay", "recommend", "-c", str(folder / "sweep.yaml"),
                    "--output-dir", str(out), "--jobs", str(jobs), "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return wall, _children_cpu() - cpu, (out / "ledger.jsonl").read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests of the trace replayed per candidate")
    parser.add_argument("--runs", type=int, default=3, help="runs of each --jobs value, alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "sweep.yaml").write_text(config(folder, args.requests))
        walls: dict[int, list[float]] = {1: [], 2: []}
        cpus: dict[int, list[float]] = {1: [], 2: []}
        ledgers = set()
        for index in range(args.runs):
            for jobs in (1, 2):
                wall, cpu, ledger = run(folder, jobs, index)
                walls[jobs].append(wall)
                cpus[jobs].append(cpu)
                ledgers.add(ledger)
        one, two = statistics.median(walls[1]), statistics.median(walls[2])
        # (CPU time too: on a shared machine whose cores are busy, wall time says little about scaling)
        print(f"16 candidates x {args.requests} requests: jobs 1 {one:.2f} s wall / {statistics.median(cpus[1]):.2f} s "
              f"CPU, jobs 2 {two:.2f} s wall / {statistics.median(cpus[2]):.2f} s CPU (median of {args.runs}); "
              f"wall ratio {two / one:.2f} (target <= 0.6); ledgers identical: {len(ledgers) == 1}")


if __name__ == "__main__":
    main()
