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


def test_io_slots_make_transfers_wait_first_come_first_served():
    """Two slots, three 1 MB transfers at 0, 0.1 and 0.2 ms under a 1 GB/s rank limit shared by the movers: a moves
    0.1 ms alone, then a and b at 0.5 GB/s, so a ends at 1.9 ms; c waits for that slot (1.7 ms), moves beside b
    until b's last 0.1 MB is done (2.1 ms), then alone: 3.0 ms."""
    link = Link({0: 1.0}, slots=2)
    a, b, c = (link.new(0, 1_000_000) for _ in range(3))
    link.start_moving(a, 0)
    link.start_moving(b, 100_000)
    link.start_moving(c, 200_000)
    assert link.moving == [a, b] and list(link.queued) == [c]
    assert link.next_done() == (1_900_000, a)
    link.finish(a, 1_900_000)
    assert link.moving == [b, c] and not link.queued and link.slot_wait_ns == 1_700_000
    assert link.next_done() == (2_100_000, b)
    link.finish(b, 2_100_000)
    assert link.next_done() == (3_000_000, c)
    link.finish(c, 3_000_000)
    assert link.bytes_moved == 3_000_000


def test_without_slots_every_transfer_moves_at_once():
    link = Link({0: 1.0})
    transfers = [link.new(0, 1_000_000) for _ in range(3)]
    for t in transfers:
        link.start_moving(t, 0)
    assert len(link.moving) == 3 and not link.queued and link.next_done() == (3_000_000, transfers[0])
