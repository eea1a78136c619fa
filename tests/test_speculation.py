"""Speculative decoding in the replay: tokens per decode pass (ngram draws, native MTP), the TPOT and ITL that
follow under fixed timing, vLLM's lookahead KV and its shorter prefix hit, byte identity across hash seeds, and
the AISimulate side-by-side numbers of docs/reference-facts.md ("Speculative decoding")."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvreplay.compiler.catalog import resolve_hardware, resolve_model
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.timing_inputs import roofline_record
from kvreplay.runtime.serving.speculation import Speculation, conditional_rates
from kvreplay.runtime.timing import PassWork
from kvreplay.runtime.timing.default import default_timing
from kvreplay.runtime.traffic.chacha_stream import UniformStream

from .support import compile_yaml, distinct_outputs
from .test_replay import replay


def _config(tmp_path, speculation: str, *, blocks: int = 2000, block_size: int = 64, input_tokens: int = 200,
            output_tokens: int = 10, cached: int = 128, concurrency: int = 1, requests: int = 2, name="c.yaml"):
    path = tmp_path / name
    path.write_text(f"""engine:
  model: Qwen/Qwen3-32B
  hardware: h200_sxm
{speculation}  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 10.0}}
      kv_cache: {{capacity: {{type: fixed, blocks: {blocks}}}, block_size: {block_size}}}
traffic:
  source: {{type: synthetic, input_tokens: {input_tokens}, output_tokens: {output_tokens}, cached_prefix_tokens: {cached}}}
  load: {{type: concurrency, concurrency: {concurrency}}}
  stop: {{requests: {requests}}}
""")
    return path


def _ngram(rates, seed=42):
    return (f"  speculation: {{kind: ngram, num_speculative_tokens: {len(rates)}, "
            f"acceptance_rates: {list(rates)}, seed: {seed}}}\n")


def _sampler(kind="ngram", rates=(), mean=0.0, seed=42, drafts=None):
    return Speculation(SimpleNamespace(kind=kind, draft_tokens=drafts or max(len(rates), 2), rates=tuple(rates),
                                       mean_accepted=mean, seed=seed, draft_layers=0,
                                       drafts_read_kv=False))


def test_a_draft_is_accepted_only_after_every_draft_before_it():
    """The mocker's own sampler tests (common/speculative.rs): rates [0, 1] give 1 token, [1, 1] 3, [1, 0, 1] 2
    (the first rejection ends the run), and a burst is cut to what is left (2 of 3; nothing left: 0)."""
    assert [_sampler(rates=(0.0, 1.0)).sample(10) for _ in range(5)] == [1] * 5
    assert [_sampler(rates=(1.0, 1.0)).sample(10) for _ in range(5)] == [3] * 5
    assert _sampler(rates=(1.0, 0.0, 1.0)).sample(10) == 2
    clamped = _sampler(rates=(1.0, 1.0))
    assert (clamped.sample(2), clamped.sample(0)) == (2, 0)


def test_the_draws_are_the_mocker_s_stdrng_stream():
    """One stream per rank, `StdRng::seed_from_u64(seed + the rank's place among its role's ranks)`; a position of
    rate 1 accepts without a draw, any other reads one u64 and accepts below rate * 2**64 (`random_bool`), a rate of
    0 included.  Seed 7's first
    u64s, over 2**64: 0.030, 0.307, 0.143, 0.543, 0.272, 0.951: rates [0.6, 0.5] accept 2, 1 (0.543 >= 0.5), 1
    (0.951)."""
    stream = UniformStream(7)
    u = [stream.next_u64() / 2 ** 64 for _ in range(6)]
    assert [round(x, 3) for x in u] == [0.030, 0.307, 0.143, 0.543, 0.272, 0.951]
    drawn = _sampler(rates=(0.6, 0.5), seed=7)
    assert [drawn.sample(10) for _ in range(3)] == [3, 2, 2]
    # a rate of 1 reads nothing, so [1, 0.6, 0.5] makes the same draws one token longer; a rate of 0 reads one
    longer = _sampler(rates=(1.0, 0.6, 0.5), seed=7)
    assert [longer.sample(10) for _ in range(3)] == [4, 3, 3]
    zero_first = _sampler(rates=(0.0,), seed=7, drafts=1)
    assert zero_first.sample(10) == 1 and zero_first._stream.next_u64() / 2 ** 64 == u[1]
    # a role's second rank reads seed 8's stream (the mocker adds its seed offset, the rank's place, to the seed)
    second = Speculation(SimpleNamespace(kind="ngram", draft_tokens=2, rates=(0.6, 0.5), mean_accepted=0.0, seed=7,
                                         draft_layers=0, drafts_read_kv=False), 1)
    eight = _sampler(rates=(0.6, 0.5), seed=8)
    assert [second.sample(10) for _ in range(20)] == [eight.sample(10) for _ in range(20)]


def test_native_mtp_means_become_conditional_rates_as_aisimulate_lowers_them():
    """`nextn_accepted` m with `nextn` d: floor(m) positions of 1, then frac(m), then 0 (AISimulate's
    `_accept_rates_for_expected`); ngram's rates are padded with 0 to the drafts or cut."""
    mtp = lambda mean, drafts: conditional_rates(SimpleNamespace(kind="mtp", draft_tokens=drafts, rates=(),
                                                                 mean_accepted=mean))
    assert mtp(0.7, 1) == (0.7,) and mtp(1.4, 2) == (1.0, 1.4 - 1) and mtp(2.0, 2) == (1.0, 1.0)
    assert mtp(0.5, 3) == (0.5, 0.0, 0.0) and mtp(1.0, 2) == (1.0, 0.0)
    ngram = lambda rates, drafts: conditional_rates(SimpleNamespace(kind="ngram", draft_tokens=drafts,
                                                                    rates=rates, mean_accepted=0.0))
    assert ngram((0.9,), 3) == (0.9, 0.0, 0.0) and ngram((0.9, 0.5, 0.2), 2) == (0.9, 0.5)


