"""GPU APC's block pool (runtime/tiers/apc.py): LRU over idle blocks with ref counting, free memory first, the TTL
stopping eviction at the first protected block, the eviction hook and log records, and a request that waits while
only protected blocks are idle being admitted at the expiry."""
from __future__ import annotations

from dataclasses import replace

from kvreplay.compiler.opal_records import ApcPlan, KvcPlan, OpalPlan, RouterPlan
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build
from kvreplay.runtime.shell.clock import Clock
from kvreplay.runtime.tiers.apc import ApcPool
from kvreplay.runtime.tiers.apc_writers import victims
from kvreplay.runtime.tiers.apc_queue import IdleQueue
from kvreplay.runtime.tiers.apc_log import format_apc_enabled, format_lru_evict

from .scenarios import MS, aggregated_config, compile_scenario, row


def pool(capacity: int, ttl_ns: int = 0) -> tuple[ApcPool, Clock]:
    clock = Clock()
    return ApcPool(capacity, clock, ttl_ns), clock


def written(apc: ApcPool, keys: list[int], writer: str) -> list[int]:
    """Allocate and key one block per key, as a request `writer` would."""
    blocks = apc.allocate(len(keys))
    apc.register_run(blocks, keys, 0, len(keys), writer)
    return blocks


# ---------------------------------------------------------------- LRU and ref counting

def test_a_shared_prefix_bumps_the_same_blocks_and_they_go_idle_tail_first_on_the_last_release():
    apc, _ = pool(6)
    a = written(apc, [10, 11, 12], "A")
    assert a == [0, 1, 2]
    hits = apc.match([10, 11, 12, 13], 4)
    assert hits == [0, 1, 2]
    apc.touch(hits)  # a second request shares the prefix: the same blocks, two references
    assert apc.ref == [2, 2, 2]
    apc.release(a)
    assert apc.idle_count == 0 and apc.pinned_count == 3 and apc.free_count == 3  # still pinned by the second
    apc.release(hits)
    assert apc.idle_blocks() == [2, 1, 0]  # tail first: the last block is the oldest
    assert apc.free_count == 6 and apc.plain_free == 3 and apc.pinned_count == 0


def test_eviction_takes_never_used_then_free_memory_then_the_lru_end():
    apc, _ = pool(6)
    evicted = []
    apc.on_evict = lambda p, keys, runs: evicted.append(victims(keys, runs))
    a = written(apc, [10, 11, 12], "A")
    b = written(apc, [20, 21], "B")
    scratch = apc.allocate(1)  # block 5, never keyed
    apc.release(a)
    apc.release(b)
    apc.release(scratch)
    assert apc.idle_blocks() == [2, 1, 0, 4, 3] and list(apc.free) == [5]
    assert apc.allocate(1) == [5] and apc.inline_evictions == 0  # free memory before any idle block
    assert apc.allocate(3) == [2, 1, 0]  # then the LRU end, A's last block first
    assert evicted == [[(12, "A", 2), (11, "A", 1), (10, "A", 0)]]  # one batch: (key, writer, chain index) columns
    assert apc.inline_evictions == 3 and apc.evictions == 3 and apc.proactive_evictions == 0
    assert 10 not in apc.cached and apc.cached == {20: 3, 21: 4}
    assert apc.match([10], 1) == []


def test_with_a_ttl_a_matched_idle_block_becomes_the_newest():
    apc, clock = pool(4, ttl_ns=1)
    a = written(apc, [1, 2], "A")
    b = written(apc, [3, 4], "B")
    apc.release(a)
    apc.release(b)
    assert apc.idle_blocks() == [1, 0, 3, 2]
    clock.now = 5
    assert apc.match([1, 2], 2) == [0, 1]  # a lookup is an access (it waits: no touch)
    assert apc.idle_blocks() == [3, 2, 1, 0]
    assert apc.evict(2) == 2 and apc.idle_blocks() == [1, 0] and apc.proactive_evictions == 2
    assert sorted(apc.free) == [2, 3] and apc.free_count == 2  # the looked-up pair is protected until 6 ns
    clock.now = 6
    assert apc.free_count == 4


def test_without_a_ttl_a_lookup_leaves_the_order_as_vllm_does():
    apc, clock = pool(4)
    apc.release(written(apc, [1, 2], "A"))
    apc.release(written(apc, [3, 4], "B"))
    clock.now = 5
    assert apc.match([1, 2], 2) == [0, 1] and apc.idle_blocks() == [1, 0, 3, 2]


# ---------------------------------------------------------------- TTL

