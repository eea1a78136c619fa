"""Stores and completions inside fused decode passes (simple_cpu_v0_32): at their own instants, exactly what stepping gives."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvreplay.cli import main
from kvreplay.examples.trace_config import mooncake_trace_config
from kvreplay.runtime.shell.events import FUSED_ALLOCATIONS
from kvreplay.runtime.shell.fused_tail import Deferred, FusedEvents
from kvreplay.runtime.tiers.chain import TierChain
from kvreplay.runtime.tiers.connectors import PROFILES
from kvreplay.runtime.tiers.g1_runs import RunPool

from .support import output_bytes, shared_trace


def _chain(connector: str) -> TierChain:
    top = SimpleNamespace(name="g2", scope="dp_rank_local")
    return TierChain((top,), PROFILES[connector])


def _request(computed: int, stored: int, keys: int):
    return SimpleNamespace(num_computed=computed, keys=list(range(keys)), tier=SimpleNamespace(stored_upto=stored))


def test_decode_stores_follow_the_one_pass_late_rule():
    """simple_cpu offers at the end of pass j the blocks computed before it: (computed + j) // 16 with 100
    computed.  Blocks 0-4 stored: pass 0 offers up to 6 (blocks 5 and 6 are full), then each crossing of
    16 tokens (pass 12: 112 tokens, pass 28: 128), until the 8 keys are all offered."""
    chain = _chain("simple_cpu_v0_32")
    request = _request(100, 5, 8)
    assert chain.decode_stores(request, 16, 1000) == [(0, 6), (12, 7), (28, 8)]
    assert chain.decode_stores(request, 16, 28) == [(0, 6), (12, 7)]  # (passes 0..27)
    assert chain.quiet_passes(request, 16) == 0
    # everything up to the last full block stored: the next offer comes when block 6 is full before a pass
    assert chain.decode_stores(_request(100, 6, 8), 16, 1000) == [(12, 7), (28, 8)]
    assert chain.quiet_passes(_request(100, 6, 8), 16) == 12
    assert chain.decode_stores(_request(100, 8, 8), 16, 1000) == [] and chain.quiet_passes(_request(100, 8, 8), 16) is None


def test_a_shared_first_tier_or_kvcr_keeps_stopping_before_each_store():
    assert _chain("simple_cpu_v0_32").fuses_stores(None)
    shared = TierChain((SimpleNamespace(name="g2", scope="cluster_shared"),), PROFILES["simple_cpu_v0_32"])
    assert not shared.fuses_stores(None)
    pulling = _chain("simple_cpu_v0_32")
    pulling.kvcr = object()
    assert not pulling.fuses_stores(None)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """The synthetic trace's first 400 requests (a few minutes of arrivals, many decoding at once)."""
    path = tmp_path_factory.mktemp("fused") / "head.jsonl"
    with open(shared_trace("synthetic_trace.jsonl")) as full:
        path.write_text("".join(line for _, line in zip(range(400), full)))
    return path


@pytest.mark.parametrize("host_blocks, fused_at_least", [(2000, 500), (40, 10)])
def test_fused_stores_agree_with_single_steps(trace, tmp_path, monkeypatch, host_blocks, fused_at_least):
    """Block 64 (decode passes cross block boundaries), a G2 that evicts (2,000 blocks) or is mostly in flight
    (40 blocks: fused runs end before stores that could come up short): the fused replay makes its stores as
    events and gives byte-identical outputs to single stepping."""
    config = tmp_path / "config.yaml"
    config.write_text(mooncake_trace_config(trace, block_size=64, g1_blocks=2000, host_blocks=host_blocks,
                                            connector="simple_cpu_v0_32"))
    fused_passes = []
    handler = FusedEvents.stores

    def counting(self, payload, now):
        fused_passes.append(len(payload[1]))
        handler(self, payload, now)

    monkeypatch.setattr(FusedEvents, "stores", counting)
    counts = []
    for name, extra in (("macro", []), ("single", ["--single-step"])):
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / name), "--capture-per-request",
                     "--no-progress", *extra]) == 0
        counts.append(len(fused_passes))
    assert counts[0] >= fused_at_least and counts[1] == counts[0]  # stores happened inside fused runs; stepping fuses none
    assert output_bytes(tmp_path / "single") == output_bytes(tmp_path / "macro")


def _waiting_run(holding_keyless: int):
    """A G1 of 3 blocks: blocks 0 and 1 cached (keys 10, 11) and free, block 2 keyless and held by a store in
    flight; a fused run whose pass 1 (start at 100 ns) allocates one block for a request."""
    pool = RunPool(3)
    pool.allocate(3)
    pool.register_run([0, 1, 2], [10, 11, 12], 0, 2)
    pool.release([0, 1])  # (the queue, head first: 1, 0)
    rank = SimpleNamespace(pool=pool, chain=SimpleNamespace(holding_keyless=holding_keyless), state_blocks=0)
    request = SimpleNamespace(blocks=[])
    entry = Deferred(rank, SimpleNamespace(items=[]), [(1, 0, 0, request)], [100, 200], [[100, 1]], {})
    entry.push = lambda time, kind, payload: pushed.append((time, kind, payload))
    pushed: list = []
    return pool, request, entry, pushed


def test_an_allocation_waits_for_its_pass_start_while_a_keyless_block_is_held():
    """While a store in flight holds a block without a key, its landing may free that block to the head of the
    free queue before the pass starts, and the pass then takes it: the allocation waits for its instant (after the
    landings, `fused_allocations`).  Here the landing frees block 2 first, so the pass takes block 2 and both
    cached keys stay; made up front it would have taken block 1 and evicted key 11."""
    pool, request, entry, pushed = _waiting_run(holding_keyless=1)
    entry.run()
    assert request.blocks == [] and pushed == [(100, FUSED_ALLOCATIONS, (entry, 1))]
    pool.release([2])  # the store lands at 100 ns: its keyless block joins the head
    entry.rank.chain.holding_keyless = 0
    entry.run(allocations=1)
    assert request.blocks == [2] and set(pool.cached) == {10, 11} and len(pushed) == 1
    # with nothing keyless held, the allocation is made up front, from the queue's head (block 1: key 11 evicted)
    pool, request, entry, pushed = _waiting_run(holding_keyless=0)
    entry.run()
    assert request.blocks == [1] and set(pool.cached) == {10} and pushed == []