def test_mean_accepted_drafts():
    ngram = _sampler(rates=(0.8, 0.5, 0.3))
    draws = [ngram.sample(100) - 1 for _ in range(20000)]
    assert sum(draws) / len(draws) == pytest.approx(0.8 + 0.4 + 0.12, abs=0.02)
    half = _sampler("mtp", mean=0.5)
    draws = [half.sample(100) - 1 for _ in range(20000)]
    assert set(draws) == {0, 1} and sum(draws) / len(draws) == pytest.approx(0.5, abs=0.02)
    assert {_sampler("mtp", mean=1.0).sample(100) for _ in range(500)} == {2}


def test_fixed_acceptance_token_times_and_the_shorter_prefix_hit(tmp_path):
    """rates [1, 0]: every decode pass emits 2 tokens.  10 output tokens: the prefill pass (20 ms) gives the first,
    decode passes at 30, 40, 50, 60 give 2 each and the pass at 70 the last one (cut to what is left); so TPOT and
    ITL are 50 / 9 ms, with a 0 gap after each pass's first token.  The second request shares 128 cached tokens
    (two 64-token blocks) but reuses one: under speculation the last matched block is recomputed."""
    summary, records = replay(_config(tmp_path, _ngram([1.0, 0.0])), tmp_path / "out")
    assert [(r["ttft_ms"], r["e2e_latency_ms"], r["reused_input_tokens"]) for r in records] == [
        (20.0, 70.0, 0), (20.0, 70.0, 64)]
    assert [r["itl_ms"] for r in records] == [50 / 9] * 2
    assert summary["mean_tpot_ms"] == 50 / 9 and summary["min_itl_ms"] == 0.0 and summary["max_itl_ms"] == 10.0
    assert summary["duration_ms"] == 140.0 and summary["prefix_cache_reused_ratio"] == 0.16
    # AISimulate, same config: duration 140.0, TPOT 5.5556, min ITL 0, reuse 0.16 (one block less than 0.32)
    plain, _ = replay(_config(tmp_path, "", name="plain.yaml"), tmp_path / "plain")
    assert (plain["mean_tpot_ms"], plain["duration_ms"], plain["prefix_cache_reused_ratio"]) == (10.0, 220.0, 0.32)


