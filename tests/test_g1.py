"""G1 block pool (runtime/g1.py): vLLM's prefix cache on one rank.

Rules checked (REFERENCE.md "vLLM G1 details worth matching", spec "GPU cache (G1)"): never-used blocks
first in id order; freed blocks join an LRU free queue tail first, so a request's last block is evicted
first; eviction forgets the key; a hit takes a free block out of the queue; reference counts for shared
prefixes; lookups stop at the first miss; only full blocks are keyed; `prefix_caching: false` never reuses.
Keys here are small explicit integers (the pool treats keys as opaque).
"""
from __future__ import annotations

from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.pass_results import finish_pass
from kvreplay.runtime.serving.scheduler import Rank, schedule

BS = 4


def keyed(pool: BlockPool, blocks: list[int], keys: list[int]) -> None:
    """Register every block of `blocks` under the matching key."""
    pool.register_run(blocks, keys, 0, len(keys))


def free_queue(pool: BlockPool) -> list[int]:
    """Free blocks in eviction order (head first)."""
    return list(pool.free)


# --- allocation order ------------------------------------------------------------

def test_never_used_blocks_come_first_in_id_order():
    """Fresh blocks are handed out in id order, 0 first."""
    pool = BlockPool(4)
    assert pool.allocate(2) == [0, 1]
    assert pool.allocate(1) == [2]
    assert (pool.free_count, pool.used_count) == (1, 3)
    assert pool.ref[:3] == [1, 1, 1]


def test_never_used_blocks_are_taken_before_freed_ones():
    """A freed block waits behind every never-used block (vLLM's initial free queue holds all ids in order)."""
    pool = BlockPool(4)
    first = pool.allocate(2)  # [0, 1]
    pool.release(first)
    assert free_queue(pool) == [1, 0]
    assert pool.allocate(2) == [2, 3]  # fresh ones, not 1 and 0
    assert pool.allocate(2) == [1, 0]  # then the LRU head


def test_allocation_mixes_fresh_then_lru():
    """A request for more blocks than remain fresh takes the fresh ones, then the free queue's head."""
    pool = BlockPool(3)
    pool.release(pool.allocate(2))  # free queue [1, 0], block 2 never used
    assert pool.allocate(2) == [2, 1]
    assert free_queue(pool) == [0]


# --- LRU order and eviction ---------------------------------------------------------

def test_release_is_tail_first_so_the_last_block_is_evicted_first():
    """A finished request releases its blocks last block first: its last block heads the LRU queue."""
    pool = BlockPool(3)
    blocks = pool.allocate(3)
    keyed(pool, blocks, [100, 101, 102])
    pool.release(blocks)
    assert free_queue(pool) == [2, 1, 0]
    assert pool.allocate(1) == [2]
    # the prefix survives, only its tail was evicted
    assert pool.match([100, 101, 102], 3) == [0, 1]


def test_older_requests_are_evicted_before_newer_ones():
    """Free blocks are LRU across requests: blocks released earlier are evicted before ones released later."""
    pool = BlockPool(4)
    a, b = pool.allocate(2), pool.allocate(2)  # a = [0, 1], b = [2, 3]
    keyed(pool, a, [10, 11])
    keyed(pool, b, [20, 21])
    pool.release(a)
    pool.release(b)
    assert free_queue(pool) == [1, 0, 3, 2]
    assert pool.allocate(3) == [1, 0, 3]
    assert pool.match([10, 11], 2) == []
    assert pool.match([20, 21], 2) == [2]  # b's first block, released last, survives
    assert pool.cached == {20: 2}


def test_eviction_removes_the_key():
    """Reusing a free keyed block for new KV forgets its key: a later lookup misses."""
    pool = BlockPool(2)
    blocks = pool.allocate(2)
    keyed(pool, blocks, [100, 101])
    pool.release(blocks)
    assert pool.match([100, 101], 2) == [0, 1]
    assert pool.allocate(1) == [1]
    assert pool.match([101], 1) == []
    assert pool.match([100, 101], 2) == [0]
    assert pool.key_of[1] is None and 101 not in pool.cached
    assert pool.evictions == 1


