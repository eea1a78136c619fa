"""Default step times: a roofline of one pass from the model and hardware catalogs.

One pass of one tensor-parallel rank (TP degree ``tp``) with prefill chunks
``(n_i new tokens, c_i cached tokens)`` and ``R`` decoding requests whose
contexts sum to ``C``:

    T      = sum(n_i) + R                                   tokens in the batch
    A      = sum(n_i * (c_i + n_i/2)) + C                   (query, key) pairs attended
    FLOPs  = (2 * P_active * T + 4 * L_attn * H * D * A) / tp
    t_comp = FLOPs / (peak_TFLOPS[weight precision] * 1e12 * E_COMPUTE[weight precision])

    W      = weights_per_gpu(model, tp) - input embedding table (a row lookup, not read whole)
    B_w    = W * min(1, T * P_active / P)                   MoE: only the experts touched
    B_kv   = kv_bytes_per_token(rank) * (C + sum(c_i + n_i))  read cached KV, write new KV
    t_mem  = B_w / (HBM * E_WEIGHTS[weight precision]) + B_kv / (HBM * E_KV)

    t_ar   = 2 * L * (T * hidden * 2 B * 2(tp-1)/tp / NVLink + AR_LATENCY)   only when tp > 1
    pass   = max(t_comp, t_mem) + PASS_OVERHEAD + t_ar       (0 for an empty pass)

P = ``params``; P_active = ``active_params``, else for MoE an estimate
``P - routed * (1 - k/E)`` with routed = min(P, L * E * 3 * hidden *
moe_intermediate_size), else P.  L = ``num_layers``, L_attn = ``kv_layers`` (the
layers that attend over the whole context; default L), H = attention heads,
D = ``head_dim``.  Peak FLOPS follow the weight precision (bf16 -> bf16 TFLOPS,
fp8 -> fp8, fp4 -> fp4, falling back to fp8 then bf16 when the GPU has no such
units, e.g. fp8 weights on A100 run at bf16 rate).  HBM and NVLink are the
catalog's decimal GB/s (NVLink per GPU, one direction; a ring all-reduce moves
2(tp-1)/tp of the message per GPU).  The compiler resolves these inputs into the
plan's roofline record (compiler/timing_inputs.py): P_active, the peak FLOPS of the
weight precision, W, and the KV bytes per token per rank (GQA heads split by TP,
MLA latent replicated, only ``kv_layers``); this module holds the formula and
its calibration.

Constants, calibrated against AISimulate op-level estimates (h200_sxm, vLLM,
one request, TP1): Qwen3-32B-FP8 TTFT 66 ms @1k and 1,309 ms @16k (2 chunks of
8192), decode 14.2-14.9 ms @1k-16k context; Llama-3.1-8B TTFT 21 ms @1k, decode
4.9 ms.  Block-scaled FP8 GEMMs (per-128 scales, dynamic activation
quantisation) reach only about half of the FP8 peak and of HBM bandwidth in
those figures, bf16 GEMMs much more, hence per-precision efficiencies:

    E_COMPUTE   bf16/fp16 0.80, fp8/fp4 0.52
    E_WEIGHTS   bf16/fp16 0.75, fp8/fp4 0.50
    E_KV        0.60 (decode attention reads; from the 14.2 -> 14.9 ms slope)
    PASS_OVERHEAD 0.5 ms (scheduler, sampling, launch per pass)
    AR_LATENCY  10 us per all-reduce (AISimulate's p2p_latency)

The figures are vLLM's; SGLang and TensorRT-LLM use the same constants (no
measured figures for them), so ``backend`` is only checked.  Pipeline
parallelism is not modelled: a pass is one rank's whole forward.
"""
from __future__ import annotations

from ..virtual_time import seconds_to_ns
from . import PassWork, Timing

ACTIVATION_BYTES = 2  # all-reduced and dispatched hidden states are bf16 whatever the weights are


def default_timing(inputs) -> Timing:
    """The roofline provider of a plan's roofline record."""
    tp, terms = inputs.tensor, inputs.terms
    layers = inputs.num_layers
    active = inputs.active_params

    flops_per_token = 2 * active / tp
    flops_per_pair = 4 * inputs.attention_layers * inputs.attention_heads * inputs.head_dim / tp
    flops_per_s = inputs.peak_flops * terms.compute_efficiency
    attention_flops_per_s = inputs.attention_peak_flops * terms.attention_efficiency
    hbm = inputs.memory_bandwidth_gbps * 1e9
    weight_s = inputs.weight_bytes / (hbm * terms.weight_efficiency)
    routed = inputs.routed_weight_fraction
    kv_s_per_token = inputs.kv_bytes_per_token / (hbm * terms.kv_efficiency)
    nvlink = (inputs.nvlink_bandwidth_gbps or 0) * 1e9
    if tp > 1 and nvlink:
        # hardware with no GPU-to-GPU figure (opal's worker.hw: tflops, mem_bw_TBps, tp) is timed as opal's
        # roofline times it: tensor parallelism divides the work, with no all-reduce term
        ar_s_per_token = 2 * layers * inputs.hidden_size * ACTIVATION_BYTES * 2 * (tp - 1) / tp / nvlink
        ar_s_fixed = 2 * layers * terms.all_reduce_latency_s
    else:
        ar_s_per_token = ar_s_fixed = 0.0
    ep = inputs.expert_parallel
    if ep > 1 and nvlink:
        # every rank holds every token (tensor-parallel attention) and sends each to its k experts and back
        a2a_s_per_token = inputs.moe_layers * 2 * inputs.experts_per_token * inputs.hidden_size * ACTIVATION_BYTES \
            * (ep - 1) / ep / (nvlink * terms.all_to_all_efficiency)
    else:
        a2a_s_per_token = 0.0
    fixed_s = terms.pass_overhead_s + layers * terms.layer_overhead_s \
        + inputs.moe_layers * terms.moe_layer_overhead_s + ar_s_fixed
    miss = 1 - inputs.experts_per_token / inputs.experts if inputs.experts else 0.0

    def timing(work: PassWork) -> int:
        tokens = work.prefill_tokens + work.decode_requests
        if tokens == 0:
            return 0
        pairs = work.decode_context + sum(n * (c + n / 2) for n, c in work.prefill_chunks)
        kv_tokens = work.decode_context + sum(c + n for n, c in work.prefill_chunks)
        compute = flops_per_token * tokens / flops_per_s + flops_per_pair * pairs / attention_flops_per_s
        # routed experts: a token picks k of E, so T tokens leave a (1 - k/E)^T share of them unread
        touched = 1 - routed * miss ** tokens
        memory = weight_s * touched + kv_s_per_token * kv_tokens
        seconds = max(compute, memory) + fixed_s + (ar_s_per_token + a2a_s_per_token) * tokens
        return seconds_to_ns(seconds)

    return timing
