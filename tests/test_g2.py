"""Host offload (G2): kv-cache-tiers.md "Host offload (G2)", checked on small hand-built scenarios.

Layout follows the spec section: knob table, "How G2 behaves", "Connector profiles" (one test or small
parametrized group per table row, plus the three listed differences from vLLM), "Scope", "Supported"
(the report), then determinism of the spec's example.

Conventions, unless a test says otherwise (so that every time is a round number):
- block_size 4 and bytes_per_token 250,000: one G1 block = one G2 block = 1,000,000 bytes;
- d2h/h2d 1.0 GB/s (= 1 byte/ns): 1 ms per block on an idle link, latency_to_first_byte 0;
- fixed timing: a pass with prefill costs 10 ms, a decode-only pass 1 ms;
- traffic is a Mooncake trace written to tmp_path with `traffic.source.block_size: 4`, so every hash_id is
  exactly one engine block and the tests choose which requests share which blocks.  A prompt of L tokens
  has L // 4 full prompt blocks; a block holding an output token is private to its request.
- events are read back from the KV-event log and hash_ids are shown instead of block hashes; a block that
  holds output tokens is shown as "out<request>.<block>".

Every engine scenario is replayed twice: with macro steps and without KV events, then single-stepped with
KV events; both must give the same records and G2 counters.

Rank-level tests (section "rank level") drive runtime.scheduler directly, as tests/test_scheduler.py does,
for connector rows whose triggering state the full engine cannot reach (see their docstrings).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_bytes, compile_file
from kvreplay.runtime.tiers import offload
from kvreplay.runtime.shell.replay import Replay
from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.connectors import PROFILES
from kvreplay.runtime.tiers.chain_build import attach_chains
from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.plan_records import LinkPlan, TierPlan
from kvreplay.runtime.build import build, host_tier_spec
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.pass_results import finish_pass
from kvreplay.runtime.serving.scheduler import Rank, preempt, schedule
from kvreplay.runtime.timing.fixed import fixed_timing

from .scenarios import (BS, MS, SCENARIO_TRAFFIC, ScenarioRun, aggregated_config, compile_scenario, domain_summaries,
                        predict_scenario, replay_both_ways, row, token_times)
from .support import EXAMPLES, read_outputs

BLOCK = 1_000_000  # bytes of one G1/G2 block: BS x 250,000
V24, V32, SIMPLE = "offloading_v0_24", "offloading_v0_32", "simple_cpu_v0_32"
CONNECTORS = (V24, V32, SIMPLE)
OFFLOADING = (V24, V32)
KV = "engine.workers.aggregated.kv_cache"


# ============================================================================================ harness

def config_text(*, connector: str = V24, g1_blocks: int = 4, host_blocks: int = 8, latency_ms: float = 0.0,
                bandwidth: float = 1.0, bytes_per_token: int | str = 250_000, parallelism: str = "",
                scope: str | None = None, shared_bandwidth: float | None = None, budget: int = 64,
                max_sequences: int = 4) -> str:
    host = {"num_host_blocks": host_blocks, "connector": connector, "latency_to_first_byte_ms": latency_ms,
            "d2h_bandwidth_gbps": bandwidth, "h2d_bandwidth_gbps": bandwidth}
    if scope is not None:
        host["scope"] = scope
    if shared_bandwidth is not None:
        host["shared_d2h_bandwidth_gbps"] = host["shared_h2d_bandwidth_gbps"] = shared_bandwidth
    return aggregated_config({"host_offload": host}, g1_blocks=g1_blocks, bytes_per_token=bytes_per_token,
                             parallelism=parallelism, budget=budget, max_sequences=max_sequences)


def compile_plan(tmp_path: Path, rows: list[dict], **knobs) -> dict:
    return compile_scenario(tmp_path, rows, config_text(**knobs), "g2.yaml")


@dataclass
class Run(ScenarioRun):
    events: list[dict]
    labels: dict

    def _events(self, host: bool) -> list[tuple]:
        return [(e["time_ms"], e["type"], [self.labels.get(h, h) for h in e["block_hashes"]])
                for e in self.events if ("tier" in e) == host]

    @property
    def g2(self) -> list[tuple]:
        """G2 events as (time ms, Stored/Removed, [hash ids])."""
        return self._events(host=True)

    @property
    def g1(self) -> list[tuple]:
        return self._events(host=False)

    @property
    def domains(self) -> list[dict]:
        return domain_summaries(self.replay)

    @property
    def domain(self) -> dict:
        (only,) = self.domains
        return only

    def first_token(self, index: int) -> float:
        return self.records[index]["first_token_ms"]



def _labels(replay: Replay) -> dict:
    """Block hash -> trace hash_id (prompt blocks) or "out<request>.<block>" (blocks holding output)."""
    labels = {}
    for request in replay.requests:
        ids, full = request.spec.content.hash_ids, request.spec.prompt_len // BS
        for i, key in enumerate(request.keys):
            label = ids[i] if i < full else f"out{request.spec.index}.{i}"
            labels.setdefault(replay.kv_log.hash_of.get(key, key), label)
    return labels


def replay_trace(tmp_path: Path, rows: list[dict], **knobs) -> Run:
    """Replay the rows with macro steps, then single-stepped with KV events; both must agree."""
    _, replay, records = replay_both_ways(compile_plan(tmp_path, rows, **knobs), tmp_path, kv_events=True)
    return Run(replay, records, replay.kv_log.records, _labels(replay))


# ---- rank level: one rank driven through runtime.scheduler, copies completed by hand ----------------

TIMING = fixed_timing(10_000_000, 1_000_000)


def host_rank(connector: str, g1_blocks: int, host_blocks: int) -> Rank:
    rank = Rank(0, 0, BlockPool(g1_blocks), BS, 64, 8, True, name="worker0.dp0")
    attach_chains([rank], [host_tier_spec(TierPlan("dp_rank_local", False, host_blocks, BLOCK, LinkPlan(1.0, None, 0),
                                                   LinkPlan(1.0, None, 0), connector))])
    return rank


def synthetic(index: int, prompt: int, output: int, source: int) -> Request:
    """A request whose prompt is `prompt` tokens of `source` (shared by requests naming the same source)."""
    spec = RequestSpec(index, prompt, output, Content(segments=((source, 0, prompt), (1000 + index, 0, output))),
                       arrival_ns=0)
    return Request(spec, 0, 0, BS)


def run_pass(rank: Rank, now: int):
    """Schedule one pass at `now` and apply it; returns (batch items as (request, tokens), end time)."""
    batch = schedule(rank, now)
    assert batch is not None
    end = now + TIMING(batch.work)
    items = list(batch.items)
    finish_pass(rank, batch, end)
    return items, end


def land(rank: Rank, kind: str) -> list:
    """Complete every pending copy of `kind` ("store" or "load"), as the engine does when it lands."""
    landed = offload.stored if kind == "store" else offload.restored
    jobs = [job for job in rank.jobs if job.landed is landed]
    rank.jobs = [job for job in rank.jobs if job.landed is not landed]
    for job in jobs:
        landed(rank, job, 0)
    return jobs


# ============================================================================================ knob table

@pytest.mark.parametrize("latency_ms, bandwidth, ttft", [
    (0.0, 1.0, 12.0),  # 2 blocks x 1 ms + 10 ms prefill
    (2.5, 1.0, 14.5),  # + 2.5 ms before the first byte
    (2.5, 0.0, 12.5),  # 0 GB/s means unlimited: only the latency is left
    (0.0, 0.0, 10.0),
])
def test_restore_time_is_latency_plus_bytes_over_bandwidth(tmp_path, latency_ms, bandwidth, ttft):
    """Knob table: `latency_to_first_byte_ms` is a fixed delay before each transfer moves bytes;
    `h2d_bandwidth_gbps` is decimal GB/s and `0` means unlimited.

    A (blocks 1, 2) is stored to G2; B (4 blocks) evicts it from the 4-block G1; C (1, 2, 7) arrives at 40 ms,
    restores 2 blocks from G2 and is admitted when they land."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 15, 1, [3, 4, 5, 6]), row(40, 9, 1, [1, 2, 7])],
                       latency_ms=latency_ms, bandwidth=bandwidth)
    c = run[2]
    assert c["ttft_ms"] == ttft
    assert c["first_admit_ms"] == 40 + ttft - 10
    assert (c["first_admission_g1_reused_input_tokens"], c["first_admission_host_reused_input_tokens"]) == (0, 8)


# ============================================================================================ How G2 behaves

