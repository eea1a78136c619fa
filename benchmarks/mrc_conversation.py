"""One-pass miss-ratio curve of the Mooncake conversation trace at block size 16 (issue 17: under 10 s).

Reads the trace's rows into the RequestSpecs the trace traffic makes (generator._trace_row: 512-token trace
blocks), builds the block stream and the curve, and prints wall time and peak memory (ru_maxrss, which
includes the interpreter and the rows), and the CPU time (the wall time is only meaningful on a quiet machine).
Measured on the 2-core shared machine, quiet: 4.77 s wall, 338 MiB peak RSS (see the commit message).
"""
from __future__ import annotations

import json
import resource
import sys
import time

from kvreplay.runtime.analysis import block_stream, mrc
from kvreplay.runtime.serving.requests import Content, RequestSpec

from _traces import trace

BLOCK = 16


def specs(path) -> list[RequestSpec]:
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            row = json.loads(line)
            out.append(RequestSpec(i, row["input_length"], row["output_length"],
                                   Content(hash_ids=tuple(row["hash_ids"]), trace_block=512)))
    return out


def main() -> int:
    rows = specs(trace("conversation_trace.jsonl"))
    cpu = time.process_time()
    start = time.perf_counter()
    stream = block_stream.from_specs(rows, BLOCK)
    built = time.perf_counter()
    curve = mrc.curve(stream)
    done = time.perf_counter()
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{stream.requests} requests, {len(stream.ids):,} block accesses, {stream.distinct:,} distinct keys")
    print(f"stream {built - start:.2f} s, curve {done - built:.2f} s, total {done - start:.2f} s, "
          f"CPU {cpu:.2f} s, peak RSS {peak:.0f} MiB")
    for capacity in curve.sample(per_decade=2):
        print(f"  {capacity:>10,} blocks  hit ratio {curve.hit_ratio(capacity):.4f}")
    return 0 if done - start < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
