"""Disaggregated prefill/decode (P/D): the KV handoff, on small hand-built scenarios with exact numbers.

What is checked (REFERENCE.md "engine.kv_transfer" and the P/D fields of per-request records; kv-cache-tiers.md
"GPU cache (G1)", "Host offload (G2)" and "State cache"; the model in runtime/handoff.py):

- the prefill rank computes the prompt; the prompt's KV then travels to a decode rank, which samples every
  output token, the first in the pass that admits the request there (TTFT = decode admission + one decode pass:
  it includes the transfer and any wait for a decode slot, as AISimulate stamps it; the prefill's own sampled
  token is not counted);
- transfer time = (tokens x bytes_per_token + state bytes) / (bandwidth x 1e9) s (+ a ReplaySpec
  `handoff_latency_ms`); `full_prompt` moves the prompt's tokens, `destination_missing` only the blocks (whole
  blocks) the decode rank does not hold as a cached prefix; a null bandwidth means no delay; a state
  cache's state (the prefill role's `bytes_per_request`) is charged once per request in either mode;
- source-first (vLLM, TensorRT-LLM): the decode rank is chosen and reserves its prompt blocks after the
  prefill, and the source holds its blocks until the decode worker activates the landed request (at the
  landing, or at the end of the decode pass running then; including the wait for decode blocks), or until the
  end of the pass the source is running then;
  destination-first (SGLang): the decode rank reserves its blocks before the prefill starts;
- landed handoffs are admitted before other waiting requests, in FCFS order;
- auto `kv_transfer.bytes_per_token`; token-only P/D with G2 on either role; determinism.

Conventions, unless a test says otherwise (every time is a round number):
- block_size 4 on both roles, kv_cache.bytes_per_token 250,000 (1,000,000-byte blocks);
- kv_transfer.bytes_per_token 250,000 over 0.25 GB/s: exactly 1 ms per transferred token;
- fixed timing on both roles: a pass with prefill work costs 10 ms, a decode-only pass 1 ms;
- one prefill worker (index 0) and one decode worker (index 1), both with a large G1 (64 blocks);
- traffic is a Mooncake trace in tmp_path with `traffic.source.block_size: 4`: every hash_id is one engine
  block, so the tests choose which requests share which prefix blocks.

Every engine scenario is replayed twice, with macro steps and single-stepped, and must give the same records.
"""
from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.runtime.engines import sglang_macro
from kvreplay.runtime.shell import macro as macro_module
from kvreplay.runtime.outputs.metrics import FIRST_KEY, request_record
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build

from .scenarios import (BS, MS, SCENARIO_TRAFFIC, ScenarioRun, compile_scenario, domain_summaries, predict_scenario,
                        replay_both_ways, row, token_times)
from .support import read_outputs

QWEN3_8B_KV_PER_TOKEN = 36 * 8 * 128 * 2 * 2  # layers x KV heads x head_dim x (K, V) x bf16 = 147,456 B

PD_FIELDS = ("prefill_worker_idx", "decode_worker_idx", "prefill_admit_ms", "prefill_done_ms", "decode_admit_ms",
             "source_released_ms", "source_hold_ms", "decode_cached_input_tokens", "kv_transfer_tokens")


def with_hold(records: list[dict]) -> list[dict]:
    """The records, each P/D one with `source_hold_ms`, how long the source held its blocks: `source_held_ms` is
    when the hold began (the prefill's end, AISimulate's instant: checked here for every record), and the hold
    ends at `source_released_ms`."""
    for record in records:
        if record.get("source_released_ms") is not None:
            assert record["source_held_ms"] == record["prefill_done_ms"]
            record["source_hold_ms"] = record["source_released_ms"] - record["source_held_ms"]
    return records


# ============================================================================================ harness

def _flow(mapping: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in mapping.items()) + "}"


def config_text(*, backend: str = "vllm", bandwidth: float | None = 0.25, transfer_bpt: int | str = 250_000,
                timing_mode: str = "full_prompt", prefill_blocks: int = 64, decode_blocks: int = 64,
                prefill_sequences: int | None = None, decode_sequences: int = 8, decode_ms: float = 1,
                prefill_state: int | None = None, decode_state: int | None = None, prefill_extra: str = "",
                decode_extra: str = "", prefill_parallelism: str = "", decode_parallelism: str = "") -> str:
    def role(blocks: int, sequences: int | None, decode: float, state: int | None, extra: str, parallel: str) -> str:
        scheduler = {"max_batched_tokens": 64}
        if sequences is not None:
            scheduler["max_sequences"] = sequences
        kv = {"block_size": BS, "bytes_per_token": 250_000, "capacity": f"{{type: fixed, blocks: {blocks}}}"}
        if state is not None:
            kv["state_cache"] = f"{{bytes_per_request: {state}}}"
        text = _flow(kv)[:-1] + extra + "}"
        return (f"\n      parallelism: {{{parallel}}}"
                f"\n      timing: {{type: fixed, prefill_ms: 10, decode_ms: {decode}}}"
                f"\n      scheduler: {_flow(scheduler)}"
                f"\n      kv_cache: {text}")

    transfer = {"bandwidth_gb_per_second": "null" if bandwidth is None else bandwidth,
                "bytes_per_token": transfer_bpt, "timing_mode": timing_mode}
    return f"""
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: {backend}
  kv_transfer: {_flow(transfer)}
  workers:
    prefill:{role(prefill_blocks, prefill_sequences, 1, prefill_state, prefill_extra, prefill_parallelism)}
    decode:{role(decode_blocks, decode_sequences, decode_ms, decode_state, decode_extra, decode_parallelism)}
{SCENARIO_TRAFFIC}"""


def compile_plan(tmp_path: Path, rows: list[dict], **knobs) -> dict:
    return compile_scenario(tmp_path, rows, config_text(**knobs), "pd.yaml")


class Run(ScenarioRun):
    def field(self, name: str) -> list:
        return [r[name] for r in self.records]

    def pd(self, index: int) -> dict:
        return {k: self.records[index][k] for k in PD_FIELDS}

    def tokens(self, index: int) -> list[float]:
        """Every token time (ms) of request `index`."""
        return token_times(self.replay.requests[index])


def replay_pd(tmp_path: Path, rows: list[dict], **knobs) -> Run:
    """Replay the rows with macro steps and single-stepped; both must give the same records (and G2 counters)."""
    fused, single, records = replay_both_ways(compile_plan(tmp_path, rows, **knobs), tmp_path)
    assert not fused.stalled and not single.stalled
    return Run(fused, with_hold(records))


# ============================================================================================ transfer time

# A (blocks 1, 2) leaves both blocks cached on the decode rank.  B (1, 2, 3) then finds 8 of its 12 tokens there
# and C (1, 2) its whole prompt.  Each prefill takes 10 ms; with 1 ms per transferred token the decode rank admits
# the request as soon as its KV lands and decodes one token per ms.
PREFIX_ROWS = [row(0, 8, 3, [1, 2]), row(50, 12, 3, [1, 2, 3]), row(100, 8, 3, [1, 2])]


