"""Fixed step times: every prefill pass costs `prefill_ms`, every decode pass `decode_ms`.

A pass with prefill work (any new prompt tokens) costs `prefill_ms`, a pass
with decoding requests costs `decode_ms`, a mixed pass the sum, an empty pass 0.

Milliseconds become integer nanoseconds exactly: the value's shortest decimal
form (what the config wrote, e.g. ``12.5``) times 10**6, rounded half to even
(``Decimal`` arithmetic, no binary float product), so 0.1 ms is 100,000 ns and
0.0000005 ms rounds to 0 ns.  Both phases are converted once, when the
provider is built, and a mixed pass adds the two integers.
"""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from . import PassWork, Timing


def ms_to_ns(ms: float) -> int:
    """Exact decimal ms -> ns, round half to even (`repr` gives the shortest decimal of a float)."""
    return int((Decimal(repr(float(ms))) * 1_000_000).to_integral_value(rounding=ROUND_HALF_EVEN))


def fixed_timing(prefill_ms: float, decode_ms: float) -> Timing:
    prefill_ns, decode_ns = ms_to_ns(prefill_ms), ms_to_ns(decode_ms)

    def timing(work: PassWork) -> int:
        return (prefill_ns if work.prefill_tokens > 0 else 0) + (decode_ns if work.decode_requests > 0 else 0)

    timing.decode_only_ns = decode_ns  # a pure decode pass costs this whatever the batch (macro steps use it)
    return timing
