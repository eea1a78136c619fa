"""The compiler's one conversion of plan durations (milliseconds, seconds) to integer nanoseconds.

Every duration of the finished plan is converted here by one rule: the value as the config wrote
it (its shortest decimal form, so no binary float error enters) times the unit, rounded half to
even.  0.0001255 ms is 126 ns, whatever float product `0.0001255 * 1e6` happens to give.  A
trace replayed `speedup` times faster divides its timestamps by the speedup under the same rule.
Polynomial step-time coefficients are kept as an exact integer fraction
(`ms_coefficients_to_ns`), so the polynomial is evaluated exactly too.
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Sequence

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def to_ns(value: float, unit_ns: int, divisor: float = 1) -> int:
    """`value` units (a unit being `unit_ns` ns) divided by `divisor`, in ns, rounded half to even."""
    if type(value) is int and divisor == 1:
        return value * unit_ns  # (exact already: the common case of whole milliseconds)
    exact = Decimal(repr(float(value))) * unit_ns
    if divisor != 1:
        exact /= Decimal(repr(float(divisor)))
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def ms_to_ns(ms: float, speedup: float = 1.0) -> int:
    """Milliseconds (divided by `speedup`, for a trace replayed faster) in nanoseconds."""
    return to_ns(ms, NS_PER_MS, speedup)


def seconds_to_ns(seconds: float) -> int:
    return to_ns(seconds, NS_PER_S)


def scaled_to_ns(value: float, multiplier: float, unit_ns: int = NS_PER_S) -> int:
    """`value` x `multiplier` units (seconds by default) in ns, both as written (opal's
    `timestamp x multiplier_to_sec`), rounded half to even."""
    exact = Decimal(repr(value)) * Decimal(repr(multiplier)) * unit_ns
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def ms_coefficients_to_ns(coefficients_ms: Sequence[float]) -> tuple[tuple[int, ...], int]:
    """(numerators, denominator) with coefficient_i in ns == numerators[i] / denominator exactly."""
    if not coefficients_ms:
        raise ValueError("a polynomial needs at least one coefficient")
    ns = [Decimal(repr(float(c))).scaleb(6) for c in coefficients_ms]
    digits = max(0, *(-d.as_tuple().exponent for d in ns))
    return tuple(int(d.scaleb(digits)) for d in ns), 10 ** digits