@pytest.mark.parametrize("timing_mode", ["full_prompt", "destination_missing"])
def test_transfer_of_a_cold_prompt_takes_tokens_times_bytes_over_bandwidth(tmp_path, timing_mode):
    """engine.kv_transfer: transfer time = tokens x bytes_per_token / (bandwidth x 1e9) s.

    One 8-token prompt, 3 output tokens, nothing cached on the decode rank: both modes move 8 tokens x 250,000 B
    over 0.25 GB/s = 8 ms.  The prefill pass runs 0-10 ms; the KV lands at 18 ms, the decode rank admits the
    request at once and samples tokens 1, 2 and 3 at 19, 20 and 21 ms."""
    run = replay_pd(tmp_path, [row(0, 8, 3, [1, 2])], timing_mode=timing_mode)
    a = run[0]
    assert run.pd(0) == {"prefill_worker_idx": 0, "decode_worker_idx": 1, "prefill_admit_ms": 0.0,
                         "prefill_done_ms": 10.0, "decode_admit_ms": 18.0, "source_released_ms": 18.0,
                         "source_hold_ms": 8.0, "decode_cached_input_tokens": 0, "kv_transfer_tokens": 8}
    assert run.tokens(0) == [19.0, 20.0, 21.0]
    assert (a["ttft_ms"], a["ttst_ms"], a["e2e_latency_ms"], a["itl_ms"]) == (19.0, 1.0, 21.0, 1.0)
    assert (a["first_admit_ms"], a["first_token_ms"], a["last_token_ms"], a["terminal_time_ms"]) == \
        (0.0, 19.0, 21.0, 21.0)
    assert (a["terminal_status"], a["output_length"], a["admission_count"], a["readmission_count"]) == \
        ("completed", 3, 2, 0)
    # the decode rank's activation is an admission too (AISimulate's records), reusing nothing: facts §33
    assert [(h["pool"], h["at_ms"], h["reused_input_tokens"], h["is_readmission"]) for h in a["admission_history"]] \
        == [("prefill.worker0.dp0", 0.0, 0, False), ("decode.worker0.dp0", 18.0, 0, False)]


@pytest.mark.parametrize("timing_mode, transferred, held", [
    ("full_prompt", [8, 12, 8], [8.0, 12.0, 8.0]),  # the whole prompt every time
    ("destination_missing", [8, 4, 0], [8.0, 4.0, 0.0]),  # only what the decode rank lacks
])
def test_timing_mode_full_prompt_vs_destination_missing(tmp_path, timing_mode, transferred, held):
    """engine.kv_transfer.timing_mode: `full_prompt` moves the whole prompt; `destination_missing` (the default)
    only the tokens the decode rank does not hold as a cached prefix.

    (PREFIX_ROWS.)  On the decode rank B finds blocks 1, 2 (8 tokens) and C its whole 8-token prompt, so
    destination_missing moves 4 and 0 tokens where full_prompt moves 12 and 8.  The decode-side prefix is
    reported as decode_cached_input_tokens in both modes; TTFT = prefill (10 ms) + transfer + one 1 ms decode
    pass."""
    run = replay_pd(tmp_path, PREFIX_ROWS, timing_mode=timing_mode)
    assert run.field("kv_transfer_tokens") == transferred
    assert run.field("source_hold_ms") == held
    assert run.field("decode_cached_input_tokens") == [0, 8, 8]
    assert run.field("prefill_done_ms") == [10.0, 60.0, 110.0]
    assert run.field("decode_admit_ms") == [done + h for done, h in zip([10.0, 60.0, 110.0], held)]
    assert run.field("ttft_ms") == [h + 11 for h in held]
    assert run.field("ttst_ms") == [1.0, 1.0, 1.0]
    assert run.field("e2e_latency_ms") == [h + 13 for h in held]


def test_a_tensorrt_llm_decode_rank_takes_the_whole_prompt_whatever_it_has_cached(tmp_path):
    """TensorRT-LLM's generation worker reuses none of its own cache for a handoff: its cache transceiver sends
    every block of the prompt (TensorRT-LLM PR 13055: "avoiding blocks already cached by the receiver" unsupported;
    AISimulate's decode worker likewise, facts section 78).  PREFIX_ROWS with destination_missing: where vLLM's
    decode rank holds 8 of B's and all of C's tokens and moves 4 and 0, TensorRT-LLM's moves 8, 12 and 8 (4 blocks
    of 4 tokens x 250,000 B at 0.25 GB/s = 12 ms for B), reusing nothing there.  C's prompt is cached whole on the
    prefill rank, which TensorRT-LLM reuses whole: its first token is a 1 ms decode-priced pass (100-101 ms), and the
    KV lands 8 ms later; macro-stepped, that pass is not fused into further decodes on the prefill rank (it hands
    C off: C decoded 6 tokens there before shell/macro.py's prefill-role check)."""
    run = replay_pd(tmp_path, PREFIX_ROWS, backend="trtllm", timing_mode="destination_missing")
    assert run.field("kv_transfer_tokens") == [8, 12, 8]
    assert run.field("source_hold_ms") == [8.0, 12.0, 8.0]
    assert run.field("decode_cached_input_tokens") == [0, 0, 0]
    assert run.field("prefill_done_ms") == [10.0, 60.0, 101.0]
    assert run.field("decode_admit_ms") == [18.0, 72.0, 109.0]


@pytest.mark.parametrize("bandwidth, held", [(0.25, 8.0), (0.5, 4.0), (2.0, 1.0), (None, 0.0)])
def test_bandwidth_divides_the_transfer_and_null_means_no_delay(tmp_path, bandwidth, held):
    """engine.kv_transfer.bandwidth_gb_per_second is decimal GB/s; null means no delay.

    8 tokens x 250,000 B = 2 MB: 8 ms at 0.25 GB/s, 4 ms at 0.5, 1 ms at 2.0, and 0 with no bandwidth, when the
    decode rank admits the request at the end of the prefill pass (10 ms) and samples at 11, 12 and 13 ms.  The
    transferred token count is still reported."""
    run = replay_pd(tmp_path, [row(0, 8, 3, [1, 2])], bandwidth=bandwidth)
    a = run[0]
    assert (a["source_hold_ms"], a["source_released_ms"], a["decode_admit_ms"]) == (held, 10 + held, 10 + held)
    assert (a["kv_transfer_tokens"], a["ttft_ms"], a["ttst_ms"], a["e2e_latency_ms"]) == \
        (8, held + 11, 1.0, held + 13)


@pytest.mark.parametrize("timing_mode", ["full_prompt", "destination_missing"])
def test_null_bandwidth_means_no_delay_in_either_mode(tmp_path, timing_mode):
    """(PREFIX_ROWS with `bandwidth_gb_per_second: null`.)  No request waits for its KV: every decode admission
    happens at the end of its prefill pass and every TTFT is the prefill and one decode pass."""
    run = replay_pd(tmp_path, PREFIX_ROWS, bandwidth=None, timing_mode=timing_mode)
    assert run.field("source_hold_ms") == [0.0, 0.0, 0.0]
    assert run.field("decode_admit_ms") == run.field("prefill_done_ms") == [10.0, 60.0, 110.0]
    assert run.field("ttst_ms") == [1.0, 1.0, 1.0]
    assert run.field("kv_transfer_tokens") == ([8, 12, 8] if timing_mode == "full_prompt" else [8, 4, 0])


