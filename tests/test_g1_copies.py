"""G1 keeping every computed copy of a key (`BlockPool.keep_copies`, on ranks with state snapshots; facts §45).

The mocker's vLLM pool lets a cached hash have several physical copies: a block computed again while its key is
cached (a state cache resumes only at a snapshot, so the cached token blocks past it are recomputed) is cached
too.  A lookup finds the oldest copy; evicting it makes the next one the copy found, and only the last copy's
eviction removes the key (one eviction, one "Removed" event).  A copy is freed to the queue's tail like any
cached block, where a pool without copies frees the recomputed block as keyless memory to its head.
"""
from __future__ import annotations

import pytest

from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.g1_runs import RunPool

from .test_g1_runs import drive


def _two_copies(kind):
    pool = kind(6)
    pool.keep_copies()
    pool.events = []
    first, again = pool.allocate(2), pool.allocate(2)  # blocks [0, 1], then [2, 3]: keys 10, 11 computed twice
    pool.register_run(first, [10, 11], 0, 2)
    pool.register_run(again, [10, 11], 0, 2)
    return pool, first, again


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_a_recomputed_block_is_a_cached_copy(kind):
    pool, first, again = _two_copies(kind)
    assert pool.cached == {10: 0, 11: 1} and pool.copies == {10: [2], 11: [3]}
    assert pool.key_of[:4] == [10, 11, 10, 11]
    assert pool.events == [("Stored", [10, 11])]  # (a copy makes no key newly visible)
    pool.release(first)
    pool.release(again)
    assert list(pool.free) == [1, 0, 3, 2]  # copies at the tail, last block first, as cached blocks


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_evicting_the_first_copy_leaves_the_next_one_found(kind):
    pool, first, again = _two_copies(kind)
    pool.release(first)
    pool.release(again)
    assert pool.allocate(2) == [4, 5]  # never-used blocks first
    assert pool.allocate(1) == [1]  # key 11's first copy: block 3 is found now, nothing is evicted
    assert pool.match([10, 11], 2) == [0, 3] and pool.evictions == 0
    assert pool.allocate(2) == [0, 3]  # key 10 passes to block 2; block 3 was key 11's last copy
    assert pool.match([10, 11], 2) == [2] and pool.cached == {10: 2} and pool.copies == {}
    assert pool.evictions == 1 and pool.events[-1] == ("Removed", [11])


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_without_copies_a_recomputed_block_is_keyless_memory(kind):
    pool = kind(6)
    first, again = pool.allocate(2), pool.allocate(2)
    pool.register_run(first, [10, 11], 0, 2)
    pool.register_run(again, [10, 11], 0, 2)
    assert pool.copies is None and pool.key_of[2:4] == [None, None]
    pool.release(first)
    pool.release(again)
    assert list(pool.free) == [3, 2, 1, 0]  # the recomputed blocks at the head: handed out first


def test_run_pool_matches_the_block_pool_with_copies():
    """Random traffic whose hits are cut short (resumes at a snapshot), so keys get copies; both pools agree after
    every step, and every keyed block is its key's first copy or one of its copies."""
    for seed in range(6):
        assert drive(seed, capacity=48, steps=400, prompts=5, prompt_blocks=12, copies=True) > 0
