"""Step-time records of the finished plan: fixed times in ns, exact polynomials, roofline inputs.

`timing_record` turns a role's ``timing`` block (``fixed``, ``polynomial`` or ``default``) into
the record its runtime provider reads.  For the roofline (``default``) this is where the model
and hardware catalogs are read: active parameters (estimated for MoE without ``active_params``),
the tensor-core rate of the weight precision, the weight bytes a forward reads and the KV bytes
per token of one rank.  The roofline's formula and calibration constants stay with the runtime
provider (runtime/timing/default.py), which reads only this record.
"""
from __future__ import annotations

from dataclasses import replace

from .durations import ms_coefficients_to_ns, ms_to_ns
from .geometry.kv_bytes import DTYPE_BYTES, native_bytes_per_token
from .geometry.memory import embedding_params, weights_per_gpu
from .timing_records import FixedTiming, PolynomialTiming, RooflineTerms, RooflineTiming, Timing
from .timing_families import family_moe_layers, family_routed_params, family_terms

BACKENDS = ("vllm", "sglang", "trtllm")
LOW_PRECISION = ("fp8", "fp4")
# tensor-core precision to try for each weight precision, best first
TFLOPS_KEYS = {"bfloat16": ("bf16",), "float16": ("fp16", "bf16"), "fp8": ("fp8", "bf16"),
               "fp4": ("fp4", "fp8", "bf16")}
# the roofline prices KV by its width only, so a KV dtype counts as the dtype of its byte width
KV_DTYPE_BY_BYTES = {1: "fp8", 2: "bfloat16", 4: "float32"}