@pytest.mark.parametrize("tensor", [1, 2])
def test_block_bytes_are_block_size_times_bytes_per_token_without_tp_multiplier(tmp_path, tensor):
    """How G2 behaves: "A block's size is `block_size x bytes_per_token`, the same per-TP-shard bytes as G1.
    No TP multiplier is applied to host capacity or transfer time."

    TP1 and TP2 with bytes_per_token 250,000: G2 blocks are 1,000,000 bytes either way (not 2,000,000 at TP2),
    2 blocks move in 2 ms at 1 GB/s, and the restore adds 2 ms to TTFT."""
    rows = [row(0, 8, 1, [1, 2]), row(20, 15, 1, [3, 4, 5, 6]), row(40, 9, 1, [1, 2, 7])]
    plan = compile_plan(tmp_path, rows, parallelism=f"tensor: {tensor}")
    geometry = plan["geometry"]["aggregated"]
    assert geometry["block_bytes"] == geometry["g2_block_bytes"] == BLOCK
    run = replay_trace(tmp_path, rows, parallelism=f"tensor: {tensor}")
    assert run.domain["block_bytes"] == BLOCK
    assert run.domain["d2h_bytes"] == 5 * BLOCK  # A's 2 prompt blocks + B's 3
    assert run.domain["h2d_bytes"] == 2 * BLOCK
    assert run.g2[0] == (12.0, "Stored", [1, 2])  # A's pass ends at 10 ms; 2 blocks take 2 ms
    assert run[2]["ttft_ms"] == 12.0


def test_auto_bytes_per_token_is_per_shard_so_tp2_halves_the_g2_block(tmp_path):
    """How G2 behaves: with `bytes_per_token: auto` the G2 block is the per-shard G1 block: Qwen3-8B at TP2
    stores half the bytes per block that TP1 does (8 KV heads split over 2 GPUs), with no multiplier back."""
    def geometry(tensor):  # the config's trace must exist now that the compiler reads it
        plan = compile_plan(tmp_path, [row(0, 8, 1, [1, 2])], bytes_per_token="auto", parallelism=f"tensor: {tensor}")
        return plan["geometry"]["aggregated"]
    tp1, tp2 = geometry(1), geometry(2)
    assert tp1["g2_block_bytes"] == tp1["block_bytes"] == BS * 147_456  # 36 layers x 8 heads x 128 x 2 x 2 bytes
    assert tp2["g2_block_bytes"] == tp2["block_bytes"] == tp1["g2_block_bytes"] // 2


@pytest.mark.parametrize("connector", OFFLOADING)
def test_blocks_are_stored_after_they_are_computed(tmp_path, connector):
    """How G2 behaves: "Blocks are copied to G2 after they are computed in G1."  Connector row "Stored blocks"
    (offloading connectors): prompt blocks as they are computed, no decode blocks.

    Budget 8, one 16-token prompt: chunks of 8 tokens end at 10 and 20 ms; each chunk's 2 blocks start their
    copy when the chunk's pass ends and land 2 ms later.  The 6 output tokens' block is never stored."""
    run = replay_trace(tmp_path, [row(0, 16, 6, [1, 2, 3, 4])], connector=connector, budget=8, g1_blocks=8)
    assert run.g2 == [(12.0, "Stored", [1, 2]), (22.0, "Stored", [3, 4])]
    assert (run.domain["stores"], run.domain["d2h_bytes"]) == (4, 4 * BLOCK)
    assert run.first_token(0) == 20.0  # stores do not delay the passes


@pytest.mark.parametrize("connector", CONNECTORS)
def test_a_restore_adds_to_ttft(tmp_path, connector):
    """How G2 behaves: "A request that finds its prefix in G2 waits for the host->GPU copy before it is
    admitted, so restore time adds to TTFT."

    A (1, 2) is stored; B (6 blocks) evicts it from the 6-block G1; C (1, 2, 9) arrives at 40 ms, its 2-block
    restore lands at 42 ms, it is admitted then and its prefill ends at 52 ms: TTFT 12 = 2 + 10."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 23, 1, [3, 4, 5, 6, 7, 8]),
                                  row(40, 9, 1, [1, 2, 9])], connector=connector, g1_blocks=6)
    assert run.admissions(2) == [(42.0, "g2.worker0.dp0", 0, 8)]
    assert (run[2]["first_token_ms"], run[2]["ttft_ms"]) == (52.0, 12.0)
    assert (run.domain["restores"], run.domain["h2d_bytes"]) == (2, 2 * BLOCK)
    assert run[1]["first_admission_reused_input_tokens"] == 0  # B shares nothing
    assert run[2]["admission_history"][0]["host_reused_by_source"] == {"g2": 8}  # G2's own copies
    assert "host_reused_by_source" not in run[1]["admission_history"][0]  # (nothing restored: no field)


@pytest.mark.parametrize("connector", OFFLOADING)
def test_g1_blocks_being_copied_are_not_overwritten_the_new_owner_waits(tmp_path, connector):
    """How G2 behaves: "G1 blocks that are still being copied to G2 are not overwritten."  Connector row
    "G1 blocks being copied" (offloading): "Freed with their request; a new owner waits for the copy".

    Latency 20 ms: A's copy of blocks 1, 2 starts at 10 ms and lands at 32 ms.  A finishes at 10 ms and frees
    its blocks.  B (4 blocks) arrives at 15 ms and is admitted at once into the 4-block G1, taking A's blocks
    (G1 evicts them last block first: 2, 1); the pass that would overwrite them starts only at 32 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(15, 15, 1, [3, 4, 5, 6])], connector=connector,
                       latency_ms=20.0)
    assert run.g2[0] == (32.0, "Stored", [1, 2])
    assert run.admissions(1) == [(15.0, "worker0.dp0", 0, 0)]
    assert run.first_token(1) == 42.0  # pass 32-42
    assert (15.0, "Removed", [2, 1]) in run.g1


@pytest.mark.parametrize("connector", OFFLOADING)
def test_a_running_request_growing_into_a_block_being_copied_waits(tmp_path, connector):
    """How G2 behaves: "G1 blocks that are still being copied to G2 are not overwritten", for a running request's
    next block (offloading: "a new owner waits for the copy").

    G1 3 blocks, latency 20 ms.  A (1, 2) and R (3 tokens, 6 output) prefill together; A finishes at 10 ms and
    its copy runs until 32 ms.  R decodes inside its first block at 10-11 ms; at 11 ms it needs a second block
    and gets A's block 2 (evicted from G1), so that pass waits for the copy: it runs 32-33 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 3, 6, [9])], connector=connector, g1_blocks=3,
                       latency_ms=20.0)
    assert run.g2 == [(32.0, "Stored", [1, 2])]
    assert (11.0, "Removed", [2]) in run.g1
    assert token_times(run.replay.requests[1]) == [10.0, 11.0, 33.0, 34.0, 35.0, 36.0]


@pytest.mark.parametrize("connector", OFFLOADING)
def test_a_restore_does_not_overwrite_a_g1_block_still_being_copied(tmp_path, connector):
    """How G2 behaves: "G1 blocks that are still being copied to G2 are not overwritten"; row "G1 blocks being
    copied": "a new owner waits for the copy".  A restore writes into the G1 blocks it is given, so a restore
    that is given a block still being copied must wait for that copy before it moves bytes.

    A (1, 2) is stored by 12 ms; B (3, 4, 5 + a partial block) evicts it from the 4-block G1 and finishes at
    30 ms; B's 3-block copy runs 30-33 ms.  C (1, 2, 7) arrives at 30 ms and restores 2 blocks; the G1 blocks
    it gets are B's partial block and B's block 5, which is still being copied until 33 ms.  The restore may
    write only from 33 ms: it lands at 35 ms, C's pass runs 35-45 ms.  (simple_cpu_v0_32 holds B's blocks until
    the copy lands and gives exactly these times.)  The runtime starts the restore at 30 ms and lands it at
    32 ms while block 5 is still being copied, and C's first token comes at 43 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 15, 1, [3, 4, 5, 6]), row(30, 9, 1, [1, 2, 7])],
                       connector=connector)
    assert run.g2[1] == (33.0, "Stored", [3, 4, 5])
    assert (35.0, "Stored", [1, 2]) in run.g1  # the restored blocks become G1 blocks when the restore lands
    assert run.first_token(2) == 45.0


