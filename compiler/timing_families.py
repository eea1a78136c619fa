"""Roofline terms of the model families AISimulate prices with a module of their own (Kimi K3, DeepSeek V4).

AISimulate 0.13 times DeepSeek-V3 and the dense models with its generic op graphs, which the per-backend terms of
timing_inputs.py follow; Kimi K3 (`sdk/models/kimi_k3.py`: 92 LatentMoE layers whose 896 routed experts work in a
3,584-wide latent space, KDA layers) and DeepSeek V4 (`deepseek_v4.py`: mxfp4 experts, its own attention module)
have their own graphs and measured kernels, so their MoE layers cost what those kernels cost, not what DeepSeek-V3's
do.  This table says, per family, what the catalog record cannot (the routed experts' real width and the number
of MoE layers) and, per backend, the MoE terms fitted to AISimulate's passes (docs/reference-facts.md §52):
``moe_layer`` (s per MoE layer and pass: routing, dispatch, launches), ``experts`` (the routed experts' read as a
share of HBM bandwidth, over bytes at the record's weight precision), ``expert_compute`` (their grouped GEMMs'
share of the weight precision's peak), ``all_to_all`` (the dispatch's share of NVLink).  A family or backend
missing here keeps the generic terms.
"""
from __future__ import annotations

from dataclasses import replace


def _table(points: tuple[tuple[int, float], ...], times: int, per: int = 1) -> tuple[tuple[int, float], ...]:
    """AISimulate's measured (tokens, ms) points as (tokens, s x `times` / `per`): the unit the timing term is kept in
    (s per layer x tensor degree, s x expert group)."""
    return tuple((tokens, ms * 1e-3 * times / per) for tokens, ms in points)


# DeepSeek V4 Flash B200 vLLM TP4's `context_attention` op (43 layers) at a prompt of n tokens from none cached: a
# table with its own knots, not a roofline (8.1 us a token at 3,000, 12.8 at 8,192, 10.4 at 16,384; facts §98)
DSV4_VLLM_PREFILL_ATTENTION = _table(
    ((128, 3.482), (256, 4.407), (512, 6.043), (1024, 9.028), (2048, 15.906), (3072, 25.035), (4096, 35.709),
     (6144, 63.761), (8192, 104.484), (10240, 120.158), (12288, 136.907), (16384, 170.985), (32768, 321.447)), 4, 43)

# Kimi K3 vLLM TP8 EP8's `context_moe` op (92 LatentMoE layers' routed experts) at n prefill tokens, in s x the expert
# group of 8, B200 and GB200: concave from 1k to 4k tokens (B200 100 us a token, then 72), where reads plus FLOPs are a
# line (facts §98); GB200's KDA conv1d costs ~98 ms a prefill pass (B200 ~30: its prefill layer 4.0 ms, not 1.1)
KIMI_B200_VLLM_CONTEXT_MOE = _table((
    (128, 54.08), (512, 95.13), (1024, 152.40), (2048, 254.62), (3072, 352.46), (4096, 426.53), (8192, 724.0),
    (16384, 1403.25)), 8)

KIMI_GB200_VLLM_CONTEXT_MOE = _table((
    (128, 69.86), (512, 128.84), (1024, 161.69), (2048, 227.62), (3072, 295.34), (4096, 361.39), (8192, 618.97),
    (16384, 1169.08)), 8)

