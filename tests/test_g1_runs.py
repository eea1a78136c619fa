"""G1 with its free queue as runs (runtime/tiers/g1_runs.py) against the per-block pool it replaces (g1.py).

The rule (issue 20): only the representation changes.  Driven by the same random admissions, hits, decode
allocations and releases, `RunPool` hands out the same blocks in the same order, evicts the same keys (the
same KV events) and keeps the same free queue as `BlockPool`, including when prefix hits punch holes into
runs, when an allocation takes the front of a run (or one block, a decode's), and when holes force a compaction.
"""
from __future__ import annotations

import random

from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.g1_runs import RunPool


def state(pool) -> tuple:
    return (list(pool.free), pool.free_count, dict(pool.cached), pool.evictions, list(pool.events or ()),
            pool.ref[:pool.created], pool.key_of[:pool.created], pool.copies, sorted(pool.awaited))


def admit_both(plain, pool, hits: list[int], need: int) -> list[int] | None:
    """`plain` and `pool` both admit a request whose cached prefix is `hits`, with `need` new blocks, and hand out
    the same blocks: the request's blocks, or None when it does not fit in either."""
    assert pool.free_among(hits) == plain.free_among(hits)
    if not plain.can_allocate(need, hits):
        assert not pool.can_allocate(need, hits)
        return None
    plain.touch(hits)
    pool.touch(hits)
    new = plain.allocate(need)
    assert pool.allocate(need) == new
    return hits + new


def check_copies(pool) -> None:
    """Every keyed block is its key's first copy or one of its other copies (test_g1_copies.py)."""
    keyed = [(key, block) for block, key in enumerate(pool.key_of[:pool.created]) if key is not None]
    copies = pool.copies or {}
    assert sorted(keyed) == sorted([(key, block) for key, block in pool.cached.items()]
                                   + [(key, block) for key, blocks in copies.items() for block in blocks])
    assert all(blocks for blocks in copies.values()) and set(copies) <= set(pool.cached)


def drive(seed: int, capacity: int, steps: int, prompts: int, prompt_blocks: int, caching: bool = True,
          events: bool = True, copies: bool = False, scattered: bool = False) -> int:
    """Mirror random traffic on both pools, comparing after every step; returns the evictions seen.  Without
    `events` RunPool takes its paths that build no lists of stored and evicted keys; with `copies` both keep
    copies and hits are cut short at random, so cached blocks are computed again."""
    rng = random.Random(seed)
    plain, runs = BlockPool(capacity, caching), RunPool(capacity, caching)
    if copies:
        plain.keep_copies()
        runs.keep_copies()
    if events:
        plain.events, runs.events = [], []
    # a few shared prompt chains (keys k * 1000 + i), so requests hit each other's prefixes
    chains = [[p * 1000 + i for i in range(prompt_blocks)] for p in range(prompts)]
    if scattered:  # chains sharing a tail of keys, keys out of order, gaps, negative keys (output blocks')
        chains = [[30, 31, 32, 33, 5, 4, 900, 902, 901, -1, -2, -3, -33, -34],
                  [30, 31, 32, 64, 65, 66, 67, 5, 6, 7, -1, -2, -40, -41],
                  [95, 96, 97, 98, 99, 100, 901, 902, 903, 904, -33, -34, -35, -36]]
    live: list[list[int]] = []  # the block lists of requests holding blocks
    for _ in range(steps):
        if live and plain.free_count and rng.random() < 0.2:  # a decode crossing a block boundary: one block
            new = plain.allocate(1)
            assert runs.allocate(1) == new
            live[rng.randrange(len(live))].extend(new)
        elif live and (rng.random() < 0.45 or plain.free_count < prompt_blocks):
            blocks = live.pop(rng.randrange(len(live)))
            plain.release(blocks)
            runs.release(blocks)
        else:
            keys = chains[rng.randrange(prompts)][:rng.randint(1, prompt_blocks)]
            hits = plain.match(keys, len(keys) - 1)
            assert runs.match(keys, len(keys) - 1) == hits
            if copies:
                hits = hits[:rng.randint(0, len(hits))]
            need = len(keys) - len(hits) + rng.randint(0, 2)  # (+ blocks a decode or a partial block takes)
            blocks = admit_both(plain, runs, hits, need)
            if blocks is None:
                continue
            stop = min(len(keys), len(blocks))
            plain.register_run(blocks, keys, len(hits), stop)
            runs.register_run(blocks, keys, len(hits), stop)
            live.append(blocks)
        assert state(runs) == state(plain)
        check_copies(plain)
    return plain.evictions


