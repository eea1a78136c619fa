"""opal's proactive APC eviction monitor (runtime/tiers/apc_monitor.py): the rule's victims and next intervals,
checks on real pool states through the replay's handler, TTL respected, the log line, the monitor stopping with the
work, and macro steps giving exactly what single stepping gives with APC on."""
from __future__ import annotations

from fractions import Fraction

import pytest

from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.runtime.shell.events import CHECK
from kvreplay.runtime.tiers.apc_log import format_proactive
from kvreplay.runtime.tiers.apc_monitor import MIN_INTERVAL_NS, exact, step
from kvreplay.runtime.tiers.apc_writers import victims

from .scenarios import MS, row
from .test_apc import apc_build, opal_with

S = 10 ** 9


@pytest.mark.parametrize("free, idle, threshold, victims, interval", [
    (64, 936, 0.9, 36, 640 * MS),  # util 0.936: dev = 0.036 / 0.1 = 0.36, next check 0.64 s later (opal measured)
    (499, 4501, 0.9, 1, 998 * MS),  # util 0.9002: exactly one block (opal measured); dev 0.002
    (9998, 90002, 0.9, 2, 999_800_000),  # util 0.90002: floor(0.00002 * 100000) = 2
    (49999, 450001, 0.9, 1, 999_980_000),  # util 0.900002: floor(1.0) = 1 exactly (no float drift)
    (0, 50, 0.9, 5, MIN_INTERVAL_NS),  # util 1: the shortest interval, 0.1 s
    (100, 900, 0.9, 0, S),  # util = threshold: nothing, the base interval
    (500, 500, 0.9, 0, S),
    (10, 0, 0.9, 0, S),  # nothing idle
    (0, 0, 0.9, 0, S),  # nothing available
    (0, 10, 0.995, 1, S // 2),  # 1 - threshold < 0.01: dev = 0.005 / 0.01
    (1, 999, 0.5, 499, MIN_INTERVAL_NS),  # dev 0.998: base * 0.002 = 2 ms, raised to 0.1 s
    (7, 9, 0.5, 1, 875 * MS),  # util 9/16: floor(1/16 * 16) = 1; dev = (1/16) / (1/2) = 1/8
])
def test_victims_and_next_interval(free, idle, threshold, victims, interval):
    assert step(free, idle, threshold, S) == (victims, interval)


def test_the_threshold_is_the_decimal_it_prints_as_and_intervals_round_down():
    assert exact(0.9) == Fraction(9, 10) and exact(Fraction(1, 3)) == Fraction(1, 3)
    # util 1/3 over 1/4: floor(3 * 1/12) = 0 -> 1 victim; dev = (1/12) / (3/4) = 1/9
    assert step(2, 1, Fraction(1, 4), 10 ** 9 + 1) == (1, (10 ** 9 + 1) * 8 // 9)


# ---------------------------------------------------------------- checks on real pools

def built(tmp_path, g1_blocks: int, ttl_ms: float = 0, threshold: float = 0.9):
    """A replay with one APC rank, not run: a test sets its pool up and calls the check handler."""
    replay = apc_build(tmp_path, [row(0, 4, 1, [1])], opal_with(ttl_ms, threshold), g1_blocks)
    assert [(t, kind) for t, kind, _, _ in replay.queue] == [(S, CHECK)]  # the first check, one interval in
    replay.queue.clear()  # (the test calls the checks itself)
    replay.background = 0
    rank = replay.ranks()[0]
    return replay, rank, rank.pool


def idle_blocks(pool, count: int, first_key: int = 1000) -> None:
    blocks = pool.allocate(count)
    pool.register_run(blocks, list(range(first_key, first_key + count)), 0, count, "writer")
    pool.release(blocks)


def checks_queued(replay) -> list[int]:
    return sorted(t for t, kind, _, check in replay.queue if kind == CHECK and check.func == replay.apc.check)


def test_a_check_at_util_93_6_percent_evicts_36_blocks_and_comes_back_after_0_64_s(tmp_path):
    replay, rank, pool = built(tmp_path, g1_blocks=1000)
    replay.apc.log = []
    idle_blocks(pool, 936)
    evicted = []
    pool.on_evict = lambda p, keys, runs: evicted.extend(victims(keys, runs))
    replay.clock.now = 3 * S
    replay.apc.check(rank, 3 * S + 0)
    assert pool.proactive_evictions == 36 and pool.idle_count == 900 and pool.plain_free == 100
    assert evicted[:2] == [(1935, "writer", 935), (1934, "writer", 934)]  # the LRU end: the last released first
    assert checks_queued(replay) == [3 * S + 640 * MS] and replay.apc.pass_limit(replay.workers[0]) == 3640 * MS
    (record,) = replay.apc.log
    assert format_proactive(record, 2560 * 1024, "CPUMemory") == (
        "[APC] [Evict] Memory util=93.6% (of non-active GPU) > eviction threshold=90.0%. Proactively migrated "
        "36 block(s) (90.0 MB) to CPU DRAM [free=100 resident=900/1000]")
    assert format_proactive(record, 2560 * 1024, None).endswith("to nowhere [free=100 resident=900/1000]")


@pytest.mark.parametrize("blocks, idle, pinned, evicted, interval", [
    (5000, 4501, 0, 1, 998 * MS),  # util 0.9002: one block
    (50, 50, 0, 5, MIN_INTERVAL_NS),  # util 1
    (100, 60, 30, 0, S),  # idle 60 of 70 available: 0.857 <= 0.9
    (100, 0, 100, 0, S),  # all pinned: nothing available
])
def test_checks_on_pool_states(tmp_path, blocks, idle, pinned, evicted, interval):
    replay, rank, pool = built(tmp_path, g1_blocks=blocks)
    idle_blocks(pool, idle)
    pool.allocate(pinned)  # held by running requests: never scanned, not available
    replay.apc.check(rank, 0)
    assert pool.proactive_evictions == evicted and pool.idle_count == idle - evicted
    assert checks_queued(replay) == [interval]


def test_a_check_respects_the_ttl(tmp_path):
    """100 blocks, TTL 1 s: 50 idle since 0, 45 since 0.5 s.  At 0.8 s util 0.95 asks for 5 victims but every idle
    block is inside its window: none is evicted and ttl_skipped counts the 95 left in place.  At 1.2 s the 50
    oldest are out of it: the 5 victims come from them."""
    replay, rank, pool = built(tmp_path, g1_blocks=100, ttl_ms=1000)
    idle_blocks(pool, 50)
    replay.clock.now = 500 * MS
    idle_blocks(pool, 45, first_key=5000)
    replay.clock.now = 800 * MS
    replay.apc.check(rank, 800 * MS)  # util 95/100 = 0.95: 5 victims; the 50 released at 0 are protected till 1 s
    assert pool.proactive_evictions == 0 and pool.ttl_skipped == 95
    replay.clock.now = 1200 * MS
    replay.apc.check(rank, 1200 * MS)
    assert pool.proactive_evictions == 5 and pool.ttl_skipped == 95 and pool.idle_count == 90


# ---------------------------------------------------------------- through whole replays

def workload() -> list[dict]:
    """Three prefix groups of 28-token prompts every 250 ms, 60 to 180 output tokens, in a G1 of 60 blocks: inline
    and proactive evictions, fused decode passes in between, and with a TTL preemptions and waits for expiries."""
    rows = []
    for i in range(12):
        ids = [100 * (i % 3) + k for k in range(6)] + [1000 + i]
        rows.append(row(i * 250.0, 28, 60 + 40 * (i % 4), ids))
    return rows


@pytest.mark.parametrize("parallelism", ["", "replicas: 2", "attention_data: 2"])
@pytest.mark.parametrize("hooked", [False, True], ids=["no-hook", "on_evict"])
@pytest.mark.parametrize("ttl_ms, threshold", [(0, 0.9), (0, 0.3), (300, 0.3), (1500, 0.5)])
def test_macro_steps_and_single_steps_agree_with_apc(tmp_path, ttl_ms, threshold, hooked, parallelism):
    """Every record, eviction (with its instant and victims), check and the end time are the same, on one rank,
    two workers (each with its checks) or two DP ranks of one worker.  Without a hook fused passes evict inline
    (at their own pass's instant); with one they stop before an eviction."""
    runs = []
    for single in (False, True):
        log, hooks = [], []
        replay = apc_build(tmp_path, workload(), opal_with(ttl_ms, threshold), g1_blocks=60, single_step=single,
                           parallelism=parallelism)
        for rank in replay.ranks():
            rank.pool.evict_log = log
            if hooked:
                rank.pool.on_evict = lambda p, keys, runs, hooks=hooks: hooks.append((p.now(), tuple(victims(keys, runs))))
        replay.apc.log = []
        replay.run()
        pools = [rank.pool for rank in replay.ranks()]
        runs.append((replay, [request_record(r) for r in replay.requests], log, hooks, replay.apc.log,
                     (sum(p.inline_evictions for p in pools), sum(p.proactive_evictions for p in pools),
                      sum(p.ttl_skipped for p in pools), replay.apc.checks), replay.now))
    (fused, *rest), (single, *expected) = runs
    assert rest == expected
    assert fused.seq < single.seq  # (decode passes were fused)
    inline, proactive, _, checks = rest[4]
    assert inline > 0 and checks > 3 and all(r.status == "completed" for r in fused.requests)
    if threshold < 0.9:
        assert proactive > 0


def test_eviction_lines_of_a_replay(tmp_path):
    """The lines simulation.log gets: each check's [LRU.evict] line, then its [APC] [Evict] line; inline evictions
    have their [LRU.evict] line only; all in time order."""
    from kvreplay.runtime.tiers.apc_log import collect, eviction_lines

    replay = apc_build(tmp_path, workload(), opal_with(0, 0.3), g1_blocks=60)
    collect(replay)
    replay.run()
    lines = eviction_lines(replay, 4 * 1024, "CPUMemory")
    pool = replay.ranks()[0].pool
    assert len([m for _, _, m in lines if m.startswith("[APC]")]) == len(replay.apc.log) > 0
    assert len([m for _, _, m in lines if m.startswith("[LRU.evict]")]) == len(pool.evict_log)
    assert [t for t, _, _ in lines] == sorted(t for t, _, _ in lines)
    for (_, _, before), (_, _, message) in zip(lines, lines[1:]):
        if message.startswith("[APC]"):
            assert before.startswith("[LRU.evict]")
    first = next(m for _, _, m in lines if m.startswith("[APC]"))
    record = replay.apc.log[0]
    assert f"Proactively migrated {record.evicted} block(s) ({record.evicted * 4 / 1024:.1f} MB) to CPU DRAM" in first


def test_checks_start_one_interval_after_the_start_and_end_with_the_work(tmp_path):
    """One request decoding for 2.5 s: checks at 1 s and 2 s (nothing idle: the base interval each time), none
    after its last token; the replay ends with it, at its last pass."""
    replay = apc_build(tmp_path, [row(0, 16, 2500, [1, 2, 3, 4])], opal_with(0), g1_blocks=700)
    replay.run()
    (request,) = replay.requests
    assert replay.apc.checks == 2 and replay.apc.due == {0: 3 * S} and request.status == "completed"
    assert replay.now == request.terminal_ns == 10 * MS + 2499 * MS
    # the check due at 3 s is still queued, and alone it kept nothing going
    assert [(t, kind) for t, kind, _, _ in replay.queue] == [(3 * S, CHECK)] and replay.background == 1
