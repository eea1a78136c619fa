"""G3 offload: kv-cache-tiers.md "G3 offload", one test (or small group) per sentence, on hand-built scenarios.

Conventions (as in test_g2.py, so every time is a round number):
- block_size 4 and bytes_per_token 250,000: one G1 = G2 = G3 block = 1,000,000 bytes;
- G2 d2h/h2d and G3 read/write at 1.0 GB/s (= 1 byte/ns): 1 ms per block on an idle link, no latency
  unless a test sets one;
- fixed timing: a pass with prefill costs 10 ms, a decode-only pass 1 ms;
- G1 4 blocks, G2 2 blocks, G3 8 blocks per store unless a test says otherwise;
- a Mooncake trace with `block_size: 4`, so every hash_id is one engine block.

Scenario "back" (used by several tests): A [1, 2] at 0 ms stores 1, 2 to G2 at 10 ms (landing at 12) and
G3 writes them from 12 to 14 ms.  B [3, 4, 5] at 20 ms takes G1 block 2 (A's blocks are freed last block
first) and at 30 ms stores 3, 4 to G2, evicting 1, 2 (5 finds no room); G3 writes 3, 4 from 32 to 34 ms.
C [1, 2, 6] at 40 ms: block 1 is still in G1, block 2 is in neither G1 nor G2 but in G3.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import host_tier_spec, storage_tier_spec
from kvreplay.runtime.links.bandwidth import fair_rates
from kvreplay.runtime.tiers.chain_build import attach_chains
from kvreplay.runtime.tiers.copy_jobs import BYPASS_ROUNDS
from kvreplay.runtime.tiers.tier import IN_FLIGHT as WRITING, READY

from .scenarios import ScenarioRun, aggregated_config, compile_scenario, replay_both_ways, row

BLOCK = 1_000_000
BACK = [row(0, 8, 1, [1, 2]), row(20, 12, 1, [3, 4, 5]), row(40, 9, 1, [1, 2, 6])]


def config(*, scope: str = "worker_local", g1_blocks: int = 4, host_blocks: int = 2, g3_blocks: int = 8,
           latency_ms: float = 0.0, replicas: int = 1, shared_bandwidth: float | None = None,
           scaling: str = "", stop_s: float | None = None) -> str:
    g3 = {"scope": scope, "num_g3_blocks": g3_blocks, "latency_to_first_byte_ms": latency_ms,
          "read_bandwidth_gbps": 1.0, "write_bandwidth_gbps": 1.0}
    if shared_bandwidth is not None:
        g3["shared_read_bandwidth_gbps"] = g3["shared_write_bandwidth_gbps"] = shared_bandwidth
    host = {"num_host_blocks": host_blocks, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}
    stop = f"  stop: {{max_virtual_time_seconds: {stop_s}}}\n" if stop_s is not None else ""
    return aggregated_config({"host_offload": host, "g3_offload": g3}, g1_blocks=g1_blocks,
                             parallelism=f"replicas: {replicas}", role_extra=scaling, traffic_extra=stop)


class Run(ScenarioRun):
    @property
    def g3(self) -> dict:
        return self.sections["g3_offload"]

    @property
    def g2(self) -> list[dict]:
        return self.sections["g2_domains"]

    def store(self, worker: int = 0):
        return self.replay.workers[worker].ranks[0].chain.tiers[1]


def replay(tmp_path: Path, rows: list[dict], **knobs) -> Run:
    _, single, records = replay_both_ways(compile_scenario(tmp_path, rows, config(**knobs), "g3.yaml"), tmp_path)
    return Run(single, records)


# ---- "Blocks written to G2 are also written to G3 in the background." ---------------------------------

@pytest.mark.parametrize("stop_ms, state", [(13.9, WRITING), (14.0, READY)])
def test_g2_stores_are_written_to_g3_when_they_land(tmp_path, stop_ms, state):
    """A's G2 store lands at 12 ms; the G3 write of its two blocks starts then and lands at 14 ms."""
    run = replay(tmp_path, BACK[:1], stop_s=stop_ms / 1e3)
    store = run.store()
    assert list(store.entries.values()) == [state, state]
    assert (run.g3["write_jobs"], run.g3["write_blocks"]) == (1, 2)


