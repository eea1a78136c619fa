"""Replay: golden outputs of the examples, byte stability, real-trace reuse, hand-computed summaries.

Every example that the runtime can replay has two golden files in golden/replays/:
``<example>.prediction.json`` (prediction.json) and ``<example>.requests.json``
(requests.jsonl as a list).  Regenerate them with
``python -m pytest tests/test_replay.py --snapshot-update`` and review the diff like code.
Examples the runtime cannot replay yet are checked in tests/test_predict_cli.py.

Most runs go through the CLI in-process (``kvreplay.cli.main``); the byte-stability
tests also run it in subprocesses under fixed PYTHONHASHSEED values.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file
from kvreplay.examples.trace_config import mooncake_trace_config

from .golden import golden_extension
from .support import EXAMPLES, ROOT, output_bytes, read_outputs, shared_trace

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))

# Stop overrides for the golden runs: fewer requests keep the golden files reviewable and
# the runs short (sglang-default-capacity makes 640 requests, trtllm-fixed-timing 500).
GOLDEN_OVERRIDES = {
    "g1-default-capacity": ["traffic.stop.requests=100"],
    "sglang-default-capacity": ["traffic.stop.requests_per_load_unit=2"],
    "trtllm-fixed-timing": ["traffic.stop.requests=100"],
}
PREEMPTING_MOONCAKE = ["engine.workers.aggregated.kv_cache.capacity.blocks=700"]


def predict(config, out_dir, *extra, overrides=()) -> tuple[int, str, str]:
    """`kvreplay predict` in this process; returns (exit code, stdout, stderr)."""
    argv = ["predict", "-c", str(config), "--output-dir", str(out_dir), "--no-progress"]
    for override in overrides:
        argv += ["--set", override]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv + list(extra))
    return code, out.getvalue(), err.getvalue()


def replay(config, out_dir, *extra, overrides=()) -> tuple[dict, list[dict]]:
    """Run with --capture-per-request; (summary, per-request records)."""
    code, _, err = predict(config, out_dir, "--capture-per-request", *extra, overrides=overrides)
    assert code == 0, err
    return read_outputs(out_dir)


def write_config(tmp_path, traffic: str, *, kv: str = "block_size: 16, capacity: {type: fixed, blocks: 1000}",
                 timing: str = "{type: fixed, prefill_ms: 10.0, decode_ms: 2.0}", scheduler: str = "{}",
                 name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  workers:
    aggregated:
      scheduler: {scheduler}
      timing: {timing}
      kv_cache: {{{kv}}}
traffic:
{traffic}""")
    return path


# ---------------------------------------------------------------------------------------------- goldens

@pytest.fixture
def golden_replays(snapshot):
    return snapshot.use_extension(golden_extension("replays"))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_replay_is_golden(path, tmp_path, golden_replays):
    summary, records = replay(path, tmp_path, overrides=GOLDEN_OVERRIDES.get(path.stem, ()))
    prediction = orjson.loads((tmp_path / "prediction.json").read_bytes())
    assert summary["num_requests"] == len(records) > 0
    assert summary["completed_requests"] > 0
    assert prediction == golden_replays(name=f"{path.stem}.prediction")
    assert records == golden_replays(name=f"{path.stem}.requests")


# ---------------------------------------------------------------------------------------------- byte stability