def test_simple_cpu_restore_waits_for_held_blocks(tmp_path):
    """Reference for the test above: with simple_cpu_v0_32 B's blocks are held until their copy lands at 33 ms,
    so C's restore gets G1 blocks only then: it lands at 35 ms and C's first token comes at 45 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 15, 1, [3, 4, 5, 6]), row(30, 9, 1, [1, 2, 7])],
                       connector=SIMPLE)
    assert run.g2[1] == (33.0, "Stored", [3, 4, 5])
    assert (35.0, "Stored", [1, 2]) in run.g1
    assert run.admissions(2) == [(35.0, "g2.worker0.dp0", 0, 8)]
    assert run.first_token(2) == 45.0


def pd_config_text(decode_blocks: int) -> str:
    """P/D: one prefill and one decode worker (fixed timing); the decode worker has G2.  The KV handoff moves
    the whole prompt at 250,000 bytes per token over 0.1 GB/s: 10 ms per 4 tokens."""
    kv = f"block_size: {BS}, bytes_per_token: 250000"
    role = ("timing: {type: fixed, prefill_ms: 10, decode_ms: 1}\n"
            "      scheduler: {max_batched_tokens: 64, max_sequences: 4}")
    return f"""
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  kv_transfer: {{bandwidth_gb_per_second: 0.1, bytes_per_token: 250000, timing_mode: full_prompt}}
  workers:
    prefill:
      {role}
      kv_cache: {{{kv}, capacity: {{type: fixed, blocks: 64}}}}
    decode:
      {role}
      kv_cache:
        {{{kv}, capacity: {{type: fixed, blocks: {decode_blocks}}},
         host_offload: {{num_host_blocks: 16, d2h_bandwidth_gbps: 1.0, h2d_bandwidth_gbps: 1.0}}}}
{SCENARIO_TRAFFIC}"""


def replay_pd(tmp_path: Path, rows: list[dict], decode_blocks: int) -> tuple[Replay, list[dict]]:
    replay = build(finish_plan(compile_scenario(tmp_path, rows, pd_config_text(decode_blocks), "pd.yaml"), tmp_path))
    replay.run()
    return replay, [request_record(r) for r in replay.requests]


# R0, R1 (8-token prompts, 20 output tokens) prefill together on the prefill rank (0-10 ms); their handoffs
# reserve 2 of the decode rank's 8 G1 blocks each (their prompts) and land at 30 ms (2 MB at 0.1 GB/s); each
# samples its first token at 31 ms.  H (4 tokens, 3 output) prefills 20-30 ms and its handoff reserves 1 block
# at 30 ms, landing at 40 ms.  At 35 ms both R need a 4th block: the newest running one is preempted and waits
# at the head of the decode rank's queue, unable to return before the other R finishes at 50 ms.
PD_ROWS = [row(0, 8, 20, [1, 2]), row(0, 8, 20, [3, 4]), row(20, 4, 3, [5])]


def test_pd_decode_rank_with_g2_admits_arrived_handoffs_first(tmp_path):
    """How G2 behaves: "A decode rank with G2 admits requests whose P/D handoff has arrived before other waiting
    requests".

    (Scenario above PD_ROWS.)  H's KV lands at 40 ms while a preempted request waits at the head of the decode
    rank's queue and cannot be readmitted: H is admitted at once and samples at 41, 42 and 43 ms; the preempted
    request returns only at 50 ms."""
    replay, records = replay_pd(tmp_path, PD_ROWS, decode_blocks=8)
    assert [r["terminal_status"] for r in records] == ["completed"] * 3
    assert sorted(r["readmission_count"] for r in records[:2]) == [0, 1]
    preempted = next(r for r in records[:2] if r["readmission_count"])
    assert preempted["admission_history"][-1]["at_ms"] == 50.0  # (after its prefill and its activation at 30 ms)
    assert [(a["at_ms"], a["is_readmission"]) for a in preempted["admission_history"]] == \
        [(0.0, False), (30.0, False), (50.0, True)]
    assert token_times(replay.requests[2]) == [41.0, 42.0, 43.0]


def test_pd_arrived_handoffs_keep_fcfs_order_among_themselves(tmp_path):
    """How G2 behaves: arrived handoffs go first "as vLLM's FCFS scheduler does": among themselves they keep
    arrival order (vLLM re-prepends the requests it skipped while their KV was in flight, in order).

    (Scenario above PD_ROWS.)  R0 arrived before R1 and both land at 30 ms, so R0 is admitted first and R1 is
    the newest running request: R1 is the one preempted at 35 ms and readmitted at 50 ms, R0 decodes on."""
    replay, records = replay_pd(tmp_path, PD_ROWS, decode_blocks=8)
    assert [r["readmission_count"] for r in records[:2]] == [0, 1]
    assert token_times(replay.requests[0])[:6] == [31.0, 32.0, 33.0, 34.0, 35.0, 36.0]


# ============================================================================================ connector profiles

def test_profiles_follow_the_connector_table():
    """Connector profiles: the table's cells as the runtime's profile data, column by column."""
    v24, v32, simple = (PROFILES[name] for name in CONNECTORS)
    assert set(PROFILES) == set(CONNECTORS)
    # Stored blocks
    assert [p.store_decode_blocks for p in (v24, v32, simple)] == [False, False, True]
    assert [p.store_delay_passes for p in (v24, v32, simple)] == [0, 0, 1]
    assert [p.store_rest_on_finish for p in (v24, v32, simple)] == [False, True, True]
    # Eviction order
    assert [p.eviction for p in (v24, v32, simple)] == ["lru", "lru_by_store_start", "fifo"]
    assert [p.refresh_on_lookup for p in (v24, v32, simple)] == [True, False, False]
    assert [p.refresh_on_load_done for p in (v24, v32, simple)] == [False, False, True]
    # A hit whose store is in flight / another request is loading / own store in flight / before its load
    assert [p.in_flight_store_hit for p in (v24, v32, simple)] == ["defer", "defer", "miss"]
    assert [p.loading_hit for p in (v24, v32, simple)] == ["defer", "defer", "load"]
    assert [p.own_store_defers for p in (v24, v32, simple)] == [True, True, False]
    assert [p.pin_before_load for p in (v24, v32, simple)] == [False, False, True]
    # G1 blocks being copied / a preemption
    assert [p.g1_copy for p in (v24, v32, simple)] == ["new_owner_waits", "new_owner_waits", "hold_until_copied"]
    assert [p.preemption_waits_for for p in (v24, v32, simple)] == ["own_stores", "own_stores", "all_transfers"]


# ---- row "Stored blocks" --------------------------------------------------------------------------------

def test_simple_cpu_stores_every_block_one_pass_later_decode_blocks_included(tmp_path):
    """Row "Stored blocks", simple_cpu_v0_32: "Every block one pass after it is computed, decode blocks
    included ... A finishing request stores the rest."

    Budget 8, a 16-token prompt and 6 output tokens.  Passes end at 10 (blocks 1, 2 computed), 20 (3, 4), then
    decode passes at 21, ..., 25.  Blocks 1, 2 are offered when the next pass ends (20 ms), blocks 3, 4 at 21 ms;
    the two copies share 1 GB/s and land at 23 and 24 ms.  The first output block (tokens 16-19) is complete at
    24 ms and offered one pass later, at 25 ms, when the request finishes: it lands at 26 ms."""
    run = replay_trace(tmp_path, [row(0, 16, 6, [1, 2, 3, 4])], connector=SIMPLE, budget=8, g1_blocks=8)
    assert run.g2 == [(23.0, "Stored", [1, 2]), (24.0, "Stored", [3, 4]), (26.0, "Stored", ["out0.4"])]
    assert (run.domain["stores"], run.domain["d2h_bytes"]) == (5, 5 * BLOCK)
    assert run.domain["d2h_bandwidth_wait_ms"] == 2.0  # both copies took 3 ms instead of 2


@pytest.mark.parametrize("connector", CONNECTORS)
def test_blocks_loaded_from_g2_are_not_stored_again(tmp_path, connector):
    """Row "Stored blocks": offloading stores prompt blocks "after any blocks loaded from G2"; simple_cpu skips
    "blocks already in G2, such as those just loaded".

    A (1, 2) is stored, B (3-8) evicts it from the 6-block G1 and stores its 5 full blocks.  C (1, 2, 9,
    10 + a partial block) restores 1, 2 and computes 9, 10: only 9, 10 are copied back to G2."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 23, 1, [3, 4, 5, 6, 7, 8]),
                                  row(40, 17, 1, [1, 2, 9, 10, 11])], connector=connector, g1_blocks=6,
                       host_blocks=16)
    assert run.admissions(2) == [(42.0, "g2.worker0.dp0", 0, 8)]
    stored = [ids for _, kind, ids in run.g2 if kind == "Stored"]
    assert stored == [[1, 2], [3, 4, 5, 6, 7], [9, 10]]
    assert run.domain["d2h_bytes"] == 9 * BLOCK