def test_background_writes_cost_the_requests_nothing(tmp_path):
    """Scenario "back" up to B: the writes add no time to A or B, and each G2 store is written once."""
    run = replay(tmp_path, BACK[:2])
    assert [run.ttft(0), run.ttft(1)] == [10.0, 10.0]
    assert {k: run.g3[k] for k in ("write_jobs", "write_blocks", "write_bytes", "resident_blocks")} == \
        {"write_jobs": 2, "write_blocks": 4, "write_bytes": 4 * BLOCK, "resident_blocks": 4}
    assert run.g2[0]["stores"] == 4 and run.g2[0]["dropped_stores"] == 1


# ---- "A read restores a prefix from G3 into G2 and then into G1." -------------------------------------

@pytest.mark.parametrize("latency_ms", [0.0, 0.1])
def test_read_goes_from_g3_to_g2_then_to_g1(tmp_path, latency_ms):
    """C at 40 ms: block 1 from G1, block 2 read from G3 into G2 (1 ms, plus the G3 latency), then loaded into
    G1 (1 ms) before C is admitted: TTFT = read + load + 10 ms prefill."""
    run = replay(tmp_path, BACK, latency_ms=latency_ms)
    admitted = 42.0 + latency_ms
    assert run.admissions(2) == [(admitted, "g2.worker0.dp0", 4, 4)]
    assert run.ttft(2) == pytest.approx(12.0 + latency_ms)
    assert {k: run.g3[k] for k in ("lookup_hits", "read_jobs", "read_blocks", "read_bytes")} == \
        {"lookup_hits": 1, "read_jobs": 1, "read_blocks": 1, "read_bytes": BLOCK}
    assert run.g2[0]["filled_from_g3"] == 1 and run.g2[0]["restores"] == 1 and run.g2[0]["h2d_bytes"] == BLOCK
    # the restored block came up from G3 for C: the admission says so (the report's reuse by source)
    assert run.records[2]["admission_history"][0]["host_reused_by_source"] == {"g3": 4}


def test_g3_alone_never_makes_a_block_ready_on_the_gpu(tmp_path):
    """Without room in G2 for the read (G2's only slot is held by a block being loaded), C recomputes the
    block G3 holds: a G3 hit is usable only through G2."""
    run = replay(tmp_path, BACK, host_blocks=1)
    assert run.admissions(2) == [(40.0, "worker0.dp0", 4, 0)]
    assert run.g3["read_jobs"] == 0


# ---- "With cluster_shared, a block is stored once and any worker can read it ..." ----------------------

TWO_WORKERS = [row(0, 8, 1, [1, 2]), row(20, 12, 1, [1, 2, 7])]  # round robin: A on worker 0, B on worker 1


@pytest.mark.parametrize("scope, admission, cross", [
    ("cluster_shared", (24.0, "g2.worker1.dp0", 0, 8), 2),  # read 2 blocks (2 ms), load them (2 ms)
    ("worker_local", (20.0, "worker1.dp0", 0, 0), 0),  # worker 1 cannot read worker 0's store
])
def test_cluster_shared_store_serves_every_worker(tmp_path, scope, admission, cross):
    """B's prompt [1, 2, 7] after A's [1, 2] on the other worker.  Shared: 1, 2 are stored once and B writes
    only 7; worker-local: worker 1 recomputes, its G2 (2 blocks) takes 1, 2 and its own store gets those again."""
    shared = 0 if scope == "cluster_shared" else None
    run = replay(tmp_path, TWO_WORKERS, scope=scope, replicas=2, shared_bandwidth=shared)
    assert run.admissions(1) == [admission]
    assert run.g3["cross_worker_read_blocks"] == cross
    assert (run.g3["stores"], run.g3["resident_blocks"]) == ((1, 3) if scope == "cluster_shared" else (2, 4))


