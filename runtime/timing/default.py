"""Default step times: a roofline of one pass from the model and hardware catalogs, with per-backend terms.

One pass of one tensor-parallel rank (TP degree ``tp``, expert parallelism ``ep``) with prefill chunks
``(n_i new tokens, c_i cached tokens)`` and ``R`` decoding requests whose contexts sum to ``C``:

    T      = sum(n_i) + R                                   tokens in the batch
    t_gemm = max(2 * P_gemm * T / tp / (peak[weight precision] * e_compute),
                 W (1 - f_routed) / (HBM * e_weights) + W f_routed (1 - (1 - k/E)^T) / (HBM * e_experts))
                                                            MoE: T tokens leave (1 - k/E)^T of the experts unread
                                                            (a decode-only pass of a backend with a measured
                                                            curve: `decode_expert_share` at T, linearly between points)
                                                            fp8 dense: T in the FLOP term is s * rows + (1 - s) * T,
                                                            rows = T rounded up to whole 256-token tiles (64, 128
                                                            below 129), s = gemm_tile_share
                                                            bf16 with a knee K (H200 SGLang TP1-2): T in the FLOP term is
                                                            min(T, K) + gemm_beyond_share * max(0, T - K)
    t_attn = a(sum(n_i * (c_i + n_i/2)), sum(c_i + n_i)) + max(0, a(C, C) - L_attn * kv_hidden)
                                                            prefill and decode attention, two kernels, where:
    a(P, K) = max(4 * L_attn * H * D * P / tp / (peak[bf16] * e_attention), kv_bytes_per_token * K / (HBM * e_kv))
                                                            (kv_hidden: the read a decode kernel's latency hides)
    t_ar   = 2 * L * (T' * hidden * 2 B / (NVLink * e_all_reduce) + all_reduce_latency)  only when tp > 1 (and
                                                            not fused into the backend's MoE combine); T' = T up to
                                                            4,096 tokens, each token beyond counted
                                                            `collective_large_share`
    t_elem = L * T * (21.5 B * hidden + 7.7 B * ffn_width / tp) / HBM   add-norms and a dense FFN's gate activation
    t_a2a  = L_moe * T' * 2 * k * hidden * 2 B * (g-1)/g / (NVLink * e_all_to_all)       only when the MoE group
                                                            g = moe_expert x moe_tensor > 1
    pass   = t_gemm + t_attn + max(L * layer_overhead, t_elem) + pass_overhead + L_moe * moe_layer_overhead
             + R * decode_token_overhead + t_ar + t_a2a     (0 for an empty pass)
             + max(0, R - decode_tail_from) * decode_tail   a dense model's decode attention over fp8 KV
             + L_attn * decode_dip * tri(log2(C * kv_bytes_per_token / L_attn))   a decode kernel's dip in
                                                            efficiency at middling reads (TensorRT-LLM on Hopper)
             + L_attn * prefill_layer_overhead * r          only when the pass prefills: r = 1 from `prefill_ramp_tokens`
                                                            prefill tokens on, 0.25 + 0.75 x tokens / ramp below
    mixed  = pass(the prefill chunks alone) + pass(the R decodes alone)   a pass that both prefills and decodes, as
                                                            AISimulate's runs price one (facts §60)

A speculative verify pass (`speculative`) counts each draft as one more decode token of its request (in T, A and
the experts; in the KV read only when `draft_context` says each draft reads its request's KV again), and a
decode step of native MTP (a mixed pass's too, beside its prefill) is scaled by (L + nextn) / L, as AISimulate's
default timing prices them (facts §36, §88).

P_gemm (the active parameters without the embedding table and the logits GEMM, which runs for a sequence's
last token only), W (weights per GPU without the input embedding), f_routed (the routed experts' share of the
weights), the peaks and the KV bytes per token of one rank come from the plan's roofline record
(compiler/timing_inputs.py), and so do the terms ``e_*`` and the overheads: one small table per backend,
calibrated against AISimulate 0.13's op-level estimates, which sum measured kernel times per backend
(docs/reference-facts.md §20 and §42, "Default timing calibration").  What a bare roofline leaves out and these terms
add: small kernels of every layer (norms, rotary, launches: ``layer_overhead``), the cost each decode token adds
whatever its context (sampling, its row in every kernel: ``decode_token_overhead``), MoE routing, grouping
and dispatch per MoE layer (``moe_layer_overhead``, vLLM's far larger than TensorRT-LLM's), the token
all-to-all to the experts' GPUs (every rank holds every token under tensor-parallel attention), expert
weights read only where tokens go, attention at the bf16 rate whatever the weights are, and Blackwell's
GEMMs reaching a smaller share of their catalog peak.  Pipeline parallelism is not modelled: a pass is
one rank's whole forward; nor are links between nodes (a TP16 Kimi K3 is about 3x too fast).
"""
from __future__ import annotations

