"""The compiler's one ms -> ns rule: the written decimal times the unit, half to even (issue 11)."""
from __future__ import annotations

import pytest

from kvreplay.compiler.durations import ms_to_ns, seconds_to_ns


@pytest.mark.parametrize("ms, speedup, ns", [
    (0.0001255, 1.0, 126),  # the float product is 125.49999999999999: the written value decides
    (0.0000005, 1.0, 0), (0.0000015, 1.0, 2),  # exact halves go to the even neighbour
    (12, 1.0, 12_000_000), (2.5, 1.0, 2_500_000),
    (3, 2.0, 1_500_000), (1, 3.0, 333_333),  # a trace replayed faster divides its timestamps
])
def test_ms_to_ns(ms, speedup, ns):
    assert ms_to_ns(ms, speedup) == ns


def test_seconds_use_the_same_rule():
    assert (seconds_to_ns(1.5), seconds_to_ns(2), seconds_to_ns(0.0000000005)) == (1_500_000_000, 2_000_000_000, 0)
