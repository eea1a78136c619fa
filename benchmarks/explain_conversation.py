"""`predict --explain-misses` on the Mooncake conversation trace at block size 16 (issue 17 item 5: under 20 s
and 500 MB).

One aggregated vLLM worker, a fixed 32,000-block G1 (the memory of benchmarks/replay_conversation.py's 8,000
blocks of 64), fixed timing, the trace's timestamps.  Runs `kvreplay predict` with and without the flag
alternately (`--runs N` pairs, so both see the same machine load) and prints each process's wall, CPU and peak
RSS, and the flag's cost: the CPU difference of each pair (the wall is only meaningful on a quiet machine).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config


def run_once(config: Path, output: Path, *flags: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one `kvreplay predict` process."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "kvreplay", "predict", "-c", str(config), "--output-dir",
                              str(output), "--overwrite", "--no-progress", "--format", "json", *flags],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"kvreplay predict failed:\n{child.stderr.read().decode()}")
    child.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="pairs of runs (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "conversation16.yaml"
        config.write_text(mooncake_trace_config(trace("conversation_trace.jsonl"), block_size=16, g1_blocks=32000))
        costs, explained = [], []
        for k in range(args.runs):
            plain = run_once(config, Path(folder) / "plain")
            flagged = run_once(config, Path(folder) / "explained", "--explain-misses")
            print(f"pair {k + 1}: plain {plain[0]:.1f} s wall, {plain[1]:.1f} s CPU, {plain[2]:.0f} MB; "
                  f"--explain-misses {flagged[0]:.1f} s wall, {flagged[1]:.1f} s CPU, {flagged[2]:.0f} MB")
            costs.append(flagged[1] - plain[1])
            explained.append(flagged)
    print(f"--explain-misses costs {statistics.median(costs):.1f} s CPU (median of {len(costs)} pairs); "
          f"peak RSS {max(e[2] for e in explained):.0f} MB")
    return 0 if max(e[2] for e in explained) < 500 and statistics.median(costs) < 20 else 1


if __name__ == "__main__":
    sys.exit(main())
