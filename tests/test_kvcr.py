"""KVCR peer fetch: kv-cache-tiers.md "KVCR peer fetch", one test (or small group) per behaviour, hand-built.

Scenarios are native ReplaySpecs (hints come from `kv_hints`) with two aggregated workers of one rank each
(rank i is worker i), requests pinned with `worker_idx`, and prompts given as token ids, so that a test chooses which requests share
which blocks: `prompt(1, 2, extra=1)` is block 1, block 2 and one more token.  Conventions, unless a test says
otherwise (every time is then a round number):
- block_size 4 and bytes_per_token 250,000: one G1 block = one G2 block = 1,000,000 bytes per GPU;
- G2 d2h/h2d and the KVCR bandwidth at 1.0 GB/s: 1 ms per block, no latency;
- fixed timing: a pass with prefill costs 10 ms, a decode-only pass 1 ms; one output token per request.

The basic story: r0 [1, 2] runs on rank 0 (0 -> 10 ms) and stores both blocks to rank 0's G2 (10 -> 12 ms).
r1 [1, 2] + 1 token arrives at 20 ms on rank 1 with a hint naming rank 0: its prefix is in neither rank 1's G1
nor its G2, so rank 1 pulls both blocks (20 -> 22 ms), takes the pull at once (its worker is idle), loads them
G2 -> G1 (22 -> 24 ms) and prefills (24 -> 34 ms): TTFT 14 ms instead of 10 + the recompute it saves.
"""
from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.tiers import peer_fetch
from kvreplay.runtime.outputs.files import canonical
from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.copy_jobs import BYPASS_ROUNDS
from kvreplay.runtime.tiers.peer_fetch import PeerFetch
from kvreplay.compiler.plan_records import LinkPlan, TierPlan
from kvreplay.runtime.build import host_tier_spec
from kvreplay.runtime.tiers.chain_build import attach_chains
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.scheduler import Rank

from kvreplay.examples.trace_config import mooncake_trace_config

from .golden import golden_extension
from .scenarios import BS, ScenarioRun, replay_both_ways
from .support import EXAMPLES, output_bytes, shared_trace
from .test_replay import predict

BLOCK = 1_000_000
HOST = "g2.worker{}.dp0"


def prompt(*blocks: int, extra: int = 0) -> list[int]:
    """Token ids: BS tokens per block id (the same id gives the same block), then `extra` unique tokens."""
    return [100 * b + i for b in blocks for i in range(BS)] + [90_000 + i for i in range(extra)]


def request(rid: str, at: float, ids: list[int], rank: int, hints: list[dict] | None = None, out: int = 1) -> dict:
    item = {"id": rid, "arrival_time_ms": at, "input_tokens": len(ids), "input_token_ids": ids,
            "output_tokens": out, "worker_idx": rank}
    if hints is not None:
        item["kv_hints"] = hints
    return item


def spec(requests: list[dict], *, host_blocks: int = 8, g1_blocks: int = 16, bandwidth: float = 1.0,
         latency_ms: float = 0.0, tensor: int = 1, workers: int = 2, kvcr: bool = True, stop_ms: float | None = None,
         schedule: list | None = None) -> dict:
    kv = {"block_size": BS, "bytes_per_token": 250_000, "capacity": {"type": "fixed", "blocks": g1_blocks},
          "host_offload": {"num_host_blocks": host_blocks, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}}
    if kvcr:
        kv["kvcr"] = {"latency_to_first_byte_ms": latency_ms, "bandwidth_gbps": bandwidth}
    topology = {"initial_workers": workers, **({"schedule": schedule} if schedule else {})}
    doc = {"version": 1, "topology": {"kind": "aggregated", "workers": topology},
           "engine": {"model": "Qwen/Qwen3-8B", "hardware": "h200_sxm",
                      "workers": {"aggregated": {"parallelism": {"tensor": tensor},
                                                 "timing": {"type": "fixed", "prefill_ms": 10, "decode_ms": 1},
                                                 "scheduler": {"max_batched_tokens": 64, "max_sequences": 4},
                                                 "kv_cache": kv}}},
           "requests": requests}
    if stop_ms is not None:
        doc["max_sim_time_ms"] = stop_ms
    return doc


class Run(ScenarioRun):
    @property
    def kvcr(self) -> dict:
        return self.sections["kvcr"]

    def g2(self, rank: int) -> dict:
        return self.sections["g2_domains"][rank]


