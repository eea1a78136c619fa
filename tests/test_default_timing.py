"""The default (roofline) timing per backend: exact pass times of its formula, and AISimulate's op-level figures.

The table holds AISimulate 0.13.0.dev's own figures (docs/reference-facts.md, "Default timing per backend"):
one request at a time, TTFT of a whole prompt (8,192-token chunks) and TPOT of 200 output tokens after a
prompt of the given length.  Dense models must agree within 10%, MoE within 25%.
"""
from __future__ import annotations

import pytest

from kvreplay.compiler.catalog import resolve_hardware, resolve_model
from kvreplay.compiler.timing_inputs import BACKEND_TERMS, roofline_record
from kvreplay.runtime.timing import PassWork
from kvreplay.runtime.timing.default import default_timing

CHUNK = 8192  # the scheduler's default max_batched_tokens, as in the AISimulate runs
OUTPUT = 200  # decode probes generate 200 tokens: mean context is the prompt plus 100
SETUPS = {  # model, hardware, tensor, moe_expert, KV bytes (the KV dtype the capacity pass picks)
    "qwen3-8b h200": ("Qwen/Qwen3-8B", "h200_sxm", 1, 1, 2),
    "qwen3-32b b200 tp2": ("Qwen/Qwen3-32B", "b200_sxm", 2, 1, 2),
    "qwen3-32b-fp8 h200": ("Qwen/Qwen3-32B-FP8", "h200_sxm", 1, 1, 1),
    "deepseek-v3 h200 tp8 ep8": ("deepseek-ai/DeepSeek-V3", "h200_sxm", 8, 8, 1),
}
MOE = {"deepseek-v3 h200 tp8 ep8"}
# setup, backend: (TTFT ms at prompts 1024, 4096, 8192), (TPOT ms after prompts 1024, 16384)
AISIMULATE = {
    ("qwen3-8b h200", "vllm"): ((22.14, 91.19, 201.74), (6.025, 6.726)),
    ("qwen3-8b h200", "sglang"): ((23.58, 96.08, 215.80), (6.001, 6.582)),
    ("qwen3-8b h200", "trtllm"): ((23.85, 91.99, 196.22), (6.216, 6.972)),
    ("qwen3-32b b200 tp2", "vllm"): ((33.97, 113.70, 239.56), (9.851, 10.211)),
    ("qwen3-32b b200 tp2", "sglang"): ((32.96, 114.64, 238.37), (9.628, 10.016)),
    ("qwen3-32b b200 tp2", "trtllm"): ((32.66, 117.49, 257.37), (9.971, 10.348)),
    ("qwen3-32b-fp8 h200", "vllm"): ((66.34, 251.94, 552.20), (14.203, 14.930)),
    ("qwen3-32b-fp8 h200", "sglang"): ((70.25, 248.32, 602.02), (14.182, 14.861)),
    ("qwen3-32b-fp8 h200", "trtllm"): ((71.16, 271.50, 586.90), (13.289, 13.909)),
    ("deepseek-v3 h200 tp8 ep8", "vllm"): ((78.64, 236.86, 460.27), (14.681, 15.400)),
    ("deepseek-v3 h200 tp8 ep8", "sglang"): ((68.81, 203.95, 438.66), (11.248, 13.198)),
    ("deepseek-v3 h200 tp8 ep8", "trtllm"): ((61.96, 160.01, 310.86), (6.860, 7.578)),
}


def timing(setup: str, backend: str):
    model, hardware, tensor, experts, kv_bytes = SETUPS[setup]
    return default_timing(roofline_record(resolve_model(model)[0], resolve_hardware(hardware)[0], backend, tensor,
                                          kv_bytes, experts))


def ttft_ms(step, prompt: int) -> float:
    return sum(step(PassWork(prefill_chunks=((min(CHUNK, prompt - done), done),)))
               for done in range(0, prompt, CHUNK)) / 1e6


