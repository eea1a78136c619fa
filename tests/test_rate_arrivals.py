"""Rate loads (issue 13 item 7): the first request arrives at t = 0 and each gap follows it, as in AISimulate.

`constant_rate` gaps are 1 / rate; `poisson` gap k is draw k of the load seed's exponential stream
(runtime/traffic/rng.py), so the k-th arrival is the sum of the first k draws.
"""
from __future__ import annotations

import pytest

from kvreplay.cli import main
from kvreplay.runtime.traffic.rng import exponential

from .support import read_outputs

CONFIG = """engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache: {{block_size: 64, capacity: {{type: fixed, blocks: 2000}}}}
traffic:
  source: {{type: synthetic, input_tokens: 512, output_tokens: 16}}
  load: {load}
  stop: {{requests: 20}}
"""


def arrivals(tmp_path, load: str) -> tuple[dict, list[float]]:
    config = tmp_path / "rate.yaml"
    config.write_text(CONFIG.format(load=load))
    assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / "out"), "--capture-per-request",
                 "--no-progress"]) == 0
    summary, records = read_outputs(tmp_path / "out")
    return summary, [r["arrival_time_ms"] for r in sorted(records, key=lambda r: r["arrival_time_ms"])]


def test_constant_rate_starts_at_zero(tmp_path):
    """2 rps: arrivals 0, 500, ..., 9,500 ms; each request takes 50 ms of prefill (token 1) and 15 decodes of
    10 ms, so the last ends at 9,700 ms (AISimulate 0.13 prints the same duration on this file)."""
    summary, times = arrivals(tmp_path, "{type: constant_rate, requests_per_second: 2.0}")
    assert times == [500.0 * k for k in range(20)]
    assert summary["duration_ms"] == 9_700.0


@pytest.mark.parametrize("seed", [7, 11])
def test_poisson_starts_at_zero_and_gap_k_is_draw_k(tmp_path, seed):
    _, times = arrivals(tmp_path, f"{{type: poisson, requests_per_second: 4.0, seed: {seed}}}")
    expected, t = [], 0.0
    for k in range(20):
        expected.append(round(t * 1000.0, 6))
        t += exponential(seed, 1, k, 4.0)
    assert times[0] == 0.0
    assert times == pytest.approx(expected, abs=1e-6)
