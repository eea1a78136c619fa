"""Benchmark: the whole `kvreplay predict` process on the Mooncake conversation trace.

One aggregated vLLM worker, block_size 64, a fixed 8,000-block G1, fixed timing
(prefill 50 ms, decode 10 ms), open-loop trace timestamps: 12,031 requests.
Targets (issue 3): at most 3 s wall and 400 MB peak RSS on the 2-core machine.
Prints wall time, peak RSS and simulated requests per second of wall time;
`--runs N` repeats and reports the best and the median.  `--host-blocks N` adds a
G2 of N blocks (`--connector` picks its connector) and also runs the G1-only
configuration, alternating the two so that both see the same machine load, and
reports the ratio of their walls (issue 4's target: at most 1.5).  `--against DIR`
also runs every configuration with the checkout in DIR (e.g. a `git worktree` of
an earlier commit), alternating with this one, and reports the median ratio of
the paired walls (a refactoring's target: at most 1.03).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _process import KVREPLAY, run
from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config

TRACE = trace("conversation_trace.jsonl")


ROOT = Path(__file__).resolve().parent.parent


def run_once(config: Path, output: Path, checkout: Path = ROOT) -> tuple[float, float, dict, float]:
    """(wall s, peak RSS MB, summary, CPU s) of one `kvreplay predict` process of `checkout`."""
    return run([*KVREPLAY, str(config)], output, cwd=checkout)


def report(label: str, results: list) -> float:
    walls = sorted(r[0] for r in results)
    peak = max(r[1] for r in results)
    summary = results[0][2]
    print(f"{label}: {summary['num_requests']} requests, {summary['completed_requests']} completed, "
          f"reuse {summary['prefix_cache_reused_ratio']:.4f}, {summary['preemptions']} preemptions")
    print(f"  wall best {walls[0]:.2f} s, median {statistics.median(walls):.2f} s over {len(walls)} runs; "
          f"peak RSS {peak:.0f} MB; {summary['num_requests'] / walls[0]:,.0f} simulated requests/s")
    return walls[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--host-blocks", type=int, default=0, help="add host_offload with this many blocks")
    parser.add_argument("--connector", default=None, help="the G2 connector (default: the plan's default)")
    parser.add_argument("--replicas", type=int, default=1, help="workers taking the trace round robin")
    parser.add_argument("--against", type=Path, metavar="DIR", help="another checkout to pair every run with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}
        for label, host_blocks in (("G1 only", 0), ("with G2", args.host_blocks)):
            if label == "with G2" and not host_blocks:
                continue
            path = configs[label] = Path(tmp) / f"{label.replace(' ', '_')}.yaml"
            path.write_text(mooncake_trace_config(TRACE, block_size=64, g1_blocks=8000, host_blocks=host_blocks,
                                                  replicas=args.replicas, connector=args.connector))
        results = {label: [] for label in configs}
        against = {label: [] for label in configs}
        for _ in range(args.runs):  # alternating, so that a slower spell of the machine hits both alike
            for label, config in configs.items():
                results[label].append(run_once(config, Path(tmp) / "out"))
                if args.against:
                    against[label].append(run_once(config, Path(tmp) / "out", args.against.resolve()))
    best = {label: report(f"conversation trace, {label}", runs) for label, runs in results.items()}
    for label, runs in against.items():
        if runs:
            report(f"conversation trace, {label}, {args.against}", runs)
            same = all(ours[2] == theirs[2] for ours, theirs in zip(results[label], runs))
            for what, at in (("wall", 0), ("CPU time", 3)):
                ratios = sorted(ours[at] / theirs[at] for ours, theirs in zip(results[label], runs))
                print(f"  this checkout / {args.against}, {what}: {statistics.median(ratios):.3f}x median of paired "
                      f"runs ({ratios[0]:.3f}-{ratios[-1]:.3f})")
            print(f"  summaries {'identical' if same else 'DIFFER'} in every pair")
    if len(best) == 2:
        ratios = sorted(g2[0] / g1[0] for g1, g2 in zip(results["G1 only"], results["with G2"]))
        print(f"with G2 / G1 only: {best['with G2'] / best['G1 only']:.2f}x best over best, "
              f"{statistics.median(ratios):.2f}x median of paired runs (issue 4's target: at most 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