def test_predict_summary_latencies_include_the_transfer_in_ttft(tmp_path, capsys):
    """`kvreplay predict` on PREFIX_ROWS (destination_missing): TTFT = prefill + transfer + one decode pass
    (19, 15, 11 ms); TTST one decode pass; E2E = 21, 17, 13 ms; every record carries the P/D fields."""
    out = predict_scenario(tmp_path, PREFIX_ROWS, config_text(timing_mode="destination_missing"), "pd.yaml",
                           "--capture-per-request")
    capsys.readouterr()
    summary, records = read_outputs(out)
    records = with_hold(records)
    assert (summary["completed_requests"], summary["num_ttst_samples"]) == (3, 3)
    assert (summary["min_ttft_ms"], summary["mean_ttft_ms"], summary["max_ttft_ms"]) == (11.0, 15.0, 19.0)
    assert (summary["min_ttst_ms"], summary["mean_ttst_ms"], summary["max_ttst_ms"]) == (1.0, 1.0, 1.0)
    assert (summary["min_e2e_latency_ms"], summary["mean_e2e_latency_ms"], summary["max_e2e_latency_ms"]) == \
        (13.0, 17.0, 21.0)
    assert all(set(PD_FIELDS) <= set(r) for r in records)
    assert [r["kv_transfer_tokens"] for r in records] == [8, 4, 0]


# ============================================================================================ state cache

@pytest.mark.parametrize("timing_mode, held", [
    ("full_prompt", [8 + 6.0, 12 + 6.0, 8 + 6.0]),
    ("destination_missing", [8 + 6.0, 4 + 6.0, 0 + 6.0]),
])
def test_state_bytes_are_charged_once_per_request_in_either_mode(tmp_path, timing_mode, held):
    """State cache: "the transfer also moves one state: the prefill role's `bytes_per_request`, charged once per
    request in either `timing_mode`.  A decode-side prefix hit skips resident token KV; the state still travels
    with the rest of the prompt."

    (PREFIX_ROWS.)  The prefill role's state is 1,500,000 B = 6 ms at 0.25 GB/s; the decode role's own state
    (3,000,000 B, 3 blocks) is not what travels.  Every transfer takes its tokens' time plus 6 ms, C's included
    although destination_missing moves none of its tokens."""
    run = replay_pd(tmp_path, PREFIX_ROWS, timing_mode=timing_mode, prefill_state=1_500_000,
                    decode_state=3_000_000)
    assert run.replay.handoff.state_bytes == 1_500_000
    assert [rank.state_blocks for rank in run.replay.ranks()] == [2, 3]  # each role sizes its own state
    assert run.field("source_hold_ms") == held
    assert run.field("ttft_ms") == [h + 11 for h in held]
    assert run.field("kv_transfer_tokens") == ([8, 12, 8] if timing_mode == "full_prompt" else [8, 4, 0])
    assert run.field("decode_cached_input_tokens") == [0, 8, 8]
    assert run.field("terminal_status") == ["completed"] * 3


def test_state_transfer_has_no_delay_without_bandwidth(tmp_path):
    """A null bandwidth means no delay for the state either."""
    run = replay_pd(tmp_path, [row(0, 8, 3, [1, 2])], bandwidth=None, prefill_state=1_500_000,
                    decode_state=1_500_000)
    assert (run[0]["source_hold_ms"], run[0]["ttft_ms"]) == (0.0, 11.0)


# ============================================================================================ source-first vs destination-first

# The decode rank has 5 blocks.  A (8 tokens, 10 output tokens) reserves 2 (its prompt; destination-first: 3,
# prompt + next token) and grows to 5 while it decodes (tokens at 19 ... 28 ms; its 4th block from the pass at
# 23 ms, its 5th from 27 ms).  B (8 tokens, 3 output tokens) arrives at 14 ms and needs 2 decode blocks (3), which
# only A's end (28 ms) frees.
FULL_DECODE_ROWS = [row(0, 8, 10, [1, 2]), row(14, 8, 3, [3, 4])]


@pytest.mark.parametrize("backend", ["vllm", "trtllm", "sglang"])
def test_a_lone_request_has_the_same_timeline_with_either_handoff_order(tmp_path, backend):
    """With an idle decode rank the order does not matter: prefill 0-10 ms, 8 ms transfer, decode from 18 ms.
    B's prefill runs 14-24 ms when A lands, and the source lets go of A's blocks at the end of that pass (24 ms):
    source-first B is prefilled at once; destination-first (SGLang) B reserves its 2 prompt pages at 14 ms, so
    the decode rank needs 7 pages for A to grow to 5 beside them (AISimulate: the same times at 7; at 5 its
    SGLang stalls)."""
    blocks = 7 if backend == "sglang" else 5
    run = replay_pd(tmp_path, FULL_DECODE_ROWS, backend=backend, decode_blocks=blocks)
    released = 24.0
    assert run.pd(0) == {"prefill_worker_idx": 0, "decode_worker_idx": 1, "prefill_admit_ms": 0.0,
                         "prefill_done_ms": 10.0, "decode_admit_ms": 18.0, "source_released_ms": released,
                         "source_hold_ms": released - 10, "decode_cached_input_tokens": 0, "kv_transfer_tokens": 8}
    assert run.tokens(0) == [19.0 + i for i in range(10)]


@pytest.mark.parametrize("backend", ["vllm", "trtllm"])
def test_source_first_prefills_at_once_and_holds_the_source_while_decode_blocks_are_short(tmp_path, backend):
    """Source-first (vLLM, TensorRT-LLM): the decode rank is chosen and reserves its blocks after the prefill.

    (FULL_DECODE_ROWS.)  B prefills at once (14-24 ms), then waits for decode blocks until A ends at 28 ms, its
    8 ms transfer lands at 36 ms: the source held B's blocks for 12 ms = 4 ms waiting + 8 ms transfer.  B's
    tokens: 37, 38, 39 ms (TTFT 23)."""
    run = replay_pd(tmp_path, FULL_DECODE_ROWS, backend=backend, decode_blocks=5)
    assert run.pd(1) == {"prefill_worker_idx": 0, "decode_worker_idx": 1, "prefill_admit_ms": 14.0,
                         "prefill_done_ms": 24.0, "decode_admit_ms": 36.0, "source_released_ms": 36.0,
                         "source_hold_ms": 12.0, "decode_cached_input_tokens": 0, "kv_transfer_tokens": 8}
    assert run.tokens(1) == [37.0, 38.0, 39.0]
    assert (run[1]["ttft_ms"], run[1]["ttst_ms"], run[1]["e2e_latency_ms"]) == (23.0, 1.0, 25.0)


def test_destination_first_a_full_decode_rank_delays_the_prefill(tmp_path):
    """Destination-first (SGLang): the decode rank reserves before the prefill starts.

    (FULL_DECODE_ROWS, B arriving at 24 ms.)  At 24 ms A holds 4 of the 5 decode pages (prompt + 6 tokens and the
    next one's slot), so B cannot reserve its 2 prompt pages until A ends at 28 ms; its prefill runs 28-38 ms
    although the prefill rank is idle from 10 ms; the transfer starts as the prefill ends and the source holds
    B's pages only for the 8 ms transfer.  B's tokens: 47, 48, 49 ms (TTFT 23).  AISimulate: the same times."""
    rows = [FULL_DECODE_ROWS[0], row(24, 8, 3, [3, 4])]
    run = replay_pd(tmp_path, rows, backend="sglang", decode_blocks=5)
    assert run.pd(1) == {"prefill_worker_idx": 0, "decode_worker_idx": 1, "prefill_admit_ms": 28.0,
                         "prefill_done_ms": 38.0, "decode_admit_ms": 46.0, "source_released_ms": 46.0,
                         "source_hold_ms": 8.0, "decode_cached_input_tokens": 0, "kv_transfer_tokens": 8}
    assert run.tokens(1) == [47.0, 48.0, 49.0]
    assert (run[1]["first_admit_ms"], run[1]["ttft_ms"], run[1]["ttst_ms"], run[1]["e2e_latency_ms"]) == \
        (28.0, 23.0, 1.0, 25.0)


