"""Build the step-time provider of one worker role from the finished plan's timing record.

The record's type chooses the provider: fixed step times (`prefill_ns`, `decode_ns`), an exact
polynomial (integer coefficients over a common denominator, per phase) or the roofline (the
model and hardware numbers the compiler resolved).  The kind is told by the record's fields,
so this module needs no import of the compiler's record classes.
"""
from __future__ import annotations

from . import Timing
from .default import default_timing
from .fixed import fixed_timing
from .polynomial import polynomial_timing


def make_timing(record) -> Timing:
    if hasattr(record, "prefill_ns"):
        return fixed_timing(record.prefill_ns, record.decode_ns)
    if hasattr(record, "prefill_numerators"):
        return polynomial_timing(record)
    if hasattr(record, "peak_flops"):
        return default_timing(record)
    raise ValueError(f"unknown timing record {record!r}")
