"""Transfers sharing a link: completion times as rates change when transfers start and end."""
from __future__ import annotations

from kvreplay.runtime.links.transfers import Link


def test_a_lone_transfer_moves_at_its_rank_limit():
    link = Link({0: 32.0})
    t = link.new(0, 32_000_000)  # 32 MB at 32 GB/s = 1 ms
    link.start_moving(t, 0)
    assert link.next_done() == (1_000_000, t)


def test_a_second_transfer_halves_the_rate_and_the_first_speeds_up_when_it_ends():
    link = Link({0: 32.0})
    a, b = link.new(0, 32_000_000), link.new(0, 16_000_000)
    link.start_moving(a, 0)
    link.start_moving(b, 500_000)  # a has 16 MB left; both now at 16 GB/s
    when, first = link.next_done()
    assert (when, first) == (1_500_000, a)  # a: 16 MB at 16 GB/s = 1 ms more; b has 0 MB left at the same time
    link.finish(a, when)
    assert link.next_done() == (1_500_000, b)
    link.finish(b, 1_500_000)
    # each waited 0.5 ms beyond its solo time (a: 1.5 vs 1.0 ms, b: 1.0 vs 0.5 ms)
    assert link.waited_ns == 1_000_000 and link.bytes_moved == 48_000_000


def test_shared_pool_caps_ranks_together():
    link = Link({0: 32.0, 1: 32.0, 2: 32.0, 3: 32.0}, pool_limit=80.0)
    transfers = [link.new(r, 20_000_000) for r in range(4)]
    for t in transfers:
        link.start_moving(t, 0)
    assert [t.rate for t in transfers] == [20.0] * 4
    assert link.next_done() == (1_000_000, transfers[0])


def test_unlimited_bandwidth_finishes_at_once():
    link = Link({0: 0})
    t = link.new(0, 10**9)
    link.start_moving(t, 7)
    assert link.next_done() == (7, t)
