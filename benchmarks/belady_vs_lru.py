"""Belady (offline optimal) vs LRU eviction on the two Mooncake traces at three G1 sizes.

Belady is a ReplaySpec-only policy; here the trace plans are compiled as predict
configs and the eviction policy of the compiled plan is switched, which is the
same open-loop request list a ReplaySpec with token ids would carry (one
aggregated worker, attention_data 1, no offload, fixed timing 50/10 ms).
Prints the first-admission reuse ratio of each run.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.outputs.metrics import summary
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build

from _traces import trace

from kvreplay.examples.trace_config import mooncake_trace_config

SIZES = (2000, 8000, 32000)


def run(trace: Path, blocks: int, policy: str) -> float:
    result = compile_bytes(mooncake_trace_config(trace, block_size=64, g1_blocks=blocks).encode(), "trace.yaml")
    plan = result.plan.to_dict()
    plan["engine"]["kv_eviction_policy"] = policy
    replay = build(finish_plan(plan))
    replay.run()
    return summary(replay.requests, replay.now, policy)["first_admission_prefix_cache_reused_ratio"]


def main() -> int:
    print(f"{'trace':<26} {'G1 blocks':>9} {'LRU':>8} {'Belady':>8} {'wall':>6}")
    for name in ("conversation_trace.jsonl", "synthetic_trace.jsonl"):
        for blocks in SIZES:
            start = time.perf_counter()
            lru, belady = run(trace(name), blocks, "lru"), run(trace(name), blocks, "belady")
            print(f"{name:<26} {blocks:>9} {lru:>8.4f} {belady:>8.4f} {time.perf_counter() - start:>5.1f}s")
            if belady < lru:
                print("  Belady reused less than LRU", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