def test_ttl_skips_blocks_inside_their_window_and_eviction_stops_at_the_first_protected():
    """TTL 10 ns.  A's blocks released at 0, B's at 5: at 12 A's are outside their window, B's inside (until 15).
    An eviction of 3 takes A's two and stops at B's first: ttl_skipped counts the 2 protected blocks left."""
    apc, clock = pool(4, ttl_ns=10)
    apc.evict_log = []
    a = written(apc, [1, 2], "A")
    apc.release(a)
    clock.now = 5
    b = written(apc, [3, 4], "B")
    apc.release(b)
    clock.now = 12
    assert apc.free_count == 2 and apc.protected_count == 2 and apc.next_expiry() == 15
    assert not apc.can_allocate(3) and apc.can_allocate(2)
    assert apc.evict(3) == 2 and apc.idle_blocks() == [3, 2] and apc.ttl_skipped == 2
    (stats,) = apc.evict_log
    assert format_lru_evict(stats) == ("[LRU.evict] requested=3 evicted=2 | scanned=3 ttl_skipped=2 | "
                                       "eviction_queue=2 pinned=0 resident=2 (pinned NOT scanned)")
    clock.now = 14
    assert apc.evict(1) == 0 and apc.ttl_skipped == 4
    clock.now = 15  # immune for 10 ns after the access at 5: free at 15
    assert apc.free_count == 4 and apc.next_expiry() is None
    assert apc.evict(5) == 2 and apc.ttl_skipped == 4  # (stopped short for want of idle blocks, none protected)


def test_release_counts_as_access_and_a_long_hold_is_protected_after_it():
    apc, clock = pool(2, ttl_ns=10)
    a = written(apc, [1, 2], "A")  # held from 0 ...
    clock.now = 100
    apc.release(a)  # ... released at 100: immune until 110, not evictable at once
    clock.now = 109
    assert apc.free_count == 0 and apc.evict(2) == 0
    clock.now = 110
    assert apc.free_count == 2 and apc.evict(1) == 1 and apc.idle_blocks() == [0]


def test_a_lookup_refreshes_the_window_and_touching_pins():
    apc, clock = pool(3, ttl_ns=10)
    a = written(apc, [1, 2], "A")
    apc.release(a)
    clock.now = 8
    apc.match([1], 1)  # block 0 accessed at 8; block 1 keeps its release at 0
    clock.now = 12
    assert apc.idle_blocks() == [1, 0] and apc.free_count == 2  # never-used block 2 and block 1
    assert apc.free_among([0]) == 0 and apc.free_among([1]) == 1
    apc.touch([0])
    assert apc.idle_blocks() == [1] and apc.pinned_count == 1 and apc.free_count == 2


def test_dead_entries_are_compacted_and_counts_stay_right():
    """Many hits of the same idle blocks (each leaves a dead entry behind) and a TTL: the queue stays small and the
    counts exact."""
    apc, clock = pool(8, ttl_ns=50)
    blocks = written(apc, list(range(100, 108)), "A")
    apc.release(blocks)
    for t in range(1, 400):
        clock.now = t
        hits = apc.match([100, 101], 2)
        apc.touch(hits)
        apc.release(hits)
    assert len(apc.queue.q) < 100
    clock.now = 430
    assert apc.free_count == 6 and apc.protected_count == 2 and apc.next_expiry() == 449
    assert apc.idle_blocks()[-2:] == [1, 0]


# ---------------------------------------------------------------- through the replay

def opal_with(ttl_ms: float, threshold: float = 0.9, interval_ms: float = 1000.0) -> OpalPlan:
    """An OpalPlan carrying only what the runtime reads so far (the APC record)."""
    return OpalPlan(stages=(), apc=ApcPlan(int(ttl_ms * MS), threshold, int(interval_ms * MS)),
                    kvc=KvcPlan(16, False, (), None), router=RouterPlan("round_robin", False, 0, 0, 1, 10 ** 9),
                    seed=42, simulation_time_ns=None, kv_bytes_per_token=1, model_name="test", memory_gb=1.0, tp=1,
                    model_bytes=0, config_json="{}")


def apc_build(tmp_path, rows, opal: OpalPlan, g1_blocks: int, single_step: bool = False, **config):
    """The replay (not run) of a trace scenario (tests/scenarios.py) with `opal`'s APC on."""
    plan = compile_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=g1_blocks, **config), "apc.yaml")
    return build(replace(finish_plan(plan, tmp_path), opal=opal), single_step=single_step)


def apc_replay(tmp_path, rows, opal: OpalPlan, g1_blocks: int, single_step: bool = False, **config):
    replay = apc_build(tmp_path, rows, opal, g1_blocks, single_step, **config)
    replay.run()
    return replay


