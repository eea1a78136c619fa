"""The predict config the benchmarks replay a shared Mooncake trace with (not a benchmark itself).

tests/support.py builds the same config for the tests; it is not imported from there because the benchmarks
run as scripts (`python benchmarks/NAME.py`), where the repository root is not importable.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces"  # the real Mooncake traces live beside the checkout, not in it


def mooncake_trace_config(trace: Path, *, block_size: int, g1_blocks: int, host_blocks: int = 0) -> str:
    """Predict config replaying a Mooncake trace at its timestamps on one aggregated worker: fixed timing
    (prefill 50 ms, decode 10 ms), a fixed G1 of `g1_blocks` blocks of `block_size` tokens and, if
    `host_blocks`, host offload (G2) of that many blocks."""
    host = f"        host_offload: {{num_host_blocks: {host_blocks}}}\n" if host_blocks else ""
    return f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache:
        block_size: {block_size}
        capacity: {{type: fixed, blocks: {g1_blocks}}}
{host}traffic:
  source: {{type: trace, paths: ["{trace.as_posix()}"], format: mooncake, block_size: 512}}
  load: {{type: trace_timestamps}}
"""