@pytest.mark.parametrize("backend, reserved_at", [("vllm", [10.0, 28.0]), ("trtllm", [10.0, 28.0]),
                                                  ("sglang", [0.0, 14.0])])
def test_decode_reservation_comes_after_the_prefill_or_before_it(tmp_path, monkeypatch, backend, reserved_at):
    """The order itself, read from each record's destination_reserved_ms (AISimulate's field: when the decode
    rank reserved): source-first reserves when the prefill has ended (A at 10 ms, B when A's end frees blocks at
    28 ms, after B's prefill ended at 24); destination-first reserves at or before the prefill admission (A at 0,
    B on arrival at 14: its 2 prompt pages fit beside A's)."""
    plan = compile_plan(tmp_path, FULL_DECODE_ROWS, backend=backend, decode_blocks=5)
    replay = build(finish_plan(plan, tmp_path))
    replay.run()
    records = [request_record(r) for r in replay.requests]
    assert [records[0]["destination_reserved_ms"], records[1]["destination_reserved_ms"]] == reserved_at
    assert all(min(record) == FIRST_KEY for record in records)  # (the key RecordSpool is told is the least)
    for record, at in zip(records, reserved_at):
        if backend == "sglang":
            assert at <= record["prefill_admit_ms"]
        else:
            assert at >= record["prefill_done_ms"]


# ============================================================================================ the source holds its blocks

@pytest.mark.parametrize("backend", ["vllm", "sglang"])
@pytest.mark.parametrize("prefill_blocks, bandwidth, b_admitted, a_released, b_first", [
    (3, 0.25, 18.0, 18.0, 37.0),  # A holds 2 of 3 blocks until its transfer ends at 18 ms
    (4, 0.25, 10.0, 20.0, 29.0),  # room for both: B starts as A's pass ends; A lets go at the end of B's pass
    (3, None, 10.0, 10.0, 21.0),  # no transfer delay: A lets go at 10 ms
])
def test_prefill_rank_keeps_the_source_blocks_until_the_transfer_ends(tmp_path, backend, prefill_blocks, bandwidth,
                                                                      b_admitted, a_released, b_first):
    """runtime/handoff.py: the prefill rank (the source) holds the request's blocks until the transfer ends.

    A (1, 2) and B (3, 4), 8-token prompts, both arrive at 0 ms; the prefill role runs one sequence at a time.
    A prefill G1 of 3 blocks fits one 8-token prompt (2 blocks) and not two: B waits for A's 8 ms transfer
    (10-18 ms) although A is no longer running; with 4 blocks or no transfer delay B is admitted at 10 ms.  A
    transfer that lands while the source runs a pass is let go at that pass's end (AISimulate's release).  B's
    first token: its prefill (10 ms), its transfer, one decode pass."""
    if backend == "sglang" and (prefill_blocks, bandwidth) == (4, 0.25):
        # SGLang's hold keeps A's partial tail too, the page of the token its prefill sampled: 3 of the 4 pages,
        # so B waits for A's release as with 3 (AISimulate: the same times)
        b_admitted, a_released, b_first = 18.0, 18.0, 37.0
    run = replay_pd(tmp_path, [row(0, 8, 3, [1, 2]), row(0, 8, 3, [3, 4])], backend=backend,
                    prefill_blocks=prefill_blocks, bandwidth=bandwidth, prefill_sequences=1)
    a, b = run.records
    assert a["source_released_ms"] == a_released
    assert b["prefill_admit_ms"] == b["first_admit_ms"] == b_admitted
    assert b["first_token_ms"] == b_first
    assert run.field("terminal_status") == ["completed", "completed"]


def test_source_held_while_waiting_for_decode_blocks_blocks_the_next_prefill(tmp_path):
    """Source-first: the source hold spans the wait for decode blocks too, and the held blocks keep later
    prompts off a small prefill G1.

    Prefill G1 3 blocks (one 8-token prompt at a time), decode G1 6 blocks.  A (16 output tokens) prefills 0-10,
    lands at 18 and samples at 19 ... 34 ms, growing to 6 decode blocks (5 of them from 27 ms, the 6th from 31).
    B prefills 18-28 (after A's source is released), waits for its 2 decode blocks until A ends at 34 and lands
    at 42 ms; only then can C start its prefill."""
    rows = [row(0, 8, 16, [1, 2]), row(0, 8, 3, [3, 4]), row(0, 8, 3, [5, 6])]
    run = replay_pd(tmp_path, rows, prefill_blocks=3, decode_blocks=6)
    assert run.field("prefill_admit_ms") == [0.0, 18.0, 42.0]
    assert run.field("prefill_done_ms") == [10.0, 28.0, 52.0]
    assert run.field("source_released_ms") == [18.0, 42.0, 60.0]
    assert run.field("source_hold_ms") == [8.0, 14.0, 8.0]  # B: 6 ms waiting for A's end + 8 ms transfer
    assert run.field("last_token_ms") == [34.0, 45.0, 63.0]


# ============================================================================================ per-request fields

def test_reused_input_tokens_count_prefill_admissions_and_decode_reuse_is_separate(tmp_path):
    """GPU cache (G1): `reused_input_tokens` is the largest reuse across the request's prefill admissions;
    `decode_cached_input_tokens` is the prefix the decode rank already held; `decode_reused_input_tokens`
    (AISimulate's field: the largest reuse of the request's decode-rank readmissions) is 0 without a readmission, as in
    AISimulate's records of `t21-syn-pd-missing` (facts section 43).

    Two prefill workers (round robin), one decode worker.  A (1, 2) prefills on prefill worker 0; B (1, 2, 3)
    on prefill worker 1, which holds nothing (reused 0) while the decode rank holds A's 8 tokens; C (1, 2, 4)
    is back on prefill worker 0, which holds 1, 2 (reused 8), as does the decode rank."""
    rows = [row(0, 8, 3, [1, 2]), row(50, 12, 3, [1, 2, 3]), row(100, 12, 3, [1, 2, 4])]
    run = replay_pd(tmp_path, rows, timing_mode="destination_missing", prefill_parallelism="replicas: 2")
    assert run.field("prefill_worker_idx") == [0, 1, 0]
    assert run.field("decode_worker_idx") == [2, 2, 2]
    assert run.field("reused_input_tokens") == [0, 0, 8]
    assert run.field("first_admission_reused_input_tokens") == [0, 0, 8]
    assert run.field("decode_cached_input_tokens") == [0, 8, 8]
    assert run.field("decode_reused_input_tokens") == [0, 0, 0]
    assert run.field("kv_transfer_tokens") == [8, 4, 4]
    assert run.field("ttft_ms") == [19.0, 15.0, 15.0]  # prefill 10 + transfer 8, 4, 4 + one decode pass


# R0, R1 (8-token prompts, 20 output tokens) prefill together and land on an 8-block decode rank at 18 ms with 2
# blocks each; when both need a 5th block the newest (R1) is preempted, and it is readmitted on the decode rank
# (recomputing its prompt, reusing one cached 4-token block there) when R0 ends at 38 ms (its 20 tokens at
# 19 ... 38 ms).
PREEMPT_ROWS = [row(0, 8, 20, [1, 2]), row(0, 8, 20, [3, 4])]