FAMILIES = {
    # layer 0 is a dense SwiGLU layer (first_k_dense_replace 1); the routed experts map 3,584 -> 3,072 -> 3,584
    # AISimulate's KDA layers add ~30 ms of conv1d to every pass that prefills (vLLM), priced per attention layer;
    # LatentMoE dispatches latent-width activations, so the all-to-all moves less than the hidden-width bf16 bytes
    "kimi_k3": {"moe_layers": 92, "expert_width": 3584, "backends": {
        "vllm": {"moe_layer": 128e-6, "experts": 0.34, "expert_compute": 0.0134, "all_to_all": 9.0,
                 "prefill_layer": 500e-6, "prefill_ramp": 0,
                 "mtp_layers": 2.3},
        "sglang": {"moe_layer": 77e-6, "experts": 0.76, "expert_compute": 0.060, "all_to_all": 4.6,
                   "prefill_layer": 910e-6, "prefill_ramp": 0}},
        # per (GPU, backend): the share of the routed experts' read a decode-only pass of T tokens pays, AIS's plain
        # decode pass less kvreplay's other terms over the full read at 1,024-9,400 tokens of context (its MoE decode
        # rows are a table: B200 TP8 reads 1.1 % at 1 token, 13 % at 8, 54 % at 64; GB200 TP4 2.1 / 15 / 50 %; facts §98)
        "gpus": {("b200_sxm", "vllm"): {"prefill_experts": KIMI_B200_VLLM_CONTEXT_MOE, "compute": 0.18, "all_to_all": 3.0,
                                        "prefill_layer": 1.1e-3, "decode_experts": (
                     (1, 0.011), (2, 0.013), (3, 0.031), (4, 0.048), (6, 0.087), (8, 0.132), (12, 0.201), (16, 0.271),
                     (24, 0.345), (32, 0.415), (48, 0.455), (64, 0.528), (96, 0.548), (128, 0.572), (192, 0.645),
                     (256, 0.678), (384, 0.9), (512, 0.622))},
                 ("gb200", "vllm"): {"prefill_experts": KIMI_GB200_VLLM_CONTEXT_MOE, "compute": 0.14, "all_to_all": 3.0,
                                     "prefill_layer": 4.0e-3, "decode_experts": (
                     (1, 0.021), (2, 0.038), (3, 0.052), (4, 0.068), (6, 0.109), (8, 0.15), (12, 0.21), (16, 0.265),
                     (24, 0.309), (32, 0.351), (48, 0.384), (64, 0.5), (96, 0.531), (128, 0.541), (192, 0.532),
                     (256, 0.782), (384, 0.727), (512, 0.863))}}},
    # mxfp4 experts (0.53 B a parameter against the record's fp8: a read efficiency above 1 over fp8 bytes); its
    # compressed sparse attention does a fraction of a dense MLA's FLOPs in SGLang (an attention efficiency above 1);
    # vLLM's costs about a dense one's (a 3,128-token chunk after 3,072 cached tokens: 76.2 ms against 58.2 with none).
    # Fitted to prefills with and without a cached prefix and decodes of 1-64 (facts §60), not to AIS's mixed passes,
    # which its runs price as a prefill plus a decode
    "deepseek_v4": {"backends": {
        "vllm": {"moe_layer": 45e-6, "experts": 1.49, "expert_compute": 0.3, "all_to_all": 4.0,
                 "prefill_layer": 0.0, "prefill_attention": DSV4_VLLM_PREFILL_ATTENTION,
                 "prefix_pair": 1.8e-9 * 4 / 43, "prefix_cap": 4096, "decode_token": 14e-6},
        "sglang": {"moe_layer": 56e-6, "experts": 1.65, "expert_compute": 0.0724, "all_to_all": 3.35,
                   "prefill_layer": 46e-6, "attention": 5.6, "decode_token": 12.6e-6}},
        "gpus": {("b200_sxm", "vllm"): {"decode_experts": (
                     (1, 0.012), (2, 0.04), (3, 0.072), (4, 0.104), (6, 0.175), (8, 0.244), (12, 0.32), (16, 0.387),
                     (24, 0.452), (32, 0.511), (48, 0.782), (64, 0.85), (96, 0.84), (128, 0.759), (192, 0.692),
                     (256, 0.647), (384, 0.691), (512, 0.48))}}},
}
# MoE models AISimulate prices with its generic graphs (DeepSeek-V3), per GPU and backend where its measured kernels
# differ from the H200 ones the generic terms were fitted to (facts §60): Blackwell's MoE layers cost less per pass,
# B200 SGLang's context MLA kernel costs ~40 ms a pass however short the prompt (0.66 ms per layer), GB200's vLLM
# MLA decode is slower than B200's
GPU_MOE_TERMS = {
    # H200 SGLang's MLA prefill kernel costs 2.8 ns a query-key pair (4,096 / 8,192 / 16,384 tokens: 47.4 / 151.3 / 515.4
    # ms), 4.4x vLLM's, so four 2,000-token chunks cost 347 ms against 427 for one 8,000-token prompt: its attention
    # reaches 0.15 of the bf16 peak, and its dispatch and all-reduce (1.1 of NVLink) count the tokens beyond 4,096 at
    # 0.77 (facts §76); its MLA decode kernel (TensorRT-LLM's fallback rows) costs ~120 ns a cached token, 4,096 -> 8,192
    # tokens at batch 64 +31 ms: the fp8 KV read at 0.06 of HBM; its decode MoE rows are a table, not the share of
    # experts T tokens pick (`generation_moe_overlap` 6.44 / 7.29 / 11.68 / 14.24 / 17.73 / 22.85 ms at 1 / 4 / 8 / 16 /
    # 32 / 64 tokens): the share of the expert read each decode pass pays, least squares at 1,024 / 2,200 tokens of
    # context (decode b 1-128 x 1k-8k mean |error| 19.0 -> 0.6 %, facts §81)
    ("h200_sxm", "sglang"): {"attention": 0.15, "all_to_all": 1.1, "collective_large": 0.77, "kv": 0.06,
                             "decode_experts": ((1, 0.046), (2, 0.046), (4, 0.078), (8, 0.271), (16, 0.385),
                                                (32, 0.536), (48, 0.737), (64, 0.737), (96, 0.75), (128, 0.75))},
    # H200 TensorRT-LLM's and vLLM's decode MoE rows are tables too (`generation_moe_overlap` at 2,000 tokens of
    # context: TensorRT-LLM 3.26 / 3.95 / 6.54 / 10.14 / 12.60 / 16.87 / 21.62 ms at 1 / 2 / 4 / 8 / 16 / 32 / 64 tokens,
    # vLLM 6.77 / 6.88 / 8.35 / 11.06 / 14.45 / 16.54 / 22.81), +1.3 ms a token from 2 to 8, where 1 - (1 - 8/256)^T
    # rises half as fast: each a share curve as SGLang's, AIS's plain pass less kvreplay's other terms over the full
    # expert read (0.72 / 0.83 of HBM), averaged at 1,024 / 2,000 / 2,300 / 4,096 tokens of context; past 128 tokens
    # (verify passes of large batches) the experts' GEMMs grow with the tokens.  TensorRT-LLM's MLA decode reads its
    # fp8 latent KV at 0.64 of HBM (11.5 ns a token at batch 16-128), not a dense model's 0.80; its prefill's
    # `context_moe` is the experts' read plus their FLOPs (22 ms + 12.3 us a token, 808-4,096 tokens: grouped GEMMs
    # at 0.2 of the fp8 peak), its dispatch 8.5-10.7 us a token (all-to-all 2.2 x NVLink over kvreplay's bytes) and
    # its prefill attention kernel 80 us a layer; at batch 1-8 its MLA costs more per cached token than that read
    # (batch 1, 1,024 -> 4,096 tokens: +0.27 ms, the read 0.035), TensorRT-LLM's dense dip (DECODE_DIP) again, 6 us a
    # layer at most, from 1 MiB of KV read a layer to 16 MiB and back to none at 256 MiB.  Decode b 1-512 mean |error| TensorRT-LLM 8.1 -> 0.3 %, vLLM
    # 4.5 -> 0.5 %; their verify passes (nextn 2 / 1) 5.3 -> 0.3, 4.6 -> 0.3 %; TensorRT-LLM prefill 808-16k 6.0 -> 1.9 %
    # (facts §88)
    ("h200_sxm", "trtllm"): {"kv": 0.64, "all_to_all": 2.2, "expert_compute": 0.2, "prefill_layer": 80e-6,
                             "dip": 6e-6, "dip_bytes": (1 << 20, 1 << 24, 1 << 28),
                             "decode_experts": ((1, 0.031), (2, 0.054), (4, 0.161), (8, 0.31), (16, 0.402), (32, 0.583),
                                                (48, 0.737), (64, 0.734), (96, 0.77), (128, 0.793), (192, 0.803),
                                                (256, 0.867), (384, 1.035), (512, 1.075))},
    ("h200_sxm", "vllm"): {"decode_experts": ((1, 0.016), (2, 0.035), (4, 0.122), (8, 0.272), (16, 0.445),
                                              (32, 0.489), (48, 0.661), (64, 0.75), (96, 0.821), (128, 0.788),
                                              (192, 0.839), (256, 0.772), (384, 0.778), (512, 0.755))},
    ("b200_sxm", "vllm"): {"moe_layer": 89e-6, "experts": 0.85, "all_to_all": 0.63, "prefill_layer": 25e-6,
                           "compute": 0.255},
    ("gb200", "vllm"): {"moe_layer": 126e-6, "experts": 0.81, "all_to_all": 0.565, "prefill_layer": 45e-6,
                        "compute": 0.255},
    ("b200_sxm", "sglang"): {"moe_layer": 75e-6, "experts": 1.19, "all_to_all": 0.85, "prefill_layer": 688e-6,
                             "prefill_ramp": 0},
    # AISimulate has no GB200 SGLang context-MLA rows (it cannot price a prefill there): decode only
    ("gb200", "sglang"): {"moe_layer": 119e-6, "experts": 1.13, "all_to_all": 0.9},
    # TensorRT-LLM's Blackwell expert reads grow faster from batch 1 to 8 (B200 12.16 ms at 8 x 1k against 6.94 at 1)
    ("b200_sxm", "trtllm"): {"moe_layer": 60e-6, "experts": 0.775, "all_to_all": 1.19},
    ("gb200", "trtllm"): {"moe_layer": 60e-6, "experts": 0.775, "all_to_all": 1.19},
}
# DeepSeek-V3 with its routed experts split by width over the ranks (`moe_tensor` 8, no `moe_expert`), per (GPU,
# backend), fitted to AISimulate's H200 passes at TP8 / moe_tp 8 (facts §68).  vLLM: every rank computes its slice of
# every chosen expert, so none waits on a busier one (AIS draws expert loads from a power law): its context_moe costs
# 16.8 us a token against 26.5 under moe_ep 8, so the GEMMs reach 0.61 x 1.6 of the fp8 peak and a MoE layer costs
# 120 us, not 154.  TensorRT-LLM's width-split expert kernels are slower (context_moe 172.6 ms at 4,096 tokens against
# 71.3 under moe_ep 8): its experts' grouped GEMMs are a kernel of their own at 0.10 of the fp8 peak.  All three count a
# pass's all-reduce and dispatch tokens beyond the first 4,096 at 0.77 (AIS's measured collectives, facts §76):
# prefills of 8k-16k tokens were +5-14 % without it, and vLLM's GEMMs then fit at 0.9 of the fp8 peak.  A GPU missing
# here keeps the terms of moe_ep
EXPERT_TENSOR_TERMS = {
    ("h200_sxm", "vllm"): {"moe_layer": 120e-6, "experts": 0.9, "compute": 0.9, "collective_large": 0.77},
    ("h200_sxm", "trtllm"): {"moe_layer": 110e-6, "experts": 0.8, "expert_compute": 0.1, "collective_large": 0.77},
    # SGLang: its MLA and dispatch as under moe_ep 8 (GPU_MOE_TERMS), a smaller MoE-layer cost and faster expert GEMMs
    # (decode b 1-4 and prefill 128-16k, facts §76: mean |error| 21 -> 6.6 %; its decode at batch 8 and more is priced
    # from TensorRT-LLM's fallback rows, not fitted)
    ("h200_sxm", "sglang"): {"moe_layer": 60e-6, "experts": 1.0, "compute": 1.0, "attention": 0.2, "all_to_all": 1.1,
                             "collective_large": 0.77},
}
TERM_FIELDS = {"moe_layer": "moe_layer_overhead_s", "experts": "expert_efficiency",
               "expert_compute": "expert_compute_efficiency", "all_to_all": "all_to_all_efficiency",
               "layer": "layer_overhead_s", "attention": "attention_efficiency", "prefill_layer": "prefill_layer_overhead_s",
               "kv": "kv_efficiency", "weights": "weight_efficiency", "compute": "compute_efficiency",
               "decode_token": "decode_token_overhead_s", "prefill_ramp": "prefill_ramp_tokens",
               "collective_large": "collective_large_share", "decode_experts": "decode_expert_share",
               "dip": "decode_dip_s", "dip_bytes": "decode_dip_bytes",
               "prefill_attention": "prefill_attention_curve",
               "prefix_pair": "prefill_prefix_pair_s", "prefix_cap": "prefill_prefix_cap",
               "mtp_layers": "draft_layers_equivalent",
               "prefill_experts": "prefill_expert_curve"}