@pytest.mark.parametrize("connector", OFFLOADING)
def test_without_a_load_stores_start_at_block_0(tmp_path, connector):
    """Row "Stored blocks": "after any blocks loaded from G2"; an admission that loads nothing stores from block 0
    (vLLM's OffloadingConnector: `_next_stored_block_idx` is set only when a load is planned), so a G1 hit that G2
    no longer holds is stored again.  (kvreplay stored only after the G1 hits; with it, a session's next turn
    never found the previous turn's output blocks in G2: facts §33.)

    G2 3 blocks, G1 16.  A (1, 2) is stored by 12 ms; B (3, 4, 5) is stored by 33 ms, evicting 1, 2 from G2.  C
    (1, 2 + a partial block) at 40 ms reuses 1, 2 from G1 and loads nothing; its pass 40-50 ms offers 1, 2, which
    G2 lacks: they land at 52 ms, evicting 3, 4."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 12, 1, [3, 4, 5]), row(40, 9, 1, [1, 2, 6])],
                       connector=connector, g1_blocks=16, host_blocks=3)
    assert run.admissions(2) == [(40.0, "worker0.dp0", 8, 0)]
    assert [event for event in run.g2 if event[1] == "Stored"] == \
        [(12.0, "Stored", [1, 2]), (33.0, "Stored", [3, 4, 5]), (52.0, "Stored", [1, 2])]
    assert run.domain["stores"] == 7


@pytest.mark.parametrize("connector, finish_store", [(V24, False), (V32, True)])
def test_v0_32_finishing_request_offers_prompt_blocks_it_could_not_store(tmp_path, connector, finish_store):
    """Row "Stored blocks", offloading_v0_32: "a finishing request also offers prompt blocks it could not store
    earlier"; model difference 1: the model offers them when the request finishes.

    G2 holds 2 blocks.  A (1, 2) and B (3, 4) prefill together; at 10 ms A's blocks take both slots (still being
    copied, so not evictable) and B's find no room.  A's copy lands at 12 ms.  B finishes at 14 ms: v0_32 offers
    3, 4 again, evicting 2 then 1 (A re-ranked its blocks at finish, first block newest), and they land at
    16 ms.  offloading_v0_24 never stores them."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 8, 5, [3, 4])], connector=connector, g1_blocks=8,
                       host_blocks=2)
    if finish_store:
        assert run.g2 == [(12.0, "Stored", [1, 2]), (14.0, "Removed", [2, 1]), (16.0, "Stored", [3, 4])]
        assert (run.domain["stores"], run.domain["evictions"]) == (4, 2)
    else:
        assert run.g2 == [(12.0, "Stored", [1, 2])]
        assert (run.domain["stores"], run.domain["evictions"], run.domain["dropped_stores"]) == (2, 0, 2)


def test_v0_32_finish_store_in_the_middle_of_decode_passes(tmp_path):
    """The same finish store while another request keeps decoding: B's completion at 14 ms starts its store at
    14 ms (landing at 16 ms), though C's decode passes around it could be fused; C (a 3-token prompt, no full
    block to store) decodes until 21 ms, the last event.  Macro steps run B's completion pass on its own (a
    fused run through it would start the store only when the run ends)."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 8, 5, [3, 4]), row(0, 3, 12, [5])], connector=V32,
                       g1_blocks=16, host_blocks=2)
    assert run.g2 == [(12.0, "Stored", [1, 2]), (14.0, "Removed", [2, 1]), (16.0, "Stored", [3, 4])]
    assert [r["last_token_ms"] for r in run.records] == [10.0, 14.0, 21.0]


def test_simple_cpu_scans_from_block_0_at_each_admission(tmp_path):
    """Row "Stored blocks", simple_cpu_v0_32: "scanned from block 0 at each admission; blocks already in G2,
    such as those just loaded, are skipped."

    G2 holds 2 blocks.  A (1, 2) is stored; B (3, 4) is stored and evicts 1, 2 from G2 (FIFO).  C (1, 2 + a
    partial block) finds 1, 2 in G1.  Scanned from block 0, C's blocks 1, 2 are not in G2, so C stores them when
    it finishes at 50 ms, evicting 3, 4; they land at 52 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 8, 1, [3, 4]), row(40, 9, 1, [1, 2, 5])],
                       connector=SIMPLE, host_blocks=2)
    assert run.admissions(2) == [(40.0, "worker0.dp0", 8, 0)]
    assert run.g2 == [(12.0, "Stored", [1, 2]), (30.0, "Removed", [1, 2]), (32.0, "Stored", [3, 4]),
                      (50.0, "Removed", [3, 4]), (52.0, "Stored", [1, 2])]


def test_simple_cpu_store_that_does_not_fit_waits_for_the_next_pass(tmp_path):
    """Model difference 2: "A simple_cpu_v0_32 store that does not fit waits for the next pass".

    G2 holds 2 blocks, latency 0.5 ms.  A (1, 2) finishes at 10 ms and its copy lands at 12.5 ms.  B (3, 4)
    decodes; its blocks are offered at 11 and 12 ms but both slots are still being copied, so the store waits;
    at 13 ms 1, 2 are ready and evicted (FIFO) and B's store starts, landing at 15.5 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 8, 5, [3, 4])], connector=SIMPLE, g1_blocks=8,
                       host_blocks=2, latency_ms=0.5)
    assert run.g2 == [(12.5, "Stored", [1, 2]), (13.0, "Removed", [1, 2]), (15.5, "Stored", [3, 4])]
    assert (run.domain["stores"], run.domain["evictions"], run.domain["dropped_stores"]) == (4, 2, 0)


def test_simple_cpu_store_that_partly_fits_waits_whole(tmp_path):
    """Model difference 2: "A simple_cpu_v0_32 store that does not fit waits for the next pass, while vLLM stores
    the blocks that fit."  Read literally: the model does not store the part that fits.

    G2 holds 3 blocks, latency 0.5 ms.  A (1, 2) finishes at 10 ms; its copy lands at 12.5 ms.  B (3, 4; 4 output
    tokens, no full output block) offers 3, 4 at 11 and 12 ms: one slot is free, not two, so the store waits.  At
    13 ms (B finishes) 1, 2 are ready, 1 is evicted (FIFO) and 3, 4 are stored together, landing at 15.5 ms.
    (Storing what fits would store 3 alone at 11 ms, and 4 would never find room before B finishes.)"""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 8, 4, [3, 4])], connector=SIMPLE, g1_blocks=8,
                       host_blocks=3, latency_ms=0.5)
    assert run.g2 == [(12.5, "Stored", [1, 2]), (13.0, "Removed", [1]), (15.5, "Stored", [3, 4])]


# ---- row "Eviction order" -------------------------------------------------------------------------------

def test_v0_24_eviction_is_lru_refreshed_by_lookups_first_block_newest(tmp_path):
    """Row "Eviction order", offloading_v0_24: "Least recently used. Each lookup and store makes the prompt's
    resident blocks the newest, its first block newest of all."

    G2 holds 3 blocks.  A stores 1, 2 (order 2, 1: first block newest), B stores 3 (order 2, 1, 3).  C's lookup
    of prompt 1, 2 at 40 ms makes them the newest (3, 2, 1).  D's store at 70 ms evicts 3 (without the lookup
    refresh it would evict 2); E's store at 90 ms evicts 2, not 1."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 5, 1, [3, 30]), row(40, 9, 1, [1, 2, 40]),
                                  row(60, 5, 1, [4, 60]), row(80, 5, 1, [5, 80])], connector=V24, host_blocks=3)
    assert run.g2 == [(12.0, "Stored", [1, 2]), (31.0, "Stored", [3]), (70.0, "Removed", [3]),
                      (71.0, "Stored", [4]), (90.0, "Removed", [2]), (91.0, "Stored", [5])]
    assert (run.domain["evictions"], run.domain["resident_blocks"]) == (2, 3)


@pytest.mark.parametrize("connector, evicted", [(V32, [[3], [2]]), (V24, [[2], [1]])])
def test_v0_32_finishing_request_re_ranks_its_blocks_first_block_newest(tmp_path, connector, evicted):
    """Row "Eviction order", offloading_v0_32: "a finishing request re-ranks every block it stored, offered or
    loaded, its first block newest."  (offloading_v0_24 in the same scenario for contrast.)

    G2 holds 3 blocks.  A (1, 2; 10 output tokens) and B (3) prefill together; both stores start at 10 ms
    (v0_32 order 1, 2, 3).  A finishes at 19 ms and re-ranks 1, 2 (order 3, 2, 1).  D's store at 40 ms evicts 3,
    E's at 60 ms evicts 2.  v0_24 ranked A's blocks 2, 1 at its store and never again: D evicts 2, E evicts 1."""
    run = replay_trace(tmp_path, [row(0, 8, 10, [1, 2]), row(0, 5, 1, [3, 30]), row(30, 5, 1, [4, 60]),
                                  row(50, 5, 1, [5, 80])], connector=connector, host_blocks=3, g1_blocks=8)
    assert [(t, ids) for t, kind, ids in run.g2 if kind == "Removed"] == [(40.0, evicted[0]), (60.0, evicted[1])]
    assert run[0]["last_token_ms"] == 19.0