# The roofline's terms per backend, calibrated against AISimulate 0.13's op-level (measured-kernel) estimates
# (docs/reference-facts.md §20 and §42, "Default timing calibration"): efficiencies per weight
# precision ("high": bf16/fp16, "low": block-scaled fp8/fp4; a low-precision weight read is the share "low_weights"
# of the GPU's bf16 read) and KV precision (an fp8 KV cache is read at a smaller share of the bandwidth), fixed
# costs in seconds; "moe_all_reduce": False says the backend's MoE layers fold the tensor-parallel all-reduce into
# the expert combine (AISimulate prices no all-reduce for TensorRT-LLM's DeepSeek-V3).  The backends share the
# shape; only these numbers differ.
# terms every backend shares: small kernels per layer, the prefill attention kernel per layer, all-reduce latency,
# the routed experts' read (DeepSeek-V3's measured MoE kernels, batch 1-128)
SHARED_TERMS = {"layer": 37e-6, "prefill_layer": 58e-6, "prefill_ramp": 256, "all_reduce": 10e-6, "experts": 0.83}
BACKEND_TERMS = {
    "vllm": {**SHARED_TERMS, "compute": {"high": 0.78, "low": 0.61}, "low_weights": 0.773,
             "kv": {"high": 0.92, "low": 0.65}, "attention": 0.65, "pass": 0.5e-3, "decode_token": 8.1e-6,
             "moe_layer": 154e-6, "moe_all_reduce": True, "all_to_all": 0.8, "kv_hidden": 0.0},
    "sglang": {**SHARED_TERMS, "compute": {"high": 0.73, "low": 0.59}, "low_weights": 0.773,
               "kv": {"high": 0.92, "low": 0.51}, "attention": 0.56, "pass": 0.5e-3, "decode_token": 5.3e-6,
               "moe_layer": 92e-6, "moe_all_reduce": True, "all_to_all": 0.9, "kv_hidden": 6e-6},
    "trtllm": {**SHARED_TERMS, "compute": {"high": 0.79, "low": 0.585}, "low_weights": 0.907,
               "kv": {"high": 0.92, "low": 0.80}, "attention": 0.60, "pass": 0.75e-3, "decode_token": 7.8e-6,
               "moe_layer": 41e-6, "moe_all_reduce": False, "all_to_all": 1.1, "experts": 0.72,
               "kv_hidden": 0.0},
}
# the share of the hopper-relative GEMM efficiency each architecture's measured kernels reach at its catalog peak
ARCHITECTURE_COMPUTE = {"blackwell": 0.90}
ARCHITECTURE_ATTENTION = {"blackwell": 0.83}  # likewise for the prefill attention kernels
# the share of HBM bandwidth a bf16 weight read reaches, per GPU and shared by every backend: AISimulate's measured
# decode GEMMs read a larger share of H100's 3.35 TB/s than of H200's 4.8 TB/s (facts, "Default timing calibration")
GPU_WEIGHT_EFFICIENCY = {"h100_sxm": 0.79, "h200_sxm": 0.74, "b200_sxm": 0.76, "gb200": 0.76}
WEIGHT_EFFICIENCY = 0.75  # a GPU without a calibrated figure (A100, inline hardware)
# bf16 KV reads of decode attention on Ampere: AISimulate's A100 vLLM and SGLang kernels read 0.66 / 0.52 of HBM (batch
# 64 at 16k tokens: 128.0 / 137.3 ms; SGLang refitted with its weight read, §68), TensorRT-LLM's the 0.92 of every other
# GPU (facts §52)
GPU_KV_EFFICIENCY = {("a100_sxm", "vllm"): 0.66, ("a100_sxm", "sglang"): 0.52}
# SGLang's A100 GEMMs read the weights at 0.66 of HBM, not the 0.75 of an uncalibrated GPU (Qwen3-8B, a batch-1 decode:
# 10.91 ms of GEMMs for 15.1 GB; with its decode attention at 0.52, fitted with it over Qwen3-8B and Qwen3-32B TP2
# decodes of 1-64 x 1k-16k: facts §68)
GPU_BACKEND_WEIGHT_EFFICIENCY = {("a100_sxm", "sglang"): 0.66}
# AISimulate's measured all-reduces move a pass's hidden states (4,096 tokens) at this share of the per-GPU NVLink
# figure by TP degree: TP2 0.51 (H200) and 0.45 (B200), TP4 0.41 (H100, H200), TP8 0.46 (H200)
ALL_REDUCE_EFFICIENCY = {2: 0.48, 4: 0.41, 8: 0.46}
ALL_REDUCE_OTHER = 0.44
# a dense model's all-reduce latency (s) by (GPU, TP degree) where AISimulate's measured kernels differ from the
# shared figure: H100 TP2 all-reduces of a decode pass cost 2.6-4.4 us each at 1-8 tokens (Qwen3-8B, facts §80); the
# least-squares figure over its TP2 decodes is 4.5 (TensorRT-LLM) to 7 us (SGLang), as the per-layer terms carry the rest
GPU_ALL_REDUCE_LATENCY = {("h100_sxm", 2): 5e-6}
# AISimulate's measured block-scaled (fp8) GEMMs step every 256 tokens (Qwen3-32B-FP8 H200: 37.3 ms at 512 tokens,
# 48.3 at 513, flat to 768); this share of a dense model's GEMM FLOP time is paid per whole 256-token tile (facts §52).
# MoE models keep smooth GEMMs (their expert tables are priced apart; DeepSeek-V3's passes are fitted without tiles)
LOW_PRECISION_TILE = (256, 0.9)
# AISimulate's H200 decode attention over fp8 KV costs a dense model ~40 us more a request than its KV read from a
# batch of ~64 on (Qwen3-32B-FP8 vLLM, 512 tokens each: 4.93 ms at 64, 11.84 at 256, 23.87 at 512), where kvreplay's
# fixed costs cover the smaller batches: each decode token beyond FP8_KV_TAIL_FROM adds this many s, per (GPU, backend),
# least squares over batches 96-512 (facts §68).  H100's measured kernels cost less (vLLM 16 us), B200's nothing more;
# a setup missing here was not fitted.  MoE models keep their own attention (DeepSeek-V3's MLA is fitted without it)
FP8_KV_TAIL_FROM = 64
FP8_KV_TAIL = {("h200_sxm", "vllm"): 36e-6, ("h200_sxm", "sglang"): 36e-6, ("h200_sxm", "trtllm"): 20e-6,
               ("h100_sxm", "vllm"): 16e-6}
