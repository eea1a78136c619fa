"""The compiler's conversion of plan durations (milliseconds, seconds) to integer nanoseconds.

Every duration of the finished plan is converted here, by one of two rules that really differ
for values below a nanosecond's resolution, and both are kept so that no output changes:

- `ms_to_ns` (latencies, delays, arrival times, think times): the binary float product
  ``ms * 1e6`` rounded half to even, as the replay always did for these.  0.0001255 ms is the
  float product 125.49999999999999, so 125 ns.
- `ms_to_ns_exact` (fixed step times): the value's shortest decimal form (what the config wrote)
  times 10**6, rounded half to even with no float product, so 0.0001255 ms is 126 ns.  A step time
  is added up once per scheduler pass, so its rounding must not depend on binary float error.

Both agree whenever the value has at most six decimals (a whole number of nanoseconds), which
every example and golden config has.  Polynomial step-time coefficients use the exact rule too,
kept as an integer fraction (`ms_coefficients_to_ns`) so the polynomial is evaluated exactly.
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Sequence

NS_PER_MS = 1e6
NS_PER_S = 1e9


def ms_to_ns(ms: float, speedup: float = 1.0) -> int:
    """Float rule: round(ms * 1e6 / speedup); a trace replayed `speedup` times faster divides its timestamps."""
    return int(round(ms * NS_PER_MS / speedup))


def seconds_to_ns(seconds: float) -> int:
    """Float rule for a duration written in seconds: round(s * 1e9)."""
    return int(round(seconds * NS_PER_S))


def ms_to_ns_exact(ms: float) -> int:
    """Exact decimal rule: the shortest decimal of `ms` (its `repr`) times 10**6, round half to even."""
    return int((Decimal(repr(float(ms))) * 1_000_000).to_integral_value(rounding=ROUND_HALF_EVEN))


def ms_coefficients_to_ns(coefficients_ms: Sequence[float]) -> tuple[tuple[int, ...], int]:
    """(numerators, denominator) with coefficient_i in ns == numerators[i] / denominator exactly."""
    if not coefficients_ms:
        raise ValueError("a polynomial needs at least one coefficient")
    ns = [Decimal(repr(float(c))).scaleb(6) for c in coefficients_ms]
    digits = max(0, *(-d.as_tuple().exponent for d in ns))
    return tuple(int(d.scaleb(digits)) for d in ns), 10 ** digits