def test_evicting_an_unkeyed_block_counts_nothing():
    """A free block that never held a full keyed block evicts no key."""
    pool = BlockPool(1)
    pool.release(pool.allocate(1))
    pool.events = []
    assert pool.allocate(1) == [0]
    assert pool.evictions == 0 and pool.events == []


def test_evictions_are_recorded_as_removed_events_in_eviction_order_when_enabled():
    """With `events` set to a list, each allocation that evicts appends ("Removed", keys) in eviction order,
    and registering keys appends ("Stored", keys)."""
    pool = BlockPool(3)
    assert pool.events is None  # off by default
    pool.events = []
    blocks = pool.allocate(3)
    keyed(pool, blocks[:2], [100, 101])  # block 2 holds a partial block: no key
    assert pool.events == [("Stored", [100, 101])]
    pool.release(blocks)  # free queue [2, 1, 0]
    pool.events.clear()
    assert pool.allocate(2) == [2, 1]
    assert pool.events == [("Removed", [101])]
    assert pool.allocate(1) == [0]
    assert pool.events == [("Removed", [101]), ("Removed", [100])]
    assert pool.evictions == 2


def test_evictions_are_not_recorded_by_default():
    """Without a list in `events`, evictions are only counted."""
    pool = BlockPool(1)
    blocks = pool.allocate(1)
    keyed(pool, blocks, [7])
    pool.release(blocks)
    pool.allocate(1)
    assert pool.events is None and pool.evictions == 1


# --- hits -----------------------------------------------------------------------------

def test_a_touched_free_block_leaves_the_free_queue():
    """A hit on a free block takes it out of the LRU queue (it cannot be evicted while held)."""
    pool = BlockPool(3)
    blocks = pool.allocate(3)
    keyed(pool, blocks[:2], [100, 101])
    pool.release(blocks)  # [2, 1, 0]
    hits = pool.match([100, 101], 1)
    assert hits == [0]
    pool.touch(hits)
    assert free_queue(pool) == [2, 1]
    assert pool.ref[0] == 1 and pool.free_count == 2
    assert pool.allocate(2) == [2, 1]  # block 0 is not a candidate
    assert pool.match([100], 1) == [0]
    # released again, the hit block joins the tail: most recently used
    pool.release([2, 1])
    pool.release([0])
    assert free_queue(pool) == [1, 2, 0]


def test_shared_prefix_block_is_freed_only_when_both_requests_release_it():
    """Two requests sharing a prefix hold its blocks twice; a block is free only at reference count 0."""
    pool = BlockPool(4)
    a = pool.allocate(2)  # request A: blocks [0, 1]
    keyed(pool, a, [100, 101])
    hits = pool.match([100, 101, 102], 3)  # request B shares both blocks and needs one more
    assert hits == [0, 1]
    pool.touch(hits)
    b = hits + pool.allocate(1)
    assert b == [0, 1, 2]
    assert pool.ref[:3] == [2, 2, 1]
    pool.release(a)
    assert pool.ref[:3] == [1, 1, 1]
    assert free_queue(pool) == [] and pool.free_count == 1  # only never-used block 3
    pool.release(b)
    assert free_queue(pool) == [2, 1, 0]
    assert pool.free_count == 4


def test_match_stops_at_the_first_miss():
    """Lookup walks the chain and stops at the first miss, even if later keys are cached."""
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    keyed(pool, blocks, [100, 101, 102])
    assert pool.match([100, 999, 102], 3) == [0]
    assert pool.match([999, 101, 102], 3) == []
    assert pool.match([100, 101, 102], 3) == [0, 1, 2]


def test_match_respects_the_limit():
    """`match` returns at most `limit` blocks."""
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    keyed(pool, blocks, [100, 101, 102])
    assert pool.match([100, 101, 102], 2) == [0, 1]
    assert pool.match([100, 101, 102], 0) == []


def test_a_key_already_cached_keeps_its_block():
    """Registering a key that is already cached leaves the first block discoverable; the duplicate stays
    unkeyed, so evicting it forgets nothing."""
    pool = BlockPool(3)
    first = pool.allocate(1)
    keyed(pool, first, [100])
    dup = pool.allocate(1)
    keyed(pool, dup, [100])
    assert pool.cached == {100: 0} and pool.key_of[1] is None
    pool.release(dup)
    pool.allocate(2)  # fresh block 2, then the duplicate 1
    assert pool.match([100], 1) == [0] and pool.evictions == 0


