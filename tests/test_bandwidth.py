"""Max-min fair bandwidth sharing: the spec's worked numbers and properties."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.runtime.links.bandwidth import fair_rates


def test_four_ranks_one_transfer_each_under_an_80_pool():
    assert fair_rates([0, 1, 2, 3], {r: 32.0 for r in range(4)}, 80.0) == [20.0] * 4


def test_unused_share_goes_to_the_other_rank():
    rates = fair_rates([0] * 9 + [1], {0: 32.0, 1: 32.0}, 80.0)
    assert rates[:9] == pytest.approx([32.0 / 9] * 9)
    assert rates[9] == 32.0
    assert sum(rates[:9]) == pytest.approx(32.0)


def test_a_20_pool_gives_each_of_ten_transfers_2():
    rates = fair_rates([0] * 9 + [1], {0: 32.0, 1: 32.0}, 20.0)
    assert rates == pytest.approx([2.0] * 10)
    assert sum(rates[:9]) == pytest.approx(18.0)


def test_private_pools_share_only_the_rank_limit():
    assert fair_rates([0, 0, 1], {0: 32.0, 1: 32.0}, None) == [16.0, 16.0, 32.0]


def test_zero_means_unlimited():
    assert fair_rates([0, 1], {0: 0, 1: 10.0}, 0) == [math.inf, 10.0]
    assert fair_rates([0, 0], {0: None}, 30.0) == [15.0, 15.0]


def test_no_transfers():
    assert fair_rates([], {}, 80.0) == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12),
       st.dictionaries(st.integers(0, 4), st.floats(0.5, 100), min_size=5, max_size=5),
       st.floats(0.5, 300))
def test_caps_hold_and_no_bandwidth_is_left_idle(groups, limits, pool):
    rates = fair_rates(groups, limits, pool)
    by_group = {}
    for g, r in zip(groups, rates):
        by_group[g] = by_group.get(g, 0.0) + r
    assert sum(rates) <= pool * (1 + 1e-9)  # the pool cap holds
    for g, total in by_group.items():
        assert total <= limits[g] * (1 + 1e-9)  # every rank cap holds
    # Pareto: a transfer below the common maximum is held back by its rank cap or the pool cap
    pool_full = sum(rates) >= pool * (1 - 1e-9)
    for g, r in zip(groups, rates):
        rank_full = by_group[g] >= limits[g] * (1 - 1e-9)
        assert pool_full or rank_full
    # max-min: no transfer of an unsaturated rank gets less than any other transfer
    for g, r in zip(groups, rates):
        if by_group[g] < limits[g] * (1 - 1e-9):
            assert r >= max(rates) * (1 - 1e-9)