# TensorRT-LLM's Hopper decode attention reads middling amounts of KV at about half of HBM (Qwen3-8B H200: 8 x 4,096
# tokens cost 3.44 ms of attention against 1.42 at batch 1 and 1.20 ms of KV at the 0.92 of long reads), while its
# longest reads reach 0.92: per (architecture, backend), each attention layer of a dense model's decode pass adds up
# to this many s, as a triangle in log2 of the KV bytes read per layer (0 at 16 MiB, full at 128 MiB, 0 again at
# 2 GiB), and the pass costs `pass` s, not the backend's (least squares over the Hopper TensorRT-LLM grid: Qwen3-8B
# H100 / H200, Qwen3-32B H100 TP4, Qwen3-32B-FP8 H200; decode b 1-64 x 1k-16k, prefill 512-16k; facts §76).
# Blackwell's kernels show no such dip (B200 mid batches are above the read already)
DECODE_DIP = {("hopper", "trtllm"): {"dip": 12e-6, "bytes": (1 << 24, 1 << 27, 1 << 31), "pass": 0.6e-3}}
# a dense model's terms at bf16 weights and KV, per (GPU, backend), where AISimulate's measured kernels differ from the
# backend's (facts §87, Qwen3-8B / Qwen3-32B at TP1, 2 and 4): H200 SGLang's decode GEMMs read Qwen3-32B's weights at
# ~0.78 of HBM (17.0 ms for 64 GB) and Qwen3-8B's at ~0.73, which a read at 0.78 plus 43 us of small kernels a layer
# fits; its decode attention reads KV at 0.94 of HBM with 3 us of each layer's read hidden, and each decode token adds
# 6 us (least squares over decode b 1-64 x 1k-8k)
GPU_DENSE_TERMS = {("h200_sxm", "sglang"): {"weight_efficiency": 0.78, "layer_overhead_s": 43e-6, "kv_efficiency": 0.94,
                                            "decode_kv_hidden_s": 3e-6, "decode_token_overhead_s": 6e-6}}
# and per (GPU, backend, TP degree): H200 SGLang's GEMM tables at TP1 and TP2 cost ~12 % more per row beyond ~3.5k rows
# of a pass than below (Qwen3-8B TP1: 18.2 us a token at 3,600, 21.7 from 4,096 to 16,384, so five 1,200-token prompts
# cost 138.6 ms where one rate gave 130.1; least squares over prefills of 1-8 x 1,200 and 512-16k tokens), its TP4
# tables not (a knee there makes 8k-16k prefills +9-12 %); its all-reduces move a prefill's hidden states at 0.61 (TP2)
# / 0.46 (TP4) of NVLink, not 0.48 / 0.41 (AIS's ar ops at 1,200-16,384 tokens), and cost 5 / 6.5 us a call at decode
# (AIS 2.5-5 us; 10 us made TP2 decodes +5-6 % and TP4's +4-7 %)
GPU_DENSE_TENSOR_TERMS = {
    ("h200_sxm", "sglang", 1): {"gemm_knee_tokens": 3584, "gemm_beyond_share": 1.12},
    ("h200_sxm", "sglang", 2): {"gemm_knee_tokens": 3584, "gemm_beyond_share": 1.12, "all_reduce_latency_s": 5e-6,
                                "all_reduce_efficiency": 0.61},
    ("h200_sxm", "sglang", 4): {"all_reduce_latency_s": 6.5e-6, "all_reduce_efficiency": 0.46},
}


