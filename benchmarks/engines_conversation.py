"""Benchmark: SGLang's engine against vLLM's on the Mooncake conversation trace (issue 14's speed target).

The whole `kvreplay predict` process, fixed timing (prefill 50 ms, decode 10 ms),
open-loop trace timestamps, one aggregated worker with the same G1 in tokens:
vLLM at block 64 with 8,000 blocks, SGLang at its default page size 1 with
512,000 pages (its radix cache must cost per prefix, not per token).  The runs
alternate so that both see the same machine load.  Prints wall time and peak
RSS of each, and the ratio of the best walls and of the best CPU times (user +
sys of the process: less moved by other work on the machine); the target is
SGLang at most 1.5x vLLM.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _process import run
from replay_conversation import TRACE, report, run_once

from kvreplay.examples.trace_config import mooncake_trace_config

CONFIGS = {"vllm, block 64": ("vllm", 64, 8000), "sglang, page 1": ("sglang", 1, 512_000)}


def config_text(backend: str, block_size: int, blocks: int) -> str:
    text = mooncake_trace_config(TRACE, block_size=block_size, g1_blocks=blocks)
    return text.replace("  hardware: h200_sxm\n", f"  hardware: h200_sxm\n  backend: {backend}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--aisimulate", metavar="PATH", help="an aisimulate executable to pair every run with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for label, (backend, block_size, blocks) in CONFIGS.items():
            paths[label] = Path(tmp) / f"{backend}.yaml"
            paths[label].write_text(config_text(backend, block_size, blocks))
        results = {label: [] for label in CONFIGS}
        theirs = {label: [] for label in CONFIGS}
        for _ in range(args.runs):
            for label, path in paths.items():
                results[label].append(run_once(path, Path(tmp) / "out"))
                if args.aisimulate:
                    theirs[label].append(run([args.aisimulate, "predict", "-c", str(path)], Path(tmp) / "theirs"))
    best = {label: report(f"conversation trace, {label}", runs) for label, runs in results.items()}
    cpu = {label: min(r[3] for r in runs) for label, runs in results.items()}
    for label, seconds in cpu.items():
        print(f"  {label}: CPU best {seconds:.2f} s")
    ratio = best["sglang, page 1"] / best["vllm, block 64"]
    cpu_ratio = cpu["sglang, page 1"] / cpu["vllm, block 64"]
    print(f"sglang / vllm: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU, best over best (issue 14's target: at most 1.5x)")
    for label, runs in theirs.items():
        if runs:
            ratios = sorted(ours[0] / other[0] for ours, other in zip(results[label], runs))
            print(f"{label}: kvreplay / AISimulate wall {statistics.median(ratios):.2f}x median of paired runs "
                  f"({ratios[0]:.2f}-{ratios[-1]:.2f}); AISimulate best {min(r[0] for r in runs):.2f} s, "
                  f"reuse {runs[0][2]['prefix_cache_reused_ratio']:.4f} (kvreplay "
                  f"{results[label][0][2]['prefix_cache_reused_ratio']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
