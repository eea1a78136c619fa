"""Fused decode runs that cross block boundaries: passes counted from the events, crossings allocated in bulk.

Each run's passes under constant timing are counted without stepping them (`fused_passes.constant_passes`), and a
rank's crossings between two finishes take their blocks in one allocation (`fused_passes.apply_in_bulk`); both must
give exactly what single stepping gives.
"""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from kvreplay.cli import main
from kvreplay.examples.trace_config import mooncake_trace_config
from kvreplay.runtime.shell import fused_passes, macro

from .support import output_bytes, shared_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Every 6th of the conversation trace's first 3,000 requests (decode runs between sparse arrivals, finishing
    inside them)."""
    path = tmp_path_factory.mktemp("crossings") / "sparse.jsonl"
    with open(shared_trace("conversation_trace.jsonl")) as full:
        path.write_text("".join(line for i, line in zip(range(3000), full) if i % 6 == 0))
    return path


def _bulk_counter(monkeypatch) -> list:
    """Record (crossings, finishes) of every rank's events `_apply_in_bulk` applies."""
    seen = []
    bulk = macro.apply_in_bulk

    def counting(rank, events, ends, gaps, finished):
        seen.append((sum(1 for e in events if not e[1]), sum(1 for e in events if e[1])))
        bulk(rank, events, ends, gaps, finished)

    monkeypatch.setattr(macro, "apply_in_bulk", counting)
    return seen


@pytest.mark.parametrize("block_size, g1_blocks, fixed", [(16, 32000, True), (16, 2000, True), (64, 4000, False)])
def test_bulk_crossings_agree_with_single_steps(trace, tmp_path, monkeypatch, block_size, g1_blocks, fixed):
    """Block 16 with room (crossings from never-used blocks, then the queue) and tight (evictions, preemptions),
    and block 64 with roofline timing (passes timed one by one): outputs byte-identical to --single-step, with
    crossings and finishes applied in bulk."""
    config = tmp_path / "config.yaml"
    config.write_text(mooncake_trace_config(trace, block_size=block_size, g1_blocks=g1_blocks, fixed_timing=fixed))
    seen = _bulk_counter(monkeypatch)
    outputs = []
    for name, extra in (("fused", []), ("single", ["--single-step"])):
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / name), "--capture-per-request",
                     "--no-progress", *extra]) == 0
        outputs.append(output_bytes(tmp_path / name))
    assert outputs[0] == outputs[1]
    crossings = sum(c for c, _ in seen)
    finishes = sum(f for _, f in seen)
    # a bulk run makes one allocation per run of crossings between finishes, far fewer than one per crossing
    assert crossings > 2000 and finishes > 200
    assert sum(1 for c, f in seen if c > f + 1) > 150  # runs with more crossings than their finishes split


def test_kv_events_keep_one_allocation_per_crossing(trace, tmp_path, monkeypatch):
    """With KV events the pool's removals are recorded change by change: the stepwise path, and the same
    events as single stepping."""
    config = tmp_path / "config.yaml"
    config.write_text(mooncake_trace_config(trace, block_size=16, g1_blocks=1200))
    seen = _bulk_counter(monkeypatch)
    files = []
    for name, extra in (("fused", []), ("single", ["--single-step"])):
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / name), "--capture-per-request",
                     "--capture-kv-events", "--no-progress", *extra]) == 0
        files.append((*output_bytes(tmp_path / name), (tmp_path / name / "kv-events.jsonl").read_bytes()))
    assert files[0] == files[1] and files[0][2]
    assert seen == []


def _states(rng: random.Random, ranks: int) -> list:
    states = []
    for _ in range(ranks):
        events = []
        for position in range(rng.randint(1, 6)):
            first, size = rng.randint(1, 16), 16
            done = rng.randint(0, 120)
            events.extend((j, 0, position, None) for j in range(first, done + 1, size))
            if rng.random() < 0.7:
                events.append((done, 1, position, SimpleNamespace(num_computed=rng.randint(1, 500))))
        events.sort(key=lambda e: e[:3])
        states.append(macro._RankRun(events, 10, 100, rng.randint(0, 8)))
    return states


def test_counted_passes_are_the_stepped_ones():
    """Random ranks' events and free blocks, random horizons and stops: `constant_passes` within
    `constant_bound` gives the passes and ends that stepping pass by pass at that duration gives."""
    rng = random.Random(7)
    worker = SimpleNamespace(timing=lambda work: 10)
    for _ in range(500):
        now = rng.randint(0, 1000)
        horizon = now + rng.randint(11, 900) if rng.random() < 0.8 else None
        stop = now + rng.randint(0, 900) if rng.random() < 0.5 else None
        limit = rng.randint(2, 130)
        seed = rng.random()
        stepped = fused_passes.timed_passes(worker, _states(random.Random(seed), 2), now, horizon, stop, limit)
        counted = fused_passes.constant_passes(_states(random.Random(seed), 2),
                                                 min(limit, fused_passes.constant_bound(now, 10, horizon, stop)))
        assert max(counted, 0) == stepped[1]
        assert stepped[0] == list(range(now + 10, now + 10 * (stepped[1] + 1), 10))
