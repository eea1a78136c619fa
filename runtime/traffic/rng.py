"""Counter-based random numbers: a pure function of (seed, stream, counter).

SplitMix64 finalisation of a 64-bit mix of the three inputs, so every draw is
independent of call order and of Python's `random`, and identical on every
platform and Python version.  The counter lives in the simulation state.
"""
from __future__ import annotations

import math

MASK = (1 << 64) - 1


def mix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK
    return value ^ (value >> 31)


def stream_base(seed: int, stream: int) -> int:
    """What `bits` mixes a counter into: a caller drawing many counters of one stream computes it once."""
    return mix64(mix64(seed & MASK) ^ (stream & MASK))


def bits(seed: int, stream: int, counter: int) -> int:
    return mix64(stream_base(seed, stream) ^ (counter & MASK))


def uniform(seed: int, stream: int, counter: int) -> float:
    """A float in [0, 1) with 53 random bits."""
    return (bits(seed, stream, counter) >> 11) * (1.0 / (1 << 53))


def exponential(seed: int, stream: int, counter: int, rate: float) -> float:
    """An exponential variate with the given rate (events per unit)."""
    return -math.log1p(-uniform(seed, stream, counter)) / rate
