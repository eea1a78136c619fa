"""Macro-step horizons with several workers (runtime/horizons.py): another worker's events do not cut a fused run
of decode passes unless they could change its batch; results stay those of single stepping."""
from __future__ import annotations

from kvreplay.runtime.shell.horizons import EVERYONE, Horizons
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build

from .scenarios import aggregated_config, compile_scenario, replay_both_ways, row


class _Worker:
    def __init__(self, index: int):
        self.index = index


def test_next_skips_other_workers_events_and_handled_ones():
    w0, w1 = _Worker(0), _Worker(1)
    horizons = Horizons([w0, w1])
    horizons.add(5, 0, (1,))  # a copy on worker 1's link
    horizons.add(7, 1, EVERYONE)  # an arrival
    horizons.add(3, 2, ())  # an open-loop pass end: concerns nobody else
    assert horizons.next(w0, 0) == 7 and horizons.next(w1, 0) == 5
    horizons.handle(5, 0)
    assert horizons.next(w1, 5) == 7  # handled at this instant: no longer ahead
    assert horizons.next(w0, 8) is None


def plans_and_passes(replay) -> tuple[int, int]:
    plans = []
    run_pass = replay._run_pass

    def counting(worker, batches, now):
        plans.append(worker.index)
        run_pass(worker, batches, now)

    replay._run_pass = counting
    replay.run()
    return len(plans), sum(w.passes for w in replay.workers)


def test_two_workers_decode_in_one_macro_step_each(tmp_path):
    """Two requests of 200 output tokens on two workers, their passes half a millisecond apart (prefill 10 ms,
    decode 1 ms): each worker fuses its 199 decode passes into one step after its prefill, where cutting at the
    other worker's pass ends would plan a step per pass."""
    rows = [row(0, 8, 200, [1, 2]), row(0.5, 8, 200, [3, 4])]
    plan = compile_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=64, parallelism="replicas: 2"), "h.yaml")
    fused, single, records = replay_both_ways(plan, tmp_path)
    assert [r["dp_rank"] for r in records] == [0, 1]
    assert [r["last_token_ms"] for r in records] == [209.0, 209.5]
    assert plans_and_passes(build(finish_plan(plan, tmp_path))) == (4, 400)
    without = build(finish_plan(plan, tmp_path))
    without.horizons = None  # the whole queue's next event as every worker's horizon
    plans, passes = plans_and_passes(without)
    assert passes == 400 and plans > 300
