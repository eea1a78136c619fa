"""Where the benchmarks find the shared Mooncake traces (not a benchmark itself)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces"  # the real Mooncake traces live beside the checkout, not in it