import math
from bisect import bisect_left

from ..virtual_time import seconds_to_ns
from . import PassWork, Timing

ACTIVATION_BYTES = 2  # all-reduced and dispatched hidden states are bf16 whatever the weights are
# HBM bytes per element AISimulate's measured elementwise kernels cost, every GPU and model alike (facts §42): both
# add-norms of a layer per hidden element, the gate activation per FFN element
NORM_BYTES = 21.5
ACTIVATION_GATE_BYTES = 7.7
PREFILL_FLOOR = 0.25  # the prefill attention kernel's share of its cost that a chunk of a few tokens pays
COLLECTIVE_FULL_TOKENS = 4096  # a pass's collectives pay their full rate per token up to this many tokens


def measured(points, keys: list[int], x: float, flat_past_end: bool = False) -> float:
    """A measured table at `x`: linear from (0, 0) to its first point, between its points, and past its last point
    on from its last two (or its last value, `flat_past_end`)."""
    at = bisect_left(keys, x)
    if at == len(points):
        if flat_past_end:
            return points[-1][1]
        at -= 1
    (lo_t, lo_s), (hi_t, hi_s) = (points[at - 1] if at else (0, 0.0)), points[at]
    return lo_s + (hi_s - lo_s) * (x - lo_t) / (hi_t - lo_t)


