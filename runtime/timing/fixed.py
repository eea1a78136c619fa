"""Fixed step times: every prefill pass costs `prefill_ns`, every decode pass `decode_ns`.

A pass with prefill work (any new prompt tokens) costs `prefill_ns`, a pass
with decoding requests costs `decode_ns`, a mixed pass the sum, an empty pass 0.

The compiler converts the configured milliseconds to integer nanoseconds
exactly (its `durations.ms_to_ns`: the shortest decimal times 10**6, half to even),
so a mixed pass adds two integers.
"""
from __future__ import annotations

from . import PassWork, Timing


def fixed_timing(prefill_ns: int, decode_ns: int) -> Timing:
    def timing(work: PassWork) -> int:
        return (prefill_ns if work.prefill_tokens > 0 else 0) + (decode_ns if work.decode_requests > 0 else 0)

    timing.decode_only_ns = decode_ns  # a pure decode pass costs this whatever the batch (macro steps use it)
    return timing