def test_drawn_acceptance_token_times(tmp_path):
    """One request, rates [0.6, 0.5], seed 7, 12 output tokens: its passes follow seed 7's stream (above).  By
    hand: the pass starting at 1 token reads (0.030, 0.307): 3 tokens; at 4: (0.143, 0.543), 2; at 6: (0.272,
    0.951), 2; at 8: (0.175, 0.257), 3; at 11: (0.125, 0.723), 2 cut to the 1 left.  Five decode passes: e2e
    20 + 5 x 10 = 70 ms, TPOT 50 / 11 ms, six 0-ms gaps; the prefill's pass draws nothing."""
    summary, records = replay(_config(tmp_path, _ngram([0.6, 0.5], seed=7), output_tokens=12, cached=0,
                                      requests=1), tmp_path / "out")
    assert records[0]["e2e_latency_ms"] == 70.0 and summary["mean_tpot_ms"] == 50 / 11
    assert summary["min_itl_ms"] == 0.0


def test_every_request_s_passes_are_aisimulate_s(tmp_path):
    """12 requests of 100 + 30 tokens one after another, rates [0.8, 0.5, 0.3], seed 42: AISimulate's requests.jsonl
    (facts section 89) gives each request's decode passes, (last - first token) / 10 ms, as 11, 14, 11, 12, 14,
    11, 12, 15, 13, 12, 16, 11; the mocker's sampler run by hand over seed 42's stream gives the same."""
    _, records = replay(_config(tmp_path, _ngram([0.8, 0.5, 0.3]), input_tokens=100, output_tokens=30, cached=0,
                                requests=12), tmp_path / "out")
    records.sort(key=lambda r: r["arrival_time_ms"])
    assert [round((r["last_token_ms"] - r["first_token_ms"]) / 10) for r in records] == [
        11, 14, 11, 12, 14, 11, 12, 15, 13, 12, 16, 11]
    sampler, passes = _sampler(rates=(0.8, 0.5, 0.3)), []
    for _ in records:
        generated, count = 1, 0
        while generated < 30:
            generated, count = generated + sampler.sample(30 - generated), count + 1
        passes.append(count)
    assert passes == [round((r["last_token_ms"] - r["first_token_ms"]) / 10) for r in records]


def test_lookahead_slots_set_the_preemptions(tmp_path):
    """60 blocks of 16 tokens, 4 concurrent 200+100-token requests, rates [1, 1]: each decode's KV covers its
    burst of three, which is what makes these requests preempted and readmitted where AISimulate readmits them."""
    config = _config(tmp_path, _ngram([1.0, 1.0]), blocks=60, block_size=16, output_tokens=100, cached=0,
                     concurrency=4, requests=12)
    summary, records = replay(config, tmp_path / "out")
    histories = sorted(tuple(a["reused_input_tokens"] for a in r["admission_history"]) for r in records)
    # AISimulate's requests.jsonl, same config
    assert histories == sorted([(0,)] * 7 + [(0, 32), (0, 96), (0, 160), (0, 176, 48)] + [(0,)])
    # AISimulate 4.0741 too, every request's instants equal: the bursts take their KV after admission, so a
    # readmission may be preempted again in its own pass (facts section 70; 4.0572 when the drafts' KV was taken
    # as each decode was scheduled, 4.0488 before a readmission's pass counted its sampled token as a decode, §43)
    assert summary["mean_tpot_ms"] == pytest.approx(4.0741, abs=1e-4)