def test_a_decode_preemption_is_an_admission_of_the_decode_rank(tmp_path):
    """admission_history records every admission, the decode rank's activation (at 18 ms) and a readmission on
    the decode rank after a preemption (REFERENCE: "when blocks run out, the newest running request is preempted
    (recompute)"); readmission_count counts the readmissions only."""
    run = replay_pd(tmp_path, PREEMPT_ROWS, decode_blocks=8, prefill_sequences=2)
    r0, r1 = run.records
    assert (r0["readmission_count"], r1["readmission_count"]) == (0, 1)
    assert [(h["pool"], h["at_ms"], h["reused_input_tokens"], h["is_readmission"])
            for h in r1["admission_history"]] == [("prefill.worker0.dp0", 0.0, 0, False),
                                                  ("decode.worker0.dp0", 18.0, 0, False),
                                                  ("decode.worker0.dp0", 38.0, 4, True)]
    assert [h["admission_ordinal"] for h in r1["admission_history"]] == [0, 1, 2]
    assert (r0["admission_count"], r1["admission_count"]) == (2, 3)
    # decode_reused_input_tokens (AISimulate's field): the largest reuse of its decode-rank readmissions
    assert (r1["first_admission_reused_input_tokens"], r1["decode_reused_input_tokens"]) == (0, 4)
    assert (r0["decode_reused_input_tokens"], r0["decode_cached_input_tokens"], r1["decode_cached_input_tokens"]) \
        == (0, 0, 0)
    assert run.field("terminal_status") == ["completed", "completed"]


def test_a_decode_rank_readmission_recomputes_in_a_decode_pass(tmp_path):
    """Dynamo's mocker (`schedule_request`): a decode worker never adds prompt tokens to its pass's prefill batch
    (`worker_type != Decode`), so a readmission's recompute there costs no prefill time; the readmitted request
    is ready in the same pass and samples its next token at the pass end, like any decode.

    (PREEMPT_ROWS.)  At 27 ms both hold 4 blocks (16 tokens); R0 needs a 5th and the newest, R1, is preempted
    after 9 tokens (19 ... 27).  R0's last token is at 38; R1 is readmitted then with its 17 known tokens, 4
    reused: the pass 38-39 is one 1 ms decode (with the prefill cost it was 38-49), so R1's 10th token is at 39
    and its 20th at 49.  AISimulate: the same rule on `docs/reference-runs/configs/pd-decode-pressure.yaml`
    (facts section 43)."""
    run = replay_pd(tmp_path, PREEMPT_ROWS, decode_blocks=8, prefill_sequences=2)
    assert run.tokens(0) == [19.0 + k for k in range(20)]
    assert run.tokens(1) == [19.0 + k for k in range(9)] + [39.0 + k for k in range(11)]
    assert [h["at_ms"] for h in run[1]["admission_history"]] == [0.0, 18.0, 38.0]
    assert run[1]["last_token_ms"] == 49.0


def test_reused_input_tokens_ignore_decode_readmissions(tmp_path):
    """GPU cache (G1) field table: `reused_input_tokens` is the "largest reuse across the request's prefill
    admissions, or across all admissions without a prefill stage".  P/D requests have a prefill stage, so R1's
    decode-rank readmission (which reused 4 tokens of the decode rank's cache) must not count: 0, not 4."""
    run = replay_pd(tmp_path, PREEMPT_ROWS, decode_blocks=8, prefill_sequences=2)
    assert run[1]["admission_history"][2]["reused_input_tokens"] == 4  # the decode readmission happened
    assert run.field("reused_input_tokens") == [0, 0]


# X (4 tokens, 10 output) decodes alone on a decode rank whose passes take 20 ms and which runs at most 2
# sequences (X lands at 14 ms, while A's and B's prefill runs: its source is let go at that pass's end, 20 ms).
# A (32 tokens) and B (4 tokens) arrive at 1 ms, prefill together 10-20 ms and enter the decode queue in that
# order while X's pass 14-34 runs.  The mocker tries the reservation queue's head once per trigger: X's pass
# completion at 34 ms reserves A (32 tokens: lands at 66), the next one at 54 ms B (lands at 58).  Both land
# while the pass 54-74 runs; the decode worker activates them when it ends, and only then do their sources let go
# (the prefill worker is idle): 74 ms for both (ReleaseSource follows ActivateDestination, each applied between
# its worker's passes).  At 74 ms one slot is free.
LANDING_ROWS = [row(0, 4, 10, [9]), row(1, 32, 3, [1, 2, 3, 4, 5, 6, 7, 8]), row(1, 4, 3, [10])]


# X (4 tokens, 10 output) arrives at 0, A (8 tokens, 3 output) at 1 ms; decode passes take 20 ms.  X is prefilled
# 0-10, its 4 tokens travel 10-14 and it is activated at 14 on the idle decode rank, which decodes it 14-34, ...;
# X's source lets go at 20, the end of A's prefill pass (10-20).  A's 8 tokens travel 20-28, landing while the decode
# pass 14-34 runs: its activation waits for that pass's end, and only then does its (idle) source let go.
# Source-first (vLLM) reserves when the prefill ends (X at 10; A at the decode pass end after its prefill, 34: its
# KV then lands at 42, during 34-54, and is activated at 54); destination-first (SGLang) reserves on arrival.
# AISimulate 0.13 writes these instants on the same config and trace (facts §53).
@pytest.mark.parametrize("backend, reserved, activated, first_token", [
    ("vllm", [10.0, 34.0], [14.0, 54.0], [34.0, 74.0]),
    ("sglang", [0.0, 1.0], [14.0, 34.0], [34.0, 54.0]),
])
def test_a_destination_is_activated_between_decode_passes_and_its_source_lets_go_then(tmp_path, backend, reserved,
                                                                                      activated, first_token):
    """destination_reserved_ms and destination_activated_ms (AISimulate's fields; the spec's table is silent): the
    decode worker activates a landed destination at the landing when idle, else at the end of its pass, and the
    source lets go after the activation, for source-first and destination-first alike."""
    run = replay_pd(tmp_path, [row(0, 4, 10, [9]), row(1, 8, 3, [1, 2])], backend=backend, decode_ms=20)
    assert run.field("destination_reserved_ms") == reserved
    assert run.field("destination_activated_ms") == activated
    assert run.field("source_released_ms") == [20.0, activated[1]]
    assert run.field("decode_admit_ms") == activated
    assert run.field("first_token_ms") == first_token


def test_a_request_that_ends_before_its_source_lets_go_records_the_release(tmp_path):
    """X (4 tokens, 2 out) is prefilled 0-10, its KV lands at 14 and the idle decode rank activates it then, while
    the source runs Y's prefill (12-22): X's source lets go at 22, when that pass ends, but X has ended at 16 (its
    tokens at 15 and 16).  Its requests.jsonl record, written as it ends, still holds source_released_ms 22
    (AISimulate's t21: 111 such requests)."""
    out = predict_scenario(tmp_path, [row(0, 4, 2, [1]), row(12, 4, 2, [2])], config_text(), "pd.yaml",
                           "--capture-per-request")
    records = [orjson.loads(line) for line in (out / "requests.jsonl").read_bytes().splitlines()]
    assert [r["destination_activated_ms"] for r in records] == [14.0, 26.0]
    assert [r["last_token_ms"] for r in records] == [16.0, 28.0]
    assert [r["source_released_ms"] for r in records] == [22.0, 26.0]
    assert [r["source_held_ms"] for r in records] == [10.0, 22.0]