def family_routed_params(model: dict) -> float | None:
    """The routed experts' parameters where the family's experts are not `hidden_size` wide, else None."""
    family = FAMILIES.get(model.get("family"), {})
    if "expert_width" not in family:
        return None
    return family["moe_layers"] * model["num_experts"] * 3 * family["expert_width"] * model["moe_intermediate_size"]


def family_moe_layers(model: dict, layers: int) -> int:
    return FAMILIES.get(model.get("family"), {}).get("moe_layers", layers)


def family_terms(model: dict, backend: str, terms, gpu: str | None = None, moe: bool = False,
                 expert_tensor: bool = False):
    """`terms` with the family's fitted MoE terms for `backend` in place of the generic ones (for an MoE model of no
    family: the GPU's, where it has its own, or those of experts split by width when `expert_tensor`)."""
    if model.get("family") in FAMILIES:
        family = FAMILIES[model["family"]]
        fitted = {**family.get("backends", {}).get(backend, {}), **family.get("gpus", {}).get((gpu, backend), {})}
    elif moe and expert_tensor and (gpu, backend) in EXPERT_TENSOR_TERMS:
        fitted = EXPERT_TENSOR_TERMS[(gpu, backend)]
    else:
        fitted = GPU_MOE_TERMS.get((gpu, backend), {}) if moe else {}
    return replace(terms, **{TERM_FIELDS[key]: value for key, value in fitted.items()}) if fitted else terms