def replay(tmp_path: Path, doc: dict, prepare=None) -> Run:
    result = compile_bytes(orjson.dumps(doc), str(tmp_path / "spec.json"), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    _, single, records = replay_both_ways(result.plan.to_dict(), tmp_path, prepare=prepare)
    return Run(single, records)


R0 = request("r0", 0.0, prompt(1, 2), rank=0)
HINT0 = [{"rank": 0}]


def r1(at: float = 20.0, hints=HINT0, ids=None, rank: int = 1, rid: str = "r1") -> dict:
    return request(rid, at, ids if ids is not None else prompt(1, 2, extra=1), rank=rank, hints=hints)


# ---- "the rank checks the source's G2 block by block, in prompt order ... stops at the first block the source
#      lacks"; "Pulled blocks land in the rank's own G2 and load to G1 like any G2 hit" ---------------------------

@pytest.mark.parametrize("latency_ms", [0.0, 1.0])
def test_a_hinted_prefix_is_pulled_then_loaded_like_a_g2_hit(tmp_path, latency_ms):
    run = replay(tmp_path, spec([R0, r1()], latency_ms=latency_ms))
    admitted = 24.0 + latency_ms
    assert run.admissions(1) == [(admitted, HOST.format(1), 0, 8)]
    assert run.ttft(1) == pytest.approx(14.0 + latency_ms)
    assert run.kvcr == {"pulls": {"success": 1, "partial": 0}, "blocks": 2, "bytes": 2 * BLOCK,
                        "remote_deliver_ms": 2.0 + latency_ms, "source_wait_ms": 0.0, "loaded_blocks": 2,
                        "unused_blocks": 0}
    assert run.g2(1)["filled_from_peer"] == 2 and run.g2(1)["restores"] == 2
    # both restored blocks were pulled from the peer for this request (the report's reuse by source)
    assert run.records[1]["admission_history"][0]["host_reused_by_source"] == {"peer": 8}


def test_without_kvcr_the_same_request_recomputes(tmp_path):
    run = replay(tmp_path, spec([R0, r1()], kvcr=False))
    assert run.admissions(1) == [(20.0, "worker1.dp0", 0, 0)] and run.ttft(1) == 10.0


def test_the_pull_stops_at_the_first_block_the_source_lacks(tmp_path):
    """r1's prompt is 1, 2, 3, 4: rank 0 holds 1, 2 only, so the pull moves those two and is `partial`; r1
    recomputes 3 and 4."""
    run = replay(tmp_path, spec([R0, r1(ids=prompt(1, 2, 3, 4, extra=1))]))
    assert run.kvcr["pulls"] == {"success": 0, "partial": 1} and run.kvcr["blocks"] == 2
    assert run.admissions(1) == [(24.0, HOST.format(1), 0, 8)]


def test_only_blocks_missing_from_g1_and_g2_are_pulled(tmp_path):
    """Rank 1 already holds block 1 in G1 (rq [1] + 1 token ran there): only block 2 is pulled."""
    rq = request("rq", 0.0, prompt(1, extra=1), rank=1)
    run = replay(tmp_path, spec([R0, rq, r1()]))
    assert run.kvcr["blocks"] == 1 and run.kvcr["pulls"] == {"success": 1, "partial": 0}
    assert run.admissions(2) == [(22.0, HOST.format(1), 4, 4)]  # pull 20 -> 21, load 21 -> 22
    assert run.records[2]["admission_history"][0]["host_reused_by_source"] == {"peer": 4}


# ---- "A pull starts when the source finishes its current forward pass, including a pass that starts at the
#      same instant ..., waits latency_to_first_byte_ms, then moves bytes" -------------------------------------

def test_a_pull_waits_for_the_sources_running_pass(tmp_path):
    """rs (another prompt) runs on rank 0 from 15 to 25 ms: r1's pull, asked at 20 ms, starts at 25 ms."""
    rs = request("rs", 15.0, prompt(7, 8), rank=0)
    run = replay(tmp_path, spec([R0, rs, r1()]))
    assert run.kvcr["source_wait_ms"] == 5.0 and run.kvcr["remote_deliver_ms"] == 7.0
    assert run.admissions(2) == [(29.0, HOST.format(1), 0, 8)]


def test_a_source_pass_starting_at_the_same_instant_counts(tmp_path):
    """The receiver is rank 0 and the source rank 1 (whose worker the replay starts after rank 0's): rs starts
    a pass on rank 1 at 20 ms, the instant r1 asks, so the pull starts when that pass ends, at 30 ms."""
    r0 = request("r0", 0.0, prompt(1, 2), rank=1)
    rs = request("rs", 20.0, prompt(7, 8), rank=1)
    run = replay(tmp_path, spec([r0, rs, r1(hints=[{"rank": 1}], rank=0)]))
    assert run.kvcr["source_wait_ms"] == 10.0
    assert run.admissions(2) == [(34.0, HOST.format(0), 0, 8)]


def test_each_pulled_block_carries_every_gpu_of_the_source_rank(tmp_path):
    """tensor 2: a pulled block moves G2 block bytes x 2 (2 MB, 2 ms); G2 itself stays per-GPU (1 ms a block)."""
    run = replay(tmp_path, spec([R0, r1()], tensor=2))
    assert run.kvcr["bytes"] == 4 * BLOCK and run.kvcr["remote_deliver_ms"] == 4.0
    assert run.g2(1)["h2d_bytes"] == 2 * BLOCK
    assert run.admissions(1) == [(26.0, HOST.format(1), 0, 8)]


def test_concurrent_pulls_from_one_source_share_its_bandwidth_equally(tmp_path):
    """Ranks 1 and 2 both pull [1, 2] from rank 0 at 20 ms: 0.5 GB/s each, landing at 24 ms."""
    r2 = r1(rank=2, rid="r2")
    run = replay(tmp_path, spec([R0, r1(), r2], workers=3))
    assert run.kvcr["remote_deliver_ms"] == 8.0 and run.kvcr["blocks"] == 4
    assert run.admissions(1) == [(26.0, HOST.format(1), 0, 8)]
    assert run.admissions(2) == [(26.0, HOST.format(2), 0, 8)]


# ---- "Requests on one rank that need the same blocks share one pull." --------------------------------------

def test_requests_that_need_the_same_blocks_share_one_pull(tmp_path):
    twin = r1(rid="r1b")
    run = replay(tmp_path, spec([R0, r1(), twin]))
    assert run.kvcr["pulls"] == {"success": 1, "partial": 0} and run.kvcr["blocks"] == 2
    assert run.admissions(1) == [(24.0, HOST.format(1), 0, 8)]
    assert run.admissions(2)[0][2:] == (8, 0)  # the twin reuses what r1 loaded, from G1


# ---- "The source's blocks are then protected from eviction until the rank takes the landed pull: as soon as it
#      lands if the rank's worker is idle, otherwise when that worker's current pass ends." -------------------------

def test_a_landed_pull_is_taken_when_the_receiving_pass_ends(tmp_path):
    """rb runs on rank 1 from 21 to 31 ms; r1's pull lands at 22 ms and is taken at 31 ms: load 31 -> 33 ms."""
    rb = request("rb", 21.0, prompt(7, 8), rank=1)
    run = replay(tmp_path, spec([R0, r1(), rb]))
    assert run.kvcr["remote_deliver_ms"] == 2.0  # submit to landing
    assert run.admissions(1) == [(33.0, HOST.format(1), 0, 8)]


def test_a_cutoff_misses_a_pull_landed_during_a_running_pass(tmp_path):
    rb = request("rb", 21.0, prompt(7, 8), rank=1)
    run = replay(tmp_path, spec([R0, r1(), rb], stop_ms=25.0))
    assert run.kvcr["pulls"] == {"success": 0, "partial": 0} and run.kvcr["blocks"] == 0


def test_the_sources_blocks_are_protected_until_the_pull_is_taken(tmp_path):
    """Rank 0's G2 holds 2 blocks, both pulled at 0.1 GB/s (20 -> 40 ms).  rs [7, 8] on rank 0 stores at 31 ms:
    1 and 2 may not be evicted, so its store finds no room; after the pull, rt's store at 51 ms evicts them."""
    rs = request("rs", 21.0, prompt(7, 8), rank=0)
    rt = request("rt", 41.0, prompt(5, 6), rank=0)
    run = replay(tmp_path, spec([R0, r1(), rs, rt], host_blocks=2, bandwidth=0.1))
    assert run.g2(0)["dropped_stores"] == 2 and run.g2(0)["evictions"] == 2
    unprotected = replay(tmp_path, spec([R0, rs, rt], host_blocks=2))
    assert unprotected.g2(0)["dropped_stores"] == 0 and unprotected.g2(0)["evictions"] == 4


# ---- "The rank reserves G2 slots only for the blocks the source holds, all in one reservation per pull. A pull
#      never evicts ... a block of the hinted prompt that the rank's G1 does not hold" ---------------------------

def test_a_pull_stops_at_the_first_block_without_room(tmp_path):
    """Rank 1's G2 holds 2 blocks and r1 needs 1, 2, 3: the pull takes 1, 2 (partial: no room for 3).  After it,
    3 would need the room of 1 or 2, which the prompt needs: no second pull; r1 loads 1, 2, recomputes 3."""
    r0 = request("r0", 0.0, prompt(1, 2, 3), rank=0)
    run = replay(tmp_path, spec([r0, r1(ids=prompt(1, 2, 3, extra=1))], host_blocks=2))
    assert run.kvcr["pulls"] == {"success": 0, "partial": 1} and run.kvcr["blocks"] == 2
    assert run.admissions(1) == [(24.0, HOST.format(1), 0, 8)]


@pytest.mark.parametrize("first_in_g1, pulled", [(True, [2]), (False, None)])
def test_g2_copies_of_blocks_already_in_g1_stay_evictable(first_in_g1, pulled):
    """Rank level.  The receiver's G2 (2 blocks) holds 1 and 3 of the prompt 1, 2, 3; the source holds all three.
    Block 2 is missing.  With 1 also in G1, its G2 copy may make room for 2; without, 1 and 3 are both blocks the
    request will load from G2, and the pull has no room at all."""
    receiver, source = host_rank(0, 2), host_rank(1, 4)
    request = Request(RequestSpec(0, 13, 1, Content(segments=((7, 0, 13), (8, 0, 1)))), 0, 0, BS)
    k1, k2, k3 = request.keys[:3]
    for rank, keys in ((receiver, [k1, k3]), (source, [k1, k2, k3])):
        rank.chain.top.reserve(keys)
        rank.chain.top.landed(keys)
    start = 0
    if first_in_g1:
        receiver.pool.register_run(receiver.pool.allocate(1), [k1], 0, 1)
        start = 1
    request.tier.hint = source
    assert peer_fetch.pull(receiver, request, start, 3) == (pulled is not None)
    if pulled is not None:
        (job,) = receiver.jobs
        assert job.keys == [k2] and not job.partial
        assert not receiver.chain.top.holds(k1) and receiver.chain.top.holds(k3)
        assert source.chain.top.pinned == {k2: 1}  # protected until the pull is taken


def host_rank(index: int, host_blocks: int) -> Rank:
    rank = Rank(index, index, BlockPool(8), BS, 64, 8, True, name=f"worker{index}.dp0")
    attach_chains([rank], [host_tier_spec(TierPlan("dp_rank_local", False, host_blocks, BLOCK, LinkPlan(1.0, None, 0),
                                                   LinkPlan(1.0, None, 0), "offloading_v0_24"))])
    rank.chain.kvcr = PeerFetch(0, 1.0, BLOCK)
    return rank


# ---- "If the rank makes no progress for 1,024 consecutive pull rounds, the request recomputes" ---------------

def test_a_rank_without_progress_for_1024_rounds_recomputes(tmp_path):
    """The rank has landed 1,024 rounds (pulls or reads) since its last G2 -> G1 load: r1 recomputes instead."""
    def stuck(replay):
        replay.ranks()[1].chain.copies_in_since_load = BYPASS_ROUNDS

    run = replay(tmp_path, spec([R0, r1()]), prepare=stuck)
    assert run.kvcr["bypassed"] == 1 and run.kvcr["blocks"] == 0
    assert run.admissions(1) == [(20.0, "worker1.dp0", 0, 0)]


def test_a_taken_pull_is_a_round_and_a_load_is_progress(tmp_path):
    run = replay(tmp_path, spec([R0, r1()]))
    assert run.replay.ranks()[1].chain.copies_in_since_load == 0  # the load after the pull reset it
    assert BYPASS_ROUNDS == 1024


# ---- hints --------------------------------------------------------------------------------------------------

def test_a_hint_naming_the_receiving_rank_is_ignored(tmp_path):
    run = replay(tmp_path, spec([R0, r1(hints=[{"rank": 1}])]))
    assert run.kvcr["blocks"] == 0 and run.admissions(1) == [(20.0, "worker1.dp0", 0, 0)]


def test_the_hint_with_most_cached_tokens_is_used(tmp_path):
    """Three workers; rank 2 holds nothing, rank 0 the prefix: the hint naming rank 0 has more cached tokens."""
    run = replay(tmp_path, spec([R0, r1(hints=[{"rank": 2, "cached_tokens": 4}, {"rank": 0, "cached_tokens": 8}])],
                                workers=3))
    assert run.kvcr["blocks"] == 2


def test_a_hint_may_name_a_worker_and_its_dp_rank(tmp_path):
    run = replay(tmp_path, spec([R0, r1(hints=[{"worker_idx": 0, "rank": 0}])]))
    assert run.kvcr["blocks"] == 2


def test_without_hints_kvcr_changes_nothing_but_its_section(tmp_path):
    plain = replay(tmp_path, spec([R0, r1(hints=None)], kvcr=False))
    idle = replay(tmp_path, spec([R0, r1(hints=None)]))
    assert idle.records == plain.records
    sections = idle.sections
    assert sections.pop("kvcr")["blocks"] == 0 and sections == plain.sections


KVCR_ON = {"host-offload-prediction": "aggregated", "mooncake-trace": "aggregated", "disaggregated-pd": "prefill"}


@pytest.mark.parametrize("example, role", sorted(KVCR_ON.items()))
def test_adding_kvcr_without_hints_is_byte_identical_but_for_its_section(tmp_path, example, role):
    """CLI traffic carries no hints: `kvcr` (on the aggregated or the prefill role) only adds its idle section."""
    kv = f"engine.workers.{role}.kv_cache"
    g2 = [f"{kv}.host_offload.num_host_blocks=16000"]
    config = EXAMPLES / f"{example}.yaml"
    assert predict(config, tmp_path / "g2", "--capture-per-request", overrides=g2)[0] == 0
    assert predict(config, tmp_path / "kvcr", "--capture-per-request", overrides=g2 + [f"{kv}.kvcr.bandwidth_gbps=50"])[0] == 0
    (g2_prediction, g2_records), (prediction, records) = output_bytes(tmp_path / "g2"), output_bytes(tmp_path / "kvcr")
    assert records == g2_records
    without = orjson.loads(prediction)
    assert without.pop("kvcr")["pulls"] == {"success": 0, "partial": 0}
    assert canonical(without) == g2_prediction


# ---- a two-worker trace replay with a KV-aware router --------------------------------------------------------

def test_kv_aware_placement_pulls_and_lowers_ttft_on_a_real_trace(tmp_path, snapshot):
    """The synthetic Mooncake trace on two workers (G1 1,000 blocks of 512 tokens, G2 4,000 blocks each, roofline
    timing).  Round robin with G2 alone against the KV-aware router with KVCR: pulls happen, first-admission reuse
    and mean TTFT improve, and every pulled block is either loaded into G1 or left unused (here all are loaded
    since the prompts past Qwen3-8B's context are rejected on arrival)."""
    trace = shared_trace("synthetic_trace.jsonl")
    runs = {}
    for name, knobs in (("g2", {}), ("kvcr", {"kvcr": True, "placement": "kv_aware"})):
        config = tmp_path / f"{name}.yaml"
        config.write_text(mooncake_trace_config(trace, block_size=512, g1_blocks=1000, host_blocks=4000, replicas=2,
                                                fixed_timing=False, **knobs))
        assert predict(config, tmp_path / name)[0] == 0
        runs[name] = orjson.loads((tmp_path / name / "prediction.json").read_bytes())
    g2, kvcr = runs["g2"], runs["kvcr"]
    pulls = kvcr["kvcr"]
    assert pulls["pulls"]["success"] + pulls["pulls"]["partial"] > 100
    assert pulls["blocks"] == pulls["loaded_blocks"] + pulls["unused_blocks"] and pulls["loaded_blocks"] > 0
    assert pulls["bytes"] == pulls["blocks"] * 512 * 147_456  # Qwen3-8B BF16: 147,456 bytes per token, tensor 1
    assert kvcr["mean_ttft_ms"] < 0.8 * g2["mean_ttft_ms"]
    assert kvcr["first_admission_prefix_cache_reused_ratio"] > g2["first_admission_prefix_cache_reused_ratio"] + 0.05
    assert kvcr == snapshot.use_extension(golden_extension("replays"))(name="synthetic-trace-kv-aware-kvcr.summary")


# ---- "a pull from another DP rank of the same worker starts when the worker's current pass ends" ---------------

def test_a_pull_between_dp_ranks_of_one_worker_waits_for_the_workers_pass(tmp_path):
    """One worker, attention_data 2 (ranks 0 and 1 step together).  r0 [1, 2] on DP rank 1; rs (3 output tokens)
    on DP rank 1 prefills 15 -> 25 ms and decodes 25 -> 26 -> 27.  r1 arrives on DP rank 0 at 20 ms and is looked
    up when the worker's pass ends, at 25 ms, as the next pass starts: the pull starts when that pass ends (26),
    lands at 28 (the worker is idle from 27), and r1 loads 28 -> 30 ms."""
    r0 = request("r0", 0.0, prompt(1, 2), rank=0) | {"dp_rank": 1}
    rs = request("rs", 15.0, prompt(7, 8), rank=0, out=3) | {"dp_rank": 1}
    ask = r1(hints=[{"rank": 1}], rank=0) | {"dp_rank": 0}
    doc = spec([r0, rs, ask], workers=1)
    doc["engine"]["workers"]["aggregated"]["parallelism"]["attention_data"] = 2
    run = replay(tmp_path, doc)
    assert [r["dp_rank"] for r in run.records] == [1, 1, 0]
    assert run.kvcr["source_wait_ms"] == 1.0 and run.kvcr["blocks"] == 2
    assert run.admissions(2) == [(30.0, "g2.worker0.dp0", 0, 8)]


# ---- "KVCR supports ... pulls between the prefill ranks of P/D" ------------------------------------------------

def test_pulls_between_the_prefill_ranks_of_pd(tmp_path):
    """Two prefill workers and one decode worker; r1's prefill on worker 1 pulls r0's prefix from worker 0."""
    doc = spec([R0 | {"prefill_worker_idx": 0}, r1() | {"prefill_worker_idx": 1}])
    for item in doc["requests"]:
        del item["worker_idx"]
    kv = doc["engine"]["workers"].pop("aggregated")
    doc["engine"]["workers"] = {"prefill": kv, "decode": {**copy.deepcopy(kv), "kv_cache": {
        "block_size": BS, "bytes_per_token": 250_000, "capacity": {"type": "fixed", "blocks": 16}}}}
    doc["topology"] = {"kind": "disaggregated", "prefill": {"initial_workers": 2}, "decode": {"initial_workers": 1}}
    run = replay(tmp_path, doc)
    assert run.records[1]["prefill_worker_idx"] == 1
    assert run.kvcr["pulls"] == {"success": 1, "partial": 0} and run.kvcr["loaded_blocks"] == 2
    assert run.admissions(1)[0] == (24.0, "g2.prefill.worker1.dp0", 0, 8)


# ---- "a draining worker is removed only after every pull from or into it has landed and been taken" ----------

def test_a_draining_source_is_removed_once_its_pull_is_taken(tmp_path):
    """Worker 1 leaves at 21 ms (schedule: one worker from then on) while r1 on worker 0 pulls from it at
    0.1 GB/s (20 -> 40 ms): it is removed at 40 ms, when the pull is taken, not at 21 ms."""
    r0 = request("r0", 0.0, prompt(1, 2), rank=1)
    ask = r1(hints=[{"rank": 1}], rank=0)
    run = replay(tmp_path, spec([r0, ask], bandwidth=0.1, schedule=[{"at_ms": 21.0, "workers": 1}]))
    assert run.kvcr["blocks"] == 2
    (period,) = run.sections["workers"][1]["periods"]
    assert (period["left_ms"], period["removed_ms"]) == (21.0, 40.0)


def test_a_hint_naming_a_removed_worker_is_ignored(tmp_path):
    """Worker 1 left at 15 ms and, idle, was removed then: r1's hint at 20 ms names nothing that exists."""
    r0 = request("r0", 0.0, prompt(1, 2), rank=1)
    ask = r1(hints=[{"rank": 1}], rank=0)
    run = replay(tmp_path, spec([r0, ask], schedule=[{"at_ms": 15.0, "workers": 1}]))
    assert run.kvcr["blocks"] == 0 and run.admissions(1) == [(20.0, "worker0.dp0", 0, 0)]
    assert run.sections["workers"][1]["periods"][0]["removed_ms"] == 15.0