def _cli_subprocess(config: Path, out_dir: Path, seed: str, *extra) -> tuple[bytes, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    argv = [sys.executable, "-m", "kvreplay", "predict", "-c", str(config), "--output-dir", str(out_dir),
            "--capture-per-request", "--no-progress", *extra]
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    return output_bytes(out_dir)


STABILITY_CASES = {
    # preemptions (and rejections) on a real trace slice, fixed timing, trace timestamps
    "mooncake-preempting": (EXAMPLES / "mooncake-trace.yaml", PREEMPTING_MOONCAKE),
    # default (roofline) timing with poisson load over two replicas
    "g1-default-roofline-poisson": (EXAMPLES / "g1-default-capacity.yaml", ["traffic.stop.requests=100"]),
    # fixed timing, seeded poisson load
    "trtllm-poisson": (EXAMPLES / "trtllm-fixed-timing.yaml", ["traffic.stop.requests=100"]),
    # roofline, closed-loop multi-turn sessions with prefix reuse and a state cache
    "kimi-sessions": (EXAMPLES / "kimi-k3-state-cache.yaml", []),
    # G2 shared by four DP ranks: stores and restores over shared-bandwidth links, session reuse
    "g2-cluster-shared": (EXAMPLES / "g2-cluster-shared.yaml", []),
    # soft cutoff: requests in flight at the stop end incomplete
    "mooncake-cutoff": (EXAMPLES / "mooncake-trace.yaml", ["traffic.stop.max_virtual_time_seconds=20"]),
}


@pytest.mark.parametrize("case", sorted(STABILITY_CASES))
def test_outputs_are_byte_identical_across_runs_hash_seeds_and_stepping(case, tmp_path):
    config, overrides = STABILITY_CASES[case]
    sets = [arg for o in overrides for arg in ("--set", o)]
    runs = {
        "seed0": _cli_subprocess(config, tmp_path / "seed0", "0", *sets),
        "seed123": _cli_subprocess(config, tmp_path / "seed123", "123", *sets),
        "seed123-single-step": _cli_subprocess(config, tmp_path / "single", "123", "--single-step", *sets),
    }
    code, _, err = predict(config, tmp_path / "inproc", "--capture-per-request", overrides=overrides)
    assert code == 0, err
    runs["in-process"] = output_bytes(tmp_path / "inproc")
    reference = runs["seed0"]
    for name, outputs in runs.items():
        assert outputs[0] == reference[0], f"prediction.json of {name} differs from seed0"
        assert outputs[1] == reference[1], f"requests.jsonl of {name} differs from seed0"


def test_the_stability_cases_exercise_what_they_claim(tmp_path):
    summary, records = replay(EXAMPLES / "mooncake-trace.yaml", tmp_path / "pre", overrides=PREEMPTING_MOONCAKE)
    assert summary["preemptions"] > 0
    assert any(r["readmission_count"] > 0 for r in records)
    summary, cut = replay(EXAMPLES / "mooncake-trace.yaml", tmp_path / "cut",
                          overrides=["traffic.stop.max_virtual_time_seconds=20"])
    assert summary["incomplete_requests"] > 0
    # a cut-off run lasts until its last completion, and keeps no record of a request still in flight (AISimulate)
    assert summary["duration_ms"] == max(r["terminal_time_ms"] for r in cut if r["terminal_status"] == "completed")
    assert 19_000.0 < summary["duration_ms"] < 20_000.0
    assert len(cut) == summary["num_requests"] - summary["incomplete_requests"]
    assert summary["total_input_tokens"] == sum(r["input_length"] for r in cut if r["admission_count"])
    # 10 sessions on 4 ranks: round robin moves a session's turns between ranks (with 16, a multiple of 4, every
    # session keeps its rank, as in AISimulate, and finds its prefix in its own G1: nothing to restore)
    summary, _ = replay(EXAMPLES / "g2-cluster-shared.yaml", tmp_path / "g2", overrides=["traffic.load.concurrency=10"])
    (domain,) = summary["g2_domains"]
    assert domain["scope"] == "cluster_shared" and domain["stores"] > 0 and domain["restores"] > 0
    assert summary["first_admission_host_reused_tokens"] > 0
    plan = compile_file(EXAMPLES / "g1-default-capacity.yaml").plan.to_dict()
    role = plan["engine"]["workers"]["aggregated"]
    assert role.get("timing", {"type": "default"})["type"] == "default"
    assert plan["traffic"]["load"]["type"] == "poisson"


@pytest.mark.parametrize("connector", [None, "offloading_v0_24", "offloading_v0_32", "simple_cpu_v0_32"])
def test_macro_and_single_step_agree_under_heavy_preemption(connector, tmp_path):
    """A synthetic closed loop on a tiny G1: many preemptions, session turns reusing their history;
    optionally a small, slow G2 (simple_cpu_v0_32 also stores decode blocks)."""
    traffic = ("  source: {type: synthetic-session, new_input_tokens_per_turn: 100, output_tokens_per_turn: 30,\n"
               "           session: {turns: 3, shared_prefix_ratio: 0.5, prefix_groups: 2}}\n"
               "  load: {type: concurrency, concurrency: 5}\n  stop: {sessions: 8}\n")
    kv = "block_size: 16, capacity: {type: fixed, blocks: 40}"
    if connector:
        kv += (f", host_offload: {{num_host_blocks: 48, d2h_bandwidth_gbps: 1.0, h2d_bandwidth_gbps: 4.0, "
               f"connector: {connector}}}")
    config = write_config(tmp_path, traffic, kv=kv)
    macro, _ = replay(config, tmp_path / "macro")
    macro_bytes = output_bytes(tmp_path / "macro")
    replay(config, tmp_path / "single", "--single-step")
    assert output_bytes(tmp_path / "single") == macro_bytes
    assert macro["num_requests"] == 24
    if connector:
        assert macro["g2_domains"][0]["connector"] == connector and macro["g2_domains"][0]["stores"] > 0
    else:
        assert macro["preemptions"] > 0 and macro["completed_requests"] == 24


G2_STALLS = {
    # the heavy-preemption closed loop above with simple_cpu_v0_32: request 22 (preempted, 385 tokens = 25
    # blocks) heads the waiting queue while request 23 behind it holds 16 restored blocks; 24 of 40 are free
    "simple_cpu_v0_32": ("  source: {type: synthetic-session, new_input_tokens_per_turn: 100, output_tokens_per_turn: 30,\n"
                         "           session: {turns: 3, shared_prefix_ratio: 0.5, prefix_groups: 2}}\n"
                         "  load: {type: concurrency, concurrency: 5}\n  stop: {sessions: 8}\n",
                         "block_size: 16, capacity: {type: fixed, blocks: 40}, host_offload: {num_host_blocks: 48, "
                         "d2h_bandwidth_gbps: 1.0, h2d_bandwidth_gbps: 4.0, connector: simple_cpu_v0_32}", "{}"),
    # four waiting requests behind the head hold 4 restored blocks each; the 10-block head never fits a
    # 12-block G1
    "offloading_v0_32": ("  source: {type: synthetic-session, new_input_tokens_per_turn: 151, output_tokens_per_turn: 16,\n"
                         "           session: {turns: 4, inter_turn_delay_ms: 33.3, shared_prefix_ratio: 0.5, "
                         "prefix_groups: 2}}\n"
                         "  load: {type: concurrency, concurrency: 5}\n  stop: {sessions: 5}\n",
                         "block_size: 32, capacity: {type: fixed, blocks: 12}, host_offload: {num_host_blocks: 64, "
                         "d2h_bandwidth_gbps: 1.0, h2d_bandwidth_gbps: 32.0, connector: offloading_v0_32}",
                         "{max_batched_tokens: 256, max_sequences: 1}"),
}


@pytest.mark.parametrize("connector", sorted(G2_STALLS))
def test_g2_restores_never_stall_the_run(connector, tmp_path):
    traffic, kv, scheduler = G2_STALLS[connector]
    config = write_config(tmp_path, traffic, kv=kv, scheduler=scheduler)
    summary, records = replay(config, tmp_path / "out")
    # no stop time: every request that arrived must end completed or rejected, never stuck
    assert summary["incomplete_requests"] == 0, [r["index"] for r in records if r["terminal_status"] == "incomplete"]
    assert summary["completed_requests"] + summary["rejected_requests"] == summary["num_requests"]


# ---------------------------------------------------------------------------------------------- real traces

QWEN3_8B_CONTEXT = 40_960  # the catalog model's max_position_embeddings: `context_length: max`


# the ratios equal AISimulate's to every digit on the same configs (facts §12)
@pytest.mark.parametrize("trace, ratio", [("conversation_trace.jsonl", 0.3785), ("synthetic_trace.jsonl", 0.6073)])
def test_unbounded_g1_reuse_on_the_real_traces(trace, ratio, tmp_path):
    path = shared_trace(trace)
    config = tmp_path / "real.yaml"
    config.write_text(mooncake_trace_config(path, block_size=512, g1_blocks=100_000_000))
    code, _, err = predict(config, tmp_path / "out")
    assert code == 0, err
    summary = orjson.loads((tmp_path / "out" / "prediction.json").read_bytes())
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    too_long = sum(1 for row in rows if row["input_length"] > QWEN3_8B_CONTEXT)
    assert too_long > 0
    assert summary["num_requests"] == len(rows)
    # only prompts longer than the model's context are rejected; a longer output is cut at the context
    assert summary["rejected_requests"] == too_long and summary["completed_requests"] == len(rows) - too_long
    assert summary["total_output_tokens"] == sum(
        min(row["output_length"], max(1, QWEN3_8B_CONTEXT - row["input_length"]))
        for row in rows if row["input_length"] <= QWEN3_8B_CONTEXT)
    assert summary["preemptions"] == 0
    assert round(summary["prefix_cache_reused_ratio"], 4) == ratio
    # nothing is ever evicted or preempted, so every reuse happens at the first admission
    assert round(summary["first_admission_prefix_cache_reused_ratio"], 4) == ratio


# ---------------------------------------------------------------------------------------------- hand-computed

def _traffic(source: str, load: str, stop: str) -> str:
    return f"  source: {source}\n  load: {load}\n  stop: {stop}\n"


def test_one_request_by_hand(tmp_path):
    """input 128, output 5, prefill 10 ms, decode 2 ms: tokens at 10, 12, 14, 16, 18 ms."""
    config = write_config(tmp_path, _traffic("{type: synthetic, input_tokens: 128, output_tokens: 5}",
                                             "{type: concurrency, concurrency: 1}", "{requests: 1}"))
    summary, (record,) = replay(config, tmp_path / "out")
    assert summary["num_requests"] == summary["completed_requests"] == 1
    for name, value in (("ttft", 10.0), ("tpot", 2.0), ("e2e_latency", 18.0), ("ttst", 2.0), ("itl", 2.0)):
        for stat in ("mean", "min", "max", "median", "p75", "p90", "p95", "p99"):
            assert summary[f"{stat}_{name}_ms"] == value, (stat, name)
        assert summary[f"std_{name}_ms"] == 0.0
    assert summary["num_itl_samples"] == 4
    assert summary["num_ttft_samples"] == summary["num_tpot_samples"] == summary["num_ttst_samples"] == 1
    assert summary["num_e2e_latency_samples"] == 1
    assert summary["duration_ms"] == 18.0
    assert summary["total_input_tokens"] == summary["committed_prefill_tokens"] == 128
    assert summary["total_output_tokens"] == 5
    assert summary["request_throughput_rps"] == pytest.approx(1 / 0.018)
    assert summary["output_throughput_tok_s"] == pytest.approx(5 / 0.018)
    assert summary["total_throughput_tok_s"] == pytest.approx(133 / 0.018)
    assert summary["prefix_cache_reused_ratio"] == summary["first_admission_prefix_cache_reused_ratio"] == 0.0
    assert summary["preemptions"] == summary["rejected_requests"] == summary["incomplete_requests"] == 0
    assert summary["kv_eviction_policy"] == "lru"
    assert (record["arrival_time_ms"], record["first_admit_ms"], record["first_token_ms"],
            record["last_token_ms"], record["terminal_time_ms"]) == (0.0, 0.0, 10.0, 18.0, 18.0)
    assert (record["ttft_ms"], record["ttst_ms"], record["itl_ms"], record["e2e_latency_ms"]) == (10.0, 2.0, 2.0, 18.0)
    assert (record["input_length"], record["requested_output_length"], record["output_length"]) == (128, 5, 5)
    assert record["terminal_status"] == "completed" and record["admission_count"] == 1


def test_two_concurrent_requests_share_their_cached_prefix(tmp_path):
    """Both arrive at 0 and are admitted in one pass; the second reuses the 512 shared tokens
    (32 blocks of 16) that the first one's scheduling just made discoverable."""
    config = write_config(tmp_path, _traffic(
        "{type: synthetic, input_tokens: 1024, output_tokens: 4, cached_prefix_tokens: 512}",
        "{type: concurrency, concurrency: 2}", "{requests: 2}"))
    summary, records = replay(config, tmp_path / "out")
    assert [r["first_admission_reused_input_tokens"] for r in records] == [0, 512]
    assert [r["reused_input_tokens"] for r in records] == [0, 512]
    assert summary["total_input_tokens"] == 2048
    assert summary["committed_prefill_tokens"] == 1024 + 512
    assert summary["prefix_cache_reused_ratio"] == 1 - 1536 / 2048 == 0.25
    assert summary["first_admission_prefix_cache_reused_ratio"] == 512 / 2048
    # one prefill pass (10 ms) for both, then 3 decode passes
    assert summary["mean_ttft_ms"] == 10.0 and summary["mean_e2e_latency_ms"] == 16.0
    assert summary["num_itl_samples"] == 6 and summary["duration_ms"] == 16.0


@pytest.mark.parametrize("cached, reused", [(520, 512), (512, 496)])
def test_only_full_blocks_are_reused_and_never_the_last_prompt_token(cached, reused, tmp_path):
    """cached 520 of 1024: the partial 33rd block is not reused (512).  A prompt that is all shared
    prefix (512 of 512) reuses at most 511 tokens, rounded down to full blocks: 496."""
    total = 1024 if cached == 520 else 512
    config = write_config(tmp_path, _traffic(
        f"{{type: synthetic, input_tokens: {total}, output_tokens: 4, cached_prefix_tokens: {cached}}}",
        "{type: concurrency, concurrency: 2}", "{requests: 2}"))
    summary, records = replay(config, tmp_path / "out")
    assert [r["first_admission_reused_input_tokens"] for r in records] == [0, reused]
    assert summary["committed_prefill_tokens"] == 2 * total - reused
    assert summary["prefix_cache_reused_ratio"] == pytest.approx(reused / (2 * total))


def test_percentiles_and_std_by_hand(tmp_path):
    """max_sequences 1 serialises three requests: TTFT 10/28/46 ms, E2E 18/36/54 ms."""
    config = write_config(tmp_path, _traffic("{type: synthetic, input_tokens: 128, output_tokens: 5}",
                                             "{type: concurrency, concurrency: 3}", "{requests: 3}"),
                          scheduler="{max_sequences: 1}")
    summary, records = replay(config, tmp_path / "out")
    assert [r["ttft_ms"] for r in records] == [10.0, 28.0, 46.0]
    assert [r["first_admit_ms"] for r in records] == [0.0, 18.0, 36.0]
    assert [r["e2e_latency_ms"] for r in records] == [18.0, 36.0, 54.0]
    for name, low in (("ttft", 10.0), ("e2e_latency", 18.0)):
        # linear interpolation between order statistics over 3 samples 18 ms apart
        expected = {"min": low, "median": low + 18, "max": low + 36, "mean": low + 18, "p75": low + 27,
                    "p90": low + 32.4, "p95": low + 34.2, "p99": low + 35.64}
        for stat, value in expected.items():
            assert summary[f"{stat}_{name}_ms"] == pytest.approx(value, abs=1e-9), (stat, name)
        assert summary[f"std_{name}_ms"] == pytest.approx(math.sqrt(216))  # population std
    assert summary["num_itl_samples"] == 12 and summary["std_itl_ms"] == 0.0
    assert summary["duration_ms"] == 54.0
    assert summary["request_throughput_rps"] == pytest.approx(3 / 0.054)


def test_preemption_and_readmission_by_hand(tmp_path):
    """G1 of 10 blocks of 16 tokens, two requests of 64 + 40 tokens (7 blocks each at the end).

    Both prefill at 0-10 ms (4 blocks each) and decode in lockstep, taking their 5th blocks at 65 tokens.
    At 81 tokens (pass starting at 42 ms) request 0 needs a 6th block and none is free: the newest
    running request (1) is preempted; its blocks go to the free queue tail first, so request 0's new block
    evicts request 1's 5th block.  Request 1 (81 tokens, 4 cached blocks) cannot come back while request 0
    runs (2 more blocks needed, 0 left once its 4 cached blocks are taken back); request 0 takes its 7th
    block at 97 tokens, evicting request 1's 4th block, and finishes at 10 + 39 * 2 = 88 ms.  Request 1 is
    readmitted at 88 ms with 48 tokens reused, recomputes 33 tokens and samples its 18th token in that pass,
    which is therefore a prefill and a decode (10 + 2 ms: at 100 ms), and decodes 22 more tokens: 144 ms.
    AISimulate on the same config: 88 and 144 ms, max ITL 58 ms, mean TPOT 2.71795 (facts §43).
    """
    config = write_config(tmp_path, _traffic("{type: synthetic, input_tokens: 64, output_tokens: 40}",
                                             "{type: concurrency, concurrency: 2}", "{requests: 2}"),
                          kv="block_size: 16, capacity: {type: fixed, blocks: 10}")
    summary, (first, second) = replay(config, tmp_path / "out")
    assert summary["preemptions"] == 1 and summary["completed_requests"] == 2
    assert first["admission_count"] == 1 and first["e2e_latency_ms"] == 88.0
    assert second["admission_count"] == 2 and second["readmission_count"] == 1
    assert [(a["at_ms"], a["reused_input_tokens"], a["is_readmission"]) for a in second["admission_history"]] == \
        [(0.0, 0, False), (88.0, 48, True)]
    assert second["first_admission_reused_input_tokens"] == 0
    assert second["reused_input_tokens"] == 48  # raised by the readmission, first admission unchanged
    assert (second["ttft_ms"], second["ttst_ms"], second["e2e_latency_ms"]) == (10.0, 2.0, 144.0)
    # 16 gaps of 2 ms, the 58 ms gap of the preemption (42 -> 100 ms), 22 gaps of 2 ms
    assert second["itl_ms"] == pytest.approx((16 * 2 + 58 + 22 * 2) / 39)
    assert summary["num_itl_samples"] == 78 and summary["max_itl_ms"] == 58.0
    assert summary["mean_tpot_ms"] == pytest.approx((78 / 39 + 134 / 39) / 2)
    # committed prefill counts the readmission: 64 + 64 + (64 - 48)
    assert summary["total_input_tokens"] == 128
    assert summary["committed_prefill_tokens"] == 144
    # each request once, with its largest reuse (spec's field table): 0 and 48 of 64 + 64 prompt tokens
    assert summary["prefix_cache_reused_ratio"] == (0 + 48) / 128
    assert summary["first_admission_prefix_cache_reused_ratio"] == 0.0
    assert summary["duration_ms"] == 144.0


def test_a_readmission_counts_the_reuse_of_its_own_output(tmp_path):
    """docs/reference-runs/fidelity/s01-vllm-pressure-b32 (1,000-token prompts, 32-token blocks, preemption): two
    preempted requests come back to find their prompt and part of their output cached, 35 and 33 whole blocks, and
    reuse 1,120 and 1,056 tokens, more than their input, as AISimulate counts them (its requests.jsonl: the same
    two readmissions and values; prefix reuse 0.18880 in both, 0.18440 when capped at the prompt; facts §45)."""
    config = tmp_path / "c.yaml"
    config.write_text((ROOT / "docs/reference-runs/fidelity/s01-vllm-pressure-b32.yaml").read_text())
    summary, records = replay(config, tmp_path / "out")
    past = [(r["input_length"], [a["reused_input_tokens"] for a in r["admission_history"]], r["reused_input_tokens"])
            for r in records if r["reused_input_tokens"] > r["input_length"]]
    assert past == [(1000, [0, 1120], 1120), (1000, [0, 1056], 1056)]
    assert round(summary["prefix_cache_reused_ratio"], 5) == 0.18880


@pytest.mark.parametrize("with_g2", [True, False], ids=["as-is", "without-g2"])
def test_host_offload_example_matches_aisimulate_cache_numbers(with_g2, tmp_path):
    """AISimulate 0.13 on the spec's host-offload example (docs/reference-facts.md section 8): 64 requests,
    input 176,128, output 8,192, committed prefill 66,304, reuse 0.623546511627907 at first admission and
    overall, all of it from G1 (G2 is never read), no readmissions.  Without `host_offload` the same holds."""
    text = (EXAMPLES / "host-offload-prediction.yaml").read_text()
    if not with_g2:
        text = re.sub(r"\n( +)host_offload:\n(\1 .*\n)+", "\n", text)
        assert "host_offload" not in text and "capacity: {type: fixed, blocks: 2499}" in text
    config = tmp_path / "config.yaml"
    config.write_text(text)
    summary, records = replay(config, tmp_path / "out")
    assert ("g2_domains" in summary) is with_g2
    assert summary.get("first_admission_host_reused_tokens", 0) == 0
    assert all(r["first_admission_host_reused_input_tokens"] == 0 for r in records)
    assert all(r["readmission_count"] == 0 for r in records)
    assert summary["num_requests"] == summary["completed_requests"] == 64
    assert summary["total_input_tokens"] == 176_128 and summary["total_output_tokens"] == 8_192
    assert summary["committed_prefill_tokens"] == 66_304
    assert summary["prefix_cache_reused_ratio"] == pytest.approx(0.623546511627907, abs=1e-15)
    assert summary["first_admission_prefix_cache_reused_ratio"] == pytest.approx(0.623546511627907, abs=1e-15)
    assert summary["preemptions"] == 0
    assert sorted({r["input_length"] for r in records}) == [1024, 2176, 3328, 4480]
    # turn k reuses the previous turn's prompt + output minus its last (never computed) token, in full blocks
    reuse = {r["turn_index"]: r["reused_input_tokens"] for r in records}
    assert reuse == {0: 0, 1: 1136, 2: 2288, 3: 3440}


def test_a_prompt_that_never_fits_is_rejected_without_stalling(tmp_path):
    """A 10-block G1 of 16 tokens: the 1000-token row is rejected, the others complete.  It arrives at 5 during
    the first row's prefill (0-10 ms); the pass from 10 (a 2 ms decode) reaches it, so it is rejected at 12."""
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]},
            {"timestamp": 5, "input_length": 1000, "output_length": 10, "hash_ids": [2, 3]},
            {"timestamp": 7, "input_length": 50, "output_length": 5, "hash_ids": [4]}]
    trace.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    config = write_config(tmp_path, "  source: {type: trace, paths: [trace.jsonl], block_size: 512}\n"
                                    "  load: {type: trace_timestamps}\n",
                          kv="block_size: 16, capacity: {type: fixed, blocks: 10}")
    summary, records = replay(config, tmp_path / "out")
    assert [r["terminal_status"] for r in records] == ["completed", "rejected", "completed"]
    rejected = records[1]
    assert rejected["terminal_time_ms"] == 12.0 and rejected["admission_count"] == 0
    assert rejected["ttft_ms"] is None and rejected["e2e_latency_ms"] is None
    assert "G1 blocks" in rejected["terminal_reason"]
    assert (summary["num_requests"], summary["completed_requests"], summary["rejected_requests"]) == (3, 2, 1)
    assert summary["total_input_tokens"] == 150  # admitted requests only
    assert summary["num_ttft_samples"] == 2


