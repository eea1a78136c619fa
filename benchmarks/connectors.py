"""Benchmark: each vLLM CPU-offload connector against the same run with G1 only (issue 20: at most 1.5x).

The conversation trace, one aggregated vLLM worker, block 64, 8,000 G1 blocks,
fixed timing, open loop; the connector runs add G2 with 32,000 host blocks.
Every configuration runs `--runs` times, alternating, as whole processes; the
script prints each one's median wall and CPU time and peak RSS, and each
connector's median ratio to the G1-only run of the same round (paired, so that
a slow spell of the shared machine hits both alike).  CPU time is the figure
to trust on a loaded machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _process import run
from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config

CONNECTORS = ("offloading_v0_32", "simple_cpu_v0_32")
G1_BLOCKS, HOST_BLOCKS = 8000, 32_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connectors", nargs="+", default=list(CONNECTORS))
    args = parser.parse_args()
    command = [sys.executable, "-m", "kvreplay", "predict", "-c"]
    results: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"g1-only": Path(tmp) / "g1-only.yaml"}
        configs["g1-only"].write_text(mooncake_trace_config(trace("conversation_trace.jsonl"), block_size=64,
                                                            g1_blocks=G1_BLOCKS))
        for connector in args.connectors:
            configs[connector] = Path(tmp) / f"{connector}.yaml"
            configs[connector].write_text(mooncake_trace_config(trace("conversation_trace.jsonl"), block_size=64,
                                                                g1_blocks=G1_BLOCKS, host_blocks=HOST_BLOCKS,
                                                                connector=connector))
        for _ in range(args.runs):
            for label, config in configs.items():
                results.setdefault(label, []).append(run([*command, str(config)], Path(tmp) / "out"))
    for label, runs in results.items():
        summary = runs[0][2]
        print(f"{label}: median wall {statistics.median(r[0] for r in runs):.2f} s, CPU "
              f"{statistics.median(r[3] for r in runs):.2f} s over {len(runs)} runs, peak RSS "
              f"{max(r[1] for r in runs):.0f} MB, reuse {summary['prefix_cache_reused_ratio']:.4f}")
    for connector in args.connectors:
        pairs = list(zip(results[connector], results["g1-only"]))
        wall = statistics.median(ours[0] / base[0] for ours, base in pairs)
        cpu = statistics.median(ours[3] / base[3] for ours, base in pairs)
        print(f"{connector} / G1 only: {wall:.2f}x wall, {cpu:.2f}x CPU, median of {len(pairs)} paired runs "
              "(issue 20's target: at most 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
