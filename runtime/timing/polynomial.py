"""Polynomial step times: ms = c0 + c1*x + c2*x^2 + ... per phase of a pass.

- prefill x: ``tokens`` (new prompt tokens of the pass, default) or
  ``batch_tokens`` (new prompt tokens + one token per decoding request);
- decode x: ``batch_size`` (decoding requests, default) or
  ``context_tokens`` (sum of the decoding requests' context lengths).

A phase counts only when the pass has work of that phase (prefill tokens > 0,
decoding requests > 0); a mixed pass costs the sum of both phases, an empty
pass 0.  Each phase is clamped at 0 on its own, so a fit that dips below zero
never subtracts from the other phase.

Exactness: the compiler scales each coefficient's shortest decimal form
(``repr``) to nanoseconds and writes it as an integer over a common power of
ten; a pass evaluates the polynomial with Python integers (Horner) and rounds
the quotient half to even.  No float rounding enters the
result, so it is the same on every platform.
"""
from __future__ import annotations

from . import PassWork, Timing

PREFILL_VARIABLES = ("tokens", "batch_tokens")
DECODE_VARIABLES = ("batch_size", "context_tokens")


def _evaluate(numerators: tuple[int, ...], denominator: int, x: int) -> int:
    total = 0
    for c in reversed(numerators):
        total = total * x + c
    if total <= 0:
        return 0
    quotient, remainder = divmod(total, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):  # round half to even
        quotient += 1
    return quotient


def polynomial_timing(record) -> Timing:
    """The provider of a plan's polynomial record (integer numerators over a denominator, per phase)."""
    prefill_variable, decode_variable = record.prefill_variable, record.decode_variable
    if prefill_variable not in PREFILL_VARIABLES:
        raise ValueError(f"prefill_variable must be one of {PREFILL_VARIABLES}, not {prefill_variable!r}")
    if decode_variable not in DECODE_VARIABLES:
        raise ValueError(f"decode_variable must be one of {DECODE_VARIABLES}, not {decode_variable!r}")
    prefill, prefill_den = record.prefill_numerators, record.prefill_denominator
    decode, decode_den = record.decode_numerators, record.decode_denominator
    batch_tokens = prefill_variable == "batch_tokens"
    context = decode_variable == "context_tokens"

    def timing(work: PassWork) -> int:
        ns = 0
        tokens = work.prefill_tokens
        if tokens > 0:
            x = tokens + work.decode_requests if batch_tokens else tokens
            ns += _evaluate(prefill, prefill_den, x)
        if work.decode_requests > 0:
            x = work.decode_context if context else work.decode_requests
            ns += _evaluate(decode, decode_den, x)
        return ns

    return timing