def test_v0_32_ranks_a_block_when_its_store_starts_not_when_it_lands(tmp_path):
    """Row "Eviction order", offloading_v0_32: "Least recently used by rank. A block is ranked when its store
    starts".

    0.1 GB/s (10 ms per block), G2 holds 4 blocks.  A's 3-block store starts at 10 ms, B's 1-block store at
    20 ms; sharing the link, B's lands first (40 ms), A's last (50 ms).  A re-ranked its blocks at finish
    (10 ms: 3, 2, 1), then B's block 4 was ranked.  D's store at 70 ms evicts 3: ranked by store start, A's
    blocks are older than B's although B's landed first (FIFO by completion would evict 4)."""
    run = replay_trace(tmp_path, [row(0, 12, 1, [1, 2, 3]), row(10, 5, 1, [4, 40]), row(60, 5, 1, [5, 50])],
                       connector=V32, host_blocks=4, g1_blocks=8, bandwidth=0.1)
    assert run.g2 == [(40.0, "Stored", [4]), (50.0, "Stored", [1, 2, 3]), (70.0, "Removed", [3]),
                      (80.0, "Stored", [5])]
    assert run.domain["d2h_bandwidth_wait_ms"] == 20.0  # A took 40 ms instead of 30, B 20 instead of 10


def test_simple_cpu_eviction_is_fifo_by_store_completion(tmp_path):
    """Row "Eviction order", simple_cpu_v0_32: "First in, first out by store completion."

    G2 holds 4 blocks.  A (1, 2, 3) finishes at 10 ms and stores its 3 blocks; B (4) decodes once and its block
    is offered one pass later, at 11 ms.  Sharing the link, B's copy lands at 13 ms, A's at 14 ms.  D's store at
    30 ms evicts B's block 4: it completed first, although its store started last."""
    run = replay_trace(tmp_path, [row(0, 12, 1, [1, 2, 3]), row(0, 5, 2, [4, 40]), row(20, 5, 1, [5, 50])],
                       connector=SIMPLE, host_blocks=4, g1_blocks=8)
    assert run.g2 == [(13.0, "Stored", [4]), (14.0, "Stored", [1, 2, 3]), (30.0, "Removed", [4]),
                      (31.0, "Stored", [5])]


def test_simple_cpu_completed_load_makes_its_blocks_the_newest(tmp_path):
    """Row "Eviction order", simple_cpu_v0_32: "A completed load ... makes its blocks the newest".

    G2 holds 5 blocks: 1, 2 (A) then 3, 4, 5 (B).  C restores 1, 2 at 40-42 ms, which makes them the newest;
    D's store at 70 ms evicts 3 (plain FIFO would evict 1)."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 15, 1, [3, 4, 5, 6]), row(40, 9, 1, [1, 2, 70]),
                                  row(60, 5, 1, [80, 81])], connector=SIMPLE, host_blocks=5)
    assert run.admissions(2) == [(42.0, "g2.worker0.dp0", 0, 8)]
    assert [(t, ids) for t, kind, ids in run.g2 if kind == "Removed"] == [(70.0, [3])]


@pytest.mark.parametrize("connector, evicted", [(SIMPLE, [1]), (V24, [3])])
def test_simple_cpu_does_not_refresh_a_block_already_in_g2(tmp_path, connector, evicted):
    """Row "Eviction order", simple_cpu_v0_32: "a block already in G2 is not refreshed."  (offloading_v0_24 in
    the same scenario for contrast: its lookup refreshes.)

    G2 holds 3 blocks: 1, 2 (A), 3 (B).  C reuses 1, 2 from G1 at 40 ms; simple_cpu leaves them where they were,
    so D's store at 70 ms evicts 1.  v0_24's lookup made them the newest: D evicts 3."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 5, 1, [3, 30]), row(40, 9, 1, [1, 2, 40]),
                                  row(60, 5, 1, [4, 60])], connector=connector, host_blocks=3)
    assert run.admissions(2) == [(40.0, "worker0.dp0", 8, 0)]
    assert [(t, ids) for t, kind, ids in run.g2 if kind == "Removed"] == [(70.0, evicted)]


# ---- row "A hit whose store is in flight" ---------------------------------------------------------------