# --- free-block arithmetic --------------------------------------------------------------

def test_free_count_and_can_allocate():
    """free_count = free queue + never-used blocks; touching free blocks uses them up for can_allocate."""
    pool = BlockPool(5)
    blocks = pool.allocate(3)  # [0, 1, 2]; 3 and 4 never used
    assert (pool.free_count, pool.used_count) == (2, 3)
    keyed(pool, blocks[:1], [100])
    pool.release(blocks[:1])  # block 0 free but cached
    assert (pool.free_count, pool.used_count) == (3, 2)
    assert pool.can_allocate(3) and not pool.can_allocate(4)
    assert not pool.can_allocate(3, [0])  # a hit on free block 0 takes it out of the queue
    assert pool.can_allocate(2, [0])
    assert pool.can_allocate(3, [1])  # touching a held block costs nothing
    assert pool.free_among([0, 1, 2]) == 1


def test_lazy_pool_creates_only_used_blocks():
    """Never-used blocks exist only as a count: a huge pool costs memory only for the blocks used."""
    pool = BlockPool(10 ** 9)
    assert pool.allocate(3) == [0, 1, 2]
    assert len(pool.ref) == 3 and pool.free_count == 10 ** 9 - 3


# --- through the scheduler: only full blocks keyed, caching off ------------------------

def _request(index: int, segments, prompt: int, output: int) -> Request:
    spec = RequestSpec(index, prompt, output, Content(segments=segments), arrival_ns=0)
    return Request(spec, 0, 0, BS)


def _run_to_completion(rank: Rank, now: int = 0) -> int:
    while rank.busy:
        batch = schedule(rank, now)
        assert batch is not None
        now += 10
        finish_pass(rank, batch, now)
    return now


def test_partial_blocks_are_never_keyed():
    """After a 10-token prompt with block size 4, only blocks 0 and 1 (full) are discoverable; the third
    block, holding tokens 8..9, carries no key."""
    pool = BlockPool(8)
    rank = Rank(0, 0, pool, BS, 64, 4, True)
    request = _request(0, ((1, 0, 10), (2, 0, 1)), 10, 1)  # 11 tokens in all: 2 full blocks
    rank.waiting.append(request)
    batch = schedule(rank, 0)
    assert batch.items == [(request, 10)]
    assert request.blocks == [0, 1, 2]
    assert pool.cached == {request.keys[0]: 0, request.keys[1]: 1}
    assert pool.key_of[2] is None
    finish_pass(rank, batch, 10)  # output 1: done, blocks released
    assert free_queue(pool) == [2, 1, 0]
    assert len(pool.cached) == 2


def test_prefix_caching_off_never_reuses():
    """caching=False: nothing is keyed, lookups always miss, an identical prompt recomputes everything."""
    pool = BlockPool(8, caching=False)
    rank = Rank(0, 0, pool, BS, 64, 4, True)
    segments = ((1, 0, 9), (2, 0, 1))
    first = _request(0, segments, 9, 1)
    rank.waiting.append(first)
    _run_to_completion(rank)
    assert pool.cached == {} and all(k is None for k in pool.key_of)
    assert pool.match(first.keys, 2) == []
    second = _request(1, segments, 9, 1)
    rank.waiting.append(second)
    batch = schedule(rank, 100)
    assert batch.items == [(second, 9)]
    assert second.admissions[0]["reused_input_tokens"] == 0
    assert second.blocks == [3, 4, 5]  # never-used blocks first, no cached hit


def test_prefix_caching_on_reuses_the_same_prompt():
    """The control for the test above: with caching on, the identical prompt reuses its two full blocks."""
    pool = BlockPool(8)
    rank = Rank(0, 0, pool, BS, 64, 4, True)
    segments = ((1, 0, 9), (2, 0, 1))
    rank.waiting.append(_request(0, segments, 9, 1))
    _run_to_completion(rank)
    second = _request(1, segments, 9, 1)
    rank.waiting.append(second)
    batch = schedule(rank, 100)
    assert batch.items == [(second, 1)]
    assert second.admissions[0]["reused_input_tokens"] == 8
    assert second.blocks == [0, 1, 3]