def test_a_request_waits_while_only_protected_blocks_are_idle_and_starts_at_the_expiry(tmp_path):
    """G1 of 5 blocks, TTL 50 ms.  Request 0 (4 blocks) finishes its 10 ms prefill at 10 ms: its blocks are idle but
    immune until 60 ms.  Request 1 (4 other blocks) arrives at 20 ms and finds one free block: it waits, is woken at
    60 ms and gets its first token at 70 ms.  Without the TTL it starts on arrival."""
    rows = [row(0, 16, 1, [1, 2, 3, 4]), row(20, 16, 1, [5, 6, 7, 8])]
    replay = apc_replay(tmp_path, rows, opal_with(ttl_ms=50), g1_blocks=5)
    first, second = replay.requests
    assert first.first_admit_ns == 0 and second.first_admit_ns == 60 * MS
    assert second.first_token_ns == 70 * MS and second.status == "completed"
    assert replay.now == 70 * MS and not replay.stalled  # the monitor does not outlive the work
    pool = replay.ranks()[0].pool
    assert pool.inline_evictions == 3 and pool.ttl_skipped == 0
    assert [first.first_admit_ns, first.first_token_ns] == [0, 10 * MS]
    plain = apc_replay(tmp_path, rows, opal_with(ttl_ms=0), g1_blocks=5)
    assert plain.requests[1].first_admit_ns == 20 * MS and plain.now == 30 * MS


def test_protected_blocks_are_still_reused_by_a_request_that_shares_them(tmp_path):
    """Same pool and TTL, request 1 has request 0's prompt: its 3 hits are pinned, not evicted, and the 4th block
    is the never-used one: it starts on arrival."""
    rows = [row(0, 16, 1, [1, 2, 3, 4]), row(20, 16, 1, [1, 2, 3, 4])]
    replay = apc_replay(tmp_path, rows, opal_with(ttl_ms=50), g1_blocks=5)
    second = replay.requests[1]
    assert second.first_admit_ns == 20 * MS and second.first_reused_tokens == 12
    assert replay.ranks()[0].pool.evictions == 0


def test_no_wake_for_blocks_only_a_waiting_lookup_refreshed():
    """A waiting request's own hits are refreshed by each retry, and their protection never keeps it waiting (they
    are pinned, not evicted, when it starts): waking for their expiry could repeat forever, so `next_expiry` leaves
    them out; a block released at the same instant still counts."""
    apc, clock = pool(4, ttl_ns=10)
    apc.release(written(apc, [1, 2], "A"))
    clock.now = 5
    assert apc.match([1, 2], 2) == [0, 1]
    assert apc.protected_count == 2 and apc.next_expiry() is None
    apc.release(written(apc, [3], "B"))
    assert apc.next_expiry() == 15
    clock.now = 6  # a later instant: the lookup at 5 is an ordinary access now
    assert apc.next_expiry() == 15 and apc.idle_blocks() == [1, 0, 2]


def test_the_startup_line():
    assert format_apc_enabled(16, 16, 0) == ("GPU APC enabled: policy=LRUPolicy, block_size=16, kvc_chunk=16, "
                                             "blocks_per_victim=1, ttl=0")
    assert format_apc_enabled(16, 256, 20 * 10 ** 9).endswith("ttl=20")
    assert format_apc_enabled(16, 16, 500 * MS).endswith("ttl=0.5")


def test_dead_entries_in_the_middle_are_skipped_by_expiry_counts_takes_and_the_protected_search():
    """The queue's liveness column: blocks 2 and 4 leave early (hits); an expiry counts only the live entries it
    passes, a take returns only live blocks, and the oldest protected entry is the first live one after them."""
    queue = IdleQueue(ttl_ns=10, capacity=8)  # (blocks 0-7)
    queue.enqueue_all([1, 2, 3], 0)  # numbers 0-2
    queue.enqueue_all([4, 5], 5)  # numbers 3-4
    queue.enqueue_all([6], 8)  # number 5
    queue.dequeue_all([2, 4])
    assert queue.live == 4 and list(queue.alive) == [1, 0, 1, 0, 1, 1]
    queue.expire(12)  # stamps <= 2 are outside the window: numbers 0-2, of which 0 and 2 are live
    assert (queue.boundary, queue.expired) == (3, 2)
    assert queue.pop_expired(5, 12) == [1, 3]
    assert queue.first_protected() == 4 and queue.q[4 - queue.base] == 5  # (number 3, block 4, is dead)
    queue.expire(15)  # number 3 (dead) and 4 (block 5, stamp 5) pass the boundary: one live entry more
    assert (queue.boundary, queue.expired) == (5, 1)
    queue.compact()
    assert queue.q == [5, 6] and list(queue.alive) == [1, 1] and queue.first_protected() == queue.base + 1
