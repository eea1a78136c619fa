"""opal's router: the least_loaded, random and max_prefix policies, and dynamic worker scaling.

Plans are scenario configs (tests/scenarios.py: blocks of BS = 4 tokens, one trace hash id per block, fixed
timing: a pass with prefill 10 ms, a decode-only pass 1 ms) with `replicas` workers of one rank each (rank i is
worker i), finished, and given an `OpalPlan` whose only live part is its router (and seed); the traffic stays
the scenario's trace.  Every replay runs with macro steps and single-stepped, and both must agree.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from kvreplay.compiler.opal_records import KvcPlan, OpalPlan, RouterPlan
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.runtime.outputs.sections import summary_sections
from kvreplay.runtime.serving import routing
from kvreplay.runtime.serving.placement import Router
from kvreplay.runtime.serving.routing import ROUTER_STREAM, outstanding, seeded_choice
from kvreplay.runtime.traffic.rng import bits

from .scenarios import aggregated_config, compile_scenario, row

MS = 1_000_000
S = 1000 * MS


def router_plan(policy: str, *, scaling: bool = False, threshold: int = 2, latency_ns: int = 500 * MS,
                max_workers: int = 3, interval_ns: int = S) -> RouterPlan:
    return RouterPlan(policy, scaling, threshold, latency_ns, max_workers, interval_ns)


def opal_plan(router: RouterPlan, seed: int) -> OpalPlan:
    return OpalPlan(stages=(), apc=None, kvc=KvcPlan(16, False, (), None), router=router, seed=seed,
                    simulation_time_ns=None, kv_bytes_per_token=250_000, model_name="test", memory_gb=80.0, tp=1,
                    model_bytes=0, config_json="{}")


def opal_replays(tmp_path, rows: list[dict], router: RouterPlan, *, replicas: int = 2, seed: int = 42,
                 max_sequences: int = 4):
    """(macro-stepped, single-stepped) replays, run, of `rows` on `replicas` workers routed by `router`."""
    config = aggregated_config({}, g1_blocks=20_000, parallelism=f"replicas: {replicas}", max_sequences=max_sequences)
    plan = finish_plan(compile_scenario(tmp_path, rows, config, "opal.yaml"), tmp_path)
    plan = replace(plan, opal=opal_plan(router, seed))
    replays = build(plan), build(plan, single_step=True)
    for replay in replays:
        replay.run()
    fused, single = replays
    assert [request_record(r) for r in fused.requests] == [request_record(r) for r in single.requests]
    assert summary_sections(fused) == summary_sections(single)
    assert fused.now == single.now
    return fused, single


def placements(replay) -> list[int]:
    """The worker (= rank) of each request, in trace order."""
    return [r.rank for r in sorted(replay.requests, key=lambda r: r.spec.index)]


# ------------------------------------------------------------------ least_loaded
def test_least_loaded_picks_the_emptiest_worker(tmp_path):
    rows = [row(0, 8, 200, [1, 2]), row(1, 8, 2, [3, 4]), row(2, 8, 200, [5, 6]),  # one each: 0, 1, 2
            row(100, 8, 200, [7, 8]),  # worker 1 finished its short request (at about 21 ms): the emptiest
            row(101, 8, 200, [9, 10]),  # all hold one: the lowest index
            row(102, 8, 200, [11, 12]),  # worker 0 holds two, 1 and 2 one: the lower of those
            row(103, 8, 200, [13, 14])]  # worker 2 holds one, the others two
    fused, _ = opal_replays(tmp_path, rows, router_plan("least_loaded"), replicas=3)
    assert placements(fused) == [0, 1, 2, 1, 0, 1, 2]
    assert all(r.status == "completed" for r in fused.requests)


def test_least_loaded_counts_waiting_and_running_requests(tmp_path):
    # one sequence at a time: worker 0 runs r0, worker 1 r1; r2 (a tie) waits on worker 0; r3 goes to worker 1,
    # since worker 0's waiting request counts (1 running + 1 waiting against 1 running)
    rows = [row(0, 8, 200, [1, 2]), row(1, 8, 200, [3, 4]), row(2, 8, 200, [5, 6]), row(3, 8, 200, [7, 8]),
            row(4, 8, 200, [9, 10])]
    fused, _ = opal_replays(tmp_path, rows, router_plan("least_loaded"), max_sequences=1)
    assert placements(fused) == [0, 1, 0, 1, 0]
    assert [outstanding(worker) for worker in fused.workers] == [0, 0]  # all finished


def test_least_loaded_sees_a_request_in_its_last_pass_as_outstanding(tmp_path):
    # r1's last token comes in the pass 59 -> 60 ms; r2 arrives at 59.5 ms, when both workers hold one request:
    # the lower index (macro steps must not have finished r1 already)
    rows = [row(0, 8, 500, [1, 2]), row(1, 8, 50, [3, 4]), row(59.5, 8, 2, [5, 6])]
    fused, single = opal_replays(tmp_path, rows, router_plan("least_loaded"))
    assert placements(single) == placements(fused) == [0, 1, 0]
    assert sorted(fused.requests, key=lambda r: r.spec.index)[1].terminal_ns == 60 * MS


def test_round_robin_stays_round_robin(tmp_path):
    rows = [row(0, 8, 200, [1, 2]), row(1, 8, 2, [3, 4]), row(100, 8, 2, [5, 6]), row(101, 8, 2, [7, 8])]
    fused, _ = opal_replays(tmp_path, rows, router_plan("round_robin"))
    assert placements(fused) == [0, 1, 0, 1]


# ------------------------------------------------------------------ random
def test_random_is_seeded_and_reproducible(tmp_path):
    rows = [row(10 * i, 8, 2, [2 * i + 1, 2 * i + 2]) for i in range(24)]
    first, _ = opal_replays(tmp_path, rows, router_plan("random"), replicas=4, seed=7)
    again, _ = opal_replays(tmp_path, rows, router_plan("random"), replicas=4, seed=7)
    other, _ = opal_replays(tmp_path, rows, router_plan("random"), replicas=4, seed=8)
    assert placements(first) == placements(again)
    assert placements(first) != placements(other)
    # the k-th placement is a pure function of (seed, the router's stream, k)
    assert placements(first) == [bits(7, ROUTER_STREAM, k) % 4 for k in range(24)]
    assert len(set(placements(first))) == 4


# ------------------------------------------------------------------ max_prefix
def _seed_drawing(*workers: int) -> int:
    """A seed whose draws among both workers at counters 0, 1, ... are `workers`."""
    return next(s for s in range(1000) if [seeded_choice([0, 1], s, k) for k in range(len(workers))] == list(workers))


def test_max_prefix_sends_a_request_where_its_prefix_is(tmp_path):
    for home in (0, 1):
        rows = [row(0, 20, 2, [1, 2, 3, 4, 5]),  # nobody holds anything: the seeded choice
                row(50, 20, 2, [1, 2, 3, 4, 9]),  # shares 4 blocks with r0: where r0 ran
                row(100, 12, 2, [1, 2, 7])]  # shares 2 blocks with r0 and r1: there too
        fused, _ = opal_replays(tmp_path, rows, router_plan("max_prefix"), seed=_seed_drawing(home))
        assert placements(fused) == [home, home, home]
        assert [r.reused_tokens for r in sorted(fused.requests, key=lambda r: r.spec.index)] == [0, 16, 8]


def test_max_prefix_prefers_the_longest_held_prefix(tmp_path):
    for first, second in ((0, 1), (1, 0)):
        rows = [row(0, 8, 2, [1, 2]), row(1, 8, 2, [5, 6]),  # nobody holds either: drawn at counters 0 and 1
                row(50, 12, 2, [5, 6, 7]),  # 2 blocks where r1 ran, none where r0 ran
                row(60, 12, 2, [1, 2, 8])]  # 2 blocks where r0 ran
        fused, _ = opal_replays(tmp_path, rows, router_plan("max_prefix"), seed=_seed_drawing(first, second))
        assert placements(fused) == [first, second, second, first]


def test_max_prefix_ties_go_by_the_seeded_choice_among_the_tied(tmp_path):
    # r0 and r1 arrive together (no cache holds anything yet): drawn to workers 0 and 1, both then hold [1, 2];
    # r2 finds 8 tokens on both: a tie, drawn at counter 2
    rows = [row(0, 8, 2, [1, 2]), row(0, 8, 2, [1, 2]), row(50, 12, 2, [1, 2, 3])]
    for third in (0, 1):
        seed = _seed_drawing(0, 1, third)
        fused, _ = opal_replays(tmp_path, rows, router_plan("max_prefix"), seed=seed)
        assert placements(fused) == [0, 1, third]
        assert [routing.held_prefix(rank, fused.requests[2].spec) for rank in fused.ranks()] == [8, 8]


def test_held_prefix_is_capped_like_an_admission(tmp_path):
    rows = [row(0, 8, 2, [1, 2])]
    fused, _ = opal_replays(tmp_path, rows, router_plan("max_prefix"))
    rank = fused.ranks()[placements(fused)[0]]
    spec = fused.requests[0].spec
    assert routing.held_prefix(rank, spec) == 4  # 8 tokens cached, but the last token is always computed
    other = fused.ranks()[1 - placements(fused)[0]]
    assert routing.held_prefix(other, spec) == 0


# ------------------------------------------------------------------ dynamic scaling
def burst_rows(at_ms: float, count: int, output: int, first_id: int = 1) -> list[dict]:
    return [row(at_ms, 8, output, [first_id + 2 * i, first_id + 2 * i + 1]) for i in range(count)]


def test_a_burst_makes_a_worker_join_scale_latency_after_the_check_that_saw_it(tmp_path):
    # one worker; 4 requests at 0.5 s (outstanding 4 > 2): the check at 1 s asks, the worker joins at 1.5 s
    rows = burst_rows(500, 4, 3000) + [row(1499, 8, 2, [100, 101]), row(1500, 8, 2, [102, 103])]
    router = router_plan("least_loaded", scaling=True, threshold=2, latency_ns=500 * MS, max_workers=2)
    fused, single = opal_replays(tmp_path, rows, router, replicas=1)
    scaling = fused.dynamic_scaling
    assert scaling.asks == [(S, 1)]
    assert fused.workers[1].periods == [(S, S + 500 * MS, None)]
    got = placements(fused)
    assert got[:4] == [0, 0, 0, 0]
    assert got[4] == 0  # 1 ms before the join: the new worker takes nothing yet
    assert got[5] == 1  # at the join: the emptiest
    late = sorted(fused.requests, key=lambda r: r.spec.index)[5]
    assert late.first_admit_ns == S + 500 * MS
    section = summary_sections(fused)["workers"]
    assert section == [
        {"worker": 0, "role": "aggregated",
         "periods": [{"joined_ms": 0.0, "ready_ms": 0.0, "left_ms": None, "removed_ms": None}]},
        {"worker": 1, "role": "aggregated",
         "periods": [{"joined_ms": 1000.0, "ready_ms": 1500.0, "left_ms": None, "removed_ms": None}]}]


def test_no_more_than_max_workers_and_one_pending_at_a_time(tmp_path):
    # a long overload on worker 0: 0.3 s latency, checks each second, 3 workers at most (1 + 2 joins)
    rows = burst_rows(100, 8, 6000)
    router = router_plan("round_robin", scaling=True, threshold=2, latency_ns=300 * MS, max_workers=3)
    fused, _ = opal_replays(tmp_path, rows, router, replicas=1)
    assert fused.dynamic_scaling.asks == [(S, 1), (2 * S, 2)]
    assert len(fused.workers) == 3
    # 2.5 s latency, longer than the interval: the check at 2 s sees the worker asked for at 1 s still pending
    router = router_plan("round_robin", scaling=True, threshold=2, latency_ns=2500 * MS, max_workers=5)
    fused, _ = opal_replays(tmp_path, rows, router, replicas=1)
    assert fused.dynamic_scaling.asks[:2] == [(S, 1), (4 * S, 2)]  # 1 s + 2.5 s = 3.5 s: the next check asks
    assert all(w.periods == [] for w in fused.workers[1 + len(fused.dynamic_scaling.asks):])


def test_no_join_below_the_threshold(tmp_path):
    rows = burst_rows(500, 2, 3000)
    router = router_plan("least_loaded", scaling=True, threshold=2, max_workers=4)
    fused, _ = opal_replays(tmp_path, rows, router, replicas=1)
    assert fused.dynamic_scaling.asks == []
    assert [w.periods for w in fused.workers] == [[(0, 0, None)], [], [], []]


def test_checks_keep_nothing_alive(tmp_path):
    # the replay ends at its last completion, not at the next check (nor never)
    rows = burst_rows(0, 3, 1500)
    router = router_plan("least_loaded", scaling=True, threshold=1, max_workers=2)
    fused, _ = opal_replays(tmp_path, rows, router, replicas=1)
    assert fused.now == max(r.terminal_ns for r in fused.requests)
    assert fused.now % S != 0
    assert fused.dynamic_scaling.asks == [(S, 1)]


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="MaxPrefix"):
        Router([], "MaxPrefix")


@pytest.mark.parametrize("policy", routing.POLICIES)
@pytest.mark.parametrize("draw", range(3))
def test_macro_steps_agree_with_single_steps_under_every_policy_and_scaling(tmp_path, policy, draw):
    # random-ish traces (a pure function of `draw`): shared prefixes, bursts, short and long outputs
    def pick(k: int, n: int) -> int:
        return bits(draw, 99, k) % n
    rows, t = [], 0.0
    for i in range(60):
        t += pick(4 * i, 4) * 12.5 + pick(4 * i + 1, 4) * 0.25
        group = pick(4 * i + 2, 4)
        rows.append(row(t, 16, 1 + pick(4 * i + 3, 120), [100 * group + 1, 100 * group + 2, 1000 + 2 * i, 1001 + 2 * i]))
    router = router_plan(policy, scaling=True, threshold=3, latency_ns=150 * MS, max_workers=4, interval_ns=100 * MS + MS // 2)
    fused, _ = opal_replays(tmp_path, rows, router, replicas=2, seed=draw)  # asserts that both ways agree
    assert all(r.status == "completed" for r in fused.requests)
    assert fused.dynamic_scaling.asks
