"""Virtual time is integer nanoseconds: the runtime's one conversion of a computed duration to it.

Every duration of the plan arrives in ns already (the compiler converts what the config wrote);
what the runtime itself computes in seconds (a Poisson inter-arrival gap, a roofline pass time)
becomes ns here, by the same rule as the compiler's: the float product, rounded half to even.
"""
from __future__ import annotations

NS_PER_S = 1e9


def seconds_to_ns(seconds: float) -> int:
    return int(round(seconds * NS_PER_S))