def _ranked_config(tmp_path, parallelism: str, disaggregated: bool, concurrency: int, requests: int):
    role = f"""      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 10.0}}
      kv_cache: {{capacity: {{type: fixed, blocks: 2000}}, block_size: 64}}
{parallelism}"""
    workers = f"    prefill:\n{role}    decode:\n{role}" if disaggregated else f"    aggregated:\n{role}"
    path = tmp_path / "ranked.yaml"
    path.write_text(f"""engine:
  model: Qwen/Qwen3-32B
  hardware: h200_sxm
{"  mode: disaggregated" if disaggregated else ""}
{_ngram([0.8, 0.5, 0.3])}  workers:
{workers}traffic:
  source: {{type: synthetic, input_tokens: 100, output_tokens: 40}}
  load: {{type: concurrency, concurrency: {concurrency}}}
  stop: {{requests: {requests}}}
""")
    return path


def test_each_rank_draws_from_the_stream_of_its_place_in_its_role(tmp_path):
    """AISimulate seeds rank k of a role (worker x attention_data + dp rank) with seed + k.  Two workers of two
    attention-DP ranks, 24 requests of 100 + 40 tokens at concurrency 4: AISimulate's duration 1,240 ms, TTFT
    21.25 ms, TPOT 4.50855 ms, and kvreplay's the same on every request (facts section 89; with one stream for both
    ranks of a worker 20 of 24 requests were apart).  P/D at concurrency 1: the decode role's rank is its role's
    first, so seed 42 itself (not 43, its worker's index in the deployment): AISimulate's decode passes after the
    first token, per request, 16, 16, 16, 17, 15, 18, 18, 18, 18, 15, 17, 17 (seed 43 would give 16, 15, 17, ...),
    and the decode rank's first pass (the first token) draws nothing."""
    summary, _ = replay(_ranked_config(tmp_path, "      parallelism: {replicas: 2, attention_data: 2}\n", False, 4,
                                       24), tmp_path / "agg")
    assert (summary["duration_ms"], summary["mean_ttft_ms"]) == (1240.0, 21.25)
    assert summary["mean_tpot_ms"] == pytest.approx(4.508547008547009, rel=1e-12)
    summary, records = replay(_ranked_config(tmp_path, "", True, 1, 12), tmp_path / "pd")
    records.sort(key=lambda r: r["arrival_time_ms"])
    assert [round((r["last_token_ms"] - r["first_token_ms"]) / 10) for r in records] == [
        16, 16, 16, 17, 15, 18, 18, 18, 18, 15, 17, 17]
    assert (summary["duration_ms"], summary["mean_ttft_ms"]) == (2370.0, 30.0)


def _roofline(model: str, tensor: int = 1, experts: int = 1, kv_bytes: int = 2):
    return default_timing(roofline_record(resolve_model(model)[0], resolve_hardware("h200_sxm")[0], "vllm", tensor,
                                          kv_bytes, experts))