def test_landed_handoffs_are_admitted_before_other_waiting_requests(tmp_path):
    """Host offload (G2): a decode rank admits requests whose handoff has arrived before other waiting ones.

    (LANDING_ROWS.)  Both handoffs are active at 74 ms: one is admitted then, the other only when a slot is
    free again (after the first's 3 decode passes, at 134 ms)."""
    run = replay_pd(tmp_path, LANDING_ROWS, decode_ms=20, decode_sequences=2, prefill_sequences=4, decode_extra=G2)
    assert run.field("source_released_ms") == [20.0, 74.0, 74.0]
    assert sorted(run.field("decode_admit_ms")[1:]) == [74.0, 134.0]


def test_a_decode_rank_reserves_one_handoff_per_trigger(tmp_path):
    """Dynamo's mocker (`retry_pending_destinations_at`): each trigger (a pass completion, a handoff joining an
    idle worker, an activation) tries the head of the reservation queue once, so A and B, queued together at
    20 ms, reserve at 34 and 54 ms (their KV lands at 34 + 32 and 54 + 4)."""
    run = replay_pd(tmp_path, LANDING_ROWS, decode_ms=20, decode_sequences=2, prefill_sequences=4)
    assert run.field("prefill_done_ms") == [10.0, 20.0, 20.0]
    assert run.field("kv_transfer_tokens") == [4, 32, 4]
    assert run.field("source_hold_ms") == [10.0, 54.0, 54.0]  # both held until their activation at 74


def test_landed_handoffs_keep_fcfs_order_among_themselves(tmp_path):
    """Host offload (G2): landed handoffs go first "as vLLM's FCFS scheduler does".  vLLM keeps requests whose KV
    is in flight in their queue order (it re-prepends the skipped ones in order), so among landed handoffs the
    one that entered the decode queue first goes first, whichever transfer ended first.

    (LANDING_ROWS.)  A entered the decode queue before B and landed after it; A is admitted at 74 ms, B when A
    ends at 134 ms."""
    run = replay_pd(tmp_path, LANDING_ROWS, decode_ms=20, decode_sequences=2, prefill_sequences=4, decode_extra=G2)
    assert run.field("decode_admit_ms")[1:] == [74.0, 134.0]


def test_without_g2_a_landed_handoff_joins_the_back_of_the_queue(tmp_path):
    """Without G2 (Dynamo's mocker: an activated destination is pushed to the back of the waiting queue) landed
    handoffs are admitted in the order they landed: B (landed at 58 ms) at 74 ms, A (66 ms) when B ends at 134."""
    run = replay_pd(tmp_path, LANDING_ROWS, decode_ms=20, decode_sequences=2, prefill_sequences=4)
    assert run.field("source_released_ms") == [20.0, 74.0, 74.0]
    assert run.field("decode_admit_ms")[1:] == [134.0, 74.0]


# A and B (8 tokens, 12 output each) and C (4 tokens, 2 output, at 20 ms) on a decode rank of 6 blocks, no G2.
# A lands at 18 ms and samples 19..27; B reserves its 2 blocks at 20 and travels 20-28; A then needs a 4th
# block with none free and, the newest running request, preempts itself at 27, to wait at the queue's head.
QUEUE_ROWS = [row(0, 8, 12, [1, 2]), row(0, 8, 12, [3, 4]), row(20, 4, 2, [5])]


def test_a_decode_rank_queues_landed_handoffs_behind_readmissions_and_reserves_ahead_of_them(tmp_path):
    """Dynamo's mocker (vLLM core): handoffs waiting for their reservation are served before any prompt to compute
    (`PendingDestinationHead`), and a landed handoff joins the back of the waiting queue.

    (QUEUE_ROWS.)  B lands at 28 ms while A's readmission heads the queue and cannot fit; nothing runs, so B goes
    first (else nothing could ever free A's blocks: AISimulate stops there with an invariant error) and samples
    29..40.  C's prefill ends at 30: it reserves its block at once although A waits ahead of it, and lands at 34
    (4 tokens at 1 ms each).  Landed, C waits behind A while B runs; at 40 B ends, A recomputes its 17 tokens in a
    pass with C's activation; on a decode rank a recompute is no prefill work (the mocker), so the pass is one
    decode (40-41) and both sample their next token at 41.  C's second token needs a 2nd block with all 6 held
    (A 5, C 1): C, the newest, is preempted, readmitted when A ends at 43 (its cached block reused) and samples
    it at 44."""
    run = replay_pd(tmp_path, QUEUE_ROWS, decode_blocks=6)
    assert run.field("decode_admit_ms") == [18.0, 28.0, 40.0]
    assert run.field("source_released_ms") == [20.0, 30.0, 34.0]  # B's at the end of C's prefill pass
    assert run.tokens(1) == [29.0 + k for k in range(12)]
    assert run.tokens(0) == [19.0 + k for k in range(9)] + [41.0, 42.0, 43.0]
    assert run.tokens(2) == [41.0, 44.0]
    assert [h["at_ms"] for h in run[2]["admission_history"]] == [20.0, 40.0, 43.0]
    assert [h["at_ms"] for h in run[0]["admission_history"]] == [0.0, 18.0, 40.0]  # prefill, activation, readmission


# ============================================================================================ auto bytes_per_token

AUTO_CONFIG = """
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  kv_transfer: {bandwidth_gb_per_second: 1.0}
  workers:
    prefill:
      parallelism: {tensor: PREFILL_TP}
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      kv_cache: {block_size: 4, capacity: {type: fixed, blocks: 512}}
    decode:
      parallelism: {tensor: 4}
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      kv_cache: {block_size: 4, capacity: {type: fixed, blocks: 512}}
traffic:
  source: {type: synthetic, input_tokens: 1000, output_tokens: 2}
  load: {type: concurrency, concurrency: 1}
  stop: {requests: 1}
"""


