"""Benchmark: thousands of mutated example configs through `kvreplay validate` (and `predict` when valid),
printing how many crashed or hung (tests/fuzz.py says what a mutation is and what counts).

    python benchmarks/fuzz_configs.py [--examples 3000] [--seed 1] [--show 5]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000, help="how many mutated configs (default 3000)")
    parser.add_argument("--seed", type=int, default=1, help="the mutations' random seed (default 1)")
    parser.add_argument("--show", type=int, default=5, help="print this many failures in full (default 5)")
    args = parser.parse_args()
    fuzz.main_thread_only()
    rng = random.Random(args.seed)
    failures: list[str] = []
    walls, cpus = [], []
    start = time.perf_counter()
    for _ in range(args.examples):
        source, base = rng.choice(fuzz.BASES)
        began, began_cpu = time.perf_counter(), time.process_time()
        problem = fuzz.run(source, fuzz.mutate(rng.choice, base), rng.choice(["yaml", "json"]))
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - began_cpu)
        if problem is not None:
            failures.append(problem)
    crashes = sum(": crash:" in f or ": exit code" in f or ": a traceback" in f for f in failures)
    hangs = sum(": hang:" in f or " took " in f for f in failures)
    for failure in failures[:args.show]:
        print(failure, "\n" + "-" * 72)
    print(f"{args.examples} mutated configs in {time.perf_counter() - start:.0f} s: {crashes} crashes, {hangs} hangs "
          f"or slow validations; per config (validate + predict) at most {max(walls):.1f} s wall, "
          f"{max(cpus):.1f} s CPU; 99th percentile {sorted(walls)[len(walls) * 99 // 100]:.1f} s wall")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