def test_an_mtp_pass_costs_a_plain_pass_of_every_draft_plus_the_mtp_layers():
    """AISimulate's default timing (AIC) prices a `nextn: d` decode pass of b requests as its generation graph at
    b(d + 1) tokens, each verify token reading its request's KV, with layer counts (61 + d) / 61: DeepSeek-V3
    TP8 16.3335 ms against 15.815 ms plain at batch 3 and 14.2409 at batch 1.  kvreplay prices it the same way:
    exactly its own plain pass of 3b requests times 63 / 61 (to the nanosecond of rounding)."""
    step = _roofline("deepseek-ai/DeepSeek-V3", 8, 8, 1)
    for b, context in ((1, 250), (16, 2100)):
        mtp = step(PassWork((), b, b * context, 2 * b, 2 * b * context, 2))
        assert abs(mtp - step(PassWork((), 3 * b, 3 * b * context)) * 63 / 61) <= 1
    assert step(PassWork((), 1, 250, 2, 500, 2)) / step(PassWork((), 1, 250)) == pytest.approx(1.132, abs=0.001)
    # AIC 1.147 (16.3335 / 14.2409): the ratio the TPOT follows, 0.566 here against AISimulate's 0.572 (1.125 and
    # 0.563 before H200 vLLM's decode experts followed their measured curve, facts §88)
    # a pass with a prefill chunk is AISimulate's prefill (its context graph, no MTP layers) plus its decode step,
    # which runs the MTP layers (facts §88; AIC's own mixed step, §36, ran them in neither)
    mixed = PassWork(((200, 0),), 1, 250, 2, 500, 2)
    assert abs(step(mixed) - step(PassWork(((200, 0),))) - step(PassWork((), 3, 750)) * 63 / 61) <= 1


def test_ngram_drafts_read_the_kv_once_on_a_dense_model_and_per_draft_on_mla():
    """ngram runs no draft layers.  A dense (GQA) model's verify kernel reads a request's KV once for all its drafts
    (AIC's sequence basis); MLA has no such kernel, so each draft reads it again (token basis), as the plan says."""
    dense, mla = _roofline("Qwen/Qwen3-32B"), _roofline("deepseek-ai/DeepSeek-V3", 8, 8, 1)
    # 16 tokens of Qwen3-32B (TP1) are memory-bound: the pass reads the weights and the 4,000 tokens' KV once, so
    # its drafts cost only their per-token 8.1 us; 512 tokens are compute-bound, and there they cost more
    assert dense(PassWork((), 4, 4000, 12, 0, 0)) == dense(PassWork((), 16, 4000)) \
        == dense(PassWork((), 4, 4000)) + 12 * 8_100
    assert dense(PassWork((), 128, 128000, 384, 0, 0)) > dense(PassWork((), 128, 128000)) * 1.4
    assert mla(PassWork((), 4, 4000, 12, 12000, 0)) == mla(PassWork((), 16, 16000))
    plans = {}
    for model, speculation in (("Qwen/Qwen3-32B", "{kind: ngram, num_speculative_tokens: 3}"),
                               ("deepseek-ai/DeepSeek-V3", "{kind: ngram, num_speculative_tokens: 3}")):
        plans[model] = _speculation_plan(model, f"engine.speculation={speculation}")
    assert plans["Qwen/Qwen3-32B"][4:] == (0, False) and plans["deepseek-ai/DeepSeek-V3"][4:] == (0, True)
    assert _speculation_plan("deepseek-ai/DeepSeek-V3", "engine.nextn=2", "engine.nextn_accepted=1.0")[4:] == (2, True)


def _config_text(model: str) -> str:
    parallelism = "{tensor: 8, moe_expert: 8}" if "DeepSeek" in model else "{tensor: 1}"
    return f"""engine:
  model: {model}
  hardware: h200_sxm
  workers:
    aggregated:
      parallelism: {parallelism}
      kv_cache: {{capacity: {{type: fixed, blocks: 2000}}, block_size: 64}}
traffic:
  source: {{type: synthetic, input_tokens: 200, output_tokens: 10}}
  load: {{type: concurrency, concurrency: 1}}
  stop: {{requests: 2}}
"""


def _speculation_plan(model: str, *overrides: str):
    result = compile_yaml(_config_text(model), overrides)
    assert result.ok, result.diagnostics
    speculation = finish_plan(result.plan.to_dict()).roles[0].speculation
    return (speculation.kind, speculation.draft_tokens, speculation.rates, speculation.seed, speculation.draft_layers,
            speculation.drafts_read_kv)