@pytest.mark.parametrize("tensor, pipeline, shard_bytes", [(1, 1, QWEN3_8B_KV_PER_TOKEN),
                                                            (2, 1, QWEN3_8B_KV_PER_TOKEN // 2),
                                                            (2, 2, QWEN3_8B_KV_PER_TOKEN // 2),
                                                            (2, 4, QWEN3_8B_KV_PER_TOKEN // 2)])
def test_auto_bytes_per_token_from_kvreplay_compile(tmp_path, capsys, tensor, pipeline, shard_bytes):
    """`kv_transfer.bytes_per_token: auto`: one token's KV on one of the prefill role's TP shards.  Qwen3-8B is
    36 layers x 8 KV heads x 128 x (K, V) x 2 B = 147,456 B at TP1; at TP2 each shard holds half
    (kv_cache.bytes_per_token 73,728) and each prefill GPU sends its half over its own link at once, so the plan's
    rate is 73,728 B (AISimulate's s21: 6.04 ms for 4,096 tokens at 50 GB/s from TP2; facts §46).  The decode
    role's TP (4) does not enter, nor the prefill's PP: AISimulate takes 6.04 ms for 4,096 tokens from TP2 at PP 1,
    2 and 4 alike (full_prompt, 50 GB/s; facts §53), so a stage's layers are not a smaller transfer.  The replay uses the plan's value: 1000 tokens over 1 GB/s take 147.456 ms at
    TP1 and 73.728 ms at TP2, between the prefill pass (10 ms) and the decode pass (1 ms) that samples the first
    token."""
    path = tmp_path / "auto.yaml"
    path.write_text(AUTO_CONFIG.replace("PREFILL_TP", f"{tensor}, pipeline: {pipeline}"))
    assert main(["compile", str(path), "-o", str(tmp_path / "plan.json")]) == 0
    plan = orjson.loads((tmp_path / "plan.json").read_bytes())
    transfer = plan["engine"]["kv_transfer"]
    assert transfer == {"bandwidth_gb_per_second": 1.0, "bytes_per_token": shard_bytes,
                        "timing_mode": "destination_missing"}
    assert plan["engine"]["workers"]["prefill"]["kv_cache"]["bytes_per_token"] == shard_bytes
    assert plan["provenance"]["/engine/kv_transfer/bytes_per_token"].startswith("inferred(")
    assert f"on one of {tensor} TP shard(s)" in plan["provenance"]["/engine/kv_transfer/bytes_per_token"]
    replay = build(finish_plan(plan, tmp_path))
    assert replay.handoff.bytes_per_token == transfer["bytes_per_token"]
    replay.run()
    (record,) = with_hold([request_record(r) for r in replay.requests])
    transfer_ns = 1000 * shard_bytes  # bytes at 1 byte/ns
    assert (record["kv_transfer_tokens"], record["source_hold_ms"]) == (1000, transfer_ns / MS)
    assert (record["ttft_ms"], record["ttst_ms"]) == ((10 * MS + transfer_ns + MS) / MS, 1.0)
    capsys.readouterr()


# ============================================================================================ G2 on a P/D role

G2 = ", host_offload: {num_host_blocks: 16, d2h_bandwidth_gbps: 1.0, h2d_bandwidth_gbps: 1.0}"


def test_g2_on_the_prefill_role(tmp_path):
    """Host offload (G2) supports token-only disaggregated workers.  G2 on the prefill role (1 MB blocks, 1 GB/s:
    1 ms per block), prefill G1 5 blocks.

    A (1, 2) stores its 2 prompt blocks; B (3, 4, 5, 6 + a partial block) stores 4 and evicts A's blocks from
    G1; C (1, 2 + a partial block) arrives at 80 ms, restores 1, 2 from G2 (2 ms) and prefills 82-92 ms
    (done at 92).  The decode side is unaffected: C's whole prompt travels (full_prompt: its 9 tokens, 9 ms), and
    its first token comes one decode pass after it lands (TTFT 92 + 9 + 1 - 80 = 22)."""
    rows = [row(0, 8, 2, [1, 2]), row(20, 19, 2, [3, 4, 5, 6, 7]), row(80, 9, 2, [1, 2, 8])]
    run = replay_pd(tmp_path, rows, prefill_blocks=5, prefill_extra=G2)
    assert run.field("terminal_status") == ["completed"] * 3
    c = run[2]
    assert (c["first_admission_g1_reused_input_tokens"], c["first_admission_host_reused_input_tokens"]) == (0, 8)
    assert (c["prefill_admit_ms"], c["ttft_ms"], c["source_hold_ms"], c["ttst_ms"]) == (82.0, 22.0, 9.0, 1.0)
    (domain,) = domain_summaries(run.replay)
    assert domain == {"name": "g2.prefill.worker0.dp0", "scope": "dp_rank_local", "capacity_blocks": 16,
                      "block_bytes": 1_000_000, "resident_blocks": 6, "stores": 6, "restores": 2, "evictions": 0,
                      "dropped_stores": 0, "d2h_bytes": 6_000_000, "h2d_bytes": 2_000_000,
                      "d2h_bandwidth_wait_ms": 0.0, "h2d_bandwidth_wait_ms": 0.0, "connector": "offloading_v0_24"}


def test_g2_on_the_prefill_role_a_block_freed_by_the_handoff_is_still_copied(tmp_path):
    """How G2 behaves: "G1 blocks that are still being copied to G2 are not overwritten", when the handoff frees
    them.  Prefill G1 3 blocks, G2 d2h 0.1 GB/s (10 ms per 1 MB block).  A (1, 2) prefills 0-10 ms; its 2-block
    store runs 10-30 ms, while its 8-token handoff lands at 18 ms and frees both source blocks.  B (3, 4) arrives
    at 20 ms and is given the never-used block and A's last block, still being copied: its prefill pass waits
    for the copy (30-40 ms instead of 20-30): its first token, after the 8 ms transfer and a decode pass, comes at
    49 ms (A's at 19)."""
    slow_store = ", host_offload: {num_host_blocks: 16, d2h_bandwidth_gbps: 0.1, h2d_bandwidth_gbps: 1.0}"
    run = replay_pd(tmp_path, [row(0, 8, 2, [1, 2]), row(20, 8, 2, [3, 4])], prefill_blocks=3,
                    prefill_extra=slow_store)
    assert [run.pd(i)["source_hold_ms"] for i in (0, 1)] == [8.0, 8.0]
    assert run.field("prefill_admit_ms") == [0.0, 20.0]
    assert run.field("first_token_ms") == [19.0, 49.0]


def test_g2_on_the_decode_role(tmp_path):
    """G2 on the decode role (PREEMPT_ROWS: R1 is preempted on the 8-block decode rank and readmitted at 38 ms).

    G2 stores prompt blocks as the rank computes them.  The decode rank computes no prompt block of a handoff
    (the KV arrives over the transfer), so nothing is stored until R1's readmission recomputes its prompt: it
    reuses its first block from G1 and recomputes the second (38-39 ms, a decode pass on a decode rank).  Having loaded nothing, it offers its
    blocks from block 0 (vLLM's OffloadingConnector), so both are stored (2 MB): the domain then holds exactly
    those two blocks."""
    run = replay_pd(tmp_path, PREEMPT_ROWS, decode_blocks=8, prefill_sequences=2, decode_extra=G2)
    assert run.field("terminal_status") == ["completed", "completed"]
    assert run.field("readmission_count") == [0, 1]
    assert run.field("last_token_ms") == [38.0, 49.0]
    (domain,) = domain_summaries(run.replay)
    assert domain == {"name": "g2.decode.worker0.dp0", "scope": "dp_rank_local", "capacity_blocks": 16,
                      "block_bytes": 1_000_000, "resident_blocks": 2, "stores": 2, "restores": 0, "evictions": 0,
                      "dropped_stores": 0, "d2h_bytes": 2_000_000, "h2d_bytes": 0,
                      "d2h_bandwidth_wait_ms": 0.0, "h2d_bandwidth_wait_ms": 0.0, "connector": "offloading_v0_24"}


# ============================================================================================ native ReplaySpec

def _replayspec(backend: str) -> dict:
    role = {"parallelism": {"attention_data": 2}, "timing": {"type": "fixed", "prefill_ms": 10, "decode_ms": 1},
            "kv_cache": {"block_size": 4, "bytes_per_token": 250_000, "capacity": {"type": "fixed", "blocks": 64}}}
    return {
        "version": 1,
        "topology": {"kind": "disaggregated", "prefill": {"initial_workers": 1}, "decode": {"initial_workers": 1},
                     "handoff_latency_ms": 0.5},
        "engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm", "backend": backend,
                   "kv_transfer": {"bandwidth_gb_per_second": 0.25, "bytes_per_token": 250_000,
                                   "timing_mode": "full_prompt"},
                   "workers": {"prefill": role, "decode": role}},
        "record_per_request": True,
        "requests": [
            {"id": "a", "arrival_time_ms": 0, "input_tokens": 8, "output_tokens": 3, "prefill_dp_rank": 1,
             "dp_rank": 1},
            {"id": "b", "arrival_time_ms": 0, "input_tokens": 8, "output_tokens": 3, "prefill_dp_rank": 1,
             "dp_rank": 0},
        ],
    }


def _replay_spec(tmp_path: Path, capsys, backend: str) -> list[dict]:
    path = tmp_path / f"{backend}.json"
    path.write_text(json.dumps(_replayspec(backend)))
    out = tmp_path / f"out-{backend}"
    assert main(["replay", str(path), "--no-progress", "--output-dir", str(out), "--format", "json"]) == 0
    capsys.readouterr()
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]


def test_replayspec_handoff_latency_adds_to_every_transfer(tmp_path, capsys):
    """Native ReplaySpec `topology.handoff_latency_ms`: a fixed delay added to the transfer time.

    Both requests are pinned to prefill DP rank 1 (one prefill worker, attention_data 2), so they prefill one
    after the other (0-10 and 10-20 ms).  A's 8 tokens take 8 ms + 0.5 ms: it lands at 18.5 ms and samples at
    19.5, 20.5, 21.5 ms; its source is let go at the end of B's prefill pass (20 ms).  B's decode rank reserves
    at the decode worker's next pass start (20.5 ms), B lands at 29 ms and samples its first token at 30 ms."""
    a, b = with_hold(list(_replay_spec(tmp_path, capsys, "vllm")))
    assert (a["prefill_done_ms"], a["source_hold_ms"], a["decode_admit_ms"], a["ttft_ms"]) == (10.0, 10.0, 18.5, 19.5)
    assert (b["prefill_admit_ms"], b["first_token_ms"]) == (10.0, 30.0)


def test_replayspec_prefill_dp_rank_is_honoured_with_destination_first(tmp_path, capsys):
    """REFERENCE "Native ReplaySpec v1": requests may pin `prefill_dp_rank`.  Source-first honours it (test
    above: both on prefill rank 1, one after the other); destination-first (SGLang) must too: both prefill on the
    same pinned rank, one at 0-10 ms and the other at 10-20 ms, instead of b running on rank 0 alongside a."""
    source_first = _replay_spec(tmp_path, capsys, "vllm")
    destination_first = _replay_spec(tmp_path, capsys, "sglang")
    assert [r["prefill_dp_rank"] for r in source_first] == [1, 1]  # global rank index: DP rank 1 of worker 0
    assert [r["prefill_dp_rank"] for r in destination_first] == [1, 1]
    assert sorted(r["prefill_admit_ms"] for r in destination_first) == [0.0, 10.0]


# ============================================================================================ determinism

DETERMINISM_CONFIG = """
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  kv_transfer: {bandwidth_gb_per_second: 0.25, bytes_per_token: 250000, timing_mode: destination_missing}
  workers:
    prefill:
      parallelism: {replicas: 2}
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      scheduler: {max_batched_tokens: 64, max_sequences: 2}
      kv_cache: {block_size: 4, bytes_per_token: 250000, capacity: {type: fixed, blocks: 48}}
    decode:
      parallelism: {attention_data: 2}
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      scheduler: {max_batched_tokens: 64, max_sequences: 8}
      kv_cache: {block_size: 4, bytes_per_token: 250000, capacity: {type: fixed, blocks: 64}}
traffic:
  source:
    type: synthetic-session
    new_input_tokens_per_turn: 24
    output_tokens_per_turn: 30
    session: {turns: 3, shared_prefix_ratio: 0.5, prefix_groups: 2, inter_turn_delay_ms: 5}
  load: {type: poisson, sessions_per_second: 100}
  stop: {sessions: 20}
"""


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_pd_outputs_are_byte_identical_across_runs_and_with_single_step(tmp_path, capsys, monkeypatch, backend):
    """Determinism: a P/D config (two prefill workers, a decode worker with 2 DP ranks, shared prefixes, decode
    preemptions) gives byte-identical prediction.json and requests.jsonl in two runs and with --single-step.
    The macro run really fuses decode passes (otherwise the comparison would prove nothing)."""
    path = tmp_path / "pd.yaml"
    path.write_text(DETERMINISM_CONFIG)
    fused = []
    planner = sglang_macro if backend == "sglang" else macro_module  # (each engine fuses by its own planner)
    original = planner.plan

    def counting(*args):
        result = original(*args)
        fused.append(result is not None)
        return result

    monkeypatch.setattr(planner, "plan", counting)

    def predict(name: str, *flags: str) -> dict[str, bytes]:
        out = tmp_path / name
        code = main(["predict", "--no-progress", "-c", str(path), "--output-dir", str(out), "--format", "json",
                     "--capture-per-request", "--set", f"engine.backend={backend}", *flags])
        assert code == 0
        capsys.readouterr()
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}

    first = predict("a")
    assert any(fused), "no macro step happened"
    again = predict("b")
    single = predict("c", "--single-step")
    assert set(first) == {"prediction.json", "requests.jsonl"}
    assert first == again == single
    summary = orjson.loads(first["prediction.json"])
    assert (summary["num_requests"], summary["completed_requests"]) == (60, 60)
    records = [orjson.loads(line) for line in first["requests.jsonl"].splitlines()]
    assert {r["prefill_worker_idx"] for r in records} == {0, 1}
    assert all(r["decode_worker_idx"] == 2 for r in records)
    assert sum(r["decode_cached_input_tokens"] for r in records) > 0


PREFILL_TOO_SMALL = """engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  kv_transfer: {bandwidth_gb_per_second: 25.0, timing_mode: destination_missing}
  workers:
    prefill:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache: {block_size: 512, capacity: {type: fixed, blocks: 10}}
    decode:
      timing: {type: fixed, prefill_ms: 50.0, decode_ms: 10.0}
      kv_cache: {block_size: 512, capacity: {type: fixed, blocks: 30}}
traffic:
  source: {type: trace, paths: [trace.jsonl], format: mooncake, block_size: 512}
  load: {type: trace_timestamps}
"""


def test_a_prompt_the_prefill_pool_cannot_hold_is_rejected_when_admission_reaches_it(tmp_path):
    """As AISimulate's mocker on the same file (facts §37): a 9,000-token prompt (18 blocks of 512) arriving at 5 ms
    into a 10-block prefill pool waits behind the first request's prefill (0-50 ms); the pass from 50 ms reaches it
    and admits the request behind it, so it is rejected when that pass ends (100 ms); the request behind it gets its
    first token at 126.04 ms, AISimulate's 126.03979776 (it was rejected on arrival at 5 ms before)."""
    rows = [{"timestamp": 0, "input_length": 1000, "output_length": 20, "hash_ids": [1, 2]},
            {"timestamp": 5, "input_length": 9000, "output_length": 10, "hash_ids": list(range(3, 21))},
            {"timestamp": 10, "input_length": 1000, "output_length": 20, "hash_ids": [21, 22]}]
    out = predict_scenario(tmp_path, rows, PREFILL_TOO_SMALL, "pd.yaml", "--capture-per-request")
    summary, records = read_outputs(out)
    assert [(r["terminal_status"], r["terminal_time_ms"], r["first_token_ms"]) for r in records] == [
        ("completed", 256.039798, 66.039798), ("rejected", 100.0, None), ("completed", 316.039798, 126.039798)]
    assert "prefill.worker0.dp0 holds 10" in records[1]["terminal_reason"]
    assert summary["completed_requests"] == 2