def roofline_terms(backend: str, hardware: dict, low_precision: bool, low_precision_kv: bool, tensor: int = 1,
                   moe: bool = False) -> RooflineTerms:
    t = BACKEND_TERMS[backend]
    precision = "low" if low_precision else "high"
    weights = GPU_BACKEND_WEIGHT_EFFICIENCY.get((hardware.get("name"), backend),
                                                GPU_WEIGHT_EFFICIENCY.get(hardware.get("name"), WEIGHT_EFFICIENCY))
    tail = FP8_KV_TAIL.get((hardware.get("name"), backend), 0.0) if low_precision_kv and not moe else 0.0
    dip = {} if moe else DECODE_DIP.get((hardware.get("architecture"), backend), {})
    dense = {} if moe or low_precision or low_precision_kv else \
        {**GPU_DENSE_TERMS.get((hardware.get("name"), backend), {}),
         **GPU_DENSE_TENSOR_TERMS.get((hardware.get("name"), backend, tensor), {})}
    return replace(RooflineTerms(
        compute_efficiency=t["compute"][precision] * ARCHITECTURE_COMPUTE.get(hardware.get("architecture"), 1.0),
        attention_efficiency=t["attention"] * ARCHITECTURE_ATTENTION.get(hardware.get("architecture"), 1.0),
        weight_efficiency=weights * (t["low_weights"] if low_precision else 1.0),
        expert_efficiency=t["experts"],
        kv_efficiency=t["kv"]["low"] if low_precision_kv else GPU_KV_EFFICIENCY.get((hardware.get("name"), backend),
                                                                                    t["kv"]["high"]),
        pass_overhead_s=dip.get("pass", t["pass"]), layer_overhead_s=t["layer"], prefill_layer_overhead_s=t["prefill_layer"],
        decode_token_overhead_s=t["decode_token"], prefill_ramp_tokens=t["prefill_ramp"],
        moe_layer_overhead_s=t["moe_layer"], all_reduce_latency_s=t["all_reduce"] if moe else
        GPU_ALL_REDUCE_LATENCY.get((hardware.get("name"), tensor), t["all_reduce"]),
        all_reduce_efficiency=ALL_REDUCE_EFFICIENCY.get(tensor, ALL_REDUCE_OTHER),
        all_reduce=t["moe_all_reduce"] or not moe, all_to_all_efficiency=t["all_to_all"],
        decode_kv_hidden_s=t["kv_hidden"],
        gemm_tile_tokens=LOW_PRECISION_TILE[0] if low_precision and not moe else 0,
        gemm_tile_share=LOW_PRECISION_TILE[1] if low_precision and not moe else 0.0,
        decode_tail_from=FP8_KV_TAIL_FROM if tail else 0, decode_tail_s=tail,
        decode_dip_s=dip.get("dip", 0.0), decode_dip_bytes=dip.get("bytes", (0, 0, 0))), **dense)


def routed_params(model: dict) -> float:
    """Parameters of the routed experts (0 for a dense model): L x E x 3 x hidden x moe_intermediate."""
    experts, inter, hidden = model.get("num_experts"), model.get("moe_intermediate_size"), model.get("hidden_size")
    if not (experts and inter and hidden):
        return 0.0
    family = family_routed_params(model)
    return min(model["params"], family if family is not None else model["num_layers"] * experts * 3 * hidden * inter)


def active_params(model: dict) -> float:
    """Parameters one token passes through (all of them for a dense model)."""
    if model.get("active_params"):
        return model["active_params"]
    experts, per_token = model.get("num_experts"), model.get("experts_per_token")
    inter, hidden = model.get("moe_intermediate_size"), model.get("hidden_size")
    if experts and per_token and inter and hidden:
        return model["params"] - routed_params(model) * (1 - per_token / experts)
    return model["params"]


def peak_flops(hardware: dict, weight_dtype: str) -> float:
    table = hardware["tflops"]
    for key in TFLOPS_KEYS.get(weight_dtype, ("bf16",)):
        if key in table:
            return table[key] * 1e12
    raise ValueError(f"hardware has no tensor-core rate for {weight_dtype} weights")


