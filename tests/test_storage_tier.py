"""A storage tier (G3's configuration of the one tier shape): background writes, LRU over idle blocks, reads and
cross-worker accounting."""
from __future__ import annotations

from kvreplay.runtime.links.transfers import Link
from kvreplay.runtime.outputs.sections import LAYOUTS, _summed
from kvreplay.runtime.tiers.lru_order import FifoOrder, KeepAll, LruOrder
from kvreplay.runtime.tiers.tier import IN_FLIGHT, READY, STORAGE_RULES, Tier


def pool(capacity: int = 4, scope: str = "cluster_shared") -> Tier:
    return Tier("g3", scope, capacity, 1_000_000, STORAGE_RULES, Link({0: 10.0, 1: 10.0}), Link({0: 10.0, 1: 10.0}),
                LruOrder(), group_by="worker", label="g3", store_policy="write_back", section="g3_offload", layout="storage")


def section(tiers: list) -> dict:
    return _summed(tiers, LAYOUTS["storage"][1])


def test_writes_are_in_flight_until_they_land_and_only_then_hit():
    g3 = pool()
    assert g3.reserve([1, 2], writer=0) == [1, 2]
    assert g3.entries == {1: IN_FLIGHT, 2: IN_FLIGHT}
    assert g3.lookup([1, 2], 0, 2) == (0, False)  # a block still being written is no hit (and no wait)
    g3.landed([1, 2])
    assert g3.lookup([1, 2, 3], 0, 3) == (2, False) and g3.lookup_hits == 2
    assert g3.reserve_jobs == 1


def test_lru_skips_blocks_being_written_or_read_and_hits_refresh():
    g3 = pool(capacity=3)
    g3.reserve([1, 2, 3], writer=0)
    g3.landed([1, 2])  # 3 is still being written
    g3.start_read([1], 0)  # 1 is being read
    assert g3.reserve([4], writer=0) == [4] and 2 not in g3.entries  # 2: the only idle ready block
    g3.read_done([1])
    g3.landed([3, 4])
    g3.lookup([1], 0, 1)  # 1 becomes the most recently used
    assert g3.reserve([5], writer=0) == [5] and 3 not in g3.entries
    assert g3.evictions == 2


def test_no_room_drops_the_write():
    g3 = pool(capacity=1)
    g3.reserve([1], writer=0)
    assert g3.reserve([2], writer=0) == [] and g3.dropped == 1  # the only block is still being written


def test_shared_blocks_are_read_by_other_workers():
    g3 = pool()
    g3.reserve([7, 8], writer=0)
    g3.landed([7, 8])
    g3.start_read([7, 8], reader=1)
    assert g3.cross_worker_read_blocks == 2 and g3.read_jobs == 1
    assert section([g3])["cross_worker_read_blocks"] == 2 and "bypassed_restores" not in section([g3])
    assert g3.entries == {7: READY, 8: READY}


def test_a_fifo_tier_evicts_by_arrival_whatever_hits_it():
    """The same tier with a FIFO order: a hit (or a landing) does not move a key, so the first written goes first;
    with KeepAll nothing is evicted and a full tier drops the copy."""
    fifo = Tier("g3", "worker_local", 2, 1, STORAGE_RULES, Link({0: 1.0}), Link({0: 1.0}), FifoOrder())
    fifo.reserve([1, 2], writer=0)
    fifo.landed([2, 1])
    assert fifo.lookup([1], 0, 1) == (1, False)  # a use, which LRU would count
    assert fifo.reserve([3], writer=0) == [3] and list(fifo.entries) == [2, 3]
    keep = Tier("g3", "worker_local", 2, 1, STORAGE_RULES, Link({0: 1.0}), Link({0: 1.0}), KeepAll())
    keep.reserve([1, 2], writer=0)
    keep.landed([1, 2])
    assert keep.reserve([3], writer=0) == [] and keep.dropped == 1 and keep.evictions == 0


class _Clock:
    def __init__(self, now: int = 0):
        self.now = now


def test_a_ttl_keeps_a_key_immune_after_its_last_use_and_eviction_stops_at_the_first_protected():
    """LRU with a 10 ms TTL in a 3-block tier: 1 (used at 0), 2 (used at 5 ms) and 3 (used at 20 ms).  At 14 ms
    only 1 is outside its window: a reserve of two keys evicts 1, stops at 2 (the oldest still protected: every
    later key is newer) and takes one key.  At 16 ms 2 is outside too; a hit at 16 ms renews 3."""
    clock = _Clock()
    tier = Tier("g3", "worker_local", 3, 1, STORAGE_RULES, Link({0: 1.0}), Link({0: 1.0}), LruOrder(10_000_000, clock))
    for key, at in ((1, 0), (2, 5_000_000), (3, 20_000_000)):
        clock.now = at
        tier.reserve([key], writer=0)
        tier.landed([key])
    clock.now = 14_000_000
    assert tier.reserve([4, 5], writer=0) == [4] and list(tier.entries) == [2, 3, 4] and tier.dropped == 1
    tier.landed([4])
    clock.now = 16_000_000
    assert tier.lookup([3], 0, 1) == (1, False)  # 3 used again: newest, renewed
    assert tier.reserve([6], writer=0) == [6] and list(tier.entries) == [4, 3, 6]
    clock.now = 40_000_000
    assert tier.order.evict(3, set(), {}, {}) == [4, 3, 6]  # all windows over: plain LRU