def test_native_mtp_side_by_side(tmp_path):
    """DeepSeek-V3, `nextn: 2, nextn_accepted: 1.0`, default timing: every decode pass emits 2 tokens and costs
    1.132x a plain one, so TPOT falls to 0.566 of plain.  AISimulate, same config: TPOT 14.276 -> 8.1655 ms (0.572),
    duration 2,929.3 -> 1,712.7 ms."""
    def run(nextn: str, name: str):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"""engine:
  model: deepseek-ai/DeepSeek-V3
  hardware: h200_sxm
{nextn}  workers:
    aggregated:
      parallelism: {{tensor: 8, moe_expert: 8}}
      kv_cache: {{capacity: {{type: fixed, blocks: 2000}}, block_size: 64}}
traffic:
  source: {{type: synthetic, input_tokens: 200, output_tokens: 101, cached_prefix_tokens: 128}}
  load: {{type: concurrency, concurrency: 1}}
  stop: {{requests: 2}}
""")
        return replay(path, tmp_path / name)[0]

    plain, mtp = run("", "plain"), run("  nextn: 2\n  nextn_accepted: 1.0\n", "mtp")
    assert mtp["min_itl_ms"] == 0.0 and plain["min_itl_ms"] > 0
    assert mtp["mean_tpot_ms"] / plain["mean_tpot_ms"] == pytest.approx(0.566, abs=0.002)
    assert abs(mtp["mean_tpot_ms"] / 8.1655 - 1) < 0.10 and abs(mtp["duration_ms"] / 1712.7 - 1) < 0.10
    assert mtp["prefix_cache_reused_ratio"] == 0.16 and plain["prefix_cache_reused_ratio"] == 0.32


def test_side_by_side_drawn_ngram(tmp_path):
    """200 requests of 1000 + 200 tokens (512 shared), concurrency 8, rates [0.8, 0.5, 0.3]: AISimulate's duration
    25,470 ms, TPOT 4.9005 ms, reuse 0.44576.  With the mocker's stream read in its order (facts section 89) the
    figures are equal, not only their means (25,620 ms with counter-based draws)."""
    config = _config(tmp_path, _ngram([0.8, 0.5, 0.3]), blocks=4000, input_tokens=1000, output_tokens=200,
                     cached=512, concurrency=8, requests=200)
    summary, _ = replay(config, tmp_path / "out")
    assert (summary["duration_ms"], summary["prefix_cache_reused_ratio"]) == (25470.0, 0.44576)
    assert summary["mean_tpot_ms"] == pytest.approx(4.900502512562811, rel=1e-12)


def test_byte_identical_across_hash_seeds_and_single_stepping(tmp_path):
    config = _config(tmp_path, _ngram([0.8, 0.5, 0.3]), input_tokens=300, output_tokens=40, concurrency=4,
                     requests=16)
    assert len(distinct_outputs(config, tmp_path)) == 1


def test_disaggregated_decode_speculates_and_the_prefill_hit_is_one_block_shorter(tmp_path):
    """P/D, rates [1, 0]: the decode worker emits 2 tokens a pass; the prefill worker's hit of a 256-token cached
    prefix is 192 tokens.  AISimulate, same config: TPOT 10.0 -> 5.0 ms, reuse 0.2304 -> 0.1728 (it counts the
    KV transfer in TTFT, as kvreplay now does)."""
    def run(speculation: str, name: str):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"""engine:
  mode: disaggregated
  model: Qwen/Qwen3-32B
  hardware: h100_sxm
{speculation}  kv_transfer: {{bandwidth_gb_per_second: 50.0, timing_mode: destination_missing}}
  workers:
    prefill:
      parallelism: {{tensor: 2}}
      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 10.0}}
      kv_cache: {{capacity: {{type: fixed, blocks: 3000}}, block_size: 64}}
    decode:
      parallelism: {{tensor: 4}}
      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 10.0}}
      kv_cache: {{capacity: {{type: fixed, blocks: 3000}}, block_size: 64}}
traffic:
  source: {{type: synthetic, input_tokens: 1000, output_tokens: 51, cached_prefix_tokens: 256}}
  load: {{type: constant_rate, requests_per_second: 2.0}}
  stop: {{requests: 10}}
""")
        return replay(path, tmp_path / name)[0]

    plain, spec = run("", "plain"), run(_ngram([1.0, 0.0]), "spec")
    assert (plain["prefix_cache_reused_ratio"], spec["prefix_cache_reused_ratio"]) == (0.2304, 0.1728)
    assert spec["min_itl_ms"] == 0.0
    # (the P/D decode rank samples every output token and TTFT holds the transfer, as AISimulate: its TPOT exactly)
    assert spec["mean_tpot_ms"] == pytest.approx(5.0, abs=1e-9) and plain["mean_tpot_ms"] == pytest.approx(10.0, abs=1e-9)
    assert abs(spec["duration_ms"] / 4782.01326592 - 1) < 0.01