def decode_weight_bytes(model: dict, tensor: int) -> float:
    """Weights a full forward reads per GPU: the input embedding is a row lookup, so leave it out."""
    untied_embedding = 0 if model.get("tie_word_embeddings") else model.get("vocab_size", 0) * model.get("hidden_size", 0)
    return weights_per_gpu(model, tensor, 1) - untied_embedding * 2 / tensor


def roofline_record(model: dict, hardware: dict, backend: str, tensor: int, kv_dtype_bytes: int,
                    expert_parallel: int = 1, expert_tensor: int = 1) -> RooflineTiming:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    dtype = model.get("weight_dtype", "bfloat16")
    layers, heads = model["num_layers"], model["num_attention_heads"]
    # the routed experts' share of the weights, as the active parameters imply it: active = P(1 - f) + P f k/E
    experts, per_token = model.get("num_experts", 0), model.get("experts_per_token", 0)
    routed = (1 - active_params(model) / model["params"]) / (1 - per_token / experts) if per_token else 0.0
    terms = roofline_terms(backend, hardware, dtype in LOW_PRECISION, kv_dtype_bytes < 2, tensor, bool(routed))
    return RooflineTiming(
        terms=family_terms(model, backend, terms, hardware.get("name"), bool(routed), expert_tensor > 1),
        moe_layers=family_moe_layers(model, layers) if routed else 0, experts=experts if routed else 0,
        experts_per_token=per_token if routed else 0, routed_weight_fraction=routed, expert_parallel=expert_parallel,
        expert_tensor=expert_tensor if routed else 1,
        ffn_width=0 if routed else model.get("intermediate_size", 0),
        tensor=tensor, num_layers=layers, attention_layers=model.get("kv_layers", layers), attention_heads=heads,
        head_dim=model.get("head_dim") or model["hidden_size"] // heads, hidden_size=model["hidden_size"],
        params=model["params"], active_params=active_params(model),
        gemm_params=active_params(model) - embedding_params(model), low_precision=dtype in LOW_PRECISION,
        peak_flops=peak_flops(hardware, dtype),
        attention_peak_flops=peak_flops(hardware, "bfloat16"), memory_bandwidth_gbps=hardware["memory_bandwidth_gbps"],
        nvlink_bandwidth_gbps=hardware.get("nvlink_bandwidth_gbps"),
        weight_bytes=decode_weight_bytes(model, tensor),
        kv_bytes_per_token=native_bytes_per_token(model, KV_DTYPE_BY_BYTES[kv_dtype_bytes], tensor))


def timing_record(role_plan: dict, model: dict, hardware: dict, backend: str, kv_dtype: str) -> Timing:
    """The record of `role_plan`'s (the plan's ``engine.workers.<role>``) step-time provider."""
    timing = role_plan.get("timing", {"type": "default"})
    kind = timing.get("type", "default")
    if kind == "fixed":
        return FixedTiming(ms_to_ns(timing["prefill_ms"]), ms_to_ns(timing["decode_ms"]))
    if kind == "polynomial":
        prefill, prefill_denominator = ms_coefficients_to_ns(timing["prefill"])
        decode, decode_denominator = ms_coefficients_to_ns(timing["decode"])
        return PolynomialTiming(prefill, prefill_denominator, decode, decode_denominator,
                                timing.get("prefill_variable", "tokens"), timing.get("decode_variable", "batch_size"))
    if kind == "default":
        parallelism = role_plan.get("parallelism", {})
        return roofline_record(model, hardware, backend, parallelism.get("tensor", 1), DTYPE_BYTES[kv_dtype],
                               parallelism.get("moe_expert") or 1, parallelism.get("moe_tensor") or 1)
    raise ValueError(f"unknown timing type {kind!r}")
