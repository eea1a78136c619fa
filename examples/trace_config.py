"""The predict config that replays a Mooncake trace file at its timestamps (benchmarks and tests build theirs here).

Qwen3-8B on H200, one aggregated role of `replicas` workers with a fixed G1 of
`g1_blocks` blocks of `block_size` tokens; fixed timing (prefill 50 ms, decode
10 ms) unless `fixed_timing=False` (the default roofline timing); host offload
(G2) of `host_blocks` blocks if given (with `connector` if given), KVCR with its
defaults if `kvcr`, and the router's `placement` if given.
"""
from __future__ import annotations

from pathlib import Path


def mooncake_trace_config(trace: Path, *, block_size: int, g1_blocks: int, host_blocks: int = 0, replicas: int = 1,
                          fixed_timing: bool = True, kvcr: bool = False, placement: str | None = None,
                          connector: str | None = None) -> str:
    engine = f"  placement: {placement}\n" if placement else ""
    role = f"      parallelism: {{replicas: {replicas}}}\n" if replicas != 1 else ""
    if fixed_timing:
        role += "      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}\n"
    host = f"num_host_blocks: {host_blocks}" + (f", connector: {connector}" if connector else "")
    kv = f"        host_offload: {{{host}}}\n" if host_blocks else ""
    if kvcr:
        kv += "        kvcr: {}\n"
    return f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
{engine}  workers:
    aggregated:
{role}      kv_cache:
        block_size: {block_size}
        capacity: {{type: fixed, blocks: {g1_blocks}}}
{kv}traffic:
  source: {{type: trace, paths: ["{trace.as_posix()}"], format: mooncake, block_size: 512}}
  load: {{type: trace_timestamps}}
"""