def default_timing(inputs) -> Timing:
    """The roofline provider of a plan's roofline record."""
    tp, terms = inputs.tensor, inputs.terms
    layers = inputs.num_layers

    flops_per_token = 2 * inputs.gemm_params / tp
    flops_per_pair = 4 * inputs.attention_layers * inputs.attention_heads * inputs.head_dim / tp
    flops_per_s = inputs.peak_flops * terms.compute_efficiency
    attention_flops_per_s = inputs.attention_peak_flops * terms.attention_efficiency
    hbm = inputs.memory_bandwidth_gbps * 1e9
    routed = inputs.routed_weight_fraction
    # the routed experts are read by the MoE's grouped GEMMs, at their own share of the bandwidth
    weight_s = inputs.weight_bytes * (1 - routed) / (hbm * terms.weight_efficiency)
    expert_s = inputs.weight_bytes * routed / (hbm * terms.expert_efficiency)
    kv_s_per_token = inputs.kv_bytes_per_token / (hbm * terms.kv_efficiency)
    nvlink = (inputs.nvlink_bandwidth_gbps or 0) * 1e9
    if tp > 1 and nvlink and terms.all_reduce:
        # hardware with no GPU-to-GPU figure (opal's worker.hw: tflops, mem_bw_TBps, tp) is timed as opal's
        # roofline times it: tensor parallelism divides the work, with no all-reduce term
        ar_s_per_token = 2 * layers * inputs.hidden_size * ACTIVATION_BYTES / (nvlink * terms.all_reduce_efficiency)
        ar_s_fixed = 2 * layers * terms.all_reduce_latency_s
    else:
        ar_s_per_token = ar_s_fixed = 0.0
    # the dispatch spans the MoE group whether it splits the experts (moe_expert) or their widths (moe_tensor):
    # AISimulate prices DeepSeek-V3's pre / post dispatch alike at TP8 with moe_tp 8 and with moe_ep 8 (17.32 ms
    # each at 4,096 tokens, vLLM H200; facts §68)
    ep = inputs.expert_parallel * inputs.expert_tensor
    if ep > 1 and nvlink:
        # every rank holds every token (tensor-parallel attention) and sends each to its k experts and back
        a2a_s_per_token = inputs.moe_layers * 2 * inputs.experts_per_token * inputs.hidden_size * ACTIVATION_BYTES \
            * (ep - 1) / ep / (nvlink * terms.all_to_all_efficiency)
    else:
        a2a_s_per_token = 0.0
    # elementwise kernels of every token and layer: the two fused add-norms over the (replicated) hidden state, and a
    # dense FFN's gate activation over its tensor-parallel share (MoE experts fuse theirs into the grouped GEMM)
    elementwise_s_per_token = layers * (NORM_BYTES * inputs.hidden_size
                                        + ACTIVATION_GATE_BYTES * inputs.ffn_width / tp) / hbm
    layer_s = layers * terms.layer_overhead_s
    fixed_s = terms.pass_overhead_s \
        + inputs.moe_layers * terms.moe_layer_overhead_s + ar_s_fixed
    miss = 1 - inputs.experts_per_token / inputs.experts if inputs.experts else 0.0

    per_decode_s = terms.decode_token_overhead_s
    tail_from, tail_s = terms.decode_tail_from, terms.decode_tail_s
    # a pass that prefills launches the prefill attention kernel in every attention layer, however short the chunk
    prefill_s = inputs.attention_layers * terms.prefill_layer_overhead_s
    ramp = terms.prefill_ramp_tokens

    def prefill_kernel(tokens: int) -> float:
        # AISimulate's prefill attention of a few tokens costs about a quarter of its launch-bound cost at 256 and
        # more (Qwen3-8B H200: a 16-token prefill 6.60 ms, a decode of one 6.02; 256 tokens 8.61)
        if not ramp or tokens >= ramp:
            return prefill_s
        return prefill_s * (PREFILL_FLOOR + (1 - PREFILL_FLOOR) * tokens / ramp)

    def attention(pairs: float, kv_tokens: float) -> float:
        return max(flops_per_pair * pairs / attention_flops_per_s, kv_s_per_token * kv_tokens)

    kv_hidden_s = inputs.attention_layers * terms.decode_kv_hidden_s

    dip_s = inputs.attention_layers * terms.decode_dip_s
    dip_lo, dip_mid, dip_hi = (math.log2(b) if b else 0.0 for b in terms.decode_dip_bytes)
    kv_bytes_per_layer = inputs.kv_bytes_per_token / inputs.attention_layers

    def dip(kv_tokens: float) -> float:
        # the kernel's efficiency dips at middling reads (TensorRT-LLM on Hopper), deepest at `dip_mid`
        if not dip_s or kv_tokens <= 0:
            return 0.0
        x = math.log2(kv_tokens * kv_bytes_per_layer)
        if x <= dip_lo or x >= dip_hi:
            return 0.0
        return dip_s * ((x - dip_lo) / (dip_mid - dip_lo) if x <= dip_mid else (dip_hi - x) / (dip_hi - dip_mid))

    def decode_attention(pairs: float, kv_tokens: float) -> float:
        # the first microseconds of each layer's read hide under the kernel's launch and latency, already in
        # the layer's small kernels (SGLang: a decode pass of 2 x 4,500 tokens costs 0.24 ms over 2 x 1,024, not 0.33)
        return max(0.0, attention(pairs, kv_tokens) - kv_hidden_s) + dip(kv_tokens)

    if terms.expert_compute_efficiency:
        # the routed experts' grouped GEMMs are kernels of their own, bound by their FLOPs or their reads
        expert_flops_per_token = 2 * inputs.params * routed * inputs.experts_per_token / inputs.experts / tp
        expert_flops_per_s = inputs.peak_flops * terms.expert_compute_efficiency
        flops_per_token -= expert_flops_per_token
    else:
        expert_flops_per_token, expert_flops_per_s = 0.0, 1.0

    tile, tile_share = terms.gemm_tile_tokens, terms.gemm_tile_share
    knee, beyond = terms.gemm_knee_tokens, terms.gemm_beyond_share
    large_share = terms.collective_large_share

    def collective_tokens(tokens: int) -> float:
        # AISimulate's measured all-reduces and MoE dispatches move the tokens beyond a pass's first 4,096 at 0.77 of
        # the cost per token (DeepSeek-V3 H200 TP8 all-reduce 34.64 / 61.32 / 113.45 ms at 4,096 / 8,192 / 16,384
        # tokens, each dispatch 17.32 / 30.66 / 56.72; facts §76), where the terms count that share
        if tokens <= COLLECTIVE_FULL_TOKENS:
            return tokens
        return COLLECTIVE_FULL_TOKENS + large_share * (tokens - COLLECTIVE_FULL_TOKENS)

    curve = terms.decode_expert_share
    curve_tokens = [t for t, _ in curve]

    def expert_share(tokens: int, decode_only: bool) -> float:
        # routed experts: a token picks k of E, so T tokens leave (1 - k/E)^T of them unread, unless the backend's
        # decode MoE kernel has a measured curve of its own (linear from (0, 0) between its points, flat past the last)
        if not (curve and decode_only):
            return 1 - miss ** tokens
        return measured(curve, curve_tokens, tokens, flat_past_end=True)

    moe_table = terms.prefill_expert_curve
    moe_keys = [t for t, _ in moe_table]
    moe_group = inputs.expert_parallel * inputs.expert_tensor

    def gemms(tokens: int, decode_only: bool) -> float:
        if moe_table and not decode_only:
            # the routed experts' grouped GEMMs of a prefill pass, as AISimulate's measured `context_moe` table prices
            # them (Kimi K3 B200 TP8 EP8: 152.4 ms at 1,024 tokens, 352.5 at 3,072, 426.5 at 4,096, 724.0 at 8,192)
            experts_s = measured(moe_table, moe_keys, tokens) / moe_group
            return max(flops_per_token * tokens / flops_per_s, weight_s) + experts_s
        experts = expert_s * expert_share(tokens, decode_only)
        if tile:
            # rows are computed in whole tiles: AISimulate's fp8 GEMMs at 257 tokens cost what they cost at 512;
            # below half a tile its steps are the powers of two from 64 (65 tokens cost what 128 do)
            whole = -(-tokens // tile) * tile if 2 * tokens > tile else max(64, 1 << (tokens - 1).bit_length())
            tokens = tile_share * whole + (1 - tile_share) * tokens
        if knee and tokens > knee:
            # AISimulate's H200 SGLang bf16 GEMM tables cost ~12 % more per row beyond ~3.5k rows than below (Qwen3-8B:
            # 18.2 us a token at 3,600, 21.7 from 4,096 to 16,384; facts §87)
            tokens = knee + beyond * (tokens - knee)
        if expert_flops_per_token:
            # AISimulate's measured grouped GEMMs cost their reads plus their FLOPs (Kimi K3: 70 ms + 81 us per
            # token at 1k-16k tokens), as a kernel that does not overlap the two would
            return max(flops_per_token * tokens / flops_per_s, weight_s) \
                + expert_flops_per_token * tokens / expert_flops_per_s + experts
        return max(flops_per_token * tokens / flops_per_s, weight_s + experts)

    mtp_layers = terms.draft_layers_equivalent
    table = terms.prefill_attention_curve
    table_tokens = [t for t, _ in table]
    table_layers = inputs.attention_layers / tp
    prefix_pair_s, prefix_cap = terms.prefill_prefix_pair_s, terms.prefill_prefix_cap

    def prefill_attention(chunks: tuple[tuple[int, int], ...]) -> float:
        if not table:
            return attention(sum(n * (c + n / 2) for n, c in chunks), sum(c + n for n, c in chunks))
        # AISimulate's runs price a pass's k chunks as `predict_prefill_latency(k, mean prompt, mean prefix)`: k chunks
        # of the mean prompt after the mean prefix (DeepSeek V4 vLLM, chunks of 1,215 after 8,185 and 6,972: 2 x 4,094
        # after 4,092, 139.2 ms of attention where each chunk alone costs AIS 18.9 + 80.0; facts §98); a chunk costs
        # the table at its new tokens plus a term in new x cached tokens up to the cap (AIS's 1,024 new tokens: 9.03 ms
        # after none, 10.51 after 1,024, 12.06 after 2,048, 15.89 after 4,096, 15.98 after 8,192)
        k = len(chunks)
        end, prefix = sum(c + n for n, c in chunks) // k, sum(c for _, c in chunks) // k
        new = end - prefix
        return k * table_layers * (measured(table, table_tokens, new) + prefix_pair_s * new * min(prefix, prefix_cap))

    def seconds(work: PassWork, decode_tokens: int, decode_pairs: float, decode_kv: float) -> float:
        if work.prefill_chunks and decode_tokens:
            # AISimulate's runs price a pass that prefills and decodes as a prefill pass plus a decode pass: its
            # `predict_prefill_latency(chunks, mean prompt, mean prefix)` plus `decode_step_latency(decodes, mean
            # context)` (DeepSeek V4 vLLM, 4 chunks + 2 decodes: 125.756 + 5.561 = 131.317 ms, the run's pass; facts §60)
            return seconds(PassWork(prefill_chunks=work.prefill_chunks), 0, 0.0, 0.0) \
                + seconds(PassWork(), decode_tokens, decode_pairs, decode_kv)
        tokens = work.prefill_tokens + decode_tokens
        # the GEMMs, the prefill attention and the decode attention are kernels of their own, each bound by its
        # compute or its reads
        gemm = gemms(tokens, not work.prefill_chunks)
        prefill = prefill_attention(work.prefill_chunks) if work.prefill_chunks else 0.0
        # a layer's small kernels cost their launches until the tokens make them memory-bound
        small = max(layer_s, elementwise_s_per_token * tokens)
        return gemm + prefill + decode_attention(decode_pairs, decode_kv) + small + fixed_s \
            + (ar_s_per_token + a2a_s_per_token) * collective_tokens(tokens) + per_decode_s * decode_tokens \
            + (tail_s * (decode_tokens - tail_from) if tail_s and decode_tokens > tail_from else 0.0) \
            + (prefill_kernel(work.prefill_tokens) if work.prefill_chunks else 0.0)

    def speculative(work: PassWork) -> int:
        """A verify pass, as AISimulate's default timing prices one (facts §36): every draft is one more decode
        token of its request (GEMMs, experts, all-reduce, attention over its request's context; the KV read again
        only when `draft_context` says so), and the decode step also runs native MTP's `draft_layers`, priced as
        that many more of the model's layers (AIC's generation graph).  A pass that also prefills is its prefill
        plus that decode step, MTP layers included (AISimulate's runs; its prefill, the context graph, has none:
        facts §88)."""
        drafts = work.draft_tokens
        pairs = work.decode_context + drafts * work.decode_context / work.decode_requests
        pass_s = seconds(PassWork(), work.decode_requests + drafts, pairs, work.decode_context + work.draft_context)
        if work.draft_layers:
            # Kimi K3's MTP pass adds the same whatever the drafts (KDA's verify kernels and DSPARK's small draft
            # model: AIS 1.025x the plain pass of the same tokens at nextn 1, 1.027x at 2): its layers' equivalent
            pass_s *= (layers + (mtp_layers or work.draft_layers)) / layers
        if work.prefill_chunks:
            pass_s += seconds(PassWork(prefill_chunks=work.prefill_chunks), 0, 0.0, 0.0)
        return seconds_to_ns(pass_s)

    def timing(work: PassWork) -> int:
        if work.draft_tokens:
            return speculative(work)
        if not work.prefill_chunks and not work.decode_requests:
            return 0
        return seconds_to_ns(seconds(work, work.decode_requests, work.decode_context, work.decode_context))

    return timing