@pytest.mark.parametrize("overrides, pointer", [
    (("engine.speculation={kind: ngram, num_speculative_tokens: 0}",), "/engine/speculation/num_speculative_tokens"),
    (("engine.speculation={kind: ngram, num_speculative_tokens: 6}",), "/engine/speculation/num_speculative_tokens"),
    (("engine.speculation={kind: ngram, num_speculative_tokens: 2, acceptance_rates: [1.2, 0.5]}",),
     "/engine/speculation/acceptance_rates/0"),
    (("engine.nextn=6", "engine.nextn_accepted=1.0"), "/engine/nextn"),
    (("engine.speculation={kind: ngram, num_speculative_tokens: 1}",), None),
    (("engine.speculation={kind: ngram, num_speculative_tokens: 5}",), None),
    (("engine.nextn=5", "engine.nextn_accepted=1.0"), None),
])
def test_the_reference_ranges_of_the_speculation_fields(overrides, pointer):
    """REFERENCE.md: `nextn` 0-5, `num_speculative_tokens` 1-5, `acceptance_rates` each 0-1 (SCHEMA-RANGE at the
    field); the seed defaults to 42."""
    result = compile_yaml(_config_text("Qwen/Qwen3-32B"), overrides)
    if pointer is None:
        assert result.ok, result.diagnostics
    else:
        assert [(d.code, d.pointer) for d in result.diagnostics] == [("SCHEMA-RANGE", pointer)]
    assert _speculation_plan("Qwen/Qwen3-32B", "engine.speculation={kind: ngram, num_speculative_tokens: 2}")[3] == 42


def test_a_batch_of_four_emits_three_tokens_a_pass_each(tmp_path):
    """ngram rates [1, 1], fixed 20/10 ms, 2,000 + 11 tokens, concurrency 4, 8 requests: the four prompts (8,000
    tokens, one pass) give their first tokens at 20 ms, then each decode pass gives every request 1 + 2 tokens, cut to
    what it has left: 3, 3, 3, 1 at 30, 40, 50, 60 ms, so TPOT = 40 / 10 = 4 ms and the gaps are 10 or 0.  The second
    four start at 60 ms and end at 120.  AISimulate, same config: these times, TTFT 20, TPOT 4.0, ITL 0-10 ms."""
    summary, records = replay(_config(tmp_path, _ngram([1.0, 1.0]), input_tokens=2000, output_tokens=11, cached=0,
                                      concurrency=4, requests=8), tmp_path / "out")
    assert sorted((r["first_admit_ms"], r["first_token_ms"], r["last_token_ms"]) for r in records) == \
        [(0.0, 20.0, 60.0)] * 4 + [(60.0, 80.0, 120.0)] * 4
    assert (summary["duration_ms"], summary["mean_ttft_ms"], summary["mean_tpot_ms"]) == (120.0, 20.0, 4.0)
    assert (summary["min_itl_ms"], summary["max_itl_ms"]) == (0.0, 10.0)