def test_blocks_of_a_removed_worker_stay_readable(tmp_path):
    """Worker 1 writes A's blocks (X takes worker 0), then leaves at 15 ms; B on the remaining worker reads
    them at 30 ms: read 2 ms + load 2 ms."""
    rows = [row(0, 4, 1, [10]), row(0, 8, 1, [1, 2]), row(30, 12, 1, [1, 2, 7])]
    run = replay(tmp_path, rows, scope="cluster_shared", replicas=2, shared_bandwidth=0,
                 scaling="\n      scaling: [{at_seconds: 0.015, replicas: 1}]")
    assert run.records[1]["dp_rank"] == 1 and run.records[2]["dp_rank"] == 0
    assert run.admissions(2) == [(34.0, "g2.worker0.dp0", 0, 8)]
    assert run.g3["cross_worker_read_blocks"] == 2
    assert run.records[2]["admission_history"][0]["host_reused_by_source"] == {"g3": 8}


# ---- "G3 evicts least recently used blocks that are not being transferred." ----------------------------

@pytest.mark.parametrize("g3_blocks, evicted, admission", [
    (3, 1, (42.0, "g2.worker0.dp0", 4, 4)),  # 3, 4 evict 1 (the older of A's blocks): 2 is still read
    # 3, 4 evict 1 and 2: C recomputes 2 and, having loaded nothing, stores from block 0 (vLLM's connector): its G1
    # hit 1, which G2 no longer holds, and 2, whose writes evict 3 and 4
    (2, 4, (40.0, "worker0.dp0", 4, 0)),
])
def test_g3_evicts_least_recently_used(tmp_path, g3_blocks, evicted, admission):
    run = replay(tmp_path, BACK, g3_blocks=g3_blocks)
    assert (run.g3["evictions"], run.g3["resident_blocks"]) == (evicted, g3_blocks)
    assert run.admissions(2) == [admission]


def test_blocks_being_written_are_not_evicted(tmp_path):
    """G3 holds 2 blocks and A's two are still being written when B's store lands (writes at 1 ms per block
    would end at 14 ms; B's G2 store lands at 12 ms too, but A's entries are WRITING): B's write finds no
    block it may evict and is dropped."""
    rows = [row(0, 8, 1, [1, 2]), row(0, 8, 1, [3, 4])]
    run = replay(tmp_path, rows, g1_blocks=8, host_blocks=4, g3_blocks=2)
    assert (run.g3["evictions"], run.g3["dropped_writes"], run.g3["write_blocks"]) == (0, 2, 2)


# ---- bandwidth: worker_local grows with workers, cluster_shared is capped and split max-min ---------------

@pytest.mark.parametrize("scope, shared, wait_ms, landed_by_15ms", [
    ("worker_local", None, 0.0, True),  # each worker writes at its own 1 GB/s: 12 -> 14 ms
    ("cluster_shared", 0, 0.0, True),  # shared limit 0 = unlimited: the per-worker limit binds
    ("cluster_shared", 1.0, 4.0, False),  # 1 GB/s for both: 0.5 each, 12 -> 16 ms, 2 ms late each
])
def test_write_bandwidth_per_worker_or_shared(tmp_path, scope, shared, wait_ms, landed_by_15ms):
    rows = [row(0, 8, 1, [1, 2]), row(0, 8, 1, [3, 4])]  # one per worker; both G2 stores land at 12 ms
    run = replay(tmp_path, rows, scope=scope, replicas=2, shared_bandwidth=shared)
    assert run.g3["write_bandwidth_wait_ms"] == wait_ms
    cut = replay(tmp_path, rows, scope=scope, replicas=2, shared_bandwidth=shared, stop_s=0.015)
    states = {state for w in (0, 1) for state in cut.store(w).entries.values()}
    assert states == ({READY} if landed_by_15ms else {WRITING})


def test_worker_local_bandwidth_grows_with_workers_shared_is_capped():
    """Spec: 16 workers at 10 GB/s reach 160 GB/s with worker_local; cluster_shared caps them at 80 GB/s."""
    groups = list(range(16))
    limits = {g: 10.0 for g in groups}
    assert sum(fair_rates(groups, limits, None)) == pytest.approx(160.0)
    assert fair_rates(groups, limits, 80.0) == [pytest.approx(5.0)] * 16


# ---- "If the rank makes no progress for 1,024 consecutive restore rounds, ... recomputes" ------------------