@pytest.mark.parametrize("connector", OFFLOADING)
def test_a_hit_whose_store_is_in_flight_defers_the_request(tmp_path, connector):
    """Row "A hit whose store is in flight", offloading connectors: "Defers the request".

    Latency 20 ms, G1 6 blocks.  A (1, 2) and R (9, 10) end at 10 ms and free their blocks, A's first; the
    copies of their four blocks run 10-34 ms.  At 15 ms B takes the two never-used blocks and A's freed ones
    (evicting 1, 2 from G1; its pass waits for the copy, 34-44 ms), then D (1, 7) looks up block 1: in G2 but
    still being stored, so D is deferred although R's two freed blocks would have let it start as a miss (then
    its first token would come at 44 ms).  At 44 ms its lookup hits: the 1-block restore lands at 65 ms
    (20 + 1), its prefill ends at 75 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(0, 8, 1, [9, 10]), row(15, 13, 1, [3, 4, 5, 6]),
                                  row(15, 5, 1, [1, 7])], connector=connector, g1_blocks=6, latency_ms=20.0)
    assert run.g1[2] == (15.0, "Removed", [2, 1])
    assert run.admissions(2) == [(15.0, "worker0.dp0", 0, 0)]
    assert run.first_token(2) == 44.0
    assert run.admissions(3) == [(65.0, "g2.worker0.dp0", 0, 4)]
    assert (run[3]["first_token_ms"], run[3]["ttft_ms"]) == (75.0, 60.0)


@pytest.mark.parametrize("connector, outcome", [(V24, "defer"), (V32, "defer"), (SIMPLE, "miss")])
def test_a_hit_whose_store_is_in_flight_rank_level(connector, outcome):
    """Row "A hit whose store is in flight": offloading connectors defer the request, simple_cpu_v0_32 misses.

    Rank level: in the engine a simple_cpu block being stored is always still held in G1 (row "G1 blocks being
    copied"), so its G2 lookup is never reached.  Here G2 holds blocks 0, 1 of C's prompt, both still being
    stored, and nothing else is cached.  Deferred, C is not admitted until the store lands, then restores both
    blocks; missing, C is admitted at once and computes its whole prompt."""
    rank = host_rank(connector, g1_blocks=8, host_blocks=8)
    c = synthetic(0, 9, 1, source=7)
    assert rank.chain.top.reserve(c.keys[:2]) == c.keys[:2]  # both blocks are being stored
    rank.waiting.append(c)
    batch = schedule(rank, 0)
    if outcome == "miss":
        assert batch.items == [(c, 9)]
        assert c.admissions[0]["reused_input_tokens"] == 0
        return
    assert batch is None and list(rank.waiting) == [c] and not c.admissions and not rank.jobs
    rank.chain.top.landed(c.keys[:2])  # the store lands
    assert schedule(rank, MS) is None  # C now restores 2 blocks and waits for them
    (job,) = rank.jobs
    assert (job.landed, job.keys) == (offload.restored, c.keys[:2])
    land(rank, "load")
    batch = schedule(rank, 3 * MS)
    assert batch.items == [(c, 1)]
    assert c.admissions[0]["host_reused_input_tokens"] == 8


# ---- a load starts only for a request admission would take (Dynamo's mocker, facts §33) -------------------

def _stored(rank, request, blocks: int) -> None:
    """G2 holds the first `blocks` blocks of `request`'s prompt, landed."""
    rank.chain.top.reserve(request.keys[:blocks])
    rank.chain.top.landed(request.keys[:blocks])


@pytest.mark.parametrize("connector", CONNECTORS)
def test_a_load_starts_only_when_the_whole_sequence_fits_on_the_g1_hits(connector):
    """Dynamo's mocker parks a request on a G2 swap-in only after `decide_waiting_admission` passes on its G1 hits
    alone: the blocks of its whole known sequence must be free.  One that does not fit waits at the head, so no
    request behind it starts a load either.

    Rank level, G1 8 blocks.  R (13 tokens: 4 blocks) prefills 0-10 ms.  C and D (9 tokens: 3 blocks) arrive
    with their first 2 blocks in G2.  At 10 ms C needs 3 blocks, 4 are free: its 2-block load starts (2 left).
    D needs 3, 2 are free: it starts no load (the old rule asked only room for the 2 blocks it would load, so D
    loaded too and then waited for its third block).  C's load lands; C is admitted with 8 restored tokens and
    takes its third block, leaving 1; D still waits, without a load."""
    rank = host_rank(connector, g1_blocks=8, host_blocks=8)
    r, c, d = synthetic(0, 13, 4, source=5), synthetic(1, 9, 2, source=6), synthetic(2, 9, 1, source=7)
    _stored(rank, c, 2)
    _stored(rank, d, 2)
    rank.waiting.append(r)
    items, now = run_pass(rank, 0)
    assert items == [(r, 13)] and rank.pool.free_count == 4
    rank.waiting.extend([c, d])
    items, now = run_pass(rank, now)
    assert items == [(r, 1)]
    loads = [job for job in rank.jobs if job.landed is offload.restored]
    assert [(job.request, job.keys) for job in loads] == [(c, c.keys[:2])]
    assert rank.pool.free_count == 2 and not d.tier.loading and list(rank.waiting) == [c, d]
    land(rank, "load")
    items, now = run_pass(rank, now)
    assert items == [(r, 1), (c, 1)]
    assert c.admissions[0]["host_reused_input_tokens"] == 8
    assert rank.pool.free_count == 1 and not d.tier.loading and list(rank.waiting) == [d]
    assert not [job for job in rank.jobs if job.landed is offload.restored]


def test_a_never_fitting_request_behind_a_waiting_head_is_not_reached():
    """Dynamo's mocker rejects a request whose prompt can never fit only when admission reaches it, and admission
    stops at the first request that waits.  Rank level, G1 8 blocks, nothing running: C (9 tokens) loads its 2
    blocks from G2; D (25 tokens: 7 blocks) then finds 6 free and waits; X, behind D, can never fit but is not
    reached (before, with nothing running, the scan went on past D and rejected X in this pass).  After C's load
    lands C is admitted (5 blocks left), D still waits, and X is still not reached."""
    rank = host_rank(V24, g1_blocks=8, host_blocks=8)
    c, d, x = synthetic(0, 9, 1, source=6), synthetic(1, 25, 1, source=7), synthetic(2, 9, 1, source=8)
    x.reason = "the prompt needs 40 G1 blocks but worker0.dp0 holds 8"  # (as never_fits words it)
    _stored(rank, c, 2)
    rank.waiting.extend([c, d, x])
    assert schedule(rank, 0) is None
    assert list(rank.waiting) == [c, d, x] and not rank.rejecting and rank.pool.free_count == 6
    land(rank, "load")
    items, _ = run_pass(rank, 0)
    assert items == [(c, 1)] and list(rank.waiting) == [d, x] and not rank.rejecting


# ---- row "A hit another request is loading" -----------------------------------------------------------

@pytest.mark.parametrize("connector", CONNECTORS)
def test_a_hit_another_request_is_loading(tmp_path, connector):
    """Row "A hit another request is loading": offloading connectors defer the request; simple_cpu_v0_32: "Both
    requests load it".

    A (1, 2) is stored, B evicts it from the 6-block G1.  C (1, 2, 9) and D (1, 2, 10) arrive together at 40 ms;
    C restores 1, 2.  Deferred, D is looked up again when C's restore lands (42 ms) and reuses the restored blocks
    from G1: both prefill 42-52 ms.  With simple_cpu both restore 1, 2: two 2-block loads share 1 GB/s and land
    at 44 ms, both prefill 44-54 ms, and each load waited 2 ms for bandwidth."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 23, 1, [3, 4, 5, 6, 7, 8]),
                                  row(40, 9, 1, [1, 2, 9]), row(40, 9, 1, [1, 2, 10])], connector=connector,
                       g1_blocks=6)
    if connector == SIMPLE:
        assert run.admissions(2) == run.admissions(3) == [(44.0, "g2.worker0.dp0", 0, 8)]
        assert [run[i]["ttft_ms"] for i in (2, 3)] == [14.0, 14.0]
        assert (run.domain["restores"], run.domain["h2d_bytes"], run.domain["h2d_bandwidth_wait_ms"]) == \
            (4, 4 * BLOCK, 4.0)
    else:
        assert run.admissions(2) == [(42.0, "g2.worker0.dp0", 0, 8)]
        assert run.admissions(3) == [(42.0, "worker0.dp0", 8, 0)]
        assert [run[i]["ttft_ms"] for i in (2, 3)] == [12.0, 12.0]
        assert (run.domain["restores"], run.domain["h2d_bytes"], run.domain["h2d_bandwidth_wait_ms"]) == \
            (2, 2 * BLOCK, 0.0)


# ---- row "The request's own store in flight" --------------------------------------------------------------

@pytest.mark.parametrize("connector, defers", [(V24, True), (V32, True), (SIMPLE, False)])
def test_own_store_in_flight_defers_the_lookup(connector, defers):
    """Row "The request's own store in flight": offloading connectors defer its lookup, simple_cpu_v0_32 does not.

    Rank level: in the engine a request can only wait with a store in flight after a preemption, and the
    preemption already makes the next pass wait for those stores (row "A preemption").  Here A computes its
    prompt (1, 2), its store starts (simple_cpu: one pass later), and A is preempted with the store in flight.
    Its blocks are still cached in G1 and there is room, so a lookup would readmit it at once."""
    rank = host_rank(connector, g1_blocks=8, host_blocks=8)
    a = synthetic(0, 8, 5, source=7)
    rank.waiting.append(a)
    now = 0
    while not a.tier.stores_in_flight:
        _, now = run_pass(rank, now)
    rank.running.remove(a)
    preempt(rank, a)
    assert rank.jobs and list(rank.waiting) == [a]
    batch = schedule(rank, now)
    if defers:
        assert batch is None and len(a.admissions) == 1
        land(rank, "store")
        batch = schedule(rank, now)
    assert [r for r, _ in batch.items] == [a]
    assert [h["is_readmission"] for h in a.admissions] == [False, True]
    assert a.admissions[1]["g1_reused_input_tokens"] == 8


# ---- row "A hit before its load" --------------------------------------------------------------------------

@pytest.mark.parametrize("connector, pinned", [(V24, False), (V32, False), (SIMPLE, True)])
def test_a_hit_before_its_load_is_pinned_by_simple_cpu_only(connector, pinned):
    """Row "A hit before its load": offloading connectors do not pin; simple_cpu_v0_32: "Pinned until the request
    loads it or looks it up again."

    Rank level, G1 3 blocks, G2 2 blocks holding C's prefix (blocks 0, 1).  F (11 tokens, 2 output) fills G1, so
    C's lookup hits G2 but C cannot load yet.  F's own blocks are then offered to the full G2 pool:
    - not pinned, C's blocks are evicted for F's, and C later computes its whole prompt;
    - pinned (and re-pinned when C is looked up again in the next pass), nothing can be evicted, F's blocks wait,
      and once F finishes C restores its prefix.  After the restore the pin is gone: both blocks can be
      evicted."""
    rank = host_rank(connector, g1_blocks=3, host_blocks=2)
    c, f = synthetic(0, 9, 1, source=7), synthetic(1, 11, 2, source=8)
    prefix = c.keys[:2]
    rank.chain.top.reserve(prefix)
    rank.chain.top.landed(prefix)
    rank.waiting.extend([f, c])
    items, now = run_pass(rank, 0)  # F prefills; C's lookup hits both blocks, G1 has no room
    assert items == [(f, 11)]
    items, now = run_pass(rank, now)  # F's last decode; C is looked up again
    assert items == [(f, 1)] and f.status == "completed" and list(rank.waiting) == [c]
    evictions = rank.chain.top.evictions
    assert evictions == (0 if pinned else 2)
    batch = schedule(rank, now)
    if not pinned:  # C misses and takes F's freed blocks, whose copies are still in flight: its pass waits
        assert batch.items == [(c, 9)]
        assert c.admissions[0]["reused_input_tokens"] == 0
        assert offload.blocked(rank)
        return
    assert batch is None  # C restores its prefix first
    (job,) = rank.jobs
    assert (job.landed, job.keys) == (offload.restored, prefix)
    land(rank, "load")
    batch = schedule(rank, now)
    assert batch.items == [(c, 1)]
    assert c.admissions[0]["host_reused_input_tokens"] == 8
    assert len(rank.chain.top.reserve(["x", "y"])) == 2 and rank.chain.top.evictions == 2  # no pin left behind


# ---- row "G1 blocks being copied" ---------------------------------------------------------------------

def test_simple_cpu_holds_g1_blocks_until_copied_then_frees_first_block_first(tmp_path):
    """Row "G1 blocks being copied", simple_cpu_v0_32: "Held until the copy completes, then freed first block
    first".  (The offloading connectors, same scenario: test_g1_blocks_being_copied_are_not_overwritten_...)

    Latency 20 ms: A's copy of 1, 2 runs 10-32 ms and holds A's two G1 blocks.  B (4 blocks) arrives at 15 ms but
    cannot be admitted into the 4-block G1 until they are freed at 32 ms; freed first block first, G1 evicts 1
    before 2.  B's first token comes at 42 ms, as with the other connectors, but it is admitted at 32 ms."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(15, 15, 1, [3, 4, 5, 6])], connector=SIMPLE,
                       latency_ms=20.0)
    assert run.g2[0] == (32.0, "Stored", [1, 2])
    assert run.admissions(1) == [(32.0, "worker0.dp0", 0, 0)]
    assert run.first_token(1) == 42.0
    assert (32.0, "Removed", [1, 2]) in run.g1