def test_run_pool_matches_the_block_pool_under_random_traffic():
    for seed in range(6):
        assert drive(seed, capacity=48, steps=400, prompts=5, prompt_blocks=12) > 0  # (evictions did happen)


def test_run_pool_matches_without_kv_events():
    for seed in range(6):
        assert drive(seed, capacity=48, steps=400, prompts=5, prompt_blocks=12, events=False) > 0


def test_run_pool_matches_with_keys_out_of_order_across_groups():
    # keys that are not one run (gaps, keys out of order, negative keys as output blocks', keys another chain
    # cached): any representation of the cached map by runs of keys (facts §56) must keep these exact too
    for seed in range(6):
        assert drive(seed, capacity=30, steps=400, prompts=3, prompt_blocks=14, scattered=True) > 0
        drive(seed, capacity=30, steps=300, prompts=3, prompt_blocks=14, events=False, scattered=True)
        drive(seed, capacity=30, steps=300, prompts=3, prompt_blocks=14, copies=True, scattered=True)


def test_run_pool_matches_without_prefix_caching():
    for seed in range(3):
        drive(seed, capacity=48, steps=300, prompts=5, prompt_blocks=12, caching=False)


def test_keyless_blocks_go_to_the_head_in_release_order():
    pool = RunPool(8)
    cached, other = pool.allocate(4), pool.allocate(4)  # [0..3], [4..7]
    pool.register_run(cached, [10, 11, 12, 13], 0, 4)
    pool.register_run(other, [20, 21], 0, 2)  # blocks 6 and 7 hold no key (a partial block, a decode block)
    pool.release(cached)  # tail: 3 2 1 0
    pool.release(other)  # keyed 5 4 to the tail; keyless 7 6 (release order: last block first) to the head
    assert list(pool.free) == [7, 6, 3, 2, 1, 0, 5, 4]
    assert pool.allocate(3) == [7, 6, 3]  # empty memory first, then the oldest cached block (key 13)
    assert pool.evictions == 1 and 13 not in pool.cached


def test_run_pool_matches_with_many_holes_and_compaction():
    # a large pool of short prompts that hit often: many holes in runs far from the head, enough to compact
    pool_evictions = drive(7, capacity=6000, steps=6000, prompts=3, prompt_blocks=40)
    assert pool_evictions >= 0
    pool = RunPool(10_000)
    blocks = pool.allocate(9000)
    keys = list(range(9000))
    pool.register_run(blocks, keys, 0, 9000)
    pool.release(blocks)
    pool.touch(pool.match(keys, 9000))  # 9,000 holes, no free block in the queue: over the compaction margin
    assert (pool.free_count, len(pool.free)) == (1000, 0)
    pool.release(blocks[:10])  # the next release compacts: only its 10 blocks are left in the queue
    assert list(pool.free) == blocks[:10][::-1]
    assert len(pool._runs) == 1 and pool._holes == 0


def test_allocation_takes_the_front_of_a_run_and_leaves_the_rest_in_order():
    pool = RunPool(6)
    first = pool.allocate(6)
    pool.register_run(first, [10, 11, 12, 13, 14, 15], 0, 6)
    pool.release(first)  # queue: 5 4 3 2 1 0 (last block first)
    pool.touch([3])  # a hit takes block 3 (key 13) out of the middle
    assert pool.allocate(2) == [5, 4]  # the head of the run, keys 15 and 14 evicted
    assert list(pool.free) == [2, 1, 0]
    assert sorted(pool.cached) == [10, 11, 12, 13]
    assert pool.allocate(3) == [2, 1, 0]
    assert pool.free_count == 0 and pool.evictions == 5


def test_run_pool_matches_with_copies_and_without_kv_events():
    # the no-events fast paths must give way to the general ones when copies are kept
    for seed in range(4):
        assert drive(seed, capacity=48, steps=400, prompts=5, prompt_blocks=12, events=False, copies=True) > 0