def test_restores_that_keep_evicting_each_other_are_bypassed(tmp_path):
    """G1 5 blocks, G2 2 blocks.  A [1, 2] and B [1, 2, 3] leave 1, 2, 3 in G3; C (5 blocks) flushes G1 and G2.
    D [1, 2, 3, 9] at 60 ms: G3 holds its 3 prompt blocks, G2 only 2 fit, and each read evicts a block the
    previous one brought (62 ms: 1, 2; then 3 evicts 2, 2 evicts 3, ...).  The first read moves 2 blocks
    (60 -> 62 ms), the next 1,023 one each (1 ms): after the 1,024th round, at 1,085 ms, D loads the one block
    G2 holds (1 ms) and recomputes the rest."""
    rows = [row(0, 8, 1, [1, 2]), row(20, 12, 1, [1, 2, 3]), row(40, 17, 1, [4, 5, 6, 7, 8]),
            row(60, 13, 1, [1, 2, 3, 9])]
    run = replay(tmp_path, rows, g1_blocks=5)
    assert BYPASS_ROUNDS == 1024
    assert run.g3["bypassed_restores"] == 1
    assert (run.g3["read_jobs"], run.g3["read_blocks"]) == (1024, 1025)
    assert run.admissions(3) == [(1086.0, "g2.worker0.dp0", 0, 4)]
    assert run.ttft(3) == 1036.0


# ---- the summary section ----------------------------------------------------------------------------------

def test_summary_section_lists_every_counter(tmp_path):
    run = replay(tmp_path, BACK)
    assert run.g3 == {
        "scope": "worker_local", "stores": 1, "capacity_blocks": 8, "resident_blocks": 4, "lookup_hits": 1,
        "read_jobs": 1, "read_blocks": 1, "read_bytes": BLOCK, "write_jobs": 2, "write_blocks": 4,
        "write_bytes": 4 * BLOCK, "evictions": 0, "dropped_writes": 0, "cross_worker_read_blocks": 0,
        "read_bandwidth_wait_ms": 0.0, "write_bandwidth_wait_ms": 0.0}  # no bypassed_restores: it is zero


# ---- a chain of three tiers, from data alone (issue 11) ------------------------------------------------

def three_tiers(plan: dict, directory: Path):
    """G2 and G3 as the plan has them, then a third tier written back from G3: 8 blocks that are never evicted,
    links like G3's (1 GB/s, no latency) and a summary section of its own.  Data only: no class is added for it."""
    (role,) = finish_plan(plan, directory).roles
    g3 = storage_tier_spec(role.storage)
    g4 = replace(g3, label="g4", capacity=8, order="none", section="g4_offload")
    specs = [host_tier_spec(role.host), g3, g4]
    return lambda replay: attach_chains(replay.ranks(), specs)


def test_a_third_tier_from_data_serves_what_g2_and_g3_evicted(tmp_path):
    """Scenario "back" with a 2-block G3 and a third tier below it: A's blocks 1, 2 go G2 (12 ms), G3 (14 ms),
    tier three (16 ms); B's 3, 4 evict them from G2 and G3 (the third keeps all).  C at 40 ms finds block 1 in
    G1 and block 2 only in the third tier: it is read up into G2 (1 ms), loaded into G1 (1 ms), and C is admitted
    at 42 ms reusing both blocks, exactly as a read from G3 would be."""
    plan = compile_scenario(tmp_path, BACK, config(g3_blocks=2), "g4.yaml")
    _, single, records = replay_both_ways(plan, tmp_path, prepare=three_tiers(plan, tmp_path))
    run = Run(single, records)
    assert [tier.label for tier in single.ranks()[0].chain.tiers] == ["g2", "g3", "g4"]
    assert run.admissions(2) == [(42.0, "g2.worker0.dp0", 4, 4)]
    assert run.g3["evictions"] == 2 and run.g3["read_jobs"] == 0
    g4 = run.sections["g4_offload"]
    assert {k: g4[k] for k in ("write_blocks", "resident_blocks", "evictions", "read_blocks", "read_bytes")} == \
        {"write_blocks": 4, "resident_blocks": 4, "evictions": 0, "read_blocks": 1, "read_bytes": BLOCK}
    assert run.g2[0]["filled_from_g4"] == 1 and "filled_from_g3" not in run.g2[0]