# ---- row "A preemption" -------------------------------------------------------------------------------

@pytest.mark.parametrize("connector, a_tokens, b_readmitted", [
    (V24, [10.0, 11.0, 13.0, 14.0], 14.0),
    (V32, [10.0, 11.0, 13.0, 14.0], 14.0),
    (SIMPLE, [10.0, 11.0, 16.0, 17.0], 17.0),
])
def test_a_preemption_waits_for_the_victims_stores_or_every_transfer(tmp_path, connector, a_tokens,
                                                                     b_readmitted):
    """Row "A preemption": offloading connectors wait for the preempted request's stores; simple_cpu_v0_32 "Waits
    for every transfer in flight".

    G1 6 blocks.  A (1, 2, 3; 4 output tokens) and B (4 + a partial block; 4 output tokens) prefill together.
    A 3-block and a 1-block copy share the link: offloading starts both at 10 ms (B's lands at 12, A's at 14),
    simple_cpu one pass later, at 11 ms (B's at 13, A's at 15).  At 11 ms B needs a third block, none is free,
    and B is preempted.  Offloading: the pass waits for B's copy only and runs 12-13 ms (A's copy is still in
    flight).  simple_cpu: it waits for A's copy too and runs 15-16 ms.  B is readmitted when A finishes."""
    run = replay_trace(tmp_path, [row(0, 12, 4, [1, 2, 3]), row(0, 7, 4, [4, 5])], connector=connector,
                       g1_blocks=6)
    assert token_times(run.replay.requests[0]) == a_tokens
    assert [h[0] for h in run.admissions(1)] == [0.0, b_readmitted]
    assert run[1]["readmission_count"] == 1


def test_simple_cpu_after_preemption_loads_only_prompt_blocks(tmp_path):
    """Model difference 3: "After a preemption, simple_cpu_v0_32 loads only prompt blocks from G2 and recomputes
    the request's output blocks, which vLLM reloads."

    G1 9 blocks.  A (1, 2) and B (3, 4) each decode 20 tokens; simple_cpu stores their decode blocks too, B's
    first output block at 17 ms.  B is preempted when both need a fifth block; A's growth then evicts B's output
    blocks from G1.  B is readmitted at 29 ms with its prompt in G1 and its first output block in G2: it
    recomputes that block instead of loading it, so nothing is restored."""
    run = replay_trace(tmp_path, [row(0, 8, 20, [1, 2]), row(0, 8, 20, [3, 4])], connector=SIMPLE, g1_blocks=9,
                       host_blocks=16)
    assert (17.0, "Stored", ["out1.2"]) in run.g2
    assert (26.0, "Removed", ["out1.2"]) in run.g1
    assert run.admissions(1) == [(0.0, "worker0.dp0", 0, 0), (29.0, "worker0.dp0", 8, 0)]
    assert (29.0, "Stored", ["out1.2", "out1.3"]) in run.g1  # recomputed and registered again
    assert (run.domain["restores"], run.domain["h2d_bytes"]) == (0, 0)


# ============================================================================================ scope

@pytest.mark.parametrize("scope, pools", [("dp_rank_local", 4), ("cluster_shared", 1)])
def test_pools_per_scope(tmp_path, scope, pools):
    """Scope: "two replicas with `attention_data: 2` and `num_host_blocks: 4096` get four private 4096-block caches
    with `dp_rank_local`, or one 4096-block cache with `cluster_shared`."  Knob table: `num_host_blocks` is per DP
    rank with dp_rank_local, the total pool size with cluster_shared."""
    plan = compile_plan(tmp_path, [row(0, 8, 1, [1, 2])], parallelism="replicas: 2, attention_data: 2",
                        scope=scope, host_blocks=4096)
    domains = domain_summaries(build(finish_plan(plan, tmp_path)))
    expected = ["g2.worker0.dp0", "g2.worker0.dp1", "g2.worker1.dp0", "g2.worker1.dp1"] \
        if pools == 4 else ["g2.shared"]
    assert [d["name"] for d in domains] == expected
    assert [(d["scope"], d["capacity_blocks"]) for d in domains] == [(scope, 4096)] * pools


@pytest.mark.parametrize("scope", ["dp_rank_local", "cluster_shared"])
def test_cluster_shared_block_stored_by_one_rank_is_restored_by_another(tmp_path, scope):
    """Scope: dp_rank_local is one pool per DP rank, cluster_shared one pool for the whole deployment.

    Two replicas; requests alternate ranks.  A (1, 2) runs on rank 0 and is stored; B (1, 2, 3) runs on rank 1
    at 20 ms.  Shared: B restores 1, 2 from the pool rank 0 filled (22 ms) and reuses 8 tokens from G2.
    Private: rank 1's pool is empty, B computes everything and stores 1, 2 again in its own pool."""
    run = replay_trace(tmp_path, [row(0, 8, 1, [1, 2]), row(20, 9, 1, [1, 2, 3])], parallelism="replicas: 2",
                       scope=scope)
    assert [r["dp_rank"] for r in run.records] == [0, 1]
    if scope == "cluster_shared":
        assert run.admissions(1) == [(22.0, "g2.shared", 0, 8)]
        assert run[1]["ttft_ms"] == 12.0
        assert [(d["name"], d["stores"], d["restores"]) for d in run.domains] == [("g2.shared", 2, 2)]
    else:
        assert run.admissions(1) == [(20.0, "worker1.dp0", 0, 0)]
        assert run[1]["ttft_ms"] == 10.0
        assert [(d["name"], d["stores"], d["restores"]) for d in run.domains] == \
            [("g2.worker0.dp0", 2, 0), ("g2.worker1.dp0", 2, 0)]


@pytest.mark.parametrize("scope", ["dp_rank_local", "cluster_shared"])
def test_four_ranks_share_a_pool_max_min_fairly(tmp_path, scope):
    """Scope: "transfers in the same direction share bandwidth max-min fairly per transfer, not per rank: four
    ranks at 32 GB/s, each running one transfer under an 80 GB/s pool, each move at 20 GB/s."

    20 MB blocks (bytes_per_token 5,000,000).  Four replicas each prefill one request with one full prompt block
    (ends 10 ms) and store it: alone at 32 GB/s a copy takes 0.625 ms; in the shared pool 1 ms.  At 20 ms each
    rank restores the block its neighbour stored (shared pool only): 1 ms at 20 GB/s, so TTFT 11 ms.  Each
    transfer waited 0.375 ms for bandwidth: 1.5 ms per direction."""
    rows = [row(0, 5, 1, [10 + i, 20 + i]) for i in range(4)] + \
           [row(20, 5, 1, [10 + (i + 1) % 4, 30 + i]) for i in range(4)]
    shared = scope == "cluster_shared"
    run = replay_trace(tmp_path, rows, parallelism="replicas: 4", scope=scope, bandwidth=32.0,
                       bytes_per_token=5_000_000, shared_bandwidth=80.0 if shared else None)
    first_stores = [(e["time_ms"], e["dp_rank"]) for e in run.events if e.get("tier") and e["time_ms"] < 20]
    assert first_stores == [(11.0 if shared else 10.625, rank) for rank in range(4)]
    if shared:
        assert [r["ttft_ms"] for r in run.records[4:]] == [11.0] * 4
        assert [r["first_admission_host_reused_input_tokens"] for r in run.records[4:]] == [4] * 4
        assert (run.domain["d2h_bandwidth_wait_ms"], run.domain["h2d_bandwidth_wait_ms"]) == (1.5, 1.5)
    else:
        assert [r["ttft_ms"] for r in run.records[4:]] == [10.0] * 4
        assert all(d["d2h_bandwidth_wait_ms"] == 0.0 for d in run.domains)


@pytest.mark.parametrize("pool, rank1_lands, rank0_lands, waited", [(80.0, 11.0, 19.0, 72.0),
                                                                      (20.0, 26.0, 26.0, 150.0)])