def tpot_ms(step, prompt: int) -> float:
    return step(PassWork(decode_requests=1, decode_context=prompt + OUTPUT // 2)) / 1e6


@pytest.mark.parametrize("setup, backend", sorted(AISIMULATE), ids=[f"{s} {b}" for s, b in sorted(AISIMULATE)])
def test_ttft_and_tpot_agree_with_aisimulate(setup, backend):
    step = timing(setup, backend)
    tolerance = 0.25 if setup in MOE else 0.10
    ttfts, tpots = AISIMULATE[setup, backend]
    for prompt, theirs in zip((1024, 4096, 8192), ttfts):
        assert abs(ttft_ms(step, prompt) / theirs - 1) <= tolerance, ("ttft", prompt, ttft_ms(step, prompt), theirs)
    for prompt, theirs in zip((1024, 16384), tpots):
        assert abs(tpot_ms(step, prompt) / theirs - 1) <= tolerance, ("tpot", prompt, tpot_ms(step, prompt), theirs)


def test_exact_pass_times_of_the_formula():
    """Qwen3-8B, H200, vLLM, by hand.  Decode: weights 15,136,194,560 B at 4,800 GB/s x 0.74 (H200's weight read),
    KV 147,456 B/token at x 0.92, plus 0.5 ms per pass, 36 layers x 37 us and 8.1 us per decode token.  A
    4,096-token prefill is compute-bound: the GEMMs' 2 x 6,945,767,424 FLOPs per token (8,190,427,136 active
    parameters less the embedding and logits tables, 2 x 151,936 x 4,096) at 989 TFLOP/s x 0.78, the attention's
    4 x 36 x 32 x 128 x 4096 x 2048 at x 0.65, the add-norms and gate activation as memory-bound kernels (36 x 4,096
    x (21.5 x 4,096 + 7.7 x 12,288) B), 0.5 ms per pass and the prefill attention kernel of 36 layers x 58 us."""
    qwen = timing("qwen3-8b h200", "vllm")
    weights = 15_136_194_560 / (4.8e12 * 0.74)
    kv = 147_456 * 1024 / (4.8e12 * 0.92)
    assert qwen(PassWork(decode_requests=1, decode_context=1024)) == round((weights + kv + 0.5e-3 + 36 * 37e-6
                                                                            + 8.1e-6) * 1e9) == 6_135_609
    gemm = 2 * 6_945_767_424 / (989e12 * 0.78)
    elementwise = 36 * (21.5 * 4096 + 7.7 * 12288) / 4.8e12
    prefill = gemm * 4096 + 4 * 36 * 32 * 128 * 4096 * 2048 / (989e12 * 0.65) + elementwise * 4096 + 0.5e-3 + 36 * 58e-6
    assert qwen(PassWork(prefill_chunks=((4096, 0),))) == round(prefill * 1e9) == 89_656_370
    assert qwen(PassWork()) == 0
    # decoding one request beside that prefill costs a decode pass of its own on top, as AISimulate's runs price a
    # mixed pass (its prefill latency plus its decode step latency)
    mixed = qwen(PassWork(prefill_chunks=((4096, 0),), decode_requests=1, decode_context=1024))
    assert mixed == 89_656_370 + 6_135_609
    assert timing("qwen3-32b b200 tp2", "sglang")(PassWork(prefill_chunks=((4096, 0),))) == 119_899_430
    deepseek = timing("deepseek-v3 h200 tp8 ep8", "trtllm")
    # H200 TensorRT-LLM's DeepSeek-V3 decode, by hand (facts §88): the 83,878,302,400 B of weights, 2.466 % dense at
    # 4.8 TB/s x 0.74 x 0.907 and the routed 97.534 % at x 0.72 times the measured share (0.031 at one token, 0.734 at
    # 64), the experts' grouped GEMMs (2 x 671,026,419,200 x 0.97534 x 8 / 256 / 8 FLOPs a token at 1,978 TFLOP/s x
    # 0.2), the fp8 latent KV (35,136 B a token) at x 0.64, the MLA dip (61 layers x 6 us x the triangle 2^20 / 2^24
    # / 2^28 over 576 B x the KV tokens: none at 1,024 tokens, (28 - 25.17) / 4 of it at 64 x 1,024), 61 x 37 us, the
    # 0.75 ms pass, 61 MoE layers x 41 us, each token's dispatch (61 x 2 x 8 x 7,168 x 2 B x 7/8 at 450 GB/s x 2.2)
    # and 7.8 us
    def by_hand(batch: int, share: float) -> int:
        import math
        routed = 0.9753399651771623
        weights = 83_878_302_400 * ((1 - routed) / (4.8e12 * 0.74 * 0.907) + routed * share / (4.8e12 * 0.72))
        experts = 2 * 671_026_419_200 * routed * 8 / 256 / 8 / (1978e12 * 0.2)
        bits = math.log2(576 * batch * 1024)
        dip = 61 * 6e-6 * max(0.0, min((bits - 20) / 4, (28 - bits) / 4))
        return round((weights + 35_136 * batch * 1024 / (4.8e12 * 0.64) + dip + 61 * 37e-6 + 0.75e-3 + 61 * 41e-6
                      + batch * (experts + 61 * 2 * 8 * 7168 * 2 * 7 / 8 / (450e9 * 2.2) + 7.8e-6)) * 1e9)
    assert deepseek(PassWork(decode_requests=1, decode_context=1024)) == by_hand(1, 0.031) == 6_928_672
    assert deepseek(PassWork(decode_requests=64, decode_context=64 * 1024)) == by_hand(64, 0.734) == 26_651_549


def test_backends_differ_only_by_their_terms():
    """Same shape and keys for every backend; TensorRT-LLM routes MoE layers far cheaper than vLLM."""
    assert {tuple(sorted(t)) for t in BACKEND_TERMS.values()} == {tuple(sorted(BACKEND_TERMS["vllm"]))}
    one = PassWork(decode_requests=1, decode_context=1024)
    vllm, trtllm = (timing("deepseek-v3 h200 tp8 ep8", b)(one) for b in ("vllm", "trtllm"))
    assert trtllm < vllm / 2


def test_moe_reads_more_experts_as_the_batch_grows():
    """(1 - k/E)^T of the routed experts stay unread: 8 of 256 per token, so 64 tokens read most of them."""
    step = timing("deepseek-v3 h200 tp8 ep8", "vllm")
    times = [step(PassWork(decode_requests=b, decode_context=b * 1024)) for b in (1, 2, 8, 32, 64, 128)]
    assert times == sorted(times) and len(set(times)) == len(times)