def _session_config(tmp_path, load: str, scheduler: str) -> Path:
    return write_config(tmp_path, _traffic(
        "{type: synthetic-session, new_input_tokens_per_turn: 256, output_tokens_per_turn: 16,\n"
        "           session: {turns: 3, inter_turn_delay_ms: 100.0}}", load, "{sessions: 10}"),
        timing="{type: fixed, prefill_ms: 20.0, decode_ms: 5.0}", scheduler=scheduler)


@pytest.mark.parametrize("load, scheduler", [
    ("{type: poisson, sessions_per_second: 20.0}", "{}"),
    # one running sequence at a time: a new session (started when another ends) arrives at once, before
    # the next turn of a session created earlier that is still in its 100 ms think time
    ("{type: concurrency, concurrency: 3}", "{max_sequences: 1}"),
], ids=["poisson", "concurrency"])
def test_per_request_records_are_in_index_order_with_session_think_time(load, scheduler, tmp_path):
    _, records = replay(_session_config(tmp_path, load, scheduler), tmp_path / "out")
    assert len(records) == 30
    assert [r["index"] for r in records] == list(range(30))


def test_per_request_records_are_in_index_order_without_think_time(tmp_path):
    for path, overrides in ((EXAMPLES / "kimi-k3-state-cache.yaml", []),
                            (EXAMPLES / "trtllm-fixed-timing.yaml", ["traffic.stop.requests=50"])):
        _, records = replay(path, tmp_path / path.stem, overrides=overrides)
        assert [r["index"] for r in records] == list(range(len(records)))