def test_pool_bandwidth_a_rank_cannot_use_goes_to_the_others(tmp_path, pool, rank1_lands, rank0_lands, waited):
    """Scope: "with one rank running nine transfers and another running one, both at 32 GB/s, each rank moves
    32 GB/s in total. Under a 20 GB/s pool the same ten transfers each get 2 GB/s".

    32 MB blocks.  Two replicas; rank 0 prefills nine one-block prompts, rank 1 one (its other requests have no
    full block), all stored at 10 ms.  80 GB/s pool: rank 1's copy moves at 32 GB/s (1 ms), rank 0's nine at
    32/9 GB/s (9 ms).  20 GB/s pool: all ten at 2 GB/s (16 ms)."""
    rows = []
    for i in range(9):
        rows.append(row(0, 5, 1, [100 + i, 200 + i]))
        rows.append(row(0, 5, 1, [300, 301]) if i == 0 else row(0, 3, 1, [400 + i]))
    run = replay_trace(tmp_path, rows, parallelism="replicas: 2", scope="cluster_shared", bandwidth=32.0,
                       bytes_per_token=8_000_000, shared_bandwidth=pool, g1_blocks=32, max_sequences=16,
                       host_blocks=16)
    lands = sorted((e["dp_rank"], e["time_ms"]) for e in run.events if e.get("tier"))
    assert lands == [(0, rank0_lands)] * 9 + [(1, rank1_lands)]
    assert run.domain["d2h_bandwidth_wait_ms"] == waited


@pytest.mark.parametrize("connector", [V32, SIMPLE])
def test_newer_connectors_need_dp_rank_local(connector):
    """Knob table, `connector`: "The last two need the aggregated worker, `dp_rank_local` ..."."""
    result = compile_bytes(config_text(connector=connector, scope="cluster_shared").encode(), "c.yaml", ())
    assert "G2-CONNECTOR-SCOPE" in {d.code for d in result.diagnostics}


# ============================================================================================ the report

MIXED_ROWS = [row(0, 12, 1, [1, 2, 3]), row(20, 11, 1, [4, 5, 6]), row(40, 13, 1, [1, 2, 3, 7])]


def _predict(tmp_path: Path, rows: list[dict], *flags: str, **knobs) -> Path:
    return predict_scenario(tmp_path, rows, config_text(**knobs), "g2.yaml", *flags)


def test_report_g2_domains_and_per_request_reuse(tmp_path, capsys):
    """Supported: "the report's `g2_domains` gives capacity and resident blocks"; KV cache fields: the
    first-admission G1 and host fields split the reuse, and `admission_history` names the pool reused from.

    A (1, 2, 3) is stored; B takes 3 of the 4 G1 blocks, evicting 3 and 2 (last block first) but not 1.
    C (1, 2, 3, 7) reuses block 1 from G1 and restores 2, 3 from G2 (40-42 ms): 4 + 8 = 12 tokens."""
    out = _predict(tmp_path, MIXED_ROWS, "--capture-per-request")
    capsys.readouterr()
    summary, records = read_outputs(out)
    assert summary["g2_domains"] == [{
        "name": "g2.worker0.dp0", "scope": "dp_rank_local", "connector": V24, "capacity_blocks": 8,
        "block_bytes": BLOCK, "resident_blocks": 5, "stores": 5, "restores": 2, "evictions": 0,
        "dropped_stores": 0, "d2h_bytes": 5 * BLOCK, "h2d_bytes": 2 * BLOCK, "d2h_bandwidth_wait_ms": 0.0,
        "h2d_bandwidth_wait_ms": 0.0}]
    for r in records:
        assert r["first_admission_reused_input_tokens"] == \
            r["first_admission_g1_reused_input_tokens"] + r["first_admission_host_reused_input_tokens"]
    c = records[2]
    assert (c["first_admission_g1_reused_input_tokens"], c["first_admission_host_reused_input_tokens"]) == (4, 8)
    assert [(h["pool"], h["g1_reused_input_tokens"], h["host_reused_input_tokens"], h["at_ms"])
            for h in c["admission_history"]] == [("g2.worker0.dp0", 4, 8, 42.0)]
    assert c["ttft_ms"] == 12.0
    assert [h["pool"] for r in records[:2] for h in r["admission_history"]] == ["worker0.dp0"] * 2
    assert (summary["first_admission_g1_reused_tokens"], summary["first_admission_host_reused_tokens"]) == (4, 8)


def test_kv_events_report_g2_changes_with_the_host_pinned_tier(tmp_path, capsys):
    """Supported: "Workers that publish KV events report G2 changes with `"tier": "host_pinned"`".

    kv-events.jsonl of the mixed-reuse scenario: event ids count up from 0, times never go back, every event
    names its DP rank and is Stored or Removed; only G2 events carry a tier, and a block has the same hash in
    both tiers."""
    out = _predict(tmp_path, MIXED_ROWS, "--capture-kv-events")
    capsys.readouterr()
    events = [orjson.loads(line) for line in (out / "kv-events.jsonl").read_bytes().splitlines()]
    assert [e["event_id"] for e in events] == list(range(len(events)))
    assert [e["time_ms"] for e in events] == sorted(e["time_ms"] for e in events)
    assert {e["dp_rank"] for e in events} == {0}
    assert {e["type"] for e in events} == {"Stored", "Removed"}
    g2 = [e for e in events if "tier" in e]
    assert {e["tier"] for e in g2} == {"host_pinned"}
    assert [(e["time_ms"], e["type"], len(e["block_hashes"])) for e in g2] == [(13.0, "Stored", 3),
                                                                             (32.0, "Stored", 2)]
    g1_first = next(e for e in events if "tier" not in e and e["type"] == "Stored")
    assert g2[0]["block_hashes"] == g1_first["block_hashes"]  # blocks 1, 2, 3 of A in both tiers


# ============================================================================================ determinism

EXAMPLE = EXAMPLES / "host-offload-prediction.yaml"
VARIANTS = [(V24, "dp_rank_local"), (V32, "dp_rank_local"), (SIMPLE, "dp_rank_local"), (V24, "cluster_shared")]


def _example_run(out: Path, connector: str, scope: str, g1_blocks: int, *flags: str) -> dict[str, bytes]:
    code = main(["predict", "--no-progress", "-c", str(EXAMPLE), "--output-dir", str(out), "--format", "json",
                 "--capture-per-request", "--set", f"{KV}.host_offload.connector={connector}",
                 "--set", f"{KV}.host_offload.scope={scope}", "--set", f"{KV}.capacity.blocks={g1_blocks}", *flags])
    assert code == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("g1_blocks", [2499, 400], ids=["example", "small-g1"])
@pytest.mark.parametrize("connector, scope", VARIANTS, ids=[f"{c}-{s}" for c, s in VARIANTS])
def test_example_is_byte_identical_across_runs_and_stepping(tmp_path, capsys, connector, scope, g1_blocks):
    """Determinism: the spec's host-offload example (and the same with a 400-block G1, so that G2 restores
    happen) gives byte-identical prediction.json and requests.jsonl in two runs and with --single-step, and
    byte-identical kv-events.jsonl in two captured runs."""
    first = _example_run(tmp_path / "a", connector, scope, g1_blocks)
    again = _example_run(tmp_path / "b", connector, scope, g1_blocks)
    single = _example_run(tmp_path / "c", connector, scope, g1_blocks, "--single-step")
    capsys.readouterr()
    assert set(first) == {"prediction.json", "requests.jsonl"}
    assert first == again == single
    summary = orjson.loads(first["prediction.json"])
    assert summary["completed_requests"] == 64
    (domain,) = summary["g2_domains"]
    assert (domain["connector"], domain["scope"]) == (connector, scope)
    if g1_blocks == 400:
        assert domain["restores"] > 0 and summary["first_admission_host_reused_tokens"] > 0
    events = [_example_run(tmp_path / name, connector, scope, g1_blocks, "--capture-kv-events")["kv-events.jsonl"]
              for name in ("d", "e")]
    capsys.readouterr()
    assert events[0] == events[1] and b'"tier":"host_pinned"' in events[0]


@pytest.mark.parametrize("connector", [V32, SIMPLE])
def test_example_rejects_newer_connectors_with_a_shared_pool(connector):
    """Knob table, `connector`: offloading_v0_32 and simple_cpu_v0_32 need `dp_rank_local`, so the example with
    `scope: cluster_shared` is rejected for them rather than replayed."""
    result = compile_file(EXAMPLE, [f"{KV}.host_offload.connector={connector}",
                                    f"{KV}.host_offload.scope=cluster_shared"])
    assert "G2-CONNECTOR-SCOPE" in {d.code for d in result.diagnostics}
